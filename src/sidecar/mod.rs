//! The process assembled: the token refresher and the admin listener, with
//! the proxy's threads, the verifier's thread or both, and the shutdown
//! sequence (README "Shutdown").
//!
//! - `threads`: each listener's threads, each with its own runtime.
//! - `signals`: SIGTERM, SIGINT and SIGHUP, `lanyard run` and `lanyard
//!   verifier`.

mod signals;
mod threads;

pub use signals::{Signal, Signals, run, run_verifier, stop_on_signals};
pub(crate) use threads::failed;
pub use threads::{bind, bind_admin, bind_proxy, bind_verifier};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::Failure;
use crate::access::ServiceAccess;
use crate::admin::Admin;
use crate::config::{Config, MIN_MAX_HEADER_BYTES};
use crate::error::ProxyError;
use crate::metrics::Metrics;
use crate::proxy;
use crate::reload;
use crate::server::{self, Drained};
use crate::token::TokenHandle;
use crate::token::refresher::{self, RefreshPolicy};
use crate::verifier::{MAX_SERVICE_CALLS, Verifier, VerifierSettings};

use threads::{ServeOptions, into_std, local_addr, start_proxy_workers, start_thread};

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
/// What a connection beyond the admin listener's limit is told (only when
/// every one of its connections is busy with a request), naming its own
/// limit; its length is counted here, not by hand.
fn admin_refusal() -> Bytes {
    let body = format!(
        "the admin listener is answering its {ADMIN_MAX_CONNECTIONS} connections' requests already; retry soon\n"
    );
    Bytes::from(format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ))
}

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
fn budget_file_descriptors(
    max_connections: usize,
    client_listeners: usize,
    outbound: usize,
) -> usize {
    let others = outbound + ADMIN_MAX_CONNECTIONS + SPARE_FILE_DESCRIPTORS;
    let wanted = max_connections
        .saturating_mul(client_listeners)
        .saturating_add(others);
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
    let fits = (limit.saturating_sub(others) / client_listeners).max(1);
    tracing::warn!(
        open_file_limit = limit,
        wanted,
        max_connections = fits,
        "the open-file limit cannot hold LANYARD_MAX_CONNECTIONS and LANYARD_MAX_UPSTREAM_CONNECTIONS together; serving at most max_connections client connections. Raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower the settings"
    );
    fits
}

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
        let proxy_addr = listeners.proxy.as_ref().map(local_addr).transpose()?;
        let verifier_addr = listeners
            .verifier
            .as_ref()
            .map(|(listener, _)| local_addr(listener))
            .transpose()?;
        let admin_addr = local_addr(&listeners.admin)?;
        let (metrics, registry) = Metrics::with_registry()
            .map_err(|err| Failure::Runtime(format!("cannot register metrics: {err}")))?;
        // Each client-facing listener may hold LANYARD_MAX_CONNECTIONS.
        let client_listeners =
            usize::from(proxy_addr.is_some()) + usize::from(verifier_addr.is_some());
        // The proxy's upstream connections, and the verifier's calls.
        let outbound = usize::from(proxy_addr.is_some()) * config.max_upstream_connections
            + usize::from(verifier_addr.is_some()) * MAX_SERVICE_CALLS;
        let max_connections =
            budget_file_descriptors(config.max_connections, client_listeners.max(1), outbound);

        let (tokens, refresher) = refresher::spawn(
            access.exchanger.clone(),
            RefreshPolicy {
                expiry_margin: config.expiry_margin,
                ..RefreshPolicy::default()
            },
            metrics.clone(),
        );
        let check_credentials = access.watch.is_some().then(|| Arc::new(Notify::new()));
        let (watcher, reloads) = access
            .watch
            .clone()
            .zip(check_credentials.clone())
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
        // Built before any thread starts, so that a failure here leaves
        // nothing to tear down.
        let verifier = match listeners.verifier {
            Some((listener, settings)) => {
                let verifier = Verifier::new(
                    &settings,
                    base,
                    &access,
                    tokens.clone(),
                    metrics.clone(),
                    config.upstream_timeout,
                    config.body_timeout,
                )?;
                Some((listener, verifier))
            }
            None => None,
        };
        let draining = Arc::new(AtomicBool::new(false));
        let admin = Admin::new(tokens.clone(), registry, draining.clone());

        let (stop, stopped) = watch::channel(false);
        let grace = config.shutdown_grace;
        let client_limits = server::Limits {
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
            refusal: admin_refusal(),
            evict_waiting: true,
        };
        let (clients_done_tx, mut clients_done) = watch::channel(false);
        // The admin listener outlives the client listeners' drain, so
        // probes see "not ready" rather than a refused connection. Its own
        // thread keeps probes from waiting on the token's RSA signature,
        // here.
        let admin_options = ServeOptions {
            grace: ADMIN_GRACE,
            limits: admin_limits,
            metrics: None,
            span: tracing::info_span!("admin", addr = %admin_addr),
        };
        let clients_drained = async move {
            let _ = clients_done.wait_for(|done| *done).await;
        };
        let admin_done = start_thread(
            "lanyard-admin".to_string(),
            into_std(listeners.admin, "admin")?,
            server::Member::alone(&admin_options.limits),
            move || admin,
            clients_drained,
            &admin_options,
        )?;
        let mut workers = Vec::new();
        if let (Some(listener), Some(addr)) = (listeners.proxy, proxy_addr) {
            let proxy = proxy::ProxySetup::new(
                access.connector.clone(),
                addr,
                base,
                tokens.clone(),
                metrics.clone(),
                proxy::ProxyLimits {
                    upstream_timeout: config.upstream_timeout,
                    body_timeout: config.body_timeout,
                    max_upstream_connections: config.max_upstream_connections,
                },
            );
            let connection_metrics = server::ConnectionMetrics {
                open: metrics.proxy_connections.clone(),
                refused: metrics.proxy_connections_refused.clone(),
            };
            workers.extend(start_proxy_workers(
                into_std(listener, "proxy")?,
                &proxy,
                config.worker_threads,
                &stopped,
                ServeOptions {
                    grace,
                    limits: client_limits.clone(),
                    metrics: Some(connection_metrics),
                    span: tracing::info_span!("proxy", addr = %addr),
                },
            )?);
        }
        if let (Some((listener, verifier)), Some(addr)) = (verifier, verifier_addr) {
            let options = ServeOptions {
                grace,
                limits: client_limits,
                metrics: None,
                span: tracing::info_span!("verifier", addr = %addr),
            };
            let mut stopped = stopped.clone();
            workers.push(start_thread(
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
            )?);
        }
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
                let _ = clients_done_tx.send(true);
                let _ = admin_done.await;
                refresher.abort();
                if let Some(watcher) = watcher {
                    watcher.abort();
                }
                drained
            }
            .instrument(tracing::info_span!("lanyard", admin = %admin_addr)),
        );
        tracing::info!(
            proxy = proxy_addr.map(tracing::field::display),
            verifier = verifier_addr.map(tracing::field::display),
            admin = %admin_addr,
            upstream = %base,
            version = env!("CARGO_PKG_VERSION"),
            worker_threads = config.worker_threads,
            "lanyard started"
        );
        Ok(Sidecar {
            proxy_addr,
            verifier_addr,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_refusal_declares_its_own_length_and_names_its_limit() {
        let refusal = admin_refusal();
        let text = std::str::from_utf8(&refusal).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        assert!(
            body.contains(&format!("its {ADMIN_MAX_CONNECTIONS} connections")),
            "{body}"
        );
    }
}
