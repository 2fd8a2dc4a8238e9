//! Single use of codes on this replica, and the revocation of what a
//! replayed code gave (RFC 6749 §4.1.2; docs/oidc.md, "Single use").

use std::collections::HashMap;
use std::sync::PoisonError;

use crate::verifier::oidc::sealed::Code;
use crate::verifier::oidc::{Provider, TOKEN_LIFETIME};

/// Codes redeemed on this replica and not yet expired, at most: a minute
/// of logins at well beyond what a replica completes. Past it, a token
/// request is answered 503 rather than a code forgotten early (which would
/// let it be redeemed twice).
pub const MAX_REDEEMED: usize = 100_000;
/// Logins whose code was presented again on this replica and whose access
/// tokens have not all expired yet, at most. Each is a replayed code of a
/// registered client's, so they are rare; past the bound, the revocation
/// closest to its end is forgotten first.
pub const MAX_REVOKED: usize = 10_000;

/// Codes redeemed here, by id (the login's: every code of one login has
/// the same), with their expiry (Unix seconds); and the logins revoked
/// here because one of their codes came again, with when the last access
/// token issued from them expires.
#[derive(Debug, Default)]
pub struct Redeemed {
    pub(super) codes: HashMap<String, u64>,
    pub(super) revoked: HashMap<String, u64>,
}

impl Redeemed {
    /// Records `code`'s redemption; `Err(true)` if it was redeemed before,
    /// and the login is then revoked: its access tokens are refused here
    /// from now on; `Err(false)` if there is no room.
    pub(crate) fn take(&mut self, code: &Code, now: u64) -> Result<(), bool> {
        if self.codes.contains_key(&code.id) {
            self.revoke(&code.id, code.expires_at + TOKEN_LIFETIME, now);
            return Err(true);
        }
        if self.codes.len() >= MAX_REDEEMED {
            self.codes.retain(|_, expires| *expires > now);
            if self.codes.len() >= MAX_REDEEMED {
                return Err(false);
            }
        }
        self.codes.insert(code.id.clone(), code.expires_at);
        Ok(())
    }

    /// Forgets a code taken by a redemption that did not spend it.
    pub(crate) fn give_back(&mut self, id: &str) {
        self.codes.remove(id);
    }

    /// Whether the login `grant` (a code's id, which its access tokens
    /// carry) was revoked here.
    pub(crate) fn is_revoked(&self, grant: &str) -> bool {
        self.revoked.contains_key(grant)
    }

    fn revoke(&mut self, grant: &str, until: u64, now: u64) {
        if self.revoked.len() >= MAX_REVOKED && !self.revoked.contains_key(grant) {
            self.revoked.retain(|_, until| *until > now);
            if self.revoked.len() >= MAX_REVOKED {
                let soonest = self
                    .revoked
                    .iter()
                    .min_by_key(|(_, until)| **until)
                    .map(|(grant, _)| grant.clone());
                if let Some(soonest) = soonest {
                    self.revoked.remove(&soonest);
                }
            }
        }
        self.revoked.insert(grant.to_string(), until);
    }

    /// Forgets the codes and revocations past their time.
    pub(crate) fn sweep(&mut self, now: u64) {
        self.codes.retain(|_, expires| *expires > now);
        self.revoked.retain(|_, until| *until > now);
    }
}

/// A code taken for a redemption under way. Taken before the service is
/// asked, so that two requests with one code cannot both be served here;
/// given back when the redemption ends without spending it, answered
/// `temporarily_unavailable` (which invites the client to send the code
/// again: nothing was issued for it) or abandoned by a client that went
/// away before its answer.
pub(super) struct Taking<'a> {
    pub provider: &'a Provider,
    pub id: Option<String>,
}

impl Taking<'_> {
    /// The code is spent: its answer was given, or it can never be.
    pub fn spend(mut self) {
        self.id = None;
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.provider
                .redeemed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .give_back(&id);
        }
    }
}
