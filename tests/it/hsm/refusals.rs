//! Every way a key in a token stops start-up: a module that fails (exit 1),
//! and each problem with the settings or the key (exit 2), each one line
//! naming what was looked for and never the PIN.

use super::*;

/// A module that fails, here at `C_Initialize` (SoftHSM2 without its
/// configuration, as a network HSM's module without its service), is not
/// a problem with the settings: exit 1, which a supervisor restarts (the
/// systemd unit does not restart on 2), and still one line naming it.
#[tokio::test]
async fn a_module_that_fails_is_exit_1_not_bad_settings() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let mut vars = vars(&mock, &hsm, &hsm.uri());
    let missing = hsm.conf().with_file_name("no-such-softhsm2.conf");
    vars.insert("SOFTHSM2_CONF".into(), missing.display().to_string());
    let out = lanyard(&["token"], &vars).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "lanyard: SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): the PKCS#11 module {MODULE} failed in C_Initialize: CKR_"
        )) && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert_no_pin(&out);
}

/// Each URI of a key lanyard refuses, on `hsm`'s tokens, and the start of
/// the line it must print.
fn key_problems(hsm: &SoftHsm) -> Vec<(String, String)> {
    let uri = hsm.uri();
    let pin_file = hsm.pin_file().display().to_string();
    let wrong_pin = hsm.write("wrong-pin", &format!("{WRONG_PIN}\n"));
    let not_a_module = hsm.write("module.so", "not a library\n");
    let on = |token: &str| uri.replace("token=lanyard", &format!("token={token}"));
    let problem = |why: &str| format!("{FROM_ENV}: {why}");
    vec![
        (
            uri.replace(MODULE, "/opt/hsm/libpkcs11.so"),
            problem(
                "module-path /opt/hsm/libpkcs11.so: no such file (is the vendor's PKCS#11 module in the image, or mounted there?)",
            ),
        ),
        (
            uri.replace(MODULE, &not_a_module.display().to_string()),
            problem(&format!(
                "module-path {} is not a PKCS#11 module: ",
                not_a_module.display()
            )),
        ),
        (
            on("prod"),
            problem(&format!(
                "no token labelled `prod` in the PKCS#11 module {MODULE}; tokens present: "
            )),
        ),
        (
            uri.replace("object=sa-key", "object=other"),
            problem(&format!(
                "no private key `other` on token `lanyard` (module {MODULE})"
            )),
        ),
        (
            uri.replace("object=sa-key", "object=sa-key;id=%02"),
            problem(&format!(
                "no private key `sa-key` (id 02) on token `lanyard` (module {MODULE})"
            )),
        ),
        (
            uri.replace(&pin_file, &wrong_pin.display().to_string()),
            problem(&format!(
                "token `lanyard` refused the PIN from {} (CKR_PIN_INCORRECT); lanyard does not try it again, since every wrong try brings the token closer to locking the PIN: correct the PIN file",
                wrong_pin.display()
            )),
        ),
        (
            uri.replace(&pin_file, "/run/secrets/absent"),
            problem("the PIN file /run/secrets/absent (pin-source) cannot be read: no such file"),
        ),
        (
            on("ec"),
            problem("the key `sa-key` on token `ec` is of type EC; RS256 needs an RSA key"),
        ),
        (
            on("short"),
            problem(
                "the key `sa-key` on token `short` is an RSA key of 1024 bits; 2048 bits or more are needed",
            ),
        ),
        (
            on("nosign"),
            problem(
                "the key `sa-key` on token `nosign` may not sign (its CKA_SIGN is false); import it with signing allowed",
            ),
        ),
        (
            format!("pkcs11:token=lanyard;object=sa-key?module-path={MODULE}&pin-value={PIN}"),
            problem(
                "gives the PIN as `pin-value`, which lanyard refuses: a PIN in a setting shows in `ps e`, in the environment of every process the container starts, and in crash reports; put the PIN in a file (a Kubernetes Secret) and give pin-source=file:/path/to/pin",
            ),
        ),
        (
            "pkcs11:token=lanyard;object=sa-key".into(),
            problem(
                "is not a PKCS#11 URI lanyard can use: it has no module-path: add ?module-path=/path/to/the/vendor's/pkcs11-module.so",
            ),
        ),
    ]
}

/// Each way a key in a token is refused: the settings, and the line
/// lanyard must print (exit 2, nothing started, never the PIN). Tokens
/// beside `lanyard`: `ec` (an EC key), `short` (RSA 1024) and `nosign`
/// (signing forbidden, which only the module can set: in a child).
#[tokio::test]
async fn every_problem_with_the_key_stops_start_up_with_exit_2_and_says_what_was_looked_for() {
    if is_child() {
        return SoftHsm::of_parent().forbid_signing("nosign");
    }
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    for (token, fixture) in [
        ("ec", "ec-p256.pkcs8.pem"),
        ("short", "rsa1024.pem"),
        ("nosign", "rsa2048.pkcs8.pem"),
    ] {
        hsm.init_token(token, PIN);
        hsm.import(fixture, token, softhsm::OBJECT, "01", PIN);
    }
    in_child(
        "refusals::every_problem_with_the_key_stops_start_up_with_exit_2_and_says_what_was_looked_for",
        &hsm,
    );
    let cases = key_problems(&hsm);
    let uri = hsm.uri();
    let on = |token: &str| uri.replace("token=lanyard", &format!("token={token}"));
    for (uri, expected) in cases {
        let out = lanyard(&["token"], &vars(&mock, &hsm, &uri)).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{uri}: {stderr}");
        assert!(
            stderr.starts_with(&format!("lanyard: {expected}")) && stderr.lines().count() == 1,
            "{uri}:\n{stderr}"
        );
        assert!(out.stdout.is_empty());
        assert_no_pin(&out);
    }
    // The labels present, whatever order the module lists its slots in.
    let out = lanyard(&["token"], &vars(&mock, &hsm, &on("prod"))).await;
    let stderr = text(&out.stderr);
    for label in ["`lanyard`", "`ec`", "`short`", "`nosign`"] {
        assert!(stderr.contains(label), "{stderr}");
    }
}

/// The credentials file's `private_key` is named when the URI is there.
#[tokio::test]
async fn a_bad_uri_in_the_credentials_file_names_the_file() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let mut json: serde_json::Value =
        serde_json::from_str(&credentials_json(&mock, "unused")).unwrap();
    json["private_key"] = hsm.uri().replace("token=lanyard", "token=prod").into();
    let creds = hsm.write("credentials.json", &json.to_string());
    let vars = env(&[
        ("SA_CREDENTIALS_FILE", creds.to_str().unwrap()),
        ("SOFTHSM2_CONF", hsm.conf().to_str().unwrap()),
    ]);
    let out = lanyard(&["token"], &vars).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "lanyard: SA_PRIVATE_KEY (key `private_key` in {}): no token labelled `prod` in the PKCS#11 module {MODULE}; tokens present: `lanyard`\n",
            creds.display()
        )
    );
    assert_no_pin(&out);
}
