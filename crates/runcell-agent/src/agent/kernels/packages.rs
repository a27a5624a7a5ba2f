//! What a notebook's kernels installed through runcell's package index,
//! kept with its files as a small manifest ([`MANIFEST`], one
//! `project==version` a line), so that every later kernel of the notebook
//! (after Re-run all, a restart, an idle close, in a fork) installs the same
//! again before its first run: from the server's cache, so it never leaves
//! the machine.

use crate::session::uploads::Uploads;
use runcell_protocol::SessionId;
use runcell_sandbox::files::Contents;
use runcell_sandbox::{Language, Limits, RunRequest, SandboxSession};

/// Where the manifest is kept (a dot-file: not among the person's files).
pub(super) const MANIFEST: &str = "/home/user/.runcell/packages.txt";

/// The manifest of `installed`: the last version of each project, in the
/// order first installed; anything that is not a plain name and version
/// (they come from the index, which checked them) is left out.
fn manifest(installed: &[(String, String)]) -> String {
    let plain = |text: &str, extra: &str| {
        !text.is_empty()
            && text.len() <= 100
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let mut lines: Vec<(&str, &str)> = Vec::new();
    for (project, version) in installed {
        if !plain(project, "-._") || !plain(version, "-._+!") {
            continue;
        }
        match lines.iter_mut().find(|(p, _)| p == project) {
            Some(line) => line.1 = version,
            None => lines.push((project, version)),
        }
    }
    lines
        .iter()
        .map(|(project, version)| format!("{project}=={version}\n"))
        .collect()
}

/// After a run: the session's installs kept, when it has any and they
/// changed.
pub(super) async fn keep(uploads: &Uploads, session: SessionId, live: &dyn SandboxSession) {
    let installed = live.installed_packages();
    if installed.is_empty() {
        return;
    }
    let text = manifest(&installed);
    if uploads.read(session, MANIFEST).await.ok().as_deref() == Some(text.as_bytes()) {
        return;
    }
    let bytes = Contents::from(text.into_bytes());
    if let Err(err) = uploads.save(session, MANIFEST, bytes, true, None).await {
        tracing::warn!(%err, "the session's installed packages are not kept");
    }
}

/// A new kernel, its kept files put back: installs what the manifest names
/// (each as it was, without resolving again), before anything runs.
pub(super) async fn reinstall(kernel: &dyn SandboxSession) {
    let request = RunRequest {
        code: format!("pip install --no-deps --quiet --disable-pip-version-check -r {MANIFEST}"),
        language: Language::Bash,
        limits: Limits::default(),
        env: Vec::new(),
        cwd: None,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    match kernel.run(&request, None, &cancel).await {
        Ok(outcome) if outcome.error.is_none() && outcome.exit_code == Some(0) => {
            tracing::info!("the notebook's packages were installed again");
        }
        Ok(outcome) => tracing::warn!(
            exit_code = ?outcome.exit_code,
            error = outcome.error.as_ref().map(|e| e.value.as_str()),
            "the notebook's packages could not all be installed again"
        ),
        Err(err) => tracing::warn!(%err, "the notebook's packages could not be installed again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_names_each_project_once_at_its_last_version() {
        let installed = [
            ("humanize".to_string(), "4.8.0".to_string()),
            ("six".to_string(), "1.16.0".to_string()),
            ("humanize".to_string(), "4.9.0".to_string()),
            ("evil\n--index-url".to_string(), "1".to_string()),
            ("x".to_string(), "1 -e .".to_string()),
        ];
        assert_eq!(manifest(&installed), "humanize==4.9.0\nsix==1.16.0\n");
    }
}
