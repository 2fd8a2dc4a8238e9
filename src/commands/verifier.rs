//! `lanyard verifier`: the verifier and the admin listener until SIGTERM
//! or SIGINT; no proxy (docs/verifier.md).

use crate::config::VerifierSetup;
use crate::failure::Failure;
use crate::otel::Telemetry;
use crate::process::{Components, Process, Signals, bind_admin, bind_verifier, stop_on_signals};

/// `lanyard verifier`, its spans exported by `telemetry`.
pub async fn verifier(setup: &VerifierSetup, telemetry: &Telemetry) -> Result<(), Failure> {
    let mut signals = Signals::install()?;
    let (admin, verifier) = (bind_admin(&setup.admin)?, bind_verifier(&setup.verifier)?);
    let components = Components {
        spans_dropped: telemetry.spans_dropped(),
        ..Components::verifier(setup, admin, verifier)
    };
    let process = Process::start(components)?;
    stop_on_signals(process, &mut signals).await
}
