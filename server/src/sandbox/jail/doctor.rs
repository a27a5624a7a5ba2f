//! `runcell doctor`: every isolation layer checked, and hello-world in each
//! language inside the jail, as a table.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{JailConfig, JailSandbox};
use crate::sandbox::{Language, Limits, RunRequest, Sandbox};

/// One line of the report.
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

fn hello(language: Language) -> (&'static str, &'static str) {
    match language {
        Language::Python => (
            "import os, socket\nprint('hello', os.getuid(), socket.gethostname())",
            "hello",
        ),
        Language::Javascript => ("console.log('hello', process.getuid())", "hello"),
        Language::Bash => ("echo hello $(id -u) $(hostname)", "hello"),
        Language::C => (
            "#include <stdio.h>\nint main(void){puts(\"hello\");return 0;}",
            "hello",
        ),
    }
}

/// Runs every check; the report passes when every line is ok.
pub async fn run_checks() -> Vec<Check> {
    let jail = JailSandbox::new(JailConfig::default());
    let jail = jail.as_ref();
    let mut checks = vec![match jail.unavailable() {
        None => Check {
            name: "isolation layers".into(),
            ok: true,
            detail: format!(
                "bubblewrap, setpriv, prlimit, user namespaces, seccomp; cgroups {:?}",
                jail.cgroup_mode()
            ),
        },
        Some(reason) => Check {
            name: "isolation layers".into(),
            ok: false,
            detail: reason.to_string(),
        },
    }];
    if jail.unavailable().is_some() {
        return checks;
    }
    for language in Language::ALL {
        let (code, expect) = hello(language);
        let started = Instant::now();
        let result = jail
            .run(
                RunRequest {
                    code: code.into(),
                    language,
                    limits: Limits::default(),
                },
                None,
                CancellationToken::new(),
            )
            .await;
        let ms = started.elapsed().as_millis();
        checks.push(match result {
            Ok(outcome) if outcome.error.is_none() && outcome.stdout.starts_with(expect) => Check {
                name: format!("{} in the jail", language.name()),
                ok: true,
                detail: format!("{} ({ms} ms)", outcome.stdout.trim()),
            },
            Ok(outcome) => Check {
                name: format!("{} in the jail", language.name()),
                ok: false,
                detail: format!(
                    "{:?}: {}",
                    outcome.error.map(|e| format!("{}: {}", e.name, e.value)),
                    outcome.stderr.trim()
                ),
            },
            Err(e) => Check {
                name: format!("{} in the jail", language.name()),
                ok: false,
                detail: e.to_string(),
            },
        });
    }
    checks
}
