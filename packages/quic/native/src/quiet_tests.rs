//! Probing a silent peer while a read waits on it (quiet.rs), over real sockets on loopback, with the ICMP hint of
//! unreachable.rs behind it. The test transport has no keep-alive and quinn's 30 s idle timeout, so without the
//! probes a receive-only side sends nothing after the peer dies and nothing is found within the guard.

use std::time::Duration;

use quinn::ConnectionError;

use crate::quiet::watch_quiet_peer;
use crate::unreachable::Watchlist;
use crate::unreachable_tests::{accepted, client, dial, relay, server, verdicts_until, GUARD};

/// Short, so a test sees many intervals; what it must not do is counted, not timed.
const INTERVAL: Duration = Duration::from_millis(40);

/// Waits (polling, as nothing signals a probe) until `done`, within the guard.
async fn until(done: impl Fn() -> bool) {
    tokio::time::timeout(GUARD, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("within the guard");
}

#[tokio::test]
async fn a_silent_live_peer_is_probed_only_while_a_read_waits_and_its_acks_keep_the_connection() {
    let server = server();
    let watchlist = Watchlist::new();
    let endpoint = client(&watchlist);
    let (through, _relay) = relay(server.endpoint.local_addr().unwrap()).await;
    let (dialled, theirs) = tokio::join!(dial(&endpoint, through, server.key, &watchlist), accepted(&server));
    let mut verdicts = watchlist.verdicts();
    tokio::spawn(watch_quiet_peer(dialled.connection.clone(), dialled.watch.clone(), INTERVAL));

    // No read waits: once the handshake's last frames went, ten intervals pass and nothing is sent (an idle
    // connection costs nothing new).
    tokio::time::sleep(INTERVAL * 5).await;
    let sent = dialled.connection.stats().udp_tx.datagrams;
    tokio::time::sleep(INTERVAL * 10).await;
    assert_eq!(dialled.watch.quiet.probes(), 0);
    assert_eq!(dialled.connection.stats().udp_tx.datagrams, sent, "nothing sent while idle");

    // A call whose handler thinks before its first token: our read waits on a live, silent peer.
    let (mut send, mut recv) = dialled.connection.open_bi().await.unwrap();
    send.write_all(b"request").await.unwrap();
    let (mut their_send, mut their_recv) = tokio::time::timeout(GUARD, theirs.accept_bi()).await.unwrap().unwrap();
    assert_eq!(their_recv.read_chunk(64, true).await.unwrap().unwrap().bytes, &b"request"[..]);
    let watch = dialled.watch.clone();
    let reading = tokio::spawn(async move {
        let _waiting = watch.quiet.begin();
        recv.read_chunk(64, true).await.unwrap().unwrap().bytes
    });
    until(|| dialled.watch.quiet.probes() >= 5).await;

    // Every probe reached the peer (its ACK answered each), nothing was judged, and the first token arrives.
    for _ in 0..5 {
        let probe = tokio::time::timeout(GUARD, theirs.read_datagram()).await.unwrap().unwrap();
        assert_eq!(&probe[..], &[0]);
    }
    assert!(dialled.connection.close_reason().is_none());
    assert_eq!(*verdicts.borrow_and_update(), Default::default(), "no hint, no judgement");
    their_send.write_all(b"token").await.unwrap();
    assert_eq!(&tokio::time::timeout(GUARD, reading).await.unwrap().unwrap()[..], b"token");

    // The read is done: the probes stop (at most one more, from a check already under way).
    let after = dialled.watch.quiet.probes();
    tokio::time::sleep(INTERVAL * 10).await;
    assert!(dialled.watch.quiet.probes() <= after + 1, "{} probes after the read ended", dialled.watch.quiet.probes() - after);
}

// The error queue is read on Linux only (error_queue.rs).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_dead_peer_behind_a_waiting_read_is_found_though_we_send_nothing_else() {
    let server = server();
    let watchlist = Watchlist::new();
    let endpoint = client(&watchlist);
    let (through, relay) = relay(server.endpoint.local_addr().unwrap()).await;
    let (dialled, theirs) = tokio::join!(dial(&endpoint, through, server.key, &watchlist), accepted(&server));
    let mut verdicts = watchlist.verdicts();
    tokio::spawn(watch_quiet_peer(dialled.connection.clone(), dialled.watch.clone(), INTERVAL));

    // A streamed call: the first item arrives, and our read waits for the next.
    let (mut send, mut recv) = dialled.connection.open_bi().await.unwrap();
    send.write_all(b"request").await.unwrap();
    let (mut their_send, _their_recv) = tokio::time::timeout(GUARD, theirs.accept_bi()).await.unwrap().unwrap();
    their_send.write_all(b"item 0").await.unwrap();
    assert_eq!(&tokio::time::timeout(GUARD, recv.read_chunk(64, true)).await.unwrap().unwrap().unwrap().bytes[..], b"item 0");
    let watch = dialled.watch.clone();
    let reading = tokio::spawn(async move {
        let _waiting = watch.quiet.begin();
        recv.read_chunk(64, true).await
    });
    // Let our ACK of the item go before the peer dies: then nothing of ours would go to its port but a probe.
    tokio::time::sleep(INTERVAL).await;
    relay.abort();
    let _ = relay.await;

    let verdict = verdicts_until(&mut verdicts, |v| v.gone > 0).await;
    assert_eq!((verdict.gone, verdict.cleared), (1, 0));
    assert!(dialled.watch.quiet.probes() >= 1);
    assert!(dialled.watch.is_gone());
    assert!(matches!(dialled.connection.close_reason(), Some(ConnectionError::LocallyClosed)));
    assert!(tokio::time::timeout(GUARD, reading).await.unwrap().unwrap().is_err(), "the waiting read failed");
}

#[test]
fn the_quiet_peer_task_starts_at_the_first_waiting_read_once_and_not_before() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    let waiting = crate::quiet::Waiting::default();
    let starts = Arc::new(AtomicU32::new(0));
    let counted = starts.clone();
    waiting.start_on_first_wait(move || {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    // A connection nobody waits on (a listener's idle client) never starts its task.
    assert_eq!(starts.load(Ordering::Relaxed), 0);
    {
        let _first = waiting.begin();
        assert_eq!(starts.load(Ordering::Relaxed), 1);
        let _second = waiting.begin(); // a second read waiting at once
    }
    drop(waiting.begin()); // the next wait, after none waited
    assert_eq!(starts.load(Ordering::Relaxed), 1, "started once, by the first read that waited");
}
