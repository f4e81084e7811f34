//! TLS session tickets of the peers we dialled, kept per peer key so a ticket is only ever offered to the agent
//! that issued it.
//!
//! Every agent's SNI is the same ("agentlink"), and rustls files client tickets by SNI, so one shared ticket
//! store would offer peer A's ticket to peer B. Instead each (our agent key, peer key) pair gets its own
//! rustls ClientConfig — its own pinned verifier and its own ticket store — built once and reused for every
//! dial to that peer. rustls resumes a ticket only with the very verifier and client certificate it was issued
//! under (pointer equality), so reusing the config is also what makes resumption possible at all, and a ticket
//! cannot cross peers even by mistake: B's dial has no access to A's store.
//!
//! The cache lives as long as the engine is loaded (one per process), so an agent that is closed and created
//! again in the same process — or a second endpoint of the same agent — resumes with its peers. It is never
//! written to disk: rustls 0.23 has no way to export a client session (its resumption secret is private), and a
//! resumption secret on disk would be key material (see docs/quic.md).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::{ClientSessionMemoryCache, Resumption};

use crate::tls::{self, Credentials};

/// Peers (per own certificate) whose tickets are kept; the least recently dialled peer's config is dropped beyond it. A config
/// holds at most a few tickets (rustls keeps up to 8 per server name; agentlink servers send 2 per handshake),
/// ~1 KB each with the peer's certificate: a few MB at most.
pub const MAX_PEERS: usize = 1024;
/// Server names per ticket store: every agent uses one, "agentlink".
const NAMES_PER_STORE: usize = 1;

/// Tickets a listener remembers (rustls's stateful store, shared by all clients). Each is single use: a
/// resumption takes it out, so a replayed ClientHello finds nothing and gets a full handshake, without 0-RTT.
/// ~1 KB each with the client's certificate, so at most ~4 MB; beyond it the oldest are forgotten (those
/// clients pay a full handshake).
pub const SERVER_TICKETS: usize = 4096;

/// (our agent key, the peer's key). Ours, not our certificate: core makes a new certificate (random serial) for
/// every agent it creates, and a restarted agent with the same identity must find its tickets.
type Key = ([u8; 32], [u8; 32]);

/// Client configs by (our key, peer key), least recently dialled first for eviction.
#[derive(Default)]
pub struct SessionCache {
    configs: HashMap<Key, Arc<rustls::ClientConfig>>,
    order: VecDeque<Key>,
    capacity: usize,
}

impl SessionCache {
    pub fn with_capacity(capacity: usize) -> Self {
        Self { configs: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// The client config for dialling `peer` as `credentials`: the same Arc for every dial to that peer by the same
    /// agent key (it keeps presenting the certificate it was built with: same key, so the same identity).
    pub fn config_for(&mut self, credentials: &Credentials, peer: [u8; 32]) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
        let own = tls::ed25519_key_of(&credentials.cert).ok_or_else(|| rustls::Error::General("our certificate has no Ed25519 key".into()))?;
        let key = (own, peer);
        if let Some(config) = self.configs.get(&key) {
            // Least recently dialled goes first: move this peer to the back (a linear scan of ≤ MAX_PEERS keys
            // per dial, next to a handshake's cost).
            if let Some(at) = self.order.iter().position(|k| *k == key) {
                self.order.remove(at);
            }
            self.order.push_back(key);
            return Ok(config.clone());
        }
        let mut config = tls::client_config(credentials, peer)?;
        config.resumption = Resumption::store(Arc::new(ClientSessionMemoryCache::new(NAMES_PER_STORE)));
        config.enable_early_data = true;
        let config = Arc::new(config);
        while self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.configs.remove(&oldest);
            }
        }
        self.order.push_back(key);
        self.configs.insert(key, config.clone());
        Ok(config)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.configs.len()
    }
}

/// The engine's cache, shared by every endpoint of the process.
pub fn shared() -> &'static Mutex<SessionCache> {
    static CACHE: OnceLock<Mutex<SessionCache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(SessionCache::with_capacity(MAX_PEERS)))
}

#[cfg(test)]
#[path = "session_cache_tests.rs"]
mod tests;
