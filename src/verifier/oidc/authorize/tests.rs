use super::*;
use crate::config::oidc::Clients;

fn clients() -> Clients {
    Clients::parse(
        r#"{"clients": [
            {"client_id": "shop", "client_secret": "0123456789abcdef", "redirect_uris": ["https://shop.example/cb"]},
            {"client_id": "spa", "redirect_uris": ["https://spa.example/cb"]},
            {"client_id": "legacy", "client_secret": "0123456789abcdef", "redirect_uris": ["https://legacy.example/cb"], "require_pkce": false}
        ]}"#,
        std::path::Path::new("/nonexistent"),
    )
    .unwrap()
}

fn query(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        query.append_pair(name, value);
    }
    query.finish().into_bytes()
}

const SHOP: &[(&str, &str)] = &[
    ("response_type", "code"),
    ("client_id", "shop"),
    ("redirect_uri", "https://shop.example/cb"),
    ("scope", "openid email"),
    ("state", "xyz"),
    ("nonce", "n"),
    ("code_challenge", CHALLENGE),
    ("code_challenge_method", "S256"),
];
/// RFC 7636 Appendix B.
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

#[test]
fn a_good_request_is_taken_with_what_the_code_needs() {
    let authorization = check(&query(SHOP), &clients(), &BTreeSet::new(), 1000).unwrap();
    assert_eq!(authorization.client_id, "shop");
    assert_eq!(authorization.state.as_deref(), Some("xyz"));
    assert_eq!(authorization.nonce.as_deref(), Some("n"));
    assert_eq!(authorization.code_challenge.as_deref(), Some(CHALLENGE));
    assert_eq!(authorization.expires_at, 1000 + AUTHORIZATION_LIFETIME);
}

#[test]
fn every_client_sends_pkce_unless_its_entry_opts_out_and_then_a_nonce() {
    let without = |client: &str, nonce: bool| {
        let uri = format!("https://{client}.example/cb");
        let mut pairs: Vec<(&str, &str)> = SHOP
            .iter()
            .filter(|(n, _)| !n.starts_with("code_challenge") && (nonce || *n != "nonce"))
            .copied()
            .collect();
        pairs.retain(|(n, _)| *n != "client_id" && *n != "redirect_uri");
        pairs.push(("client_id", client));
        pairs.push(("redirect_uri", &uri));
        check(&query(&pairs), &clients(), &BTreeSet::new(), 0)
    };
    for client in ["shop", "spa"] {
        let Err(Refused::Redirect(redirect)) = without(client, true) else {
            panic!("{client} taken without PKCE");
        };
        assert_eq!(redirect.error, "invalid_request");
        assert!(
            redirect.description.contains("PKCE"),
            "{}",
            redirect.description
        );
    }
    assert!(without("legacy", true).is_ok());
    let Err(Refused::Redirect(redirect)) = without("legacy", false) else {
        panic!("taken without PKCE or a nonce");
    };
    assert_eq!(
        (redirect.error, redirect.description),
        ("invalid_request", "a client without PKCE must send a nonce")
    );
}

#[test]
fn state_too_long_is_refused_and_not_sent_back() {
    let long = "s".repeat(MAX_STATE + 1);
    let mut pairs = SHOP.to_vec();
    pairs.retain(|(n, _)| *n != "state");
    pairs.push(("state", &long));
    let Err(Refused::Redirect(redirect)) = check(&query(&pairs), &clients(), &BTreeSet::new(), 0)
    else {
        panic!("taken");
    };
    assert_eq!(redirect.error, "invalid_request");
    assert_eq!(redirect.state, None);
}

#[test]
fn a_challenge_must_be_s256_and_shaped_as_one() {
    let mut pairs = SHOP.to_vec();
    pairs.retain(|(n, _)| *n != "code_challenge");
    pairs.push(("code_challenge", "tooshort"));
    assert!(matches!(
        check(&query(&pairs), &clients(), &BTreeSet::new(), 0),
        Err(Refused::Redirect(ErrorRedirect {
            error: "invalid_request",
            ..
        }))
    ));
}

#[test]
fn a_redirect_keeps_the_uris_query_and_encodes_what_it_adds() {
    assert_eq!(
        redirect_to(
            "https://a.example/cb?x=1",
            &[("state", "a b&c"), ("iss", "https://i")]
        ),
        "https://a.example/cb?x=1&state=a+b%26c&iss=https%3A%2F%2Fi"
    );
    assert_eq!(
        redirect_to("https://a.example/cb", &[("code", "c")]),
        "https://a.example/cb?code=c"
    );
}

#[test]
fn parameters_are_each_given_once() {
    assert_eq!(parameters(b"a=1&b=2").unwrap().len(), 2);
    assert_eq!(parameters(b"a=1&a=2"), Err("a".to_string()));
}

#[test]
fn a_native_apps_loopback_redirect_takes_any_port_and_only_its_canonical_forms() {
    let clients = Clients::parse(
        r#"{"clients": [{"client_id": "app", "redirect_uris":
            ["http://127.0.0.1/cb", "http://[::1]/cb?x=1", "http://localhost/cb", "http://127.0.0.1:8000/fixed"]}]}"#,
        std::path::Path::new("/nonexistent"),
    )
    .unwrap();
    let asked = |redirect_uri: &str| {
        let pairs = [
            ("response_type", "code"),
            ("client_id", "app"),
            ("redirect_uri", redirect_uri),
            ("scope", "openid"),
            (
                "code_challenge",
                "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            ),
            ("code_challenge_method", "S256"),
        ];
        check(&query(&pairs), &clients, &BTreeSet::new(), 0).map(|a| a.redirect_uri)
    };
    for taken in [
        "http://127.0.0.1/cb",
        "http://127.0.0.1:51234/cb",
        "http://127.0.0.1:1/cb",
        "http://127.0.0.1:65535/cb",
        "http://[::1]:8080/cb?x=1",
        "http://localhost/cb",
        "http://127.0.0.1:8000/fixed",
    ] {
        assert_eq!(asked(taken).as_deref(), Ok(taken), "{taken}");
    }
    for refused in [
        "http://user@127.0.0.1:5000/cb",
        "http://127.0.0.1:5000@evil.example/cb",
        "http://127.0.0.1:5000/cb#frag",
        "HTTP://127.0.0.1:5000/cb",
        "http://127.0.0.1:0/cb",
        "http://127.0.0.1:05000/cb",
        "http://127.0.0.1:65536/cb",
        "http://127.0.0.1:/cb",
        "http://127.0.0.1:+5/cb",
        "http://127.0.0.1:5000/cb/",
        "http://127.0.0.1:5000/CB",
        "http://127.0.0.1:5000/other",
        "http://127.0.0.2:5000/cb",
        "http://[::1]:5000/cb",
        "http://[0:0:0:0:0:0:0:1]:5000/cb?x=1",
        "http://localhost:5000/cb",
        "https://127.0.0.1:5000/cb",
        "http://127.0.0.1:8001/fixed",
        "http://127.0.0.1/fixed",
    ] {
        assert!(
            matches!(asked(refused), Err(Refused::Page(_))),
            "{refused}: {:?}",
            asked(refused)
        );
    }
}

#[test]
fn too_many_parameters_are_refused_before_they_are_compared() {
    let many: String = (0..MAX_PARAMETERS + 1)
        .map(|i| format!("p{i}=x&"))
        .collect();
    assert!(parameters(many.as_bytes()).is_err());
}
