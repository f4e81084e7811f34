//! Gives the C allocator's free pages back to the system once a burst of handshakes is over (glibc only).
//!
//! A handshake allocates far more than the connection it leaves (TLS messages, certificate checks, the first
//! packets), on the runtime's threads. glibc's malloc keeps what was freed in the middle of its arenas: after 1,000
//! handshakes the server held ~42 KiB of RSS per idle peer, 36 with MALLOC_ARENA_MAX=1 and 27 with jemalloc
//! preloaded (benchmarks/src/idle-peers.ts); mimalloc as the engine's allocator held more, 44–58. `malloc_trim`
//! returns whole free pages inside the arenas too. It runs once the listener saw no new connection for
//! `QUIET`, so a steady stream of handshakes costs at most one trim per `QUIET` of silence, not one per handshake.
//! It is process-wide (Node's own free pages go back as well), which is harmless: only free memory is returned.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

const QUIET: Duration = Duration::from_secs(1);

struct Shared {
    wake: Notify,
    stopped: AtomicBool,
    /// Trims this trimmer did (tests read it).
    trims: AtomicU64,
}

/// Owned by an accept loop: tell it of each connection; dropping it ends its task.
pub struct Trimmer(Arc<Shared>);

impl Trimmer {
    pub fn spawn() -> Self {
        let shared = Arc::new(Shared { wake: Notify::new(), stopped: AtomicBool::new(false), trims: AtomicU64::new(0) });
        tokio::spawn(run(shared.clone()));
        Self(shared)
    }

    /// A handshake finished (or failed): trim once the arrivals pause.
    pub fn handshake_done(&self) {
        self.0.wake.notify_one();
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.0.stopped.store(true, Ordering::Relaxed);
        self.0.wake.notify_one();
    }
}

async fn run(shared: Arc<Shared>) {
    loop {
        shared.wake.notified().await;
        while !shared.stopped.load(Ordering::Relaxed) && tokio::time::timeout(QUIET, shared.wake.notified()).await.is_ok() {}
        if shared.stopped.load(Ordering::Relaxed) {
            return;
        }
        trim();
        shared.trims.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointers and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl's, macOS's, Windows') return free memory themselves or have no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    async fn until(condition: impl Fn() -> bool) {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn trims_once_the_handshakes_pause_and_its_task_ends_with_the_trimmer() {
        let trimmer = Trimmer::spawn();
        let shared = trimmer.0.clone();
        assert_eq!(shared.trims.load(Ordering::Relaxed), 0, "no trim before any handshake");
        for _ in 0..5 {
            trimmer.handshake_done();
        }
        tokio::time::timeout(Duration::from_secs(30), until(|| shared.trims.load(Ordering::Relaxed) > 0)).await.expect("a trim after the pause");
        assert_eq!(shared.trims.load(Ordering::Relaxed), 1, "five handshakes in a row: one trim");
        drop(trimmer);
        // The task holds the only other reference: it is gone once the task returned.
        tokio::time::timeout(Duration::from_secs(30), until(|| Arc::strong_count(&shared) == 1)).await.expect("task ended");
    }
}
