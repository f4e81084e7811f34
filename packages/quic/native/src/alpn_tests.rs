//! Which protocol two engines agree on (tls.rs): agentlink/2 when both offer it, agentlink/1 when either side
//! knows only that one (an engine from before agentlink/2), and both sides read the same choice.

use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

use crate::test_support::{certificate, key, ED25519};
use crate::tls::{self, Credentials, ALPN, ALPN_ENDS_WITH_REQUEST};

/// Dials a listener offering `server` with a client offering `client`; the protocol each side reads.
async fn negotiate(server: Vec<Vec<u8>>, client: Vec<Vec<u8>>) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let (server_key, client_key) = (key(), key());
    let mut server_tls = tls::server_config(&Credentials { cert: certificate(&server_key, ED25519), key: server_key.pkcs8.clone() }).unwrap();
    server_tls.alpn_protocols = server;
    let config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(server_tls).unwrap()));
    let listener = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let mut client_tls = tls::client_config(&Credentials { cert: certificate(&client_key, ED25519), key: client_key.pkcs8.clone() }, server_key.public).unwrap();
    client_tls.alpn_protocols = client;
    let dialler = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(client_tls).unwrap()));
    let connecting = dialler.connect_with(config, listener.local_addr().unwrap(), "agentlink").unwrap();
    let accepting = async { listener.accept().await.unwrap().await.unwrap() };
    let (dialled, accepted) = tokio::join!(connecting, accepting);
    let dialled = dialled.unwrap();
    (tls::protocol(&accepted), tls::protocol(&dialled))
}

#[tokio::test]
async fn two_current_engines_speak_agentlink_2_and_an_older_one_on_either_side_gets_agentlink_1() {
    let v2 = Some(ALPN_ENDS_WITH_REQUEST.to_vec());
    let v1 = Some(ALPN.to_vec());
    assert_eq!(negotiate(tls::protocols(false), tls::protocols(false)).await, (v2.clone(), v2));
    assert_eq!(negotiate(tls::protocols(true), tls::protocols(false)).await, (v1.clone(), v1.clone()));
    assert_eq!(negotiate(tls::protocols(false), tls::protocols(true)).await, (v1.clone(), v1.clone()));
    // The listener's order decides, whatever order the dialler offers them in.
    assert_eq!(negotiate(tls::protocols(false), vec![ALPN.to_vec(), ALPN_ENDS_WITH_REQUEST.to_vec()]).await.0, Some(ALPN_ENDS_WITH_REQUEST.to_vec()));
}
