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

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Streams granted at the handshake: 64 entries cost ~5 KiB; more than the 32 calls in flight of agentbench.
pub const INITIAL_STREAMS: u32 = 64;
/// Each grant multiplies the last by this.
const GROWTH: u32 = 4;

/// Counts the streams a peer opened that are not released yet, and decides when to grant more.
pub struct StreamCredit {
    open: AtomicU32,
    granted: AtomicU32,
    max: u32,
}

impl StreamCredit {
    /// The grant at the handshake for a connection whose peer may hold `max` streams at most.
    pub fn initial(max: u32) -> u32 {
        max.min(INITIAL_STREAMS)
    }

    pub fn new(max: u32) -> Arc<Self> {
        Arc::new(Self { open: AtomicU32::new(0), granted: AtomicU32::new(Self::initial(max)), max })
    }

    /// Counts one stream the peer opened (released when the slot is dropped). Returns the new limit to grant, when
    /// the peer now holds more than half of its grant and the limit allows more.
    pub fn opened(self: &Arc<Self>) -> (StreamSlot, Option<u32>) {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = StreamSlot(self.clone());
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

    #[cfg(test)]
    fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }
}

/// One stream the peer opened; dropping it (on release, or when JavaScript collects the stream) counts it out.
pub struct StreamSlot(Arc<StreamCredit>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
