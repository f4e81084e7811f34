//! ICMP errors for an unconnected UDP socket (Linux only). With `IP_RECVERR` (and `IPV6_RECVERR` on an IPv6 or
//! dual-stack socket) the kernel queues each ICMP error about a datagram we sent on the socket's error queue,
//! read with `MSG_ERRQUEUE`, and the next plain receive fails once (ECONNREFUSED for a port unreachable). The
//! queue counts against the socket's receive buffer, so it must be drained, or it would crowd out datagrams.
//!
//! Nothing wakes a reader for it, though: epoll reports a queued error as EPOLLERR (and EPOLLOUT), not EPOLLIN,
//! and tokio wakes readers only on EPOLLIN, so quinn would see the error only at the next datagram that arrives —
//! from a dead peer, never. With `SO_SELECT_ERR_QUEUE` the kernel adds EPOLLPRI; a duplicate of the socket's fd,
//! registered for that alone, wakes a task of ours that drains the queue (`watch`). It wakes only when an error
//! is queued, never for datagrams.
//! Elsewhere (macOS, Windows) nothing is enabled and nothing is read: a dead peer is found by the idle timeout.

use std::io;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::net::SocketAddr;

    /// Error-queue entries read at a time; then the draining task yields before reading on (the kernel keeps
    /// the socket's error set while entries remain), so an ICMP flood costs bounded work per turn.
    pub const DRAIN_BATCH: usize = 64;
    use crate::icmp_gate::IcmpGate;
    use std::mem::{size_of, zeroed};
    use std::os::fd::{AsRawFd, RawFd};
    use std::sync::Arc;
    use std::time::Instant;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    use tokio::sync::oneshot;

    /// Asks the kernel for ICMP errors on `socket`. Failures are ignored: without them we only lose the hint.
    pub fn enable(socket: &socket2::Socket, ipv6: bool) {
        let set = |level, name| set_flag(socket.as_raw_fd(), level, name, true);
        // IPv4 peers of a dual-stack socket report through the IPv4 flag, IPv6 peers through the IPv6 one.
        set(libc::IPPROTO_IP, libc::IP_RECVERR);
        if ipv6 {
            set(libc::IPPROTO_IPV6, libc::IPV6_RECVERR);
        }
        set(libc::SOL_SOCKET, libc::SO_SELECT_ERR_QUEUE);
    }

    /// Sets a boolean socket option on `fd` (also the gate's, icmp_gate.rs); a refusal is ignored, as above.
    pub fn set_flag(fd: RawFd, level: libc::c_int, name: libc::c_int, on: bool) {
        let value: libc::c_int = on.into();
        // SAFETY: the option value lives across the call and its length is given.
        unsafe { libc::setsockopt(fd, level, name, &value as *const _ as *const libc::c_void, size_of::<libc::c_int>() as libc::socklen_t) };
    }

    /// Drains `socket`'s error queue whenever an error is queued, passing port-unreachable hints to `hint`,
    /// until the returned guard is dropped. Must be called within the engine's runtime.
    /// `gate` is shared with the socket's other reader of the queue (raw_socket.rs): past its rate the endpoint stops
    /// asking for ICMP errors, and this task asks again once its cool-down is over (icmp_gate.rs).
    pub fn watch(socket: &std::net::UdpSocket, gate: Arc<IcmpGate>, hint: impl Fn(SocketAddr) + Send + 'static) -> io::Result<oneshot::Sender<()>> {
        // SAFETY: the AsyncFd owns the duplicate (a std UdpSocket), which stays open, the same fd, until it drops.
        let duplicate = unsafe { AsyncFd::register_with_interest(socket.try_clone()?, Interest::PRIORITY) }.map_err(io::Error::from)?;
        let (stop, mut stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let queue = ErrorQueue::new(duplicate.as_raw_fd(), gate.clone());
            loop {
                let reopen = gate.closed_until();
                let mut ready = tokio::select! {
                    // The gate stopped asking for errors during a flood; ask again after its cool-down.
                    _ = tokio::time::sleep_until(reopen.unwrap_or_else(Instant::now).into()), if reopen.is_some() => {
                        gate.reopen_if_due(Instant::now());
                        continue;
                    }
                    // EPOLLERR comes with every queued error too; either wakes the drain.
                    ready = duplicate.ready(Interest::PRIORITY | Interest::ERROR) => match ready {
                        Ok(ready) => ready,
                        Err(_) => return,
                    },
                    _ = &mut stopped => return,
                };
                if queue.drain(&hint) < DRAIN_BATCH {
                    ready.clear_ready();
                } else {
                    // More may wait: let other tasks run first (an ICMP flood must not hold a worker).
                    tokio::task::yield_now().await;
                }
            }
        });
        Ok(stop)
    }

    /// The destination of the datagram that drew the error, as the kernel wrote it into msg_name.
    fn socket_address(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
        // SAFETY: sockaddr_storage is large and aligned enough for either; ss_family says which one it holds.
        unsafe {
            match name.ss_family as libc::c_int {
                libc::AF_INET => {
                    let v4 = &*(name as *const _ as *const libc::sockaddr_in);
                    let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                    Some(SocketAddr::from((ip, u16::from_be(v4.sin_port))))
                }
                libc::AF_INET6 => {
                    let v6 = &*(name as *const _ as *const libc::sockaddr_in6);
                    let ip = std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr);
                    Some(SocketAddr::from((ip, u16::from_be(v6.sin6_port))))
                }
                _ => None,
            }
        }
    }

    pub struct ErrorQueue {
        fd: RawFd,
        gate: Arc<IcmpGate>,
    }

    impl ErrorQueue {
        /// `fd` must outlive this (it is the endpoint's socket, owned by the same `SplittingSocket`).
        pub fn new(fd: RawFd, gate: Arc<IcmpGate>) -> Self {
            Self { fd, gate }
        }

        /// Reads up to DRAIN_BATCH entries, calling `unreachable` with the destination of each datagram that
        /// drew an ICMP port unreachable. Returns the entries read (0: the queue was empty).
        pub fn drain(&self, mut unreachable: impl FnMut(SocketAddr)) -> usize {
            let mut read = 0;
            while read < DRAIN_BATCH {
                match self.next() {
                    Ok(Some(Some(address))) => unreachable(address),
                    Ok(Some(None)) => {}
                    Ok(None) | Err(_) => break,
                }
                read += 1;
            }
            self.gate.counted(read, Instant::now());
            read
        }

        /// One entry: Some(Some(address)) for a port unreachable, Some(None) for another error, None when empty.
        fn next(&self) -> io::Result<Option<Option<SocketAddr>>> {
            let mut name: libc::sockaddr_storage = unsafe { zeroed() };
            // The payload (the head of our datagram) is not needed; a short buffer truncates it.
            let mut payload = [0u8; 1];
            let mut iov = libc::iovec { iov_base: payload.as_mut_ptr() as *mut libc::c_void, iov_len: payload.len() };
            let mut control = [0u64; 64]; // 512 bytes, aligned for cmsghdr
            let mut message: libc::msghdr = unsafe { zeroed() };
            message.msg_name = &mut name as *mut _ as *mut libc::c_void;
            message.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            message.msg_controllen = size_of::<[u64; 64]>() as _;
            let n = unsafe { libc::recvmsg(self.fd, &mut message, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
            if n < 0 {
                let error = io::Error::last_os_error();
                return if error.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(error) };
            }
            let mut port_unreachable = false;
            // SAFETY: the kernel filled `control` up to msg_controllen; CMSG_* walk it within those bounds.
            unsafe {
                let mut header = libc::CMSG_FIRSTHDR(&message);
                while !header.is_null() {
                    let h = &*header;
                    let ours = (h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_RECVERR)
                        || (h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
                    if ours && h.cmsg_len as usize >= libc::CMSG_LEN(size_of::<libc::sock_extended_err>() as u32) as usize {
                        let error = std::ptr::read_unaligned(libc::CMSG_DATA(header) as *const libc::sock_extended_err);
                        let from_icmp = error.ee_origin == libc::SO_EE_ORIGIN_ICMP || error.ee_origin == libc::SO_EE_ORIGIN_ICMP6;
                        // ICMP type 3 code 3 and ICMPv6 type 1 code 4 both arrive as ECONNREFUSED.
                        port_unreachable |= from_icmp && error.ee_errno == libc::ECONNREFUSED as u32;
                    }
                    header = libc::CMSG_NXTHDR(&message, header);
                }
            }
            if !port_unreachable {
                return Ok(Some(None));
            }
            Ok(Some(socket_address(&name)))
        }
    }
}

#[cfg(target_os = "linux")]
pub use linux::{enable, set_flag, watch, ErrorQueue};

#[cfg(not(target_os = "linux"))]
pub fn enable(_socket: &socket2::Socket, _ipv6: bool) {}

/// Errors a receive reports because an ICMP error was queued (with IP_RECVERR): the socket is fine.
pub fn is_icmp_error(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(
            error.raw_os_error(),
            Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::EMSGSIZE | libc::EPROTO)
        )
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}
