//! Keys and certificates for the crate's tests, built the way core builds an agent's (and in odd ways).

use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};
use rustls::pki_types::CertificateDer;

pub struct Key {
    pub pkcs8: Vec<u8>,
    pub public: [u8; 32],
}

pub fn key() -> Key {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap().as_ref().to_vec();
    let public = Ed25519KeyPair::from_pkcs8(&pkcs8).unwrap().public_key().as_ref().try_into().unwrap();
    Key { pkcs8, public }
}

pub fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

pub fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    der(0x30, &parts.concat())
}

pub const ED25519: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x70];
pub const X25519: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x6e];

/// A self-signed v3 certificate for `key` like core's, whose public key is labelled with `key_algorithm`.
pub fn certificate(key: &Key, key_algorithm: [u8; 5]) -> CertificateDer<'static> {
    let algorithm = sequence(&[&ED25519]);
    let name = sequence(&[]);
    let validity = sequence(&[&der(0x17, b"200101000000Z"), &der(0x18, b"99991231235959Z")]);
    let spki = sequence(&[&sequence(&[&key_algorithm]), &der(0x03, &[&[0][..], &key.public].concat())]);
    let version = der(0xa0, &der(0x02, &[2]));
    let tbs = sequence(&[&version, &der(0x02, &[1]), &algorithm, &name, &validity, &name, &spki]);
    let signature = Ed25519KeyPair::from_pkcs8(&key.pkcs8).unwrap().sign(&tbs);
    CertificateDer::from(sequence(&[&tbs, &algorithm, &der(0x03, &[&[0][..], signature.as_ref()].concat())]))
}

