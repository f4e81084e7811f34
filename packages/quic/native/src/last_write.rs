//! A stream's last write taken whole by the engine (stream.rs, `try_write_finish`): the write and the finish run
//! together on the engine's thread, and what waits there for the peer's credit is counted process-wide and capped,
//! so a peer that withholds credit makes the engine hold at most HELD_MAX bytes of such writes (past the cap, a
//! last write takes the synchronous path, which holds nothing beyond what quinn's credit lets it take).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest last write taken whole (a unary request or reply; larger ones are written within credit).
pub const LAST_WRITE_MAX: usize = 16 * 1024;
/// At most this many bytes of last writes are held by the engine at once, in the whole process.
pub const HELD_MAX: usize = 4 * 1024 * 1024;
/// What one held write is charged at least: each is also a task and a locked send half, so a peer that withholds
/// credit from many tiny replies holds at most HELD_MAX / HELD_MIN_CHARGE (4,096) of them, not a task per byte.
pub const HELD_MIN_CHARGE: usize = 1024;

static HELD: AtomicUsize = AtomicUsize::new(0);

/// Bytes counted against the cap until dropped (when the write and the finish are done, or given up).
pub struct Held {
    bytes: usize,
    counter: &'static AtomicUsize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Room for a last write of `bytes` (charged at least HELD_MIN_CHARGE), or None when the cap would be passed.
pub fn hold(bytes: usize) -> Option<Held> {
    hold_in(&HELD, HELD_MAX, charge(bytes))
}

/// What a last write of `bytes` counts against the cap.
fn charge(bytes: usize) -> usize {
    bytes.max(HELD_MIN_CHARGE)
}

pub(crate) fn hold_in(counter: &'static AtomicUsize, max: usize, bytes: usize) -> Option<Held> {
    let mut current = counter.load(Ordering::Acquire);
    loop {
        if current.checked_add(bytes)? > max {
            return None;
        }
        match counter.compare_exchange_weak(current, current + bytes, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(Held { bytes, counter }),
            Err(now) => current = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_up_to_the_cap_and_frees_on_drop() {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let first = hold_in(&COUNTER, 100, 60).expect("room for 60 of 100");
        let second = hold_in(&COUNTER, 100, 40).expect("room for 40 more");
        assert!(hold_in(&COUNTER, 100, 1).is_none(), "the cap is reached");
        drop(first);
        assert_eq!(COUNTER.load(Ordering::Acquire), 40);
        let third = hold_in(&COUNTER, 100, 60).expect("room again once a write is done");
        assert!(hold_in(&COUNTER, 100, usize::MAX).is_none(), "no overflow past the cap");
        drop((second, third));
        assert_eq!(COUNTER.load(Ordering::Acquire), 0);
    }

    #[test]
    fn tiny_writes_are_charged_the_minimum() {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let held: Vec<Held> = (0..HELD_MAX / HELD_MIN_CHARGE).map_while(|_| hold_in(&COUNTER, HELD_MAX, charge(5))).collect();
        assert_eq!(held.len(), 4096, "4,096 five-byte writes fill the cap");
        assert!(hold_in(&COUNTER, HELD_MAX, charge(5)).is_none(), "a 4,097th takes the synchronous path");
        drop(held);
        assert!(hold_in(&COUNTER, HELD_MAX, charge(5)).is_some());
    }
}
