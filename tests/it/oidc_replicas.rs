//! The OpenID Connect provider as replicas run it (docs/oidc.md, "What
//! lives where, across replicas", "Rotating the signing key"): verifiers
//! with the same settings and session key against one mock, each step of a
//! login on whichever replica a balancer would pick.
//!
//! - A login shown and ended on replica A, its code redeemed on B: B asks
//!   the service for the claims its own polls never saw, and the ID token
//!   verifies; its access token reads `userinfo` on either replica.
//!   Single use is per replica, as docs/oidc.md says: the code replayed
//!   on B is `invalid_grant` and revokes the login's access tokens on B
//!   (not on A); on A it is redeemed once more (A never saw it redeemed),
//!   then refused there too, and A revokes them as well.
//! - A login whose scope picked a client's rule, shown on A, started and
//!   ended on B, its code redeemed on A: A asks that rule for the claims.
//! - A token request answered 503 `temporarily_unavailable` because the
//!   service could not be asked leaves its code unspent: the retry the
//!   answer invites is served.
//! - A key rotation in its two steps: the old and the new key published
//!   side by side, an ID token signed before the rotation verifying with
//!   the rotated JWK set, new ID tokens (a code issued before the rotation
//!   included) carrying the new key's `kid`; then the old key gone.
//! - The signing key in a PKCS#11 token (Debian's SoftHSM2, as in `hsm`),
//!   under `lanyard verifier` as operators run it: the ID token verifies
//!   with the published JWK, which is the key's own as its PEM publishes
//!   it, and token requests sent at once all succeed, queued for the
//!   token's one signature at a time.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lanyard::mock::MockService;
use serde_json::Value;
use tokio::task::JoinSet;

use crate::hsm::softhsm::{OBJECT, PIN, SoftHsm, TOKEN};
use crate::support::DefaultTokens;
use crate::support::relying_party::{
    self, ISSUER, ISSUER_PATH, code_of, jwks, kid_of, shop_query, shop_redeems, userinfo,
    verified_with,
};
use crate::support::replicas::{self, Replica};
use crate::support::sidecar::Answer;
use crate::support::verifier::{self, Running};
use crate::support::{self, wait_for};

/// The logins of the HSM test, ended together and redeemed together: as
/// many as one client may start at once (`LANYARD_VERIFIER_CLIENT_STARTS`).
const AT_ONCE: usize = 8;

/// What the replicas of a test's provider share: the mock, the clients
/// file and the session key (`LANYARD_VERIFIER_SESSION_KEY`), so that each
/// opens what another sealed.
struct Shared {
    mock: Arc<MockService>,
    clients: String,
    session_key: String,
    dir: tempfile::TempDir,
}

impl Shared {
    async fn new() -> Shared {
        let dir = tempfile::tempdir().unwrap();
        Shared {
            mock: Arc::new(support::mock().await),
            clients: relying_party::clients_file(dir.path()),
            session_key: STANDARD.encode([42u8; 32]),
            dir,
        }
    }

    /// A fresh ID token key, as a PEM file of the shared directory.
    fn key(&self, name: &str) -> String {
        relying_party::key_file(self.dir.path(), name)
    }

    /// A replica with the shared settings and `keys` (the signing key's
    /// settings).
    async fn replica(&self, keys: &[(&str, &str)]) -> Running {
        let mut settings = vec![
            ("LANYARD_OIDC_ISSUER", ISSUER),
            ("LANYARD_OIDC_CLIENTS_FILE", self.clients.as_str()),
            ("LANYARD_VERIFIER_SESSION_KEY", self.session_key.as_str()),
        ];
        settings.extend_from_slice(keys);
        verifier::start_shared(self.mock.clone(), None, &settings).await
    }

    /// A login of the shop's at the replica `base`, presented by the
    /// mock's wallet; its code.
    async fn code_from(&self, base: &str) -> String {
        let mock = &self.mock;
        let redirect = relying_party::login(base, &shop_query(""), |service_id| {
            mock.wallet_present_url(service_id)
        })
        .await;
        code_of(&redirect)
    }

    /// Requests the mock's API has answered so far.
    fn service_calls(&self) -> u64 {
        self.mock.counters().api_requests
    }
}

/// The issuer's URL on `replica`.
fn base(replica: &Running) -> String {
    format!("{}{ISSUER_PATH}", replica.url)
}

/// A token answer that must be 200: its JSON.
fn granted(answer: &Answer, what: &str) -> Value {
    assert_eq!(
        answer.status,
        200,
        "{what}: {}",
        support::text(&answer.body)
    );
    answer.json()
}

/// A token answer that must be the refusal of a spent code.
fn assert_invalid_grant(answer: &Answer, what: &str) {
    assert_eq!(
        (answer.status.as_u16(), answer.json()["error"].clone()),
        (400, "invalid_grant".into()),
        "{what}"
    );
}

/// The published key ids.
fn kids(set: &jsonwebtoken::jwk::JwkSet) -> BTreeSet<String> {
    set.keys
        .iter()
        .map(|jwk| jwk.common.key_id.clone().expect("every key has a kid"))
        .collect()
}

#[tokio::test]
async fn a_code_from_one_replica_is_redeemed_on_another_once_per_replica() {
    let shared = Shared::new().await;
    let key = shared.key("oidc.pem");
    let keys = [("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str())];
    let (a, b) = (shared.replica(&keys).await, shared.replica(&keys).await);
    let (a, b) = (base(&a), base(&b));

    // The page, the start and the polls on A, which sees the claims.
    let code = shared.code_from(&a).await;

    // B's polls never saw this session: it asks the service, once.
    let before = shared.service_calls();
    let on_b = granted(&shop_redeems(&b, &code).await, "the code on B");
    assert_eq!(shared.service_calls(), before + 1, "B asked the service");
    let id_token = on_b["id_token"].as_str().unwrap();
    assert_eq!(kids(&jwks(&a).await), kids(&jwks(&b).await));
    let claims = verified_with(&jwks(&b).await, id_token, ISSUER, "shop").unwrap();
    assert_eq!(claims["nonce"], "n-1");
    assert_eq!(claims["given_name"], "Erika");
    assert_eq!(claims["birthdate"], "1984-01-26");

    // The access token reads userinfo on either replica.
    let token_b = on_b["access_token"].as_str().unwrap();
    for replica in [&a, &b] {
        let answer = userinfo(replica, token_b).await;
        assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
        let info = answer.json();
        assert_eq!(info["sub"], claims["sub"]);
        assert_eq!(info["given_name"], "Erika");
    }

    // Replayed on B: refused, and B revokes the login's access tokens;
    // the revocation is B's alone (docs/oidc.md, "Revocation").
    assert_invalid_grant(&shop_redeems(&b, &code).await, "replayed on B");
    assert_eq!(userinfo(&b, token_b).await.status, 401, "revoked on B");
    assert_eq!(userinfo(&a, token_b).await.status, 200, "not on A");

    // Single use is per replica (docs/oidc.md, "Single use"): A has not
    // seen this code redeemed, and redeems it once, from the claims its
    // own polls saw, asking the service nothing.
    let before = shared.service_calls();
    let on_a = granted(&shop_redeems(&a, &code).await, "the code on A");
    assert_eq!(shared.service_calls(), before, "A knew the claims");
    let again = on_a["id_token"].as_str().unwrap();
    let claims_again = verified_with(&jwks(&a).await, again, ISSUER, "shop").unwrap();
    assert_eq!(claims_again["sub"], claims["sub"], "the same login");
    let token_a = on_a["access_token"].as_str().unwrap();
    assert_eq!(userinfo(&a, token_a).await.status, 200);
    assert_invalid_grant(&shop_redeems(&a, &code).await, "replayed on A");
    // Now A refuses every access token of the login, B's too.
    for access in [token_a, token_b] {
        assert_eq!(userinfo(&a, access).await.status, 401, "revoked on A");
    }
}

/// docs/oidc.md, "Rules per client": the rule a login's scope picked
/// rides sealed from the page on A to the session started on B, and in
/// the code to A again, which asks the service for the claims on that
/// rule's path, and gets that rule's alone.
#[tokio::test]
async fn a_login_shown_on_one_replica_keeps_its_rule_on_another() {
    let shared = Shared::new().await;
    relying_party::add_rules(&shared.mock);
    let key = shared.key("oidc.pem");
    let keys = [("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str())];
    let (a, b) = (shared.replica(&keys).await, shared.replica(&keys).await);
    let (a, b) = (base(&a), base(&b));

    let query = shop_query("").replace("scope=openid%20profile", "scope=openid%20age");
    let page = support::sidecar::send(
        http::Method::GET,
        &format!("{a}/authorize?{query}"),
        &[],
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(page.status, 200);
    let sealed = relying_party::sealed_request(&page);
    let mock = &shared.mock;
    let redirect = relying_party::through_page(&b, &sealed, |service_id| {
        mock.wallet_present_url(service_id)
    })
    .await;
    let started_on = shared.mock.sessions_started_on();
    let age = format!("/verifications/{}", relying_party::AGE_RULE);
    assert!(
        started_on.iter().all(|path| path.ends_with(&age)),
        "{started_on:?}"
    );

    let before = shared.service_calls();
    let on_a = granted(
        &shop_redeems(&a, &code_of(&redirect)).await,
        "the code on A",
    );
    assert_eq!(shared.service_calls(), before + 1, "A asked the service");
    let id_token = on_a["id_token"].as_str().unwrap();
    let claims = verified_with(&jwks(&a).await, id_token, ISSUER, "shop").unwrap();
    assert_eq!(claims["age_over_18"], true);
    assert!(claims.get("given_name").is_none(), "{claims}");
}

/// docs/oidc.md: a token request is answered 503 `temporarily_unavailable`
/// with `Retry-After: 1` when the service cannot be asked. The code was
/// not used, so the retry that answer invites must be served, not refused
/// as a replay.
#[tokio::test]
async fn a_code_the_service_could_not_be_asked_about_is_redeemed_on_retry() {
    let shared = Shared::new().await;
    let key = shared.key("oidc.pem");
    let keys = [("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str())];
    let a = shared.replica(&keys).await;
    // B starts while the token endpoint is down: it holds no token, so it
    // cannot ask the service for the claims.
    shared.mock.set_token_outage(true);
    let b = shared.replica(&keys).await;
    let code = shared.code_from(&base(&a)).await;

    let refused = shop_redeems(&base(&b), &code).await;
    assert_eq!(
        (refused.status.as_u16(), refused.json()["error"].clone()),
        (503, "temporarily_unavailable".into()),
        "{}",
        support::text(&refused.body)
    );
    assert_eq!(refused.headers["retry-after"], "1");

    shared.mock.set_token_outage(false);
    let mut state = b.process.default_tokens().state();
    wait_for(&mut state, Duration::from_secs(30), |s| s.generation >= 1).await;
    let retried = shop_redeems(&base(&b), &code).await;
    let tokens = granted(&retried, "the retry on B");
    verified_with(
        &jwks(&base(&b)).await,
        tokens["id_token"].as_str().unwrap(),
        ISSUER,
        "shop",
    )
    .unwrap();
    assert_invalid_grant(&shop_redeems(&base(&b), &code).await, "once served");
}

/// docs/oidc.md, "Rotating the signing key", both steps, each a rolled
/// replica: the new key with the old as the previous one, then the new
/// key alone.
#[tokio::test]
async fn a_rotated_key_publishes_both_and_new_id_tokens_carry_the_new_kid() {
    let shared = Shared::new().await;
    let (old, new) = (shared.key("old.pem"), shared.key("new.pem"));
    let before = shared
        .replica(&[("LANYARD_OIDC_SIGNING_KEY_FILE", &old)])
        .await;
    let before = base(&before);
    let old_set = jwks(&before).await;
    let [old_kid]: [String; 1] = kids(&old_set)
        .into_iter()
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let code = shared.code_from(&before).await;
    let signed_before = granted(&shop_redeems(&before, &code).await, "before");
    let signed_before = signed_before["id_token"].as_str().unwrap().to_string();
    assert_eq!(kid_of(&signed_before), old_kid);
    // A login ended before the rotation, its code redeemed after it.
    let pending = shared.code_from(&before).await;

    let rotated = shared
        .replica(&[
            ("LANYARD_OIDC_SIGNING_KEY_FILE", &new),
            ("LANYARD_OIDC_PREVIOUS_KEY_FILE", &old),
        ])
        .await;
    let rotated = base(&rotated);
    let rotated_set = jwks(&rotated).await;
    let published = kids(&rotated_set);
    assert_eq!(published.len(), 2, "{published:?}");
    assert!(published.contains(&old_kid));
    let new_kid = published.iter().find(|kid| **kid != old_kid).unwrap();
    let claims = verified_with(&rotated_set, &signed_before, ISSUER, "shop")
        .expect("an ID token signed before the rotation verifies after it");
    assert_eq!(claims["given_name"], "Erika");

    let signed_after = granted(&shop_redeems(&rotated, &pending).await, "after");
    let signed_after = signed_after["id_token"].as_str().unwrap().to_string();
    assert_eq!(&kid_of(&signed_after), new_kid, "signed with the new key");
    verified_with(&rotated_set, &signed_after, ISSUER, "shop").unwrap();
    assert!(
        verified_with(&old_set, &signed_after, ISSUER, "shop").is_err(),
        "the old JWK set does not verify the new key's tokens"
    );

    // The second step: the old key no longer published; the new key's kid
    // is the same on every replica that holds it.
    let after = shared
        .replica(&[("LANYARD_OIDC_SIGNING_KEY_FILE", &new)])
        .await;
    let after_set = jwks(&base(&after)).await;
    assert_eq!(kids(&after_set), BTreeSet::from([new_kid.clone()]));
    verified_with(&after_set, &signed_after, ISSUER, "shop").unwrap();
    assert!(verified_with(&after_set, &signed_before, ISSUER, "shop").is_err());
}

/// The ID token key in a SoftHSM2 token, under `lanyard verifier` (the
/// binary: SoftHSM2 reads `SOFTHSM2_CONF` from the environment of the
/// process that loads it).
#[tokio::test]
async fn with_the_signing_key_in_an_hsm_logins_at_once_each_get_a_verified_id_token() {
    let shared = Shared::new().await;
    let pem = shared.key("oidc.pem");
    let hsm = SoftHsm::new();
    hsm.init_token(TOKEN, PIN);
    hsm.import_file(std::path::Path::new(&pem), TOKEN, OBJECT, "01", PIN);
    let mut vars = replicas::replica_settings(&shared.mock, shared.dir.path());
    vars.extend(support::env(&[
        ("LANYARD_OIDC_ISSUER", ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", &shared.clients),
        ("LANYARD_OIDC_SIGNING_KEY", &hsm.uri()),
        ("SOFTHSM2_CONF", hsm.conf().to_str().unwrap()),
    ]));
    let replica = Replica::start("hsm".into(), vars).await;
    let at = format!("{}{ISSUER_PATH}", replica.url());

    // The JWK the token's key publishes is the key's own: a provider with
    // the same key as a PEM file publishes the same.
    let published = jwks(&at).await;
    let as_pem = shared
        .replica(&[("LANYARD_OIDC_SIGNING_KEY_FILE", &pem)])
        .await;
    assert_eq!(kids(&published), kids(&jwks(&base(&as_pem)).await));

    let mut logins = JoinSet::new();
    for _ in 0..AT_ONCE {
        let (mock, at) = (shared.mock.clone(), at.clone());
        logins.spawn(async move {
            let redirect = relying_party::login(&at, &shop_query(""), |service_id| {
                mock.wallet_present_url(service_id)
            })
            .await;
            code_of(&redirect)
        });
    }
    let codes = logins.join_all().await;

    // Sent together: the token signs one at a time, and the provider
    // queues the rest rather than refusing them.
    let mut redemptions = JoinSet::new();
    for code in codes {
        let at = at.clone();
        redemptions.spawn(async move { shop_redeems(&at, &code).await });
    }
    let mut subs = BTreeSet::new();
    for answer in redemptions.join_all().await {
        let tokens = granted(&answer, &format!("in the HSM:\n{}", replica.log()));
        let id_token = tokens["id_token"].as_str().unwrap();
        let claims = verified_with(&published, id_token, ISSUER, "shop").unwrap();
        assert_eq!(claims["given_name"], "Erika");
        subs.insert(claims["sub"].as_str().unwrap().to_string());
    }
    assert_eq!(subs.len(), AT_ONCE, "one ID token per login");
    assert!(!replica.log().contains(PIN), "the PIN is in the log");
}
