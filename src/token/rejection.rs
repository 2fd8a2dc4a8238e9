//! The 401 rule, one for every caller that sends the token to the service
//! (docs/tokens.md "Renewal and retries"): when the service answers 401, one new
//! token is asked for, shared by every request that saw the 401, and the
//! request is sent once more with it. What a caller answers when no new
//! token can be had (the token endpoint down, renewals throttled) is its
//! own, and is written here beside the rule so the two cannot drift:
//!
//! - the proxy passes the service's 401 on (docs/proxy.md: a 401 never turns
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

#[cfg(test)]
mod tests {
    //! The rule over a real refresher and a scripted token source, on
    //! tokio's paused clock: what a caller gets after a 401, how long it
    //! waits for it, and how many token requests it costs.

    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;
    use crate::metrics::Metrics;
    use crate::token::refresher::spawn;
    use crate::token::{ExchangeError, Issued, RefreshPolicy, TokenSource};

    /// The caller's own upstream timeout.
    const WAIT: Duration = Duration::from_secs(10);

    /// Answers from a script, then fails as a token endpoint that is down
    /// does; counts the requests it was sent. Every answer after the first
    /// takes `renewal_latency`, so that a renewal can be slow while the
    /// first token is held at once.
    struct Scripted {
        script: Mutex<VecDeque<Result<Issued, ExchangeError>>>,
        requests: AtomicUsize,
        renewal_latency: Duration,
    }

    impl Scripted {
        fn new(script: Vec<Result<Issued, ExchangeError>>) -> Arc<Self> {
            Scripted::slow(script, Duration::ZERO)
        }

        fn slow(
            script: Vec<Result<Issued, ExchangeError>>,
            renewal_latency: Duration,
        ) -> Arc<Self> {
            Arc::new(Scripted {
                script: Mutex::new(script.into()),
                requests: AtomicUsize::new(0),
                renewal_latency,
            })
        }

        fn requests(&self) -> usize {
            self.requests.load(Ordering::SeqCst)
        }
    }

    impl TokenSource for Scripted {
        fn labels(&self) -> crate::metrics::AccountLabels {
            crate::metrics::AccountLabels::new("sa-test", "org-test")
        }

        async fn fetch(&self) -> Result<Issued, ExchangeError> {
            if self.requests.fetch_add(1, Ordering::SeqCst) > 0 {
                tokio::time::sleep(self.renewal_latency).await;
            }
            let next = self.script.lock().unwrap().pop_front();
            next.unwrap_or(Err(endpoint_down()))
        }
    }

    /// An hour's token: no scheduled renewal comes during a test.
    fn token() -> Result<Issued, ExchangeError> {
        Ok(Issued {
            access_token: crate::secret::Secret::new("tok"),
            lifetime: Duration::from_secs(3600),
            lifetime_assumed: false,
        })
    }

    fn endpoint_down() -> ExchangeError {
        ExchangeError::Server {
            status: 503,
            retry_after: None,
        }
    }

    struct Fixture {
        rule: RejectionRule,
        tokens: TokenHandle,
        /// The first token, which the service is about to reject.
        rejected: Arc<Token>,
        /// `lanyard_upstream_unauthorized_retries_total`.
        retries: IntCounter,
    }

    /// The rule as a caller answering `when_no_new_token` applies it, over
    /// a refresher that holds its first token from `source`.
    async fn fixture(source: &Arc<Scripted>, when_no_new_token: WhenNoNewToken) -> Fixture {
        let metrics = Metrics::unregistered();
        let retries = metrics.upstream_unauthorized_retries.clone();
        let (tokens, _refresher) = spawn(source.clone(), RefreshPolicy::default(), metrics);
        let rejected = tokens.first_outcome().await.unwrap();
        let rule = RejectionRule::new(tokens.clone(), WAIT, retries.clone(), when_no_new_token);
        Fixture {
            rule,
            tokens,
            rejected,
            retries,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_with_a_renewal_retries_with_the_newer_token_and_counts_one_retry() {
        let source = Scripted::new(vec![token(), token()]);
        let f = fixture(&source, WhenNoNewToken::PassThe401On).await;

        let AfterRejection::Retry(fresh) = f.rule.after_401(&f.rejected).await else {
            panic!("a renewal that succeeds gives a token to retry with");
        };
        assert!(fresh.generation() > f.rejected.generation());
        assert_eq!(f.tokens.current().unwrap().generation(), fresh.generation());
        assert_eq!(f.retries.get(), 1);
        assert_eq!(source.requests(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_with_no_new_token_gives_the_callers_own_answer_within_the_wait() {
        for when_no_new_token in [
            WhenNoNewToken::PassThe401On,
            WhenNoNewToken::TellThePageToRetry,
        ] {
            // The first token, then the token endpoint fails.
            let source = Scripted::new(vec![token()]);
            let f = fixture(&source, when_no_new_token).await;

            let asked = Instant::now();
            let after = f.rule.after_401(&f.rejected).await;
            assert!(
                matches!(after, AfterRejection::NoNewToken(answer) if answer == when_no_new_token),
                "{when_no_new_token:?}: {after:?}"
            );
            assert!(asked.elapsed() < WAIT, "{:?}", asked.elapsed());
            // The renewal was asked for and failed; no retry follows.
            assert_eq!(source.requests(), 2);
            assert_eq!(f.retries.get(), 0);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_slower_than_the_wait_gives_no_new_token_at_the_wait() {
        let source = Scripted::slow(vec![token(), token()], 3 * WAIT);
        let f = fixture(&source, WhenNoNewToken::TellThePageToRetry).await;

        let asked = Instant::now();
        let after = f.rule.after_401(&f.rejected).await;
        assert!(
            matches!(
                after,
                AfterRejection::NoNewToken(WhenNoNewToken::TellThePageToRetry)
            ),
            "{after:?}"
        );
        let waited = asked.elapsed();
        assert!(waited >= WAIT && waited < 3 * WAIT, "{waited:?}");
        assert_eq!(f.retries.get(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_401s_for_one_token_share_one_token_request() {
        // The renewal takes a second, so every caller has reported its 401
        // before it ends: the paused clock moves only once all are waiting.
        let source = Scripted::slow(vec![token(), token()], Duration::from_secs(1));
        let f = fixture(&source, WhenNoNewToken::PassThe401On).await;

        let mut callers = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let rule = f.rule.clone();
            let rejected = f.rejected.clone();
            callers.spawn(async move { rule.after_401(&rejected).await });
        }
        let mut generations = Vec::new();
        while let Some(after) = callers.join_next().await {
            match after.unwrap() {
                AfterRejection::Retry(fresh) => generations.push(fresh.generation()),
                other => panic!("every caller retries: {other:?}"),
            }
        }
        assert_eq!(generations, [2; 16]);
        assert_eq!(source.requests(), 2, "the first token and one renewal");
        assert_eq!(f.retries.get(), 16);
    }

    #[tokio::test(start_paused = true)]
    async fn renewal_in_the_background_replaces_the_rejected_token_with_no_one_waiting() {
        let source = Scripted::new(vec![token(), token()]);
        let f = fixture(&source, WhenNoNewToken::PassThe401On).await;

        f.rule.renew_in_background(f.rejected.clone());
        let mut state = f.tokens.state();
        tokio::time::timeout(WAIT, state.wait_for(|s| s.generation == 2))
            .await
            .expect("the background renewal ends within the wait")
            .unwrap();
        let held = f.tokens.current().unwrap();
        assert!(held.generation() > f.rejected.generation());
        assert_eq!(source.requests(), 2);
        // The request that met the 401 was not sent again.
        assert_eq!(f.retries.get(), 0);
    }
}
