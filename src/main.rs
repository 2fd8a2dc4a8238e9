//! The `lanyard` binary: parse, configure, run, and map the outcome to an
//! exit code (0 success, 2 bad configuration, 1 anything else).

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::io::Write as _;
use std::process::ExitCode;

use lanyard::Failure;
use lanyard::cli::{Cli, Command};
use lanyard::commands;
use lanyard::config::{Loaded, LogFormat, ProcessEnv, Requirement};
use lanyard::otel::{Telemetry, spans};
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

fn main() -> ExitCode {
    // Before any key is read.
    let private = lanyard::keep_memory_private();
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Run);
    let need = match command {
        Command::Run => Requirement::Upstream,
        Command::Check => Requirement::Check,
        Command::Token => Requirement::NoUpstream,
        Command::Verifier => Requirement::Verifier,
        Command::Demo => Requirement::Demo,
        Command::Healthcheck => Requirement::AdminOnly,
    };
    let loaded = match Loaded::load(&cli.flags, &ProcessEnv, need) {
        Ok(loaded) => loaded,
        Err(err) => return fail(&Failure::Config(err)),
    };
    let config = loaded.process();
    // Only what serves is traced: `token`, `check` and `healthcheck` (a
    // container's probe, every few seconds) would only wait on the
    // collector at exit.
    let (telemetry, otel_warnings) = match command {
        Command::Run | Command::Verifier | Command::Demo => {
            Telemetry::from_env(&ProcessEnv, config.ca_file.as_deref())
        }
        Command::Token | Command::Check | Command::Healthcheck => (Telemetry::off(), Vec::new()),
    };
    init_tracing(LogFormat::for_stderr(config.log_format), &telemetry);
    for warning in config.warnings.iter().chain(&otel_warnings) {
        tracing::warn!("{warning}");
    }
    if let Err(why) = private {
        tracing::warn!("{why}: another process of this user could read the key from its memory");
    }
    telemetry.announce();

    // One thread carries the token refresher and the commands; the admin
    // listener has a thread of its own, and the proxy LANYARD_WORKER_THREADS
    // threads (src/process/threads.rs).
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
    let outcome = runtime.block_on(execute(cli.organization.as_deref(), &loaded, &telemetry));
    // The requests have drained; their spans go out, within a bound.
    telemetry.shutdown();
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

/// Runs the command its configuration is for: whether it succeeded (`check`
/// and `healthcheck` can fail without an error), or how it failed.
async fn execute(
    organization: Option<&str>,
    loaded: &Loaded,
    telemetry: &Telemetry,
) -> Result<bool, Failure> {
    match loaded {
        Loaded::Token(config) => commands::token(config, organization).await.map(|token| {
            // The one place a token is printed, by request.
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", token.expose());
            true
        }),
        Loaded::Check(config) => {
            let report = commands::check(config).await;
            // A closed stdout (`lanyard check | head -1`) is not a reason
            // to panic; the exit code still tells.
            let _ = write!(std::io::stdout().lock(), "{}", report.render());
            Ok(report.passed())
        }
        Loaded::Healthcheck(config) => {
            let health = commands::healthcheck(&config.admin).await;
            // Docker keeps the output of the last checks in `docker
            // inspect`, so say why in one line.
            let _ = writeln!(std::io::stdout().lock(), "{}", health.summary);
            Ok(health.ready)
        }
        Loaded::Demo(config) => commands::demo::run(config, telemetry).await.map(|()| true),
        Loaded::Run(config) => commands::run(config, telemetry).await.map(|()| true),
        Loaded::Verifier(setup) => commands::verifier(setup, telemetry).await.map(|()| true),
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

/// Logs go to stderr, so `lanyard token`'s stdout holds only the token;
/// spans go to OpenTelemetry, when `telemetry` exports them.
fn init_tracing(format: LogFormat, telemetry: &Telemetry) {
    // An empty RUST_LOG counts as unset, as empty settings do.
    let given = std::env::var_os("RUST_LOG").filter(|v| !v.is_empty());
    let (filter, bad_filter) = match given.map(|_| EnvFilter::try_from_default_env()) {
        Some(Ok(filter)) => (filter, None),
        Some(Err(err)) => (EnvFilter::new("info"), Some(err)),
        None => (EnvFilter::new("info"), None),
    };
    let logged = filter.and(spans::not_exported());
    let registry = tracing_subscriber::registry();
    match format {
        LogFormat::Json => {
            let log = tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(true)
                .with_writer(std::io::stderr)
                .with_filter(logged);
            registry.with(log).with(telemetry.layer()).init();
        }
        LogFormat::Text => {
            // Colour codes only where a person reads them, not in a log file.
            let log = tracing_subscriber::fmt::layer()
                .with_ansi(std::io::stderr().is_terminal())
                .with_writer(std::io::stderr)
                .with_filter(logged);
            registry.with(log).with(telemetry.layer()).init();
        }
    }
    if let Some(err) = bad_filter {
        tracing::warn!(error = %err, "RUST_LOG is not a valid filter; logging at info");
    }
}
