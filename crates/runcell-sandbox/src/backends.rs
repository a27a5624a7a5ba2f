//! The sandbox backends on offer, each with its sessions: the local jail
//! always (the default), E2B when an `E2B_API_KEY` is configured. Runs and
//! sessions name a backend by its [`SandboxKind`]; a session id is found in
//! whichever backend holds it.

use std::sync::Arc;

use super::sessions::SandboxSessions;
use super::{SandboxError, SandboxKind};

#[derive(Clone)]
pub struct Backends {
    /// The default first.
    all: Vec<Arc<SandboxSessions>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.kinds()).finish()
    }
}

impl Backends {
    /// Backends with `default` as the default one.
    pub fn new(default: Arc<SandboxSessions>) -> Self {
        Self { all: vec![default] }
    }

    /// Adds another backend.
    #[must_use]
    pub fn with(mut self, sessions: Arc<SandboxSessions>) -> Self {
        self.all.push(sessions);
        self
    }

    /// Which they are, the default first.
    pub fn kinds(&self) -> Vec<SandboxKind> {
        self.all.iter().map(|s| s.backend()).collect()
    }

    pub fn default_backend(&self) -> &Arc<SandboxSessions> {
        &self.all[0]
    }

    pub fn all(&self) -> &[Arc<SandboxSessions>] {
        &self.all
    }

    /// The backend `kind`, or the default for `None`; one not on offer
    /// here is refused, saying what is.
    pub fn get(&self, kind: Option<SandboxKind>) -> Result<&Arc<SandboxSessions>, SandboxError> {
        let Some(kind) = kind else {
            return Ok(self.default_backend());
        };
        self.all
            .iter()
            .find(|s| s.backend() == kind)
            .ok_or_else(|| {
                let hint = match kind {
                    SandboxKind::E2b => " (set E2B_API_KEY to offer E2B)",
                    SandboxKind::Browser => {
                        " (the browser sandbox runs only in a notebook's own page)"
                    }
                    SandboxKind::Jail => "",
                };
                self.not_here(kind.name(), hint)
            })
    }

    /// A backend named as text (blank for the default), for a request
    /// whose body cannot refuse the name itself: a name that is no
    /// [`SandboxKind`] is refused as one not on offer.
    pub fn named(&self, name: Option<&str>) -> Result<Option<SandboxKind>, SandboxError> {
        match name.map(SandboxKind::pick).transpose() {
            Ok(kind) => Ok(kind.flatten()),
            Err(unknown) => Err(self.not_here(&unknown.0, "")),
        }
    }

    fn not_here(&self, name: &str, hint: &str) -> SandboxError {
        let offered: Vec<_> = self.kinds().iter().map(|k| k.name()).collect();
        SandboxError::InvalidInput(format!(
            "no sandbox backend '{name}' here{hint}; on offer: {}",
            offered.join(", ")
        ))
    }

    /// The backend holding the live session `id`.
    pub fn holding(&self, id: &str) -> Option<&Arc<SandboxSessions>> {
        self.all.iter().find(|s| s.contains(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages a request naming a backend gets: the same whether it
    /// came typed (`get`) or as text (`named`, MCP).
    #[tokio::test]
    async fn names_are_read_and_refused_saying_what_is_on_offer() {
        let jail: Arc<dyn crate::Sandbox> =
            crate::jail::JailSandbox::new(crate::jail::JailConfig::default());
        let backends = &Backends::new(SandboxSessions::new(
            jail,
            crate::sessions::SessionSettings {
                pool_size: 0,
                ..Default::default()
            },
        ));
        assert_eq!(backends.kinds(), [SandboxKind::Jail]);
        let refusal = |result: Result<_, SandboxError>| result.err().map(|e| e.to_string());
        for (name, want) in [
            (None, Ok(None)),
            (Some(""), Ok(None)),
            (Some(" jail "), Ok(Some(SandboxKind::Jail))),
            (Some("e2b"), Ok(Some(SandboxKind::E2b))),
            (
                Some("mars"),
                Err("no sandbox backend 'mars' here; on offer: jail".to_string()),
            ),
        ] {
            let got = backends.named(name).map_err(|e| e.to_string());
            assert_eq!(got, want, "{name:?}");
        }
        assert!(
            backends
                .get(None)
                .is_ok_and(|s| s.backend() == SandboxKind::Jail)
        );
        assert_eq!(
            refusal(backends.get(Some(SandboxKind::E2b))),
            Some(
                "no sandbox backend 'e2b' here (set E2B_API_KEY to offer E2B); on offer: jail"
                    .into()
            )
        );
        assert_eq!(
            refusal(backends.get(Some(SandboxKind::Browser))),
            Some("no sandbox backend 'browser' here (the browser sandbox runs only in a notebook's own page); on offer: jail".into())
        );
    }
}
