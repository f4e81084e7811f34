//! Errors cross into JavaScript as `CODE|detail` messages; the TS side turns CODE into an AgentError code.
//! Stream resets carry the peer's number: `RESET|<n>`.
//!
//! Why a prefix and not the JS error's `code` property: napi-rs 3 lets a sync function throw `Error<S>` with a
//! custom status (which becomes `code`), but an async one must return `Into<napi::Error>` (execute_tokio_future),
//! whose status is the fixed `Status` enum — every read, write and dial is async, so the code would be lost on the
//! paths that matter. The message is the one field both kinds carry unchanged; `fromNative` parses it in one place.

use napi::{Error, Status};
use quinn::{ConnectionError, ReadError, WriteError};

pub fn coded(code: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("{code}|{detail}"))
}

pub fn connection_error(error: &ConnectionError) -> Error {
    match error {
        ConnectionError::ApplicationClosed(close) => {
            let reason = String::from_utf8_lossy(&close.reason);
            coded("CLOSED_BY_PEER", format!("{}|{}", close.error_code.into_inner(), reason))
        }
        ConnectionError::LocallyClosed => coded("CLOSED", "connection closed locally"),
        ConnectionError::TimedOut => coded("UNAVAILABLE", "peer stopped answering (idle timeout)"),
        ConnectionError::Reset => coded("UNAVAILABLE", "connection reset by peer"),
        ConnectionError::TransportError(e) if is_crypto(e.code) => coded("UNAUTHENTICATED", e),
        ConnectionError::ConnectionClosed(close) if is_crypto(close.error_code) => coded("UNAUTHENTICATED", close),
        // What a listener answers at its connection limits (listener.rs); retryable later, like any exhaustion.
        ConnectionError::ConnectionClosed(close) if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED => {
            coded("RESOURCE_EXHAUSTED", "the listener refused the connection (at its connection limits, or closing)")
        }
        other => coded("UNAVAILABLE", other),
    }
}

/// TLS alerts travel as QUIC CRYPTO_ERROR codes 0x100..=0x1ff: a failed handshake is an authentication failure.
fn is_crypto(code: quinn::TransportErrorCode) -> bool {
    let n: u64 = code.into();
    (0x100..=0x1ff).contains(&n)
}

pub fn read_error(error: ReadError) -> Error {
    match error {
        ReadError::Reset(code) => coded("RESET", code.into_inner()),
        ReadError::ConnectionLost(e) => connection_error(&e),
        // The peer discarded our 0-RTT data (it lost its ticket): the request never reached it, so a retry is safe.
        ReadError::ZeroRttRejected => coded("ZERO_RTT_REJECTED", "0-RTT data rejected by the peer"),
        other => coded("CLOSED", other),
    }
}

pub fn write_error(error: WriteError) -> Error {
    match error {
        WriteError::Stopped(code) => coded("RESET", code.into_inner()),
        WriteError::ConnectionLost(e) => connection_error(&e),
        WriteError::ZeroRttRejected => coded("ZERO_RTT_REJECTED", "0-RTT data rejected by the peer"),
        other => coded("CLOSED", other),
    }
}
