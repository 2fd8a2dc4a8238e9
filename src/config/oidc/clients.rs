//! `LANYARD_OIDC_CLIENTS_FILE`: the relying parties allowed to use the
//! provider (docs/oidc.md). Read as plain JSON values and checked field by
//! field, so that no message quotes a value: a secret in the wrong place
//! must not reach a log through a parser's "invalid type: string …".

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::client_brand::Brands;
use super::redirect;
use super::rules::Rules;
use super::subject::{Sector, SubjectType, check_sector_identifier};
use crate::config::brand::Brand;
use crate::config::shown::is_hidden;
use crate::secret::Secret;
use crate::target::is_loopback_host;

/// Far more relying parties than one provider serves; the file is read at
/// start-up and held whole.
pub const MAX_CLIENTS: usize = 1000;
/// The file, at most.
pub const MAX_CLIENTS_FILE_BYTES: u64 = 1024 * 1024;
/// A redirect URI is in every authorization request and the page's sealed
/// copy of it (the session handle), so it is kept short.
pub const MAX_REDIRECT_URI: usize = 1024;
/// A client id, at most.
pub const MAX_CLIENT_ID: usize = 128;
/// A client secret is compared, not parsed; shorter ones are guessable.
pub const MIN_CLIENT_SECRET: usize = 16;
const MAX_CLIENT_SECRET: usize = 512;
/// `client_name` is shown on the page as who asks.
pub const MAX_CLIENT_NAME: usize = 100;
/// The fields of a client's entry.
const FIELDS: &[&str] = &[
    "client_id",
    "client_secret",
    "redirect_uris",
    "client_name",
    "require_pkce",
    "subject_type",
    "sector_identifier",
    "rules",
    "default_rule",
    "brand",
];
/// Schemes a browser runs or renders in place rather than navigating to.
const UNSAFE_SCHEMES: &[&str] = &["javascript", "data", "vbscript", "file", "blob", "about"];

/// One relying party.
#[derive(Debug)]
pub struct Client {
    pub id: String,
    /// `None`: a public client, which must use PKCE.
    pub secret: Option<Secret>,
    /// In canonical form; see [`Client::allows_redirect`].
    pub redirect_uris: Vec<String>,
    /// Who asks, as the page shows it (RFC 7591 §2).
    pub name: Option<String>,
    /// Whether its authorization requests must carry a PKCE challenge
    /// (RFC 9700 §2.1.1); only a confidential client may opt out, and
    /// must then send a `nonce`.
    pub require_pkce: bool,
    /// Its `sub`, when `LANYARD_OIDC_SUB_CLAIM` names the person: the
    /// claims' values, or pairwise (the default; OpenID Connect Core §8).
    pub subject_type: SubjectType,
    /// What its pairwise `sub` is computed for (OpenID Connect Core §8.1).
    pub sector: Sector,
    /// The verification rules its logins may ask for, by scope.
    pub rules: Rules,
    /// Its logins' page in its own brand, instead of the deployment's.
    pub brand: Option<Arc<Brand>>,
}

impl Client {
    /// Whether an authorization request may name `given` as its redirect
    /// URI: one registered, exactly, or a loopback IP one registered
    /// without a port, on any port (docs/oidc.md, "Redirect URIs"). Every
    /// step of a login asks this, so that none is more lenient.
    pub fn allows_redirect(&self, given: &str) -> bool {
        self.redirect_uris
            .iter()
            .any(|registered| redirect::matches(registered, given))
    }
}

/// The clients, by id.
#[derive(Debug, Default)]
pub struct Clients(BTreeMap<String, Client>);

impl Clients {
    pub fn get(&self, id: &str) -> Option<&Client> {
        self.0.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Client> {
        self.0.values()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Clients made in code (the demo's shop).
    pub fn from_list(clients: Vec<Client>) -> Clients {
        Clients(clients.into_iter().map(|c| (c.id.clone(), c)).collect())
    }

    /// The clients the file's text names, a brand's relative `logo` in
    /// `dir` (the file's folder), or every problem with it, each naming
    /// where it is (`clients[2].redirect_uris[0]`).
    pub fn parse(text: &str, dir: &Path) -> Result<Clients, Vec<String>> {
        let root: Value = serde_json::from_str(text)
            .map_err(|err| vec![format!("is not JSON: {}", syntax_only(&err))])?;
        let list = match root.get("clients") {
            Some(Value::Array(list)) => list,
            _ => {
                return Err(vec![
                    "must be an object with a `clients` array: {\"clients\": [{\"client_id\": …, \"redirect_uris\": […]}]}".into(),
                ]);
            }
        };
        if list.is_empty() {
            return Err(vec![
                "`clients` is empty: name at least one relying party".into(),
            ]);
        }
        if list.len() > MAX_CLIENTS {
            return Err(vec![format!(
                "`clients` has {} entries; at most {MAX_CLIENTS} are allowed",
                list.len()
            )]);
        }
        let mut problems = Vec::new();
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        let mut brands = Brands::in_dir(dir);
        for (at, entry) in list.iter().enumerate() {
            let Some(client) = client(at, entry, &mut brands, &mut problems) else {
                continue;
            };
            if let Some(first) = first_at.get(&client.id) {
                problems.push(format!(
                    "clients[{at}].client_id: the same as clients[{first}]'s; client ids must be unique"
                ));
                continue;
            }
            first_at.insert(client.id.clone(), at);
            clients.insert(client.id.clone(), client);
        }
        match problems.is_empty() {
            true => Ok(Clients(clients)),
            false => Err(problems),
        }
    }
}

/// serde_json's message without what it quotes: its syntax errors name a
/// place, its type errors a value.
fn syntax_only(err: &serde_json::Error) -> String {
    format!(
        "{:?} error at line {}, column {}",
        err.classify(),
        err.line(),
        err.column()
    )
    .to_lowercase()
}

/// The entry at `at`, or `None` with its problems recorded.
fn client(
    at: usize,
    entry: &Value,
    brands: &mut Brands,
    problems: &mut Vec<String>,
) -> Option<Client> {
    let before = problems.len();
    let Value::Object(fields) = entry else {
        problems.push(format!("clients[{at}]: is not an object"));
        return None;
    };
    for name in fields.keys() {
        if !FIELDS.contains(&name.as_str()) {
            problems.push(format!(
                "clients[{at}]: has a field lanyard does not know, `{}` (it reads {})",
                name.chars().take(40).collect::<String>(),
                FIELDS.join(", ")
            ));
        }
    }
    let mut problem =
        |field: &str, why: String| problems.push(format!("clients[{at}].{field}: {why}"));
    let id = client_id(fields, &mut problem);
    let secret = secret(fields, &mut problem);
    let require_pkce = require_pkce(fields, secret.is_some(), &mut problem);
    let redirect_uris = redirect_uris(fields, &mut problem);
    let subject_type = subject_type(fields, &mut problem);
    let sector_identifier = sector_identifier(fields, &mut problem);
    let rules = Rules::parse(fields, &mut problem);
    let name = match fields.get("client_name") {
        None => None,
        Some(Value::String(name))
            if !name.trim().is_empty()
                && name.chars().count() <= MAX_CLIENT_NAME
                && !name.chars().any(is_hidden) =>
        {
            Some(name.trim().to_string())
        }
        Some(_) => {
            problem(
                "client_name",
                format!(
                    "must be a string of 1 to {MAX_CLIENT_NAME} characters, none of them a control, a bidirectional, an invisible or a format character (the page shows it as who asks)"
                ),
            );
            None
        }
    };
    let brand = brands.field(at, (id.as_deref(), name.as_deref()), fields, problems);
    if problems.len() > before {
        return None;
    }
    Some(Client {
        id: id?,
        secret,
        sector: Sector::of(&redirect_uris, sector_identifier.as_deref()),
        redirect_uris,
        name,
        require_pkce,
        subject_type,
        rules,
        brand,
    })
}

/// `client_id`: printable ASCII, no spaces, at most [`MAX_CLIENT_ID`].
fn client_id(
    fields: &Map<String, Value>,
    problem: &mut impl FnMut(&str, String),
) -> Option<String> {
    match fields.get("client_id") {
        Some(Value::String(id)) if is_client_id(id) => Some(id.clone()),
        Some(Value::String(_)) => {
            problem(
                "client_id",
                format!("must be 1 to {MAX_CLIENT_ID} printable ASCII characters, no spaces"),
            );
            None
        }
        Some(_) => {
            problem("client_id", "must be a string".into());
            None
        }
        None => {
            problem("client_id", "is missing".into());
            None
        }
    }
}

/// `subject_type`: pairwise unless the client asks for public.
fn subject_type(
    fields: &Map<String, Value>,
    problem: &mut impl FnMut(&str, String),
) -> SubjectType {
    let given = match fields.get("subject_type") {
        None => return SubjectType::Pairwise,
        Some(given) => given.as_str().and_then(SubjectType::parse),
    };
    given.unwrap_or_else(|| {
        let why = "must be \"pairwise\" (the default) or \"public\"";
        problem("subject_type", why.into());
        SubjectType::Pairwise
    })
}

/// `sector_identifier`: the host its redirect URIs' several sites share.
fn sector_identifier(
    fields: &Map<String, Value>,
    problem: &mut impl FnMut(&str, String),
) -> Option<String> {
    // A value that is not a string is named as what it must be.
    let host = match fields.get("sector_identifier") {
        None => return None,
        Some(value) => value.as_str().unwrap_or_default(),
    };
    match check_sector_identifier(host) {
        Ok(()) => Some(host.to_string()),
        Err(why) => {
            problem("sector_identifier", why);
            None
        }
    }
}

/// `require_pkce`: true unless a confidential client says false.
fn require_pkce(
    fields: &Map<String, Value>,
    confidential: bool,
    problem: &mut impl FnMut(&str, String),
) -> bool {
    match fields.get("require_pkce") {
        None | Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) if confidential => false,
        Some(Value::Bool(false)) => {
            problem(
                "require_pkce",
                "is false for a public client, which must use PKCE (it has no client_secret)"
                    .into(),
            );
            true
        }
        Some(_) => {
            problem("require_pkce", "must be true or false".into());
            true
        }
    }
}

fn secret(fields: &Map<String, Value>, problem: &mut impl FnMut(&str, String)) -> Option<Secret> {
    match fields.get("client_secret") {
        None => None,
        Some(Value::String(secret))
            if (MIN_CLIENT_SECRET..=MAX_CLIENT_SECRET).contains(&secret.len())
                && secret.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
        {
            Some(Secret::new(secret.clone()))
        }
        Some(_) => {
            problem(
                "client_secret",
                format!(
                    "must be a string of {MIN_CLIENT_SECRET} to {MAX_CLIENT_SECRET} printable ASCII characters (make one with `openssl rand -hex 32`), or left out for a public client"
                ),
            );
            None
        }
    }
}

fn redirect_uris(
    fields: &Map<String, Value>,
    problem: &mut impl FnMut(&str, String),
) -> Vec<String> {
    let list = match fields.get("redirect_uris") {
        Some(Value::Array(list)) if !list.is_empty() && list.len() <= 32 => list,
        Some(_) => {
            problem("redirect_uris", "must be an array of 1 to 32 URLs".into());
            return Vec::new();
        }
        None => {
            problem("redirect_uris", "is missing".into());
            return Vec::new();
        }
    };
    let mut uris = Vec::new();
    for (i, uri) in list.iter().enumerate() {
        match uri.as_str().map(check_redirect_uri) {
            Some(Ok(())) => uris.push(uri.as_str().unwrap_or_default().to_string()),
            Some(Err(why)) => problem(&format!("redirect_uris[{i}]"), why),
            None => problem(&format!("redirect_uris[{i}]"), "must be a string".into()),
        }
    }
    uris
}

fn is_client_id(id: &str) -> bool {
    (1..=MAX_CLIENT_ID).contains(&id.len()) && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// An absolute URL with no fragment (RFC 6749 §3.1.2), https or a native
/// app's own scheme (RFC 8252 §7.1), plain http only to a loopback host.
pub fn check_redirect_uri(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_REDIRECT_URI {
        return Err(format!("is longer than {MAX_REDIRECT_URI} bytes"));
    }
    if uri.contains('#') {
        return Err("has a fragment, which a redirect URI must not (RFC 6749 §3.1.2)".into());
    }
    if uri.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err("has a space, a control or a non-ASCII character".into());
    }
    let absolute = "is not an absolute URL (like https://app.example/callback)";
    let (scheme, rest) = uri.split_once(':').ok_or(absolute)?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if !scheme_ok || rest.is_empty() {
        return Err(absolute.into());
    }
    if scheme.bytes().any(|b| b.is_ascii_uppercase()) {
        // An authorization request's URI is compared as a string, and a
        // scheme's canonical form is lower case (RFC 3986 §6.2.2.1).
        return Err("has upper-case letters in its scheme; write it in lower case".into());
    }
    if UNSAFE_SCHEMES.contains(&scheme) {
        return Err(format!(
            "has the scheme `{scheme}:`, which is not a redirect"
        ));
    }
    if scheme != "http" && scheme != "https" {
        // A native app's private-use scheme (RFC 8252 §7.1).
        return match scheme.contains('.') {
            true => Ok(()),
            false => Err(format!(
                "has the scheme `{scheme}:`; use https, or a native app's reverse-domain scheme (com.example.app:)"
            )),
        };
    }
    if let Some(why) = redirect::non_canonical(scheme, rest) {
        return Err(why);
    }
    let parsed: http::Uri = uri.parse().map_err(|_| absolute.to_string())?;
    match parsed.authority().map(|a| a.host()) {
        Some(_) if scheme == "https" => Ok(()),
        Some(host) if is_loopback_host(host) => Ok(()),
        Some(_) => Err("is plain http to a host that is not loopback; use https".into()),
        None => Err("has no host".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Clients, Vec<String>> {
        Clients::parse(text, Path::new("/nonexistent"))
    }

    #[test]
    fn a_clients_file_parses_into_clients_by_id() {
        let clients = parse(
            r#"{"clients": [
                {"client_id": "shop", "client_secret": "0123456789abcdef0123", "redirect_uris": ["https://shop.example/cb"], "client_name": "The Shop"},
                {"client_id": "spa", "redirect_uris": ["http://127.0.0.1:3000/cb", "com.example.app:/cb"]}
            ]}"#,
        )
        .unwrap();
        let shop = clients.get("shop").unwrap();
        assert_eq!(
            shop.secret.as_ref().unwrap().expose(),
            "0123456789abcdef0123"
        );
        assert_eq!(shop.name.as_deref(), Some("The Shop"));
        let spa = clients.get("spa").unwrap();
        assert!(spa.secret.is_none());
        assert_eq!(spa.redirect_uris.len(), 2);
        assert_eq!(clients.len(), 2);
    }

    #[test]
    fn every_problem_is_named_by_where_it_is_and_no_value_is_quoted() {
        let problems = parse(
            r#"{"clients": [
                {"client_id": "a", "client_secret": "short-secret-xyz", "redirect_uris": ["https://a.example/cb#frag"]},
                {"client_id": "a", "client_secret": 1234567, "redirect_uris": ["http://a.example/cb"]},
                {"client_id": "b", "redirect_uri": "https://b.example/cb"},
                {"client_id": "c d", "redirect_uris": ["javascript:alert(1)", "/relative", 5]},
                "x",
                {"client_id": "e", "redirect_uris": ["HTTP://127.0.0.1/cb", "http://u@127.0.0.1/cb", "http://127.0.0.1:0/cb", "http://127.0.0.1:03000/cb"]}
            ]}"#,
        )
        .unwrap_err();
        let text = problems.join("\n");
        for expected in [
            "clients[0].redirect_uris[0]: has a fragment",
            "clients[1].client_secret: must be a string of 16",
            "clients[1].redirect_uris[0]: is plain http",
            "clients[2]: has a field lanyard does not know, `redirect_uri`",
            "clients[2].redirect_uris: is missing",
            "clients[3].client_id: must be 1 to",
            "clients[3].redirect_uris[0]: has the scheme `javascript:`",
            "clients[3].redirect_uris[1]: is not an absolute URL",
            "clients[3].redirect_uris[2]: must be a string",
            "clients[4]: is not an object",
            "clients[5].redirect_uris[0]: has upper-case letters in its scheme",
            "clients[5].redirect_uris[1]: has a user name",
            "clients[5].redirect_uris[2]: has a port that is empty, zero",
            "clients[5].redirect_uris[3]: has a port that is empty, zero",
        ] {
            assert!(text.contains(expected), "{expected} not in\n{text}");
        }
        assert!(!text.contains("1234567"), "a secret quoted:\n{text}");
        for hidden in [
            "\u{202E}",
            "\u{2066}",
            "\u{200E}",
            "\u{061C}",
            "\u{200B}",
            "\u{FEFF}",
            "\u{3164}",
            "\u{115F}",
            "\u{E0041}",
            "\u{1B}",
        ] {
            let file = serde_json::json!({"clients": [{"client_id": "shop", "redirect_uris": ["https://a.example/cb"], "client_name": format!("Shop{hidden}")}]});
            let problems = parse(&file.to_string()).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("clients[0].client_name: must be"),
                "{problems:?}"
            );
            assert!(!problems[0].contains(hidden), "{problems:?}");
        }
        let duplicate = parse(
            r#"{"clients": [{"client_id": "a", "redirect_uris": ["https://a.example/1"]},
                            {"client_id": "a", "redirect_uris": ["https://a.example/2"]}]}"#,
        )
        .unwrap_err();
        assert_eq!(
            duplicate,
            vec!["clients[1].client_id: the same as clients[0]'s; client ids must be unique"]
        );
    }

    #[test]
    fn only_a_confidential_client_may_opt_out_of_pkce() {
        let clients = parse(
            r#"{"clients": [
                {"client_id": "a", "client_secret": "0123456789abcdef", "redirect_uris": ["https://a.example/cb"], "require_pkce": false},
                {"client_id": "b", "redirect_uris": ["https://b.example/cb"]}
            ]}"#,
        )
        .unwrap();
        assert!(!clients.get("a").unwrap().require_pkce);
        assert!(clients.get("b").unwrap().require_pkce, "the default");
        let problems = parse(
            r#"{"clients": [
                {"client_id": "a", "redirect_uris": ["https://a.example/cb"], "require_pkce": false},
                {"client_id": "b", "redirect_uris": ["https://b.example/cb"], "require_pkce": "no"}
            ]}"#,
        )
        .unwrap_err();
        assert_eq!(
            problems,
            vec![
                "clients[0].require_pkce: is false for a public client, which must use PKCE (it has no client_secret)",
                "clients[1].require_pkce: must be true or false",
            ]
        );
    }

    #[test]
    fn a_client_may_name_its_subject_type_and_its_sector() {
        let clients = parse(
            r#"{"clients": [
                {"client_id": "a", "redirect_uris": ["https://a.example/cb", "https://b.example/cb"], "sector_identifier": "a.example"},
                {"client_id": "b", "redirect_uris": ["https://b.example/cb"], "subject_type": "public"},
                {"client_id": "c", "redirect_uris": ["https://c.example/cb"], "subject_type": "pairwise"}
            ]}"#,
        )
        .unwrap();
        let a = clients.get("a").unwrap();
        assert_eq!(a.subject_type, SubjectType::Pairwise, "the default");
        assert_eq!(a.sector, Sector::Host("a.example".into()));
        assert_eq!(clients.get("b").unwrap().subject_type, SubjectType::Public);
        let c = clients.get("c").unwrap();
        assert_eq!(c.sector, Sector::Host("c.example".into()));
        let problems = parse(
            r#"{"clients": [
                {"client_id": "a", "redirect_uris": ["https://a.example/cb"], "subject_type": "Public"},
                {"client_id": "b", "redirect_uris": ["https://b.example/cb"], "sector_identifier": "https://b.example/sector.json"},
                {"client_id": "c", "redirect_uris": ["https://c.example/cb"], "sector_identifier": 5, "subject_type": true}
            ]}"#,
        )
        .unwrap_err();
        assert_eq!(
            problems,
            vec![
                "clients[0].subject_type: must be \"pairwise\" (the default) or \"public\"",
                "clients[1].sector_identifier: must be a host name in lower case, like `shop.example`: the host the client's sites share, not a URL",
                "clients[2].subject_type: must be \"pairwise\" (the default) or \"public\"",
                "clients[2].sector_identifier: must be a host name in lower case, like `shop.example`: the host the client's sites share, not a URL",
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_a_clients_list_says_what_it_should_be() {
        for (text, why) in [
            ("{", "is not JSON: eof error at line 1, column 1"),
            (
                r#"{"clients": "secret-value"}"#,
                "must be an object with a `clients` array",
            ),
            (r#"{"clients": []}"#, "is empty"),
        ] {
            let problems = parse(text).unwrap_err();
            assert!(problems[0].contains(why), "{text}: {problems:?}");
            assert!(!problems[0].contains("secret-value"));
        }
    }
}
