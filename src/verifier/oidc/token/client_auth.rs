//! Client authentication at the token endpoint (RFC 6749 §2.3.1):
//! `client_secret_basic` (the id and secret form-encoded before base64;
//! many libraries send them as they are, which is taken too),
//! `client_secret_post`, or a public client's id alone. One method per
//! request. The client is first named, then its credentials checked, so
//! that the throttle of failures (`throttle`) can judge a request by the
//! client it names before its secret is compared.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderValue, header};

use super::answer::{INVALID_CLIENT, TokenError, refuse};
use crate::config::oidc::{Client, Clients};
use crate::secret::Secret;

/// A client a request names, with the credentials it gave.
pub(super) struct Claimed<'a> {
    pub client: &'a Client,
    secrets: Vec<Secret>,
}

/// The registered client a token request names, and the secrets it gave
/// (a Basic header's id and secret are taken form-decoded and as they
/// are). `INVALID_CLIENT` for an unknown client or a malformed header.
pub(super) fn claimed<'a>(
    clients: &'a Clients,
    headers: &HeaderMap,
    form_id: Option<&str>,
    form_secret: Option<&str>,
) -> Result<Claimed<'a>, TokenError> {
    let basic = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(value) => Some(basic_credentials(value).ok_or(INVALID_CLIENT)?),
    };
    match (basic, form_secret) {
        (Some(_), Some(_)) => Err(refuse(
            "invalid_request",
            "the client authenticates with one method, not two",
        )),
        (Some(basic), None) => {
            let client = [&basic.id, &basic.raw_id]
                .into_iter()
                .find_map(|id| clients.get(id))
                .ok_or(INVALID_CLIENT)?;
            if form_id.is_some_and(|form_id| form_id != client.id) {
                return Err(INVALID_CLIENT);
            }
            let secrets = vec![Secret::new(basic.secret), Secret::new(basic.raw_secret)];
            Ok(Claimed { client, secrets })
        }
        (None, secret) => {
            let id = form_id.ok_or(refuse("invalid_request", "client_id is missing"))?;
            let client = clients.get(id).ok_or(INVALID_CLIENT)?;
            let secrets = secret.map(|s| Secret::new(s.to_string())).into_iter();
            Ok(Claimed {
                client,
                secrets: secrets.collect(),
            })
        }
    }
}

impl<'a> Claimed<'a> {
    /// The client, when its credentials are right: its secret, or none
    /// at all for a public client.
    pub fn authenticate(self) -> Result<&'a Client, TokenError> {
        let authenticated = match &self.client.secret {
            None => self.secrets.is_empty(),
            Some(expected) => self
                .secrets
                .iter()
                .any(|given| same_secret(expected.expose(), given.expose())),
        };
        match authenticated {
            true => Ok(self.client),
            false => Err(INVALID_CLIENT),
        }
    }
}

/// The credentials after an authentication scheme, whose name is matched
/// ignoring case (RFC 7235 §2.1).
pub(super) fn strip_scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (name, rest) = value.split_once(' ')?;
    name.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// Whether two secrets are equal, in time that tells nothing of either:
/// their SHA-256 digests compared in constant time, so that neither the
/// first difference nor the length shows.
pub(super) fn same_secret(expected: &str, given: &str) -> bool {
    use aws_lc_rs::digest::{SHA256, digest};
    aws_lc_rs::constant_time::verify_slices_are_equal(
        digest(&SHA256, expected.as_bytes()).as_ref(),
        digest(&SHA256, given.as_bytes()).as_ref(),
    )
    .is_ok()
}

/// What `Authorization: Basic` carries: the id and secret form-decoded,
/// as RFC 6749 §2.3.1 sends them, and as they are.
#[derive(PartialEq, Eq)]
pub(super) struct Basic {
    pub id: String,
    pub secret: String,
    pub raw_id: String,
    pub raw_secret: String,
}

/// The client's secret is never printed, whoever asks for a `{:?}`.
impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Basic")
            .field("id", &self.id)
            .field("secret", &"[redacted]")
            .field("raw_id", &self.raw_id)
            .finish_non_exhaustive()
    }
}

pub(super) fn basic_credentials(value: &HeaderValue) -> Option<Basic> {
    let encoded = strip_scheme(value.to_str().ok()?, "Basic")?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let decode = |part: &str| {
        percent_encoding::percent_decode_str(&part.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|text| text.into_owned())
    };
    Some(Basic {
        id: decode(id)?,
        secret: decode(secret)?,
        raw_id: id.to_string(),
        raw_secret: secret.to_string(),
    })
}
