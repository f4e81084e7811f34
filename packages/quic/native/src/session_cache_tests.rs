//! The per-peer ticket store over real loopback QUIC: a second dial to a peer resumes and may send 0-RTT; a
//! ticket from peer A is never offered to peer B (B's dial has no early data to send); each peer has its own config.

use std::net::SocketAddr;
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

use super::*;
use crate::test_support::{certificate, key, Key, ED25519};

fn credentials(agent: &Key) -> Credentials {
    Credentials { cert: certificate(agent, ED25519), key: agent.pkcs8.clone() }
}

/// A listener on loopback for `agent` with the engine's TLS server config (tickets and 0-RTT on).
fn listener(agent: &Key) -> quinn::Endpoint {
    let tls = tls::server_config(&credentials(agent)).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let accepting = endpoint.clone();
    tokio::spawn(async move {
        while let Some(incoming) = accepting.accept().await {
            tokio::spawn(async move {
                // Serve one stream: echo what arrives, so a 0-RTT request gets its answer.
                let Ok((connection, _)) = incoming.accept().unwrap().into_0rtt() else { return };
                if let Ok((mut send, mut recv)) = connection.accept_bi().await {
                    let data = recv.read_to_end(1024).await.unwrap_or_default();
                    let _ = send.write_all(&data).await;
                    let _ = send.finish();
                    let _ = connection.closed().await;
                }
            });
        }
    });
    endpoint
}

/// Dials `peer` with the cache's config; returns whether the dial could send 0-RTT and whether the peer took it.
async fn dial(cache: &mut SessionCache, client: &quinn::Endpoint, me: &Credentials, peer: &Key, at: SocketAddr) -> (bool, bool) {
    let crypto = cache.config_for(me, peer.public).unwrap();
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).unwrap()));
    let connecting = client.connect_with(config, at, "agentlink").unwrap();
    let (connection, early, accepted) = match connecting.into_0rtt() {
        Ok((connection, accepted)) => (connection, true, Some(accepted)),
        Err(connecting) => (connecting.await.unwrap(), false, None),
    };
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    send.write_all(b"idempotent request").await.unwrap();
    send.finish().unwrap();
    let accepted = match accepted {
        Some(accepted) => accepted.await,
        None => false,
    };
    if !early || accepted {
        assert_eq!(recv.read_to_end(1024).await.unwrap(), b"idempotent request");
    }
    // (The listener sends its tickets as its handshake completes, before the echo: reading it saw them arrive.)
    connection.close(0u32.into(), b"done");
    (early, accepted)
}

fn client() -> quinn::Endpoint {
    quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap()
}

#[tokio::test]
async fn a_second_dial_to_a_peer_resumes_and_its_early_data_is_accepted() {
    let (me, a) = (key(), key());
    let server = listener(&a);
    let at = server.local_addr().unwrap();
    let mut cache = SessionCache::with_capacity(8);
    let client = client();
    assert_eq!(dial(&mut cache, &client, &credentials(&me), &a, at).await, (false, false), "first dial: full handshake");
    assert_eq!(dial(&mut cache, &client, &credentials(&me), &a, at).await, (true, true), "second dial: 0-RTT accepted");
}

#[tokio::test]
async fn a_ticket_from_peer_a_is_never_offered_to_peer_b() {
    let (me, a, b) = (key(), key(), key());
    let (server_a, server_b) = (listener(&a), listener(&b));
    let mut cache = SessionCache::with_capacity(8);
    let client = client();
    dial(&mut cache, &client, &credentials(&me), &a, server_a.local_addr().unwrap()).await;
    // Even dialled at A's address, B's config has only B's (empty) store: A's ticket is not offered.
    let crypto = cache.config_for(&credentials(&me), b.public).unwrap();
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).unwrap()));
    let connecting = client.connect_with(config, server_a.local_addr().unwrap(), "agentlink").unwrap();
    assert!(connecting.into_0rtt().is_err(), "no ticket offered to the wrong peer");
    // B has no ticket of its own: nothing to resume with, so no early data, though A's tickets are in the cache.
    assert_eq!(dial(&mut cache, &client, &credentials(&me), &b, server_b.local_addr().unwrap()).await, (false, false));
    // A's tickets are still there for A.
    assert_eq!(dial(&mut cache, &client, &credentials(&me), &a, server_a.local_addr().unwrap()).await, (true, true));
}

#[test]
fn each_peer_has_its_own_config_and_the_least_recently_dialled_is_dropped_beyond_capacity() {
    let me_key = key();
    let me = credentials(&me_key);
    let (a, b, c) = (key(), key(), key());
    let mut cache = SessionCache::with_capacity(2);
    let config_a = cache.config_for(&me, a.public).unwrap();
    assert!(Arc::ptr_eq(&config_a, &cache.config_for(&me, a.public).unwrap()), "the same config for every dial to A");
    let config_b = cache.config_for(&me, b.public).unwrap();
    assert!(!Arc::ptr_eq(&config_a, &config_b), "B never shares A's ticket store");
    assert!(Arc::ptr_eq(&config_a, &cache.config_for(&me, a.public).unwrap()), "A dialled again: now the most recent");
    let config_c = cache.config_for(&me, c.public).unwrap();
    assert_eq!(cache.len(), 2);
    assert!(!Arc::ptr_eq(&config_b, &cache.config_for(&me, b.public).unwrap()), "B was evicted, its tickets with it");
    // Now [c, b]: A went when B came back.
    let same_me_new_certificate = Credentials { cert: certificate(&Key { pkcs8: me_key.pkcs8.clone(), public: me_key.public }, ED25519), key: me_key.pkcs8.clone() };
    assert!(Arc::ptr_eq(&config_c, &cache.config_for(&same_me_new_certificate, c.public).unwrap()), "a restarted agent (same key) finds its tickets");
    let other_me = credentials(&key());
    assert!(!Arc::ptr_eq(&config_c, &cache.config_for(&other_me, c.public).unwrap()), "another own identity, another store");
}
