//! A peer whose process died while its host lives answers our datagrams with ICMP port unreachable. QUIC has
//! no other prompt signal of that (the idle timeout is seconds), so the endpoint reads those ICMP errors
//! (Linux: `IP_RECVERR`/`IPV6_RECVERR` and the socket's error queue, see error_queue.rs) — but only as a hint:
//! anyone who knows the 4-tuple can forge one (RFC 9000 §14.2.1, RFC 8085 §5.2). A hint for a peer address
//! makes each connection to it probe its peer with one ack-eliciting packet (a 1-byte DATAGRAM frame); the
//! connection is closed as gone only when, a few PTOs later, nothing arrived from the peer and hints came
//! again after the probe (the probe itself drew one). A live peer's ACK clears the suspicion, so a forged ICMP
//! costs one probe. A silent peer without further hints is waited for up to SILENT_PATIENCE, then cleared.
//!
//! Bounds (docs/security.md): the watchlist holds one entry per connection of ours (never one per hint); a
//! connection has at most one judgement running, so probes are at most one per `judgement_window` (≥ 200 ms)
//! per connection however many hints come; a hint costs a map lookup and an atomic increment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use quinn::{Connection, VarInt};
use tokio::sync::watch;

use crate::errors::coded;

/// What a connection closed as gone tells its streams and JavaScript (`UNAVAILABLE|…`).
pub const GONE_DETAIL: &str = "the peer's port is unreachable (ICMP port unreachable, and no answer to a probe): its process is gone";
/// The application code of our CONNECTION_CLOSE to a gone peer (nobody reads it; 0 = no error code).
const GONE_CODE: u32 = 0;
/// What errors.rs makes of quinn's LocallyClosed; a gone connection's errors of this kind become UNAVAILABLE.
pub const LOCALLY_CLOSED: &str = "CLOSED|connection closed locally";

/// The shortest judgement: on loopback and LANs PTOs are sub-millisecond, but a live peer's ACK may wait for
/// its ack delay (25 ms) and its process for the scheduler (a loaded machine stalls threads for tens of ms).
pub const MIN_WINDOW: Duration = Duration::from_millis(200);
/// The longest: beyond this the idle timeout is the better judge anyway.
pub const MAX_WINDOW: Duration = Duration::from_secs(5);
/// How long a silent peer (no packet, but no ICMP since the probe either) stays suspected: Linux answers a host
/// with at most one ICMP error per second once a burst of 6 is spent (`icmp_ratelimit`, loopback exempt), so a
/// dead port's answer to the probe may come up to a second late.
pub const SILENT_PATIENCE: Duration = Duration::from_millis(1500);
/// The peer's largest ACK delay as quinn's default transport parameters announce it.
const MAX_ACK_DELAY: Duration = Duration::from_millis(25);

/// How long a suspected connection waits for any packet from its peer after the probe: three PTOs, a PTO taken
/// as RFC 9002's srtt + 4·rttvar + max_ack_delay with rttvar at its initial srtt/2 (quinn exposes only srtt),
/// clamped to [MIN_WINDOW, MAX_WINDOW].
pub fn judgement_window(rtt: Duration) -> Duration {
    let pto = rtt * 3 + MAX_ACK_DELAY;
    (pto * 3).clamp(MIN_WINDOW, MAX_WINDOW)
}

/// One connection's suspicion state, shared by the connection's handle, its streams and the watchlist.
#[derive(Default)]
pub struct PeerWatch {
    /// A judgement is running (at most one per connection).
    suspected: AtomicBool,
    /// Hints since the judgement's probe.
    hints: AtomicU32,
    /// Set (before the close) once the connection was closed as gone.
    gone: OnceLock<()>,
    /// Reads waiting on the peer now, and the wake of the connection's quiet-peer task (quiet.rs).
    pub(crate) quiet: crate::quiet::Waiting,
    /// The connection, weakly: its round trip sizes a refused stream's grace (stream.rs).
    connection: OnceLock<Weak<ConnectionSlot>>,
}

impl PeerWatch {
    /// The watch of the connection in `slot` (held weakly: it keeps nothing alive).
    pub fn of(slot: &Arc<ConnectionSlot>) -> Self {
        let watch = Self::default();
        let _ = watch.connection.set(Arc::downgrade(slot));
        watch
    }

    /// The connection's smoothed round trip, or zero once it is released.
    pub fn rtt(&self) -> Duration {
        let connection = self.connection.get().and_then(Weak::upgrade);
        let connection = connection.as_ref().and_then(|slot| slot.lock().ok()?.clone());
        connection.map(|c| c.rtt()).unwrap_or_default()
    }

    /// A judgement is running now (the quiet-peer task then leaves the probing to it).
    pub fn is_suspected(&self) -> bool {
        self.suspected.load(Ordering::Acquire)
    }

    pub fn is_gone(&self) -> bool {
        self.gone.get().is_some()
    }

    /// A gone connection's local-close errors say why it was closed.
    pub fn translate(&self, error: napi::Error) -> napi::Error {
        if self.is_gone() && error.reason == LOCALLY_CLOSED {
            coded("UNAVAILABLE", GONE_DETAIL)
        } else {
            error
        }
    }

    pub fn translate_reason(&self, reason: String) -> String {
        if self.is_gone() && reason == LOCALLY_CLOSED {
            format!("UNAVAILABLE|{GONE_DETAIL}")
        } else {
            reason
        }
    }
}

/// The shared slot a `QuicConnection` holds its quinn connection in; the watchlist holds it weakly, so it keeps
/// no connection alive and sees a released one as gone from the list.
pub type ConnectionSlot = Mutex<Option<Connection>>;

struct Entry {
    connection: Weak<ConnectionSlot>,
    watch: Arc<PeerWatch>,
}

impl Entry {
    fn connection(&self) -> Option<Connection> {
        self.connection.upgrade()?.lock().ok()?.clone()
    }
}

/// How judgements ended, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    pub probes: u32,
    pub cleared: u32,
    pub gone: u32,
}

/// One endpoint's connections by peer address, so a hint reaches the connections it is about.
pub struct Watchlist {
    entries: Mutex<Entries>,
    verdicts: watch::Sender<Verdicts>,
    /// The endpoint reads ICMP errors (Linux, the error queue on): hints can come, so probing a peer helps.
    hinted: AtomicBool,
}

#[derive(Default)]
struct Entries {
    by_peer: HashMap<SocketAddr, Vec<Entry>>,
    count: usize,
    /// The next full sweep of released connections happens when `count` passes this (amortised O(1) each).
    sweep_at: usize,
}

const FIRST_SWEEP: usize = 64;

/// An IPv4 peer of a dual-stack socket appears as ::ffff:a.b.c.d in some places and a.b.c.d in others.
fn canonical(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(address.ip().to_canonical(), address.port())
}

impl Watchlist {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(Entries { sweep_at: FIRST_SWEEP, ..Entries::default() }),
            verdicts: watch::channel(Verdicts::default()).0,
            hinted: AtomicBool::new(false),
        })
    }

    /// Hints will come: the endpoint's error queue is read (endpoint.rs `icmp_hints`, Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn set_hinted(&self) {
        self.hinted.store(true, Ordering::Release);
    }

    pub fn hinted(&self) -> bool {
        self.hinted.load(Ordering::Acquire)
    }

    pub fn verdicts(&self) -> watch::Receiver<Verdicts> {
        self.verdicts.subscribe()
    }

    /// Connections currently listed (tests: the list does not grow with released connections).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).count
    }

    pub fn register(&self, peer: SocketAddr, connection: Weak<ConnectionSlot>, watch: Arc<PeerWatch>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.by_peer.entry(canonical(peer)).or_default().push(Entry { connection, watch });
        entries.count += 1;
        if entries.count > entries.sweep_at {
            entries.by_peer.retain(|_, list| {
                list.retain(|entry| entry.connection().is_some());
                !list.is_empty()
            });
            entries.count = entries.by_peer.values().map(Vec::len).sum();
            entries.sweep_at = (entries.count * 2).max(FIRST_SWEEP);
        }
    }

    /// An ICMP port unreachable for `peer` (from the socket's error queue, or forged: see the module's comment).
    pub fn hint(self: &Arc<Self>, peer: SocketAddr) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = entries.by_peer.get_mut(&canonical(peer)) else { return };
        let before = list.len();
        list.retain(|entry| {
            let Some(connection) = entry.connection() else { return false };
            entry.watch.hints.fetch_add(1, Ordering::Relaxed);
            if !entry.watch.suspected.swap(true, Ordering::AcqRel) {
                tokio::spawn(judge(connection, entry.watch.clone(), self.clone()));
            }
            true
        });
        let removed = before - list.len();
        if list.is_empty() {
            entries.by_peer.remove(&canonical(peer));
        }
        entries.count -= removed;
    }

    fn record(&self, change: impl FnOnce(&mut Verdicts)) {
        self.verdicts.send_modify(change);
    }
}

/// Probes the suspected connection's peer and decides: gone (closed) or alive (suspicion cleared).
async fn judge(connection: Connection, watch: Arc<PeerWatch>, list: Arc<Watchlist>) {
    let window = judgement_window(connection.rtt());
    let received = connection.stats().udp_rx.datagrams;
    watch.hints.store(0, Ordering::Release);
    // Ack-eliciting: a live peer acknowledges it within its ack delay. quinn 0.11 has no public PING; a DATAGRAM
    // frame is the one ack-eliciting frame it lets us send without touching streams (our peers accept up to
    // DATAGRAM_WINDOW bytes of them, never read, the oldest dropped first).
    let probed = connection.send_datagram(Bytes::from_static(&[0])).is_ok();
    if probed {
        list.record(|v| v.probes += 1);
    }
    let patience = tokio::time::Instant::now() + window.max(SILENT_PATIENCE);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(window) => {}
            _ = connection.closed() => break,
        }
        // Anything from the peer (the probe's ACK, at the latest) clears it, whatever the hints said.
        if connection.stats().udp_rx.datagrams > received {
            list.record(|v| v.cleared += 1);
            break;
        }
        if probed && watch.hints.load(Ordering::Acquire) > 0 {
            let _ = watch.gone.set(());
            connection.close(VarInt::from_u32(GONE_CODE), GONE_DETAIL.as_bytes());
            list.record(|v| v.gone += 1);
            break;
        }
        // Silent, but no ICMP since the probe yet: the peer's kernel may be rate-limiting its ICMP.
        if tokio::time::Instant::now() >= patience {
            list.record(|v| v.cleared += 1);
            break;
        }
    }
    watch.suspected.store(false, Ordering::Release);
}

/// Bytes of DATAGRAM frames a peer may leave unread with us (quinn counts each with its overhead, ~40 bytes):
/// its probes, and anything else it sends that way (agentlink reads no datagrams). quinn's default is 1.25 MB.
pub const DATAGRAM_WINDOW: usize = 4096;
