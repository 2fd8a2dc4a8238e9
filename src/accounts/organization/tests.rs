//! The reading of `accounts::organization`, one test per way a path is written.

use super::*;

fn is_refused(path: &str) -> bool {
    matches!(route(path), Route::Refused(_))
}

#[test]
fn an_encoded_separator_or_a_backslash_anywhere_is_refused() {
    for path in [
        "/organizations%2FA/projects/p",
        "/organizations%2fA/x",
        "/organizations%5CA/x",
        "/organizations%252FA/x",
        "/organizations%25252fA/x",
        "/%2F/organizations/A/x",
        "/organizations\\A/x",
        "/v1/a%2fb",
        "/x/%255c",
        // A malformed escape or bytes that are not text elsewhere hide
        // nothing: a lenient upstream decodes the rest.
        "/organizations%252FA/x%zz",
        "/organizations%252fA/x%ff",
        "/%zz/organizations%25255cA/x",
        // Dot-segments encoded more than once, which an upstream that
        // decodes twice resolves.
        "/x/%252e%252e/organizations/A/y",
        "/x/%25252E%25252e/organizations/A/y",
        "/x/.%252e;p/organizations/A/y",
    ] {
        assert!(
            matches!(route(path), Route::Refused(_)),
            "{path}: {:?}",
            route(path)
        );
    }
}

#[test]
fn leading_segments_of_parameters_alone_are_skipped_as_empty_ones() {
    for path in [
        "/;/organizations/A/x",
        "/;x=1/organizations/A/x",
        "/%3b/organizations/A/x",
        "//;/organizations/A",
    ] {
        assert_eq!(route(path), Route::Organization("A"), "{path}");
    }
    for path in [
        "/organizations%00/A",
        "/organizations%09/A",
        "/%0aorganizations/A",
        "/organizations%20/A/x",
    ] {
        assert!(matches!(route(path), Route::Refused(_)), "{path}");
    }
}

#[test]
fn an_organization_path_names_its_organization() {
    for (path, org) in [
        ("/organizations/org-A/projects/p/verifications/r", "org-A"),
        ("/organizations/A", "A"),
        ("/organizations/A/", "A"),
        ("//organizations/A/x", "A"),
        ("/ORGANIZATIONS/A/x", "A"),
        ("/Organizations/A/x", "A"),
        ("/%6frganizations/A/x", "A"),
        ("/%6Frganizations/A/x", "A"),
        ("/%256frganizations/A/x", "A"),
        ("/%25256frganizations/A/x", "A"),
        ("/organizations;jsessionid=1/A/x", "A"),
        ("/%4F%52%47%41%4E%49%5A%41%54%49%4F%4E%53/A", "A"),
        ("/organizations./A/x", "A"),
        ("/organizations%2e/A/x", "A"),
    ] {
        assert_eq!(route(path), Route::Organization(org), "{path}");
    }
}

#[test]
fn an_organization_that_cannot_be_read_plainly_is_refused() {
    for path in [
        "/organizations",
        "/organizations/",
        "/organizations//A/x",
        "/organizations/%41/x",
        "/organizations/A%2fB/x",
        "/organizations/A;x=1/x",
        "/organizations/A%3Bx/x",
        "/Organizations/%61/x",
        "/organizations/A B/x",
        "/organizations/Ä/x",
        &format!("/organizations/{}/x", "a".repeat(129)),
    ] {
        assert!(
            matches!(route(path), Route::Refused(_)),
            "{path}: {:?}",
            route(path)
        );
    }
    // Encoded past any server's decoding: refused, not "no organization".
    let deep = "/%2525256frganizations/A/x";
    assert!(
        matches!(route(deep), Route::Refused(_)),
        "{:?}",
        route(deep)
    );
}

#[test]
fn other_paths_name_no_organization() {
    for path in [
        "/",
        "",
        "/health",
        "/organization/A/x",
        "/organizationsX/A/x",
        "/xorganizations/A/x",
        "/v1/organizations/A/x",
        "/%zz/organizations/A",
        "/%6frganization/A",
    ] {
        assert_eq!(route(path), Route::NoOrganization, "{path}");
    }
}

/// The segment a refusal names, as a message shows it.
fn named(path: &str) -> Option<Box<str>> {
    match route(path) {
        Route::Refused(unreadable) => unreadable.shown_segment(),
        _ => None,
    }
}

#[test]
fn whitespace_or_a_control_character_before_the_organization_is_refused_naming_its_segment() {
    for (path, segment) in [
        ("/%20/organizations/B/x", "%20"),
        ("/%09/organizations/B/x", "%09"),
        ("/%0d%0a/organizations/B/x", "%0d%0a"),
        ("/organizations%20/B/x", "organizations%20"),
        ("/%20organizations/B/x", "%20organizations"),
        ("/organizations%0b/B/x", "organizations%0b"),
        ("/organizations%2520/B/x", "organizations%2520"),
        ("/%7f/organizations/B/x", "%7f"),
        ("/%20/x", "%20"),
        ("/a%20b/x", "a%20b"),
    ] {
        assert_eq!(
            named(path).as_deref(),
            Some(segment),
            "{path}: {:?}",
            route(path)
        );
    }
}

#[test]
fn a_unicode_space_or_invisible_character_before_the_organization_is_refused() {
    for path in [
        "/organizations%C2%A0/B/x",
        "/organizations\u{a0}/B/x",
        "/%E2%80%80/organizations/B/x",
        "/%E2%80%8A/organizations/B/x",
        "/organizations%E3%80%80/B/x",
        "/%EF%BB%BForganizations/B/x",
        "/organizations%E2%80%8B/B/x",
        "/organi%C2%ADzations/B/x",
        "/organizations%C2%85/B/x",
        "/organizations%25E2%2580%2583/B/x",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
}

#[test]
fn a_case_or_compatibility_form_of_organizations_is_refused() {
    for path in [
        "/organization%C5%BF/B/x",
        "/organizationſ/B/x",
        "/%EF%BD%8Frganizations/B/x",
        "/ｏｒｇａｎｉｚａｔｉｏｎｓ/B/x",
        "/%F0%9D%90%A8rganizations/B/x",
        "/organizatio%E3%8E%B1/B/x",
        "/organ%C4%B1zations/B/x",
        "/organ%C4%B0zations/B/x",
        "/ORGANIZATIONſ/B/x",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
}

#[test]
fn text_beyond_ascii_that_folds_to_no_ascii_names_no_organization() {
    for path in [
        "/café/x",
        "/%C3%A9t%C3%A9/x",
        "/日本/organizations/B",
        "/ö/x",
    ] {
        assert_eq!(route(path), Route::NoOrganization, "{path}");
    }
    assert_eq!(
        route("/organizations/B/caf%C3%A9/%E6%97%A5"),
        Route::Organization("B")
    );
}

#[test]
fn dots_alone_before_the_organization_are_refused() {
    for path in [
        "/.../organizations/B/x",
        "/..../organizations/B/x",
        "/...;x/organizations/B/x",
        "/%2e%2e%2e/organizations/B/x",
        "/%E2%80%A4/organizations/B/x",
        "/%E2%80%A6/organizations/B/x",
        "/%EF%BC%8E/organizations/B/x",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
    // Past the organization, three dots as sent are a name like any other.
    assert_eq!(route("/organizations/B/.../x"), Route::Organization("B"));
    assert_eq!(route("/v1/.../x"), Route::NoOrganization);
}

#[test]
fn a_percent_u_escape_anywhere_is_refused() {
    for path in [
        "/%u006frganizations/B/x",
        "/%U006Frganizations/B/x",
        "/organizations/B/%u002e%u002e/C/x",
        "/organizations/B/x%u2215y",
        "/v1/%25u002f",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
    // Not four hex digits: not an escape IIS decodes.
    assert_eq!(route("/organizations/B/%uzzzz"), Route::Organization("B"));
}

#[test]
fn a_compatibility_form_of_a_separator_anywhere_is_refused() {
    for path in [
        "/organizations%EF%BC%8FB/x",
        "/organizations／B/x",
        "/organizations%EF%BC%BCB/x",
        "/organizations%EF%B9%A8B/x",
        "/organizations/A/x%EF%BC%8F..%EF%BC%8F..%EF%BC%8FB/x",
        "/v1/a%25EF%25BC%258Fb",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
}

#[test]
fn an_overlong_utf8_form_anywhere_is_refused() {
    for path in [
        "/organizations%C0%AFB/x",
        "/%C1%AFrganizations/B/x",
        "/organizations/A/%C0%AE%C0%AE/B/x",
        "/organizations/A/%E0%80%AE/x",
        "/organizations/A/%F0%80%80%AE/x",
    ] {
        assert!(is_refused(path), "{path}: {:?}", route(path));
    }
    assert_eq!(
        route("/organizations/A/%E0%A4%85"),
        Route::Organization("A")
    );
}

#[test]
fn a_dot_segment_hidden_by_whitespace_or_a_compatibility_form_anywhere_is_refused() {
    for (path, segment) in [
        ("/organizations/A/..%20/B/x", "..%20"),
        ("/organizations/A/%20../B/x", "%20.."),
        ("/organizations/A/.%20./B/x", ".%20."),
        ("/organizations/A/..%09/B/x", "..%09"),
        ("/organizations/A/..%0D%0A/B/x", "..%0D%0A"),
        ("/organizations/A/..%C2%A0/B/x", "..%C2%A0"),
        ("/organizations/A/..%E2%80%83/B/x", "..%E2%80%83"),
        ("/organizations/A/..%E2%80%8B/B/x", "..%E2%80%8B"),
        (
            "/organizations/A/%EF%BC%8E%EF%BC%8E/B/x",
            "%EF%BC%8E%EF%BC%8E",
        ),
        (
            "/organizations/A/\u{ff0e}\u{ff0e}/B/x",
            "\\u{ff0e}\\u{ff0e}",
        ),
        ("/organizations/A/%E2%80%A5/B/x", "%E2%80%A5"),
        ("/organizations/A/%E2%80%A4./B/x", "%E2%80%A4."),
        ("/organizations/A/..%2520;x/B/x", "..%2520;x"),
        ("/organizations/A/..%2e/B/x", "..%2e"),
        ("/x/..%20/organizations/B/x", "..%20"),
    ] {
        assert_eq!(
            named(path).as_deref(),
            Some(segment),
            "{path}: {:?}",
            route(path)
        );
    }
}

#[test]
fn a_named_segment_is_shown_escaped_and_bounded() {
    assert_eq!(
        named("/organizations\u{a0}/B").as_deref(),
        Some("organizations\\u{a0}")
    );
    assert_eq!(named("/a`%20/x").as_deref(), Some("a\\u{60}%20"));
    let long = format!("/{}%20/x", "a".repeat(200));
    let shown = named(&long).unwrap();
    assert_eq!(shown.chars().count(), SHOWN_CHARS + 1, "{shown}");
    assert!(shown.ends_with('…'));
}
