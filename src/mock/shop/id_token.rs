//! The checks a relying party makes of an ID token (OpenID Connect Core
//! §3.1.3.7): signed with RS256 by the provider's key named by `kid`,
//! issued by the provider to this client, not expired, and carrying the
//! login's `nonce`. Written out here, not taken from the provider's side,
//! so a mistake there cannot pass on both sides.
//!
//! Pure: the key set is handed in. Imports nothing of the mock.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

/// How far apart the shop's and the provider's clocks may be for `exp`:
/// jsonwebtoken's default, and plenty for two processes on one machine.
const LEEWAY_SECONDS: u64 = 60;

/// A JWK set (RFC 7517 §5), the members the shop reads.
#[derive(Debug, Deserialize)]
pub(super) struct KeySet {
    keys: Vec<Key>,
}

/// One JWK; members a key set may lack are `None` rather than an error,
/// so one odd key does not make the whole set unreadable.
#[derive(Debug, Deserialize)]
struct Key {
    kty: Option<String>,
    kid: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
    alg: Option<String>,
    n: Option<String>,
    e: Option<String>,
}

/// What the expected values of a login are.
pub(super) struct Expected<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub nonce: &'a str,
}

/// Why an ID token was refused: fixed sentences, safe to show.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("the ID token is not a signed JWT")]
    Malformed,
    #[error("the ID token is not signed with RS256")]
    Algorithm,
    #[error("the ID token names no key (kid)")]
    NoKeyId,
    #[error("the provider's key set has no RSA signing key with the ID token's kid")]
    UnknownKey,
    #[error("the ID token's signature does not verify")]
    Signature,
    #[error("the ID token's issuer is not the provider")]
    Issuer,
    #[error("the ID token is not meant for this shop (aud, azp)")]
    Audience,
    #[error("the ID token has expired")]
    Expired,
    #[error("the ID token lacks a claim it must have (iss, sub, aud, exp, iat)")]
    MissingClaim,
    #[error("the ID token's nonce is not this login's")]
    Nonce,
}

/// The token's claims, once every check has passed.
pub(super) fn verify(
    token: &str,
    keys: &KeySet,
    expected: &Expected<'_>,
) -> Result<Map<String, Value>, Refused> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Refused::Malformed)?;
    if header.alg != Algorithm::RS256 {
        return Err(Refused::Algorithm);
    }
    let kid = header.kid.ok_or(Refused::NoKeyId)?;
    let key = keys.signing_key(&kid).ok_or(Refused::UnknownKey)?;

    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_required_spec_claims(&["iss", "sub", "aud", "exp"]);
    validation.set_issuer(&[expected.issuer]);
    validation.set_audience(&[expected.client_id]);
    validation.leeway = LEEWAY_SECONDS;
    let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|err| refusal_for(err.kind()))?
        .claims;

    // jsonwebtoken does not require `iat`; Core §2 does.
    if !claims.get("iat").is_some_and(Value::is_number) {
        return Err(Refused::MissingClaim);
    }
    // Core §3.1.3.7 item 6: an `azp` present must be this client.
    if claims
        .get("azp")
        .is_some_and(|azp| azp.as_str() != Some(expected.client_id))
    {
        return Err(Refused::Audience);
    }
    if claims.get("nonce").and_then(Value::as_str) != Some(expected.nonce) {
        return Err(Refused::Nonce);
    }
    Ok(claims)
}

impl KeySet {
    /// The RSA key for `kid` that may verify signatures: a key set may
    /// hold encryption keys or keys of other types under other names.
    fn signing_key(&self, kid: &str) -> Option<DecodingKey> {
        let key = self.keys.iter().find(|key| {
            key.kid.as_deref() == Some(kid)
                && key.kty.as_deref() == Some("RSA")
                && key.usage.as_deref().is_none_or(|usage| usage == "sig")
                && key.alg.as_deref().is_none_or(|alg| alg == "RS256")
        })?;
        DecodingKey::from_rsa_components(key.n.as_deref()?, key.e.as_deref()?).ok()
    }
}

fn refusal_for(kind: &ErrorKind) -> Refused {
    match kind {
        ErrorKind::InvalidSignature => Refused::Signature,
        ErrorKind::InvalidIssuer => Refused::Issuer,
        ErrorKind::InvalidAudience => Refused::Audience,
        ErrorKind::ExpiredSignature => Refused::Expired,
        ErrorKind::MissingRequiredClaim(_) => Refused::MissingClaim,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Refused::Algorithm,
        _ => Refused::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    use super::*;
    use crate::mock::shop::tests::{Signer, unix_now as now};

    const ISSUER: &str = "http://127.0.0.1:8081";
    const EXPECTED: Expected<'static> = Expected {
        issuer: ISSUER,
        client_id: "shop",
        nonce: "n-0S6_WzA2Mj",
    };

    fn good_claims() -> Value {
        json!({
            "iss": ISSUER, "sub": "u-1", "aud": "shop", "nonce": EXPECTED.nonce,
            "iat": now(), "exp": now() + 300, "given_name": "Erika",
        })
    }

    /// The verdict on a token signed by `signer` as key "k1" with `claims`.
    fn check(signer: &Signer, claims: Value) -> Result<Map<String, Value>, Refused> {
        verify(&signer.sign(Some("k1"), &claims), &signer.keys(), &EXPECTED)
    }

    #[test]
    fn a_good_token_answers_its_claims() {
        let signer = Signer::new("k1");
        let claims = check(&signer, good_claims()).unwrap();
        assert_eq!(claims["given_name"], "Erika");
        assert_eq!(claims["sub"], "u-1");
    }

    #[test]
    fn each_claim_a_relying_party_checks_is_checked() {
        let signer = Signer::new("k1");
        let with = |name: &str, value: Value| {
            let mut claims = good_claims();
            claims[name] = value;
            check(&signer, claims)
        };
        let without = |name: &str| {
            let mut claims = good_claims();
            claims.as_object_mut().unwrap().remove(name);
            check(&signer, claims)
        };
        assert_eq!(with("iss", json!("http://evil.test")), Err(Refused::Issuer));
        assert_eq!(with("aud", json!("other")), Err(Refused::Audience));
        assert!(with("aud", json!(["other", "shop"])).is_ok());
        assert_eq!(with("azp", json!("other")), Err(Refused::Audience));
        assert_eq!(with("exp", json!(now() - 3600)), Err(Refused::Expired));
        assert_eq!(with("nonce", json!("another")), Err(Refused::Nonce));
        assert_eq!(without("nonce"), Err(Refused::Nonce));
        for claim in ["iss", "sub", "aud", "exp", "iat"] {
            assert_eq!(without(claim), Err(Refused::MissingClaim), "{claim}");
        }
    }

    #[test]
    fn only_the_provider_s_key_by_its_kid_verifies() {
        let provider = Signer::new("k1");
        let forger = Signer::new("k1");
        let forged = forger.sign(Some("k1"), &good_claims());
        assert_eq!(
            verify(&forged, &provider.keys(), &EXPECTED),
            Err(Refused::Signature)
        );
        let unnamed = provider.sign(None, &good_claims());
        assert_eq!(
            verify(&unnamed, &provider.keys(), &EXPECTED),
            Err(Refused::NoKeyId)
        );
        let elsewhere = provider.sign(Some("k2"), &good_claims());
        assert_eq!(
            verify(&elsewhere, &provider.keys(), &EXPECTED),
            Err(Refused::UnknownKey)
        );
    }

    #[test]
    fn a_token_not_signed_with_rs256_is_refused() {
        let provider = Signer::new("k1");
        let header = Header {
            kid: Some("k1".into()),
            ..Header::new(Algorithm::HS256)
        };
        let hmac = EncodingKey::from_secret(b"the public modulus, say");
        let token = jsonwebtoken::encode(&header, &good_claims(), &hmac).unwrap();
        assert_eq!(
            verify(&token, &provider.keys(), &EXPECTED),
            Err(Refused::Algorithm)
        );
        assert_eq!(
            verify("not.a.jwt", &provider.keys(), &EXPECTED),
            Err(Refused::Malformed)
        );
    }
}
