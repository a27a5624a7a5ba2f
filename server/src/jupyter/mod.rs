//! A Jupyter kernel gateway: the kernels part of Jupyter Server's API (what
//! JupyterLab's gateway client and Kernel Gateway's clients use), served
//! under `/jupyter`, on runcell's sandboxes.
//!
//! A gateway kernel is a sandbox session of the key that started it (listed
//! by `/v1/sessions` too, counted under the key's sessions), and each cell a
//! run under the key's rate and concurrency, with the server's limits (the
//! longest wall time it allows). Another key's kernels are not found.

pub mod kernel;
pub mod message;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Caller;
use crate::code_api::{CodeApi, CodeApiError};
use crate::sandbox::{Language, Limits};
pub use kernel::{Asked, Connection, Kernel, KernelModel, Received, ReplyTo};

/// The one kernel spec on offer.
pub const KERNEL_NAME: &str = "python3";
/// How often connected kernels are kept from being closed as idle, and
/// kernels whose session is gone are forgotten.
const MAINTAIN_EVERY: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No such kernel of this key (another key's is this too).
    #[error("Kernel does not exist: {0}")]
    NotFound(String),
    #[error("No such kernel named {0}; this gateway offers python3")]
    NoSuchSpec(String),
    #[error(transparent)]
    Api(#[from] CodeApiError),
}

pub struct Gateway {
    code_api: Arc<CodeApi>,
    /// What every cell may use: the server's most, its longest wall time
    /// included (notebooks run long cells).
    limits: Limits,
    kernels: Mutex<HashMap<String, Arc<Kernel>>>,
    python_version: String,
    tasks: TaskTracker,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl Gateway {
    pub fn new(code_api: Arc<CodeApi>, limits: Limits, tasks: TaskTracker) -> Arc<Self> {
        Arc::new(Self {
            code_api,
            limits,
            kernels: Mutex::new(HashMap::new()),
            python_version: python_version(),
            tasks,
        })
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
            let all: Vec<Arc<Kernel>> = this.kernels.lock().drain().map(|(_, k)| k).collect();
            for kernel in all {
                kernel.closed.cancel();
            }
        });
    }

    fn maintain(&self) {
        let kernels: Vec<Arc<Kernel>> = self.kernels.lock().values().cloned().collect();
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
        json!({
            "default": KERNEL_NAME,
            "kernelspecs": {
                KERNEL_NAME: message::kernelspec(KERNEL_NAME, "Python 3 (runcell)"),
            },
        })
    }

    pub fn kernelspec(&self, name: &str) -> Result<Value, GatewayError> {
        if name == KERNEL_NAME {
            Ok(message::kernelspec(KERNEL_NAME, "Python 3 (runcell)"))
        } else {
            Err(GatewayError::NoSuchSpec(name.to_string()))
        }
    }

    /// Starts a kernel of the caller's (`name` defaults to the one spec).
    pub async fn start(
        &self,
        caller: &Caller,
        name: Option<&str>,
    ) -> Result<KernelModel, GatewayError> {
        let name = name.unwrap_or(KERNEL_NAME);
        if name != KERNEL_NAME {
            return Err(GatewayError::NoSuchSpec(name.to_string()));
        }
        let info = self
            .code_api
            .create_session(caller, Language::Python, None)
            .await?;
        let kernel = Kernel::new(
            uuid::Uuid::new_v4().to_string(),
            name.to_string(),
            caller.clone(),
            info.session_id,
            self.python_version.clone(),
            self.limits.clone(),
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
    pub fn kernel(&self, caller: &Caller, id: &str) -> Result<Arc<Kernel>, GatewayError> {
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

    pub async fn restart(&self, caller: &Caller, id: &str) -> Result<KernelModel, GatewayError> {
        let kernel = self.kernel(caller, id)?;
        kernel.restart(&self.code_api).await?;
        Ok(kernel.model())
    }

    pub async fn shutdown(&self, caller: &Caller, id: &str) -> Result<(), GatewayError> {
        let kernel = self.kernel(caller, id)?;
        self.kernels.lock().remove(id);
        kernel.shutdown(&self.code_api).await;
        tracing::info!(kernel = %id, "gateway kernel shut down");
        Ok(())
    }

    /// Does what a client asked for on the control channel.
    pub async fn asked(&self, caller: &Caller, id: &str, asked: Asked) {
        let done = match asked {
            Asked::Restart => self.restart(caller, id).await.map(|_| ()),
            Asked::Shutdown => self.shutdown(caller, id).await,
        };
        if let Err(e) = done {
            tracing::warn!(kernel = %id, %e, "a kernel's restart or shutdown failed");
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
        let kernels: Vec<Arc<Kernel>> = {
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
    let cfg = std::path::Path::new(crate::sandbox::jail::PYTHON_ENV).join("pyvenv.cfg");
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
