//! The engine's threads ask Linux for a short scheduling slice, so that when one is woken (a datagram came in, or
//! JavaScript handed the connection bytes to send) it runs within ~0.1 ms instead of waiting for the task on its
//! core to finish a default slice (~1.5 ms on 2 cores: the whole of a 1,000-token burst). Under EEVDF a woken task
//! whose slice is shorter than the running task's may preempt it at once (Linux 6.12+, `sched_setattr` with
//! `sched_runtime` for a normal task: no privilege needed, and no more CPU for the thread over time — only sooner
//! and in shorter turns). On older kernels and other systems this does nothing. `AGENTLINK_QUIC_SLICE_US`
//! overrides the slice (0: the kernel's default). (docs/quic.md, "A burst's first token between two processes".)

use std::sync::atomic::{AtomicU64, Ordering};

use napi_derive::napi;

/// The slice asked for the engine's threads, in µs: Linux's shortest is 100.
pub const ENGINE_SLICE_US: u64 = 100;

/// The slice the kernel accepted for the engine's threads, in ns (0: none asked, or refused).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

/// The scheduling slice the engine's threads asked for and the kernel accepted, in ns; 0 where none was (other
/// systems, `AGENTLINK_QUIC_SLICE_US=0`, a refusal). Kernels before 6.12 accept it and ignore it.
#[napi]
pub fn engine_thread_slice_ns() -> f64 {
    ACCEPTED.load(Ordering::Relaxed) as f64
}

fn slice_us() -> u64 {
    std::env::var("AGENTLINK_QUIC_SLICE_US").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(ENGINE_SLICE_US)
}

/// Runs on each of the engine's runtime threads as it starts (lib.rs).
pub fn engine_thread_started() {
    let slice = slice_us();
    if slice > 0 && set_own_slice(slice * 1000) {
        ACCEPTED.store(slice * 1000, Ordering::Relaxed);
    }
}

#[cfg(target_os = "linux")]
fn set_own_slice(nanos: u64) -> bool {
    /// The kernel's `struct sched_attr` (its first version, 48 bytes): policy 0 is SCHED_OTHER, nice 0.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, policy: 0, flags: 0, nice: 0, priority: 0, runtime: nanos, deadline: 0, period: 0 };
    // SAFETY: the attribute lives across the call and its size field says how much the kernel may read; pid 0 is
    // this thread. A refusal (an old kernel, a seccomp filter) leaves the thread as it was, which is fine.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn set_own_slice(_nanos: u64) -> bool {
    false
}
