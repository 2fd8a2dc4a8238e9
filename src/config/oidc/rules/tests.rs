use super::*;

const AGE: &str = "0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10";
const IDENTITY: &str = "5d1e7a3c-2b4f-4e8a-9c6d-1f2e3a4b5c6d";

fn clients(text: &str) -> Result<Clients, Vec<String>> {
    Clients::parse(text, std::path::Path::new("/nonexistent"))
}

fn shop() -> Clients {
    clients(&format!(
        r#"{{"clients": [
            {{"client_id": "shop", "redirect_uris": ["https://shop.example/cb"],
              "rules": {{"age": {{"project_id": "proj-a", "rule_id": "{AGE}"}},
                        "identity": {{"project_id": "proj-b", "rule_id": "{IDENTITY}"}}}},
              "default_rule": "identity"}},
            {{"client_id": "bank", "redirect_uris": ["https://bank.example/cb"],
              "rules": {{"kyc": {{"project_id": "proj-b", "rule_id": "{IDENTITY}"}}}}}},
            {{"client_id": "plain", "redirect_uris": ["https://plain.example/cb"]}}
        ]}}"#
    ))
    .unwrap()
}

#[test]
fn the_scope_picks_the_rule_else_the_clients_default_else_the_deployments() {
    let clients = shop();
    let known = all_scopes(&clients);
    assert_eq!(
        known,
        BTreeSet::from(["age".into(), "identity".into(), "kyc".into()])
    );
    let shop = &clients.get("shop").unwrap().rules;
    let picked = |scope: &str| {
        shop.pick(scope, &known)
            .map(|r| r.map(|r| r.rule_id.clone()))
    };
    assert_eq!(picked("openid age"), Ok(Some(AGE.into())));
    assert_eq!(picked("age openid profile"), Ok(Some(AGE.into())));
    assert_eq!(
        picked("openid age age"),
        Ok(Some(AGE.into())),
        "one scope, twice"
    );
    assert_eq!(picked("openid"), Ok(Some(IDENTITY.into())), "the default");
    assert_eq!(picked("openid email"), Ok(Some(IDENTITY.into())));
    let age = shop.pick("openid age", &known).unwrap().unwrap();
    assert_eq!(
        (age.scope.as_str(), age.project_id.as_str()),
        ("age", "proj-a")
    );
    let bank = &clients.get("bank").unwrap().rules;
    assert_eq!(
        bank.pick("openid", &known),
        Ok(None),
        "no default: the deployment's"
    );
    let plain = &clients.get("plain").unwrap().rules;
    assert!(plain.is_empty());
    assert_eq!(plain.pick("openid profile", &known), Ok(None));
}

#[test]
fn two_rule_scopes_or_another_clients_is_invalid_scope() {
    let clients = shop();
    let known = all_scopes(&clients);
    let shop = &clients.get("shop").unwrap().rules;
    let Err(InvalidScope(why)) = shop.pick("openid age identity", &known) else {
        panic!("two rules taken");
    };
    assert!(why.contains("more than one"), "{why}");
    let Err(InvalidScope(why)) = shop.pick("openid kyc", &known) else {
        panic!("another client's rule taken");
    };
    assert!(why.contains("does not have"), "{why}");
    let plain = &clients.get("plain").unwrap().rules;
    assert!(plain.pick("openid age", &known).is_err());
}

#[test]
fn a_rule_path_that_is_not_a_path_segment_stops_start_up_naming_the_client_and_scope() {
    let problems = clients(&format!(
        r#"{{"clients": [
            {{"client_id": "a", "redirect_uris": ["https://a.example/cb"],
              "rules": {{"age": {{"project_id": "../admin", "rule_id": "{AGE}"}},
                        "id": {{"project_id": "p", "rule_id": "ver_secret-ish"}},
                        "kyc": {{"project_id": "p%2Fq", "rule_id": "a/b", "extra": 1}},
                        "bad scope": {{"project_id": "p", "rule_id": "{AGE}"}},
                        "openid": {{"project_id": "p", "rule_id": "{AGE}"}},
                        "n": "x"}},
              "default_rule": "nope"}},
            {{"client_id": "b", "redirect_uris": ["https://b.example/cb"], "rules": [1], "default_rule": 5}}
        ]}}"#
    ))
    .unwrap_err();
    let text = problems.join("\n");
    for expected in [
        "clients[0].rules.age.project_id: has characters that cannot appear in a URL path segment",
        "clients[0].rules.id.rule_id: is the rule's `ver_` identifier",
        "clients[0].rules.kyc: has a field lanyard does not know, `extra`",
        "clients[0].rules.kyc.project_id: has characters",
        "clients[0].rules.kyc.rule_id: is not a UUID",
        "clients[0].rules: has a scope that is not 1 to 64 printable ASCII",
        "clients[0].rules: has the scope `openid`",
        "clients[0].rules.n: must be an object",
        "clients[0].default_rule: must be one of the scopes",
        "clients[1].rules: must be an object of at most 32 rules",
        "clients[1].default_rule: must be one of the scopes",
    ] {
        assert!(text.contains(expected), "{expected} not in\n{text}");
    }
    for value in [
        "../admin",
        "secret-ish",
        "p%2Fq",
        "a/b",
        "bad scope",
        "nope",
    ] {
        assert!(!text.contains(value), "{value} quoted:\n{text}");
    }
}
