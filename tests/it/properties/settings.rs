//! Settings: any values from any source give a config or named problems,
//! never the key.

use super::*;
use lanyard::config::{ListenAddr, Loaded};

/// Values that are right, or nearly right, for some setting.
fn plausible() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        select(
            &[
                "true",
                "false",
                "yes",
                "0",
                "on",
                "TRUE",
                "maybe",
                "json",
                "text",
                "xml",
                "127.0.0.1:0",
                "0.0.0.0:8080",
                "[::1]:9090",
                "localhost:80",
                "10.0.0.1",
                "https://api.example.com/v1",
                "http://127.0.0.1:9/token",
                "http://api.example.com",
                "https://user:pw@x.example",
                "https://x.example/#frag",
                "https://x.example/?q=1",
                "ftp://x.example",
                "30",
                "90s",
                "5m",
                "1h",
                "250ms",
                "2h",
                "-1",
                "1.5s",
                "1d",
                "",
                " ",
                "18446744073709551615",
                "18446744073709551616h",
                "5 m",
            ][..]
        )
        .prop_map(String::from),
        (
            any::<u64>(),
            select(&["", "s", "ms", "m", "h", "d", " s"][..])
        )
            .prop_map(|(n, unit)| format!("{n}{unit}")),
    ]
}

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn toml_value() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        text(30).prop_map(|s| toml_string(&s)),
        plausible().prop_map(|s| toml_string(&s)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        select(
            &[
                "1.5",
                "inf",
                "nan",
                "-0.0",
                "1e3",
                "[1, \"a\"]",
                "{ a = 1 }",
                "1979-05-27"
            ][..]
        )
        .prop_map(String::from),
    ]
}

/// Text shaped like TOML: punctuation, escapes and multi-line quotes.
const TOML_LIKE: &str = "([a-z_ =\"'\\[\\]{}.,#\n0-9-]|\\\\u[0-9A-F]{0,4}|\"\"\"){0,60}";

/// A config file: TOML text, maybe cut short, and the private key it holds.
fn toml_file() -> impl Strategy<Value = (String, Option<String>)> {
    let key = prop_oneof![
        text(30).prop_map(|s| toml_string(&s)),
        "[a-z_]{1,16}",
        select(SETTINGS).prop_map(|s| s.key().to_string()),
    ];
    let structured = (
        prop::collection::vec((key, toml_value()), 0..8),
        prop::option::of(key_input()),
        prop::option::weighted(0.3, any::<Index>()),
    )
        .prop_map(|(pairs, private_key, cut_at)| {
            let mut text = String::new();
            if let Some(pem) = &private_key {
                text.push_str(&format!("private_key = {}\n", toml_string(pem)));
            }
            for (k, v) in pairs {
                text.push_str(&format!("{k} = {v}\n"));
            }
            let text = match cut_at {
                Some(at) => cut(&text, at).to_string(),
                None => text,
            };
            (text, private_key)
        });
    prop_oneof![
        1 => text(200).prop_map(|t| (t, None)),
        1 => TOML_LIKE.prop_map(|t| (t, None)),
        3 => structured,
    ]
}

/// The value given to one environment variable or flag, before the files
/// it names are written.
#[derive(Debug, Clone)]
enum Given {
    Text(String),
    /// A name inside the case's directory (the file may not exist).
    PathIn(String),
    CredentialsFile(Vec<u8>, Vec<String>),
    ConfigFile(String, Option<String>),
}

fn credentials_body() -> impl Strategy<Value = (Vec<u8>, Vec<String>)> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128).prop_map(|b| (b, vec![])),
        edit().prop_map(|(field, edit)| {
            let mut keys = vec![PKCS8.clone()];
            if let Edit::Key(key) = &edit {
                keys.push(key.clone());
            }
            (
                Value::Object(edited(field, &edit)).to_string().into_bytes(),
                keys,
            )
        }),
    ]
}

fn given_for(name: &'static str) -> BoxedStrategy<Given> {
    // File names stay inside the case's directory: a generated path must
    // not wander onto /dev/zero.
    let path_in = "[^/]{1,20}".prop_map(Given::PathIn);
    let text = prop_oneof![1 => text(40), 2 => plausible()].prop_map(Given::Text);
    match name {
        "SA_PRIVATE_KEY" => key_input().prop_map(Given::Text).boxed(),
        "SA_CREDENTIALS_FILE" => prop_oneof![
            3 => credentials_body().prop_map(|(b, keys)| Given::CredentialsFile(b, keys)),
            1 => path_in,
        ]
        .boxed(),
        config::CONFIG_ENV => prop_oneof![
            3 => toml_file().prop_map(|(t, key)| Given::ConfigFile(t, key)),
            1 => path_in,
        ]
        .boxed(),
        "LANYARD_CA_FILE" => prop_oneof![path_in, text].boxed(),
        _ => text.boxed(),
    }
}

#[derive(Debug, Clone)]
struct SettingsCase {
    /// Start from settings that work, so the overrides are what is tested.
    sound_base: bool,
    env: Vec<(&'static str, Given)>,
    flags: Vec<(&'static dyn AnySetting, Given)>,
    need: Requirement,
}

fn settings_case() -> impl Strategy<Value = SettingsCase> {
    let mut names: Vec<&'static str> = SETTINGS.iter().map(|s| s.env()).collect();
    names.push(config::CONFIG_ENV);
    let env_entry =
        select(names).prop_flat_map(|name| given_for(name).prop_map(move |g| (name, g)));
    let flagged: Vec<&'static dyn AnySetting> = SETTINGS
        .iter()
        .copied()
        .filter(|s| s.flag().is_some())
        .collect();
    let flag_entry =
        select(flagged).prop_flat_map(|s| given_for(s.env()).prop_map(move |g| (s, g)));
    (
        any::<bool>(),
        prop_oneof![
            1 => Just(Vec::new()),
            3 => prop::collection::vec(env_entry, 1..5),
        ],
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::collection::vec(flag_entry, 1..3),
        ],
        select(
            &[
                Requirement::Upstream,
                Requirement::NoUpstream,
                Requirement::Demo,
                Requirement::AdminOnly,
            ][..],
        ),
    )
        .prop_map(|(sound_base, env, flags, need)| SettingsCase {
            sound_base,
            env,
            flags,
            need,
        })
}

/// Writes the files a case names into `dir`; returns the value to set and
/// the secrets it carries.
fn materialise(given: &Given, dir: &Path, n: usize) -> (String, Vec<String>) {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    match given {
        Given::Text(text) => (text.clone(), vec![]),
        Given::PathIn(name) => (path(name), vec![]),
        Given::CredentialsFile(bytes, keys) => {
            let file = dir.join(format!("credentials-{n}.json"));
            std::fs::write(&file, bytes).expect("temp file written");
            (file.to_string_lossy().into_owned(), keys.clone())
        }
        Given::ConfigFile(text, key) => {
            let file = dir.join(format!("lanyard-{n}.toml"));
            std::fs::write(&file, text).expect("temp file written");
            (
                file.to_string_lossy().into_owned(),
                key.iter().cloned().collect(),
            )
        }
    }
}

fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn settings_of_any_values_give_a_config_or_named_problems_without_the_key(
        case in settings_case(),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut env = HashMap::new();
        let mut flags = Flags::default();
        let mut secrets = Vec::new();
        let mut remote_allowed = false;
        if case.sound_base {
            let file = Value::Object(valid_file(&PKCS8)).to_string();
            let file = support::write(dir.path(), "sound.json", &file);
            env.insert(
                config::SERVICE_API_URL.env.to_string(),
                "https://api.example.com/v1".to_string(),
            );
            env.insert(
                config::CREDENTIALS_FILE.env.to_string(),
                file.to_string_lossy().into_owned(),
            );
            secrets.push(PKCS8.clone());
        }
        for (n, (name, given)) in case.env.iter().enumerate() {
            let (value, carried) = materialise(given, dir.path(), n);
            secrets.extend(carried);
            if *name == config::PRIVATE_KEY.env {
                secrets.push(value.clone());
            }
            if *name == config::CONFIG_ENV {
                let text = std::fs::read_to_string(&value).unwrap_or_default();
                let table: toml::Table = text.parse().unwrap_or_default();
                remote_allowed |= table.get(config::ALLOW_REMOTE.key).is_some_and(|v| {
                    v.as_bool() == Some(true)
                        || v.as_str().is_some_and(truthy)
                        || v.as_integer() == Some(1)
                });
            }
            remote_allowed |= *name == config::ALLOW_REMOTE.env && truthy(&value);
            env.insert(name.to_string(), value);
        }
        for (n, (setting, given)) in case.flags.iter().enumerate() {
            let (value, carried) = materialise(given, dir.path(), 100 + n);
            secrets.extend(carried);
            remote_allowed |= setting.key() == config::ALLOW_REMOTE.key && truthy(&value);
            flags.set(*setting, Some(value));
        }

        match Loaded::load(&flags, &env, case.need) {
            Ok(loaded) => {
                let proxy = match &loaded {
                    Loaded::Run(run) => Some(&run.proxy),
                    Loaded::Check(check) => Some(&check.run.proxy),
                    Loaded::Demo(demo) => demo.proxy.as_ref(),
                    _ => None,
                };
                if let Some(proxy) = proxy {
                    prop_assert!(
                        match &proxy.listen {
                            ListenAddr::Tcp(addr) => addr.ip().is_loopback() || remote_allowed,
                            // Its file's permissions decide who reaches it.
                            ListenAddr::Unix(_) => true,
                        },
                        "listening on {} without {}", proxy.listen, config::ALLOW_REMOTE.env
                    );
                }
                // Each command gets its own configuration, with the
                // credentials and TLS it needs read and checked by the load
                // itself: nothing after it reads them again.
                let its_own = matches!(
                    (case.need, &loaded),
                    (Requirement::Upstream, Loaded::Run(_) | Loaded::Demo(_))
                        | (Requirement::NoUpstream, Loaded::Token(_))
                        | (Requirement::Demo, Loaded::Demo(_))
                        | (Requirement::AdminOnly, Loaded::Healthcheck(_))
                );
                prop_assert!(its_own, "{:?} loaded as {loaded:?}", case.need);
            }
            Err(err) => check_config_error(&err, &secrets)?,
        }
    }

    #[test]
    fn duration_of_any_text_is_read_or_refused_with_a_reason(
        raw in prop_oneof![text(30), plausible(), "[0-9 ]{0,25}(ms|s|m|h|d|)"],
    ) {
        match config::parse_duration(&raw) {
            Ok(duration) => {
                let trimmed = raw.trim();
                if let Ok(seconds) = trimmed.parse::<u64>() {
                    prop_assert_eq!(duration, Duration::from_secs(seconds));
                }
            }
            // Quoted as given: `ConfigError` escapes what would not print.
            Err(why) => prop_assert!(
                why.contains("is not a duration") || why.contains("is longer than a day"),
                "{why:?}"
            ),
        }
    }

    #[test]
    fn duration_with_a_unit_is_read_as_written(
        n in prop_oneof![any::<u64>(), 0..100_000u64],
        unit in select(&["", "s", "ms", "m", "h"][..]),
    ) {
        let expected = match unit {
            "" | "s" => Duration::from_secs(n),
            "ms" => Duration::from_millis(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            _ => Duration::from_secs(n.saturating_mul(3600)),
        };
        let raw = format!("{n}{unit}");
        if expected > Duration::from_secs(24 * 3600) {
            let refused = format!("`{raw}` is longer than a day, the most any duration may be");
            prop_assert_eq!(config::parse_duration(&raw), Err(refused));
        } else {
            prop_assert_eq!(config::parse_duration(&raw), Ok(expected));
        }
    }
}

#[test]
fn setting_values_with_control_characters_stay_on_their_own_line() {
    // Found by the property above: values were quoted raw, so a line break
    // in one printed a second line that could pass for another problem.
    let mut flags = Flags::default();
    flags.set(&config::LISTEN, Some("\u{7f}"));
    let env = support::env(&[("LANYARD_LOG_FORMAT", "xml\nSERVICE_API_URL: forged")]);
    let err = Config::load(&flags, &env, Requirement::AdminOnly).unwrap_err();
    assert_eq!(
        err.to_string().lines().collect::<Vec<_>>(),
        [
            "LANYARD_LISTEN (flag --listen): `\\u{7f}` is not an address with a port (like 127.0.0.1:8080) or a Unix socket (like unix:/run/lanyard/lanyard.sock)",
            "LANYARD_LOG_FORMAT (environment variable LANYARD_LOG_FORMAT): `xml\\nSERVICE_API_URL: forged` is not a log format (use json or text)",
        ]
    );
}
