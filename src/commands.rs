//! `lanyard token`, `lanyard check` and `lanyard healthcheck`, and the
//! wiring the first two share with the sidecar: credentials and TLS from a
//! [`Config`] into an [`Exchanger`].

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::Secret;
use crate::config::{self, Config, ConfigError};
use crate::credentials::Credentials;
use crate::http_client::{self, Connector, FailureKind};
use crate::proxy::Upstream;
use crate::reload;
use crate::token::{ExchangeOptions, Exchanger, SystemClock};

/// How a command failed, which decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad settings or credentials: exit 2, nothing started.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Anything else: exit 1.
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    /// The process exit code (CONTRACT §1).
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Config(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}

/// Credentials, TLS and an exchanger, built from the settings.
pub struct Wiring {
    pub connector: Connector,
    pub exchanger: Arc<Exchanger>,
    /// Set when the credentials came from a file the sidecar should watch.
    pub watch: Option<reload::Watch>,
}

/// Builds the outbound HTTP stack from the credentials and TLS roots that
/// [`Config::load`] read and checked; nothing is read again here.
pub fn wire(config: &Config) -> Result<Wiring, ConfigError> {
    let (Some(account), Some(tls)) = (&config.account, &config.tls) else {
        return Err(ConfigError::new(vec![
            "no credentials: these settings were loaded for a command that signs no assertion"
                .into(),
        ]));
    };
    let mut wiring = wire_with(config, account.credentials(), tls.clone());
    if config.credentials.file.is_some() {
        wiring.watch = Some(reload::Watch {
            settings: config.credentials.clone(),
            loaded: account.loaded,
        });
    }
    Ok(wiring)
}

/// As [`wire`], with credentials and TLS already in hand; nothing to
/// watch.
pub fn wire_with(config: &Config, credentials: Credentials, tls: rustls::ClientConfig) -> Wiring {
    let connector = http_client::connector(tls);
    let options = ExchangeOptions {
        assertion_ttl: config.assertion_ttl,
        clock_skew: config.clock_skew,
        rfc7523_fields: config.rfc7523_fields,
        timeout: config.token_timeout,
    };
    let exchanger = Arc::new(Exchanger::new(
        credentials,
        options,
        connector.clone(),
        Arc::new(SystemClock),
    ));
    Wiring {
        connector,
        exchanger,
        watch: None,
    }
}

/// `lanyard token`: one token, for scripts.
pub async fn token(config: &Config) -> Result<Secret, Failure> {
    let wiring = wire(config)?;
    wiring
        .exchanger
        .fetch()
        .await
        .map(|issued| {
            if issued.lifetime_assumed {
                tracing::warn!(
                    assumed_s = issued.lifetime.as_secs(),
                    "the token response has no expires_in; assuming the default lifetime"
                );
            }
            issued.access_token
        })
        .map_err(|err| Failure::Runtime(err.to_string()))
}

/// One line of the `check` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub status: CheckStatus,
    pub name: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    Ok,
    Fail,
    Skip,
}

/// The `check` report; all well when no line failed.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub lines: Vec<CheckLine>,
}

impl CheckReport {
    fn push(&mut self, status: CheckStatus, name: &'static str, detail: impl Into<String>) {
        self.lines.push(CheckLine {
            status,
            name,
            detail: detail.into(),
        });
    }

    pub fn passed(&self) -> bool {
        self.lines.iter().all(|l| l.status != CheckStatus::Fail)
    }

    /// The human report.
    pub fn render(&self) -> String {
        let mut out = String::from("lanyard check\n");
        for line in &self.lines {
            let status = match line.status {
                CheckStatus::Ok => "ok",
                CheckStatus::Fail => "FAIL",
                CheckStatus::Skip => "skip",
            };
            let _ = writeln!(out, "  {status:<5} {:<12} {}", line.name, line.detail);
        }
        let failed = self
            .lines
            .iter()
            .filter(|l| l.status == CheckStatus::Fail)
            .count();
        if failed == 0 {
            out.push_str("all checks passed\n");
        } else {
            let _ = writeln!(out, "{failed} check(s) failed");
        }
        out
    }
}

/// `lanyard check`: settings, credentials, a token, the upstream, and the
/// rule path when `PROJECT_ID` and `RULE_ID` are set. Bad settings or
/// credentials are a [`Failure::Config`]; everything else is reported.
pub async fn check(config: &Config) -> Result<CheckReport, Failure> {
    let wiring = wire(config)?;
    let mut report = CheckReport::default();
    report.push(CheckStatus::Ok, "settings", "valid");
    let creds = wiring.exchanger.credentials();
    report.push(
        CheckStatus::Ok,
        "credentials",
        format!(
            "client id {}, organization {}, RSA {}-bit key",
            creds.client_id,
            creds.organization_id,
            creds.key.bits()
        ),
    );

    let started = Instant::now();
    let token = match wiring.exchanger.fetch().await {
        Ok(issued) => {
            report.push(
                CheckStatus::Ok,
                "token",
                format!(
                    "obtained from {} in {} ms, valid for {} s{}",
                    creds.token_uri,
                    started.elapsed().as_millis(),
                    issued.lifetime.as_secs(),
                    if issued.lifetime_assumed {
                        " (assumed: the response has no expires_in)"
                    } else {
                        ""
                    }
                ),
            );
            issued.access_token
        }
        Err(err) => {
            report.push(
                CheckStatus::Fail,
                "token",
                format!("{err} ({})", creds.token_uri),
            );
            report.push(CheckStatus::Skip, "upstream", "needs a token");
            return Ok(report);
        }
    };

    let Some(base) = &config.service_api_url else {
        report.push(CheckStatus::Skip, "upstream", "SERVICE_API_URL is not set");
        return Ok(report);
    };
    let client = http_client::client::<Empty<Bytes>>(wiring.connector.clone());
    let probe = |url: String| {
        let client = client.clone();
        let token = token.clone();
        let timeout = config.upstream_timeout;
        async move {
            let request = Request::get(url.as_str())
                .header(header::AUTHORIZATION, format!("Bearer {}", token.expose()))
                .header(header::USER_AGENT, crate::USER_AGENT)
                .body(Empty::new())
                .map_err(|_| format!("{url} is not a valid URL"))?;
            let started = Instant::now();
            match tokio::time::timeout(timeout, client.request(request)).await {
                Ok(Ok(response)) => Ok((response.status(), started.elapsed())),
                Ok(Err(err)) => Err(match http_client::classify(&err) {
                    FailureKind::Tls => format!("TLS with {url} failed"),
                    FailureKind::Connect => format!("cannot connect to {url}"),
                    FailureKind::Other => format!("the request to {url} failed"),
                }),
                Err(_) => Err(format!(
                    "{url} did not answer within {} s",
                    timeout.as_secs()
                )),
            }
        }
    };

    // Any HTTP answer proves DNS, TCP and TLS work; the status is shown
    // because many APIs answer 404 at their root.
    match probe(base.to_string()).await {
        Ok((status, took)) => report.push(
            CheckStatus::Ok,
            "upstream",
            format!(
                "{base} answered HTTP {} in {} ms",
                status.as_u16(),
                took.as_millis()
            ),
        ),
        Err(why) => report.push(CheckStatus::Fail, "upstream", why),
    }

    let org = config
        .org_id
        .clone()
        .unwrap_or_else(|| creds.organization_id.clone());
    match (&config.project_id, &config.rule_id) {
        (Some(project), Some(rule)) => {
            let unsafe_segment = [("ORG_ID", &org), ("PROJECT_ID", project), ("RULE_ID", rule)]
                .into_iter()
                .find(|(_, v)| {
                    !v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
                });
            if let Some((name, _)) = unsafe_segment {
                report.push(
                    CheckStatus::Fail,
                    "rule",
                    format!("{name} has characters that cannot appear in a URL path segment"),
                );
                return Ok(report);
            }
            // Joined exactly as the proxy joins a request's path; the
            // segments were checked above, so this parses.
            let path = format!("/organizations/{org}/projects/{project}/verifications/{rule}");
            let url = path
                .parse::<http::Uri>()
                .ok()
                .and_then(|path| Upstream::new(base).uri_for(&path).ok())
                .map_or(path, |uri| uri.to_string());
            match probe(url).await {
                Ok((status, _)) => {
                    let (ok, detail) = explain_rule_status(status);
                    report.push(
                        if ok {
                            CheckStatus::Ok
                        } else {
                            CheckStatus::Fail
                        },
                        "rule",
                        detail,
                    );
                }
                Err(why) => report.push(CheckStatus::Fail, "rule", why),
            }
        }
        _ => report.push(
            CheckStatus::Skip,
            "rule",
            "set PROJECT_ID and RULE_ID to probe the verification rule",
        ),
    }
    Ok(report)
}

fn explain_rule_status(status: StatusCode) -> (bool, String) {
    let code = status.as_u16();
    match code {
        200..=299 => (true, format!("the rule path answered HTTP {code}")),
        401 => (false, "HTTP 401: the API rejected the token".into()),
        403 => (
            false,
            "HTTP 403: the account lacks the verifications.api role or membership of the project's group (seed §5.4)".into(),
        ),
        404 => (
            false,
            "HTTP 404: no such rule; RULE_ID must be the UUID of a published rule, not the ver_ identifier".into(),
        ),
        _ => (false, format!("the rule path answered HTTP {code}")),
    }
}

/// Longer than any answer `/readyz` takes, shorter than the 30 s Docker
/// allows a health check by default.
const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// What `lanyard healthcheck` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub ready: bool,
    /// One line for the operator: why it is or is not ready.
    pub summary: String,
}

/// `lanyard healthcheck`: asks the running sidecar's `/readyz`. It lives
/// in the binary because the container image has no shell and no curl.
pub async fn healthcheck(config: &Config) -> Health {
    let addr = reachable(config.admin_listen);
    let answer = tokio::time::timeout(HEALTHCHECK_TIMEOUT, get_readyz(addr)).await;
    let (status, body) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => {
            return Health {
                ready: false,
                summary: why,
            };
        }
        Err(_) => {
            return Health {
                ready: false,
                summary: format!(
                    "the admin listener at {addr} did not answer within {} s",
                    HEALTHCHECK_TIMEOUT.as_secs()
                ),
            };
        }
    };
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let summary = match status {
        StatusCode::OK => match json["token_expires_in_s"].as_u64() {
            Some(secs) => format!("ready: the token expires in {secs} s"),
            None => "ready".to_string(),
        },
        StatusCode::SERVICE_UNAVAILABLE => {
            let reason = json["reason"].as_str().unwrap_or("no reason given");
            match json["last_error"].as_str() {
                Some(error) => format!("not ready: {reason} (last error: {error})"),
                None => format!("not ready: {reason}"),
            }
        }
        other => format!(
            "http://{addr}/readyz answered HTTP {}; is LANYARD_ADMIN_LISTEN the sidecar's?",
            other.as_u16()
        ),
    };
    Health {
        ready: status == StatusCode::OK,
        summary,
    }
}

/// An admin listener on every interface is reached on loopback.
fn reachable(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

async fn get_readyz(addr: SocketAddr) -> Result<(StatusCode, Bytes), String> {
    let unreachable = |why: String| format!("cannot reach the admin listener at {addr}: {why}");
    let stream = TcpStream::connect(addr).await.map_err(|err| {
        unreachable(match err.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "nothing listens there (is lanyard running, with this LANYARD_ADMIN_LISTEN?)"
                    .to_string()
            }
            _ => config::io_reason(&err),
        })
    })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    tokio::spawn(connection);
    let request = Request::get("/readyz")
        .header(header::HOST, addr.to_string())
        .header(header::USER_AGENT, crate::USER_AGENT)
        .body(Empty::<Bytes>::new())
        .map_err(|err| unreachable(err.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    let status = response.status();
    // `/readyz` answers a few hundred bytes; anything far larger is not it.
    let body = Limited::new(response.into_body(), 64 * 1024)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_listener_on_every_interface_is_probed_on_loopback() {
        let probe = |listen: &str| reachable(listen.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:9090"), "127.0.0.1:9090");
        assert_eq!(probe("[::]:9090"), "[::1]:9090");
        assert_eq!(probe("10.1.2.3:9191"), "10.1.2.3:9191");
    }
}
