//! The signed client assertion (RFC 7523 §2.2, `private_key_jwt`): the
//! header and claims docs/tokens.md's "Token exchange" lists.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, Header};
use serde::Serialize;
use uuid::Uuid;

use crate::config::credentials::SigningKey;
use crate::secret::Secret;

/// A source of wall-clock time, so tests can pin `iat` and `exp`.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// Signing failed: rare for a PEM key, which was validated at start-up;
/// for a key in a token, the token may have gone (the reason says which
/// setting and token). Never carries key material or the assertion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signing the assertion failed: {0}")]
pub struct SignError(String);

impl SignError {
    fn new(why: impl Into<String>) -> SignError {
        SignError(why.into())
    }
}

/// Builds assertions for one account.
#[derive(Debug)]
pub struct AssertionSigner {
    pub client_id: String,
    pub audience: String,
    pub lifetime: Duration,
    /// Subtracted from the clock for `iat`, so a token endpoint whose clock
    /// is behind ours does not see an assertion issued in its future.
    /// `exp` moves with it: the endpoint still sees at most `lifetime` ahead.
    pub backdate: Duration,
    pub key: Arc<SigningKey>,
}

impl AssertionSigner {
    /// Signs an assertion issued at `now` with the given `jti`.
    ///
    /// Pure apart from the signature, so tests can check every claim. For
    /// a key in a token this blocks on the token; async code calls
    /// [`AssertionSigner::sign_fresh`].
    pub fn sign(&self, now: SystemTime, jti: Uuid) -> Result<Secret, SignError> {
        let input = self.signing_input(now, jti)?;
        complete(&self.key, input)
    }

    /// Signs a fresh assertion: now (less the backdate), with a new UUID v4
    /// `jti`. A key in a token signs off the async threads, within `limit`
    /// ([`SigningKey::off_async`]): one that does not answer is a failed
    /// attempt, so the refresher retries rather than waits for ever.
    pub async fn sign_fresh(
        &self,
        clock: &dyn Clock,
        limit: Duration,
    ) -> Result<Secret, SignError> {
        let issued = clock
            .now()
            .checked_sub(self.backdate)
            .ok_or_else(|| SignError::new("the clock is before the Unix epoch"))?;
        let input = self.signing_input(issued, Uuid::new_v4())?;
        if !self.key.blocks() {
            return complete(&self.key, input);
        }
        let signed = self
            .key
            .off_async(limit, move |key| {
                complete(key, input).map_err(|SignError(why)| why)
            })
            .await;
        signed.map_err(SignError::new)
    }

    /// `b64url(header).b64url(claims)`, the JWS signing input (RFC 7515
    /// §5.1), as `jsonwebtoken::encode` makes it: `Header::new` is
    /// `{"alg":"RS256","typ":"JWT"}` and nothing else.
    fn signing_input(&self, now: SystemTime, jti: Uuid) -> Result<String, SignError> {
        let iat = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| SignError::new("the clock is before the Unix epoch"))?
            .as_secs();
        let claims = Claims {
            iss: &self.client_id,
            sub: &self.client_id,
            aud: &self.audience,
            iat,
            exp: iat + self.lifetime.as_secs(),
            jti: jti.hyphenated().to_string(),
        };
        let part = |value: Result<Vec<u8>, serde_json::Error>| {
            value
                .map(|json| URL_SAFE_NO_PAD.encode(json))
                .map_err(|_| SignError::new("the assertion does not serialise"))
        };
        let header = part(serde_json::to_vec(&Header::new(Algorithm::RS256)))?;
        let claims = part(serde_json::to_vec(&claims))?;
        Ok(format!("{header}.{claims}"))
    }
}

/// The compact JWS: the signing input and its signature. A PEM key is
/// parsed again by jsonwebtoken for every signature (its signer keeps
/// DER, not a parsed key): about 0.2 ms on top of the signature's 0.7 ms,
/// paid once per token request, which comes every few minutes.
fn complete(key: &SigningKey, input: String) -> Result<Secret, SignError> {
    let signature = key.sign_rs256(input.as_bytes()).map_err(SignError::new)?;
    Ok(Secret::new(format!("{input}.{signature}")))
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{DecodingKey, Validation};
    use serde_json::{Value, json};

    use super::*;
    use crate::config::credentials::parse_private_key;

    const PKCS8: &str = include_str!("../../tests/fixtures/rsa2048.pkcs8.pem");
    const PKCS1: &str = include_str!("../../tests/fixtures/rsa2048.pkcs1.pem");
    const PUBLIC_PKCS1_DER: &[u8] = include_bytes!("../../tests/fixtures/rsa2048.pub.pkcs1.der");

    fn signer(pem: &str) -> AssertionSigner {
        AssertionSigner {
            client_id: "sa-unit".into(),
            audience: "https://iam.example/aud".into(),
            lifetime: Duration::from_secs(600),
            backdate: Duration::ZERO,
            key: Arc::new(parse_private_key(pem).unwrap()),
        }
    }

    #[test]
    fn assertion_is_rs256_with_exactly_the_readmes_header_and_claims() {
        let at = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        let jti = Uuid::parse_str("0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10").unwrap();
        // Both PEM forms sign with the same key, verified with its public half.
        for pem in [PKCS8, PKCS1] {
            let jwt = signer(pem).sign(at, jti).unwrap();
            let mut validation = Validation::new(Algorithm::RS256);
            validation.validate_exp = false;
            validation.set_audience(&["https://iam.example/aud"]);
            let verified = jsonwebtoken::decode::<Value>(
                jwt.expose(),
                &DecodingKey::from_rsa_der(PUBLIC_PKCS1_DER),
                &validation,
            )
            .unwrap();
            assert_eq!(
                serde_json::to_value(&verified.header).unwrap(),
                json!({"alg": "RS256", "typ": "JWT"})
            );
            assert_eq!(
                verified.claims,
                json!({
                    "iss": "sa-unit",
                    "sub": "sa-unit",
                    "aud": "https://iam.example/aud",
                    "iat": 1_767_225_600,
                    "exp": 1_767_226_200,
                    "jti": "0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10",
                })
            );
        }
    }
}
