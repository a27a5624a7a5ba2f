//! The sandboxes runcell serves through E2B's protocol: each one is a
//! sandbox session of the local jail, owned by the API key that created it
//! (so it counts under that key's limits), with E2B's extras: a template
//! name, metadata, environment variables, a timeout, access tokens and code
//! contexts. The HTTP side is `http/e2b/`.

mod kernel_code;
mod process;

pub use process::{DEFAULT_KEEPALIVE, ProcessOptions, ProcessStep};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::kernel_code::{E2B_FORMATTERS, has_kernel, restore_env_code, set_env_code, setup_code};
use super::protocol::{self, ContextJson, ListedSandbox, NewSandbox, SandboxJson};
use crate::auth::Caller;
use crate::code_api::{CodeApi, CodeApiError};
use runcell_core::clock::now_ms;
use runcell_sandbox::sessions::SandboxSessions;
use runcell_sandbox::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError, SandboxSession,
    SandboxSessionExt, limit_error,
};

/// Templates this server offers: all are the local jail's one environment.
pub const TEMPLATES: [&str; 3] = [protocol::DEFAULT_TEMPLATE, "base", "runcell"];

#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    #[error("sandbox {0} not found")]
    NotFound(String),
    #[error("template '{0}' not found: this server offers {offered}", offered = TEMPLATES.join(", "))]
    UnknownTemplate(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("invalid access token for sandbox {0}")]
    Unauthorized(String),
    #[error(transparent)]
    Api(#[from] CodeApiError),
}

impl From<SandboxError> for ServedError {
    fn from(err: SandboxError) -> Self {
        Self::Api(CodeApiError::Sandbox(err))
    }
}

/// Settings of the E2B-compatible endpoints.
#[derive(Clone, Debug)]
pub struct ServedSettings {
    /// The longest timeout a sandbox may ask for.
    pub max_timeout: Duration,
    /// The limits of a run (wall time raised to E2B's own default).
    pub limits: Limits,
    pub memory_mb: u64,
    pub disk_mb: u64,
    pub cpu_count: u32,
}

/// A revoked key's sandboxes are killed.
#[async_trait::async_trait]
impl crate::auth::revocation::HeldByKey for Served {
    fn what(&self) -> &'static str {
        "E2B sandboxes"
    }

    async fn close_key(&self, key_id: &str) -> usize {
        let ids: Vec<String> = {
            let mut all = self.sandboxes.lock();
            let ids: Vec<String> = all
                .values()
                .filter(|s| s.owner == key_id)
                .map(|s| s.id.clone())
                .collect();
            for id in &ids {
                all.remove(id);
            }
            ids
        };
        for id in &ids {
            if let Err(err) = self.sessions.delete(id).await {
                tracing::debug!(%err, "a revoked key's sandbox was closed already");
            }
        }
        ids.len()
    }
}

/// One served sandbox.
pub struct ServedSandbox {
    pub id: String,
    /// The API key that made it.
    pub owner: String,
    pub template: String,
    pub metadata: BTreeMap<String, String>,
    pub env_vars: BTreeMap<String, String>,
    pub envd_token: String,
    pub traffic_token: String,
    pub started_ms: u64,
    end_ms: Mutex<u64>,
    /// Contexts in the order they were made, as E2B lists them; the
    /// defaults (one per language, first) have the language's name as id
    /// and run in the session's own kernel or processes.
    contexts: Mutex<Vec<ContextJson>>,
    executions: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for ServedSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedSandbox")
            .field("id", &self.id)
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl ServedSandbox {
    pub fn end_ms(&self) -> u64 {
        *self.end_ms.lock()
    }

    /// What create and connect answer.
    pub fn json(&self) -> SandboxJson {
        SandboxJson {
            template_id: self.template.clone(),
            alias: Some(self.template.clone()),
            sandbox_id: self.id.clone(),
            client_id: "runcell".into(),
            envd_version: protocol::ENVD_VERSION.into(),
            envd_access_token: Some(self.envd_token.clone()),
            traffic_access_token: Some(self.traffic_token.clone()),
            domain: None,
        }
    }

    pub fn listed(&self, settings: &ServedSettings) -> ListedSandbox {
        ListedSandbox {
            template_id: self.template.clone(),
            alias: Some(self.template.clone()),
            sandbox_id: self.id.clone(),
            client_id: "runcell".into(),
            started_at: protocol::rfc3339(self.started_ms),
            end_at: protocol::rfc3339(self.end_ms()),
            cpu_count: settings.cpu_count,
            memory_mb: settings.memory_mb,
            disk_size_mb: settings.disk_mb,
            state: "running".into(),
            envd_version: protocol::ENVD_VERSION.into(),
            metadata: self.metadata.clone(),
        }
    }

    /// Whether `token` is this sandbox's envd token (compared in constant
    /// time).
    pub fn envd_token_is(&self, token: &str) -> bool {
        same(token, &self.envd_token)
    }

    pub fn traffic_token_is(&self, token: &str) -> bool {
        same(token, &self.traffic_token)
    }

    /// The key that owns the sandbox, as a caller: its work counts under
    /// that key's limits.
    fn caller(&self) -> Caller {
        Caller {
            key_id: self.owner.clone(),
            key_name: String::new(),
            user_id: None,
        }
    }

    pub fn contexts(&self) -> Vec<ContextJson> {
        self.contexts.lock().clone()
    }

    fn context(&self, id: &str) -> Option<ContextJson> {
        self.contexts.lock().iter().find(|c| c.id == id).cloned()
    }

    /// The next execution number of a context.
    fn next_execution(&self, context: &str) -> u64 {
        let mut counts = self.executions.lock();
        let count = counts.entry(context.to_string()).or_insert(0);
        *count += 1;
        *count
    }
}

/// Whether two tokens are the same, in time that does not depend on where
/// they differ (only on their lengths).
fn same(a: &str, b: &str) -> bool {
    subtle::ConstantTimeEq::ct_eq(a.as_bytes(), b.as_bytes()).into()
}

/// runcell's language for a code interpreter language name.
pub fn language(name: &str) -> Result<Language, ServedError> {
    match name {
        "python" => Ok(Language::Python),
        "javascript" => Ok(Language::Javascript),
        "typescript" => Ok(Language::Typescript),
        "r" => Ok(Language::R),
        "java" => Ok(Language::Java),
        "bash" => Ok(Language::Bash),
        "c" => Ok(Language::C),
        other => Err(ServedError::BadRequest(format!(
            "language '{other}' is not available here (python, javascript, typescript, r, java, bash, c)"
        ))),
    }
}

/// A command to run in a sandbox's home (envd's `Start`).
#[derive(Debug, Default)]
pub struct Command {
    /// Bash source.
    pub script: String,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    /// Its time limit, at most the server's.
    pub wall: Option<Duration>,
}

/// Where an execution runs.
#[derive(Debug)]
pub struct Target {
    pub language: Language,
    /// A context of the session's own; `None` for the default ones.
    pub context: Option<String>,
    /// The context id the execution is counted under.
    pub counted_as: String,
}

pub struct Served {
    code_api: Arc<CodeApi>,
    sessions: Arc<SandboxSessions>,
    settings: ServedSettings,
    sandboxes: Mutex<HashMap<String, Arc<ServedSandbox>>>,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served").finish_non_exhaustive()
    }
}

fn token(prefix: &str) -> String {
    use base64::Engine;
    let bytes: [u8; 24] = rand::random();
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

impl Served {
    pub fn new(
        code_api: Arc<CodeApi>,
        sessions: Arc<SandboxSessions>,
        settings: ServedSettings,
    ) -> Self {
        Self {
            code_api,
            sessions,
            settings,
            sandboxes: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> &ServedSettings {
        &self.settings
    }

    fn timeout(&self, secs: Option<u64>) -> Duration {
        // E2B's API default is 15 s; its SDKs send 300.
        Duration::from_secs(secs.unwrap_or(15).max(1)).min(self.settings.max_timeout)
    }

    /// A new sandbox of the caller's.
    pub async fn create(
        &self,
        caller: &Caller,
        new: NewSandbox,
    ) -> Result<Arc<ServedSandbox>, ServedError> {
        let template = new.template_id.trim().to_string();
        if !TEMPLATES.contains(&template.as_str()) {
            return Err(ServedError::UnknownTemplate(template));
        }
        let timeout = self.timeout(new.timeout);
        let info = self
            .code_api
            .create_session(caller, Language::Python, Some(self.sessions.backend()))
            .await?;
        let id = info.session_id;
        self.sessions.set_deadline(&id, Instant::now() + timeout);
        let now = now_ms();
        let defaults = ["python", "javascript"].map(|language| ContextJson {
            id: language.into(),
            language: language.into(),
            cwd: protocol::HOME.into(),
        });
        // As in E2B's own sandboxes, code can tell where it runs.
        let mut env_vars = new.env_vars;
        env_vars.insert("E2B_SANDBOX".into(), "true".into());
        env_vars.insert("E2B_SANDBOX_ID".into(), id.clone());
        let sandbox = Arc::new(ServedSandbox {
            id: id.clone(),
            owner: caller.key_id.clone(),
            template,
            metadata: new.metadata,
            env_vars,
            envd_token: token("envd_"),
            traffic_token: token("traffic_"),
            started_ms: now,
            end_ms: Mutex::new(now + runcell_core::clock::millis(timeout)),
            contexts: Mutex::new(defaults.into_iter().collect()),
            executions: Mutex::new(HashMap::new()),
        });
        self.sandboxes.lock().insert(id, Arc::clone(&sandbox));
        if let Err(e) = self.prepare(&sandbox).await {
            let _ = self.kill(caller, &sandbox.id).await;
            return Err(e);
        }
        tracing::info!(sandbox.id = %sandbox.id, "E2B sandbox created");
        Ok(sandbox)
    }

    /// A live sandbox by id, whoever owns it (the data plane checks tokens).
    pub fn get(&self, id: &str) -> Result<Arc<ServedSandbox>, ServedError> {
        let found = self.sandboxes.lock().get(id).cloned();
        match found {
            // Its session may have been closed (timed out, deleted).
            Some(sandbox) if self.sessions.contains(id) => Ok(sandbox),
            Some(_) => {
                self.sandboxes.lock().remove(id);
                Err(ServedError::NotFound(id.to_string()))
            }
            None => Err(ServedError::NotFound(id.to_string())),
        }
    }

    /// A sandbox of the caller's.
    pub fn get_own(&self, caller: &Caller, id: &str) -> Result<Arc<ServedSandbox>, ServedError> {
        self.get(id)
            .ok()
            .filter(|s| s.owner == caller.key_id)
            .ok_or_else(|| ServedError::NotFound(id.to_string()))
    }

    /// The caller's sandboxes whose metadata holds every pair of `metadata`.
    pub fn list(
        &self,
        caller: &Caller,
        metadata: &BTreeMap<String, String>,
    ) -> Vec<Arc<ServedSandbox>> {
        let candidates: Vec<Arc<ServedSandbox>> = self
            .sandboxes
            .lock()
            .values()
            .filter(|s| s.owner == caller.key_id)
            .cloned()
            .collect();
        let mut live: Vec<Arc<ServedSandbox>> = candidates
            .into_iter()
            .filter(|s| self.get(&s.id).is_ok())
            .filter(|s| metadata.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
            .collect();
        live.sort_by_key(|s| s.started_ms);
        live
    }

    /// Restarts the sandbox's clock: it now ends `secs` from now.
    pub fn set_timeout(
        &self,
        caller: &Caller,
        id: &str,
        secs: Option<u64>,
    ) -> Result<Arc<ServedSandbox>, ServedError> {
        let sandbox = self.get_own(caller, id)?;
        let timeout = self.timeout(secs);
        if !self.sessions.set_deadline(id, Instant::now() + timeout) {
            return Err(ServedError::NotFound(id.to_string()));
        }
        *sandbox.end_ms.lock() = now_ms() + runcell_core::clock::millis(timeout);
        Ok(sandbox)
    }

    /// Kills a sandbox: its session, files and processes go.
    pub async fn kill(&self, caller: &Caller, id: &str) -> Result<(), ServedError> {
        self.get_own(caller, id)?;
        self.sandboxes.lock().remove(id);
        self.code_api
            .delete_session(caller, id)
            .await
            .map_err(|_| ServedError::NotFound(id.to_string()))?;
        tracing::info!(sandbox.id = %id, "E2B sandbox killed");
        Ok(())
    }

    /// The session behind a sandbox.
    pub fn session(&self, sandbox: &ServedSandbox) -> Result<Arc<dyn SandboxSession>, ServedError> {
        self.sessions
            .session(&sandbox.id)
            .ok_or_else(|| ServedError::NotFound(sandbox.id.clone()))
    }

    /// A new code context.
    pub async fn create_context(
        &self,
        sandbox: &ServedSandbox,
        language: Option<&str>,
        cwd: Option<&str>,
    ) -> Result<ContextJson, ServedError> {
        let name = protocol::normalize_language(language);
        let lang = language_of(&name)?;
        let cwd = cwd.unwrap_or(protocol::HOME).to_string();
        let session = self.session(sandbox)?;
        // A context is a kernel: its start counts as a run of the owner's.
        let _starting = self.code_api.admit_kernel_start(&sandbox.caller())?;
        let id = session.create_context(lang, Some(&cwd)).await?;
        let code = setup_code(lang, &sandbox.env_vars);
        if !code.is_empty() {
            let request = self.request(code, lang, None);
            let setup = session
                .run_in_context(&id, &request, None, &CancellationToken::new())
                .await;
            if let Err(err) = setup {
                // Not listed, it could never be deleted: it would hold one
                // of the sandbox's places for good.
                if let Err(gone) = session.delete_context(&id).await {
                    tracing::debug!(%gone, "a context whose setup failed was gone already");
                }
                return Err(err.into());
            }
        }
        let context = ContextJson {
            id: id.clone(),
            language: name,
            cwd,
        };
        sandbox.contexts.lock().push(context.clone());
        Ok(context)
    }

    pub async fn restart_context(
        &self,
        sandbox: &ServedSandbox,
        id: &str,
    ) -> Result<(), ServedError> {
        let context = sandbox.context(id).ok_or_else(|| context_not_found(id))?;
        if context.id == context.language {
            // A default context: its state is the session's own kernel's.
            return Err(ServedError::BadRequest(
                "the default contexts cannot be restarted here".into(),
            ));
        }
        let session = self.session(sandbox)?;
        let _starting = self.code_api.admit_kernel_start(&sandbox.caller())?;
        session.restart_context(id).await?;
        sandbox.executions.lock().remove(id);
        // The restarted kernel is made ready as a new context is (E2B's
        // formatters, the sandbox's variables).
        let lang = language_of(&context.language)?;
        let code = setup_code(lang, &sandbox.env_vars);
        if !code.is_empty() {
            let request = self.request(code, lang, None);
            session
                .run_in_context(id, &request, None, &CancellationToken::new())
                .await?;
        }
        Ok(())
    }

    pub async fn delete_context(
        &self,
        sandbox: &ServedSandbox,
        id: &str,
    ) -> Result<(), ServedError> {
        let context = sandbox.context(id).ok_or_else(|| context_not_found(id))?;
        if context.id != context.language {
            self.session(sandbox)?.delete_context(id).await?;
        }
        sandbox.contexts.lock().retain(|c| c.id != id);
        Ok(())
    }

    /// Where an execution asked for with `context_id` or `language` runs.
    pub fn target(
        &self,
        sandbox: &ServedSandbox,
        context_id: Option<&str>,
        language: Option<&str>,
    ) -> Result<Target, ServedError> {
        match (context_id, language) {
            (Some(_), Some(_)) => Err(ServedError::BadRequest(
                "Only one of context_id or language can be provided".into(),
            )),
            (Some(id), None) => {
                let context = sandbox.context(id).ok_or_else(|| context_not_found(id))?;
                let language = language_of(&context.language)?;
                let own = context.id != context.language;
                Ok(Target {
                    language,
                    context: own.then(|| id.to_string()),
                    counted_as: id.to_string(),
                })
            }
            (None, language) => {
                let name = protocol::normalize_language(language);
                Ok(Target {
                    language: language_of(&name)?,
                    context: None,
                    counted_as: name,
                })
            }
        }
    }

    fn request(&self, code: String, language: Language, wall: Option<Duration>) -> RunRequest {
        let mut limits = self.settings.limits.clone();
        if let Some(wall) = wall {
            limits.wall = wall.min(limits.wall);
        }
        RunRequest {
            code,
            language,
            limits,
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Runs code in a sandbox under its owner's limits; events stream to
    /// `events`. Returns the execution's number first through `count`.
    pub async fn execute(
        &self,
        sandbox: &ServedSandbox,
        target: Target,
        code: String,
        env_vars: &BTreeMap<String, String>,
        events: mpsc::Sender<RunEvent>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ServedError> {
        let caller = sandbox.caller();
        // A kernel keeps its environment: the sandbox's variables and the
        // run's own are set by a silent cell before (a kernel started
        // later, or restarted, gets them too) and the run's own undone by
        // one after, as E2B's own server does. A process gets them as its
        // environment.
        let kernel = has_kernel(target.language);
        let mut env: BTreeMap<String, String> = sandbox.env_vars.clone();
        env.extend(env_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        if kernel && !env.is_empty() {
            self.silent(sandbox, &target, set_env_code(target.language, &env))
                .await?;
        }
        let mut request = self.request(code, target.language, None);
        if !kernel {
            request.env = env.into_iter().collect();
        }
        let admitted = self
            .code_api
            .admit(&caller, request, Some(sandbox.id.clone()), None)?
            .in_context(target.context.clone());
        let outcome = self.code_api.run(admitted, Some(events), cancel).await;
        // A Python kernel that was lost came back without E2B's formatters.
        let lost = outcome.as_ref().is_ok_and(|o| {
            o.error.as_ref().is_some_and(|e| {
                [
                    limit_error::KERNEL_DIED,
                    limit_error::MEMORY,
                    limit_error::KERNEL_PROTOCOL,
                ]
                .contains(&e.name.as_str())
            })
        });
        if lost && target.language == Language::Python {
            let _ = self
                .silent(sandbox, &target, E2B_FORMATTERS.to_string())
                .await;
        }
        if kernel && !env_vars.is_empty() {
            let keys: Vec<&String> = env_vars.keys().collect();
            let restore = restore_env_code(target.language, &keys, &sandbox.env_vars);
            let _ = self.silent(sandbox, &target, restore).await;
        }
        Ok(outcome?)
    }

    /// The number the next execution in `target` gets.
    pub fn count(&self, sandbox: &ServedSandbox, target: &Target) -> u64 {
        sandbox.next_execution(&target.counted_as)
    }

    async fn silent(
        &self,
        sandbox: &ServedSandbox,
        target: &Target,
        code: String,
    ) -> Result<(), ServedError> {
        let session = self.session(sandbox)?;
        let request = self.request(code, target.language, Some(Duration::from_secs(10)));
        let cancel = CancellationToken::new();
        match &target.context {
            Some(context) => {
                session
                    .run_in_context(context, &request, None, &cancel)
                    .await?
            }
            None => session.run(&request, None, &cancel).await?,
        };
        Ok(())
    }

    /// Readies a new sandbox's Python kernel as E2B's template does (its
    /// formatters, [`E2B_FORMATTERS`]) and sets its environment variables.
    pub async fn prepare(&self, sandbox: &ServedSandbox) -> Result<(), ServedError> {
        let target = Target {
            language: Language::Python,
            context: None,
            counted_as: "python".into(),
        };
        let code = setup_code(Language::Python, &sandbox.env_vars);
        self.silent(sandbox, &target, code).await
    }

    /// Runs a command (envd's `process.Process/Start`) in the sandbox's
    /// home, as Bash, under the owner's limits.
    pub async fn run_command(
        &self,
        sandbox: &ServedSandbox,
        command: Command,
        events: mpsc::Sender<RunEvent>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ServedError> {
        let caller = sandbox.caller();
        let env: BTreeMap<String, String> = sandbox
            .env_vars
            .iter()
            .chain(&command.env)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut request = self.request(command.script, Language::Bash, command.wall);
        request.env = env.into_iter().collect();
        request.cwd = command.cwd;
        let admitted = self
            .code_api
            .admit(&caller, request, Some(sandbox.id.clone()), None)?;
        Ok(self.code_api.run(admitted, Some(events), cancel).await?)
    }
}

fn context_not_found(id: &str) -> ServedError {
    ServedError::NotFound(format!("Context {id}"))
}

fn language_of(name: &str) -> Result<Language, ServedError> {
    language(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
        assert!(same("", ""));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn code_interpreter_languages_map_to_runcells() {
        assert_eq!(language("python").unwrap(), Language::Python);
        assert_eq!(language("typescript").unwrap(), Language::Typescript);
        assert_eq!(language("r").unwrap(), Language::R);
        assert_eq!(language("java").unwrap(), Language::Java);
        assert!(language("cobol").is_err());
    }
}
