//! Mutual TLS 1.3 by agent keys. Each side's certificate is self-signed by its agent's Ed25519 key. Trust is
//! pinning, not a CA: the dialler verifies the handshake signature with the key it dialled (the certificate's
//! contents do not matter), and the listener verifies it with the key in the client's certificate, which then
//! *is* the caller's identity. Either way, the key we attribute is the key that signed the transcript.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

/// The first protocol: a caller's end (FIN) before the reply is a cancel.
pub const ALPN: &[u8] = b"agentlink/1";
/// agentlink/1 plus one rule: a unary or streamed call's caller may end its side with its request (one packet,
/// no FIN of its own after the reply), and gives up by STOP_SENDING with the error's code instead of a cancel
/// message (docs/protocol.md "Ending with the request"). Offered first; a peer that knows only agentlink/1
/// picks that (rustls servers pick by their own order, among the protocols the client offers).
pub const ALPN_ENDS_WITH_REQUEST: &[u8] = b"agentlink/2";

/// What we offer and accept, most preferred first: `legacy` (a test hook, EndpointOptions.legacyProtocol) is a
/// peer that knows only agentlink/1.
pub fn protocols(legacy: bool) -> Vec<Vec<u8>> {
    if legacy {
        vec![ALPN.to_vec()]
    } else {
        vec![ALPN_ENDS_WITH_REQUEST.to_vec(), ALPN.to_vec()]
    }
}

/// Words our verifiers' errors start with. quinn hands a failed handshake's error over as text only, so the
/// listener tells these reasons apart by them (see handshake.rs); the colon keeps one from matching the other.
pub const WRONG_KEY: &str = "wrong-key:";
pub const WRONG_KEY_TYPE: &str = "wrong-key-type:";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn verify_ed25519(key: &[u8], message: &[u8], dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
    if dss.scheme != SignatureScheme::ED25519 {
        return Err(Error::General(format!("{WRONG_KEY_TYPE} agent keys sign with Ed25519, peer used {:?}", dss.scheme)));
    }
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key)
        .verify(message, dss.signature())
        .map(|_| HandshakeSignatureValid::assertion())
        .map_err(|_| Error::General(format!("{WRONG_KEY} peer does not hold the key it presents")))
}

/// The Ed25519 key of a certificate: SubjectPublicKeyInfo is the 7th field of TBSCertificate (RFC 5280),
/// 6th when the optional version is absent.
pub fn ed25519_key_of(cert: &[u8]) -> Option<[u8; 32]> {
    let certificate = der_element(cert, 0x30)?.0;
    let mut tbs = der_element(certificate, 0x30)?.0;
    if tbs.first() == Some(&0xa0) {
        tbs = der_element(tbs, 0xa0)?.1;
    }
    for tag in [0x02, 0x30, 0x30, 0x30, 0x30] {
        tbs = der_element(tbs, tag)?.1; // serial, signature, issuer, validity, subject
    }
    let spki = der_element(tbs, 0x30)?.0;
    const ED25519_SPKI_PREFIX: [u8; 10] = [0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    if spki.len() != 42 || spki[..10] != ED25519_SPKI_PREFIX {
        return None;
    }
    spki[10..].try_into().ok()
}

/// The 32-byte seed of an Ed25519 private key in PKCS#8 (RFC 5958 v1 or v2, RFC 8410): the privateKey field
/// holds an OCTET STRING of the seed. None for any other key or encoding.
pub fn ed25519_seed_of(pkcs8: &[u8]) -> Option<[u8; 32]> {
    let (key_info, rest) = der_element(pkcs8, 0x30)?;
    if !rest.is_empty() {
        return None;
    }
    let (version, after_version) = der_element(key_info, 0x02)?;
    if version != [0] && version != [1] {
        return None;
    }
    let (algorithm, after_algorithm) = der_element(after_version, 0x30)?;
    if algorithm != ED25519_OID {
        return None; // RFC 8410: the parameters are absent
    }
    let (private_key, _attributes_and_public_key) = der_element(after_algorithm, 0x04)?;
    let (seed, trailing) = der_element(private_key, 0x04)?;
    if !trailing.is_empty() {
        return None;
    }
    seed.try_into().ok()
}

/// The Ed25519 algorithm identifier's contents: OID 1.3.101.112.
const ED25519_OID: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x70];

/// Splits one DER element with the expected tag off `input`: (its contents, the rest).
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let first = *input.get(1)? as usize;
    let (length, header) = if first < 0x80 {
        (first, 2)
    } else {
        let count = first & 0x7f;
        if count == 0 || count > 4 {
            return None;
        }
        let mut length = 0usize;
        for i in 0..count {
            length = (length << 8) | *input.get(2 + i)? as usize;
        }
        (length, 2 + count)
    };
    let end = header.checked_add(length)?;
    Some((input.get(header..end)?, input.get(end..)?))
}

#[derive(Debug)]
struct PinnedServerKey {
    expected: [u8; 32],
}

impl ServerCertVerifier for PinnedServerKey {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        // Only for a clear message: the signature check below is what proves the key.
        match ed25519_key_of(end_entity) {
            Some(key) if key == self.expected => Ok(ServerCertVerified::assertion()),
            Some(_) => Err(Error::General("peer key mismatch: it is not the agent that was dialled".into())),
            None => Err(Error::General("peer certificate has no Ed25519 agent key".into())),
        }
    }

    fn verify_tls12_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        Err(Error::General("TLS 1.2 is not allowed".into()))
    }

    fn verify_tls13_signature(&self, message: &[u8], _cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_ed25519(&self.expected, message, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

fn no_agent_key() -> Error {
    Error::General(format!("{WRONG_KEY_TYPE} client certificate has no Ed25519 agent key"))
}

#[derive(Debug)]
struct AnyAgentKey;

impl ClientCertVerifier for AnyAgentKey {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_client_cert(&self, end_entity: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: UnixTime) -> Result<ClientCertVerified, Error> {
        ed25519_key_of(end_entity)
            .map(|_| ClientCertVerified::assertion())
            .ok_or_else(no_agent_key)
    }

    fn verify_tls12_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        Err(Error::General("TLS 1.2 is not allowed".into()))
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        let key = ed25519_key_of(cert).ok_or_else(no_agent_key)?;
        verify_ed25519(&key, message, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

pub struct Credentials {
    pub cert: CertificateDer<'static>,
    pub key: Vec<u8>,
}

impl Credentials {
    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()))
    }
}

pub fn server_config(credentials: &Credentials) -> Result<rustls::ServerConfig, Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(AnyAgentKey))
        .with_single_cert(vec![credentials.cert.clone()], credentials.key())?;
    config.alpn_protocols = protocols(false);
    // Resumption and 0-RTT (session_cache.rs): stateful, single-use tickets; QUIC allows only 0 or u32::MAX here
    // (the amount of early data is bounded by the transport's flow-control windows instead).
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(crate::session_cache::SERVER_TICKETS);
    config.max_early_data_size = u32::MAX;
    Ok(config)
}

pub fn client_config(credentials: &Credentials, expected: [u8; 32]) -> Result<rustls::ClientConfig, Error> {
    let mut config = client_builder(expected)?.with_client_auth_cert(vec![credentials.cert.clone()], credentials.key())?;
    config.alpn_protocols = protocols(false);
    Ok(config)
}

/// A client that pins the server's key, before its own certificate is chosen (tests build odd clients on it).
pub(crate) fn client_builder(
    expected: [u8; 32],
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, Error> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServerKey { expected })))
}

/// The application protocol the handshake chose (ALPN), once the peer's choice is known: at once on a listener
/// (it chose from the client's hello), after the server's reply on a dialler (never from a 0-RTT guess).
pub fn protocol(connection: &quinn::Connection) -> Option<Vec<u8>> {
    connection
        .handshake_data()?
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?
        .protocol
}

/// The authenticated key of a connection's peer, from the certificate it presented in the handshake.
pub fn peer_key(connection: &quinn::Connection) -> Option<[u8; 32]> {
    let identity = connection.peer_identity()?;
    let certs = identity.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    ed25519_key_of(certs.first()?)
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "alpn_tests.rs"]
mod alpn_tests;
