//! `lanyard demo`: the banner's curl lines work as printed, against the
//! embedded mock through the sidecar, on TCP and on a Unix socket; and its
//! `shop` line is a site that logs a person in with the verifier as its
//! OpenID Connect provider, driven as a browser would over HTTP.

use std::collections::HashMap;

use bytes::Bytes;
use http::Method;
use lanyard::commands::demo::{Demo, DemoListeners};
use lanyard::config::DemoConfig;
use lanyard::process::{ProxyListener, bind_proxy};
use tokio::net::TcpListener;

use crate::support::child::Process;
use crate::support::relying_party;
use crate::support::sidecar::{Answer, send};
use crate::support::{demo_config, demo_holding_a_token, env, text};

#[tokio::test]
async fn banner_curl_lines_start_poll_and_show_a_403() {
    let config = demo_config(&HashMap::new());
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap().into();
    banner_curl_lines_work(&config, proxy).await;
}

/// With the proxy on a Unix socket the lines give curl the socket, its
/// path quoted for the shell (this one has a space).
#[tokio::test]
async fn banner_curl_lines_work_on_a_unix_socket() {
    let dir = tempfile::Builder::new()
        .prefix("demo dir")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("lanyard.sock");
    let listen = format!("unix:{}", socket.display());
    let config = demo_config(&HashMap::from([("LANYARD_LISTEN".into(), listen)]));
    let banner =
        banner_curl_lines_work(&config, bind_proxy(config.proxy.as_ref().unwrap()).unwrap()).await;
    assert!(
        banner.contains(&format!("curl --unix-socket '{}' ", socket.display())),
        "{banner}"
    );
}

/// Runs the demo on `proxy` and the banner's lines in bash; the banner.
async fn banner_curl_lines_work(config: &DemoConfig, proxy: ProxyListener) -> String {
    let demo = demo_holding_a_token(config, Some(proxy)).await;

    let banner = demo.banner();
    let script: Vec<&str> = banner
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("TX=") || l.starts_with("curl "))
        .collect();
    assert_eq!(script.len(), 3, "{banner}");
    let output = tokio::process::Command::new("bash")
        .args(["-c", &format!("set -eu\n{}", script.join("\n"))])
        .output()
        .await
        .expect("bash and curl are installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut lines = stdout.lines();
    let tx = lines.next().unwrap();
    assert!(
        uuid::Uuid::parse_str(tx).is_ok(),
        "transaction id: {stdout}"
    );
    let poll: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(poll["transaction_id"], tx);
    assert_eq!(poll["status"], "pending");
    let rest: Vec<&str> = lines.collect();
    assert!(rest[0].starts_with("HTTP/1.1 403"), "{stdout}");
    let body = rest.last().unwrap();
    assert!(body.contains("project_group"), "{stdout}");
    assert_eq!(demo.mock.counters().tokens_issued, 1);
    banner
}

/// `lanyard demo`, the binary, on free ports: the banner's `shop` line is
/// a site whose login goes through the verifier's page and the mock
/// wallet, and ends with the shop showing the ID token's claims.
#[tokio::test]
async fn the_banners_shop_logs_a_person_in_through_the_verifier() {
    let banner = shop_login(&["demo"], &[]).await;
    assert!(banner.contains("issuer   http://127.0.0.1:"), "{banner}");
}

/// `DEMO_MOCK=true lanyard verifier` as a container runs it, listening on
/// every interface (its default `0.0.0.0`, or IPv6's `[::]`): the
/// demo's provider is `http://localhost:PORT`, the banner says so, and the
/// shop's login goes through it.
#[tokio::test]
async fn demo_mock_verifier_on_every_interface_serves_its_provider_at_localhost() {
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let vars = [("DEMO_MOCK", "true"), ("LANYARD_VERIFIER_LISTEN", listen)];
        let banner = shop_login(&["verifier"], &vars).await;
        let verifier = banner_url(&banner, "verifier");
        assert!(verifier.starts_with("http://localhost:"), "{banner}");
        assert_eq!(
            banner_url(&banner, "issuer"),
            verifier.trim_end_matches('/'),
            "{banner}"
        );
    }
}

/// The demo shop's second link asks the demo's age-only rule (its `age`
/// scope): the person's wallet is asked that alone, and the shop is told
/// that alone, where the first link's login shows the whole identity.
#[tokio::test]
async fn the_shops_age_only_login_tells_the_shop_the_age_alone() {
    let login = Login {
        link: "login?scope=age",
        shows: "<dt>age_over_18</dt><dd>true</dd>",
        hides: Some("given_name"),
    };
    shop_login_by(&["demo"], &[], login).await;
}

/// Which of the shop's login links a test follows, and what the shop
/// then shows, and does not.
struct Login {
    link: &'static str,
    shows: &'static str,
    hides: Option<&'static str>,
}

/// The shop's first link: the client's default rule, the whole identity.
const WHOLE_IDENTITY: Login = Login {
    link: "login",
    shows: "<dt>given_name</dt><dd>Erika</dd>",
    hides: None,
};

/// Runs `lanyard <args>` with `vars`, logs a person in at the banner's
/// shop, stops it (exit 0) and gives its banner.
async fn shop_login(args: &[&str], vars: &[(&str, &str)]) -> String {
    shop_login_by(args, vars, WHOLE_IDENTITY).await
}

/// As [`shop_login`], by `login`'s link.
async fn shop_login_by(args: &[&str], vars: &[(&str, &str)], login: Login) -> String {
    let mut demo = Process::launch(args, env(vars), "json", true);
    let banner = demo.stdout_through("Stop with").await;
    let shop = banner_url(&banner, "shop");
    let verifier = banner_url(&banner, "verifier");
    let mock = banner_url(&banner, "mock");
    let mut browser = Jar::default();
    let before = text(&browser.get(&shop).await.body);
    assert!(before.contains("id=\"login\""), "{before}");

    assert!(
        before.contains(&format!("href=\"/shop/{}\"", login.link)),
        "{before}"
    );
    let started = browser.get(&format!("{shop}{}", login.link)).await;
    assert_eq!(started.status, 303, "{}", text(&started.body));
    let authorize = location(&started);
    let (issuer, _) = authorize
        .split_once("/authorize?")
        .unwrap_or_else(|| panic!("not the authorization endpoint: {authorize}"));
    assert_eq!(
        format!("{issuer}/"),
        verifier,
        "the provider is the verifier"
    );
    let page = browser.get(&authorize).await;
    assert_eq!(page.status, 200, "{}", text(&page.body));
    assert!(
        text(&page.body).contains("Demo shop"),
        "the page names who asks"
    );
    let sealed = relying_party::sealed_request(&page);
    let callback = relying_party::through_page(issuer, &sealed, |service_id| {
        format!("{}mock/wallet/{service_id}/present", with_slash(&mock))
    })
    .await;

    let back = browser.get(&callback).await;
    assert_eq!(back.status, 303, "{}", text(&back.body));
    assert_eq!(location(&back), "/shop/");
    let home = browser.get(&shop).await;
    assert_eq!(home.status, 200);
    let home = text(&home.body);
    assert!(
        home.contains(login.shows),
        "the shop shows the ID token's {}:\n{home}",
        login.shows
    );
    if let Some(hidden) = login.hides {
        assert!(
            !home.contains(hidden),
            "the shop was told {hidden}:\n{home}"
        );
    }

    demo.terminate();
    let (code, log) = demo.finish().await;
    assert_eq!(code, Some(0), "{log}");
    banner
}

/// The first URL on the banner's line for `what` (`shop`, `verifier`,
/// `mock`).
fn banner_url(banner: &str, what: &str) -> String {
    banner
        .lines()
        .map(str::split_whitespace)
        .find_map(|mut words| (words.next() == Some(what)).then(|| words.next()).flatten())
        .unwrap_or_else(|| panic!("no `{what}` line in the banner:\n{banner}"))
        .to_string()
}

fn with_slash(url: &str) -> String {
    format!("{}/", url.trim_end_matches('/'))
}

fn location(answer: &Answer) -> String {
    answer.headers["location"].to_str().unwrap().to_string()
}

/// A browser's cookies, for the one site it visits here: each
/// `Set-Cookie` kept by name, one with `Max-Age=0` forgotten, all sent
/// back. (The verifier's own cookie is kept by `through_page`.)
#[derive(Default)]
struct Jar(Vec<(String, String)>);

impl Jar {
    async fn get(&mut self, url: &str) -> Answer {
        let cookies: Vec<String> = self.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let cookie = cookies.join("; ");
        let headers: Vec<(&str, &str)> = match cookie.is_empty() {
            true => vec![],
            false => vec![("cookie", cookie.as_str())],
        };
        let answer = send(Method::GET, url, &headers, Bytes::new()).await;
        for set in answer.headers.get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, attributes) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            self.0.retain(|(kept, _)| kept != name);
            if !attributes.contains("Max-Age=0") {
                self.0.push((name.to_string(), value.to_string()));
            }
        }
        answer
    }
}

/// `DEMO_MOCK=true lanyard verifier` takes `LANYARD_VERIFIER_SESSION_KEY`
/// as `lanyard verifier` does: a demo given the key opens the handles
/// another demo with it sealed, and one with another key does not.
#[tokio::test]
async fn a_demo_takes_the_session_key_it_is_given() {
    async fn demo(key: &str) -> Demo {
        let env = HashMap::from([("LANYARD_VERIFIER_SESSION_KEY".to_string(), key.to_string())]);
        let listeners = DemoListeners {
            admin: TcpListener::bind("127.0.0.1:0").await.unwrap(),
            proxy: None,
            verifier: Some(TcpListener::bind("127.0.0.1:0").await.unwrap()),
        };
        Demo::start(
            &demo_config(&env),
            listeners,
            &lanyard::otel::Telemetry::off(),
        )
        .await
        .unwrap()
    }
    let url = |demo: &Demo| format!("http://{}", demo.process.verifier_addr.unwrap());
    let shared = "QUJD".repeat(11);
    let (a, b, other) = (
        demo(&shared).await,
        demo(&shared).await,
        demo(&"WFla".repeat(11)).await,
    );
    let started = send(
        Method::POST,
        &format!("{}/api/start", url(&a)),
        &[("content-type", "application/json")],
        Bytes::new(),
    )
    .await;
    assert_eq!(started.status, 200, "{:?}", started.body);
    let cookie = started.headers["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let handle =
        serde_json::from_slice::<serde_json::Value>(&started.body).unwrap()["transaction_id"]
            .as_str()
            .unwrap()
            .to_string();
    for replica in [&b, &other] {
        let status = format!("{}/api/status?transactionId={handle}", url(replica));
        send(Method::GET, &status, &[("cookie", &cookie)], Bytes::new()).await;
    }
    let unopened = |demo: &Demo| demo.process.metrics.verifier_handles_unopened.get();
    assert_eq!(unopened(&b), 0, "the same key opens the handle");
    assert_eq!(unopened(&other), 1, "another key does not");
}
