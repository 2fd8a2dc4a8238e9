//! What the settings point at, read and checked once by the loader: the
//! service account's credentials and the TLS roots.
//! `access::ServiceAccess::new` uses them as they are; only
//! credential rotation reads the credentials file again, later (docs/tokens.md
//! "Credential rotation").

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::credentials::{self, CredentialSettings, Credentials, Fingerprint};
use super::settings::{CA_FILE, CREDENTIALS_FILE};
use super::sources::{Layers, Sourced, io_reason};

/// The service account's credentials, validated, with what the file held.
#[derive(Debug, Clone)]
pub struct Account {
    credentials: Arc<Credentials>,
    /// The credentials file's content as loaded, for the watcher to start
    /// from; `None` when the credentials come from settings alone.
    pub loaded: Option<Fingerprint>,
}

impl Account {
    pub fn organization_id(&self) -> &str {
        &self.credentials.organization_id
    }

    /// The credentials, for an exchanger to own; the key is shared, not
    /// copied.
    pub fn credentials(&self) -> Credentials {
        let c = &*self.credentials;
        Credentials {
            client_id: c.client_id.clone(),
            organization_id: c.organization_id.clone(),
            iam_audience: c.iam_audience.clone(),
            token_uri: c.token_uri.clone(),
            key: Arc::clone(&c.key),
        }
    }
}

/// Reads the credentials file and merges the `SA_*` settings, recording
/// every problem.
pub(super) fn account(settings: &CredentialSettings, layers: &mut Layers) -> Option<Account> {
    match credentials::load_with_fingerprint(settings) {
        Ok((credentials, loaded)) => {
            if let Some(file) = &settings.file {
                layers.warnings.extend(readable_by_others(file));
            }
            Some(Account {
                credentials: Arc::new(credentials),
                loaded,
            })
        }
        Err(err) => {
            layers.unanswered |= err.is_unanswered();
            // A variable reported as unreadable is not reported again as
            // unset.
            let reported = |line: &String| {
                layers.unreadable.iter().any(|env| {
                    line.strip_prefix(env)
                        .is_some_and(|rest| rest.starts_with(": not set"))
                })
            };
            let lines: Vec<String> = err
                .into_lines()
                .into_iter()
                .filter(|line| !reported(line))
                .collect();
            layers.errors.extend(lines);
            None
        }
    }
}

/// A warning when the credentials file, which holds the account's
/// private key, is readable by its group or by everyone: any process of
/// those users can act as the account. Its name and mode only.
fn readable_by_others(file: &Sourced<PathBuf>) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file.value).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "{} ({}): {} is readable by {} (mode {mode:04o}), and it holds the account's private key; make it readable by lanyard's user alone (chmod 600, or a Secret's defaultMode 0400)",
            CREDENTIALS_FILE.env,
            file.source,
            file.value.display(),
            match mode & 0o004 {
                0 => "its group",
                _ => "every user",
            },
        )
    })
}

/// Builds the TLS client configuration, the system roots plus the
/// `LANYARD_CA_FILE` bundle, reading and parsing the bundle this once.
pub(super) fn tls(
    ca_file: Option<&Sourced<PathBuf>>,
    layers: &mut Layers,
) -> Option<rustls::ClientConfig> {
    if let Some(ca) = ca_file {
        // Only a regular file: opening a FIFO would block start-up.
        let why = match std::fs::metadata(&ca.value) {
            Ok(meta) if meta.is_file() => None,
            Ok(_) => Some(format!("{} is not a file", ca.value.display())),
            Err(err) => Some(format!("{}: {}", ca.value.display(), io_reason(&err))),
        };
        if let Some(why) = why {
            layers.problem(CA_FILE.env, &ca.source, &why);
            return None;
        }
    }
    let (built, warnings) =
        kept_warnings(|| crate::outbound::tls_config(ca_file.map(|ca| ca.value.as_path())));
    layers.warnings.extend(warnings);
    match built {
        Ok(tls) => Some(tls),
        Err(why) => {
            // `tls_config` names the bundle `LANYARD_CA_FILE (<path>): `;
            // the line names where the setting came from instead.
            match ca_file {
                Some(ca) => {
                    let named = format!("{} ({}): ", CA_FILE.env, ca.value.display());
                    let why = why.strip_prefix(&named).unwrap_or(&why);
                    let why = format!("{}: {why}", ca.value.display());
                    layers.problem(CA_FILE.env, &ca.source, &why);
                }
                None => layers.errors.push(why),
            }
            None
        }
    }
}

/// Runs `f`, keeping what it logs at WARN and above as lines: settings are
/// read before logging is set up (its format is a setting), and `main`
/// logs `Config::warnings` once it is.
fn kept_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let kept = Kept::default();
    let writer = kept.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .without_time()
        .with_level(false)
        .with_target(false)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let lines = kept
        .text()
        .lines()
        .map(|line| line.trim().to_string())
        .filter(|line| !line.is_empty())
        .collect();
    (out, lines)
}

/// Log output kept in memory: a `tracing_subscriber` writer whose clones
/// share what was written.
#[derive(Clone, Default)]
pub(crate) struct Kept(Arc<Mutex<Vec<u8>>>);

impl Kept {
    /// What was written so far, as text.
    pub(crate) fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Kept {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut kept) = self.0.lock() {
            kept.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
