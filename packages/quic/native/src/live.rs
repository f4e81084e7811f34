//! Counts of engine objects JavaScript has not released: leak tests check they return to their baseline. Only
//! an explicit `release()` counts down; an object collected by GC without one stays counted, because until
//! that collection it held its memory (the leak the test exists to catch).

use std::sync::atomic::{AtomicI64, Ordering};

use napi_derive::napi;

pub static CONNECTIONS: AtomicI64 = AtomicI64::new(0);
pub static STREAMS: AtomicI64 = AtomicI64::new(0);

/// One counted object; `release` counts it down.
pub struct Live(&'static AtomicI64);

impl Live {
    pub fn new(counter: &'static AtomicI64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }

    pub fn release(self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[napi(object)]
pub struct LiveObjects {
    pub connections: i64,
    pub streams: i64,
}

/// Connections and streams not yet released.
#[napi]
pub fn live_objects() -> LiveObjects {
    LiveObjects { connections: CONNECTIONS.load(Ordering::Relaxed), streams: STREAMS.load(Ordering::Relaxed) }
}
