//! lanyard: a token sidecar for the credential issuance and verification
//! service. It holds a service account's private key, keeps a bearer token
//! fresh, and forwards local requests to the service with that token.
//!
//! # Layout
//!
//! - [`cli`]: command-line parsing: subcommands by clap derive, the settings' flags built from their declarations.
//! - [`config`]: every setting with its flag, variable and default, validated into one [`config::Config`].
//! - [`credentials`]: the credentials file, the `SA_*` overrides and the RSA key.
//! - [`token`]: assertion, exchange, the token cell and its refresher.
//! - [`http_client`]: rustls roots and the pooled hyper client.
//! - [`metrics`]: the Prometheus metrics, registered into an owned registry.
//! - [`commands`]: what `lanyard token` and `lanyard check` do.
//! - [`app`]: the sidecar assembled, `lanyard run` and `lanyard demo`.
//! - [`proxy`]: the forwarding service: token, header rewrite, streaming, 401 retry.
//! - [`client_body`]: a client's request body, bounded in time, its failures told apart from the upstream's.
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`.
//! - [`server`]: the accept loop over a given listener, with graceful shutdown.
//! - [`error`]: lanyard's own error responses.
//! - [`mock`]: the embedded mock of the service, used by the demo and the tests.
//! - [`secret`]: a string that never prints.

#![forbid(unsafe_code)]

pub mod admin;
pub mod app;
pub mod cli;
pub mod client_body;
pub mod commands;
pub mod config;
pub mod credentials;
pub mod error;
pub mod http_client;
pub mod metrics;
pub mod mock;
pub mod pool;
pub mod proxy;
pub mod reload;
pub mod secret;
pub mod server;
pub mod token;

pub use secret::Secret;

/// Sent on every outbound request lanyard makes on its own behalf.
pub const USER_AGENT: &str = concat!("lanyard/", env!("CARGO_PKG_VERSION"));
