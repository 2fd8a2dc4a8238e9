//! Credential rotation without a restart (docs/tokens.md "Credential rotation"): each way a
//! credentials file changes is noticed within 10 s, the new account's token
//! replaces the old one while the old keeps serving, and a broken file is
//! refused, counted, and leaves the old credentials in use.

use crate::support;
use crate::support::DefaultTokens;

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::StatusCode;
use lanyard::mock::{Fault, MockAccount, MockService, generate_rsa_key};
use support::sidecar::{Running, get, start};
use support::*;

/// The contract's bound for noticing a changed file.
const NOTICED_WITHIN: Duration = Duration::from_secs(10);
const ROTATED_CLIENT_ID: &str = "sa-rotated";
/// The fixture account is a member of proj-demo; the rotated one of
/// proj-rotated only, so which token a request carries shows in the answer.
const RULE: &str = "5c3e2a1b-9d8f-4e7a-b6c5-d4e3f2a1b0c9";

/// A mock that knows the fixture account and a second one, and the second
/// account's credentials file.
async fn two_accounts() -> (MockService, String) {
    let mock = mock().await;
    let key = generate_rsa_key().expect("key generated");
    mock.add_account(MockAccount {
        client_id: ROTATED_CLIENT_ID.into(),
        organization_id: ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec!["verifications.api".into()],
        projects: vec!["proj-rotated".into()],
    });
    mock.add_rule("proj-demo", RULE);
    mock.add_rule("proj-rotated", RULE);
    let file = serde_json::json!({
        "type": "service_account",
        "organization_id": ORGANIZATION_ID,
        "client_id": ROTATED_CLIENT_ID,
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    })
    .to_string();
    (mock, file)
}

async fn rule_status(running: &Running, project: &str) -> StatusCode {
    let url = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/{project}/verifications/{RULE}",
        running.proxy
    );
    get(&url).await.status
}

/// Starts a sidecar reading its credentials from `file`, and checks it
/// acts as the fixture account.
async fn sidecar_reading(mock: MockService, file: &Path) -> Running {
    let api = mock.api_url();
    let running = start(
        mock,
        &api,
        &[("SA_CREDENTIALS_FILE", file.to_str().unwrap())],
    )
    .await;
    running.ready().await;
    assert_eq!(rule_status(&running, "proj-demo").await, StatusCode::OK);
    assert_eq!(
        rule_status(&running, "proj-rotated").await,
        StatusCode::FORBIDDEN
    );
    running
}

/// Waits for the reload and the new account's token, then checks every
/// request acts as the new account; `refused` files came before.
async fn assert_switched_to_the_rotated_account(running: &Running, refused: u64) {
    let mut reloads = running.process.reloads.clone().expect("a file is watched");
    let done = wait_for(&mut reloads, NOTICED_WITHIN, |r| r.succeeded >= 1).await;
    assert_eq!(done.refused, refused, "{:?}", done.last_problem);
    wait_for(
        &mut running.process.default_tokens().state(),
        NOTICED_WITHIN,
        |s| s.generation >= 2,
    )
    .await;
    assert_eq!(rule_status(running, "proj-rotated").await, StatusCode::OK);
    assert_eq!(
        rule_status(running, "proj-demo").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(last_signed_by(running), ROTATED_CLIENT_ID);
    assert_eq!(reload_metric(running, "success"), 1);
}

/// The client id of the last assertion the token endpoint accepted.
fn last_signed_by(running: &Running) -> String {
    let accepted = running.mock.last_accepted().expect("a token was issued");
    accepted.claims["iss"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn reload_metric(running: &Running, outcome: &str) -> u64 {
    running
        .process
        .metrics
        .credentials_reloads
        .with_label_values(&[outcome])
        .get()
}

fn original_file(mock: &MockService, dir: &Path) -> PathBuf {
    write(
        dir,
        "credentials.json",
        &credentials_json(mock, &fixture("rsa2048.pkcs8.pem")),
    )
}

/// A sidecar reading the fixture account's file in a temporary directory,
/// and the rotated account's file content to replace it with.
struct Rotation {
    running: Running,
    rotated: String,
    dir: tempfile::TempDir,
    file: PathBuf,
}

impl Rotation {
    async fn start() -> Rotation {
        let (mock, rotated) = two_accounts().await;
        let dir = tempfile::tempdir().unwrap();
        let file = original_file(&mock, dir.path());
        let running = sidecar_reading(mock, &file).await;
        Rotation {
            running,
            rotated,
            dir,
            file,
        }
    }
}

#[tokio::test]
async fn a_file_renamed_over_the_old_one_is_used_with_a_fresh_token() {
    let Rotation {
        running,
        rotated,
        dir,
        file,
    } = Rotation::start().await;

    // The new account's first token request fails: the old token must keep
    // serving until the retry brings the new one.
    running.mock.push_fault(Fault::server_error(503));
    let staged = write(dir.path(), "credentials.json.new", &rotated);
    std::fs::rename(&staged, &file).unwrap();

    let mut state = running.process.default_tokens().state();
    wait_for(&mut state, NOTICED_WITHIN, |s| s.consecutive_failures == 1).await;
    assert_eq!(rule_status(&running, "proj-demo").await, StatusCode::OK);
    assert_switched_to_the_rotated_account(&running, 0).await;
}

#[tokio::test]
async fn a_file_edited_in_place_is_used() {
    let Rotation {
        running,
        rotated,
        dir: _dir,
        file,
    } = Rotation::start().await;

    std::fs::write(&file, &rotated).unwrap();
    assert_switched_to_the_rotated_account(&running, 0).await;
}

/// The layout the kubelet gives a Secret volume: the file is a symlink
/// through `..data`, itself a symlink to a timestamped directory, and an
/// update swaps `..data` atomically.
#[tokio::test]
async fn a_kubernetes_secret_symlink_swap_is_noticed() {
    use std::os::unix::fs::symlink;

    let (mock, rotated) = two_accounts().await;
    let volume = tempfile::tempdir().unwrap();
    let first = volume.path().join("..2026_11_21_06_00_00.000000001");
    std::fs::create_dir(&first).unwrap();
    original_file(&mock, &first);
    symlink(first.file_name().unwrap(), volume.path().join("..data")).unwrap();
    let file = volume.path().join("credentials.json");
    symlink("..data/credentials.json", &file).unwrap();
    let running = sidecar_reading(mock, &file).await;

    let second = volume.path().join("..2026_11_21_06_05_00.000000002");
    std::fs::create_dir(&second).unwrap();
    write(&second, "credentials.json", &rotated);
    symlink(
        second.file_name().unwrap(),
        volume.path().join("..data_tmp"),
    )
    .unwrap();
    std::fs::rename(
        volume.path().join("..data_tmp"),
        volume.path().join("..data"),
    )
    .unwrap();
    std::fs::remove_dir_all(&first).unwrap();

    assert_switched_to_the_rotated_account(&running, 0).await;
}

#[tokio::test]
async fn a_broken_new_file_is_refused_counted_and_the_old_credentials_stay() {
    let Rotation {
        running,
        dir: _dir,
        file,
        ..
    } = Rotation::start().await;

    // An EC key: parses as PEM, refused as a key type.
    let broken = credentials_json(&running.mock, &fixture("ec-p256.pkcs8.pem"));
    std::fs::write(&file, &broken).unwrap();
    let mut reloads = running.process.reloads.clone().unwrap();
    let refused = wait_for(&mut reloads, NOTICED_WITHIN, |r| r.refused == 1).await;
    let problem = refused.last_problem.unwrap();
    assert!(problem.contains("RS256 needs an RSA key"), "{problem}");
    assert!(!problem.contains("BEGIN"), "key material in: {problem}");
    assert_eq!(reload_metric(&running, "invalid"), 1);
    assert_eq!(reload_metric(&running, "success"), 0);

    // The held token still serves, and the next one is still the old
    // account's.
    assert_eq!(rule_status(&running, "proj-demo").await, StatusCode::OK);
    running.mock.revoke_all_tokens();
    assert_eq!(rule_status(&running, "proj-demo").await, StatusCode::OK);
    assert_eq!(last_signed_by(&running), CLIENT_ID);

    // The same broken content is not refused again at every poll; a fixed
    // file is taken.
    std::fs::write(
        &file,
        credentials_json(&running.mock, &fixture("rsa2048.pkcs1.pem")),
    )
    .unwrap();
    wait_for(&mut reloads, NOTICED_WITHIN, |r| r.succeeded == 1).await;
    assert_eq!(reload_metric(&running, "invalid"), 1);
}

#[tokio::test]
async fn a_deleted_file_is_refused_and_its_return_is_noticed() {
    let Rotation {
        running,
        rotated,
        dir: _dir,
        file,
    } = Rotation::start().await;

    std::fs::remove_file(&file).unwrap();
    let mut reloads = running.process.reloads.clone().unwrap();
    let refused = wait_for(&mut reloads, NOTICED_WITHIN, |r| r.refused == 1).await;
    assert!(
        refused
            .last_problem
            .unwrap()
            .ends_with("cannot be read: no such file"),
    );
    assert_eq!(rule_status(&running, "proj-demo").await, StatusCode::OK);

    std::fs::write(&file, &rotated).unwrap();
    assert_switched_to_the_rotated_account(&running, 1).await;
}

#[tokio::test]
async fn restoring_the_content_in_use_after_a_broken_file_reloads_nothing() {
    let Rotation {
        running,
        dir: _dir,
        file,
        ..
    } = Rotation::start().await;
    let original = std::fs::read(&file).unwrap();

    std::fs::write(&file, "{ not json").unwrap();
    let mut reloads = running.process.reloads.clone().unwrap();
    wait_for(&mut reloads, NOTICED_WITHIN, |r| r.refused == 1).await;
    std::fs::write(&file, &original).unwrap();
    let after = wait_for(&mut reloads, NOTICED_WITHIN, |r| r.restored == 1).await;

    assert_eq!(after.succeeded, 0);
    assert_eq!(reload_metric(&running, "success"), 0);
    assert_eq!(
        running.process.default_tokens().state().borrow().generation,
        1
    );
}
