//! A program that failed for want of a module, in a session that can
//! install packages: the turn installs the module's project (`%pip
//! install`, a code cell and a result the person sees, governed by
//! runcell's package index) and runs the program again, once per project a
//! turn. A refusal (the index's policy, a size cap) shows in the install's
//! result, and the model is told it, so that it answers without the package.

use runcell_protocol::CellId;
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::execute::{Ran, RunEnd};
use crate::session::SessionLog;
use runcell_sandbox::Language;

/// Modules whose project has another name (the module, then the project).
const PROJECTS: &[(&str, &str)] = &[
    ("attr", "attrs"),
    ("bs4", "beautifulsoup4"),
    ("Crypto", "pycryptodome"),
    ("cv2", "opencv-python-headless"),
    ("dateutil", "python-dateutil"),
    ("docx", "python-docx"),
    ("dotenv", "python-dotenv"),
    ("fitz", "pymupdf"),
    ("git", "gitpython"),
    ("jwt", "pyjwt"),
    ("magic", "python-magic"),
    ("OpenSSL", "pyopenssl"),
    ("PIL", "pillow"),
    ("pptx", "python-pptx"),
    ("serial", "pyserial"),
    ("skimage", "scikit-image"),
    ("sklearn", "scikit-learn"),
    ("yaml", "pyyaml"),
];

/// The top-level module a failed run's report says is missing
/// (`ModuleNotFoundError: No module named 'a.b'` gives `a`), if it names
/// one that could be a project's.
pub(super) fn missing_module(report: &str) -> Option<&str> {
    let (_, after) = report.split_once("ModuleNotFoundError: No module named '")?;
    let (name, _) = after.split_once('\'')?;
    let top = name.split('.').next()?;
    let plain = !top.is_empty()
        && top.len() <= 100
        && top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !top.starts_with('_');
    plain.then_some(top)
}

/// The project that provides `module`.
pub(super) fn project_of(module: &str) -> String {
    PROJECTS.iter().find(|(m, _)| *m == module).map_or_else(
        || module.replace('_', "-").to_ascii_lowercase(),
        |(_, p)| (*p).to_string(),
    )
}

/// What trying to install came to.
pub(super) enum Installed {
    /// Installed, and the program run again in a code cell of its own.
    RanAgain {
        ran: Ran,
        cell: CellId,
    },
    /// Not installed: what the install printed, for the model.
    Not(String),
    Cancelled,
}

/// What the model is told after the failed program's output when its
/// missing project could not be installed: the install's own last lines
/// (the index's refusal, pip's error), and to do without it.
pub(super) fn not_installed(project: &str, report: &str) -> String {
    let tail: Vec<&str> = report.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!(
        "\n\n(runcell tried to install {project} for this program and could not:\n{}\nDo not import {project}; use the packages that are there.)",
        tail.join("\n")
    )
}

/// Whether pip's output says the project is there now.
fn succeeded(report: &str, project: &str) -> bool {
    let lower = report.to_ascii_lowercase();
    lower.contains("successfully installed")
        || lower.contains(&format!("requirement already satisfied: {project}"))
}

impl Agent {
    /// Installs `project` in a cell of its own, then runs `code` again in
    /// a new code cell pointing at `failed` (its attempt numbered
    /// `attempt`).
    pub(super) async fn install_and_rerun(
        &self,
        session: &SessionLog,
        project: &str,
        code: &str,
        failed: CellId,
        attempt: u32,
        cancel: &CancellationToken,
    ) -> Installed {
        let install = format!("%pip install {project}");
        tracing::info!(project, "a module is missing: installing its project");
        let (installed, _) = self
            .run_shown(session, &install, Language::Python, None, None, cancel)
            .await;
        if installed.end == RunEnd::Cancelled || cancel.is_cancelled() {
            return Installed::Cancelled;
        }
        if installed.end != RunEnd::Ok || !succeeded(&installed.report, project) {
            return Installed::Not(installed.report);
        }
        let (ran, cell) = self
            .run_shown(
                session,
                code,
                Language::Python,
                Some(failed),
                Some(attempt),
                cancel,
            )
            .await;
        Installed::RanAgain { ran, cell }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_module_is_read_from_the_error() {
        let report = "Traceback (most recent call last):\n  File \"<cell>\", line 1\nModuleNotFoundError: No module named 'humanize'\n";
        assert_eq!(missing_module(report), Some("humanize"));
        assert_eq!(
            missing_module("ModuleNotFoundError: No module named 'google.protobuf'"),
            Some("google")
        );
        assert_eq!(missing_module("ImportError: cannot import name 'x'"), None);
        assert_eq!(
            missing_module("ModuleNotFoundError: No module named '../x'"),
            None
        );
        assert_eq!(
            missing_module("ModuleNotFoundError: No module named '_ctypes'"),
            None
        );
        assert_eq!(
            missing_module("ModuleNotFoundError: No module named 'a; rm -rf /'"),
            None
        );
    }

    #[test]
    fn modules_map_to_their_projects() {
        assert_eq!(project_of("sklearn"), "scikit-learn");
        assert_eq!(project_of("PIL"), "pillow");
        assert_eq!(project_of("text_unidecode"), "text-unidecode");
        assert_eq!(project_of("humanize"), "humanize");
    }

    #[test]
    fn pip_output_tells_an_install() {
        assert!(succeeded(
            "Successfully installed humanize-4.9.0\n",
            "humanize"
        ));
        assert!(succeeded(
            "Requirement already satisfied: humanize in /home/user/.local/lib/python3.11/site-packages (4.9.0)",
            "humanize"
        ));
        assert!(!succeeded(
            "ERROR: Could not find a version that satisfies the requirement nope (from versions: none)",
            "nope"
        ));
    }
}
