//! A string that must never reach a log, an error message or a metric.

use std::fmt;

/// A secret string (private key PEM, assertion, access token).
///
/// It has no `Display`, and its `Debug` prints `[redacted]`, so the only
/// way to the text is the deliberate [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret text, for the one place that must send or print it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Makes the process undumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core
/// file, and no other process of the same user may read its memory
/// (`/proc/PID/mem`, ptrace), where the private key and the tokens are.
/// Called first thing, before any key is read. Only root, or a holder of
/// `CAP_SYS_PTRACE`, can still read it.
pub fn keep_memory_private() -> Result<(), String> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|err| format!("cannot make the process undumpable: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&secret)), "Some([redacted])");
    }
}
