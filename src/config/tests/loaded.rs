//! One configuration per command: what `Loaded::load` gives each, with
//! what it requires present.

use super::*;

const RULE: &str = "5a1b9c3e-7d2f-4e8a-b6c0-1f2e3d4c5b6a";

/// Settings every command accepts: the upstream, an account, and the
/// verifier's rule and wallet.
fn everything(extra: &[(&str, &str)]) -> HashMap<String, String> {
    let mut pairs = vec![
        ("SERVICE_API_URL", "https://api.example.com/v1"),
        ("PROJECT_ID", "proj-1"),
        ("RULE_ID", RULE),
        ("WALLET_BASE_URL", "https://wallet.example/authorize"),
    ];
    pairs.extend_from_slice(extra);
    with_account(&pairs)
}

fn loaded(need: Requirement, extra: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
    Loaded::load(&Flags::default(), &everything(extra), need)
}

#[test]
fn each_command_gets_its_own_configuration_with_what_it_requires() {
    match loaded(Requirement::Upstream, &[]).unwrap() {
        Loaded::Run(run) => {
            assert_eq!(run.upstream.path_prefix(), "/v1");
            let account = run.signing.accounts.default_account().unwrap();
            assert_eq!(account.organization_id(), "org-test");
            assert!(run.signing.accounts.directory().is_none());
        }
        other => panic!("run: {other:?}"),
    }
    assert!(matches!(
        loaded(Requirement::Check, &[]).unwrap(),
        Loaded::Check(_)
    ));
    assert!(matches!(
        loaded(Requirement::NoUpstream, &[]).unwrap(),
        Loaded::Token(_)
    ));
    match loaded(Requirement::Verifier, &[]).unwrap() {
        Loaded::Verifier(setup) => {
            let want = format!("/organizations/org-test/projects/proj-1/verifications/{RULE}");
            assert_eq!(setup.rule_path.to_string(), want);
            assert_eq!(setup.account.organization_id(), "org-test");
            assert_eq!(setup.upstream.path_prefix(), "/v1");
        }
        other => panic!("verifier: {other:?}"),
    }
    match loaded(Requirement::Verifier, &[("ORG_ID", "org-rules")]).unwrap() {
        Loaded::Verifier(setup) => assert!(
            setup
                .rule_path
                .to_string()
                .starts_with("/organizations/org-rules/"),
            "ORG_ID names the rule's organization: {}",
            setup.rule_path
        ),
        other => panic!("verifier: {other:?}"),
    }
    assert!(matches!(
        loaded(Requirement::Demo, &[]).unwrap(),
        Loaded::Demo(_)
    ));
    assert!(matches!(
        loaded(Requirement::AdminOnly, &[]).unwrap(),
        Loaded::Healthcheck(_)
    ));
}

#[test]
fn demo_mock_makes_run_and_the_verifier_the_demo_and_leaves_the_probe_alone() {
    let demo = [("DEMO_MOCK", "true")];
    for need in [Requirement::Upstream, Requirement::Verifier] {
        // The demo's account and service are its own: nothing else is
        // required.
        let bare = env(&demo);
        let loaded = Loaded::load(&Flags::default(), &bare, need).unwrap();
        assert!(matches!(loaded, Loaded::Demo(_)), "{need:?}: {loaded:?}");
    }
    // The container's probe of a demo is still the probe.
    let probe = Loaded::load(&Flags::default(), &env(&demo), Requirement::AdminOnly).unwrap();
    assert!(matches!(probe, Loaded::Healthcheck(_)), "{probe:?}");
}

#[test]
fn an_organization_the_rule_path_cannot_carry_is_refused_as_the_verifier_loads() {
    // The credentials' organization becomes the rule path's segment when
    // ORG_ID is not set; a space cannot be one.
    let err = loaded(Requirement::Verifier, &[("SA_ORGANIZATION_ID", "org test")]).unwrap_err();
    let text = err.lines().join("\n");
    assert!(
        text.starts_with(
            "SA_ORGANIZATION_ID (or the credentials file's organization_id): `org test` has characters that cannot appear in a URL path segment"
        ),
        "{text}"
    );
    // `lanyard run` forwards paths as the app sends them, and has no rule
    // path to build.
    assert!(matches!(
        loaded(Requirement::Upstream, &[("SA_ORGANIZATION_ID", "org test")]).unwrap(),
        Loaded::Run(_)
    ));
}

#[test]
fn a_dot_segment_is_no_part_of_the_rule_path() {
    for (setting, value) in [("ORG_ID", ".."), ("PROJECT_ID", "."), ("PROJECT_ID", "..")] {
        let err = loaded(Requirement::Verifier, &[(setting, value)]).unwrap_err();
        let want = format!(
            "{setting} (environment variable {setting}): is a dot-segment, which an upstream resolves into another path"
        );
        assert_eq!(err.lines(), [want], "{setting}={value}");
    }
    let err = loaded(Requirement::Verifier, &[("SA_ORGANIZATION_ID", "..")]).unwrap_err();
    assert!(
        err.lines()[0].starts_with(
            "SA_ORGANIZATION_ID (or the credentials file's organization_id): `..` is a dot-segment"
        ),
        "{err}"
    );
}

#[test]
fn a_bad_org_id_is_named_once_as_itself() {
    let err = loaded(Requirement::Verifier, &[("ORG_ID", "org test")]).unwrap_err();
    let lines = err.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("ORG_ID ("), "{lines:?}");
}

#[test]
fn every_missing_requirement_is_named_at_once() {
    let err = Loaded::load(&Flags::default(), &env(&[]), Requirement::Verifier).unwrap_err();
    let text = err.lines().join("\n");
    for named in [
        "SERVICE_API_URL: is required",
        "PROJECT_ID: is required",
        "RULE_ID: is required",
        "WALLET_BASE_URL: is required",
        "SA_CLIENT_ID",
    ] {
        assert!(text.contains(named), "no {named:?} in\n{text}");
    }
    assert!(!text.contains("please report this"), "{text}");
}
