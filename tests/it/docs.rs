//! The user guide agrees with the code: the settings and metrics tables
//! (docs/settings.md, docs/admin.md) and the example config with the
//! code's declarations, image tags with the crate's version, docs/tests.md
//! with `tests/it/`; and README.md stays a front page whose links, and
//! the guide's, all lead somewhere.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lanyard::config::{SETTINGS, ShownDefault};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

/// The body rows of the one table in `path` whose header row starts with
/// `header`, each as its cells.
fn table(path: &str, header: &str) -> Vec<Vec<String>> {
    let text = read(path);
    let mut lines = text.lines().skip_while(|line| !line.starts_with(header));
    assert!(lines.next().is_some(), "{path}: no table headed {header:?}");
    let rows: Vec<Vec<String>> = lines
        .take_while(|line| line.starts_with('|'))
        .filter(|line| !line.starts_with("| ---"))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert!(
        !rows.is_empty(),
        "{path}: the table headed {header:?} is empty"
    );
    rows
}

/// Cells of docs/settings.md's settings table, one row per setting.
fn settings_rows() -> Vec<Vec<String>> {
    table(
        "docs/settings.md",
        "| setting | environment | flag | config key | default | notes |",
    )
}

/// Every row of docs/settings.md's settings table is the setting's
/// declaration:
/// variable, flag, config key and default, in the table's order.
#[test]
fn settings_table_matches_the_declarations() {
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
        assert_eq!(row[4], default, "{env}: docs/settings.md's default");
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
    let loaded =
        lanyard::config::Loaded::load(&flags, &env, lanyard::config::Requirement::Upstream)
            .expect("the example's values are valid");
    let lanyard::config::Loaded::Run(run) = loaded else {
        panic!("not `lanyard run`'s: {loaded:?}");
    };
    assert_eq!(
        run.proxy.listen,
        lanyard::config::ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())
    );
    assert_eq!(
        run.access.assertion_ttl,
        std::time::Duration::from_secs(3600)
    );
    // The example's overrides win over the file's fields.
    let account = run.signing.accounts.default_account();
    let account = account.expect("credentials read at load");
    assert_eq!(account.credentials().client_id, "sa-1234");
}

/// Every metric of the registry has a row in docs/admin.md's table, and
/// every row a metric; each row names every label its metric carries.
#[test]
fn metrics_table_matches_the_registry() {
    let documented: BTreeMap<String, String> =
        table("docs/admin.md", "| metric | type | labels | meaning |")
            .iter()
            .map(|row| {
                let name = row[0]
                    .strip_prefix('`')
                    .and_then(|name| name.strip_suffix('`'))
                    .unwrap_or_else(|| panic!("docs/admin.md: a metric not in backticks: {row:?}"));
                (name.to_string(), row[2].clone())
            })
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
    let labels = lanyard::metrics::AccountLabels::new("sa-example", "org-example");
    let _account = metrics.token.account(labels, false);
    let families = registry.gather();
    let registered: BTreeSet<&str> = families.iter().map(|f| f.name()).collect();
    let names: BTreeSet<&str> = documented.keys().map(String::as_str).collect();
    assert_eq!(names, registered);
    for family in &families {
        let cell = &documented[family.name()];
        for label in family.get_metric()[0].get_label() {
            assert!(
                cell.contains(&format!("`{}`", label.name())),
                "docs/admin.md: {} has a label `{}` its row does not name: {cell}",
                family.name(),
                label.name()
            );
        }
    }
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
    let mut paths: Vec<String> = [
        "README.md",
        "deploy/README.md",
        "Dockerfile",
        "Dockerfile.pkcs11",
    ]
    .map(String::from)
    .into();
    paths.extend(guide_pages().iter().map(|page| {
        page.strip_prefix(root())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    }));
    let mut tags = 0;
    for path in &paths {
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
    assert!(
        tags >= 3,
        "the docs' docker commands name fewer than 3 image tags"
    );
    assert!(
        read("README.md").contains(&format!("lanyard:{version}")),
        "README.md's install names no image tag"
    );
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

/// README.md is a front page (what lanyard is, the two commands, install,
/// a first run, `lanyard check`, a map of the guide); the rest is the
/// guide's.
#[test]
fn readme_is_a_front_page_of_at_most_300_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; move what is not front-page matter into docs/"
    );
}

/// The guide's pages: docs/*.md, its index included.
fn guide_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    assert!(
        pages.iter().any(|page| page.ends_with("docs/README.md")),
        "docs/README.md, the guide's index"
    );
    pages
}

/// Markdown with its fenced code blocks and inline code spans blanked
/// out, so that what they show is not taken for a link. A code span
/// keeps its place (as `x`): `[`Dockerfile`](Dockerfile)` is still a
/// link. A span may wrap onto the next line; a paragraph ends it.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            in_code = false;
        } else if line.trim().is_empty() {
            in_code = false;
        } else if !fenced {
            for (i, part) in line.split('`').enumerate() {
                if i > 0 {
                    in_code = !in_code;
                }
                out.push_str(if in_code { "x" } else { part });
            }
        }
        out.push('\n');
    }
    out
}

/// The anchors GitHub gives a markdown file's headings: the heading's
/// text (code spans' text kept, a link's text for the link) lowercased,
/// spaces turned into `-`, punctuation other than `-` and `_` dropped;
/// a repeated anchor gets `-1`, `-2`, ... after it.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let text = link_texts(line[hashes..].trim());
        let slug: String = text
            .chars()
            .flat_map(char::to_lowercase)
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// `[text](target)` as `text`.
fn link_texts(text: &str) -> String {
    links(text)
        .into_iter()
        .fold(text.to_string(), |text, link| {
            text.replace(&link.whole, &link.text)
        })
}

struct Link {
    whole: String,
    text: String,
    target: String,
}

/// Inline links, `[text](target)`, their text on one line or several.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(close) = rest.find("](") {
        let Some(open) = rest[..close].rfind('[') else {
            rest = &rest[close + 2..];
            continue;
        };
        let after = &rest[close + 2..];
        let Some(end) = after.find(')') else { break };
        let target = &after[..end];
        if !target.contains(char::is_whitespace) {
            found.push(Link {
                whole: rest[open..close + 3 + end].to_string(),
                text: rest[open + 1..close].to_string(),
                target: target.to_string(),
            });
        }
        rest = &after[end..];
    }
    found
}

/// Every relative link in README.md, the guide and deploy/README.md leads
/// to a file or directory that exists, and a link with `#anchor` into a
/// markdown file to one of its headings, so moving a section cannot leave
/// a link behind.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut files = vec![root().join("README.md"), root().join("deploy/README.md")];
    files.extend(guide_pages());
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&prose(&text)) {
            let target = link.target.as_str();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target, None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{name}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if resolved.extension().is_some_and(|ext| ext == "md")
                && !anchors(&std::fs::read_to_string(&resolved).unwrap()).contains(anchor)
            {
                broken.push(format!("{name}: {target}: no such heading"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that lead nowhere:\n{}",
        broken.join("\n")
    );
    assert!(
        checked > 100,
        "only {checked} links found: is the link reader broken?"
    );
}

/// The anchor rule above, on headings as the guide writes them.
#[test]
fn heading_anchors_follow_githubs_rule() {
    let markdown = "# Running it\n## Kubernetes, as a native sidecar\n### `lanyard check`\n\
        ```sh\n# not a heading\n```\n## Bounded: 1-byte frames\n## Tests\n## Tests\n\
        ### Read the rule (*illustrative*)\n## [Limits](x.md#limits) of it\n";
    let expected = [
        "running-it",
        "kubernetes-as-a-native-sidecar",
        "lanyard-check",
        "bounded-1-byte-frames",
        "tests",
        "tests-1",
        "read-the-rule-illustrative",
        "limits-of-it",
    ];
    assert_eq!(
        anchors(markdown),
        expected
            .iter()
            .map(|a| a.to_string())
            .collect::<BTreeSet<_>>()
    );
}
