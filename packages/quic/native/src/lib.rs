//! agentlink's QUIC engine: quinn (rustls on ring) behind a napi-rs addon. One `QuicEndpoint` is one UDP socket
//! that both dials and accepts, so two agents can connect to each other at once (hole punching). TLS 1.3 uses
//! the agent's Ed25519 key as the certificate key, pinned in both directions (see tls.rs).

// Under `cargo test` napi registers nothing, so the exported functions look unused.
#![cfg_attr(test, allow(dead_code))]

mod admission;
mod congestion;
mod connection;
mod delivery_cc;
#[cfg(test)]
mod delivery_cc_tests;
mod delivery_rate;
#[cfg(test)]
mod delivery_rate_tests;
mod early_data;
mod endpoint;
mod engine_slice;
mod error_queue;
mod errors;
mod first_write;
mod handshake;
#[cfg(target_os = "linux")]
mod icmp_gate;
mod last_write;
mod listener;
mod live;
#[cfg(test)]
mod pacing_tests;
mod quiet;
#[cfg(test)]
mod quiet_tests;
mod raw_socket;
mod reads;
mod reset_key;
mod session_cache;
mod stream;
mod stream_credit;
#[cfg(test)]
mod test_support;
mod tls;
mod trim;
mod unreachable;
#[cfg(test)]
mod unreachable_tests;

use napi_derive::napi;

/// A small runtime: agent traffic is mostly latency-bound, and on 2 cores one worker gave the best p99. Its threads
/// ask for a short scheduling slice (engine_slice.rs).
#[napi_derive::module_init]
fn init() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let workers = std::env::var("AGENTLINK_QUIC_WORKERS").ok().and_then(|v| v.parse().ok()).unwrap_or((cores / 2).clamp(1, 4));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("agentlink-quic")
        .on_thread_start(engine_slice::engine_thread_started)
        .enable_all()
        .build()
        .expect("tokio runtime");
    napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
}

#[napi]
pub fn engine_version() -> String {
    format!("agentlink-quic {} (quinn 0.11, rustls 0.23/ring)", env!("CARGO_PKG_VERSION"))
}
