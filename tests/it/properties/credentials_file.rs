//! The credentials file: any bytes or JSON give credentials or named
//! problems, never a panic or a quoted key.

use super::*;

pub(super) fn file_settings() -> CredentialSettings {
    CredentialSettings {
        file: Some(Sourced {
            value: PathBuf::from(CREDENTIALS_PATH),
            source: Source::Env(config::CREDENTIALS_FILE.env),
        }),
        ..CredentialSettings::default()
    }
}

pub(super) fn valid_file(key: &str) -> serde_json::Map<String, Value> {
    let Value::Object(object) = json!({
        "type": "service_account",
        "client_id": "sa-test-client",
        "private_key": key,
        "iam_audience": "https://iam.example.com",
        "token_uri": "https://iam.example.com/token",
        "organization_id": "org-test",
    }) else {
        unreachable!("an object literal")
    };
    object
}

/// One change to a valid credentials file.
#[derive(Debug, Clone)]
pub(super) enum Edit {
    Remove,
    Set(Value),
    Key(String),
}

pub(super) fn edit() -> impl Strategy<Value = (&'static str, Edit)> + Clone {
    prop_oneof![
        (
            select(FILE_FIELDS),
            prop_oneof![
                Just(Edit::Remove),
                json_value().prop_map(Edit::Set),
                text(60).prop_map(|s| Edit::Set(Value::String(s))),
                select(&["", "  ", "\n"][..]).prop_map(|s| Edit::Set(Value::String(s.into()))),
            ],
        ),
        prop_oneof![damaged_key(), armoured_noise()]
            .prop_map(|key| ("private_key", Edit::Key(key))),
    ]
}

pub(super) fn edited(field: &str, edit: &Edit) -> serde_json::Map<String, Value> {
    let mut file = valid_file(&PKCS8);
    match edit {
        Edit::Remove => {
            file.remove(field);
        }
        Edit::Set(value) => {
            file.insert(field.into(), value.clone());
        }
        Edit::Key(key) => {
            file.insert(field.into(), Value::String(key.clone()));
        }
    }
    file
}

/// The loaded credentials, or a clear error that quotes no key.
fn check_credentials(bytes: &[u8], keys: &[String]) -> Result<(), TestCaseError> {
    match credentials::load_from(&file_settings(), Some(bytes)) {
        Ok(creds) => {
            let file: Value = serde_json::from_slice(bytes).expect("accepted file is JSON");
            prop_assert_eq!(
                file["type"].as_str().map(str::trim),
                Some("service_account")
            );
            prop_assert!(!creds.client_id.is_empty() && !creds.organization_id.is_empty());
            prop_assert!(!creds.iam_audience.is_empty());
            prop_assert!(creds.key.bits() >= 2048);
        }
        Err(err) => check_config_error(&err, keys)?,
    }
    Ok(())
}

/// A valid file's bytes, cut short or with one byte overwritten.
fn damaged_json() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), any::<Index>(), any::<u8>()).prop_map(|(truncate, at, byte)| {
        let mut bytes = Value::Object(valid_file(&PKCS8)).to_string().into_bytes();
        let i = at.index(bytes.len());
        if truncate {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        bytes
    })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn credentials_file_of_any_bytes_gives_a_clear_error_not_a_panic(
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..512), damaged_json()],
    ) {
        check_credentials(&bytes, std::slice::from_ref(&*PKCS8))?;
    }

    #[test]
    fn credentials_file_of_any_json_gives_a_clear_error_not_a_panic(value in json_value()) {
        check_credentials(value.to_string().as_bytes(), &[])?;
    }

    #[test]
    fn near_valid_credentials_file_names_the_broken_field_without_quoting_the_key(
        (field, edit) in edit(),
        pretty in any::<bool>(),
    ) {
        let file = Value::Object(edited(field, &edit));
        let bytes = if pretty {
            serde_json::to_vec_pretty(&file).expect("serialises")
        } else {
            serde_json::to_vec(&file).expect("serialises")
        };
        let mut keys = vec![PKCS8.clone()];
        if let Edit::Key(key) = &edit {
            keys.push(key.clone());
        }
        check_credentials(&bytes, &keys)?;
        if let Err(err) = credentials::load_from(&file_settings(), Some(&bytes)) {
            let shown = err.to_string();
            prop_assert!(shown.contains(field), "`{field}` not named in {shown:?}");
        }
    }
}

#[test]
fn credentials_file_field_with_control_characters_is_shown_escaped() {
    // Found by the property above: the `type` value was quoted raw, so a
    // NUL or a line break reached stderr inside the problem line.
    let bytes = br#"{"type":"!\u0000\n\u00a1"}"#;
    let err = credentials::load_from(&file_settings(), Some(bytes)).unwrap_err();
    assert_eq!(
        err.lines(),
        [format!(
            "credentials file {CREDENTIALS_PATH} (environment variable SA_CREDENTIALS_FILE): field `type` is `!\\u{{0}}\\n¡`, expected `service_account`"
        )]
    );
}

#[test]
fn valid_credentials_file_loads() {
    let bytes = Value::Object(valid_file(&PKCS8)).to_string();
    let creds = credentials::load_from(&file_settings(), Some(bytes.as_bytes())).unwrap();
    assert_eq!(creds.client_id, "sa-test-client");
    assert_eq!(creds.key.bits(), 2048);
}
