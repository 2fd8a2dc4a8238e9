//! The sidecar assembled: token refresher, proxy and admin listener, with
//! the shutdown sequence of CONTRACT §4.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::admin::Admin;
use crate::commands::{Failure, Wiring};
use crate::config::{Config, MIN_MAX_HEADER_BYTES};
use crate::error::ProxyError;
use crate::metrics::Metrics;
use crate::proxy::{self, Proxy, Upstream};
use crate::reload;
use crate::server::{self, Drained, Handler};
use crate::token::TokenHandle;
use crate::token::refresher::{self, RefreshPolicy};

/// Once the proxy has drained, the admin listener gets this long to answer
/// a last scrape before the process exits.
const ADMIN_GRACE: Duration = Duration::from_secs(1);
/// Probes and scrapes need a handful; the admin listener is often reachable
/// from the whole network, so a flood must not take file descriptors the
/// proxy needs. At the limit a new connection evicts the oldest one that
/// has sent no request yet (`server::Limits::evict_waiting`), so a flood of
/// half-open connections cannot keep the probes out.
const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Probes and scrapes send their request as they connect; a client that
/// has not within this is not one of them.
const ADMIN_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// What a connection beyond the admin listener's limit is told: only when
/// every one of its connections is busy with a request.
const ADMIN_REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 81\r\nconnection: close\r\n\r\nthe admin listener is answering its 64 connections' requests already; retry soon\n";

/// The admin listener's accept queue: probes and scrapes come a few at a
/// time; std's default.
const ADMIN_BACKLOG: usize = 128;

/// Descriptors beyond client, upstream and admin connections: the token
/// endpoint's connection, listeners, the credentials file, logs, refusals
/// being answered.
const SPARE_FILE_DESCRIPTORS: usize = 128;

/// The proxy's connection limit once the open-file limit is budgeted.
///
/// Client connections, upstream connections and the admin listener's
/// connections together must never exhaust the descriptors the process
/// has: when they run out, `accept` fails for every listener, the admin
/// probes included. The soft limit is raised toward the hard one as far as
/// the settings need (many runtimes start processes at 1024); if it cannot
/// go that far, the proxy's connection limit is lowered to what fits, with
/// a warning naming both settings.
fn budget_file_descriptors(max_connections: usize, max_upstream: usize) -> usize {
    let others = max_upstream + ADMIN_MAX_CONNECTIONS + SPARE_FILE_DESCRIPTORS;
    let wanted = max_connections.saturating_add(others);
    let limit = match rlimit::increase_nofile_limit(wanted as u64) {
        Ok(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read or raise the open-file limit");
            return max_connections;
        }
    };
    if limit >= wanted {
        return max_connections;
    }
    let fits = limit.saturating_sub(others).max(1);
    tracing::warn!(
        open_file_limit = limit,
        wanted,
        max_connections = fits,
        "the open-file limit cannot hold LANYARD_MAX_CONNECTIONS and LANYARD_MAX_UPSTREAM_CONNECTIONS together; serving at most max_connections client connections. Raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower the settings"
    );
    fits
}

/// A running sidecar.
pub struct Sidecar {
    pub proxy_addr: SocketAddr,
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
    /// Starts the refresher and both listeners. The listeners are bound by
    /// the caller, so tests can use port 0.
    pub fn start(
        config: &Config,
        wiring: Wiring,
        proxy_listener: TcpListener,
        admin_listener: TcpListener,
    ) -> Result<Sidecar, Failure> {
        let base = config
            .service_api_url
            .as_ref()
            .ok_or_else(|| Failure::Runtime("SERVICE_API_URL is not set".into()))?;
        let proxy_addr = local_addr(&proxy_listener)?;
        let admin_addr = local_addr(&admin_listener)?;
        let (metrics, registry) = Metrics::with_registry()
            .map_err(|err| Failure::Runtime(format!("cannot register metrics: {err}")))?;
        let max_connections =
            budget_file_descriptors(config.max_connections, config.max_upstream_connections);

        let (tokens, refresher) = refresher::spawn(
            wiring.exchanger.clone(),
            RefreshPolicy {
                expiry_margin: config.expiry_margin,
                ..RefreshPolicy::default()
            },
            metrics.clone(),
        );
        let check_credentials = wiring.watch.is_some().then(|| Arc::new(Notify::new()));
        let (watcher, reloads) = wiring
            .watch
            .zip(check_credentials.clone())
            .and_then(|(watch, check)| {
                reload::spawn(
                    watch,
                    wiring.exchanger,
                    tokens.clone(),
                    metrics.clone(),
                    check,
                )
            })
            .unzip();
        let proxy = proxy::ProxySetup::new(
            wiring.connector,
            proxy_addr,
            Upstream::new(base),
            tokens.clone(),
            metrics.clone(),
            proxy::ProxyLimits {
                upstream_timeout: config.upstream_timeout,
                body_timeout: config.body_timeout,
                max_upstream_connections: config.max_upstream_connections,
            },
        );
        let draining = Arc::new(AtomicBool::new(false));
        let admin = Admin::new(tokens.clone(), registry, draining.clone());

        let (stop, stopped) = watch::channel(false);
        let grace = config.shutdown_grace;
        let proxy_limits = server::Limits {
            header_timeout: config.header_timeout,
            max_connections,
            max_header_bytes: config.max_header_bytes,
            refusal: ProxyError::TooManyConnections.http1_bytes().into(),
            evict_waiting: false,
        };
        let admin_limits = server::Limits {
            header_timeout: ADMIN_HEADER_TIMEOUT,
            max_connections: ADMIN_MAX_CONNECTIONS,
            max_header_bytes: MIN_MAX_HEADER_BYTES,
            refusal: Bytes::from_static(ADMIN_REFUSAL),
            evict_waiting: true,
        };
        let connection_metrics = server::ConnectionMetrics {
            open: metrics.proxy_connections.clone(),
            refused: metrics.proxy_connections_refused.clone(),
        };
        let (proxy_done_tx, mut proxy_done) = watch::channel(false);
        // The admin listener outlives the proxy's drain, so probes see
        // "not ready" rather than a refused connection. Its own thread keeps
        // probes from waiting on the token's RSA signature, here.
        let admin_serving = Serving {
            grace: ADMIN_GRACE,
            limits: admin_limits,
            metrics: None,
            span: tracing::info_span!("admin", addr = %admin_addr),
        };
        let proxy_drained = async move {
            let _ = proxy_done.wait_for(|done| *done).await;
        };
        let admin_done = start_thread(
            "lanyard-admin".to_string(),
            into_std(admin_listener, "admin")?,
            server::Member::alone(&admin_serving.limits),
            move || admin,
            proxy_drained,
            &admin_serving,
        )?;
        let workers = start_proxy_workers(
            into_std(proxy_listener, "proxy")?,
            &proxy,
            config.worker_threads,
            &stopped,
            Serving {
                grace,
                limits: proxy_limits,
                metrics: Some(connection_metrics),
                span: tracing::info_span!("proxy", addr = %proxy_addr),
            },
        )?;
        let task = tokio::spawn(
            async move {
                let mut stopped = stopped;
                let _ = stopped.wait_for(|stop| *stop).await;
                draining.store(true, Ordering::Release);
                tracing::info!(
                    grace_s = grace.as_secs(),
                    "shutting down: draining in-flight requests"
                );
                let mut drained = Drained::Completely;
                for worker in workers {
                    // A worker gone without a word panicked: count it as cut off.
                    let outcome = worker.await.unwrap_or(Drained::GraceExpired);
                    if outcome == Drained::GraceExpired {
                        drained = Drained::GraceExpired;
                    }
                }
                match drained {
                    Drained::Completely => tracing::info!("every in-flight request finished"),
                    Drained::GraceExpired => {
                        tracing::warn!(
                            "the shutdown grace ran out; remaining requests were cut off"
                        )
                    }
                }
                let _ = proxy_done_tx.send(true);
                let _ = admin_done.await;
                refresher.abort();
                if let Some(watcher) = watcher {
                    watcher.abort();
                }
                drained
            }
            .instrument(tracing::info_span!("proxy", addr = %proxy_addr)),
        );
        tracing::info!(
            proxy = %proxy_addr,
            admin = %admin_addr,
            upstream = %base,
            version = env!("CARGO_PKG_VERSION"),
            worker_threads = config.worker_threads,
            "lanyard started"
        );
        Ok(Sidecar {
            proxy_addr,
            admin_addr,
            tokens,
            metrics,
            reloads,
            check_credentials,
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

/// Serves the proxy listener from `threads` threads, each with its own
/// single-threaded runtime and its own upstream connections, as nginx
/// runs worker processes: a request is read, forwarded and answered on one
/// thread, with no hand-offs between threads and no lock on its path. Each
/// accepts from the same listener, and one that accepts a connection while
/// another serves fewer hands it over, once, before its first read
/// ([`server::Member`]). Each reports how its drain ended on the returned
/// channels once `stopped` turns true.
fn start_proxy_workers(
    listener: std::net::TcpListener,
    proxy: &proxy::ProxySetup,
    threads: usize,
    stopped: &watch::Receiver<bool>,
    serving: Serving,
) -> Result<Vec<oneshot::Receiver<Drained>>, Failure> {
    let members = server::Member::group(&serving.limits, threads);
    let mut workers = Vec::with_capacity(threads);
    for (n, share) in members.into_iter().enumerate() {
        let listener = listener
            .try_clone()
            .map_err(|err| failed("cannot share the proxy listener", err))?;
        let proxy = proxy.clone();
        let mut stopped = stopped.clone();
        let shutdown = async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        workers.push(start_thread(
            format!("lanyard-proxy-{n}"),
            listener,
            share,
            move || Proxy::new(&proxy),
            shutdown,
            &serving,
        )?);
    }
    Ok(workers)
}

/// An accept loop's settings, and the span its thread logs in.
struct Serving {
    grace: Duration,
    limits: server::Limits,
    metrics: Option<server::ConnectionMetrics>,
    span: tracing::Span,
}

/// Serves `listener` on a new thread with its own single-threaded runtime,
/// until `shutdown` completes. The handler is built on that thread, as a
/// proxy's upstream connections belong to it. The receiver reports how the
/// drain ended.
fn start_thread<H: Handler>(
    name: String,
    listener: std::net::TcpListener,
    share: server::Member,
    handler: impl FnOnce() -> H + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
    serving: &Serving,
) -> Result<oneshot::Receiver<Drained>, Failure> {
    // The thread logs where its starter does (a test's capture, say), not
    // only to the global subscriber.
    let dispatch = tracing::dispatcher::get_default(tracing::Dispatch::clone);
    let (grace, limits, metrics) = (
        serving.grace,
        serving.limits.clone(),
        serving.metrics.clone(),
    );
    let span = serving.span.clone();
    let (done, drained) = oneshot::channel();
    let (started_tx, started) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let _logging = tracing::dispatcher::set_default(&dispatch);
            // Built on this thread, not the starter's: a runtime dropped on
            // a thread already running one (the starter's, should a step
            // here fail) panics.
            let (runtime, listener) = match runtime_with(listener) {
                Ok(started) => {
                    let _ = started_tx.send(Ok(()));
                    started
                }
                Err(failure) => {
                    let _ = started_tx.send(Err(failure));
                    return;
                }
            };
            let serve = async move {
                let handler = handler();
                server::serve(listener, handler, shutdown, grace, limits, metrics, share).await
            };
            let _ = done.send(runtime.block_on(serve.instrument(span)));
        })
        .map_err(|err| failed("cannot start a listener thread", err))?;
    // Waits the moment it takes to build a runtime, so a failure stops the
    // start rather than leaving a thread that serves nothing.
    started
        .recv()
        .unwrap_or_else(|_| Err(failed("a listener thread", "ended as it started")))?;
    Ok(drained)
}

/// A single-threaded runtime, and `listener` registered with it.
fn runtime_with(
    listener: std::net::TcpListener,
) -> Result<(tokio::runtime::Runtime, TcpListener), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| failed("cannot start a listener runtime", err))?;
    let listener = {
        let _runtime = runtime.enter();
        TcpListener::from_std(listener).map_err(|err| failed("cannot watch a listener", err))?
    };
    Ok((runtime, listener))
}

/// A listener bound on this runtime, to hand to a thread of its own.
fn into_std(listener: TcpListener, which: &str) -> Result<std::net::TcpListener, Failure> {
    listener.into_std().map_err(|err| {
        failed(
            &format!("cannot hand the {which} listener to its thread"),
            err,
        )
    })
}

fn failed(what: &str, err: impl std::fmt::Display) -> Failure {
    Failure::Runtime(format!("{what}: {err}"))
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr, Failure> {
    listener
        .local_addr()
        .map_err(|err| Failure::Runtime(format!("cannot read the listener address: {err}")))
}

/// Binds a listener whose accept queue holds `backlog` connections,
/// naming the setting when the address is unusable.
///
/// The proxy's backlog is its connection limit: an app's pool warming up
/// opens its connections at once, and a full queue drops SYNs, which the
/// client resends only after a second. The kernel caps it at
/// `net.core.somaxconn` (4096 by default since Linux 5.4).
pub fn bind(addr: SocketAddr, setting: &str, backlog: usize) -> Result<TcpListener, Failure> {
    let failed = |err: std::io::Error| {
        Failure::Runtime(format!("cannot listen on {addr} ({setting}): {err}"))
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(failed)?;
    // As std and tokio's own bind do: a restarted lanyard must not wait
    // out the old sockets' TIME_WAIT to listen again.
    socket.set_reuseaddr(true).map_err(failed)?;
    socket.bind(addr).map_err(failed)?;
    socket
        .listen(u32::try_from(backlog).unwrap_or(u32::MAX))
        .map_err(failed)
}

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
    /// (the terminal went away) and stops the sidecar, gracefully.
    async fn next_stop(&mut self, sidecar: &Sidecar) {
        while self.next().await == Signal::Reload {
            if !sidecar.reload_credentials() {
                return;
            }
        }
    }
}

/// Stops the sidecar on the first SIGTERM or SIGINT and waits for the
/// drain; a second one ends the wait at once.
async fn stop_on_signals(sidecar: Sidecar, signals: &mut Signals) -> Result<(), Failure> {
    signals.next_stop(&sidecar).await;
    sidecar.shutdown();
    let second = async {
        loop {
            if signals.next().await == Signal::Stop {
                break;
            }
            tracing::info!("shutting down: SIGHUP ignored");
        }
    };
    tokio::select! {
        result = sidecar.wait() => result.map(|_| ()),
        () = second => {
            tracing::warn!("second signal: exiting now; requests still in flight are cut off");
            Ok(())
        }
    }
}

/// `lanyard run`: the sidecar until SIGTERM or SIGINT.
pub async fn run(config: &Config) -> Result<(), Failure> {
    let mut signals = Signals::install()?;
    let wiring = crate::commands::wire(config)?;
    let proxy = bind(config.listen, "LANYARD_LISTEN", config.max_connections)?;
    let admin = bind(config.admin_listen, "LANYARD_ADMIN_LISTEN", ADMIN_BACKLOG)?;
    let sidecar = Sidecar::start(config, wiring, proxy, admin)?;
    stop_on_signals(sidecar, &mut signals).await
}

/// The demo account's identity on the embedded mock.
pub const DEMO_CLIENT_ID: &str = "demo-client";
pub const DEMO_ORGANIZATION: &str = "org-demo";
/// The project the demo account is a member of, and one it is not.
pub const DEMO_PROJECT: &str = "proj-demo";
pub const DEMO_OTHER_PROJECT: &str = "proj-other";
/// A published rule in the demo project.
pub const DEMO_RULE: &str = "0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10";

/// The embedded mock and the sidecar wired to it.
pub struct Demo {
    pub mock: crate::mock::MockService,
    pub sidecar: Sidecar,
}

impl Demo {
    /// Starts the mock on a loopback port, makes a key pair and an account
    /// for it, and starts the sidecar against the mock.
    pub async fn start(
        config: &Config,
        proxy: TcpListener,
        admin: TcpListener,
    ) -> Result<Demo, Failure> {
        use crate::config::TargetUrl;
        use crate::credentials::{Credentials, parse_private_key};
        use crate::mock::{MockAccount, MockService, generate_rsa_key};

        let mock = MockService::start()
            .await
            .map_err(|e| failed("cannot start the mock service", e))?;
        let key = generate_rsa_key().map_err(|e| failed("demo key", e))?;
        mock.add_account(MockAccount {
            client_id: DEMO_CLIENT_ID.into(),
            organization_id: DEMO_ORGANIZATION.into(),
            public_key_der: key.public_der.clone(),
            roles: vec!["verifications.api".into(), "credentials.api".into()],
            projects: vec![DEMO_PROJECT.into()],
        });
        mock.add_rule(DEMO_PROJECT, DEMO_RULE);

        let mut config = config.clone();
        config.service_api_url =
            Some(TargetUrl::parse(&mock.api_url(), false).map_err(|e| failed("mock URL", e))?);
        let credentials = Credentials {
            client_id: DEMO_CLIENT_ID.into(),
            organization_id: DEMO_ORGANIZATION.into(),
            iam_audience: mock.audience(),
            token_uri: TargetUrl::parse(&mock.token_url(), true)
                .map_err(|e| failed("mock URL", e))?,
            key: Arc::new(
                parse_private_key(key.private_pem.expose()).map_err(|e| failed("demo key", e))?,
            ),
        };
        // Built when the settings were loaded; a Config made by hand (a
        // test's) may lack it.
        let tls = match &config.tls {
            Some(tls) => tls.clone(),
            None => crate::http_client::tls_config(config.ca_file.as_deref())
                .map_err(Failure::Runtime)?,
        };
        let wiring = crate::commands::wire_with(&config, credentials, tls);
        let sidecar = Sidecar::start(&config, wiring, proxy, admin)?;
        Ok(Demo { mock, sidecar })
    }

    /// Where everything listens, and three requests to try.
    pub fn banner(&self) -> String {
        let proxy = self.sidecar.proxy_addr;
        let rule_path = |project: &str| {
            format!(
                "http://{proxy}/organizations/{DEMO_ORGANIZATION}/projects/{project}/verifications/{DEMO_RULE}"
            )
        };
        format!(
            "lanyard demo: the sidecar against an embedded mock of the service\n\
             \n\
             \x20 proxy   http://{proxy}  ->  {api}  (adds Authorization: Bearer <token>)\n\
             \x20 admin   http://{admin}/healthz  /readyz  /metrics\n\
             \x20 mock    {base}  (token endpoint {token})\n\
             \x20 account {DEMO_CLIENT_ID}, roles verifications.api and credentials.api, member of {DEMO_PROJECT} only\n\
             \n\
             Try, from another terminal:\n\
             \n\
             \x20 # start a verification session through the sidecar\n\
             \x20 TX=$(curl -s -X POST {start} | sed -E 's/.*\"transaction_id\":\"([^\"]+)\".*/\\1/'); echo \"$TX\"\n\
             \x20 # poll it (a simulated wallet presents with: curl -s -X POST {base}/mock/wallet/$TX/present)\n\
             \x20 curl -s -w '\\n' {start}/sessions/$TX\n\
             \x20 # a project the account is not a member of: 403 saying what is missing\n\
             \x20 curl -s -i -w '\\n' {other}\n\
             \n\
             Stop with Ctrl-C.\n",
            api = self.mock.api_url(),
            admin = self.sidecar.admin_addr,
            base = self.mock.base_url(),
            token = self.mock.token_url(),
            start = rule_path(DEMO_PROJECT),
            other = rule_path(DEMO_OTHER_PROJECT),
        )
    }
}

/// `lanyard demo` (and `DEMO_MOCK=true lanyard run`): the mock and the
/// sidecar until SIGTERM or SIGINT.
pub async fn demo(config: &Config) -> Result<(), Failure> {
    let mut signals = Signals::install()?;
    let proxy = bind(config.listen, "LANYARD_LISTEN", config.max_connections)?;
    let admin = bind(config.admin_listen, "LANYARD_ADMIN_LISTEN", ADMIN_BACKLOG)?;
    let demo = Demo::start(config, proxy, admin).await?;
    // Ignore a closed stdout: the banner is a courtesy.
    let _ = writeln!(std::io::stdout().lock(), "{}", demo.banner());
    let Demo { mock, sidecar } = demo;
    let result = stop_on_signals(sidecar, &mut signals).await;
    drop(mock);
    result
}
