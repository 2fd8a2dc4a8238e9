//! `SA_CREDENTIALS_DIR`'s watcher: a file added, changed or removed is
//! taken up without a restart, as the credentials file is (docs/tokens.md
//! "Credential rotation"): polled, for the reasons `crate::reload` gives
//! (a Kubernetes Secret changes by an atomic swap of its `..data` link,
//! which a watch on the files never sees), read again until two reads
//! agree, then used. An update is judged as a whole (`judge`): the new
//! set of files against itself, so that files exchanging their
//! organizations in one Secret update are taken up together. A bad file
//! is refused on its own, with one log line: the account it was (if any)
//! keeps its credentials, and every other account keeps serving.

use std::collections::{BTreeMap, BTreeSet};
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

mod judge;
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
    /// or, refused for another file's organization, at each update.
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
    /// Refused for another file's organization (or
    /// `SA_CREDENTIALS_FILE`'s): the organization it names, judged again
    /// with every update, so taken up once no other file has it.
    clash: Option<String>,
    why: String,
}

/// One file of an update, as [`Watcher::sort`] finds it.
enum Sorted {
    /// Its account in use, unchanged.
    InUse,
    /// Refused as it stands: it cannot be read, or it was refused for a
    /// problem of its own and has not changed since.
    Refused,
    /// Content to read and judge: new, changed, or refused for another
    /// file's organization, which may be free now.
    ToJudge(Seen),
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
        let Some(now) = self.settled().await else {
            return;
        };
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
        // The update as a whole: every new or changed file read first,
        // then judged against the others' new content (`judge`).
        let mut refused_as_they_stand = BTreeSet::new();
        let mut loaded = BTreeMap::new();
        for (path, read) in &now {
            let seen = match self.sort(path, read) {
                Sorted::InUse => continue,
                Sorted::Refused => {
                    refused_as_they_stand.insert(path.clone());
                    continue;
                }
                Sorted::ToJudge(seen) => seen,
            };
            match self.load(path, seen.bytes).await {
                Ok(file) => {
                    loaded.insert(path.clone(), (file, seen.fingerprint));
                }
                Err(why) => {
                    self.refuse(path, Some(seen.fingerprint), why, None);
                    refused_as_they_stand.insert(path.clone());
                }
            }
        }
        let refusals = self.judged(&loaded, &refused_as_they_stand);
        for (path, (file, fingerprint)) in loaded {
            match refusals.get(&path) {
                Some(why) => {
                    let clash = Some(file.credentials.organization_id);
                    self.refuse(&path, Some(fingerprint), why.clone(), clash);
                }
                None => self.take_up(path, file, fingerprint),
            }
        }
        self.accounts.publish(known_accounts(&self.known));
    }

    /// The directory once two reads agree (a writer caught half-way is
    /// not judged), if it differs from what is in use or was refused.
    async fn settled(&mut self) -> Option<Snapshot> {
        let mut now = match self.read().await {
            Ok(snapshot) => snapshot,
            Err(why) => {
                // A directory gone for a moment (a volume remounted) takes
                // no account away.
                if let Some(held_back) = self.unreadable.due(tokio::time::Instant::now()) {
                    tracing::warn!(problem = %why, held_back, "SA_CREDENTIALS_DIR cannot be read (or holds too many files); every account keeps its credentials, and changes are not taken up until it can be; logged at most once a minute");
                }
                return None;
            }
        };
        if !self.differs(&now) {
            return None;
        }
        for _ in 0..MAX_SETTLE_ROUNDS {
            tokio::time::sleep(SETTLE).await;
            let again = self.read().await.ok()?;
            let settled = same(&again, &now);
            now = again;
            if settled {
                break;
            }
        }
        Some(now)
    }

    /// What one file of the update is.
    fn sort(&mut self, path: &Path, read: &Result<Seen, String>) -> Sorted {
        let seen = match read {
            Ok(seen) => seen,
            Err(why) => {
                let refused_unreadable =
                    self.refused.get(path).map(|r| r.fingerprint) == Some(None);
                if !self.known.contains_key(path) && !refused_unreadable {
                    self.refuse(path, None, why.clone(), None);
                }
                return Sorted::Refused;
            }
        };
        let fingerprint = seen.fingerprint;
        if let Some(known) = self.known.get_mut(path)
            && known.loaded == fingerprint
        {
            // In use; or back to the content in use, a bad edit undone.
            known.seen = fingerprint;
            self.refused.remove(path);
            return Sorted::InUse;
        }
        match self.refused.get(path) {
            Some(refused)
                if refused.fingerprint == Some(fingerprint) && refused.clash.is_none() =>
            {
                Sorted::Refused
            }
            _ => Sorted::ToJudge(seen.clone()),
        }
    }

    /// The files of `loaded` to refuse, and why: the update judged as a
    /// whole, each account in use keeping its organization unless its
    /// file now names another that is taken up.
    fn judged(
        &self,
        loaded: &BTreeMap<PathBuf, (AccountFile, Fingerprint)>,
        refused: &BTreeSet<PathBuf>,
    ) -> BTreeMap<PathBuf, String> {
        judge::judge(&judge::Update {
            serving: self
                .known
                .iter()
                .map(|(path, known)| (path.as_path(), known.account.organization()))
                .collect(),
            named: loaded
                .iter()
                .map(|(path, (file, _))| {
                    (path.as_path(), file.credentials.organization_id.as_str())
                })
                .collect(),
            refused: refused.iter().map(PathBuf::as_path).collect(),
            default: self.default_organization.as_deref(),
        })
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

    /// Refuses the file as it stands, with one log line; the account it
    /// was keeps its credentials. `clash`: the organization it names,
    /// refused for another file's (judged again at the next update). The
    /// same refusal again, of the same content, is not logged again.
    fn refuse(
        &mut self,
        path: &Path,
        fingerprint: Option<Fingerprint>,
        why: String,
        clash: Option<String>,
    ) {
        let kept = self.known.get_mut(path).map(|known| {
            if let Some(fingerprint) = &fingerprint {
                known.seen = *fingerprint;
            }
            known.account.organization().to_string()
        });
        let refused = Refused {
            fingerprint,
            clash,
            why,
        };
        if self.refused.get(path) == Some(&refused) {
            return;
        }
        tracing::warn!(
            file = %path.display(),
            problem = %refused.why,
            kept_organization = kept.as_deref(),
            "credentials file refused; every other account keeps serving, and the file's own account (if it had one) keeps its credentials"
        );
        self.counted("invalid");
        let why = refused.why.clone();
        self.refused.insert(path.to_path_buf(), refused);
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
