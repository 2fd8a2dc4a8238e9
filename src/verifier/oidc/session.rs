//! What an OpenID Connect login changes in the page's API: `/api/start`
//! takes the sealed authorization request into the session's handle, and
//! `/api/status` ends the session with where the browser goes next (the
//! client's redirect URI with a code, or with an error) instead of the
//! claims, which go to the relying party's backend only.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::authorize::{self, ErrorRedirect};
use super::sealed::{self, Authorization, Code};
use super::{CODE_LIFETIME, Provider};
use crate::config::oidc::rules::Rule;
use crate::verifier::assumptions::Ending;
use crate::verifier::binding::{KeyRing, Sealed};
use crate::verifier::clock::unix_now;
use crate::verifier::errors::VerifierError;

/// Why a page's sealed request is refused.
pub const STALE_LOGIN: &str =
    "This login has expired or is not valid here. Go back to the application and start again.";

/// What the page is told when a login's session ended: its status, and
/// the URL to send the browser to.
#[derive(Debug, PartialEq, Eq)]
pub struct LoginEnding {
    pub status: &'static str,
    pub redirect: String,
}

impl LoginEnding {
    pub fn answer(&self) -> Bytes {
        Bytes::from(json!({"status": self.status, "redirect": self.redirect}).to_string())
    }
}

/// The login a session's handle carries: its client and rule; `None`
/// for the page's own sessions.
pub fn login_in(session: &Sealed) -> Option<Authorization> {
    Authorization::from_handle_text(session.authorization.as_deref()?)
}

impl Provider {
    /// The authorization request a page's `/api/start?authorization=`
    /// carries, as the session handle is to hold it ([`Provider::reopen`]),
    /// and the rule its session is started on.
    pub fn take_authorization(
        &self,
        keys: &KeyRing,
        sealed: &str,
    ) -> Result<(String, Option<Rule>), VerifierError> {
        self.reopen(keys, sealed)
            .and_then(|authorization| Some((authorization.to_handle_text()?, authorization.rule)))
            .ok_or(VerifierError::BadRequest(STALE_LOGIN))
    }

    /// The authorization request a page carries, sealed: sealed by a
    /// replica with these keys, not expired, for a client and redirect
    /// URI still registered.
    pub fn reopen(&self, keys: &KeyRing, sealed: &str) -> Option<Authorization> {
        let authorization: Authorization = sealed::open(keys, &self.issuer, sealed)?;
        let registered = self
            .clients
            .get(&authorization.client_id)
            .is_some_and(|client| client.allows_redirect(&authorization.redirect_uri));
        (authorization.expires_at > unix_now() && registered).then_some(authorization)
    }

    /// Where the browser of a login's session goes now that it ended;
    /// `auth_time` is when the wallet presented (Unix seconds).
    pub fn ending(
        &self,
        keys: &KeyRing,
        session: &Sealed,
        ending: &Ending,
        auth_time: u64,
    ) -> Option<LoginEnding> {
        let authorization = Authorization::from_handle_text(session.authorization.as_deref()?)?;
        let (status, error, description) = match ending {
            Ending::Verified(claims) => {
                let claims = claims.object_text();
                return Some(self.verified(keys, session, authorization, claims, auth_time));
            }
            Ending::Declined => (
                "declined",
                "access_denied",
                "the person declined to share a credential",
            ),
            Ending::Expired => (
                "expired",
                "access_denied",
                "the session expired before a credential was presented",
            ),
            Ending::Failed | Ending::Unusable { .. } => (
                "failed",
                "server_error",
                "the verification failed; the person may try again",
            ),
        };
        Some(LoginEnding {
            status,
            redirect: self.error_redirect(&authorization, error, description),
        })
    }

    /// A verified login: a code for the client, or `access_denied` when
    /// the claims that name the person are not there.
    fn verified(
        &self,
        keys: &KeyRing,
        session: &Sealed,
        authorization: Authorization,
        claims: &str,
        auth_time: u64,
    ) -> LoginEnding {
        let presented: Map<String, Value> = serde_json::from_str(claims).unwrap_or_default();
        let client = self.clients.get(&authorization.client_id);
        let sub = match client.map(|client| self.subjects.sub(client, &presented)) {
            Some(Ok(Some(sub))) => Ok(sub),
            Some(Ok(None)) => sealed::random_id(),
            Some(Err(())) => {
                Err("the presented credential has no claims that name the person".into())
            }
            None => Err("the client is no longer registered".into()),
        };
        let now = unix_now();
        let code = sub.and_then(|sub| {
            let code = Code {
                id: code_id(&session.service_id),
                service_id: session.service_id.clone(),
                sub,
                auth_time,
                expires_at: now + CODE_LIFETIME,
                authorization: authorization.clone(),
            };
            sealed::seal(keys, &self.issuer, &code)
        });
        let redirect = match code {
            Ok(code) => {
                let mut params = vec![("code", code.as_str())];
                if let Some(state) = &authorization.state {
                    params.push(("state", state));
                }
                params.push(("iss", self.issuer.as_str()));
                authorize::redirect_to(&authorization.redirect_uri, &params)
            }
            Err(why) => {
                tracing::warn!(
                    client_id = authorization.client_id,
                    "an OpenID Connect login ends refused: {why}"
                );
                self.error_redirect(
                    &authorization,
                    "access_denied",
                    "the presented credential cannot name the person",
                )
            }
        };
        LoginEnding {
            status: "verified",
            redirect,
        }
    }

    fn error_redirect(
        &self,
        authorization: &Authorization,
        error: &'static str,
        description: &'static str,
    ) -> String {
        self.error_location(&ErrorRedirect {
            redirect_uri: authorization.redirect_uri.clone(),
            error,
            description,
            state: authorization.state.clone(),
        })
    }

    /// Where an error goes back to the client: its redirect URI with the
    /// error, `state` and `iss` (RFC 6749 §4.1.2.1, RFC 9207).
    pub fn error_location(&self, redirect: &ErrorRedirect) -> String {
        let mut params = vec![
            ("error", redirect.error),
            ("error_description", redirect.description),
        ];
        if let Some(state) = &redirect.state {
            params.push(("state", state));
        }
        params.push(("iss", self.issuer.as_str()));
        authorize::redirect_to(&redirect.redirect_uri, &params)
    }
}

/// A code's id, the same for every code of one session: the page may poll
/// an ended session again and again, each poll answering a code sealed
/// anew, and all of them are one authorization, redeemed once per replica
/// (RFC 6749 §4.1.2; docs/oidc.md, Single use).
fn code_id(service_id: &str) -> String {
    use base64::Engine as _;
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        [b"lanyard oidc code id\0".as_slice(), service_id.as_bytes()]
            .concat()
            .as_slice(),
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16])
}
