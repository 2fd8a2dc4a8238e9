//! What the directory's accounts share (docs/accounts.md "Fleet
//! arithmetic"): one client for every token request, so that accounts
//! each called once hold one connection pool and one TLS configuration
//! between them, not one each.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{AccountRules, MAX_TOKEN_REQUESTS_IN_FLIGHT};
use crate::config::Source;
use crate::config::accounts::{AccountFile, load_bytes};
use crate::metrics::Metrics;
use crate::token::{ExchangeOptions, RefreshPolicy, SystemClock, TokenClient};

const KEY: &str = include_str!("../../tests/fixtures/rsa2048.pkcs8.pem");

fn file(organization: &str) -> AccountFile {
    let content = serde_json::json!({
        "type": "service_account",
        "organization_id": organization,
        "client_id": format!("sa-{organization}"),
        "private_key": KEY,
        "token_uri": "http://127.0.0.1:9/token",
        "iam_audience": "http://127.0.0.1:9",
    });
    let path = Path::new("/accounts").join(format!("{organization}.json"));
    load_bytes(
        &path,
        &Source::Default,
        Duration::from_secs(5),
        content.to_string().as_bytes(),
    )
    .expect("a good credentials file")
}

fn rules() -> AccountRules {
    let exchange = ExchangeOptions {
        assertion_ttl: Duration::from_secs(300),
        clock_skew: Duration::from_secs(30),
        rfc7523_fields: true,
        timeout: Duration::from_secs(5),
    };
    let connector = crate::outbound::connector(
        crate::outbound::client_config(rustls::RootCertStore::empty()).expect("a TLS config"),
    );
    let client = TokenClient::new(exchange.clone(), connector, Arc::new(SystemClock));
    AccountRules {
        client: Arc::new(client),
        exchange,
        policy: RefreshPolicy::default(),
        rejection_wait: Duration::from_secs(5),
        metrics: Metrics::unregistered(),
        permits: Arc::new(Semaphore::new(MAX_TOKEN_REQUESTS_IN_FLIGHT)),
    }
}

#[tokio::test]
async fn accounts_of_the_directory_share_one_token_client() {
    let rules = rules();
    let a = rules.directory_account(file("org-a"));
    let b = rules.directory_account(file("org-b"));
    let (a, b) = (a.exchanger().unwrap(), b.exchanger().unwrap());
    assert!(!Arc::ptr_eq(a, b), "each account has its own exchanger");
    assert_ne!(a.credentials().client_id, b.credentials().client_id);
    assert!(Arc::ptr_eq(a.client(), &rules.client));
    assert!(Arc::ptr_eq(b.client(), &rules.client));
}
