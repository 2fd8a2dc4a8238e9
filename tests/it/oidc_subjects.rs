//! Who a login names to each relying party (docs/oidc.md, "Subjects"):
//! with `LANYARD_OIDC_SUB_CLAIM` naming `nationality,document_number`,
//! `sub` is pairwise (OpenID Connect Core §8.1), over real sockets against
//! the mock's wallet presenting each person's claims.
//!
//! - One person logs in at two clients of different sectors and gets two
//!   `sub`s; at one client twice, and on another replica with the same
//!   settings, the same one; at a client whose `sector_identifier` names
//!   the first's host, the first's.
//! - Two people with one document number but not one nationality get two
//!   `sub`s, pairwise and public.
//! - A client asking for `"subject_type": "public"` gets the claims'
//!   values, joined so that no two lists of values give one `sub`.
//! - Discovery's `subject_types_supported` lists what the clients get.
//! - A client on several hosts without a `sector_identifier`, and a
//!   pairwise `sub` without its key, stop start-up (exit 2) with a line
//!   naming the client and the setting.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lanyard::mock::MockService;
use serde_json::{Value, json};

use crate::support::relying_party::{
    self, CHALLENGE, ISSUER, ISSUER_PATH, SECRET, VERIFIER, basic, code_of, enc,
};
use crate::support::verifier::{self, Running};
use crate::support::{self, lanyard, text, write};

/// The claims that name a person here.
const SUB_CLAIM: &str = "nationality,document_number";

/// The clients: two sites of their own, a second site of the shop's that
/// names the shop's host as its sector, and one asking for public `sub`s.
const CLIENTS: &[(&str, &str, Option<&str>, Option<&str>)] = &[
    ("shop", "https://shop.example/cb", None, None),
    ("forum", "https://forum.example/cb", None, None),
    (
        "shop-app",
        "https://app.shop-cdn.example/cb",
        Some("shop.example"),
        None,
    ),
    ("plain", "https://plain.example/cb", None, Some("public")),
];

/// Erika, a German document's holder.
fn erika() -> Value {
    json!({"given_name": "Erika", "nationality": "DE", "document_number": "X1"})
}

/// Another person, whose French document has Erika's number.
fn marie() -> Value {
    json!({"given_name": "Marie", "nationality": "FR", "document_number": "X1"})
}

/// The replicas' shared settings and files.
struct Deployment {
    mock: Arc<MockService>,
    clients: String,
    key: String,
    _dir: tempfile::TempDir,
}

impl Deployment {
    async fn new() -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let clients: Vec<Value> = CLIENTS
            .iter()
            .map(|(id, cb, sector, subject_type)| {
                let mut client =
                    json!({"client_id": id, "client_secret": SECRET, "redirect_uris": [cb]});
                if let Some(sector) = sector {
                    client["sector_identifier"] = json!(sector);
                }
                if let Some(subject_type) = subject_type {
                    client["subject_type"] = json!(subject_type);
                }
                client
            })
            .collect();
        let file = json!({ "clients": clients }).to_string();
        let clients = write(dir.path(), "clients.json", &file);
        Deployment {
            mock: Arc::new(support::mock().await),
            clients: clients.to_str().unwrap().to_string(),
            key: relying_party::key_file(dir.path(), "oidc.pem"),
            _dir: dir,
        }
    }

    /// A replica: the same issuer, clients, keys and session key as every
    /// other of this deployment.
    async fn replica(&self) -> Running {
        let session_key = STANDARD.encode([42u8; 32]);
        let pairwise_key = STANDARD.encode([7u8; 32]);
        let settings = [
            ("LANYARD_OIDC_ISSUER", ISSUER),
            ("LANYARD_OIDC_CLIENTS_FILE", self.clients.as_str()),
            ("LANYARD_OIDC_SIGNING_KEY_FILE", self.key.as_str()),
            ("LANYARD_VERIFIER_SESSION_KEY", session_key.as_str()),
            ("LANYARD_OIDC_SUB_CLAIM", SUB_CLAIM),
            ("LANYARD_OIDC_PAIRWISE_KEY", pairwise_key.as_str()),
        ];
        verifier::start_shared(self.mock.clone(), None, &settings).await
    }
}

/// The `sub` of `person`'s login at `client` on `replica`: the login
/// through the page with the mock's wallet presenting `person`'s claims,
/// the code redeemed with the client's secret, the ID token verified.
async fn sub_at(replica: &Running, client: &str, person: &Value) -> String {
    let base = format!("{}{ISSUER_PATH}", replica.url);
    let cb = CLIENTS.iter().find(|c| c.0 == client).unwrap().1;
    let query = format!(
        "response_type=code&client_id={client}&redirect_uri={}&scope=openid&state=s&nonce=n&code_challenge={CHALLENGE}&code_challenge_method=S256",
        enc(cb)
    );
    let mock = &replica.mock;
    let redirect = relying_party::login_presenting(
        &base,
        &query,
        |service_id| mock.wallet_present_url(service_id),
        person,
    )
    .await;
    let form = format!(
        "grant_type=authorization_code&code={}&redirect_uri={}&code_verifier={VERIFIER}",
        enc(&code_of(&redirect)),
        enc(cb)
    );
    let auth = basic(client, SECRET);
    let answer = relying_party::token(&base, &form, &[("authorization", &auth)]).await;
    assert_eq!(answer.status, 200, "{}", text(&answer.body));
    let id_token = answer.json()["id_token"].as_str().unwrap().to_string();
    let jwks = relying_party::jwks(&base).await;
    let claims = relying_party::verified_with(&jwks, &id_token, ISSUER, client).unwrap();
    claims["sub"].as_str().expect("a sub").to_string()
}

#[tokio::test]
async fn one_person_has_one_sub_at_each_relying_party_and_they_cannot_correlate() {
    let deployment = Deployment::new().await;
    let a = deployment.replica().await;
    let discovery = relying_party::discovery(&format!("{}{ISSUER_PATH}", a.url)).await;
    assert_eq!(
        discovery["subject_types_supported"],
        json!(["pairwise", "public"])
    );

    let at_shop = sub_at(&a, "shop", &erika()).await;
    let at_forum = sub_at(&a, "forum", &erika()).await;
    assert_ne!(at_shop, at_forum, "two sectors, two subs");
    for sub in [&at_shop, &at_forum] {
        assert_eq!(sub.len(), 43, "an HMAC-SHA256 in base64url: {sub}");
        assert!(!sub.contains("X1") && !sub.contains("DE"), "{sub}");
    }
    assert_eq!(
        sub_at(&a, "shop", &erika()).await,
        at_shop,
        "a second login"
    );
    assert_eq!(
        sub_at(&a, "shop-app", &erika()).await,
        at_shop,
        "the shop's sector, named by sector_identifier"
    );
    let b = deployment.replica().await;
    assert_eq!(
        sub_at(&b, "shop", &erika()).await,
        at_shop,
        "another replica"
    );
}

#[tokio::test]
async fn two_people_sharing_a_document_number_but_not_a_nationality_have_two_subs() {
    let deployment = Deployment::new().await;
    let replica = deployment.replica().await;
    let erika_at_shop = sub_at(&replica, "shop", &erika()).await;
    let marie_at_shop = sub_at(&replica, "shop", &marie()).await;
    assert_ne!(erika_at_shop, marie_at_shop);

    // A public sub is the values as they are, joined with `:`, each `:`
    // and `%` in a value escaped: no other pair of values gives it.
    assert_eq!(sub_at(&replica, "plain", &erika()).await, "DE:X1");
    assert_eq!(sub_at(&replica, "plain", &marie()).await, "FR:X1");
    let colon = json!({"nationality": "DE:X", "document_number": "1%"});
    assert_eq!(sub_at(&replica, "plain", &colon).await, "DE%3AX:1%25");
}

/// A pairwise `sub` needs one sector per client and its key: each missing
/// stops start-up, every problem in one run, naming the client and the
/// setting, and neither a client's secret nor a key is printed.
#[tokio::test]
async fn a_client_on_several_hosts_without_a_sector_stops_start_up_naming_it() {
    let mock = support::mock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let clients = json!({"clients": [
        {"client_id": "shop", "client_secret": SECRET, "redirect_uris": ["https://shop.example/cb"]},
        {"client_id": "two-sites", "client_secret": SECRET, "redirect_uris": ["https://a.example/cb", "https://b.example/cb"]},
        {"client_id": "named", "client_secret": SECRET, "redirect_uris": ["https://a.example/cb", "https://b.example/cb"], "sector_identifier": "a.example"},
        {"client_id": "open", "client_secret": SECRET, "redirect_uris": ["https://a.example/cb", "https://b.example/cb"], "subject_type": "public"},
    ]});
    let clients = write(d, "clients.json", &clients.to_string());
    let key = relying_party::key_file(d, "oidc.pem");
    let provider = [
        ("LANYARD_OIDC_ISSUER", ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", clients.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
        ("LANYARD_OIDC_SUB_CLAIM", SUB_CLAIM),
        ("LANYARD_VERIFIER_LISTEN", "127.0.0.1:0"),
        ("PROJECT_ID", "p"),
        ("RULE_ID", "6f1c0e2a-4b7d-4e21-9a3c-0d5e8f7a1b2c"),
        ("WALLET_BASE_URL", "https://wallet.example"),
    ];
    let out = lanyard(&["verifier"], support::settings(&mock, d, &provider)).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for expected in [
        "LANYARD_OIDC_CLIENTS_FILE (environment variable LANYARD_OIDC_CLIENTS_FILE): ",
        "clients.json: client `two-sites`: its redirect URIs are on several hosts (a.example, b.example)",
        "LANYARD_OIDC_PAIRWISE_KEY: is required with LANYARD_OIDC_SUB_CLAIM",
    ] {
        assert!(stderr.contains(expected), "{expected} not in\n{stderr}");
    }
    for fine in ["`shop`", "`named`", "`open`"] {
        assert!(!stderr.contains(fine), "{fine} in\n{stderr}");
    }
    assert!(!stderr.contains(SECRET), "{stderr}");
}
