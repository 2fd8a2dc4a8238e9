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
