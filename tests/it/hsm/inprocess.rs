//! What only lanyard's library in-process can show about a key in a
//! token, run in a child that sees a SoftHSM2 of its own
//! ([`super::softhsm::in_child`]): signatures identical to the PEM key's,
//! and the session found again after the token, or the key in it, went
//! away or changed.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lanyard::config::credentials::{SigningKey, load_key, parse_private_key};
use lanyard::token::AssertionSigner;
use uuid::Uuid;

use super::softhsm::{MODULE, OBJECT, PIN, SoftHsm, TOKEN, in_child, is_child};
use crate::support::{fixture, fixture_path};

const SETTING: &str = "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY)";
/// How long the key has to open and sign, LANYARD_TOKEN_TIMEOUT's default.
const LIMIT: Duration = Duration::from_secs(10);

fn signer(key: SigningKey) -> AssertionSigner {
    AssertionSigner {
        client_id: "sa-unit".into(),
        audience: "https://iam.example/aud".into(),
        lifetime: Duration::from_secs(600),
        backdate: Duration::ZERO,
        key: Arc::new(key),
    }
}

/// RSASSA-PKCS1-v1_5 is deterministic: the same key signs the same input
/// alike wherever it is. So the assertion is byte for byte the PEM key's
/// (same header, same claims), and so is the verifier's derived session
/// key: replicas with the PEM and replicas with the HSM agree.
#[test]
fn a_key_imported_into_the_hsm_signs_and_derives_exactly_as_its_pem() {
    if !is_child() {
        let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
        return in_child(
            "inprocess::a_key_imported_into_the_hsm_signs_and_derives_exactly_as_its_pem",
            &hsm,
        );
    }
    let hsm = SoftHsm::of_parent();
    let in_hsm = load_key(&hsm.uri(), SETTING, LIMIT).unwrap();
    let pem = parse_private_key(&fixture("rsa2048.pkcs8.pem")).unwrap();
    assert_eq!(in_hsm.binding_secret(), pem.binding_secret());
    assert_eq!(in_hsm.bits(), 2048);
    let shown = format!("{in_hsm:?}");
    assert!(shown.contains("sa-key") && !shown.contains(PIN), "{shown}");

    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    let jti = Uuid::parse_str("0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10").unwrap();
    let from_hsm = signer(in_hsm).sign(at, jti).unwrap();
    let from_pem = signer(pem).sign(at, jti).unwrap();
    assert_eq!(from_hsm.expose(), from_pem.expose());
}

/// SoftHSM2 sees a token re-created on disk only once the module is
/// finalized and initialised again: the failure is reported, and the next
/// signature reopens everything and succeeds with the same key.
#[test]
fn a_token_that_went_away_is_found_again_at_the_next_signature() {
    if !is_child() {
        let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
        return in_child(
            "inprocess::a_token_that_went_away_is_found_again_at_the_next_signature",
            &hsm,
        );
    }
    let hsm = SoftHsm::of_parent();
    let key = load_key(&hsm.uri(), SETTING, LIMIT).unwrap();
    let before = key.sign_rs256(b"probe").unwrap();

    hsm.delete_token(TOKEN);
    let err = key.sign_rs256(b"probe").unwrap_err();
    let lost = format!("{SETTING}: token `lanyard` (module {MODULE}) failed to sign: CKR_");
    assert!(err.starts_with(&lost), "{err}");
    assert!(
        err.ends_with(
            "; the module is initialised again and the session reopened at the next attempt"
        ),
        "{err}"
    );
    // Still gone: the next attempt re-initialises and says what it missed.
    let err = key.sign_rs256(b"probe").unwrap_err();
    assert_eq!(
        err,
        format!(
            "{SETTING}: no token labelled `lanyard` in the PKCS#11 module {MODULE}; the module shows no initialised token"
        )
    );

    hsm.init_token(TOKEN, PIN);
    hsm.import("rsa2048.pkcs8.pem", TOKEN, OBJECT, "01", PIN);
    assert_eq!(key.sign_rs256(b"probe").unwrap(), before);
    assert_eq!(key.sign_rs256(b"probe").unwrap(), before);
}

/// The token comes back without the key, then with another key under its
/// label: each is said as such (not as a signing failure), the held
/// session's failure having re-initialised the module, and the key is
/// found again once the right one is back. SoftHSM2 keeps a deleted
/// object in a running process's cache, so "the object went away" is
/// shown as the token re-created without it.
#[test]
fn a_key_gone_from_its_token_or_replaced_in_it_is_said_so_then_found_again() {
    if !is_child() {
        let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
        return in_child(
            "inprocess::a_key_gone_from_its_token_or_replaced_in_it_is_said_so_then_found_again",
            &hsm,
        );
    }
    let hsm = SoftHsm::of_parent();
    let key = load_key(&hsm.uri(), SETTING, LIMIT).unwrap();
    let before = key.sign_rs256(b"probe").unwrap();
    let recreate = |key: &Path, label: &str| {
        hsm.delete_token(TOKEN);
        hsm.init_token(TOKEN, PIN);
        hsm.import_file(key, TOKEN, label, "01", PIN);
    };
    let fixture = fixture_path("rsa2048.pkcs8.pem");

    // The token is back with its key under another label.
    recreate(&fixture, "another-key");
    assert!(key.sign_rs256(b"probe").is_err(), "the old session is lost");
    assert_eq!(
        key.sign_rs256(b"probe").unwrap_err(),
        format!("{SETTING}: no private key `{OBJECT}` on token `{TOKEN}` (module {MODULE})")
    );

    // Then with another key under the key's label.
    let other = lanyard::mock::generate_rsa_key().unwrap();
    let other_pem = hsm.write("other.pkcs8.pem", other.private_pem.expose());
    recreate(&other_pem, OBJECT);
    assert_eq!(
        key.sign_rs256(b"probe").unwrap_err(),
        format!(
            "{SETTING}: the key `{OBJECT}` on token `{TOKEN}` is no longer the key lanyard started with (its modulus changed); reload the credentials or restart lanyard to use the new key"
        )
    );

    recreate(&fixture, OBJECT);
    assert_eq!(key.sign_rs256(b"probe").unwrap(), before);
}

/// A PIN the token refuses at run time is never offered again: each wrong
/// try brings a real HSM closer to locking it. Shown by a token re-created
/// with another PIN, then with the right one again, which lanyard no
/// longer tries.
#[test]
fn a_pin_refused_at_run_time_is_never_tried_again() {
    if !is_child() {
        let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
        return in_child(
            "inprocess::a_pin_refused_at_run_time_is_never_tried_again",
            &hsm,
        );
    }
    let hsm = SoftHsm::of_parent();
    let key = load_key(&hsm.uri(), SETTING, LIMIT).unwrap();
    hsm.delete_token(TOKEN);
    hsm.init_token(TOKEN, "another-pin-0000");
    hsm.import("rsa2048.pkcs8.pem", TOKEN, OBJECT, "01", "another-pin-0000");
    let refused = format!(
        "{SETTING}: token `lanyard` refused the PIN from {} (CKR_PIN_INCORRECT); lanyard does not try it again, since every wrong try brings the token closer to locking the PIN: correct the PIN file",
        hsm.pin_file().display()
    );
    // The first failure loses the session; the next reopens and is refused.
    assert!(key.sign_rs256(b"probe").is_err());
    assert_eq!(key.sign_rs256(b"probe").unwrap_err(), refused);

    hsm.delete_token(TOKEN);
    hsm.init_token(TOKEN, PIN);
    hsm.import("rsa2048.pkcs8.pem", TOKEN, OBJECT, "01", PIN);
    assert_eq!(key.sign_rs256(b"probe").unwrap_err(), refused);
    // New credentials (a reload) are a new key, which tries the PIN file.
    load_key(&hsm.uri(), SETTING, LIMIT).unwrap();
}
