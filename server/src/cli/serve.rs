//! `runcell serve`: the notebook, the WebSocket and the API, with logs to
//! standard error as the configuration's `log` filter says.

use std::process::ExitCode;

use super::Settings;
use crate::telemetry;

pub async fn run(settings: &Settings) -> ExitCode {
    let config = match settings.load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    telemetry::init(&config.log);
    match runcell_server::serve(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            eprintln!("runcell: {err}");
            ExitCode::FAILURE
        }
    }
}
