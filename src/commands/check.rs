//! `lanyard check`: settings, credentials, a token and the upstream, and
//! the OpenID Connect provider when it is configured, as a human report.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::Empty;

use crate::config::credentials::{Credentials, RsaPublic, SigningKey};
use crate::config::oidc::OidcConfig;
use crate::config::{CheckConfig, RulePath, Segment};
use crate::outbound::{self, FailureKind};
use crate::secret::Secret;
use crate::target::TargetUrl;

use crate::access::ServiceAccess;
use crate::token::Exchanger;

mod accounts;

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
    pub(super) fn push(
        &mut self,
        status: CheckStatus,
        name: &'static str,
        detail: impl Into<String>,
    ) {
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

/// `lanyard check`: settings, credentials, the OpenID Connect provider
/// when it is configured, a token, the upstream, and the rule path when
/// `PROJECT_ID` and `RULE_ID` are set. Bad settings or credentials were
/// refused as they were loaded; everything else is reported.
pub async fn check(config: &CheckConfig) -> CheckReport {
    let run = &config.run;
    let mut report = CheckReport::default();
    report.push(CheckStatus::Ok, "settings", "valid");
    let access = ServiceAccess::of_default(&run.access, &run.signing);
    let mut token = None;
    let mut connector = None;
    if let Some(access) = &access {
        token = check_default(config, access, &mut report).await;
        connector = Some(access.connector.clone());
    }
    if let Some(dir) = run.signing.accounts.directory() {
        let dir_connector = outbound::connector(run.signing.tls.clone());
        let first = accounts::check_directory(&run.access, dir, &dir_connector, &mut report).await;
        token = token.or(first);
        connector = connector.or(Some(dir_connector));
    }
    let (Some(token), Some(connector)) = (token, connector) else {
        report.push(CheckStatus::Skip, "upstream", "needs a token");
        return report;
    };
    let base = &run.upstream;
    let probe = Probe {
        client: outbound::client(connector),
        token,
        timeout: run.proxy.upstream_timeout,
    };
    // Any HTTP answer proves DNS, TCP and TLS work; the status is shown
    // because many APIs answer 404 at their root.
    match probe.get(base.to_string()).await {
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
    match &access {
        Some(access) => {
            let organization = &access.exchanger.credentials().organization_id;
            check_rule(config, organization, base, &probe, &mut report).await;
        }
        None => report.push(
            CheckStatus::Skip,
            "rule",
            "the rule is probed with SA_CREDENTIALS_FILE's account",
        ),
    }
    report
}

/// The default account: its credentials, its key, the provider, and a
/// token, which is returned.
async fn check_default(
    config: &CheckConfig,
    access: &ServiceAccess,
    report: &mut CheckReport,
) -> Option<Secret> {
    let creds = access.exchanger.credentials();
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
    let limit = config.run.access.token_timeout;
    if let Some((status, detail)) = prove_hsm_key(&creds.key, limit).await {
        report.push(status, "key", detail);
    }
    if let Some(provider) = &config.provider {
        check_provider(provider, limit, report).await;
    }
    check_token(&access.exchanger, &creds, report).await
}

/// What `check` has a key in a token sign; no assertion signs it.
const PROBE: &[u8] = b"lanyard check: a test signature";

/// Where a key in a token is, and a signature made there and verified
/// with the key's public half, within `limit` (`LANYARD_TOKEN_TIMEOUT`, as
/// the token request has): a token that does not answer is reported, not
/// waited on. `None` for a PEM key, which has nothing to prove here.
pub(super) async fn prove_hsm_key(
    key: &Arc<SigningKey>,
    limit: Duration,
) -> Option<(CheckStatus, String)> {
    let hsm = key.hsm()?;
    let place = format!(
        "RSA {}-bit key {} on PKCS#11 token `{}`, module {}",
        hsm.bits(),
        hsm.object(),
        hsm.token(),
        hsm.module_path()
    );
    let proved = key
        .off_async(limit, |key| match key.hsm() {
            Some(hsm) => hsm.sign_verified(PROBE).map_err(|err| err.to_string()),
            None => Err("the key is not in a token".to_string()),
        })
        .await;
    Some(match proved {
        Ok(proof) => {
            let verified = if proof.verified {
                "verifies with its public key"
            } else {
                "was made (not verified: the token does not show the public exponent)"
            };
            let took = proof.took.as_millis();
            let detail = format!("{place}; a test signature made there in {took} ms {verified}");
            (CheckStatus::Ok, detail)
        }
        Err(why) => (CheckStatus::Fail, format!("{place}: {why}")),
    })
}

/// The OpenID Connect provider, when `LANYARD_OIDC_ISSUER` is set: its
/// issuer and relying parties, then the key ID tokens are signed with (a
/// key in a token proven as the account's is), its `kid`, and the
/// previous key's when that is published too. Never a key or a secret.
async fn check_provider(oidc: &OidcConfig, limit: Duration, report: &mut CheckReport) {
    let clients = match oidc.clients.len() {
        1 => "1 client".to_string(),
        n => format!("{n} clients"),
    };
    report.push(
        CheckStatus::Ok,
        "provider",
        format!(
            "OpenID Connect issuer {}, {clients}, discovery at {}",
            oidc.issuer,
            oidc.issuer.endpoint("/.well-known/openid-configuration")
        ),
    );
    let (status, key) = match prove_hsm_key(&oidc.key, limit).await {
        Some(proved) => proved,
        None => (
            CheckStatus::Ok,
            format!("RSA {}-bit PEM key", oidc.key.bits()),
        ),
    };
    let kid = oidc
        .key
        .public()
        .map_or_else(|| "unknown".to_string(), RsaPublic::kid);
    let previous = match &oidc.previous {
        Some(previous) => format!("the previous key, kid {}, is published too", previous.kid()),
        None => "no previous key is published".to_string(),
    };
    report.push(
        status,
        "id token key",
        format!("{key}; kid {kid}; {previous}"),
    );
}

/// Requests one token and reports it; the token, if one came.
pub(super) async fn check_token(
    exchanger: &Exchanger,
    creds: &Credentials,
    report: &mut CheckReport,
) -> Option<Secret> {
    let started = Instant::now();
    match exchanger.fetch().await {
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
            Some(issued.access_token)
        }
        Err(err) => {
            report.push(
                CheckStatus::Fail,
                "token",
                format!("{err} ({})", creds.token_uri),
            );
            None
        }
    }
}

/// A `GET` with the token, bounded by the upstream timeout.
struct Probe {
    client: hyper_util::client::legacy::Client<outbound::Connector, Empty<Bytes>>,
    token: Secret,
    timeout: std::time::Duration,
}

impl Probe {
    /// The status and how long it took, or why there is none.
    async fn get(&self, url: String) -> Result<(StatusCode, std::time::Duration), String> {
        let request = Request::get(url.as_str())
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.token.expose()),
            )
            .header(header::USER_AGENT, crate::outbound::USER_AGENT)
            .body(Empty::new())
            .map_err(|_| format!("{url} is not a valid URL"))?;
        let started = Instant::now();
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Ok(Ok(response)) => Ok((response.status(), started.elapsed())),
            Ok(Err(err)) => Err(match outbound::classify(&err) {
                FailureKind::Tls => format!("TLS with {url} failed"),
                FailureKind::Connect => format!("cannot connect to {url}"),
                FailureKind::Other => format!("the request to {url} failed"),
            }),
            Err(_) => Err(format!(
                "{url} did not answer within {} s",
                self.timeout.as_secs()
            )),
        }
    }
}

/// Probes the rule path when `PROJECT_ID` and `RULE_ID` are set, and
/// every OpenID Connect client's rule, in `ORG_ID`'s organization or the
/// default account's.
async fn check_rule(
    config: &CheckConfig,
    organization_id: &str,
    base: &TargetUrl,
    probe: &Probe,
    report: &mut CheckReport,
) {
    let org_id = config.org_id.as_deref();
    match (&config.project_id, &config.rule_id) {
        (Some(project), Some(rule)) => {
            let path = RulePath::new(org_id, organization_id, project, rule);
            let names = ["ORG_ID", "PROJECT_ID", "RULE_ID"];
            probe_rule(String::new(), &path, names, base, probe, report).await;
        }
        _ => report.push(
            CheckStatus::Skip,
            "rule",
            "set PROJECT_ID and RULE_ID to probe the verification rule",
        ),
    }
    // Each client's rule, checked as the deployment's is: the account
    // must reach every one (docs/oidc.md, "Rules per client").
    let clients = config.provider.iter().flat_map(|oidc| oidc.clients.iter());
    for client in clients {
        for rule in client.rules.iter() {
            let whose = format!("client {}, scope {}: ", client.id, rule.scope);
            let path = RulePath::new(org_id, organization_id, &rule.project_id, &rule.rule_id);
            let names = ["ORG_ID", "project_id", "rule_id"];
            probe_rule(whose, &path, names, base, probe, report).await;
        }
    }
}

/// Probes one rule path, its segments (organization, project, rule)
/// named as `names` says they were given, and reports it, `whose` first.
async fn probe_rule(
    whose: String,
    path: &RulePath,
    [org, project, rule]: [&str; 3],
    base: &TargetUrl,
    probe: &Probe,
    report: &mut CheckReport,
) {
    if let Some((segment, why)) = path.problem() {
        let name = match segment {
            Segment::Organization => org,
            Segment::Project => project,
            Segment::Rule => rule,
        };
        report.push(CheckStatus::Fail, "rule", format!("{whose}{name} {why}"));
        return;
    }
    // Joined exactly as the proxy joins a request's path; the segments
    // were checked above, so this parses.
    let path = path.to_string();
    let url = path
        .parse::<http::Uri>()
        .ok()
        .and_then(|path| base.uri_for(&path).ok())
        .map_or(path, |uri| uri.to_string());
    match probe.get(url).await {
        Ok((status, _)) => {
            let (ok, detail) = explain_rule_status(status);
            let status = if ok {
                CheckStatus::Ok
            } else {
                CheckStatus::Fail
            };
            report.push(status, "rule", format!("{whose}{detail}"));
        }
        Err(why) => report.push(CheckStatus::Fail, "rule", format!("{whose}{why}")),
    }
}

fn explain_rule_status(status: StatusCode) -> (bool, String) {
    let code = status.as_u16();
    match code {
        200..=299 => (true, format!("the rule path answered HTTP {code}")),
        401 => (false, "HTTP 401: the API rejected the token".into()),
        403 => (
            false,
            format!("HTTP 403: {}", crate::error::FORBIDDEN_HINT),
        ),
        404 => (
            false,
            "HTTP 404: no such rule; RULE_ID must be the UUID of a published rule, not the ver_ identifier".into(),
        ),
        _ => (false, format!("the rule path answered HTTP {code}")),
    }
}
