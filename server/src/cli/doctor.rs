//! `runcell doctor`: every sandbox isolation layer checked with the
//! server's own settings, one line each; fails unless all are ok.

use std::process::ExitCode;

use runcell_sandbox::jail::{JailConfig, JailPackages};
use runcell_sandbox::packages::index_for_jails;

use super::Settings;

pub async fn run(settings: &Settings) -> ExitCode {
    let config = match settings.load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let mut jail = JailConfig::from_settings(&config.sandbox);
    jail.packages = index_for_jails(&config.packages, &config.data_dir).map(JailPackages);
    let checks = runcell_sandbox::jail::doctor::run_checks(jail).await;
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for check in &checks {
        let mark = if check.ok { "ok  " } else { "FAIL" };
        println!("{mark}  {:width$}  {}", check.name, check.detail);
    }
    if checks.iter().all(|c| c.ok) {
        ExitCode::SUCCESS
    } else {
        println!("\nThe sandbox cannot run code until every line above is ok.");
        ExitCode::FAILURE
    }
}
