//! The key quinn computes stateless-reset tokens with (RFC 9000 §10.3), derived from the agent's identity so
//! that it survives a restart. A restarted agent then answers packets of its predecessor's connections with a
//! stateless reset its peers accept, and they learn at once that the connection is gone (with quinn's default
//! random key they ignored the reset and waited for their idle timeout).
//!
//! Why this is safe: HKDF-SHA256 is one-way, so the reset key (and every token made with it) tells nothing
//! about the private key; whoever holds the private key can already impersonate the agent, which is far more
//! than forging resets. Tokens are HMACs of connection IDs: seeing tokens (a reset carries one in the clear)
//! does not reveal the key. The domain label keeps this derivation apart from any other use of the key.
//! RFC 9000 §10.3.2 describes exactly this: a static key, with connection IDs of one fixed length, so a
//! restarted endpoint finds the connection ID in a packet.
//!
//! The connection IDs must be recognised across the restart too: quinn answers only packets whose connection
//! ID its generator validates, and its default generator checks a hash keyed by a random number of each
//! process. Ours (`AgentConnectionIds`) is 5 random bytes and 3 bytes of an HMAC of them, under a second key
//! derived the same way: a restarted agent recognises its predecessor's IDs, and random garbage is still not
//! answered (1 in 2^24 passes, and quinn sends at most one reset per 20 ms, each smaller than what caused it).

use std::sync::Arc;

use quinn::{ConnectionId, ConnectionIdGenerator};
use ring::rand::{SecureRandom, SystemRandom};
use ring::{hkdf, hmac};

use crate::tls::ed25519_seed_of;

/// HKDF salt: names the purpose and version, so a future change of derivation changes every key.
const SALT: &[u8] = b"agentlink/quic stateless-reset key/v1";
const RESET_INFO: &[u8] = b"quinn EndpointConfig reset_key (HMAC-SHA256)";
const CONNECTION_ID_INFO: &[u8] = b"connection ID check (HMAC-SHA256)";

fn derive(pkcs8: &[u8], info: &[u8]) -> Option<hmac::Key> {
    let seed = ed25519_seed_of(pkcs8)?;
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(&seed);
    let info = [info];
    let okm = prk.expand(&info, hmac::HMAC_SHA256).ok()?;
    Some(hmac::Key::from(okm))
}

/// The stateless-reset key of the agent whose Ed25519 private key is `pkcs8`; None if it is not one.
pub fn reset_key(pkcs8: &[u8]) -> Option<hmac::Key> {
    derive(pkcs8, RESET_INFO)
}

const NONCE_LEN: usize = 5;
const CHECK_LEN: usize = 3;

/// Connection IDs an agent recognises as its own across restarts: a random nonce and a keyed check of it.
#[derive(Clone)]
pub struct AgentConnectionIds {
    key: hmac::Key,
}

impl AgentConnectionIds {
    fn check(&self, nonce: &[u8]) -> [u8; CHECK_LEN] {
        let tag = hmac::sign(&self.key, nonce);
        let mut check = [0; CHECK_LEN];
        check.copy_from_slice(&tag.as_ref()[..CHECK_LEN]);
        check
    }
}

impl ConnectionIdGenerator for AgentConnectionIds {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; NONCE_LEN + CHECK_LEN];
        // SystemRandom fails only where the OS has no randomness at all; the nonce then stays zero, which
        // costs uniqueness, not safety (quinn rejects a duplicate connection ID and draws again).
        let _ = SystemRandom::new().fill(&mut id[..NONCE_LEN]);
        let check = self.check(&id[..NONCE_LEN]);
        id[NONCE_LEN..].copy_from_slice(&check);
        ConnectionId::new(&id)
    }

    fn validate(&self, id: &ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        if id.len() != NONCE_LEN + CHECK_LEN {
            return Err(quinn_proto::InvalidCid);
        }
        let (nonce, check) = id.split_at(NONCE_LEN);
        // Not secret-dependent timing worth guarding: the check is sent in the clear in every packet.
        if self.check(nonce) == check { Ok(()) } else { Err(quinn_proto::InvalidCid) }
    }

    fn cid_len(&self) -> usize {
        NONCE_LEN + CHECK_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// quinn's endpoint settings for an agent: its reset key and connection IDs (both surviving restarts), and no
/// greasing of the QUIC bit (STUN shares the port: a packet with top bits 00 is then never QUIC).
pub fn endpoint_config(pkcs8: &[u8]) -> Result<quinn::EndpointConfig, String> {
    let not_ed25519 = || "the agent key is not an Ed25519 PKCS#8 key".to_string();
    let reset = reset_key(pkcs8).ok_or_else(not_ed25519)?;
    let ids = AgentConnectionIds { key: derive(pkcs8, CONNECTION_ID_INFO).ok_or_else(not_ed25519)? };
    let mut config = quinn::EndpointConfig::new(Arc::new(reset));
    config.cid_generator(move || Box::new(ids.clone())).grease_quic_bit(false);
    Ok(config)
}

#[cfg(test)]
#[path = "reset_key_tests.rs"]
mod tests;
