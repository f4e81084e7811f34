//! A stream's first bytes leave while the writer goes on. quinn sends from the connection's driver, a task on the
//! engine's thread: a write from JavaScript only hands bytes to the connection and wakes that thread. A producer
//! that then writes a burst without waiting (1,000 tokens: ~1 ms of JavaScript that never blocks) keeps its core,
//! and on a machine with few cores the woken engine thread, and the peer's threads that must take the datagram
//! and hand it to the peer's code, can wait for that core until the burst is done (Linux's EEVDF lets a running
//! task finish its slice, ~1.5 ms on 2 cores, before a woken one runs). So after a stream's first bytes are taken
//! from JavaScript (`try_write`: a streamed call's request, a streamed reply's first item) the writing thread
//! yields its core once (`sched_yield`: a task waiting for this core runs first; with none, it returns at once).
//! One system call per stream; a unary request or reply (`try_write_finish`) is not followed by one.
//! (docs/quic.md, "A burst's first token between two processes".)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use napi_derive::napi;

/// Times a writer yielded after a stream's first bytes, in the whole process (tests read it: `firstWriteYields`).
static YIELDS: AtomicU64 = AtomicU64::new(0);

/// Per stream: whether its first bytes were taken yet.
#[derive(Default)]
pub struct FirstWrite(AtomicBool);

impl FirstWrite {
    /// Bytes were just taken from the calling thread; the first time for this stream, it yields its core.
    pub fn taken(&self) {
        if self.first() {
            YIELDS.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
        }
    }

    /// True exactly once per stream.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::Relaxed)
    }
}

/// How many times a writer has yielded its core after a stream's first bytes, since the engine loaded.
#[napi]
pub fn first_write_yields() -> f64 {
    YIELDS.load(Ordering::Relaxed) as f64
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
}
