//! From credentials to a fresh token: the assertion is signed, exchanged
//! at the token endpoint, and held in a cell the refresher keeps fresh.

pub mod assertion;
pub mod cell;
pub mod exchange;
pub mod refresher;

pub use assertion::{AssertionSigner, Clock, SystemClock};
pub use cell::{Token, TokenCell};
pub use exchange::{ExchangeError, ExchangeOptions, Exchanger, Issued};
pub use refresher::{RefreshPolicy, RefreshState, TokenHandle, TokenSource, Unavailable};
