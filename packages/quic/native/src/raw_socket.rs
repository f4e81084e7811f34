//! The endpoint's UDP socket, shared by QUIC and a raw-datagram side channel. Datagrams that look like STUN
//! (top two bits 00 and the magic cookie) are copied to JavaScript; QUIC never sees such packets as valid
//! (its fixed bit is 1, and we ask peers not to grease it), so they are left for quinn to drop.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::sync::mpsc;

use crate::unreachable::Watchlist;

const STUN_MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];
/// Raw datagrams waiting for JavaScript; more are dropped (UDP semantics) rather than buffered without bound.
pub const RAW_QUEUE: usize = 1024;

pub fn is_stun(datagram: &[u8]) -> bool {
    datagram.len() >= 20 && datagram[0] & 0xc0 == 0 && datagram[4..8] == STUN_MAGIC_COOKIE
}

pub struct RawDatagram {
    pub from: SocketAddr,
    pub data: Vec<u8>,
}

pub struct SplittingSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    raw: mpsc::Sender<RawDatagram>,
    /// Where ICMP port unreachable hints go (Linux; see unreachable.rs).
    unreachable: Option<IcmpHints>,
}

/// The socket's ICMP error queue and the connections its hints are about.
pub struct IcmpHints {
    #[cfg(target_os = "linux")]
    pub queue: crate::error_queue::ErrorQueue,
    pub watchlist: Arc<Watchlist>,
    /// Ends the task that drains the error queue when an error is queued (error_queue::watch) with the socket.
    #[cfg(target_os = "linux")]
    pub _watching: tokio::sync::oneshot::Sender<()>,
}

/// Receives retried in one poll after errors that only reported queued ICMP errors; past this the task yields
/// (a flood of ICMP must not hold the endpoint's driver).
const ICMP_RETRIES: usize = 8;

impl fmt::Debug for SplittingSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SplittingSocket").finish_non_exhaustive()
    }
}

impl SplittingSocket {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, raw: mpsc::Sender<RawDatagram>, unreachable: Option<IcmpHints>) -> Self {
        Self { inner, raw, unreachable }
    }

    /// After a receive error: true when it only reported a queued ICMP error (then the queue was read, its hints
    /// passed on, and the receive can be retried). With IP_RECVERR, Linux fails the socket's next recvmsg (and
    /// sendmsg) once per ICMP error. quinn's endpoint driver ends the endpoint on any receive error but
    /// ECONNRESET; quinn 0.11's tokio socket happens to retry failed receives itself, and this keeps that true
    /// whatever socket wrapper a quinn release brings.
    fn took_icmp_errors(&self, error: &io::Error) -> bool {
        let Some(hints) = &self.unreachable else { return false };
        #[cfg(target_os = "linux")]
        let read = hints.queue.drain(|peer| hints.watchlist.hint(peer));
        #[cfg(not(target_os = "linux"))]
        let read = {
            let _ = hints;
            0
        };
        read > 0 || crate::error_queue::is_icmp_error(error)
    }

    /// Sends one datagram outside QUIC (e.g. a STUN request), waiting while the socket is not writable.
    pub async fn send_raw(self: &Arc<Self>, destination: SocketAddr, contents: &[u8]) -> io::Result<()> {
        let transmit = Transmit { destination, ecn: None, contents, segment_size: None, src_ip: None };
        let mut poller = self.inner.clone().create_io_poller();
        loop {
            match self.inner.try_send(&transmit) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::future::poll_fn(|cx| poller.as_mut().poll_writable(cx)).await?;
                }
                other => return other,
            }
        }
    }
}

impl AsyncUdpSocket for SplittingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        // A send that fails because an ICMP error is pending (ECONNREFUSED, once per error) never reaches quinn:
        // quinn-udp drops the datagram and reports success, and QUIC retransmits it.
        self.inner.try_send(transmit)
    }

    fn poll_recv(&self, cx: &mut Context, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> Poll<io::Result<usize>> {
        let mut result = self.inner.poll_recv(cx, bufs, meta);
        let mut retries = 0;
        while let Poll::Ready(Err(error)) = &result {
            if !self.took_icmp_errors(error) {
                return result;
            }
            retries += 1;
            if retries == ICMP_RETRIES {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            result = self.inner.poll_recv(cx, bufs, meta);
        }
        if let Poll::Ready(Ok(count)) = &result {
            for (buf, meta) in bufs.iter().zip(meta.iter()).take(*count) {
                // Coalesced (GRO) batches are QUIC from one peer; a STUN reply always arrives alone.
                if meta.stride == meta.len && is_stun(&buf[..meta.len]) {
                    let _ = self.raw.try_send(RawDatagram { from: meta.addr, data: buf[..meta.len].to_vec() });
                }
            }
        }
        result
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
