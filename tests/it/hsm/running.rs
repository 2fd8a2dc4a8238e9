//! A `lanyard run` child with a SoftHSM2 of its own: the suite's child
//! process (`support::child`), whose log must never hold the PIN.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use super::softhsm::PIN;
use crate::support::child::Process;

pub struct Running(Process);

impl Deref for Running {
    type Target = Process;

    fn deref(&self) -> &Process {
        &self.0
    }
}

impl DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.0
    }
}

impl Running {
    /// `lanyard run` with exactly `vars` (`SOFTHSM2_CONF` among them), on
    /// free loopback ports, once it says where it listens.
    pub async fn start(vars: HashMap<String, String>) -> Running {
        Running(Process::start(vars).await)
    }

    /// Waits up to `limit` for a log line whose message is `message`.
    pub async fn wait_for(&mut self, message: &str, limit: Duration) -> serde_json::Value {
        self.0.wait_for_log_within(message, limit).await
    }

    /// SIGTERM, then the exit code with the whole log, which must not hold
    /// the PIN.
    pub async fn stop(self) -> (Option<i32>, String) {
        self.0.terminate();
        let (code, log) = self.0.finish().await;
        assert!(!log.contains(PIN), "the PIN is in the log");
        (code, log)
    }
}
