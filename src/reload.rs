//! Credential rotation without a restart (docs/tokens.md "Credential rotation"): the credentials
//! file is watched, and checked at once on SIGHUP; a changed file is
//! validated and, when good, used from then on with a fresh token, while
//! the held token keeps serving. A bad file is logged and counted, and the
//! previous credentials stay.
//!
//! A key in a PKCS#11 token reads a PIN file, which is watched with the
//! credentials file: a corrected PIN is taken up as a changed file is.
//! Only a keyed digest of it is kept, never the PIN. And a key whose PIN
//! the token refused at run time signs nothing more (each wrong try brings
//! the token closer to locking it), so a SIGHUP reloads it even when no
//! file changed: the operator asks for one more try. One only: a second
//! SIGHUP with the files still unchanged tries nothing until one changes.
//!
//! A new PIN cannot always be checked at once: PKCS#11 logs in per
//! application and token, not per session, so while another key's session
//! on the token is still logged in (the credentials before the reload),
//! the new key's `C_Login` answers `CKR_USER_ALREADY_LOGGED_IN` and its PIN
//! is not tried. It is tried at the next login, after the module is
//! initialised again, and refused then if wrong (hsm::open).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aws_lc_rs::hmac;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::credentials::{self, Credentials, Fingerprint, PinSeen};
use crate::config::{CredentialSettings, Source};
use crate::metrics::Metrics;
use crate::token::{Exchanger, TokenHandle};

/// Polling rather than inotify: a Kubernetes Secret volume changes by an
/// atomic swap of the `..data` symlink in the mount's root, which a watch
/// on the file never sees, and a rename over the file replaces the inode a
/// watch would be on. Reading a file of a few kilobytes every two seconds
/// costs nothing, and takes a rotated key up within 2 s (docs/tokens.md
/// "Credential rotation").
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// A changed file is read again after this long and used only once two
/// reads agree, so a writer caught half-way is not reported as broken.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);
/// A file still changing after this many rounds is judged as it stands.
pub(crate) const MAX_SETTLE_ROUNDS: u32 = 10;

/// What the watcher needs to start: the settings to reload with and the
/// fingerprint of the file content the running credentials came from.
#[derive(Debug, Clone)]
pub struct Watch {
    pub settings: CredentialSettings,
    pub loaded: Option<Fingerprint>,
    /// The account's organization may not change: with
    /// `SA_CREDENTIALS_DIR` it is the default account, its organization's
    /// paths routed to it, and no file of the directory may serve that
    /// organization (docs/accounts.md).
    pub organization_fixed: bool,
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

/// The files as last seen: the credentials file's content and, for a key
/// in a token, its PIN file's; or why the credentials file could not be
/// read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Content {
        file: Fingerprint,
        pin: Option<PinSeen>,
    },
    Unreadable(String),
}

/// The credentials file as read, and what was seen reading it.
struct Read {
    bytes: Result<Vec<u8>, String>,
    seen: Seen,
}

impl Read {
    /// Reads the credentials file, then the PIN file its key names. Blocks.
    fn now(
        path: &Path,
        source: &Source,
        settings: &CredentialSettings,
        pin_key: Option<&hmac::Key>,
    ) -> Read {
        let bytes = credentials::read_file(path, source);
        let seen = match &bytes {
            Ok(content) => Seen::Content {
                file: Fingerprint::of(content),
                pin: pin_key.and_then(|key| credentials::pin_seen(settings, Some(content), key)),
            },
            Err(why) => Seen::Unreadable(why.clone()),
        };
        Read { bytes, seen }
    }
}

/// A key of this process for the PIN file's digest; `None`, and the PIN
/// file not watched, if the system gives no random bytes.
fn pin_key() -> Option<hmac::Key> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    hmac::Key::generate(hmac::HMAC_SHA256, &rng).ok()
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
        organization_fixed: watch.organization_fixed,
        retried_unchanged: false,
        path: file.value,
        source: file.source,
        settings: watch.settings,
        exchanger,
        tokens,
        metrics,
        pin_key: pin_key().map(Arc::new),
        seen: None,
        loaded: None,
        reloads,
    };
    let task = async move {
        // The PIN file as it is now is taken as the one the key read at
        // start-up, a moment ago.
        let seen = match (watch.loaded, watcher.read().await.seen) {
            (Some(file), Seen::Content { pin, .. }) => Seen::Content { file, pin },
            (Some(file), Seen::Unreadable(_)) => Seen::Content { file, pin: None },
            // Credentials given without a fingerprint (tests): whatever is
            // there now is taken as what was loaded.
            (None, now) => now,
        };
        if let Seen::Content { .. } = &seen {
            watcher.loaded = Some(seen.clone());
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
    organization_fixed: bool,
    /// A SIGHUP tried the refused PIN once more with no file changed:
    /// another is not tried until a file changes, since each wrong try
    /// brings the token closer to locking the PIN.
    retried_unchanged: bool,
    path: PathBuf,
    source: Source,
    settings: CredentialSettings,
    exchanger: Arc<Exchanger>,
    tokens: TokenHandle,
    metrics: Metrics,
    /// What the PIN file is digested under.
    pin_key: Option<Arc<hmac::Key>>,
    seen: Option<Seen>,
    /// The content the credentials in use came from.
    loaded: Option<Seen>,
    reloads: watch::Sender<Reloads>,
}

impl Watcher {
    async fn read(&self) -> Read {
        let (path, source) = (self.path.clone(), self.source.clone());
        let (settings, pin_key) = (self.settings.clone(), self.pin_key.clone());
        tokio::task::spawn_blocking(move || {
            Read::now(&path, &source, &settings, pin_key.as_deref())
        })
        .await
        .unwrap_or_else(|err| {
            let why = format!("reading the credentials file failed: {err}");
            Read {
                bytes: Err(why.clone()),
                seen: Seen::Unreadable(why),
            }
        })
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
        let read = self.read().await;
        let unchanged = Some(&read.seen) == self.seen.as_ref();
        let retry_pin = asked && self.exchanger.credentials().key.pin_refused();
        if unchanged && !retry_pin {
            if asked {
                tracing::info!("SIGHUP: the credentials file is unchanged");
            }
            return;
        }
        if unchanged && self.retried_unchanged {
            tracing::warn!(
                "SIGHUP: the token refused the key's PIN again, and neither the credentials file nor the PIN file changed since the last try; not trying it once more, since each wrong try brings the token closer to locking the PIN: correct the PIN file, which is taken up when it changes"
            );
            return;
        }
        self.retried_unchanged = unchanged;
        let read = if unchanged {
            read
        } else {
            self.settle(read).await
        };
        if retry_pin {
            tracing::info!(
                "SIGHUP: the token refused the key's PIN; the credentials are loaded anew, and the PIN file's PIN tried once more"
            );
        } else if matches!(read.seen, Seen::Content { .. })
            && self.loaded.as_ref() == Some(&read.seen)
        {
            // Back to the content in use (a bad file fixed by restoring the
            // old one, or an edit undone while settling): nothing to do.
            tracing::info!("the credentials file holds the credentials in use again");
            self.seen = Some(read.seen);
            self.reloads.send_modify(|r| r.restored += 1);
            return;
        }
        self.seen = Some(read.seen.clone());
        let loaded = match read.bytes {
            Ok(bytes) => self.load(bytes).await,
            Err(why) => Err(why),
        };
        self.apply(loaded, read.seen);
    }

    /// New credentials of another organization are refused where the
    /// organization is fixed.
    fn same_organization(&self, credentials: Credentials) -> Result<Credentials, String> {
        let previous = self.exchanger.credentials();
        if self.organization_fixed && credentials.organization_id != previous.organization_id {
            return Err(format!(
                "the file now names organization `{}`, not `{}`: with SA_CREDENTIALS_DIR set, SA_CREDENTIALS_FILE's account serves its organization's paths and those with none, so its organization is fixed until lanyard restarts",
                credentials.organization_id, previous.organization_id
            ));
        }
        Ok(credentials)
    }

    /// Reads again until two reads agree, so a writer caught half-way is
    /// not judged; the last read.
    async fn settle(&self, mut read: Read) -> Read {
        for _ in 0..MAX_SETTLE_ROUNDS {
            tokio::time::sleep(SETTLE).await;
            let again = self.read().await;
            let settled = again.seen == read.seen;
            read = again;
            if settled {
                break;
            }
        }
        read
    }

    /// Uses the credentials loaded from what was `seen`, or says why not.
    fn apply(&mut self, loaded: Result<Credentials, String>, seen: Seen) {
        let loaded = loaded.and_then(|credentials| self.same_organization(credentials));
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
                if let Seen::Content { .. } = &seen {
                    self.loaded = Some(seen);
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
