//! The service's stand-in for `bench/soak.sh` and `bench/run.sh`: the
//! embedded mock on a loopback port with two service accounts, so a soak
//! run can rotate the sidecar from one to the other and a benchmark has a
//! real token endpoint.
//!
//! ```text
//! cargo run --release --example mock_service -- DIR [--expires-in SECONDS]
//! ```
//!
//! Writes `DIR/credentials-a.json` and `DIR/credentials-b.json` (mode 0600),
//! one per account, each a credentials file as the Portal delivers it. Both
//! accounts are in the same organization, hold the verification role and
//! belong to the project's group, so the rule path answers 200 to either;
//! `GET /api` names the account whose token was sent, which is how the soak
//! tells the accounts apart in its traffic.
//!
//! Stdout, one `key=value` per line, ends with `ready=1` once the mock
//! serves; then one `token_issued` line per token granted. On SIGTERM or
//! SIGINT it prints the mock's counters as `stats_*` lines and exits 0.
//! Nothing printed is secret: the keys are in the files only.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use lanyard::mock::{MockAccount, MockService, VERIFICATIONS_ROLE, generate_rsa_key};
use tokio::signal::unix::{SignalKind, signal};

const ORGANIZATION_ID: &str = "org-soak";
const PROJECT_ID: &str = "proj-soak";
const RULE_ID: &str = "5d0a7c3e-2b8f-4e61-9c4d-1a7e3f9b2c58";
/// The account lanyard starts with, then the one it is rotated to.
const ACCOUNTS: [(&str, &str); 2] = [("a", "sa-soak-a"), ("b", "sa-soak-b")];
/// Short, so a ten-minute soak sees a dozen renewals.
const DEFAULT_EXPIRES_IN: i64 = 60;

const USAGE: &str = "usage: mock_service DIR [--expires-in SECONDS]";

struct Args {
    dir: PathBuf,
    expires_in: i64,
}

fn parse_args() -> Result<Args, String> {
    let mut dir = None;
    let mut expires_in = DEFAULT_EXPIRES_IN;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--expires-in" => {
                let value = args.next().ok_or("--expires-in needs a value")?;
                expires_in = value
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("--expires-in {value}: not a positive integer"))?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ if dir.is_none() && !arg.starts_with('-') => dir = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg}\n{USAGE}")),
        }
    }
    let dir = dir.ok_or(USAGE)?;
    Ok(Args { dir, expires_in })
}

/// The mock serves the API traffic of the whole soak; one thread keeps it
/// to one of a small machine's cores, leaving the rest to lanyard and the
/// load generator.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("mock_service: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mock_service: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    // Installed first, so a signal sent as soon as `ready=1` appears is
    // not lost.
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;

    let mock = MockService::start()
        .await
        .map_err(|e| format!("starting the mock: {e}"))?;
    mock.set_expires_in(Some(args.expires_in));
    mock.add_rule(PROJECT_ID, RULE_ID);
    for (label, client_id) in ACCOUNTS {
        let key = generate_rsa_key().map_err(|e| format!("{client_id}: {e}"))?;
        mock.add_account(MockAccount {
            client_id: client_id.into(),
            organization_id: ORGANIZATION_ID.into(),
            public_key_der: key.public_der,
            roles: vec![VERIFICATIONS_ROLE.into()],
            projects: vec![PROJECT_ID.into()],
        });
        let credentials = serde_json::json!({
            "type": "service_account",
            "organization_id": ORGANIZATION_ID,
            "client_id": client_id,
            "private_key": key.private_pem.expose(),
            "token_uri": mock.token_url(),
            "iam_audience": mock.audience(),
        });
        let path = args.dir.join(format!("credentials-{label}.json"));
        write_private(&path, &credentials.to_string())?;
        println!("client_{label}={client_id}");
        println!("credentials_{label}={}", path.display());
    }
    println!("api_url={}", mock.api_url());
    println!("token_url={}", mock.token_url());
    println!("organization_id={ORGANIZATION_ID}");
    println!("project_id={PROJECT_ID}");
    println!("rule_id={RULE_ID}");
    println!("expires_in={}", args.expires_in);
    println!("ready=1");

    let mut issued_to: BTreeMap<String, u64> = BTreeMap::new();
    let mut counters = mock.watch_counters();
    let mut seen_issued = 0;
    loop {
        tokio::select! {
            changed = counters.changed() => {
                if changed.is_err() {
                    return Err("the mock stopped".into());
                }
                let issued = counters.borrow_and_update().tokens_issued;
                if issued == seen_issued {
                    continue;
                }
                // Token requests come a few a minute, so no grant is missed
                // between two wake-ups; were one missed, the tally would
                // fall short of `stats_tokens_issued`, which says so.
                seen_issued = issued;
                let client_id = mock
                    .last_accepted()
                    .and_then(|log| log.form.get("client_id").cloned())
                    .unwrap_or_else(|| "unknown".into());
                *issued_to.entry(client_id.clone()).or_default() += 1;
                println!("token_issued={client_id} unix={} total={issued}", unix_now());
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }

    let counters = mock.counters();
    println!("stats_token_requests={}", counters.token_requests);
    println!("stats_tokens_issued={}", counters.tokens_issued);
    println!("stats_token_refusals={}", mock.refusals().len());
    println!("stats_api_requests={}", counters.api_requests);
    for (label, client_id) in ACCOUNTS {
        let count = issued_to.get(client_id).copied().unwrap_or(0);
        println!("stats_tokens_issued_{label}={count}");
    }
    Ok(())
}

/// Writes a file only its owner can read: it holds a private key.
fn write_private(path: &Path, contents: &str) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(contents.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
