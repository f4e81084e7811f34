//! Streams a peer may have open at once, granted as it uses them rather than all at the handshake.
//!
//! quinn keeps a hash-map entry per stream the peer *may* open (two maps, send and receive halves), filled for the
//! whole limit when the connection is made: at our limit of 1024 that was ~84 KiB per connection, most of the
//! server's memory per idle peer (measured with benchmarks/src/idle-peers.ts: 85 KiB per idle QUIC peer at 200).
//! A connection therefore starts with `INITIAL_STREAMS` and, whenever the peer holds more than half of what it
//! was granted, is granted four times as many, up to the configured limit. The peer learns of a grant in a
//! MAX_STREAMS frame within a round trip, long before it used the other half, so calls never wait on it unless
//! more than half the grant arrives in one round trip (then only those beyond it wait, one round trip). The maps
//! keep their size once grown (quinn does not shrink them): a busy connection stays as it was before this.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::admission::Activity;

/// Streams granted at the handshake: 64 entries cost ~5 KiB; more than the 32 calls in flight of agentbench.
pub const INITIAL_STREAMS: u32 = 64;
/// Each grant multiplies the last by this.
const GROWTH: u32 = 4;

/// Counts the streams a peer opened that are not released yet, and decides when to grant more. On a listener it
/// also tells the connection's place in the limits when the connection goes busy (a first stream, either way)
/// and idle (the last one released): only an idle connection may be evicted (admission.rs).
pub struct StreamCredit {
    open: AtomicU32,
    granted: AtomicU32,
    max: u32,
    /// Streams open in either direction (ours too: a call back to a client keeps its connection busy).
    active: AtomicU32,
    activity: OnceLock<Activity>,
    /// Last writes the engine took whole and still holds (stream.rs `try_write_finish`: written and finished by a
    /// task, which may wait for the peer's credit), on streams JavaScript may have released already. JavaScript's
    /// idle check asks for it once, at the moment it would close the channel (quic-channel.ts `activeStreams`).
    held: AtomicU32,
    /// Held last writes that failed (the peer stopped the stream, the connection was lost): the connection's stats.
    held_failures: AtomicU64,
}

impl StreamCredit {
    /// The grant at the handshake for a connection whose peer may hold `max` streams at most.
    pub fn initial(max: u32) -> u32 {
        max.min(INITIAL_STREAMS)
    }

    pub fn new(max: u32) -> Arc<Self> {
        Arc::new(Self {
            open: AtomicU32::new(0),
            granted: AtomicU32::new(Self::initial(max)),
            max,
            active: AtomicU32::new(0),
            activity: OnceLock::new(),
            held: AtomicU32::new(0),
            held_failures: AtomicU64::new(0),
        })
    }

    /// From now, tells `activity` when the connection goes busy and idle.
    pub fn watch(&self, activity: Activity) {
        if self.activity.set(activity).is_ok() && self.active.load(Ordering::Relaxed) > 0 {
            self.activity.get().expect("set above").sync(&self.active);
        }
    }

    /// Counts one stream we opened, released when the slot is dropped (it takes nothing from the peer's grant).
    pub fn opened_by_us(self: &Arc<Self>) -> StreamSlot {
        self.stream_began();
        StreamSlot { credit: self.clone(), peers: false }
    }

    fn stream_began(&self) {
        if self.active.fetch_add(1, Ordering::Relaxed) == 0 {
            if let Some(activity) = self.activity.get() {
                activity.sync(&self.active);
            }
        }
    }

    fn stream_ended(&self) {
        if self.active.fetch_sub(1, Ordering::Relaxed) == 1 {
            if let Some(activity) = self.activity.get() {
                activity.sync(&self.active);
            }
        }
    }

    /// Counts one stream the peer opened (released when the slot is dropped). Returns the new limit to grant, when
    /// the peer now holds more than half of its grant and the limit allows more.
    pub fn opened(self: &Arc<Self>) -> (StreamSlot, Option<u32>) {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.stream_began();
        let slot = StreamSlot { credit: self.clone(), peers: true };
        let granted = self.granted.load(Ordering::Relaxed);
        if open * 2 <= granted || granted >= self.max {
            return (slot, None);
        }
        let more = granted.saturating_mul(GROWTH).min(self.max);
        // Two accepts racing here grant once: the loser sees the new grant next time.
        match self.granted.compare_exchange(granted, more, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => (slot, Some(more)),
            Err(_) => (slot, None),
        }
    }

    /// Last writes held now (taken whole, not yet written and finished, nor given up).
    pub fn held_writes(&self) -> u32 {
        self.held.load(Ordering::Acquire)
    }

    /// Held last writes that failed so far.
    pub fn held_write_failures(&self) -> u64 {
        self.held_failures.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }
}

/// One stream (the peer's, or ours); dropping it (on release, or when JavaScript collects the stream) counts it out.
pub struct StreamSlot {
    credit: Arc<StreamCredit>,
    peers: bool,
}

impl StreamSlot {
    /// Counts a last write the engine holds on this stream's connection until the returned guard is dropped (when
    /// it is written and finished, or given up). It also keeps the connection busy, as an open stream does: the
    /// stream may be released while its last bytes wait for credit, and an eviction must not cut them either.
    pub fn hold_write(&self) -> HeldWrite {
        self.credit.held.fetch_add(1, Ordering::AcqRel);
        self.credit.stream_began();
        HeldWrite { credit: self.credit.clone() }
    }
}

/// A last write the engine holds (`StreamSlot::hold_write`); dropping it counts it out.
pub struct HeldWrite {
    credit: Arc<StreamCredit>,
}

impl HeldWrite {
    /// The write did not go (the peer stopped the stream, the connection was lost): counted in the stats.
    pub fn failed(&self) {
        self.credit.held_failures.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for HeldWrite {
    fn drop(&mut self) {
        self.credit.held.fetch_sub(1, Ordering::AcqRel);
        self.credit.stream_ended();
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if self.peers {
            self.credit.open.fetch_sub(1, Ordering::Relaxed);
        }
        self.credit.stream_ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Admission, Limits, Refused, MIN_IDLE_BEFORE_EVICTION};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::time::Instant;

    #[test]
    fn a_stream_either_way_keeps_a_listeners_connection_busy_and_its_release_makes_it_idle() {
        let admission = Admission::new(Limits { max_connections: 2, max_connections_per_ip: 2, ..Limits::default() });
        let attacker = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 66));
        let newcomer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let (first, _) = admission.admit_at(attacker, Instant::now()).unwrap();
        let (second, _) = admission.admit_at(attacker, Instant::now()).unwrap();
        let (first_streams, second_streams) = (StreamCredit::new(1024), StreamCredit::new(1024));
        first_streams.watch(first.activity());
        second_streams.watch(second.activity());
        let (peers_stream, _) = first_streams.opened();
        let our_stream = second_streams.opened_by_us();
        let much_later = Instant::now() + 10 * MIN_IDLE_BEFORE_EVICTION;
        assert_eq!(admission.admit_at(newcomer, much_later).err(), Some(Refused::MaxConnections), "both busy");
        drop(our_stream);
        let (_admitted, evicted) = admission.admit_at(newcomer, Instant::now() + MIN_IDLE_BEFORE_EVICTION).unwrap();
        assert!(evicted.is_some());
        let remote = SocketAddr::new(attacker, 1);
        assert!(!second.on_evict(remote, Box::new(|| ())), "the connection whose only stream ended went");
        assert!(first.on_evict(remote, Box::new(|| ())), "the one with the peer's stream open stayed");
        drop(peers_stream);
    }

    #[test]
    fn a_held_last_write_counts_and_keeps_its_connection_busy_after_its_stream_is_released() {
        let admission = Admission::new(Limits { max_connections: 2, max_connections_per_ip: 2, ..Limits::default() });
        let attacker = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 66));
        let newcomer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let (admitted, _) = admission.admit_at(attacker, Instant::now()).unwrap();
        let (busy, _) = admission.admit_at(attacker, Instant::now()).unwrap();
        let (credit, busy_streams) = (StreamCredit::new(1024), StreamCredit::new(1024));
        credit.watch(admitted.activity());
        busy_streams.watch(busy.activity());
        let _busy_stream = busy_streams.opened_by_us(); // only the connection under test may be evicted
        let (slot, _) = credit.opened();
        let held = slot.hold_write();
        drop(slot); // JavaScript released the stream; its reply waits in the engine
        assert_eq!(credit.held_writes(), 1);
        let much_later = Instant::now() + 10 * MIN_IDLE_BEFORE_EVICTION;
        assert_eq!(admission.admit_at(newcomer, much_later).err(), Some(Refused::MaxConnections), "busy while held");
        held.failed();
        drop(held);
        assert_eq!((credit.held_writes(), credit.held_write_failures()), (0, 1));
        let (_admitted, evicted) = admission.admit_at(newcomer, Instant::now() + MIN_IDLE_BEFORE_EVICTION).unwrap();
        assert!(evicted.is_some(), "idle once the held write is done");
        assert!(!admitted.on_evict(SocketAddr::new(attacker, 1), Box::new(|| ())), "the connection whose write was held went");
    }

    #[test]
    fn grants_more_once_half_the_grant_is_in_use() {
        let credit = StreamCredit::new(1024);
        let mut slots = Vec::new();
        for _ in 0..32 {
            let (slot, grant) = credit.opened();
            assert_eq!(grant, None, "32 of 64 open is half, not more");
            slots.push(slot);
        }
        let (slot, grant) = credit.opened();
        slots.push(slot);
        assert_eq!(grant, Some(256));
        let mut grants = Vec::new();
        for _ in 33..1024 {
            let (slot, grant) = credit.opened();
            slots.push(slot);
            grants.extend(grant);
        }
        assert_eq!(grants, vec![1024], "256 → 1024 at 129 open; never past the limit");
    }

    #[test]
    fn released_streams_count_out() {
        let credit = StreamCredit::new(1024);
        for _ in 0..1000 {
            let (slot, grant) = credit.opened();
            assert_eq!(grant, None, "one stream at a time never needs more than the first grant");
            drop(slot);
        }
        assert_eq!(credit.open(), 0);
    }

    #[test]
    fn a_limit_below_the_first_grant_is_granted_at_once_and_never_grown() {
        assert_eq!(StreamCredit::initial(10), 10);
        let credit = StreamCredit::new(10);
        let slots: Vec<_> = (0..10).map(|_| credit.opened()).collect();
        assert!(slots.iter().all(|(_, grant)| grant.is_none()));
    }
}
