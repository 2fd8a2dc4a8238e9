//! What `lanyard verifier` reads beyond `run`'s settings: the rule path's
//! segments, the wallet, where it listens, its session key and its rates,
//! each reported by name when missing or unusable.

use std::net::SocketAddr;
use std::time::Duration;

use super::settings::{
    ORG_ID, PORT, PROJECT_ID, RULE_ID, VERIFIER_CLIENT_STARTS, VERIFIER_FORWARDED_HOPS,
    VERIFIER_LISTEN, VERIFIER_SERVICE_CALLS, VERIFIER_SESSION_KEY, VERIFIER_SESSION_KEY_FILE,
    VERIFIER_SESSION_TTL, VERIFIER_STARTS, WALLET_BASE_URL,
};
use super::sources::{Layers, Sourced, io_reason};
use super::values::{Rate, SessionKeys, WalletBaseUrl};
use crate::files::read_small;

/// How fast the verifier starts sessions and calls the service, per
/// replica (docs/verifier.md "Limits of the verifier").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifierRates {
    pub client_starts: Rate,
    pub starts: Rate,
    pub service_calls: Rate,
}

impl Default for VerifierRates {
    fn default() -> Self {
        VerifierRates {
            client_starts: VERIFIER_CLIENT_STARTS.default_value(),
            starts: VERIFIER_STARTS.default_value(),
            service_calls: VERIFIER_SERVICE_CALLS.default_value(),
        }
    }
}

/// The verifier's settings as read, for the loader to place in `Config`.
pub(super) struct VerifierSettings {
    pub project_id: Option<String>,
    pub rule_id: Option<String>,
    pub wallet_base_url: Option<WalletBaseUrl>,
    pub port: Option<u16>,
    pub verifier_listen_given: Option<SocketAddr>,
    pub verifier_session_ttl: Duration,
    pub verifier_forwarded_hops: usize,
    pub verifier_session_key: Option<SessionKeys>,
    pub verifier_rates: VerifierRates,
}

impl VerifierSettings {
    /// Reads the verifier's settings; with `required`, the rule path's
    /// segments and the wallet must be given and usable (`org_id` is read
    /// with the credentials).
    pub(super) fn read(
        l: &mut Layers<'_>,
        org_id: Option<&Sourced<String>>,
        required: bool,
    ) -> VerifierSettings {
        let project_id = l.optional(&PROJECT_ID);
        let rule_id = l.optional(&RULE_ID);
        let wallet_base_url = l.optional(&WALLET_BASE_URL).map(|s| s.value);
        if required {
            check_rule_path(
                l,
                org_id,
                project_id.as_ref(),
                rule_id.as_ref(),
                wallet_base_url.is_some(),
            );
        }
        VerifierSettings {
            project_id: project_id.map(|s| s.value),
            rule_id: rule_id.map(|s| s.value),
            wallet_base_url,
            port: l.optional(&PORT).map(|s| s.value),
            verifier_listen_given: l.optional(&VERIFIER_LISTEN).map(|s| s.value),
            verifier_session_ttl: l.value(&VERIFIER_SESSION_TTL),
            verifier_forwarded_hops: l.value(&VERIFIER_FORWARDED_HOPS),
            verifier_session_key: session_key(l),
            verifier_rates: VerifierRates {
                client_starts: l.value(&VERIFIER_CLIENT_STARTS),
                starts: l.value(&VERIFIER_STARTS),
                service_calls: l.value(&VERIFIER_SERVICE_CALLS),
            },
        }
    }
}

/// A path segment of the rule path (docs/service.md §4.3), as lanyard
/// sends it: no character that would need escaping, so the segment is the
/// value, and not `.` or `..`, which an upstream would resolve into
/// another path.
pub fn is_path_segment(value: &str) -> bool {
    path_segment_problem(value).is_none()
}

/// Why `value` is not a path segment as it stands, if it is not.
pub fn path_segment_problem(value: &str) -> Option<&'static str> {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    match value {
        _ if !plain => Some("has characters that cannot appear in a URL path segment"),
        "." | ".." => Some("is a dot-segment, which an upstream resolves into another path"),
        _ => None,
    }
}

/// The rule path's segments and the wallet, which the verifier cannot run
/// without.
fn check_rule_path(
    l: &mut Layers,
    org_id: Option<&Sourced<String>>,
    project_id: Option<&Sourced<String>>,
    rule_id: Option<&Sourced<String>>,
    wallet_given: bool,
) {
    let required = [
        (
            PROJECT_ID.env,
            project_id.is_some(),
            "the verification project's id",
        ),
        (
            RULE_ID.env,
            rule_id.is_some(),
            "the UUID of the published rule",
        ),
        (
            WALLET_BASE_URL.env,
            wallet_given,
            "the wallet's base URL, for the wallet button",
        ),
    ];
    for (env, given, what) in required {
        if !given {
            l.errors.push(format!(
                "{env}: is required for `lanyard verifier` ({what})"
            ));
        }
    }
    for (setting, value) in [(&ORG_ID, org_id), (&PROJECT_ID, project_id)] {
        if let Some(value) = value
            && let Some(why) = path_segment_problem(&value.value)
        {
            l.problem(setting.env, &value.source, why);
        }
    }
    if let Some(rule) = rule_id
        && let Some(why) = unusable_rule_id(&rule.value)
    {
        l.problem(RULE_ID.env, &rule.source, why);
    }
}

/// Why a `RULE_ID` is not a published rule's UUID, if it is not.
pub(crate) fn unusable_rule_id(rule: &str) -> Option<&'static str> {
    if rule.starts_with("ver_") {
        Some(
            "is the rule's `ver_` identifier; use its Rule ID, the UUID the Generate ID action made (docs/service.md §2.5)",
        )
    } else if rule.len() != 36 || uuid::Uuid::try_parse(rule).is_err() {
        Some(
            "is not a UUID (like 0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10): the Rule ID of a published rule (docs/service.md §2.5)",
        )
    } else {
        None
    }
}

/// Longer than any key file: two keys of a few hundred bytes at most.
const MAX_SESSION_KEY_FILE_BYTES: u64 = 4096;

/// The verifier's session key, given or read from its file (one or the
/// other); never quoted in a problem.
fn session_key(l: &mut Layers<'_>) -> Option<SessionKeys> {
    let given = l.optional(&VERIFIER_SESSION_KEY);
    let Some(file) = l.optional(&VERIFIER_SESSION_KEY_FILE) else {
        return given.map(|keys| keys.value);
    };
    if given.is_some() {
        let why = format!("{} is set too; set one of them", VERIFIER_SESSION_KEY.env);
        l.problem(VERIFIER_SESSION_KEY_FILE.env, &file.source, &why);
        return None;
    }
    let read =
        read_small(&file.value, MAX_SESSION_KEY_FILE_BYTES, "a key file").and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| std::io::ErrorKind::InvalidData.into())
        });
    let why = match read {
        Err(err) => format!(
            "{} cannot be read: {}",
            file.value.display(),
            io_reason(&err)
        ),
        Ok(text) => match SessionKeys::parse(text.trim()) {
            Ok(keys) => return Some(keys),
            Err(why) => format!("{}: {why}", file.value.display()),
        },
    };
    l.problem(VERIFIER_SESSION_KEY_FILE.env, &file.source, &why);
    None
}
