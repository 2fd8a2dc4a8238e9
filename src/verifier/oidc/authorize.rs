//! The authorization request (OpenID Connect Core §3.1.2.1, RFC 6749
//! §4.1.1, RFC 7636 §4.3), checked, and how it is refused: on lanyard's
//! own page while the client or its redirect URI is not known to be
//! genuine (RFC 6749 §4.1.2.1, so that lanyard never redirects a browser
//! where an attacker asks), to the client's redirect URI afterwards.

use std::collections::BTreeSet;

use crate::config::oidc::rules::InvalidScope;
use crate::config::oidc::{Client, Clients};

use super::sealed::Authorization;

/// Longer than any client's `state` or `nonce` (libraries make 32 to 64
/// characters); both are sealed into the session handle and the code.
pub const MAX_STATE: usize = 512;
/// How long the page may wait for its button to be pressed.
pub const AUTHORIZATION_LIFETIME: u64 = 30 * 60;

/// Why an authorization request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Shown on lanyard's error page, never sent to a redirect URI: the
    /// id of the message that names what is wrong, in the page's
    /// language, without quoting the request (docs/translations.md).
    Page(&'static str),
    /// Sent to the client's redirect URI (RFC 6749 §4.1.2.1).
    Redirect(ErrorRedirect),
}

/// An error sent back to the client.
#[derive(Debug, PartialEq, Eq)]
pub struct ErrorRedirect {
    pub redirect_uri: String,
    pub error: &'static str,
    pub description: &'static str,
    pub state: Option<String>,
}

impl Refused {
    /// The `reason` label of `lanyard_oidc_refusals_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Page(_) => "untrusted_redirect",
            Refused::Redirect(redirect) => redirect.error,
        }
    }
}

/// More parameters than any authorization or token request has; a
/// request with more is refused before they are compared.
pub const MAX_PARAMETERS: usize = 64;

/// The parameters of a request, each name once; `Err` names one given
/// more than once (RFC 6749 §3.1), or says there are too many.
pub fn parameters(query: &[u8]) -> Result<Vec<(String, String)>, String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (name, value) in form_urlencoded::parse(query) {
        if seen.len() == MAX_PARAMETERS {
            return Err("(too many parameters)".into());
        }
        if !names.insert(name.clone()) {
            return Err(name.into_owned());
        }
        seen.push((name.into_owned(), value.into_owned()));
    }
    Ok(seen)
}

fn get<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// The request, checked against the registered clients, whose rule
/// scopes are `rule_scopes`; `now` in Unix seconds.
pub fn check(
    query: &[u8],
    clients: &Clients,
    rule_scopes: &BTreeSet<String>,
    now: u64,
) -> Result<Authorization, Refused> {
    let params = parameters(query);
    if let Err(name) = &params
        && (name == "client_id" || name == "redirect_uri")
    {
        return Err(Refused::Page("refused-repeated"));
    }
    let (client, redirect_uri) = genuine(query, clients)?;
    // Another parameter given twice is the client's mistake, sent back.
    let Ok(params) = params else {
        return Err(Refused::Redirect(ErrorRedirect {
            redirect_uri,
            error: "invalid_request",
            description: "a parameter is given more than once",
            state: None,
        }));
    };
    let redirect = |error: &'static str, description: &'static str| {
        let state = get(&params, "state")
            .filter(|s| s.len() <= MAX_STATE)
            .map(str::to_string);
        Refused::Redirect(ErrorRedirect {
            redirect_uri: redirect_uri.to_string(),
            error,
            description,
            state,
        })
    };
    check_parameters(&params, client).map_err(|(error, why)| redirect(error, why))?;
    let scope = get(&params, "scope").unwrap_or_default();
    let rule = client
        .rules
        .pick(scope, rule_scopes)
        .map_err(|InvalidScope(why)| redirect("invalid_scope", why))?;
    let authorization = Authorization {
        client_id: client.id.clone(),
        redirect_uri: redirect_uri.to_string(),
        state: get(&params, "state").map(str::to_string),
        nonce: get(&params, "nonce").map(str::to_string),
        code_challenge: get(&params, "code_challenge").map(str::to_string),
        expires_at: now + AUTHORIZATION_LIFETIME,
        rule: rule.cloned(),
    };
    // Refused now rather than at the button: the session's handle must
    // carry it.
    if authorization.to_handle_text().is_none() {
        return Err(redirect("invalid_request", "the request is too long"));
    }
    Ok(authorization)
}

/// The client and its redirect URI, when both are registered
/// ([`Client::allows_redirect`]).
fn genuine<'a>(query: &'a [u8], clients: &'a Clients) -> Result<(&'a Client, String), Refused> {
    let mut client_id = None;
    let mut redirect_uri = None;
    for (name, value) in form_urlencoded::parse(query) {
        match &*name {
            "client_id" => client_id = Some(value),
            "redirect_uri" => redirect_uri = Some(value),
            _ => {}
        }
    }
    let client_id = client_id.ok_or(Refused::Page("refused-client-missing"))?;
    let client = clients
        .get(&client_id)
        .ok_or(Refused::Page("refused-client-unknown"))?;
    let redirect_uri = redirect_uri.ok_or(Refused::Page("refused-redirect-missing"))?;
    if !client.allows_redirect(&redirect_uri) {
        return Err(Refused::Page("refused-redirect-unregistered"));
    }
    Ok((client, redirect_uri.into_owned()))
}

/// Everything but the client and the redirect URI, as an RFC 6749 error
/// code and a description.
fn check_parameters(
    params: &[(String, String)],
    client: &Client,
) -> Result<(), (&'static str, &'static str)> {
    match get(params, "response_type") {
        Some("code") => {}
        None => return Err(("invalid_request", "response_type is missing")),
        Some(_) => {
            return Err((
                "unsupported_response_type",
                "only the authorization code flow (response_type=code) is served",
            ));
        }
    }
    if get(params, "response_mode").is_some_and(|mode| mode != "query") {
        return Err(("invalid_request", "only response_mode=query is served"));
    }
    if !get(params, "scope").is_some_and(|scope| scope.split(' ').any(|s| s == "openid")) {
        return Err(("invalid_scope", "scope must include openid"));
    }
    if get(params, "request").is_some() {
        return Err(("request_not_supported", "request objects are not supported"));
    }
    if get(params, "request_uri").is_some() {
        return Err(("request_uri_not_supported", "request_uri is not supported"));
    }
    if get(params, "prompt").is_some_and(|prompt| prompt.split(' ').any(|p| p == "none")) {
        // Every login is a presentation from a wallet, which a person
        // makes: there is never one without the page.
        return Err((
            "login_required",
            "a presentation from a wallet always needs the person",
        ));
    }
    for name in ["state", "nonce"] {
        // RFC 6749's VSCHAR: what a redirect and the sealed handle carry
        // as they are.
        if get(params, name)
            .is_some_and(|v| v.len() > MAX_STATE || !v.bytes().all(|b| (0x20..0x7f).contains(&b)))
        {
            return Err((
                "invalid_request",
                "state or nonce is too long or not printable ASCII",
            ));
        }
    }
    pkce(params, client)
}

/// PKCE (RFC 7636 §4.3) with S256, required of every client (RFC 9700
/// §2.1.1) but one whose clients-file entry says `"require_pkce": false`,
/// whose requests then carry a `nonce` (OpenID Connect Core §3.1.2.1),
/// which stops a code's injection as PKCE would.
fn pkce(params: &[(String, String)], client: &Client) -> Result<(), (&'static str, &'static str)> {
    match (
        get(params, "code_challenge"),
        get(params, "code_challenge_method"),
    ) {
        (None, None) if !client.require_pkce && get(params, "nonce").is_some() => Ok(()),
        (None, None) if !client.require_pkce => {
            Err(("invalid_request", "a client without PKCE must send a nonce"))
        }
        (None, _) => Err((
            "invalid_request",
            "a PKCE code_challenge (S256) is required",
        )),
        (Some(challenge), Some("S256")) if is_s256_challenge(challenge) => Ok(()),
        (Some(_), Some("S256")) => {
            Err(("invalid_request", "code_challenge is not an S256 challenge"))
        }
        (Some(_), _) => Err(("invalid_request", "code_challenge_method must be S256")),
    }
}

/// A SHA-256 digest in base64url without padding: 43 characters.
fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `redirect_uri` with `params` added to its query (RFC 6749 §4.1.2:
/// keeping the query it has).
pub fn redirect_to(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in params {
        query.append_pair(name, value);
    }
    let separator = match redirect_uri.contains('?') {
        true => '&',
        false => '?',
    };
    format!("{redirect_uri}{separator}{}", query.finish())
}

#[cfg(test)]
mod tests;
