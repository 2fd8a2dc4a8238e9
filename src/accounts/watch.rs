//! `SA_CREDENTIALS_DIR`'s watcher: a file added, changed or removed is
//! taken up without a restart, as the credentials file is (docs/tokens.md
//! "Credential rotation"): polled, for the reasons `crate::reload` gives
//! (a Kubernetes Secret changes by an atomic swap of its `..data` link,
//! which a watch on the files never sees), read again until two reads
//! agree, then used. A bad file is refused on its own, with one log line:
//! the account it was (if any) keeps its credentials, and every other
//! account keeps serving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::Sourced;
use crate::config::accounts::{self, AccountFile};
use crate::config::credentials::Fingerprint;
// Polled and settled as the credentials file is.
use crate::reload::{MAX_SETTLE_ROUNDS, POLL_INTERVAL, SETTLE};
use crate::throttle::{self, Throttle};

use super::{Account, AccountRules, Accounts};

mod snapshot;

use snapshot::{Reader, Seen, Snapshot, same};

/// What the watcher has done so far, for whoever waits on it (tests, and
/// the operator through the log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectoryReloads {
    pub added: u64,
    pub changed: u64,
    pub removed: u64,
    pub refused: u64,
    /// Why the last refused file was refused.
    pub last_problem: Option<String>,
}

/// One file as the watcher knows it: what it held when last used, and
/// the account it is.
struct Known {
    loaded: Fingerprint,
    /// What it held when last looked at, used or refused.
    seen: Fingerprint,
    account: Arc<Account>,
}

struct Watcher {
    dir: Sourced<PathBuf>,
    rules: AccountRules,
    accounts: Accounts,
    /// `SA_CREDENTIALS_FILE`'s organization, which no file may serve.
    default_organization: Option<String>,
    known: BTreeMap<PathBuf, Known>,
    /// Files refused as they stand: looked at again only once they change,
    /// or, refused for another file's organization, once the directory
    /// does.
    refused: BTreeMap<PathBuf, Refused>,
    reloads: watch::Sender<DirectoryReloads>,
    reader: Arc<Reader>,
    /// The directory unreadable, said once a minute.
    unreadable: Throttle,
}

/// A file refused as it stood.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refused {
    /// `None`: it could not be read.
    fingerprint: Option<Fingerprint>,
    /// Refused because another file, or `SA_CREDENTIALS_FILE`, serves this
    /// organization: judged again once that other file no longer does.
    clash: Option<String>,
}

/// Starts the watcher over the accounts the start-up loaded (each with
/// the file content it came from). `check_now` (SIGHUP) makes it look at
/// once. When it stops (the drain), the directory's accounts go with it.
pub fn spawn(
    dir: Sourced<PathBuf>,
    started: Vec<(Arc<Account>, Option<Fingerprint>)>,
    rules: AccountRules,
    accounts: Accounts,
    check_now: Arc<Notify>,
) -> (JoinHandle<()>, watch::Receiver<DirectoryReloads>) {
    let (reloads, reloads_rx) = watch::channel(DirectoryReloads::default());
    let known: BTreeMap<PathBuf, Known> = started
        .into_iter()
        .filter_map(|(account, loaded)| {
            let path = account.file()?.to_path_buf();
            let loaded = loaded?;
            Some((
                path,
                Known {
                    seen: loaded,
                    loaded,
                    account,
                },
            ))
        })
        .collect();
    let default_organization = accounts
        .load()
        .default_account()
        .map(|account| account.organization().to_string());
    accounts.publish(known_accounts(&known));
    let mut watcher = Watcher {
        reader: Arc::new(Reader::new(dir.clone())),
        unreadable: Throttle::new(throttle::EVERY_MINUTE),
        dir,
        rules,
        accounts,
        default_organization,
        known,
        refused: BTreeMap::new(),
        reloads,
    };
    let task = async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(POLL_INTERVAL) => {}
                () = check_now.notified() => {}
            }
            watcher.check().await;
        }
    };
    let span = tracing::info_span!("credentials_dir_watch");
    (tokio::spawn(task.instrument(span)), reloads_rx)
}

fn known_accounts(known: &BTreeMap<PathBuf, Known>) -> impl Iterator<Item = Arc<Account>> + '_ {
    known.values().map(|known| known.account.clone())
}

impl Drop for Watcher {
    /// The drain stopped the watcher: the directory's accounts leave the
    /// table, and their refreshers stop once their last requests end.
    fn drop(&mut self) {
        self.accounts.publish(std::iter::empty());
    }
}

impl Watcher {
    async fn read(&self) -> Result<Snapshot, String> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || reader.snapshot())
            .await
            .unwrap_or_else(|err| Err(format!("reading the directory failed: {err}")))
    }

    /// Whether `snapshot` differs from what is in use or was refused.
    fn differs(&self, snapshot: &Snapshot) -> bool {
        let refused = |path: &Path| self.refused.get(path).map(|r| r.fingerprint);
        let known = snapshot.iter().filter(|(path, read)| match read {
            Ok(seen) => {
                self.known.get(*path).map(|k| &k.seen) == Some(&seen.fingerprint)
                    || refused(path) == Some(Some(seen.fingerprint))
            }
            // A file in use that cannot be read now keeps its account.
            Err(_) => self.known.contains_key(*path) || refused(path) == Some(None),
        });
        known.count() != snapshot.len()
            || self.known.keys().any(|path| !snapshot.contains_key(path))
    }

    async fn check(&mut self) {
        let mut now = match self.read().await {
            Ok(snapshot) => snapshot,
            Err(why) => {
                // A directory gone for a moment (a volume remounted) takes
                // no account away.
                if let Some(held_back) = self.unreadable.due(tokio::time::Instant::now()) {
                    tracing::warn!(problem = %why, held_back, "SA_CREDENTIALS_DIR cannot be read (or holds too many files); every account keeps its credentials, and changes are not taken up until it can be; logged at most once a minute");
                }
                return;
            }
        };
        if !self.differs(&now) {
            return;
        }
        for _ in 0..MAX_SETTLE_ROUNDS {
            tokio::time::sleep(SETTLE).await;
            let Ok(again) = self.read().await else { return };
            let settled = same(&again, &now);
            now = again;
            if settled {
                break;
            }
        }
        self.refused.retain(|path, _| now.contains_key(path));
        let gone: Vec<PathBuf> = self
            .known
            .keys()
            .filter(|path| !now.contains_key(*path))
            .cloned()
            .collect();
        for path in gone {
            self.removed(&path);
        }
        for (path, read) in &now {
            self.look_at(path.clone(), read.clone()).await;
        }
        // A file refused for another's organization is judged again once
        // that organization is free (the other file removed, or changed).
        let freed: Vec<PathBuf> = self
            .refused
            .iter()
            .filter(|(path, refused)| {
                refused
                    .clash
                    .as_deref()
                    .is_some_and(|organization| self.clash(path, organization).is_none())
            })
            .map(|(path, _)| path.clone())
            .collect();
        for path in freed {
            self.refused.remove(&path);
            if let Some(read) = now.get(&path) {
                self.look_at(path, read.clone()).await;
            }
        }
        self.accounts.publish(known_accounts(&self.known));
    }

    fn removed(&mut self, path: &Path) {
        if let Some(known) = self.known.remove(path) {
            tracing::info!(
                file = %path.display(),
                organization = %known.account.organization(),
                "credentials file removed: its organization's paths now get no_account_for_organization"
            );
            self.reloads.send_modify(|r| r.removed += 1);
        }
    }

    async fn look_at(&mut self, path: PathBuf, read: Result<Seen, String>) {
        let seen = match read {
            Ok(seen) => seen,
            Err(why) => {
                let refused_unreadable =
                    self.refused.get(&path).map(|r| r.fingerprint) == Some(None);
                if !self.known.contains_key(&path) && !refused_unreadable {
                    self.refuse(&path, None, why);
                }
                return;
            }
        };
        let fingerprint = seen.fingerprint;
        if let Some(known) = self.known.get(&path)
            && known.seen == fingerprint
        {
            return;
        }
        if self.refused.get(&path).map(|r| r.fingerprint) == Some(Some(fingerprint)) {
            return;
        }
        if let Some(known) = self.known.get_mut(&path)
            && known.loaded == fingerprint
        {
            // Back to the content in use: a bad edit undone.
            known.seen = fingerprint;
            return;
        }
        match self.load(&path, seen.bytes).await {
            Ok(file) => self.take_up(path, file, fingerprint),
            Err(why) => self.refuse(&path, Some(fingerprint), why),
        }
    }

    /// The file as an account: checked and keyed off the async threads,
    /// since a key in a PKCS#11 token is opened anew.
    async fn load(&self, path: &Path, bytes: Option<Vec<u8>>) -> Result<AccountFile, String> {
        let (path, source) = (path.to_path_buf(), self.dir.source.clone());
        let timeout = self.rules.exchange.timeout;
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            // Loaded from the bytes the watcher judged when this poll read
            // them; read now when its metadata spared the read.
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => reader.bytes(&path)?,
            };
            accounts::load_bytes(&path, &source, timeout, &bytes).map_err(|why| why.join("; "))
        })
        .await
        .unwrap_or_else(|err| Err(format!("loading the credentials failed: {err}")))
    }

    fn take_up(&mut self, path: PathBuf, file: AccountFile, fingerprint: Fingerprint) {
        let organization = file.credentials.organization_id.clone();
        if let Some(why) = self.clash(&path, &organization) {
            self.refuse(&path, Some(fingerprint), why);
            if let Some(refused) = self.refused.get_mut(&path) {
                refused.clash = Some(organization);
            }
            return;
        }
        self.refused.remove(&path);
        let same_account = self
            .known
            .get(&path)
            .is_some_and(|known| known.account.organization() == organization);
        if same_account && let Some(known) = self.known.get_mut(&path) {
            // A rotated key, or a new client of the same organization: the
            // held token keeps serving until the new credentials' arrives.
            tracing::info!(
                file = %path.display(),
                organization = %organization,
                client_id = %file.credentials.client_id,
                "credentials file changed: new credentials in use"
            );
            if let Some(exchanger) = known.account.exchanger() {
                exchanger.replace_credentials(file.credentials);
            }
            known.account.tokens().renew_for_new_credentials();
            known.loaded = fingerprint;
            known.seen = fingerprint;
            self.counted("success");
            self.reloads.send_modify(|r| r.changed += 1);
            return;
        }
        let was = self.known.remove(&path);
        tracing::info!(
            file = %path.display(),
            organization = %organization,
            client_id = %file.credentials.client_id,
            previous_organization = was.as_ref().map(|k| tracing::field::display(k.account.organization())),
            "credentials file taken up: its organization's paths now carry its account's token"
        );
        let account = Arc::new(self.rules.directory_account(file));
        self.known.insert(
            path,
            Known {
                loaded: fingerprint,
                seen: fingerprint,
                account,
            },
        );
        self.counted("success");
        self.reloads.send_modify(|r| match was {
            Some(_) => r.changed += 1,
            None => r.added += 1,
        });
    }

    /// Another file, or `SA_CREDENTIALS_FILE`, already serves
    /// `organization`.
    fn clash(&self, path: &Path, organization: &str) -> Option<String> {
        if self.default_organization.as_deref() == Some(organization) {
            return Some(format!(
                "organization `{organization}` is SA_CREDENTIALS_FILE's account's already"
            ));
        }
        let other = self.known.iter().find(|(other, known)| {
            other.as_path() != path && known.account.organization() == organization
        })?;
        Some(format!(
            "organization `{organization}` is served by {} already; keep one file for it",
            other.0.display()
        ))
    }

    /// Refuses the file as it stands, with one log line; the account it
    /// was keeps its credentials.
    fn refuse(&mut self, path: &Path, fingerprint: Option<Fingerprint>, why: String) {
        let kept = self.known.get_mut(path).map(|known| {
            if let Some(fingerprint) = &fingerprint {
                known.seen = *fingerprint;
            }
            known.account.organization().to_string()
        });
        let refused = Refused {
            fingerprint,
            clash: None,
        };
        self.refused.insert(path.to_path_buf(), refused);
        tracing::warn!(
            file = %path.display(),
            problem = %why,
            kept_organization = kept.as_deref(),
            "credentials file refused; every other account keeps serving, and the file's own account (if it had one) keeps its credentials"
        );
        self.counted("invalid");
        self.reloads.send_modify(|r| {
            r.refused += 1;
            r.last_problem = Some(why);
        });
    }

    fn counted(&self, outcome: &str) {
        self.rules
            .metrics
            .credentials_reloads
            .with_label_values(&[outcome])
            .inc();
    }
}
