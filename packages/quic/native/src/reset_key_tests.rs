//! The reset key is a function of the agent's key alone, and with it an agent restarted on the same address
//! answers its predecessor's connections with a stateless reset that their peers accept.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use quinn::crypto::HmacKey;
use quinn::{ConnectionError, IdleTimeout, TokioRuntime, TransportConfig};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::*;
use crate::admission::{Admission, Limits};
use crate::listener::{accept_loop, server_config, REFUSAL_QUEUE};
use crate::test_support::{certificate, der, key, sequence, Key, ED25519};
use crate::tls::{self, Credentials};

/// Only against a hang: every awaited event here comes long before it.
const GUARD: Duration = Duration::from_secs(20);

fn token(key: &dyn HmacKey, connection_id: &[u8]) -> Vec<u8> {
    let mut signature = vec![0; key.signature_len()];
    key.sign(connection_id, &mut signature);
    signature
}

#[test]
fn the_same_agent_key_gives_the_same_tokens_whatever_its_encoding() {
    let agent = key();
    let seed = crate::tls::ed25519_seed_of(&agent.pkcs8).unwrap();
    let node_style = sequence(&[&der(0x02, &[0]), &sequence(&[&ED25519]), &der(0x04, &der(0x04, &seed))]);
    let (first, second, v1) = (reset_key(&agent.pkcs8).unwrap(), reset_key(&agent.pkcs8).unwrap(), reset_key(&node_style).unwrap());
    assert_eq!(token(&first, b"12345678"), token(&second, b"12345678"));
    assert_eq!(token(&first, b"12345678"), token(&v1, b"12345678"));
    assert_ne!(token(&first, b"12345678"), token(&first, b"12345679"));
}

#[test]
fn another_agent_key_gives_other_tokens_and_the_key_itself_is_never_the_hmac_key() {
    let (agent, other) = (key(), key());
    let derived = reset_key(&agent.pkcs8).unwrap();
    assert_ne!(token(&derived, b"12345678"), token(&reset_key(&other.pkcs8).unwrap(), b"12345678"));
    let seed = crate::tls::ed25519_seed_of(&agent.pkcs8).unwrap();
    let raw = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &seed);
    assert_ne!(token(&derived, b"12345678"), token(&raw, b"12345678"));
}

#[test]
fn connection_ids_of_an_agent_are_recognised_by_its_restart_and_not_by_another_agent() {
    let (agent, other) = (key(), key());
    let ids = |k: &Key| AgentConnectionIds { key: derive(&k.pkcs8, CONNECTION_ID_INFO).unwrap() };
    let mut first_life = ids(&agent);
    let issued: Vec<ConnectionId> = (0..100).map(|_| first_life.generate_cid()).collect();
    let (restarted, stranger) = (ids(&agent), ids(&other));
    assert!(issued.iter().all(|id| id.len() == 8 && restarted.validate(id).is_ok()));
    assert!(issued.iter().filter(|id| stranger.validate(id).is_ok()).count() <= 1, "1 in 2^24 may pass by chance");
    assert!(restarted.validate(&ConnectionId::new(&[0; 8])).is_err() || restarted.validate(&ConnectionId::new(&[1; 8])).is_err());
    assert!(restarted.validate(&ConnectionId::new(&[0; 4])).is_err(), "another length is never ours");
}

#[test]
fn a_key_that_is_not_ed25519_pkcs8_has_no_reset_key() {
    assert!(reset_key(b"not a key").is_none());
    assert!(endpoint_config(b"not a key").is_err());
}

/// An agent's listening endpoint, built as the engine builds one.
fn agent_endpoint(agent: &Key) -> quinn::Endpoint {
    let credentials = Credentials { cert: certificate(agent, ED25519), key: agent.pkcs8.clone() };
    let admission = Admission::new(Limits::default());
    let config = server_config(&credentials, Arc::new(TransportConfig::default()), &admission).unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let endpoint =
        quinn::Endpoint::new(endpoint_config(&agent.pkcs8).unwrap(), Some(config), socket, Arc::new(TokioRuntime)).unwrap();
    let (accepted, mut accepted_rx) = mpsc::channel(4);
    let (refusals, _refusals_rx) = mpsc::channel(REFUSAL_QUEUE);
    tokio::spawn(accept_loop(endpoint.clone(), admission, accepted, refusals));
    // Echoes every stream of every accepted connection (and holds the connections open).
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some(accepted) = accepted_rx.recv().await {
            let connection = accepted.connection.clone();
            tokio::spawn(async move {
                while let Ok((mut send, mut recv)) = connection.accept_bi().await {
                    let data = recv.read_to_end(1024).await.unwrap_or_default();
                    let _ = send.write_all(&data).await;
                    let _ = send.finish();
                }
            });
            held.push(accepted);
        }
    });
    endpoint
}

/// A UDP relay standing for "the agent's address": it forwards the client's datagrams to `target` and every
/// datagram from the agents back to the client. Switching the target is the agent restarting on that address.
async fn relay(servers: Vec<SocketAddr>) -> (SocketAddr, Arc<Mutex<SocketAddr>>) {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let address = socket.local_addr().unwrap();
    let target = Arc::new(Mutex::new(servers[0]));
    let current = target.clone();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let mut buffer = vec![0; 65_536];
        while let Ok((length, from)) = socket.recv_from(&mut buffer).await {
            let to = if servers.contains(&from) {
                match client {
                    Some(client) => client,
                    None => continue,
                }
            } else {
                client = Some(from);
                *current.lock().unwrap()
            };
            let _ = socket.send_to(&buffer[..length], to).await;
        }
    });
    (address, target)
}

/// Connects to an agent behind a relay; then the agent "restarts" (with its own key, or as another agent) and
/// the client writes on a stream. Returns how the client's connection ended.
async fn restart_behind_relay(same_key: bool) -> ConnectionError {
    let agent = key();
    let other = key();
    let (first, successor) = (agent_endpoint(&agent), agent_endpoint(if same_key { &agent } else { &other }));
    let servers = vec![first.local_addr().unwrap(), successor.local_addr().unwrap()];
    let (address, target) = relay(servers.clone()).await;

    let client_key = key();
    let credentials = Credentials { cert: certificate(&client_key, ED25519), key: client_key.pkcs8.clone() };
    let mut tls = tls::client_config(&credentials, agent.public).unwrap();
    tls.alpn_protocols = vec![tls::ALPN.to_vec()];
    let mut transport = TransportConfig::default();
    // Short, so the case without a reset ends soon (by the idle timeout); no keep-alives.
    transport.max_idle_timeout(Some(IdleTimeout::try_from(Duration::from_millis(1500)).unwrap()));
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    config.transport_config(Arc::new(transport));
    let client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let connection = tokio::time::timeout(GUARD, client.connect_with(config, address, "agentlink").unwrap())
        .await
        .expect("a handshake")
        .expect("connected");

    // One round trip first, so the handshake is confirmed and the client sends only short-header packets (a
    // long-header packet for an unknown connection is dropped, never reset).
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    send.write_all(b"ping").await.unwrap();
    send.finish().unwrap();
    assert_eq!(tokio::time::timeout(GUARD, recv.read_to_end(1024)).await.unwrap().unwrap(), b"ping");

    *target.lock().unwrap() = servers[1];
    let (mut send, _recv) = connection.open_bi().await.unwrap();
    let _ = send.write_all(&[1; 64]).await;
    let ended = tokio::time::timeout(GUARD, connection.closed()).await.expect("the connection to end");
    drop((first, successor));
    ended
}

#[tokio::test]
async fn an_agent_restarted_with_the_same_key_resets_its_predecessors_connections_at_once() {
    // The successor is the same agent (same key file): its reset token matches the one the client holds.
    let ended = restart_behind_relay(true).await;
    assert!(matches!(ended, ConnectionError::Reset), "{ended:?}");
}

#[tokio::test]
async fn another_agent_at_that_address_cannot_reset_the_connection() {
    let ended = restart_behind_relay(false).await;
    assert!(matches!(ended, ConnectionError::TimedOut), "{ended:?}");
}
