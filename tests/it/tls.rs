//! Token exchange over real TLS: `LANYARD_CA_FILE` adds a private CA, and
//! a server the roots do not vouch for is a `tls` failure.

use crate::support;

use lanyard::config::{Config, Flags, Requirement};
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
    let issued = access(&map).exchanger.fetch().await.unwrap();
    assert!(mock.token_owner(issued.access_token.expose()).is_some());
}

#[tokio::test]
async fn unknown_ca_is_a_tls_failure() {
    let ca = TestCa::new();
    let mock = tls_mock(&ca).await;
    let dir = tempfile::tempdir().unwrap();
    let map = settings(&mock, dir.path(), &[]);
    let err = access(&map).exchanger.fetch().await.unwrap_err();
    assert_eq!(err.kind(), "tls", "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn a_bad_ca_file_is_reported_with_every_other_problem_before_anything_starts() {
    let mock = support::mock().await;
    let dir = tempfile::tempdir().unwrap();
    let not_pem = write(dir.path(), "ca.pem", "not a certificate\n");
    let broken = write(
        dir.path(),
        "broken.pem",
        "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    );
    for (file, why) in [
        (&not_pem, "holds no PEM certificate"),
        (&broken, "is not a valid PEM certificate bundle"),
    ] {
        let map = settings(
            &mock,
            dir.path(),
            &[
                ("LANYARD_CA_FILE", file.to_str().unwrap()),
                ("LANYARD_LISTEN", "nowhere"),
            ],
        );
        let err = Config::load(&Flags::default(), &map, Requirement::Upstream)
            .expect_err("a CA file without certificates was accepted");
        let want = format!(
            "LANYARD_CA_FILE (environment variable LANYARD_CA_FILE): {}: {why}",
            file.display()
        );
        assert!(err.lines().contains(&want), "{err}");
        assert!(
            err.lines()
                .iter()
                .any(|l| l.starts_with("LANYARD_LISTEN (")),
            "{err}"
        );
    }
}
