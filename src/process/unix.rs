//! The proxy's Unix socket (`LANYARD_LISTEN=unix:/path`, docs/proxy.md "Listening
//! on a Unix socket"): reachable only once it has its permissions, a stale
//! file from a crash replaced and nothing else ever, and the file removed
//! as the proxy stops.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use crate::config::{ConfigError, FileMode};
use crate::failure::Failure;

/// The socket file lanyard made, removed when this is dropped (once the
/// proxy has drained), unless something else has replaced it since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| meta.dev() == self.device && meta.ino() == self.inode);
        if ours && let Err(err) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %err, "cannot remove the proxy's socket file");
        }
    }
}

/// Listens on `path` with `mode`. The socket is bound in a private
/// directory (mode 0700) beside `path`, given its mode, then hard-linked
/// into place: nobody can connect before it has its mode, and a link,
/// unlike a rename, never replaces a file that appeared at `path`
/// meanwhile.
pub fn bind_unix(path: &Path, mode: FileMode) -> Result<(UnixListener, SocketFile), Failure> {
    let shown = format!("cannot listen on unix:{} (LANYARD_LISTEN)", path.display());
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        Failure::Runtime(format!("{shown}: {what}: {err}"))
    };
    // What the setting names is wrong, not the machine's state: exit 2
    // (docs/commands.md), as every other bad setting.
    let refused = |what: &str, err: &dyn std::fmt::Display| {
        Failure::Config(ConfigError::new(vec![format!(
            "LANYARD_LISTEN: {shown}: {what}: {err}"
        )]))
    };
    let Some(dir) = path.parent() else {
        return Err(refused("not a file's path", &"no directory"));
    };
    if !dir.is_dir() {
        return Err(refused(
            "its directory does not exist",
            &format!(
                "create {} (in Kubernetes, an emptyDir volume)",
                dir.display()
            ),
        ));
    }
    owned_safely(dir).map_err(|why| refused("its directory is not safe", &why))?;
    clear_stale(path).map_err(|stale| match stale {
        Stale::NotASocket(why) => refused("the path is taken", &why),
        Stale::Other(why) => failed("the path is taken", &why),
    })?;
    // A random name, not the pid: every container of a pod is pid 1, and
    // two lanyards sharing the socket's volume must not meet here.
    let name: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(STAGING_RANDOM)
        .collect();
    let private = dir.join(format!("{STAGING_PREFIX}{name}"));
    let staging = private.join(STAGING_NAME);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|err| failed("cannot make a private directory to bind in", &err))?;
    let placed = place(&staging, path, mode);
    let _ = fs::remove_file(&staging);
    let _ = fs::remove_dir(&private);
    placed.map_err(|(what, err)| failed(what, &err))
}

/// Where [`bind_unix`] binds first, in the socket's directory: a private
/// directory of a random name, holding one socket.
const STAGING_PREFIX: &str = ".lanyard-bind.";
/// Random characters in its name: 62^7, some 3.5e12 names.
const STAGING_RANDOM: usize = 7;
const STAGING_NAME: &str = "s";

fn place(
    staging: &Path,
    path: &Path,
    mode: FileMode,
) -> Result<(UnixListener, SocketFile), (&'static str, io::Error)> {
    let listener = UnixListener::bind(staging).map_err(|err| ("cannot bind", err))?;
    fs::set_permissions(staging, fs::Permissions::from_mode(mode.0))
        .map_err(|err| ("cannot set its permissions", err))?;
    // Ours is the inode bound here, whatever may come to stand at `path`.
    let meta = fs::symlink_metadata(staging).map_err(|err| ("cannot read it back", err))?;
    fs::hard_link(staging, path).map_err(|err| ("cannot link it into place", err))?;
    let file = SocketFile {
        path: path.to_owned(),
        device: meta.dev(),
        inode: meta.ino(),
    };
    Ok((listener, file))
}

/// Why the socket's directory is unsafe: owned by another user, who could
/// replace the socket with one of their own, where the app would send its
/// requests and read the answers. Root's and lanyard's own are safe (a
/// Kubernetes emptyDir is root's).
fn owned_safely(dir: &Path) -> Result<(), String> {
    let owner = fs::metadata(dir).map_err(|err| err.to_string())?.uid();
    let me = rustix::process::getuid().as_raw();
    if owner == 0 || owner == me {
        return Ok(());
    }
    Err(format!(
        "{} is owned by user {owner}, who could replace the socket; use a directory of lanyard's user ({me}) or root's",
        dir.display()
    ))
}

/// Why a socket's path cannot be listened on: a file the setting should
/// not have named, or the state of the machine (a live socket, an error).
enum Stale {
    NotASocket(String),
    Other(String),
}

/// Why `path` cannot be listened on, after removing it when it is a stale
/// socket: one that nothing answers on. A file that is not a socket, or a
/// socket another process listens on, is never touched.
fn clear_stale(path: &Path) -> Result<(), Stale> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Stale::Other(err.to_string())),
    };
    if !meta.file_type().is_socket() {
        return Err(Stale::NotASocket(
            "a file that is not a socket is there; lanyard does not replace it".into(),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(Stale::Other("another process is listening on it".into())),
        Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {
            fs::remove_file(path)
                .map_err(|err| Stale::Other(format!("cannot remove the stale socket: {err}")))?;
            tracing::info!(path = %path.display(), "replaced a stale socket file nothing listened on");
            Ok(())
        }
        Err(err) => Err(Stale::Other(format!(
            "cannot tell whether it is in use: {err}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_another_user_owns_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let me = rustix::process::getuid().as_raw();
        let other = if me == 65534 { 65533 } else { 65534 };
        // Only root can give a directory away; another user's run has
        // nothing to show here.
        if std::os::unix::fs::chown(dir.path(), Some(other), None).is_err() {
            return;
        }
        let path = dir.path().join("lanyard.sock");
        let err = bind_unix(&path, FileMode(0o660)).err().unwrap().to_string();
        assert!(err.contains(&format!("owned by user {other}")), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn the_settings_leave_room_for_the_private_directory() {
        // What the private directory and its socket add to the
        // directory's path.
        let name = "x".repeat(STAGING_RANDOM);
        let staging = format!("/{STAGING_PREFIX}{name}/{STAGING_NAME}");
        assert_eq!(staging.len(), crate::config::SOCKET_STAGING_ROOM);
    }
}
