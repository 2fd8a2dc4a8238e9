//! The OpenID Connect provider's values (docs/oidc.md): its issuer URL,
//! the presented claim that names the person, and the claims map. Like
//! `values`, this imports nothing of `config`.

use super::values::Shown;
use crate::target::is_loopback_host;

/// Longer than any issuer URL in use; it is in every ID token.
const MAX_ISSUER: usize = 256;
/// A claim's name, presented or given: longer names are not claims a
/// relying party maps by hand.
const MAX_CLAIM_NAME: usize = 64;

/// Claims the provider sets itself (OpenID Connect Core §2, §3.1.3.6,
/// RFC 7519 §4.1): no presented claim takes one of these names, in the ID
/// token or in `userinfo`, and `LANYARD_OIDC_CLAIMS_MAP` cannot name one.
pub const RESERVED_CLAIMS: &[&str] = &[
    "iss",
    "sub",
    "aud",
    "exp",
    "iat",
    "nbf",
    "jti",
    "auth_time",
    "nonce",
    "acr",
    "amr",
    "azp",
    "at_hash",
    "c_hash",
    "s_hash",
    "sid",
    "_claim_names",
    "_claim_sources",
];

/// Registered claims a relying party may act on as the provider's word
/// rather than as a presented claim: the IANA JSON Web Token Claims
/// registry's names that are not a person's attributes (RFC 7519 §10.1;
/// OpenID Connect Core §5.1's `*_verified` and `updated_at`; RFC 7800
/// `cnf`; RFC 8417 `events`; RFC 8693 `act`, `may_act`, `scope`,
/// `client_id`; RFC 9068 `roles`, `groups`, `entitlements`; RFC 9449
/// `htm`, `htu`, `ath`; …). A presented claim takes one of these names
/// only when `LANYARD_OIDC_CLAIMS_MAP` names it as the target
/// (docs/oidc.md, "Claims").
pub const REGISTERED_CLAIMS: &[&str] = &[
    "email_verified",
    "phone_number_verified",
    "updated_at",
    "cnf",
    "sub_jwk",
    "events",
    "toe",
    "txn",
    "rph",
    "vot",
    "vtm",
    "attest",
    "origid",
    "orig",
    "dest",
    "mky",
    "act",
    "may_act",
    "scope",
    "client_id",
    "roles",
    "groups",
    "entitlements",
    "jcard",
    "at_use_nbr",
    "div",
    "opt",
    "vc",
    "vp",
    "sph",
    "ace_profile",
    "cnonce",
    "exi",
    "token_introspection",
    "htm",
    "htu",
    "ath",
    "rcs",
    "verified_claims",
    "authorization_details",
    "eat_nonce",
    "eat_profile",
    "ueid",
    "sueid",
    "oemid",
    "hwmodel",
    "hwversion",
    "secboot",
    "dbgstat",
    "location",
    "submods",
    "sip_from_tag",
    "sip_date",
    "sip_callid",
    "sip_cseq_num",
    "sip_via_branch",
    "status",
    "status_list",
    "_sd",
    "_sd_alg",
    "sd_hash",
];

/// `LANYARD_OIDC_ISSUER`: the provider's public base URL, as relying
/// parties compare it with the `iss` of every ID token (OpenID Connect
/// Discovery §4.3), without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    url: String,
    /// Where its path begins in `url`: `""` or `/wallet`.
    path_at: usize,
}

impl Issuer {
    pub fn parse(raw: &str) -> Result<Issuer, String> {
        let example = "like https://login.example.com or https://example.com/wallet";
        if raw.len() > MAX_ISSUER {
            return Err(format!(
                "is {} bytes long; at most {MAX_ISSUER} are allowed",
                raw.len()
            ));
        }
        if raw.contains(['?', '#']) {
            return Err(format!(
                "`{raw}` has a query or a fragment, which an issuer must not (OpenID Connect Discovery §3)"
            ));
        }
        let uri: http::Uri = raw
            .parse()
            .map_err(|_| format!("`{raw}` is not an absolute URL ({example})"))?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(format!("`{raw}` is not an absolute URL ({example})"));
        };
        if authority.as_str().contains('@') {
            return Err(format!("`{raw}` has a user name or password in it"));
        }
        match scheme {
            "https" => {}
            "http" if is_loopback_host(authority.host()) => {}
            "http" => {
                return Err(format!(
                    "`{raw}` is plain http; an issuer must be https (plain http only on a loopback host, for trying it out)"
                ));
            }
            _ => return Err(format!("`{raw}` is not an http(s) URL ({example})")),
        }
        let path = uri.path().trim_end_matches('/');
        let clean = path.split('/').skip(1).all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        });
        if !clean {
            return Err(format!(
                "`{raw}`: its path may hold only letters, digits and `-._~` between single slashes"
            ));
        }
        let origin = format!("{scheme}://{authority}");
        Ok(Issuer {
            path_at: origin.len(),
            url: origin + path,
        })
    }

    /// The URL, as the `iss` claim and discovery carry it.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// Its path, under which the provider's endpoints are: `""` or
    /// `/wallet`.
    pub fn path(&self) -> &str {
        &self.url[self.path_at..]
    }

    /// The URL of the endpoint at `path` (`/token`) under the issuer.
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

impl std::fmt::Display for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Shown for Issuer {
    fn shown(&self) -> String {
        self.url.clone()
    }
}

impl Shown for ClaimsMap {
    fn shown(&self) -> String {
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(from, to)| format!("{from}={}", to.as_deref().unwrap_or("")))
            .collect();
        pairs.join(",")
    }
}

/// A claim's name as a setting gives it: a JSON member name a relying
/// party would write in its configuration.
pub fn parse_claim_name(raw: &str) -> Result<String, String> {
    let name = raw.trim();
    if name.is_empty()
        || name.len() > MAX_CLAIM_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
    {
        return Err(format!(
            "`{name}` is not a claim name (letters, digits and `_-.:`, at most {MAX_CLAIM_NAME})"
        ));
    }
    Ok(name.to_string())
}

/// `LANYARD_OIDC_CLAIMS_MAP`: presented claims renamed in the ID token and
/// `userinfo`, `presented=name,…`, on top of the standard names
/// (docs/oidc.md); `presented=` leaves a claim out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimsMap(pub Vec<(String, Option<String>)>);

impl ClaimsMap {
    pub fn parse(raw: &str) -> Result<ClaimsMap, String> {
        let mut pairs: Vec<(String, Option<String>)> = Vec::new();
        for pair in raw.split(',').filter(|pair| !pair.trim().is_empty()) {
            let Some((from, to)) = pair.split_once('=') else {
                return Err(format!(
                    "`{}` is not `presented=name` (or `presented=` to leave it out)",
                    pair.trim()
                ));
            };
            let from = parse_claim_name(from)?;
            let to = match to.trim() {
                "" => None,
                to => Some(parse_claim_name(to)?),
            };
            if let Some(reserved) = to.as_deref().filter(|to| RESERVED_CLAIMS.contains(to)) {
                return Err(format!(
                    "`{reserved}` is a claim the provider sets itself; map `{from}` to another name"
                ));
            }
            if pairs.iter().any(|(seen, _)| *seen == from) {
                return Err(format!("`{from}` is mapped twice"));
            }
            pairs.push((from, to));
        }
        Ok(ClaimsMap(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_is_https_or_loopback_http_with_a_clean_path() {
        let issuer = Issuer::parse("https://x.example/wallet/").unwrap();
        assert_eq!(issuer.as_str(), "https://x.example/wallet");
        assert_eq!(issuer.path(), "/wallet");
        assert_eq!(issuer.endpoint("/token"), "https://x.example/wallet/token");
        let root = Issuer::parse("http://127.0.0.1:8081").unwrap();
        assert_eq!((root.as_str(), root.path()), ("http://127.0.0.1:8081", ""));
        assert_eq!(Issuer::parse("https://x.example/").unwrap().path(), "");
        for (raw, why) in [
            ("http://x.example", "plain http"),
            ("https://x.example/?a=b", "query"),
            ("https://x.example/#f", "fragment"),
            ("https://u:p@x.example", "user name"),
            ("x.example", "absolute"),
            ("ftp://x.example", "http(s)"),
            ("https://x.example/a/../b", "path may hold"),
            ("https://x.example/a%2Fb", "path may hold"),
            ("https://x.example//a", "path may hold"),
        ] {
            let err = Issuer::parse(raw).unwrap_err();
            assert!(err.contains(why), "{raw}: {err}");
        }
        assert!(Issuer::parse(&format!("https://x.example/{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn a_claims_map_renames_or_drops_and_never_takes_a_reserved_name() {
        let map = ClaimsMap::parse("document_number=doc, portrait=").unwrap();
        assert_eq!(
            map.0,
            vec![
                ("document_number".into(), Some("doc".into())),
                ("portrait".into(), None)
            ]
        );
        assert_eq!(ClaimsMap::parse("").unwrap(), ClaimsMap::default());
        for (raw, why) in [
            ("a", "is not `presented=name`"),
            ("a=sub", "sets itself"),
            ("a=b,a=c", "mapped twice"),
            ("a b=c", "not a claim name"),
        ] {
            let err = ClaimsMap::parse(raw).unwrap_err();
            assert!(err.contains(why), "{raw}: {err}");
        }
    }
}
