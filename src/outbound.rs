//! Outbound HTTP: rustls with the system roots plus `LANYARD_CA_FILE`, one
//! connector for the token exchange and the proxy, and hyper-util's pooled
//! client for the token exchange (the proxy pools its own, `pool.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Sent on every outbound request lanyard makes on its own behalf.
pub const USER_AGENT: &str = concat!("lanyard/", env!("CARGO_PKG_VERSION"));

/// How long an idle outbound connection is kept: below the idle timeouts
/// common in front of APIs (AWS ALB 60 s, nginx 75 s), so that lanyard
/// closes first and rarely races an upstream closing a connection just as
/// it is reused. For the proxy's pool and the token endpoint's client alike.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(50);

/// Connecting takes milliseconds on a working network; waiting longer only
/// delays the error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The connector every outbound request uses.
pub type Connector = HttpsConnector<HttpConnector>;

/// Builds the TLS client configuration: the system's roots plus the PEM
/// certificates in `ca_file`, if given.
pub fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let roots = roots(ca_file)?;
    if roots.is_empty() {
        tracing::warn!(
            "no trusted CA certificates: https to the token endpoint or upstream will fail; install the system CA bundle or set LANYARD_CA_FILE"
        );
    }
    client_config(roots)
}

/// The system's roots plus the PEM certificates in `ca_file`, if given:
/// what every outbound connection trusts.
pub fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for err in &native.errors {
        tracing::debug!(error = %err, "a system CA certificate could not be loaded");
    }
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    tracing::debug!(added, "system CA certificates loaded");

    if let Some(path) = ca_file {
        let name = path.display();
        let certs =
            ca_certificates(path).map_err(|why| format!("LANYARD_CA_FILE ({name}): {why}"))?;
        for cert in certs {
            roots.add(cert).map_err(|err| {
                format!("LANYARD_CA_FILE ({name}): a certificate is not usable: {err}")
            })?;
        }
    }
    Ok(roots)
}

/// A TLS client configuration trusting `roots`.
pub fn client_config(roots: RootCertStore) -> Result<rustls::ClientConfig, String> {
    // An explicit provider, so the library works without a process-wide
    // default being installed first.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS setup failed: {err}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// The certificates of a PEM bundle, or why there are none. Settings
/// validation reads the bundle too, so a bad one is reported with every
/// other problem before anything starts.
pub fn ca_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|err| format!("cannot be read: {err}"))?
        .collect::<Result<_, _>>()
        .map_err(|_| "is not a valid PEM certificate bundle".to_string())?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".to_string());
    }
    Ok(certs)
}

/// An HTTP/1.1 and HTTP/2 (by ALPN) connector over the given TLS config;
/// plain http is allowed because configuration already restricted it to
/// loopback.
pub fn connector(tls: rustls::ClientConfig) -> Connector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http)
}

/// A pooled client for bodies of type `B`.
pub fn client<B>(connector: Connector) -> Client<Connector, B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
{
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .build(connector)
}

/// Where an outbound request failed, for metrics and error responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Connect,
    Tls,
    Other,
}

impl FailureKind {
    /// The `kind` label of `lanyard_upstream_errors_total`.
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Tls => "tls",
            FailureKind::Other => "other",
        }
    }
}

/// Classifies a client error by walking its sources: a rustls error means
/// the TLS handshake failed, any other connect error is a network failure.
pub fn classify(err: &hyper_util::client::legacy::Error) -> FailureKind {
    if chain_has_rustls_error(err) {
        FailureKind::Tls
    } else if err.is_connect() {
        FailureKind::Connect
    } else {
        FailureKind::Other
    }
}

/// Whether the upstream closed or reset the connection after the request
/// was sent and before any response: what a pooled connection the upstream
/// dropped as idle at that moment looks like.
pub fn hyper_closed_unanswered(err: &hyper::Error) -> bool {
    use std::error::Error as _;
    use std::io::ErrorKind;
    err.is_incomplete_message()
        || err
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some_and(|io| {
                matches!(
                    io.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                )
            })
}

/// An error and its causes, outermost first. `io::Error::source` skips
/// the error it wraps, and hyper-rustls wraps tokio-rustls' `io::Error` in
/// another, so an `io::Error`'s wrapped error is visited too. Every walk
/// over an error chain in lanyard goes through here.
pub fn causes<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |err| {
        err.downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static))
            .or_else(|| err.source())
    })
}

/// An error with its causes, which carry the useful part ("connection
/// refused") under hyper's and the connector's generic messages; a cause
/// whose text the line already holds is not repeated.
pub fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    for cause in causes(err) {
        let cause_text = cause.to_string();
        if text.is_empty() {
            text = cause_text;
        } else if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
    }
    text
}

/// Whether a TLS error is somewhere in the chain.
pub fn chain_has_rustls_error(err: &(dyn std::error::Error + 'static)) -> bool {
    causes(err).any(|cause| cause.is::<rustls::Error>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_descend_through_a_wrapped_io_error_and_describe_each_once() {
        // hyper-rustls' shape: an io::Error wrapping a rustls error, under
        // another error that repeats its text.
        let tls = rustls::Error::General("bad certificate".into());
        let err = Outer(std::io::Error::other(tls));
        let found: Vec<String> = causes(&err).map(ToString::to_string).collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(chain_has_rustls_error(&err));
        assert_eq!(describe(&err), "outer: unexpected error: bad certificate");
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!chain_has_rustls_error(&plain));
        assert_eq!(causes(&plain).count(), 1);
    }
}
