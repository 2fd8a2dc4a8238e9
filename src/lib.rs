//! lanyard: a token sidecar for the credential issuance and verification
//! service. It holds a service account's private key, keeps a bearer token
//! fresh, and forwards local requests to the service with that token; the
//! same token machinery serves the service's verification page (docs/verifier.md).
//!
//! # Layout
//!
//! Settings flow one way into the token cell; requests flow one way through
//! it (docs/architecture.md).
//!
//! - [`cli`]: command-line parsing: subcommands by clap derive, the settings' flags built from their declarations.
//! - [`config`]: every setting declared once (flag, variable, file key, default, help), validated, and built into each component's configuration and each command's; [`config::credentials`]: the credentials file, the `SA_*` overrides and the RSA key.
//! - [`hsm`]: keys that never leave a PKCS#11 token: the RFC 7512 URI and its PIN file, the module loaded once, the PIN flags read before any login, signing RS256 there, the session reopened after a failure.
//! - [`token`]: assertion, exchange, the token cell, the pure renewal schedule and the refresher task that applies it, and the one 401 rule.
//! - `throttle`: a repeating warning logged at most once an interval.
//! - [`outbound`]: rustls roots, the outbound connector, error chains walked once, failure classification.
//! - [`metrics`]: the Prometheus metrics, registered into an owned registry, and the request path's cached series.
//! - [`otel`]: OpenTelemetry tracing from the standard `OTEL_*` variables: every span and attribute exported, the W3C trace context, the bounded export queue and its drop count.
//! - [`accounts`]: the accounts a sidecar serves at run time, the route table from organization to account, and `SA_CREDENTIALS_DIR`'s watcher.
//! - [`access`]: settings into the connector, the token exchanger and the credentials watch: how lanyard reaches the service.
//! - [`process`]: the process composed of its components (token refresher, admin listener, and the proxy, the verifier or both, each from its own config type) and the drain that stops them.
//! - [`verifier`]: the reference verification page and its API, its assumptions about the service in one place; `verifier::oidc`, the page as an OpenID Connect provider (docs/oidc.md).
//! - [`commands`]: each command from its own configuration: `lanyard run`, `verifier`, `demo` (the mock, with the proxy and the verifier wired to it), `token`, `check` and `healthcheck`.
//! - `failure`: how a command failed, and its exit code.
//! - `files`: the small files lanyard reads, regular files only and bounded.
//! - `reload`: the credentials file watched and reloaded.
//! - [`target`]: the URL a token is sent to (the upstream's base, the token endpoint): checked and split once, request targets joined onto it within its prefix.
//! - [`proxy`]: the forwarding service: the absolute-form check, bodies and replay, hop-by-hop headers, 401 retry.
//! - [`client_body`]: a client's request body, bounded in time, its failures told apart from the upstream's.
//! - `collect`: a body read whole into one buffer, costing the bytes received however it is framed.
//! - `percent`: percent-decoding held to the letter, for URIs and lists users write.
//! - [`pool`]: upstream connections, pooled per proxy thread under one process-wide cap.
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`.
//! - [`server`]: the accept loop over a given listener (limits, per-client cap, refusals and their headers handed to it), thread balancing, one connection's protocols.
//! - `error`: lanyard's own error responses.
//! - [`mock`]: the embedded mock of the service, used by the demo and the tests.
//! - `secret`: a string that never prints.

#![forbid(unsafe_code)]

pub mod access;
pub mod accounts;
pub mod admin;
pub mod cli;
pub mod client_body;
mod collect;
pub mod commands;
pub mod config;
mod error;
mod failure;
mod files;
pub mod hsm;
pub mod metrics;
pub mod mock;
pub mod otel;
pub mod outbound;
mod percent;
pub mod pool;
pub mod process;
pub mod proxy;
mod reload;
mod secret;
pub mod server;
pub mod target;
mod throttle;
pub mod token;
pub mod verifier;

pub use failure::Failure;
pub use secret::{Secret, keep_memory_private};

pub use outbound::USER_AGENT;
