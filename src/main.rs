//! The `lanyard` binary: parse, configure, run, and map the outcome to an
//! exit code (0 success, 2 bad configuration, 1 anything else).

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::io::Write as _;
use std::process::ExitCode;

use lanyard::Failure;
use lanyard::cli::{Cli, Command};
use lanyard::commands;
use lanyard::config::{Config, LogFormat, ProcessEnv, Requirement};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Run);
    let need = match command {
        Command::Run | Command::Check => Requirement::Upstream,
        Command::Token => Requirement::NoUpstream,
        Command::Verifier => Requirement::Verifier,
        Command::Demo => Requirement::Demo,
        Command::Healthcheck => Requirement::AdminOnly,
    };
    let config = match Config::load(&cli.flags, &ProcessEnv, need) {
        Ok(config) => config,
        Err(err) => return fail(&Failure::Config(err)),
    };
    init_tracing(LogFormat::for_stderr(config.log_format));
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }

    // One thread carries the token refresher and the commands; the admin
    // listener has a thread of its own, and the proxy LANYARD_WORKER_THREADS
    // threads (app.rs).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return fail(&Failure::Runtime(format!(
                "cannot start the runtime: {err}"
            )));
        }
    };
    let outcome = runtime.block_on(async {
        match command {
            Command::Token => commands::token(&config).await.map(|token| {
                // The one place a token is printed, by request.
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", token.expose());
                true
            }),
            Command::Check => commands::check(&config).await.map(|report| {
                // A closed stdout (`lanyard check | head -1`) is not a reason
                // to panic; the exit code still tells.
                let _ = write!(std::io::stdout().lock(), "{}", report.render());
                report.passed()
            }),
            Command::Healthcheck => {
                let health = commands::healthcheck(&config).await;
                // Docker keeps the output of the last checks in `docker
                // inspect`, so say why in one line.
                let _ = writeln!(std::io::stdout().lock(), "{}", health.summary);
                Ok(health.ready)
            }
            Command::Demo => lanyard::demo::run(&config).await.map(|()| true),
            Command::Run if config.demo => lanyard::demo::run(&config).await.map(|()| true),
            Command::Run => lanyard::process::run(&config).await.map(|()| true),
            Command::Verifier if config.demo => {
                lanyard::demo::run_verifier(&config).await.map(|()| true)
            }
            Command::Verifier => lanyard::process::run_verifier(&config).await.map(|()| true),
        }
    });
    // Dropping the runtime would wait for every blocking thread, and one
    // may be inside a PKCS#11 module that never returns (a signature given
    // up on after LANYARD_TOKEN_TIMEOUT): the process exits without it.
    runtime.shutdown_background();
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(failure) => fail(&failure),
    }
}

fn fail(failure: &Failure) -> ExitCode {
    match failure {
        Failure::Config(err) => {
            for line in err.lines() {
                eprintln!("lanyard: {line}");
            }
        }
        Failure::Runtime(why) => eprintln!("lanyard: {why}"),
    }
    ExitCode::from(failure.exit_code())
}

/// Logs go to stderr, so `lanyard token`'s stdout holds only the token.
fn init_tracing(format: LogFormat) {
    // An empty RUST_LOG counts as unset, as empty settings do.
    let given = std::env::var_os("RUST_LOG").filter(|v| !v.is_empty());
    let (filter, bad_filter) = match given.map(|_| EnvFilter::try_from_default_env()) {
        Some(Ok(filter)) => (filter, None),
        Some(Err(err)) => (EnvFilter::new("info"), Some(err)),
        None => (EnvFilter::new("info"), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        // Colour codes only where a person reads them, not in a log file.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    if let Some(err) = bad_filter {
        tracing::warn!(error = %err, "RUST_LOG is not a valid filter; logging at info");
    }
}
