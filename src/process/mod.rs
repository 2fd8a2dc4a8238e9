//! The process assembled from its components: the token refresher and
//! the admin listener, with the proxy's threads, the verifier's thread or
//! both, each from its own configuration, and the shutdown sequence
//! (docs/commands.md "Shutdown").
//!
//! - `threads`: each listener's threads, each with its own runtime.
//! - `tokens`: the accounts' refreshers and watchers, and the route table
//!   they make.
//! - `shutdown`: the drain that every listener and task holds.
//! - `limits`: each listener's policy for the accept loop.
//! - `unix`: the proxy's Unix socket file.
//! - `signals`: SIGTERM, SIGINT and SIGHUP, and the process they stop.

mod limits;
mod shutdown;
mod signals;
mod threads;
mod tokens;
mod unix;

pub use limits::{
    VERIFIER_CONNECTIONS_PER_CLIENT, VERIFIER_FIRST_REQUEST_TIMEOUT, VERIFIER_IDLE_TIMEOUT,
    VERIFIER_PROXIED_IDLE_TIMEOUT, proxy_streams_per_connection,
};
pub use signals::{Signal, Signals, stop_on_signals};
pub(crate) use threads::failed;
pub use threads::{bind, bind_admin, bind_proxy, bind_verifier};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use prometheus::IntCounter;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::access::{self, ServiceAccess};
use crate::accounts::{Accounts, DirectoryReloads};
use crate::admin::Admin;
use crate::config::accounts::AccountsDir;
use crate::config::{
    AccessConfig, AdminConfig, ProcessConfig, ProxyConfig, RunConfig, VerifierConfig, VerifierSetup,
};
use crate::failure::Failure;
use crate::metrics::{self, Metrics};
use crate::outbound::Connector;
use crate::proxy;
use crate::reload;
use crate::server::{self, Drained};
use crate::target::TargetUrl;
use crate::token::refresher::RefreshPolicy;
use crate::token::{ExchangeOptions, TokenHandle};
use crate::verifier::{MAX_SERVICE_CALLS, Serving, Verifier};

use limits::{admin_limits, budget_file_descriptors, proxy_limits, verifier_limits};
use shutdown::{Drains, Watches};
use threads::{ServeOptions, into_std, local_addr, start_proxy_workers, start_thread};
use tokens::TokenTasks;

/// Once the proxy has drained, the admin listener gets this long to answer
/// a last scrape before the process exits.
const ADMIN_GRACE: Duration = Duration::from_secs(1);

/// The admin listener's accept queue: probes and scrapes come a few at a
/// time; std's default.
const ADMIN_BACKLOG: usize = 128;

/// What a lanyard process runs, each component with its configuration,
/// built before anything starts; each listener bound by the caller (so
/// tests can use port 0). The admin listener always, and the proxy, the
/// verifier or both.
pub struct Components {
    /// The default account, `SA_CREDENTIALS_FILE`'s (or the `SA_*`
    /// settings'), and its credentials watch; `None` when only
    /// `SA_CREDENTIALS_DIR` is set. The verifier always has one.
    pub access: Option<ServiceAccess>,
    /// `SA_CREDENTIALS_DIR`'s accounts (docs/accounts.md).
    pub directory: Option<AccountsDir>,
    /// Outbound connections: the upstream's and the token endpoint's.
    pub connector: Connector,
    /// How every account's token requests are made.
    pub exchange: ExchangeOptions,
    pub refresh: RefreshPolicy,
    pub admin: TcpListener,
    /// The proxy, and the upstream it forwards to.
    pub proxy: Option<(ProxyListener, ProxyConfig, TargetUrl)>,
    pub verifier: Option<(TcpListener, Serving)>,
    /// How long the client listeners drain for (`LANYARD_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
    /// How long the admin listener's clients may take none of an answer
    /// (`LANYARD_SEND_TIMEOUT`; the proxy's and the verifier's are in
    /// their configs).
    pub send_timeout: Duration,
    /// Where the span exporter counts its drops, registered with the
    /// other metrics (`otel::Telemetry::spans_dropped`); a counter of its
    /// own when nothing exports.
    pub spans_dropped: IntCounter,
}

/// The proxy's listener: TCP, or a Unix socket with the file to remove
/// once the proxy has drained.
#[derive(Debug)]
pub struct ProxyListener {
    listener: server::Listener,
    socket: Option<unix::SocketFile>,
}

impl From<TcpListener> for ProxyListener {
    fn from(listener: TcpListener) -> Self {
        ProxyListener {
            listener: server::Listener::Tcp(listener),
            socket: None,
        }
    }
}

impl Components {
    /// `lanyard run`'s: the proxy.
    pub fn proxy(
        run: &RunConfig,
        admin: TcpListener,
        proxy: impl Into<ProxyListener>,
    ) -> Components {
        let access = ServiceAccess::of_default(&run.access, &run.signing);
        let connector = match &access {
            Some(access) => access.connector.clone(),
            None => crate::outbound::connector(run.signing.tls.clone()),
        };
        let forwarding = (proxy.into(), run.proxy.clone(), run.upstream.clone());
        Components {
            proxy: Some(forwarding),
            directory: run.signing.accounts.directory().cloned(),
            ..Components::common(
                &run.access,
                &run.admin,
                &run.process,
                access,
                connector,
                admin,
            )
        }
    }

    /// `lanyard verifier`'s: the verifier, as its one account.
    pub fn verifier(
        setup: &VerifierSetup,
        admin: TcpListener,
        verifier: TcpListener,
    ) -> Components {
        let access = ServiceAccess::new(&setup.access, &setup.account, &setup.tls);
        let connector = access.connector.clone();
        let (config, process) = (&setup.access, &setup.process);
        Components {
            verifier: Some((verifier, Serving::of_setup(setup))),
            ..Components::common(
                config,
                &setup.admin,
                process,
                Some(access),
                connector,
                admin,
            )
        }
    }

    /// The token machinery and the admin listener, which every process
    /// has: the default account's access, when there is one, and the
    /// connector every account reaches the service with.
    pub fn common(
        config: &AccessConfig,
        admin_config: &AdminConfig,
        process: &ProcessConfig,
        access: Option<ServiceAccess>,
        connector: Connector,
        admin: TcpListener,
    ) -> Components {
        Components {
            access,
            directory: None,
            connector,
            exchange: access::exchange_options(config),
            refresh: RefreshPolicy::with_expiry_margin(config.expiry_margin),
            admin,
            proxy: None,
            verifier: None,
            shutdown_grace: process.shutdown_grace,
            send_timeout: admin_config.send_timeout,
            spans_dropped: metrics::spans_dropped_counter(),
        }
    }
}

/// A running lanyard: `lanyard run`, `lanyard verifier` or the demo's.
pub struct Process {
    /// The proxy's TCP address; `None` on a Unix socket.
    pub proxy_addr: Option<SocketAddr>,
    /// The proxy's Unix socket, when it listens on one.
    pub proxy_socket: Option<PathBuf>,
    pub verifier_addr: Option<SocketAddr>,
    pub admin_addr: SocketAddr,
    /// The default account's token; `None` when only `SA_CREDENTIALS_DIR`
    /// is set.
    pub tokens: Option<TokenHandle>,
    /// Every account, by the paths it serves.
    pub accounts: Accounts,
    pub metrics: Metrics,
    /// What the credentials watcher has done, when there is one.
    pub reloads: Option<watch::Receiver<reload::Reloads>>,
    /// What `SA_CREDENTIALS_DIR`'s watcher has done, when there is one.
    pub directory: Option<watch::Receiver<DirectoryReloads>>,
    /// Wake the credentials watchers (SIGHUP).
    check_credentials: Vec<Arc<Notify>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Drained>,
}

impl Process {
    /// Starts the refresher and the listeners. Should a step fail, what
    /// had started drains and stops as the error returns.
    pub fn start(components: Components) -> Result<Process, Failure> {
        let Components {
            access,
            directory,
            connector,
            exchange,
            refresh,
            admin,
            proxy,
            verifier,
            shutdown_grace,
            send_timeout,
            spans_dropped,
        } = components;
        let addrs = Addresses::of(&admin, proxy.as_ref(), verifier.as_ref())?;
        let (metrics, registry) = Metrics::with_registry(spans_dropped)
            .map_err(|err| Failure::Runtime(format!("cannot register metrics: {err}")))?;
        let (proxy, socket_file) = socket_apart(proxy);
        let max_connections = client_connections(
            proxy.as_ref().map(|(_, config, _)| config),
            verifier.as_ref().map(|(_, serving)| &serving.config),
        );
        let drains = Drains::new();
        // The proxy's 401 rule waits as long as its request would.
        let wait = proxy.as_ref().map(|(_, config, _)| config.upstream_timeout);
        let client = tokens::token_client(access.as_ref(), connector.clone(), exchange);
        let rules = tokens::rules(client, refresh, wait, &metrics);
        let tasks = TokenTasks::spawn(access.as_ref(), directory, rules, &drains.watches.tasks);
        // Built before any listener starts, so that one that cannot be
        // built stops the start with nothing serving.
        let verifier = match verifier {
            Some((listener, serving)) => {
                let limits = verifier_limits(&serving.config, max_connections);
                let verifier = build_verifier(&serving, access.as_ref(), &tasks, &metrics)?;
                Some((listener, verifier, limits))
            }
            None => None,
        };
        let draining = Arc::new(AtomicBool::new(false));
        let admin_handler = Admin::new(tasks.accounts.clone(), registry, draining.clone());
        let admin_limits = (admin_limits(send_timeout), metrics.listener("admin"));
        let admin_drain = drains.watches.admin.clone();
        start_admin(admin, addrs.admin, admin_handler, admin_limits, admin_drain)?;
        let shared = Shared {
            metrics: &metrics,
            grace: shutdown_grace,
            watches: &drains.watches,
        };
        if let Some((listener, config, upstream)) = proxy {
            let limits = proxy_limits(&config, max_connections);
            let accounts = tasks.accounts.clone();
            let (addr, metrics) = (addrs.proxy, &metrics);
            let setup =
                proxy::ProxySetup::new(connector, addr, &config, &upstream, accounts, metrics);
            start_proxy(listener, addrs.proxy, &config, limits, &setup, &shared)?;
        }
        if let (Some((listener, verifier, limits)), Some(addr)) = (verifier, addrs.verifier) {
            start_verifier(listener, addr, verifier, limits, &shared)?;
        }
        let (stop, stopped) = watch::channel(false);
        let drain = drains.run(stopped, draining, shutdown_grace, socket_file);
        let task =
            tokio::spawn(drain.instrument(tracing::info_span!("lanyard", admin = %addrs.admin)));
        addrs.announce();
        Ok(Process {
            proxy_addr: addrs.proxy,
            proxy_socket: addrs.proxy_socket.clone(),
            verifier_addr: addrs.verifier,
            admin_addr: addrs.admin,
            tokens: tasks.tokens,
            accounts: tasks.accounts,
            metrics,
            reloads: tasks.reloads,
            directory: tasks.directory,
            check_credentials: tasks.check_credentials,
            stop,
            task,
        })
    }

    /// Checks the credentials file and directory now rather than at the
    /// next poll; false when there is neither to check.
    pub fn reload_credentials(&self) -> bool {
        if self.check_credentials.is_empty() {
            tracing::info!(
                "SIGHUP: no credentials file to reload (credentials from SA_* settings, or the demo); shutting down"
            );
            return false;
        }
        for check in &self.check_credentials {
            check.notify_one();
        }
        true
    }

    /// Begins the shutdown: not ready, stop accepting, drain.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until the process has drained.
    pub async fn wait(self) -> Result<Drained, Failure> {
        self.task
            .await
            .map_err(|err| Failure::Runtime(format!("the shutdown task failed: {err}")))
    }
}

/// The proxy's listener, and its socket file apart, for the drain to
/// remove.
fn socket_apart(
    proxy: Option<(ProxyListener, ProxyConfig, TargetUrl)>,
) -> (
    Option<(server::Listener, ProxyConfig, TargetUrl)>,
    Option<unix::SocketFile>,
) {
    match proxy {
        Some((listener, config, upstream)) => {
            (Some((listener.listener, config, upstream)), listener.socket)
        }
        None => (None, None),
    }
}

/// The verifier, over the default account: it serves one.
fn build_verifier(
    serving: &Serving,
    access: Option<&ServiceAccess>,
    tasks: &TokenTasks,
    metrics: &Metrics,
) -> Result<Verifier, Failure> {
    let (Some(access), Some(tokens)) = (access, &tasks.tokens) else {
        return Err(Failure::Runtime(
            "the verifier serves one service account, and none is set".to_string(),
        ));
    };
    Verifier::new(serving, access, tokens.clone(), metrics.clone())
}

/// Where each listener is bound, and what the log of the start says.
struct Addresses {
    proxy: Option<SocketAddr>,
    proxy_socket: Option<PathBuf>,
    verifier: Option<SocketAddr>,
    admin: SocketAddr,
    /// The service's base URL, as the proxy or the verifier has it.
    upstream: String,
    worker_threads: Option<usize>,
}

impl Addresses {
    fn of(
        admin: &TcpListener,
        proxy: Option<&(ProxyListener, ProxyConfig, TargetUrl)>,
        verifier: Option<&(TcpListener, Serving)>,
    ) -> Result<Addresses, Failure> {
        let upstream = proxy
            .map(|(_, _, upstream)| upstream.to_string())
            .or_else(|| verifier.map(|(_, serving)| serving.service.to_string()))
            .unwrap_or_default();
        Ok(Addresses {
            proxy: proxy
                .and_then(|(listener, _, _)| listener.listener.local_addr())
                .transpose()
                .map_err(|err| failed("cannot read the listener address", err))?,
            proxy_socket: proxy
                .and_then(|(listener, _, _)| listener.socket.as_ref())
                .map(|socket| socket.path().to_owned()),
            verifier: verifier
                .map(|(listener, _)| local_addr(listener))
                .transpose()?,
            admin: local_addr(admin)?,
            upstream,
            worker_threads: proxy.map(|(_, config, _)| config.worker_threads),
        })
    }

    /// Logs that lanyard started, and where.
    fn announce(&self) {
        tracing::info!(
            proxy = self.proxy.map(tracing::field::display),
            proxy_socket = self.proxy_socket.as_ref().map(|path| tracing::field::display(path.display())),
            verifier = self.verifier.map(tracing::field::display),
            admin = %self.admin,
            upstream = %self.upstream,
            version = env!("CARGO_PKG_VERSION"),
            worker_threads = self.worker_threads,
            "lanyard started"
        );
    }
}

/// Each client listener's connection limit: `LANYARD_MAX_CONNECTIONS`,
/// lowered if the open-file limit cannot hold it for every listener with
/// the outbound connections.
fn client_connections(proxy: Option<&ProxyConfig>, verifier: Option<&VerifierConfig>) -> usize {
    // Each client-facing listener may hold LANYARD_MAX_CONNECTIONS.
    let client_listeners = usize::from(proxy.is_some()) + usize::from(verifier.is_some());
    let max_connections = proxy
        .map(|config| config.max_connections)
        .or(verifier.map(|config| config.max_connections))
        .unwrap_or(0);
    // The proxy's upstream connections, and the verifier's calls.
    let outbound = proxy.map_or(0, |config| config.max_upstream_connections)
        + verifier.map_or(0, |_| MAX_SERVICE_CALLS);
    budget_file_descriptors(max_connections, client_listeners.max(1), outbound)
}

/// The admin listener on its own thread, serving until the client
/// listeners have drained, so probes see "not ready" rather than a
/// refused connection. Its own thread keeps probes from waiting on the
/// token's RSA signature, here.
fn start_admin(
    listener: TcpListener,
    addr: SocketAddr,
    admin: Admin,
    (limits, metrics): (server::Limits, metrics::ListenerMetrics),
    drain: drain::Watch,
) -> Result<(), Failure> {
    let options = ServeOptions {
        grace: ADMIN_GRACE,
        limits,
        metrics: Some(server::ConnectionMetrics {
            open: None,
            refused: None,
            evicted: None,
            stalled: Some(metrics.stalled),
            flooding: Some(metrics.flooding),
        }),
        span: tracing::info_span!("admin", addr = %addr),
        accepting: None,
    };
    start_thread(
        "lanyard-admin".to_string(),
        into_std(server::Listener::Tcp(listener), "admin")?,
        server::Member::alone(&options.limits),
        move || admin,
        drain,
        |_| {},
        &options,
    )
}

/// What each client listener's start takes from the process.
struct Shared<'a> {
    metrics: &'a Metrics,
    grace: Duration,
    watches: &'a Watches,
}

impl Shared<'_> {
    /// What a client listener's thread reports its drain's end with.
    fn report(&self) -> impl FnOnce(Drained) + Send + Clone + 'static {
        let outcome = self.watches.outcome.clone();
        outcome.start();
        move |drained| outcome.report(drained)
    }
}

/// The proxy's threads.
fn start_proxy(
    listener: server::Listener,
    addr: Option<SocketAddr>,
    config: &ProxyConfig,
    limits: server::Limits,
    proxy: &proxy::ProxySetup,
    shared: &Shared<'_>,
) -> Result<(), Failure> {
    let metrics = shared.metrics;
    let span = match addr {
        Some(addr) => tracing::info_span!("proxy", addr = %addr),
        None => tracing::info_span!("proxy", addr = "unix"),
    };
    let series = metrics.listener("proxy");
    let connections = server::ConnectionMetrics {
        open: Some(metrics.proxy_connections.clone()),
        refused: Some(metrics.proxy_connections_refused.clone()),
        evicted: None,
        stalled: Some(series.stalled),
        flooding: Some(series.flooding),
    };
    start_proxy_workers(
        into_std(listener, "proxy")?,
        proxy,
        config.worker_threads,
        shared,
        ServeOptions {
            grace: shared.grace,
            limits,
            metrics: Some(connections),
            span,
            accepting: Some(shared.watches.accepting.clone()),
        },
    )
}

/// The verifier's thread; its sweeper runs there too.
fn start_verifier(
    listener: TcpListener,
    addr: SocketAddr,
    verifier: Verifier,
    limits: server::Limits,
    shared: &Shared<'_>,
) -> Result<(), Failure> {
    let metrics = shared.metrics;
    let series = metrics.listener("verifier");
    let options = ServeOptions {
        grace: shared.grace,
        limits,
        metrics: Some(server::ConnectionMetrics {
            open: Some(metrics.verifier_connections.clone()),
            refused: Some(metrics.verifier_connections_refused.clone()),
            evicted: Some(metrics.verifier_connections_evicted.clone()),
            stalled: Some(series.stalled),
            flooding: Some(series.flooding),
        }),
        span: tracing::info_span!("verifier", addr = %addr),
        accepting: Some(shared.watches.accepting.clone()),
    };
    start_thread(
        "lanyard-verifier".to_string(),
        into_std(server::Listener::Tcp(listener), "verifier")?,
        server::Member::alone(&options.limits),
        move || {
            verifier.spawn_sweeper();
            verifier
        },
        shared.watches.clients.clone(),
        shared.report(),
        &options,
    )
}
