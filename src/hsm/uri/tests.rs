//! The URIs lanyard reads and those it refuses, each refusal saying why
//! and never repeating a PIN (RFC 7512; docs/hsm.md).

use super::*;

const MODULE: &str = "module-path=/usr/lib/softhsm/libsofthsm2.so";

fn key(token: &str, object: Option<&str>, id: Option<&[u8]>, pin: Option<&str>) -> KeyUri {
    KeyUri {
        module: PathBuf::from("/usr/lib/softhsm/libsofthsm2.so"),
        token: token.into(),
        object: object.map(str::to_string),
        id: id.map(<[u8]>::to_vec),
        pin_file: pin.map(PathBuf::from),
        token_attributes: TokenAttributes::default(),
        library: LibraryAttributes::default(),
    }
}

#[test]
fn uris_lanyard_reads() {
    let cases: Vec<(String, KeyUri)> = vec![
        (
            format!("pkcs11:token=lanyard;object=sa-key?{MODULE}&pin-source=file:/run/secrets/pin"),
            key("lanyard", Some("sa-key"), None, Some("/run/secrets/pin")),
        ),
        // file:/// and file://localhost/ are the same file; a bare
        // absolute path is accepted too.
        (
            format!("pkcs11:token=lanyard;object=sa-key?{MODULE}&pin-source=file:///run/pin"),
            key("lanyard", Some("sa-key"), None, Some("/run/pin")),
        ),
        (
            format!("pkcs11:token=t;object=o?{MODULE}&pin-source=file://localhost/run/pin"),
            key("t", Some("o"), None, Some("/run/pin")),
        ),
        (
            format!("pkcs11:token=t;object=o?{MODULE}&pin-source=/run/pin"),
            key("t", Some("o"), None, Some("/run/pin")),
        ),
        // Percent-decoding, in labels and in the id's bytes; type=private.
        (
            format!("pkcs11:token=My%20HSM;object=sa%3Bkey;id=%01%AB;type=private?{MODULE}"),
            key("My HSM", Some("sa;key"), Some(&[0x01, 0xab]), None),
        ),
        // The id alone names a key; attributes in any order; the scheme
        // in any case; surrounding whitespace (a variable's newline).
        (
            format!("  PKCS11:id=%02;token=t?pin-source=file:/p&{MODULE}\n"),
            key("t", None, Some(&[0x02]), Some("/p")),
        ),
        // An empty attribute between separators is no attribute.
        (
            format!("pkcs11:token=t;;object=o;?{MODULE}&"),
            key("t", Some("o"), None, None),
        ),
    ];
    for (uri, expected) in cases {
        assert_eq!(parse(&uri), Ok(expected), "{uri}");
    }
}

/// As `p11tool --list-token-urls` and `p11-kit list-modules` print them:
/// matched against the token and the library rather than refused.
#[test]
fn uris_from_p11tool_and_p11_kit_are_read_whole() {
    let uri = format!(
        "pkcs11:model=SoftHSM%20v2;manufacturer=SoftHSM%20project;serial=1a2b3c4d5e6f7081;token=lanyard;object=sa-key;type=private;slot-id=1044;library-manufacturer=SoftHSM;library-description=Implementation%20of%20PKCS11;library-version=2.6?{MODULE}"
    );
    let mut expected = key("lanyard", Some("sa-key"), None, None);
    expected.token_attributes = TokenAttributes {
        manufacturer: Some("SoftHSM project".into()),
        model: Some("SoftHSM v2".into()),
        serial: Some("1a2b3c4d5e6f7081".into()),
        slot_id: Some(1044),
    };
    expected.library = LibraryAttributes {
        manufacturer: Some("SoftHSM".into()),
        description: Some("Implementation of PKCS11".into()),
        version: Some((2, 6)),
    };
    assert_eq!(parse(&uri), Ok(expected));
    let versions = [
        ("2", Some((2, 0))),
        ("2.6", Some((2, 6))),
        ("10.255", Some((10, 255))),
        ("2.x", None),
        ("2.", None),
        (".6", None),
        ("1.2.3", None),
        ("+2", None),
        ("256", None),
    ];
    for (version, expected) in versions {
        assert_eq!(select::parse_version(version), expected, "{version}");
    }
    let slots = [
        ("0", Some(0)),
        ("1044", Some(1044)),
        ("+1", None),
        ("-1", None),
        ("0x10", None),
        ("", None),
    ];
    for (slot, expected) in slots {
        assert_eq!(select::parse_slot_id(slot), expected, "{slot}");
    }
}

#[test]
fn each_attribute_given_must_match_the_token() {
    let seen = TokenSeen {
        label: "lanyard",
        manufacturer: "SoftHSM project",
        model: "SoftHSM v2",
        serial: "1a2b",
        slot_id: 7,
    };
    let with = |attributes: TokenAttributes| {
        let mut uri = key("lanyard", Some("sa-key"), None, None);
        uri.token_attributes = attributes;
        uri
    };
    let some = |value: &str| Some(value.to_string());
    let cases = [
        (TokenAttributes::default(), true),
        (
            TokenAttributes {
                manufacturer: some("SoftHSM project"),
                model: some("SoftHSM v2"),
                serial: some("1a2b"),
                slot_id: Some(7),
            },
            true,
        ),
        (
            TokenAttributes {
                serial: some("1a2c"),
                ..TokenAttributes::default()
            },
            false,
        ),
        (
            TokenAttributes {
                slot_id: Some(8),
                ..TokenAttributes::default()
            },
            false,
        ),
        (
            TokenAttributes {
                manufacturer: some("Thales"),
                ..TokenAttributes::default()
            },
            false,
        ),
        (
            TokenAttributes {
                model: some("softhsm v2"),
                ..TokenAttributes::default()
            },
            false,
        ),
    ];
    for (attributes, matches) in cases {
        assert_eq!(
            with(attributes.clone()).names_token(&seen),
            matches,
            "{attributes:?}"
        );
    }
    // The label still has to match.
    let other = key("other", Some("sa-key"), None, None);
    assert!(!other.names_token(&seen));
}

#[test]
fn a_token_not_found_is_described_by_what_the_uri_gives() {
    let seen = TokenSeen {
        label: "lanyard",
        manufacturer: "SoftHSM project",
        model: "SoftHSM v2",
        serial: "1a2b",
        slot_id: 7,
    };
    let mut uri = key("lanyard", Some("sa-key"), None, None);
    uri.token_attributes = TokenAttributes {
        serial: Some("1a2c".into()),
        slot_id: Some(7),
        ..TokenAttributes::default()
    };
    assert_eq!(
        uri.token_description(),
        "labelled `lanyard`, serial `1a2c`, slot-id `7`"
    );
    assert_eq!(
        uri.present_description(&seen),
        "`lanyard` (serial `1a2b`, slot-id `7`)"
    );
    let plain = key("lanyard", Some("sa-key"), None, None);
    assert_eq!(plain.token_description(), "labelled `lanyard`");
    assert_eq!(plain.present_description(&seen), "`lanyard`");
}

#[test]
fn each_library_attribute_given_must_match_the_library() {
    let seen = LibrarySeen {
        manufacturer: "SoftHSM",
        description: "Implementation of PKCS11",
        version: (2, 6),
    };
    let some = |value: &str| Some(value.to_string());
    let cases = [
        (LibraryAttributes::default(), None),
        (
            LibraryAttributes {
                manufacturer: some("SoftHSM"),
                description: some("Implementation of PKCS11"),
                version: Some((2, 6)),
            },
            None,
        ),
        (
            LibraryAttributes {
                manufacturer: some("Thales"),
                ..LibraryAttributes::default()
            },
            Some("its library-manufacturer is `SoftHSM`, the URI says `Thales`"),
        ),
        (
            LibraryAttributes {
                description: some("Luna"),
                ..LibraryAttributes::default()
            },
            Some("its library-description is `Implementation of PKCS11`, the URI says `Luna`"),
        ),
        (
            LibraryAttributes {
                version: Some((2, 0)),
                ..LibraryAttributes::default()
            },
            Some("its library-version is `2.6`, the URI says `2.0`"),
        ),
    ];
    for (attributes, mismatch) in cases {
        assert_eq!(
            attributes.given(),
            attributes != LibraryAttributes::default()
        );
        assert_eq!(
            attributes.mismatch(&seen).as_deref(),
            mismatch,
            "{attributes:?}"
        );
    }
}

#[test]
fn uris_lanyard_refuses_say_why() {
    let cases = [
        ("pem:token=t", "it does not start with `pkcs11:`"),
        (
            "pkcs11:token=t;object=o",
            "it has no module-path: add ?module-path=/path/to/the/vendor's/pkcs11-module.so",
        ),
        (
            "pkcs11:object=o?module-path=/m.so",
            "it names no token: add token=<the token's label>",
        ),
        (
            "pkcs11:token=t?module-path=/m.so",
            "it names no key: add object=<the key's label> or id=<its CKA_ID>",
        ),
        (
            "pkcs11:token=t;token=u;object=o?module-path=/m.so",
            "`token` appears twice",
        ),
        (
            "pkcs11:token=t;object=o;slot-description=s?module-path=/m.so",
            "`slot-description` is not an attribute lanyard reads (the path takes token, object, id, type, manufacturer, model, serial, slot-id, library-manufacturer, library-description and library-version; the query module-path and pin-source)",
        ),
        (
            "pkcs11:token=t;object=o?module-path=/m.so&x-vendor=1",
            "`x-vendor` is not an attribute lanyard reads (the path takes token, object, id, type, manufacturer, model, serial, slot-id, library-manufacturer, library-description and library-version; the query module-path and pin-source)",
        ),
        (
            "pkcs11:token=t;object=o;type=cert?module-path=/m.so",
            "type=cert names no private key; lanyard signs with one: give type=private or leave type out",
        ),
        (
            "pkcs11:token=t;object=o?module-path=libsofthsm2.so",
            "module-path must be an absolute path to the module's file",
        ),
        (
            "pkcs11:token=t;object=o?module-path=/m.so&pin-source=pin.txt",
            "pin-source must be a file: URI or an absolute path (e.g. pin-source=file:/run/secrets/hsm-pin)",
        ),
        (
            "pkcs11:token=t;object=o?module-path=/m.so&pin-source=file://vault/pin",
            "pin-source names a file on another host; give a local file",
        ),
        (
            "pkcs11:token=t;object=o?module-name=softhsm2",
            "`module-name` is not supported: it names a module registered with p11-kit, and lanyard loads only the file module-path names; give the module's file as module-path=/path/to/module.so",
        ),
        (
            "pkcs11:token=t;object=o;module-path=/m.so",
            "`module-path` belongs in the query, after `?`",
        ),
        (
            "pkcs11:token=t;object=o;4417?module-path=/m.so",
            "an attribute has no `=` (attributes are name=value, separated by `;` before the `?` and by `&` after it)",
        ),
    ];
    for (uri, why) in cases {
        assert_eq!(parse(uri), Err(HsmError::Uri(why.into())), "{uri}");
    }
}

#[test]
fn values_lanyard_refuses_say_why() {
    let cases = [
        (
            "pkcs11:token=t;object=o;slot-id=0x01?module-path=/m.so",
            "slot-id must be a decimal number",
        ),
        (
            "pkcs11:token=t;object=o;slot-id=+1?module-path=/m.so",
            "slot-id must be a decimal number",
        ),
        (
            "pkcs11:token=t;object=o;library-version=v2?module-path=/m.so",
            "library-version must be a version such as 2 or 2.6",
        ),
        (
            "pkcs11:token=t;object=o;serial=1;serial=2?module-path=/m.so",
            "`serial` appears twice",
        ),
        (
            "pkcs11:token=t;object=%zz?module-path=/m.so",
            "a `%` in `object` is not followed by two hex digits",
        ),
        // from_str_radix takes a sign; a URI's hex digits do not.
        (
            "pkcs11:token=t;object=o;id=%+1?module-path=/m.so",
            "a `%` in `id` is not followed by two hex digits",
        ),
        (
            "pkcs11:token=t%+f;object=o?module-path=/m.so",
            "a `%` in `token` is not followed by two hex digits",
        ),
        (
            "pkcs11:token=t;object=o%4?module-path=/m.so",
            "a `%` in `object` is not followed by two hex digits",
        ),
        (
            "pkcs11:token=%ff;object=o?module-path=/m.so",
            "`token` is not UTF-8 once decoded",
        ),
        (
            "pkcs11:token=;object=o?module-path=/m.so",
            "`token` is empty",
        ),
    ];
    for (uri, why) in cases {
        assert_eq!(parse(uri), Err(HsmError::Uri(why.into())), "{uri}");
    }
}

#[test]
fn pin_value_is_refused_and_never_repeated() {
    let uri = "pkcs11:token=t;object=o?module-path=/m.so&pin-value=Zq8w-4417";
    let err = parse(uri).unwrap_err();
    assert_eq!(err, HsmError::PinValue);
    let message = err.to_string();
    assert!(message.contains("`ps e`"), "{message}");
    assert!(message.contains("pin-source=file:"), "{message}");
    assert!(!message.contains("Zq8w"), "{message}");
    // In the path too, where it does not belong either: the same refusal.
    let in_path = "pkcs11:token=t;object=o;pin-value=Zq8w-4417?module-path=/m.so";
    assert_eq!(parse(in_path), Err(HsmError::PinValue));
    // Even when the value is what is malformed, or the name is mangled.
    for uri in [
        "pkcs11:token=t;object=o?module-path=/m.so&pin-value=%zzZq8w",
        "pkcs11:token=t;object=o?module-path=/m.so&Zq8w-4417!=x",
    ] {
        let message = parse(uri).unwrap_err().to_string();
        assert!(!message.contains("Zq8w"), "{message}");
    }
}

#[test]
fn a_pem_key_is_not_a_uri() {
    assert!(is_pkcs11_uri("pkcs11:token=t"));
    assert!(is_pkcs11_uri("\n PKCS11:token=t"));
    assert!(!is_pkcs11_uri("-----BEGIN PRIVATE KEY-----"));
    assert!(!is_pkcs11_uri("pkcs1"));
    assert!(!is_pkcs11_uri(""));
}

#[test]
fn keys_are_named_by_label_and_id() {
    let named =
        |object: Option<&str>, id: Option<&[u8]>| key("t", object, id, None).object_description();
    assert_eq!(named(Some("sa-key"), Some(&[1])), "`sa-key` (id 01)");
    assert_eq!(named(Some("sa-key"), None), "`sa-key`");
    assert_eq!(named(None, Some(&[0xab, 0x02])), "with id ab02");
}

#[test]
fn the_pin_file_loses_its_trailing_newline_only() {
    let trimmed = |content: &[u8]| trim_newline(content.to_vec());
    assert_eq!(trimmed(b"1234\n"), b"1234");
    assert_eq!(trimmed(b"1234\r\n"), b"1234");
    assert_eq!(trimmed(b"12 34 "), b"12 34 ");
    assert_eq!(trimmed(b"1234\n\n"), b"1234\n");
}

#[test]
fn an_unusable_pin_file_is_named_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("pin");
    std::fs::write(&good, "1234\n").unwrap();
    assert!(read_pin(&good).is_ok());
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    assert_eq!(
        read_pin(&empty).err(),
        Some(HsmError::PinUnreadable {
            path: empty.display().to_string(),
            why: "it is empty".into()
        })
    );
    let missing = dir.path().join("missing");
    assert_eq!(
        read_pin(&missing).err().map(|err| err.to_string()),
        Some(format!(
            "the PIN file {} (pin-source) cannot be read: no such file",
            missing.display()
        ))
    );
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'1'; 5000]).unwrap();
    let err = read_pin(&big).err().map(|err| err.to_string()).unwrap();
    assert!(err.ends_with("larger than 4 KiB; not a PIN file"), "{err}");
    let err = read_pin(dir.path())
        .err()
        .map(|err| err.to_string())
        .unwrap();
    // In the words of every small file lanyard reads (`files`).
    assert!(err.ends_with("cannot be read: is a directory"), "{err}");
}
