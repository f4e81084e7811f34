//! A stream's first bytes leave before the writer goes on. quinn sends from the connection's driver, a task on the
//! engine's thread: a write from JavaScript only hands bytes to the connection and wakes that thread. A producer
//! that then writes a burst without waiting (1,000 tokens: ~1 ms of JavaScript that never blocks) keeps its core,
//! and on a machine with few cores the woken engine thread, and the peer's threads that must take the datagram
//! and hand it to the peer's code, can wait for that core until the burst is done (Linux's EEVDF lets a running
//! task finish its slice, ~1.5 ms on 2 cores, before a woken one runs).
//!
//! So after a stream's first bytes are taken from JavaScript (`try_write`: a streamed call's request, a streamed
//! reply's first item) the writing thread sleeps until one of the engine's sockets has sent a datagram since
//! (normally the one carrying those bytes: ~0.04 ms), at most FIRST_SEND_WAIT_US: the thread blocks in the kernel,
//! so its core is free for the engine's thread that sends, and for the peer's threads on the same machine that take
//! the datagram. It never hangs: with no credit or congestion window to send, the bound ends the wait. A unary
//! request or reply (`try_write_finish`) and a burst's later writes never wait. `AGENTLINK_QUIC_FIRST_SEND_WAIT_US`
//! sets the bound (0: yield the core once instead, `sched_yield`, as before 2026-11-24 evening).
//! (docs/quic.md, "A burst's first token between two processes".)

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use napi_derive::napi;

/// The longest a writer sleeps for a stream's first datagram to leave, in µs.
pub const FIRST_SEND_WAIT_US: u64 = 200;

/// Times a writer gave its core away after a stream's first bytes, in the whole process (tests read it:
/// `firstWriteYields`): a wait, or with the wait turned off, a yield.
static YIELDS: AtomicU64 = AtomicU64::new(0);
/// Waits that ended because the bound passed with nothing sent (tests read it: `firstWriteWaitsTimedOut`).
static TIMED_OUT: AtomicU64 = AtomicU64::new(0);
/// The engine's sockets' sends, in the whole process (raw_socket.rs calls `datagram_sent`).
static SENDS: SendSignal = SendSignal::new();

/// Datagrams sent, and writers sleeping until the next one.
struct SendSignal {
    sent: AtomicU64,
    /// A send takes the lock and wakes sleepers only when there are some.
    waiting: AtomicU32,
    wake: (Mutex<()>, Condvar),
}

impl SendSignal {
    const fn new() -> Self {
        Self { sent: AtomicU64::new(0), waiting: AtomicU32::new(0), wake: (Mutex::new(()), Condvar::new()) }
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    fn one_sent(&self) {
        self.sent.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = self.wake.0.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.1.notify_all();
        }
    }

    /// Sleeps until a datagram was sent after `since` (a value of `sent` read before the write), at most `bound`.
    /// True when one was. (A sender bumps `sent` before it reads `waiting`, a sleeper counts itself in `waiting`
    /// before it reads `sent` under the lock: one of them sees the other.)
    fn wait_for_send(&self, since: u64, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.wake.0.lock().unwrap_or_else(|e| e.into_inner());
        let sent = loop {
            if self.sent() != since {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            guard = self.wake.1.wait_timeout(guard, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        };
        drop(guard);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        sent
    }
}

fn wait_bound() -> Duration {
    static BOUND: OnceLock<Duration> = OnceLock::new();
    *BOUND.get_or_init(|| {
        let us = std::env::var("AGENTLINK_QUIC_FIRST_SEND_WAIT_US").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(FIRST_SEND_WAIT_US);
        Duration::from_micros(us)
    })
}

/// One of the engine's sockets sent a datagram (or a batch of them): wakes writers waiting for their first.
pub fn datagram_sent() {
    SENDS.one_sent();
}

/// Per stream: whether its first bytes were taken yet.
#[derive(Default)]
pub struct FirstWrite(AtomicBool);

/// Read before a write that may be the stream's first: what the wait after it compares with.
pub struct BeforeFirst(u64);

impl FirstWrite {
    /// Some before the stream's first bytes were taken (read it before the write), None after.
    pub fn before(&self) -> Option<BeforeFirst> {
        if self.0.load(Ordering::Relaxed) {
            None
        } else {
            Some(BeforeFirst(SENDS.sent()))
        }
    }

    /// Bytes were just taken from the calling thread; the first time for this stream, it gives its core away
    /// until they (or any of the engine's datagrams) have left, or the bound passed.
    pub fn taken(&self, before: Option<BeforeFirst>) {
        let Some(BeforeFirst(since)) = before else { return };
        if !self.first() {
            return;
        }
        YIELDS.fetch_add(1, Ordering::Relaxed);
        let bound = wait_bound();
        if bound.is_zero() {
            std::thread::yield_now();
        } else if !SENDS.wait_for_send(since, bound) {
            TIMED_OUT.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// True exactly once per stream.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::Relaxed)
    }
}

/// How many times a writer has given its core away after a stream's first bytes, since the engine loaded.
#[napi]
pub fn first_write_yields() -> f64 {
    YIELDS.load(Ordering::Relaxed) as f64
}

/// How many of those waits ended at their bound with nothing sent (no credit or window to send, or no core).
#[napi]
pub fn first_write_waits_timed_out() -> f64 {
    TIMED_OUT.load(Ordering::Relaxed) as f64
}

/// The longest a writer waits for a stream's first datagram to leave, in µs (0: it yields once instead).
#[napi]
pub fn first_write_wait_bound_us() -> f64 {
    wait_bound().as_micros() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_streams_first_bytes_count() {
        let (one, two) = (FirstWrite::default(), FirstWrite::default());
        assert!(one.first());
        assert!(!one.first(), "a stream's later writes do not yield");
        assert!(two.first(), "each stream yields once");
    }

    #[test]
    fn a_later_write_reads_nothing_to_wait_for() {
        let stream = FirstWrite::default();
        assert!(stream.before().is_some());
        assert!(stream.first());
        assert!(stream.before().is_none(), "after the first bytes, no wait is prepared");
    }

    #[test]
    fn a_send_ends_the_wait() {
        let signal = std::sync::Arc::new(SendSignal::new());
        let since = signal.sent();
        let sender = {
            let signal = signal.clone();
            std::thread::spawn(move || {
                // Sends only once the writer sleeps, so the wake-up (not the first check) ends the wait.
                while signal.waiting.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
                signal.one_sent();
            })
        };
        assert!(signal.wait_for_send(since, Duration::from_secs(600)), "woken by the send, long before the bound");
        sender.join().unwrap();
        assert_eq!(signal.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_send_between_the_write_and_the_wait_ends_it_at_once() {
        let signal = SendSignal::new();
        let since = signal.sent();
        signal.one_sent();
        assert!(signal.wait_for_send(since, Duration::from_secs(600)));
    }

    #[test]
    fn with_nothing_sent_the_bound_ends_the_wait() {
        let signal = SendSignal::new();
        assert!(!signal.wait_for_send(signal.sent(), Duration::from_millis(1)), "no credit or window: it falls through");
        assert_eq!(signal.waiting.load(Ordering::SeqCst), 0, "and no longer counts as waiting");
    }
}
