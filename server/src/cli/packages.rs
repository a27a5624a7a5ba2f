//! `runcell packages fetch -r requirements.txt`: the index's cache filled
//! ahead, through a jail, as a session's installs would fill it.

use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::PackagesCommand;
use runcell_sandbox::jail::{JailConfig, JailPackages, JailSandbox, shell_quote};
use runcell_sandbox::packages::{PackageNote, index_for_jails};
use runcell_sandbox::{Language, RunEvent, RunRequest, Sandbox};
use runcell_server::config::Config;

/// The most a fetch may take.
const FETCH_WALL: Duration = Duration::from_secs(30 * 60);
/// The largest requirements file read.
const MAX_REQUIREMENTS_BYTES: u64 = 256 * 1024;

pub async fn run(command: &PackagesCommand) -> ExitCode {
    let config = match command.settings().load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let PackagesCommand::Fetch { requirements, .. } = command;
    match fetch(requirements, &config).await {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("runcell: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The script the jail runs: pip resolves the requirements as a session's
/// install would (against what the sandbox's Python has), downloading each
/// file through the index, and installs nothing.
fn script(requirements: &str) -> String {
    format!(
        "printf '%s' {} > /tmp/requirements.txt\npip install --dry-run --no-cache-dir -r /tmp/requirements.txt\n",
        shell_quote(requirements)
    )
}

async fn fetch(path: &std::path::Path, config: &Config) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if size > MAX_REQUIREMENTS_BYTES {
        return Err(format!(
            "{} is over {} KiB",
            path.display(),
            MAX_REQUIREMENTS_BYTES / 1024
        ));
    }
    let requirements =
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let index = index_for_jails(&config.packages, &config.data_dir).ok_or(
        "installing packages is off (packages.mode = off), or the index could not start (see above)",
    )?;
    if index.config().offline {
        return Err("packages.offline is on: a fetch needs the upstream index".into());
    }
    let mut jail_config = JailConfig::from_settings(&config.sandbox);
    jail_config.packages = Some(JailPackages(index.clone()));
    let mut limits = jail_config.max_limits.clone();
    limits.wall = FETCH_WALL;
    let jail = JailSandbox::new(jail_config);
    if let Some(reason) = jail.unavailable() {
        return Err(format!("the jail is unavailable: {reason}"));
    }
    let (events, mut received) = tokio::sync::mpsc::channel(256);
    let printer = tokio::spawn(async move {
        let mut notes = Vec::new();
        while let Some(event) = received.recv().await {
            match event {
                RunEvent::Stdout { text, .. } => print!("{text}"),
                RunEvent::Stderr { text, .. } => eprint!("{text}"),
                RunEvent::Result { data, .. } => {
                    if let Some(note) = PackageNote::from_bundle(&data) {
                        println!("{}", note.text());
                        notes.push(note);
                    }
                }
                RunEvent::Clear { .. }
                | RunEvent::Update { .. }
                | RunEvent::Page { .. }
                | RunEvent::Error { .. } => {}
            }
        }
        notes
    });
    let request = RunRequest {
        code: script(&requirements),
        language: Language::Bash,
        limits,
        env: Vec::new(),
        cwd: None,
    };
    let outcome = jail
        .run(request, Some(events), CancellationToken::new())
        .await
        .map_err(|e| e.to_string())?;
    let notes = printer.await.unwrap_or_default();
    let served: Vec<&PackageNote> = notes.iter().filter(|n| n.refused.is_none()).collect();
    let fetched: Vec<&&PackageNote> = served.iter().filter(|n| !n.cached).collect();
    let refused = notes.len() - served.len();
    let bytes: u64 = fetched.iter().map(|n| n.size).sum();
    if outcome.exit_code != Some(0) || outcome.error.is_some() {
        return Err(format!(
            "pip could not resolve the requirements ({} refused by the index); nothing more was fetched",
            refused
        ));
    }
    Ok(format!(
        "{} files fetched into {} ({:.1} MB), {} already there, {refused} refused",
        fetched.len(),
        config.data_dir.join("packages").display(),
        bytes as f64 / 1e6,
        served.len() - fetched.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requirements_reach_the_jail_as_written() {
        let text = "humanize==4.9.0\n# it's a comment\n";
        let script = script(text);
        assert!(script.contains(&shell_quote(text)));
        assert!(script.contains("pip install --dry-run"));
    }
}
