//! A page's `docker run` lines of lanyard's image, run as the image runs
//! the binary: its `ENTRYPOINT`, `CMD` and `ENV` read from the Dockerfile,
//! the line's `-e` variables and nothing of the host's environment, its
//! `-v` files found where they are mounted from, and its published ports
//! moved to free loopback ones (docs/tests.md, "Documentation that runs").

use std::path::Path;

use tokio::process::Command;

use super::blocks::Block;
use super::session::{self, Failure, LISTENERS, Session, target_dir};

/// The image's name in the pages: other images are the reader's own.
const IMAGE: &str = "lanyard:";

/// What the Dockerfile's final stage runs.
struct Image {
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    env: Vec<(String, String)>,
}

/// One `docker run` of lanyard's image.
#[derive(Debug, Default)]
struct Container {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// `(host, container)` ports published with `-p`.
    ports: Vec<(u16, u16)>,
    /// `(host, container)` paths mounted with `-v`.
    mounts: Vec<(String, String)>,
}

/// Runs each container of `block` until `probe` answers, one after the
/// other, and stops it.
pub async fn run(session: &mut Session, block: &Block, probe: &str) -> Result<(), Failure> {
    let failure = |problem: String, output: String| Failure {
        place: block.place(),
        problem,
        output,
    };
    let image = image().map_err(|problem| failure(problem, String::new()))?;
    let pwd = session.dir.path().display().to_string();
    let containers = containers(&block.text, &pwd).map_err(|p| failure(p, String::new()))?;
    if containers.is_empty() {
        let problem = format!("a `docker` block with no `docker run` of {IMAGE}…");
        return Err(failure(problem, String::new()));
    }
    for (index, container) in containers.iter().enumerate() {
        let command = command(session, &image, container);
        let log = session
            .dir
            .path()
            .join(format!(".container-{}-{index}.log", block.line));
        let probe = published(session, container, probe);
        let server = session::start(command, log);
        let server = session::await_probe(server, &probe)
            .await
            .map_err(|(problem, output)| {
                let problem = format!("`lanyard {}` {problem}", container.args.join(" "));
                failure(problem, output)
            })?;
        server.stop().await;
    }
    Ok(())
}

/// The binary with the image's entrypoint, command and environment.
fn command(session: &mut Session, image: &Image, container: &Container) -> Command {
    let program = Path::new(&image.entrypoint[0]).file_name().unwrap();
    let mut command = Command::new(target_dir().join(program));
    command.args(&image.entrypoint[1..]);
    match container.args.is_empty() {
        true => command.args(&image.cmd),
        false => command.args(&container.args),
    };
    command.current_dir(session.dir.path()).env_clear();
    for (name, value) in image.env.iter().chain(&container.env) {
        command.env(name, mounted(container, value));
    }
    for (name, _, default) in LISTENERS {
        let given = container.env.iter().find(|(n, _)| n == name);
        let inside = given
            .and_then(|(_, value)| value.rsplit_once(':')?.1.parse().ok())
            .unwrap_or(default);
        let host = container.ports.iter().find(|(_, c)| *c == inside);
        let port = host.map_or(0, |&(host, _)| session.port(host));
        command.env(name, format!("127.0.0.1:{port}"));
    }
    command
}

/// `probe`, on the free port standing for its published port.
fn published(session: &mut Session, container: &Container, probe: &str) -> String {
    let mut probe = probe.to_string();
    for &(host, _) in &container.ports {
        let free = session.port(host);
        probe = probe.replace(&format!("127.0.0.1:{host}/"), &format!("127.0.0.1:{free}/"));
    }
    probe
}

/// `value` with a path inside a mount replaced by the host's path.
fn mounted(container: &Container, value: &str) -> String {
    for (host, inside) in &container.mounts {
        if let Some(rest) = value.strip_prefix(inside.as_str()) {
            return format!("{host}{rest}");
        }
    }
    value.to_string()
}

/// The final stage's `ENTRYPOINT`, `CMD` and `ENV` of the Dockerfile.
fn image() -> Result<Image, String> {
    let dockerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"))
            .map_err(|e| format!("Dockerfile: {e}"))?;
    let joined = dockerfile.replace("\\\n", " ");
    let last_stage = joined.rsplit("\nFROM ").next().unwrap_or_default();
    let exec_form = |instruction: &str| -> Option<Vec<String>> {
        let line = last_stage
            .lines()
            .find_map(|line| line.strip_prefix(instruction))?;
        serde_json::from_str(line.trim()).ok()
    };
    let mut env = Vec::new();
    for pairs in last_stage.lines().filter_map(|l| l.strip_prefix("ENV ")) {
        for pair in words(pairs, "").map_err(|e| format!("Dockerfile: ENV {e}"))? {
            let (name, value) = pair
                .split_once('=')
                .ok_or(format!("Dockerfile: ENV {pair}: not NAME=value"))?;
            env.push((name.to_string(), value.to_string()));
        }
    }
    Ok(Image {
        entrypoint: exec_form("ENTRYPOINT ").ok_or("Dockerfile: no exec-form ENTRYPOINT")?,
        cmd: exec_form("CMD ").unwrap_or_default(),
        env,
    })
}

/// The `docker run` commands of lanyard's image in `text`, `$PWD` being
/// `pwd`; other commands need a Docker engine and are not run.
fn containers(text: &str, pwd: &str) -> Result<Vec<Container>, String> {
    let joined = text.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let Some(rest) = line.trim_start().strip_prefix("docker run ") else {
            continue;
        };
        if let Some(container) = container(&words(rest, pwd)?)? {
            found.push(container);
        }
    }
    Ok(found)
}

/// A `docker run`'s options and arguments; `None` for another image.
fn container(words: &[String]) -> Result<Option<Container>, String> {
    let mut container = Container::default();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or(format!("`{word}` without a value"));
        match word.as_str() {
            "-d" | "--rm" => {}
            "--name" | "--network" => {
                value()?;
            }
            "-e" | "--env" => {
                let pair = value()?;
                let (name, value) = pair.split_once('=').ok_or(format!("-e {pair}: no value"))?;
                container.env.push((name.into(), value.into()));
            }
            "-v" | "--volume" => {
                let mut parts = value()?.split(':');
                let (host, inside) = (parts.next().unwrap(), parts.next().ok_or("-v without ':'")?);
                container.mounts.push((host.into(), inside.into()));
            }
            "-p" | "--publish" => {
                let ports: Vec<&str> = value()?.rsplitn(3, ':').collect();
                let port = |s: &str| s.parse::<u16>().map_err(|_| format!("-p: bad port {s}"));
                container.ports.push((port(ports[1])?, port(ports[0])?));
            }
            image if image.starts_with(IMAGE) => {
                container.args = words.cloned().collect();
                return Ok(Some(container));
            }
            image if !image.starts_with('-') => return Ok(None),
            option => return Err(format!("`docker run {option}` is not known here")),
        }
    }
    Err("`docker run` without an image".into())
}

/// `line` split into words as a shell would, `$PWD` expanded, up to a
/// comment.
fn words(line: &str, pwd: &str) -> Result<Vec<String>, String> {
    let line = line.replace("${PWD}", "$PWD").replace("$PWD", pwd);
    let command = line.split(" #").next().unwrap_or_default();
    if command.contains('$') {
        return Err(format!("`{}`: only $PWD is expanded here", command.trim()));
    }
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, '#') if word.is_none() => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    Ok(words)
}
