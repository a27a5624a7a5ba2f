//! A Jupyter kernel gateway: the kernels part of Jupyter Server's API (what
//! JupyterLab's gateway client and Kernel Gateway's clients use), served
//! under `/jupyter`, on runcell's sandboxes.
//!
//! A gateway kernel is a sandbox session of the key that started it (listed
//! by `/v1/sessions` too, counted under the key's sessions), and each cell a
//! run under the key's rate and concurrency, with the server's limits (the
//! longest wall time it allows). Another key's kernels are not found.
//!
//! What a client can make the server hold is bounded (`[jupyter]`): a frame
//! is read into a few typed fields ([`message`]), queued cells and unsent
//! frames are charged to the connection's and its key's byte budgets
//! ([`budget`], [`connection`]), and restarts are coalesced and governed
//! ([`restarts`]).

pub mod budget;
pub mod connection;
pub mod kernel;
pub mod message;
mod outbound;
pub mod restarts;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Caller;
use crate::code_api::{CodeApi, CodeApiError};
use crate::config::JupyterConfig;
use budget::Budgets;
pub use connection::Connection;
pub use kernel::{Asked, JupyterKernel, KernelModel, KernelSettings, ReplyTo};
pub use outbound::Next;
use restarts::{Begin, Joined, RestartError, Ticket};
use runcell_sandbox::{Language, Limits};

/// The default kernel spec.
pub const KERNEL_NAME: &str = "python3";

/// The kernel specs on offer: a name, the language its cells run as, and
/// how JupyterLab's launcher shows it.
pub const SPECS: [(&str, Language, &str); 5] = [
    (KERNEL_NAME, Language::Python, "Python 3 (runcell)"),
    ("javascript", Language::Javascript, "JavaScript (runcell)"),
    ("typescript", Language::Typescript, "TypeScript (runcell)"),
    ("ir", Language::R, "R (runcell)"),
    ("java", Language::Java, "Java (runcell)"),
];

/// The language of a spec name.
fn spec(name: &str) -> Result<(Language, &'static str), GatewayError> {
    SPECS
        .iter()
        .find(|(spec, _, _)| *spec == name)
        .map(|&(_, language, display)| (language, display))
        .ok_or_else(|| GatewayError::NoSuchSpec(name.to_string()))
}
/// How often connected kernels are kept from being closed as idle, and
/// kernels whose session is gone are forgotten.
const MAINTAIN_EVERY: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No such kernel of this key (another key's is this too).
    #[error("Kernel does not exist: {0}")]
    NotFound(String),
    #[error("No such kernel named {0}; this gateway offers python3, javascript, typescript and ir")]
    NoSuchSpec(String),
    #[error(transparent)]
    Api(#[from] CodeApiError),
    #[error(transparent)]
    Restart(#[from] RestartError),
}

pub struct Gateway {
    code_api: Arc<CodeApi>,
    /// What every cell may use: the server's most, its longest wall time
    /// included (notebooks run long cells).
    limits: Limits,
    kernels: Mutex<HashMap<String, Arc<JupyterKernel>>>,
    python_version: String,
    tasks: TaskTracker,
    settings: KernelSettings,
    budgets: Budgets,
    /// The largest frame a client may send, in bytes.
    max_message_bytes: usize,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl Gateway {
    pub fn new(
        code_api: Arc<CodeApi>,
        limits: Limits,
        config: &JupyterConfig,
        tasks: TaskTracker,
    ) -> Arc<Self> {
        Arc::new(Self {
            code_api,
            limits,
            kernels: Mutex::new(HashMap::new()),
            python_version: python_version(),
            tasks,
            settings: KernelSettings {
                max_queued_cells: config.max_queued_cells,
                messages_per_second: config.messages_per_second,
                restarts_per_minute: config.restarts_per_minute,
            },
            budgets: Budgets::new(config.connection_budget_mib, config.key_budget_mib),
            max_message_bytes: config.max_message_mib.saturating_mul(1024 * 1024),
        })
    }

    /// The largest frame a client may send, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// A new connection of the caller's to one of its kernels, within its
    /// key's budget.
    pub fn connect(&self, caller: &Caller, id: &str) -> Result<Connection, GatewayError> {
        let kernel = self.kernel(caller, id)?;
        Ok(Connection::open(
            kernel,
            self.budgets.connection(&caller.key_id),
        ))
    }

    /// Keeps connected kernels' sessions open and forgets kernels whose
    /// session was closed (idle, or through `/v1/sessions`), until shutdown.
    pub fn spawn_maintenance(self: &Arc<Self>, shutdown: CancellationToken) {
        let this = Arc::clone(self);
        self.tasks.spawn(async move {
            let mut every = tokio::time::interval(MAINTAIN_EVERY);
            loop {
                tokio::select! {
                    _ = every.tick() => this.maintain(),
                    () = shutdown.cancelled() => break,
                }
            }
            let all: Vec<Arc<JupyterKernel>> =
                this.kernels.lock().drain().map(|(_, k)| k).collect();
            for kernel in all {
                kernel.closed.cancel();
            }
        });
    }

    fn maintain(&self) {
        let kernels: Vec<Arc<JupyterKernel>> = self.kernels.lock().values().cloned().collect();
        for kernel in kernels {
            let connected = kernel.model().connections > 0;
            let alive = if connected {
                self.code_api
                    .keep_alive(&kernel.owner, &kernel.session_id())
            } else {
                self.code_api
                    .session(&kernel.owner, &kernel.session_id())
                    .is_ok()
            };
            if !alive && kernel.model().execution_state != "restarting" {
                tracing::info!(kernel = %kernel.id, "a gateway kernel's session is gone; the kernel is forgotten");
                self.kernels.lock().remove(&kernel.id);
                kernel.closed.cancel();
            }
        }
    }

    /// `GET /api/kernelspecs`.
    pub fn kernelspecs(&self) -> Value {
        let specs: serde_json::Map<String, Value> = SPECS
            .iter()
            .map(|&(name, language, display)| {
                (
                    name.to_string(),
                    message::kernelspec(name, display, language),
                )
            })
            .collect();
        json!({
            "default": KERNEL_NAME,
            "kernelspecs": specs,
        })
    }

    pub fn kernelspec(&self, name: &str) -> Result<Value, GatewayError> {
        let (language, display) = spec(name)?;
        let name = SPECS
            .iter()
            .find(|(spec, _, _)| *spec == name)
            .map_or(KERNEL_NAME, |(spec, _, _)| *spec);
        Ok(message::kernelspec(name, display, language))
    }

    /// Starts a kernel of the caller's (`name` defaults to the one spec).
    pub async fn start(
        &self,
        caller: &Caller,
        name: Option<&str>,
    ) -> Result<KernelModel, GatewayError> {
        let name = name.unwrap_or(KERNEL_NAME);
        let (language, _) = spec(name)?;
        let info = self.code_api.create_session(caller, language, None).await?;
        let kernel = JupyterKernel::new(
            uuid::Uuid::new_v4().to_string(),
            name.to_string(),
            language,
            caller.clone(),
            info.session_id,
            self.python_version.clone(),
            self.limits.clone(),
            self.settings.clone(),
        );
        self.kernels
            .lock()
            .insert(kernel.id.clone(), Arc::clone(&kernel));
        self.tasks
            .spawn(Arc::clone(&kernel).work(Arc::clone(&self.code_api)));
        tracing::info!(kernel = %kernel.id, key = %caller.key_id, "gateway kernel started");
        Ok(kernel.model())
    }

    /// The caller's kernels.
    pub fn list(&self, caller: &Caller) -> Vec<KernelModel> {
        let mut all: Vec<KernelModel> = self
            .kernels
            .lock()
            .values()
            .filter(|k| k.owner.key_id == caller.key_id)
            .map(|k| k.model())
            .collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// One of the caller's kernels.
    pub fn kernel(&self, caller: &Caller, id: &str) -> Result<Arc<JupyterKernel>, GatewayError> {
        self.kernels
            .lock()
            .get(id)
            .filter(|k| k.owner.key_id == caller.key_id)
            .cloned()
            .ok_or_else(|| GatewayError::NotFound(id.to_string()))
    }

    pub fn interrupt(&self, caller: &Caller, id: &str) -> Result<(), GatewayError> {
        self.kernel(caller, id)?.interrupt();
        Ok(())
    }

    /// Restarts one of the caller's kernels, or joins the restart under
    /// way; past `jupyter.restarts_per_minute`, refused.
    pub async fn restart(&self, caller: &Caller, id: &str) -> Result<KernelModel, GatewayError> {
        let kernel = self.kernel(caller, id)?;
        let joined = match kernel.restarts.begin() {
            Begin::Lead(ticket) => self.lead_restart(&kernel, ticket),
            Begin::Join(joined) => joined,
            Begin::Refused(why) => return Err(why.into()),
        };
        joined.outcome().await?;
        Ok(kernel.model())
    }

    /// Does a restart its leader was given the ticket of, in a task of its
    /// own (it is seen through whoever asked leaving).
    pub fn lead_restart(&self, kernel: &Arc<JupyterKernel>, ticket: Ticket) -> Joined {
        let joined = ticket.joined();
        let (kernel, code_api) = (Arc::clone(kernel), Arc::clone(&self.code_api));
        self.tasks.spawn(async move {
            let outcome = kernel.restart(&code_api).await;
            ticket.finish(outcome.map_err(|e| RestartError::Failed(e.to_string())));
        });
        joined
    }

    pub async fn shutdown(&self, caller: &Caller, id: &str) -> Result<(), GatewayError> {
        let kernel = self.kernel(caller, id)?;
        self.kernels.lock().remove(id);
        kernel.shutdown(&self.code_api).await;
        tracing::info!(kernel = %id, "gateway kernel shut down");
        Ok(())
    }

    /// Does what a client asked for on the control channel, in the
    /// background.
    pub fn asked(self: &Arc<Self>, caller: &Caller, kernel: &Arc<JupyterKernel>, asked: Asked) {
        match asked {
            Asked::Restart(ticket) => {
                let joined = self.lead_restart(kernel, ticket);
                let id = kernel.id.clone();
                self.tasks.spawn(async move {
                    if let Err(e) = joined.outcome().await {
                        tracing::warn!(kernel = %id, %e, "a kernel's restart failed");
                    }
                });
            }
            Asked::Question(question) => {
                let (kernel, code_api) = (Arc::clone(kernel), Arc::clone(&self.code_api));
                self.tasks
                    .spawn(async move { kernel.answer(&code_api, question).await });
            }
            Asked::Shutdown => {
                let (this, caller, id) = (Arc::clone(self), caller.clone(), kernel.id.clone());
                self.tasks.spawn(async move {
                    if let Err(e) = this.shutdown(&caller, &id).await {
                        tracing::warn!(kernel = %id, %e, "a kernel's shutdown failed");
                    }
                });
            }
        }
    }
}

/// A revoked key's kernels are shut down: their cells, sessions and
/// sockets.
#[async_trait::async_trait]
impl crate::auth::revocation::HeldByKey for Gateway {
    fn what(&self) -> &'static str {
        "jupyter kernels"
    }

    async fn close_key(&self, key_id: &str) -> usize {
        let kernels: Vec<Arc<JupyterKernel>> = {
            let mut all = self.kernels.lock();
            let ids: Vec<String> = all
                .values()
                .filter(|k| k.owner.key_id == key_id)
                .map(|k| k.id.clone())
                .collect();
            ids.iter().filter_map(|id| all.remove(id)).collect()
        };
        for kernel in &kernels {
            kernel.shutdown(&self.code_api).await;
        }
        kernels.len()
    }
}

/// The sandbox Python's version, from its venv's `pyvenv.cfg`.
fn python_version() -> String {
    let cfg = std::path::Path::new(runcell_sandbox::jail::PYTHON_ENV).join("pyvenv.cfg");
    std::fs::read_to_string(cfg)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (key, value) = line.split_once('=')?;
                matches!(key.trim(), "version" | "version_info").then(|| value.trim().to_string())
            })
        })
        .unwrap_or_else(|| "3".into())
}
