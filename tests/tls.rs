//! Token exchange over real TLS: `LANYARD_CA_FILE` adds a private CA, and
//! a server the roots do not vouch for is a `tls` failure.

mod support;

use lanyard::commands;
use lanyard::mock::MockService;
use support::tls::TestCa;
use support::*;

async fn tls_mock(ca: &TestCa) -> MockService {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mock = MockService::serve(listener, Some(ca.server.clone()));
    mock.add_account(account());
    mock
}

#[tokio::test]
async fn private_ca_from_ca_file_is_trusted_for_the_token_endpoint() {
    let ca = TestCa::new();
    let mock = tls_mock(&ca).await;
    assert!(mock.token_url().starts_with("https://localhost:"));
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", &ca.ca_pem);
    let map = settings(
        &mock,
        dir.path(),
        &[("LANYARD_CA_FILE", ca_file.to_str().unwrap())],
    );
    let issued = commands::wire(&config(&map))
        .unwrap()
        .exchanger
        .fetch()
        .await
        .unwrap();
    assert!(mock.token_owner(issued.access_token.expose()).is_some());
}

#[tokio::test]
async fn unknown_ca_is_a_tls_failure() {
    let ca = TestCa::new();
    let mock = tls_mock(&ca).await;
    let dir = tempfile::tempdir().unwrap();
    let map = settings(&mock, dir.path(), &[]);
    let err = commands::wire(&config(&map))
        .unwrap()
        .exchanger
        .fetch()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "tls", "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn ca_file_without_certificates_is_a_configuration_error() {
    let mock = support::mock().await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", "not a certificate\n");
    let map = settings(
        &mock,
        dir.path(),
        &[("LANYARD_CA_FILE", ca_file.to_str().unwrap())],
    );
    let Err(err) = commands::wire(&config(&map)) else {
        panic!("a CA file without certificates was accepted")
    };
    assert_eq!(err.lines().len(), 1);
    assert!(err.lines()[0].starts_with("LANYARD_CA_FILE ("), "{err}");
    assert!(
        err.lines()[0].ends_with("holds no PEM certificate"),
        "{err}"
    );
}
