//! The held token: one writer (the refresher), lock-free readers.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use http::HeaderValue;
use tokio::time::Instant;

use crate::secret::Secret;

/// A bearer token with the moment lanyard stops sending it, and the
/// `Authorization` value built once so the request path only clones it.
///
/// "Expiry" here is that moment: the expiry `expires_in` gives less the
/// expiry margin ([`super::RefreshPolicy::usable_lifetime`]), so readiness,
/// the expiry gauge and the request path agree on one instant.
pub struct Token {
    authorization: HeaderValue,
    /// Monotonic, so a wall-clock jump cannot extend or cut its life.
    expires_at: Instant,
    /// Wall-clock expiry, for metrics and logs only.
    expires_at_wall: SystemTime,
    generation: u64,
    /// Written by the refresher alone, once it has read a report that the
    /// upstream answered 401 to this token: readers then ask it for the
    /// shared renewal instead of sending the token unasked.
    rejected: AtomicBool,
}

/// The access token cannot go into a header.
#[derive(Debug, thiserror::Error)]
#[error("the access token has characters not allowed in an HTTP header")]
pub struct InvalidToken;

impl Token {
    /// A token sent for `lifetime`, counted from `requested`: the
    /// moment its request was sent, which is no later than the endpoint
    /// started the clock, so lanyard never holds a token longer than the
    /// service honours it.
    pub fn new(
        access_token: &Secret,
        lifetime: Duration,
        generation: u64,
        requested: Instant,
    ) -> Result<Self, InvalidToken> {
        let mut authorization = HeaderValue::try_from(format!("Bearer {}", access_token.expose()))
            .map_err(|_| InvalidToken)?;
        // Keeps the value out of HPACK tables and hyper's debug output.
        authorization.set_sensitive(true);
        Ok(Token {
            authorization,
            expires_at: requested + lifetime,
            expires_at_wall: SystemTime::now() + lifetime.saturating_sub(requested.elapsed()),
            generation,
            rejected: AtomicBool::new(false),
        })
    }

    /// `Bearer <token>`, ready to insert.
    pub fn authorization(&self) -> &HeaderValue {
        &self.authorization
    }

    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }

    pub fn expires_at_wall(&self) -> SystemTime {
        self.expires_at_wall
    }

    /// Time left before expiry (zero once expired).
    pub fn remaining(&self) -> Duration {
        self.expires_at.saturating_duration_since(Instant::now())
    }

    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.expires_at
    }

    /// Counts up from 1 with every token obtained.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The upstream answered 401 to this token.
    pub fn is_rejected(&self) -> bool {
        self.rejected.load(Ordering::Acquire)
    }

    pub(super) fn mark_rejected(&self) {
        self.rejected.store(true, Ordering::Release);
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("generation", &self.generation)
            .field("remaining", &self.remaining())
            .field("rejected", &self.is_rejected())
            .field("authorization", &"[redacted]")
            .finish()
    }
}

/// Where the refresher publishes the token.
#[derive(Debug, Default)]
pub struct TokenCell {
    slot: ArcSwapOption<Token>,
}

impl TokenCell {
    /// The held token, expired or not.
    pub fn load(&self) -> Option<Arc<Token>> {
        self.slot.load_full()
    }

    /// The held token if it has not expired: an expired token is never
    /// handed out.
    pub fn valid(&self) -> Option<Arc<Token>> {
        self.slot.load_full().filter(|token| !token.is_expired())
    }

    pub(crate) fn store(&self, token: Arc<Token>) {
        self.slot.store(Some(token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expired_token_is_never_handed_out() {
        let cell = TokenCell::default();
        cell.store(Arc::new(
            Token::new(
                &Secret::new("t"),
                Duration::from_secs(10),
                1,
                Instant::now(),
            )
            .unwrap(),
        ));
        assert!(cell.valid().is_some());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(cell.valid().is_none());
        assert!(cell.load().is_some());
    }

    #[test]
    fn debug_does_not_show_the_token() {
        let token = Token::new(
            &Secret::new("s3cr3t"),
            Duration::from_secs(10),
            1,
            Instant::now(),
        )
        .unwrap();
        let shown = format!("{token:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(format!("{:?}", token.authorization()).contains("Sensitive"));
    }
}
