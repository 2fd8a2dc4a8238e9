//! Key pairs made at start-up, so the demo needs no account.

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine as _;

use crate::secret::Secret;

/// A fresh RSA key pair.
#[derive(Debug)]
pub struct GeneratedKey {
    /// PKCS#8 PEM, as a credentials file carries it.
    pub private_pem: Secret,
    /// DER `RSAPublicKey`, as [`super::MockAccount`] takes it.
    pub public_der: Vec<u8>,
}

/// Why a key pair could not be made.
#[derive(Debug, thiserror::Error)]
#[error("generating an RSA key pair failed")]
pub struct KeyGenError;

/// Generates a 2048-bit RSA key pair.
pub fn generate_rsa_key() -> Result<GeneratedKey, KeyGenError> {
    let pair = KeyPair::generate(KeySize::Rsa2048).map_err(|_| KeyGenError)?;
    let pkcs8: Pkcs8V1Der<'static> = pair.as_der().map_err(|_| KeyGenError)?;
    let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).map_err(|_| KeyGenError)?);
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    Ok(GeneratedKey {
        private_pem: Secret::new(pem),
        public_der: pair.public_key().as_ref().to_vec(),
    })
}
