//! ICMP port unreachable as a hint (unreachable.rs), over real sockets on loopback. The peer sits behind a UDP
//! relay; "killing" it drops the relay's socket, so the kernel answers our datagrams to that port with ICMP
//! port unreachable, exactly as when a peer's process dies and its host lives.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ConnectionError, EndpointConfig, TokioRuntime, TransportConfig};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::raw_socket::SplittingSocket;
use crate::test_support::{certificate, key, ED25519};
use crate::tls::Credentials;
use crate::unreachable::{ConnectionSlot, PeerWatch, Verdicts, Watchlist, DATAGRAM_WINDOW, GONE_DETAIL, LOCALLY_CLOSED};

/// Only against a hang: every awaited event here comes long before it.
pub(crate) const GUARD: Duration = Duration::from_secs(20);

pub(crate) fn transport() -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    config.datagram_receive_buffer_size(Some(DATAGRAM_WINDOW));
    Arc::new(config)
}

pub(crate) struct Server {
    pub(crate) endpoint: quinn::Endpoint,
    pub(crate) key: [u8; 32],
}

pub(crate) fn server() -> Server {
    let key = key();
    let credentials = Credentials { cert: certificate(&key, ED25519), key: key.pkcs8.clone() };
    let tls = crate::tls::server_config(&credentials).unwrap();
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
    config.transport_config(transport());
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    Server { endpoint, key: key.public }
}

/// A relay on its own port: what arrives from the client goes to `to`, and what comes back goes to the client.
/// Aborting it closes its socket: that port is then closed, as a dead peer's is.
pub(crate) async fn relay(to: SocketAddr) -> (SocketAddr, JoinHandle<()>) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut client = None;
        let mut buffer = vec![0; 65536];
        loop {
            let Ok((length, from)) = socket.recv_from(&mut buffer).await else { continue };
            let destination = if from == to {
                client
            } else {
                client = Some(from);
                Some(to)
            };
            if let Some(destination) = destination {
                let _ = socket.send_to(&buffer[..length], destination).await;
            }
        }
    });
    (address, task)
}

/// A client endpoint as bind_endpoint makes one: the ICMP error queue on, hints going to `watchlist`.
pub(crate) fn client(watchlist: &Arc<Watchlist>) -> quinn::Endpoint {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP)).unwrap();
    crate::error_queue::enable(&socket, false);
    socket.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    let socket: std::net::UdpSocket = socket.into();
    let hints = crate::endpoint::icmp_hints(&socket, watchlist);
    let runtime = Arc::new(TokioRuntime);
    let inner = quinn::Runtime::wrap_udp_socket(&*runtime, socket).unwrap();
    let (raw, _) = mpsc::channel(1);
    let socket = Arc::new(SplittingSocket::new(inner, raw, hints));
    quinn::Endpoint::new_with_abstract_socket(EndpointConfig::default(), None, socket, runtime).unwrap()
}

pub(crate) struct Dialled {
    pub(crate) connection: quinn::Connection,
    /// What a QuicConnection holds; the watchlist holds it weakly.
    _slot: Arc<ConnectionSlot>,
    pub(crate) watch: Arc<PeerWatch>,
}

pub(crate) async fn dial(endpoint: &quinn::Endpoint, to: SocketAddr, server_key: [u8; 32], watchlist: &Watchlist) -> Dialled {
    let key = key();
    let credentials = Credentials { cert: certificate(&key, ED25519), key: key.pkcs8.clone() };
    let tls = crate::tls::client_config(&credentials, server_key).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    config.transport_config(transport());
    let connecting = endpoint.connect_with(config, to, "agentlink").unwrap();
    let connection = tokio::time::timeout(GUARD, connecting).await.expect("the handshake to end").unwrap();
    let slot = Arc::new(Mutex::new(Some(connection.clone())));
    let watch = Arc::new(PeerWatch::default());
    watchlist.register(connection.remote_address(), Arc::downgrade(&slot), watch.clone());
    Dialled { connection, _slot: slot, watch }
}

pub(crate) async fn verdicts_until(receiver: &mut watch::Receiver<Verdicts>, done: impl Fn(&Verdicts) -> bool) -> Verdicts {
    *tokio::time::timeout(GUARD, receiver.wait_for(|v| done(v))).await.expect("a verdict").unwrap()
}

pub(crate) async fn accepted(server: &Server) -> quinn::Connection {
    let incoming = tokio::time::timeout(GUARD, server.endpoint.accept()).await.unwrap().unwrap();
    incoming.await.unwrap()
}

#[tokio::test]
async fn a_forged_hint_for_a_live_peer_costs_one_probe_and_keeps_the_connection() {
    let server = server();
    let watchlist = Watchlist::new();
    let endpoint = client(&watchlist);
    let (through, _relay) = relay(server.endpoint.local_addr().unwrap()).await;
    let (dialled, theirs) = tokio::join!(dial(&endpoint, through, server.key, &watchlist), accepted(&server));
    let mut verdicts = watchlist.verdicts();

    // A burst of forged ICMP, all at once: one judgement, one probe.
    for _ in 0..1000 {
        watchlist.hint(through);
    }
    let verdict = verdicts_until(&mut verdicts, |v| v.cleared + v.gone > 0).await;

    assert_eq!(verdict, Verdicts { probes: 1, cleared: 1, gone: 0 });
    assert!(dialled.connection.close_reason().is_none());
    assert!(!dialled.watch.is_gone());
    // The probe reached the peer (a 1-byte DATAGRAM), and the connection still carries a stream both ways.
    let probe = tokio::time::timeout(GUARD, theirs.read_datagram()).await.unwrap().unwrap();
    assert_eq!(&probe[..], &[0]);
    let (mut send, mut recv) = dialled.connection.open_bi().await.unwrap();
    send.write_all(b"ping").await.unwrap();
    send.finish().unwrap();
    let (mut their_send, mut their_recv) = tokio::time::timeout(GUARD, theirs.accept_bi()).await.unwrap().unwrap();
    assert_eq!(their_recv.read_to_end(16).await.unwrap(), b"ping");
    their_send.write_all(b"pong").await.unwrap();
    their_send.finish().unwrap();
    assert_eq!(recv.read_to_end(16).await.unwrap(), b"pong");
}

// The error queue is read on Linux only (error_queue.rs); elsewhere a dead peer waits for the idle timeout.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_dead_peers_port_unreachable_closes_its_connection_as_gone_and_the_endpoint_lives_on() {
    let server = server();
    let watchlist = Watchlist::new();
    let endpoint = client(&watchlist);
    let (through, relay) = relay(server.endpoint.local_addr().unwrap()).await;
    let (dialled, _theirs) = tokio::join!(dial(&endpoint, through, server.key, &watchlist), accepted(&server));
    let mut verdicts = watchlist.verdicts();

    relay.abort();
    let _ = relay.await;
    // Anything we send now draws an ICMP port unreachable from our own kernel.
    let (mut send, _recv) = dialled.connection.open_bi().await.unwrap();
    send.write_all(b"are you there").await.unwrap();
    let verdict = verdicts_until(&mut verdicts, |v| v.gone > 0).await;

    assert_eq!(verdict.gone, 1);
    assert_eq!(verdict.cleared, 0);
    assert!(dialled.watch.is_gone());
    let reason = tokio::time::timeout(GUARD, dialled.connection.closed()).await.unwrap();
    assert!(matches!(reason, ConnectionError::LocallyClosed));
    // What the connection's streams and JavaScript see: UNAVAILABLE, saying why.
    // (errors.rs gives a local close as LOCALLY_CLOSED; napi errors cannot be made outside Node.)
    assert_eq!(dialled.watch.translate_reason(LOCALLY_CLOSED.into()), format!("UNAVAILABLE|{GONE_DETAIL}"));
    assert_eq!(dialled.watch.translate_reason("RESET|5".into()), "RESET|5");
    // The receive errors the ICMP caused did not end the endpoint: it still dials.
    let (again, _) = tokio::join!(dial(&endpoint, server.endpoint.local_addr().unwrap(), server.key, &watchlist), accepted(&server));
    assert!(again.connection.close_reason().is_none());
}

#[tokio::test]
async fn hints_for_unknown_peers_and_released_connections_keep_no_state() {
    let watchlist = Watchlist::new();
    for port in 1..=10_000u16 {
        watchlist.hint(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    assert_eq!(watchlist.len(), 0);

    // Connections released (or collected) are swept as others register: the list does not grow with them.
    for port in 1..=10_000u16 {
        watchlist.register(SocketAddr::from(([127, 0, 0, 1], port)), Weak::new(), Arc::new(PeerWatch::default()));
    }
    assert!(watchlist.len() <= 64 + 1, "{} entries kept", watchlist.len());
    // A hint for a released connection's peer drops its entry, and starts nothing.
    let peer = SocketAddr::from(([127, 0, 0, 1], 10_000));
    watchlist.hint(peer);
    assert_eq!(*watchlist.verdicts().borrow(), Verdicts::default());
}



/// Forged ICMP cost our sends a datagram each (Linux fails the next send once per queued error): past its rate the
/// endpoint stops asking for them (icmp_gate.rs). Real errors from a closed port on loopback (not rate-limited
/// there) stand in for a flood.
#[tokio::test]
async fn a_flood_of_icmp_errors_turns_the_hint_off() {
    use std::os::fd::AsRawFd;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP)).unwrap();
    crate::error_queue::enable(&socket, false);
    socket.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    let socket: std::net::UdpSocket = socket.into();
    let watchlist = Watchlist::new();
    let _hints = crate::endpoint::icmp_hints(&socket, &watchlist).expect("the error queue watched");
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap(); // dropped: its port is closed
    let before = crate::icmp_gate::times_closed();
    let recverr = || {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        unsafe { libc::getsockopt(socket.as_raw_fd(), libc::IPPROTO_IP, libc::IP_RECVERR, &mut value as *mut _ as *mut libc::c_void, &mut len) };
        value
    };
    assert_eq!(recverr(), 1);
    let flood = async {
        while crate::icmp_gate::times_closed() == before {
            for _ in 0..64 {
                let _ = socket.send_to(b"x", closed); // some fail once, for an error not read yet: that is the point
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(GUARD, flood).await.expect("the gate to close within the guard");
    assert_eq!(recverr(), 0, "no more ICMP errors asked for");
    // Errors queued before it closed may still wait (the draining task reads 64 at a time): read them here.
    let leftover = crate::error_queue::ErrorQueue::new(socket.as_raw_fd(), Arc::new(crate::icmp_gate::IcmpGate::new(socket.as_raw_fd(), std::time::Instant::now())));
    while leftover.drain(|_| {}) > 0 {}
    // None is queued any more, so a send no longer fails for one.
    for _ in 0..100 {
        socket.send_to(b"x", closed).expect("sends succeed while the hint is off");
    }
}
