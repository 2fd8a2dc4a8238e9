//! Keys that never leave a PKCS#11 token (an HSM, a cloud KMS's PKCS#11
//! library, SoftHSM2): `SA_PRIVATE_KEY` or the credentials file's
//! `private_key` given as an RFC 7512 URI. This module owns everything
//! between that URI and a signature: the URI and its PIN file, the module
//! loaded once per process, the token, its PIN flags and the login, the
//! key's checks, and signing with the session reopened after a failure.
//! It knows nothing of credentials or assertions: config wraps an
//! [`HsmKey`] in its signing key, and token signs with that.
//!
//! - `uri`: the URI parsed, what it says of the token and the library
//!   matched against what the module shows (both pure), and the PIN file
//!   read.
//! - `error`: [`HsmError`], every way a key cannot be used, and PKCS#11
//!   return values named as the specification names them.
//! - `module`: one module per library per process, loaded once, finalized
//!   and initialised again when a token stops answering.
//! - `open`: a session on the token, the PIN flags read before any login,
//!   the key found and checked; the PIN rule (`open::may_log_in`) is pure.
//! - `key`: [`HsmKey`], which signs one signature at a time and reopens
//!   its session after a failure, never after a refused PIN.

mod error;
mod key;
mod module;
mod open;
mod uri;

pub use error::HsmError;
pub use key::{HsmKey, Proof};
pub use open::MIN_KEY_BITS;
pub use uri::{is_pkcs11_uri, pin_digest, pin_file_of};
