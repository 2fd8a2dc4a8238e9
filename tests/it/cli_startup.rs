//! What the binary says at start-up, beside its refusals (`cli`):
//! `--help` and `--version`, the settings list `--help` ends with, a
//! switch flag against the environment, a credentials file other users
//! can read, and the example credentials file's placeholder key.

use std::collections::HashMap;

use crate::cli::assert_no_secret;
use crate::support::*;

#[tokio::test]
async fn help_and_version_exit_0() {
    let out = lanyard(&["--version"], &HashMap::<String, String>::new()).await;
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        format!("lanyard {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = lanyard(&["--help"], &HashMap::<String, String>::new()).await;
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(help.contains("[env: SERVICE_API_URL]"), "{help}");
    // Each flag's variable and default come from the setting's declaration.
    // clap puts the help on the flag's line, or on the next one when some
    // flag is long: read both.
    let described = |flag: &str| {
        let lines: Vec<&str> = help.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("no {flag} line in {help}"));
        let next = lines.get(at + 1).copied().unwrap_or_default();
        format!("{} {}", lines[at].trim(), next.trim())
    };
    let listen = described("--listen <ADDR>");
    assert!(
        listen.ends_with("[env: LANYARD_LISTEN] [default: 127.0.0.1:8080]"),
        "{listen}"
    );
    let ttl = described("--assertion-ttl <DURATION>");
    assert!(ttl.ends_with("[default: 1h]"), "{ttl}");
    // The key is no flag, but --help still names it.
    assert!(!help.contains("--private-key"), "{help}");
    assert!(help.contains("  SA_PRIVATE_KEY "), "{help}");
}

#[tokio::test]
async fn a_switch_flag_outranks_the_environment_and_its_absence_does_not() {
    let closed = closed_port().to_string();
    let given = env(&[
        ("LANYARD_LISTEN", "0.0.0.0:0"),
        ("LANYARD_ALLOW_REMOTE", "false"),
        ("LANYARD_ADMIN_LISTEN", &closed),
    ]);
    // Settings accepted: the probe runs, and finds nothing listening.
    let out = lanyard(&["healthcheck", "--allow-remote"], &given).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    // Without the flag the variable stands, and the listener is refused.
    let out = lanyard(&["healthcheck"], &given).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(
            "lanyard: LANYARD_LISTEN (environment variable LANYARD_LISTEN): 0.0.0.0:0 is not a loopback address"
        ),
        "{}",
        text(&out.stderr)
    );
}

/// `--help`'s settings without a flag: each name stands apart from its
/// text, however long the name.
#[tokio::test]
async fn help_keeps_every_flagless_setting_apart_from_its_text() {
    let out = lanyard(&["--help"], env(&[])).await;
    let help = text(&out.stdout);
    let list = help
        .split("Settings without a flag")
        .nth(1)
        .unwrap_or_else(|| panic!("no flagless list in\n{help}"));
    let names = [
        "LANYARD_VERIFIER_SESSION_KEY",
        "LANYARD_OIDC_SIGNING_KEY",
        "SA_PRIVATE_KEY",
    ];
    for name in names {
        let line = list
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not apart from its text in\n{list}"));
        assert!(line.contains(&format!("{name}  ")), "{line}");
    }
}

/// config/credentials.example.json copied and never filled in: its key is
/// said to be the example's placeholder, not a broken key.
#[tokio::test]
async fn the_examples_placeholder_key_is_named_as_such() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/credentials.example.json"
    );
    let vars = env(&[
        ("SERVICE_API_URL", "https://api.example.com/"),
        ("SA_CREDENTIALS_FILE", example),
    ]);
    let out = lanyard(&["token"], &vars).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("is still the placeholder of config/credentials.example.json, not a key: put the private key of the credentials file the Portal gave you in its place"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("REPLACE"),
        "the placeholder quoted: {stderr}"
    );
}

/// A credentials file other users can read is said at start-up, naming
/// the file and its mode, never its content; one only its owner reads is
/// not.
#[tokio::test]
async fn a_credentials_file_others_can_read_gets_a_warning_naming_it_and_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let vars = settings(&mock, dir.path(), &[]);
    let file = std::path::PathBuf::from(&vars["SA_CREDENTIALS_FILE"]);
    let warning = |mode: &str, who: &str| {
        format!(
            "SA_CREDENTIALS_FILE (environment variable SA_CREDENTIALS_FILE): {} is readable by {who} (mode {mode}), and it holds the account's private key",
            file.display()
        )
    };
    for (mode, who) in [(0o644, "every user"), (0o640, "its group")] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = lanyard(&["token"], &vars).await;
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let shown = format!("{mode:04o}");
        assert!(stderr.contains(&warning(&shown, who)), "{stderr}");
        assert_no_secret(&stderr);
        assert!(!stderr.contains(CLIENT_ID), "the file's content: {stderr}");
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = lanyard(&["token"], &vars).await;
    assert!(out.status.success());
    assert!(
        !text(&out.stderr).contains("is readable by"),
        "{}",
        text(&out.stderr)
    );
}
