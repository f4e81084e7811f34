use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ClientConfig, IdleTimeout, TokioRuntime, TransportConfig, VarInt};
use tokio::sync::{mpsc, oneshot, watch, Mutex};

use crate::admission::{Admission, Limits};
use crate::congestion;
use crate::connection::{missing_key, QuicConnection};
use crate::errors::{coded, connection_error};
use crate::listener::{self, Accepted, RefusalEvent, REFUSAL_QUEUE};
use crate::raw_socket::{IcmpHints, RawDatagram, SplittingSocket, RAW_QUEUE};
use crate::unreachable::{Watchlist, DATAGRAM_WINDOW};
use crate::reset_key::endpoint_config;
use crate::session_cache;
use crate::stream_credit::StreamCredit;
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
    /// (quinn's own idle timer is set to the other two thirds: see `transport_config`.)
    pub idle_timeout_ms: Option<u32>,
    /// Per-stream and per-connection receive windows in bytes (defaults 4 MiB; 64 MiB dialed, 16 MiB accepted).
    pub stream_window: Option<u32>,
    pub connection_window: Option<u32>,
    /// Streams a peer may have open at once (default 1024), granted as it uses them (see stream_credit.rs).
    pub max_streams: Option<u32>,
    /// Congestion controller: "bbr" (default), "cubic" or "newreno" (see congestion.rs).
    pub congestion: Option<String>,
    /// Listener limits (core's ListenerLimits, resolved by JavaScript; defaults as there): connections held
    /// in all and per IP, new connections per IP per second (burst 5 s worth), and the handshake deadline.
    pub max_connections: Option<u32>,
    pub max_connections_per_ip: Option<u32>,
    pub new_connections_per_ip_per_second: Option<u32>,
    pub handshake_timeout_ms: Option<u32>,
    /// IPv6 peers are counted per network of this many leading bits (1–128; default 64).
    pub ipv6_prefix_length: Option<u32>,
    /// Test hook: offer and accept only agentlink/1, as an engine from before agentlink/2 (tls.rs) does.
    pub legacy_protocol: Option<bool>,
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
    /// The agent key (Ed25519, 32 bytes) of the peer it concerns, where known: an evicted connection that had
    /// proved its key.
    pub peer_key: Option<Buffer>,
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
    /// Streams a peer may hold open at once; each connection grants them as they are used (stream_credit.rs).
    max_streams: u32,
    /// Offers only agentlink/1 when dialling (EndpointOptions.legacy_protocol).
    legacy: bool,
    /// The connections ICMP port-unreachable hints are about (unreachable.rs).
    watchlist: Arc<Watchlist>,
}

const SOCKET_BUFFER: usize = 4 * 1024 * 1024;

/// Bytes one stream may have in flight towards us beyond what its reader took, by default. quinn's credit is an
/// offset (bytes read in order + this window), so under random loss the bytes that arrived behind each hole count
/// against it until the retransmission fills the hole, about a round trip later: one stream needs about two
/// bandwidth-delay products. At 100 Mbit/s and 80 ms (a BDP of 1 MB) at 1% loss, 2 MiB held one stream to
/// 68–71 Mbit/s, 3 MiB 85–86, 4 MiB 89–90, 6 and 8 MiB no more (lab, docs/benchmarks.md). quinn 0.11 fixes the
/// window per connection (no per-stream setter), and reading ahead into the engine cannot pass a hole either, so
/// this is a fixed size; the connection windows below stay the bound of what one connection holds.
const DEFAULT_STREAM_WINDOW: u32 = 4 * 1024 * 1024;

/// Bytes a connection may hold that its streams' readers have not taken, by default. Connection credit comes back
/// only as streams are read, so a caller whose consumers stall holds up to one stream window (4 MiB) per stalled
/// call: 16 MiB starved the other calls of a connection once 8 of its 2 MiB streams stalled (measured: a slow
/// reader's 9th stream never got its first item). Connections we dial therefore get 64 MiB (16 stalled calls of
/// 4 MiB). Connections peers open to us keep 16 MiB: there a stranger chooses what to send, and every stream is
/// read at once anyway (into the inbound budget), so a server does not starve its own calls back.
const DIALED_CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;
const ACCEPTED_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

fn transport_config(options: &EndpointOptions, default_connection_window: u32) -> Result<TransportConfig> {
    let idle = Duration::from_millis(options.idle_timeout_ms.unwrap_or(10_000).max(100) as u64);
    let keep_alive = idle / 3;
    // quinn restarts its idle timer at our first ack-eliciting packet after the peer's last one: at the latest
    // our next keep-alive, a third of `idle` after it. Its timer is therefore the remaining two thirds, so a
    // silent peer is declared gone `idle` after its last packet (with the whole of `idle` there, it took up
    // to 4/3 of it: 13.3 s measured for the 10 s default).
    let quinn_idle = idle - keep_alive;
    let mut config = TransportConfig::default();
    config
        .max_idle_timeout(Some(IdleTimeout::try_from(quinn_idle).map_err(|e| coded("INVALID_ARGUMENT", e))?))
        .keep_alive_interval(Some(keep_alive))
        .stream_receive_window(VarInt::from_u32(options.stream_window.unwrap_or(DEFAULT_STREAM_WINDOW)))
        .receive_window(VarInt::from_u32(options.connection_window.unwrap_or(default_connection_window)))
        .send_window(options.connection_window.unwrap_or(default_connection_window) as u64)
        // The first grant only: quinn allocates per stream granted, whether used or not (see stream_credit.rs).
        .max_concurrent_bidi_streams(VarInt::from_u32(StreamCredit::initial(max_streams(options))))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        // Peers' liveness probes (unreachable.rs) are DATAGRAM frames, which we never read: hold few of them.
        .datagram_receive_buffer_size(Some(DATAGRAM_WINDOW))
        .congestion_controller_factory(congestion::controller_factory(options.congestion.as_deref()).map_err(|e| coded("INVALID_ARGUMENT", e))?);
    Ok(config)
}

const DEFAULT_MAX_STREAMS: u32 = 1024;

fn max_streams(options: &EndpointOptions) -> u32 {
    options.max_streams.unwrap_or(DEFAULT_MAX_STREAMS)
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
        ipv6_prefix_length: options
            .ipv6_prefix_length
            .filter(|v| (1..=128).contains(v))
            .map(|v| v as u8)
            .unwrap_or(defaults.ipv6_prefix_length),
    }
}

/// Binds an endpoint. Async because the socket must be registered with the engine's runtime.
#[napi]
pub async fn bind_endpoint(options: EndpointOptions) -> Result<QuicEndpoint> {
    let credentials = Arc::new(Credentials {
        cert: options.cert.to_vec().into(),
        key: options.key.to_vec(),
    });
    let transport = Arc::new(transport_config(&options, DIALED_CONNECTION_WINDOW)?);
    let accepted_transport = Arc::new(transport_config(&options, ACCEPTED_CONNECTION_WINDOW)?);
    let ip: IpAddr = unbracket(&options.host)
        .parse()
        .map_err(|e| coded("INVALID_ARGUMENT", format!("bad bind address {}: {e}", options.host)))?;
    let port = u16::try_from(options.port).map_err(|_| coded("INVALID_ARGUMENT", format!("bad port {}", options.port)))?;
    let std_socket = bind_udp(SocketAddr::new(ip, port))?;
    let watchlist = Watchlist::new();
    let icmp = icmp_hints(&std_socket, &watchlist);
    let (raw_tx, raw_rx) = mpsc::channel(RAW_QUEUE);
    let runtime = Arc::new(TokioRuntime);
    let inner = quinn::Runtime::wrap_udp_socket(&*runtime, std_socket).map_err(|e| coded("UNAVAILABLE", e))?;
    let socket = Arc::new(SplittingSocket::new(inner, raw_tx, icmp));

    // The stateless-reset key comes from the agent's key, so a restart answers old connections with a reset.
    let endpoint_config = endpoint_config(&credentials.key).map_err(|e| coded("INVALID_ARGUMENT", e))?;
    let admission = Admission::new(limits(&options));
    let legacy = options.legacy_protocol.unwrap_or(false);
    let server_config = if options.accept {
        let mut config = listener::server_config(&credentials, accepted_transport, &admission).map_err(|e| coded("INVALID_ARGUMENT", e))?;
        if legacy {
            let mut tls = tls::server_config(&credentials).map_err(|e| coded("INVALID_ARGUMENT", e))?;
            tls.alpn_protocols = tls::protocols(true);
            config.crypto = Arc::new(QuicServerConfig::try_from(tls).map_err(|e| coded("INVALID_ARGUMENT", e))?);
        }
        Some(config)
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
        max_streams: max_streams(&options),
        legacy,
        watchlist,
    })
}

/// The socket's ICMP error queue, drained whenever an error is queued and on receive errors (Linux; elsewhere
/// none is enabled or read). Call within the engine's runtime, before the socket is handed to quinn.
#[cfg(target_os = "linux")]
pub(crate) fn icmp_hints(socket: &std::net::UdpSocket, watchlist: &Arc<Watchlist>) -> Option<IcmpHints> {
    let hints = watchlist.clone();
    let fd = std::os::fd::AsRawFd::as_raw_fd(socket);
    let gate = Arc::new(crate::icmp_gate::IcmpGate::new(fd, std::time::Instant::now()));
    let watching = crate::error_queue::watch(socket, gate.clone(), move |peer| hints.hint(peer)).ok()?;
    let queue = crate::error_queue::ErrorQueue::new(fd, gate);
    watchlist.set_hinted();
    Some(IcmpHints { queue, watchlist: watchlist.clone(), _watching: watching })
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn icmp_hints(_socket: &std::net::UdpSocket, _watchlist: &Arc<Watchlist>) -> Option<IcmpHints> {
    None
}

/// A UDP socket on `address`. On "::" it is dual-stack (IPv4 peers too, as IPv4-mapped addresses), on every OS.
fn bind_udp(address: SocketAddr) -> Result<std::net::UdpSocket> {
    let cannot_bind = |e: std::io::Error| coded("UNAVAILABLE", format!("cannot bind {address}: {e}"));
    let socket = socket2::Socket::new(socket2::Domain::for_address(address), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .map_err(cannot_bind)?;
    if address.is_ipv6() && address.ip().is_unspecified() {
        socket.set_only_v6(false).map_err(cannot_bind)?;
    }
    // Default UDP buffers (~200 KiB) overflow at a few hundred MB/s: the kernel drops datagrams and congestion
    // control backs off. Ask for more; the kernel caps it at net.core.{r,w}mem_max, which is fine.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    // ICMP errors about our datagrams, as hints that a peer's process is gone (unreachable.rs; Linux only).
    crate::error_queue::enable(&socket, address.is_ipv6());
    socket.bind(&address.into()).map_err(cannot_bind)?;
    Ok(socket.into())
}

/// "[::1]" → "::1": URLs bracket IPv6 literals, socket addresses do not.
fn unbracket(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// The address to send to for `host` (an IP literal, bracketed or not, or a name looked up without blocking
/// the runtime), in the form the local socket takes: an IPv4 socket reaches only IPv4 addresses; an IPv6 one
/// takes IPv4 addresses as IPv4-mapped (dual-stack).
pub(crate) async fn resolve(host: &str, port: u32, local: SocketAddr) -> Result<SocketAddr> {
    let port = u16::try_from(port).map_err(|_| coded("INVALID_ARGUMENT", format!("bad port {port}")))?;
    let bare = unbracket(host);
    let candidates: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| coded("UNAVAILABLE", format!("cannot resolve {host}: {e}")))?
            .collect(),
    };
    let reachable = |candidate: &SocketAddr| local.is_ipv6() || candidate.is_ipv4();
    let Some(address) = candidates.iter().copied().find(|c| c.is_ipv6() == local.is_ipv6()).or_else(|| candidates.iter().copied().find(reachable)) else {
        return Err(match candidates.first() {
            None => coded("UNAVAILABLE", format!("{host} has no address")),
            Some(_) => coded("UNAVAILABLE", format!("{host} has only IPv6 addresses and this endpoint's socket is IPv4 ({local}); listen on \"::\" to reach both")),
        });
    };
    Ok(match (local, address) {
        (SocketAddr::V6(_), SocketAddr::V4(v4)) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        _ => address,
    })
}

/// The handshake of a dial that JavaScript can abandon (see `Dial`).
#[allow(clippy::too_many_arguments)]
async fn handshake(
    endpoint: quinn::Endpoint,
    credentials: Arc<Credentials>,
    transport: Arc<TransportConfig>,
    max_streams: u32,
    host: String,
    port: u32,
    expected: [u8; 32],
    timeout_ms: u32,
    early_data: bool,
    legacy: bool,
) -> Result<QuicConnection> {
    let local = endpoint.local_addr().map_err(|e| coded("UNAVAILABLE", e))?;
    let address = resolve(&host, port, local).await?;
    // One config per peer key, reused: its ticket store holds only that peer's tickets (session_cache.rs).
    let crypto = session_cache::shared()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .config_for(&credentials, expected)
        .map_err(|e| coded("INVALID_ARGUMENT", e))?;
    let crypto = if legacy {
        let mut only_first = (*crypto).clone(); // shares the ticket store
        only_first.alpn_protocols = tls::protocols(true);
        Arc::new(only_first)
    } else {
        crypto
    };
    let mut config = ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).map_err(|e| coded("INVALID_ARGUMENT", e))?));
    config.transport_config(transport);
    let connecting = endpoint
        .connect_with(config, address, "agentlink")
        .map_err(|e| coded("UNAVAILABLE", format!("cannot dial {address}: {e}")))?;
    // With a ticket from this peer, the connection is usable at once (0-RTT); without one, into_0rtt gives the
    // handshake back. A resumed peer is bound to the pinned key by the ticket's secret (docs/security.md).
    let connecting = if early_data {
        match connecting.into_0rtt() {
            Ok((connection, done)) => return Ok(QuicConnection::before_handshake(connection, expected, max_streams, done, true)),
            Err(connecting) => connecting,
        }
    } else {
        connecting
    };
    let connection = match tokio::time::timeout(Duration::from_millis(timeout_ms as u64), connecting).await {
        Err(_) => return Err(coded("UNAVAILABLE", format!("no QUIC handshake with {address} within {timeout_ms} ms"))),
        Ok(Err(e)) => return Err(connection_error(&e)),
        Ok(Ok(connection)) => connection,
    };
    let key = tls::peer_key(&connection).ok_or_else(missing_key)?;
    Ok(QuicConnection::new(connection, key, max_streams))
}

/// A dial in progress. `cancel` drops its handshake (quinn closes it), and closes and releases a connection
/// that completed but was not taken, so an abandoned dial leaves nothing behind on either side.
#[napi]
pub struct Dial {
    result: std::sync::Mutex<Option<oneshot::Receiver<Result<QuicConnection>>>>,
    task: tokio::task::AbortHandle,
}

fn cancelled() -> Error {
    coded("CANCELLED", "dial cancelled")
}

#[napi]
impl Dial {
    /// The connection, once the handshake completed and the peer proved the expected key.
    #[napi]
    pub async fn connection(&self) -> Result<QuicConnection> {
        let receiver = self.result.lock().ok().and_then(|mut r| r.take()).ok_or_else(cancelled)?;
        receiver.await.unwrap_or_else(|_| Err(cancelled()))
    }

    /// Abandons the dial. A connection that completed anyway reaches `connection()` only if that was already
    /// waiting; JavaScript then closes and releases it.
    #[napi]
    pub fn cancel(&self) {
        self.task.abort();
        if let Some(mut receiver) = self.result.lock().ok().and_then(|mut r| r.take()) {
            if let Ok(Ok(connection)) = receiver.try_recv() {
                connection.close(0, "dial cancelled".into());
                connection.release();
            }
        }
    }
}

#[napi]
impl QuicEndpoint {
    #[napi(getter)]
    pub fn local_port(&self) -> Result<u32> {
        Ok(self.endpoint.local_addr().map_err(|e| coded("UNAVAILABLE", e))?.port() as u32)
    }

    /// Starts dialling `host:port` (an IP literal or a name); it succeeds only if the peer proves the Ed25519
    /// key `expected_key` (32 bytes). The dial can be cancelled (see `Dial`).
    #[napi]
    /// With `early_data` and a ticket from that peer (an earlier connection to it from this process), the
    /// connection comes back before its handshake ended, for replay-safe streams only (see `early_data`).
    pub fn dial(&self, host: String, port: u32, expected_key: Buffer, timeout_ms: u32, early_data: Option<bool>) -> Result<Dial> {
        let expected: [u8; 32] = expected_key.as_ref().try_into().map_err(|_| coded("INVALID_ARGUMENT", "expected key must be 32 bytes"))?;
        let (sender, receiver) = oneshot::channel();
        let watchlist = self.watchlist.clone();
        let work = handshake(self.endpoint.clone(), self.credentials.clone(), self.transport.clone(), self.max_streams, host, port, expected, timeout_ms, early_data.unwrap_or(false), self.legacy);
        let task = napi::bindgen_prelude::spawn(async move {
            // Nobody waiting any more (the dial was cancelled as it completed): the connection is dropped, which
            // closes it.
            let _ = sender.send(work.await.map(|c| c.watched(&watchlist)));
        });
        Ok(Dial { result: std::sync::Mutex::new(Some(receiver)), task: task.abort_handle() })
    }

    /// Resolves once every connection of this endpoint is closed and drained (tests: nothing was left open).
    #[napi]
    pub async fn idle(&self) {
        self.endpoint.wait_idle().await;
    }

    /// The next authenticated incoming connection, or null once the endpoint is closed.
    #[napi]
    pub async fn accept(&self) -> Option<QuicConnection> {
        let mut closed = self.closed.subscribe();
        let mut incoming = self.incoming.lock().await;
        tokio::select! {
            accepted = incoming.recv() => accepted.map(|a| match a.handshake {
                Some(done) => QuicConnection::before_handshake(a.connection, a.peer_key, self.max_streams, done, false).with_admission(a.admitted),
                None => QuicConnection::accepted(a.connection, a.peer_key, self.max_streams, a.admitted),
            }.watched(&self.watchlist)),
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
                peer_key: e.peer_key.map(|key| key.to_vec().into()),
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
                host: d.from.ip().to_canonical().to_string(),
                port: d.from.port() as u32,
                data: d.data.into(),
            }),
            _ = closed.wait_for(|c| *c) => None,
        }
    }

    /// Sends one datagram outside QUIC from this endpoint's socket (same public mapping as its QUIC traffic).
    #[napi]
    pub async fn send_raw(&self, host: String, port: u32, data: Buffer) -> Result<()> {
        let local = self.endpoint.local_addr().map_err(|e| coded("UNAVAILABLE", e))?;
        let destination = resolve(&host, port, local).await?;
        self.socket.send_raw(destination, &data).await.map_err(|e| coded("UNAVAILABLE", e))
    }

    /// Closes every connection with `code`/`reason`, stops accepting, and releases pending calls.
    #[napi]
    pub fn close(&self, code: u32, reason: String) {
        self.endpoint.close(VarInt::from_u32(code), reason.as_bytes());
        let _ = self.closed.send(true);
    }
}
