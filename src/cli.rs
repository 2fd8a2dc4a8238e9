//! The command line. Flags only: environment variables and the config file
//! are read by [`crate::config`], which knows where each value came from.
//! Each flag's help names its environment variable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, Flags};

/// A token sidecar: holds a service account key, keeps a bearer token
/// fresh, and forwards local requests to the service with it.
#[derive(Debug, Parser)]
#[command(name = "lanyard", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub settings: SettingFlags,
}

/// What to do; `run` when none is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Start the sidecar: proxy, admin listener and token refresher.
    Run,
    /// Start an embedded mock of the service and the sidecar wired to it.
    Demo,
    /// Fetch one token and print only the access token on stdout.
    Token,
    /// Validate settings and credentials, fetch a token, probe the upstream.
    Check,
    /// Probe the running sidecar's /readyz on LANYARD_ADMIN_LISTEN: exit 0
    /// when ready (the container image's health check; it has no curl).
    Healthcheck,
}

/// Flags for the settings that have one (secrets have none).
#[derive(Debug, Default, Args)]
pub struct SettingFlags {
    /// TOML config file [env: LANYARD_CONFIG]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The service's API base URL [env: SERVICE_API_URL]
    #[arg(long, global = true, value_name = "URL")]
    pub service_api_url: Option<String>,
    /// Credentials JSON file downloaded from the Portal [env: SA_CREDENTIALS_FILE]
    #[arg(long, global = true, value_name = "PATH")]
    pub credentials_file: Option<String>,
    /// Client id, overriding the file's [env: SA_CLIENT_ID]
    #[arg(long, global = true, value_name = "ID")]
    pub client_id: Option<String>,
    /// IAM audience, overriding the file's [env: SA_IAM_AUDIENCE]
    #[arg(long, global = true, value_name = "AUD")]
    pub iam_audience: Option<String>,
    /// Token endpoint, overriding the file's [env: SA_TOKEN_URI]
    #[arg(long, global = true, value_name = "URL")]
    pub token_uri: Option<String>,
    /// Organization id, overriding the file's [env: SA_ORGANIZATION_ID]
    #[arg(long, global = true, value_name = "ID")]
    pub organization_id: Option<String>,
    /// Organization, the fallback organization id [env: ORG_ID]
    #[arg(long, global = true, value_name = "ID")]
    pub org_id: Option<String>,
    /// Project id, for `check` to probe the rule path [env: PROJECT_ID]
    #[arg(long, global = true, value_name = "ID")]
    pub project_id: Option<String>,
    /// Rule id (UUID), for `check` to probe the rule path [env: RULE_ID]
    #[arg(long, global = true, value_name = "UUID")]
    pub rule_id: Option<String>,
    /// Proxy listener; loopback unless --allow-remote [env: LANYARD_LISTEN] [default: 127.0.0.1:8080]
    #[arg(long, global = true, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Allow a non-loopback proxy listener [env: LANYARD_ALLOW_REMOTE]
    #[arg(long, global = true)]
    pub allow_remote: bool,
    /// Admin listener: health and metrics [env: LANYARD_ADMIN_LISTEN] [default: 0.0.0.0:9090]
    #[arg(long, global = true, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// Assertion lifetime, at most 1h [env: LANYARD_ASSERTION_TTL] [default: 3600]
    #[arg(long, global = true, value_name = "DURATION")]
    pub assertion_ttl: Option<String>,
    /// Backdate the assertion's iat and exp for a token endpoint whose clock is behind, at most 5m [env: LANYARD_CLOCK_SKEW] [default: 0]
    #[arg(long, global = true, value_name = "DURATION")]
    pub clock_skew: Option<String>,
    /// Extra CA bundle (PEM) for upstream and token TLS [env: LANYARD_CA_FILE]
    #[arg(long, global = true, value_name = "PATH")]
    pub ca_file: Option<String>,
    /// Time to upstream response headers [env: LANYARD_UPSTREAM_TIMEOUT] [default: 30]
    #[arg(long, global = true, value_name = "DURATION")]
    pub upstream_timeout: Option<String>,
    /// Time for one token request [env: LANYARD_TOKEN_TIMEOUT] [default: 10]
    #[arg(long, global = true, value_name = "DURATION")]
    pub token_timeout: Option<String>,
    /// Stop sending a token this long before it expires, at most a tenth of its lifetime [env: LANYARD_EXPIRY_MARGIN] [default: 10]
    #[arg(long, global = true, value_name = "DURATION")]
    pub expiry_margin: Option<String>,
    /// Drain time on shutdown [env: LANYARD_SHUTDOWN_GRACE] [default: 20]
    #[arg(long, global = true, value_name = "DURATION")]
    pub shutdown_grace: Option<String>,
    /// Time a client has to send a request's headers, also the idle keep-alive limit [env: LANYARD_HEADER_TIMEOUT] [default: 30]
    #[arg(long, global = true, value_name = "DURATION")]
    pub header_timeout: Option<String>,
    /// Time a request body may stay silent before the request is given up [env: LANYARD_BODY_TIMEOUT] [default: 30]
    #[arg(long, global = true, value_name = "DURATION")]
    pub body_timeout: Option<String>,
    /// Largest request head a client may send, e.g. 64KiB [env: LANYARD_MAX_HEADER_BYTES] [default: 64KiB]
    #[arg(long, global = true, value_name = "BYTES")]
    pub max_header_bytes: Option<String>,
    /// Most client connections the proxy holds open at once [env: LANYARD_MAX_CONNECTIONS] [default: 1024]
    #[arg(long, global = true, value_name = "N")]
    pub max_connections: Option<String>,
    /// Most connections to the upstream, across all proxy threads [env: LANYARD_MAX_UPSTREAM_CONNECTIONS] [default: 256]
    #[arg(long, global = true, value_name = "N")]
    pub max_upstream_connections: Option<String>,
    /// Runtime worker threads [env: LANYARD_WORKER_THREADS] [default: CPUs available, at most 4]
    #[arg(long, global = true, value_name = "N")]
    pub worker_threads: Option<String>,
    /// Send RFC 7523 grant_type and client_assertion_type [env: LANYARD_RFC7523_FIELDS] [default: true]
    #[arg(long, global = true, value_name = "BOOL")]
    pub rfc7523_fields: Option<String>,
    /// Log format, json or text [env: LANYARD_LOG_FORMAT] [default: json]
    #[arg(long, global = true, value_name = "FORMAT")]
    pub log_format: Option<String>,
}

impl SettingFlags {
    /// The given flags, keyed by setting, for [`crate::config::Config::load`].
    pub fn to_flags(&self) -> Flags {
        let mut flags = Flags {
            config: self.config.clone(),
            ..Flags::default()
        };
        flags.set(&config::SERVICE_API_URL, self.service_api_url.clone());
        flags.set(&config::CREDENTIALS_FILE, self.credentials_file.clone());
        flags.set(&config::CLIENT_ID, self.client_id.clone());
        flags.set(&config::IAM_AUDIENCE, self.iam_audience.clone());
        flags.set(&config::TOKEN_URI, self.token_uri.clone());
        flags.set(&config::ORGANIZATION_ID, self.organization_id.clone());
        flags.set(&config::ORG_ID, self.org_id.clone());
        flags.set(&config::PROJECT_ID, self.project_id.clone());
        flags.set(&config::RULE_ID, self.rule_id.clone());
        flags.set(&config::LISTEN, self.listen.clone());
        flags.set(&config::ALLOW_REMOTE, self.allow_remote.then_some("true"));
        flags.set(&config::ADMIN_LISTEN, self.admin_listen.clone());
        flags.set(&config::ASSERTION_TTL, self.assertion_ttl.clone());
        flags.set(&config::CLOCK_SKEW, self.clock_skew.clone());
        flags.set(&config::CA_FILE, self.ca_file.clone());
        flags.set(&config::UPSTREAM_TIMEOUT, self.upstream_timeout.clone());
        flags.set(&config::TOKEN_TIMEOUT, self.token_timeout.clone());
        flags.set(&config::EXPIRY_MARGIN, self.expiry_margin.clone());
        flags.set(&config::SHUTDOWN_GRACE, self.shutdown_grace.clone());
        flags.set(&config::HEADER_TIMEOUT, self.header_timeout.clone());
        flags.set(&config::BODY_TIMEOUT, self.body_timeout.clone());
        flags.set(&config::MAX_HEADER_BYTES, self.max_header_bytes.clone());
        flags.set(&config::MAX_CONNECTIONS, self.max_connections.clone());
        flags.set(
            &config::MAX_UPSTREAM_CONNECTIONS,
            self.max_upstream_connections.clone(),
        );
        flags.set(&config::WORKER_THREADS, self.worker_threads.clone());
        flags.set(&config::RFC7523_FIELDS, self.rfc7523_fields.clone());
        flags.set(&config::LOG_FORMAT, self.log_format.clone());
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_setting_flag_exists_and_names_its_variable() {
        let command = Cli::command();
        for setting in config::SETTINGS {
            let Some(flag) = setting.flag else { continue };
            let long = flag.trim_start_matches("--");
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("no flag {flag}"));
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains(&format!("[env: {}]", setting.env)),
                "{flag}: {help}"
            );
        }
    }

    #[test]
    fn flags_map_onto_settings_and_work_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "lanyard",
            "check",
            "--listen",
            "127.0.0.1:1",
            "--allow-remote",
            "--service-api-url",
            "https://x",
        ])
        .unwrap();
        assert_eq!(cli.command, Some(Command::Check));
        let flags = cli.settings.to_flags();
        assert_eq!(
            flags.values.get("listen").map(String::as_str),
            Some("127.0.0.1:1")
        );
        assert_eq!(
            flags.values.get("allow_remote").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            flags.values.get("service_api_url").map(String::as_str),
            Some("https://x")
        );
    }
}
