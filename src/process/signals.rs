//! Signals, and a process stopped by them.

use crate::failure::Failure;

use super::*;

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT.
    Stop,
    /// SIGHUP: check the credentials file now.
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, installed before anything starts so an
/// early signal is handled rather than the default abrupt exit.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals, Failure> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let watch = |kind| {
                signal(kind).map_err(|err| Failure::Runtime(format!("cannot watch signals: {err}")))
            };
            Ok(Signals {
                term: watch(SignalKind::terminate())?,
                int: watch(SignalKind::interrupt())?,
                hup: watch(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Resolves on the next signal.
    pub async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {
                tracing::info!("SIGTERM received");
                Signal::Stop
            }
            _ = self.int.recv() => {
                tracing::info!("SIGINT received");
                Signal::Stop
            }
            _ = self.hup.recv() => {
                tracing::info!("SIGHUP received: checking the credentials file");
                Signal::Reload
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }

    /// Resolves on the next SIGTERM or SIGINT, acting on SIGHUPs meanwhile.
    /// With no credentials file to reload, SIGHUP keeps its usual meaning
    /// (the terminal went away) and stops the process, gracefully.
    async fn next_stop(&mut self, process: &Process) {
        while self.next().await == Signal::Reload {
            if !process.reload_credentials() {
                return;
            }
        }
    }
}

/// Stops the process on the first SIGTERM or SIGINT and waits for the
/// drain; a second one ends the wait at once.
pub async fn stop_on_signals(process: Process, signals: &mut Signals) -> Result<(), Failure> {
    signals.next_stop(&process).await;
    process.shutdown();
    let second = async {
        loop {
            if signals.next().await == Signal::Stop {
                break;
            }
            tracing::info!("shutting down: SIGHUP ignored");
        }
    };
    tokio::select! {
        result = process.wait() => result.map(|_| ()),
        () = second => {
            tracing::warn!("second signal: exiting now; requests still in flight are cut off");
            Ok(())
        }
    }
}
