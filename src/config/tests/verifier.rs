//! The verifier's settings: where it listens.

use super::*;

#[test]
fn the_verifier_listens_where_its_setting_then_port_then_the_default_says() {
    let with_url = |pairs: &[(&str, &str)]| {
        let mut all = vec![("SERVICE_API_URL", "https://api.example.com")];
        all.extend_from_slice(pairs);
        load(&all)
    };
    let addr = |pairs: &[(&str, &str)]| {
        let config = with_url(pairs).unwrap();
        (config.verifier_listen(), config.demo_verifier_listen())
    };
    let parse = |a: &str| a.parse::<SocketAddr>().unwrap();
    assert_eq!(addr(&[]), (parse("0.0.0.0:8080"), parse("127.0.0.1:8081")));
    assert_eq!(
        addr(&[("PORT", "9000")]),
        (parse("0.0.0.0:9000"), parse("127.0.0.1:8081")),
        "PORT is a platform's choice for a deployed verifier, not the demo's"
    );
    assert_eq!(
        addr(&[
            ("PORT", "9000"),
            ("LANYARD_VERIFIER_LISTEN", "127.0.0.1:7000")
        ]),
        (parse("127.0.0.1:7000"), parse("127.0.0.1:7000"))
    );
    let err = with_url(&[("PORT", "0")]).unwrap_err();
    assert!(
        err.lines().iter().any(|l| l.starts_with("PORT (")),
        "{err:?}"
    );
}

#[test]
fn the_session_key_is_given_or_read_from_its_file_and_never_quoted() {
    use base64::Engine as _;
    let b64 =
        |byte: u8, len: usize| base64::engine::general_purpose::STANDARD.encode(vec![byte; len]);
    let url = ("SERVICE_API_URL", "https://api.example.com");
    let (current, previous) = (b64(1, 32), b64(2, 40));
    let pair = format!("{current}, {previous}");
    let keys = load(&[url, ("LANYARD_VERIFIER_SESSION_KEY", &pair)])
        .unwrap()
        .verifier_session_key
        .unwrap();
    assert_eq!(
        (keys.current, keys.previous),
        (vec![1; 32], Some(vec![2; 40]))
    );
    assert!(
        !format!(
            "{:?}",
            load(&[url, ("LANYARD_VERIFIER_SESSION_KEY", &current)]).unwrap()
        )
        .contains(&current)
    );
    assert_eq!(load(&[url]).unwrap().verifier_session_key, None, "derived");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session-key");
    std::fs::write(&file, format!("{current}\n")).unwrap();
    let path = file.to_str().unwrap();
    let from_file = load(&[url, ("LANYARD_VERIFIER_SESSION_KEY_FILE", path)]).unwrap();
    assert_eq!(from_file.verifier_session_key.unwrap().current, vec![1; 32]);

    let short = b64(3, 31);
    let three = format!("{current},{current},{current}");
    let bad_second = format!("{current},{short}");
    let dir_path = dir.path().to_str().unwrap();
    for (pairs, expected) in [
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY", short.as_str())],
            "LANYARD_VERIFIER_SESSION_KEY (environment variable LANYARD_VERIFIER_SESSION_KEY): the session key is not base64 of 32 bytes or more",
        ),
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY", "not base64!")],
            "is not base64 of 32 bytes or more",
        ),
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY", three.as_str())],
            "holds 3 comma-separated keys",
        ),
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY", bad_second.as_str())],
            "the previous (second) key is not base64",
        ),
        (
            vec![
                ("LANYARD_VERIFIER_SESSION_KEY", current.as_str()),
                ("LANYARD_VERIFIER_SESSION_KEY_FILE", path),
            ],
            "LANYARD_VERIFIER_SESSION_KEY is set too; set one of them",
        ),
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY_FILE", "/nonexistent/key")],
            "/nonexistent/key cannot be read: no such file",
        ),
        (
            vec![("LANYARD_VERIFIER_SESSION_KEY_FILE", dir_path)],
            "cannot be read: is a directory",
        ),
    ] {
        let mut all = vec![url];
        all.extend(pairs);
        let err = load(&all).unwrap_err().to_string();
        assert!(err.contains(expected), "{expected}: {err}");
        for secret in [&current, &short] {
            assert!(!err.contains(secret.as_str()), "quoted: {err}");
        }
    }
    std::fs::write(&file, &short).unwrap();
    let err = load(&[url, ("LANYARD_VERIFIER_SESSION_KEY_FILE", path)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("session-key: the session key is not base64"),
        "{err}"
    );
    assert!(!err.contains(&short));
}
