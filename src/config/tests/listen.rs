//! The proxy's listener: loopback unless allowed, or a Unix socket with
//! its mode.

use super::*;

#[test]
fn remote_listen_needs_explicit_opt_in() {
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_LISTEN", "0.0.0.0:8080"),
        ("LANYARD_ALLOW_REMOTE", "true"),
    ])
    .unwrap();
    assert_eq!(
        config.proxy.listen,
        ListenAddr::Tcp("0.0.0.0:8080".parse().unwrap())
    );
}

#[test]
fn a_unix_socket_listener_takes_an_absolute_path_and_a_mode_closed_to_others() {
    let api = ("SERVICE_API_URL", "https://api.example.com");
    let config = load(&[api, ("LANYARD_LISTEN", "unix:/run/lanyard/lanyard.sock")]).unwrap();
    assert_eq!(
        config.proxy.listen,
        ListenAddr::Unix("/run/lanyard/lanyard.sock".into())
    );
    assert_eq!(config.proxy.listen_mode, FileMode(0o660));
    let config = load(&[
        api,
        ("LANYARD_LISTEN", "unix:/run/lanyard.sock"),
        ("LANYARD_LISTEN_MODE", "600"),
    ])
    .unwrap();
    assert_eq!(config.proxy.listen_mode, FileMode(0o600));
    let refused = [
        ("LANYARD_LISTEN", "unix:lanyard.sock", "must be absolute"),
        ("LANYARD_LISTEN", "unix:", "must be absolute"),
        ("LANYARD_LISTEN", "unix:/run/", "must name a file"),
        ("LANYARD_LISTEN_MODE", "0666", "lets other users connect"),
        ("LANYARD_LISTEN_MODE", "0661", "lets other users connect"),
        (
            "LANYARD_LISTEN_MODE",
            "rw-rw----",
            "is not a permission mode",
        ),
        ("LANYARD_LISTEN_MODE", "01660", "is not a permission mode"),
    ];
    for (name, value, why) in refused {
        let err = load(&[api, (name, value)]).unwrap_err();
        let line = &err.lines()[0];
        assert!(
            line.starts_with(name) && line.contains(why),
            "{name}={value}: {err}"
        );
    }
    let long = format!("unix:/{}", "x".repeat(107));
    let err = load(&[api, ("LANYARD_LISTEN", &long)]).unwrap_err();
    assert!(err.lines()[0].contains("at most 107 bytes"), "{err}");
    // Short enough itself, but its directory leaves no room for the
    // private directory lanyard binds in first.
    let deep = format!("unix:/{}/s", "d".repeat(90));
    let err = load(&[api, ("LANYARD_LISTEN", &deep)]).unwrap_err();
    assert!(err.lines()[0].contains("its directory at most 83"), "{err}");
    let fits = format!("unix:/{}/lanyard.sock", "d".repeat(82));
    load(&[api, ("LANYARD_LISTEN", &fits)]).unwrap();
}

#[test]
fn a_listen_mode_beside_a_tcp_listener_is_ignored_with_a_warning() {
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_LISTEN_MODE", "0600"),
    ])
    .unwrap();
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.starts_with("LANYARD_LISTEN_MODE") && w.contains("Unix socket only")),
        "{:?}",
        config.warnings
    );
}
