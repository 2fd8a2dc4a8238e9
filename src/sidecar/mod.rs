//! The process assembled: the token refresher and the admin listener, with
//! the proxy's threads, the verifier's thread or both, and the shutdown
//! sequence (README "Shutdown").
//!
//! - `threads`: each listener's threads, each with its own runtime.
//! - `signals`: SIGTERM, SIGINT and SIGHUP, `lanyard run` and `lanyard
//!   verifier`.

mod limits;
mod signals;
mod threads;

pub use limits::{
    VERIFIER_CONNECTIONS_PER_CLIENT, VERIFIER_FIRST_REQUEST_TIMEOUT, VERIFIER_IDLE_TIMEOUT,
    VERIFIER_PROXIED_IDLE_TIMEOUT,
};
pub use signals::{Signal, Signals, run, run_verifier, stop_on_signals};
pub(crate) use threads::failed;
pub use threads::{bind, bind_admin, bind_proxy, bind_verifier};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::Failure;
use crate::access::ServiceAccess;
use crate::admin::Admin;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::proxy;
use crate::reload;
use crate::server::{self, Drained};
use crate::target::TargetUrl;
use crate::token::TokenHandle;
use crate::token::refresher::{self, RefreshPolicy};
use crate::verifier::{MAX_SERVICE_CALLS, Verifier, VerifierSettings};

use limits::{admin_limits, budget_file_descriptors, proxy_limits, verifier_limits};
use threads::{ServeOptions, into_std, local_addr, start_proxy_workers, start_thread};

/// Once the proxy has drained, the admin listener gets this long to answer
/// a last scrape before the process exits.
const ADMIN_GRACE: Duration = Duration::from_secs(1);

/// The admin listener's accept queue: probes and scrapes come a few at a
/// time; std's default.
const ADMIN_BACKLOG: usize = 128;

/// What a lanyard process serves, each listener bound by the caller (so
/// tests can use port 0): the admin listener always, and the proxy, the
/// verifier or both.
pub struct Listeners {
    pub admin: TcpListener,
    pub proxy: Option<TcpListener>,
    pub verifier: Option<(TcpListener, VerifierSettings)>,
}

/// A running sidecar.
pub struct Sidecar {
    pub proxy_addr: Option<SocketAddr>,
    pub verifier_addr: Option<SocketAddr>,
    pub admin_addr: SocketAddr,
    pub tokens: TokenHandle,
    pub metrics: Metrics,
    /// What the credentials watcher has done, when there is one.
    pub reloads: Option<watch::Receiver<reload::Reloads>>,
    /// Wakes the credentials watcher, when there is one (SIGHUP).
    check_credentials: Option<Arc<Notify>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Drained>,
}

impl Sidecar {
    /// Starts the refresher and the listeners.
    pub fn start(
        config: &Config,
        access: ServiceAccess,
        listeners: Listeners,
    ) -> Result<Sidecar, Failure> {
        let base = config
            .service_api_url
            .as_ref()
            .ok_or_else(|| Failure::Runtime("SERVICE_API_URL is not set".into()))?;
        let addrs = Addresses::of(&listeners)?;
        let (proxy_addr, verifier_addr, admin_addr) = (addrs.proxy, addrs.verifier, addrs.admin);
        let (metrics, registry) = Metrics::with_registry()
            .map_err(|err| Failure::Runtime(format!("cannot register metrics: {err}")))?;
        let max_connections =
            client_connections(config, proxy_addr.is_some(), verifier_addr.is_some());
        let tasks = TokenTasks::spawn(config, &access, &metrics);
        let tokens = tasks.tokens.clone();
        // Built before any thread starts, so that a failure here leaves
        // nothing to tear down.
        let verifier = listeners
            .verifier
            .map(|(listener, settings)| {
                let verifier = Verifier::new(
                    &settings,
                    base,
                    &access,
                    tokens.clone(),
                    metrics.clone(),
                    config.upstream_timeout,
                    config.body_timeout,
                );
                verifier.map(|verifier| (listener, verifier, settings.forwarded_hops))
            })
            .transpose()?;
        let draining = Arc::new(AtomicBool::new(false));
        let admin = Admin::new(tokens.clone(), registry, draining.clone());

        let (stop, stopped) = watch::channel(false);
        let (clients_done, clients_drained) = watch::channel(false);
        let admin_done = start_admin(listeners.admin, admin_addr, admin, clients_drained)?;
        let process = Process {
            config,
            metrics: &metrics,
            stopped: &stopped,
        };
        let mut workers = Vec::new();
        if let (Some(listener), Some(addr)) = (listeners.proxy, proxy_addr) {
            let limits = proxy_limits(config, max_connections);
            let proxy = start_proxy(listener, addr, limits, &access, base, &tokens, &process)?;
            workers.extend(proxy);
        }
        if let (Some((listener, verifier, hops)), Some(addr)) = (verifier, verifier_addr) {
            let limits = verifier_limits(config, max_connections, hops);
            workers.push(start_verifier(listener, addr, verifier, limits, &process)?);
        }
        let stopping = Stopping {
            stopped,
            draining,
            grace: config.shutdown_grace,
            workers,
            clients_done,
            admin_done,
            refresher: tasks.refresher,
            watcher: tasks.watcher,
        };
        let span = tracing::info_span!("lanyard", admin = %admin_addr);
        let task = tokio::spawn(stopping.run().instrument(span));
        addrs.announce(config, base);
        Ok(Sidecar {
            proxy_addr,
            verifier_addr,
            admin_addr,
            tokens,
            metrics,
            reloads: tasks.reloads,
            check_credentials: tasks.check_credentials,
            stop,
            task,
        })
    }

    /// Checks the credentials file now rather than at the next poll;
    /// false when there is no file to check.
    pub fn reload_credentials(&self) -> bool {
        match &self.check_credentials {
            Some(check) => {
                check.notify_one();
                true
            }
            None => {
                tracing::info!(
                    "SIGHUP: no credentials file to reload (credentials from SA_* settings, or the demo); shutting down"
                );
                false
            }
        }
    }

    /// Begins the shutdown: not ready, stop accepting, drain.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until the sidecar has stopped.
    pub async fn wait(self) -> Result<Drained, Failure> {
        self.task
            .await
            .map_err(|err| Failure::Runtime(format!("the sidecar task failed: {err}")))
    }
}

/// Where each listener is bound.
struct Addresses {
    proxy: Option<SocketAddr>,
    verifier: Option<SocketAddr>,
    admin: SocketAddr,
}

impl Addresses {
    fn of(listeners: &Listeners) -> Result<Addresses, Failure> {
        Ok(Addresses {
            proxy: listeners.proxy.as_ref().map(local_addr).transpose()?,
            verifier: listeners
                .verifier
                .as_ref()
                .map(|(listener, _)| local_addr(listener))
                .transpose()?,
            admin: local_addr(&listeners.admin)?,
        })
    }

    /// Logs that lanyard started, and where.
    fn announce(&self, config: &Config, base: &TargetUrl) {
        tracing::info!(
            proxy = self.proxy.map(tracing::field::display),
            verifier = self.verifier.map(tracing::field::display),
            admin = %self.admin,
            upstream = %base,
            version = env!("CARGO_PKG_VERSION"),
            worker_threads = config.worker_threads,
            "lanyard started"
        );
    }
}

/// Each client listener's connection limit: `LANYARD_MAX_CONNECTIONS`,
/// lowered if the open-file limit cannot hold it for every listener with
/// the outbound connections.
fn client_connections(config: &Config, proxy: bool, verifier: bool) -> usize {
    // Each client-facing listener may hold LANYARD_MAX_CONNECTIONS.
    let client_listeners = usize::from(proxy) + usize::from(verifier);
    // The proxy's upstream connections, and the verifier's calls.
    let outbound = usize::from(proxy) * config.max_upstream_connections
        + usize::from(verifier) * MAX_SERVICE_CALLS;
    budget_file_descriptors(config.max_connections, client_listeners.max(1), outbound)
}

/// The token refresher, and the credentials watcher when there is a file
/// to watch.
struct TokenTasks {
    tokens: TokenHandle,
    refresher: JoinHandle<()>,
    /// Wakes the watcher (SIGHUP).
    check_credentials: Option<Arc<Notify>>,
    watcher: Option<JoinHandle<()>>,
    /// What the watcher has done.
    reloads: Option<watch::Receiver<reload::Reloads>>,
}

impl TokenTasks {
    fn spawn(config: &Config, access: &ServiceAccess, metrics: &Metrics) -> TokenTasks {
        let (tokens, refresher) = refresher::spawn(
            access.exchanger.clone(),
            RefreshPolicy {
                expiry_margin: config.expiry_margin,
                ..RefreshPolicy::default()
            },
            metrics.clone(),
        );
        let check = access.watch.is_some().then(|| Arc::new(Notify::new()));
        let (watcher, reloads) = access
            .watch
            .clone()
            .zip(check.clone())
            .and_then(|(watch, check)| {
                reload::spawn(
                    watch,
                    access.exchanger.clone(),
                    tokens.clone(),
                    metrics.clone(),
                    check,
                )
            })
            .unzip();
        TokenTasks {
            tokens,
            refresher,
            check_credentials: check,
            watcher,
            reloads,
        }
    }
}

/// The admin listener on its own thread, serving until the client
/// listeners have drained (`clients_drained` turns true), so probes see
/// "not ready" rather than a refused connection. Its own thread keeps
/// probes from waiting on the token's RSA signature, here.
fn start_admin(
    listener: TcpListener,
    addr: SocketAddr,
    admin: Admin,
    mut clients_drained: watch::Receiver<bool>,
) -> Result<oneshot::Receiver<Drained>, Failure> {
    let options = ServeOptions {
        grace: ADMIN_GRACE,
        limits: admin_limits(),
        metrics: None,
        span: tracing::info_span!("admin", addr = %addr),
    };
    start_thread(
        "lanyard-admin".to_string(),
        into_std(listener, "admin")?,
        server::Member::alone(&options.limits),
        move || admin,
        async move {
            let _ = clients_drained.wait_for(|done| *done).await;
        },
        &options,
    )
}

/// What each client listener's start takes from the process.
struct Process<'a> {
    config: &'a Config,
    metrics: &'a Metrics,
    /// Turns true when the listeners are to stop accepting and drain.
    stopped: &'a watch::Receiver<bool>,
}

/// The proxy's threads.
fn start_proxy(
    listener: TcpListener,
    addr: SocketAddr,
    limits: server::Limits,
    access: &ServiceAccess,
    base: &TargetUrl,
    tokens: &TokenHandle,
    process: &Process<'_>,
) -> Result<Vec<oneshot::Receiver<Drained>>, Failure> {
    let Process {
        config,
        metrics,
        stopped,
    } = process;
    let proxy = proxy::ProxySetup::new(
        access.connector.clone(),
        addr,
        base,
        tokens.clone(),
        (*metrics).clone(),
        proxy::ProxyLimits {
            upstream_timeout: config.upstream_timeout,
            body_timeout: config.body_timeout,
            max_upstream_connections: config.max_upstream_connections,
        },
    );
    let connections = server::ConnectionMetrics {
        open: metrics.proxy_connections.clone(),
        refused: metrics.proxy_connections_refused.clone(),
        evicted: None,
    };
    start_proxy_workers(
        into_std(listener, "proxy")?,
        &proxy,
        config.worker_threads,
        stopped,
        ServeOptions {
            grace: config.shutdown_grace,
            limits,
            metrics: Some(connections),
            span: tracing::info_span!("proxy", addr = %addr),
        },
    )
}

/// The verifier's thread; its sweeper runs there too.
fn start_verifier(
    listener: TcpListener,
    addr: SocketAddr,
    verifier: Verifier,
    limits: server::Limits,
    process: &Process<'_>,
) -> Result<oneshot::Receiver<Drained>, Failure> {
    let metrics = process.metrics;
    let options = ServeOptions {
        grace: process.config.shutdown_grace,
        limits,
        metrics: Some(server::ConnectionMetrics {
            open: metrics.verifier_connections.clone(),
            refused: metrics.verifier_connections_refused.clone(),
            evicted: Some(metrics.verifier_connections_evicted.clone()),
        }),
        span: tracing::info_span!("verifier", addr = %addr),
    };
    let mut stopped = process.stopped.clone();
    start_thread(
        "lanyard-verifier".to_string(),
        into_std(listener, "verifier")?,
        server::Member::alone(&options.limits),
        move || {
            verifier.spawn_sweeper();
            verifier
        },
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        },
        &options,
    )
}

/// The shutdown sequence, once `stopped` turns true: not ready, the
/// client listeners drained, then the admin listener, the refresher and
/// the credentials watcher.
struct Stopping {
    stopped: watch::Receiver<bool>,
    draining: Arc<AtomicBool>,
    grace: Duration,
    workers: Vec<oneshot::Receiver<Drained>>,
    clients_done: watch::Sender<bool>,
    admin_done: oneshot::Receiver<Drained>,
    refresher: JoinHandle<()>,
    watcher: Option<JoinHandle<()>>,
}

impl Stopping {
    async fn run(mut self) -> Drained {
        let _ = self.stopped.wait_for(|stop| *stop).await;
        self.draining.store(true, Ordering::Release);
        tracing::info!(
            grace_s = self.grace.as_secs(),
            "shutting down: draining in-flight requests"
        );
        let mut drained = Drained::Completely;
        for worker in self.workers {
            // A worker gone without a word panicked: count it as cut off.
            let outcome = worker.await.unwrap_or(Drained::GraceExpired);
            if outcome == Drained::GraceExpired {
                drained = Drained::GraceExpired;
            }
        }
        match drained {
            Drained::Completely => tracing::info!("every in-flight request finished"),
            Drained::GraceExpired => {
                tracing::warn!("the shutdown grace ran out; remaining requests were cut off")
            }
        }
        let _ = self.clients_done.send(true);
        let _ = self.admin_done.await;
        self.refresher.abort();
        if let Some(watcher) = self.watcher {
            watcher.abort();
        }
        drained
    }
}
