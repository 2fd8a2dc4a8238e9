//! The small files lanyard reads (a credentials file, a session key file,
//! a PIN file): regular files only, bounded by reading, and the words for
//! why one cannot be read. Imports nothing of lanyard, so that config and
//! hsm, which sit apart, both use it.

use std::io::{self, Read as _};
use std::path::Path;

/// `path`'s bytes, when it is a regular file of at most `max` bytes;
/// else why not, `what` naming what a file that large is not ("a PIN
/// file"). Opening a FIFO blocks until a writer comes, and a device may
/// never end: only regular files are read (a swap between the check and
/// the open is not a threat this guards against). Bounded by reading, not
/// by the size reported: the file may grow.
pub fn read_small(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(io::ErrorKind::IsADirectory.into());
    }
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!(
            "larger than {}; not {what}",
            size(max)
        )));
    }
    Ok(bytes)
}

/// A short, secret-free reason for an I/O error.
pub fn io_reason(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::IsADirectory => "is a directory".into(),
        io::ErrorKind::InvalidData => "is not valid UTF-8".into(),
        _ => err.to_string(),
    }
}

/// `1 MiB`, `4 KiB`, or bytes.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_bound_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_small(&file, 5, "a test file").unwrap(), b"12345");
        let err = read_small(&file, 4, "a test file").unwrap_err();
        assert_eq!(io_reason(&err), "larger than 4 bytes; not a test file");
        let err = read_small(dir.path(), 5, "a test file").unwrap_err();
        assert_eq!(io_reason(&err), "is a directory");
        let err = read_small(&dir.path().join("none"), 5, "a test file").unwrap_err();
        assert_eq!(io_reason(&err), "no such file");
        assert_eq!(
            (size(1 << 20), size(4096), size(100)),
            ("1 MiB".into(), "4 KiB".into(), "100 bytes".into())
        );
    }
}
