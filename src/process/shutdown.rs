//! The shutdown sequence (docs/commands.md "Shutdown"): one drain type, linkerd's
//! `drain`, held by every listener thread and every task. Draining goes
//! in three steps: the client listeners (not ready first, then each
//! drains its connections within the grace), the admin listener (a last
//! scrape), then the token tasks. A start that fails part way drops the
//! signals, which drains whatever had started.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::server::Drained;

use super::unix::SocketFile;

/// The three drains, in the order they run.
pub(super) struct Drains {
    clients: drain::Signal,
    /// Never signalled: its watches, one per client accept loop, are let
    /// go as each loop closes its listener.
    accepting: drain::Signal,
    admin: drain::Signal,
    tasks: drain::Signal,
    pub(super) watches: Watches,
}

/// What listeners and tasks hold: each its own clone of its step's watch.
#[derive(Clone)]
pub(super) struct Watches {
    pub(super) clients: drain::Watch,
    /// Held by a client accept loop until it no longer accepts.
    pub(super) accepting: drain::Watch,
    pub(super) admin: drain::Watch,
    pub(super) tasks: drain::Watch,
    /// How the client listeners' drains ended.
    pub(super) outcome: Arc<Outcome>,
}

/// Client listeners started, and those whose drain completed within the
/// grace. A listener thread that panicked never reports, and counts as
/// cut off.
#[derive(Default)]
pub(super) struct Outcome {
    started: AtomicUsize,
    completed: AtomicUsize,
}

impl Outcome {
    /// A client listener starts; its report is [`Outcome::report`].
    pub(super) fn start(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn report(&self, drained: Drained) {
        if drained == Drained::Completely {
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn drained(&self) -> Drained {
        match self.completed.load(Ordering::Relaxed) == self.started.load(Ordering::Relaxed) {
            true => Drained::Completely,
            false => Drained::GraceExpired,
        }
    }
}

impl Drains {
    pub(super) fn new() -> Drains {
        let (clients, clients_watch) = drain::channel();
        let (accepting, accepting_watch) = drain::channel();
        let (admin, admin_watch) = drain::channel();
        let (tasks, tasks_watch) = drain::channel();
        Drains {
            clients,
            accepting,
            admin,
            tasks,
            watches: Watches {
                clients: clients_watch,
                accepting: accepting_watch,
                admin: admin_watch,
                tasks: tasks_watch,
                outcome: Arc::default(),
            },
        }
    }

    /// Once `stopped` turns true: not ready, the client listeners drained,
    /// then the admin listener, then the token tasks.
    pub(super) async fn run(
        self,
        mut stopped: watch::Receiver<bool>,
        draining: Arc<AtomicBool>,
        grace: Duration,
        socket_file: Option<SocketFile>,
    ) -> Drained {
        let Drains {
            clients,
            mut accepting,
            admin,
            tasks,
            watches,
        } = self;
        let outcome = watches.outcome.clone();
        // Only the listeners and tasks hold watches from here on, so each
        // drain waits for them alone.
        drop(watches);
        let _ = stopped.wait_for(|stop| *stop).await;
        draining.store(true, Ordering::Release);
        // The listeners stop accepting now: a client that comes later
        // finds no socket rather than one that refuses it.
        drop(socket_file);
        // Signalled on its first poll. The line below is logged once no
        // listener accepts, so that what follows it in the log is the
        // drain of connections already open, and nothing new.
        let mut drained = pin!(clients.drain());
        let over = tokio::select! {
            () = &mut drained => true,
            () = accepting.closed() => false,
        };
        tracing::info!(
            grace_s = grace.as_secs(),
            "shutting down: draining in-flight requests"
        );
        if !over {
            drained.await;
        }
        let drained = outcome.drained();
        match drained {
            Drained::Completely => tracing::info!("every in-flight request finished"),
            Drained::GraceExpired => {
                tracing::warn!("the shutdown grace ran out; remaining requests were cut off")
            }
        }
        admin.drain().await;
        tasks.drain().await;
        drained
    }
}

/// Runs `task` until the drain is signalled, then stops it: the token
/// refresher and the credentials watcher hold nothing a stop could lose.
pub(super) fn until_drained(task: JoinHandle<()>, watch: drain::Watch) {
    tokio::spawn(async move {
        let release = watch.signaled().await;
        task.abort();
        let _ = task.await;
        drop(release);
    });
}

#[cfg(test)]
mod tests {
    use crate::config::Kept;

    use super::*;

    /// The process's tests wait for this line before they check that a
    /// new connection is refused: it must not come while a listener
    /// thread has yet to close its socket.
    #[tokio::test]
    async fn the_draining_line_waits_until_no_listener_accepts() {
        let logged = Kept::default();
        let writer = logged.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let drains = Drains::new();
        let (clients, listening) = (
            drains.watches.clients.clone(),
            drains.watches.accepting.clone(),
        );
        let (stop, stopped) = watch::channel(false);
        let grace = Duration::from_secs(5);
        let run = tokio::spawn(drains.run(stopped, Arc::default(), grace, None));
        stop.send(true).unwrap();

        // The listener hears the drain, but has not closed its socket yet.
        let release = clients.signaled().await;
        tokio::task::yield_now().await;
        assert!(!logged.text().contains("draining"), "{}", logged.text());

        drop(listening);
        drop(release);
        assert_eq!(run.await.unwrap(), Drained::Completely);
        let text = logged.text();
        assert!(
            text.contains("shutting down: draining in-flight requests"),
            "{text}"
        );
    }
}
