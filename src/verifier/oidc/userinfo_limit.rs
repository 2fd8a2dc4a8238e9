//! `userinfo` calls counted per access token (docs/oidc.md, "The access
//! token"): a relying party reads `userinfo` once or a few times a login,
//! and a script that calls it in a loop gets 429 rather than a replica's
//! time.
//!
//! Each token's count is a leaky bucket, as `throttle` keeps for failed
//! client authentications: one more per call, drained at the budget per
//! minute; past the budget, a call waits until one has drained. Per
//! replica, in memory, on tokio's clock, keyed by a digest of the token
//! (nothing in memory could be presented as one), at most
//! [`MAX_TOKENS`] of them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::throttle::{Bucket, lock, make_room, until};

/// `userinfo` calls one access token may make a minute: a burst of this
/// many, then one every two seconds. A relying party that reads
/// `userinfo` at every page of its own stays under it; a loop does not.
pub const USERINFO_PER_MINUTE: u32 = 30;
/// Access tokens whose calls one replica counts; past it, those whose
/// calls drained go first, then those with the fewest.
pub const MAX_TOKENS: usize = 10_000;

/// A token as the table knows it: the first half of its SHA-256.
type Key = [u8; 16];

fn key_of(token: &str) -> Key {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest.as_ref()[..16]);
    key
}

/// The counts.
#[derive(Debug, Default)]
pub struct UserinfoLimit {
    tokens: Mutex<HashMap<Key, Bucket>>,
}

impl UserinfoLimit {
    /// One call with `token` now, or how long until one may be made.
    pub fn take(&self, token: &str, now: Instant) -> Result<(), Duration> {
        let key = key_of(token);
        let mut tokens = lock(&self.tokens);
        let level = tokens
            .get(&key)
            .map_or(0.0, |b| b.level(USERINFO_PER_MINUTE, now));
        let full = f64::from(USERINFO_PER_MINUTE) - 1.0;
        if level > full {
            return Err(until(level, full, USERINFO_PER_MINUTE));
        }
        make_room(&mut tokens, &key, (USERINFO_PER_MINUTE, MAX_TOKENS), now);
        tokens
            .entry(key)
            .or_insert(Bucket::empty(now))
            .add(1.0, USERINFO_PER_MINUTE, now);
        Ok(())
    }

    /// Forgets the tokens whose calls drained.
    pub fn sweep(&self, now: Instant) {
        lock(&self.tokens).retain(|_, b| b.level(USERINFO_PER_MINUTE, now) > 0.0);
    }

    #[cfg(test)]
    fn tokens(&self) -> usize {
        lock(&self.tokens).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_token_gets_its_burst_then_one_call_as_each_drains() {
        let limit = UserinfoLimit::default();
        let now = Instant::now();
        for n in 0..USERINFO_PER_MINUTE {
            assert_eq!(limit.take("one", now), Ok(()), "call {n}");
        }
        let wait = limit.take("one", now).unwrap_err();
        let spacing = MINUTE / USERINFO_PER_MINUTE;
        assert!(
            wait.abs_diff(spacing) < Duration::from_millis(1),
            "{wait:?}"
        );
        assert_eq!(limit.take("another", now), Ok(()), "per token");
        let later = now + spacing + Duration::from_millis(1);
        assert_eq!(limit.take("one", later), Ok(()));
        assert!(limit.take("one", later).is_err(), "one, not two");
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_is_bounded_and_drained_tokens_are_forgotten() {
        let limit = UserinfoLimit::default();
        let now = Instant::now();
        for n in 0..MAX_TOKENS + 10 {
            limit.take(&format!("token {n}"), now).unwrap();
        }
        assert_eq!(limit.tokens(), MAX_TOKENS);
        limit.sweep(now + MINUTE);
        assert_eq!(limit.tokens(), 0);
    }
}
