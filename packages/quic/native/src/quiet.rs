//! A caller that only receives (a streamed call's tokens, a unary call's reply) sends nothing while it waits, so
//! nothing of ours reaches a peer whose process died, its port's ICMP (unreachable.rs) never comes, and the dead
//! peer was found only at our next keep-alive (a third of `idleTimeoutMs`: 3.3 s at the defaults). So while a
//! read waits on the peer and nothing arrived from it for `interval`, the connection sends one ack-eliciting
//! probe (unreachable.rs's 1-byte DATAGRAM frame): a dead port answers it with ICMP and the hint → probe → verdict
//! path runs; a live peer's ACK answers it, so a peer that thinks for a minute before its first token is never
//! judged dead (a verdict needs silence *and* ICMP after a probe, unreachable.rs).
//!
//! Bounds (docs/quic.md "Liveness", docs/security.md): at most one probe per `interval` per connection (one per
//! 2·`interval` to a silent live peer: its ACK counts as traffic for the next check), none while a judgement
//! runs, none while anything arrives, and none at all while no read waits: an idle connection sends nothing new.
//! Only our own readers start it; nothing a peer sends makes us probe more (its packets stop the probes).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use quinn::Connection;
use tokio::sync::Notify;

use crate::unreachable::PeerWatch;

/// How long a waiting read's peer may be silent before a probe (docs/quic.md "Liveness": detection ~1.5× this
/// after a death, ~1 probe + 1 ACK per 2× this per silent waiting connection).
pub const QUIET_PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// The interval in use: `AGENTLINK_QUIC_QUIET_PROBE_MS` overrides it for measurements (0 turns probing off).
pub fn interval() -> Option<Duration> {
    static INTERVAL: OnceLock<Option<Duration>> = OnceLock::new();
    *INTERVAL.get_or_init(|| match std::env::var("AGENTLINK_QUIC_QUIET_PROBE_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => Some(QUIET_PROBE_INTERVAL),
    })
}

/// Reads waiting on the peer (one connection's), and the wake of its quiet-peer task.
#[derive(Default)]
pub struct Waiting {
    reads: AtomicU32,
    wake: Notify,
    probes: AtomicU64,
    /// The quiet-peer task's start, left until a read of ours first waits (`start_on_first_wait`): a connection we
    /// never wait on — a listener's many idle clients — keeps no sleeping task (its future and timer, ~0.5 KiB).
    start: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    start_pending: AtomicBool,
}

impl Waiting {
    /// Counts a read waiting on the peer until the guard is dropped; the first one wakes the task (and starts it,
    /// the first time).
    pub fn begin(&self) -> WaitingRead<'_> {
        if self.reads.fetch_add(1, Ordering::AcqRel) == 0 {
            if self.start_pending.load(Ordering::Acquire) && self.start_pending.swap(false, Ordering::AcqRel) {
                let start = self.start.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(start) = start {
                    start();
                }
            }
            self.wake.notify_one();
        }
        WaitingRead(self)
    }

    /// What starts the quiet-peer task, run by the first read that waits (once).
    pub fn start_on_first_wait(&self, start: impl FnOnce() + Send + 'static) {
        *self.start.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(start));
        self.start_pending.store(true, Ordering::Release);
    }

    fn any(&self) -> bool {
        self.reads.load(Ordering::Acquire) > 0
    }

    /// Probes sent so far (the connection's stats).
    pub fn probes(&self) -> u64 {
        self.probes.load(Ordering::Relaxed)
    }
}

pub struct WaitingRead<'a>(&'a Waiting);

impl Drop for WaitingRead<'_> {
    fn drop(&mut self) {
        self.0.reads.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs until the connection is closed: asleep while no read waits, else a check per `interval` (at least two
/// round trips, so a far peer's ACK is in before the next check).
pub async fn watch_quiet_peer(connection: Connection, watch: Arc<PeerWatch>, interval: Duration) {
    let closed = connection.closed();
    tokio::pin!(closed);
    loop {
        while !watch.quiet.any() {
            tokio::select! {
                _ = watch.quiet.wake.notified() => {}
                _ = &mut closed => return,
            }
        }
        let mut heard = connection.stats().udp_rx.datagrams;
        loop {
            let period = interval.max(connection.rtt() * 2);
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = &mut closed => return,
            }
            if !watch.quiet.any() {
                break;
            }
            let now = connection.stats().udp_rx.datagrams;
            // A judgement in progress probes on its own; a peer that accepts no DATAGRAM frames cannot be probed.
            if now == heard && !watch.is_suspected() && connection.send_datagram(Bytes::from_static(&[0])).is_ok() {
                watch.quiet.probes.fetch_add(1, Ordering::Relaxed);
            }
            heard = now;
        }
    }
}
