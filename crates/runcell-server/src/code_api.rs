//! The code-interpreter service that programs use: what the `/v1` routes and
//! the MCP tools share. Every call is made as an API key ([`Caller`]): a key
//! sees only its own sandbox sessions and runs under its own limits.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::{Caller, KeyLimits, Limited, RunPermit};
use crate::person_keys::{KeySessions, KeysOfPeople, PersonRoom};
use runcell_sandbox::backends::Backends;
use runcell_sandbox::files::{FileEntry, HOME};
use runcell_sandbox::sessions::{SandboxSessionError, SandboxSessions, SessionInfo};
use runcell_sandbox::{
    KernelRequest, Language, RunEvent, RunOutcome, RunRequest, SandboxError, SandboxKind,
    SandboxSession,
};

#[derive(Debug, thiserror::Error)]
pub enum CodeApiError {
    /// No such session of this key (another key's session is this too).
    #[error("no sandbox session {0}")]
    NotFound(String),
    #[error("{}", .0.message())]
    Limited(Limited),
    #[error(transparent)]
    Session(SandboxSessionError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A file is there already and replacing it was not asked for.
    #[error("{0} exists already: ask to overwrite it to replace it")]
    Exists(String),
}

impl From<SandboxSessionError> for CodeApiError {
    fn from(err: SandboxSessionError) -> Self {
        match err {
            SandboxSessionError::NotFound(id) => Self::NotFound(id),
            SandboxSessionError::Sandbox(err) => Self::Sandbox(err),
            other => Self::Session(other),
        }
    }
}

impl From<Limited> for CodeApiError {
    fn from(limited: Limited) -> Self {
        runcell_core::metrics::rate_limited(match limited {
            Limited::Rate { .. } => "rate",
            Limited::Concurrency { .. } => "concurrency",
            Limited::SandboxSessions { .. } => "sessions",
            Limited::PersonKernels { .. } => "person_kernels",
        });
        Self::Limited(limited)
    }
}

/// How deep a listing of a session's files goes below the home.
const MAX_LIST_DEPTH: u32 = 8;

fn files_of(
    session: &dyn SandboxSession,
) -> Result<&dyn runcell_sandbox::files::Files, SandboxError> {
    session
        .files()
        .ok_or_else(|| SandboxError::NotSupported("this session's sandbox has no files".into()))
}

pub struct CodeApi {
    backends: Backends,
    limits: Arc<KeyLimits>,
    /// Sessions being opened, per budget ([`Caller::budget`]): counted with
    /// the open ones, so that parallel requests cannot all pass the cap
    /// before any is open.
    opening: Mutex<HashMap<String, usize>>,
    /// Each person's keys seen here, to count what they hold together.
    keys_of_people: KeysOfPeople,
    /// The people's own limits (the accounts), once set.
    people: OnceLock<Arc<dyn PersonRoom>>,
}

impl std::fmt::Debug for CodeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeApi").finish_non_exhaustive()
    }
}

/// One session being opened, counted until it is open or given up (also
/// when the request goes away mid-way).
struct Opening<'a> {
    opening: &'a Mutex<HashMap<String, usize>>,
    budget: String,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut opening = self.opening.lock();
        if let Some(pending) = opening.get_mut(&self.budget) {
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                opening.remove(&self.budget);
            }
        }
    }
}

/// A run admitted under the caller's limits, ready to start. Holding it
/// holds one of the key's run slots.
#[derive(Debug)]
pub struct Admitted {
    pub permit: RunPermit,
    /// The backend it runs on.
    sessions: Arc<SandboxSessions>,
    session: Option<String>,
    /// A context of the session's (E2B's code contexts).
    context: Option<String>,
    request: RunRequest,
}

impl Admitted {
    /// Runs in the session's context `context` instead of its own kernel.
    pub fn in_context(mut self, context: Option<String>) -> Self {
        self.context = context;
        self
    }
}

impl CodeApi {
    pub fn new(backends: Backends, limits: Arc<KeyLimits>) -> Self {
        Self {
            backends,
            limits,
            opening: Mutex::new(HashMap::new()),
            keys_of_people: KeysOfPeople::default(),
            people: OnceLock::new(),
        }
    }

    /// Counts a person's keys' sessions against the person's own limits,
    /// as `people` says them; set once at start.
    pub fn count_people_with(&self, people: Arc<dyn PersonRoom>) {
        if self.people.set(people).is_err() {
            tracing::warn!("the code API's people were set twice; the first stand");
        }
    }

    /// The backends on offer.
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Checks a run before it starts: valid code, a session of the caller's
    /// (if one is named; it runs on the session's backend) or a backend on
    /// offer, a free slot and the rate. Nothing has run yet.
    pub fn admit(
        &self,
        caller: &Caller,
        request: RunRequest,
        session: Option<String>,
        backend: Option<SandboxKind>,
    ) -> Result<Admitted, CodeApiError> {
        runcell_sandbox::validate_code(&request.code)?;
        let sessions = match &session {
            Some(id) => {
                let holding = self
                    .backends
                    .holding(id)
                    .filter(|s| s.get(id, &caller.key_id).is_some())
                    .ok_or_else(|| CodeApiError::NotFound(id.clone()))?;
                if let Some(backend) = backend.filter(|b| *b != holding.backend()) {
                    return Err(SandboxError::InvalidInput(format!(
                        "session {id} runs on {}, not {backend}",
                        holding.backend()
                    ))
                    .into());
                }
                holding
            }
            None => self.backends.get(backend)?,
        };
        let sessions = Arc::clone(sessions);
        let permit = self.limits.start_run(&caller.budget())?;
        Ok(Admitted {
            permit,
            sessions,
            session,
            context: None,
            request,
        })
    }

    /// Admits the start of a kernel of the caller's that is not a session
    /// of its own (an E2B code context made or restarted): it counts as a
    /// run, against the key's rate and its runs under way, until the kernel
    /// is up and the permit dropped. Kernels cost what runs cost (a process,
    /// its memory, a start-up), and their number per session is bounded by
    /// the sandbox, so the rate and concurrency are what is left to cap.
    pub fn admit_kernel_start(&self, caller: &Caller) -> Result<RunPermit, CodeApiError> {
        Ok(self.limits.start_run(&caller.budget())?)
    }

    /// Runs an admitted program to its end, in its session or a fresh
    /// throw-away sandbox; events stream to `events` as they happen.
    ///
    /// The run is a task of its own holding the key's slot: if the caller
    /// goes away (a closed connection, a time limit), the run is cancelled
    /// and the slot is freed only once the program has really stopped.
    pub async fn run(
        &self,
        admitted: Admitted,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, CodeApiError> {
        let Admitted {
            permit,
            sessions,
            session,
            context,
            request,
        } = admitted;
        let _stop_if_dropped = cancel.clone().drop_guard();
        let task = tokio::spawn(async move {
            let outcome = match (session, context) {
                (None, _) => sessions.run_once(request, events, cancel).await?,
                (Some(id), None) => {
                    sessions
                        .run(&id, &request, events.as_ref(), &cancel)
                        .await?
                }
                (Some(id), Some(context)) => {
                    sessions
                        .run_in_context(&id, &context, &request, events.as_ref(), &cancel)
                        .await?
                }
            };
            drop(permit);
            Ok(outcome)
        });
        task.await.unwrap_or_else(|join| {
            tracing::error!(%join, "a run task failed");
            Err(CodeApiError::Sandbox(SandboxError::Internal(
                "the run task failed".into(),
            )))
        })
    }

    /// A new stateful session of the caller's, on `backend` (the default
    /// if `None`).
    pub async fn create_session(
        &self,
        caller: &Caller,
        language: Language,
        backend: Option<SandboxKind>,
    ) -> Result<SessionInfo, CodeApiError> {
        let sessions = Arc::clone(self.backends.get(backend)?);
        if !sessions.languages().contains(&language) {
            return Err(SandboxError::InvalidInput(format!(
                "{} does not run {}",
                sessions.backend(),
                language.name()
            ))
            .into());
        }
        let key = &caller.key_id;
        let budget = caller.budget();
        // A person's room is what their notebooks leave of their limit.
        if let Some(user) = &caller.user_id {
            self.keys_of_people.note(user, key);
        }
        let person_room = match (&caller.user_id, self.people.get()) {
            (Some(user), Some(people)) => Some(people.room_for_keys(user).await),
            _ => None,
        };
        let _opening = {
            let mut opening = self.opening.lock();
            let pending = opening.get(&budget).copied().unwrap_or(0);
            let held = match &caller.user_id {
                Some(user) => self.held_by_person(user),
                None => self.count_of(key),
            };
            self.limits.admit_session(held + pending)?;
            if let Some((room, limit)) = person_room
                && held + pending >= room
            {
                return Err(Limited::PersonKernels { limit }.into());
            }
            *opening.entry(budget.clone()).or_insert(0) += 1;
            Opening {
                opening: &self.opening,
                budget,
            }
        };
        Ok(sessions.create(language, key).await?)
    }

    /// The key's sessions on every backend.
    fn count_of(&self, key: &str) -> usize {
        self.backends.all().iter().map(|s| s.count_of(key)).sum()
    }
}

impl KeySessions for CodeApi {
    /// The sessions of every key of `user`'s seen here, on every backend.
    fn held_by_person(&self, user: &str) -> usize {
        self.keys_of_people
            .of(user)
            .iter()
            .map(|key| self.count_of(key))
            .sum()
    }
}

impl CodeApi {
    pub fn sessions(&self, caller: &Caller) -> Vec<SessionInfo> {
        let mut all: Vec<SessionInfo> = self
            .backends
            .all()
            .iter()
            .flat_map(|s| s.list(&caller.key_id))
            .collect();
        all.sort_by_key(|s| s.created_at_ms);
        all
    }

    pub fn session(&self, caller: &Caller, id: &str) -> Result<SessionInfo, CodeApiError> {
        self.backends
            .holding(id)
            .and_then(|s| s.get(id, &caller.key_id))
            .ok_or_else(|| CodeApiError::NotFound(id.to_string()))
    }

    /// One of the caller's sessions, to reach its files.
    fn session_of(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Arc<dyn SandboxSession>, CodeApiError> {
        let not_found = || CodeApiError::NotFound(id.to_string());
        let sessions = self.backends.holding(id).ok_or_else(not_found)?;
        sessions.get(id, &caller.key_id).ok_or_else(not_found)?;
        sessions.session(id).ok_or_else(not_found)
    }

    /// Everything in the session's home, directories first at each level.
    pub async fn list_files(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Vec<FileEntry>, CodeApiError> {
        let session = self.session_of(caller, id)?;
        Ok(files_of(&*session)?.list(HOME, MAX_LIST_DEPTH).await?)
    }

    pub async fn read_file(
        &self,
        caller: &Caller,
        id: &str,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), CodeApiError> {
        let session = self.session_of(caller, id)?;
        let files = files_of(&*session)?;
        let entry = files.stat(path).await?;
        Ok((entry, files.read(path).await?))
    }

    /// Writes a file into the session's home; an existing one is replaced
    /// only when `overwrite`. Gives the entry and whether one was replaced.
    pub async fn write_file(
        &self,
        caller: &Caller,
        id: &str,
        path: &str,
        bytes: runcell_sandbox::files::Contents,
        overwrite: bool,
    ) -> Result<(FileEntry, bool), CodeApiError> {
        let session = self.session_of(caller, id)?;
        let files = files_of(&*session)?;
        if !overwrite {
            // One step: a file that appears meanwhile is not replaced.
            return match files.create(path, bytes).await? {
                Some(entry) => Ok((entry, false)),
                None => Err(CodeApiError::Exists(files.stat(path).await?.path)),
            };
        }
        let existed = match files.stat(path).await {
            Ok(_) => true,
            Err(SandboxError::NotFound(_)) => false,
            Err(err) => return Err(err.into()),
        };
        Ok((files.write(path, bytes).await?, existed))
    }

    pub async fn delete_file(
        &self,
        caller: &Caller,
        id: &str,
        path: &str,
    ) -> Result<(), CodeApiError> {
        let session = self.session_of(caller, id)?;
        Ok(files_of(&*session)?.remove(path).await?)
    }

    /// Asks the kernel of `language` in one of the caller's sessions a
    /// question that runs no code (completion, inspection…), and gives its
    /// reply's content. The question is asked in a task of its own, seen
    /// through to its end (a kernel started for it is not left half-made)
    /// even if the caller stops waiting.
    pub async fn kernel_request(
        &self,
        caller: &Caller,
        id: &str,
        language: Language,
        request: KernelRequest,
    ) -> Result<serde_json::Map<String, serde_json::Value>, CodeApiError> {
        let session = self.session_of(caller, id)?;
        let task = tokio::spawn(async move { session.kernel_request(language, request).await });
        let reply = task.await.unwrap_or_else(|join| {
            tracing::error!(%join, "a kernel request's task failed");
            Err(SandboxError::Internal(
                "the kernel request's task failed".into(),
            ))
        });
        Ok(reply?)
    }

    /// Counts as a use of one of the caller's sessions (it is not closed as
    /// idle for another idle spell); `false` if it is gone.
    pub fn keep_alive(&self, caller: &Caller, id: &str) -> bool {
        self.session_of(caller, id).is_ok()
    }

    /// Closes one of the caller's sessions, stopping whatever runs in it.
    pub async fn delete_session(&self, caller: &Caller, id: &str) -> Result<(), CodeApiError> {
        let sessions = self
            .backends
            .holding(id)
            .ok_or_else(|| CodeApiError::NotFound(id.to_string()))?;
        Ok(sessions.delete_public(id, &caller.key_id).await?)
    }
}
