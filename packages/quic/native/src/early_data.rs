//! 0-RTT and 0.5-RTT bookkeeping: a connection handed to JavaScript before its handshake ended carries a watch
//! of how the handshake ended. JavaScript sends only replay-safe (idempotent) calls before it ends.

use quinn::ZeroRttAccepted;
use tokio::sync::watch;

/// Watches `done` (quinn's "handshake ended" future; true when the peer accepted our 0-RTT data).
pub fn watch_handshake(done: ZeroRttAccepted) -> watch::Receiver<Option<bool>> {
    let (sender, receiver) = watch::channel(None);
    napi::bindgen_prelude::spawn(async move {
        let _ = sender.send(Some(done.await));
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
