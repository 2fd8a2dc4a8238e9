//! Why a key in a PKCS#11 token cannot be used: one enum for start-up and
//! run time. Each message says what was looked for (module path, token
//! label, key label or id) and never the PIN; the caller puts the setting's
//! name in front (`SA_PRIVATE_KEY (...)`: ...).

use cryptoki::error::{Error, RvError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HsmError {
    #[error("is not a PKCS#11 URI lanyard can use: {0}")]
    Uri(String),
    #[error(
        "gives the PIN as `pin-value`, which lanyard refuses: a PIN in a setting shows in `ps e`, in the environment of every process the container starts, and in crash reports; put the PIN in a file (a Kubernetes Secret) and give pin-source=file:/path/to/pin"
    )]
    PinValue,
    #[error("the PIN file {path} (pin-source) cannot be read: {why}")]
    PinUnreadable { path: String, why: String },
    #[error(
        "module-path {path}: no such file (is the vendor's PKCS#11 module in the image, or mounted there?)"
    )]
    ModuleMissing { path: String },
    #[error("module-path {path} is not a PKCS#11 module: {why}")]
    NotAModule { path: String, why: String },
    #[error("the PKCS#11 module {path} failed in {call}: {rv}")]
    Module {
        path: String,
        call: &'static str,
        rv: String,
    },
    #[error("module-path {module} is not the library the URI names: {why}")]
    LibraryMismatch { module: String, why: String },
    /// `wanted` is the label and the other attributes the URI gives.
    #[error("no token {wanted} in the PKCS#11 module {module}; {}", present_list(.present))]
    TokenNotFound {
        wanted: String,
        module: String,
        present: Vec<String>,
    },
    #[error(
        "token `{token}` needs a PIN to log in and the URI gives none: add pin-source=file:/path/to/pin"
    )]
    NoPin { token: String },
    #[error(
        "the user PIN of token `{token}` is locked (CKF_USER_PIN_LOCKED); lanyard does not log in: have the token's security officer unlock or reset it"
    )]
    PinLocked { token: String },
    #[error(
        "the user PIN of token `{token}` has one try left (CKF_USER_PIN_FINAL_TRY); lanyard does not spend it, since a wrong PIN would lock the token: check the PIN file, then log in once by hand (e.g. pkcs11-tool --login --test) to reset the count"
    )]
    PinFinalTry { token: String },
    #[error(
        "token `{token}` refused the PIN from {pin_file} (CKR_PIN_INCORRECT); lanyard does not try it again, since every wrong try brings the token closer to locking the PIN: correct the PIN file"
    )]
    PinIncorrect { token: String, pin_file: String },
    #[error(
        "token `{token}` refused the login with the PIN from {pin_file} ({rv}); lanyard does not try it again, since the token may have counted it as a wrong try: correct the PIN or the token, then reload the credentials or restart lanyard"
    )]
    LoginRefused {
        token: String,
        pin_file: String,
        rv: String,
    },
    #[error("no private key {object} on token `{token}` (module {module})")]
    ObjectNotFound {
        object: String,
        token: String,
        module: String,
    },
    #[error(
        "{count} private keys on token `{token}` match {object}; add id=<CKA_ID> to the URI to name one"
    )]
    Ambiguous {
        count: usize,
        object: String,
        token: String,
    },
    #[error("the key {object} on token `{token}` is of type {key_type}; RS256 needs an RSA key")]
    NotRsa {
        object: String,
        token: String,
        key_type: String,
    },
    #[error(
        "the key {object} on token `{token}` is an RSA key of {bits} bits; 2048 bits or more are needed"
    )]
    TooShort {
        object: String,
        token: String,
        bits: usize,
    },
    #[error(
        "the key {object} on token `{token}` may not sign (its CKA_SIGN is false); import it with signing allowed"
    )]
    NoSign { object: String, token: String },
    #[error(
        "the modulus of key {object} on token `{token}` cannot be read, from it or from a public key of the same label and id, so its size cannot be checked"
    )]
    NoModulus { object: String, token: String },
    #[error(
        "a signature by key {object} on token `{token}` does not verify with the key's public half; the token is not signing with RSASSA-PKCS1-v1_5 SHA-256 as asked"
    )]
    BadSignature { object: String, token: String },
    #[error(
        "token `{token}` returned a signature of {returned} bytes for a key whose modulus is {modulus_len} bytes; an RS256 signature is never longer than the modulus (RFC 8017 §8.2.1)"
    )]
    SignatureLength {
        token: String,
        returned: usize,
        modulus_len: usize,
    },
    #[error(
        "the key {object} on token `{token}` is no longer the key lanyard started with (its modulus changed); reload the credentials or restart lanyard to use the new key"
    )]
    KeyChanged { object: String, token: String },
    #[error(
        "token `{token}` (module {module}) failed to sign: {rv}; the module is initialised again and the session reopened at the next attempt"
    )]
    SignFailed {
        token: String,
        module: String,
        rv: String,
    },
    #[error(
        "token `{token}` (module {module}): the previous signature has not returned; the HSM may be unreachable, and no new signature starts until that one returns"
    )]
    StillSigning { token: String, module: String },
    #[error("token `{token}` (module {module}) failed in {call}: {rv}")]
    Token {
        token: String,
        module: String,
        call: &'static str,
        rv: String,
    },
}

impl HsmError {
    /// The failure may come from the module's view of its tokens, which
    /// dates from its initialisation: a token or key made since, or one
    /// re-created, shows only once the module is initialised anew.
    pub fn may_be_stale_view(&self) -> bool {
        matches!(
            self,
            HsmError::TokenNotFound { .. }
                | HsmError::ObjectNotFound { .. }
                | HsmError::Token { .. }
        )
    }

    /// The module or its token failed in a call, or a signature failed:
    /// the device's trouble (a network HSM gone), not the settings', so
    /// a later try may succeed.
    pub fn is_unanswered(&self) -> bool {
        matches!(
            self,
            HsmError::Module { .. } | HsmError::Token { .. } | HsmError::SignFailed { .. }
        )
    }

    /// The token refused the PIN, or may have counted a try of it, or
    /// will not let it be tried: at run time it is never offered again,
    /// since each wrong try brings a real HSM closer to locking it. Only
    /// new credentials (a reload, a restart) try the PIN file again.
    pub fn refuses_pin(&self) -> bool {
        matches!(
            self,
            HsmError::PinIncorrect { .. }
                | HsmError::LoginRefused { .. }
                | HsmError::PinLocked { .. }
                | HsmError::PinFinalTry { .. }
        )
    }
}

fn present_list(labels: &[String]) -> String {
    if labels.is_empty() {
        return "the module shows no initialised token".into();
    }
    format!("tokens present: {}", labels.join(", "))
}

/// A cryptoki error in a line: the `CKR_` name the PKCS#11 specification
/// and every vendor's manual use, rather than cryptoki's paragraph.
pub fn describe(err: &Error) -> String {
    match err {
        Error::Pkcs11(rv, _) => ckr_name(rv),
        Error::LibraryLoading(err) => err.to_string(),
        other => other.to_string(),
    }
}

/// `PinIncorrect` -> `CKR_PIN_INCORRECT`; codes outside the specification
/// in hex, as vendors list them.
pub fn ckr_name(rv: &RvError) -> String {
    match rv {
        RvError::VendorDefined(code) => return format!("CKR_VENDOR_DEFINED ({code:#x})"),
        RvError::UnknownErrorCode(code) => return format!("an unknown return value ({code:#x})"),
        _ => {}
    }
    let mut out = String::from("CKR");
    for c in format!("{rv:?}").chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_values_are_named_as_the_specification_names_them() {
        assert_eq!(ckr_name(&RvError::PinIncorrect), "CKR_PIN_INCORRECT");
        assert_eq!(ckr_name(&RvError::DeviceRemoved), "CKR_DEVICE_REMOVED");
        assert_eq!(
            ckr_name(&RvError::KeyHandleInvalid),
            "CKR_KEY_HANDLE_INVALID"
        );
        assert_eq!(
            ckr_name(&RvError::VendorDefined(0x8000_0101)),
            "CKR_VENDOR_DEFINED (0x80000101)"
        );
        assert_eq!(
            describe(&Error::Pkcs11(
                RvError::TokenNotPresent,
                cryptoki::context::Function::Sign
            )),
            "CKR_TOKEN_NOT_PRESENT"
        );
    }

    #[test]
    fn token_not_found_lists_the_labels_present() {
        let err = HsmError::TokenNotFound {
            wanted: "labelled `prod`".into(),
            module: "/m.so".into(),
            present: vec!["`a`".into(), "`b`".into()],
        };
        assert_eq!(
            err.to_string(),
            "no token labelled `prod` in the PKCS#11 module /m.so; tokens present: `a`, `b`"
        );
        let none = HsmError::TokenNotFound {
            wanted: "labelled `prod`".into(),
            module: "/m.so".into(),
            present: vec![],
        };
        assert!(
            none.to_string()
                .ends_with("the module shows no initialised token")
        );
    }
}
