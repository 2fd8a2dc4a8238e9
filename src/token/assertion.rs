//! The signed assertion of docs/service.md §5.2 (RFC 7523 `private_key_jwt`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use uuid::Uuid;

use crate::Secret;
use crate::credentials::SigningKey;

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

/// `{"alg":"RS256","typ":"JWT"}` (docs/service.md §5.2), base64url-encoded.
const HEADER: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// Signing failed; the key was validated at start-up, so this is rare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signing the assertion failed")]
pub struct SignError;

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
    /// Pure apart from the signature, so tests can check every claim.
    pub fn sign(&self, now: SystemTime, jti: Uuid) -> Result<Secret, SignError> {
        let iat = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| SignError)?
            .as_secs();
        let claims = Claims {
            iss: &self.client_id,
            sub: &self.client_id,
            aud: &self.audience,
            iat,
            exp: iat + self.lifetime.as_secs(),
            jti: jti.hyphenated().to_string(),
        };
        let claims = serde_json::to_vec(&claims).map_err(|_| SignError)?;
        // Signed with the key parsed at start-up: jsonwebtoken's `encode`
        // would parse it again from DER for every signature.
        let mut jwt = String::with_capacity(1024);
        jwt.push_str(HEADER);
        jwt.push('.');
        URL_SAFE_NO_PAD.encode_string(&claims, &mut jwt);
        let signature = self.key.sign_rs256(jwt.as_bytes()).ok_or(SignError)?;
        jwt.push('.');
        URL_SAFE_NO_PAD.encode_string(&signature, &mut jwt);
        Ok(Secret::new(jwt))
    }

    /// Signs a fresh assertion: now (less the backdate), with a new UUID v4
    /// `jti`.
    pub fn sign_fresh(&self, clock: &dyn Clock) -> Result<Secret, SignError> {
        let issued = clock.now().checked_sub(self.backdate).ok_or(SignError)?;
        self.sign(issued, Uuid::new_v4())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_rs256_and_jwt() {
        let json = URL_SAFE_NO_PAD.decode(HEADER).unwrap();
        assert_eq!(json, br#"{"alg":"RS256","typ":"JWT"}"#);
    }
}
