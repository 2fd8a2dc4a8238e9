//! [`HsmKey`]: a private key in a PKCS#11 token, signing RS256 there, one
//! signature at a time on its one session, and finding its way back after
//! the token went away.
//!
//! Every call blocks on the module (a network HSM answers in milliseconds,
//! a stuck one later): async code calls it from a blocking thread.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cryptoki::mechanism::Mechanism;
use cryptoki::object::ObjectHandle;
use cryptoki::session::Session;
use cryptoki::types::RawAuthPin;
use tokio::time::Instant;

use super::error::{HsmError, describe};
use super::module::{Module, module};
use super::open::{Opened, Place, PublicKey, open};
use super::uri::{KeyUri, parse, read_pin};

/// A signature the token made, and what was learnt making it. Its
/// `Debug` leaves the signature out: over the binding label it is what the
/// verifier's derived session key comes from.
pub struct Proof {
    pub signature: Vec<u8>,
    /// How long the token took.
    pub took: Duration,
    /// Checked with the key's public half (the token shows its exponent).
    pub verified: bool,
}

impl fmt::Debug for Proof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proof")
            .field("signature", &"[redacted]")
            .field("took", &self.took)
            .field("verified", &self.verified)
            .finish()
    }
}

/// A key in a token, opened and checked.
pub struct HsmKey {
    uri: KeyUri,
    /// Read once from `pin-source` when the key is opened, kept for the
    /// logins after a re-initialisation; zeroed when dropped.
    pin: Option<RawAuthPin>,
    module: Arc<Module>,
    /// The key's public half when it was opened: a reopened key must be
    /// this one, whose signatures the token endpoint and the verifier's
    /// derived session key were made for.
    public: PublicKey,
    /// A signature is in the module: one at a time per session, and one
    /// that does not return (a hung network HSM) is not queued behind.
    signing: AtomicBool,
    /// Locked only by the signature holding [`Turn`], so never waited on.
    state: Mutex<State>,
}

/// The key's one signature at a time, claimed before the module is called
/// and given back when the call returns (or its thread unwinds). A caller
/// that finds it taken fails at once instead of waiting: the signature
/// before it may never return, and a thread per retry waiting behind it
/// would pile up until the runtime's blocking pool is spent.
struct Turn<'a>(&'a AtomicBool);

impl<'a> Turn<'a> {
    fn take(signing: &'a AtomicBool) -> Option<Turn<'a>> {
        signing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Turn(signing))
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The session, or why there is none.
enum State {
    Open {
        session: Session,
        key: ObjectHandle,
        /// The module initialisation it was opened under.
        generation: u64,
    },
    /// Signing failed on a session of this generation: the next signature
    /// re-initialises the module (unless another key did meanwhile) and
    /// opens a new session.
    Lost { generation: u64 },
    /// The token refused the PIN, may have counted a try of it, or will
    /// not let it be tried ([`HsmError::refuses_pin`]). It is never tried
    /// again: each wrong try brings a real HSM closer to locking it. New
    /// credentials (a reload) bring a new key.
    PinRefused(HsmError),
}

impl HsmKey {
    /// Opens the key a PKCS#11 URI names: reads the PIN file, loads and
    /// initialises the module, finds the token, checks the PIN flags, logs
    /// in once, and finds and checks the key.
    pub fn open(uri: &str) -> Result<HsmKey, HsmError> {
        let uri = parse(uri)?;
        let pin = uri.pin_file.as_deref().map(read_pin).transpose()?;
        let module = module(&uri.module)?;
        let earlier = module.generation();
        let opened = match open_in(&module, &uri, pin.as_ref()) {
            // The module was initialised before this key came (by the key
            // a reload replaces): its view of the tokens dates from then,
            // and a token re-created or added since shows only once it is
            // initialised anew. The other key's session goes with it; it
            // reopens one if it signs again.
            Err((seen, err)) if earlier.is_some() && err.may_be_stale_view() => {
                module.reinitialize(seen);
                open_in(&module, &uri, pin.as_ref())
            }
            opened => opened,
        };
        let (opened, generation) = opened.map_err(|(_, err)| err)?;
        let Opened {
            session,
            key,
            public,
        } = opened;
        Ok(HsmKey {
            uri,
            pin,
            module,
            public,
            signing: AtomicBool::new(false),
            state: Mutex::new(State::Open {
                session,
                key,
                generation,
            }),
        })
    }

    /// The module's path, as the URI gave it.
    pub fn module_path(&self) -> &str {
        self.module.shown()
    }

    /// The token's label.
    pub fn token(&self) -> &str {
        &self.uri.token
    }

    /// The key's label and id, as messages show them.
    pub fn object(&self) -> String {
        self.uri.object_description()
    }

    /// The key's modulus, big-endian, as the token showed it.
    pub fn public_modulus(&self) -> &[u8] {
        &self.public.modulus
    }

    /// The key's public exponent, when the token shows it.
    pub fn public_exponent(&self) -> Option<&[u8]> {
        self.public.exponent.as_deref()
    }

    /// The modulus's size in bits.
    pub fn bits(&self) -> usize {
        self.public.bits()
    }

    /// Signs `data` with RSASSA-PKCS1-v1_5 and SHA-256 (`CKM_SHA256_RSA_PKCS`,
    /// which is RS256), exactly as long as the modulus. Blocks. After a failure the next call reopens the
    /// session; after a refused PIN every call fails at once, and so does
    /// a call while another signature is in the module.
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, HsmError> {
        let Some(_turn) = Turn::take(&self.signing) else {
            return Err(HsmError::StillSigning {
                token: self.uri.token.clone(),
                module: self.module.shown().to_string(),
            });
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match &*state {
            State::PinRefused(err) => return Err(err.clone()),
            State::Lost { generation } => {
                self.module.reinitialize(*generation);
                self.reopen(&mut state)?;
                tracing::info!(token = %self.uri.token, "PKCS#11 session reopened");
            }
            State::Open { .. } => {}
        }
        let State::Open {
            session,
            key,
            generation,
        } = &*state
        else {
            return Err(self.sign_failed("no session".into()));
        };
        let generation = *generation;
        let signed = self.module.with(|_, current| {
            if current != generation {
                // Another key re-initialised the module: this session's
                // handle is gone, and may now name another's.
                return Err(self.sign_failed("CKR_SESSION_HANDLE_INVALID".into()));
            }
            session
                .sign(&Mechanism::Sha256RsaPkcs, *key, data)
                .map_err(|err| self.sign_failed(describe(&err)))
        });
        if signed.is_err() {
            *state = State::Lost { generation };
        }
        let modulus_len = self.public.modulus.len();
        to_modulus_length(signed?, modulus_len).map_err(|returned| HsmError::SignatureLength {
            token: self.uri.token.clone(),
            returned,
            modulus_len,
        })
    }

    /// Whether the token refused the PIN at run time, so that no signature
    /// will be made until new credentials bring a new key: a SIGHUP then
    /// reloads them even when no file changed. A signature in flight holds
    /// the state, and is no refusal.
    pub fn pin_refused(&self) -> bool {
        self.state
            .try_lock()
            .is_ok_and(|state| matches!(*state, State::PinRefused(_)))
    }

    /// Whether a signature is in the module now: async code asks before it
    /// starts a blocking thread for the next one, which would only fail.
    pub fn signing(&self) -> bool {
        self.signing.load(Ordering::Acquire)
    }

    /// Signs `data` and checks the signature with the key's public half,
    /// when the token shows its exponent: proof that the token signs
    /// RS256 with this key.
    pub fn sign_verified(&self, data: &[u8]) -> Result<Proof, HsmError> {
        let started = Instant::now();
        let signature = self.sign(data)?;
        let took = started.elapsed();
        let Some(exponent) = &self.public.exponent else {
            return Ok(Proof {
                signature,
                took,
                verified: false,
            });
        };
        use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
        let public = RsaPublicKeyComponents {
            n: &self.public.modulus,
            e: exponent,
        };
        public
            .verify(&RSA_PKCS1_2048_8192_SHA256, data, &signature)
            .map_err(|_| HsmError::BadSignature {
                object: self.object(),
                token: self.uri.token.clone(),
            })?;
        Ok(Proof {
            signature,
            took,
            verified: true,
        })
    }

    /// A new session after a lost one, logged in, with the same key, put
    /// in `state`; on failure, `state` says what the next attempt does.
    fn reopen(&self, state: &mut State) -> Result<(), HsmError> {
        let (next, outcome) = match open_in(&self.module, &self.uri, self.pin.as_ref()) {
            Ok((opened, generation)) if opened.public.modulus == self.public.modulus => {
                let open = State::Open {
                    session: opened.session,
                    key: opened.key,
                    generation,
                };
                (open, Ok(()))
            }
            Ok((opened, generation)) => {
                let _ = self
                    .module
                    .if_current(generation, || opened.session.close());
                let changed = HsmError::KeyChanged {
                    object: self.object(),
                    token: self.uri.token.clone(),
                };
                (State::Lost { generation }, Err(changed))
            }
            Err((_, err)) if err.refuses_pin() => (State::PinRefused(err.clone()), Err(err)),
            // Not found, gone, or a login that never reached the token:
            // looked for again next time, after another re-initialisation
            // (a token re-created on disk shows only then).
            Err((generation, err)) => (State::Lost { generation }, Err(err)),
        };
        *state = next;
        outcome
    }

    fn sign_failed(&self, rv: String) -> HsmError {
        HsmError::SignFailed {
            token: self.uri.token.clone(),
            module: self.module.shown().to_string(),
            rv,
        }
    }
}

/// An RSASSA-PKCS1-v1_5 signature is exactly as long as the modulus
/// (RFC 8017 §8.2.1: k octets), and a JWS verifier may refuse any other
/// length; some modules drop the leading zero bytes of a signature that
/// has them (one in 256 starts with one). A shorter one is padded back
/// with zeros, which is the same number; a longer one is refused with its
/// length: no valid signature is that long.
fn to_modulus_length(signature: Vec<u8>, modulus_len: usize) -> Result<Vec<u8>, usize> {
    match signature.len() {
        len if len == modulus_len => Ok(signature),
        len if len > modulus_len => Err(len),
        len => {
            let mut padded = vec![0; modulus_len - len];
            padded.extend_from_slice(&signature);
            Ok(padded)
        }
    }
}

/// Opens the URI's key on the module: the session and the generation it
/// was opened under; or why not, with the generation that saw it fail.
fn open_in(
    module: &Module,
    uri: &KeyUri,
    pin: Option<&RawAuthPin>,
) -> Result<(Opened, u64), (u64, HsmError)> {
    let mut seen = 0;
    module
        .with(|context, generation| {
            seen = generation;
            let place = Place {
                uri,
                module: module.shown(),
            };
            Ok((open(context, &place, pin)?, generation))
        })
        .map_err(|err| (seen, err))
}

impl Drop for HsmKey {
    /// Closes the session, which calls the module: it may block (a network
    /// HSM gone, or the module's lock held by a re-initialisation), and old
    /// credentials are often let go on the proxy's async threads (a reload
    /// replacing them, a request that still held them), so the closing is
    /// done on a blocking thread. It holds the module meanwhile; when the
    /// key was the module's last, the module's `C_Finalize` comes there
    /// too, unless this key's own handle on the module goes last.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let old = std::mem::replace(state, State::Lost { generation: 0 });
        if let State::Open {
            session,
            generation,
            ..
        } = old
        {
            let module = Arc::clone(&self.module);
            off_async(move || {
                // A session from before a re-initialisation is gone
                // already, and its handle may be another key's now.
                let _ = module.if_current(generation, || session.close());
            });
        }
    }
}

/// Runs `work`, which may block, on a blocking thread when called within
/// the tokio runtime (whose async threads must not block), else here.
fn off_async(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(work)),
        Err(_) => work(),
    }
}

impl fmt::Debug for HsmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsmKey")
            .field("module", &self.module.shown())
            .field("token", &self.uri.token)
            .field("object", &self.object())
            .field("bits", &self.bits())
            .field("pin", &"[redacted]")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_signature_at_a_time_and_the_next_is_refused_not_queued() {
        let signing = AtomicBool::new(false);
        let first = Turn::take(&signing).expect("free");
        assert!(signing.load(Ordering::Acquire));
        assert!(Turn::take(&signing).is_none(), "taken while in flight");
        drop(first);
        assert!(!signing.load(Ordering::Acquire));
        let again = Turn::take(&signing);
        assert!(again.is_some(), "free once the signature returned");
        drop(again);
        // Given back even when the signing thread unwinds.
        let unwound = std::panic::catch_unwind(|| {
            let _turn = Turn::take(&signing).unwrap();
            panic!("the module crashed");
        });
        assert!(unwound.is_err());
        assert!(Turn::take(&signing).is_some());
    }

    #[tokio::test]
    async fn closing_a_session_blocks_no_async_thread() {
        let (sent, ran_on) = std::sync::mpsc::channel();
        let here = std::thread::current().id();
        off_async(move || sent.send(std::thread::current().id()).unwrap());
        let ran_on = tokio::task::spawn_blocking(move || ran_on.recv().unwrap())
            .await
            .unwrap();
        assert_ne!(ran_on, here);
        // Outside the runtime (lanyard token's exit, tests), at once.
        let (sent, ran_on) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            off_async(move || sent.send(std::thread::current().id()).unwrap());
            assert_eq!(ran_on.recv().unwrap(), std::thread::current().id());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_proof_never_shows_its_signature() {
        let proof = Proof {
            signature: vec![0xab; 256],
            took: Duration::from_millis(3),
            verified: true,
        };
        assert_eq!(
            format!("{proof:?}"),
            "Proof { signature: \"[redacted]\", took: 3ms, verified: true }"
        );
    }

    #[test]
    fn a_signature_is_exactly_as_long_as_the_modulus() {
        let full: Vec<u8> = (1..=8).collect();
        assert_eq!(to_modulus_length(full.clone(), 8), Ok(full));
        // Leading zeros dropped by the module are put back.
        assert_eq!(
            to_modulus_length(vec![7, 8], 8),
            Ok(vec![0, 0, 0, 0, 0, 0, 7, 8])
        );
        assert_eq!(to_modulus_length(vec![], 3), Ok(vec![0, 0, 0]));
        // Longer than the modulus is no RS256 signature, zeros or not.
        assert_eq!(to_modulus_length(vec![0; 9], 8), Err(9));
        assert_eq!(to_modulus_length(vec![1; 257], 256), Err(257));
    }
}
