//! Credential rotation without a restart (README "Token exchange"): the credentials
//! file is watched, and checked at once on SIGHUP; a changed file is
//! validated and, when good, used from then on with a fresh token, while
//! the held token keeps serving. A bad file is logged and counted, and the
//! previous credentials stay.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::credentials::{self, Credentials, Fingerprint};
use crate::config::{CredentialSettings, Source};
use crate::metrics::Metrics;
use crate::token::{Exchanger, TokenHandle};

/// Polling rather than inotify: a Kubernetes Secret volume changes by an
/// atomic swap of the `..data` symlink in the mount's root, which a watch
/// on the file never sees, and a rename over the file replaces the inode a
/// watch would be on. Reading a file of a few kilobytes every two seconds
/// costs nothing, and keeps well inside the contract's 10 s.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// A changed file is read again after this long and used only once two
/// reads agree, so a writer caught half-way is not reported as broken.
const SETTLE: Duration = Duration::from_millis(200);
/// A file still changing after this many rounds is judged as it stands.
const MAX_SETTLE_ROUNDS: u32 = 10;

/// What the watcher needs to start: the settings to reload with and the
/// fingerprint of the file content the running credentials came from.
#[derive(Debug, Clone)]
pub struct Watch {
    pub settings: CredentialSettings,
    pub loaded: Option<Fingerprint>,
}

/// What the watcher has done so far, for whoever needs to wait on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloads {
    pub succeeded: u64,
    pub refused: u64,
    /// Changes back to the content already in use, which reload nothing.
    pub restored: u64,
    /// Why the last refused file was refused.
    pub last_problem: Option<String>,
}

/// The file as last seen: its content, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Content(Fingerprint),
    Unreadable(String),
}

impl Seen {
    fn of(read: &Result<Vec<u8>, String>) -> Seen {
        match read {
            Ok(bytes) => Seen::Content(Fingerprint::of(bytes)),
            Err(why) => Seen::Unreadable(why.clone()),
        }
    }
}

/// Starts the watcher. `check_now` (SIGHUP) makes it look at once.
pub fn spawn(
    watch: Watch,
    exchanger: Arc<Exchanger>,
    tokens: TokenHandle,
    metrics: Metrics,
    check_now: Arc<Notify>,
) -> Option<(JoinHandle<()>, watch::Receiver<Reloads>)> {
    let file = watch.settings.file.clone()?;
    let (reloads, reloads_rx) = watch::channel(Reloads::default());
    let mut watcher = Watcher {
        path: file.value,
        source: file.source,
        settings: watch.settings,
        exchanger,
        tokens,
        metrics,
        seen: None,
        loaded: None,
        reloads,
    };
    let task = async move {
        let seen = match watch.loaded {
            Some(fingerprint) => Seen::Content(fingerprint),
            // Credentials given without a fingerprint (tests): whatever is
            // there now is taken as what was loaded.
            None => Seen::of(&watcher.read().await),
        };
        if let Seen::Content(fingerprint) = &seen {
            watcher.loaded = Some(*fingerprint);
        }
        watcher.seen = Some(seen);
        loop {
            let asked = tokio::select! {
                () = tokio::time::sleep(POLL_INTERVAL) => false,
                () = check_now.notified() => true,
            };
            watcher.check(asked).await;
        }
    };
    let task = tokio::spawn(task.instrument(tracing::info_span!("credentials_watch")));
    Some((task, reloads_rx))
}

struct Watcher {
    path: PathBuf,
    source: Source,
    settings: CredentialSettings,
    exchanger: Arc<Exchanger>,
    tokens: TokenHandle,
    metrics: Metrics,
    seen: Option<Seen>,
    /// The content the credentials in use came from.
    loaded: Option<Fingerprint>,
    reloads: watch::Sender<Reloads>,
}

impl Watcher {
    async fn read(&self) -> Result<Vec<u8>, String> {
        let (path, source) = (self.path.clone(), self.source.clone());
        tokio::task::spawn_blocking(move || credentials::read_file(&path, &source))
            .await
            .unwrap_or_else(|err| Err(format!("reading the credentials file failed: {err}")))
    }

    /// Credentials from the file's content, checked; off the async
    /// threads, since a key in a PKCS#11 token is opened anew (the URI and
    /// the PIN file read again, the module called).
    async fn load(&self, bytes: Vec<u8>) -> Result<Credentials, String> {
        let settings = self.settings.clone();
        tokio::task::spawn_blocking(move || {
            credentials::load_from(&settings, Some(&bytes)).map_err(|err| err.lines().join("; "))
        })
        .await
        .unwrap_or_else(|err| Err(format!("loading the credentials failed: {err}")))
    }

    async fn check(&mut self, asked: bool) {
        let mut read = self.read().await;
        let mut seen = Seen::of(&read);
        if Some(&seen) == self.seen.as_ref() {
            if asked {
                tracing::info!("SIGHUP: the credentials file is unchanged");
            }
            return;
        }
        for _ in 0..MAX_SETTLE_ROUNDS {
            tokio::time::sleep(SETTLE).await;
            let again = self.read().await;
            let now = Seen::of(&again);
            read = again;
            if now == seen {
                break;
            }
            seen = now;
        }
        if let Seen::Content(fingerprint) = &seen
            && Some(*fingerprint) == self.loaded
        {
            // Back to the content in use (a bad file fixed by restoring the
            // old one, or an edit undone while settling): nothing to do.
            tracing::info!("the credentials file holds the credentials in use again");
            self.seen = Some(seen);
            self.reloads.send_modify(|r| r.restored += 1);
            return;
        }
        self.seen = Some(seen.clone());
        let loaded = match read {
            Ok(bytes) => self.load(bytes).await,
            Err(why) => Err(why),
        };
        match loaded {
            Ok(credentials) => {
                let previous = self.exchanger.credentials();
                tracing::info!(
                    client_id = %credentials.client_id,
                    organization = %credentials.organization_id,
                    previous_client_id = %previous.client_id,
                    key_bits = credentials.key.bits(),
                    "credentials file changed: new credentials in use"
                );
                self.exchanger.replace_credentials(credentials);
                if let Seen::Content(fingerprint) = seen {
                    self.loaded = Some(fingerprint);
                }
                self.tokens.renew_for_new_credentials();
                self.metrics
                    .credentials_reloads
                    .with_label_values(&["success"])
                    .inc();
                self.reloads.send_modify(|r| r.succeeded += 1);
            }
            Err(why) => {
                tracing::warn!(
                    problem = %why,
                    "credentials file changed but cannot be used; the previous credentials stay in use"
                );
                self.metrics
                    .credentials_reloads
                    .with_label_values(&["invalid"])
                    .inc();
                self.reloads.send_modify(|r| {
                    r.refused += 1;
                    r.last_problem = Some(why);
                });
            }
        }
    }
}
