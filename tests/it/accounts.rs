//! Many accounts in one sidecar (docs/accounts.md): with
//! `SA_CREDENTIALS_DIR`, each `/organizations/{ORG_ID}/…` path carries the
//! token of the account of that organization and no other, against the
//! embedded mock, whose API refuses a token of another organization.
//!
//! - `routing`: which account serves which path, and the 403s.
//! - `paths`: every way a path can be written to read as another
//!   organization than lanyard read, over raw sockets.
//! - `demand`: tokens fetched on first use, `/readyz`'s accounts and the
//!   token metrics per `client_id`.
//! - `watched`: files added, changed, removed, refused and swapped under a
//!   running sidecar.
//! - `commands`: start-up refusals, `lanyard check` and `lanyard token
//!   --organization` through the binary, and no secret in any output.

use crate::support;

mod commands;
mod demand;
mod paths;
mod routing;
mod watched;

use std::path::{Path, PathBuf};
use std::time::Duration;

use lanyard::accounts::DirectoryReloads;
use lanyard::mock::{MockAccount, MockService, generate_rsa_key};
use lanyard::token::TokenHandle;
use support::sidecar::{self, Answer, Running};
use support::*;

/// The watcher polls every 2 s and reads a changed file until two reads
/// agree; this leaves room for a loaded machine.
const NOTICED_WITHIN: Duration = Duration::from_secs(10);
/// A rule published in every account's project, so that an account's own
/// organization's rule answers 200 and any other's 403 (the mock checks
/// the token's organization against the path's).
const RULE: &str = "7d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

/// An account of the directory as the mock knows it.
#[derive(Clone)]
struct Member {
    org: &'static str,
    client: &'static str,
    /// The private key its file holds.
    pem: String,
}

impl Member {
    /// Its project at the mock, holding [`RULE`].
    fn project(&self) -> String {
        format!("proj-{}", self.org)
    }

    /// The path of its organization's rule, which only its token opens.
    fn rule_path(&self) -> String {
        format!(
            "/organizations/{}/projects/{}/verifications/{RULE}",
            self.org,
            self.project()
        )
    }

    /// Its credentials file's content, as the Portal delivers it.
    fn file(&self, mock: &MockService) -> String {
        serde_json::json!({
            "type": "service_account",
            "organization_id": self.org,
            "client_id": self.client,
            "private_key": self.pem,
            "token_uri": mock.token_url(),
            "iam_audience": mock.audience(),
        })
        .to_string()
    }

    /// Makes the mock know it, with this public key, and its rule.
    fn register(&self, mock: &MockService, public_key_der: Vec<u8>) {
        mock.add_account(MockAccount {
            client_id: self.client.into(),
            organization_id: self.org.into(),
            public_key_der,
            roles: vec!["verifications.api".into()],
            projects: vec![self.project()],
        });
        mock.add_rule(self.project(), RULE);
    }
}

/// A member with a key of its own, which the mock knows.
fn member_with_new_key(mock: &MockService, org: &'static str, client: &'static str) -> Member {
    let key = generate_rsa_key().expect("key generated");
    let member = Member {
        org,
        client,
        pem: key.private_pem.expose().to_string(),
    };
    member.register(mock, key.public_der);
    member
}

/// Three accounts in three organizations, and the default account
/// (`support::account`, organization `org-test`): A and B share the
/// fixture key (in its PKCS#8 and PKCS#1 forms), C has one of its own, so
/// an assertion signed with the wrong account's key shows as a refusal.
struct Fleet {
    mock: MockService,
    a: Member,
    b: Member,
    c: Member,
    /// Holds the default account's file and `accounts/`, the directory.
    temp: tempfile::TempDir,
}

impl Fleet {
    async fn new() -> Fleet {
        let mock = mock().await;
        mock.add_rule("proj-demo", RULE);
        let fixture_member = |org, client, pem: &str| {
            let member = Member {
                org,
                client,
                pem: fixture(pem),
            };
            member.register(&mock, fixture_public_der());
            member
        };
        let a = fixture_member("org-A", "sa-a", "rsa2048.pkcs8.pem");
        let b = fixture_member("org-B", "sa-b", "rsa2048.pkcs1.pem");
        let c = member_with_new_key(&mock, "org-C", "sa-c");
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("accounts")).unwrap();
        Fleet {
            mock,
            a,
            b,
            c,
            temp,
        }
    }

    fn dir(&self) -> PathBuf {
        self.temp.path().join("accounts")
    }

    /// Writes `a.json`, `b.json` and `c.json`.
    fn write_all(&self) {
        for (name, member) in [("a", &self.a), ("b", &self.b), ("c", &self.c)] {
            write(
                &self.dir(),
                &format!("{name}.json"),
                &member.file(&self.mock),
            );
        }
    }

    /// `lanyard run`'s settings for the directory, with the default
    /// account's file (written now) when `default`.
    fn settings(&self, default: bool) -> std::collections::HashMap<String, String> {
        let dir = self.dir();
        let mut map = env(&[
            ("SERVICE_API_URL", &self.mock.api_url()),
            ("SA_CREDENTIALS_DIR", dir.to_str().unwrap()),
        ]);
        if default {
            let file = write_private(
                self.temp.path(),
                "credentials.json",
                &credentials_json(&self.mock, &fixture("rsa2048.pkcs8.pem")),
            );
            map.insert("SA_CREDENTIALS_FILE".into(), file.to_str().unwrap().into());
        }
        map
    }

    /// A sidecar in-process serving the directory as it now is, with the
    /// default account when `default` (its first token awaited).
    /// A sidecar on a fleet with every member's file written, and no
    /// default account.
    async fn all_written() -> Sidecar {
        let fleet = Fleet::new().await;
        fleet.write_all();
        fleet.start(false).await
    }

    async fn start(self, default: bool) -> Sidecar {
        let map = self.settings(default);
        let Fleet {
            mock,
            a,
            b,
            c,
            temp,
        } = self;
        let dir = temp.path().join("accounts");
        let running = sidecar::start_with(mock, &map, temp).await;
        if default {
            running.ready().await;
        }
        Sidecar {
            running,
            dir,
            a,
            b,
            c,
        }
    }
}

/// A running sidecar over a [`Fleet`]'s directory.
struct Sidecar {
    running: Running,
    dir: PathBuf,
    a: Member,
    b: Member,
    c: Member,
}

impl Sidecar {
    fn mock(&self) -> &MockService {
        &self.running.mock
    }

    async fn get(&self, path: &str) -> Answer {
        sidecar::get(&format!("{}{path}", self.running.proxy)).await
    }

    /// Requests made to the mock's API so far.
    fn api_requests(&self) -> u64 {
        self.mock().counters().api_requests
    }

    /// The client whose token the mock's API saw last.
    fn last_caller(&self) -> Option<String> {
        last_caller(self.mock())
    }

    /// `member`'s rule through the proxy: answered 200 with its own token.
    async fn assert_served(&self, member: &Member) {
        let answer = self.get(&member.rule_path()).await;
        assert_eq!(
            answer.status,
            http::StatusCode::OK,
            "{}: {}",
            member.org,
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(self.last_caller().as_deref(), Some(member.client));
    }

    /// The token of the account serving `member`'s organization now.
    fn tokens_of(&self, member: &Member) -> TokenHandle {
        let routes = self.running.process.accounts.load();
        let account = routes
            .pick(&member.rule_path())
            .unwrap_or_else(|no| panic!("no account for {}: {no:?}", member.org));
        account.tokens().clone()
    }

    /// Waits until the directory's watcher has done what `done` looks for.
    async fn reloaded(&self, done: impl FnMut(&DirectoryReloads) -> bool) -> DirectoryReloads {
        let mut reloads = self
            .running
            .process
            .directory
            .clone()
            .expect("the directory is watched");
        wait_for(&mut reloads, NOTICED_WITHIN, done).await
    }
}

/// The client whose token `mock`'s API saw last.
fn last_caller(mock: &MockService) -> Option<String> {
    let request = mock.last_api_request()?;
    let authorization = request.headers.get(http::header::AUTHORIZATION)?;
    let token = authorization.to_str().ok()?.strip_prefix("Bearer ")?;
    mock.token_owner(token)
}

/// Asserts lanyard's own refusal: its status, code in the `lanyard-error`
/// header and in the JSON body; returns the message.
fn assert_refusal(answer: &Answer, status: u16, code: &str) -> String {
    let body = answer.json();
    assert_eq!(answer.status.as_u16(), status, "{body}");
    assert_eq!(
        answer
            .headers
            .get("lanyard-error")
            .map(|v| v.to_str().unwrap()),
        Some(code),
        "{body}"
    );
    assert_eq!(body["error"], code, "{body}");
    body["message"].as_str().expect("a message").to_string()
}

/// An answer read off a raw socket.
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

/// Sends `GET target` as written, byte for byte (an HTTP client would
/// normalise some of the targets the tests need), with `Connection:
/// close`, and reads the answer to its end.
async fn raw_get(proxy: &str, target: &str) -> Raw {
    let addr = proxy.trim_start_matches("http://");
    let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let (head, body) = support::raw::to_end(proxy, &request).await;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{target}: no status in {head}"));
    Raw { status, head, body }
}

/// Writes `contents` to `name` in `dir` as a deployment tool should: to a
/// hidden name the watcher ignores, then renamed into place, so no poll
/// reads it half written.
fn put(dir: &Path, name: &str, contents: &str) {
    let staged = write(dir, &format!(".{name}.tmp"), contents);
    std::fs::rename(staged, dir.join(name)).unwrap();
}
