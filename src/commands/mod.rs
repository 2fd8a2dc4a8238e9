//! The one-shot commands: `lanyard token`, `lanyard check` and
//! `lanyard healthcheck` (docs/commands.md).
//!
//! - `token`: one token on stdout, for scripts.
//! - `check`: settings, credentials, a token and the upstream, as a report.
//! - `healthcheck`: a running lanyard's `/readyz`, for the image's
//!   `HEALTHCHECK`.

mod check;
mod healthcheck;
mod token;

pub use check::{CheckLine, CheckReport, CheckStatus, check};
pub use healthcheck::{Health, healthcheck};
pub use token::token;
