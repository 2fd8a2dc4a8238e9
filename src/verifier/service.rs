//! The verifier's calls to the service: a session's start and its polls on
//! the rule path (docs/service.md §4.3), each with the token from lanyard's
//! own cell, renewed and retried once after a 401 as the proxy does
//! (docs/tokens.md "Renewal and retries"). The payloads are `assumptions`'.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;

use super::assumptions::{self, MAX_CLAIMS_BYTES, Malformed, Progress, Started, Unusable};
use crate::config::RulePath;
use crate::config::oidc::rules::Rule;
use crate::metrics::Metrics;
use crate::otel::spans::{HttpSpan, VerifierCall};
use crate::outbound::{self, Connector, FailureKind};
use crate::target::TargetUrl;
use crate::token::{AfterRejection, RejectionRule, Token, TokenHandle, WhenNoNewToken};

/// How long a call waits for the process's first token: the default
/// token request timeout, so one slow first exchange is ridden out.
const FIRST_TOKEN_WAIT: Duration = Duration::from_secs(10);
/// Larger answers are not a session's: the claims, with room for the rest.
const MAX_ANSWER_BYTES: usize = MAX_CLAIMS_BYTES + 16 * 1024;

/// Why a call to the service gave no usable answer. Each carries what the
/// operator's log line and the page's message need, and nothing the
/// service said beyond its status: an error body may quote personal data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no valid token is held")]
    TokenUnavailable,
    #[error("the service answered HTTP {0}")]
    Answered(StatusCode),
    #[error("the service's answer {0}")]
    Malformed(Malformed),
    /// A poll's 2xx answer that asking again cannot mend.
    #[error("the service's answer {0}")]
    Unusable(Unusable),
    #[error("the service's 2xx answer is over {} KiB", MAX_ANSWER_BYTES / 1024)]
    TooLarge,
    #[error("the service's answer was cut off")]
    CutOff,
    #[error("the service could not be reached ({0:?})")]
    Unreachable(FailureKind),
    #[error("the service did not answer within {0:?}")]
    Timeout(Duration),
    /// A login's rule whose path cannot be joined to `SERVICE_API_URL`.
    #[error("a login's rule path cannot be joined to SERVICE_API_URL")]
    RulePath,
}

impl CallError {
    /// Its span's `error.type`, in a word.
    fn kind(&self) -> &'static str {
        match self {
            CallError::TokenUnavailable => "token_unavailable",
            CallError::Answered(_) => "status",
            CallError::Malformed(_) => "malformed",
            CallError::Unusable(_) => "unusable",
            CallError::TooLarge => "too_large",
            CallError::CutOff => "cut_off",
            CallError::Unreachable(kind) => kind.label(),
            CallError::Timeout(_) => "timeout",
            CallError::RulePath => "rule_path",
        }
    }
}

/// The service's verification API, for the deployment's rule and those
/// of the OpenID Connect clients.
pub struct ServiceApi {
    client: Client<Connector, Full<Bytes>>,
    /// `SERVICE_API_URL`, which a client's rule path is joined to.
    base: TargetUrl,
    /// The deployment's rule path: a client's rule is in its
    /// organization, the service account's.
    rule_path: RulePath,
    /// The deployment's rule path under `SERVICE_API_URL`, whole.
    rule: Uri,
    tokens: TokenHandle,
    /// The 401 rule: the page is told to retry when no new token comes.
    rejections: RejectionRule,
    timeout: Duration,
    metrics: Metrics,
}

impl ServiceApi {
    /// `rule_path`'s segments were checked when the settings were
    /// loaded.
    pub fn new(
        connector: Connector,
        base: &TargetUrl,
        rule_path: &RulePath,
        tokens: TokenHandle,
        timeout: Duration,
        metrics: Metrics,
    ) -> Result<ServiceApi, String> {
        let rule = join(base, &rule_path.to_string())?;
        let rejections = RejectionRule::new(
            tokens.clone(),
            timeout,
            metrics.upstream_unauthorized_retries.clone(),
            WhenNoNewToken::TellThePageToRetry,
        );
        Ok(ServiceApi {
            client: outbound::client(connector),
            base: base.clone(),
            rule_path: rule_path.clone(),
            rule,
            tokens,
            rejections,
            timeout,
            metrics,
        })
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The rule path of a login's rule, or the deployment's (`None`),
    /// whole: what a session is started and polled on, and what log
    /// lines name.
    pub fn rule(&self, rule: Option<&Rule>) -> Result<Uri, CallError> {
        let Some(rule) = rule else {
            return Ok(self.rule.clone());
        };
        let path = self.rule_path.of_rule(rule).to_string();
        // The segments were checked as the clients file was read
        // (`config::oidc::rules`), so this joins as the deployment's did.
        join(&self.base, &path).map_err(|_| CallError::RulePath)
    }

    /// Starts a session on `rule` (assumption 1).
    pub async fn start(&self, rule: &Uri) -> Result<Started, CallError> {
        let trace = HttpSpan::verifier(VerifierCall::Start, &Method::POST, rule);
        let body = self.call(Method::POST, rule, &trace).await?;
        assumptions::parse_started(&body).map_err(CallError::Malformed)
    }

    /// Asks where a session on `rule` stands (assumption 2).
    pub async fn progress(&self, rule: &Uri, transaction_id: &str) -> Result<Progress, CallError> {
        let path = assumptions::session_path(&rule.to_string(), transaction_id);
        // The id's characters were checked (assumption 5), so this parses.
        let uri: Uri = path
            .parse()
            .map_err(|_| CallError::Malformed(Malformed("has an unusable `transaction_id`")))?;
        let trace = HttpSpan::verifier(VerifierCall::Poll, &Method::GET, &uri);
        let body = self
            .call(Method::GET, &uri, &trace)
            .await
            .map_err(|err| match err {
                CallError::TooLarge => CallError::Unusable(Unusable::Claims("are over 256 KiB")),
                other => other,
            })?;
        assumptions::parse_progress(&body).map_err(CallError::Unusable)
    }

    /// One call, with one renewal and retry after a 401; a 2xx answer's
    /// body, or why there is none, also told to its span.
    async fn call(&self, method: Method, uri: &Uri, trace: &HttpSpan) -> Result<Bytes, CallError> {
        let answer = self.answer(method, uri, trace).await;
        match &answer {
            Ok((status, _)) => trace.answered(*status, None),
            Err(err) => trace.failed(err.kind()),
        }
        let (status, body) = answer?;
        if status == StatusCode::FORBIDDEN {
            self.metrics.upstream_forbidden.inc();
        }
        match status.is_success() {
            true => Ok(body),
            false => Err(CallError::Answered(status)),
        }
    }

    /// The service's last answer to a call, retried once after a 401.
    async fn answer(
        &self,
        method: Method,
        uri: &Uri,
        trace: &HttpSpan,
    ) -> Result<(StatusCode, Bytes), CallError> {
        let token = match self.tokens.get().await {
            Ok(token) => token,
            // Just started (a rolling restart, a serverless cold start):
            // the first token is on its way, and a browser that reached
            // this replica first waits for it rather than failing. Once a
            // token request has failed, or a token was held, no waiting.
            Err(_) => tokio::time::timeout(FIRST_TOKEN_WAIT, self.tokens.first_outcome())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or(CallError::TokenUnavailable)?,
        };
        let (status, body) = self.send(&method, uri, &token, trace).await?;
        if status != StatusCode::UNAUTHORIZED {
            return Ok((status, body));
        }
        // No new token: `WhenNoNewToken::TellThePageToRetry`, the
        // verifier's answer; not the account's refusal, and perhaps
        // passing.
        let AfterRejection::Retry(fresh) = self.rejections.after_401(&token).await else {
            return Err(CallError::TokenUnavailable);
        };
        trace.resent();
        self.send(&method, uri, &fresh, trace).await
    }

    /// One exchange, answer and body within the timeout.
    async fn send(
        &self,
        method: &Method,
        uri: &Uri,
        token: &Token,
        trace: &HttpSpan,
    ) -> Result<(StatusCode, Bytes), CallError> {
        let mut request = Request::new(match *method == Method::POST {
            true => Full::new(assumptions::start_body()),
            false => Full::new(Bytes::new()),
        });
        *request.method_mut() = method.clone();
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        headers.insert(header::AUTHORIZATION, token.authorization().clone());
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(crate::outbound::USER_AGENT),
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        trace.propagate(headers);
        if *method == Method::POST {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        let exchange = async {
            let response = self.client.request(request).await.map_err(|err| {
                let kind = outbound::classify(&err);
                self.metrics
                    .upstream_errors
                    .with_label_values(&[kind.label()])
                    .inc();
                CallError::Unreachable(kind)
            })?;
            let status = response.status();
            match crate::collect::collect(response.into_body(), MAX_ANSWER_BYTES).await {
                Ok(body) => Ok((status, body)),
                // An error's body is not read: its status says enough.
                Err(err) if err.is_too_large() => match status.is_success() {
                    true => Err(CallError::TooLarge),
                    false => Ok((status, Bytes::new())),
                },
                Err(_) => Err(CallError::CutOff),
            }
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => {
                self.metrics
                    .upstream_errors
                    .with_label_values(&["timeout"])
                    .inc();
                Err(CallError::Timeout(self.timeout))
            }
        }
    }
}

/// `path` under the base URL, as the proxy joins a request's path.
fn join(base: &TargetUrl, path: &str) -> Result<Uri, String> {
    let path: Uri = path
        .parse()
        .map_err(|_| format!("{path} is not a URL path"))?;
    base.uri_for(&path)
        .map_err(|_| format!("{path} cannot be joined to {base}"))
}
