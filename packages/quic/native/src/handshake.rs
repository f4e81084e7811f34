//! Why an incoming handshake failed, as the short stable words core's `Refusal.reason` uses. quinn reports a
//! failed handshake as a `ConnectionError` whose TLS part is text plus a TLS alert number, so our own failures
//! are told apart by the words our verifiers put first (tls.rs); what the peer sends is never trusted for that.

use quinn::ConnectionError;

use crate::tls::{WRONG_KEY, WRONG_KEY_TYPE};

/// TLS alert certificate_required (RFC 8446): the client sent no certificate though one is mandatory.
const ALERT_CERTIFICATE_REQUIRED: u64 = 116;
/// Peer-supplied text kept in a report: enough to diagnose, not a log flood.
const MAX_DETAIL: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// No handshake within the listener's handshake timeout (or quinn's idle timeout, whichever came first).
    Timeout,
    /// The client presented no certificate.
    NoCertificate,
    /// The client's certificate holds no Ed25519 key, or it signed with another scheme.
    WrongKeyType,
    /// The client did not prove the key of its certificate (the handshake signature does not verify).
    WrongKey,
    /// Another TLS failure: an alert the peer sent, or one we sent for another reason (e.g. no common ALPN).
    TlsAlert,
    /// Anything else: a protocol violation, the peer abandoning the handshake, the endpoint closing.
    Failed,
}

impl HandshakeFailure {
    pub fn reason(self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "handshake-timeout",
            HandshakeFailure::NoCertificate => "no-certificate",
            HandshakeFailure::WrongKeyType => "wrong-key-type",
            HandshakeFailure::WrongKey => "wrong-key",
            HandshakeFailure::TlsAlert => "tls-alert",
            HandshakeFailure::Failed => "handshake-failed",
        }
    }
}

/// TLS alerts travel as QUIC CRYPTO_ERROR codes 0x100 + alert.
fn tls_alert(code: quinn::TransportErrorCode) -> Option<u64> {
    let n: u64 = code.into();
    (0x100..=0x1ff).contains(&n).then(|| n - 0x100)
}

/// The failure's kind and a one-line detail (peer-supplied text trimmed to `MAX_DETAIL` characters).
pub fn classify(error: &ConnectionError) -> (HandshakeFailure, String) {
    let kind = match error {
        ConnectionError::TimedOut => HandshakeFailure::Timeout,
        // Our side failed the handshake: the reason is our verifier's (or rustls's) text.
        ConnectionError::TransportError(e) => match tls_alert(e.code) {
            Some(_) if e.reason.contains(WRONG_KEY_TYPE) => HandshakeFailure::WrongKeyType,
            Some(_) if e.reason.contains(WRONG_KEY) => HandshakeFailure::WrongKey,
            Some(ALERT_CERTIFICATE_REQUIRED) => HandshakeFailure::NoCertificate,
            Some(_) => HandshakeFailure::TlsAlert,
            None => HandshakeFailure::Failed,
        },
        // The peer failed it and told us with an alert; its text is only detail.
        ConnectionError::ConnectionClosed(close) if tls_alert(close.error_code).is_some() => HandshakeFailure::TlsAlert,
        _ => HandshakeFailure::Failed,
    };
    let detail = match error {
        ConnectionError::ConnectionClosed(close) => match tls_alert(close.error_code) {
            Some(alert) => format!("peer sent TLS alert {alert}: {}", String::from_utf8_lossy(&close.reason)),
            None => format!("peer closed the handshake: {close}"),
        },
        ConnectionError::TransportError(e) => match tls_alert(e.code) {
            Some(alert) => format!("TLS alert {alert} sent: {}", e.reason),
            None => e.to_string(),
        },
        other => other.to_string(),
    };
    (kind, printable(&detail))
}

/// One line of at most `MAX_DETAIL` printable characters.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_DETAIL).collect()
}
