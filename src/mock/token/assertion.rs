//! How the token endpoint checks a client assertion (RFC 7523 §3, with the
//! header and claims docs/tokens.md's "Token exchange" lists), written
//! out here rather than taken from the client side. Every failure is a
//! sentence saying what is wrong, in the words the tests pin; the endpoint
//! answers each as `invalid_client`.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::mock::accounts::{Accounts, MockAccount};

/// How far ahead `exp` may be: the service suggests an hour's lifetime and
/// lanyard caps `LANYARD_ASSERTION_TTL` there (docs/settings.md).
const MAX_ASSERTION_LIFETIME: u64 = 3600;
/// Tolerance for clocks a little apart, and for `iat` rounding.
const LEEWAY: u64 = 30;

/// An assertion that verified: its decoded header, its claims and the
/// account whose key signed it.
pub(super) struct Verified {
    pub header: Value,
    pub claims: Value,
    pub account: MockAccount,
}

/// Verifies the assertion for `audience` and finds its account.
///
/// The header is checked first; jsonwebtoken then checks the shape, the
/// signature with the account's key, and `iss`, `sub`, `aud` and `exp`;
/// the claims it does not check (`iat`, the hour's limit on `exp`, `jti`)
/// follow.
pub(super) fn verify(
    assertion: &str,
    audience: &str,
    accounts: &Accounts,
) -> Result<Verified, String> {
    let unverified = unverified_claims(assertion)?;
    let iss = unverified["iss"]
        .as_str()
        .ok_or("claim `iss` is missing or not a string")?;
    let account = accounts
        .lock()
        .accounts
        .get(iss)
        .cloned()
        .ok_or("unknown client")?;

    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_required_spec_claims(&["iss", "sub", "aud", "exp"]);
    validation.set_issuer(&[&account.client_id]);
    validation.sub = Some(account.client_id.clone());
    validation.set_audience(&[audience]);
    // No leeway for `exp`: a client with a clock ahead can backdate
    // (LANYARD_CLOCK_SKEW, docs/troubleshooting.md).
    validation.leeway = 0;
    let verified = jsonwebtoken::decode::<Value>(
        assertion,
        &DecodingKey::from_rsa_der(&account.public_key_der),
        &validation,
    )
    .map_err(|err| refusal_for(err.kind()))?;
    check_claims(&verified.claims)?;
    // A header that decoded serializes again; the log shows what was sent.
    let header = serde_json::to_value(&verified.header).unwrap_or_default();
    Ok(Verified {
        header,
        claims: verified.claims,
        account,
    })
}

/// Checks the header and reads the claims unverified, only for `iss`, to
/// find whose key verifies the rest.
fn unverified_claims(assertion: &str) -> Result<Value, String> {
    // jsonwebtoken splits from the right, so `a.b.c.d` would reach it as a
    // header `a.b` that is not base64url: say what is really wrong.
    if assertion.split('.').count() != 3 {
        return Err("client_assertion is not a compact JWS".into());
    }
    let header = jsonwebtoken::decode_header(assertion).map_err(|err| match err.kind() {
        ErrorKind::Base64(_) => "the assertion's header is not base64url".into(),
        ErrorKind::Json(json) if json.is_data() => untyped_header(assertion),
        _ => "the assertion's header is not JSON".into(),
    })?;
    let unverified: Value =
        jsonwebtoken::dangerous::insecure_decode_claims(assertion).map_err(|err| {
            match err.kind() {
                ErrorKind::Base64(_) => "the assertion's claims is not base64url",
                _ => "the assertion's claims is not JSON",
            }
        })?;
    if header.alg != Algorithm::RS256 {
        return Err("the assertion's alg must be RS256".into());
    }
    if header.typ.as_deref() != Some("JWT") {
        return Err("the assertion's typ must be JWT".into());
    }
    Ok(unverified)
}

/// The claims jsonwebtoken does not check: `iat`, `exp` within the hour,
/// and `jti` a UUID v4.
fn check_claims(claims: &Value) -> Result<(), String> {
    // Whole seconds only: jsonwebtoken rounds a fractional `exp`.
    let number = |name: &str| {
        claims[name]
            .as_u64()
            .ok_or_else(|| format!("claim `{name}` is missing or not a number"))
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let iat = number("iat")?;
    let exp = number("exp")?;
    if iat > now + LEEWAY {
        return Err("claim `iat` is in the future".into());
    }
    // RFC 7519 §4.1.4: now must be before `exp`; jsonwebtoken still accepts
    // `exp` equal to now.
    if exp <= now {
        return Err("the assertion has expired".into());
    }
    // No leeway here either: an hour at most, and a client with a clock
    // ahead can backdate both claims.
    if exp > now + MAX_ASSERTION_LIFETIME {
        return Err("claim `exp` is more than an hour ahead".into());
    }
    let jti = claims["jti"]
        .as_str()
        .ok_or("claim `jti` is missing or not a string")?;
    let is_v4 = uuid::Uuid::parse_str(jti).is_ok_and(|u| u.get_version_num() == 4);
    if !is_v4 {
        return Err("claim `jti` must be a UUID v4".into());
    }
    Ok(())
}

/// The refusal for what `jsonwebtoken::decode` found wrong. Shape, header
/// and `iss` were checked before, so only the signature and the claims it
/// validates remain.
fn refusal_for(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::InvalidToken => "client_assertion is not a compact JWS".into(),
        ErrorKind::InvalidAlgorithm => "the assertion's alg must be RS256".into(),
        // The header and claims decoded already: this is the signature.
        ErrorKind::Base64(_) => "the assertion's signature is not base64url".into(),
        ErrorKind::InvalidSignature => {
            "the assertion's signature does not verify with the account's key".into()
        }
        // Required, but absent or of the wrong type: jsonwebtoken does not
        // tell those apart.
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
            match claim.as_str() {
                "aud" => "claim `aud` is not this service's IAM audience".into(),
                "exp" => "claim `exp` is missing or not a number".into(),
                other => format!("claim `{other}` is missing or not a string"),
            }
        }
        ErrorKind::ExpiredSignature => "the assertion has expired".into(),
        ErrorKind::InvalidIssuer | ErrorKind::InvalidSubject => {
            "claims `iss` and `sub` must both be the client id".into()
        }
        ErrorKind::InvalidAudience => "claim `aud` is not this service's IAM audience".into(),
        // Not reached after the checks above; a refusal all the same.
        _ => "the assertion does not verify".into(),
    }
}

/// Says which of `alg` and `typ` is wrong in a header that is JSON but not
/// one jsonwebtoken's typed `Header` takes (`"alg":"none"`, no `alg`, a
/// `typ` that is not a string), as the checks after decoding would.
fn untyped_header(assertion: &str) -> String {
    let encoded = assertion.split('.').next().unwrap_or_default();
    let header: Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .unwrap_or_default();
    if header["alg"] != "RS256" {
        "the assertion's alg must be RS256".into()
    } else if header["typ"] != "JWT" {
        "the assertion's typ must be JWT".into()
    } else {
        "the assertion's header has a member of the wrong type".into()
    }
}
