//! The abuse bench's attacks on runcell's front door, each spawned into
//! the bench's tasks until `stop`, with what it was answered noted in
//! `answers`: request heads held open, anonymous pages keeping a CPU busy,
//! a hostile key, big imports, slow readers of a long shared session and
//! sockets on it that never read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::attackers::{Answers, attacker, client_from, connect_from, cookie};
use crate::{BenchError, fail};

/// A fenced program the scripted model runs as written.
pub(crate) fn program(code: &str) -> serde_json::Value {
    serde_json::json!({ "text": format!("```python\n{code}\n```") })
}

/// The long session the slow readers and silent sockets use, shared.
pub(crate) struct LongSession {
    /// Its owner's cookie (`runcell_owner=…`).
    pub owner: String,
    pub id: String,
    /// Its share token.
    pub token: String,
}

/// Imports a long notebook from an attacker's address and shares it.
pub(crate) async fn share_long_session(url: &str) -> Result<LongSession, BenchError> {
    let url = |path: &str| format!("{url}{path}");
    let setup = client_from(attacker(40), Duration::from_secs(60))?;
    let imported = setup
        .post(url("/api/sessions/import"))
        .body(long_notebook(70))
        .send()
        .await
        .map_err(fail)?;
    let owner = cookie(&imported, "runcell_owner")
        .ok_or_else(|| BenchError("an import set no owner cookie".into()))?;
    let long: serde_json::Value = imported.json().await.map_err(fail)?;
    let long_id = long["id"].as_str().unwrap_or_default().to_string();
    let shared: serde_json::Value = setup
        .post(url(&format!("/api/sessions/{long_id}/share")))
        .header("cookie", &owner)
        .send()
        .await
        .map_err(fail)?
        .json()
        .await
        .map_err(fail)?;
    let token = shared["token"].as_str().unwrap_or_default().to_string();
    Ok(LongSession {
        owner,
        id: long_id,
        token,
    })
}

/// A notebook of `cells` cells of 100 KiB of output each.
fn long_notebook(cells: usize) -> String {
    let output = "0123456789abcdef".repeat(64 * 100);
    let cells: Vec<serde_json::Value> = (0..cells)
        .map(|i| {
            serde_json::json!({
                "cell_type": "code", "id": format!("c{i}"), "metadata": {},
                "execution_count": i + 1, "source": format!("print({i})"),
                "outputs": [{"output_type": "stream", "name": "stdout", "text": output}],
            })
        })
        .collect();
    serde_json::json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
        .to_string()
}

/// Held request heads: 250 from each of three addresses.
pub(crate) fn spawn_held_heads(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    server_addr: SocketAddr,
) {
    for n in 2..5 {
        for _ in 0..250 {
            let (stop, answers) = (stop.clone(), Arc::clone(answers));
            tasks.spawn(async move {
                while !stop.is_cancelled() {
                    let Ok(mut stream) = connect_from(attacker(n), server_addr).await else {
                        answers.note("held heads", "connection refused");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    let _ = stream
                        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-a: ")
                        .await;
                    let mut buf = [0u8; 512];
                    let read = tokio::select! {
                        () = stop.cancelled() => break,
                        read = stream.read(&mut buf) => read,
                    };
                    let answer = match read {
                        Ok(0) | Err(_) => "closed by the server".to_string(),
                        Ok(n) => String::from_utf8_lossy(&buf[..n.min(12)]).into_owned(),
                    };
                    answers.note("held heads", answer);
                }
            });
        }
    }
}

/// Anonymous pages, `pages` at once: a new owner each time, a session, a
/// busy program.
pub(crate) fn spawn_anonymous_pages(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    url: &str,
    pages: usize,
) -> Result<(), BenchError> {
    for i in 0..pages {
        let (stop, answers) = (stop.clone(), Arc::clone(answers));
        let from = attacker(10 + (i % 8) as u8);
        let client = client_from(from, Duration::from_secs(60))?;
        let url = url.to_string();
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                let _ = client.get(format!("{url}/")).send().await;
                let made = client.post(format!("{url}/api/sessions")).send().await;
                answers.note_status("anonymous: new session", &made);
                let Ok(made) = made else { continue };
                let Some(owner) = cookie(&made, "runcell_owner") else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let Ok(body) = made.json::<serde_json::Value>().await else {
                    continue;
                };
                let id = body["id"].as_str().unwrap_or_default();
                let asked = client
                    .post(format!("{url}/api/sessions/{id}/ask"))
                    .header("cookie", &owner)
                    .json(&program(
                        "import time\nt = time.time()\nwhile time.time() - t < 8:\n    pass\nprint('burnt')",
                    ))
                    .send()
                    .await;
                answers.note_status("anonymous: busy turn", &asked);
                if let Ok(asked) = asked {
                    let _ = asked.bytes().await;
                }
            }
        });
    }
    Ok(())
}

/// One hostile key: /v1 sessions kept, busy one-shot runs, MCP sessions.
pub(crate) fn spawn_hostile_key(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    url: &str,
    hostile_key: &str,
) -> Result<(), BenchError> {
    let hostile = client_from(attacker(20), Duration::from_secs(60))?;
    for attack in 0..10 {
        let (stop, answers, client) = (stop.clone(), Arc::clone(answers), hostile.clone());
        let (url, key) = (url.to_string(), hostile_key.to_string());
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                let (name, result) = match attack {
                    0 | 1 => (
                        "hostile key: /v1 session",
                        client
                            .post(format!("{url}/v1/code_interpreter/sessions"))
                            .bearer_auth(&key)
                            .json(&serde_json::json!({}))
                            .send()
                            .await,
                    ),
                    2..=5 => (
                        "hostile key: busy run",
                        client
                            .post(format!("{url}/v1/code_interpreter/run"))
                            .bearer_auth(&key)
                            .json(&serde_json::json!({
                                "code": "import time\nt = time.time()\nwhile time.time() - t < 5:\n    pass",
                                "language": "python",
                            }))
                            .send()
                            .await,
                    ),
                    _ => (
                        "hostile key: MCP session",
                        client
                            .post(format!("{url}/mcp"))
                            .bearer_auth(&key)
                            .header("accept", "application/json, text/event-stream")
                            .json(&serde_json::json!({
                                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                                           "clientInfo": {"name": "abuse", "version": "1"}},
                            }))
                            .send()
                            .await,
                    ),
                };
                answers.note_status(name, &result);
                let throttled = match result {
                    Ok(response) => {
                        let status = response.status();
                        let _ = response.bytes().await;
                        status.as_u16() == 429 || status.is_server_error()
                    }
                    Err(_) => true,
                };
                if throttled {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
    }
    Ok(())
}

/// Imports of 7 MiB, four at once, anonymous.
pub(crate) fn spawn_imports(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    url: &str,
) -> Result<(), BenchError> {
    let notebook = bytes::Bytes::from(long_notebook(70));
    for _ in 0..4 {
        let (stop, answers) = (stop.clone(), Arc::clone(answers));
        let client = client_from(attacker(30), Duration::from_secs(60))?;
        let (url, notebook) = (format!("{url}/api/sessions/import"), notebook.clone());
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                let result = client.post(&url).body(notebook.clone()).send().await;
                answers.note_status("anonymous: 7 MiB import", &result);
                if matches!(&result, Ok(r) if r.status().as_u16() == 429) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
    }
    Ok(())
}

/// Slow readers of the long session's share page: 20, a KiB a second.
pub(crate) fn spawn_slow_readers(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    server_addr: SocketAddr,
    long: &LongSession,
) {
    for _ in 0..20 {
        let (stop, answers, token) = (stop.clone(), Arc::clone(answers), long.token.clone());
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                let Ok(mut stream) = connect_from(attacker(41), server_addr).await else {
                    answers.note("slow share readers", "connection refused");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let head = format!("GET /s/{token} HTTP/1.1\r\nHost: {server_addr}\r\n\r\n");
                let _ = stream.write_all(head.as_bytes()).await;
                let mut buf = [0u8; 1024];
                loop {
                    let read = tokio::select! {
                        () = stop.cancelled() => return,
                        read = stream.read(&mut buf) => read,
                    };
                    if !matches!(read, Ok(n) if n > 0) {
                        answers.note("slow share readers", "page ended or dropped");
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        });
    }
}

/// Sockets on the long session that never read: 40 of them.
pub(crate) fn spawn_silent_sockets(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    server_addr: SocketAddr,
    long: &LongSession,
) {
    for _ in 0..40 {
        let (stop, answers, owner) = (stop.clone(), Arc::clone(answers), long.owner.clone());
        let url = format!("ws://{server_addr}/ws/sessions/{}", long.id);
        tasks.spawn(async move {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest;
            while !stop.is_cancelled() {
                let Ok(mut request) = url.as_str().into_client_request() else {
                    return;
                };
                let headers = request.headers_mut();
                if let (Ok(cookie), Ok(protocol), Ok(origin)) = (
                    owner.parse(),
                    runcell_protocol::SUBPROTOCOL.parse(),
                    format!("http://{server_addr}").parse(),
                ) {
                    headers.insert("cookie", cookie);
                    headers.insert("sec-websocket-protocol", protocol);
                    headers.insert("origin", origin);
                }
                let Ok(stream) = connect_from(attacker(42), server_addr).await else {
                    answers.note("silent sockets", "connection refused");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                match tokio_tungstenite::client_async(request, stream).await {
                    Ok((socket, _)) => {
                        answers.note("silent sockets", "opened");
                        // Never read; held until the server drops it or the end.
                        tokio::select! {
                            () = stop.cancelled() => {}
                            () = tokio::time::sleep(Duration::from_secs(60)) => {}
                        }
                        drop(socket);
                    }
                    Err(_) => {
                        answers.note("silent sockets", "refused");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        });
    }
}
