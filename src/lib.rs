//! lanyard: a token sidecar for the credential issuance and verification
//! service. It holds a service account's private key, keeps a bearer token
//! fresh, and forwards local requests to the service with that token.
//!
//! # Layout
//!
//! - [`cli`]: command-line parsing (clap derive), mapped onto [`config::Flags`].
//! - [`config`]: every setting with its flag, variable and default, validated into one [`config::Config`].
//! - [`credentials`]: the credentials file, the `SA_*` overrides and the RSA key.
//! - [`token`]: assertion, exchange, the token cell and its refresher.
//! - [`http_client`]: rustls roots and the pooled hyper client.
//! - [`metrics`]: the Prometheus metrics, registered into an owned registry.
//! - [`commands`]: what `lanyard token` and `lanyard check` do.
//! - [`mock`]: the embedded mock of the service, used by the demo and the tests.
//! - [`secret`]: a string that never prints.

#![forbid(unsafe_code)]

pub mod cli;
pub mod commands;
pub mod config;
pub mod credentials;
pub mod http_client;
pub mod metrics;
pub mod mock;
pub mod secret;
pub mod token;

pub use secret::Secret;

/// Sent on every outbound request lanyard makes on its own behalf.
pub const USER_AGENT: &str = concat!("lanyard/", env!("CARGO_PKG_VERSION"));
