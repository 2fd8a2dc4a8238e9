//! Everything the verifier assumes where docs/service.md is silent, in one
//! place (docs/verifier.md "Assumptions"). docs/service.md gives the rule path
//! (docs/service.md §4.3), that a session is identified by
//! `transaction_id` and polled for a `status` and the claims (§2.6, §4.2),
//! and that the reference application turns `WALLET_BASE_URL` into a
//! wallet button (§8). It shows no methods, payloads or status values
//! (§3.2, §4.3), nor how the wallet link is formed. A service that differs
//! is adapted here alone.
//!
//! 1. **Start**: `POST {rule path}` with the body `{}`; a 2xx answer is a
//!    JSON object with the strings `transaction_id` and `request_uri`
//!    (what the QR code encodes), as the mock answers (docs/mock-service.md).
//! 2. **Poll**: `GET {rule path}/sessions/{transaction_id}`; a 2xx answer is
//!    a JSON object with the string `status` and, once verified, the object
//!    `claims`.
//! 3. **Statuses**: see [`progress_of`]: `verified` ends with the claims;
//!    `declined`, `rejected`, `denied`, `cancelled` and `canceled` end
//!    declined; `expired` ends expired; `failed` and `error` end failed;
//!    anything else is still pending.
//! 4. **The wallet link**: `WALLET_BASE_URL` followed by the query of
//!    `request_uri`. An OpenID4VP request (`openid4vp://?client_id=…&
//!    request_uri=…`) carries its parameters in its query, and wallets'
//!    https links take the same parameters; a `request_uri` with no query
//!    is passed whole, as `?request_uri=…`.
//! 5. **Transaction ids** are 1 to 128 characters from `A-Z a-z 0-9 - . _
//!    ~` (UUIDs on the mock), so each is a path segment and a query value
//!    as it is.
//! 6. **Every poll is answered**: the service answers a session's status,
//!    and its claims once verified, on every poll for the session's
//!    lifetime, whoever asks. No replica holds a session (`binding`,
//!    `polls`), so this is what any replica's answer rests on; a service
//!    that gave the claims only once would lose them whenever the next poll
//!    went to another replica, or the one that got them restarted.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::config::WalletBaseUrl;

/// The claims of a presented credential, as the JSON text the service
/// sent: personal data. Passed on as it came, never re-encoded, so a
/// number beyond 64 bits reaches the page digit for digit (a parsed tree
/// would round it through `f64`). Held until the session's lifetime ends,
/// shared by every answer that carries it, and never logged:
/// its `Debug` shows only its size (docs/verifier.md).
///
/// Held as the whole answer `/api/status` gives for the session, made
/// once: every poll's answer is then a reference to these bytes, not a
/// copy. A client that keeps a hundred streams of it unread behind a zero
/// window holds one copy, not a hundred (docs/proxy.md "Limits").
#[derive(Clone, PartialEq, Eq)]
pub struct Claims(Bytes);

/// What the verified answer holds before and after the claims.
const VERIFIED_HEAD: &str = r#"{"status":"verified","claims":"#;
const VERIFIED_TAIL: &str = "}";

impl Claims {
    /// Claims from their JSON object's text.
    pub fn from_json(text: &str) -> Claims {
        let answer = [VERIFIED_HEAD, text, VERIFIED_TAIL].concat();
        Claims(Bytes::from(answer))
    }

    /// The verified answer: `{"status":"verified","claims":{...}}`.
    pub fn answer(&self) -> Bytes {
        self.0.clone()
    }

    /// The JSON object, as the page receives it.
    #[cfg(test)]
    pub fn json(&self) -> &str {
        self.object_text()
    }

    /// The claims' JSON object, as the service gave it.
    pub fn object_text(&self) -> &str {
        let claims = &self.0[VERIFIED_HEAD.len()..self.0.len() - VERIFIED_TAIL.len()];
        // Made from a `&str` with ASCII around it.
        std::str::from_utf8(claims).unwrap_or("{}")
    }

    /// Its size in bytes, which the memory bounds count.
    pub fn size(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Claims([{} bytes, redacted])", self.size())
    }
}

/// Longest transaction id taken from the service (assumption 5).
pub const MAX_TRANSACTION_ID: usize = 128;
/// Longest `request_uri` taken: a QR code at error correction level M
/// holds 2,331 bytes at most, and a phone's camera reads far less well
/// before that.
pub const MAX_REQUEST_URI: usize = 2048;
/// Claims beyond this cannot be used: a credential's claims are a few
/// hundred bytes, an mDL with its portrait tens of KiB. A session that
/// presents more ends `failed` (docs/verifier.md "Limits of the verifier").
pub const MAX_CLAIMS_BYTES: usize = 256 * 1024;

/// The body of a session start (assumption 1).
pub fn start_body() -> Bytes {
    Bytes::from_static(b"{}")
}

/// Where a session is polled, under the rule path (assumption 2).
pub fn session_path(rule_path: &str, transaction_id: &str) -> String {
    format!("{rule_path}/sessions/{transaction_id}")
}

/// A started session, as the service answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub transaction_id: String,
    pub request_uri: String,
}

/// Where a session stands, as the service answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Pending,
    Ended(Ending),
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Verified(Claims),
    Declined,
    Expired,
    Failed,
    /// An answer the verifier can never use ([`Unusable`]): failed, with a
    /// reason for the page; `presented` when it was `verified` and only
    /// the claims were wrong.
    Unusable {
        presented: bool,
    },
}

impl Ending {
    /// The `outcome` label of `lanyard_verifier_sessions_total`, and the
    /// page's status.
    pub fn outcome(&self) -> &'static str {
        match self {
            Ending::Verified(_) => "verified",
            Ending::Declined => "declined",
            Ending::Expired => "expired",
            Ending::Failed | Ending::Unusable { .. } => "failed",
        }
    }
}

/// Why an answer of the service is unusable. The reason names a field,
/// never a value: a value may be a claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub &'static str);

/// Why a poll's 2xx answer gives no usable progress: one that may change
/// on the next poll is not, so only these two.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// Not in the assumed shape at all.
    #[error("{0}")]
    Malformed(Malformed),
    /// `verified`, with claims the verifier can never use: asking again
    /// gives the same, so the session ends `failed`.
    #[error("is `verified` with claims that {0}")]
    Claims(&'static str),
}

/// Reads a session start's answer (assumption 1).
pub fn parse_started(body: &[u8]) -> Result<Started, Malformed> {
    let object = json_object(body)?;
    let field = |name: &'static str, missing: &'static str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(Malformed(missing))
    };
    let transaction_id = field("transaction_id", "has no string `transaction_id`")?;
    let request_uri = field("request_uri", "has no string `request_uri`")?;
    if !is_transaction_id(&transaction_id) {
        return Err(Malformed(
            "has a `transaction_id` that is not 1 to 128 of A-Z a-z 0-9 - . _ ~",
        ));
    }
    if !is_request_uri(&request_uri) {
        return Err(Malformed(
            "has a `request_uri` that is not an absolute URI of at most 2048 bytes",
        ));
    }
    Ok(Started {
        transaction_id,
        request_uri,
    })
}

/// A poll's answer, each field as the text it came as.
#[derive(serde::Deserialize)]
struct PollAnswer<'a> {
    #[serde(borrow)]
    status: Option<&'a RawValue>,
    #[serde(borrow)]
    claims: Option<&'a RawValue>,
}

/// Reads a poll's answer (assumptions 2 and 3), keeping the claims' text
/// as the service sent it.
pub fn parse_progress(body: &[u8]) -> Result<Progress, Unusable> {
    let malformed = |why| Unusable::Malformed(Malformed(why));
    let raw: &RawValue = serde_json::from_slice(body).map_err(|_| malformed("is not JSON"))?;
    if !raw.get().starts_with('{') {
        return Err(malformed("is JSON but not an object"));
    }
    let answer: PollAnswer<'_> =
        serde_json::from_str(raw.get()).map_err(|_| malformed("repeats a field"))?;
    let status = answer
        .status
        .and_then(|status| serde_json::from_str::<String>(status.get()).ok())
        .ok_or(malformed("has no string `status`"))?;
    match progress_of(&status) {
        Progress::Ended(Ending::Verified(_)) => {
            let claims = answer.claims.ok_or(Unusable::Claims("are missing"))?.get();
            if !claims.starts_with('{') {
                return Err(Unusable::Claims("are not a JSON object"));
            }
            if claims.len() > MAX_CLAIMS_BYTES {
                return Err(Unusable::Claims("are over 256 KiB"));
            }
            Ok(Progress::Ended(Ending::Verified(Claims::from_json(claims))))
        }
        progress => Ok(progress),
    }
}

/// What a service's status means for the session (assumption 3). The
/// claims of a verified session are read by [`parse_progress`].
pub fn progress_of(status: &str) -> Progress {
    match status.to_ascii_lowercase().as_str() {
        "verified" => Progress::Ended(Ending::Verified(Claims::from_json("{}"))),
        "declined" | "rejected" | "denied" | "cancelled" | "canceled" => {
            Progress::Ended(Ending::Declined)
        }
        "expired" => Progress::Ended(Ending::Expired),
        "failed" | "error" => Progress::Ended(Ending::Failed),
        _ => Progress::Pending,
    }
}

/// The wallet button's target (assumption 4).
pub fn wallet_url(base: &WalletBaseUrl, request_uri: &str) -> String {
    let base = base.as_str();
    let query = match request_uri.split_once('?') {
        Some((_, query)) if !query.is_empty() => query.to_string(),
        _ => form_urlencoded::Serializer::new(String::new())
            .append_pair("request_uri", request_uri)
            .finish(),
    };
    let joiner = match base.contains('?') {
        true if base.ends_with('?') || base.ends_with('&') => "",
        true => "&",
        false => "?",
    };
    format!("{base}{joiner}{query}")
}

/// A transaction id lanyard puts in a path and takes from a query
/// (assumption 5).
pub fn is_transaction_id(id: &str) -> bool {
    (1..=MAX_TRANSACTION_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// An absolute URI fit for a QR code: a scheme, no space or control
/// character, at most [`MAX_REQUEST_URI`] bytes.
fn is_request_uri(uri: &str) -> bool {
    let scheme_ok = uri.split_once(':').is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    scheme_ok
        && uri.len() <= MAX_REQUEST_URI
        && !uri.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn json_object(body: &[u8]) -> Result<Map<String, Value>, Malformed> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(Malformed("is JSON but not an object")),
        Err(_) => Err(Malformed("is not JSON")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wallet(base: &str) -> WalletBaseUrl {
        WalletBaseUrl::parse(base).unwrap()
    }

    #[test]
    fn a_wallet_link_takes_the_openid4vp_request_s_query() {
        let request = "openid4vp://?client_id=rp&request_uri=https%3A%2F%2Fsvc%2Fr%2F1";
        assert_eq!(
            wallet_url(&wallet("https://wallet.example/authorize"), request),
            "https://wallet.example/authorize?client_id=rp&request_uri=https%3A%2F%2Fsvc%2Fr%2F1"
        );
        assert_eq!(
            wallet_url(&wallet("https://wallet.example/a?lang=de"), request),
            "https://wallet.example/a?lang=de&client_id=rp&request_uri=https%3A%2F%2Fsvc%2Fr%2F1"
        );
        assert_eq!(
            wallet_url(&wallet("https://wallet.example/a?"), request),
            "https://wallet.example/a?client_id=rp&request_uri=https%3A%2F%2Fsvc%2Fr%2F1"
        );
    }

    #[test]
    fn a_request_uri_without_a_query_is_passed_whole() {
        assert_eq!(
            wallet_url(&wallet("haip://"), "https://svc.example/r/1"),
            "haip://?request_uri=https%3A%2F%2Fsvc.example%2Fr%2F1"
        );
    }

    #[test]
    fn a_start_answer_needs_both_fields_in_shape() {
        let good = br#"{"transaction_id":"6f1c-0e2a","request_uri":"openid4vp://?a=b","x":1}"#;
        assert_eq!(
            parse_started(good).unwrap(),
            Started {
                transaction_id: "6f1c-0e2a".into(),
                request_uri: "openid4vp://?a=b".into()
            }
        );
        for (body, why) in [
            (&b"nope"[..], "is not JSON"),
            (b"[1]", "is JSON but not an object"),
            (
                b"{\"request_uri\":\"a:b\"}",
                "has no string `transaction_id`",
            ),
            (b"{\"transaction_id\":\"t\"}", "has no string `request_uri`"),
            (
                b"{\"transaction_id\":\"../x\",\"request_uri\":\"a:b\"}",
                "has a `transaction_id` that is not 1 to 128 of A-Z a-z 0-9 - . _ ~",
            ),
            (
                b"{\"transaction_id\":\"t\",\"request_uri\":\"no scheme\"}",
                "has a `request_uri` that is not an absolute URI of at most 2048 bytes",
            ),
        ] {
            assert_eq!(parse_started(body).unwrap_err(), Malformed(why));
        }
    }

    #[test]
    fn statuses_map_as_the_module_lists_them() {
        assert_eq!(progress_of("pending"), Progress::Pending);
        assert_eq!(progress_of("in_progress"), Progress::Pending);
        assert_eq!(progress_of("DECLINED"), Progress::Ended(Ending::Declined));
        assert_eq!(progress_of("rejected"), Progress::Ended(Ending::Declined));
        assert_eq!(progress_of("expired"), Progress::Ended(Ending::Expired));
        assert_eq!(progress_of("error"), Progress::Ended(Ending::Failed));
        let verified = br#"{"status":"verified","claims":{"given_name":"Erika"}}"#;
        let Progress::Ended(Ending::Verified(claims)) = parse_progress(verified).unwrap() else {
            panic!("not verified");
        };
        assert_eq!(claims.json(), r#"{"given_name":"Erika"}"#);
        assert!(
            !format!("{claims:?}").contains("Erika"),
            "Debug shows no claim"
        );
        assert_eq!(
            parse_progress(br#"{"status":"verified"}"#).unwrap_err(),
            Unusable::Claims("are missing")
        );
    }

    #[test]
    fn claims_pass_as_the_service_wrote_them() {
        let body = br#"{"status":"verified","claims": {"n": 123456789012345678901234567890, "f": 1.10, "s":"\u00e9"} }"#;
        let Progress::Ended(Ending::Verified(claims)) = parse_progress(body).unwrap() else {
            panic!("not verified");
        };
        assert_eq!(
            claims.json(),
            r#"{"n": 123456789012345678901234567890, "f": 1.10, "s":"\u00e9"}"#
        );
    }

    #[test]
    fn answers_that_can_never_be_used_are_told_from_malformed_ones() {
        let big = format!(
            r#"{{"status":"verified","claims":{{"a":"{}"}}}}"#,
            "x".repeat(MAX_CLAIMS_BYTES)
        );
        for (body, expected) in [
            (
                br#"{"status":"verified","claims":[1]}"#.to_vec(),
                Unusable::Claims("are not a JSON object"),
            ),
            (
                br#"{"status":"verified","claims":"a"}"#.to_vec(),
                Unusable::Claims("are not a JSON object"),
            ),
            (big.into_bytes(), Unusable::Claims("are over 256 KiB")),
            (
                b"<html>".to_vec(),
                Unusable::Malformed(Malformed("is not JSON")),
            ),
            (
                b"[1]".to_vec(),
                Unusable::Malformed(Malformed("is JSON but not an object")),
            ),
            (
                br#"{"status":1}"#.to_vec(),
                Unusable::Malformed(Malformed("has no string `status`")),
            ),
            (
                br#"{"status":"a","status":"b"}"#.to_vec(),
                Unusable::Malformed(Malformed("repeats a field")),
            ),
        ] {
            let err = parse_progress(&body).unwrap_err();
            assert_eq!(err, expected);
            assert!(!err.to_string().contains("xxx"), "{err}");
        }
        assert_eq!(
            parse_progress(br#"{"status":"pending","claims":[1]}"#).unwrap(),
            Progress::Pending
        );
    }
}
