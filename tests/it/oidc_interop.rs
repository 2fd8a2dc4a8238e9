//! `lanyard verifier` as an OpenID Connect provider, against relying
//! parties nobody here wrote, the whole flow through a real browser:
//! panva's `openid-client` (OpenID Certified) in node, with a confidential
//! client (`client_secret_basic`) and a public one (PKCE alone), and
//! Debian's Apache with `mod_auth_openidc` (OpenID Certified too)
//! protecting a page. Each test starts the lanyard binary as `DEMO_MOCK=true
//! lanyard verifier`, so the embedded mock is the service and its wallet,
//! and a person in headless Chromium presses "Verify with my wallet" and
//! "Present" (or "Decline") in the mock wallet. The browser's part is in
//! `tests/oidc/*.mjs`, which report what happened as JSON lines; the
//! assertions are here.
//!
//! Needs Node.js 20+ and npm (`npm ci` runs in `tests/oidc` on first use,
//! tests/it/support/node.rs), Debian's chromium, apache2 and
//! libapache2-mod-auth-openidc; scripts/test installs them.

use crate::support;
use crate::support::oidc_scripts::{Provider, Script, path_str};

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long Apache may take to say it serves.
const APACHE_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Debian's Apache; /usr/sbin is not on every user's PATH.
const APACHE: &str = "/usr/sbin/apache2";
const APACHE_MODULES: &str = "/usr/lib/apache2/modules";
/// The confidential clients' secret (both relying parties send it with
/// HTTP Basic authentication).
const SECRET: &str = "interop-secret-5e1f0c2a9b7d4e36";
/// What the mock's wallet presents (src/mock/verification.rs).
const GIVEN_NAME: &str = "Erika";
const FAMILY_NAME: &str = "Mustermann";
const BIRTHDATE: &str = "1984-01-26";

/// How a relying party authenticates at the token endpoint.
#[derive(Clone, Copy)]
enum ClientAuth {
    SecretBasic,
    SecretPost,
    /// A public client: PKCE alone.
    None,
}

impl ClientAuth {
    /// The method's name, as the discovery document lists it.
    fn method(self) -> &'static str {
        match self {
            ClientAuth::SecretBasic => "client_secret_basic",
            ClientAuth::SecretPost => "client_secret_post",
            ClientAuth::None => "none",
        }
    }

    fn secret(self) -> Option<&'static str> {
        match self {
            ClientAuth::SecretBasic | ClientAuth::SecretPost => Some(SECRET),
            ClientAuth::None => None,
        }
    }
}

/// One sign-in by `tests/oidc/relying-party.mjs` as `client_id`,
/// authenticating with `auth`, at an issuer whose path is `path`, the
/// person pressing `action` in the wallet: returns the script's final
/// report and the issuer.
async fn openid_client(
    client_id: &str,
    auth: ClientAuth,
    path: &str,
    action: &str,
) -> (Value, String) {
    let mut vars = vec![
        ("OIDC_CLIENT_ID", client_id),
        ("OIDC_CLIENT_AUTH", auth.method()),
        ("OIDC_WALLET_ACTION", action),
    ];
    if let Some(secret) = auth.secret() {
        vars.push(("OIDC_CLIENT_SECRET", secret));
    }
    let mut rp = Script::start("relying-party.mjs", &vars);
    let listening = rp.next("listening", String::new).await;
    let redirect_uri = listening["redirect_uri"].as_str().unwrap();
    let mut client = json!({
        "client_id": client_id,
        "redirect_uris": [redirect_uri],
        "client_name": "Interop Shop",
    });
    if let Some(secret) = auth.secret() {
        client["client_secret"] = secret.into();
    }
    let mut provider = Provider::start(path, json!({ "clients": [client] })).await;
    rp.tell(&provider.issuer).await;

    let authorizing = rp.next("authorizing", || provider.logs()).await;
    let metadata = &authorizing["metadata"];
    assert_eq!(metadata["issuer"], provider.issuer, "{authorizing:#}");
    assert!(
        authorizing["url"]
            .as_str()
            .is_some_and(|url| url.starts_with(&format!("{}/authorize?", provider.issuer))),
        "{authorizing:#}"
    );
    assert!(
        metadata["token_endpoint_auth_methods_supported"]
            .as_array()
            .is_some_and(|methods| methods.iter().any(|m| m == auth.method())),
        "{authorizing:#}"
    );
    let (expected, wallet_said) = match action {
        "present" => ("signed_in", "Presented"),
        _ => ("refused", "Declined"),
    };
    let outcome = rp.next(expected, || provider.logs()).await;
    rp.finish().await;
    // What the person saw: the page named the relying party, and the
    // wallet did what they pressed.
    assert!(
        outcome["page_text"]
            .as_str()
            .is_some_and(|text| text.contains("Interop Shop")),
        "the authorization page does not name the client: {outcome:#}"
    );
    assert!(
        outcome["wallet_said"]
            .as_str()
            .is_some_and(|said| said.starts_with(wallet_said)),
        "{outcome:#}"
    );
    (outcome, provider.issuer)
}

/// Whether an ID token is meant for `client_id`: `aud` is it, or a list
/// holding it.
fn audience_is(id_token: &Value, client_id: &str) -> bool {
    match &id_token["aud"] {
        Value::String(aud) => aud == client_id,
        Value::Array(auds) => auds.iter().any(|aud| aud == client_id),
        _ => false,
    }
}

/// Checks a sign-in's report: the authorization response, the tokens,
/// the ID token's claims and userinfo's, as openid-client accepted them.
fn assert_signed_in(outcome: &Value, issuer: &str, client_id: &str) {
    let callback = &outcome["callback"];
    assert!(
        callback["code"].as_str().is_some_and(|c| !c.is_empty()),
        "{outcome:#}"
    );
    assert_eq!(callback["state"], outcome["expected_state"], "{outcome:#}");
    assert_eq!(callback["iss"], issuer, "{outcome:#}");
    assert!(
        outcome["token_type"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case("bearer")),
        "{outcome:#}"
    );
    assert!(
        outcome["expires_in"].as_u64().is_some_and(|s| s > 0),
        "{outcome:#}"
    );

    let header = &outcome["id_token_header"];
    assert_eq!(header["alg"], "RS256", "{outcome:#}");
    assert!(
        header["kid"].as_str().is_some_and(|k| !k.is_empty()),
        "{outcome:#}"
    );

    let id_token = &outcome["id_token"];
    assert_eq!(id_token["iss"], issuer, "{outcome:#}");
    assert!(audience_is(id_token, client_id), "{outcome:#}");
    assert_eq!(id_token["nonce"], outcome["expected_nonce"], "{outcome:#}");
    assert!(id_token["auth_time"].is_u64(), "{outcome:#}");
    assert_eq!(id_token["given_name"], GIVEN_NAME, "{outcome:#}");
    assert_eq!(id_token["family_name"], FAMILY_NAME, "{outcome:#}");
    assert_eq!(id_token["birthdate"], BIRTHDATE, "{outcome:#}");
    let sub = id_token["sub"].as_str().unwrap_or_default();
    assert!(!sub.is_empty(), "{outcome:#}");

    let userinfo = &outcome["userinfo"];
    assert_eq!(userinfo["sub"], sub, "{outcome:#}");
    assert_eq!(userinfo["given_name"], GIVEN_NAME, "{outcome:#}");
    assert_eq!(userinfo["birthdate"], BIRTHDATE, "{outcome:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openid_client_signs_in_with_client_secret_basic() {
    let (outcome, issuer) = openid_client("shop", ClientAuth::SecretBasic, "", "present").await;
    assert_signed_in(&outcome, &issuer, "shop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openid_client_signs_in_with_client_secret_post() {
    let (outcome, issuer) = openid_client("shop", ClientAuth::SecretPost, "", "present").await;
    assert_signed_in(&outcome, &issuer, "shop");
}

/// A public client, at an issuer with a path: discovery, the page and
/// its API, the token endpoint and userinfo all under `/wallet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openid_client_signs_in_as_a_public_client_with_pkce_alone_under_an_issuer_path() {
    let (outcome, issuer) = openid_client("shop-spa", ClientAuth::None, "/wallet", "present").await;
    assert!(issuer.ends_with("/wallet"), "{issuer}");
    assert_signed_in(&outcome, &issuer, "shop-spa");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openid_client_gets_access_denied_with_state_and_iss_when_the_wallet_declines() {
    let (outcome, issuer) = openid_client("shop", ClientAuth::SecretBasic, "", "decline").await;
    // openid-client threw the provider's error only after checking state
    // and iss; the callback carried no code.
    assert_eq!(outcome["error"], "access_denied", "{outcome:#}");
    let callback = &outcome["callback"];
    assert_eq!(callback["error"], "access_denied", "{outcome:#}");
    assert_eq!(callback["state"], outcome["expected_state"], "{outcome:#}");
    assert_eq!(callback["iss"], issuer, "{outcome:#}");
    assert!(callback.get("code").is_none(), "{outcome:#}");
}

/// Debian's Apache in the foreground (`-X`: one process, so killing it
/// leaves nothing behind) with its config, logs and pages in a temporary
/// directory; killed when dropped.
struct Apache {
    child: Child,
    /// `http://127.0.0.1:PORT/protected/`.
    protected: String,
    errors: UnboundedReceiver<String>,
    log: Vec<String>,
    _dir: tempfile::TempDir,
}

/// The protected page: the claims mod_auth_openidc passes to what it
/// protects, as environment variables, shown by server-side includes.
const PROTECTED_PAGE: &str = r#"<!doctype html>
<link rel="icon" href="data:,">
<title>Protected</title>
<pre id="claims">
remote_user=<!--#echo var="REMOTE_USER" -->
sub=<!--#echo var="OIDC_CLAIM_sub" -->
given_name=<!--#echo var="OIDC_CLAIM_given_name" -->
family_name=<!--#echo var="OIDC_CLAIM_family_name" -->
birthdate=<!--#echo var="OIDC_CLAIM_birthdate" -->
id_token=<!--#echo encoding="none" var="OIDC_id_token_payload" -->
userinfo=<!--#echo encoding="none" var="OIDC_userinfo_json" -->
</pre>
"#;

impl Apache {
    /// Starts Apache on `port`, protecting `/protected/` with lanyard at
    /// `issuer` as its provider, as the client `client_id` with [`SECRET`],
    /// sending authorization requests by `method` (GET or POST).
    async fn start(port: u16, issuer: &str, client_id: &str, method: &str) -> Apache {
        assert!(
            Path::new(APACHE).is_file()
                && Path::new(APACHE_MODULES)
                    .join("mod_auth_openidc.so")
                    .is_file(),
            "{APACHE} or mod_auth_openidc is missing: install Debian's apache2 and \
             libapache2-mod-auth-openidc, or run scripts/test, which does"
        );
        let dir = tempfile::tempdir().unwrap();
        // Apache started as root serves as www-data, who must read the pages.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let htdocs = dir.path().join("htdocs");
        std::fs::create_dir_all(htdocs.join("protected")).unwrap();
        support::write(&htdocs.join("protected"), "index.html", PROTECTED_PAGE);
        let conf = support::write(
            dir.path(),
            "httpd.conf",
            &httpd_conf(dir.path(), port, issuer, client_id, method),
        );
        let mut child = Command::new(APACHE)
            .arg("-X")
            .arg("-d")
            .arg(dir.path())
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {APACHE}: {err}"));
        let errors = support::forward_lines(child.stderr.take().unwrap());
        let mut apache = Apache {
            child,
            protected: format!("http://127.0.0.1:{port}/protected/"),
            errors,
            log: Vec::new(),
            _dir: dir,
        };
        // mpm_event's debug line once its listener thread runs; the port
        // was bound before it.
        let deadline = tokio::time::Instant::now() + APACHE_START_TIMEOUT;
        loop {
            let line = tokio::time::timeout_at(deadline, apache.errors.recv())
                .await
                .unwrap_or_else(|_| panic!("Apache did not start:\n{}", apache.log.join("\n")));
            let Some(line) = line else {
                let status = apache.child.wait().await;
                panic!("Apache exited ({status:?}):\n{}", apache.log.join("\n"));
            };
            apache.log.push(line.clone());
            if line.contains("AH02471") {
                return apache;
            }
        }
    }

    /// Its error log so far, for a failure's message.
    fn logs(&mut self) -> String {
        while let Ok(line) = self.errors.try_recv() {
            self.log.push(line);
        }
        format!("Apache's log:\n{}", self.log.join("\n"))
    }
}

/// Apache's whole configuration: nothing from /etc/apache2, every file in
/// `dir`, the modules it needs and mod_auth_openidc as Debian 12 ships it
/// (2.4.12) protecting `/protected/`, sending authorization requests by
/// `method`: a redirect (GET), or a form the browser posts (POST).
fn httpd_conf(dir: &Path, port: u16, issuer: &str, client_id: &str, method: &str) -> String {
    let dir = path_str(dir);
    let modules = [
        ("mpm_event_module", "mod_mpm_event.so"),
        ("authn_core_module", "mod_authn_core.so"),
        ("authz_core_module", "mod_authz_core.so"),
        ("authz_user_module", "mod_authz_user.so"),
        ("dir_module", "mod_dir.so"),
        ("include_module", "mod_include.so"),
        ("auth_openidc_module", "mod_auth_openidc.so"),
    ]
    .map(|(name, file)| format!("LoadModule {name} {APACHE_MODULES}/{file}\n"))
    .concat();
    format!(
        r#"ServerRoot "{dir}"
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile "{dir}/httpd.pid"
DefaultRuntimeDir "{dir}"
ErrorLog /dev/stderr
# mpm_event says when it serves; mod_auth_openidc says why it refuses.
LogLevel warn mpm_event:debug auth_openidc:info
User www-data
Group www-data
{modules}
DocumentRoot "{dir}/htdocs"
DirectoryIndex index.html

OIDCProviderMetadataURL {issuer}/.well-known/openid-configuration
OIDCClientID {client_id}
OIDCClientSecret {SECRET}
OIDCRedirectURI http://127.0.0.1:{port}/protected/redirect_uri
OIDCCryptoPassphrase interop-passphrase-0a1b2c3d4e5f6a7b
OIDCPKCEMethod S256
OIDCProviderAuthRequestMethod {method}
OIDCScope "openid"
# The ID token's payload and userinfo's answer as they came, beside the
# claims one by one.
OIDCPassIDTokenAs claims payload
OIDCPassUserInfoAs claims json

<Location /protected>
    AuthType openid-connect
    Require valid-user
</Location>
<Directory "{dir}/htdocs/protected">
    <Files "index.html">
        Options +Includes
        ForceType text/html
        SetOutputFilter INCLUDES
    </Files>
</Directory>
"#
    )
}

/// What lanyard and Apache logged, for a failure's message.
fn both(provider: &mut Provider, apache: &mut Apache) -> String {
    format!("{}\n\n{}", provider.logs(), apache.logs())
}

/// The `name=value` lines of the protected page.
fn page_lines(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect()
}

/// A person's visit to Apache's protected page, pressing `action` in the
/// wallet: what the browser reported of Apache's authorization request
/// and of its return to Apache, with the servers for their logs.
struct ApacheVisit {
    authorizing: Value,
    returned: Value,
    redirect_uri: String,
    provider: Provider,
    apache: Apache,
}

impl ApacheVisit {
    /// The visit, Apache sending its authorization request by `method`.
    async fn run(method: &str, action: &str) -> ApacheVisit {
        // Apache's redirect URI must be registered before lanyard starts,
        // and lanyard's issuer must be in Apache's config: Apache's port is
        // chosen first, then lanyard started, then Apache.
        let apache_port = support::closed_port().port();
        let redirect_uri = format!("http://127.0.0.1:{apache_port}/protected/redirect_uri");
        let mut provider = Provider::start(
            "",
            json!({ "clients": [{
                "client_id": "apache",
                "client_secret": SECRET,
                "redirect_uris": [redirect_uri],
                "client_name": "Apache",
            }]}),
        )
        .await;
        let mut apache = Apache::start(apache_port, &provider.issuer, "apache", method).await;

        let mut browser = Script::start(
            "apache.mjs",
            &[
                ("APACHE_PROTECTED_URL", &apache.protected),
                ("APACHE_REDIRECT_URI", &redirect_uri),
                ("OIDC_ISSUER", &provider.issuer),
                ("OIDC_WALLET_ACTION", action),
            ],
        );
        let authorizing = browser
            .next("authorizing", || both(&mut provider, &mut apache))
            .await;
        assert_eq!(authorizing["method"], method, "{authorizing:#}");
        let request = &authorizing["parameters"];
        assert_eq!(request["response_type"], "code", "{authorizing:#}");
        assert_eq!(request["client_id"], "apache", "{authorizing:#}");
        assert_eq!(request["redirect_uri"], redirect_uri, "{authorizing:#}");
        assert_eq!(request["code_challenge_method"], "S256", "{authorizing:#}");
        assert!(request["code_challenge"].is_string(), "{authorizing:#}");
        assert!(request["state"].is_string(), "{authorizing:#}");
        assert!(request["nonce"].is_string(), "{authorizing:#}");

        let returned = browser
            .next("returned", || both(&mut provider, &mut apache))
            .await;
        browser.finish().await;
        ApacheVisit {
            authorizing,
            returned,
            redirect_uri,
            provider,
            apache,
        }
    }

    /// The query lanyard sent the browser back to Apache with.
    fn response(&self) -> BTreeMap<String, String> {
        let url = self.returned["redirect_uri"]["url"].as_str().unwrap();
        let (_, query) = url.split_once('?').expect("a query");
        form_urlencoded::parse(query.as_bytes())
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect()
    }

    /// The reports and both logs, for a failure's message: the flow is
    /// over, so they hold all they will of it.
    fn context(&mut self) -> String {
        format!(
            "{:#}\n{:#}\n\n{}",
            self.authorizing,
            self.returned,
            both(&mut self.provider, &mut self.apache)
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_mod_auth_openidc_shows_the_wallet_s_claims_on_its_protected_page() {
    assert_apache_signs_in(ApacheVisit::run("GET", "present").await);
}

/// mod_auth_openidc's `OIDCProviderAuthRequestMethod POST`: its page
/// posts the authorization request to lanyard as a form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_mod_auth_openidc_signs_in_with_a_posted_authorization_request() {
    assert_apache_signs_in(ApacheVisit::run("POST", "present").await);
}

/// Checks a visit that ended on the protected page: lanyard's answer to
/// Apache, and the claims Apache passed on.
fn assert_apache_signs_in(mut visit: ApacheVisit) {
    let context = visit.context();
    let issuer = &visit.provider.issuer;
    let response = visit.response();
    assert_eq!(
        response.get("state").map(String::as_str),
        visit.authorizing["parameters"]["state"].as_str(),
        "{context}"
    );
    assert_eq!(response.get("iss"), Some(issuer), "{context}");
    assert!(response.contains_key("code"), "{context}");
    assert_eq!(
        visit.returned["ended"]["url"],
        visit.apache.protected.as_str(),
        "{context}"
    );

    let shown = page_lines(visit.returned["claims"].as_str().unwrap_or_default());
    assert_eq!(shown["given_name"], GIVEN_NAME, "{context}");
    assert_eq!(shown["family_name"], FAMILY_NAME, "{context}");
    assert_eq!(shown["birthdate"], BIRTHDATE, "{context}");
    let sub = &shown["sub"];
    assert!(!sub.is_empty() && sub != "(none)", "{context}");
    // mod_auth_openidc's default user name: the subject at the issuer.
    assert_eq!(shown["remote_user"], format!("{sub}@{issuer}"), "{context}");
    let id_token: Value = serde_json::from_str(&shown["id_token"])
        .unwrap_or_else(|err| panic!("the ID token's payload is not JSON ({err}): {context}"));
    assert_eq!(id_token["iss"], issuer.as_str(), "{context}");
    assert!(audience_is(&id_token, "apache"), "{context}");
    assert_eq!(
        id_token["nonce"], visit.authorizing["parameters"]["nonce"],
        "{context}"
    );
    let userinfo: Value = serde_json::from_str(&shown["userinfo"])
        .unwrap_or_else(|err| panic!("userinfo's answer is not JSON ({err}): {context}"));
    assert_eq!(userinfo["sub"], sub.as_str(), "{context}");
    assert_eq!(userinfo["given_name"], GIVEN_NAME, "{context}");
}

/// A decline reaches Apache's redirect URI as `access_denied` with the
/// state Apache sent and lanyard's `iss` (RFC 9207), and Apache lets no
/// one in. What it shows meanwhile is its own affair: mod_auth_openidc
/// (2.4.12, and its dispatch is unchanged since) takes any request to its
/// redirect URI that has an `iss` and no `code` for an answer from its
/// own discovery page, so it says "SSO to this module without specifying
/// a target_link_uri parameter is not possible" rather than the
/// provider's error. Leaving `iss` out of error responses would break
/// RFC 9207, and openid-client, which requires it once discovery says
/// it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_mod_auth_openidc_lets_no_one_in_when_the_wallet_declines() {
    let mut visit = ApacheVisit::run("GET", "decline").await;
    let context = visit.context();
    let issuer = visit.provider.issuer.clone();
    let response = visit.response();
    assert_eq!(
        response.get("error").map(String::as_str),
        Some("access_denied"),
        "{context}"
    );
    assert_eq!(
        response.get("state").map(String::as_str),
        visit.authorizing["parameters"]["state"].as_str(),
        "{context}"
    );
    assert_eq!(response.get("iss"), Some(&issuer), "{context}");
    assert!(!response.contains_key("code"), "{context}");
    let ended = &visit.returned["ended"];
    assert!(
        ended["url"]
            .as_str()
            .is_some_and(|url| url.starts_with(&format!("{}?", visit.redirect_uri))),
        "{context}"
    );
    assert!(visit.returned["claims"].is_null(), "{context}");
    assert!(
        visit.returned["again"]
            .as_str()
            .is_some_and(|url| url.starts_with(&format!("{issuer}/authorize?"))),
        "no session, so the protected page sends the browser to lanyard again: {context}"
    );
}
