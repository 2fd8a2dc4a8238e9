//! A token source that answers from a script, and the helpers the
//! refresher's tests share.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lanyard::Secret;
use lanyard::metrics::Metrics;
use lanyard::token::refresher::spawn;
use lanyard::token::{ExchangeError, Issued, RefreshPolicy, TokenHandle, TokenSource};
use tokio::time::Instant;

use crate::support::wait_for;

/// Answers from a script, then fails with a 503 forever; records when it
/// was called, and takes `latency` to answer.
#[derive(Default)]
pub struct Scripted {
    script: Mutex<VecDeque<Result<Issued, ExchangeError>>>,
    pub calls: Mutex<Vec<Instant>>,
    pub latency: Mutex<Duration>,
}

impl Scripted {
    pub fn new(script: Vec<Result<Issued, ExchangeError>>) -> Arc<Self> {
        Arc::new(Scripted {
            script: Mutex::new(script.into()),
            ..Scripted::default()
        })
    }

    pub fn slow(script: Vec<Result<Issued, ExchangeError>>, latency: Duration) -> Arc<Self> {
        let source = Scripted::new(script);
        *source.latency.lock().unwrap() = latency;
        source
    }

    pub fn call_count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// Time between consecutive calls.
    pub fn gaps(&self) -> Vec<Duration> {
        let calls = self.calls.lock().unwrap();
        calls.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

impl TokenSource for Scripted {
    fn labels(&self) -> lanyard::metrics::AccountLabels {
        lanyard::metrics::AccountLabels::new("sa-test", "org-test")
    }

    async fn fetch(&self) -> Result<Issued, ExchangeError> {
        self.calls.lock().unwrap().push(Instant::now());
        let latency = *self.latency.lock().unwrap();
        tokio::time::sleep(latency).await;
        self.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err(server_error()))
    }
}

/// The refresher with the default policy, against `mock`'s token endpoint
/// with the fixture account's settings.
pub fn against_the_mock(
    mock: &lanyard::mock::MockService,
    dir: &std::path::Path,
) -> (TokenHandle, tokio::task::JoinHandle<()>) {
    let access = crate::support::access(&crate::support::settings(mock, dir, &[]));
    spawn(
        access.exchanger,
        RefreshPolicy::default(),
        Metrics::unregistered(),
    )
}

/// The refresher with the default policy, over `source`.
pub fn start(source: &Arc<Scripted>) -> (TokenHandle, tokio::task::JoinHandle<()>) {
    spawn(
        source.clone(),
        RefreshPolicy::default(),
        Metrics::unregistered(),
    )
}

pub fn token(seconds: u64) -> Result<Issued, ExchangeError> {
    Ok(Issued {
        access_token: Secret::new(format!("tok-{seconds}")),
        lifetime: Duration::from_secs(seconds),
        lifetime_assumed: false,
    })
}

pub fn server_error() -> ExchangeError {
    ExchangeError::Server {
        status: 503,
        retry_after: None,
    }
}

pub async fn wait_attempts(handle: &TokenHandle, attempts: u64) {
    wait_for(&mut handle.state(), Duration::from_secs(3600), |s| {
        s.attempts >= attempts
    })
    .await;
}

pub fn between(gap: Duration, low_ms: u64, high_ms: u64) -> bool {
    gap >= Duration::from_millis(low_ms) && gap <= Duration::from_millis(high_ms)
}

pub fn refused() -> Result<Issued, ExchangeError> {
    Err(ExchangeError::Rejected {
        status: 401,
        error: Some("invalid_client".into()),
        description: None,
    })
}
