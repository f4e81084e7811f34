//! The accept loop against real quinn clients on loopback: limits refuse before TLS, and each way a handshake
//! can fail is reported with its reason. Clients with odd certificates are built on rustls directly, since
//! the engine's own client cannot present them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ConnectionError, TransportConfig, TransportErrorCode};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use tokio::sync::mpsc;

use super::*;
use crate::admission::Limits;
use crate::test_support::{certificate, key, Key, ED25519, X25519};
use crate::tls::{client_builder, Credentials, ALPN};

/// Only against a hang: every awaited event here comes long before it.
const GUARD: Duration = Duration::from_secs(20);

fn signing_key(key: &Key) -> Arc<dyn rustls::sign::SigningKey> {
    rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.pkcs8.clone())))
        .unwrap()
}

struct Server {
    address: SocketAddr,
    key: [u8; 32],
    admission: Arc<Admission>,
    accepted: mpsc::Receiver<Accepted>,
    refusals: mpsc::Receiver<RefusalEvent>,
}

impl Server {
    async fn next_refusal(&mut self) -> RefusalEvent {
        tokio::time::timeout(GUARD, self.refusals.recv()).await.expect("a refusal report").unwrap()
    }

    async fn next_accepted(&mut self) -> Accepted {
        tokio::time::timeout(GUARD, self.accepted.recv()).await.expect("an accepted connection").unwrap()
    }
}

fn server(limits: Limits) -> Server {
    let key = key();
    let credentials = Credentials { cert: certificate(&key, ED25519), key: key.pkcs8.clone() };
    let admission = Admission::new(limits);
    let config = server_config(&credentials, Arc::new(TransportConfig::default()), &admission).unwrap();
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let (accepted_tx, accepted) = mpsc::channel(16);
    let (refusals_tx, refusals) = mpsc::channel(REFUSAL_QUEUE);
    let address = endpoint.local_addr().unwrap();
    tokio::spawn(accept_loop(endpoint, admission.clone(), accepted_tx, refusals_tx));
    Server { address, key: key.public, admission, accepted, refusals }
}

/// Dials `to` with the given TLS client; the endpoint is returned so it outlives the connection.
async fn dial(to: SocketAddr, mut tls: rustls::ClientConfig) -> (quinn::Endpoint, Result<quinn::Connection, ConnectionError>) {
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    let connecting = endpoint.connect_with(config, to, "agentlink").unwrap();
    let result = tokio::time::timeout(GUARD, connecting).await.expect("the handshake to end");
    (endpoint, result)
}

fn agent_client(server_key: [u8; 32], key: &Key) -> rustls::ClientConfig {
    let credentials = Credentials { cert: certificate(key, ED25519), key: key.pkcs8.clone() };
    crate::tls::client_config(&credentials, server_key).unwrap()
}

fn client_presenting(server_key: [u8; 32], cert: CertificateDer<'static>, signer: &Key) -> rustls::ClientConfig {
    let certified = CertifiedKey::new(vec![cert], signing_key(signer));
    client_builder(server_key).unwrap().with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)))
}

#[tokio::test]
async fn an_agent_is_accepted_with_the_key_it_proved() {
    let mut server = server(Limits::default());
    let client = key();
    let (_endpoint, connection) = dial(server.address, agent_client(server.key, &client)).await;
    assert!(connection.is_ok());
    let accepted = server.next_accepted().await;
    assert_eq!(accepted.peer_key, client.public);
    assert_eq!(server.admission.connections(), 1);
    drop(accepted);
    assert_eq!(server.admission.connections(), 0);
}

#[tokio::test]
async fn beyond_max_connections_an_arrival_is_refused_before_tls_and_a_freed_place_serves_the_next() {
    let mut server = server(Limits { max_connections: 2, ..Limits::default() });
    let client = key();
    let mut held = Vec::new();
    for _ in 0..2 {
        let (endpoint, connection) = dial(server.address, agent_client(server.key, &client)).await;
        held.push((endpoint, connection.unwrap(), server.next_accepted().await));
    }
    let (_endpoint, refused) = dial(server.address, agent_client(server.key, &client)).await;
    match refused {
        Err(ConnectionError::ConnectionClosed(close)) => assert_eq!(close.error_code, TransportErrorCode::CONNECTION_REFUSED),
        other => panic!("expected CONNECTION_REFUSED, got {other:?}"),
    }
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason), ("connection", "max-connections"));
    assert_eq!(report.remote.ip(), server.address.ip());

    drop(held.pop()); // one connection goes: its place is free again
    let (_endpoint, connection) = dial(server.address, agent_client(server.key, &client)).await;
    assert!(connection.is_ok());
    server.next_accepted().await;
}

#[tokio::test]
async fn a_client_without_a_certificate_is_reported_as_no_certificate() {
    let mut server = server(Limits::default());
    let tls = client_builder(server.key).unwrap().with_no_client_auth();
    let (_endpoint, _) = dial(server.address, tls).await;
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason), ("handshake", "no-certificate"), "{report:?}");
    assert_eq!(server.admission.connections(), 0);
}

#[tokio::test]
async fn a_client_signing_with_another_key_than_its_certificate_is_reported_as_wrong_key() {
    let mut server = server(Limits::default());
    let (shown, held) = (key(), key());
    let (_endpoint, _) = dial(server.address, client_presenting(server.key, certificate(&shown, ED25519), &held)).await;
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason), ("handshake", "wrong-key"), "{report:?}");
}

#[tokio::test]
async fn a_certificate_without_an_ed25519_key_is_reported_as_wrong_key_type() {
    let mut server = server(Limits::default());
    let client = key();
    let (_endpoint, _) = dial(server.address, client_presenting(server.key, certificate(&client, X25519), &client)).await;
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason), ("handshake", "wrong-key-type"), "{report:?}");
}

#[tokio::test]
async fn a_client_that_rejects_our_key_is_reported_with_its_tls_alert() {
    let mut server = server(Limits::default());
    let (_endpoint, connection) = dial(server.address, agent_client([7; 32], &key())).await;
    assert!(connection.is_err());
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason), ("handshake", "tls-alert"), "{report:?}");
    assert!(report.detail.starts_with("peer sent TLS alert"), "{}", report.detail);
}

#[tokio::test]
async fn a_handshake_that_stalls_after_the_first_datagram_is_dropped_at_the_handshake_timeout() {
    let mut server = server(Limits { handshake_timeout: Duration::from_millis(200), ..Limits::default() });
    // A black hole: it passes the client's first datagram (its Initial) to the server and nothing after, and
    // never answers the server, so that handshake can only end by the server's deadline.
    let hole = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let hole_address = hole.local_addr().unwrap();
    let client = key();
    let dialling = tokio::spawn(dial(hole_address, agent_client(server.key, &client)));
    let mut datagram = vec![0; 2048];
    let (length, _) = hole.recv_from(&mut datagram).await.unwrap();
    hole.send_to(&datagram[..length], server.address).await.unwrap();
    let report = server.next_refusal().await;
    assert_eq!((report.stage, report.reason, report.remote), ("handshake", "handshake-timeout", hole_address));
    assert_eq!(server.admission.connections(), 0);
    dialling.abort();
}
