//! What the OpenID Connect provider reads (docs/oidc.md): its settings,
//! checked together, and what they point at, the clients file and the
//! signing keys, read and checked once at start-up.
//!
//! - `clients`: the clients file.
//! - `client_brand`: a client's own brand for its logins' page.
//! - `redirect`: a redirect URI's canonical form, and how a request's is
//!   matched against the registered ones.
//! - `rules`: a client's verification rules, picked by scope.
//! - `subject`: how `sub` is made: its claims, the pairwise key, a
//!   client's subject type and sector.

mod client_brand;
pub mod clients;
mod redirect;
pub mod rules;
pub mod subject;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::credentials::{
    KeyError, RsaPublic, SigningKey, load_key, parse_private_key, parse_public_key,
};
use super::issuer::{ClaimsMap, Issuer};
use super::settings::{
    OIDC_CLAIMS_MAP, OIDC_CLIENTS_FILE, OIDC_ISSUER, OIDC_PAIRWISE_KEY, OIDC_PAIRWISE_KEY_FILE,
    OIDC_PREVIOUS_KEY_FILE, OIDC_SIGNING_KEY, OIDC_SIGNING_KEY_FILE, OIDC_SUB_CLAIM,
};
use super::sources::{Layers, Reported, Source, Sourced, io_reason};
use crate::files::read_small;
use crate::secret::Secret;

pub use clients::{Client, Clients};
use subject::{PairwiseKey, SubClaims, SubjectType};

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
    /// The presented claims whose values make `sub`, in order; none: a
    /// fresh value per login.
    pub sub_claims: Vec<String>,
    /// What pairwise `sub`s are hashed under; given whenever a client's
    /// `sub` is pairwise.
    pub pairwise_key: Option<PairwiseKey>,
    pub claims_map: ClaimsMap,
}

/// Where the signing key comes from.
#[derive(Debug, Clone)]
enum KeySource {
    File(Sourced<PathBuf>),
    Value(Sourced<Secret>),
}

impl KeySource {
    /// The one of the two given, or `None` with its problem recorded.
    fn given(
        l: &mut Layers<'_>,
        file: Option<Sourced<PathBuf>>,
        value: Option<Sourced<Secret>>,
    ) -> Option<KeySource> {
        match (file, value) {
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
                    needs_issuer("the RSA key ID tokens are signed with"),
                    OIDC_SIGNING_KEY.env
                ));
                None
            }
        }
    }

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
    /// `Err`: given, but not claim names (recorded).
    sub_claims: Result<Option<Sourced<SubClaims>>, Reported>,
    /// `Err`: given, but not a key (recorded).
    pairwise_key: Result<Option<GivenKey>, Reported>,
    claims_map: ClaimsMap,
}

/// The pairwise key as given, and by which of its two settings from
/// where.
#[derive(Debug, Clone)]
struct GivenKey {
    env: &'static str,
    source: Source,
    key: PairwiseKey,
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
        let sub_claims = l.given(&OIDC_SUB_CLAIM);
        let pairwise_key = pairwise_key(l);
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
                    sub_claims
                        .as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .map(|s| (OIDC_SUB_CLAIM.env, &s.source)),
                    pairwise_key
                        .as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .map(|given| (given.env, &given.source)),
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
        if clients.is_none() {
            l.errors.push(format!(
                "{}: {}",
                OIDC_CLIENTS_FILE.env,
                needs_issuer("the relying parties allowed to use the provider")
            ));
        }
        Some(OidcSettings {
            issuer,
            clients,
            key: KeySource::given(l, key_file, key_value),
            previous,
            sub_claims,
            pairwise_key,
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
        if let (Some(clients), Some(file)) = (&clients, &self.clients) {
            self.check_subjects(l, clients, file);
        }
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
            sub_claims: match &self.sub_claims {
                Ok(Some(claims)) => claims.value.0.clone(),
                _ => Vec::new(),
            },
            pairwise_key: match &self.pairwise_key {
                Ok(Some(given)) => Some(given.key.clone()),
                _ => None,
            },
            claims_map: self.claims_map.clone(),
        })
    }

    /// Records what keeps `clients` from their `sub`s: with
    /// `LANYARD_OIDC_SUB_CLAIM`, a pairwise client needs one sector
    /// (OpenID Connect Core §8.1) and the pairwise key; without it, no
    /// key is used, and one given is refused rather than ignored.
    fn check_subjects(&self, l: &mut Layers<'_>, clients: &Clients, file: &Sourced<PathBuf>) {
        let sub_claims = match &self.sub_claims {
            Ok(Some(sub_claims)) => sub_claims,
            // Recorded already.
            Err(Reported) => return,
            Ok(None) => {
                if let Ok(Some(given)) = &self.pairwise_key {
                    let why = format!(
                        "set, but {} is not: without it every login's `sub` is a fresh value, and no key makes it",
                        OIDC_SUB_CLAIM.env
                    );
                    l.problem(given.env, &given.source, &why);
                }
                return;
            }
        };
        let pairwise: Vec<&Client> = clients
            .iter()
            .filter(|client| client.subject_type == SubjectType::Pairwise)
            .collect();
        for client in &pairwise {
            if let Some(why) = client.sector.problem() {
                let why = format!("{}: client `{}`: {why}", file.value.display(), client.id);
                l.problem(OIDC_CLIENTS_FILE.env, &file.source, &why);
            }
        }
        if !pairwise.is_empty() && matches!(self.pairwise_key, Ok(None)) {
            l.errors.push(format!(
                "{}: is required with {} ({}) while a client's `sub` is pairwise, as it is unless its entry says \"subject_type\": \"public\"; make one with `head -c 32 /dev/urandom | base64`, or set {}",
                OIDC_PAIRWISE_KEY.env,
                OIDC_SUB_CLAIM.env,
                sub_claims.source,
                OIDC_PAIRWISE_KEY_FILE.env
            ));
        }
    }
}

/// Why a setting the provider needs is missing.
fn needs_issuer(what: &str) -> String {
    format!("is required with {} ({what})", OIDC_ISSUER.env)
}

/// The pairwise key file's bytes, at most: base64 of a long key.
const MAX_PAIRWISE_KEY_FILE_BYTES: u64 = 4096;

/// The pairwise key, given or read from its file (one or the other);
/// never quoted in a problem.
fn pairwise_key(l: &mut Layers<'_>) -> Result<Option<GivenKey>, Reported> {
    let given = l.given(&OIDC_PAIRWISE_KEY)?.map(|given| GivenKey {
        env: OIDC_PAIRWISE_KEY.env,
        source: given.source,
        key: given.value,
    });
    let Some(file) = l.given(&OIDC_PAIRWISE_KEY_FILE)? else {
        return Ok(given);
    };
    if given.is_some() {
        let why = format!("{} is set too; set one of them", OIDC_PAIRWISE_KEY.env);
        l.problem(OIDC_PAIRWISE_KEY_FILE.env, &file.source, &why);
        return Err(Reported);
    }
    let read = read_small(&file.value, MAX_PAIRWISE_KEY_FILE_BYTES, "a key file")
        .map_err(|err| format!("cannot be read: {}", io_reason(&err)))
        .and_then(|bytes| PairwiseKey::parse(&String::from_utf8_lossy(&bytes)));
    let key = recorded(l, OIDC_PAIRWISE_KEY_FILE.env, &file, read).ok_or(Reported)?;
    Ok(Some(GivenKey {
        env: OIDC_PAIRWISE_KEY_FILE.env,
        source: file.source,
        key,
    }))
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
    let dir = file.value.parent().unwrap_or(Path::new("."));
    match Clients::parse(&text, dir) {
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
