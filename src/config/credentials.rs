//! The service account's credentials: the JSON file downloaded once from
//! the Portal (docs/service.md §2.2), with single fields overridden by the `SA_*`
//! settings, and the RSA private key that signs assertions.

use std::fmt;
use std::io::{BufReader, Read};
use std::path::Path;

use base64::Engine as _;
use rustls_pki_types::pem::SectionKind;

use crate::Secret;
use crate::config::{
    self, CLIENT_ID, ConfigError, CredentialSettings, IAM_AUDIENCE, ORG_ID, ORGANIZATION_ID,
    PRIVATE_KEY, Setting, Source, Sourced, TOKEN_URI,
};
use crate::target::TargetUrl;

/// A credentials file is a few kilobytes; anything much larger is not one.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The seed's reference key size, and the floor for RS256 today.
pub const MIN_KEY_BITS: usize = 2048;
/// The only value of the file's `type` field (docs/service.md §2.2).
const FILE_TYPE: &str = "service_account";

/// Everything needed to obtain a token for one service account.
#[derive(Debug)]
pub struct Credentials {
    pub client_id: String,
    pub organization_id: String,
    pub iam_audience: String,
    pub token_uri: TargetUrl,
    pub key: std::sync::Arc<SigningKey>,
}

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

/// The fields of a credentials file, as strings, before merging.
#[derive(Default)]
struct FileFields {
    client_id: Option<String>,
    organization_id: Option<String>,
    private_key: Option<Secret>,
    token_uri: Option<String>,
    iam_audience: Option<String>,
}

fn file_prefix(path: &Path, source: &Source) -> String {
    format!("credentials file {} ({source})", path.display())
}

/// Reads the credentials file, refusing one too large to be one.
pub fn read_file(path: &Path, source: &Source) -> Result<Vec<u8>, String> {
    let read = || -> std::io::Result<Vec<u8>> {
        // Opening a FIFO blocks until a writer comes, and a device may never
        // end: only regular files are read (a swap between this check and
        // the open is not a threat this guards against).
        let meta = std::fs::metadata(path)?;
        if meta.is_dir() {
            return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
        }
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        // Bounded by reading, not by the size reported: the file may grow.
        let mut bytes = Vec::new();
        std::fs::File::open(path)?
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(std::io::Error::other(
                "larger than 1 MiB; not a credentials file",
            ));
        }
        Ok(bytes)
    };
    read().map_err(|err| {
        format!(
            "{}: cannot be read: {}",
            file_prefix(path, source),
            config::io_reason(&err)
        )
    })
}

/// Parses a credentials file. Syntax errors name a position only: serde's
/// typed errors would quote values, and the file holds the private key.
fn parse_file(bytes: &[u8]) -> Result<FileFields, Vec<String>> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|err| {
        vec![format!(
            "is not valid JSON (line {}, column {})",
            err.line(),
            err.column()
        )]
    })?;
    let serde_json::Value::Object(object) = value else {
        return Err(vec!["is not a JSON object".into()]);
    };
    let mut errors = Vec::new();
    let take = |name: &str, errors: &mut Vec<String>| match object.get(name) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
            errors.push(format!("field `{name}` is empty"));
            None
        }
        Some(serde_json::Value::String(s)) => Some(s.trim().to_string()),
        Some(_) => {
            errors.push(format!("field `{name}` must be a string"));
            None
        }
    };
    match take("type", &mut errors).as_deref() {
        Some(FILE_TYPE) => {}
        Some(other) => {
            let shown: String = other.chars().take(40).collect();
            errors.push(format!("field `type` is `{shown}`, expected `{FILE_TYPE}`"));
        }
        None => errors.push(format!("field `type` is missing (expected `{FILE_TYPE}`)")),
    }
    let fields = FileFields {
        client_id: take("client_id", &mut errors),
        organization_id: take("organization_id", &mut errors),
        private_key: take("private_key", &mut errors).map(Secret::new),
        token_uri: take("token_uri", &mut errors),
        iam_audience: take("iam_audience", &mut errors),
    };
    if errors.is_empty() {
        Ok(fields)
    } else {
        Err(errors)
    }
}

/// What the credentials file held when it was read, as a SHA-256 digest:
/// enough to notice a change without keeping a second copy of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub fn of(bytes: &[u8]) -> Fingerprint {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
        let mut out = [0; 32];
        out.copy_from_slice(digest.as_ref());
        Fingerprint(out)
    }
}

/// Loads the credentials from the file and the `SA_*` settings, checking
/// every field; all problems are reported together.
pub fn load(settings: &CredentialSettings) -> Result<Credentials, ConfigError> {
    load_with_fingerprint(settings).map(|(credentials, _)| credentials)
}

/// As [`load`], with the fingerprint of the file it read (`None` when the
/// credentials come from settings alone), so a watcher can start from the
/// exact content that was loaded.
pub fn load_with_fingerprint(
    settings: &CredentialSettings,
) -> Result<(Credentials, Option<Fingerprint>), ConfigError> {
    let bytes = settings
        .file
        .as_ref()
        .map(|file| read_file(&file.value, &file.source));
    let fingerprint = bytes
        .as_ref()
        .and_then(|b| b.as_deref().ok())
        .map(Fingerprint::of);
    merge(
        settings,
        bytes.as_ref().map(|b| b.as_deref().map_err(String::clone)),
    )
    .map(|credentials| (credentials, fingerprint))
}

/// Loads the credentials with the file's content already read: `file` is
/// what `settings.file` holds, or `None` when no file is set.
pub fn load_from(
    settings: &CredentialSettings,
    file: Option<&[u8]>,
) -> Result<Credentials, ConfigError> {
    merge(settings, file.map(Ok))
}

/// Merges the file's fields (or why it could not be read) with the `SA_*`
/// settings. A broken file does not hide problems with the settings.
fn merge(
    settings: &CredentialSettings,
    file: Option<Result<&[u8], String>>,
) -> Result<Credentials, ConfigError> {
    let mut errors = Vec::new();
    let parsed = settings.file.as_ref().zip(file).map(|(file, bytes)| {
        // A read error names the file already.
        let bytes = bytes.map_err(|why| vec![why])?;
        let prefix = file_prefix(&file.value, &file.source);
        parse_file(bytes)
            .map(|fields| (file.value.as_path(), fields))
            .map_err(|why| {
                why.into_iter()
                    .map(|w| format!("{prefix}: {w}"))
                    .collect::<Vec<_>>()
            })
    });
    let file = match parsed {
        Some(Ok(file)) => Some(file),
        Some(Err(why)) => {
            errors.extend(why);
            None
        }
        None => None,
    };
    // The file's own problems are reported; missing-field errors that
    // follow from them would only be noise. Problems with the `SA_*`
    // settings are still reported, so one run shows them all.
    let file_broken = settings.file.is_some() && file.is_none();
    let nothing = settings.file.is_none()
        && settings.client_id.is_none()
        && settings.private_key.is_none()
        && settings.token_uri.is_none();
    if nothing {
        return Err(ConfigError::new(vec![format!(
            "no credentials: set {} to the JSON file downloaded from the Portal, or set {}, {}, {} and {}",
            config::CREDENTIALS_FILE.env,
            CLIENT_ID.env,
            PRIVATE_KEY.env,
            IAM_AUDIENCE.env,
            TOKEN_URI.env
        )]));
    }

    // A setting overrides the file's field of the same meaning.
    let pick = |setting: &'static Setting,
                over: &Option<Sourced<String>>,
                field: &'static str,
                from_file: Option<&String>| {
        over.clone()
            .or_else(|| {
                let (path, _) = file.as_ref()?;
                Some(Sourced {
                    value: from_file?.clone(),
                    source: file_source(path, field),
                })
            })
            .ok_or(setting)
    };
    let fields = file.as_ref().map(|(_, f)| f);
    let missing = |setting: &Setting, field: &str| {
        (!file_broken).then(|| {
            format!(
                "{}: not set (give `{field}` in the credentials file or set {})",
                setting.env, setting.env
            )
        })
    };

    let client_id = pick(
        &CLIENT_ID,
        &settings.client_id,
        "client_id",
        fields.and_then(|f| f.client_id.as_ref()),
    );
    let audience = pick(
        &IAM_AUDIENCE,
        &settings.iam_audience,
        "iam_audience",
        fields.and_then(|f| f.iam_audience.as_ref()),
    );
    let token_uri = pick(
        &TOKEN_URI,
        &settings.token_uri,
        "token_uri",
        fields.and_then(|f| f.token_uri.as_ref()),
    );
    let organization_id = pick(
        &ORGANIZATION_ID,
        &settings.organization_id,
        "organization_id",
        fields.and_then(|f| f.organization_id.as_ref()),
    )
    .or_else(|_| settings.org_id.clone().ok_or(&ORGANIZATION_ID));
    let key = settings.private_key.clone().or_else(|| {
        let (path, fields) = file.as_ref()?;
        Some(Sourced {
            value: fields.private_key.clone()?,
            source: file_source(path, "private_key"),
        })
    });

    let client_id = client_id
        .map_err(|s| errors.extend(missing(s, "client_id")))
        .ok();
    let audience = audience
        .map_err(|s| errors.extend(missing(s, "iam_audience")))
        .ok();
    let organization_id = organization_id
        .map_err(|s| {
            if !file_broken {
                errors.push(format!(
                    "{}: not set (give `organization_id` in the credentials file, or set {} or {})",
                    s.env, s.env, ORG_ID.env
                ));
            }
        })
        .ok();
    let token_uri = match token_uri {
        Ok(raw) => TargetUrl::parse(&raw.value, true)
            .map_err(|why| errors.push(format!("{} ({}): {why}", TOKEN_URI.env, raw.source)))
            .ok(),
        Err(s) => {
            errors.extend(missing(s, "token_uri"));
            None
        }
    };
    let key = match key {
        Some(pem) => parse_private_key(pem.value.expose())
            .map_err(|why| errors.push(format!("{} ({}): {why}", PRIVATE_KEY.env, pem.source)))
            .ok(),
        None => {
            errors.extend(missing(&PRIVATE_KEY, "private_key"));
            None
        }
    };

    match (client_id, audience, organization_id, token_uri, key) {
        (Some(client_id), Some(audience), Some(organization_id), Some(token_uri), Some(key))
            if errors.is_empty() =>
        {
            Ok(Credentials {
                client_id: client_id.value,
                organization_id: organization_id.value,
                iam_audience: audience.value,
                token_uri,
                key: std::sync::Arc::new(key),
            })
        }
        _ => Err(ConfigError::new(errors)),
    }
}

fn file_source(path: &Path, field: &'static str) -> Source {
    Source::File {
        path: path.to_path_buf(),
        key: field,
    }
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
    fn file_syntax_error_names_position_not_content() {
        let Err(errors) = parse_file(b"{\"private_key\": \"MIIsecret\n") else {
            panic!("parsed")
        };
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("is not valid JSON (line"),
            "{errors:?}"
        );
        assert!(!errors[0].contains("MIIsecret"));
    }

    #[test]
    fn only_regular_files_of_at_most_a_mebibyte_are_read() {
        let source = Source::Env(config::CREDENTIALS_FILE.env);
        let err = read_file(Path::new("/dev/zero"), &source).unwrap_err();
        assert!(err.ends_with("cannot be read: not a regular file"), "{err}");
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = read_file(&fifo, &source).unwrap_err();
            assert!(err.ends_with("cannot be read: not a regular file"), "{err}");
        }
        let big = dir.join("big.json");
        std::fs::write(&big, vec![b' '; MAX_FILE_BYTES as usize + 1]).unwrap();
        let err = read_file(&big, &source).unwrap_err();
        assert!(
            err.ends_with("cannot be read: larger than 1 MiB; not a credentials file"),
            "{err}"
        );
        let err = read_file(dir, &source).unwrap_err();
        assert!(err.ends_with("cannot be read: is a directory"), "{err}");
    }

    #[test]
    fn a_broken_file_does_not_hide_problems_with_the_sa_settings() {
        let env = |name: &'static str, value: &str| Sourced {
            value: value.to_string(),
            source: Source::Env(name),
        };
        let temp = tempfile::tempdir().unwrap();
        let settings = CredentialSettings {
            file: Some(Sourced {
                value: temp.path().join("missing.json"),
                source: Source::Env(config::CREDENTIALS_FILE.env),
            }),
            token_uri: Some(env(TOKEN_URI.env, "http://iam.example.com/token")),
            ..CredentialSettings::default()
        };
        let err = load(&settings).unwrap_err();
        let lines = err.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("credentials file "), "{lines:?}");
        assert!(
            lines[1].starts_with("SA_TOKEN_URI (environment variable SA_TOKEN_URI): "),
            "{lines:?}"
        );
        // What the file would have given is not reported as unset.
        assert!(!lines.iter().any(|l| l.contains("not set")), "{lines:?}");
    }

    #[test]
    fn file_type_must_be_service_account() {
        let Err(errors) = parse_file(br#"{"type":"authorized_user"}"#) else {
            panic!("parsed")
        };
        assert_eq!(
            errors,
            ["field `type` is `authorized_user`, expected `service_account`"]
        );
        let Err(errors) = parse_file(br#"{"client_id":"x"}"#) else {
            panic!("parsed")
        };
        assert_eq!(
            errors,
            ["field `type` is missing (expected `service_account`)"]
        );
    }

    #[test]
    fn wrongly_typed_field_is_named_without_its_value() {
        let Err(errors) =
            parse_file(br#"{"type":"service_account","private_key":["MIIsecret"],"client_id":""}"#)
        else {
            panic!("parsed")
        };
        assert_eq!(
            errors,
            [
                "field `client_id` is empty",
                "field `private_key` must be a string"
            ]
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
