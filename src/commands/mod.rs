//! The commands, each from its own configuration (docs/commands.md):
//!
//! - `run`: `lanyard run`, the proxy, until a signal stops it.
//! - `verifier`: `lanyard verifier`, the verifier page and its API.
//! - [`demo`]: `lanyard demo` (and `run` or `verifier` with `DEMO_MOCK`):
//!   the embedded mock with the proxy and the verifier wired to it.
//! - `token`: one token on stdout, for scripts.
//! - `check`: settings, credentials, a token and the upstream, as a report.
//! - `healthcheck`: a running lanyard's `/readyz`, for the image's
//!   `HEALTHCHECK`.

mod check;
pub mod demo;
mod healthcheck;
mod run;
mod token;
mod verifier;

pub use check::{CheckLine, CheckReport, CheckStatus, check};
pub use healthcheck::{Health, healthcheck};
pub use run::run;
pub use token::token;
pub use verifier::verifier;
