//! The verifier started in-process on `127.0.0.1:0` against the mock (or
//! another service), and a browser-like client that keeps its cookie.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use lanyard::config::{Flags, Loaded, Requirement};
use lanyard::mock::MockService;
use lanyard::process::{Components, Process};
use lanyard::verifier::{COOKIE, SECURE_COOKIE};
use tokio::net::TcpListener;

use super::DefaultTokens;
use super::sidecar::{Answer, send};

/// The published rule the tests verify against, in the fixture account's
/// project.
pub const RULE: &str = "5a1b9c3e-7d2f-4e8a-b6c0-1f2e3d4c5b6a";
pub const PROJECT: &str = "proj-demo";

pub struct Running {
    pub process: Process,
    /// Shared by the replicas a test starts against one mock.
    pub mock: Arc<MockService>,
    /// The credentials file this verifier reads (and watches).
    pub credentials: PathBuf,
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    pub admin: String,
    /// The clock the verifier's API reads, which a test may put ahead.
    pub clock: lanyard::verifier::Clock,
    _dir: tempfile::TempDir,
}

/// Starts the verifier for [`RULE`] with tokens from `mock`, calling
/// `service` (the mock's API unless a test gives another), with `extra`
/// settings on top.
pub async fn start(mock: MockService, service: Option<&str>, extra: &[(&str, &str)]) -> Running {
    start_shared(Arc::new(mock), service, extra).await
}

/// As [`start`], against a mock other verifiers (replicas) use too.
pub async fn start_shared(
    mock: Arc<MockService>,
    service: Option<&str>,
    extra: &[(&str, &str)],
) -> Running {
    mock.add_rule(PROJECT, RULE);
    let dir = tempfile::tempdir().unwrap();
    let wallet = mock.wallet_url();
    let mut map = super::settings(&mock, dir.path(), &[]);
    map.extend(super::env(&[
        ("PROJECT_ID", PROJECT),
        ("RULE_ID", RULE),
        ("WALLET_BASE_URL", &wallet),
    ]));
    if let Some(service) = service {
        map.insert("SERVICE_API_URL".into(), service.into());
    }
    map.extend(super::env(extra));
    let credentials = PathBuf::from(&map["SA_CREDENTIALS_FILE"]);
    let setup = match Loaded::load(&Flags::default(), &map, Requirement::Verifier) {
        Ok(Loaded::Verifier(setup)) => setup,
        other => panic!("not the verifier's settings: {other:?}"),
    };
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let verifier = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let components = Components::verifier(&setup, admin, verifier);
    let clock = components
        .verifier
        .as_ref()
        .map(|(_, config)| config.clock.clone())
        .expect("the verifier's components");
    let process = Process::start(components).unwrap();
    super::wait_for(
        &mut process.default_tokens().state(),
        Duration::from_secs(10),
        |s| s.generation >= 1 || s.last_error.is_some(),
    )
    .await;
    Running {
        url: format!("http://{}", process.verifier_addr.unwrap()),
        admin: format!("http://{}", process.admin_addr),
        process,
        mock,
        credentials,
        clock,
        _dir: dir,
    }
}

/// The error an API answer names, with its `lanyard-error` header checked.
pub fn error_code(answer: &Answer) -> String {
    let code = answer.json()["error"].as_str().unwrap().to_string();
    assert_eq!(answer.headers["lanyard-error"], code.as_str());
    assert_eq!(answer.headers["cache-control"], "no-store");
    code
}

/// A started session, as `/api/start` answered it.
#[derive(Debug, Clone)]
pub struct Session {
    /// The page's sealed handle: what `/api/status` takes.
    pub handle: String,
    /// The service's own id, as a wallet (and anyone reading the QR code)
    /// learns it: what the mock's wallet presents to.
    pub service_id: String,
}

impl Session {
    pub fn of(started: &serde_json::Value) -> Session {
        let handle = started["transaction_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no transaction_id: {started}"))
            .to_string();
        Session {
            handle,
            service_id: service_id(started),
        }
    }
}

/// The service's transaction id in a start answer's `request_uri`: the
/// mock's names its wallet request `{mock}/mock/wallet/{id}`.
pub fn service_id(started: &serde_json::Value) -> String {
    let request_uri = started["request_uri"].as_str().expect("a request_uri");
    let query = request_uri.split_once('?').expect("a query").1;
    let (_, wallet) = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "request_uri")
        .expect("the wallet's request_uri");
    wallet.rsplit('/').next().unwrap().to_string()
}

/// A browser: it keeps the cookie the verifier sets, and sends it back.
#[derive(Default)]
pub struct Browser {
    pub cookie: Option<String>,
}

impl Browser {
    pub async fn start(&mut self, verifier: &Running) -> Answer {
        self.start_with(verifier, &[]).await
    }

    /// As [`Browser::start`], with `headers` as well (a proxy's, say).
    pub async fn start_with(&mut self, verifier: &Running, headers: &[(&str, &str)]) -> Answer {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        let answer = self
            .request(Method::POST, &format!("{}/api/start", verifier.url), &all)
            .await;
        if let Some(set) = answer.headers.get("set-cookie") {
            let pair = set.to_str().unwrap().split(';').next().unwrap();
            assert!(
                pair.starts_with(&format!("{COOKIE}="))
                    || pair.starts_with(&format!("{SECURE_COOKIE}=")),
                "{pair}"
            );
            self.cookie = Some(pair.to_string());
        }
        answer
    }

    /// Starts a session that must start.
    pub async fn start_session(&mut self, verifier: &Running) -> Session {
        let answer = self.start(verifier).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        Session::of(&answer.json())
    }

    pub async fn status(&self, verifier: &Running, transaction_id: &str) -> Answer {
        let url = format!("{}/api/status?transactionId={transaction_id}", verifier.url);
        self.request(Method::GET, &url, &[]).await
    }

    /// Polls until the status is no longer `pending`, as the page does.
    pub async fn until_ended(&self, verifier: &Running, transaction_id: &str) -> Answer {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            let answer = self.status(verifier, transaction_id).await;
            if answer.status != 200 || answer.json()["status"] != "pending" {
                return answer;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "still pending after 15 s"
            );
            // The verifier asks the service at most once a second; asking
            // it faster only reads the same answer.
            tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await;
        }
    }

    pub async fn request(&self, method: Method, url: &str, headers: &[(&str, &str)]) -> Answer {
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if let Some(cookie) = &self.cookie {
            all.push(("cookie", cookie));
        }
        send(method, url, &all, Bytes::new()).await
    }
}
