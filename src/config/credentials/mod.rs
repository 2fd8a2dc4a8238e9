//! The service account's credentials: the JSON file downloaded once from
//! the Portal (docs/service.md §2.2), with single fields overridden by the
//! `SA_*` settings, and the RSA private key that signs assertions (a PEM
//! key, or a PKCS#11 URI naming a key in a token).
//!
//! - this file: [`CredentialSettings`] as the loader read them, merged with
//!   the file's fields into checked [`Credentials`].
//! - `file`: the credentials file read, parsed and fingerprinted.
//! - `key`: the private key parsed or opened, and checked, [`SigningKey`].

mod file;
mod key;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use file::{Fingerprint, PinSeen, file_prefix, pin_seen, read_file};
pub use key::{
    KeyError, MIN_KEY_BITS, RsaPublic, SigningKey, load_key, parse_private_key, parse_public_key,
};

use super::declaration::Setting;
use super::defaults::DEFAULT_TOKEN_TIMEOUT;
use super::problems::ConfigError;
use super::settings::{
    CLIENT_ID, CREDENTIALS_FILE, IAM_AUDIENCE, ORG_ID, ORGANIZATION_ID, PRIVATE_KEY, TOKEN_URI,
};
use super::sources::Sourced;
use crate::secret::Secret;
use crate::target::TargetUrl;
use file::{FileFields, file_source, parse_file};

/// The credentials-related settings, unresolved: the credentials file is
/// read and merged with these by [`load`].
#[derive(Debug, Clone)]
pub struct CredentialSettings {
    pub file: Option<Sourced<PathBuf>>,
    pub client_id: Option<Sourced<String>>,
    pub private_key: Option<Sourced<Secret>>,
    pub iam_audience: Option<Sourced<String>>,
    pub token_uri: Option<Sourced<String>>,
    pub organization_id: Option<Sourced<String>>,
    /// `ORG_ID`, the fallback for the organization id.
    pub org_id: Option<Sourced<String>>,
    /// How long a key in a token has to open and sign its first signature
    /// (`LANYARD_TOKEN_TIMEOUT`, as a token request has): an HSM that does
    /// not answer fails start-up or the reload rather than holding it.
    pub key_timeout: Duration,
}

impl Default for CredentialSettings {
    fn default() -> Self {
        CredentialSettings {
            file: None,
            client_id: None,
            private_key: None,
            iam_audience: None,
            token_uri: None,
            organization_id: None,
            org_id: None,
            key_timeout: DEFAULT_TOKEN_TIMEOUT,
        }
    }
}

/// Everything needed to obtain a token for one service account. A clone
/// shares the key.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub client_id: String,
    pub organization_id: String,
    pub iam_audience: String,
    pub token_uri: TargetUrl,
    pub key: std::sync::Arc<SigningKey>,
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
    let nothing = settings.file.is_none()
        && settings.client_id.is_none()
        && settings.private_key.is_none()
        && settings.token_uri.is_none();
    if nothing {
        return Err(ConfigError::new(vec![format!(
            "no credentials: set {} to the JSON file downloaded from the Portal, or set {}, {}, {} and {}",
            CREDENTIALS_FILE.env, CLIENT_ID.env, PRIVATE_KEY.env, IAM_AUDIENCE.env, TOKEN_URI.env
        )]));
    }
    let (fields, errors) = match file_fields(settings, file) {
        Ok(fields) => (fields, Vec::new()),
        Err(why) => (None, why),
    };
    let mut merge = Merge {
        file: fields.as_ref().map(|(path, fields)| (*path, fields)),
        file_broken: settings.file.is_some() && fields.is_none(),
        errors,
        unanswered: false,
    };
    let client_id = merge.required(&CLIENT_ID, &settings.client_id, "client_id", |f| {
        f.client_id.as_ref()
    });
    let audience = merge.required(&IAM_AUDIENCE, &settings.iam_audience, "iam_audience", |f| {
        f.iam_audience.as_ref()
    });
    let organization_id = merge.organization_id(settings);
    let token_uri = merge.token_uri(settings);
    let key = merge.key(settings);
    match (client_id, audience, organization_id, token_uri, key) {
        (Some(client_id), Some(audience), Some(organization_id), Some(token_uri), Some(key))
            if merge.errors.is_empty() =>
        {
            Ok(Credentials {
                client_id: client_id.value,
                organization_id: organization_id.value,
                iam_audience: audience.value,
                token_uri,
                key: std::sync::Arc::new(key),
            })
        }
        _ => Err(ConfigError::new(merge.errors).unanswered_if(merge.unanswered)),
    }
}

/// The credentials file's fields, `None` when no file is set; when it
/// cannot be used, its problems, each naming the file.
fn file_fields<'a>(
    settings: &'a CredentialSettings,
    file: Option<Result<&[u8], String>>,
) -> Result<Option<(&'a Path, FileFields)>, Vec<String>> {
    let Some((given, bytes)) = settings.file.as_ref().zip(file) else {
        return Ok(None);
    };
    // A read error names the file already.
    let bytes = bytes.map_err(|why| vec![why])?;
    let prefix = file_prefix(&given.value, &given.source);
    match parse_file(bytes) {
        Ok(fields) => Ok(Some((given.value.as_path(), fields))),
        Err(why) => Err(why.into_iter().map(|w| format!("{prefix}: {w}")).collect()),
    }
}

/// The file's fields beside the settings that override them, and the
/// problems found so far, in the order they are reported.
struct Merge<'a> {
    file: Option<(&'a Path, &'a FileFields)>,
    /// The file was given but cannot be used. Its own problems are
    /// reported; that the fields it would have given are unset would only
    /// be noise.
    file_broken: bool,
    errors: Vec<String>,
    /// The key's HSM did not answer ([`ConfigError::is_unanswered`]).
    unanswered: bool,
}

impl Merge<'_> {
    /// The setting, else the file's field of the same meaning.
    fn pick(
        &self,
        over: &Option<Sourced<String>>,
        field: &'static str,
        in_file: impl Fn(&FileFields) -> Option<&String>,
    ) -> Option<Sourced<String>> {
        over.clone().or_else(|| {
            let (path, fields) = self.file?;
            Some(Sourced {
                value: in_file(fields)?.clone(),
                source: file_source(path, field),
            })
        })
    }

    /// As [`Merge::pick`], reporting the setting unset when neither gives it.
    fn required(
        &mut self,
        setting: &Setting,
        over: &Option<Sourced<String>>,
        field: &'static str,
        in_file: impl Fn(&FileFields) -> Option<&String>,
    ) -> Option<Sourced<String>> {
        let found = self.pick(over, field, in_file);
        if found.is_none() {
            self.missing(setting, field);
        }
        found
    }

    fn missing(&mut self, setting: &Setting, field: &str) {
        if !self.file_broken {
            self.errors.push(format!(
                "{}: not set (give `{field}` in the credentials file or set {})",
                setting.env, setting.env
            ));
        }
    }

    /// `SA_ORGANIZATION_ID`, else the file's, else `ORG_ID`.
    fn organization_id(&mut self, settings: &CredentialSettings) -> Option<Sourced<String>> {
        let found = self
            .pick(&settings.organization_id, "organization_id", |f| {
                f.organization_id.as_ref()
            })
            .or_else(|| settings.org_id.clone());
        if found.is_none() && !self.file_broken {
            self.errors.push(format!(
                "{}: not set (give `organization_id` in the credentials file, or set {} or {})",
                ORGANIZATION_ID.env, ORGANIZATION_ID.env, ORG_ID.env
            ));
        }
        found
    }

    fn token_uri(&mut self, settings: &CredentialSettings) -> Option<TargetUrl> {
        let raw = self.required(&TOKEN_URI, &settings.token_uri, "token_uri", |f| {
            f.token_uri.as_ref()
        })?;
        TargetUrl::parse(&raw.value, true)
            .map_err(|why| {
                let line = format!("{} ({}): {why}", TOKEN_URI.env, raw.source);
                self.errors.push(line);
            })
            .ok()
    }

    fn key(&mut self, settings: &CredentialSettings) -> Option<SigningKey> {
        // `SA_PRIVATE_KEY` wins, so a credentials file may leave the key
        // out when the variable names it (a PKCS#11 URI, say).
        let given = settings.private_key.clone().or_else(|| {
            let (path, fields) = self.file?;
            Some(Sourced {
                value: fields.private_key.clone()?,
                source: file_source(path, "private_key"),
            })
        });
        let Some(given) = given else {
            self.missing(&PRIVATE_KEY, "private_key");
            return None;
        };
        let setting = format!("{} ({})", PRIVATE_KEY.env, given.source);
        load_key(given.value.expose(), &setting, settings.key_timeout)
            .map_err(|why| {
                self.unanswered |= why.is_unanswered();
                self.errors.push(format!("{setting}: {why}"));
            })
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::sources::Source;

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
                source: Source::Env(CREDENTIALS_FILE.env),
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
}
