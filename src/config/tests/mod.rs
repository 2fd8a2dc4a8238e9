//! The loader's unit tests: precedence, defaults, each setting's checks,
//! and what it reads once for the commands.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::defaults::DEFAULT_LISTEN;
use super::settings::{MAX_HEADER_BYTES, UPSTREAM_TIMEOUT};
use super::*;

mod files;
mod listen;
mod loaded;
mod oidc;
mod verifier;

const KEY: &str = include_str!("../../../tests/fixtures/rsa2048.pkcs8.pem");

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `pairs` over credentials that load, so a test is about its own settings.
fn with_account(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    let mut map = env(&[
        ("SA_CLIENT_ID", "sa-test"),
        ("SA_PRIVATE_KEY", KEY),
        ("SA_IAM_AUDIENCE", "https://iam.example.com"),
        ("SA_TOKEN_URI", "https://iam.example.com/token"),
        ("SA_ORGANIZATION_ID", "org-test"),
    ]);
    map.extend(env(pairs));
    map
}

fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::load(
        &Flags::default(),
        &with_account(pairs),
        Requirement::Upstream,
    )
}

/// `lanyard run`'s configuration, for what only it holds.
fn load_run(flags: &Flags, pairs: &[(&str, &str)]) -> Result<RunConfig, ConfigError> {
    match Loaded::load(flags, &with_account(pairs), Requirement::Upstream)? {
        Loaded::Run(run) => Ok(*run),
        other => panic!("not `lanyard run`'s: {other:?}"),
    }
}

/// `lanyard demo`'s configuration, for where the demo listens.
fn load_demo(pairs: &[(&str, &str)]) -> DemoConfig {
    match Loaded::load(&Flags::default(), &env(pairs), Requirement::Demo).unwrap() {
        Loaded::Demo(demo) => *demo,
        other => panic!("not `lanyard demo`'s: {other:?}"),
    }
}

#[test]
fn defaults_apply_when_only_the_upstream_is_set() {
    let run = load_run(
        &Flags::default(),
        &[("SERVICE_API_URL", "https://api.example.com/v1/")],
    )
    .unwrap();
    assert_eq!(run.upstream.path_prefix(), "/v1");
    assert_eq!(
        run.proxy.listen,
        ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
    );
    assert_eq!(run.admin.listen, "0.0.0.0:9090".parse().unwrap());
    let demo = load_demo(&[]);
    assert_eq!(
        demo.admin.listen,
        "127.0.0.1:9090".parse().unwrap(),
        "the demo keeps to loopback"
    );
    assert_eq!(run.access.assertion_ttl, Duration::from_secs(3600));
    assert_eq!(run.proxy.upstream_timeout, Duration::from_secs(30));
    assert_eq!(run.process.shutdown_grace, Duration::from_secs(20));
    assert!(run.access.rfc7523_fields);
    assert_eq!(
        run.process.log_format, None,
        "text on a terminal, else JSON"
    );
}

#[test]
fn clock_skew_is_bounded_by_its_cap_and_the_assertion_lifetime() {
    let base = ("SERVICE_API_URL", "https://api.example.com");
    let config = load(&[base, ("LANYARD_CLOCK_SKEW", "1m")]).unwrap();
    assert_eq!(config.clock_skew, Duration::from_secs(60));
    assert_eq!(load(&[base]).unwrap().clock_skew, Duration::ZERO);

    let err = load(&[base, ("LANYARD_CLOCK_SKEW", "10m")]).unwrap_err();
    assert_eq!(
        err.lines()[..1],
        [
            "LANYARD_CLOCK_SKEW (environment variable LANYARD_CLOCK_SKEW): 600 s is more than the 300 s allowed; fix the clock instead (NTP)"
        ]
    );
    let err = load(&[
        base,
        ("LANYARD_CLOCK_SKEW", "2m"),
        ("LANYARD_ASSERTION_TTL", "120"),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines()[..1],
        [
            "LANYARD_CLOCK_SKEW (environment variable LANYARD_CLOCK_SKEW): 120 s is not less than the assertion lifetime (120 s): the assertion would be expired when sent"
        ]
    );
}

#[test]
fn problem_lines_escape_what_would_split_or_disguise_them() {
    let err = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_LOG_FORMAT", "a\nLANYARD_FAKE: b\u{202E}c"),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines()[0],
        "LANYARD_LOG_FORMAT (environment variable LANYARD_LOG_FORMAT): `a\\nLANYARD_FAKE: b\\u{202e}c` is not a log format (use json or text)"
    );
}

#[test]
fn worker_threads_default_to_the_cpus_up_to_four_and_are_checked() {
    let base = ("SERVICE_API_URL", "https://api.example.com");
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    assert_eq!(load(&[base]).unwrap().proxy.worker_threads, cpus.min(4));
    let config = load(&[base, ("LANYARD_WORKER_THREADS", "8")]).unwrap();
    assert_eq!(config.proxy.worker_threads, 8);
    for (value, why) in [
        ("0", "must be at least 1"),
        ("1000", "1000 is more than the 256 allowed"),
        ("two", "`two` is not a whole number of threads"),
    ] {
        let err = load(&[base, ("LANYARD_WORKER_THREADS", value)]).unwrap_err();
        assert_eq!(
            err.lines()[0],
            format!("LANYARD_WORKER_THREADS (environment variable LANYARD_WORKER_THREADS): {why}")
        );
    }
}

#[test]
fn connection_limit_and_header_timeout_are_checked() {
    let base = ("SERVICE_API_URL", "https://api.example.com");
    let config = load(&[base]).unwrap();
    assert_eq!(config.max_connections, 1024);
    assert_eq!(config.proxy.header_timeout, Duration::from_secs(30));
    let config = load(&[
        base,
        ("LANYARD_MAX_CONNECTIONS", "50"),
        ("LANYARD_HEADER_TIMEOUT", "5s"),
    ])
    .unwrap();
    assert_eq!(config.max_connections, 50);
    assert_eq!(config.proxy.header_timeout, Duration::from_secs(5));

    let err = load(&[
        base,
        ("LANYARD_MAX_CONNECTIONS", "0"),
        ("LANYARD_HEADER_TIMEOUT", "0"),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines()[..2],
        [
            "LANYARD_HEADER_TIMEOUT (environment variable LANYARD_HEADER_TIMEOUT): must be greater than zero",
            "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): must be at least 1",
        ]
    );
    let err = load(&[base, ("LANYARD_MAX_CONNECTIONS", "3000000000000000000")]).unwrap_err();
    assert_eq!(
        err.lines()[..1],
        [
            "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): 3000000000000000000 is more than the 1048576 allowed"
        ]
    );
    let err = load(&[base, ("LANYARD_MAX_CONNECTIONS", "lots")]).unwrap_err();
    assert_eq!(
        err.lines()[..1],
        [
            "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): `lots` is not a whole number of connections"
        ]
    );
}

#[test]
fn body_timeout_header_bytes_and_upstream_connections_are_checked() {
    let base = ("SERVICE_API_URL", "https://api.example.com");
    let config = load(&[base]).unwrap();
    assert_eq!(config.proxy.body_timeout, Duration::from_secs(30));
    assert_eq!(config.max_header_bytes, 64 * 1024);
    assert_eq!(config.proxy.max_upstream_connections, 256);
    let config = load(&[
        base,
        ("LANYARD_BODY_TIMEOUT", "5s"),
        ("LANYARD_MAX_HEADER_BYTES", "16KiB"),
        ("LANYARD_MAX_UPSTREAM_CONNECTIONS", "8"),
    ])
    .unwrap();
    assert_eq!(config.proxy.body_timeout, Duration::from_secs(5));
    assert_eq!(config.max_header_bytes, 16 * 1024);
    assert_eq!(config.proxy.max_upstream_connections, 8);
    assert_eq!(
        load(&[base, ("LANYARD_MAX_HEADER_BYTES", "20000")])
            .unwrap()
            .max_header_bytes,
        20000
    );

    let err = load(&[
        base,
        ("LANYARD_BODY_TIMEOUT", "0"),
        ("LANYARD_MAX_HEADER_BYTES", "1KiB"),
        ("LANYARD_MAX_UPSTREAM_CONNECTIONS", "0"),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines()[..3],
        [
            "LANYARD_BODY_TIMEOUT (environment variable LANYARD_BODY_TIMEOUT): must be greater than zero",
            "LANYARD_MAX_HEADER_BYTES (environment variable LANYARD_MAX_HEADER_BYTES): 1024 bytes is outside 8 KiB to 1024 KiB",
            "LANYARD_MAX_UPSTREAM_CONNECTIONS (environment variable LANYARD_MAX_UPSTREAM_CONNECTIONS): must be at least 1",
        ]
    );
    for bad in ["64kb", "lots", "99999999999999999999MiB", "-1"] {
        let err = load(&[base, ("LANYARD_MAX_HEADER_BYTES", bad)]).unwrap_err();
        assert!(err.lines()[0].contains("is not a size"), "{bad}: {err}");
    }
}

#[test]
fn flag_beats_environment_beats_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lanyard.toml");
    std::fs::write(
        &path,
        "service_api_url = \"https://file.example\"\nupstream_timeout = 7\nassertion_ttl = \"5m\"\n",
    )
    .unwrap();
    let mut flags = Flags {
        config: Some(path),
        ..Flags::default()
    };
    flags.set(&UPSTREAM_TIMEOUT, Some("9s"));
    let run = load_run(
        &flags,
        &[
            ("SERVICE_API_URL", "https://env.example"),
            ("LANYARD_UPSTREAM_TIMEOUT", "8"),
        ],
    )
    .unwrap();
    assert_eq!(run.upstream.to_string(), "https://env.example/");
    assert_eq!(run.proxy.upstream_timeout, Duration::from_secs(9));
    assert_eq!(run.access.assertion_ttl, Duration::from_secs(300));
}

#[test]
fn every_problem_is_reported_with_its_setting_and_source() {
    let err = Config::load(
        &Flags::default(),
        &env(&[
            ("LANYARD_LISTEN", "0.0.0.0:8080"),
            ("LANYARD_UPSTREAM_TIMEOUT", "soon"),
            ("LANYARD_LOG_FORMAT", "xml"),
        ]),
        Requirement::Upstream,
    )
    .unwrap_err();
    let lines = err.lines();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("no credentials: ")));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("SERVICE_API_URL: is required"))
    );
    assert!(lines.iter().any(|l| l.starts_with(
        "LANYARD_LISTEN (environment variable LANYARD_LISTEN): 0.0.0.0:8080 is not a loopback address"
    )));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("LANYARD_UPSTREAM_TIMEOUT")
                && l.contains("`soon` is not a duration"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("LANYARD_LOG_FORMAT") && l.contains("`xml`"))
    );
}

#[test]
fn plain_http_upstream_is_refused_off_loopback() {
    let err = load(&[("SERVICE_API_URL", "http://api.example.com")]).unwrap_err();
    assert!(err.lines()[0].contains("must use https"), "{err}");
    for ok in [
        "http://127.0.0.1:9000",
        "http://localhost:1/x",
        "http://[::1]:2",
    ] {
        load(&[("SERVICE_API_URL", ok)]).unwrap();
    }
}

#[test]
fn url_with_user_info_is_refused_without_echoing_it() {
    let err = load(&[("SERVICE_API_URL", "https://user:hunter2@api.example.com")]).unwrap_err();
    assert!(err.lines()[0].contains("user info"), "{err}");
    assert!(!err.to_string().contains("hunter2"));
}

#[test]
fn unknown_and_malformed_config_file_keys_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "servce_api_url = \"https://x\"\nlisten = [1]\n").unwrap();
    let flags = Flags {
        config: Some(path),
        ..Flags::default()
    };
    let err = Config::load(&flags, &env(&[]), Requirement::NoUpstream).unwrap_err();
    assert!(
        err.lines()
            .iter()
            .any(|l| l.contains("unknown key `servce_api_url`")),
        "{err}"
    );
    assert!(
        err.lines()
            .iter()
            .any(|l| l.contains("LANYARD_LISTEN") && l.contains("must be a string")),
        "{err}"
    );
}

#[test]
fn invalid_toml_reports_the_line_but_not_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:1\"\nprivate_key = \"-----BEGIN PRIVATE KEY-----\nMIIsecret",
    )
    .unwrap();
    let flags = Flags {
        config: Some(path),
        ..Flags::default()
    };
    let err = Config::load(&flags, &env(&[]), Requirement::NoUpstream).unwrap_err();
    assert!(
        err.to_string().contains("is not valid TOML at line "),
        "{err}"
    );
    assert!(!err.to_string().contains("MIIsecret"));
}

#[test]
fn missing_config_file_is_named() {
    let flags = Flags {
        config: Some(PathBuf::from("/nonexistent/lanyard.toml")),
        ..Flags::default()
    };
    let err = Config::load(&flags, &env(&[]), Requirement::Demo).unwrap_err();
    assert_eq!(
        err.lines(),
        ["config file /nonexistent/lanyard.toml (flag --config): cannot be read: no such file"]
    );
}

#[test]
fn assertion_lifetime_over_an_hour_is_capped_with_a_warning() {
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_ASSERTION_TTL", "2h"),
    ])
    .unwrap();
    assert_eq!(config.assertion_ttl, MAX_ASSERTION_TTL);
    // Capped, as docs/settings.md says, even past the day other
    // durations may be.
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_ASSERTION_TTL", "100h"),
    ])
    .unwrap();
    assert_eq!(config.assertion_ttl, MAX_ASSERTION_TTL);
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_ASSERTION_TTL", "2h"),
    ])
    .unwrap();
    assert_eq!(
        config.warnings,
        [
            "LANYARD_ASSERTION_TTL (environment variable LANYARD_ASSERTION_TTL): 7200 s is capped at 3600 s, the longest the service accepts (docs/service.md §5.2)"
        ]
    );
}

#[test]
fn durations_accept_plain_seconds_and_humantime() {
    for (raw, expected) in [
        ("30", Duration::from_secs(30)),
        ("90s", Duration::from_secs(90)),
        ("5m", Duration::from_secs(300)),
        ("1h", Duration::from_secs(3600)),
        ("250ms", Duration::from_millis(250)),
        ("24h", Duration::from_secs(86400)),
        // humantime's grammar: days, compounds, fractions.
        ("1d", Duration::from_secs(86400)),
        ("1h 30m", Duration::from_secs(5400)),
        ("1.5s", Duration::from_millis(1500)),
    ] {
        assert_eq!(parse_duration(raw), Ok(expected), "{raw}");
    }
    for bad in ["", "s", "-1", "ten", "5 parsecs", "0.5ns"] {
        assert_eq!(
            parse_duration(bad),
            Err(format!(
                "`{bad}` is not a duration (use seconds, or a value like 90s, 5m, 1h)"
            )),
        );
    }
    for long in ["86401", "25h", "2d", "1w", "99999999999999999999h"] {
        assert_eq!(
            parse_duration(long),
            Err(format!(
                "`{long}` is longer than a day, the most any duration may be"
            )),
        );
    }
}

#[test]
fn a_huge_duration_is_refused_rather_than_overflowing_a_deadline() {
    let err = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_HEADER_TIMEOUT", "18446744073709551615"),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines()[0],
        "LANYARD_HEADER_TIMEOUT (environment variable LANYARD_HEADER_TIMEOUT): `18446744073709551615` is longer than a day, the most any duration may be"
    );
}

#[test]
fn empty_environment_variable_counts_as_unset() {
    let config = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_LISTEN", ""),
    ])
    .unwrap();
    assert_eq!(
        config.proxy.listen,
        ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
    );
}

#[test]
fn a_secret_setting_has_no_flag() {
    for setting in SETTINGS {
        assert!(
            !setting.secret() || setting.flag().is_none(),
            "{} is a secret: a flag's value shows in the process list",
            setting.env()
        );
    }
    assert!(
        SETTINGS
            .iter()
            .any(|s| s.env() == PRIVATE_KEY.env && s.secret())
    );
}

#[test]
fn every_shown_default_reads_back_as_the_default() {
    // The text `--help` and docs/settings.md show is valid input meaning the
    // default, so the two cannot say one thing and do another.
    let base = [("SERVICE_API_URL", "https://api.example.com")];
    let shown: Vec<(&str, String)> = SETTINGS
        .iter()
        .filter_map(|s| match s.shown_default() {
            ShownDefault::Value(text) => Some((s.env(), text)),
            _ => None,
        })
        .collect();
    assert!(shown.len() >= 15, "{shown:?}");
    let mut given: Vec<(&str, &str)> = base.to_vec();
    given.extend(shown.iter().map(|(env, text)| (*env, text.as_str())));
    // What the settings point at is not a setting's value.
    let settings_only = |config: Config| Config {
        // Whether it was given is the one thing that differs.
        admin_listen_given: false,
        ..config
    };
    let explicit = settings_only(load(&given).unwrap());
    let defaults = settings_only(load(&base).unwrap());
    assert_eq!(format!("{explicit:?}"), format!("{defaults:?}"));
    assert_eq!(LISTEN.default_value(), ListenAddr::Tcp(DEFAULT_LISTEN));
    assert_eq!(
        MAX_HEADER_BYTES.shown_default(),
        ShownDefault::Value("64KiB".into())
    );
    assert_eq!(
        ASSERTION_TTL.shown_default(),
        ShownDefault::Value("1h".into())
    );
}

#[test]
fn an_unreadable_variable_is_reported_once_not_again_as_unset() {
    struct Broken;
    impl Env for Broken {
        fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
            match name {
                "SA_CLIENT_ID" | "SERVICE_API_URL" => Err(NotUnicode),
                "SA_PRIVATE_KEY" => Ok(Some(KEY.into())),
                "SA_IAM_AUDIENCE" | "SA_ORGANIZATION_ID" => Ok(Some("x".into())),
                "SA_TOKEN_URI" => Ok(Some("https://iam.example.com/token".into())),
                _ => Ok(None),
            }
        }
    }
    let err = Config::load(&Flags::default(), &Broken, Requirement::Upstream).unwrap_err();
    assert_eq!(
        err.lines(),
        [
            "SERVICE_API_URL (environment variable SERVICE_API_URL): is not valid UTF-8",
            "SA_CLIENT_ID (environment variable SA_CLIENT_ID): is not valid UTF-8",
        ]
    );
}

#[test]
fn the_demo_serves_health_where_the_admin_listener_is_given() {
    let demo = load_demo(&[("LANYARD_ADMIN_LISTEN", "0.0.0.0:9191")]);
    assert_eq!(demo.admin.listen, "0.0.0.0:9191".parse().unwrap());
}
