//! The verifier's shape: a verified session's answer polled by HTTP/2
//! streams that grant it a window of zero.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use lanyard::mock::MockService;
use tokio::time::Instant;

use crate::child::{self, Lanyard, PROJECT_ID, RULE_ID};
use crate::streams::{self, Counts, Reader};
use crate::{Args, HEADS_WAIT, SETUP_WAIT, send};

pub async fn run(args: &Args) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let mock = child::start_mock(dir.path()).await?;
    let mut vars = vec![
        ("SERVICE_API_URL".to_string(), mock.api_url()),
        (
            "SA_CREDENTIALS_FILE".into(),
            dir.path().join("credentials.json").display().to_string(),
        ),
        ("PROJECT_ID".into(), PROJECT_ID.into()),
        ("RULE_ID".into(), RULE_ID.into()),
        ("WALLET_BASE_URL".into(), mock.wallet_url()),
        ("LANYARD_VERIFIER_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_LOG_FORMAT".into(), "json".into()),
    ];
    vars.extend(args.env.iter().cloned());
    let mut child = Lanyard::spawn(&args.lanyard, "verifier", "verifier", vars).await?;
    let setup = async {
        child::until_ready(child.admin).await?;
        let session = verified_session(&mock, child.listen, args.claims_kib).await?;
        let before =
            child::status_kib(child.pid, "VmRSS").ok_or("the child's VmRSS is unreadable")?;
        Ok::<_, String>((session, before))
    };
    let (session, rss_before) = match setup.await {
        Ok(done) => done,
        Err(message) => return Err(format!("{message}\n{}", child.log_tail())),
    };

    let (stop, sampled) = child::sample(child.take(), args.rss_limit_kib);
    let total = args.connections * args.streams;
    let counts = Counts::new(total);
    let to = child.listen;
    let request = || {
        Request::get(format!("http://{to}{}", session.path))
            .header(header::COOKIE, &session.cookie)
            .body(())
            .expect("a valid request")
    };
    let reader = Reader {
        initial: 0,
        give_back_after: None,
        retry_refused: false,
        upload: None,
    };
    let holders = streams::open_all(
        args.connections,
        args.addresses,
        args.streams,
        to,
        request,
        reader,
        &counts,
    )
    .await;
    tokio::select! {
        _ = tokio::time::timeout(HEADS_WAIT, counts.all_resolved()) => {}
        () = child::child_gone(sampled.clone()) => {}
    }
    tokio::select! {
        () = tokio::time::sleep(args.hold) => {}
        () = child::child_gone(sampled.clone()) => {}
    }
    // The counts as the hold ends, before the child's end closes every
    // connection.
    let result = counts.line();
    let last = child::stop(stop, &sampled).await;
    drop(holders);
    Ok(format!(
        "streams={total} {result} rss_before_kib={rss_before} rss_peak_kib={} rss_end_kib={} \
         vm_hwm_kib={} tcp_mem_peak_kib={} answer_bytes={} child={}",
        last.peak(),
        last.last_kib,
        last.vm_hwm_kib,
        last.tcp_mem_peak_kib,
        session.answer_bytes,
        last.child,
    ))
}

struct Session {
    /// `/api/status?transactionId=...`
    path: String,
    cookie: String,
    answer_bytes: usize,
}

/// A session started as the page starts it, presented claims of
/// `claims_kib` by the mock's wallet, and polled until verified.
async fn verified_session(
    mock: &MockService,
    verifier: SocketAddr,
    claims_kib: usize,
) -> Result<Session, String> {
    let started = send(
        Method::POST,
        &format!("http://{verifier}/api/start"),
        &[("content-type", "application/json")],
        Bytes::new(),
    )
    .await?;
    if started.status != StatusCode::OK {
        return Err(format!("/api/start: {} {:?}", started.status, started.body));
    }
    let cookie = started
        .headers
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or("/api/start set no cookie")?
        .to_string();
    let json: serde_json::Value =
        serde_json::from_slice(&started.body).map_err(|e| format!("/api/start: {e}"))?;
    let handle = json["transaction_id"]
        .as_str()
        .ok_or_else(|| format!("/api/start: no transaction_id in {json}"))?;
    let service_id = service_id(&json).ok_or_else(|| format!("/api/start: {json}"))?;

    let claims = serde_json::json!({ "portrait": "x".repeat(claims_kib * 1024) }).to_string();
    let presented = send(
        Method::POST,
        &mock.wallet_present_url(&service_id),
        &[("content-type", "application/json")],
        Bytes::from(claims),
    )
    .await?;
    if presented.status != StatusCode::OK {
        return Err(format!("the wallet's present: {}", presented.status));
    }

    let path = format!("/api/status?transactionId={handle}");
    let url = format!("http://{verifier}{path}");
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        let answer = send(Method::GET, &url, &[("cookie", &cookie)], Bytes::new()).await?;
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        match json["status"].as_str() {
            Some("verified") if answer.status == StatusCode::OK => {
                return Ok(Session {
                    path,
                    cookie,
                    answer_bytes: answer.body.len(),
                });
            }
            Some("pending") if Instant::now() < deadline => {}
            _ => return Err(format!("/api/status: {} {json}", answer.status)),
        }
        // The verifier asks the service at most this often.
        tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await;
    }
}

/// The service's transaction id in a start answer's `request_uri`: the
/// mock names its wallet request `{mock}/mock/wallet/{id}`.
fn service_id(started: &serde_json::Value) -> Option<String> {
    let query = started["request_uri"].as_str()?.split_once('?')?.1;
    let (_, wallet) = form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == "request_uri")?;
    Some(wallet.rsplit('/').next()?.to_string())
}
