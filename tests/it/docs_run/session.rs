//! One page's blocks run in order in a shell session of their own: a
//! temporary directory, the built binaries on `PATH`, variables carried
//! from block to block, servers kept until the page ends, and every
//! documented port moved to a free one (docs/tests.md, "Documentation that
//! runs").

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lanyard::mock::MockService;
use tokio::process::{Child, Command};

use super::blocks::{Block, Plan};
use super::docker;
use crate::support;

/// Each listener's variable and its default port, on a machine (where
/// `lanyard demo` and `lanyard run` listen) and in a container (where
/// `lanyard verifier` listens on every interface), as docs/settings.md
/// gives them: the ports the pages name.
pub const LISTENERS: [(&str, u16, u16); 3] = [
    ("LANYARD_LISTEN", 8080, 8080),
    ("LANYARD_ADMIN_LISTEN", 9090, 9090),
    ("LANYARD_VERIFIER_LISTEN", 8081, 8080),
];

/// How long a block may run, and a server take to answer its probe: a
/// debug build on a busy 2-core machine starts the demo in seconds.
pub const BLOCK_LIMIT: Duration = Duration::from_secs(60);

/// How often a probe is asked: a server says nothing a test could await
/// when it is ready but its probe's answer.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// How much of a failing block's output a message shows, from its end.
const SHOWN_OUTPUT: usize = 4096;

/// The `cargo` the pages' `cargo run` lines find on `PATH`: the binaries
/// the suite built, so that a page's command never builds or waits for
/// cargo's lock.
const CARGO_SHIM: &str = r#"#!/usr/bin/env bash
set -euo pipefail
[[ ${1-} == run ]] || { echo "docs runner: only \`cargo run\` runs here, not \`cargo $*\`" >&2; exit 127; }
shift
bin=lanyard
while (($#)); do
    case $1 in
        --) shift; break ;;
        --example) bin=examples/$2; shift 2 ;;
        --locked | -q) shift ;;
        *) echo "docs runner: \`cargo run $1\` is not known here" >&2; exit 127 ;;
    esac
done
exec "$DOCS_RUNNER_TARGET/$bin" "$@"
"#;

/// A block that did not do what its page says.
#[derive(Debug)]
pub struct Failure {
    pub place: String,
    pub problem: String,
    pub output: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}: {}", self.place, self.problem)?;
        if !self.output.is_empty() {
            let start = self.output.len().saturating_sub(SHOWN_OUTPUT);
            let start = (start..self.output.len())
                .find(|&i| self.output.is_char_boundary(i))
                .unwrap_or(0);
            writeln!(f, "--- output ---\n{}--------------", &self.output[start..])?;
        }
        Ok(())
    }
}

/// A background process of the page, and where its output goes.
pub struct Server {
    pub child: Child,
    pub log: PathBuf,
}

impl Server {
    /// Stops the server and waits for it to go, so that its ports are free
    /// for the next.
    pub async fn stop(mut self) {
        self.terminate();
        let _ = tokio::time::timeout(BLOCK_LIMIT, self.child.wait()).await;
    }

    fn terminate(&self) {
        // Its own process group: a shell's children go with it.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", "--", &format!("-{pid}")])
                .status();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The directory, environment and servers of one page.
pub struct Session {
    pub dir: tempfile::TempDir,
    /// Each documented port and the free one it stands for.
    ports: Vec<(u16, u16)>,
    /// Placeholders read from servers' output, and their values.
    words: Vec<(String, String)>,
    servers: Vec<Server>,
    /// Holds the account of the directory's `credentials.json`.
    _mock: MockService,
}

impl Session {
    pub async fn new() -> Session {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join(".bin");
        std::fs::create_dir(&bin).unwrap();
        let shim = support::write(&bin, "cargo", CARGO_SHIM);
        std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mock = support::mock().await;
        let key = support::fixture("rsa2048.pkcs8.pem");
        support::write_private(
            dir.path(),
            "credentials.json",
            &support::credentials_json(&mock, &key),
        );
        Session {
            dir,
            ports: Vec::new(),
            words: Vec::new(),
            servers: Vec::new(),
            _mock: mock,
        }
    }

    /// The free port standing for `documented`, the same for the whole page.
    pub fn port(&mut self, documented: u16) -> u16 {
        if let Some(&(_, free)) = self.ports.iter().find(|(d, _)| *d == documented) {
            return free;
        }
        let free = support::closed_port().port();
        self.ports.push((documented, free));
        free
    }

    /// `text` with the documented loopback ports moved and the
    /// placeholders filled in.
    pub fn localize(&mut self, text: &str) -> String {
        let mut text = text.to_string();
        for documented in documented_ports() {
            let free = self.port(documented);
            for host in ["127.0.0.1", "localhost"] {
                text = text.replace(&format!("{host}:{documented}"), &format!("{host}:{free}"));
            }
        }
        for (name, value) in &self.words {
            text = replace_word(&text, name, value);
        }
        text
    }

    /// What every process of the page is given: `PATH` with the built
    /// binaries, and the listeners on the page's free ports.
    pub fn environment(&mut self) -> Vec<(String, String)> {
        let target = target_dir();
        let path = format!(
            "{}:{}:{}:/usr/local/bin:/usr/bin:/bin",
            self.dir.path().join(".bin").display(),
            target.display(),
            target.join("examples").display(),
        );
        let mut environment = vec![
            ("PATH".into(), path),
            ("HOME".into(), self.dir.path().display().to_string()),
            ("DOCS_RUNNER_TARGET".into(), target.display().to_string()),
        ];
        for (name, port, _) in LISTENERS {
            let free = self.port(port);
            environment.push((name.into(), format!("127.0.0.1:{free}")));
        }
        environment
    }

    /// Runs `block` as its plan says.
    pub async fn run(&mut self, block: &Block) -> Result<(), Failure> {
        let fail = |problem: String| Failure {
            place: block.place(),
            problem,
            output: String::new(),
        };
        match block.plan().map_err(fail)? {
            Plan::NotShell | Plan::NoRun(_) => Ok(()),
            Plan::Run => self.run_to_end(block).await,
            Plan::Server { probe, outputs } => self.serve(block, &probe, &outputs).await,
            Plan::Docker { probe } => docker::run(self, block, &probe).await,
        }
    }

    /// The script a block runs as: the page's variables so far, the
    /// block, then its variables kept for the next block.
    fn script(&mut self, block: &Block) -> String {
        let state = self.dir.path().join(".state");
        format!(
            "set -euo pipefail\n\
             __docs_before=$(compgen -v)\n\
             [[ -f {state} ]] && source {state}\n\
             {text}\n\
             __docs_names=$(comm -13 <(sort <<<\"$__docs_before\") <(compgen -v | sort) | grep -v '^__docs' || true)\n\
             [[ -z $__docs_names ]] || declare -p $__docs_names > {state}\n",
            state = state.display(),
            text = self.localize(&block.text),
        )
    }

    async fn run_to_end(&mut self, block: &Block) -> Result<(), Failure> {
        let script = self.script(block);
        let mut command = Command::new("bash");
        command
            .args(["-c", &script])
            .current_dir(self.dir.path())
            .env_clear()
            .envs(self.environment())
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let failure = |problem: String, output: String| Failure {
            place: block.place(),
            problem,
            output,
        };
        let output = match tokio::time::timeout(BLOCK_LIMIT, command.output()).await {
            Err(_) => {
                return Err(failure(
                    format!("still running after {BLOCK_LIMIT:?}"),
                    String::new(),
                ));
            }
            Ok(output) => output.expect("bash runs"),
        };
        let text = format!(
            "{}{}",
            support::text(&output.stdout),
            support::text(&output.stderr)
        );
        match output.status.success() {
            true => Ok(()),
            false => Err(failure(format!("exited with {}", output.status), text)),
        }
    }

    /// Starts `block` in the background and waits for `probe` to answer;
    /// then reads the placeholders `outputs` names from what it printed.
    async fn serve(
        &mut self,
        block: &Block,
        probe: &str,
        outputs: &[(String, String)],
    ) -> Result<(), Failure> {
        // The page's next server takes the place of the one before, on the
        // same documented ports.
        for server in self.servers.drain(..) {
            server.stop().await;
        }
        let script = self.script(block);
        let log = self.dir.path().join(format!(".server-{}.log", block.line));
        let mut command = Command::new("bash");
        command
            .args(["-c", &script])
            .current_dir(self.dir.path())
            .env_clear()
            .envs(self.environment());
        let probe = self.localize(probe);
        let server = start(command, log);
        let server = await_probe(server, &probe)
            .await
            .map_err(|(problem, output)| Failure {
                place: block.place(),
                problem,
                output,
            })?;
        let printed = std::fs::read_to_string(&server.log).unwrap_or_default();
        self.servers.push(server);
        for (name, label) in outputs {
            let value = printed_port(&printed, label).ok_or_else(|| Failure {
                place: block.place(),
                problem: format!("no line `{label} …127.0.0.1:PORT` for `{name}`"),
                output: printed.clone(),
            })?;
            self.words.push((name.clone(), value));
        }
        Ok(())
    }
}

/// Starts `command` in a process group of its own, its output in `log`.
pub fn start(mut command: Command, log: PathBuf) -> Server {
    let file = std::fs::File::create(&log).unwrap();
    let child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("the server's command starts");
    Server { child, log }
}

/// Waits until `probe` answers 2xx, or `server` exits, or the limit passes;
/// on failure, why and what the server printed.
pub async fn await_probe(mut server: Server, probe: &str) -> Result<Server, (String, String)> {
    let printed = |log: &Path| std::fs::read_to_string(log).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + BLOCK_LIMIT;
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            let problem = format!("exited with {status} before {probe} answered");
            return Err((problem, printed(&server.log)));
        }
        if answers(probe).await {
            return Ok(server);
        }
        if tokio::time::Instant::now() > deadline {
            let problem = format!("{probe} did not answer within {BLOCK_LIMIT:?}");
            return Err((problem, printed(&server.log)));
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
}

/// Whether `url` answers with a 2xx status.
async fn answers(url: &str) -> bool {
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-f", "--max-time", "2", url])
        .output()
        .await
        .expect("curl runs");
    output.status.success()
}

/// The directory cargo built the suite's binaries in.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_lanyard"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The loopback ports the pages name: those lanyard and its demo listen
/// on by default.
fn documented_ports() -> impl Iterator<Item = u16> {
    LISTENERS.into_iter().map(|(_, port, _)| port)
}

/// The port of the first `127.0.0.1:PORT` on the line of `printed` whose
/// first word is `label`.
fn printed_port(printed: &str, label: &str) -> Option<String> {
    let line = printed
        .lines()
        .find(|line| line.split_whitespace().next() == Some(label))?;
    let after = &line[line.find("127.0.0.1:")? + "127.0.0.1:".len()..];
    let port: String = after.chars().take_while(char::is_ascii_digit).collect();
    (!port.is_empty()).then_some(port)
}

/// `text` with every whole word `name` replaced by `value`.
fn replace_word(text: &str, name: &str, value: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + name.len()..].chars().next();
        out.push_str(&rest[..at]);
        match before.is_some_and(is_word) || after.is_some_and(is_word) {
            true => out.push_str(name),
            false => out.push_str(value),
        }
        rest = &rest[at + name.len()..];
    }
    out.push_str(rest);
    out
}
