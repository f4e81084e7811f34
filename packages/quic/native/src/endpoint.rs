use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ClientConfig, EndpointConfig, IdleTimeout, TokioRuntime, TransportConfig, VarInt};
use tokio::sync::{mpsc, watch, Mutex};

use crate::admission::{Admission, Limits};
use crate::connection::{missing_key, QuicConnection};
use crate::errors::{coded, connection_error};
use crate::listener::{self, Accepted, RefusalEvent, REFUSAL_QUEUE};
use crate::raw_socket::{RawDatagram, SplittingSocket, RAW_QUEUE};
use crate::tls::{self, Credentials};

#[napi(object)]
pub struct EndpointOptions {
    /// Address to bind, e.g. "127.0.0.1", "0.0.0.0" or "::".
    pub host: String,
    /// Port to bind (0 = any free port).
    pub port: u32,
    /// The agent's self-signed certificate (DER) and its Ed25519 key (PKCS#8 DER).
    pub cert: Buffer,
    pub key: Buffer,
    /// Accept incoming connections (a listener) or only dial.
    pub accept: bool,
    /// A peer silent this long is gone (default 10 s). Keep-alives every third of it keep a quiet one open.
    pub idle_timeout_ms: Option<u32>,
    /// Per-stream and per-connection receive windows in bytes (defaults 2 MiB and 16 MiB).
    pub stream_window: Option<u32>,
    pub connection_window: Option<u32>,
    /// Streams a peer may have open at once (default 1024).
    pub max_streams: Option<u32>,
    /// Listener limits (core's ListenerLimits, resolved by JavaScript; defaults as there): connections held
    /// in all and per IP, new connections per IP per second (burst 5 s worth), and the handshake deadline.
    pub max_connections: Option<u32>,
    pub max_connections_per_ip: Option<u32>,
    pub new_connections_per_ip_per_second: Option<u32>,
    pub handshake_timeout_ms: Option<u32>,
}

/// A peer turned away before it became a connection in JavaScript (see listener.rs).
#[napi(object)]
pub struct RefusalJs {
    /// "connection" (listener limits, before any TLS work) or "handshake".
    pub stage: String,
    /// e.g. max-connections, max-connections-per-ip, ip-rate, handshake-timeout, no-certificate, wrong-key.
    pub reason: String,
    pub remote_address: String,
    pub detail: String,
}

#[napi(object)]
pub struct RawDatagramJs {
    pub host: String,
    pub port: u32,
    pub data: Buffer,
}

/// One UDP socket that dials and accepts QUIC, plus a side channel for raw datagrams (STUN).
#[napi]
pub struct QuicEndpoint {
    endpoint: quinn::Endpoint,
    socket: Arc<SplittingSocket>,
    credentials: Arc<Credentials>,
    transport: Arc<TransportConfig>,
    incoming: Mutex<mpsc::Receiver<Accepted>>,
    refusals: Mutex<mpsc::Receiver<RefusalEvent>>,
    raw: Mutex<mpsc::Receiver<RawDatagram>>,
    closed: watch::Sender<bool>,
}

const SOCKET_BUFFER: usize = 4 * 1024 * 1024;

fn transport_config(options: &EndpointOptions) -> Result<TransportConfig> {
    let idle = Duration::from_millis(options.idle_timeout_ms.unwrap_or(10_000).max(100) as u64);
    let mut config = TransportConfig::default();
    config
        .max_idle_timeout(Some(IdleTimeout::try_from(idle).map_err(|e| coded("INVALID_ARGUMENT", e))?))
        .keep_alive_interval(Some(idle / 3))
        .stream_receive_window(VarInt::from_u32(options.stream_window.unwrap_or(2 * 1024 * 1024)))
        .receive_window(VarInt::from_u32(options.connection_window.unwrap_or(16 * 1024 * 1024)))
        .send_window(options.connection_window.unwrap_or(16 * 1024 * 1024) as u64)
        .max_concurrent_bidi_streams(VarInt::from_u32(options.max_streams.unwrap_or(1024)))
        .max_concurrent_uni_streams(VarInt::from_u32(0));
    Ok(config)
}

fn limits(options: &EndpointOptions) -> Limits {
    let defaults = Limits::default();
    let positive = |value: Option<u32>, default: u32| value.filter(|v| *v > 0).unwrap_or(default);
    Limits {
        max_connections: positive(options.max_connections, defaults.max_connections),
        max_connections_per_ip: positive(options.max_connections_per_ip, defaults.max_connections_per_ip),
        new_connections_per_ip_per_second: positive(options.new_connections_per_ip_per_second, defaults.new_connections_per_ip_per_second),
        handshake_timeout: options
            .handshake_timeout_ms
            .filter(|v| *v > 0)
            .map(|ms| Duration::from_millis(ms as u64))
            .unwrap_or(defaults.handshake_timeout),
    }
}

/// Binds an endpoint. Async because the socket must be registered with the engine's runtime.
#[napi]
pub async fn bind_endpoint(options: EndpointOptions) -> Result<QuicEndpoint> {
    let credentials = Arc::new(Credentials {
        cert: options.cert.to_vec().into(),
        key: options.key.to_vec(),
    });
    let transport = Arc::new(transport_config(&options)?);
    let address: SocketAddr = format!("{}:{}", bracket(&options.host), options.port)
        .parse()
        .map_err(|e| coded("INVALID_ARGUMENT", format!("bad bind address {}: {e}", options.host)))?;
    let std_socket = std::net::UdpSocket::bind(address).map_err(|e| coded("UNAVAILABLE", format!("cannot bind {address}: {e}")))?;
    // Default UDP buffers (~200 KiB) overflow at a few hundred MB/s: the kernel drops datagrams and congestion
    // control backs off. Ask for more; the kernel caps it at net.core.{r,w}mem_max, which is fine.
    let sock = socket2::SockRef::from(&std_socket);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    let (raw_tx, raw_rx) = mpsc::channel(RAW_QUEUE);
    let runtime = Arc::new(TokioRuntime);
    let inner = quinn::Runtime::wrap_udp_socket(&*runtime, std_socket).map_err(|e| coded("UNAVAILABLE", e))?;
    let socket = Arc::new(SplittingSocket::new(inner, raw_tx));

    // Peers must not grease the QUIC bit: a packet with top bits 00 is then never QUIC, so STUN can share the port.
    let mut endpoint_config = EndpointConfig::default();
    endpoint_config.grease_quic_bit(false);
    let admission = Admission::new(limits(&options));
    let server_config = if options.accept {
        Some(listener::server_config(&credentials, transport.clone(), &admission).map_err(|e| coded("INVALID_ARGUMENT", e))?)
    } else {
        None
    };
    let endpoint = quinn::Endpoint::new_with_abstract_socket(endpoint_config, server_config, socket.clone(), runtime)
        .map_err(|e| coded("UNAVAILABLE", e))?;

    let (incoming_tx, incoming_rx) = mpsc::channel(64);
    let (refusals_tx, refusals_rx) = mpsc::channel(REFUSAL_QUEUE);
    if options.accept {
        tokio::spawn(listener::accept_loop(endpoint.clone(), admission, incoming_tx, refusals_tx));
    }
    Ok(QuicEndpoint {
        endpoint,
        socket,
        credentials,
        transport,
        incoming: Mutex::new(incoming_rx),
        refusals: Mutex::new(refusals_rx),
        raw: Mutex::new(raw_rx),
        closed: watch::channel(false).0,
    })
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() }
}

fn resolve(host: &str, port: u32) -> Result<SocketAddr> {
    (bracket(host).as_str(), port as u16)
        .to_socket_addrs()
        .map_err(|e| coded("UNAVAILABLE", format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| coded("UNAVAILABLE", format!("{host} has no address")))
}

#[napi]
impl QuicEndpoint {
    #[napi(getter)]
    pub fn local_port(&self) -> Result<u32> {
        Ok(self.endpoint.local_addr().map_err(|e| coded("UNAVAILABLE", e))?.port() as u32)
    }

    /// Dials `host:port` and succeeds only if the peer proves the Ed25519 key `expected_key` (32 bytes).
    #[napi]
    pub async fn connect(&self, host: String, port: u32, expected_key: Buffer, timeout_ms: u32) -> Result<QuicConnection> {
        let expected: [u8; 32] = expected_key.as_ref().try_into().map_err(|_| coded("INVALID_ARGUMENT", "expected key must be 32 bytes"))?;
        let address = resolve(&host, port)?;
        let crypto = tls::client_config(&self.credentials, expected).map_err(|e| coded("INVALID_ARGUMENT", e))?;
        let mut config = ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).map_err(|e| coded("INVALID_ARGUMENT", e))?));
        config.transport_config(self.transport.clone());
        let connecting = self
            .endpoint
            .connect_with(config, address, "agentlink")
            .map_err(|e| coded("UNAVAILABLE", format!("cannot dial {address}: {e}")))?;
        let connection = match tokio::time::timeout(Duration::from_millis(timeout_ms as u64), connecting).await {
            Err(_) => return Err(coded("UNAVAILABLE", format!("no QUIC handshake with {address} within {timeout_ms} ms"))),
            Ok(Err(e)) => return Err(connection_error(&e)),
            Ok(Ok(connection)) => connection,
        };
        let key = tls::peer_key(&connection).ok_or_else(missing_key)?;
        Ok(QuicConnection::new(connection, key))
    }

    /// The next authenticated incoming connection, or null once the endpoint is closed.
    #[napi]
    pub async fn accept(&self) -> Option<QuicConnection> {
        let mut closed = self.closed.subscribe();
        let mut incoming = self.incoming.lock().await;
        tokio::select! {
            accepted = incoming.recv() => accepted.map(|a| QuicConnection::accepted(a.connection, a.peer_key, a.admitted)),
            _ = closed.wait_for(|c| *c) => None,
        }
    }

    /// The next peer refused before it became a connection (listener limits, failed handshakes), or null once
    /// the endpoint is closed.
    #[napi]
    pub async fn next_refusal(&self) -> Option<RefusalJs> {
        let mut closed = self.closed.subscribe();
        let mut refusals = self.refusals.lock().await;
        tokio::select! {
            event = refusals.recv() => event.map(|e| RefusalJs {
                stage: e.stage.into(),
                reason: e.reason.into(),
                remote_address: e.remote.to_string(),
                detail: e.detail,
            }),
            _ = closed.wait_for(|c| *c) => None,
        }
    }

    /// The next raw (STUN) datagram that arrived on this socket, or null once the endpoint is closed.
    #[napi]
    pub async fn recv_raw(&self) -> Option<RawDatagramJs> {
        let mut closed = self.closed.subscribe();
        let mut raw = self.raw.lock().await;
        tokio::select! {
            datagram = raw.recv() => datagram.map(|d| RawDatagramJs {
                host: d.from.ip().to_string(),
                port: d.from.port() as u32,
                data: d.data.into(),
            }),
            _ = closed.wait_for(|c| *c) => None,
        }
    }

    /// Sends one datagram outside QUIC from this endpoint's socket (same public mapping as its QUIC traffic).
    #[napi]
    pub async fn send_raw(&self, host: String, port: u32, data: Buffer) -> Result<()> {
        let destination = resolve(&host, port)?;
        self.socket.send_raw(destination, &data).await.map_err(|e| coded("UNAVAILABLE", e))
    }

    /// Closes every connection with `code`/`reason`, stops accepting, and releases pending calls.
    #[napi]
    pub fn close(&self, code: u32, reason: String) {
        self.endpoint.close(VarInt::from_u32(code), reason.as_bytes());
        let _ = self.closed.send(true);
    }
}
