//! From credentials to a fresh token: the assertion is signed, exchanged
//! at the token endpoint, and held in a cell the refresher keeps fresh.
//!
//! - [`assertion`]: the signed RS256 assertion (pure, takes a clock).
//! - [`exchange`]: the token request over HTTP and its classified failures.
//! - [`cell`]: the held token; one writer, lock-free readers.
//! - [`demand`]: an account kept on demand: its first token when first
//!   needed, no renewals once idle.
//! - [`schedule`]: when to renew, retry and force a renewal: a pure policy.
//! - [`refresher`]: the task that owns every token request and applies the
//!   schedule.
//! - `handle`: what the rest of lanyard holds: [`TokenHandle`] reads the
//!   token and the refresher's [`RefreshState`], and reports rejections.

pub mod assertion;
pub mod cell;
pub mod demand;
pub mod exchange;
mod handle;
pub mod refresher;
pub mod rejection;
pub mod schedule;

pub use assertion::{AssertionSigner, Clock, SystemClock};
pub use cell::{Token, TokenCell};
pub use demand::Demand;
pub use exchange::{ExchangeError, ExchangeOptions, Exchanger, Issued, TokenClient};
pub use refresher::{Keeping, RefreshPolicy, RefreshState, TokenHandle, TokenSource, Unavailable};
pub use rejection::{AfterRejection, RejectionRule, WhenNoNewToken};
