//! The README and the example config agree with the code's list of settings.

use crate::support;

use std::collections::BTreeSet;

use lanyard::config::{SETTINGS, ShownDefault};

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// Cells of the README's settings table, one row per setting.
fn settings_rows() -> Vec<Vec<String>> {
    let readme = read("README.md");
    let section = readme
        .split("\n## Settings\n")
        .nth(1)
        .expect("a Settings section")
        .split("\n## ")
        .next()
        .unwrap();
    section
        .lines()
        .filter(|line| {
            line.starts_with("| ") && !line.starts_with("| setting") && !line.starts_with("| ---")
        })
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// Every row of the README's settings table is the setting's declaration:
/// variable, flag, config key and default, in the table's order.
#[test]
fn readme_settings_table_matches_the_declarations() {
    let rows = settings_rows();
    assert_eq!(rows.len(), SETTINGS.len(), "one row per setting");
    for (row, setting) in rows.iter().zip(SETTINGS) {
        let env = setting.env();
        assert_eq!(row[1], format!("`{env}`"));
        match setting.flag() {
            Some(flag) => assert_eq!(row[2], format!("`{flag}`"), "{env}"),
            None => assert!(row[2].starts_with("none"), "{env}"),
        }
        assert_eq!(row[3], format!("`{}`", setting.key()), "{env}");
        let default = match setting.shown_default() {
            ShownDefault::None => "none".to_string(),
            ShownDefault::Value(value) => format!("`{value}`"),
            ShownDefault::Computed(text) => text,
            ShownDefault::Described(text) => text.to_string(),
        };
        assert_eq!(row[4], default, "{env}: the README's default");
    }
}

#[test]
fn example_config_names_every_key_and_only_real_ones() {
    let example = read("config/lanyard.example.toml");
    let named: BTreeSet<&str> = example
        .lines()
        .filter_map(|line| {
            line.strip_prefix("# ")?
                .split_once(" = ")
                .map(|(key, _)| key)
        })
        .filter(|key| {
            key.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    let known: BTreeSet<&str> = SETTINGS.iter().map(|s| s.key()).collect();
    assert_eq!(named, known);
}

#[test]
fn example_config_loads_when_uncommented() {
    let example = read("config/lanyard.example.toml");
    // Uncomment the key lines (not the multi-line key example) and load it.
    let uncommented: String = example
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("# ")?;
            let (key, _) = rest.split_once(" = ")?;
            (key != "private_key"
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .then_some(rest)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lanyard.toml");
    // Both files are read and checked at load, so real ones.
    let ca = support::write(dir.path(), "ca.pem", &support::tls::TestCa::new().ca_pem);
    let key = support::fixture("rsa2048.pkcs8.pem");
    let credentials = serde_json::json!({
        "type": "service_account",
        "client_id": "sa-example",
        "private_key": key,
        "iam_audience": "https://iam.example.com",
        "token_uri": "https://iam.example.com/oauth2/token",
        "organization_id": "org-example",
    });
    let credentials = support::write(dir.path(), "credentials.json", &credentials.to_string());
    // A directory of accounts, none yet: the example names one too.
    let accounts = dir.path().join("accounts");
    std::fs::create_dir(&accounts).unwrap();
    // The example shows the session key both ways; a config gives one.
    let session_key = support::write(dir.path(), "session-key", &"QUJD".repeat(11));
    let uncommented: String = uncommented
        .lines()
        .filter(|line| !line.starts_with("verifier_session_key ="))
        .collect::<Vec<_>>()
        .join("\n");
    let text = uncommented
        .replace(
            "/run/secrets/lanyard/session-key",
            session_key.to_str().unwrap(),
        )
        .replace("/etc/ssl/private-ca.pem", ca.to_str().unwrap())
        .replace(
            "/var/run/secrets/lanyard/credentials.json",
            credentials.to_str().unwrap(),
        )
        .replace(
            "/var/run/secrets/lanyard/accounts",
            accounts.to_str().unwrap(),
        );
    std::fs::write(&path, text).unwrap();
    let flags = lanyard::config::Flags {
        config: Some(path),
        ..Default::default()
    };
    let env = std::collections::HashMap::<String, String>::new();
    let config =
        lanyard::config::Config::load(&flags, &env, lanyard::config::Requirement::Upstream)
            .expect("the example's values are valid");
    assert_eq!(
        config.listen,
        lanyard::config::ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
    );
    assert_eq!(config.assertion_ttl, std::time::Duration::from_secs(3600));
    // The example's overrides win over the file's fields.
    let account = config.account.expect("credentials read at load");
    assert_eq!(account.credentials().client_id, "sa-1234");
}

#[test]
fn readme_metrics_table_matches_the_registry() {
    let readme = read("README.md");
    let section = readme
        .split("\n## Metrics\n")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let documented: BTreeSet<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('`').nth(1).unwrap().to_string())
        .collect();
    let registry = prometheus::Registry::new();
    let metrics =
        lanyard::metrics::Metrics::register(&registry, lanyard::metrics::spans_dropped_counter())
            .unwrap();
    // Vectors are gathered once they have a series; the proxy's get theirs
    // with the first request.
    metrics
        .proxy_requests
        .with_label_values(&["GET", "200"])
        .inc();
    metrics
        .proxy_request_duration
        .with_label_values(&["GET"])
        .observe(0.001);
    // Each listener's connection series are made as it starts, and each
    // account's token series with its refresher (kept while it lives).
    metrics.listener("proxy");
    let _account = metrics.token.account("sa-example", false);
    let registered: BTreeSet<String> = registry
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    assert_eq!(documented, registered);
}

/// The image's version label and every image tag in the docs and manifests
/// name the crate's version, so a release bump cannot leave one behind.
#[test]
fn image_tags_name_the_crate_version() {
    let version = env!("CARGO_PKG_VERSION");
    let dockerfile = read("Dockerfile");
    assert!(
        dockerfile.contains(&format!("org.opencontainers.image.version=\"{version}\"")),
        "the Dockerfile's version label is not {version}"
    );
    let kustomization = read("deploy/kubernetes/kustomization.yaml");
    assert!(
        kustomization.contains(&format!("newTag: {version}")),
        "deploy/kubernetes/kustomization.yaml does not tag {version}"
    );
    let mut tags = 0;
    for path in ["README.md", "deploy/README.md", "Dockerfile"] {
        let text = read(path);
        for (at, _) in text.match_indices("lanyard:") {
            let tag: String = text[at + "lanyard:".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            // `lanyard:ci` is CI's own tag; prose like "lanyard: ..." has none.
            if tag.is_empty() || tag == "ci" {
                continue;
            }
            assert_eq!(tag, version, "{path} names the image lanyard:{tag}");
            tags += 1;
        }
    }
    assert!(tags >= 3, "the README's docker commands name no image tag");
}

/// docs/tests.md names every test module, so the catalogue cannot fall
/// behind `tests/it/`: each file, and each directory that is a module of
/// its own (`mod.rs`), the shared `support` aside.
#[test]
fn the_test_catalogue_names_every_test_module() {
    let catalogue = read("docs/tests.md");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let named = if entry.path().join("mod.rs").is_file() && name != "support" {
            format!("`tests/it/{name}/`")
        } else if name.ends_with(".rs") && name != "main.rs" {
            format!("`tests/it/{name}`")
        } else {
            continue;
        };
        if !catalogue.contains(&named) {
            missing.push(named);
        }
    }
    assert!(missing.is_empty(), "not in docs/tests.md: {missing:?}");
}
