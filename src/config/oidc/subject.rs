//! How the provider names a person to a relying party (docs/oidc.md,
//! "Subjects"): the presented claims `sub` is made of
//! (`LANYARD_OIDC_SUB_CLAIM`), the key pairwise subjects are hashed under
//! (`LANYARD_OIDC_PAIRWISE_KEY`), and each client's subject type and
//! sector (OpenID Connect Core §8, §8.1).

use std::collections::BTreeSet;

use crate::config::issuer::parse_claim_name;
use crate::config::values::{Shown, decode_base64};
use crate::target::is_loopback_host;

/// Claims that name a person together, at most: a nationality and a
/// document number, an issuing authority too, with room to spare.
pub const MAX_SUB_CLAIMS: usize = 8;
/// A pairwise key shorter than this is not worth hashing with: 256 bits,
/// as the HMAC-SHA256 key it is stretched into.
pub const MIN_PAIRWISE_KEY_BYTES: usize = 32;
/// A DNS name, at most (RFC 1035 §2.3.4).
const MAX_HOST: usize = 253;

/// `LANYARD_OIDC_SUB_CLAIM`: the presented claims that name a person, in
/// the order given; their values, in this order, make `sub`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubClaims(pub Vec<String>);

impl SubClaims {
    /// `claim` or `claim,claim,…`: claim names, none twice.
    pub fn parse(raw: &str) -> Result<SubClaims, String> {
        let mut claims: Vec<String> = Vec::new();
        for name in raw.split(',') {
            let name = parse_claim_name(name)?;
            if claims.contains(&name) {
                return Err(format!("`{name}` is named twice"));
            }
            claims.push(name);
        }
        if claims.len() > MAX_SUB_CLAIMS {
            return Err(format!(
                "names {} claims; at most {MAX_SUB_CLAIMS}",
                claims.len()
            ));
        }
        Ok(SubClaims(claims))
    }
}

impl Shown for SubClaims {
    fn shown(&self) -> String {
        self.0.join(",")
    }
}

/// `LANYARD_OIDC_PAIRWISE_KEY`: the secret pairwise subjects are hashed
/// under. A secret: its `Debug` and `Shown` say nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct PairwiseKey(Vec<u8>);

impl std::fmt::Debug for PairwiseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairwiseKey([redacted])")
    }
}

impl Shown for PairwiseKey {
    fn shown(&self) -> String {
        "[redacted]".into()
    }
}

impl PairwiseKey {
    /// Base64 (standard or URL-safe, padded or not) of
    /// [`MIN_PAIRWISE_KEY_BYTES`] or more; never quoted back.
    pub fn parse(raw: &str) -> Result<PairwiseKey, String> {
        decode_base64(raw.trim())
            .filter(|bytes| bytes.len() >= MIN_PAIRWISE_KEY_BYTES)
            .map(PairwiseKey)
            .ok_or_else(|| {
                format!(
                    "is not base64 of {MIN_PAIRWISE_KEY_BYTES} bytes or more (make one with `head -c 32 /dev/urandom | base64`)"
                )
            })
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

/// What a client's `sub` is (OpenID Connect Core §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectType {
    /// The claims' values as they are: the same at every client.
    Public,
    /// A keyed hash of the client's sector and the claims' values: one
    /// person's differs from one sector to another.
    Pairwise,
}

impl SubjectType {
    /// As a clients file and discovery write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectType::Public => "public",
            SubjectType::Pairwise => "pairwise",
        }
    }

    /// A clients file's `subject_type`.
    pub fn parse(value: &str) -> Option<SubjectType> {
        match value {
            "public" => Some(SubjectType::Public),
            "pairwise" => Some(SubjectType::Pairwise),
            _ => None,
        }
    }
}

/// A client's sector: the host its pairwise `sub` is computed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sector {
    /// Its `sector_identifier`, or the one host of its redirect URIs.
    Host(String),
    /// Its redirect URIs are on these hosts, and it names none.
    Several(BTreeSet<String>),
    /// Its redirect URIs are on a loopback host alone, which every native
    /// app on a device shares, and it names none.
    Loopback,
}

impl Sector {
    /// The sector of a client registered with `redirect_uris` (each
    /// checked) and `named`, its `sector_identifier`.
    pub fn of(redirect_uris: &[String], named: Option<&str>) -> Sector {
        if let Some(named) = named {
            return Sector::Host(named.to_string());
        }
        let hosts: BTreeSet<String> = redirect_uris.iter().map(|uri| host_of(uri)).collect();
        let mut one = hosts.iter();
        match (one.next(), one.next()) {
            (Some(host), None) if is_loopback_host(host) => Sector::Loopback,
            (Some(host), None) => Sector::Host(host.clone()),
            _ => Sector::Several(hosts),
        }
    }

    /// Why a client with this sector cannot have pairwise `sub`s, if it
    /// cannot.
    pub fn problem(&self) -> Option<String> {
        let fix = "give it a `sector_identifier`, the host its sites share (OpenID Connect Core §8.1), or `\"subject_type\": \"public\"`";
        match self {
            Sector::Host(_) => None,
            Sector::Several(hosts) => Some(format!(
                "its redirect URIs are on several hosts ({}), so its pairwise `sub` has no one sector: {fix}",
                hosts.iter().cloned().collect::<Vec<_>>().join(", ")
            )),
            Sector::Loopback => Some(format!(
                "its redirect URIs are on a loopback host, which every native app shares, so its pairwise `sub` would be theirs too: {fix}"
            )),
        }
    }
}

/// A redirect URI's host, lower case as a registered one is: the
/// authority's host for http(s), the scheme for a native app's
/// reverse-domain one (`com.example.app:/cb`, RFC 8252 §7.1), which names
/// the domain the app's maker holds.
fn host_of(uri: &str) -> String {
    let Some(rest) = uri
        .strip_prefix("https://")
        .or_else(|| uri.strip_prefix("http://"))
    else {
        return uri.split(':').next().unwrap_or_default().to_string();
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => host.to_string(),
        _ => authority.to_string(),
    }
}

/// A clients file's `sector_identifier`: a host name in lower case
/// (`shop.example`), not a URL. OpenID Connect's `sector_identifier_uri`
/// is fetched to check that it lists the client's redirect URIs; the
/// clients file is the operator's own, so the host is taken as written.
pub fn check_sector_identifier(value: &str) -> Result<(), String> {
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    match value.len() <= MAX_HOST && value.split('.').all(label_ok) {
        true => Ok(()),
        false => Err(
            "must be a host name in lower case, like `shop.example`: the host the client's sites share, not a URL"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_claims_are_claim_names_none_twice() {
        let claims = SubClaims::parse("nationality, document_number").unwrap();
        assert_eq!(claims.0, ["nationality", "document_number"]);
        assert_eq!(claims.shown(), "nationality,document_number");
        assert_eq!(SubClaims::parse("id").unwrap().0, ["id"]);
        for (raw, why) in [
            ("a,a", "named twice"),
            ("a,", "not a claim name"),
            ("a b", "not a claim name"),
            ("a,b,c,d,e,f,g,h,i", "at most 8"),
        ] {
            let err = SubClaims::parse(raw).unwrap_err();
            assert!(err.contains(why), "{raw}: {err}");
        }
    }

    #[test]
    fn a_pairwise_key_is_long_base64_and_never_shown() {
        let key = PairwiseKey::parse(&"A".repeat(44)).unwrap();
        assert_eq!(key.expose(), [0u8; 33]);
        assert_eq!(format!("{key:?}"), "PairwiseKey([redacted])");
        assert_eq!(key.shown(), "[redacted]");
        for raw in ["QUJD", "not base64!", ""] {
            let err = PairwiseKey::parse(raw).unwrap_err();
            assert!(err.starts_with("is not base64 of 32 bytes"), "{err}");
            assert!(raw.is_empty() || !err.contains(raw), "{err}");
        }
    }

    #[test]
    fn a_sector_is_the_named_host_or_the_redirect_uris_one_host() {
        let uris = |list: &[&str]| list.iter().map(|u| u.to_string()).collect::<Vec<_>>();
        let host = |h: &str| Sector::Host(h.into());
        for (list, named, sector) in [
            (&["https://shop.example/cb"][..], None, host("shop.example")),
            (
                &["https://shop.example:8443/a", "https://shop.example/b?x=1"],
                None,
                host("shop.example"),
            ),
            (&["com.example.app:/cb"], None, host("com.example.app")),
            (&["http://127.0.0.1/cb"], None, Sector::Loopback),
            (&["http://[::1]:3000/cb"], None, Sector::Loopback),
            (
                &["http://127.0.0.1/cb"],
                Some("app.example"),
                host("app.example"),
            ),
            (
                &["https://a.example/cb", "https://b.example/cb"],
                Some("a.example"),
                host("a.example"),
            ),
        ] {
            assert_eq!(Sector::of(&uris(list), named), sector, "{list:?}");
            assert_eq!(sector.problem().is_none(), sector != Sector::Loopback);
        }
        let several = Sector::of(
            &uris(&["https://b.example/cb", "https://a.example/cb"]),
            None,
        );
        let why = several.problem().unwrap();
        assert!(
            why.starts_with("its redirect URIs are on several hosts (a.example, b.example)"),
            "{why}"
        );
        let loopback = Sector::Loopback.problem().unwrap();
        assert!(loopback.contains("every native app shares"), "{loopback}");
    }

    #[test]
    fn a_sector_identifier_is_a_host_name_not_a_url() {
        for good in ["shop.example", "a-b.example", "localhost", "x1"] {
            assert_eq!(check_sector_identifier(good), Ok(()), "{good}");
        }
        let long = format!("{}.example", "a".repeat(64));
        for bad in [
            "https://shop.example",
            "Shop.example",
            "",
            "a..b",
            "-a.example",
            "a b",
            &long,
        ] {
            let err = check_sector_identifier(bad).unwrap_err();
            assert!(err.starts_with("must be a host name"), "{bad}: {err}");
        }
    }
}
