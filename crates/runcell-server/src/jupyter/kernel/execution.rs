//! A kernel's cells run: the queue worked one cell at a time, each cell's
//! run through the code API, its events published as Jupyter messages, and
//! the restarts and shutdown that end a kernel's runs.

use std::sync::Arc;

use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use super::super::message::{JupyterChannel, Parent, now_iso};
use super::{Job, JupyterKernel};
use crate::code_api::{CodeApi, CodeApiError};
use tokio::sync::mpsc;

use runcell_sandbox::{ExecError, RunEvent, RunOutcome, RunRequest, limit_error};

impl JupyterKernel {
    /// Runs the queued cells one after another until the kernel is shut
    /// down.
    pub async fn work(self: Arc<Self>, code_api: Arc<CodeApi>) {
        loop {
            let job = self.queue.lock().pop_front();
            let Some(job) = job else {
                tokio::select! {
                    () = self.wake.notified() => continue,
                    () = self.closed.cancelled() => return,
                }
            };
            if job.generation != self.state.lock().generation {
                self.abort(&job);
                continue;
            }
            let failed = self.execute(&code_api, &job).await;
            if failed && job.request.content.stop_on_error.unwrap_or(true) {
                // As ipykernel does: what was queued behind a failed cell
                // is not run.
                let pending: Vec<Job> = self.queue.lock().drain(..).collect();
                for job in &pending {
                    self.abort(job);
                }
            }
        }
    }

    fn abort(&self, job: &Job) {
        let parent = Some(&job.request.parent);
        let count = self.state.lock().execution_count;
        self.reply_between_statuses(
            parent,
            job.reply,
            self.out.frame(
                JupyterChannel::Shell,
                "execute_reply",
                parent,
                json!({"status": "aborted", "execution_count": count}),
            ),
        );
    }

    /// Runs one cell; `true` if it ended in an error.
    async fn execute(&self, code_api: &CodeApi, job: &Job) -> bool {
        let request = &job.request;
        let parent = Some(&request.parent);
        let code = request.content.code.clone();
        let silent = request.content.silent.unwrap_or(false);
        let store_history = request.content.store_history.unwrap_or(!silent);
        self.set_state(parent, "busy");
        let (count, session_id, dead) = {
            let mut state = self.state.lock();
            if store_history && !silent && !code.trim().is_empty() {
                state.execution_count += 1;
            }
            (
                state.execution_count,
                state.session_id.clone(),
                state.dead.clone(),
            )
        };
        if !silent {
            self.publish(self.out.frame(
                JupyterChannel::Iopub,
                "execute_input",
                parent,
                json!({"code": code, "execution_count": count}),
            ));
        }
        let mut pages = Vec::new();
        let outcome = if let Some(why) = dead {
            Err(ExecError::new("KernelDead", why))
        } else if code.trim().is_empty() {
            Ok(RunOutcome::default())
        } else {
            self.run(
                code_api,
                &session_id,
                code,
                parent,
                count,
                silent,
                &mut pages,
            )
            .await
        };
        let error = match outcome {
            Ok(outcome) => outcome.error,
            Err(error) => Some(error),
        };
        let content = match &error {
            None => json!({
                "status": "ok",
                "execution_count": count,
                "user_expressions": {},
                "payload": pages,
            }),
            Some(error) => {
                let error = jupyter_error(error);
                self.publish(
                    self.out
                        .frame(JupyterChannel::Iopub, "error", parent, error.clone()),
                );
                let mut content = error;
                if let Some(fields) = content.as_object_mut() {
                    fields.insert("status".into(), "error".into());
                    fields.insert("execution_count".into(), count.into());
                }
                content
            }
        };
        self.send_to(
            job.reply,
            self.out
                .frame(JupyterChannel::Shell, "execute_reply", parent, content),
        );
        self.set_state(parent, "idle");
        error.is_some()
    }

    /// Runs `code` in the kernel's session under its key's limits,
    /// publishing what it prints as it happens; the pager's payloads go to
    /// `pages`, for the reply.
    #[expect(
        clippy::too_many_arguments,
        reason = "a cell's run: its code, its parent and count, where its pages go"
    )]
    async fn run(
        &self,
        code_api: &CodeApi,
        session_id: &str,
        code: String,
        parent: Option<&Parent>,
        count: u64,
        silent: bool,
        pages: &mut Vec<Value>,
    ) -> Result<RunOutcome, ExecError> {
        let request = RunRequest {
            code,
            language: self.language,
            limits: self.limits.clone(),
            env: Vec::new(),
            cwd: None,
        };
        let admitted = code_api
            .admit(&self.owner, request, Some(session_id.to_string()), None)
            .map_err(|e| refused(&e))?;
        let cancel = CancellationToken::new();
        *self.current.lock() = Some(cancel.clone());
        let (events, mut received) = mpsc::channel::<RunEvent>(64);
        let run = code_api.run(admitted, Some(events), cancel.clone());
        tokio::pin!(run);
        let closed = self.closed.cancelled();
        tokio::pin!(closed);
        let mut open = true;
        let outcome = loop {
            tokio::select! {
                biased;
                event = received.recv(), if open => match event {
                    Some(event) => self.publish_event(event, parent, count, silent, pages),
                    None => open = false,
                },
                outcome = &mut run => {
                    // The run's task has ended: its events are all in.
                    while let Ok(event) = received.try_recv() {
                        self.publish_event(event, parent, count, silent, pages);
                    }
                    break outcome;
                }
                () = &mut closed, if !cancel.is_cancelled() => cancel.cancel(),
            }
        };
        *self.current.lock() = None;
        outcome.map_err(|e| refused(&e))
    }

    /// Publishes a run's event as its Jupyter message on iopub; a pager
    /// payload is kept in `pages` for the reply instead.
    fn publish_event(
        &self,
        event: RunEvent,
        parent: Option<&Parent>,
        count: u64,
        silent: bool,
        pages: &mut Vec<Value>,
    ) {
        let event = match event {
            // runcell's own table data is for its notebook only.
            RunEvent::Result {
                mut data,
                main,
                metadata,
                display_id,
                ts_ms,
            } => {
                data.remove(runcell_sandbox::TABLE_DATA_MIME);
                RunEvent::Result {
                    data,
                    main,
                    metadata,
                    display_id,
                    ts_ms,
                }
            }
            other => other,
        };
        let frame = match event {
            RunEvent::Stdout { text, .. } => self.out.frame(
                JupyterChannel::Iopub,
                "stream",
                parent,
                json!({"name": "stdout", "text": text}),
            ),
            RunEvent::Stderr { text, .. } => self.out.frame(
                JupyterChannel::Iopub,
                "stream",
                parent,
                json!({"name": "stderr", "text": text}),
            ),
            RunEvent::Result {
                data,
                main: true,
                metadata,
                display_id,
                ..
            } if !silent => {
                let mut content =
                    json!({"data": data, "metadata": metadata, "execution_count": count});
                if let Some(id) = display_id {
                    content["transient"] = json!({"display_id": id});
                }
                self.out
                    .frame(JupyterChannel::Iopub, "execute_result", parent, content)
            }
            RunEvent::Result {
                data,
                main: false,
                metadata,
                display_id,
                ..
            } => self.out.frame(
                JupyterChannel::Iopub,
                "display_data",
                parent,
                json!({"data": data, "metadata": metadata, "transient": transient(display_id)}),
            ),
            RunEvent::Update {
                display_id,
                mut data,
                metadata,
                ..
            } => {
                data.remove(runcell_sandbox::TABLE_DATA_MIME);
                self.out.frame(
                    JupyterChannel::Iopub,
                    "update_display_data",
                    parent,
                    json!({"data": data, "metadata": metadata,
                        "transient": transient(Some(display_id))}),
                )
            }
            RunEvent::Clear { wait, .. } => self.out.frame(
                JupyterChannel::Iopub,
                "clear_output",
                parent,
                json!({ "wait": wait }),
            ),
            RunEvent::Page { data, .. } => {
                pages.push(json!({"source": "page", "data": data, "start": 0}));
                return;
            }
            // The outcome's error is published once, at the end.
            RunEvent::Result { .. } | RunEvent::Error { .. } => return,
        };
        self.publish(frame);
    }

    /// Starts the kernel afresh in a new session of its key's (variables
    /// are lost); cells queued before are aborted. Only the leader of a
    /// restart ([`Restarts::begin`]) calls this, so one runs at a time.
    pub async fn restart(&self, code_api: &CodeApi) -> Result<(), CodeApiError> {
        let old = {
            let mut state = self.state.lock();
            state.generation += 1;
            state.session_id.clone()
        };
        self.interrupt();
        // Recorded, not published: jupyter_server's sockets say
        // `restarting` only for its auto-restarter (a kernel that died), and
        // JupyterLab takes that status as "the kernel appears to have died";
        // a restart someone asked for shows `starting`, then `idle`.
        {
            let mut state = self.state.lock();
            state.execution_state = "restarting";
            state.last_activity = now_iso();
        }
        // Closed first: the new session counts against the key's sessions.
        if let Err(e) = code_api.delete_session(&self.owner, &old).await {
            tracing::debug!(%e, "the old session of a restarted kernel was gone");
        }
        match code_api
            .create_session(&self.owner, self.language, None)
            .await
        {
            Ok(info) => {
                {
                    let mut state = self.state.lock();
                    state.session_id = info.session_id;
                    state.execution_count = 0;
                    state.dead = None;
                }
                self.set_state(None, "starting");
                self.set_state(None, "idle");
                self.wake.notify_one();
                Ok(())
            }
            Err(e) => {
                self.state.lock().dead = Some(format!("the kernel could not be restarted: {e}"));
                self.set_state(None, "dead");
                Err(e)
            }
        }
    }

    /// Stops the kernel: the running cell, its session and its connections.
    pub async fn shutdown(&self, code_api: &CodeApi) {
        self.state.lock().generation += 1;
        self.interrupt();
        self.closed.cancel();
        let session = self.session_id();
        if let Err(e) = code_api.delete_session(&self.owner, &session).await {
            tracing::debug!(%e, "the session of a kernel shut down was gone");
        }
    }
}

/// A display's `transient`: its display id, if it has one.
fn transient(display_id: Option<String>) -> Value {
    match display_id {
        Some(id) => json!({ "display_id": id }),
        None => json!({}),
    }
}

fn jupyter_error(error: &ExecError) -> Value {
    let ename = if error.name == limit_error::CANCELLED {
        "KeyboardInterrupt"
    } else {
        error.name.as_str()
    };
    let traceback = if error.traceback.is_empty() {
        vec![format!("{ename}: {}", error.value)]
    } else {
        error.traceback.clone()
    };
    json!({"ename": ename, "evalue": error.value, "traceback": traceback})
}

/// An error reply's content.
pub(super) fn error_content(ename: &str, evalue: &str) -> Value {
    json!({"status": "error", "ename": ename, "evalue": evalue,
        "traceback": [format!("{ename}: {evalue}")]})
}

/// A run the gateway could not start, as the cell's error.
fn refused(error: &CodeApiError) -> ExecError {
    let name = match error {
        CodeApiError::Limited(_) => "RateLimited",
        CodeApiError::NotFound(_) => "KernelDead",
        _ => "SandboxError",
    };
    ExecError::new(name, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_is_a_keyboard_interrupt_and_every_error_has_a_traceback() {
        let stopped = jupyter_error(&ExecError::new(
            limit_error::CANCELLED,
            "the run was stopped",
        ));
        assert_eq!(stopped["ename"], "KeyboardInterrupt");
        assert_eq!(
            stopped["traceback"][0],
            "KeyboardInterrupt: the run was stopped"
        );
        let own = jupyter_error(&ExecError {
            name: "ZeroDivisionError".into(),
            value: "division by zero".into(),
            traceback: vec!["line 1".into()],
        });
        assert_eq!(own["ename"], "ZeroDivisionError");
        assert_eq!(own["traceback"], json!(["line 1"]));
    }
}
