//! Node.js for the tests that drive it (tests/interop, tests/browser): node
//! 20 or later, and a folder's npm packages as its package-lock.json pins
//! them, installed with `npm ci` the first time a test needs them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

/// The oldest node the folders' packages run on.
const MIN_NODE_MAJOR: u32 = 20;

/// A folder under `tests/` with a package.json and its package-lock.json.
pub fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// What to do when node or npm is missing or too old.
pub fn install_hint(dir: &Path) -> String {
    format!(
        "this test needs Node.js {MIN_NODE_MAJOR}+ and npm on PATH: install Node.js \
         {MIN_NODE_MAJOR} or later (with npm), or run scripts/test, which does; then run \
         `npm ci` in {} or let this test do it",
        relative(dir)
    )
}

/// Makes sure node works and `dir`'s packages are installed, judged by
/// every package that package.json pins being at its version (a checkout
/// that gained a package since its last `npm ci` gets it), running `npm
/// ci` in `dir` at most once per test binary. Fails the test, saying what
/// to do, when it cannot.
pub fn ensure_packages(dir: &Path) {
    static READY: Mutex<BTreeMap<PathBuf, Result<(), String>>> = Mutex::new(BTreeMap::new());
    // Held while installing, so a second test waits for the first's
    // `npm ci` instead of racing it.
    let mut ready = READY.lock().unwrap_or_else(PoisonError::into_inner);
    let outcome = ready
        .entry(dir.to_path_buf())
        .or_insert_with(|| install(dir));
    if let Err(why) = outcome {
        panic!("{why}");
    }
}

fn install(dir: &Path) -> Result<(), String> {
    let node = tool_version("node", dir)?;
    let major = node
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    if major.is_none_or(|m| m < MIN_NODE_MAJOR) {
        return Err(format!("node is {node}; {}", install_hint(dir)));
    }
    let pinned = pinned_versions(dir)?;
    if unlike_pinned(dir, &pinned).is_none() {
        return Ok(());
    }
    tool_version("npm", dir)?;
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run npm: {err}\n{}", install_hint(dir)))?;
    if !out.status.success() {
        return Err(format!(
            "`npm ci` in {} failed ({}):\n{}\n{}",
            relative(dir),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    match unlike_pinned(dir, &pinned) {
        None => Ok(()),
        Some((package, installed, wanted)) => Err(format!(
            "`npm ci` in {} succeeded but node_modules/{package} is {installed:?}, expected {wanted}",
            relative(dir)
        )),
    }
}

/// The first of `pinned` (name, version) whose installed version in
/// `dir`'s node_modules is another or none: the name, what is installed
/// and what is pinned.
fn unlike_pinned(
    dir: &Path,
    pinned: &[(String, String)],
) -> Option<(String, Option<String>, String)> {
    pinned.iter().find_map(|(package, wanted)| {
        let path = dir.join("node_modules").join(package).join("package.json");
        let installed = package_version(&path);
        (installed.as_deref() != Some(wanted.as_str()))
            .then(|| (package.clone(), installed, wanted.clone()))
    })
}

/// Runs `program --version`, failing clearly when it is not installed.
fn tool_version(program: &str, dir: &Path) -> Result<String, String> {
    match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        Ok(out) => Err(format!(
            "`{program} --version` failed ({}): {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            install_hint(dir)
        )),
        Err(err) => Err(format!(
            "cannot run `{program}`: {err}\n{}",
            install_hint(dir)
        )),
    }
}

/// The `version` field of a package.json.
fn package_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_string)
}

/// Every package that `dir`'s package.json pins, with its version.
fn pinned_versions(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let path = dir.join("package.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|err| format!("{} is not JSON: {err}", path.display()))?;
    let pinned: Vec<(String, String)> = json["dependencies"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, version)| Some((name.clone(), version.as_str()?.to_string())))
        .collect();
    match pinned.is_empty() {
        true => Err(format!("{} pins no package", path.display())),
        false => Ok(pinned),
    }
}

/// `dir` as the repository names it, for messages.
fn relative(dir: &Path) -> String {
    dir.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(dir)
        .display()
        .to_string()
}

/// Checks that node's test run succeeded and every test in it passed, and
/// returns how many ran; its report (stdout and stderr) is printed for the
/// failure message or `--nocapture`, `context` added to a failure.
pub fn passed_report(output: &std::process::Output, context: &str) -> u32 {
    let report = format!(
        "{}{}",
        super::text(&output.stdout),
        super::text(&output.stderr)
    );
    // Captured: shown on failure, or with --nocapture.
    println!("{report}");
    assert!(
        output.status.success(),
        "node's tests failed ({}); its report is above{context}",
        output.status
    );
    let count = |what: &str| {
        report
            .lines()
            .find_map(|line| line.trim().strip_prefix(&format!("ℹ {what} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or_else(|| panic!("node reported no `{what}` count:\n{report}"))
    };
    assert!(
        count("tests") > 0 && count("pass") == count("tests"),
        "not every node test passed:\n{report}"
    );
    count("tests")
}

/// Debian's chromium, which the page tests drive (playwright-core brings
/// no browser).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The page tests' directory, its npm packages installed, once Debian's
/// chromium is known to be there.
pub fn browser() -> PathBuf {
    let dir = dir("browser");
    ensure_packages(&dir);
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), \
         or run scripts/test, which does"
    );
    dir
}
