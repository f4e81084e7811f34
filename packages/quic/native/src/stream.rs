//! One bidirectional QUIC stream. Writes resolve only within flow-control credit (backpressure); small writes
//! and ready reads take a synchronous path so the common case costs no thread hop.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use quinn::{RecvStream, SendStream, VarInt};
use tokio::sync::{watch, Mutex};

use crate::errors::{coded, connection_error, read_error, write_error};
use crate::unreachable::PeerWatch;
use crate::first_write::FirstWrite;
use crate::last_write::{self, LAST_WRITE_MAX};
use crate::live::{Live, STREAMS};
use crate::reads::{stopped_read, wait_for_reset, wait_for_stop, Armed, Stop};
use crate::stream_credit::StreamSlot;

#[napi]
pub struct QuicStream {
    /// Halves are None once released, freeing their buffers without waiting for JS garbage collection.
    send: Arc<Mutex<Option<SendStream>>>,
    recv: Arc<Mutex<Option<RecvStream>>>,
    /// Set by a local reset (or a refusal, see `refused`): wakes a read or write that is waiting, so it fails at once.
    reset: watch::Sender<Option<Stop>>,
    /// The peer stopped our sending side: a refusal is decided once, after a grace (`refused`).
    refusing: std::sync::atomic::AtomicBool,
    /// The code of a RESET_STREAM asked by `reset` (not `cancel`, whose send half is finished on purpose).
    hard_reset: std::sync::Mutex<Option<u32>>,
    live: std::sync::Mutex<Option<Live>>,
    /// A stream the peer opened holds its place in the peer's grant until released (see stream_credit.rs).
    slot: std::sync::Mutex<Option<StreamSlot>>,
    /// The connection's push reads (reads.rs), when JavaScript started them.
    arming: Option<tokio::sync::mpsc::UnboundedSender<Armed>>,
    /// The stream's first bytes were handed to the connection (first_write.rs).
    first_write: FirstWrite,
    /// The connection's suspicion state (unreachable.rs): errors of a connection judged gone say so.
    watch: Arc<PeerWatch>,
    /// We opened it (we are the caller): a read of it waits for a reply or items, and a silent peer is probed
    /// meanwhile (quiet.rs). A handler's read (waiting for the caller's end or cancel) is not: it would double
    /// the probes of a silent pair, and a handler learns of a dead caller when it writes.
    ours: bool,
}

/// Chunks received and not yet handed to JavaScript: gathered first, so the bytes are copied once into a
/// buffer of exactly their size (growing a Vec chunk by chunk copied most bytes twice and over-allocated).
#[derive(Default)]
pub(crate) struct Gathered {
    chunks: Vec<Bytes>,
    pub(crate) len: usize,
}

impl Gathered {
    pub(crate) fn push(&mut self, bytes: Bytes) {
        self.len += bytes.len();
        self.chunks.push(bytes);
    }

    pub(crate) fn into_vec(self) -> Vec<u8> {
        if self.chunks.len() == 1 {
            return Vec::from(self.chunks.into_iter().next().unwrap_or_default());
        }
        let mut out = Vec::with_capacity(self.len);
        for chunk in &self.chunks {
            out.extend_from_slice(chunk);
        }
        out
    }
}

/// Chunks taken from quinn per call: each call locks the connection once, and quinn holds received data as
/// one chunk per STREAM frame (~1.2 KB), so reading them one at a time locked it ~100 times per 128 KB.
const CHUNK_BATCH: usize = 64;

thread_local! {
    /// The array `read_chunks` fills, kept per thread: it is all empty `Bytes` between calls (each chunk is taken
    /// out), so a call neither builds nor drops 64 of them (that was ~1.3% of the event loop's time at 32 in flight).
    static CHUNK_SLOTS: RefCell<[Bytes; CHUNK_BATCH]> = RefCell::new(std::array::from_fn(|_| Bytes::new()));
}

/// Gathers chunks that are ready now (no waiting), until at least `max` bytes (a batch may pass it by up to
/// CHUNK_BATCH chunks). Returns true when the peer's end of the stream was reached.
pub(crate) fn drain_ready(recv: &mut RecvStream, max: usize, out: &mut Gathered) -> std::result::Result<bool, quinn::ReadError> {
    CHUNK_SLOTS.with(|slots| match slots.try_borrow_mut() {
        Ok(mut slots) => drain_into(recv, max, out, &mut slots),
        // Not reentrant in practice (nothing in a drain calls back into it); a fresh array keeps it correct anyway.
        Err(_) => drain_into(recv, max, out, &mut std::array::from_fn(|_| Bytes::new())),
    })
}

fn drain_into(recv: &mut RecvStream, max: usize, out: &mut Gathered, batch: &mut [Bytes; CHUNK_BATCH]) -> std::result::Result<bool, quinn::ReadError> {
    while out.len < max {
        match recv.read_chunks(&mut batch[..]).now_or_never() {
            Some(Ok(Some(count))) => batch[..count].iter_mut().for_each(|chunk| out.push(std::mem::take(chunk))),
            Some(Ok(None)) => return Ok(true),
            None => return Ok(false),
            Some(Err(e)) => return if out.len == 0 { Err(e) } else { Ok(false) },
        }
    }
    Ok(false)
}

fn released() -> napi::Error {
    coded("CLOSED", "stream released")
}

impl QuicStream {
    pub fn new(send: SendStream, recv: RecvStream, arming: Option<tokio::sync::mpsc::UnboundedSender<Armed>>) -> Self {
        Self {
            arming,
            send: Arc::new(Mutex::new(Some(send))),
            recv: Arc::new(Mutex::new(Some(recv))),
            reset: watch::channel(None).0,
            refusing: std::sync::atomic::AtomicBool::new(false),
            hard_reset: std::sync::Mutex::new(None),
            live: std::sync::Mutex::new(Some(Live::new(&STREAMS))),
            slot: std::sync::Mutex::new(None),
            first_write: FirstWrite::default(),
            watch: Arc::default(),
            ours: false,
        }
    }

    pub fn accepted(send: SendStream, recv: RecvStream, slot: StreamSlot, arming: Option<tokio::sync::mpsc::UnboundedSender<Armed>>, watch: Arc<PeerWatch>) -> Self {
        let mut this = Self::new(send, recv, arming);
        this.watch = watch;
        *this.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(slot);
        this
    }

    /// Marks a stream we opened (see `ours`).
    pub fn opened_by_us(mut self) -> Self {
        self.ours = true;
        self
    }

    fn locally_reset(&self) -> Option<u32> {
        match *self.reset.borrow() {
            Some(Stop::Local(code)) => Some(code),
            _ => None,
        }
    }

    async fn wait_for_reset(&self) -> u32 {
        wait_for_reset(&mut self.reset.subscribe()).await
    }

    /// A write failed: when the peer stopped our side, the stream's reads end too unless the peer ends its side
    /// (`refused`).
    fn write_failed(&self, error: quinn::WriteError) -> napi::Error {
        if let quinn::WriteError::Stopped(code) = error {
            if !self.refusing.swap(true, std::sync::atomic::Ordering::AcqRel) {
                refused(self.reset.clone(), &self.watch, code);
            }
        }
        self.watch.translate(write_error(error))
    }
}

impl QuicStream {
    /// What fits of `data` now, without waiting (0 when the send half is busy or blocked by flow control); with
    /// `finish`, the stream is also finished when all of it was taken.
    fn write_now(&self, data: &[u8], finish: bool) -> Result<u32> {
        if let Some(code) = self.locally_reset() {
            return Err(coded("LOCAL_RESET", code));
        }
        let Ok(mut guard) = self.send.try_lock() else { return Ok(0) };
        let send = guard.as_mut().ok_or_else(released)?;
        let written = match send.write(data).now_or_never() {
            Some(Ok(written)) => written,
            Some(Err(e)) => return Err(self.write_failed(e)),
            None => 0,
        };
        if finish && written == data.len() {
            send.finish().map_err(|e| coded("CLOSED", e))?;
        }
        Ok(written as u32)
    }
}

#[napi]
impl QuicStream {
    /// Writes what fits now without waiting; returns the number of bytes taken (0 when the stream is busy or
    /// blocked by flow control, and the caller should fall back to `write`). After the stream's first bytes are
    /// taken, this thread gives up its core once (first_write.rs), so the engine's thread can send them.
    #[napi]
    pub fn try_write(&self, data: Buffer) -> Result<u32> {
        let written = self.write_now(&data, false)?;
        if written > 0 {
            self.first_write.taken();
        }
        Ok(written)
    }

    /// `try_write` and, when all of `data` was taken, `try_finish` in the same call (a unary request or reply is
    /// one write and the end: one crossing and one lock of the send half instead of two). Returns the bytes
    /// taken; the stream is finished only when that is all of them.
    ///
    /// Up to LAST_WRITE_MAX bytes, the write and the finish run together on the engine's thread, where the
    /// connection's driver (a task on the same thread) cannot build a packet between them: written from this
    /// thread, quinn takes the write and the finish under two locks of the connection, and a driver that was
    /// awake took the bytes in between more often than not (a sequential echo's reply: 59 in 100 came without
    /// their end), so the end left in a packet of its own and the peer handled a second packet and read batch.
    /// The send half is locked here and handed to that task, so nothing (a release, another write) comes
    /// between; a local reset stops it. All of `data` is taken at once: what waits there for credit is capped
    /// for the whole process (last_write.rs; past the cap, the synchronous path). Taken counts as written, as a
    /// kernel's or an HTTP/2 session's taking does: until the task is done the connection counts it
    /// (`StreamSlot::hold_write`), so its channel is not idle, and a failure there (the peer stopped the stream,
    /// the connection is gone) is counted in its stats; the peer's read fails instead. With more than one engine thread
    /// (4+ cores) the driver may still run between them on another: no worse than before.
    #[napi]
    pub fn try_write_finish(&self, data: Buffer) -> Result<u32> {
        let held = if data.len() <= LAST_WRITE_MAX { last_write::hold(data.len()) } else { None };
        let Some(held) = held else { return self.write_now(&data, true) };
        if let Some(code) = self.locally_reset() {
            return Err(coded("LOCAL_RESET", code));
        }
        let Ok(mut guard) = self.send.clone().try_lock_owned() else { return Ok(0) };
        if guard.is_none() {
            return Err(released());
        }
        let bytes = Bytes::copy_from_slice(&data);
        let mut reset = self.reset.subscribe();
        // Counted on the connection until done: its channel is not idle meanwhile (JavaScript asks at an idle close).
        let counted = self.slot.lock().ok().and_then(|slot| slot.as_ref().map(StreamSlot::hold_write));
        let (stop, watch) = (self.reset.clone(), self.watch.clone());
        napi::bindgen_prelude::spawn(async move {
            let _held = held; // counted until the write and the finish are done or given up
            let Some(send) = guard.as_mut() else { return };
            let lost = tokio::select! {
                biased;
                _ = wait_for_reset(&mut reset) => false, // ours: the writer gave the stream up
                written = send.write_all(&bytes) => match written {
                    // The peer refused the request (or reply) it will not read: our read of its side ends too,
                    // unless it ends that side itself within the grace — a caller is not left waiting for its
                    // deadline (ws and HTTP/2 fail a call at the peer's stream reset at once).
                    Err(quinn::WriteError::Stopped(code)) => {
                        refused(stop, &watch, code); // the stream's last write: no other can have started one
                        true
                    }
                    Err(_) => true,
                    Ok(()) => send.finish().is_err(),
                },
            };
            // Not reported to the writer (ws and HTTP/2 do not either, once the kernel or session took a write):
            // the peer's read fails instead. Counted in the connection's stats (`heldWriteFailures`).
            if let (true, Some(counted)) = (lost, &counted) {
                counted.failed();
            }
            drop(guard);
            drop(counted);
        });
        Ok(data.len() as u32)
    }

    /// Writes all of `data`, resolving once quinn accepted it within the stream's and connection's credit.
    #[napi]
    pub async fn write(&self, data: Buffer) -> Result<()> {
        let mut guard = self.send.lock().await;
        let send = guard.as_mut().ok_or_else(released)?;
        tokio::select! {
            result = send.write_all(&data) => result.map_err(|e| self.write_failed(e)),
            code = self.wait_for_reset() => Err(coded("LOCAL_RESET", code)),
        }
    }

    /// Returns bytes already received (up to `max`), without waiting; an empty buffer once the peer's end was
    /// reached; None when nothing is ready (then `read`).
    #[napi]
    pub fn try_read(&self, max: u32) -> Result<Option<Buffer>> {
        let Ok(mut guard) = self.recv.try_lock() else { return Ok(None) };
        let recv = guard.as_mut().ok_or_else(released)?;
        let mut out = Gathered::default();
        match drain_ready(recv, max as usize, &mut out) {
            Ok(_) if out.len > 0 => Ok(Some(out.into_vec().into())),
            Ok(true) => Ok(Some(Vec::new().into())),
            Ok(false) => Ok(None),
            Err(e) => Err(self.watch.translate(read_error(e))),
        }
    }

    /// The next bytes (at most `max`: everything already received, once at least one chunk is), or null once
    /// the peer finished its side.
    #[napi]
    pub async fn read(&self, max: u32) -> Result<Option<Buffer>> {
        let mut guard = self.recv.lock().await;
        let recv = guard.as_mut().ok_or_else(released)?;
        let _waiting = self.ours.then(|| self.watch.quiet.begin()); // a reply or items: a silent peer is probed meanwhile (quiet.rs)
        let mut stop = self.reset.subscribe();
        let first = tokio::select! {
            biased;
            stop = wait_for_stop(&mut stop) => stopped_read(stop, recv, max as usize).map_err(|e| self.watch.translate(e))?,
            result = recv.read_chunk(max as usize, true) => result.map_err(|e| self.watch.translate(read_error(e)))?,
        };
        let Some(first) = first else { return Ok(None) };
        let mut out = Gathered::default();
        out.push(first.bytes);
        // Coalesce what else is already here: one call into JavaScript per burst, not per QUIC packet.
        let _ = drain_ready(recv, max as usize, &mut out);
        Ok(Some(out.into_vec().into()))
    }

    /// Asks for the next bytes (at most `max`) through the connection's push reads: they arrive, with `token`,
    /// in a later `take_reads` batch (reads.rs). False when push reads are not running (never started, or the
    /// connection is closed): then `read`. One read at a time per stream, as with `read`.
    #[napi]
    pub fn arm_read(&self, token: u32, max: u32) -> bool {
        let Some(arming) = &self.arming else { return false };
        arming
            .send(Armed { token, max: max as usize, recv: self.recv.clone(), reset: self.reset.subscribe(), ours: self.ours })
            .is_ok()
    }

    /// `try_read` and, when nothing is ready, `arm_read` in the same call: the bytes (an empty buffer at the
    /// peer's end), or true once the read is armed (its bytes come in a later `take_reads` batch), or false when
    /// neither (push reads not running: then `read`). A read that waits costs one crossing instead of two.
    #[napi]
    pub fn read_or_arm(&self, token: u32, max: u32) -> Result<Either<Buffer, bool>> {
        match self.try_read(max)? {
            Some(ready) => Ok(Either::A(ready)),
            None => Ok(Either::B(self.arm_read(token, max))),
        }
    }

    /// Ends our sending side now if no write holds the stream; false when one does (then `finish`).
    #[napi]
    pub fn try_finish(&self) -> Result<bool> {
        let Ok(mut guard) = self.send.try_lock() else { return Ok(false) };
        guard.as_mut().ok_or_else(released)?.finish().map_err(|e| coded("CLOSED", e))?;
        Ok(true)
    }

    /// Ends our sending side after everything written so far.
    #[napi]
    pub async fn finish(&self) -> Result<()> {
        let mut guard = self.send.lock().await;
        guard.as_mut().ok_or_else(released)?.finish().map_err(|e| coded("CLOSED", e))
    }

    /// Aborts both directions with `code`: RESET_STREAM for our side, STOP_SENDING for theirs. A read or write
    /// that is waiting fails at once; the halves are reset as soon as it has let go of them.
    #[napi]
    pub fn reset(&self, code: u32) {
        if self.locally_reset().is_some() {
            return;
        }
        self.reset.send_replace(Some(Stop::Local(code))); // stored even with no receiver (send would drop it), so locally_reset sees it
        if let Ok(mut hard) = self.hard_reset.lock() {
            *hard = Some(code);
        }
        let code = VarInt::from_u32(code);
        if let (Ok(mut send), Ok(mut recv)) = (self.send.try_lock(), self.recv.try_lock()) {
            send.as_mut().map(|s| s.reset(code));
            recv.as_mut().map(|r| r.stop(code));
            return;
        }
        let (send, recv) = (self.send.clone(), self.recv.clone());
        napi::bindgen_prelude::spawn(async move {
            send.lock().await.as_mut().map(|s| s.reset(code));
            recv.lock().await.as_mut().map(|r| r.stop(code));
        });
    }

    /// Stops the peer's sending side only (STOP_SENDING with `code`), keeping ours open: a side that will read no
    /// more of the stream but still writes (the hostile-peer tests use it to refuse a request and hold the stream).
    /// False when a read holds the receiving half.
    #[napi]
    pub fn stop(&self, code: u32) -> bool {
        let Ok(mut recv) = self.recv.try_lock() else { return false };
        recv.as_mut().map(|r| r.stop(VarInt::from_u32(code)).is_ok()).unwrap_or(false)
    }

    /// Gives up on a stream we opened without losing what was just written (the caller's cancel message, with
    /// its reason): our side is finished after it, where RESET_STREAM would let the peer drop it unread, and
    /// theirs is stopped with `code` (STOP_SENDING). A read or write that is waiting fails at once. Returns
    /// false, doing nothing, when a write holds our side (part of a frame may be unsent): then `reset`.
    #[napi]
    pub fn cancel(&self, code: u32) -> bool {
        if self.locally_reset().is_some() {
            return true;
        }
        let Ok(mut send) = self.send.try_lock() else { return false };
        match send.as_mut().map(|s| s.finish()) {
            Some(Ok(())) => {}
            _ => return false,
        }
        drop(send);
        self.reset.send_replace(Some(Stop::Local(code))); // stored even with no receiver (send would drop it), so locally_reset sees it
        let code = VarInt::from_u32(code);
        if let Ok(mut recv) = self.recv.try_lock() {
            recv.as_mut().map(|r| r.stop(code));
            return true;
        }
        let recv = self.recv.clone();
        napi::bindgen_prelude::spawn(async move {
            recv.lock().await.as_mut().map(|r| r.stop(code));
        });
        true
    }

    /// Resolves once the peer stopped our sending side (STOP_SENDING): its code. Null once our side is done
    /// otherwise (all of it delivered, the stream released, or a local reset); fails as reads do when the
    /// connection is lost (a caller gone with its connection is a cancel too: read as "done", its handler waited
    /// for ever). A handler whose caller ended its side with its request (agentlink/2) learns of a cancel this way
    /// while it is not writing. No lock is held while it waits (writes go on); one per stream at most is asked
    /// (quic-stream.ts), and it ends with the stream's data or the connection (docs/security.md).
    #[napi]
    pub async fn stopped(&self) -> Result<Option<u32>> {
        let stopped = {
            let guard = self.send.lock().await;
            match guard.as_ref() {
                Some(send) => send.stopped(),
                None => return Ok(None),
            }
        };
        let mut reset = self.reset.subscribe();
        tokio::select! {
            biased;
            stop = wait_for_stop(&mut reset) => Ok(match stop {
                Stop::Local(_) => None,
                Stop::Refused(code) => Some(code),
            }),
            outcome = stopped => match outcome {
                Ok(Some(code)) => Ok(u32::try_from(code.into_inner()).ok().or(Some(u32::MAX))),
                Err(quinn::StoppedError::ConnectionLost(error)) => Err(self.watch.translate(connection_error(&error))),
                _ => Ok(None),
            },
        }
    }

    /// Sends this stream's data before lower-priority streams of the same connection (higher = sooner).
    #[napi]
    pub fn set_priority(&self, priority: i32) {
        if let Ok(send) = self.send.try_lock() {
            send.as_ref().map(|s| s.set_priority(priority));
        }
    }

    /// Frees both halves once the stream is done on both sides (or failed). Dropping a finished SendStream
    /// still delivers its data; an unfinished one is reset by quinn.
    #[napi]
    pub fn release(&self) {
        if let Some(live) = self.live.lock().ok().and_then(|mut l| l.take()) {
            live.release();
        }
        if let Ok(mut slot) = self.slot.lock() {
            slot.take();
        }
        // A reset that had to wait for a lock runs in a task of its own, which this one may overtake: dropping a
        // send half that was not reset makes quinn *finish* it, so the peer would read a clean end (seen: 1 of 200
        // request-timeout resets arrived as FIN). Reset again here, before letting go, whenever a reset was asked.
        let reset = self.hard_reset.lock().ok().and_then(|hard| *hard).map(VarInt::from_u32);
        // Usually no read or write holds a half (the stream ended on both sides): let go of both here, without a
        // task of its own — a spawned task per stream was a hand-off to the runtime's thread and a wake per call.
        if let (Ok(mut send), Ok(mut recv)) = (self.send.try_lock(), self.recv.try_lock()) {
            if let (Some(code), Some(s)) = (reset, send.as_mut()) {
                let _ = s.reset(code);
            }
            send.take();
            if let (Some(code), Some(r)) = (reset, recv.as_mut()) {
                let _ = r.stop(code);
            }
            recv.take();
            return;
        }
        let (send, recv) = (self.send.clone(), self.recv.clone());
        napi::bindgen_prelude::spawn(async move {
            let mut send = send.lock().await;
            if let (Some(code), Some(s)) = (reset, send.as_mut()) {
                let _ = s.reset(code);
            }
            send.take();
            let mut recv = recv.lock().await;
            if let (Some(code), Some(r)) = (reset, recv.as_mut()) {
                let _ = r.stop(code);
            }
            recv.take();
        });
    }
}

/// The peer stopped our sending side with `code`. An honest peer has then ended its own side too (a reset, or the
/// end of its reply before it let the stream go), so it waits that long — three PTOs, at least 200 ms, at most 5 s
/// (unreachable.rs `judgement_window`), for a lost packet's retransmission — and then ends the stream's reads with
/// the peer's code (`RESET|code`, as a reset from the peer), unless something stopped it first. One task per stream
/// at most (`refusing`), ended by its sleep.
fn refused(stop: watch::Sender<Option<Stop>>, watch: &PeerWatch, code: VarInt) {
    let code = u32::try_from(code.into_inner()).unwrap_or(u32::MAX);
    let grace = crate::unreachable::judgement_window(watch.rtt());
    napi::bindgen_prelude::spawn(async move {
        tokio::time::sleep(grace).await;
        stop.send_if_modified(|stop| match stop {
            None => {
                *stop = Some(Stop::Refused(code));
                true
            }
            Some(_) => false,
        });
    });
}
