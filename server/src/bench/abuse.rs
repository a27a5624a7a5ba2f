//! `runcell bench abuse`: the review's attacks at once, on loopback, against
//! a `runcell serve` started from this binary, while a well-behaved key and
//! a signed-in page go on using it. Prints the good users' latencies (p50,
//! p99), what the attackers were answered, and the server's RSS; fails on
//! any good request answered with a 5xx or not at all, on a good user never
//! answered right, on the server dying, or on its RSS growing past the
//! budget. Answers that came but were wrong (a turn whose kernel could not
//! start in time) are counted and shown, not failed on.
//!
//! Attackers come from other loopback addresses (127.0.0.2 and up) than the
//! good users (127.0.0.1), as strangers on a network would: the caps per
//! client address are what keep them apart. Their attacks:
//! - partial request heads held open (three addresses, 250 each);
//! - anonymous pages (no cookie, a new owner each time) making sessions and
//!   asking for programs that keep a CPU busy;
//! - one hostile key opening `/v1` sessions, one-shot busy runs and MCP
//!   sessions as fast as it is answered;
//! - notebook imports of 7 MiB, several at once;
//! - a long shared session read by slow readers of its share page, and its
//!   session socket opened many times by a page that never reads;
//! - a hostile key's runs flooding their jail's package index (HTTP/2 tried,
//!   then pipelined HTTP/1 on many connections, for big slow pages and files
//!   of an upstream on loopback), and a person making as many API keys as
//!   they are let, each opening sandbox sessions (`abuse_surfaces.rs`).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::abuse_surfaces;
use super::attackers::{Answers, attacker, client_from, connect_from, cookie};
use super::own_server::{OwnServer, rss_mib};
use super::sandbox::stats;
use super::{BenchError, fail};

pub struct AbuseOptions {
    /// How long the attacks last.
    pub seconds: u64,
    /// Anonymous pages attacking at once.
    pub anonymous: usize,
    /// How much the server's RSS may grow over its size before the attacks.
    pub rss_budget_mib: u64,
}

/// What one kind of good request saw.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    ok: u64,
    server_errors: u64,
    /// Answers that were not right, but not 5xx (first few kept).
    wrong: u64,
    examples: Vec<String>,
}

impl Tally {
    fn record(&mut self, started: Instant, outcome: Result<(), String>, status: Option<u16>) {
        self.latencies.push(started.elapsed());
        match outcome {
            Ok(()) => self.ok += 1,
            Err(why) => {
                if status.is_none_or(|s| s >= 500) {
                    self.server_errors += 1;
                } else {
                    self.wrong += 1;
                }
                if self.examples.len() < 5 {
                    self.examples.push(why);
                }
            }
        }
    }

    fn row(&mut self, name: &str) {
        let (p50, p99) = stats(&mut self.latencies);
        println!(
            "{name:<40} {:>6} {:>6} {:>6} {:>6} {p50:>9.1} {p99:>9.1}",
            self.latencies.len(),
            self.ok,
            self.server_errors,
            self.wrong
        );
    }
}

/// A fenced program the scripted model runs as written.
fn program(code: &str) -> serde_json::Value {
    serde_json::json!({ "text": format!("```python\n{code}\n```") })
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

pub async fn run(options: AbuseOptions) -> Result<(), BenchError> {
    println!(
        "runcell bench abuse: {} s of attacks ({} anonymous pages, one hostile key, held heads, imports, slow readers, silent sockets) against runcell serve, while a key and a signed-in page use it",
        options.seconds, options.anonymous
    );
    let upstream = abuse_surfaces::Upstream::start().await?;
    let mut server = OwnServer::start_with(
        &["good", "hostile"],
        &[
            ("RUNCELL_PACKAGES__INDEX_URL", upstream.index_url.clone()),
            ("RUNCELL_PACKAGES__MAX_SESSION_MIB", "64".into()),
            // People named by a proxy on this machine: the key hoarder.
            ("RUNCELL_AUTH__TRUSTED_HEADER", "X-Forwarded-User".into()),
            ("RUNCELL_AUTH__TRUSTED_PROXIES", "127.0.0.1".into()),
        ],
    )
    .await?;
    let server_addr = server.addr;
    let url = |path: &str| format!("{}{path}", server.url);
    let (good_key, hostile_key) = (server.keys[0].clone(), server.keys[1].clone());
    let rss_before = rss_mib(server.pid()).unwrap_or(0);
    let stop = CancellationToken::new();
    let answers = Arc::new(Answers::default());
    let peak = Arc::new(AtomicU64::new(rss_before));
    let mut tasks = tokio::task::JoinSet::new();

    // The server's RSS, sampled.
    {
        let (stop, peak, pid) = (stop.clone(), Arc::clone(&peak), server.pid());
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                if let Some(rss) = rss_mib(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    // The long shared session the slow readers and silent sockets use.
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

    // Held request heads: 250 from each of three addresses.
    for n in 2..5 {
        for _ in 0..250 {
            let (stop, answers) = (stop.clone(), Arc::clone(&answers));
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

    // Anonymous pages: a new owner each time, a session, a busy program.
    for i in 0..options.anonymous {
        let (stop, answers) = (stop.clone(), Arc::clone(&answers));
        let from = attacker(10 + (i % 8) as u8);
        let client = client_from(from, Duration::from_secs(60))?;
        let url = url("");
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

    // One hostile key: /v1 sessions kept, busy one-shot runs, MCP sessions.
    let hostile = client_from(attacker(20), Duration::from_secs(60))?;
    for attack in 0..10 {
        let (stop, answers, client) = (stop.clone(), Arc::clone(&answers), hostile.clone());
        let (url, key) = (url(""), hostile_key.clone());
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

    // Imports of 7 MiB, four at once, anonymous.
    let notebook = bytes::Bytes::from(long_notebook(70));
    for _ in 0..4 {
        let (stop, answers) = (stop.clone(), Arc::clone(&answers));
        let client = client_from(attacker(30), Duration::from_secs(60))?;
        let (url, notebook) = (url("/api/sessions/import"), notebook.clone());
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

    // Slow readers of the long session's share page: 20, a KiB a second.
    for _ in 0..20 {
        let (stop, answers, token) = (stop.clone(), Arc::clone(&answers), token.clone());
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

    // Sockets on the long session that never read: 40 of them.
    for _ in 0..40 {
        let (stop, answers, owner) = (stop.clone(), Arc::clone(&answers), owner.clone());
        let url = format!("ws://{server_addr}/ws/sessions/{long_id}");
        tasks.spawn(async move {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest;
            while !stop.is_cancelled() {
                let Ok(mut request) = url.as_str().into_client_request() else {
                    return;
                };
                let headers = request.headers_mut();
                if let (Ok(cookie), Ok(protocol), Ok(origin)) = (
                    owner.parse(),
                    app::protocol::SUBPROTOCOL.parse(),
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

    // The new surfaces: a jail flooding its package index, a key hoarder.
    abuse_surfaces::spawn_index_flood(
        &mut tasks,
        &stop,
        &answers,
        url(""),
        hostile_key.clone(),
        options.seconds,
    )?;
    let hoarded = Arc::new(AtomicU64::new(0));
    abuse_surfaces::spawn_key_hoarder(&mut tasks, &stop, &answers, url(""), Arc::clone(&hoarded))?;

    // Let the attacks build up before the good users start counting.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The good key: one-shot runs, one after another.
    let key_runs = Arc::new(Mutex::new(Tally::default()));
    let good_client = client_from(Ipv4Addr::LOCALHOST, Duration::from_secs(60))?;
    {
        let (stop, tally, client) = (stop.clone(), Arc::clone(&key_runs), good_client.clone());
        let (url, key) = (url("/v1/code_interpreter/run"), good_key.clone());
        tasks.spawn(async move {
            while !stop.is_cancelled() {
                let started = Instant::now();
                let result = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&serde_json::json!({"code": "print(6 * 7)", "language": "python"}))
                    .send()
                    .await;
                let (outcome, status) = match result {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body = response.text().await.unwrap_or_default();
                        let right = status == 200 && body.contains("42");
                        (
                            if right {
                                Ok(())
                            } else {
                                Err(format!(
                                    "{status}: {}",
                                    body.chars().take(200).collect::<String>()
                                ))
                            },
                            Some(status),
                        )
                    }
                    Err(err) => (Err(err.to_string()), None),
                };
                tally.lock().record(started, outcome, status);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
    }

    // The signed-in page: asks in its session, and loads its page.
    let page_turns = Arc::new(Mutex::new(Tally::default()));
    let page_loads = Arc::new(Mutex::new(Tally::default()));
    let signed_in = good_client
        .post(url("/login"))
        .form(&[("api_key", good_key.as_str()), ("next", "/")])
        .send()
        .await
        .map_err(fail)?;
    let cookies = [
        cookie(&signed_in, "runcell_signin"),
        cookie(&signed_in, "runcell_owner"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("; ");
    if !cookies.contains("runcell_signin=") {
        return Err(BenchError(format!(
            "signing in with the good key failed: {}",
            signed_in.status()
        )));
    }
    {
        let (stop, turns, loads, client) = (
            stop.clone(),
            Arc::clone(&page_turns),
            Arc::clone(&page_loads),
            good_client.clone(),
        );
        let url = url("");
        tasks.spawn(async move {
            let mut session: Option<String> = None;
            while !stop.is_cancelled() {
                let started = Instant::now();
                let id = match &session {
                    Some(id) => id.clone(),
                    None => {
                        let made = client
                            .post(format!("{url}/api/sessions"))
                            .header("cookie", &cookies)
                            .send()
                            .await;
                        match made {
                            Ok(made) if made.status().as_u16() == 201 => {
                                let body: serde_json::Value = made.json().await.unwrap_or_default();
                                let id = body["id"].as_str().unwrap_or_default().to_string();
                                session = Some(id.clone());
                                id
                            }
                            Ok(made) => {
                                let status = made.status().as_u16();
                                let text = made.text().await.unwrap_or_default();
                                turns.lock().record(
                                    started,
                                    Err(format!("new session: {status} {text}")),
                                    Some(status),
                                );
                                tokio::time::sleep(Duration::from_millis(500)).await;
                                continue;
                            }
                            Err(err) => {
                                turns.lock().record(started, Err(err.to_string()), None);
                                continue;
                            }
                        }
                    }
                };
                let asked = client
                    .post(format!("{url}/api/sessions/{id}/ask"))
                    .header("cookie", &cookies)
                    .json(&program("print(6 * 7)"))
                    .send()
                    .await;
                let (outcome, status) = match asked {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body = response.text().await.unwrap_or_default();
                        let right = status == 200
                            && body.contains("42\\n")
                            && body.contains("\"status\":\"ok\"");
                        (
                            if right {
                                Ok(())
                            } else {
                                let tail: String = body
                                    .chars()
                                    .rev()
                                    .take(300)
                                    .collect::<Vec<_>>()
                                    .into_iter()
                                    .rev()
                                    .collect();
                                Err(format!("ask: {status} …{tail}"))
                            },
                            Some(status),
                        )
                    }
                    Err(err) => (Err(err.to_string()), None),
                };
                turns.lock().record(started, outcome, status);

                let started = Instant::now();
                let page = client
                    .get(format!("{url}/sessions/{id}"))
                    .header("cookie", &cookies)
                    .send()
                    .await;
                let (outcome, status) = match page {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body = response.text().await.unwrap_or_default();
                        (
                            if status == 200 && body.contains("42") {
                                Ok(())
                            } else {
                                Err(format!("page: {status}"))
                            },
                            Some(status),
                        )
                    }
                    Err(err) => (Err(err.to_string()), None),
                };
                loads.lock().record(started, outcome, status);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
    }

    tokio::time::sleep(Duration::from_secs(options.seconds)).await;
    let alive = server.alive();
    let rss_end = rss_mib(server.pid()).unwrap_or(0);
    stop.cancel();
    // Tasks notice the stop at their next await; the rest are aborted.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    let peak = peak.load(Ordering::Relaxed);

    println!();
    println!(
        "{:<40} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9}",
        "good user", "asked", "right", "5xx", "wrong", "p50 ms", "p99 ms"
    );
    let mut key = std::mem::take(&mut *key_runs.lock());
    let mut turns = std::mem::take(&mut *page_turns.lock());
    let mut loads = std::mem::take(&mut *page_loads.lock());
    key.row("key: one-shot run (/v1)");
    turns.row("signed-in page: ask, to the answer");
    loads.row("signed-in page: its session's page");
    println!();
    println!("{:<40} {:<34} {:>8}", "attack", "answered", "times");
    for ((attack, answer), count) in answers.counts() {
        println!("{attack:<40} {answer:<34} {count:>8}");
    }
    println!();
    println!(
        "server RSS: {rss_before} MiB before, {peak} MiB at most, {rss_end} MiB at the end (budget: +{} MiB); alive: {alive}",
        options.rss_budget_mib
    );

    let mut problems = Vec::new();
    if !alive {
        problems.push("the server died".to_string());
    }
    for (name, tally) in [
        ("the key's runs", &key),
        ("the page's turns", &turns),
        ("the page loads", &loads),
    ] {
        if tally.ok == 0 {
            problems.push(format!("{name}: none answered right"));
        }
        if tally.server_errors > 0 {
            problems.push(format!(
                "{name}: {} 5xx or lost, e.g. {:?}",
                tally.server_errors, tally.examples
            ));
        } else if tally.wrong > 0 {
            println!(
                "{name}: {} answered wrong, e.g. {:?}",
                tally.wrong, tally.examples
            );
        }
    }
    // A person's keys together hold at most the person's live kernels
    // (`auth.user_limits.live_kernels`, 4 by default).
    let hoarded = hoarded.load(Ordering::Relaxed);
    println!("the key hoarder was given {hoarded} sandbox sessions over all her keys");
    if hoarded > 4 {
        problems.push(format!(
            "one person's keys held {hoarded} sandbox sessions, past her 4 live kernels"
        ));
    }
    if peak.saturating_sub(rss_before) > options.rss_budget_mib {
        problems.push(format!(
            "the server's RSS grew by {} MiB, over the budget of {} MiB",
            peak - rss_before,
            options.rss_budget_mib
        ));
    }
    if problems.is_empty() {
        println!("abuse: the good users were served throughout");
        Ok(())
    } else {
        Err(BenchError(problems.join("; ")))
    }
}
