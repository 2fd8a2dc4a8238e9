//! The RSA private key that signs assertions: parsed and checked once
//! (PKCS#8 or PKCS#1 PEM, 2048 bits or more), with why a key was refused
//! and the session binding secret the verifier derives from it.

use std::fmt;
use std::io::BufReader;

use base64::Engine as _;
use rustls_pki_types::pem::SectionKind;

use crate::Secret;

/// The seed's reference key size, and the floor for RS256 today.
pub const MIN_KEY_BITS: usize = 2048;

/// The account's RSA private key, parsed and checked once at start-up.
pub struct SigningKey {
    /// Built once here rather than per assertion; jsonwebtoken's RS256
    /// signer takes PKCS#1 DER (RFC 8017 §A.1.2) whatever form the PEM was.
    encoding: jsonwebtoken::EncodingKey,
    bits: usize,
    /// What the verifier binds browsers to sessions with when no key of
    /// its own is set (README "The verifier", Running many).
    binding_secret: [u8; 32],
}

impl SigningKey {
    /// The key as `jsonwebtoken::encode` takes it, for RS256 only.
    pub(crate) fn encoding_key(&self) -> &jsonwebtoken::EncodingKey {
        &self.encoding
    }

    /// Modulus size in bits.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// A secret every holder of this key computes alike and nobody else
    /// can: HKDF over the key's RS256 signature of a fixed label, which
    /// RSASSA-PKCS1-v1_5 makes deterministic (RFC 8017 §8.2). A signature
    /// rather than the key's bytes, so that a PKCS#1 and a PKCS#8 file of
    /// one key agree, and a key that signs elsewhere (an HSM) can give it
    /// too. No assertion ever signs this label.
    pub fn binding_secret(&self) -> &[u8; 32] {
        &self.binding_secret
    }
}

/// What [`SigningKey::binding_secret`] signs, and its HKDF label.
const BINDING_LABEL: &[u8] = b"lanyard verifier session binding v1";

fn binding_secret(pair: &aws_lc_rs::rsa::KeyPair) -> Result<[u8; 32], KeyError> {
    use aws_lc_rs::{hkdf, rand::SystemRandom, signature::RSA_PKCS1_SHA256};
    let mut signature = vec![0; pair.public_modulus_len()];
    pair.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        BINDING_LABEL,
        &mut signature,
    )
    .map_err(|_| KeyError::InvalidRsa)?;
    let mut secret = [0; 32];
    hkdf::Salt::new(hkdf::HKDF_SHA256, BINDING_LABEL)
        .extract(&signature)
        .expand(&[BINDING_LABEL], hkdf::HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut secret))
        .map_err(|_| KeyError::InvalidRsa)?;
    Ok(secret)
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(RSA {} bits, [redacted])", self.bits)
    }
}

/// Why a private key was refused. Messages never include key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("is not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)")]
    NotPem,
    #[error(
        "is encrypted; lanyard needs an unencrypted key (decrypt it with `openssl pkey -in key.pem -out plain.pem` and keep the result in a Secret)"
    )]
    Encrypted,
    #[error("is an {0} key; RS256 needs an RSA key")]
    NotRsa(&'static str),
    #[error("is a {0}, not a private key")]
    NotPrivate(&'static str),
    #[error(
        "is in OpenSSH format; convert it to PKCS#8 with `ssh-keygen -p -m PKCS8 -f key` or use the PEM key from the credentials file"
    )]
    OpenSsh,
    #[error("has a PEM block that does not decode (bad base64 or a missing END line)")]
    BadPem,
    #[error("is not a valid RSA private key (its DER structure does not parse)")]
    InvalidRsa,
    #[error("is an RSA key shorter than 2048 bits; generate a 2048-bit or longer key")]
    TooShort,
    #[error("is an RSA key longer than 8192 bits, which is not supported")]
    TooLong,
}

/// Parses a PEM RSA private key (PKCS#8 or PKCS#1), accepting literal `\n`
/// sequences as newlines (the form keys take in environment variables).
pub fn parse_private_key(pem: &str) -> Result<SigningKey, KeyError> {
    let pem = pem.trim().replace("\\n", "\n");
    let labels: Vec<&str> = pem
        .lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("-----BEGIN ")?
                .strip_suffix("-----")
        })
        .collect();
    let label = labels
        .iter()
        .copied()
        .find(|l| l.ends_with("PRIVATE KEY"))
        .or_else(|| labels.first().copied())
        .ok_or(KeyError::NotPem)?;
    match label {
        "PRIVATE KEY" | "RSA PRIVATE KEY" => {}
        "ENCRYPTED PRIVATE KEY" => return Err(KeyError::Encrypted),
        "EC PRIVATE KEY" => return Err(KeyError::NotRsa("EC")),
        "DSA PRIVATE KEY" => return Err(KeyError::NotRsa("DSA")),
        "OPENSSH PRIVATE KEY" => return Err(KeyError::OpenSsh),
        "PUBLIC KEY" | "RSA PUBLIC KEY" => return Err(KeyError::NotPrivate("public key")),
        "CERTIFICATE" => return Err(KeyError::NotPrivate("certificate")),
        _ => return Err(KeyError::NotPem),
    }
    // Legacy OpenSSL encryption keeps the label and adds headers.
    if pem.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(KeyError::Encrypted);
    }

    let mut reader = BufReader::new(pem.as_bytes());
    let (kind, der) = loop {
        match rustls_pki_types::pem::from_buf(&mut reader) {
            Ok(Some((kind @ (SectionKind::PrivateKey | SectionKind::RsaPrivateKey), der))) => {
                break (kind, der);
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return Err(KeyError::BadPem),
        }
    };
    let parsed = match kind {
        SectionKind::RsaPrivateKey => aws_lc_rs::rsa::KeyPair::from_der(&der),
        _ => aws_lc_rs::rsa::KeyPair::from_pkcs8(&der),
    };
    let pair = parsed.map_err(|rejected| match rejected.description_() {
        "WrongAlgorithm" => KeyError::NotRsa("EC, Ed25519 or other non-RSA"),
        "TooSmall" => KeyError::TooShort,
        "TooLarge" => KeyError::TooLong,
        _ => KeyError::InvalidRsa,
    })?;
    let bits = pair.public_modulus_len() * 8;
    if bits < MIN_KEY_BITS {
        return Err(KeyError::TooShort);
    }
    let binding_secret = binding_secret(&pair)?;

    // jsonwebtoken takes the key as PEM and finds the RSA key inside a
    // PKCS#8 wrapper itself; the section aws-lc just validated is wrapped
    // again on its own, so other blocks in the input (a certificate before
    // the key, say) cannot confuse it. It re-parses the key with aws-lc for
    // each signature, about 0.2 ms next to the signature's 0.7 ms, once per
    // token request every few minutes.
    let label = match kind {
        SectionKind::RsaPrivateKey => "RSA PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    let pem = Secret::new(format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        base64::engine::general_purpose::STANDARD.encode(&der)
    ));
    let encoding = jsonwebtoken::EncodingKey::from_rsa_pem(pem.expose().as_bytes())
        .map_err(|_| KeyError::InvalidRsa)?;
    Ok(SigningKey {
        encoding,
        bits,
        binding_secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_gives_one_binding_secret_whatever_its_pem_form() {
        let fixture = |name: &str| {
            let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
            parse_private_key(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        let (pkcs8, pkcs1) = (fixture("rsa2048.pkcs8.pem"), fixture("rsa2048.pkcs1.pem"));
        assert_eq!(pkcs8.binding_secret(), pkcs1.binding_secret());
        assert_ne!(pkcs8.binding_secret(), &[0; 32]);
        assert!(!format!("{pkcs8:?}").contains(&format!("{:?}", pkcs8.binding_secret())));
    }

    #[test]
    fn garbage_is_not_a_key() {
        assert_eq!(parse_private_key("hello").unwrap_err(), KeyError::NotPem);
        assert_eq!(
            parse_private_key("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----")
                .unwrap_err(),
            KeyError::BadPem
        );
        assert_eq!(
            parse_private_key("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
                .unwrap_err(),
            KeyError::InvalidRsa
        );
    }
}
