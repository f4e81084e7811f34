//! Push-style reads: one task per connection waits on every stream whose JavaScript reader asked for data, and
//! hands what arrived to JavaScript in batches — one threadsafe-function call per batch, then one `take_reads`
//! crossing that returns every finished read. An async `read` per stream cost a tokio task, a promise and a
//! threadsafe function of its own (napi-rs makes one per async call) and a wake of the event loop per stream.
//!
//! Bounded exactly as the pull path: a read is armed only when JavaScript asks (one at a time per stream, at most
//! `max` bytes), so quinn's flow-control credit still returns only as JavaScript consumes; nothing is read ahead.

use std::sync::{Arc, Mutex as StdMutex};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use quinn::{Connection, RecvStream};
use tokio::sync::{mpsc, watch, Mutex};

use crate::errors::{coded, read_error};
use crate::quiet::Waiting;
use crate::unreachable::PeerWatch;
use crate::stream::{drain_ready, Gathered, QuicStream};
use crate::stream_credit::StreamCredit;

/// What JavaScript is called with when reads are ready: nothing, it then calls `take_reads`.
pub type ReadsReady = ThreadsafeFunction<(), Unknown<'static>, (), Status, false>;

/// One stream's request for its next bytes.
pub struct Armed {
    pub token: u32,
    pub max: usize,
    pub recv: Arc<Mutex<Option<RecvStream>>>,
    pub reset: watch::Receiver<Option<Stop>>,
    /// A stream we opened (a call's reply or items): while it waits, a silent peer is probed (quiet.rs).
    pub ours: bool,
}

/// A finished read: bytes (possibly with the peer's end), the end alone, or a failure (`CODE|detail`); or a
/// stream the peer opened (push accepts), which carries no token.
enum Done {
    Read { token: u32, outcome: std::result::Result<(Gathered, bool), String> },
    Accepted(QuicStream),
}

/// One read as JavaScript sees it: `data` (absent when only the end arrived), `fin` when the peer's end was
/// reached with or after it, `error` (`CODE|detail`, as thrown errors carry) when the read failed. With push
/// accepts, a stream the peer opened comes as `stream` (token 0), in the order the peer opened them.
#[napi(object, object_from_js = false)]
pub struct ReadEvent {
    pub token: u32,
    pub data: Option<Buffer>,
    pub fin: bool,
    pub error: Option<String>,
    pub stream: Option<QuicStream>,
}

/// What push accepts need to make a stream the peer opened (connection.rs does the same for `accept_streams`).
pub struct Accepting {
    pub credit: Arc<StreamCredit>,
}

#[derive(Default)]
struct Ready {
    done: Vec<Done>,
    /// A call into JavaScript is on its way: later reads join the batch it will take.
    scheduled: bool,
}

/// The connection's side of push reads: where streams arm reads and JavaScript takes the finished ones.
pub struct ReadPump {
    armed: mpsc::UnboundedSender<Armed>,
    ready: Arc<StdMutex<Ready>>,
    /// The connection's suspicion state: a read that failed because the peer was judged gone says so.
    watch: Arc<PeerWatch>,
}

impl ReadPump {
    /// Starts the connection's read task; it ends once the connection is closed and every armed read reported.
    pub fn start(connection: Connection, notify: ReadsReady, accepting: Option<Accepting>, watch: Arc<PeerWatch>) -> Self {
        let (armed, queue) = mpsc::unbounded_channel();
        let ready = Arc::new(StdMutex::new(Ready::default()));
        let arming = accepting.as_ref().map(|_| armed.clone());
        napi::bindgen_prelude::spawn(run(connection, queue, ready.clone(), notify, accepting.zip(arming), watch.clone()));
        Self { armed, ready, watch }
    }

    pub fn arming(&self) -> mpsc::UnboundedSender<Armed> {
        self.armed.clone()
    }

    pub fn take(&self) -> Vec<ReadEvent> {
        let done = {
            let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            ready.scheduled = false;
            std::mem::take(&mut ready.done)
        };
        done.into_iter()
            .map(|done| match done {
                Done::Read { token, outcome: Ok((data, fin)) } => {
                    ReadEvent { token, data: (data.len > 0).then(|| data.into_vec().into()), fin, error: None, stream: None }
                }
                Done::Read { token, outcome: Err(error) } => ReadEvent { token, data: None, fin: false, error: Some(self.watch.translate_reason(error)), stream: None },
                Done::Accepted(stream) => ReadEvent { token: 0, data: None, fin: false, error: None, stream: Some(stream) },
            })
            .collect()
    }
}

async fn run(
    connection: Connection,
    mut queue: mpsc::UnboundedReceiver<Armed>,
    ready: Arc<StdMutex<Ready>>,
    notify: ReadsReady,
    accepting: Option<(Accepting, mpsc::UnboundedSender<Armed>)>,
    watch: Arc<PeerWatch>,
) {
    let mut reads = FuturesUnordered::new();
    let closed = connection.closed();
    tokio::pin!(closed);
    let mut open = true;
    let mut accepts = accepting.is_some();
    loop {
        tokio::select! {
            biased;
            accepted = connection.accept_bi(), if accepts => match (accepted, &accepting) {
                (Ok((send, recv)), Some((accepting, arming))) => {
                    // Every other stream already opened joins the batch (as `accept_streams` does).
                    let mut batch = vec![Done::Accepted(accepted_stream(&connection, accepting, arming, send, recv, &watch))];
                    while let Some(Ok((send, recv))) = connection.accept_bi().now_or_never() {
                        batch.push(Done::Accepted(accepted_stream(&connection, accepting, arming, send, recv, &watch)));
                    }
                    deliver(&ready, &notify, batch);
                }
                _ => accepts = false,
            },
            Some(first) = reads.next(), if !reads.is_empty() => {
                let mut batch = vec![first];
                while let Some(Some(done)) = reads.next().now_or_never() {
                    batch.push(done);
                }
                deliver(&ready, &notify, batch);
            }
            armed = queue.recv(), if open => match armed {
                Some(armed) => reads.push(read_once(armed, &watch.quiet)),
                None => open = false,
            },
            _ = &mut closed, if open => {
                // Armed reads fail now (the connection is gone); later arms find the queue closed.
                queue.close();
                while let Ok(armed) = queue.try_recv() {
                    reads.push(read_once(armed, &watch.quiet));
                }
                open = false;
            }
            else => break,
        }
    }

}

fn deliver(ready: &StdMutex<Ready>, notify: &ReadsReady, batch: Vec<Done>) {
    let call = {
        let mut ready = ready.lock().unwrap_or_else(|e| e.into_inner());
        ready.done.extend(batch);
        !std::mem::replace(&mut ready.scheduled, true)
    };
    if call {
        notify.call((), ThreadsafeFunctionCallMode::NonBlocking);
    }
}

async fn read_once(armed: Armed, waiting: &Waiting) -> Done {
    let Armed { token, max, recv, mut reset, ours } = armed;
    let outcome = async {
        let mut guard = recv.lock().await;
        let recv = guard.as_mut().ok_or_else(|| "CLOSED|stream released".to_string())?;
        let _waiting = ours.then(|| waiting.begin()); // a reply or items: a silent peer is probed meanwhile (quiet.rs)
        // A reset asked before this read got the stream has stopped it already: report the reset, not quinn's end.
        let first = tokio::select! {
            biased;
            stop = wait_for_stop(&mut reset) => stopped_read(stop, recv, max).map_err(|e| e.reason)?,
            result = recv.read_chunk(max, true) => result.map_err(|e| read_error(e).reason)?,
        };
        let mut out = Gathered::default();
        let Some(first) = first else { return Ok((out, true)) };
        out.push(first.bytes);
        // Coalesce what else is already here; note the end when it came with it (one event, not two).
        let fin = drain_ready(recv, max, &mut out).unwrap_or(false);
        Ok((out, fin))
    }
    .await;
    Done::Read { token, outcome }
}

fn accepted_stream(
    connection: &Connection,
    accepting: &Accepting,
    arming: &mpsc::UnboundedSender<Armed>,
    send: quinn::SendStream,
    recv: RecvStream,
    watch: &Arc<PeerWatch>,
) -> QuicStream {
    let (slot, grant) = accepting.credit.opened();
    if let Some(limit) = grant {
        connection.set_max_concurrent_bi_streams(quinn::VarInt::from_u32(limit));
    }
    QuicStream::accepted(send, recv, slot, Some(arming.clone()), watch.clone())
}

/// Why a stream's reads and writes end before the peer ends them: our own reset (`reset`, `cancel`), or the peer
/// refused the stream — it stopped our sending side (STOP_SENDING) and did not end its own within a grace
/// (stream.rs `refused`). A peer that stops our side has finished or reset its own, unless it means to hold us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Local(u32),
    Refused(u32),
}

/// The first stop of either kind (never, if the stream is gone without one).
pub(crate) async fn wait_for_stop(reset: &mut watch::Receiver<Option<Stop>>) -> Stop {
    let stop = match reset.wait_for(Option::is_some).await {
        Ok(stop) => *stop,
        Err(_) => None,
    };
    match stop {
        Some(stop) => stop,
        None => std::future::pending().await,
    }
}

/// The code of a local reset, once one is asked (never, if the stream is gone without one).
pub(crate) async fn wait_for_reset(reset: &mut watch::Receiver<Option<Stop>>) -> u32 {
    let code = match reset.wait_for(|stop| matches!(stop, Some(Stop::Local(_)))).await {
        Ok(stop) => *stop,
        Err(_) => None,
    };
    match code {
        Some(Stop::Local(code)) => code,
        _ => std::future::pending().await,
    }
}

/// A read that met a stop: a local reset fails it; a refusal fails it too, unless bytes or the peer's end are
/// already here (they came before the refusal was decided, and are the peer's last word).
pub(crate) fn stopped_read(stop: Stop, recv: &mut RecvStream, max: usize) -> std::result::Result<Option<quinn::Chunk>, napi::Error> {
    match stop {
        Stop::Local(code) => Err(coded("LOCAL_RESET", code)),
        Stop::Refused(code) => match recv.read_chunk(max, true).now_or_never() {
            Some(result) => result.map_err(read_error),
            None => Err(coded("RESET", code)),
        },
    }
}
