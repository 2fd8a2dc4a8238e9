//! The RSA private key that signs assertions: a PEM key parsed and
//! checked once (PKCS#8 or PKCS#1, 2048 bits or more), or a key in a
//! PKCS#11 token opened and checked once (crate::hsm); why a key was
//! refused; and the session binding secret the verifier derives from it.
//! Also a key's public half, with its JWK thumbprint, and a public key
//! read alone (the OpenID Connect provider's previous key).

use std::fmt;
use std::io::BufReader;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls_pki_types::pem::SectionKind;

use crate::config::settings::TOKEN_TIMEOUT;
use crate::hsm::{HsmError, HsmKey, Proof};
use crate::secret::Secret;

/// The reference key size of docs/service.md, and the floor for RS256 today.
pub const MIN_KEY_BITS: usize = crate::hsm::MIN_KEY_BITS;

/// The account's RSA private key, checked once at start-up.
pub struct SigningKey {
    held: Held,
    bits: usize,
    /// The public half, for a JWK set (the verifier's ID token key) and to
    /// tell two keys apart; `None` for a key in a token that does not show
    /// its exponent.
    public: Option<RsaPublic>,
    /// What the verifier binds browsers to sessions with when no key of
    /// its own is set (docs/verifier.md "Running many").
    binding_secret: [u8; 32],
}

/// Where the key is.
enum Held {
    /// Built once here rather than per assertion; jsonwebtoken's RS256
    /// signer takes PKCS#1 DER (RFC 8017 §A.1.2) whatever form the PEM was.
    Pem(jsonwebtoken::EncodingKey),
    /// In a token; `setting` names where its URI came from, for the
    /// failures that come at run time.
    Hsm { key: Box<HsmKey>, setting: String },
}

impl SigningKey {
    /// The RS256 signature of `message` (RSASSA-PKCS1-v1_5, SHA-256),
    /// base64url without padding as a JWS carries it; or why not, naming
    /// the setting for an HSM key. Blocks on the token for an HSM key:
    /// async code calls it from a blocking thread ([`SigningKey::blocks`]).
    pub fn sign_rs256(&self, message: &[u8]) -> Result<String, String> {
        match &self.held {
            Held::Pem(key) => {
                jsonwebtoken::crypto::sign(message, key, jsonwebtoken::Algorithm::RS256)
                    .map_err(|_| "the RSA signature failed".to_string())
            }
            Held::Hsm { key, setting } => key
                .sign(message)
                .map(|signature| URL_SAFE_NO_PAD.encode(signature))
                .map_err(|err| format!("{setting}: {err}")),
        }
    }

    /// Why a signature cannot start now: the key's previous one, in a
    /// token, has not returned (the caller gave up waiting on it). Async
    /// code asks before it starts a blocking thread that would only fail.
    pub fn still_signing(&self) -> Option<String> {
        match &self.held {
            Held::Hsm { key, setting } if key.signing() => Some(format!(
                "{setting}: {}",
                HsmError::StillSigning {
                    token: key.token().to_string(),
                    module: key.module_path().to_string(),
                }
            )),
            _ => None,
        }
    }

    /// Runs `sign` with this key on a blocking thread, within `limit`
    /// (`LANYARD_TOKEN_TIMEOUT`): a key in a token may wait on a device or
    /// a network HSM, which must not stall async threads, and one that
    /// does not answer is given up on. The thread stays blocked until the
    /// module returns; until then every call fails at once, with no thread
    /// started, rather than each leaving one more blocked thread behind.
    pub async fn off_async<T: Send + 'static>(
        self: &Arc<Self>,
        limit: Duration,
        sign: impl FnOnce(&SigningKey) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        if let Some(why) = self.still_signing() {
            return Err(why);
        }
        let key = Arc::clone(self);
        let signing = tokio::task::spawn_blocking(move || sign(&key));
        match tokio::time::timeout(limit, signing).await {
            Ok(Ok(signed)) => signed,
            Ok(Err(_)) => Err("the signing thread ended".into()),
            Err(_) => Err(format!(
                "the key's token did not sign within {} ms ({}); the HSM may be unreachable",
                limit.as_millis(),
                TOKEN_TIMEOUT.env
            )),
        }
    }

    /// The key is in a token that refused its PIN at run time: it signs
    /// nothing until it is loaded anew.
    pub fn pin_refused(&self) -> bool {
        self.hsm().is_some_and(HsmKey::pin_refused)
    }

    /// Signing may block: the key is in a token, behind a module that may
    /// wait on a device or the network.
    pub fn blocks(&self) -> bool {
        matches!(self.held, Held::Hsm { .. })
    }

    /// The token's key, when the key is in one (`lanyard check` reports
    /// where, and proves a signature).
    pub fn hsm(&self) -> Option<&HsmKey> {
        match &self.held {
            Held::Pem(_) => None,
            Held::Hsm { key, .. } => Some(key),
        }
    }

    /// Modulus size in bits.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// A secret every holder of this key computes alike and nobody else
    /// can: HKDF over the key's RS256 signature of a fixed label, which
    /// RSASSA-PKCS1-v1_5 makes deterministic (RFC 8017 §8.2). A signature
    /// rather than the key's bytes, so that a PKCS#1 and a PKCS#8 file of
    /// one key agree, and a key that signs in a token, which is never
    /// read, gives it too: every replica with the same key, in a file or
    /// in an HSM, derives the same. No assertion ever signs this label.
    pub fn binding_secret(&self) -> &[u8; 32] {
        &self.binding_secret
    }
}

/// An RSA public key's two numbers, big-endian without leading zeros, as
/// a JWK carries them (RFC 7518 §6.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsaPublic {
    pub modulus: Vec<u8>,
    pub exponent: Vec<u8>,
}

impl SigningKey {
    /// The key's public half, when it is known.
    pub fn public(&self) -> Option<&RsaPublic> {
        self.public.as_ref()
    }
}

impl RsaPublic {
    /// The key's JWK thumbprint (RFC 7638 §3), the `kid` it is published
    /// and named by: SHA-256 over its required members in lexicographic
    /// order with no white space, in base64url. Every replica with the key
    /// computes the same, and it changes with the key.
    pub fn kid(&self) -> String {
        let canonical = format!(
            r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
            URL_SAFE_NO_PAD.encode(&self.exponent),
            URL_SAFE_NO_PAD.encode(&self.modulus)
        );
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
        URL_SAFE_NO_PAD.encode(digest.as_ref())
    }
}

/// What [`SigningKey::binding_secret`] signs, and its HKDF label.
const BINDING_LABEL: &[u8] = b"lanyard verifier session binding v1";

fn binding_secret(signature: &[u8]) -> Result<[u8; 32], KeyError> {
    use aws_lc_rs::hkdf;
    let mut secret = [0; 32];
    hkdf::Salt::new(hkdf::HKDF_SHA256, BINDING_LABEL)
        .extract(signature)
        .expand(&[BINDING_LABEL], hkdf::HKDF_SHA256)
        .and_then(|okm| okm.fill(&mut secret))
        .map_err(|_| KeyError::InvalidRsa)?;
    Ok(secret)
}

fn pem_binding_secret(pair: &aws_lc_rs::rsa::KeyPair) -> Result<[u8; 32], KeyError> {
    use aws_lc_rs::{rand::SystemRandom, signature::RSA_PKCS1_SHA256};
    let mut signature = vec![0; pair.public_modulus_len()];
    pair.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        BINDING_LABEL,
        &mut signature,
    )
    .map_err(|_| KeyError::InvalidRsa)?;
    binding_secret(&signature)
}

/// The key `SA_PRIVATE_KEY` or the credentials file's `private_key` gives:
/// a PKCS#11 URI opens the key in its token (blocking: start-up and
/// reloads call this off the async threads); anything else is read as
/// PEM. `setting` names where the value came from, for the failures that
/// come at run time; a key in a token that is not open and signing within
/// `limit` is refused.
pub fn load_key(value: &str, setting: &str, limit: Duration) -> Result<SigningKey, KeyError> {
    if !crate::hsm::is_pkcs11_uri(value) {
        return parse_private_key(value);
    }
    let uri = value.to_string();
    let (key, proof) = within(limit, move || {
        let key = HsmKey::open(&uri)?;
        // Signed and verified with the public half: the token signs RS256
        // with this key, proven before anything starts.
        let proof = key.sign_verified(BINDING_LABEL)?;
        Ok::<(HsmKey, Proof), HsmError>((key, proof))
    })
    .map_err(|late| match late {
        Late::Elapsed => KeyError::NoAnswer(limit),
        Late::Ended => KeyError::OpenEnded,
    })??;
    Ok(SigningKey {
        bits: key.bits(),
        public: key.public_exponent().map(|exponent| RsaPublic {
            modulus: key.public_modulus().to_vec(),
            exponent: exponent.to_vec(),
        }),
        binding_secret: binding_secret(&proof.signature)?,
        held: Held::Hsm {
            key: Box::new(key),
            setting: setting.to_string(),
        },
    })
}

/// Why [`within`] has no result.
#[derive(Debug, PartialEq, Eq)]
enum Late {
    Elapsed,
    /// The thread ended without one (it panicked).
    Ended,
}

/// Runs `work` on a thread of its own and waits for it at most `limit`.
/// Opening a key calls its module, which may wait for ever on a network
/// HSM gone; start-up and a reload then fail, saying so, rather than hang.
/// Work given up on carries on and is dropped when it ends (a key opened
/// late closes its session then).
fn within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Late> {
    let (done, result) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("lanyard-pkcs11-open".into())
        .spawn(move || {
            let _ = done.send(work());
        });
    if spawned.is_err() {
        return Err(Late::Ended);
    }
    result.recv_timeout(limit).map_err(|err| match err {
        RecvTimeoutError::Timeout => Late::Elapsed,
        RecvTimeoutError::Disconnected => Late::Ended,
    })
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.held {
            Held::Pem(_) => write!(f, "SigningKey(RSA {} bits, [redacted])", self.bits),
            Held::Hsm { key, .. } => write!(f, "SigningKey({key:?})"),
        }
    }
}

/// The text config/credentials.example.json holds in place of a key: a
/// file copied from it and never filled in is said as such, not as a
/// broken key.
const EXAMPLE_PLACEHOLDER: &str = "REPLACE THIS WITH THE KEY OF THE FILE THE PORTAL GAVE YOU";

/// Why a private key was refused. Messages never include key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("is not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)")]
    NotPem,
    #[error(
        "is still the placeholder of config/credentials.example.json, not a key: put the private key of the credentials file the Portal gave you in its place, or use that file"
    )]
    ExamplePlaceholder,
    #[error(
        "is encrypted; lanyard needs an unencrypted key (decrypt it with `openssl pkey -in key.pem -out plain.pem` and keep the result in a Secret)"
    )]
    Encrypted,
    #[error("is an {0} key; RS256 needs an RSA key")]
    NotRsa(&'static str),
    #[error("is a {0}, not a private key")]
    NotPrivate(&'static str),
    #[error(
        "holds no RSA key (expected a -----BEGIN PRIVATE KEY----- block, or the public key alone in a -----BEGIN PUBLIC KEY----- block, as `openssl pkey -pubout` writes it)"
    )]
    NoRsaKey,
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
    #[error("{0}")]
    Hsm(#[from] HsmError),
    #[error(
        "the PKCS#11 module did not open the key and sign within {} ms ({}); is the HSM reachable?",
        .0.as_millis(),
        TOKEN_TIMEOUT.env
    )]
    NoAnswer(Duration),
    #[error("names a key in a PKCS#11 token, and the thread opening it ended without an answer")]
    OpenEnded,
}

impl KeyError {
    /// The key's HSM did not answer, or failed: the key may open at a
    /// later try ([`HsmError::is_unanswered`]).
    pub fn is_unanswered(&self) -> bool {
        match self {
            KeyError::NoAnswer(_) | KeyError::OpenEnded => true,
            KeyError::Hsm(err) => err.is_unanswered(),
            _ => false,
        }
    }
}

/// The first private key section of a PEM text, and its kind.
fn private_section(pem: &str) -> Result<(SectionKind, Vec<u8>), KeyError> {
    let mut reader = BufReader::new(pem.as_bytes());
    loop {
        match rustls_pki_types::pem::from_buf(&mut reader) {
            Ok(Some((kind @ (SectionKind::PrivateKey | SectionKind::RsaPrivateKey), der))) => {
                return Ok((kind, der));
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return Err(KeyError::BadPem),
        }
    }
}

/// A key pair's public half.
fn public_of(pair: &aws_lc_rs::rsa::KeyPair) -> RsaPublic {
    use aws_lc_rs::signature::KeyPair as _;
    let key = pair.public_key();
    RsaPublic {
        modulus: key.modulus().big_endian_without_leading_zero().to_vec(),
        exponent: key.exponent().big_endian_without_leading_zero().to_vec(),
    }
}

/// Parses a PEM RSA private key (PKCS#8 or PKCS#1), accepting literal `\n`
/// sequences as newlines (the form keys take in environment variables).
pub fn parse_private_key(pem: &str) -> Result<SigningKey, KeyError> {
    let pem = pem.trim().replace("\\n", "\n");
    if pem.contains(EXAMPLE_PLACEHOLDER) {
        return Err(KeyError::ExamplePlaceholder);
    }
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

    let (kind, der) = private_section(&pem)?;
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
    let binding_secret = pem_binding_secret(&pair)?;
    let public = public_of(&pair);

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
        held: Held::Pem(encoding),
        bits,
        public: Some(public),
        binding_secret,
    })
}

/// The RSA public key in a PEM `PUBLIC KEY` block (SPKI, as `openssl pkey
/// -pubout` writes it), of 2048 bits or more: a key that signs no more,
/// published only so that what it signed still verifies.
pub fn parse_public_key(pem: &str) -> Result<RsaPublic, KeyError> {
    let pem = pem.trim().replace("\\n", "\n");
    let mut reader = BufReader::new(pem.as_bytes());
    let der = loop {
        match rustls_pki_types::pem::from_buf(&mut reader) {
            Ok(Some((SectionKind::PublicKey, der))) => break der,
            Ok(Some(_)) => continue,
            Ok(None) => return Err(KeyError::NoRsaKey),
            Err(_) => return Err(KeyError::BadPem),
        }
    };
    let key = aws_lc_rs::rsa::PublicKey::from_der(&der).map_err(|_| KeyError::NoRsaKey)?;
    if key.modulus_len() * 8 < MIN_KEY_BITS {
        return Err(KeyError::TooShort);
    }
    Ok(RsaPublic {
        modulus: key.modulus().big_endian_without_leading_zero().to_vec(),
        exponent: key.exponent().big_endian_without_leading_zero().to_vec(),
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
    fn opening_a_key_that_never_answers_is_given_up_after_the_limit() {
        // An answer, or a thread that ends, is not waited for to the limit.
        let ample = Duration::from_secs(60);
        assert_eq!(within(ample, || 7), Ok(7));
        let panicked = within(ample, || -> u8 { panic!("the module crashed") });
        assert_eq!(panicked, Err(Late::Ended));
        let (_never, hangs) = mpsc::channel::<()>();
        let hung = within(Duration::from_millis(20), move || hangs.recv());
        assert_eq!(hung, Err(Late::Elapsed));
        assert_eq!(
            KeyError::NoAnswer(Duration::from_secs(10)).to_string(),
            "the PKCS#11 module did not open the key and sign within 10000 ms (LANYARD_TOKEN_TIMEOUT); is the HSM reachable?"
        );
    }

    /// RFC 7638 §3.1's example key and its thumbprint.
    #[test]
    fn the_kid_is_the_rfc_7638_thumbprint() {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let public = RsaPublic {
            modulus: URL_SAFE_NO_PAD.decode(n).unwrap(),
            exponent: vec![1, 0, 1],
        };
        assert_eq!(public.kid(), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    }

    #[test]
    fn a_public_key_alone_gives_the_public_half_of_its_private_key() {
        let fixture = |name: &str| {
            let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(path).unwrap()
        };
        let private = parse_private_key(&fixture("rsa2048.pkcs8.pem")).unwrap();
        let public = parse_public_key(&fixture("rsa2048.pub.pem")).unwrap();
        assert_eq!(Some(&public), private.public());
        assert_eq!(
            parse_public_key(&fixture("rsa2048.pkcs8.pem")),
            Err(KeyError::NoRsaKey)
        );
        assert_eq!(parse_public_key("hello"), Err(KeyError::NoRsaKey));
        assert_eq!(
            parse_private_key(&fixture("rsa2048.pub.pem")).unwrap_err(),
            KeyError::NotPrivate("public key")
        );
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
