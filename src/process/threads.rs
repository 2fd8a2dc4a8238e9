//! The threads that serve a listener, each building its own runtime.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{AdminConfig, ListenAddr, ProxyConfig, VerifierConfig};
use crate::failure::Failure;
use crate::proxy::{self, Proxy};
use crate::server::{self, Drained, Handler, Listener, StdListener};

use super::unix::bind_unix;
use super::{ProxyListener, Shared};

/// Serves the proxy listener from `threads` threads, each with its own
/// single-threaded runtime and its own upstream connections, as nginx
/// runs worker processes: a request is read, forwarded and answered on one
/// thread, with no hand-offs between threads and no lock on its path. Each
/// accepts from the same listener, and one that accepts a connection while
/// another serves fewer hands it over, once, before its first read
/// ([`server::Member`]). Each drains with the client listeners.
pub(super) fn start_proxy_workers(
    listener: StdListener,
    proxy: &proxy::ProxySetup,
    threads: usize,
    shared: &Shared<'_>,
    serving: ServeOptions,
) -> Result<(), Failure> {
    let members = server::Member::group(&serving.limits, threads);
    for (n, share) in members.into_iter().enumerate() {
        let listener = listener
            .try_clone()
            .map_err(|err| failed("cannot share the proxy listener", err))?;
        let proxy = proxy.clone();
        start_thread(
            format!("lanyard-proxy-{n}"),
            listener,
            share,
            move || Proxy::new(&proxy),
            shared.watches.clients.clone(),
            shared.report(),
            &serving,
        )?;
    }
    Ok(())
}

/// An accept loop's settings, and the span its thread logs in.
pub(super) struct ServeOptions {
    pub(super) grace: Duration,
    pub(super) limits: server::Limits,
    pub(super) metrics: Option<server::ConnectionMetrics>,
    pub(super) span: tracing::Span,
    /// A client listener's `Watches::accepting`, held until its accept
    /// loop closes the listener.
    pub(super) accepting: Option<drain::Watch>,
}

/// Serves `listener` on a new thread with its own single-threaded runtime,
/// until the drain is signalled; the thread holds `drain` until its
/// connections have drained, and tells `report` how that ended. The
/// handler is built on that thread, as a proxy's upstream connections
/// belong to it.
pub(super) fn start_thread<H: Handler>(
    name: String,
    listener: StdListener,
    share: server::Member,
    handler: impl FnOnce() -> H + Send + 'static,
    drain: drain::Watch,
    report: impl FnOnce(Drained) + Send + 'static,
    serving: &ServeOptions,
) -> Result<(), Failure> {
    // The thread logs where its starter does (a test's capture, say), not
    // only to the global subscriber.
    let dispatch = tracing::dispatcher::get_default(tracing::Dispatch::clone);
    let (grace, limits, metrics) = (
        serving.grace,
        serving.limits.clone(),
        serving.metrics.clone(),
    );
    let span = serving.span.clone();
    let accepting = serving.accepting.clone();
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
            let signaled = drain.clone().signaled();
            let serve = async move {
                let handler = handler();
                let shutdown = async move {
                    drop(signaled.await);
                    accepting
                };
                server::serve(listener, handler, shutdown, grace, limits, metrics, share).await
            };
            // Entered once for the thread's life rather than on each poll
            // of `serve` (`Instrumented`): every task this runtime runs is
            // the listener's, and entering a span on every wake-up cost
            // about 1% of a proxied request's CPU (docs/performance.md).
            let _listener = span.enter();
            report(runtime.block_on(serve));
            // Released only now, with every connection closed.
            drop(drain);
        })
        .map_err(|err| failed("cannot start a listener thread", err))?;
    // Waits the moment it takes to build a runtime, so a failure stops the
    // start rather than leaving a thread that serves nothing.
    started
        .recv()
        .unwrap_or_else(|_| Err(failed("a listener thread", "ended as it started")))
}

/// A single-threaded runtime, and `listener` registered with it.
fn runtime_with(listener: StdListener) -> Result<(tokio::runtime::Runtime, Listener), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| failed("cannot start a listener runtime", err))?;
    let listener = {
        let _runtime = runtime.enter();
        listener
            .into_tokio()
            .map_err(|err| failed("cannot watch a listener", err))?
    };
    Ok((runtime, listener))
}

/// A listener bound on this runtime, to hand to a thread of its own.
pub(super) fn into_std(listener: Listener, which: &str) -> Result<StdListener, Failure> {
    listener.into_std().map_err(|err| {
        failed(
            &format!("cannot hand the {which} listener to its thread"),
            err,
        )
    })
}

pub(crate) fn failed(what: &str, err: impl std::fmt::Display) -> Failure {
    Failure::Runtime(format!("{what}: {err}"))
}

pub(super) fn local_addr(listener: &TcpListener) -> Result<SocketAddr, Failure> {
    listener
        .local_addr()
        .map_err(|err| Failure::Runtime(format!("cannot read the listener address: {err}")))
}

/// The admin listener, as `LANYARD_ADMIN_LISTEN` (or the command's
/// default) names it.
pub fn bind_admin(config: &AdminConfig) -> Result<TcpListener, Failure> {
    bind(config.listen, "LANYARD_ADMIN_LISTEN", super::ADMIN_BACKLOG)
}

/// The proxy listener, as `LANYARD_LISTEN` names it: an address, or a
/// Unix socket with `LANYARD_LISTEN_MODE`.
pub fn bind_proxy(config: &ProxyConfig) -> Result<ProxyListener, Failure> {
    match &config.listen {
        ListenAddr::Tcp(addr) => {
            bind(*addr, "LANYARD_LISTEN", config.max_connections).map(ProxyListener::from)
        }
        ListenAddr::Unix(path) => {
            let (listener, file) = bind_unix(path, config.listen_mode)?;
            Ok(ProxyListener {
                listener: Listener::Unix(listener),
                socket: Some(file),
            })
        }
    }
}

/// The verifier's listener, named by the setting that chose its address
/// (`LANYARD_VERIFIER_LISTEN` or `PORT`) when it cannot be used.
pub fn bind_verifier(config: &VerifierConfig) -> Result<TcpListener, Failure> {
    bind(config.listen, config.listen_setting, config.max_connections)
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
