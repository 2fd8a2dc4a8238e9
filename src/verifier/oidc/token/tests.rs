use base64::engine::general_purpose::STANDARD;
use http::HeaderValue;

use super::client_auth::{basic_credentials, same_secret};
use super::redeemed::MAX_REDEEMED;
use super::*;

/// RFC 7636 Appendix B.
#[test]
fn the_pkce_verifier_is_checked_as_s256() {
    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    assert_eq!(check_verifier(Some(challenge), Some(verifier)), Ok(()));
    assert_eq!(check_verifier(None, None), Ok(()));
    for (challenge, verifier) in [
        (Some(challenge), None),
        (
            Some(challenge),
            Some("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK"),
        ),
        (Some(challenge), Some(challenge)),
        (None, Some(verifier)),
        (Some(challenge), Some("short")),
    ] {
        assert_eq!(
            check_verifier(challenge, verifier),
            Err(INVALID_GRANT),
            "{verifier:?}"
        );
    }
}

#[test]
fn basic_credentials_are_form_decoded_after_base64() {
    let value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode("my%3Aapp:s%2Bcr%25t")))
        .unwrap();
    let basic = basic_credentials(&value).unwrap();
    assert_eq!(
        (basic.id.as_str(), basic.secret.as_str()),
        ("my:app", "s+cr%t")
    );
    assert_eq!(basic.raw_secret, "s%2Bcr%25t");
    // As many libraries send it: not form-encoded, scheme in any case.
    let raw = HeaderValue::from_str(&format!("basic {}", STANDARD.encode("a:b+c"))).unwrap();
    let basic = basic_credentials(&raw).unwrap();
    assert_eq!(
        (basic.secret.as_str(), basic.raw_secret.as_str()),
        ("b c", "b+c")
    );
    assert!(same_secret("b+c", &basic.raw_secret));
    assert!(!same_secret("b+c", &basic.secret));
    for bad in ["Bearer abc", "Basic !!!", "Basic bm9jb2xvbg=="] {
        assert_eq!(
            basic_credentials(&HeaderValue::from_static(bad)),
            None,
            "{bad}"
        );
    }
}

fn code(id: &str, expires_at: u64) -> Code {
    Code {
        id: id.into(),
        authorization: super::super::sealed::Authorization {
            client_id: "c".into(),
            redirect_uri: "https://c.example/cb".into(),
            state: None,
            nonce: None,
            code_challenge: None,
            expires_at: 0,
            rule: None,
        },
        service_id: "t".into(),
        sub: "s".into(),
        auth_time: 0,
        expires_at,
    }
}

#[test]
fn a_replayed_code_revokes_its_login_until_its_access_tokens_expire() {
    let mut redeemed = Redeemed::default();
    assert_eq!(redeemed.take(&code("a", 100), 50), Ok(()));
    assert!(!redeemed.is_revoked("a"));
    assert_eq!(redeemed.take(&code("a", 100), 60), Err(true));
    assert!(redeemed.is_revoked("a"));
    assert!(!redeemed.is_revoked("b"));
    redeemed.sweep(100 + TOKEN_LIFETIME - 1);
    assert!(redeemed.is_revoked("a"), "an access token may still live");
    redeemed.sweep(100 + TOKEN_LIFETIME);
    assert!(!redeemed.is_revoked("a"));
    assert!(redeemed.codes.is_empty());
}

#[test]
fn a_code_is_redeemed_once_unless_given_back_and_the_table_is_bounded() {
    let mut redeemed = Redeemed::default();
    assert_eq!(redeemed.take(&code("a", 100), 50), Ok(()));
    assert_eq!(redeemed.take(&code("a", 100), 50), Err(true));
    redeemed.give_back("a");
    assert_eq!(
        redeemed.take(&code("a", 100), 50),
        Ok(()),
        "given back unspent, it is taken again"
    );
    assert_eq!(redeemed.take(&code("a", 100), 50), Err(true));
    for i in 1..MAX_REDEEMED {
        redeemed.codes.insert(format!("old{i}"), 10);
    }
    assert_eq!(redeemed.codes.len(), MAX_REDEEMED);
    assert_eq!(
        redeemed.take(&code("b", 100), 50),
        Ok(()),
        "expired ones make room"
    );
    assert_eq!(redeemed.codes.len(), 2);
    for i in 0..MAX_REDEEMED {
        redeemed.codes.insert(format!("live{i}"), 1000);
    }
    assert_eq!(redeemed.take(&code("c", 100), 50), Err(false));
    assert_eq!(
        redeemed.take(&code("a", 100), 50),
        Err(true),
        "still refused as used"
    );
}

#[test]
fn basic_credentials_never_print_the_secret() {
    let value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode("shop:hunter2-secret")))
        .unwrap();
    let shown = format!("{:?}", basic_credentials(&value).unwrap());
    assert!(shown.contains("shop"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}
