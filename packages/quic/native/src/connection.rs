use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use quinn::{Connection, RecvStream, SendStream, VarInt, ZeroRttAccepted};
use tokio::sync::watch;

use crate::admission::Admitted;
use crate::errors::{coded, connection_error};
use crate::live::{Live, CONNECTIONS};
use crate::reads::{Accepting, Armed, ReadEvent, ReadPump, ReadsReady};
use crate::stream::QuicStream;
use crate::stream_credit::StreamCredit;
use crate::unreachable::{ConnectionSlot, PeerWatch, Watchlist};

/// Streams handed over by one `accept_streams` call at most: JavaScript starts that many calls in one turn.
const ACCEPT_BATCH: usize = 64;

#[napi(object)]
pub struct ConnectionStats {
    pub rtt_ms: f64,
    pub sent_bytes: f64,
    pub received_bytes: f64,
    pub lost_packets: f64,
    pub congestion_window: f64,
    pub sent_datagrams: f64,
    pub send_calls: f64,
    pub path_mtu: f64,
    /// Last writes the engine holds now (taken whole by `tryWriteFinish`, waiting to be written and finished).
    pub held_writes: f64,
    /// Held last writes that did not go (the peer stopped the stream, the connection was lost); not reported to
    /// their writers, as ws and HTTP/2 do not report a write lost after the kernel or session took it.
    pub held_write_failures: f64,
    /// Probes sent to a silent peer while a read waited on it (quiet.rs).
    pub quiet_probes: f64,
}

/// An established, mutually authenticated QUIC connection to one agent.
#[napi]
pub struct QuicConnection {
    /// Taken out by `release`, so a closed connection's state is freed now rather than when JS collects this.
    /// Shared (weakly) with the endpoint's watchlist of connections by peer address (unreachable.rs).
    connection: std::sync::Arc<ConnectionSlot>,
    /// Suspicion of a dead peer (ICMP port unreachable hints); once it is judged gone, errors say so.
    watch: std::sync::Arc<PeerWatch>,
    remote_address: String,
    stable_id: f64,
    peer_key: [u8; 32],
    live: std::sync::Mutex<Option<Live>>,
    /// An accepted connection's place in the listener limits, given back on `release` (or when collected).
    admitted: std::sync::Mutex<Option<Admitted>>,
    /// Streams the peer may open, granted as it uses them (see stream_credit.rs).
    credit: std::sync::Arc<StreamCredit>,
    /// Set when the connection was handed over before its handshake ended (0-RTT dial, or a listener's resumed
    /// connection at 0.5-RTT): None while pending, then whether the peer accepted our early data (see early_data.rs).
    handshake: Option<watch::Receiver<Option<bool>>>,
    /// Push reads (reads.rs), once JavaScript started them; streams made after that arm reads through it.
    reads: std::sync::OnceLock<ReadPump>,
    /// Probe a silent peer while a read waits on it, this often (quiet.rs): set where ICMP hints are read.
    quiet_probes: Option<std::time::Duration>,
}

impl QuicConnection {
    /// `max_streams`: the most streams the peer may hold open at once (the endpoint's limit).
    pub fn new(connection: Connection, peer_key: [u8; 32], max_streams: u32) -> Self {
        let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(connection.clone())));
        Self {
            watch: std::sync::Arc::new(PeerWatch::of(&slot)),
            // An IPv4 peer of a dual-stack socket shows as its IPv4 address, not as ::ffff:a.b.c.d.
            remote_address: {
                let remote = connection.remote_address();
                std::net::SocketAddr::new(remote.ip().to_canonical(), remote.port()).to_string()
            },
            stable_id: connection.stable_id() as f64,
            connection: slot,
            quiet_probes: None,
            peer_key,
            live: std::sync::Mutex::new(Some(Live::new(&CONNECTIONS))),
            admitted: std::sync::Mutex::new(None),
            credit: StreamCredit::new(max_streams),
            handshake: None,
            reads: std::sync::OnceLock::new(),
        }
    }

    /// A connection whose handshake is still running: `done` tells when it ends (see early_data.rs).
    pub fn before_handshake(connection: Connection, peer_key: [u8; 32], max_streams: u32, done: ZeroRttAccepted, dialled: bool) -> Self {
        let handshake = crate::early_data::watch_handshake(done, &connection, dialled);
        let mut this = Self::new(connection, peer_key, max_streams);
        this.handshake = Some(handshake);
        this
    }

    /// Holds the connection's place in the listener limits, and tells it when the connection is busy or idle.
    pub fn with_admission(self, admitted: Admitted) -> Self {
        self.credit.watch(admitted.activity());
        *self.admitted.lock().unwrap_or_else(|e| e.into_inner()) = Some(admitted);
        self
    }

    pub fn accepted(connection: Connection, peer_key: [u8; 32], max_streams: u32, admitted: Admitted) -> Self {
        Self::new(connection, peer_key, max_streams).with_admission(admitted)
    }

    /// Lists the connection under its peer's address, so ICMP port unreachable hints for it reach it.
    /// Where the endpoint reads ICMP errors (Linux), a silent peer is probed while a read waits on it (quiet.rs).
    pub fn watched(mut self, watchlist: &Watchlist) -> Self {
        if let Ok(connection) = self.get() {
            watchlist.register(connection.remote_address(), std::sync::Arc::downgrade(&self.connection), self.watch.clone());
        }
        if watchlist.hinted() {
            self.quiet_probes = crate::quiet::interval();
        }
        self
    }

    /// Counts a stream the peer opened against its grant (see stream_credit.rs), granting more when due.
    fn take_accepted(&self, connection: &Connection, send: SendStream, recv: RecvStream) -> QuicStream {
        let (slot, grant) = self.credit.opened();
        if let Some(limit) = grant {
            connection.set_max_concurrent_bi_streams(VarInt::from_u32(limit));
        }
        QuicStream::accepted(send, recv, slot, self.arming(), self.watch.clone())
    }

    fn arming(&self) -> Option<tokio::sync::mpsc::UnboundedSender<Armed>> {
        self.reads.get().map(ReadPump::arming)
    }

    fn get(&self) -> Result<Connection> {
        self.connection
            .lock()
            .ok()
            .and_then(|c| c.clone())
            .ok_or_else(|| coded("CLOSED", "connection released"))
    }
}

#[napi]
impl QuicConnection {
    /// The peer's Ed25519 public key, proven in the handshake.
    #[napi(getter)]
    pub fn peer_key(&self) -> Buffer {
        self.peer_key.to_vec().into()
    }

    #[napi(getter)]
    pub fn remote_address(&self) -> String {
        self.remote_address.clone()
    }

    #[napi(getter)]
    pub fn stable_id(&self) -> f64 {
        self.stable_id
    }

    /// The application protocol the handshake chose ("agentlink/2", "agentlink/1"), or null while the peer's
    /// choice is not known yet (a dialler's 0-RTT) or once the connection is released (see tls::protocol).
    #[napi(getter)]
    pub fn protocol(&self) -> Option<String> {
        let connection = self.get().ok()?;
        crate::tls::protocol(&connection).map(|p| String::from_utf8_lossy(&p).into_owned())
    }

    /// Opens a stream at once when the peer's stream limit allows (no thread hop); null otherwise (then `open_stream`).
    #[napi]
    pub fn try_open_stream(&self) -> Result<Option<QuicStream>> {
        match self.get()?.open_bi().now_or_never() {
            Some(Ok((send, recv))) => Ok(Some(QuicStream::accepted(send, recv, self.credit.opened_by_us(), self.arming(), self.watch.clone()).opened_by_us())),
            Some(Err(e)) => Err(self.watch.translate(connection_error(&e))),
            None => Ok(None),
        }
    }

    #[napi]
    pub async fn open_stream(&self) -> Result<QuicStream> {
        let (send, recv) = self.get()?.open_bi().await.map_err(|e| self.watch.translate(connection_error(&e)))?;
        Ok(QuicStream::accepted(send, recv, self.credit.opened_by_us(), self.arming(), self.watch.clone()).opened_by_us())
    }

    /// The next stream the peer opened, or null once the connection is closed (see `closed`).
    #[napi]
    pub async fn accept_stream(&self) -> Option<QuicStream> {
        let connection = self.get().ok()?;
        let (send, recv) = connection.accept_bi().await.ok()?;
        Some(self.take_accepted(&connection, send, recv))
    }

    /// The streams the peer opened: waits for one, then takes every other one already opened (up to
    /// `ACCEPT_BATCH`) without waiting, so a burst of calls costs one crossing into JavaScript rather than one
    /// per stream (each async call is a task, a promise and a wake of the event loop). Empty once the
    /// connection is closed (see `closed`).
    #[napi]
    pub async fn accept_streams(&self) -> Vec<QuicStream> {
        let Ok(connection) = self.get() else { return Vec::new() };
        let Ok((send, recv)) = connection.accept_bi().await else { return Vec::new() };
        let mut streams = vec![self.take_accepted(&connection, send, recv)];
        while streams.len() < ACCEPT_BATCH {
            match connection.accept_bi().now_or_never() {
                Some(Ok((send, recv))) => streams.push(self.take_accepted(&connection, send, recv)),
                // Closed: the next call reports it (empty); this batch is still handed over.
                _ => break,
            }
        }
        streams
    }

    /// Starts push reads: streams made from now on can `arm_read`, and `on_ready` is called (with nothing) whenever
    /// finished reads wait in `take_reads` — once per batch, not per read. With `accept`, the streams the peer
    /// opens come the same way (events with `stream`), and `accept_streams` must not be used. Once per connection
    /// (later calls do nothing); false when the connection is already released.
    #[napi]
    pub fn start_reads(&self, on_ready: ReadsReady, accept: Option<bool>) -> bool {
        let Ok(connection) = self.get() else { return false };
        let accepting = accept.unwrap_or(false).then(|| Accepting { credit: self.credit.clone() });
        let _ = self.reads.get_or_init(|| {
            // Started by the first read of ours that waits (quiet.rs), not here: a connection we never wait on keeps
            // no task. Weak, so the start kept in the watch holds neither the connection nor the watch itself; once
            // running it holds the connection until it is closed, as the read task does.
            if let Some(interval) = self.quiet_probes {
                let (slot, watch) = (std::sync::Arc::downgrade(&self.connection), std::sync::Arc::downgrade(&self.watch));
                self.watch.quiet.start_on_first_wait(move || {
                    let (Some(slot), Some(watch)) = (slot.upgrade(), watch.upgrade()) else { return };
                    let Some(connection) = slot.lock().ok().and_then(|c| c.clone()) else { return };
                    napi::bindgen_prelude::spawn(crate::quiet::watch_quiet_peer(connection, watch, interval));
                });
            }
            ReadPump::start(connection, on_ready, accepting, self.watch.clone())
        });
        true
    }

    /// Every read finished since the last call, in the order they finished (see `start_reads`).
    #[napi]
    pub fn take_reads(&self) -> Vec<ReadEvent> {
        self.reads.get().map(ReadPump::take).unwrap_or_default()
    }

    /// Closes with an application code and reason; every stream fails at once.
    #[napi]
    pub fn close(&self, code: u32, reason: String) {
        if let Ok(connection) = self.get() {
            connection.close(VarInt::from_u32(code), reason.as_bytes());
        }
    }

    /// Drops this handle's hold on the connection (call after `closed` resolved).
    #[napi]
    pub fn release(&self) {
        if let Ok(mut connection) = self.connection.lock() {
            connection.take();
        }
        if let Some(live) = self.live.lock().ok().and_then(|mut l| l.take()) {
            live.release();
        }
        if let Ok(mut admitted) = self.admitted.lock() {
            admitted.take();
        }
    }

    /// Resolves with the reason (as an Error message `CODE|detail`) once the connection is closed.
    #[napi]
    pub async fn closed(&self) -> String {
        match self.get() {
            Ok(connection) => self.watch.translate(connection_error(&connection.closed().await)).reason,
            Err(e) => e.reason,
        }
    }

    /// "none" (a full handshake before the connection was handed over), "pending" (handed over during the
    /// handshake: early data may be in flight), then "accepted" or "rejected" (the peer discarded our 0-RTT data;
    /// streams opened in it fail). A listener's resumed connection ends "accepted".
    #[napi(getter)]
    pub fn early_data(&self) -> String {
        crate::early_data::state(self.handshake.as_ref()).into()
    }

    /// Resolves once the handshake ended: false when the peer rejected our early data (or the connection failed).
    #[napi]
    pub async fn handshake_done(&self) -> bool {
        crate::early_data::wait(self.handshake.clone()).await
    }

    #[napi]
    pub fn stats(&self) -> Result<ConnectionStats> {
        let connection = self.get()?;
        let stats = connection.stats();
        Ok(ConnectionStats {
            rtt_ms: connection.rtt().as_secs_f64() * 1000.0,
            sent_bytes: stats.udp_tx.bytes as f64,
            received_bytes: stats.udp_rx.bytes as f64,
            lost_packets: stats.path.lost_packets as f64,
            congestion_window: stats.path.cwnd as f64,
            sent_datagrams: stats.udp_tx.datagrams as f64,
            send_calls: stats.udp_tx.ios as f64,
            path_mtu: stats.path.current_mtu as f64,
            held_writes: self.credit.held_writes() as f64,
            held_write_failures: self.credit.held_write_failures() as f64,
            quiet_probes: self.watch.quiet.probes() as f64,
        })
    }

    /// Last writes the engine holds now on this connection's streams (a plain call: the channel's idle check asks
    /// it once, when no stream is open in JavaScript, so a reply still waiting for credit keeps it open).
    #[napi]
    pub fn held_writes(&self) -> u32 {
        self.credit.held_writes()
    }
}

pub fn missing_key() -> Error {
    coded("UNAUTHENTICATED", "peer presented no Ed25519 agent key")
}
