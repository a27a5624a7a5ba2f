//! `runcell config`: the effective configuration as TOML, secrets redacted.

use std::process::ExitCode;

use super::Settings;

pub fn run(settings: &Settings) -> ExitCode {
    match settings.load() {
        Ok(config) => {
            print!("{}", config.to_toml());
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
