//! The command line. The subcommands are clap derive; the setting flags
//! are built at run time from [`config::SETTINGS`], so each flag's name,
//! placeholder, help, variable and default come from the setting's one
//! declaration. Flags only: environment variables and the config file are
//! read by [`crate::config`], which knows where each value came from.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::{self, AnySetting, Flags, ShownDefault};

/// The `--config` flag's id in the matches.
const CONFIG: &str = "config";

/// A token sidecar: holds a service account key, keeps a bearer token
/// fresh, and forwards local requests to the service with it.
#[derive(Debug, Parser)]
#[command(name = "lanyard", version, about, long_about = None)]
struct Commands {
    #[command(subcommand)]
    command: Option<Command>,
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
    /// Serve the verification page and its backend (/api/start,
    /// /api/status) for RULE_ID, with the admin listener.
    Verifier,
    /// Probe the running sidecar's /readyz on LANYARD_ADMIN_LISTEN: exit 0
    /// when ready (the container image's health check; it has no curl).
    Healthcheck,
}

/// `lanyard token --organization`'s id in the matches.
const ORGANIZATION: &str = "organization";

/// The parsed command line.
#[derive(Debug)]
pub struct Cli {
    pub command: Option<Command>,
    /// `lanyard token --organization ORG_ID`: that organization's account
    /// (docs/accounts.md).
    pub organization: Option<String>,
    /// The setting flags given, for [`crate::config::Loaded::load`].
    pub flags: Flags,
}

impl Cli {
    /// The whole command: subcommands, `--config`, and one flag per
    /// setting that has one.
    pub fn command() -> clap::Command {
        let config = Arg::new(CONFIG)
            .long("config")
            .global(true)
            .value_name("PATH")
            .value_parser(clap::value_parser!(PathBuf))
            .help(format!("TOML config file [env: {}]", config::CONFIG_ENV));
        let organization = Arg::new(ORGANIZATION)
            .long("organization")
            .value_name("ORG_ID")
            .help("The account of this organization: SA_CREDENTIALS_FILE's, or the SA_CREDENTIALS_DIR file that names it");
        Commands::command()
            .mut_subcommand("token", |token| token.arg(organization))
            .arg(config)
            .args(config::SETTINGS.iter().filter_map(|s| flag(*s)))
            .after_help(flagless_help())
    }

    /// Parses the process's arguments, exiting on `--help`, `--version`
    /// and errors, as clap does.
    pub fn parse() -> Cli {
        Cli::from_matches(&Cli::command().get_matches()).unwrap_or_else(|err| err.exit())
    }

    pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Cli::from_matches(&Cli::command().try_get_matches_from(args)?)
    }

    fn from_matches(matches: &ArgMatches) -> Result<Cli, clap::Error> {
        let command = Commands::from_arg_matches(matches)?.command;
        let mut flags = Flags {
            config: matches.get_one::<PathBuf>(CONFIG).cloned(),
            ..Flags::default()
        };
        for setting in config::SETTINGS.iter().filter(|s| s.flag().is_some()) {
            // Only what was typed: a switch not given reads as its clap
            // default, which must not outrank the environment.
            if matches.value_source(setting.key()) != Some(ValueSource::CommandLine) {
                continue;
            }
            let value = match setting.value_name() {
                None => Some("true".to_string()),
                Some(_) => matches.get_one::<String>(setting.key()).cloned(),
            };
            flags.set(*setting, value);
        }
        let organization = matches
            .subcommand_matches("token")
            .and_then(|token| token.get_one::<String>(ORGANIZATION).cloned());
        Ok(Cli {
            command,
            organization,
            flags,
        })
    }
}

/// A setting's flag, if it has one: given after a subcommand too, as
/// `lanyard check --listen ...`.
fn flag(setting: &'static dyn AnySetting) -> Option<Arg> {
    let long = setting.flag()?.trim_start_matches("--");
    let arg = Arg::new(setting.key())
        .long(long)
        .global(true)
        .help(help_line(setting));
    Some(match setting.value_name() {
        None => arg.action(ArgAction::SetTrue),
        Some(name) => arg.value_name(name).action(ArgAction::Set),
    })
}

/// The help line with the variable and the default, as clap prints its
/// own `env` and `default_value`.
fn help_line(setting: &dyn AnySetting) -> String {
    let mut line = format!("{} [env: {}]", setting.help(), setting.env());
    let _ = match setting.shown_default() {
        ShownDefault::None => Ok(()),
        ShownDefault::Value(text) | ShownDefault::Computed(text) => {
            write!(line, " [default: {text}]")
        }
        // docs/settings.md's markup is no use in a terminal.
        ShownDefault::Described(text) => write!(line, " [{}]", text.replace('`', "")),
    };
    line
}

/// The settings with no flag, listed after the flags so `--help` names
/// every setting.
fn flagless_help() -> String {
    let mut text = String::from("Settings without a flag (environment or config file):\n");
    let flagless = || config::SETTINGS.iter().filter(|s| s.flag().is_none());
    // Two spaces at least between the longest name and its text.
    let width = flagless().map(|s| s.env().len() + 2).max().unwrap_or(0);
    for setting in flagless() {
        let _ = writeln!(text, "  {:<width$}{}", setting.env(), setting.help());
    }
    text.push_str(
        "\nPrecedence: flag > environment variable > config file > default. An empty variable counts as unset.",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_flag_names_its_variable_and_default() {
        let command = Cli::command();
        for setting in config::SETTINGS {
            let Some(flag) = setting.flag() else { continue };
            let long = flag.trim_start_matches("--");
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("no flag {flag}"));
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains(&format!("[env: {}]", setting.env())),
                "{flag}: {help}"
            );
            if let ShownDefault::Value(value) = setting.shown_default() {
                assert!(
                    help.ends_with(&format!("[default: {value}]")),
                    "{flag}: {help}"
                );
            }
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
        let flags = cli.flags;
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
        assert_eq!(flags.values.len(), 3, "{:?}", flags.values);
    }

    #[test]
    fn flags_not_given_leave_the_other_sources_alone() {
        let cli = Cli::try_parse_from(["lanyard", "--config", "/etc/lanyard.toml"]).unwrap();
        assert_eq!(cli.command, None);
        assert!(cli.flags.values.is_empty(), "{:?}", cli.flags.values);
        assert_eq!(
            cli.flags.config.as_deref(),
            Some(std::path::Path::new("/etc/lanyard.toml"))
        );
    }

    #[test]
    fn a_secret_cannot_be_given_as_a_flag() {
        let err = Cli::try_parse_from(["lanyard", "token", "--private-key", "x"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    }
}
