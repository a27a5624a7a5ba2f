//! The sandbox backends on offer, each with its sessions: the local jail
//! always (the default), E2B when an `E2B_API_KEY` is configured. Runs and
//! sessions name a backend by its name; a session id is found in whichever
//! backend holds it.

use std::sync::Arc;

use super::SandboxError;
use super::sessions::Sessions;

#[derive(Clone)]
pub struct Backends {
    /// The default first.
    all: Vec<Arc<Sessions>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Backends {
    /// Backends with `default` as the default one.
    pub fn new(default: Arc<Sessions>) -> Self {
        Self { all: vec![default] }
    }

    /// Adds another backend.
    #[must_use]
    pub fn with(mut self, sessions: Arc<Sessions>) -> Self {
        self.all.push(sessions);
        self
    }

    /// Their names (`jail`, `e2b`), the default first.
    pub fn names(&self) -> Vec<&'static str> {
        self.all.iter().map(|s| s.backend()).collect()
    }

    pub fn default_backend(&self) -> &Arc<Sessions> {
        &self.all[0]
    }

    pub fn all(&self) -> &[Arc<Sessions>] {
        &self.all
    }

    /// The backend named `name`, or the default for `None`; an unknown or
    /// unconfigured one is refused, saying what is on offer.
    pub fn get(&self, name: Option<&str>) -> Result<&Arc<Sessions>, SandboxError> {
        let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
            return Ok(self.default_backend());
        };
        self.all
            .iter()
            .find(|s| s.backend() == name)
            .ok_or_else(|| {
                let hint = match name {
                    "e2b" => " (set E2B_API_KEY to offer E2B)",
                    "browser" => " (the browser sandbox runs only in a notebook's own page)",
                    _ => "",
                };
                SandboxError::InvalidInput(format!(
                    "no sandbox backend '{name}' here{hint}; on offer: {}",
                    self.names().join(", ")
                ))
            })
    }

    /// The backend holding the live session `id`.
    pub fn holding(&self, id: &str) -> Option<&Arc<Sessions>> {
        self.all.iter().find(|s| s.contains(id))
    }
}
