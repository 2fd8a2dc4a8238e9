//! The token endpoint's answer: any status, headers and body give a token
//! or a clear error, never a quoted token.

use super::*;
use lanyard::token::exchange::MAX_RETRY_AFTER;

/// The fixed "now" of every interpretation.
pub(super) fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A `Retry-After` header, and what it said.
#[derive(Debug, Clone)]
enum RetryAfter {
    Absent,
    Seconds(u64, &'static str),
    /// An HTTP-date this many seconds from now.
    Date(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl RetryAfter {
    fn header(&self) -> Option<HeaderValue> {
        match self {
            RetryAfter::Absent => None,
            RetryAfter::Seconds(n, pad) => HeaderValue::from_str(&format!("{pad}{n}{pad}")).ok(),
            RetryAfter::Date(offset) => {
                let at = if *offset >= 0 {
                    now() + Duration::from_secs(offset.unsigned_abs())
                } else {
                    now() - Duration::from_secs(offset.unsigned_abs())
                };
                HeaderValue::from_str(&httpdate::fmt_http_date(at)).ok()
            }
            RetryAfter::Text(text) => HeaderValue::from_str(text).ok(),
            RetryAfter::Bytes(bytes) => HeaderValue::from_bytes(bytes).ok(),
        }
    }

    /// The delay the header asked for, read per RFC 9110 §10.2.3:
    /// delay-seconds or an HTTP-date; `None` when it asked for nothing.
    /// The wait the header asks for, as lanyard keeps it: at most
    /// `MAX_RETRY_AFTER`, a number of seconds too long for a u64 included.
    fn said(&self) -> Option<Duration> {
        let asked = match self {
            RetryAfter::Absent => None,
            RetryAfter::Seconds(n, _) => Some(Duration::from_secs(*n)),
            RetryAfter::Date(offset) => Some(Duration::from_secs((*offset).max(0) as u64)),
            RetryAfter::Text(_) | RetryAfter::Bytes(_) => (|| {
                let header = self.header()?;
                let text = header.to_str().ok()?.trim();
                if let Ok(seconds) = text.parse::<u64>() {
                    return Some(Duration::from_secs(seconds));
                }
                if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                    return Some(MAX_RETRY_AFTER);
                }
                let at = httpdate::parse_http_date(text).ok()?;
                Some(at.duration_since(now()).unwrap_or(Duration::ZERO))
            })(),
        };
        asked.map(|wait| wait.min(MAX_RETRY_AFTER))
    }
}

fn retry_after() -> impl Strategy<Value = RetryAfter> {
    const TEN_YEARS: i64 = 10 * 365 * 24 * 3600;
    prop_oneof![
        Just(RetryAfter::Absent),
        (any::<u64>(), select(&["", " ", "\t"][..])).prop_map(|(n, p)| RetryAfter::Seconds(n, p)),
        (0..100_000u64).prop_map(|n| RetryAfter::Seconds(n, "")),
        (-TEN_YEARS..TEN_YEARS).prop_map(RetryAfter::Date),
        prop_oneof![
            text(40),
            "[-+ ]?[0-9]{0,25}(\\.[0-9]{0,3})?[ a-z]{0,3}",
            concat!(
                "(Mon|Sun|Sunday|Xyz), [0-9]{1,2}[ -](Jan|Feb|Foo)[ -][0-9]{2,5} ",
                "[0-9]{2}:[0-9]{2}:[0-9]{2} (GMT|UTC|)",
            ),
            Just("Sun Nov  6 08:49:37 1994".to_string()),
            Just("Sunday, 06-Nov-94 08:49:37 GMT".to_string()),
            Just("Fri, 31 Dec 9999 23:59:59 GMT".to_string()),
        ]
        .prop_map(RetryAfter::Text),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(RetryAfter::Bytes),
    ]
}

/// The error kind `interpret` must give for a refused answer of `status`.
fn kind_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=299 => "malformed",
        429 => "rate_limited",
        400..=499 => "rejected",
        500..=599 => "server_error",
        _ => "unexpected_status",
    }
}

fn check_answer(status: StatusCode, retry: &RetryAfter, body: &[u8]) -> Result<(), TestCaseError> {
    let mut headers = HeaderMap::new();
    if let Some(value) = retry.header() {
        headers.insert(header::RETRY_AFTER, value);
    }
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let token_in_body = parsed
        .as_ref()
        .and_then(|v| v.get("access_token")?.as_str())
        .map(str::to_string);
    match exchange::interpret(status, &headers, body, now()) {
        Ok(issued) => {
            prop_assert!(status.is_success(), "a token from HTTP {status}");
            let token = issued.access_token.expose();
            prop_assert!(!token.is_empty());
            prop_assert!(token.bytes().all(|b| b.is_ascii_graphic()), "{token:?}");
            let authorization = format!("Bearer {token}");
            prop_assert!(HeaderValue::from_str(&authorization).is_ok());
            prop_assert_eq!(Some(token), token_in_body.as_deref());
            let token_type = parsed.as_ref().and_then(|v| v.get("token_type")?.as_str());
            prop_assert!(
                token_type.is_some_and(|t| t.eq_ignore_ascii_case("bearer")),
                "accepted token_type {token_type:?}"
            );
            prop_assert!(issued.lifetime > Duration::ZERO);
            prop_assert!(issued.lifetime <= MAX_TOKEN_LIFETIME);
        }
        Err(err) => {
            let shown = err.to_string();
            prop_assert!(!shown.trim().is_empty(), "empty error");
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            prop_assert_eq!(err.kind(), kind_for(status), "{}", shown);
            if let Some(token) = token_in_body.filter(|t| t.chars().count() >= LEAK_RUN) {
                assert_quotes_none(&shown, &runs(&token))?;
            }
            if let Some(delay) = err.retry_after() {
                let said = retry.said();
                prop_assert!(
                    said.is_some_and(|said| delay <= said),
                    "retry after {delay:?}, the header said {said:?}"
                );
            }
        }
    }
    Ok(())
}

/// What a near-valid token response does with one of its fields.
#[derive(Debug, Clone)]
enum FieldEdit {
    Keep,
    Remove,
    Set(Value),
    /// A literal spliced into the JSON text, for numbers `Value` cannot hold.
    Raw(&'static str),
    /// The value of `access_token`, as a confused endpoint might send it.
    CopyToken,
}

const RAW_NUMBERS: &[&str] = &[
    "99999999999999999999",
    "18446744073709551616",
    "-9223372036854775809",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "1.0",
    "1E2",
    "0.0000",
    "86400.0",
    "86401",
    "1.7976931348623157e308",
];

/// b64token (RFC 6750 §2.1) of a realistic length.
const TOKEN: &str = "[A-Za-z0-9._~+/-]{20,64}=?";

fn field_edit(values: BoxedStrategy<Value>) -> impl Strategy<Value = FieldEdit> {
    prop_oneof![
        12 => Just(FieldEdit::Keep),
        1 => Just(FieldEdit::Remove),
        3 => values.prop_map(FieldEdit::Set),
        1 => json_value().prop_map(FieldEdit::Set),
        1 => select(RAW_NUMBERS).prop_map(FieldEdit::Raw),
        1 => Just(FieldEdit::CopyToken),
    ]
}

#[derive(Debug, Clone)]
struct TokenResponse {
    token: String,
    access_token: FieldEdit,
    token_type: FieldEdit,
    expires_in: FieldEdit,
    extra: Vec<(String, Value)>,
    padding: &'static str,
}

impl TokenResponse {
    fn body(&self) -> Vec<u8> {
        const RAW: &str = "\u{1}raw\u{1}";
        let mut object = serde_json::Map::new();
        for (key, value) in &self.extra {
            object.insert(key.clone(), value.clone());
        }
        let fields = [
            ("access_token", &self.access_token, json!(self.token)),
            ("token_type", &self.token_type, json!("Bearer")),
            ("expires_in", &self.expires_in, json!(3600)),
        ];
        let mut raws = Vec::new();
        for (name, edit, valid) in fields {
            let value = match edit {
                FieldEdit::Keep => valid,
                FieldEdit::Remove => continue,
                FieldEdit::Set(value) => value.clone(),
                FieldEdit::Raw(raw) => {
                    raws.push(*raw);
                    Value::String(format!("{RAW}{}", raws.len() - 1))
                }
                FieldEdit::CopyToken => json!(self.token),
            };
            object.insert(name.into(), value);
        }
        // A copy is of what `access_token` ended up holding.
        if let Some(token) = object.get("access_token").cloned() {
            for (name, edit) in [
                ("token_type", &self.token_type),
                ("expires_in", &self.expires_in),
            ] {
                if matches!(edit, FieldEdit::CopyToken) {
                    object.insert(name.into(), token.clone());
                }
            }
        }
        let mut text = Value::Object(object).to_string();
        for (i, raw) in raws.iter().enumerate() {
            text = text.replace(&format!("\"\\u0001raw\\u0001{i}\""), raw);
        }
        format!("{}{text}{}", self.padding, self.padding).into_bytes()
    }
}

fn token_response() -> impl Strategy<Value = TokenResponse> {
    let token_types = prop_oneof![
        select(
            &[
                "Bearer", "bearer", "BEARER", "bEaReR", " Bearer", "Bearer ", "mac", "DPoP", ""
            ][..]
        )
        .prop_map(Value::from),
        text(40).prop_map(Value::String),
    ]
    .boxed();
    let lifetimes = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (-10i64..100_000).prop_map(Value::from),
        (-10i64..100_000).prop_map(|n| Value::String(n.to_string())),
        "[-+ ]?[0-9]{0,22}(\\.[0-9]{0,2})?(e[0-9])? ?".prop_map(Value::String),
        text(20).prop_map(Value::String),
    ]
    .boxed();
    let tokens = prop_oneof![
        TOKEN.prop_map(Value::String),
        text(40).prop_map(Value::String),
    ]
    .boxed();
    (
        TOKEN,
        field_edit(tokens),
        field_edit(token_types),
        field_edit(lifetimes),
        prop::collection::vec(("[a-z_]{1,16}", json_value()), 0..3),
        select(&["", " ", "\n", "\u{feff}"][..]),
    )
        .prop_map(
            |(token, access_token, token_type, expires_in, extra, padding)| TokenResponse {
                token,
                access_token,
                token_type,
                expires_in,
                extra,
                padding,
            },
        )
}

fn any_status() -> impl Strategy<Value = StatusCode> {
    prop_oneof![
        (100u16..=999),
        select(&[200u16, 201, 204, 400, 401, 403, 429, 500, 502, 503][..]),
    ]
    .prop_map(|code| StatusCode::from_u16(code).expect("100..=999 is a status"))
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn token_answer_of_any_status_and_body_gives_a_token_or_a_clear_error(
        status in any_status(),
        retry in retry_after(),
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            json_value().prop_map(|v| v.to_string().into_bytes()),
        ],
    ) {
        check_answer(status, &retry, &body)?;
    }

    #[test]
    fn near_valid_token_response_is_accepted_only_when_sound_and_never_quoted(
        status in prop_oneof![3 => Just(StatusCode::OK), 1 => any_status()],
        response in token_response(),
        truncate in prop::option::weighted(0.1, any::<Index>()),
    ) {
        let mut body = response.body();
        if let Some(at) = truncate {
            body.truncate(at.index(body.len() + 1));
        }
        check_answer(status, &RetryAfter::Absent, &body)?;
    }

    #[test]
    fn retry_after_never_exceeds_what_the_header_said(
        status in select(&[429u16, 500, 502, 503, 504, 599][..]),
        retry in retry_after(),
    ) {
        let status = StatusCode::from_u16(status).expect("a status");
        check_answer(status, &retry, b"")?;
        if let RetryAfter::Seconds(..) | RetryAfter::Date(_) = retry {
            // A well-formed header is honoured exactly (up to the cap), not
            // just bounded.
            let value = retry.header().expect("well-formed");
            let headers = HeaderMap::from_iter([(header::RETRY_AFTER, value)]);
            let err = exchange::interpret(status, &headers, b"", now()).expect_err("error status");
            prop_assert_eq!(err.retry_after(), retry.said());
        }
    }
}

#[test]
fn token_type_carrying_the_token_is_refused_without_quoting_it() {
    // Found by the property above: the first 32 characters of `token_type`
    // were quoted, and a confused endpoint may put the token there.
    let token = "AaAA+0A-a~aA-a+a+aaa";
    let body = json!({"access_token": token, "token_type": token, "expires_in": 3600});
    let err = exchange::interpret(
        StatusCode::OK,
        &HeaderMap::new(),
        body.to_string().as_bytes(),
        now(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token response is malformed: `token_type` is not Bearer"
    );
}
