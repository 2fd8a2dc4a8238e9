//! What the OpenID Connect provider reads (docs/oidc.md): its settings,
//! checked together, and what they point at, the clients file and the
//! signing keys, read and checked once at start-up.
//!
//! - `clients`: the clients file.

pub mod clients;

use std::path::PathBuf;
use std::sync::Arc;

use super::credentials::{KeyError, RsaPublic, SigningKey, load_key, parse_private_key};
use super::issuer::{ClaimsMap, Issuer};
use super::settings::{
    OIDC_CLAIMS_MAP, OIDC_CLIENTS_FILE, OIDC_ISSUER, OIDC_PREVIOUS_KEY_FILE, OIDC_SIGNING_KEY,
    OIDC_SIGNING_KEY_FILE, OIDC_SUB_CLAIM,
};
use super::sources::{Layers, Source, Sourced, io_reason};
use crate::files::read_small;

pub use clients::{Client, Clients};

/// A PEM key file, at most: an 8192-bit key with a certificate beside it.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The provider, ready to serve: `Config::oidc` when the issuer is set.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    pub issuer: Issuer,
    pub clients: Arc<Clients>,
    /// Signs every ID token.
    pub key: Arc<SigningKey>,
    /// The key before it, published until what it signed has expired.
    pub previous: Option<RsaPublic>,
    /// The presented claim that becomes `sub`; `None`: a fresh value per
    /// login.
    pub sub_claim: Option<String>,
    pub claims_map: ClaimsMap,
}

/// Where the signing key comes from.
#[derive(Debug, Clone)]
enum KeySource {
    File(Sourced<PathBuf>),
    Value(Sourced<String>),
}

/// The provider's settings as given, before the files they name are read.
#[derive(Debug, Clone)]
pub(super) struct OidcSettings {
    issuer: Sourced<Issuer>,
    clients: Sourced<PathBuf>,
    key: KeySource,
    previous: Option<Sourced<PathBuf>>,
    sub_claim: Option<String>,
    claims_map: ClaimsMap,
}

impl OidcSettings {
    /// The provider's settings, when the issuer is given and everything it
    /// needs is too; every other case records its problem, or is off.
    pub(super) fn read(l: &mut Layers<'_>) -> Option<OidcSettings> {
        let issuer = l.given(&OIDC_ISSUER);
        let clients = l.optional(&OIDC_CLIENTS_FILE);
        let key_file = l.optional(&OIDC_SIGNING_KEY_FILE);
        let key_value = l.optional(&OIDC_SIGNING_KEY);
        let previous = l.optional(&OIDC_PREVIOUS_KEY_FILE);
        let sub_claim = l.optional(&OIDC_SUB_CLAIM).map(|s| s.value);
        let claims_map = l
            .optional(&OIDC_CLAIMS_MAP)
            .map(|given| given.value)
            .unwrap_or_default();
        let issuer = match issuer {
            Ok(Some(issuer)) => issuer,
            // Reported already.
            Err(_) => return None,
            Ok(None) => {
                let set_alone = [
                    clients.as_ref().map(|s| (OIDC_CLIENTS_FILE.env, &s.source)),
                    key_file
                        .as_ref()
                        .map(|s| (OIDC_SIGNING_KEY_FILE.env, &s.source)),
                    key_value
                        .as_ref()
                        .map(|s| (OIDC_SIGNING_KEY.env, &s.source)),
                    previous
                        .as_ref()
                        .map(|s| (OIDC_PREVIOUS_KEY_FILE.env, &s.source)),
                ];
                for (env, source) in set_alone.into_iter().flatten() {
                    let why = format!(
                        "set, but {} is not: the OpenID Connect provider is off without its issuer",
                        OIDC_ISSUER.env
                    );
                    l.problem(env, &source.clone(), &why);
                }
                return None;
            }
        };
        let needs = |what: &str| format!("is required with {} ({what})", OIDC_ISSUER.env);
        let Some(clients) = clients else {
            l.errors.push(format!(
                "{}: {}",
                OIDC_CLIENTS_FILE.env,
                needs("the relying parties allowed to use the provider")
            ));
            return None;
        };
        let key = match (key_file, key_value) {
            (Some(file), None) => KeySource::File(file),
            (None, Some(value)) => KeySource::Value(value),
            (Some(file), Some(_)) => {
                let why = format!("{} is set too; set one of them", OIDC_SIGNING_KEY.env);
                l.problem(OIDC_SIGNING_KEY_FILE.env, &file.source, &why);
                return None;
            }
            (None, None) => {
                l.errors.push(format!(
                    "{} or {}: {}",
                    OIDC_SIGNING_KEY_FILE.env,
                    OIDC_SIGNING_KEY.env,
                    needs("the RSA key ID tokens are signed with")
                ));
                return None;
            }
        };
        Some(OidcSettings {
            issuer,
            clients,
            key,
            previous,
            sub_claim,
            claims_map,
        })
    }

    /// Reads the clients file and the keys, recording every problem;
    /// `account_key` is the service account's, which the provider's key
    /// must not be.
    pub(super) fn load(
        &self,
        l: &mut Layers<'_>,
        account_key: Option<&SigningKey>,
        limit: std::time::Duration,
    ) -> Option<OidcConfig> {
        let clients = self.clients(l);
        let key = self.key(l, limit);
        let previous = self.previous.as_ref().and_then(|file| {
            let key = read_key_file(l, OIDC_PREVIOUS_KEY_FILE.env, file)?;
            let public = key.public().cloned();
            if public.is_none() {
                l.problem(
                    OIDC_PREVIOUS_KEY_FILE.env,
                    &file.source,
                    "has no public key",
                );
            }
            public
        });
        let key = key?;
        let Some(public) = key.public() else {
            let why = "names a key whose token does not show its public exponent, which the JWK set must carry";
            l.problem(self.key_env(), self.key_source(), why);
            return None;
        };
        if account_key.and_then(SigningKey::public) == Some(public) {
            let why = "is the service account's key; ID tokens need a key of their own, so that a relying party that trusts them trusts nothing the account signs (make one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`)";
            l.problem(self.key_env(), self.key_source(), why);
            return None;
        }
        if previous.as_ref() == Some(public) {
            let why = "is the current signing key; it names the key used before it";
            let file = self.previous.as_ref().map(|f| &f.source);
            l.problem(
                OIDC_PREVIOUS_KEY_FILE.env,
                file.unwrap_or(self.key_source()),
                why,
            );
            return None;
        }
        Some(OidcConfig {
            issuer: self.issuer.value.clone(),
            clients: Arc::new(clients?),
            key: Arc::new(key),
            previous,
            sub_claim: self.sub_claim.clone(),
            claims_map: self.claims_map.clone(),
        })
    }

    fn key_env(&self) -> &'static str {
        match self.key {
            KeySource::File(_) => OIDC_SIGNING_KEY_FILE.env,
            KeySource::Value(_) => OIDC_SIGNING_KEY.env,
        }
    }

    fn key_source(&self) -> &Source {
        match &self.key {
            KeySource::File(file) => &file.source,
            KeySource::Value(value) => &value.source,
        }
    }

    fn clients(&self, l: &mut Layers<'_>) -> Option<Clients> {
        let file = &self.clients;
        let text = read_small(
            &file.value,
            clients::MAX_CLIENTS_FILE_BYTES,
            "a clients file",
        )
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| std::io::ErrorKind::InvalidData.into())
        });
        let text = match text {
            Ok(text) => text,
            Err(err) => {
                let why = format!(
                    "{} cannot be read: {}",
                    file.value.display(),
                    io_reason(&err)
                );
                l.problem(OIDC_CLIENTS_FILE.env, &file.source, &why);
                return None;
            }
        };
        match Clients::parse(&text) {
            Ok(clients) => Some(clients),
            Err(problems) => {
                for why in problems {
                    let why = format!("{}: {why}", file.value.display());
                    l.problem(OIDC_CLIENTS_FILE.env, &file.source, &why);
                }
                None
            }
        }
    }

    fn key(&self, l: &mut Layers<'_>, limit: std::time::Duration) -> Option<SigningKey> {
        match &self.key {
            KeySource::File(file) => read_key_file(l, OIDC_SIGNING_KEY_FILE.env, file),
            KeySource::Value(value) => match load_key(&value.value, OIDC_SIGNING_KEY.env, limit) {
                Ok(key) => Some(key),
                Err(err) => {
                    l.unanswered |= err.is_unanswered();
                    l.problem(OIDC_SIGNING_KEY.env, &value.source, &err.to_string());
                    None
                }
            },
        }
    }
}

/// The private key in a PEM file, or `None` with its problem recorded.
fn read_key_file(l: &mut Layers<'_>, env: &str, file: &Sourced<PathBuf>) -> Option<SigningKey> {
    let read = read_small(&file.value, MAX_KEY_FILE_BYTES, "a PEM key")
        .map_err(|err| format!("cannot be read: {}", io_reason(&err)))
        .and_then(|bytes| String::from_utf8(bytes).map_err(|_| KeyError::NotPem.to_string()))
        .and_then(|pem| parse_private_key(&pem).map_err(|err| err.to_string()));
    match read {
        Ok(key) => Some(key),
        Err(why) => {
            l.problem(
                env,
                &file.source,
                &format!("{} {why}", file.value.display()),
            );
            None
        }
    }
}
