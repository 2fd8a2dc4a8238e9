//! The verifier's API rules called without a socket, on tokio's paused
//! clock (docs/tests.md): what a request may read, every
//! refusal's shape and headers, a session's expiry and its poll spacing.
//! The service sits on a closed loopback port, so a rule that would ask it
//! shows as `upstream_unreachable`, counted in the metrics; the end-to-end
//! tests (tests/verifier*.rs) keep the real sockets for what needs them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::binding::Sealed;
use super::*;
use crate::config::{Flags, Loaded, Requirement};
use crate::server::Peer;
use crate::token::{ExchangeError, Issued, RefreshPolicy, TokenSource};

const KEY: &str = include_str!("../../tests/fixtures/rsa2048.pkcs8.pem");
const RULE: &str = "5a1b9c3e-7d2f-4e8a-b6c0-1f2e3d4c5b6a";

/// A token source that always gives an hour's token.
struct Fixed;

impl TokenSource for Fixed {
    fn labels(&self) -> crate::metrics::AccountLabels {
        crate::metrics::AccountLabels::new("sa-test", "org-test")
    }

    async fn fetch(&self) -> Result<Issued, ExchangeError> {
        Ok(Issued {
            access_token: crate::secret::Secret::new("tok"),
            lifetime: Duration::from_secs(3600),
            lifetime_assumed: false,
        })
    }
}

struct Fixture {
    verifier: Verifier,
    metrics: Metrics,
}

/// A verifier whose service is a closed port, with `extra` settings.
async fn fixture(extra: &[(&str, &str)]) -> Fixture {
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let closed = "http://127.0.0.1:9";
    let mut env: HashMap<String, String> = [
        ("SERVICE_API_URL", closed),
        ("SA_CLIENT_ID", "sa-test"),
        ("SA_PRIVATE_KEY", KEY),
        ("SA_IAM_AUDIENCE", closed),
        ("SA_TOKEN_URI", "http://127.0.0.1:9/token"),
        ("SA_ORGANIZATION_ID", "org-test"),
        ("PROJECT_ID", "proj-test"),
        ("RULE_ID", RULE),
        ("WALLET_BASE_URL", "https://wallet.example/authorize"),
        ("LANYARD_VERIFIER_SESSION_KEY", key.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let Loaded::Verifier(setup) =
        Loaded::load(&Flags::default(), &env, Requirement::Verifier).unwrap()
    else {
        panic!("not the verifier's settings");
    };
    let access = ServiceAccess::new(&setup.access, &setup.account, &setup.tls);
    let metrics = Metrics::unregistered();
    let (tokens, _refresher) =
        crate::token::refresher::spawn(Fixed, RefreshPolicy::default(), metrics.clone());
    tokens.first_outcome().await.unwrap();
    let mut serving = Serving::of_setup(&setup);
    serving.config.service_timeout = Duration::from_secs(1);
    let verifier = Verifier::new(&serving, &access, tokens, metrics.clone()).unwrap();
    Fixture { verifier, metrics }
}

const CLIENT: Peer = Peer::Tcp(SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)),
    40000,
));

impl Fixture {
    async fn call(&self, method: Method, uri: &str, headers: &[(&str, &str)]) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::new())).unwrap();
        Answer::of(self.verifier.serve(req, CLIENT).await.expect("an answer")).await
    }

    /// A handle and cookie for a session sealed as `/api/start` would,
    /// ending `left` seconds from now.
    fn session(&self, service_id: &str, left: u64) -> (String, String) {
        let keys = self.verifier.inner.keys.ring();
        let (browser, cookie) = keys.issue_cookie().unwrap();
        let expires_at = api_unix_now() + left;
        let sealed = Sealed {
            service_id: service_id.into(),
            browser,
            expires_at,
            authorization: None,
        };
        (keys.seal(&sealed).unwrap(), format!("{COOKIE}={cookie}"))
    }

    fn unreachable_calls(&self) -> u64 {
        self.metrics
            .upstream_errors
            .with_label_values(&["connect"])
            .get()
    }
}

fn api_unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: serde_json::Value,
}

impl Answer {
    async fn of(response: Response<Full<Bytes>>) -> Answer {
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
        }
    }

    fn error(&self) -> &str {
        let code = self.body["error"].as_str().unwrap_or("");
        assert_eq!(self.headers["lanyard-error"], code);
        code
    }
}

#[tokio::test(start_paused = true)]
async fn refusals_have_their_shape_and_every_answer_its_headers() {
    let f = fixture(&[]).await;
    let handle = f.session("tx-1", 300).0;
    let status = format!("/api/status?transactionId={handle}");
    for (method, uri, headers, code) in [
        (Method::GET, "/api/status", vec![], "bad_request"),
        (
            Method::GET,
            "/api/status?transactionId=a.b",
            vec![],
            "bad_request",
        ),
        (Method::GET, status.as_str(), vec![], "not_found"),
        (
            Method::GET,
            "/api/status?transactionId=AAAA",
            vec![],
            "not_found",
        ),
        (Method::POST, "/api/start", vec![], "unsupported_media_type"),
        (Method::DELETE, "/api/start", vec![], "method_not_allowed"),
        (Method::GET, "/api/other", vec![], "not_found"),
        (
            Method::GET,
            status.as_str(),
            vec![("sec-fetch-site", "cross-site")],
            "cross_site_request",
        ),
    ] {
        let answer = f.call(method.clone(), uri, &headers).await;
        assert_eq!(answer.error(), code, "{method} {uri}");
        assert_eq!(answer.headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(
            answer.headers["permissions-policy"], PERMISSIONS_POLICY,
            "{method} {uri}"
        );
        assert!(
            !answer
                .headers
                .contains_key(header::STRICT_TRANSPORT_SECURITY)
        );
    }
    let page = f.call(Method::GET, "/", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.headers[header::CONTENT_SECURITY_POLICY],
        CONTENT_SECURITY_POLICY
    );
}

#[tokio::test(start_paused = true)]
async fn https_is_believed_only_from_a_trusted_proxy() {
    let proxied = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "203.0.113.9"),
    ];
    let direct = fixture(&[]).await.call(Method::GET, "/", &proxied).await;
    assert!(
        !direct
            .headers
            .contains_key(header::STRICT_TRANSPORT_SECURITY)
    );
    let behind = fixture(&[("LANYARD_VERIFIER_FORWARDED_HOPS", "1")]).await;
    let answer = behind.call(Method::GET, "/", &proxied).await;
    assert_eq!(
        answer.headers[header::STRICT_TRANSPORT_SECURITY],
        page::STRICT_TRANSPORT_SECURITY
    );
}

#[tokio::test(start_paused = true)]
async fn a_session_reads_only_with_its_handle_and_its_browsers_cookie() {
    let f = fixture(&[]).await;
    let (handle, cookie) = f.session("tx-1", 0);
    let (_, other_cookie) = f.session("tx-2", 300);
    let uri = format!("/api/status?transactionId={handle}");
    let stranger = f
        .call(Method::GET, &uri, &[("cookie", &other_cookie)])
        .await;
    assert_eq!(stranger.error(), "not_found");
    // Its browser, past its lifetime: expired, without asking the service.
    let both = format!("{other_cookie}; {cookie}");
    let mine = f.call(Method::GET, &uri, &[("cookie", &both)]).await;
    assert_eq!(mine.body, serde_json::json!({"status": "expired"}));
    assert_eq!(f.unreachable_calls(), 0);
    let service_id = f
        .call(
            Method::GET,
            "/api/status?transactionId=tx-1",
            &[("cookie", &cookie)],
        )
        .await;
    assert_eq!(
        service_id.error(),
        "not_found",
        "the service's own id reads nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_replica_asks_the_service_once_a_spacing_growing_with_the_sessions_age() {
    let f = fixture(&[]).await;
    let (handle, cookie) = f.session("tx-1", 300);
    let uri = format!("/api/status?transactionId={handle}");
    let headers = [("cookie", cookie.as_str())];
    let poll = || f.call(Method::GET, &uri, &headers);
    // Asked, and the service unreachable: the page is told, and polls on.
    assert_eq!(poll().await.error(), "upstream_unreachable");
    assert_eq!(f.unreachable_calls(), 1);
    // Within the spacing: what is known, without a call.
    assert_eq!(poll().await.body["status"], "pending");
    assert_eq!(f.unreachable_calls(), 1);
    tokio::time::advance(SERVICE_POLL_SPACING).await;
    assert_eq!(poll().await.error(), "upstream_unreachable");
    assert_eq!(f.unreachable_calls(), 2);

    // A session four minutes old is asked about every 5 s at most.
    let (old, old_cookie) = f.session("tx-old", 60);
    let uri = format!("/api/status?transactionId={old}");
    let headers = [("cookie", old_cookie.as_str())];
    let poll = || f.call(Method::GET, &uri, &headers);
    assert_eq!(poll().await.error(), "upstream_unreachable");
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(poll().await.body["status"], "pending");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(poll().await.error(), "upstream_unreachable");
    assert_eq!(f.unreachable_calls(), 4);
}
