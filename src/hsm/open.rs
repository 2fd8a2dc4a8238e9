//! Opening a key on a token: the token found by its label, its PIN flags
//! read before any login, one session logged in as the user, the private
//! key found by label and id and checked (RSA, allowed to sign, 2048 bits
//! or more). Only public attributes are read: the modulus and exponent,
//! from the private key object or its public twin.

use cryptoki::context::Pkcs11;
use cryptoki::error::{Error, RvError};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::{Slot, TokenInfo};
use cryptoki::types::RawAuthPin;

use super::error::{HsmError, describe};
use super::uri::{KeyUri, LibrarySeen, TokenSeen};

/// The size floor for RS256, as for a PEM key.
pub const MIN_KEY_BITS: usize = 2048;

/// A logged-in session and the key it signs with.
pub(super) struct Opened {
    pub(super) session: Session,
    pub(super) key: ObjectHandle,
    pub(super) public: PublicKey,
}

/// The key's public half, as the token gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// Big-endian, leading zeros removed.
    pub modulus: Vec<u8>,
    /// `None` when the token does not show it; signatures are then made
    /// but not checked here.
    pub exponent: Option<Vec<u8>>,
}

impl PublicKey {
    /// The modulus's size in bits.
    pub fn bits(&self) -> usize {
        match self.modulus.first() {
            Some(first) => (self.modulus.len() - 1) * 8 + (8 - first.leading_zeros() as usize),
            None => 0,
        }
    }
}

/// The user PIN flags of a token (PKCS#11 `CK_TOKEN_INFO.flags`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinFlags {
    pub count_low: bool,
    pub final_try: bool,
    pub locked: bool,
}

impl PinFlags {
    fn of(info: &TokenInfo) -> PinFlags {
        PinFlags {
            count_low: info.user_pin_count_low(),
            final_try: info.user_pin_final_try(),
            locked: info.user_pin_locked(),
        }
    }
}

/// Whether lanyard may try the PIN. A container that exits is restarted,
/// and each restart would try again: on a real HSM that ends with a locked
/// PIN, so a locked PIN or one with a single try left is never tried.
/// `Ok(true)` when it may, but earlier tries have failed (`COUNT_LOW`).
pub fn may_log_in(flags: PinFlags, token: &str) -> Result<bool, HsmError> {
    if flags.locked {
        return Err(HsmError::PinLocked {
            token: token.into(),
        });
    }
    if flags.final_try {
        return Err(HsmError::PinFinalTry {
            token: token.into(),
        });
    }
    Ok(flags.count_low)
}

/// Where a key is, for messages.
pub(super) struct Place<'a> {
    pub(super) uri: &'a KeyUri,
    pub(super) module: &'a str,
}

impl Place<'_> {
    fn token(&self) -> String {
        self.uri.token.clone()
    }

    fn object(&self) -> String {
        self.uri.object_description()
    }

    fn failed(&self, call: &'static str, err: &Error) -> HsmError {
        HsmError::Token {
            token: self.token(),
            module: self.module.into(),
            call,
            rv: describe(err),
        }
    }
}

/// Opens a session on the URI's token, logs in and finds the key.
pub(super) fn open(
    context: &Pkcs11,
    place: &Place,
    pin: Option<&RawAuthPin>,
) -> Result<Opened, HsmError> {
    check_library(context, place)?;
    let slot = find_token(context, place)?;
    let info = context
        .get_token_info(slot)
        .map_err(|err| place.failed("C_GetTokenInfo", &err))?;
    // Read-only: signing needs no more, and a read-only session cannot
    // change the token whatever goes wrong.
    let session = context
        .open_ro_session_no_drop(slot)
        .map_err(|err| place.failed("C_OpenSession", &err))?;
    let opened = log_in(&session, &info, place, pin)
        .and_then(|()| find_key(&session, place))
        .and_then(|key| Ok((key, check_key(&session, key, place)?)));
    match opened {
        Ok((key, public)) => Ok(Opened {
            session,
            key,
            public,
        }),
        Err(err) => {
            let _ = session.close();
            Err(err)
        }
    }
}

/// The library is the one the URI's `library-*` attributes name, if any.
fn check_library(context: &Pkcs11, place: &Place) -> Result<(), HsmError> {
    if !place.uri.library.given() {
        return Ok(());
    }
    let info = context
        .get_library_info()
        .map_err(|err| place.failed("C_GetInfo", &err))?;
    let version = info.library_version();
    let seen = LibrarySeen {
        manufacturer: info.manufacturer_id(),
        description: info.library_description(),
        version: (version.major(), version.minor()),
    };
    match place.uri.library.mismatch(&seen) {
        None => Ok(()),
        Some(why) => Err(HsmError::LibraryMismatch {
            module: place.module.into(),
            why,
        }),
    }
}

/// The slot whose token has the URI's label and its other attributes;
/// else the tokens present.
fn find_token(context: &Pkcs11, place: &Place) -> Result<Slot, HsmError> {
    let slots = context
        .get_slots_with_initialized_token()
        .map_err(|err| place.failed("C_GetSlotList", &err))?;
    let mut present = Vec::new();
    for slot in slots {
        let info = context
            .get_token_info(slot)
            .map_err(|err| place.failed("C_GetTokenInfo", &err))?;
        let seen = TokenSeen {
            label: info.label(),
            manufacturer: info.manufacturer_id(),
            model: info.model(),
            serial: info.serial_number(),
            slot_id: slot.id(),
        };
        if place.uri.names_token(&seen) {
            return Ok(slot);
        }
        present.push(place.uri.present_description(&seen));
    }
    Err(HsmError::TokenNotFound {
        wanted: place.uri.token_description(),
        module: place.module.into(),
        present,
    })
}

/// Logs the session in as the user, once the PIN flags allow a try.
fn log_in(
    session: &Session,
    info: &TokenInfo,
    place: &Place,
    pin: Option<&RawAuthPin>,
) -> Result<(), HsmError> {
    if !info.login_required() {
        return Ok(());
    }
    if may_log_in(PinFlags::of(info), &place.uri.token)? {
        tracing::warn!(
            token = %place.uri.token,
            "the token reports failed PIN tries (CKF_USER_PIN_COUNT_LOW); logging in once with the PIN file"
        );
    }
    let result = match pin {
        Some(pin) => session.login_with_raw(UserType::User, pin),
        // A PIN pad (protected authentication path) asks on the device.
        None if info.protected_authentication_path() => session.login(UserType::User, None),
        None => {
            return Err(HsmError::NoPin {
                token: place.token(),
            });
        }
    };
    match result {
        // Login is per application and token, not per session: another
        // key on this token (the credentials before a reload) may have
        // logged in already. This key's PIN is then not tried: a new PIN
        // file is checked only at the next login, after the module is
        // initialised again, where a wrong PIN is refused as any other.
        Ok(()) | Err(Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(()),
        Err(err) => Err(login_failed(&err, place)),
    }
}

/// Why `C_Login` failed, as an error that says whether the PIN may be
/// offered again ([`HsmError::refuses_pin`]). Every failure is final
/// unless it proves the PIN never reached the token ([`pin_never_checked`]).
fn login_failed(err: &Error, place: &Place) -> HsmError {
    match err {
        Error::Pkcs11(RvError::PinIncorrect, _) => HsmError::PinIncorrect {
            token: place.token(),
            pin_file: pin_file(place),
        },
        Error::Pkcs11(RvError::PinLocked, _) => HsmError::PinLocked {
            token: place.token(),
        },
        Error::Pkcs11(rv, _) if pin_never_checked(rv) => place.failed("C_Login", err),
        _ => HsmError::LoginRefused {
            token: place.token(),
            pin_file: pin_file(place),
            rv: describe(err),
        },
    }
}

/// The `C_Login` failures that prove the token never checked the PIN, so
/// that logging in again (after the module is initialised anew) cannot
/// bring it closer to locking:
/// - `CKR_TOKEN_NOT_PRESENT`: there is no token to check it;
/// - `CKR_DEVICE_REMOVED`: the token went away; a token back in the slot
///   that refuses the PIN says `CKR_PIN_INCORRECT`, which is final;
/// - `CKR_SESSION_HANDLE_INVALID`, `CKR_SESSION_CLOSED`: the library had no
///   session to log in on (a re-initialisation, or the token, ended it);
/// - `CKR_CRYPTOKI_NOT_INITIALIZED`: the library refused the call before
///   any token was involved.
///
/// Everything else is final, transient-looking ones included:
/// `CKR_DEVICE_ERROR`, `CKR_FUNCTION_FAILED`, `CKR_GENERAL_ERROR` and
/// vendor codes do not say whether the token counted the try before
/// failing (a module may even report a wrong PIN in its own code), and a
/// network HSM failing so at every refresh would spend a try each time.
/// `CKR_PIN_INVALID`, `CKR_PIN_LEN_RANGE` and `CKR_PIN_EXPIRED` are about
/// the PIN itself, which trying again cannot change.
fn pin_never_checked(rv: &RvError) -> bool {
    matches!(
        rv,
        RvError::TokenNotPresent
            | RvError::DeviceRemoved
            | RvError::SessionHandleInvalid
            | RvError::SessionClosed
            | RvError::CryptokiNotInitialized
    )
}

fn pin_file(place: &Place) -> String {
    place
        .uri
        .pin_file
        .as_ref()
        .map_or_else(|| "the PIN pad".into(), |p| p.display().to_string())
}

/// The template that finds the URI's key of `class`.
fn template(uri: &KeyUri, class: ObjectClass) -> Vec<Attribute> {
    let mut template = vec![Attribute::Class(class)];
    if let Some(label) = &uri.object {
        template.push(Attribute::Label(label.as_bytes().to_vec()));
    }
    if let Some(id) = &uri.id {
        template.push(Attribute::Id(id.clone()));
    }
    template
}

fn find_key(session: &Session, place: &Place) -> Result<ObjectHandle, HsmError> {
    let found = session
        .find_objects(&template(place.uri, ObjectClass::PRIVATE_KEY))
        .map_err(|err| place.failed("C_FindObjects", &err))?;
    match found.as_slice() {
        [key] => Ok(*key),
        [] => Err(HsmError::ObjectNotFound {
            object: place.object(),
            token: place.token(),
            module: place.module.into(),
        }),
        more => Err(HsmError::Ambiguous {
            count: more.len(),
            object: place.object(),
            token: place.token(),
        }),
    }
}

/// RSA, allowed to sign, 2048 bits or more; its public half.
fn check_key(session: &Session, key: ObjectHandle, place: &Place) -> Result<PublicKey, HsmError> {
    let wanted = [
        AttributeType::KeyType,
        AttributeType::Sign,
        AttributeType::Modulus,
        AttributeType::PublicExponent,
    ];
    let attributes = session
        .get_attributes(key, &wanted)
        .map_err(|err| place.failed("C_GetAttributeValue", &err))?;
    let (mut key_type, mut sign, mut public) = (None, None, read_public(&attributes));
    for attribute in &attributes {
        match attribute {
            Attribute::KeyType(t) => key_type = Some(*t),
            Attribute::Sign(s) => sign = Some(*s),
            _ => {}
        }
    }
    if let Some(other) = key_type.filter(|t| *t != KeyType::RSA) {
        let shown = other.to_string();
        return Err(HsmError::NotRsa {
            object: place.object(),
            token: place.token(),
            key_type: shown.strip_prefix("CKK_").unwrap_or(&shown).to_string(),
        });
    }
    // CKA_SIGN defaults to true where a token leaves it out.
    if sign == Some(false) {
        return Err(HsmError::NoSign {
            object: place.object(),
            token: place.token(),
        });
    }
    if public.is_none() {
        public = public_twin(session, place)?;
    }
    let public = public.ok_or_else(|| HsmError::NoModulus {
        object: place.object(),
        token: place.token(),
    })?;
    if public.bits() < MIN_KEY_BITS {
        return Err(HsmError::TooShort {
            object: place.object(),
            token: place.token(),
            bits: public.bits(),
        });
    }
    Ok(public)
}

/// The modulus and exponent among `attributes`, if the modulus is there.
fn read_public(attributes: &[Attribute]) -> Option<PublicKey> {
    let mut public = PublicKey {
        modulus: Vec::new(),
        exponent: None,
    };
    for attribute in attributes {
        match attribute {
            Attribute::Modulus(m) => public.modulus = strip_zeros(m),
            Attribute::PublicExponent(e) => public.exponent = Some(strip_zeros(e)),
            _ => {}
        }
    }
    (!public.modulus.is_empty()).then_some(public)
}

/// The public key object with the private key's label and id, for tokens
/// that do not show a private key's modulus.
fn public_twin(session: &Session, place: &Place) -> Result<Option<PublicKey>, HsmError> {
    let found = session
        .find_objects(&template(place.uri, ObjectClass::PUBLIC_KEY))
        .map_err(|err| place.failed("C_FindObjects", &err))?;
    let [twin] = found.as_slice() else {
        return Ok(None);
    };
    let attributes = session
        .get_attributes(
            *twin,
            &[AttributeType::Modulus, AttributeType::PublicExponent],
        )
        .map_err(|err| place.failed("C_GetAttributeValue", &err))?;
    Ok(read_public(&attributes))
}

fn strip_zeros(bytes: &[u8]) -> Vec<u8> {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    bytes[first..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_pin_or_its_final_try_is_never_tried() {
        let token = "prod";
        let flags = |count_low, final_try, locked| PinFlags {
            count_low,
            final_try,
            locked,
        };
        assert_eq!(may_log_in(flags(false, false, false), token), Ok(false));
        assert_eq!(may_log_in(flags(true, false, false), token), Ok(true));
        for final_try in [flags(false, true, false), flags(true, true, false)] {
            let err = may_log_in(final_try, token).unwrap_err();
            assert_eq!(
                err,
                HsmError::PinFinalTry {
                    token: "prod".into()
                }
            );
            assert!(err.to_string().contains("CKF_USER_PIN_FINAL_TRY"), "{err}");
            assert!(err.to_string().contains("does not spend it"), "{err}");
        }
        // Locked wins over a final try: it says what must be done.
        for locked in [flags(false, false, true), flags(true, true, true)] {
            let err = may_log_in(locked, token).unwrap_err();
            assert_eq!(
                err,
                HsmError::PinLocked {
                    token: "prod".into()
                }
            );
            assert!(err.to_string().contains("CKF_USER_PIN_LOCKED"), "{err}");
        }
    }

    #[test]
    fn a_login_failure_is_final_unless_the_pin_never_reached_the_token() {
        use cryptoki::context::Function;
        let uri = KeyUri {
            module: "/m.so".into(),
            token: "prod".into(),
            object: Some("sa-key".into()),
            id: None,
            pin_file: Some("/run/secrets/pin".into()),
            token_attributes: Default::default(),
            library: Default::default(),
        };
        let place = Place {
            uri: &uri,
            module: "/m.so",
        };
        let retried = [
            RvError::TokenNotPresent,
            RvError::DeviceRemoved,
            RvError::SessionHandleInvalid,
            RvError::SessionClosed,
            RvError::CryptokiNotInitialized,
        ];
        let last = [
            RvError::PinIncorrect,
            RvError::PinLocked,
            RvError::PinInvalid,
            RvError::PinLenRange,
            RvError::PinExpired,
            RvError::UserPinNotInitialized,
            RvError::DeviceError,
            RvError::FunctionFailed,
            RvError::GeneralError,
            RvError::VendorDefined(0x8000_0101),
            RvError::UnknownErrorCode(0x1234),
        ];
        let failed = |rv| login_failed(&Error::Pkcs11(rv, Function::Login), &place);
        for rv in retried {
            let err = failed(rv);
            assert!(!err.refuses_pin(), "{rv:?}: {err}");
            assert!(err.may_be_stale_view(), "{rv:?}: {err}");
            assert!(err.to_string().contains("failed in C_Login"), "{err}");
        }
        for rv in last {
            let err = failed(rv);
            assert!(err.refuses_pin(), "{rv:?}: {err}");
            assert!(!err.may_be_stale_view(), "{rv:?}: {err}");
        }
        let err = failed(RvError::PinExpired);
        assert_eq!(
            err.to_string(),
            "token `prod` refused the login with the PIN from /run/secrets/pin (CKR_PIN_EXPIRED); lanyard does not try it again, since the token may have counted it as a wrong try: correct the PIN or the token, then reload the credentials or restart lanyard"
        );
        let vendor = failed(RvError::VendorDefined(0x8000_0101)).to_string();
        assert!(
            vendor.contains("(CKR_VENDOR_DEFINED (0x80000101))"),
            "{vendor}"
        );
        // Not a PKCS#11 return value: cryptoki failed around the call.
        assert!(login_failed(&Error::NullFunctionPointer, &place).refuses_pin());
    }

    #[test]
    fn key_size_is_counted_from_the_modulus_first_bit() {
        let size = |modulus: Vec<u8>| {
            PublicKey {
                modulus: strip_zeros(&modulus),
                exponent: None,
            }
            .bits()
        };
        assert_eq!(size(vec![0x80; 256]), 2048);
        assert_eq!(size([vec![0], vec![0xc0; 256]].concat()), 2048);
        assert_eq!(size([vec![0x7f], vec![0xff; 255]].concat()), 2047);
        assert_eq!(size(vec![0xff; 128]), 1024);
        assert_eq!(size(vec![]), 0);
    }
}
