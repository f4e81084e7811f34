//! 0-RTT and 0.5-RTT bookkeeping: a connection handed to JavaScript before its handshake ended carries a watch
//! of how the handshake ended. JavaScript sends only replay-safe (idempotent) calls before it ends.

use quinn::ZeroRttAccepted;
use tokio::sync::watch;

/// Watches `done` (quinn's "handshake ended" future; for a dial, true when the peer accepted our 0-RTT data). A
/// listener's value says only whether its handshake completed (the connection is still up when it ends).
pub fn watch_handshake(done: ZeroRttAccepted, connection: &quinn::Connection, dialled: bool) -> watch::Receiver<Option<bool>> {
    let (sender, receiver) = watch::channel(None);
    // Held only until the handshake ends or fails (quinn resolves `done` either way).
    let connection = connection.clone();
    napi::bindgen_prelude::spawn(async move {
        let accepted = done.await;
        let completed = connection.close_reason().is_none();
        let _ = sender.send(Some(if dialled { accepted } else { completed }));
    });
    receiver
}

pub fn state(handshake: Option<&watch::Receiver<Option<bool>>>) -> &'static str {
    match handshake.map(|h| *h.borrow()) {
        None => "none",
        Some(None) => "pending",
        Some(Some(true)) => "accepted",
        Some(Some(false)) => "rejected",
    }
}

pub async fn wait(handshake: Option<watch::Receiver<Option<bool>>>) -> bool {
    let Some(mut handshake) = handshake else { return true };
    let ended = match handshake.wait_for(|h| h.is_some()).await {
        Ok(value) => value.unwrap_or(false),
        Err(_) => false,
    };
    ended
}
