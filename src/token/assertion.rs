//! The signed assertion of seed §5.2 (RFC 7523 `private_key_jwt`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
        // `Header::new` sets `typ: "JWT"`, as seed §5.2 requires.
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        jsonwebtoken::encode(&header, &claims, self.key.encoding_key())
            .map(Secret::new)
            .map_err(|_| SignError)
    }

    /// Signs a fresh assertion: now (less the backdate), with a new UUID v4
    /// `jti`.
    pub fn sign_fresh(&self, clock: &dyn Clock) -> Result<Secret, SignError> {
        let issued = clock.now().checked_sub(self.backdate).ok_or(SignError)?;
        self.sign(issued, Uuid::new_v4())
    }
}
