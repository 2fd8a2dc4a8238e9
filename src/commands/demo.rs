//! `lanyard demo` (and `DEMO_MOCK=true lanyard run`): the embedded mock of
//! the service with the proxy and the verifier wired to it; no account,
//! key or settings needed (README "The two commands").
//! `DEMO_MOCK=true lanyard verifier` serves the verifier alone.

use std::io::Write as _;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::access::ServiceAccess;
use crate::config::VerifierConfig;
use crate::config::oidc::rules::{Rule, Rules};
use crate::config::{DemoConfig, RulePath};
use crate::failure::Failure;
use crate::otel::Telemetry;
use crate::process::{
    Components, Process, ProxyListener, Signals, bind_admin, bind_proxy, bind_verifier, failed,
    stop_on_signals,
};
use crate::verifier::Serving;

/// The demo account's identity on the embedded mock.
pub const DEMO_CLIENT_ID: &str = "demo-client";
pub const DEMO_ORGANIZATION: &str = "org-demo";
/// The project the demo account is a member of, and one it is not.
pub const DEMO_PROJECT: &str = "proj-demo";
pub const DEMO_OTHER_PROJECT: &str = "proj-other";
/// The mock shop's client id at the demo's OpenID Connect provider.
pub const DEMO_SHOP_CLIENT: &str = "shop";
/// A published rule in the demo project.
pub const DEMO_RULE: &str = "0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10";
/// A second rule in the demo project, asking for age over 18 alone: the
/// demo shop's `age` scope (docs/oidc.md, "Rules per client").
pub const DEMO_AGE_RULE: &str = "3f9a1c2e-7b4d-4e6a-8c5f-9d0e1b2a3c4d";
/// The scope that picks [`DEMO_AGE_RULE`] at the demo's provider.
pub const DEMO_AGE_SCOPE: &str = crate::mock::SHOP_AGE_SCOPE;

/// Where the demo serves: the admin listener, and the proxy, the verifier
/// or both.
pub struct DemoListeners {
    pub admin: TcpListener,
    pub proxy: Option<ProxyListener>,
    pub verifier: Option<TcpListener>,
}

/// The embedded mock and lanyard wired to it.
pub struct Demo {
    pub mock: crate::mock::MockService,
    pub process: Process,
    /// The verifier's URL as a browser on this machine reaches it, and the
    /// demo provider's issuer when it has one.
    verifier: Option<String>,
    issuer: Option<String>,
}

impl Demo {
    /// Starts the mock on a loopback port, makes a key pair and an account
    /// for it, and starts lanyard against the mock.
    /// Its spans are exported by `telemetry`.
    pub async fn start(
        demo: &DemoConfig,
        listeners: DemoListeners,
        telemetry: &Telemetry,
    ) -> Result<Demo, Failure> {
        use crate::config::WalletBaseUrl;
        use crate::config::credentials::{Credentials, parse_private_key};
        use crate::mock::{MockAccount, MockService, generate_rsa_key};
        use crate::target::TargetUrl;

        let mock = MockService::start()
            .await
            .map_err(|e| failed("cannot start the mock service", e))?;
        let key = generate_rsa_key().map_err(|e| failed("demo key", e))?;
        mock.add_account(MockAccount {
            client_id: DEMO_CLIENT_ID.into(),
            organization_id: DEMO_ORGANIZATION.into(),
            public_key_der: key.public_der.clone(),
            roles: vec!["verifications.api".into(), "credentials.api".into()],
            projects: vec![DEMO_PROJECT.into()],
        });
        mock.add_rule(DEMO_PROJECT, DEMO_RULE);
        let mut over_18 = serde_json::Map::new();
        over_18.insert("age_over_18".into(), true.into());
        mock.add_rule_presenting(DEMO_PROJECT, DEMO_AGE_RULE, over_18);

        let service =
            TargetUrl::parse(&mock.api_url(), false).map_err(|e| failed("mock URL", e))?;
        let credentials = Credentials {
            client_id: DEMO_CLIENT_ID.into(),
            organization_id: DEMO_ORGANIZATION.into(),
            iam_audience: mock.audience(),
            token_uri: TargetUrl::parse(&mock.token_url(), true)
                .map_err(|e| failed("mock URL", e))?,
            key: Arc::new(
                parse_private_key(key.private_pem.expose()).map_err(|e| failed("demo key", e))?,
            ),
        };
        // Its session key as given, else derived from the demo account's.
        let mut verifier = Serving::new(
            demo.verifier.clone(),
            service.clone(),
            RulePath::new(None, DEMO_ORGANIZATION, DEMO_PROJECT, DEMO_RULE),
            WalletBaseUrl::parse(&mock.wallet_url()).map_err(|e| failed("mock URL", e))?,
        );
        let verifier_url = listeners
            .verifier
            .as_ref()
            .map(verifier_origin)
            .transpose()?;
        let issuer = with_demo_provider(&mut verifier.config, &mock, verifier_url.as_deref())?;
        let access = ServiceAccess::with_credentials(&demo.access, credentials, demo.tls.clone());
        let connector = access.connector.clone();
        let proxy = match (listeners.proxy, &demo.proxy) {
            (Some(listener), Some(config)) => Some((listener, config.clone(), service)),
            (None, _) => None,
            (Some(_), None) => return Err(failed("the demo's proxy", "it has no configuration")),
        };
        let (process, admin) = (&demo.process, &demo.admin);
        let components = Components {
            proxy,
            verifier: listeners.verifier.map(|listener| (listener, verifier)),
            spans_dropped: telemetry.spans_dropped(),
            ..Components::common(
                &demo.access,
                admin,
                process,
                Some(access),
                connector,
                listeners.admin,
            )
        };
        let process = Process::start(components)?;
        Ok(Demo {
            mock,
            process,
            verifier: verifier_url,
            issuer,
        })
    }

    /// The banner's lines for the verifier at `verifier`, its provider and
    /// the mock's shop.
    fn verifier_lines(&self, verifier: &str) -> String {
        let mut lines = format!(
            "\x20 verifier {verifier}/  (open it in a browser: verify a credential from the mock wallet)\n"
        );
        match &self.issuer {
            Some(issuer) => lines.push_str(&format!(
                "\x20 issuer   {issuer}  (the verifier's OpenID Connect provider; LANYARD_OIDC_ISSUER sets another)\n"
            )),
            None => lines.push_str(
                "\x20 issuer   none: the demo's provider needs a loopback or all-interfaces listen address, or LANYARD_OIDC_ISSUER\n",
            ),
        }
        if self.mock.shop_configured() {
            lines.push_str(&format!(
                "\x20 shop     {shop}  (a site that logs you in with your wallet: the verifier as its OpenID Connect provider)\n",
                shop = self.mock.shop_url(),
            ));
        }
        lines
    }

    /// Where everything listens, and what to try.
    pub fn banner(&self) -> String {
        let mut banner =
            String::from("lanyard demo: lanyard against an embedded mock of the service\n\n");
        if let Some(verifier) = &self.verifier {
            banner.push_str(&self.verifier_lines(verifier));
        }
        if let Some(proxy) = self.process.proxy_addr {
            banner.push_str(&format!(
                "\x20 proxy    http://{proxy}  ->  {api}  (adds Authorization: Bearer <token>)\n",
                api = self.mock.api_url(),
            ));
        }
        if let Some(socket) = &self.process.proxy_socket {
            banner.push_str(&format!(
                "\x20 proxy    unix:{socket}  ->  {api}  (adds Authorization: Bearer <token>)\n",
                socket = socket.display(),
                api = self.mock.api_url(),
            ));
        }
        banner.push_str(&format!(
            "\x20 admin    http://{admin}/healthz  /readyz  /metrics\n\
             \x20 mock     {base}  (token endpoint {token}; wallet {wallet})\n\
             \x20 account  {DEMO_CLIENT_ID}, roles verifications.api and credentials.api, member of {DEMO_PROJECT} only\n",
            admin = self.process.admin_addr,
            base = self.mock.base_url(),
            token = self.mock.token_url(),
            wallet = self.mock.wallet_url(),
        ));
        // The lines are to be pasted as they are: on a Unix socket curl
        // needs the socket, and any origin will do (docs/proxy.md "Listening on
        // a Unix socket").
        let reach = match (self.process.proxy_addr, &self.process.proxy_socket) {
            (Some(proxy), _) => Some(("curl".to_string(), format!("http://{proxy}"))),
            (None, Some(socket)) => Some((
                format!(
                    "curl --unix-socket {}",
                    shell_word(&socket.to_string_lossy())
                ),
                "http://localhost".to_string(),
            )),
            (None, None) => None,
        };
        if let Some((curl, origin)) = reach {
            let rule_path = |project: &str| {
                let path = RulePath::new(None, DEMO_ORGANIZATION, project, DEMO_RULE);
                format!("{origin}{path}")
            };
            banner.push_str(&format!(
                "\n\
                 Try, from another terminal:\n\
                 \n\
                 \x20 # start a verification session through the sidecar\n\
                 \x20 TX=$({curl} -s -X POST {start} | sed -E 's/.*\"transaction_id\":\"([^\"]+)\".*/\\1/'); echo \"$TX\"\n\
                 \x20 # poll it (a simulated wallet presents with: curl -s -X POST {base}/mock/wallet/$TX/present)\n\
                 \x20 {curl} -s -w '\\n' {start}/sessions/$TX\n\
                 \x20 # a project the account is not a member of: 403 saying what is missing\n\
                 \x20 {curl} -s -i -w '\\n' {other}\n",
                base = self.mock.base_url(),
                start = rule_path(DEMO_PROJECT),
                other = rule_path(DEMO_OTHER_PROJECT),
            ));
        }
        banner.push_str("\nStop with Ctrl-C.\n");
        banner
    }
}

/// Gives `verifier` the demo's provider at `origin` unless it has one
/// already (`LANYARD_OIDC_ISSUER`), or `origin` can be no issuer; its
/// issuer, if it has a provider.
fn with_demo_provider(
    verifier: &mut VerifierConfig,
    mock: &crate::mock::MockService,
    origin: Option<&str>,
) -> Result<Option<String>, Failure> {
    if verifier.oidc.is_none()
        && let Some(origin) = origin.filter(|url| is_loopback_origin(url))
    {
        verifier.oidc = Some(demo_provider(mock, origin)?);
    }
    Ok(verifier.oidc.as_ref().map(|oidc| oidc.issuer.to_string()))
}

/// The browser origin of the verifier's `listener`.
fn verifier_origin(listener: &TcpListener) -> Result<String, Failure> {
    let address = listener
        .local_addr()
        .map_err(|e| failed("the verifier's address", e))?;
    Ok(browser_origin(address))
}

/// `http://ADDRESS:PORT` as a browser on this machine reaches a listener
/// bound to `address`: one bound to every interface (`0.0.0.0`, `[::]`, a
/// container's default) is reached as `localhost`, which is also a host an
/// issuer may use over plain http (docs/oidc.md).
fn browser_origin(address: std::net::SocketAddr) -> String {
    match address.ip().is_unspecified() {
        true => format!("http://localhost:{}", address.port()),
        false => format!("http://{address}"),
    }
}

/// Whether the demo's provider can take `origin` as its issuer: plain http
/// is an issuer only on a loopback host, and a listener on one specific
/// other address has no loopback name a browser could use.
fn is_loopback_origin(origin: &str) -> bool {
    crate::config::issuer::Issuer::parse(origin).is_ok()
}

/// The demo's OpenID Connect provider, at the verifier's origin, with the
/// mock's shop as its one client (docs/mock-service.md, the shop): its own
/// key and secret, made now.
fn demo_provider(
    mock: &crate::mock::MockService,
    origin: &str,
) -> Result<crate::config::oidc::OidcConfig, Failure> {
    use crate::config::credentials::parse_private_key;
    use crate::config::issuer::{ClaimsMap, Issuer};
    use crate::config::oidc::subject::{Sector, SubjectType};
    use crate::config::oidc::{Client, Clients, OidcConfig};

    let issuer = Issuer::parse(origin).map_err(|e| failed("issuer", e))?;
    let mut secret = [0u8; 24];
    aws_lc_rs::rand::fill(&mut secret).map_err(|_| failed("the shop's secret", "no randomness"))?;
    let secret = {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    };
    let key = crate::mock::generate_rsa_key().map_err(|e| failed("the ID token key", e))?;
    let key =
        parse_private_key(key.private_pem.expose()).map_err(|e| failed("the ID token key", e))?;
    mock.set_shop(crate::mock::ShopClient {
        issuer: issuer.as_str().to_string(),
        client_id: DEMO_SHOP_CLIENT.into(),
        client_secret: secret.clone(),
    });
    let shop = Client {
        id: DEMO_SHOP_CLIENT.into(),
        secret: Some(crate::secret::Secret::new(secret)),
        redirect_uris: vec![mock.shop_redirect_uri()],
        name: Some("Demo shop".into()),
        require_pkce: true,
        subject_type: SubjectType::Pairwise,
        sector: Sector::of(&[mock.shop_redirect_uri()], None),
        rules: Rules::of(
            [Rule {
                scope: DEMO_AGE_SCOPE.into(),
                project_id: DEMO_PROJECT.into(),
                rule_id: DEMO_AGE_RULE.into(),
            }],
            None,
        ),
        brand: None,
    };
    Ok(OidcConfig {
        issuer,
        clients: Arc::new(Clients::from_list(vec![shop])),
        key: Arc::new(key),
        previous: None,
        sub_claims: Vec::new(),
        pairwise_key: None,
        claims_map: ClaimsMap::default(),
    })
}

/// `word` as one shell word: as it is when nothing in it is special to a
/// shell, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `lanyard demo` (and `DEMO_MOCK=true lanyard run`): the mock, the proxy
/// and the verifier until SIGTERM or SIGINT; `DEMO_MOCK=true lanyard
/// verifier`: the mock and the verifier, where `lanyard verifier` would
/// listen.
pub async fn run(demo: &DemoConfig, telemetry: &Telemetry) -> Result<(), Failure> {
    let mut signals = Signals::install()?;
    let listeners = DemoListeners {
        admin: bind_admin(&demo.admin)?,
        proxy: demo.proxy.as_ref().map(bind_proxy).transpose()?,
        verifier: Some(bind_verifier(&demo.verifier)?),
    };
    serve(demo, listeners, telemetry, &mut signals).await
}

async fn serve(
    config: &DemoConfig,
    listeners: DemoListeners,
    telemetry: &Telemetry,
    signals: &mut Signals,
) -> Result<(), Failure> {
    let demo = Demo::start(config, listeners, telemetry).await?;
    // Ignore a closed stdout: the banner is a courtesy.
    let _ = writeln!(std::io::stdout().lock(), "{}", demo.banner());
    let Demo { mock, process, .. } = demo;
    let result = stop_on_signals(process, signals).await;
    drop(mock);
    result
}

#[cfg(test)]
mod tests {
    use super::{browser_origin, is_loopback_origin, shell_word};

    #[test]
    fn a_listener_on_every_interface_is_reached_as_localhost() {
        let origin = |a: &str| browser_origin(a.parse().unwrap());
        assert_eq!(origin("0.0.0.0:8080"), "http://localhost:8080");
        assert_eq!(origin("[::]:8080"), "http://localhost:8080");
        assert_eq!(origin("127.0.0.1:8081"), "http://127.0.0.1:8081");
        assert_eq!(origin("[::1]:8081"), "http://[::1]:8081");
        assert!(is_loopback_origin(&origin("0.0.0.0:8080")));
        assert!(is_loopback_origin(&origin("[::1]:8081")));
        assert!(!is_loopback_origin(&origin("10.1.2.3:8080")));
    }

    #[test]
    fn a_path_is_one_shell_word_quoted_only_when_it_must_be() {
        assert_eq!(shell_word("/run/lanyard/l.sock"), "/run/lanyard/l.sock");
        assert_eq!(shell_word("/tmp/a dir/l.sock"), "'/tmp/a dir/l.sock'");
        assert_eq!(shell_word("/tmp/it's/$HOME"), r"'/tmp/it'\''s/$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
