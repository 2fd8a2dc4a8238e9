//! A token at the edges of its life, end to end over real sockets: lanyard
//! never sends a token that may have expired, and never drops one that has
//! not (docs/tokens.md "Token lifetime").
//!
//! The token endpoint here issues JWTs as real OAuth servers do, with `exp`
//! in whole seconds, up to a second before `sent_at + expires_in`; the
//! upstream checks `exp` with no leeway, to the millisecond, as RFC 7519
//! §4.1.4 reads ("the current date/time MUST be before").

use crate::support;
use crate::support::DefaultTokens;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use lanyard::mock::Fault;
use lanyard::process::{Components, Process};
use serde::{Deserialize, Serialize};
use support::logs::Logs;
use support::sidecar::{self, get};
use support::*;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Signs and checks the test's access tokens; both ends are this test's.
const JWT_SECRET: &[u8] = b"token-lifetime-test-secret";
/// Short enough for a quick test; its tenth (1.2 s) is the expiry margin
/// that applies, more than the second a whole-second `exp` can lose.
const LIFETIME_S: u64 = 12;

#[derive(Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Serves `answer` for every request on a fresh loopback port.
async fn serve<F, Fut>(answer: F) -> (SocketAddr, JoinSet<()>)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            let answer = answer.clone();
            connections.spawn(async move {
                let service = service_fn(move |req| {
                    let answer = answer.clone();
                    async move { Ok::<_, Infallible>(answer(req).await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    });
    (addr, tasks)
}

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

/// A token endpoint issuing HS256 JWTs with a whole-second `exp`, which
/// can be taken down.
struct JwtIssuer {
    url: String,
    down: Arc<AtomicBool>,
    _tasks: JoinSet<()>,
}

impl JwtIssuer {
    async fn start() -> JwtIssuer {
        let down = Arc::new(AtomicBool::new(false));
        let is_down = down.clone();
        let (addr, tasks) = serve(move |_req| {
            let down = is_down.load(Ordering::SeqCst);
            async move {
                if down {
                    return respond(StatusCode::SERVICE_UNAVAILABLE, String::new());
                }
                // Truncated, as `exp` is: the token dies up to a second
                // before `sent_at + expires_in`.
                let exp = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    + LIFETIME_S;
                let claims = Claims {
                    sub: CLIENT_ID.into(),
                    exp,
                };
                let jwt = jsonwebtoken::encode(
                    &Header::new(Algorithm::HS256),
                    &claims,
                    &EncodingKey::from_secret(JWT_SECRET),
                )
                .unwrap();
                let body = serde_json::json!({
                    "access_token": jwt,
                    "token_type": "Bearer",
                    "expires_in": LIFETIME_S,
                });
                respond(StatusCode::OK, body.to_string())
            }
        })
        .await;
        JwtIssuer {
            url: format!("http://{addr}/token"),
            down,
            _tasks: tasks,
        }
    }
}

/// An API that accepts a token only before its `exp`, to the millisecond,
/// and counts the expired ones it was sent.
struct StrictApi {
    url: String,
    expired: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    _tasks: JoinSet<()>,
}

impl StrictApi {
    async fn start() -> StrictApi {
        let expired = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let (seen_expired, seen_accepted) = (expired.clone(), accepted.clone());
        let (addr, tasks) = serve(move |req: Request<Incoming>| {
            let now = unix_now();
            let jwt = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            let (expired, accepted) = (seen_expired.clone(), seen_accepted.clone());
            async move {
                let mut validation = Validation::new(Algorithm::HS256);
                // jsonwebtoken compares whole seconds; the check below is
                // the strict one.
                validation.validate_exp = false;
                validation.required_spec_claims.clear();
                let claims = jwt.and_then(|jwt| {
                    jsonwebtoken::decode::<Claims>(
                        &jwt,
                        &DecodingKey::from_secret(JWT_SECRET),
                        &validation,
                    )
                    .ok()
                });
                match claims {
                    Some(token) if now < token.claims.exp as f64 => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        respond(StatusCode::OK, "{}".into())
                    }
                    Some(_) => {
                        expired.fetch_add(1, Ordering::SeqCst);
                        respond(StatusCode::UNAUTHORIZED, "expired".into())
                    }
                    None => respond(StatusCode::UNAUTHORIZED, "no valid token".into()),
                }
            }
        })
        .await;
        StrictApi {
            url: format!("http://{addr}"),
            expired,
            accepted,
            _tasks: tasks,
        }
    }
}

/// Checks that the clients saw 200s, then 503s, and never a 401; the
/// index of the last 200.
fn last_ok_then_only_refusals(answers: &[(Duration, StatusCode)]) -> usize {
    assert!(
        answers.iter().all(|(_, s)| *s != StatusCode::UNAUTHORIZED),
        "a client saw 401"
    );
    let last_ok = answers
        .iter()
        .rposition(|(_, s)| *s == StatusCode::OK)
        .expect("the token served");
    assert!(
        answers[..=last_ok]
            .iter()
            .all(|(_, s)| *s == StatusCode::OK)
            && answers[last_ok + 1..]
                .iter()
                .all(|(_, s)| *s == StatusCode::SERVICE_UNAVAILABLE),
        "200s, then 503s: {answers:?}"
    );
    last_ok
}

#[tokio::test]
async fn across_a_token_endpoint_outage_no_expired_token_is_sent_and_no_401_is_seen() {
    let issuer = JwtIssuer::start().await;
    let api = StrictApi::start().await;
    let key = fixture("rsa2048.pkcs8.pem");
    let config = config(&env(&[
        ("SERVICE_API_URL", &api.url),
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_PRIVATE_KEY", &key),
        ("SA_IAM_AUDIENCE", "https://iam.example.test"),
        ("SA_TOKEN_URI", &issuer.url),
        ("SA_ORGANIZATION_ID", ORGANIZATION_ID),
    ]));
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let before_request = Instant::now();
    let sidecar = Process::start(Components::proxy(&config, admin, proxy)).unwrap();
    wait_for(
        &mut sidecar.default_tokens().state(),
        Duration::from_secs(10),
        |s| s.generation >= 1,
    )
    .await;
    // The endpoint goes down for good: the one token must carry the
    // clients as far as it safely can, and no further.
    issuer.down.store(true, Ordering::SeqCst);

    let url = format!("http://{}/v1/things", sidecar.proxy_addr.unwrap());
    let mut answers = Vec::new();
    let mut first_refusal = None;
    let deadline = before_request + Duration::from_secs(LIFETIME_S + 5);
    while Instant::now() < deadline {
        let answer = get(&url).await;
        let at = before_request.elapsed();
        if answer.status == StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(answer.headers["lanyard-error"], "token_unavailable");
            let first = *first_refusal.get_or_insert(at);
            // A second of refusals shows the token stays retired.
            if at > first + Duration::from_secs(1) {
                break;
            }
        }
        answers.push((at, answer.status));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    assert_eq!(
        api.expired.load(Ordering::SeqCst),
        0,
        "the upstream was sent an expired token"
    );
    let last_ok = last_ok_then_only_refusals(&answers);
    let first_refusal = first_refusal.expect("the token was retired");
    // Retired at `sent_at + 12 s - 1.2 s`, counted from a moment before
    // the request was sent: the token served until close to that, and
    // not past it.
    let retired = Duration::from_millis(LIFETIME_S * 1000 - 1200);
    assert!(
        answers[last_ok].0 >= retired - Duration::from_millis(1500),
        "the held token was given up early: last 200 at {:?}",
        answers[last_ok].0
    );
    assert!(
        first_refusal >= retired - Duration::from_millis(100),
        "retired at {first_refusal:?}"
    );
    assert!(api.accepted.load(Ordering::SeqCst) > 0);
}

#[tokio::test]
async fn a_401_while_the_token_endpoint_is_down_keeps_the_held_token() {
    let (logs, _guard) = Logs::capture();
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let token =
        get(&format!("{}/before", running.proxy)).await.json()["headers"]["authorization"].clone();
    // The token endpoint fails every request from now on.
    for _ in 0..20 {
        running.mock.push_fault(Fault::server_error(503));
    }

    // One replica with stale keys answers 401: lanyard asks for a new
    // token, gets none, and passes the 401 on.
    let answer = get(&format!("{}/status/401", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert!(!answer.headers.contains_key("lanyard-error"));

    // The requests after it still carry the held token, which is valid:
    // the upstream judges each one.
    for i in 0..5 {
        let answer = get(&format!("{}/after/{i}", running.proxy)).await;
        assert_eq!(answer.status, StatusCode::OK, "request {i}");
        assert_eq!(answer.json()["headers"]["authorization"], token);
    }
    // Ready, since a usable token is held; the rejection is reported.
    let ready = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["upstream_rejected_token"], true);
    assert!(
        logs.events().iter().any(|event| event["fields"]["message"]
            == "the upstream rejected the token and no new one can be had yet; still sending it until it expires"),
        "{:?}",
        logs.events()
    );
    assert!(running.mock.counters().token_requests >= 2);
}
