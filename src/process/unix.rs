//! The proxy's Unix socket (`LANYARD_LISTEN=unix:/path`, README "Listening
//! on a Unix socket"): bound with its permissions from the first moment,
//! a stale file from a crash replaced, and the file removed at exit.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use crate::Failure;
use crate::config::FileMode;

/// The socket file lanyard made, removed when this is dropped (once the
/// proxy has drained), unless something else has replaced it since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    inode: u64,
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path).is_ok_and(|meta| meta.ino() == self.inode);
        if ours && let Err(err) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %err, "cannot remove the proxy's socket file");
        }
    }
}

/// Listens on `path` with `mode`. The socket is bound under a temporary
/// name in the same directory, given its mode, then renamed into place, so
/// that it is never reachable with the permissions the umask would give.
pub fn bind_unix(path: &Path, mode: FileMode) -> Result<(UnixListener, SocketFile), Failure> {
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        Failure::Runtime(format!(
            "cannot listen on unix:{} (LANYARD_LISTEN): {what}: {err}",
            path.display()
        ))
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(failed("not a file's path", &"no directory or name"));
    };
    if !dir.is_dir() {
        return Err(failed(
            "its directory does not exist",
            &format!(
                "create {} (in Kubernetes, an emptyDir volume)",
                dir.display()
            ),
        ));
    }
    clear_stale(path).map_err(|why| failed("the path is taken", &why))?;
    let staging = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    // A leftover of a process with this one's id, which a container's
    // restart reuses.
    let _ = fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging).map_err(|err| failed("cannot bind", &err))?;
    let placed = fs::set_permissions(&staging, fs::Permissions::from_mode(mode.0))
        .and_then(|()| fs::rename(&staging, path))
        .and_then(|()| fs::symlink_metadata(path));
    match placed {
        Ok(meta) => Ok((
            listener,
            SocketFile {
                path: path.to_owned(),
                inode: meta.ino(),
            },
        )),
        Err(err) => {
            let _ = fs::remove_file(&staging);
            Err(failed(
                "cannot set its permissions and move it into place",
                &err,
            ))
        }
    }
}

/// Why `path` cannot be listened on, after removing it when it is a stale
/// socket: one that nothing answers on. A file that is not a socket, or a
/// socket another process listens on, is never touched.
fn clear_stale(path: &Path) -> Result<(), String> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err.to_string()),
    };
    if !meta.file_type().is_socket() {
        return Err("a file that is not a socket is there; lanyard does not replace it".into());
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err("another process is listening on it".into()),
        Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {
            fs::remove_file(path)
                .map_err(|err| format!("cannot remove the stale socket: {err}"))?;
            tracing::info!(path = %path.display(), "replaced a stale socket file nothing listened on");
            Ok(())
        }
        Err(err) => Err(format!("cannot tell whether it is in use: {err}")),
    }
}
