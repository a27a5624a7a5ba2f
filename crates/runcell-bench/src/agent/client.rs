//! The bench's client of a running runcell: one owner (cookie) and one
//! session per task, the task's files uploaded, and each question's turn
//! read from its stream of events until it finishes.

use std::time::{Duration, Instant};

use futures::StreamExt;
use runcell_protocol::{CellKind, EventBody, ServerMessage, SessionEvent};

use crate::{BenchError, fail};

/// Times a new session refused for the rate is asked for again.
const CREATE_RETRIES: usize = 5;

/// A client for one task: one owner (cookie), one session.
pub struct AgentClient {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl AgentClient {
    pub fn new(http: reqwest::Client, base: &str) -> Self {
        Self {
            http,
            base: base.to_string(),
            cookie: None,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.cookie {
            Some(cookie) => builder.header(reqwest::header::COOKIE, cookie),
            None => builder,
        }
    }

    /// A new session; the first call also takes the owner cookie it sets.
    /// Every task is an owner of its own from one address, so a server's
    /// anonymous pages' budget a minute (`notebook.anonymous_sessions_per_minute`)
    /// may be met on the way: a 429 is waited out as `Retry-After` says.
    pub async fn create(&mut self) -> Result<String, BenchError> {
        let mut response = self.post_session().await?;
        for _ in 0..CREATE_RETRIES {
            if response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS {
                break;
            }
            let wait = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1)
                .clamp(1, 60);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            response = self.post_session().await?;
        }
        if let Some(cookie) = response
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
        {
            self.cookie = Some(cookie.to_string());
        }
        let body: serde_json::Value = ok(response, "creating a session")
            .await?
            .json()
            .await
            .map_err(fail)?;
        body["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| fail("no session id in the answer"))
    }

    async fn post_session(&self) -> Result<reqwest::Response, BenchError> {
        self.request(reqwest::Method::POST, "/api/sessions")
            .send()
            .await
            .map_err(fail)
    }

    pub async fn upload(&self, id: &str, name: &str, bytes: &[u8]) -> Result<(), BenchError> {
        let response = self
            .request(reqwest::Method::PUT, &format!("/api/sessions/{id}/files"))
            .query(&[("path", name)])
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(fail)?;
        ok(response, &format!("uploading {name}")).await.map(drop)
    }

    /// Asks `question` and reads the turn's events until it finishes:
    /// (events, seconds to the first token of the model's first program).
    pub async fn ask(
        &self,
        id: &str,
        question: &str,
        model: Option<&str>,
        timeout: Duration,
    ) -> Result<(Vec<SessionEvent>, Option<f64>), BenchError> {
        let started = Instant::now();
        let response = self
            .request(reqwest::Method::POST, &format!("/api/sessions/{id}/ask"))
            .json(&serde_json::json!({ "text": question, "model": model }))
            .send()
            .await
            .map_err(fail)?;
        let response = ok(response, "asking").await?;
        let mut events = Vec::new();
        let mut kinds = std::collections::HashMap::new();
        let mut first_code = None;
        let mut pending = Vec::new();
        let mut body = response.bytes_stream();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            let chunk = tokio::select! {
                () = &mut deadline => {
                    let _ = self.request(reqwest::Method::POST, &format!("/api/sessions/{id}/stop")).send().await;
                    return Err(fail(format!("the turn took more than {}s; stopped", timeout.as_secs())));
                }
                chunk = body.next() => chunk,
            };
            let Some(chunk) = chunk else { break };
            pending.extend_from_slice(&chunk.map_err(fail)?);
            while let Some(newline) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=newline).collect();
                let Ok(ServerMessage::Event(event)) = serde_json::from_slice(&line) else {
                    continue;
                };
                match &event.event {
                    // The model's programs only (an attempt), not a look
                    // at the data runcell runs itself before them.
                    EventBody::CellStarted {
                        cell_id,
                        cell_kind,
                        attempt,
                        ..
                    } => {
                        kinds.insert(*cell_id, (*cell_kind, attempt.is_some()));
                    }
                    EventBody::CellDelta { cell_id, .. }
                        if kinds.get(cell_id) == Some(&(CellKind::Code, true)) =>
                    {
                        first_code.get_or_insert_with(|| started.elapsed().as_secs_f64());
                    }
                    _ => {}
                }
                let finished = matches!(event.event, EventBody::TurnFinished { .. });
                events.push(event);
                if finished {
                    return Ok((events, first_code));
                }
            }
        }
        Err(fail("the answer ended before its turn did"))
    }

    /// Says a question is being written: the server may read the
    /// conversation ahead, as it does for a page's person typing.
    pub async fn composing(&self, id: &str) {
        let _ = self
            .request(
                reqwest::Method::POST,
                &format!("/api/sessions/{id}/composing"),
            )
            .send()
            .await;
    }

    pub async fn delete(&self, id: &str) {
        let _ = self
            .request(reqwest::Method::DELETE, &format!("/api/sessions/{id}"))
            .send()
            .await;
    }
}

/// `response` when it succeeded, else an error naming `what` failed, with
/// the status and the start of the body.
async fn ok(response: reqwest::Response, what: &str) -> Result<reqwest::Response, BenchError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(fail(format!(
        "{what}: {status} {}",
        runcell_sandbox::fit(&body, 500)
    )))
}
