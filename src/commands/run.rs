//! `lanyard run`: the proxy until SIGTERM or SIGINT (docs/commands.md).

use crate::config::RunConfig;
use crate::failure::Failure;
use crate::otel::Telemetry;
use crate::process::{Components, Process, Signals, bind_admin, bind_proxy, stop_on_signals};

/// `lanyard run`: the proxy until SIGTERM or SIGINT, its spans exported
/// by `telemetry`.
pub async fn run(run: &RunConfig, telemetry: &Telemetry) -> Result<(), Failure> {
    let mut signals = Signals::install()?;
    let components = Components {
        spans_dropped: telemetry.spans_dropped(),
        ..Components::proxy(run, bind_admin(&run.admin)?, bind_proxy(&run.proxy)?)
    };
    let process = Process::start(components)?;
    stop_on_signals(process, &mut signals).await
}
