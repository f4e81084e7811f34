//! The accepting side of an endpoint: every arrival passes the listener limits before any TLS work, every
//! handshake has its own deadline, and every refusal is reported (JavaScript turns reports into core Refusals).

use std::net::SocketAddr;
use std::sync::Arc;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::{ServerConfig, TransportConfig, VarInt};
use tokio::sync::mpsc;

use crate::admission::{Admission, Admitted, Evicted};
use crate::handshake::{classify, HandshakeFailure};
use crate::tls::{self, Credentials};
use crate::trim::Trimmer;

/// Refusal reports waiting for JavaScript; more are dropped rather than queued without bound (a flood of
/// refusals must not cost memory; JavaScript drains the queue on every turn of its event loop).
pub const REFUSAL_QUEUE: usize = 1024;
/// Bytes quinn buffers for one arrival not yet accepted or refused, beyond its first datagram. We decide at
/// once: a client sends a few Initial datagrams, plus its 0-RTT request to a known listener, before our answer.
/// 64 KiB is ample for agent calls; larger early data is dropped and sent again after the handshake.
const INCOMING_BUFFER: u64 = 64 * 1024;
/// The same, for all undecided arrivals together (quinn's default is 100 MiB).
const INCOMING_BUFFER_TOTAL: u64 = 8 * 1024 * 1024;

/// The application close an evicted connection gets: core's RESOURCE_EXHAUSTED (errorCodeToNumber), which the
/// peer's channel reports as the node:tls channels report their GOAWAY; its pool dials again when it next needs us.
const EVICTED_CODE: u32 = 10;
const EVICTED_REASON: &[u8] = b"listener full: this idle connection was closed to admit a peer with fewer connections";

/// A connection refused or dropped before it reached JavaScript.
#[derive(Debug)]
pub struct RefusalEvent {
    /// 'connection' (listener limits, before TLS) or 'handshake'.
    pub stage: &'static str,
    pub reason: &'static str,
    pub remote: SocketAddr,
    pub detail: String,
    /// The agent key of the peer it concerns, where known (an evicted connection whose handshake was done).
    pub peer_key: Option<[u8; 32]>,
}

/// A connection that completed its handshake and proved an agent key, still holding its place in the limits.
pub struct Accepted {
    pub connection: quinn::Connection,
    pub peer_key: [u8; 32],
    pub admitted: Admitted,
    /// Set for a resumed connection handed over at 0.5-RTT (its client is known from the ticket): how its
    /// handshake ends.
    pub handshake: Option<quinn::ZeroRttAccepted>,
}

/// quinn's server config for a listener: our TLS, our transport settings, and quinn's own bounds on arrivals
/// that wait for the accept loop (which decides each at once, so the loop's limits are the ones that bind).
pub fn server_config(credentials: &Credentials, transport: Arc<TransportConfig>, admission: &Admission) -> Result<ServerConfig, String> {
    let tls = tls::server_config(credentials).map_err(|e| e.to_string())?;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    config
        .transport_config(transport)
        .max_incoming(admission.limits().max_connections as usize)
        .incoming_buffer_size(INCOMING_BUFFER)
        .incoming_buffer_size_total(INCOMING_BUFFER_TOTAL);
    Ok(config)
}

fn report(refusals: &mpsc::Sender<RefusalEvent>, event: RefusalEvent) {
    let _ = refusals.try_send(event);
}

/// Accepts arrivals until the endpoint closes. Each one is admitted by the limits (or refused with QUIC's
/// CONNECTION_REFUSED, a stateless answer smaller than the client's Initial) before quinn does any TLS work;
/// admitted handshakes run concurrently, each bounded by the handshake timeout.
pub async fn accept_loop(
    endpoint: quinn::Endpoint,
    admission: Arc<Admission>,
    established: mpsc::Sender<Accepted>,
    refusals: mpsc::Sender<RefusalEvent>,
) {
    let handshake_timeout = admission.limits().handshake_timeout;
    let trimmer = Arc::new(Trimmer::spawn());
    while let Some(incoming) = endpoint.accept().await {
        let remote = incoming.remote_address();
        let admitted = match admission.admit(remote) {
            Ok((admitted, evicted)) => {
                if let Some(evicted) = evicted {
                    evict(evicted, &refusals);
                }
                admitted
            }
            Err(refused) => {
                incoming.refuse();
                report(&refusals, RefusalEvent { stage: "connection", reason: refused.reason(), remote, detail: String::new(), peer_key: None });
                continue;
            }
        };
        let connecting = match incoming.accept() {
            Ok(connecting) => connecting,
            Err(error) => {
                let (failure, detail) = classify(&error);
                report(&refusals, RefusalEvent { stage: "handshake", reason: failure.reason(), remote, detail, peer_key: None });
                continue;
            }
        };
        let established = established.clone();
        let refusals = refusals.clone();
        let trimmer = trimmer.clone();
        tokio::spawn(async move {
            let _trim_after = TrimAfter(&trimmer);
            // A resumed client is known from its ticket (rustls restores the certificate it proved when the ticket
            // was issued), so its connection is handed over now, at 0.5-RTT, and its 0-RTT calls are served a round
            // trip sooner. Anyone else proves its key in the handshake first. (For a listener into_0rtt never fails.)
            let connecting = match connecting.into_0rtt() {
                Ok((connection, done)) if !evictable(&admitted, &connection, remote) => {
                    drop(done);
                    return;
                }
                Ok((connection, done)) => match tls::peer_key(&connection) {
                    Some(peer_key) => {
                        admitted.identify(peer_key);
                        let _ = established.send(Accepted { connection, peer_key, admitted, handshake: Some(done) }).await;
                        return;
                    }
                    None => {
                        let failure = full_handshake(connection, done, handshake_timeout, admitted, &established).await;
                        if let Some((failure, detail)) = failure {
                            report(&refusals, RefusalEvent { stage: "handshake", reason: failure.reason(), remote, detail, peer_key: None });
                        }
                        return;
                    }
                },
                Err(connecting) => connecting,
            };
            // On timeout the handshake is dropped, which closes it; its place in the limits goes with `admitted`.
            let failure = match tokio::time::timeout(handshake_timeout, connecting).await {
                Err(_) => (
                    HandshakeFailure::Timeout,
                    format!("no completed handshake within {} ms", handshake_timeout.as_millis()),
                ),
                Ok(Err(error)) => classify(&error),
                Ok(Ok(connection)) if !evictable(&admitted, &connection, remote) => return,
                Ok(Ok(connection)) => match tls::peer_key(&connection) {
                    Some(peer_key) => {
                        admitted.identify(peer_key);
                        let _ = established.send(Accepted { connection, peer_key, admitted, handshake: None }).await;
                        return;
                    }
                    None => {
                        connection.close(VarInt::from_u32(8), b"no agent key");
                        (HandshakeFailure::WrongKeyType, "handshake completed without an Ed25519 agent key".into())
                    }
                },
            };
            let (failure, detail) = failure;
            drop(admitted); // the place is free before anyone hears of the refusal
            report(&refusals, RefusalEvent { stage: "handshake", reason: failure.reason(), remote, detail, peer_key: None });
        });
    }
}

/// Closes an evicted connection (a GOAWAY's equivalent: an application close with RESOURCE_EXHAUSTED) and reports it.
fn evict(evicted: Evicted, refusals: &mpsc::Sender<RefusalEvent>) {
    if let Some(close) = evicted.close {
        close();
    }
    let detail = String::from_utf8_lossy(EVICTED_REASON).into_owned();
    report(refusals, RefusalEvent { stage: "connection", reason: "evicted", remote: evicted.remote, detail, peer_key: evicted.peer_key });
}

/// From now an eviction closes `connection`. False when it was evicted already, in its handshake: it is closed now
/// (its place went to the newcomer, and the eviction was reported then).
fn evictable(admitted: &Admitted, connection: &quinn::Connection, remote: SocketAddr) -> bool {
    let handle = connection.clone();
    let close = Box::new(move || handle.close(VarInt::from_u32(EVICTED_CODE), EVICTED_REASON));
    if admitted.on_evict(remote, close) {
        return true;
    }
    connection.close(VarInt::from_u32(EVICTED_CODE), EVICTED_REASON);
    false
}

/// Tells the trimmer when a handshake task ends, however it ends.
struct TrimAfter<'a>(&'a Trimmer);

impl Drop for TrimAfter<'_> {
    fn drop(&mut self) {
        self.0.handshake_done();
    }
}

/// The handshake of a connection that is not resumed: the client proves its key before it is handed over.
/// Returns the refusal, if any (its place in the limits is freed before).
async fn full_handshake(
    connection: quinn::Connection,
    done: quinn::ZeroRttAccepted,
    timeout: std::time::Duration,
    admitted: Admitted,
    established: &mpsc::Sender<Accepted>,
) -> Option<(HandshakeFailure, String)> {
    let failure = match tokio::time::timeout(timeout, done).await {
        Err(_) => {
            connection.close(VarInt::from_u32(0), b"handshake timeout");
            (HandshakeFailure::Timeout, format!("no completed handshake within {} ms", timeout.as_millis()))
        }
        Ok(_) => match (connection.close_reason(), tls::peer_key(&connection)) {
            // A client that finished its handshake and closed at once (a dial abandoned as it completed): an
            // application close travels only after the handshake, so this is a channel that lived, handed over
            // already closing (as before 0-RTT) rather than reported as a refused handshake.
            (None | Some(quinn::ConnectionError::ApplicationClosed(_)), Some(peer_key)) => {
                admitted.identify(peer_key);
                let _ = established.send(Accepted { connection, peer_key, admitted, handshake: None }).await;
                return None;
            }
            (Some(error), _) => classify(&error),
            (None, None) => {
                connection.close(VarInt::from_u32(8), b"no agent key");
                (HandshakeFailure::WrongKeyType, "handshake completed without an Ed25519 agent key".into())
            }
        },
    };
    drop(admitted);
    Some(failure)
}

#[cfg(test)]
#[path = "listener_tests.rs"]
mod tests;
