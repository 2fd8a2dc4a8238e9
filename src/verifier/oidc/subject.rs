//! `sub`, as each relying party sees a person (docs/oidc.md, "Subjects";
//! OpenID Connect Core §8). Without `LANYARD_OIDC_SUB_CLAIM` it is a
//! fresh value per login. With it, a client that asks for public subjects
//! gets the claims' values as they are, and every other client a pairwise
//! one (§8.1): HMAC-SHA256 under a key stretched from
//! `LANYARD_OIDC_PAIRWISE_KEY` for this purpose alone, over the client's
//! sector and the values, each length-prefixed so that no two lists of
//! them hash alike. One person is then one `sub` at every client of a
//! sector, on every replica, and relying parties of two sectors cannot
//! match their `sub`s without the key.

use aws_lc_rs::{hkdf, hmac};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use crate::config::oidc::Client;
use crate::config::oidc::subject::{PairwiseKey, Sector, SubjectType};

/// The longest `sub` (OpenID Connect Core §2: at most 255 ASCII
/// characters).
const MAX_SUB: usize = 255;
/// A claim value a pairwise `sub` is made of, at most: a number names a
/// person in far fewer bytes, and a portrait is no identifier.
const MAX_VALUE: usize = 1024;
/// What the pairwise key is stretched for, so that the same secret used
/// for anything else never gives these hashes.
const PAIRWISE_PURPOSE: &[u8] = b"lanyard oidc pairwise subject";

/// How `sub` is made, from the settings.
#[derive(Default)]
pub struct Subjects {
    /// `LANYARD_OIDC_SUB_CLAIM`, in order; empty: a fresh `sub` per login.
    claims: Vec<String>,
    /// Stretched from `LANYARD_OIDC_PAIRWISE_KEY`.
    key: Option<hmac::Key>,
}

impl Subjects {
    pub fn new(claims: &[String], key: Option<&PairwiseKey>) -> Subjects {
        Subjects {
            claims: claims.to_vec(),
            key: key.map(|key| stretch(key.expose())),
        }
    }

    /// The `sub` `client` gets for the presented claims. `Ok(None)`: no
    /// claim names the person, and the login gets a fresh one. `Err`: the
    /// claims that name the person are not all there as a string or a
    /// number, or make no `sub` a relying party can hold.
    pub fn sub(
        &self,
        client: &Client,
        presented: &Map<String, Value>,
    ) -> Result<Option<String>, ()> {
        if self.claims.is_empty() {
            return Ok(None);
        }
        let values = self
            .claims
            .iter()
            .map(|claim| value_of(presented.get(claim)))
            .collect::<Option<Vec<String>>>()
            .ok_or(())?;
        match (client.subject_type, &client.sector, &self.key) {
            (SubjectType::Public, _, _) => public(&values).map(Some),
            (SubjectType::Pairwise, Sector::Host(sector), Some(key)) => {
                Ok(Some(pairwise(key, sector, &values)))
            }
            // Start-up refuses a pairwise client without a sector, and
            // pairwise clients without the key.
            (SubjectType::Pairwise, _, _) => Err(()),
        }
    }
}

/// The key pairwise `sub`s are signed with, stretched (HKDF-SHA256, RFC
/// 5869) from the given secret for this purpose.
fn stretch(secret: &[u8]) -> hmac::Key {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"lanyard oidc").extract(secret);
    prk.expand(&[PAIRWISE_PURPOSE], hmac::HMAC_SHA256)
        .map(hmac::Key::from)
        // 32 bytes is within what HKDF-SHA256 gives (255 × 32).
        .unwrap_or_else(|_| unreachable!("HKDF-SHA256 gives an HMAC-SHA256 key"))
}

/// A claim's value as `sub` takes it: a string, or a number as written;
/// never empty.
fn value_of(claim: Option<&Value>) -> Option<String> {
    let value = match claim? {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        _ => return None,
    };
    (!value.is_empty() && value.len() <= MAX_VALUE).then_some(value)
}

/// A public `sub`: one value as it is; several joined with `:`, each `%`
/// and `:` in a value escaped (`%25`, `%3A`), so that no two lists of
/// values give one `sub`. At most 255 printable ASCII characters.
fn public(values: &[String]) -> Result<String, ()> {
    let sub = match values {
        [one] => one.clone(),
        several => several
            .iter()
            .map(|value| value.replace('%', "%25").replace(':', "%3A"))
            .collect::<Vec<_>>()
            .join(":"),
    };
    match sub.len() <= MAX_SUB && sub.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        true => Ok(sub),
        false => Err(()),
    }
}

/// A pairwise `sub`: the HMAC of the sector and the values, each with its
/// length before it, in base64url (43 characters).
fn pairwise(key: &hmac::Key, sector: &str, values: &[String]) -> String {
    let mut context = hmac::Context::with_key(key);
    for part in std::iter::once(sector).chain(values.iter().map(String::as_str)) {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    URL_SAFE_NO_PAD.encode(context.sign().as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else { panic!() };
        map
    }

    fn client(uri: &str, subject_type: SubjectType) -> Client {
        Client {
            id: "c".into(),
            secret: None,
            redirect_uris: vec![uri.into()],
            name: None,
            require_pkce: true,
            subject_type,
            sector: Sector::of(&[uri.into()], None),
            rules: Default::default(),
            brand: None,
        }
    }

    fn subjects(claims: &[&str]) -> Subjects {
        let claims: Vec<String> = claims.iter().map(|c| c.to_string()).collect();
        let key = PairwiseKey::parse(&"B".repeat(44)).unwrap();
        Subjects::new(&claims, Some(&key))
    }

    #[test]
    fn values_are_length_prefixed_so_no_two_lists_hash_alike() {
        let key = stretch(&[1; 32]);
        let strings = |list: &[&str]| list.iter().map(|v| v.to_string()).collect::<Vec<_>>();
        let ab_c = pairwise(&key, "s.example", &strings(&["ab", "c"]));
        assert_ne!(ab_c, pairwise(&key, "s.example", &strings(&["a", "bc"])));
        assert_ne!(ab_c, pairwise(&key, "s.example", &strings(&["abc"])));
        assert_ne!(
            pairwise(&key, "s.example", &strings(&["x"])),
            pairwise(&key, "s.exampl", &strings(&["ex"])),
            "the sector is prefixed too"
        );
        assert_eq!(ab_c, pairwise(&key, "s.example", &strings(&["ab", "c"])));
        assert_ne!(
            ab_c,
            pairwise(&stretch(&[2; 32]), "s.example", &strings(&["ab", "c"]))
        );
        assert_eq!(ab_c.len(), 43);
    }

    /// A pairwise `sub` is what relying parties key accounts on: a change
    /// to how it is made changes every person's at every one of them. The
    /// value was computed apart from this code, with HKDF (RFC 5869) and
    /// HMAC-SHA256 as docs/oidc.md describes them.
    #[test]
    fn a_pairwise_sub_is_made_as_it_always_was() {
        let sub = subjects(&["nationality", "document_number"]).sub(
            &client("https://shop.example/cb", SubjectType::Pairwise),
            &object(json!({"nationality": "DE", "document_number": "X1"})),
        );
        assert_eq!(
            sub,
            Ok(Some("yiVWzBc5PWgEUfcknl1NkoBOs_c2dAUr4uocxDEG5vs".into()))
        );
    }

    #[test]
    fn a_public_sub_is_the_values_joined_unambiguously() {
        let of =
            |values: &[&str]| public(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        assert_eq!(of(&["X1"]), Ok("X1".into()));
        assert_eq!(of(&["a:b%"]), Ok("a:b%".into()), "one value, as it is");
        assert_eq!(of(&["DE", "X1"]), Ok("DE:X1".into()));
        assert_eq!(of(&["a:b", "c"]), Ok("a%3Ab:c".into()));
        assert_eq!(of(&["a", "b:c"]), Ok("a:b%3Ac".into()));
        assert_eq!(of(&["a%3Ab", "c"]), Ok("a%253Ab:c".into()));
        assert_eq!(of(&[&"x".repeat(256)]), Err(()));
        assert_eq!(of(&["Müller"]), Err(()), "not ASCII");
    }

    #[test]
    fn sub_needs_every_claim_that_names_the_person() {
        let presented = object(
            json!({"document_number": "X1", "n": 42, "o": {"a": 1}, "empty": "", "long": "x".repeat(300)}),
        );
        let public = client("https://shop.example/cb", SubjectType::Public);
        assert_eq!(Subjects::default().sub(&public, &presented), Ok(None));
        assert_eq!(
            subjects(&["document_number"]).sub(&public, &presented),
            Ok(Some("X1".into()))
        );
        assert_eq!(
            subjects(&["n", "document_number"]).sub(&public, &presented),
            Ok(Some("42:X1".into()))
        );
        let pairwise = client("https://shop.example/cb", SubjectType::Pairwise);
        for unusable in ["o", "empty", "missing"] {
            for client in [&public, &pairwise] {
                let sub = subjects(&["document_number", unusable]).sub(client, &presented);
                assert_eq!(sub, Err(()), "{unusable}");
            }
        }
        assert_eq!(subjects(&["long"]).sub(&public, &presented), Err(()));
        let hashed = subjects(&["long"]).sub(&pairwise, &presented).unwrap();
        assert_eq!(hashed.map(|sub| sub.len()), Some(43), "hashed, any length");
        let loopback = client("http://127.0.0.1/cb", SubjectType::Pairwise);
        assert_eq!(subjects(&["n"]).sub(&loopback, &presented), Err(()));
        let keyless = Subjects::new(&["n".to_string()], None);
        assert_eq!(keyless.sub(&pairwise, &presented), Err(()));
    }
}
