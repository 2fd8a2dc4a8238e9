//! The verifier's settings: where it listens.

use super::*;
use crate::config::components::Defaults;

#[test]
fn the_verifier_listens_where_its_setting_then_port_then_the_default_says() {
    let with_url = |pairs: &[(&str, &str)]| {
        let mut all = vec![("SERVICE_API_URL", "https://api.example.com")];
        all.extend_from_slice(pairs);
        load(&all)
    };
    // `lanyard verifier`'s address, and `lanyard demo`'s.
    let addr = |pairs: &[(&str, &str)]| {
        let config = with_url(pairs).unwrap();
        (
            config.verifier_config(Defaults::Deployed).listen,
            config.verifier_config(Defaults::Demo).listen,
        )
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

#[test]
fn the_brand_file_is_read_at_load_for_the_commands_that_show_the_page() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/brand.example.toml");
    let url = ("SERVICE_API_URL", "https://api.example.com");
    let with = |need: Requirement, file: &str| {
        Config::load(
            &Flags::default(),
            &with_account(&[url, ("LANYARD_VERIFIER_BRAND_FILE", file)]),
            need,
        )
    };
    let brand = with(Requirement::Check, example)
        .unwrap()
        .verifier_brand
        .expect("read for `check`");
    assert_eq!(brand.name, "Acme Bank");
    assert!(brand.stylesheet().unwrap().contains("--accent: #1f4e8c;"));
    assert!(
        with(Requirement::Demo, example)
            .unwrap()
            .verifier_brand
            .is_some()
    );
    assert_eq!(load(&[url]).unwrap().verifier_brand, None);
    assert_eq!(
        with(Requirement::Upstream, "/nonexistent/brand.toml")
            .unwrap()
            .verifier_brand,
        None,
        "`run` shows no page, and reads no brand"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("brand.toml");
    std::fs::write(
        &file,
        "name = \"Acme\"\naccent = \"#777777\"\n[purpose]\ne_n = \"x\"\n",
    )
    .unwrap();
    let err = with(Requirement::Check, file.to_str().unwrap()).unwrap_err();
    let at = format!(
        "LANYARD_VERIFIER_BRAND_FILE (environment variable LANYARD_VERIFIER_BRAND_FILE): {}: ",
        file.display()
    );
    assert_eq!(
        err.lines(),
        [
            format!(
                "{at}`accent`: #777777 has a contrast of 4.48:1 on the page's white background; at least 4.5:1 is needed for its links and buttons to read (WCAG 2.x, 1.4.3): choose a darker shade"
            ),
            format!(
                "{at}`purpose.e_n`: is not a well-formed BCP 47 language tag (like en, de-AT, zh-Hant, sr-Latn-RS)"
            ),
        ]
    );
    assert!(!err.is_unanswered(), "the settings' fault: exit 2");
}
