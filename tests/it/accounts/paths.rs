//! Paths written to confuse: each is sent byte for byte over a raw socket
//! to a sidecar with the default account and A, B and C, and is either
//! refused with 400 before anything is sent (no token request, no API
//! request) or carries the token of the organization an upstream would
//! read in it. No token of one organization reaches another's path, and
//! nothing ambiguous falls to the default account.

use super::*;

/// What a path must come to.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Forwarded with this client's token.
    Token(&'static str),
    /// 400 `bad_request`, nothing sent anywhere.
    Refused,
}

use Outcome::{Refused, Token};

/// Sends each target and checks its outcome, collecting every mismatch
/// so that one run shows them all.
async fn check(sidecar: &Sidecar, cases: &[(String, Outcome)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (target, outcome) in cases {
        let before = sidecar.mock().counters();
        let answer = raw_get(&sidecar.running.proxy, target).await;
        let after = sidecar.mock().counters();
        let forwarded = after.api_requests != before.api_requests;
        let seen = match outcome {
            Refused => {
                let refused = answer.status == 400
                    && answer.head.contains("lanyard-error: bad_request")
                    && !forwarded
                    && after.token_requests == before.token_requests;
                (!refused).then(|| {
                    format!(
                        "{target}: expected 400 bad_request with nothing sent, got {} (forwarded: {forwarded}, caller {:?}): {}",
                        answer.status,
                        forwarded.then(|| sidecar.last_caller()).flatten(),
                        text(&answer.body)
                    )
                })
            }
            Token(client) => {
                let caller = forwarded.then(|| sidecar.last_caller()).flatten();
                (caller.as_deref() != Some(*client)).then(|| {
                    format!(
                        "{target}: expected {client}'s token, got {} with caller {caller:?}: {}",
                        answer.status,
                        text(&answer.body)
                    )
                })
            }
        };
        wrong.extend(seen);
    }
    wrong
}

async fn sidecar() -> Sidecar {
    let fleet = Fleet::new().await;
    fleet.write_all();
    fleet.start(true).await
}

#[tokio::test]
async fn a_first_segment_read_loosely_still_names_its_organization() {
    let sidecar = sidecar().await;
    let (a, b) = (sidecar.a.org, sidecar.b.org);
    let (sa_a, sa_b) = (sidecar.a.client, sidecar.b.client);
    let cases = [
        // As written by the service, for reference.
        (format!("/organizations/{b}/x"), Token(sa_b)),
        (format!("/Organizations/{b}/x"), Token(sa_b)),
        (format!("/ORGANIZATIONS/{b}/x"), Token(sa_b)),
        (format!("/%6frganizations/{b}/x"), Token(sa_b)),
        (
            format!("/%4F%52%47%41%4E%49%5A%41%54%49%4F%4E%53/{b}/x"),
            Token(sa_b),
        ),
        // Encoded twice: `%25` is `%`, so `%256f` is `%6f` is `o` to an
        // upstream that decodes twice.
        (format!("/%256frganizations/{b}/x"), Token(sa_b)),
        (format!("/organizations;v=1/{b}/x"), Token(sa_b)),
        (format!("/organizations%3bv=1/{b}/x"), Token(sa_b)),
        // Empty segments before, which an upstream may collapse.
        (format!("//organizations/{b}/x"), Token(sa_b)),
        (format!("///organizations/{b}/x"), Token(sa_b)),
        // The default account's no-organization path, had lanyard read the
        // empty segment as its first: an upstream collapsing `//` reads it
        // as A's.
        (format!("//organizations/{a}/projects/p"), Token(sa_a)),
        (format!("/organizations/{b}"), Token(sa_b)),
        (
            format!("/organizations/{b}?org=/organizations/{a}/"),
            Token(sa_b),
        ),
        // The default account's own organization is its.
        (
            format!("/organizations/{ORGANIZATION_ID}/x"),
            Token(CLIENT_ID),
        ),
        ("/".to_string(), Token(CLIENT_ID)),
        ("/organizationsX/org-B/x".to_string(), Token(CLIENT_ID)),
        ("/v1/organizations/org-B/x".to_string(), Token(CLIENT_ID)),
    ];
    let wrong = check(&sidecar, &cases).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn an_organization_that_cannot_be_read_plainly_is_refused_before_anything_is_sent() {
    let sidecar = sidecar().await;
    let (a, b) = (sidecar.a.org, sidecar.b.org);
    let cases: Vec<(String, Outcome)> = [
        // No organization after /organizations/: an upstream collapsing
        // `//` would read B as the organization.
        format!("/organizations//{b}/x"),
        "/organizations/".to_string(),
        "/organizations".to_string(),
        // Encoded organizations: `%42` is `B`.
        "/organizations/org-%42/x".to_string(),
        "/organizations/%6frg-B/x".to_string(),
        format!("/organizations/{b}%2f{a}/x"),
        format!("/organizations/{b}%2F{a}/x"),
        format!("/organizations/{b}%5c{a}/x"),
        format!("/organizations/{b};x=1/x"),
        format!("/organizations/{b}%3bx=1/x"),
        format!("/organizations/{b}%2e%2e/x"),
        format!("/organizations/{b}%20/x"),
        // Dot-segments, which an upstream resolves.
        format!("/organizations/./{b}/x"),
        format!("/organizations/{b}/../{a}/x"),
        format!("/organizations/{b}/%2e%2e/{a}/x"),
        format!("/organizations/{b}/.%2e/{a}/x"),
        format!("/organizations/{b}/%2E%2E/{a}/x"),
        format!("/organizations/{b}%2f..%2f{a}/x"),
        format!("/./organizations/{b}/x"),
        format!("/x/../organizations/{b}/x"),
        // Encoded past what lanyard reads: refused, not taken for a path
        // with no organization.
        format!("/%2525256frganizations/{b}/x"),
        // Longer than any organization id.
        format!("/organizations/{}/x", "b".repeat(129)),
    ]
    .into_iter()
    .map(|target| (target, Refused))
    .collect();
    let wrong = check(&sidecar, &cases).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn an_absolute_form_target_is_read_by_its_path() {
    let sidecar = sidecar().await;
    let (a, b) = (sidecar.a.org, sidecar.b.org);
    let own = format!("http://{}", sidecar.running.process.proxy_addr.unwrap());
    let cases = [
        (
            format!("{own}/organizations/{b}/x"),
            Token(sidecar.b.client),
        ),
        (
            format!("{own}//organizations/{a}/x"),
            Token(sidecar.a.client),
        ),
        (
            format!("{own}/Organizations/{b}/x"),
            Token(sidecar.b.client),
        ),
        (format!("{own}/"), Token(CLIENT_ID)),
        (format!("{own}/organizations//{b}/x"), Refused),
        (format!("{own}/organizations/{b}/../{a}/x"), Refused),
        (format!("{own}/organizations/{b}%2f{a}/x"), Refused),
    ];
    let wrong = check(&sidecar, &cases).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // An absolute-form target naming another host is refused whatever
    // its path.
    let before = sidecar.api_requests();
    let other = raw_get(
        &sidecar.running.proxy,
        &format!("http://example.com/organizations/{b}/x"),
    )
    .await;
    assert_eq!(other.status, 400, "{}", other.head);
    assert!(other.head.contains("lanyard-error: forbidden_target"));
    assert_eq!(sidecar.api_requests(), before);
}

/// Ways to write a path that lanyard could take for one with no
/// organization, and so give the default account's token, while an
/// upstream that decodes `%2F`, reads `\` as `/` (as IIS and WHATWG URL
/// parsers do), drops `;parameters` or collapses `//` (as Tomcat and
/// Spring do) reads it as organization A's. Each must be refused, or carry
/// A's token.
#[tokio::test]
async fn nothing_an_upstream_could_read_as_an_organization_falls_to_the_default_account() {
    let sidecar = sidecar().await;
    let a = sidecar.a.org;
    let targets = [
        format!("/organizations%2f{a}/x"),
        format!("/organizations%2F{a}/x"),
        format!("/%2forganizations/{a}/x"),
        format!("/%5corganizations/{a}/x"),
        format!("/organizations%5c{a}/x"),
        format!("/\\organizations/{a}/x"),
        format!("/organizations\\{a}/x"),
        format!("/;/organizations/{a}/x"),
        format!("/;v=1/organizations/{a}/x"),
        format!("/%3b/organizations/{a}/x"),
        format!("/%252forganizations/{a}/x"),
        format!("/organizations./{a}/x"),
        format!("/organizations%2e/{a}/x"),
        format!("/organizations%09/{a}/x"),
        format!("/organizations%00/{a}/x"),
        format!("/x/..;/organizations/{a}/x"),
        format!("/.;/organizations/{a}/x"),
        format!("/x/..%3b/organizations/{a}/x"),
        format!("/organizations%252F{a}/x%zz"),
        format!("/organizations%252f{a}/x%ff"),
        format!("/%256frganizations;%zz/{a}/x"),
        format!("/x/%252e%252e/organizations/{a}/x"),
        format!("/x/%25252e%25252e/organizations/{a}/x"),
    ];
    let mut wrong = Vec::new();
    for target in targets {
        let before = sidecar.api_requests();
        let answer = raw_get(&sidecar.running.proxy, &target).await;
        let forwarded = sidecar.api_requests() != before;
        let caller = forwarded.then(|| sidecar.last_caller()).flatten();
        let fine = match forwarded {
            false => answer.status == 400,
            true => caller.as_deref() == Some(sidecar.a.client),
        };
        if !fine {
            wrong.push(format!(
                "{target}: {} with {caller:?}'s token",
                answer.status
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Sends each target and expects 400 `bad_request` with nothing sent
/// anywhere, the message naming the segment given with it (as sent, its
/// escapes kept); collects every mismatch.
async fn refused_naming(sidecar: &Sidecar, cases: &[(String, String)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (target, segment) in cases {
        let before = sidecar.mock().counters();
        let answer = raw_get(&sidecar.running.proxy, target).await;
        let after = sidecar.mock().counters();
        let forwarded = after.api_requests != before.api_requests;
        let body = text(&answer.body);
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|json| json["message"].as_str().map(str::to_string))
            .unwrap_or_default();
        let refused = answer.status == 400
            && answer.head.contains("lanyard-error: bad_request")
            && !forwarded
            && after.token_requests == before.token_requests;
        if !refused || !message.contains(&format!("`{segment}`")) {
            wrong.push(format!(
                "{target}: expected 400 bad_request naming `{segment}`, got {} (forwarded: {forwarded}, caller {:?}): {body}",
                answer.status,
                forwarded.then(|| sidecar.last_caller()).flatten(),
            ));
        }
    }
    wrong
}

/// One path per way a lenient upstream reads a segment that lanyard, read
/// strictly, would take for no organization (and so the default
/// account's) or for another organization than the upstream's: trimming
/// whitespace and control characters (IIS, older Spring MVC), Unicode
/// spaces and invisible characters, IIS's `%uXXXX`, Unicode case folding
/// (Go's `strings.EqualFold`, Java's `equalsIgnoreCase`: `ſ` is `s`), NFKC
/// compatibility forms (fullwidth letters, `．`, `／`, `＼`, `․`), overlong
/// UTF-8, and `...`, which some servers drop or take for `..`. Each is
/// refused, naming the segment.
#[tokio::test]
async fn a_segment_an_upstream_could_read_leniently_is_refused_naming_it() {
    let sidecar = sidecar().await;
    let (a, b) = (sidecar.a.org, sidecar.b.org);
    // Before the organization position: dropped or collapsed by some.
    let before = ["%20", "...", "%E2%80%A4", "%E3%80%80"];
    // At the organization position: trimmed or folded to it.
    let at = [
        "organizations%20",
        "organizations%09",
        "organizations%0d%0a",
        "organizations%C2%A0",
        "organizations%E2%80%8B",
        "%EF%BB%BForganizations",
        "%u006frganizations",
        "organization%C5%BF",
        "%EF%BD%8Frganizations",
        "%F0%9D%90%A8rganizations",
    ];
    // Slashes joining the organization to its id: fullwidth, overlong,
    // and those Windows' best-fit mapping turns into `/` or `\` (∕ U+2215,
    // ⁄ U+2044, ∖ U+2216), which NFKC leaves alone.
    let joined = [
        "%EF%BC%8F",
        "%EF%BC%BC",
        "%C0%AF",
        "%E2%88%95",
        "%E2%81%84",
        "%E2%88%96",
    ];
    // Dot-segments hidden anywhere in the path.
    let dots = [
        "..%20",
        "..%09",
        "..%0D%0A",
        "..%C2%A0",
        "%EF%BC%8E%EF%BC%8E",
        "%u002e%u002e",
        "%C0%AE%C0%AE",
    ];
    let named = |target: String, segment: &str| (target, segment.to_string());
    let cases: Vec<(String, String)> = (before.iter())
        .map(|s| named(format!("/{s}/organizations/{b}/x"), s))
        .chain(at.iter().map(|s| named(format!("/{s}/{b}/x"), s)))
        .chain(joined.iter().map(|s| {
            let segment = format!("organizations{s}{b}");
            named(format!("/{segment}/x"), &segment)
        }))
        .chain(
            dots.iter()
                .map(|s| named(format!("/x/{s}/organizations/{b}/x"), s)),
        )
        .chain([named(
            format!("/organizations/{a}/x/..%20/..%20/{b}/x"),
            "..%20",
        )])
        .collect();
    let wrong = refused_naming(&sidecar, &cases).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Without a default account a hidden dot-segment still moves a path from
/// one organization to another: it is refused all the same.
#[tokio::test]
async fn a_hidden_dot_segment_is_refused_with_the_directory_alone() {
    let sidecar = Fleet::all_written().await;
    let (a, b) = (sidecar.a.org, sidecar.b.org);
    let cases: Vec<(String, String)> = [
        "..%20",
        ".%20.",
        "..%0a",
        "..%E2%80%83",
        "%E2%80%A5",
        "%EF%BC%8E.",
        "%u002E%u002E",
        "%25u002e%25u002e",
    ]
    .into_iter()
    .map(|dots| (format!("/organizations/{a}/{dots}/{b}/x"), dots.to_string()))
    .collect();
    let wrong = refused_naming(&sidecar, &cases).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
