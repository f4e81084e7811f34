//! The DER parsing that decides which key a peer is: the public key of a certificate, and the seed of our
//! own private key (the stateless-reset key is derived from it). Bad input must give None, never a panic.

use ring::signature::{Ed25519KeyPair, KeyPair};

use super::*;
use crate::test_support::{certificate, der, key, sequence, ED25519, X25519};

/// A certificate without the optional version field (X.509 v1): SubjectPublicKeyInfo is then the 6th field.
fn certificate_v1(public: &[u8; 32]) -> Vec<u8> {
    let algorithm = sequence(&[&ED25519]);
    let name = sequence(&[]);
    let validity = sequence(&[&der(0x17, b"200101000000Z"), &der(0x17, b"300101000000Z")]);
    let spki = sequence(&[&algorithm, &der(0x03, &[&[0][..], public].concat())]);
    let tbs = sequence(&[&der(0x02, &[1]), &algorithm, &name, &validity, &name, &spki]);
    sequence(&[&tbs, &algorithm, &der(0x03, &[0; 65])])
}

/// Node's encoding of an Ed25519 key (`export({ type: 'pkcs8', format: 'der' })`): v1, seed only, 48 bytes.
fn pkcs8_v1(seed: &[u8; 32]) -> Vec<u8> {
    sequence(&[&der(0x02, &[0]), &sequence(&[&ED25519]), &der(0x04, &der(0x04, seed))])
}

#[test]
fn the_key_of_an_agent_certificate_is_its_ed25519_public_key() {
    let agent = key();
    assert_eq!(ed25519_key_of(&certificate(&agent, ED25519)), Some(agent.public));
}

#[test]
fn the_key_of_a_certificate_without_a_version_field_is_found_too() {
    let agent = key();
    assert_eq!(ed25519_key_of(&certificate_v1(&agent.public)), Some(agent.public));
}

#[test]
fn a_certificate_with_another_key_type_has_no_agent_key() {
    assert_eq!(ed25519_key_of(&certificate(&key(), X25519)), None);
}

#[test]
fn every_truncation_of_a_certificate_is_rejected_without_panicking() {
    let cert = certificate(&key(), ED25519);
    for length in 0..cert.len() {
        assert_eq!(ed25519_key_of(&cert[..length]), None, "truncated to {length} bytes");
    }
}

#[test]
fn lengths_that_overflow_or_run_past_the_input_are_rejected() {
    // Long-form lengths: 4 bytes of 0xff (past the input), 5 length bytes (refused), and 0x80 (indefinite).
    for header in [&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff][..], &[0x30, 0x85, 1, 0, 0, 0, 0], &[0x30, 0x80, 0, 0]] {
        assert_eq!(ed25519_key_of(header), None, "{header:02x?}");
    }
    assert_eq!(ed25519_key_of(&[]), None);
    assert_eq!(ed25519_key_of(&[0x31, 0x00]), None, "a SET is not a certificate");
}

#[test]
fn garbage_never_panics() {
    // A fixed pseudo-random walk over short inputs, biased towards DER-looking headers.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let length = (state % 96) as usize;
        let mut bytes: Vec<u8> = (0..length).map(|i| (state >> (i % 56)) as u8).collect();
        if let Some(first) = bytes.first_mut() {
            *first = if state & 1 == 0 { 0x30 } else { *first };
        }
        let _ = ed25519_key_of(&bytes);
        let _ = ed25519_seed_of(&bytes);
    }
}

#[test]
fn the_seed_of_a_pkcs8_v2_key_rebuilds_the_same_key_pair() {
    let agent = key(); // ring writes v2: the public key follows the seed
    let seed = ed25519_seed_of(&agent.pkcs8).expect("a seed");
    let pair = Ed25519KeyPair::from_seed_and_public_key(&seed, &agent.public).expect("seed and public key agree");
    assert_eq!(pair.public_key().as_ref(), agent.public);
}

#[test]
fn the_seed_of_a_node_style_pkcs8_v1_key_is_its_last_32_bytes() {
    let seed = [7u8; 32];
    let encoded = pkcs8_v1(&seed);
    assert_eq!(encoded.len(), 48);
    assert_eq!(ed25519_seed_of(&encoded), Some(seed));
}

#[test]
fn pkcs8_keys_of_other_algorithms_or_shapes_have_no_seed() {
    let seed = [7u8; 32];
    let x25519 = sequence(&[&der(0x02, &[0]), &sequence(&[&X25519]), &der(0x04, &der(0x04, &seed))]);
    assert_eq!(ed25519_seed_of(&x25519), None);
    let version_2 = sequence(&[&der(0x02, &[2]), &sequence(&[&ED25519]), &der(0x04, &der(0x04, &seed))]);
    assert_eq!(ed25519_seed_of(&version_2), None);
    let short_seed = sequence(&[&der(0x02, &[0]), &sequence(&[&ED25519]), &der(0x04, &der(0x04, &seed[..31]))]);
    assert_eq!(ed25519_seed_of(&short_seed), None);
    let trailing = [pkcs8_v1(&seed), vec![0]].concat();
    assert_eq!(ed25519_seed_of(&trailing), None);
    let encoded = pkcs8_v1(&seed);
    for length in 0..encoded.len() {
        assert_eq!(ed25519_seed_of(&encoded[..length]), None, "truncated to {length} bytes");
    }
}
