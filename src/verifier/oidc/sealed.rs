//! What the provider hands out and takes back without keeping it: the
//! authorization request the page carries to its session, the code, and
//! the access token, each sealed (AES-256-GCM) with the verifier's session
//! key (docs/verifier.md "Running many") for a purpose of its own, so
//! that any replica with the same key opens it and nothing sealed for one
//! purpose passes as another; the access token, which carries the claims
//! `userinfo` answers, under a key of its own as well. JSON inside, with
//! short names: a code rides in a redirect URL.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use super::claims::Named;
use crate::config::issuer::Issuer;
use crate::config::oidc::rules::Rule;
use crate::verifier::binding::{KeyRing, MAX_SEALED_AUTHORIZATION, SEAL_OVERHEAD, SealKey};

const AUTHORIZATION: &[u8] = b"lanyard oidc authorization request";
const CODE: &[u8] = b"lanyard oidc authorization code";
const ACCESS_TOKEN: &[u8] = b"lanyard oidc access token";

/// A sealed value as a client sends it back, at most: a code carries the
/// authorization request and more.
pub const MAX_SEALED: usize = 6 * 1024;
/// The longest access token: with `Authorization: Bearer ` it fits the 8
/// KiB that a header line may have in nginx's and Apache httpd's default
/// settings (`large_client_header_buffers`, `LimitRequestFieldSize`) and
/// that a whole request head may have at lanyard's smallest
/// `LANYARD_MAX_HEADER_BYTES`. The claims that do not fit are left out
/// (docs/oidc.md, "The access token").
pub const MAX_ACCESS_TOKEN: usize = MAX_SEALED;
/// The longest JSON an access token seals: base64url makes 4 characters
/// of every 3 bytes.
const MAX_ACCESS_TOKEN_JSON: usize = MAX_ACCESS_TOKEN / 4 * 3 - SEAL_OVERHEAD;

/// An authorization request, checked (`authorize`), from the page to the
/// session it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorization {
    #[serde(rename = "c")]
    pub client_id: String,
    #[serde(rename = "r")]
    pub redirect_uri: String,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The PKCE S256 challenge (RFC 7636 §4.2).
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub code_challenge: Option<String>,
    /// Unix seconds; the page must start its session before.
    #[serde(rename = "e")]
    pub expires_at: u64,
    /// The client's verification rule its scope picked; `None`: the
    /// deployment's `PROJECT_ID`/`RULE_ID`. Carried so that whichever
    /// replica polls the session, or redeems its code, asks the rule the
    /// session was started on (docs/oidc.md, "Rules per client").
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
}

/// An authorization code: what the token endpoint needs to find the
/// result and check the redemption, and never the claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Code {
    /// Random: what single use is enforced on.
    #[serde(rename = "i")]
    pub id: String,
    #[serde(rename = "a")]
    pub authorization: Authorization,
    /// The service's session.
    #[serde(rename = "t")]
    pub service_id: String,
    #[serde(rename = "u")]
    pub sub: String,
    /// When the wallet presented, as far as lanyard saw (Unix seconds).
    #[serde(rename = "w")]
    pub auth_time: u64,
    /// Unix seconds, at most [`super::CODE_LIFETIME`] after issue.
    #[serde(rename = "e")]
    pub expires_at: u64,
}

/// An access token: what `userinfo` answers, for whom. It carries the
/// claims themselves, so that `userinfo` on any replica answers without
/// asking the service (docs/oidc.md, "The access token"). Its `Debug`
/// names how many claims it carries, never their values.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessToken {
    #[serde(rename = "c")]
    pub client_id: String,
    #[serde(rename = "u")]
    pub sub: String,
    #[serde(rename = "e")]
    pub expires_at: u64,
    /// The login it was issued for (its code's id): a replayed code
    /// revokes every access token of its login (RFC 6749 §4.1.2).
    #[serde(rename = "i")]
    pub grant: String,
    /// The claims `userinfo` answers, named for relying parties.
    #[serde(rename = "k")]
    pub claims: Map<String, Value>,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("client_id", &self.client_id)
            .field("sub", &self.sub)
            .field("expires_at", &self.expires_at)
            .field("grant", &self.grant)
            .field("claims", &format_args!("[{} redacted]", self.claims.len()))
            .finish()
    }
}

impl AccessToken {
    /// An access token without claims; [`AccessToken::fill`] adds them.
    pub fn new(client_id: &str, sub: &str, expires_at: u64, grant: &str) -> AccessToken {
        AccessToken {
            client_id: client_id.to_string(),
            sub: sub.to_string(),
            expires_at,
            grant: grant.to_string(),
            claims: Map::new(),
        }
    }

    /// Adds `named`'s claims for `userinfo`, as many as fit
    /// [`MAX_ACCESS_TOKEN`] sealed: the ID token's first, so that
    /// `userinfo` answers at least what the ID token says, then the
    /// others in the order of their names, each that fits. Returns how
    /// many were left out.
    pub fn fill(&mut self, named: &Named) -> usize {
        let Ok(empty) = serde_json::to_vec(self) else {
            return named.userinfo.len();
        };
        let room = MAX_ACCESS_TOKEN_JSON.saturating_sub(empty.len());
        let others = named
            .userinfo
            .iter()
            .filter(|(name, _)| !named.id_token.contains_key(*name));
        let mut used = 0;
        let mut left_out = 0;
        for (name, value) in named.id_token.iter().chain(others) {
            // `"name":value`, and a comma after the first.
            let entry = Value::from(name.as_str()).to_string().len()
                + 1
                + value.to_string().len()
                + usize::from(!self.claims.is_empty());
            if used + entry <= room {
                used += entry;
                self.claims.insert(name.clone(), value.clone());
            } else {
                left_out += 1;
            }
        }
        left_out
    }
}

/// A kind of sealed value, the purpose it is sealed for, and the key.
pub trait Kind: Serialize + DeserializeOwned {
    const PURPOSE: &'static [u8];
    const KEY: SealKey = SealKey::Shared;
}

impl Kind for Authorization {
    const PURPOSE: &'static [u8] = AUTHORIZATION;
}

impl Kind for Code {
    const PURPOSE: &'static [u8] = CODE;
}

impl Kind for AccessToken {
    const PURPOSE: &'static [u8] = ACCESS_TOKEN;
    const KEY: SealKey = SealKey::AccessTokens;
}

/// `value`, sealed for its kind's purpose at `issuer`: two deployments
/// that share a session key (staging and production, say) never take each
/// other's.
pub fn seal<T: Kind>(keys: &KeyRing, issuer: &Issuer, value: &T) -> Result<String, String> {
    let json = serde_json::to_vec(value).map_err(|_| "cannot write a sealed value")?;
    keys.seal_bytes(T::KEY, &purpose::<T>(issuer), json)
}

/// What `text` holds, when one of `keys` sealed it for `T`'s purpose at
/// `issuer`.
pub fn open<T: Kind>(keys: &KeyRing, issuer: &Issuer, text: &str) -> Option<T> {
    if text.is_empty() || text.len() > MAX_SEALED {
        return None;
    }
    let plain = keys.open_bytes(T::KEY, &purpose::<T>(issuer), text)?;
    serde_json::from_slice(&plain).ok()
}

/// What a sealed value is bound to (its AEAD's associated data): its kind
/// and the issuer.
fn purpose<T: Kind>(issuer: &Issuer) -> Vec<u8> {
    [T::PURPOSE, b"\0", issuer.as_str().as_bytes()].concat()
}

impl Authorization {
    /// As the session handle carries it: the JSON alone (the handle is
    /// sealed itself), within what a handle holds.
    pub fn to_handle_text(&self) -> Option<String> {
        serde_json::to_string(self)
            .ok()
            .filter(|text| text.len() <= MAX_SEALED_AUTHORIZATION)
    }

    pub fn from_handle_text(text: &str) -> Option<Authorization> {
        serde_json::from_str(text).ok()
    }

    /// The same for every showing of one request (the page reloaded in
    /// another language) and different for another: what the page keeps
    /// a session for, so that it never resumes one login's session on
    /// another's page.
    pub fn fingerprint(&self) -> String {
        let fields = [
            self.client_id.as_str(),
            &self.redirect_uri,
            self.state.as_deref().unwrap_or(""),
            self.nonce.as_deref().unwrap_or(""),
            self.code_challenge.as_deref().unwrap_or(""),
            self.rule.as_ref().map_or("", |rule| rule.scope.as_str()),
        ];
        let digest =
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, fields.join("\0").as_bytes());
        URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16])
    }
}

/// 16 random bytes in base64url: a code's id, or a `sub` that names
/// nobody.
pub fn random_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "no randomness")?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_tokens_debug_names_no_claim_value() {
        let mut token = AccessToken::new("shop", "sub-1", 1, "grant");
        token
            .claims
            .insert("document_number".into(), Value::from("X1234567"));
        let shown = format!("{token:?}");
        assert!(!shown.contains("X1234567"), "{shown}");
        assert!(shown.contains("[1 redacted]"), "{shown}");
    }

    fn authorization() -> Authorization {
        Authorization {
            client_id: "shop".into(),
            redirect_uri: "https://shop.example/cb".into(),
            state: Some("s".into()),
            nonce: None,
            code_challenge: Some("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into()),
            expires_at: 1_800_000_000,
            rule: Some(Rule {
                scope: "age".into(),
                project_id: "proj-a".into(),
                rule_id: "0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10".into(),
            }),
        }
    }

    #[test]
    fn a_sealed_value_opens_only_as_its_own_kind_under_its_keys_at_its_issuer() {
        let keys = KeyRing::new(&[7; 32], None);
        let issuer = Issuer::parse("https://login.example").unwrap();
        let sealed = seal(&keys, &issuer, &authorization()).unwrap();
        let opened = open::<Authorization>(&keys, &issuer, &sealed);
        assert_eq!(opened, Some(authorization()));
        assert!(!sealed.contains("shop"), "sealed, not signed");
        assert_eq!(
            open::<Code>(&keys, &issuer, &sealed),
            None,
            "another purpose"
        );
        assert_eq!(open::<AccessToken>(&keys, &issuer, &sealed), None);
        let staging = Issuer::parse("https://staging.login.example").unwrap();
        let elsewhere = open::<Authorization>(&keys, &staging, &sealed);
        assert_eq!(elsewhere, None, "another issuer");
        let other = KeyRing::new(&[8; 32], None);
        assert_eq!(open::<Authorization>(&other, &issuer, &sealed), None);
        let rotated = KeyRing::new(&[8; 32], Some(&[7; 32]));
        let opened = open::<Authorization>(&rotated, &issuer, &sealed);
        assert_eq!(opened, Some(authorization()));
        for junk in ["", "AAAA", "!!", &"A".repeat(MAX_SEALED + 1)] {
            assert_eq!(open::<Authorization>(&keys, &issuer, junk), None);
        }
        let handle = authorization().to_handle_text().unwrap();
        assert_eq!(
            Authorization::from_handle_text(&handle),
            Some(authorization())
        );
    }

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else { panic!() };
        map
    }

    #[test]
    fn an_access_token_opens_only_under_its_own_key() {
        let keys = KeyRing::new(&[7; 32], None);
        let issuer = Issuer::parse("https://login.example").unwrap();
        let mut token = AccessToken::new("shop", "s", 1_800_000_000, "g");
        token.claims = object(serde_json::json!({"given_name": "Erika"}));
        let sealed = seal(&keys, &issuer, &token).unwrap();
        assert_eq!(
            open::<AccessToken>(&keys, &issuer, &sealed),
            Some(token.clone())
        );
        let json = serde_json::to_vec(&token).unwrap();
        let shared = keys
            .seal_bytes(SealKey::Shared, &purpose::<AccessToken>(&issuer), json)
            .unwrap();
        assert_eq!(open::<AccessToken>(&keys, &issuer, &shared), None);
        // One sealed before access tokens carried claims: refused.
        let old = br#"{"c":"shop","t":"tx","u":"s","e":1800000000,"i":"g"}"#.to_vec();
        let old = keys
            .seal_bytes(SealKey::AccessTokens, &purpose::<AccessToken>(&issuer), old)
            .unwrap();
        assert_eq!(open::<AccessToken>(&keys, &issuer, &old), None);
    }

    #[test]
    fn an_access_token_holds_the_id_tokens_claims_first_and_stays_within_its_bound() {
        let keys = KeyRing::new(&[7; 32], None);
        let issuer = Issuer::parse("https://login.example").unwrap();
        let mut id_token = object(serde_json::json!({"given_name": "Erika", "z": "\u{1}\"<"}));
        for i in 0..150 {
            // Many small claims, names JSON escapes among them.
            id_token.insert(format!("c{i}\u{7}\""), Value::from(i));
        }
        let mut userinfo = id_token.clone();
        userinfo.insert("a_mark".into(), Value::from("m".repeat(2000)));
        userinfo.insert("portrait".into(), Value::from("p".repeat(40 * 1024)));
        userinfo.insert("b_small".into(), Value::from(true));
        let named = Named { id_token, userinfo };
        let longest = ("c".repeat(128), "u".repeat(255));
        for (client, sub) in [("shop", "s"), (longest.0.as_str(), longest.1.as_str())] {
            let mut token = AccessToken::new(client, sub, 1_800_000_000, &random_id().unwrap());
            let left_out = token.fill(&named);
            let sealed = seal(&keys, &issuer, &token).unwrap();
            assert!(sealed.len() <= MAX_ACCESS_TOKEN, "{}", sealed.len());
            assert_eq!(
                open::<AccessToken>(&keys, &issuer, &sealed),
                Some(token.clone())
            );
            assert!(named.id_token.keys().all(|k| token.claims.contains_key(k)));
            assert!(!token.claims.contains_key("portrait"));
            assert!(token.claims.contains_key("b_small"), "each that fits");
            assert_eq!(left_out + token.claims.len(), named.userinfo.len());
        }
    }

    #[test]
    fn a_claim_that_fills_the_access_token_to_its_last_byte_fits_and_one_more_does_not() {
        let keys = KeyRing::new(&[7; 32], None);
        let issuer = Issuer::parse("https://login.example").unwrap();
        let empty = AccessToken::new("shop", "s", 1_800_000_000, "g");
        let room = MAX_ACCESS_TOKEN_JSON - serde_json::to_vec(&empty).unwrap().len();
        // `"x":"…"`: six bytes besides the value's.
        for (length, fits) in [(room - 6, true), (room - 5, false)] {
            let claims = object(serde_json::json!({"x": "v".repeat(length)}));
            let named = Named {
                id_token: Map::new(),
                userinfo: claims,
            };
            let mut token = empty.clone();
            assert_eq!(token.fill(&named), usize::from(!fits));
            let sealed = seal(&keys, &issuer, &token).unwrap();
            assert!(sealed.len() <= MAX_ACCESS_TOKEN);
            if fits {
                assert_eq!(sealed.len(), MAX_ACCESS_TOKEN, "to the byte");
            }
        }
    }
}
