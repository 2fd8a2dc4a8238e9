//! The service's stand-in for `bench/soak.sh`, `bench/run.sh`,
//! `bench/fleet.sh`, `bench/token.sh` and `bench/accounts.sh`: the
//! embedded mock on a loopback port with two service accounts, so a soak
//! run can rotate the sidecar from one to the other, a benchmark has a real
//! token endpoint, and a fleet run can take that endpoint down and bring it
//! back; and, when asked, a directory of many more accounts, one per
//! organization, for a sidecar of many accounts.
//!
//! ```text
//! cargo run --release --example mock_service -- DIR [--expires-in SECONDS] [--accounts N]
//! ```
//!
//! Writes `DIR/credentials-a.json` and `DIR/credentials-b.json` (mode 0600),
//! one per account, each a credentials file as the Portal delivers it. Both
//! accounts are in the same organization, hold the verification role and
//! belong to the project's group, so the rule path answers 200 to either;
//! `GET /api` names the account whose token was sent, which is how the soak
//! tells the accounts apart in its traffic.
//!
//! With `--accounts N` (default 0, none), it also writes a directory for
//! `SA_CREDENTIALS_DIR`, as `bench/accounts.sh` uses it: `DIR/accounts/`
//! holds `org-0001.json` to `org-N.json` (mode 0600), one account per
//! organization (`org-0001`, client `sa-org-0001`, and so on), each with
//! the verification role and the project's group as the two above. The
//! files share a few keys, taken in turn (`DIRECTORY_KEYS`), and the
//! line `accounts_dir=PATH` names the directory.
//!
//! Stdout, one `key=value` per line, ends with `ready=1` once the mock
//! serves. Then, one line per request to the token endpoint, with the
//! status it was answered (`dropped` for a dropped connection) and the
//! wall-clock time in milliseconds:
//!
//! ```text
//! token_request=200 unix_ms=1767225600123 client_id=sa-soak-a
//! token_request=503 unix_ms=1767225601456
//! ```
//!
//! SIGUSR1 starts an outage of the token endpoint: it answers 503 to every
//! request (no `Retry-After`) until SIGUSR2 ends it; the API keeps serving
//! and tokens already issued stay valid. Each switch prints
//! `token_outage=on unix_ms=...` or `token_outage=off unix_ms=...`. Should
//! the printing fall thousands of requests behind, a `token_events_lost=N`
//! line says how many went unprinted.
//!
//! On SIGTERM or SIGINT it prints the mock's counters as `stats_*` lines
//! and exits 0. Nothing printed is secret: the keys are in the files only.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use lanyard::mock::{MockAccount, MockService, VERIFICATIONS_ROLE, generate_rsa_key};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::broadcast::error::RecvError;

const ORGANIZATION_ID: &str = "org-soak";
const PROJECT_ID: &str = "proj-soak";
const RULE_ID: &str = "5d0a7c3e-2b8f-4e61-9c4d-1a7e3f9b2c58";
/// The account lanyard starts with, then the one it is rotated to.
const ACCOUNTS: [(&str, &str); 2] = [("a", "sa-soak-a"), ("b", "sa-soak-b")];
/// Short, so a ten-minute soak sees a dozen renewals.
const DEFAULT_EXPIRES_IN: i64 = 60;
/// The keys `--accounts`' files share, in turn. A 2048-bit RSA key takes
/// about a tenth of a second to generate (a release build on a 2-core
/// machine: `ready=1` came about 0.5 s later with four more keys than
/// without, varying widely from run to run), so a thousand would hold up
/// `ready=1` for a minute or two and measure nothing: lanyard reads each
/// file's key on its own whether or not another file holds the same one,
/// and the mock checks an assertion against the key of the account it
/// names.
const DIRECTORY_KEYS: usize = 4;

const USAGE: &str = "usage: mock_service DIR [--expires-in SECONDS] [--accounts N]";

struct Args {
    dir: PathBuf,
    expires_in: i64,
    /// Accounts of the `SA_CREDENTIALS_DIR` directory; 0 writes none.
    accounts: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut dir = None;
    let mut expires_in = DEFAULT_EXPIRES_IN;
    let mut accounts = 0;
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
            "--accounts" => {
                let value = args.next().ok_or("--accounts needs a value")?;
                accounts = value
                    .parse()
                    .map_err(|_| format!("--accounts {value}: not a whole number"))?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ if dir.is_none() && !arg.starts_with('-') => dir = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg}\n{USAGE}")),
        }
    }
    let dir = dir.ok_or(USAGE)?;
    Ok(Args {
        dir,
        expires_in,
        accounts,
    })
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
    let mut outage_on = signal(SignalKind::user_defined1()).map_err(|e| format!("SIGUSR1: {e}"))?;
    let mut outage_off =
        signal(SignalKind::user_defined2()).map_err(|e| format!("SIGUSR2: {e}"))?;

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
    if args.accounts > 0 {
        let dir = write_directory(&mock, &args.dir, args.accounts)?;
        println!("accounts_dir={}", dir.display());
    }
    println!("api_url={}", mock.api_url());
    println!("token_url={}", mock.token_url());
    println!("organization_id={ORGANIZATION_ID}");
    println!("project_id={PROJECT_ID}");
    println!("rule_id={RULE_ID}");
    println!("expires_in={}", args.expires_in);
    println!("ready=1");

    let mut issued_to: BTreeMap<String, u64> = BTreeMap::new();
    let mut events_lost = 0;
    let mut events = mock.token_events();
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => {
                    let mut line = format!(
                        "token_request={} unix_ms={}",
                        event.status.map_or_else(|| "dropped".to_string(), |s| s.to_string()),
                        unix_ms(event.at),
                    );
                    if let Some(client_id) = event.issued_to {
                        line.push_str(&format!(" client_id={client_id}"));
                        *issued_to.entry(client_id).or_default() += 1;
                    }
                    println!("{line}");
                }
                Err(RecvError::Lagged(missed)) => {
                    // Said, rather than silently short: a script computing
                    // rates from these lines must know its count is low.
                    events_lost += missed;
                    println!("token_events_lost={missed} unix_ms={}", unix_ms(SystemTime::now()));
                }
                Err(RecvError::Closed) => return Err("the mock stopped".into()),
            },
            _ = outage_on.recv() => {
                mock.set_token_outage(true);
                println!("token_outage=on unix_ms={}", unix_ms(SystemTime::now()));
            }
            _ = outage_off.recv() => {
                mock.set_token_outage(false);
                println!("token_outage=off unix_ms={}", unix_ms(SystemTime::now()));
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }

    let counters = mock.counters();
    println!("stats_token_requests={}", counters.token_requests);
    println!("stats_tokens_issued={}", counters.tokens_issued);
    println!("stats_token_refusals={}", counters.token_refusals);
    println!("stats_api_requests={}", counters.api_requests);
    println!("stats_token_events_lost={events_lost}");
    for (label, client_id) in ACCOUNTS {
        let count = issued_to.get(client_id).copied().unwrap_or(0);
        println!("stats_tokens_issued_{label}={count}");
    }
    Ok(())
}

/// Registers `count` accounts, one per organization, and writes their
/// credentials files into `DIR/accounts/`, which it returns.
fn write_directory(mock: &MockService, dir: &Path, count: usize) -> Result<PathBuf, String> {
    let dir = dir.join("accounts");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let keys = (0..DIRECTORY_KEYS.min(count))
        .map(|_| generate_rsa_key().map_err(|e| format!("the directory's keys: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    for (n, key) in (1..=count).zip(keys.iter().cycle()) {
        let organization = format!("org-{n:04}");
        let client_id = format!("sa-{organization}");
        mock.add_account(MockAccount {
            client_id: client_id.clone(),
            organization_id: organization.clone(),
            public_key_der: key.public_der.clone(),
            roles: vec![VERIFICATIONS_ROLE.into()],
            projects: vec![PROJECT_ID.into()],
        });
        let credentials = serde_json::json!({
            "type": "service_account",
            "organization_id": organization,
            "client_id": client_id,
            "private_key": key.private_pem.expose(),
            "token_uri": mock.token_url(),
            "iam_audience": mock.audience(),
        });
        write_private(
            &dir.join(format!("{organization}.json")),
            &credentials.to_string(),
        )?;
    }
    Ok(dir)
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

fn unix_ms(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}
