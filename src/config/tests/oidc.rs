//! The OpenID Connect provider's settings, checked at load with the rest:
//! the issuer, the clients file and the keys, each problem one line that
//! names its setting and never a secret, and all of them in one run.

use super::*;

use base64::Engine as _;
use serde_json::json;

use crate::config::oidc::subject::{Sector, SubjectType};

const ISSUER: &str = "https://login.example.com/wallet";
/// The shop's secret, which no message may quote.
const SECRET: &str = "the-shops-secret-0123456789";
const ISSUER_ENV: &str = "LANYARD_OIDC_ISSUER";
const CLIENTS: &str = "LANYARD_OIDC_CLIENTS_FILE";
const KEY_FILE: &str = "LANYARD_OIDC_SIGNING_KEY_FILE";
const KEY_VALUE: &str = "LANYARD_OIDC_SIGNING_KEY";
const PREVIOUS: &str = "LANYARD_OIDC_PREVIOUS_KEY_FILE";
const SUB_CLAIM: &str = "LANYARD_OIDC_SUB_CLAIM";
const PAIRWISE_KEY: &str = "LANYARD_OIDC_PAIRWISE_KEY";
const PAIRWISE_KEY_FILE: &str = "LANYARD_OIDC_PAIRWISE_KEY_FILE";
/// A pairwise key: base64 of 32 bytes, which no message may quote.
const PAIRWISE: &str = "cGFpcndpc2Uta2V5LW9mLXRoZS10ZXN0LTAxMjM0NTY=";

/// A setting's name with where its value came from, the environment.
fn from_env(env: &str) -> String {
    format!("{env} (environment variable {env})")
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A provider's files in a directory of their own: a clients file, the
/// signing key and the one before it, each made for the test.
struct Files {
    dir: tempfile::TempDir,
    clients: String,
    key: String,
    key_pem: String,
    /// The signing key's public half alone.
    key_public: String,
    previous: String,
    previous_public: String,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        let (clients, key, key_public) =
            (path("clients.json"), path("oidc.pem"), path("oidc.pub.pem"));
        let (previous, previous_public) =
            (path("oidc.previous.pem"), path("oidc.previous.pub.pem"));
        std::fs::write(
            &clients,
            clients_json(json!([
                {"client_id": "shop", "client_secret": SECRET, "redirect_uris": ["https://shop.example/cb"], "client_name": "The Shop"},
                {"client_id": "spa", "redirect_uris": ["http://127.0.0.1:3000/cb"], "subject_type": "public"},
            ])),
        )
        .unwrap();
        let current = crate::mock::generate_rsa_key().unwrap();
        let key_pem = current.private_pem.expose().to_string();
        std::fs::write(&key, &key_pem).unwrap();
        std::fs::write(&key_public, public_pem(&current.public_der)).unwrap();
        let before = crate::mock::generate_rsa_key().unwrap();
        std::fs::write(&previous, before.private_pem.expose()).unwrap();
        std::fs::write(&previous_public, public_pem(&before.public_der)).unwrap();
        Files {
            dir,
            clients,
            key,
            key_pem,
            key_public,
            previous,
            previous_public,
        }
    }

    /// `contents` in a file of the directory, by its path.
    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_string()
    }

    /// `lanyard verifier`'s settings with a provider that loads, `pairs`
    /// over them (an empty value unsets one).
    fn load(&self, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        self.load_for(Requirement::Verifier, pairs)
    }

    fn load_for(&self, need: Requirement, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut map = with_account(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("PROJECT_ID", "proj-1"),
            ("RULE_ID", "7f3c2a9e-1b4d-4c8e-9a6f-2d5e8b1c0a37"),
            ("WALLET_BASE_URL", "https://wallet.example.com"),
            (ISSUER_ENV, ISSUER),
            (CLIENTS, &self.clients),
            (KEY_FILE, &self.key),
        ]);
        map.extend(env(pairs));
        Config::load(&Flags::default(), &map, need)
    }
}

fn clients_json(clients: serde_json::Value) -> String {
    json!({ "clients": clients }).to_string()
}

/// An RSA public key (PKCS#1 DER) as `openssl pkey -pubout` writes it.
fn public_pem(pkcs1: &[u8]) -> String {
    use aws_lc_rs::encoding::AsDer as _;
    let key = aws_lc_rs::rsa::PublicKey::from_der(pkcs1).unwrap();
    let spki = key.as_der().unwrap();
    let body = base64::engine::general_purpose::STANDARD.encode(spki.as_ref());
    format!("-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n")
}

/// The one problem `pairs` make, otherwise good settings having none.
fn the_problem(files: &Files, pairs: &[(&str, &str)]) -> String {
    let err = files.load(pairs).unwrap_err();
    assert_eq!(err.lines().len(), 1, "one problem: {err}");
    err.lines()[0].clone()
}

#[test]
fn a_provider_loads_with_its_issuer_clients_and_keys() {
    let files = Files::new();
    let config = files
        .load(&[
            (PREVIOUS, &files.previous_public),
            (SUB_CLAIM, "nationality, document_number"),
            (PAIRWISE_KEY, PAIRWISE),
            ("LANYARD_OIDC_CLAIMS_MAP", "portrait="),
        ])
        .unwrap();
    let oidc = config.oidc.as_ref().expect("the provider is on");
    assert_eq!(oidc.issuer.as_str(), ISSUER);
    assert_eq!(oidc.issuer.path(), "/wallet");
    assert_eq!(oidc.clients.len(), 2);
    let shop = oidc.clients.get("shop").unwrap();
    assert_eq!(shop.secret.as_ref().unwrap().expose(), SECRET);
    assert_eq!(shop.name.as_deref(), Some("The Shop"));
    assert!(oidc.clients.get("spa").unwrap().secret.is_none());
    assert_eq!(oidc.key.bits(), 2048);
    let current = crate::config::credentials::parse_private_key(&files.key_pem).unwrap();
    assert_eq!(oidc.key.public(), current.public());
    let previous = std::fs::read_to_string(&files.previous).unwrap();
    let previous = crate::config::credentials::parse_private_key(&previous).unwrap();
    assert_eq!(
        oidc.previous.as_ref(),
        previous.public(),
        "its public key alone"
    );
    assert_eq!(oidc.sub_claims, ["nationality", "document_number"]);
    assert!(oidc.pairwise_key.is_some());
    assert_eq!(shop.subject_type, SubjectType::Pairwise, "the default");
    assert_eq!(shop.sector, Sector::Host("shop.example".into()));
    let spa = oidc.clients.get("spa").unwrap();
    assert_eq!(spa.subject_type, SubjectType::Public);
    assert_eq!(oidc.claims_map.0, [("portrait".to_string(), None)]);
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(SECRET),
        "the client's secret shown: {shown}"
    );
    let key_line = files.key_pem.lines().nth(1).unwrap();
    assert!(!shown.contains(key_line), "the key shown");
    assert!(!shown.contains(PAIRWISE), "the pairwise key shown");

    // The key as PEM text, the previous one as its private key; `check`
    // reads the provider too, and `run` does not.
    let config = files
        .load_for(
            Requirement::Check,
            &[
                (KEY_FILE, ""),
                (KEY_VALUE, &files.key_pem),
                (PREVIOUS, &files.previous),
            ],
        )
        .unwrap();
    let oidc = config.oidc.expect("check reads the provider");
    assert_eq!(oidc.key.public(), current.public());
    assert_eq!(oidc.previous.as_ref(), previous.public());
    let run = files.load_for(Requirement::Upstream, &[]).unwrap();
    assert!(run.oidc.is_none());
    // Off without its issuer, and plain http on a loopback host is fine.
    assert!(
        files
            .load(&[(ISSUER_ENV, ""), (CLIENTS, ""), (KEY_FILE, "")])
            .unwrap()
            .oidc
            .is_none()
    );
    for loopback in [
        "http://127.0.0.1:8081",
        "http://localhost:8081/wallet",
        "http://[::1]",
    ] {
        let config = files.load(&[(ISSUER_ENV, loopback)]).unwrap();
        assert!(config.oidc.is_some(), "{loopback}");
    }
}

#[test]
fn an_issuer_relying_parties_could_not_compare_or_trust_is_refused() {
    let files = Files::new();
    for (issuer, why) in [
        (
            "http://login.example.com",
            "`http://login.example.com` is plain http; an issuer must be https (plain http only on a loopback host, for trying it out)",
        ),
        (
            "https://login.example.com/wallet?tenant=a",
            "`https://login.example.com/wallet?tenant=a` has a query or a fragment, which an issuer must not (OpenID Connect Discovery §3)",
        ),
        (
            "https://login.example.com/#top",
            "`https://login.example.com/#top` has a query or a fragment, which an issuer must not (OpenID Connect Discovery §3)",
        ),
    ] {
        assert_eq!(
            the_problem(&files, &[(ISSUER_ENV, issuer)]),
            format!("{}: {why}", from_env(ISSUER_ENV))
        );
    }
}

#[test]
fn a_clients_file_that_cannot_be_used_is_named_with_where_it_goes_wrong() {
    let files = Files::new();
    let named = |path: &str, why: &str| format!("{}: {path}{why}", from_env(CLIENTS));
    let missing = "/nonexistent/clients.json";
    let dir = files.dir.path().to_str().unwrap();
    let latin1 = files.write("latin1.json", b"{\"clients\": [\"caf\xe9\"]}");
    let not_json = files.write("not.json", "{\"clients\": [");
    for (path, why) in [
        (missing, " cannot be read: no such file"),
        (dir, " cannot be read: is a directory"),
        (&latin1, " cannot be read: is not valid UTF-8"),
        (&not_json, ": is not JSON: eof error at line 1, column 13"),
    ] {
        assert_eq!(the_problem(&files, &[(CLIENTS, path)]), named(path, why));
    }

    let shop = |uri: &str| json!({"client_id": "shop", "redirect_uris": [uri]});
    for (clients, why) in [
        (
            json!([
                shop("https://shop.example/a"),
                shop("https://shop.example/b")
            ]),
            ": clients[1].client_id: the same as clients[0]'s; client ids must be unique",
        ),
        (
            json!([shop("https://shop.example/cb#done")]),
            ": clients[0].redirect_uris[0]: has a fragment, which a redirect URI must not (RFC 6749 §3.1.2)",
        ),
        (
            json!([shop("/cb")]),
            ": clients[0].redirect_uris[0]: is not an absolute URL (like https://app.example/callback)",
        ),
        (
            json!([{"client_id": "shop", "client_secret": "short-secret-15", "redirect_uris": ["https://shop.example/cb"]}]),
            ": clients[0].client_secret: must be a string of 16 to 512 printable ASCII characters (make one with `openssl rand -hex 32`), or left out for a public client",
        ),
    ] {
        let path = files.write("clients.json", clients_json(clients));
        let problem = the_problem(&files, &[(CLIENTS, &path)]);
        assert_eq!(problem, named(&path, why));
        assert!(!problem.contains("short-secret-15"), "a secret quoted");
    }
}

#[test]
fn the_signing_key_is_given_one_way_and_is_an_rsa_key_of_its_own() {
    let files = Files::new();
    assert_eq!(
        the_problem(&files, &[(KEY_FILE, "")]),
        "LANYARD_OIDC_SIGNING_KEY_FILE: is required with LANYARD_OIDC_ISSUER (the RSA key ID tokens are signed with); or set LANYARD_OIDC_SIGNING_KEY"
    );
    let both = the_problem(&files, &[(KEY_VALUE, &files.key_pem)]);
    assert_eq!(
        both,
        format!(
            "{}: LANYARD_OIDC_SIGNING_KEY is set too; set one of them",
            from_env(KEY_FILE)
        )
    );
    let not_a_key = files.write("not-a-key.pem", "hello");
    let rsa1024 = fixture("rsa1024.pem");
    let (ec_pkcs8, ec_sec1) = (fixture("ec-p256.pkcs8.pem"), fixture("ec-p256.sec1.pem"));
    let accounts = ["rsa2048.pkcs8.pem", "rsa2048.pkcs1.pem"].map(fixture);
    let own = "is the service account's key; ID tokens need a key of their own, so that a relying party that trusts them trusts nothing the account signs (make one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`)";
    for (path, why) in [
        (
            not_a_key.as_str(),
            format!(
                "{not_a_key} is not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"
            ),
        ),
        (
            &rsa1024,
            format!(
                "{rsa1024} is an RSA key shorter than 2048 bits; generate a 2048-bit or longer key"
            ),
        ),
        (
            &ec_pkcs8,
            format!("{ec_pkcs8} is an EC, Ed25519 or other non-RSA key; RS256 needs an RSA key"),
        ),
        (
            &ec_sec1,
            format!("{ec_sec1} is an EC key; RS256 needs an RSA key"),
        ),
        // The account's key, in either PEM form: keys are told apart by
        // their public half, not by their text.
        (&accounts[0], own.to_string()),
        (&accounts[1], own.to_string()),
    ] {
        assert_eq!(
            the_problem(&files, &[(KEY_FILE, path)]),
            format!("{}: {why}", from_env(KEY_FILE))
        );
    }

    // Given as text, named by its own setting and never quoted.
    let value = |text: &str| the_problem(&files, &[(KEY_FILE, ""), (KEY_VALUE, text)]);
    assert_eq!(value(KEY), format!("{}: {own}", from_env(KEY_VALUE)));
    let pasted = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0aXNo\n-----END PRIVATE KEY-----";
    let problem = value(pasted);
    assert_eq!(
        problem,
        format!(
            "{}: is not a valid RSA private key (its DER structure does not parse)",
            from_env(KEY_VALUE)
        )
    );
    assert!(!both.contains("PRIVATE KEY-----") && !problem.contains("c2VjcmV0aXNo"));
}

#[test]
fn the_previous_key_is_the_one_before_never_the_current_or_the_accounts() {
    let files = Files::new();
    let previous = |path: &str| the_problem(&files, &[(PREVIOUS, path)]);
    let same = "is the current signing key; it names the key used before it";
    for current in [&files.key, &files.key_public] {
        assert_eq!(previous(current), format!("{}: {same}", from_env(PREVIOUS)));
    }
    let own = "is the service account's key;";
    for account in ["rsa2048.pkcs8.pem", "rsa2048.pub.pem"].map(fixture) {
        let problem = previous(&account);
        assert!(
            problem.starts_with(&format!("{}: {own}", from_env(PREVIOUS))),
            "{problem}"
        );
    }
    let not_a_key = files.write("not-a-key.pem", "hello");
    let rsa1024 = fixture("rsa1024.pem");
    for (path, why) in [
        (
            "/nonexistent/old.pem",
            "/nonexistent/old.pem cannot be read: no such file".to_string(),
        ),
        (
            &not_a_key,
            format!(
                "{not_a_key} holds no RSA key (expected a -----BEGIN PRIVATE KEY----- block, or the public key alone in a -----BEGIN PUBLIC KEY----- block, as `openssl pkey -pubout` writes it)"
            ),
        ),
        (
            &rsa1024,
            format!(
                "{rsa1024} is an RSA key shorter than 2048 bits; generate a 2048-bit or longer key"
            ),
        ),
    ] {
        assert_eq!(previous(path), format!("{}: {why}", from_env(PREVIOUS)));
    }
}

#[test]
fn a_provider_setting_without_the_issuer_is_refused_by_name() {
    let files = Files::new();
    let pairwise_file = files.write("pairwise.key", PAIRWISE);
    let alone = [
        (CLIENTS, files.clients.as_str()),
        (KEY_FILE, files.key.as_str()),
        (KEY_VALUE, files.key_pem.as_str()),
        (PREVIOUS, files.previous.as_str()),
        (SUB_CLAIM, "document_number"),
        (PAIRWISE_KEY, PAIRWISE),
        (PAIRWISE_KEY_FILE, pairwise_file.as_str()),
        ("LANYARD_OIDC_CLAIMS_MAP", "portrait="),
    ];
    let why = "set, but LANYARD_OIDC_ISSUER is not: the OpenID Connect provider is off without its issuer";
    for (env, value) in alone {
        let err = files
            .load(&[
                (ISSUER_ENV, ""),
                (CLIENTS, ""),
                (KEY_FILE, ""),
                (env, value),
            ])
            .unwrap_err();
        assert_eq!(err.lines(), [format!("{}: {why}", from_env(env))]);
        assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
    }
    // Every one at once, but the pairwise key once: given twice, that is
    // its problem.
    let mut all = vec![(ISSUER_ENV, "")];
    all.extend(alone.iter().filter(|(env, _)| *env != PAIRWISE_KEY_FILE));
    let err = files.load(&all).unwrap_err();
    assert_eq!(err.lines().len(), alone.len() - 1, "{err}");
}

#[test]
fn every_problem_with_the_provider_shows_in_one_run() {
    let files = Files::new();
    let ec = fixture("ec-p256.pkcs8.pem");
    let err = files
        .load(&[
            ("LANYARD_WORKER_THREADS", "0"),
            (ISSUER_ENV, "http://login.example.com"),
            (CLIENTS, "/nonexistent/clients.json"),
            (KEY_FILE, &ec),
            (PREVIOUS, "/nonexistent/old.pem"),
        ])
        .unwrap_err();
    let settings: Vec<&str> = err
        .lines()
        .iter()
        .map(|line| line.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        settings,
        [
            "LANYARD_WORKER_THREADS",
            ISSUER_ENV,
            CLIENTS,
            KEY_FILE,
            PREVIOUS
        ],
        "{err}"
    );

    // What is missing, and what is set twice, beside a bad file.
    let err = files.load(&[(CLIENTS, ""), (KEY_FILE, "")]).unwrap_err();
    assert_eq!(err.lines().len(), 2, "{err}");
    assert!(err.lines()[0].starts_with("LANYARD_OIDC_CLIENTS_FILE: is required"));
    assert!(err.lines()[1].starts_with("LANYARD_OIDC_SIGNING_KEY_FILE: is required"));
    let duplicate = files.write(
        "duplicate.json",
        clients_json(json!([
            {"client_id": "a", "redirect_uris": ["https://a.example/1"]},
            {"client_id": "a", "redirect_uris": ["https://a.example/2"]},
        ])),
    );
    let err = files
        .load(&[(CLIENTS, &duplicate), (KEY_VALUE, &files.key_pem)])
        .unwrap_err();
    assert_eq!(err.lines().len(), 2, "{err}");
    assert!(err.lines()[0].contains("LANYARD_OIDC_SIGNING_KEY is set too"));
    assert!(err.lines()[1].contains("client ids must be unique"));
}

/// A pairwise `sub` needs its key, given once; the key alone, without
/// claims to hash, is refused rather than ignored; and no problem quotes
/// it.
#[test]
fn the_pairwise_key_is_given_once_and_only_with_the_claims_it_hashes() {
    let files = Files::new();
    let key_file = files.write("pairwise.key", format!("{PAIRWISE}\n"));
    let loaded = files.load(&[
        (SUB_CLAIM, "document_number"),
        (PAIRWISE_KEY_FILE, &key_file),
    ]);
    let from_file = loaded.unwrap().oidc.unwrap().pairwise_key;
    let given = files.load(&[(SUB_CLAIM, "document_number"), (PAIRWISE_KEY, PAIRWISE)]);
    assert_eq!(from_file, given.unwrap().oidc.unwrap().pairwise_key);

    let missing = the_problem(&files, &[(SUB_CLAIM, "document_number")]);
    assert!(
        missing.starts_with(&format!(
            "{PAIRWISE_KEY}: is required with {SUB_CLAIM} (environment variable {SUB_CLAIM}) while a client's `sub` is pairwise"
        )),
        "{missing}"
    );
    let short = files.write("short.key", "c2hvcnQ=");
    for (pairs, expected) in [
        (
            vec![(PAIRWISE_KEY, PAIRWISE)],
            format!("{}: set, but {SUB_CLAIM} is not", from_env(PAIRWISE_KEY)),
        ),
        (
            vec![
                (SUB_CLAIM, "a"),
                (PAIRWISE_KEY, PAIRWISE),
                (PAIRWISE_KEY_FILE, &key_file),
            ],
            format!("{}: {PAIRWISE_KEY} is set too", from_env(PAIRWISE_KEY_FILE)),
        ),
        (
            vec![(SUB_CLAIM, "a"), (PAIRWISE_KEY_FILE, &short)],
            format!(
                "{}: {short} is not base64 of 32 bytes",
                from_env(PAIRWISE_KEY_FILE)
            ),
        ),
        (
            vec![(SUB_CLAIM, "a"), (PAIRWISE_KEY, "c2hvcnQ=")],
            format!("{}: is not base64 of 32 bytes", from_env(PAIRWISE_KEY)),
        ),
    ] {
        let problem = the_problem(&files, &pairs);
        assert!(problem.starts_with(&expected), "{problem}");
        assert!(
            !problem.contains(PAIRWISE) && !problem.contains("c2hvcnQ"),
            "{problem}"
        );
    }
}
