//! Token answers that are malformed or carry an odd `expires_in`: each a
//! failed attempt that backs off, or a lifetime taken as 300 s when
//! missing and clamped to a day when huge.

use super::*;

/// The identical check for each case, all at once.
async fn malformed_cases(cases: Vec<Case>) {
    let mut runs = tokio::task::JoinSet::new();
    for case in cases {
        runs.spawn(async move {
            survives_and_reports(&case)
                .await
                .backs_off_exponentially()
                .await;
        });
    }
    while let Some(run) = runs.join_next().await {
        if let Err(err) = run {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}

#[tokio::test]
async fn malformed_token_responses_are_failed_attempts_that_back_off() {
    let malformed = |body: &str, error| Case {
        trouble: Trouble::Fault(Fault::body(body)),
        kind: "malformed",
        error,
        extra: &[],
    };
    malformed_cases(vec![
        malformed("", "the token response is malformed: the body is empty"),
        malformed(
            "<html>maintenance</html>",
            "the token response is malformed: the body is not JSON",
        ),
        malformed(
            r#"{"access_token":"mock-mac","token_type":"mac","expires_in":120}"#,
            "the token response is malformed: `token_type` is `mac`, expected Bearer",
        ),
    ])
    .await;
}

#[tokio::test]
async fn zero_or_negative_expires_in_is_a_malformed_response_that_backs_off() {
    let lifetime = |seconds, error| Case {
        trouble: Trouble::ExpiresIn(seconds),
        kind: "malformed",
        error,
        extra: &[],
    };
    malformed_cases(vec![
        lifetime(
            0,
            "the token response is malformed: `expires_in` is 0; a token must live longer than 0 s",
        ),
        lifetime(
            -5,
            "the token response is malformed: `expires_in` is -5; a token must live longer than 0 s",
        ),
    ])
    .await;
}

/// Starts a sidecar whose tokens come with `expires_in` (`None`: without
/// it), and returns it once ready with the unix times it was started and
/// ready, between which the token's expiry was computed.
async fn ready_with_expires_in(expires_in: Option<i64>) -> (Rig, f64, f64) {
    let mock = mock().await;
    mock.set_expires_in(expires_in);
    let started = unix_now();
    let rig = Rig::start(mock, &[]).await;
    rig.running.ready().await;
    (rig, started, unix_now())
}

/// The held token's lifetime as `/readyz` and the expiry gauge tell it:
/// both count to its retirement, the expiry margin (10 s, at most a tenth
/// of the lifetime) before `sent_at + expires_in`.
async fn assert_lifetime(rig: &Rig, started: f64, ready: f64, lifetime: u64) {
    let lifetime = lifetime - (lifetime / 10).min(10);
    let answer = rig.readyz().await;
    assert_eq!(answer.status, StatusCode::OK);
    let left = answer.json()["token_expires_in_s"].as_u64().unwrap();
    assert!((lifetime - 10..=lifetime).contains(&left), "{left}");
    let expiry = rig.scrape().await.expiry();
    let lifetime = lifetime as f64;
    assert!(
        expiry >= started + lifetime - 0.01 && expiry <= ready + lifetime + 0.01,
        "expiry {expiry} not {lifetime} s after {started}..{ready}"
    );
}

#[tokio::test]
async fn missing_expires_in_is_taken_as_300_seconds_with_a_warning() {
    let (logs, _guard) = Logs::capture();
    let (rig, started, ready) = ready_with_expires_in(None).await;
    assert_lifetime(&rig, started, ready, 300).await;
    authorization(&rig.proxied().await);
    assert_eq!(rig.scrape().await.outcome("success"), 1.0);
    let warned = logs.events().into_iter().any(|event| {
        event["level"] == "WARN"
            && event["fields"]["message"]
                == "the token response has no expires_in; assuming the default lifetime"
            && event["fields"]["assumed_s"] == 300
    });
    assert!(warned, "{:?}", logs.events());
}

#[tokio::test]
async fn huge_expires_in_is_clamped_to_a_day() {
    // 317 years.
    let (rig, started, ready) = ready_with_expires_in(Some(10_000_000_000)).await;
    assert_lifetime(&rig, started, ready, 24 * 3600).await;
    authorization(&rig.proxied().await);
}
