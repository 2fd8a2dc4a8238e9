//! What the settings point at, read once at load: the credentials file
//! (the example one among them) and the CA bundle.

use super::*;

#[test]
fn credentials_and_the_ca_bundle_are_read_once_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials.json");
    let json = serde_json::json!({
        "type": "service_account",
        "client_id": "sa-file",
        "private_key": KEY,
        "iam_audience": "https://iam.example.com",
        "token_uri": "https://iam.example.com/token",
        "organization_id": "org-file",
    });
    std::fs::write(&creds, json.to_string()).unwrap();
    let map = env(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("SA_CREDENTIALS_FILE", creds.to_str().unwrap()),
    ]);
    let Loaded::Run(run) = Loaded::load(&Flags::default(), &map, Requirement::Upstream).unwrap()
    else {
        panic!("not `lanyard run`'s");
    };
    // Gone after load, and nothing asks for it again.
    std::fs::remove_file(&creds).unwrap();
    let AccountSet::One(account) = &run.signing.accounts else {
        panic!("one account");
    };
    assert_eq!(account.credentials().client_id, "sa-file");
    assert!(account.loaded.is_some(), "the watcher starts from the file");

    // Commands that sign nothing read no key.
    let loaded = Loaded::load(&Flags::default(), &map, Requirement::Demo).unwrap();
    assert!(matches!(loaded, Loaded::Demo(_)), "{loaded:?}");
    let loaded = Loaded::load(&Flags::default(), &map, Requirement::AdminOnly).unwrap();
    assert!(matches!(loaded, Loaded::Healthcheck(_)), "{loaded:?}");
}

#[test]
fn a_ca_path_that_is_no_file_is_named_with_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let shown = dir.path().display();
    let err = load(&[
        ("SERVICE_API_URL", "https://api.example.com"),
        ("LANYARD_CA_FILE", dir.path().to_str().unwrap()),
    ])
    .unwrap_err();
    assert_eq!(
        err.lines(),
        [format!(
            "LANYARD_CA_FILE (environment variable LANYARD_CA_FILE): {shown} is not a file"
        )]
    );
    let missing = PathBuf::from("/nonexistent/ca.pem");
    let mut flags = Flags::default();
    flags.set(&CA_FILE, missing.to_str());
    let err = Config::load(
        &flags,
        &with_account(&[("SERVICE_API_URL", "https://api.example.com")]),
        Requirement::Upstream,
    )
    .unwrap_err();
    assert_eq!(
        err.lines(),
        ["LANYARD_CA_FILE (flag --ca-file): /nonexistent/ca.pem: no such file"]
    );
}

#[test]
fn the_example_credentials_file_has_every_field_and_a_key_to_replace() {
    // config/credentials.example.json: every field of a Portal's file,
    // obviously fake; its key a placeholder that is refused by name.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/credentials.example.json"
    );
    let only_the_file = env(&[
        ("SERVICE_API_URL", "https://api.example.com/v1/"),
        ("SA_CREDENTIALS_FILE", example),
    ]);
    let err = Config::load(&Flags::default(), &only_the_file, Requirement::Upstream)
        .unwrap_err()
        .to_string();
    let problems: Vec<&str> = err.lines().collect();
    assert_eq!(problems.len(), 1, "only the key: {err}");
    assert!(problems[0].contains("private_key"), "{err}");
    assert!(
        problems[0].contains("is still the placeholder of config/credentials.example.json"),
        "{err}"
    );
    assert!(
        !err.contains("REPLACE"),
        "the key's text is never quoted: {err}"
    );
    // With a real key given beside it, the file's other fields are taken.
    let with_key = env(&[
        ("SERVICE_API_URL", "https://api.example.com/v1/"),
        ("SA_CREDENTIALS_FILE", example),
        ("SA_PRIVATE_KEY", KEY),
    ]);
    let Loaded::Run(run) =
        Loaded::load(&Flags::default(), &with_key, Requirement::Upstream).unwrap()
    else {
        panic!("not `lanyard run`'s");
    };
    let credentials = run
        .signing
        .accounts
        .default_account()
        .unwrap()
        .credentials();
    assert_eq!(credentials.client_id, "sa-example-0000");
    assert_eq!(credentials.organization_id, "org-example-0000");
    assert_eq!(credentials.iam_audience, "https://iam.example.com");
}
