//! The presented claims as a relying party reads them (docs/oidc.md,
//! "Claims"): under OpenID Connect's standard names where one exists
//! (OpenID Connect Core §5.1), under their own names otherwise, renamed or
//! left out by `LANYARD_OIDC_CLAIMS_MAP`; never under a name the provider
//! sets itself, nor under another registered claim's name unless the map
//! names it; and large ones in `userinfo` only, since relying parties
//! keep ID tokens in cookies and session stores of a few KiB.

use serde_json::{Map, Value};

use crate::config::issuer::{ClaimsMap, REGISTERED_CLAIMS, RESERVED_CLAIMS};

/// Presented claims with a standard OpenID Connect name of the same
/// meaning and form: the EU's PID rulebook names and the ISO mDL's.
const STANDARD_NAMES: &[(&str, &str)] = &[
    ("birth_date", "birthdate"),
    ("email_address", "email"),
    ("mobile_phone_number", "phone_number"),
];

/// A claim whose value is longer than this, as JSON, is in `userinfo`
/// only (a portrait, a document's scan).
pub const MAX_ID_TOKEN_CLAIM: usize = 1024;
/// The presented claims an ID token carries together, at most, as JSON;
/// the claims past it, in the order presented, are in `userinfo` only.
pub const MAX_ID_TOKEN_CLAIMS: usize = 4096;

/// How presented claims are named, from the settings.
#[derive(Debug, Clone, Default)]
pub struct Naming {
    /// `LANYARD_OIDC_CLAIMS_MAP`.
    pub map: ClaimsMap,
}

/// The claims, named for relying parties: those for the ID token, and all
/// of them for `userinfo`.
#[derive(Debug, Default, PartialEq)]
pub struct Named {
    pub id_token: Map<String, Value>,
    pub userinfo: Map<String, Value>,
}

impl Naming {
    /// The name a presented claim goes by, or `None` when it is left out.
    /// A registered claim's name is taken only when the map names it as
    /// the target; a name the provider sets itself, never.
    fn name_of<'a>(&'a self, presented: &'a str) -> Option<&'a str> {
        let given = self.map.0.iter().find(|(from, _)| from == presented);
        let (name, mapped) = match given {
            Some((_, to)) => (to.as_deref()?, true),
            None => {
                let standard = STANDARD_NAMES.iter().find(|(from, _)| *from == presented);
                (standard.map_or(presented, |(_, to)| to), false)
            }
        };
        let registered = REGISTERED_CLAIMS.contains(&name) && !mapped;
        (!RESERVED_CLAIMS.contains(&name) && !registered).then_some(name)
    }

    /// `presented` (the claims' JSON object), named.
    pub fn name(&self, presented: &Map<String, Value>) -> Named {
        let mut named = Named::default();
        let mut id_token_bytes = 0;
        for (presented_name, value) in presented {
            let Some(name) = self.name_of(presented_name) else {
                continue;
            };
            // Two presented claims under one name: the first stands.
            if named.userinfo.contains_key(name) {
                continue;
            }
            let size = value.to_string().len() + name.len();
            if size <= MAX_ID_TOKEN_CLAIM && id_token_bytes + size <= MAX_ID_TOKEN_CLAIMS {
                id_token_bytes += size;
                named.id_token.insert(name.to_string(), value.clone());
            }
            named.userinfo.insert(name.to_string(), value.clone());
        }
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else { panic!() };
        map
    }

    #[test]
    fn claims_take_standard_names_and_never_a_reserved_one() {
        let naming = Naming::default();
        let named = naming.name(&object(json!({
            "given_name": "Erika",
            "birth_date": "1984-01-26",
            "email_address": "erika@example.com",
            "age_over_18": true,
            "sub": "forged",
            "iss": "https://evil.example",
            "nonce": "forged",
        })));
        assert_eq!(
            named.id_token,
            object(json!({
                "given_name": "Erika",
                "birthdate": "1984-01-26",
                "email": "erika@example.com",
                "age_over_18": true,
            }))
        );
        assert_eq!(named.userinfo, named.id_token);
    }

    #[test]
    fn a_registered_claim_is_set_only_when_the_map_names_it() {
        let presented = object(json!({
            "given_name": "Erika",
            "email_verified": true,
            "phone_number_verified": true,
            "cnf": {"jwk": {"kty": "EC"}},
            "sub_jwk": {"kty": "EC"},
            "events": {"x": {}},
            "roles": ["admin"],
            "updated_at": 1,
            "mail_checked": true,
        }));
        let named = Naming::default().name(&presented);
        assert_eq!(
            named.id_token,
            object(json!({"given_name": "Erika", "mail_checked": true}))
        );
        assert_eq!(named.userinfo, named.id_token);

        let naming = Naming {
            map: ClaimsMap::parse(
                "email_verified=email_verified,mail_checked=phone_number_verified",
            )
            .unwrap(),
        };
        let named = naming.name(&presented);
        assert_eq!(
            named.userinfo,
            object(json!({
                "given_name": "Erika",
                "email_verified": true,
                "phone_number_verified": true,
            }))
        );
    }

    #[test]
    fn the_map_renames_and_leaves_out_before_the_standard_names() {
        let naming = Naming {
            map: ClaimsMap::parse("birth_date=date_of_birth,document_number=").unwrap(),
        };
        let named = naming.name(&object(json!({
            "birth_date": "1984-01-26",
            "document_number": "X1",
            "birthdate": "1999-09-09",
        })));
        assert_eq!(
            named.id_token,
            object(json!({"date_of_birth": "1984-01-26", "birthdate": "1999-09-09"}))
        );
    }

    #[test]
    fn a_large_claim_is_in_userinfo_only_and_so_are_claims_past_the_budget() {
        let portrait = "A".repeat(MAX_ID_TOKEN_CLAIM);
        let mut presented = object(json!({"given_name": "Erika", "portrait": portrait}));
        for i in 0..10 {
            presented.insert(format!("field_{i}"), Value::String("x".repeat(500)));
        }
        let named = Naming::default().name(&presented);
        assert!(named.id_token.contains_key("given_name"));
        assert!(!named.id_token.contains_key("portrait"));
        assert!(named.userinfo.contains_key("portrait"));
        let id_token_size = Value::Object(named.id_token.clone()).to_string().len();
        assert!(
            id_token_size <= MAX_ID_TOKEN_CLAIMS + 100,
            "{id_token_size}"
        );
        assert!(!named.id_token.contains_key("field_9"));
        assert_eq!(named.userinfo.len(), 12);
    }
}
