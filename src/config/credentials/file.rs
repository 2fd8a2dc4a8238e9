//! The credentials file downloaded once from the Portal (docs/service.md
//! §2.2): read only if it is a regular file of at most a mebibyte, parsed
//! into its fields without ever quoting them, and fingerprinted so a
//! watcher can tell when it changed; with it, the PIN file of a key in a
//! token, digested under a key of the watcher's.

use std::fmt;
use std::path::Path;

use aws_lc_rs::hmac;

use super::CredentialSettings;
use crate::config::sources::{Source, io_reason};
use crate::files::read_small;
use crate::secret::Secret;

/// A credentials file is a few kilobytes; anything much larger is not one.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The only value of the file's `type` field (docs/service.md §2.2).
const FILE_TYPE: &str = "service_account";

/// The fields of a credentials file, as strings, before merging.
#[derive(Default)]
pub(super) struct FileFields {
    pub(super) client_id: Option<String>,
    pub(super) organization_id: Option<String>,
    pub(super) private_key: Option<Secret>,
    pub(super) token_uri: Option<String>,
    pub(super) iam_audience: Option<String>,
}

/// How problems of the credentials file at `path` begin.
pub fn file_prefix(path: &Path, source: &Source) -> String {
    format!("credentials file {} ({source})", path.display())
}

/// Reads the credentials file, refusing one too large to be one.
pub fn read_file(path: &Path, source: &Source) -> Result<Vec<u8>, String> {
    read_small(path, MAX_FILE_BYTES, "a credentials file").map_err(|err| {
        format!(
            "{}: cannot be read: {}",
            file_prefix(path, source),
            io_reason(&err)
        )
    })
}

/// Parses a credentials file. Syntax errors name a position only: serde's
/// typed errors would quote values, and the file holds the private key.
pub(super) fn parse_file(bytes: &[u8]) -> Result<FileFields, Vec<String>> {
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

/// The PIN file of a key in a token, as the credentials watcher compares
/// it: a keyed digest of its content ([`crate::hsm::pin_digest`]), never
/// the PIN, or why it cannot be read.
#[derive(Clone, PartialEq, Eq)]
pub enum PinSeen {
    Digest([u8; 32]),
    Unreadable(String),
}

impl fmt::Debug for PinSeen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinSeen::Digest(_) => f.write_str("PinSeen::Digest([redacted])"),
            PinSeen::Unreadable(why) => f.debug_tuple("PinSeen::Unreadable").field(why).finish(),
        }
    }
}

/// The PIN file of the key the settings and the file's content give, when
/// it is in a token and its URI names one: `SA_PRIVATE_KEY` first, else
/// the file's `private_key`, as loading takes them. `None` for a PEM key,
/// a URI that does not parse (loading says why), or no PIN file.
pub fn pin_seen(
    settings: &CredentialSettings,
    file: Option<&[u8]>,
    key: &hmac::Key,
) -> Option<PinSeen> {
    let in_file;
    let value = match &settings.private_key {
        Some(given) => &given.value,
        None => {
            in_file = parse_file(file?).ok()?.private_key?;
            &in_file
        }
    };
    if !crate::hsm::is_pkcs11_uri(value.expose()) {
        return None;
    }
    let path = crate::hsm::pin_file_of(value.expose())?;
    Some(match crate::hsm::pin_digest(&path, key) {
        Ok(digest) => PinSeen::Digest(digest),
        Err(why) => PinSeen::Unreadable(why.to_string()),
    })
}

pub(super) fn file_source(path: &Path, field: &'static str) -> Source {
    Source::File {
        path: path.to_path_buf(),
        key: field,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let source = Source::Env(crate::config::settings::CREDENTIALS_FILE.env);
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
    fn the_pin_file_is_seen_as_a_keyed_digest_never_as_the_pin() {
        let temp = tempfile::tempdir().unwrap();
        let pin = temp.path().join("pin");
        std::fs::write(&pin, "4417\n").unwrap();
        let uri = format!(
            "pkcs11:token=t;object=o?module-path=/m.so&pin-source=file:{}",
            pin.display()
        );
        let file = |key: &str| {
            serde_json::json!({"type": "service_account", "private_key": key})
                .to_string()
                .into_bytes()
        };
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng).unwrap();
        let settings = CredentialSettings::default();
        let seen = |content: &[u8]| pin_seen(&settings, Some(content), &key);
        let first = seen(&file(&uri)).expect("a PIN file");
        assert!(matches!(first, PinSeen::Digest(_)));
        assert_eq!(format!("{first:?}"), "PinSeen::Digest([redacted])");
        // The same PIN, trailing newline aside, is the same; another is not.
        std::fs::write(&pin, "4417").unwrap();
        assert_eq!(seen(&file(&uri)), Some(first.clone()));
        std::fs::write(&pin, "4418\n").unwrap();
        assert_ne!(seen(&file(&uri)), Some(first.clone()));
        // Keyed: not the plain SHA-256 of the PIN, which gives the PIN away.
        let plain = Fingerprint::of(b"4418");
        assert!(!matches!(seen(&file(&uri)), Some(PinSeen::Digest(d)) if d == plain.0));
        std::fs::remove_file(&pin).unwrap();
        let gone = seen(&file(&uri));
        assert!(matches!(&gone, Some(PinSeen::Unreadable(why)) if why.contains("no such file")));
        // A PEM key, or a URI naming no PIN file, has none to watch.
        assert_eq!(seen(&file("-----BEGIN PRIVATE KEY-----")), None);
        assert_eq!(
            seen(&file("pkcs11:token=t;object=o?module-path=/m.so")),
            None
        );
        // SA_PRIVATE_KEY wins over the file's private_key, as in loading.
        let from_env = CredentialSettings {
            private_key: Some(crate::config::Sourced {
                value: Secret::new("-----BEGIN PRIVATE KEY-----"),
                source: Source::Env("SA_PRIVATE_KEY"),
            }),
            ..CredentialSettings::default()
        };
        assert_eq!(pin_seen(&from_env, Some(&file(&uri)), &key), None);
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
}
