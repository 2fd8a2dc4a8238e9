//! The directory as one poll sees it. A file whose metadata (device,
//! inode, size, modification and change times) is as it was when last read
//! is not read again: a directory of 10,000 files costs 10,000 `stat`s a
//! poll, not 25 MB of reads. A Kubernetes Secret's swap gives every file a
//! new inode, and an edit a new size or time, so neither is missed.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::config::Sourced;
use crate::config::accounts;
use crate::config::credentials::{Fingerprint, read_file};

/// One file as a poll saw it. Not `Debug`: its content holds the
/// account's private key.
#[derive(Clone)]
pub(super) struct Seen {
    pub(super) fingerprint: Fingerprint,
    /// Its content, when it was read this time; `None` when its metadata
    /// said it had not changed.
    pub(super) bytes: Option<Vec<u8>>,
}

/// The directory's files, as one poll saw them; a file that cannot be
/// read says why.
pub(super) type Snapshot = BTreeMap<PathBuf, Result<Seen, String>>;

/// What a file's metadata was when it was last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stat {
    fn of(path: &Path) -> Option<Stat> {
        // Followed through links: a Secret's files are links into `..data`.
        let meta = std::fs::metadata(path).ok()?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Some(Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// Reads the directory, remembering each file's metadata and content's
/// fingerprint between polls.
pub(super) struct Reader {
    dir: Sourced<PathBuf>,
    read: Mutex<HashMap<PathBuf, (Stat, Fingerprint)>>,
}

impl Reader {
    pub(super) fn new(dir: Sourced<PathBuf>) -> Reader {
        Reader {
            dir,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// Every file of the directory, read only when changed. Blocks.
    pub(super) fn snapshot(&self) -> Result<Snapshot, String> {
        let files = accounts::json_files(&self.dir.value).map_err(|why| why.join("; "))?;
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Forgotten once gone, so the memory is the directory's.
        read.retain(|path, _| files.binary_search(path).is_ok());
        Ok(files
            .into_iter()
            .map(|path| {
                let stat = Stat::of(&path);
                let unchanged = read
                    .get(&path)
                    .filter(|(was, _)| Some(*was) == stat)
                    .map(|(_, fingerprint)| *fingerprint);
                let seen = match unchanged {
                    Some(fingerprint) => Ok(Seen {
                        fingerprint,
                        bytes: None,
                    }),
                    None => self.bytes(&path).map(|bytes| {
                        let fingerprint = Fingerprint::of(&bytes);
                        if let Some(stat) = stat {
                            read.insert(path.clone(), (stat, fingerprint));
                        }
                        Seen {
                            fingerprint,
                            bytes: Some(bytes),
                        }
                    }),
                };
                (path, seen)
            })
            .collect())
    }

    /// A file's content now. Blocks.
    pub(super) fn bytes(&self, path: &Path) -> Result<Vec<u8>, String> {
        read_file(path, &self.dir.source)
    }
}

/// Whether two snapshots agree: on the files and their fingerprints.
pub(super) fn same(a: &Snapshot, b: &Snapshot) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((pa, ra), (pb, rb))| {
            pa == pb
                && match (ra, rb) {
                    (Ok(a), Ok(b)) => a.fingerprint == b.fingerprint,
                    (Err(a), Err(b)) => a == b,
                    _ => false,
                }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    #[test]
    fn a_file_is_read_again_only_when_its_metadata_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "one").unwrap();
        let reader = Reader::new(Sourced {
            value: dir.path().to_path_buf(),
            source: Source::Env("SA_CREDENTIALS_DIR"),
        });
        let first = reader.snapshot().unwrap();
        let seen = first[&path].as_ref().unwrap();
        assert!(seen.bytes.is_some(), "read the first time");
        let again = reader.snapshot().unwrap();
        let unchanged = again[&path].as_ref().unwrap();
        assert!(unchanged.bytes.is_none(), "not read again");
        assert_eq!(unchanged.fingerprint, seen.fingerprint);
        assert!(same(&first, &again));
        // Replaced as a Secret's swap does: a new file renamed over it.
        let new = dir.path().join(".a.json.new");
        std::fs::write(&new, "two").unwrap();
        std::fs::rename(&new, &path).unwrap();
        let changed = reader.snapshot().unwrap();
        let changed = changed[&path].as_ref().unwrap();
        assert_eq!(changed.bytes.as_deref(), Some(&b"two"[..]));
        assert_ne!(changed.fingerprint, seen.fingerprint);
    }
}
