//! The 401 rule, one for every caller that sends the token to the service
//! (README "Renewal and retries"): when the service answers 401, one new
//! token is asked for, shared by every request that saw the 401, and the
//! request is sent once more with it. What a caller answers when no new
//! token can be had (the token endpoint down, renewals throttled) is its
//! own, and is written here beside the rule so the two cannot drift:
//!
//! - the proxy passes the service's 401 on (CONTRACT §4: a 401 never turns
//!   into lanyard's own 503; the held token keeps being sent and the
//!   service judges each request);
//! - the verifier answers `token_unavailable`, a 503 the page retries.

use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounter;

use super::{Token, TokenHandle};

/// What a caller answers when the service said 401 and no new token could
/// be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNoNewToken {
    /// The proxy: the service's own 401 goes back to the app.
    PassThe401On,
    /// The verifier: `token_unavailable`, which the page retries.
    TellThePageToRetry,
}

/// What to do after a 401.
#[derive(Debug)]
pub enum AfterRejection {
    /// Send the request once more, with this token.
    Retry(Arc<Token>),
    /// No new token: answer as the caller's [`WhenNoNewToken`] says.
    NoNewToken(WhenNoNewToken),
}

/// The rule, as one caller applies it.
#[derive(Clone)]
pub struct RejectionRule {
    tokens: TokenHandle,
    /// How long a request waits for the shared renewal: the caller's own
    /// upstream timeout, since the request is waiting anyway.
    wait: Duration,
    /// `lanyard_upstream_unauthorized_retries_total`.
    retries: IntCounter,
    when_no_new_token: WhenNoNewToken,
}

impl RejectionRule {
    pub fn new(
        tokens: TokenHandle,
        wait: Duration,
        retries: IntCounter,
        when_no_new_token: WhenNoNewToken,
    ) -> RejectionRule {
        RejectionRule {
            tokens,
            wait,
            retries,
            when_no_new_token,
        }
    }

    /// The service answered 401 to `rejected`: a new token to retry with
    /// (counted as a retry), or what to answer without one.
    pub async fn after_401(&self, rejected: &Arc<Token>) -> AfterRejection {
        let renewed =
            tokio::time::timeout(self.wait, self.tokens.renew_after_rejection(rejected)).await;
        match renewed {
            Ok(Ok(fresh)) => {
                self.retries.inc();
                AfterRejection::Retry(fresh)
            }
            _ => AfterRejection::NoNewToken(self.when_no_new_token),
        }
    }

    /// The service answered 401 to a request that cannot be sent again (a
    /// body too large to keep): its 401 goes back, but the next requests
    /// should not carry a token the service refuses, so the renewal runs
    /// in the background.
    pub fn renew_in_background(&self, rejected: Arc<Token>) {
        let tokens = self.tokens.clone();
        tokio::spawn(async move {
            let _ = tokens.renew_after_rejection(&rejected).await;
        });
    }
}
