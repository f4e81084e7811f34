//! A bound on what forged ICMP can cost our sends. With `IP_RECVERR` on (error_queue.rs), Linux fails the socket's
//! next `sendmsg` once per queued ICMP error, whatever its destination; quinn-udp drops that datagram and QUIC
//! resends it. Reading each error at once keeps that to about one datagram per error, but a flood of forged ICMP
//! (anyone who knows our address and port can send it) would then cost a datagram of ours per packet of theirs,
//! across every connection of the endpoint. So past MAX_ERRORS_PER_SECOND errors in a second the endpoint stops
//! asking for them (`IP_RECVERR` and `IPV6_RECVERR` off: the kernel then neither queues them nor fails a send) for
//! COOL_DOWN, and asks again after. A flood then costs at most MAX_ERRORS_PER_SECOND datagrams per COOL_DOWN; what
//! it costs us is the hint (a dead peer is found by the idle timeout meanwhile, as on systems without it).
//! An honest peer's dead port draws one error per datagram we send it; a congestion window's worth after a death
//! is far below the limit on all but the fastest local paths.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// ICMP errors read in one second past which the endpoint stops asking for them.
pub const MAX_ERRORS_PER_SECOND: u32 = 1024;
/// How long it stops asking.
pub const COOL_DOWN: Duration = Duration::from_secs(10);

/// Times any endpoint of this process stopped asking for ICMP errors (the tests read it).
static TIMES_CLOSED: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
pub fn times_closed() -> u64 {
    TIMES_CLOSED.load(Ordering::Relaxed)
}

pub struct IcmpGate {
    fd: RawFd,
    state: Mutex<GateState>,
}

struct GateState {
    window_start: Instant,
    read_in_window: u32,
    closed_until: Option<Instant>,
}

impl IcmpGate {
    /// `fd` is the endpoint's socket (or a duplicate of it: socket options are the socket's, not the fd's).
    pub fn new(fd: RawFd, now: Instant) -> Self {
        Self { fd, state: Mutex::new(GateState { window_start: now, read_in_window: 0, closed_until: None }) }
    }

    /// Counts `read` errors just read; past the limit, stops asking for more. True when it stopped now.
    pub fn counted(&self, read: usize, now: Instant) -> bool {
        if read == 0 {
            return false;
        }
        let mut state = self.state.lock().unwrap();
        if now.duration_since(state.window_start) >= Duration::from_secs(1) {
            state.window_start = now;
            state.read_in_window = 0;
        }
        state.read_in_window = state.read_in_window.saturating_add(read.min(u32::MAX as usize) as u32);
        if state.read_in_window <= MAX_ERRORS_PER_SECOND || state.closed_until.is_some() {
            return false;
        }
        state.closed_until = Some(now + COOL_DOWN);
        set_recverr(self.fd, false);
        TIMES_CLOSED.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// When it will ask again, if it stopped.
    pub fn closed_until(&self) -> Option<Instant> {
        self.state.lock().unwrap().closed_until
    }

    /// Asks for ICMP errors again once the cool-down is over. True when it did now.
    pub fn reopen_if_due(&self, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap();
        match state.closed_until {
            Some(until) if now >= until => {
                state.closed_until = None;
                state.window_start = now;
                state.read_in_window = 0;
                set_recverr(self.fd, true);
                true
            }
            _ => false,
        }
    }
}

/// Both flags: an IPv4 socket refuses the IPv6 one, which is fine (a dual-stack socket takes both).
fn set_recverr(fd: RawFd, on: bool) {
    crate::error_queue::set_flag(fd, libc::IPPROTO_IP, libc::IP_RECVERR, on);
    crate::error_queue::set_flag(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, on);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn recverr(fd: RawFd) -> libc::c_int {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        unsafe { libc::getsockopt(fd, libc::IPPROTO_IP, libc::IP_RECVERR, &mut value as *mut _ as *mut libc::c_void, &mut len) };
        value
    }

    #[test]
    fn a_flood_of_errors_turns_them_off_for_the_cool_down_then_on_again() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = socket.as_raw_fd();
        set_recverr(fd, true);
        let start = Instant::now();
        let gate = IcmpGate::new(fd, start);
        // Up to the limit within one second: still asking.
        assert!(!gate.counted(MAX_ERRORS_PER_SECOND as usize - 1, start));
        assert!(!gate.counted(1, start + Duration::from_millis(900)));
        assert_eq!(recverr(fd), 1);
        // A new second starts a new count.
        assert!(!gate.counted(MAX_ERRORS_PER_SECOND as usize, start + Duration::from_millis(1000)));
        // One past it: off, for the cool-down.
        let closed_at = start + Duration::from_millis(1500);
        assert!(gate.counted(1, closed_at));
        assert_eq!(recverr(fd), 0);
        assert_eq!(gate.closed_until(), Some(closed_at + COOL_DOWN));
        assert!(!gate.counted(5000, closed_at + Duration::from_millis(1)), "already off: not again");
        assert!(!gate.reopen_if_due(closed_at + COOL_DOWN - Duration::from_millis(1)));
        assert_eq!(recverr(fd), 0);
        assert!(gate.reopen_if_due(closed_at + COOL_DOWN));
        assert_eq!(recverr(fd), 1);
        assert_eq!(gate.closed_until(), None);
        // Counting starts afresh.
        assert!(!gate.counted(MAX_ERRORS_PER_SECOND as usize, closed_at + COOL_DOWN));
    }
}
