//! What the OpenID Connect provider reads (docs/oidc.md): its settings,
//! checked together, and what they point at, the clients file and the
//! signing keys, read and checked once at start-up.
//!
//! - `clients`: the clients file.
//! - `redirect`: a redirect URI's canonical form, and how a request's is
//!   matched against the registered ones.

pub mod clients;
mod redirect;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::credentials::{
    KeyError, RsaPublic, SigningKey, load_key, parse_private_key, parse_public_key,
};
use super::issuer::{ClaimsMap, Issuer};
use super::settings::{
    OIDC_CLAIMS_MAP, OIDC_CLIENTS_FILE, OIDC_ISSUER, OIDC_PREVIOUS_KEY_FILE, OIDC_SIGNING_KEY,
    OIDC_SIGNING_KEY_FILE, OIDC_SUB_CLAIM,
};
use super::sources::{Layers, Reported, Source, Sourced, io_reason};
use crate::Secret;
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
    Value(Sourced<Secret>),
}

impl KeySource {
    fn env(&self) -> &'static str {
        match self {
            KeySource::File(_) => OIDC_SIGNING_KEY_FILE.env,
            KeySource::Value(_) => OIDC_SIGNING_KEY.env,
        }
    }

    fn source(&self) -> &Source {
        match self {
            KeySource::File(file) => &file.source,
            KeySource::Value(value) => &value.source,
        }
    }

    /// The key, or `None` with its problem recorded.
    fn load(&self, l: &mut Layers<'_>, limit: Duration) -> Option<SigningKey> {
        match self {
            KeySource::File(file) => {
                let read = read_pem(&file.value)
                    .and_then(|pem| parse_private_key(&pem).map_err(|err| err.to_string()));
                recorded(l, OIDC_SIGNING_KEY_FILE.env, file, read)
            }
            KeySource::Value(value) => {
                match load_key(value.value.expose(), OIDC_SIGNING_KEY.env, limit) {
                    Ok(key) => Some(key),
                    Err(err) => {
                        l.unanswered |= err.is_unanswered();
                        l.problem(OIDC_SIGNING_KEY.env, &value.source, &err.to_string());
                        None
                    }
                }
            }
        }
    }
}

/// The provider's settings as given, before the files they name are read.
/// Once the issuer is given, a setting missing or bad is recorded and the
/// others are still read, so that every problem shows in one run.
#[derive(Debug, Clone)]
pub(super) struct OidcSettings {
    /// `None`: given, but not an issuer (recorded).
    issuer: Option<Sourced<Issuer>>,
    clients: Option<Sourced<PathBuf>>,
    key: Option<KeySource>,
    previous: Option<Sourced<PathBuf>>,
    sub_claim: Option<String>,
    claims_map: ClaimsMap,
}

impl OidcSettings {
    /// The provider's settings when the issuer is given, well or not;
    /// `None` when it is not, with any other of its settings given alone
    /// recorded as a problem.
    pub(super) fn read(l: &mut Layers<'_>) -> Option<OidcSettings> {
        let issuer = l.given(&OIDC_ISSUER);
        let clients = l.optional(&OIDC_CLIENTS_FILE);
        let key_file = l.optional(&OIDC_SIGNING_KEY_FILE);
        let key_value = l.optional(&OIDC_SIGNING_KEY).map(|key| Sourced {
            value: Secret::new(key.value),
            source: key.source,
        });
        let previous = l.optional(&OIDC_PREVIOUS_KEY_FILE);
        let sub_claim = l.optional(&OIDC_SUB_CLAIM);
        let claims_map = l.optional(&OIDC_CLAIMS_MAP);
        let issuer = match issuer {
            Ok(Some(issuer)) => Some(issuer),
            // Recorded already; the rest is checked still.
            Err(Reported) => None,
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
                    sub_claim.as_ref().map(|s| (OIDC_SUB_CLAIM.env, &s.source)),
                    claims_map
                        .as_ref()
                        .map(|s| (OIDC_CLAIMS_MAP.env, &s.source)),
                ];
                let why = format!(
                    "set, but {} is not: the OpenID Connect provider is off without its issuer",
                    OIDC_ISSUER.env
                );
                for (env, source) in set_alone.into_iter().flatten() {
                    l.problem(env, &source.clone(), &why);
                }
                return None;
            }
        };
        let needs = |what: &str| format!("is required with {} ({what})", OIDC_ISSUER.env);
        if clients.is_none() {
            l.errors.push(format!(
                "{}: {}",
                OIDC_CLIENTS_FILE.env,
                needs("the relying parties allowed to use the provider")
            ));
        }
        let key = match (key_file, key_value) {
            (Some(file), None) => Some(KeySource::File(file)),
            (None, Some(value)) => Some(KeySource::Value(value)),
            (Some(file), Some(_)) => {
                let why = format!("{} is set too; set one of them", OIDC_SIGNING_KEY.env);
                l.problem(OIDC_SIGNING_KEY_FILE.env, &file.source, &why);
                None
            }
            (None, None) => {
                l.errors.push(format!(
                    "{}: {}; or set {}",
                    OIDC_SIGNING_KEY_FILE.env,
                    needs("the RSA key ID tokens are signed with"),
                    OIDC_SIGNING_KEY.env
                ));
                None
            }
        };
        Some(OidcSettings {
            issuer,
            clients,
            key,
            previous,
            sub_claim: sub_claim.map(|given| given.value),
            claims_map: claims_map.map(|given| given.value).unwrap_or_default(),
        })
    }

    /// Reads the clients file and the keys, recording every problem;
    /// `account_key` is the service account's, which neither the
    /// provider's key nor the previous one may be. `None` when anything
    /// the provider needs is missing or bad.
    pub(super) fn load(
        &self,
        l: &mut Layers<'_>,
        account_key: Option<&SigningKey>,
        limit: Duration,
    ) -> Option<OidcConfig> {
        let before = l.errors.len();
        let clients = self.clients.as_ref().and_then(|file| read_clients(l, file));
        let key = self.key.as_ref().and_then(|source| {
            let key = source.load(l, limit)?;
            if key.public().is_none() {
                let why = "names a key whose token does not show its public exponent, which the JWK set must carry";
                l.problem(source.env(), source.source(), why);
            }
            Some((key, source))
        });
        let previous = self
            .previous
            .as_ref()
            .and_then(|file| Some((read_previous_key(l, file)?, file)));
        let account = account_key.and_then(SigningKey::public);
        if let Some((key, source)) = &key
            && key.public().is_some_and(|public| Some(public) == account)
        {
            l.problem(source.env(), source.source(), NOT_THE_ACCOUNTS);
        }
        if let Some((public, file)) = &previous {
            if Some(public) == account {
                l.problem(OIDC_PREVIOUS_KEY_FILE.env, &file.source, NOT_THE_ACCOUNTS);
            } else if key.as_ref().and_then(|(key, _)| key.public()) == Some(public) {
                let why = "is the current signing key; it names the key used before it";
                l.problem(OIDC_PREVIOUS_KEY_FILE.env, &file.source, why);
            }
        }
        if l.errors.len() > before {
            return None;
        }
        Some(OidcConfig {
            issuer: self.issuer.as_ref()?.value.clone(),
            clients: Arc::new(clients?),
            key: Arc::new(key?.0),
            previous: previous.map(|(public, _)| public),
            sub_claim: self.sub_claim.clone(),
            claims_map: self.claims_map.clone(),
        })
    }
}

/// Why the provider's keys are never the service account's.
const NOT_THE_ACCOUNTS: &str = "is the service account's key; ID tokens need a key of their own, so that a relying party that trusts them trusts nothing the account signs (make one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`)";

/// The clients file's clients, or `None` with its problems recorded.
fn read_clients(l: &mut Layers<'_>, file: &Sourced<PathBuf>) -> Option<Clients> {
    let text = read_small(
        &file.value,
        clients::MAX_CLIENTS_FILE_BYTES,
        "a clients file",
    )
    .and_then(|bytes| String::from_utf8(bytes).map_err(|_| std::io::ErrorKind::InvalidData.into()));
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

/// The previous key's public half, from its private key or from its
/// public key alone, or `None` with its problem recorded.
fn read_previous_key(l: &mut Layers<'_>, file: &Sourced<PathBuf>) -> Option<RsaPublic> {
    let read = read_pem(&file.value).and_then(|pem| {
        let public = match parse_private_key(&pem) {
            Ok(key) => key.public().cloned().ok_or(KeyError::NoRsaKey),
            // A public key alone, or something else: said as what the
            // setting takes, either.
            Err(KeyError::NotPrivate(_) | KeyError::NotPem) => parse_public_key(&pem),
            Err(err) => Err(err),
        };
        public.map_err(|err| err.to_string())
    });
    recorded(l, OIDC_PREVIOUS_KEY_FILE.env, file, read)
}

/// A PEM file's text, or why it cannot be read.
fn read_pem(path: &Path) -> Result<String, String> {
    read_small(path, MAX_KEY_FILE_BYTES, "a PEM key")
        .map_err(|err| format!("cannot be read: {}", io_reason(&err)))
        .and_then(|bytes| String::from_utf8(bytes).map_err(|_| KeyError::NotPem.to_string()))
}

/// What was read from `file`, or `None` with why not recorded under `env`.
fn recorded<T>(
    l: &mut Layers<'_>,
    env: &str,
    file: &Sourced<PathBuf>,
    read: Result<T, String>,
) -> Option<T> {
    match read {
        Ok(value) => Some(value),
        Err(why) => {
            let why = format!("{} {why}", file.value.display());
            l.problem(env, &file.source, &why);
            None
        }
    }
}
