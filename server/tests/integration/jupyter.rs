//! The Jupyter kernel gateway (`/jupyter`) over real sockets: credentials as
//! Jupyter sends them, kernels private to their key and counted under its
//! limits, cells run in order with Jupyter's replies, and frames that are
//! not messages skipped without harm. (Jupyter's own clients drive it in
//! `tests/clients`.)

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{TestServer, http};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const PATIENCE: Duration = Duration::from_secs(120);

fn jupyter(server: &TestServer, path: &str) -> String {
    server.url(&format!("/jupyter{path}"))
}

async fn start_kernel(server: &TestServer, key: &str) -> Value {
    let response = http()
        .post(jupyter(server, "/api/kernels"))
        .header("authorization", format!("token {key}"))
        .json(&json!({"name": "python3", "env": {"KERNEL_USERNAME": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

async fn open(server: &TestServer, kernel: &str, key: &str) -> Socket {
    let url = server.ws_url(&format!(
        "/jupyter/api/kernels/{kernel}/channels?session_id=s1&token={key}"
    ));
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// `method` on the gateway's `path`, as the key's: `Authorization: token`.
async fn call(
    server: &TestServer,
    key: &str,
    method: reqwest::Method,
    path: &str,
) -> reqwest::Response {
    http()
        .request(method, jupyter(server, path))
        .header("authorization", format!("token {key}"))
        .send()
        .await
        .unwrap()
}

fn request(msg_type: &str, content: Value) -> (String, String) {
    let id = uuid::Uuid::new_v4().to_string();
    let mut frame = json!({
        "header": {"msg_id": id, "msg_type": msg_type, "session": "s1", "username": "t",
            "date": "", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "content": {}, "channel": "shell",
    });
    frame["content"] = content;
    (id, frame.to_string())
}

fn cell(code: &str) -> Value {
    json!({"code": code, "silent": false, "store_history": true, "user_expressions": {},
        "allow_stdin": false, "stop_on_error": true})
}

/// The messages whose parent is `id`, until its reply and then iopub's idle.
async fn answer(socket: &mut Socket, id: &str) -> (Value, Vec<Value>) {
    let mut reply = None;
    let mut iopub = Vec::new();
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("an answer in time")
            .expect("the socket open")
            .unwrap();
        let Message::Text(text) = frame else { continue };
        let message: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(message["msg_type"], message["header"]["msg_type"]);
        assert!(message["parent_header"].is_object());
        if message["parent_header"]["msg_id"] != id {
            continue;
        }
        if message["channel"] == "iopub" {
            let idle =
                message["msg_type"] == "status" && message["content"]["execution_state"] == "idle";
            iopub.push(message);
            if idle && let Some(reply) = reply {
                return (reply, iopub);
            }
        } else {
            reply = Some(message);
        }
    }
}

async fn ask(socket: &mut Socket, msg_type: &str, content: Value) -> (Value, Vec<Value>) {
    let (id, frame) = request(msg_type, content);
    socket.send(Message::text(frame)).await.unwrap();
    answer(socket, &id).await
}

fn streamed(iopub: &[Value]) -> String {
    iopub
        .iter()
        .filter(|m| m["msg_type"] == "stream")
        .map(|m| m["content"]["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn kernels_need_a_credential_and_are_private_to_their_key() {
    let server = TestServer::start().await;
    let (alice, bob) = (server.api_key("alice").await, server.api_key("bob").await);
    let response = http()
        .get(jupyter(&server, "/api/kernels"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("token"),
        "{body}"
    );
    assert_eq!(body["reason"], "Unauthorized");
    let wrong = call(&server, "rc_wrong", reqwest::Method::GET, "/api/kernels").await;
    assert_eq!(wrong.status(), 401);

    let specs: Value = http()
        .get(jupyter(&server, &format!("/api/kernelspecs?token={alice}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(specs["default"], "python3");
    assert_eq!(
        specs["kernelspecs"]["python3"]["spec"]["language"],
        "python"
    );

    let kernel = start_kernel(&server, &alice).await;
    let id = kernel["id"].as_str().unwrap();
    assert!(
        uuid::Uuid::parse_str(id).is_ok(),
        "Jupyter Server wants UUIDs: {id}"
    );
    assert_eq!(kernel["execution_state"], "idle");
    assert_eq!(kernel["connections"], 0);
    // Exactly the format Jupyter Server parses.
    let activity = kernel["last_activity"].as_str().unwrap();
    assert!(
        activity.len() == 27 && activity.ends_with('Z'),
        "{activity}"
    );

    // Bob sees none of it, and cannot reach it.
    for (method, path) in [
        ("GET", format!("/api/kernels/{id}")),
        ("DELETE", format!("/api/kernels/{id}")),
        ("POST", format!("/api/kernels/{id}/interrupt")),
        ("POST", format!("/api/kernels/{id}/restart")),
    ] {
        let response = http()
            .request(method.parse().unwrap(), jupyter(&server, &path))
            .header("authorization", format!("Bearer {bob}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{method} {path}");
    }
    let bobs: Value = call(&server, &bob, reqwest::Method::GET, "/api/kernels")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(bobs, json!([]));
    let url = server.ws_url(&format!("/jupyter/api/kernels/{id}/channels?token={bob}"));
    assert!(tokio_tungstenite::connect_async(url).await.is_err());

    // Alice's kernel is a sandbox session of hers, in the /v1 list too.
    let sessions: Value = http()
        .get(server.url("/v1/code_interpreter/sessions"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );

    let gone = call(
        &server,
        &alice,
        reqwest::Method::DELETE,
        &format!("/api/kernels/{id}"),
    )
    .await;
    assert_eq!(gone.status(), 204);
    let again = call(
        &server,
        &alice,
        reqwest::Method::GET,
        &format!("/api/kernels/{id}"),
    )
    .await;
    assert_eq!(again.status(), 404);
}

#[tokio::test]
async fn a_keys_kernels_count_under_its_live_sessions() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.auth.max_live_sessions = 1;
    })
    .await;
    let key = server.api_key("one").await;
    let first = start_kernel(&server, &key).await;
    let refused = call(&server, &key, reqwest::Method::POST, "/api/kernels").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert!(body["message"].is_string(), "{body}");
    // A restart stays within the one session.
    let path = format!("/api/kernels/{}/restart", first["id"].as_str().unwrap());
    let restarted = call(&server, &key, reqwest::Method::POST, &path).await;
    assert_eq!(restarted.status(), 200);
}

#[tokio::test]
async fn cells_run_in_order_and_a_failed_one_aborts_what_was_queued_behind_it() {
    let server = TestServer::start().await;
    let key = server.api_key("cells").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap();
    let mut socket = open(&server, id, &key).await;

    // jupyter_client's gateway client sends no channel: shell.
    let info = json!({
        "header": {"msg_id": "info-1", "msg_type": "kernel_info_request", "session": "s1", "date": 1.5},
        "msg_id": "info-1", "msg_type": "kernel_info_request", "parent_header": {}, "content": {}, "metadata": {},
    });
    socket.send(Message::text(info.to_string())).await.unwrap();
    let (reply, iopub) = answer(&mut socket, "info-1").await;
    assert_eq!(reply["msg_type"], "kernel_info_reply");
    assert_eq!(reply["channel"], "shell");
    assert_eq!(reply["content"]["language_info"]["name"], "python");
    assert_eq!(iopub[0]["content"]["execution_state"], "busy");

    // Three cells sent at once run one after another, in order.
    let sent: Vec<(String, String)> = ["x = 1", "x += 1", "print(x)"]
        .iter()
        .map(|code| request("execute_request", cell(code)))
        .collect();
    for (_, frame) in &sent {
        socket.send(Message::text(frame.clone())).await.unwrap();
    }
    for (n, (msg_id, _)) in sent.iter().enumerate() {
        let (reply, iopub) = answer(&mut socket, msg_id).await;
        assert_eq!(reply["content"]["status"], "ok", "{reply}");
        assert_eq!(reply["content"]["execution_count"], n + 1);
        let input = iopub
            .iter()
            .find(|m| m["msg_type"] == "execute_input")
            .unwrap();
        assert_eq!(input["content"]["execution_count"], n + 1);
        if n == 2 {
            assert_eq!(streamed(&iopub), "2\n");
        }
    }
    // The last expression is the execute_result; a display is display_data.
    let (_, iopub) = ask(
        &mut socket,
        "execute_request",
        cell("from IPython.display import display, HTML\ndisplay(HTML('<b>hi</b>'), metadata={'isolated': True})\nx * 21"),
    )
    .await;
    let display = iopub
        .iter()
        .find(|m| m["msg_type"] == "display_data")
        .unwrap();
    assert_eq!(display["content"]["data"]["text/html"], "<b>hi</b>");
    // Its metadata comes along (JupyterLab sizes images and isolates
    // HTML by it).
    assert_eq!(display["content"]["metadata"], json!({"isolated": true}));
    let result = iopub
        .iter()
        .find(|m| m["msg_type"] == "execute_result")
        .unwrap();
    assert_eq!(result["content"]["data"]["text/plain"], "42");
    assert_eq!(result["content"]["execution_count"], 4);

    // A failing cell: the one queued behind it is aborted, not run.
    let (failing, frame) = request("execute_request", cell("1/0"));
    let (behind, behind_frame) = request("execute_request", cell("print('must not run')"));
    socket.send(Message::text(frame)).await.unwrap();
    socket.send(Message::text(behind_frame)).await.unwrap();
    let (reply, iopub) = answer(&mut socket, &failing).await;
    assert_eq!(reply["content"]["status"], "error");
    assert_eq!(reply["content"]["ename"], "ZeroDivisionError");
    let error = iopub.iter().find(|m| m["msg_type"] == "error").unwrap();
    assert!(!error["content"]["traceback"].as_array().unwrap().is_empty());
    let (reply, iopub) = answer(&mut socket, &behind).await;
    assert_eq!(reply["content"]["status"], "aborted");
    assert!(streamed(&iopub).is_empty());
    // The kernel goes on.
    let (reply, iopub) = ask(&mut socket, "execute_request", cell("print(x)")).await;
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(streamed(&iopub), "2\n");
}

#[tokio::test]
async fn frames_that_are_not_messages_are_skipped_and_an_oversized_one_ends_only_its_socket() {
    let server = TestServer::start().await;
    let key = server.api_key("hostile").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap();
    let mut socket = open(&server, id, &key).await;
    for frame in [
        Message::text("not json"),
        Message::text("[]"),
        Message::text(
            json!({"header": {"msg_id": "a".repeat(10_000), "msg_type": "execute_request"}})
                .to_string(),
        ),
        Message::text(
            json!({"header": {"msg_id": "m", "msg_type": "execute_request"}, "channel": "nowhere"})
                .to_string(),
        ),
        Message::binary(vec![0xff; 64]),
        Message::binary(vec![0, 0, 0, 1, 0, 0, 0, 200]),
        // A type no kernel knows gets no answer (ipykernel's way too).
        Message::text(request("teleport_request", json!({})).1),
    ] {
        socket.send(frame).await.unwrap();
    }
    let (reply, _) = ask(&mut socket, "execute_request", cell("print('still here')")).await;
    assert_eq!(reply["content"]["status"], "ok");

    // Too big a frame closes that socket; the kernel and others go on.
    let mut other = open(&server, id, &key).await;
    let huge = "x".repeat(9 * 1024 * 1024);
    let _ = socket.send(Message::text(huge)).await;
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the socket was not closed");
    let (reply, iopub) = ask(&mut other, "execute_request", cell("print(6 * 7)")).await;
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(streamed(&iopub), "42\n");
}

#[tokio::test]
async fn an_interrupt_stops_a_cell_a_restart_forgets_and_a_shutdown_closes_the_socket() {
    let server = TestServer::start().await;
    let key = server.api_key("control").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap().to_string();
    let mut socket = open(&server, &id, &key).await;
    ask(&mut socket, "execute_request", cell("kept = 'yes'")).await;

    let (looping, frame) = request(
        "execute_request",
        cell("print('looping', flush=True)\nwhile True:\n    pass"),
    );
    socket.send(Message::text(frame)).await.unwrap();
    // Once it runs (its output is in), interrupt it through the REST API.
    loop {
        let Some(Ok(Message::Text(text))) = socket.next().await else {
            panic!("the socket closed")
        };
        let message: Value = serde_json::from_str(&text).unwrap();
        if message["msg_type"] == "stream" {
            break;
        }
    }
    let model: Value = call(
        &server,
        &key,
        reqwest::Method::GET,
        &format!("/api/kernels/{id}"),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(model["execution_state"], "busy");
    assert_eq!(model["connections"], 1);
    let interrupted = call(
        &server,
        &key,
        reqwest::Method::POST,
        &format!("/api/kernels/{id}/interrupt"),
    )
    .await;
    assert_eq!(interrupted.status(), 204);
    let (reply, _) = answer(&mut socket, &looping).await;
    assert_eq!(reply["content"]["status"], "error");
    assert_eq!(reply["content"]["ename"], "KeyboardInterrupt");
    let (_, iopub) = ask(&mut socket, "execute_request", cell("print(kept)")).await;
    assert_eq!(streamed(&iopub), "yes\n");

    let restarted = call(
        &server,
        &key,
        reqwest::Method::POST,
        &format!("/api/kernels/{id}/restart"),
    )
    .await;
    assert_eq!(restarted.status(), 200);
    let (reply, _) = ask(&mut socket, "execute_request", cell("kept")).await;
    assert_eq!(reply["content"]["ename"], "NameError");
    assert_eq!(reply["content"]["execution_count"], 1);

    // A shutdown asked for on the control channel closes the socket.
    let (_, frame) = request("shutdown_request", json!({"restart": false}));
    let frame = frame.replace("\"shell\"", "\"control\"");
    socket.send(Message::text(frame)).await.unwrap();
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Close(_) = message {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the socket stayed open after a shutdown");
    let gone = call(
        &server,
        &key,
        reqwest::Method::GET,
        &format!("/api/kernels/{id}"),
    )
    .await;
    assert_eq!(gone.status(), 404);
    // A request that is not a WebSocket handshake is a clear error.
    let refused = http()
        .get(jupyter(
            &server,
            &format!("/api/kernels/{id}/channels?token={key}"),
        ))
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_client_error());
}

/// The next frame's JSON, within patience (pings and such skipped).
async fn next_message(socket: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("a message in time")
            .expect("the socket open")
            .unwrap();
        if let Message::Text(text) = frame {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

#[tokio::test]
async fn cells_beyond_the_connections_budget_are_refused_not_held() {
    // 2 MiB a connection: cells may hold 1 MiB of it.
    let server = TestServer::start_configured(|config| {
        config.jupyter.connection_budget_mib = 2;
    })
    .await;
    let key = server.api_key("budget").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap().to_string();
    let mut socket = open(&server, &id, &key).await;

    // One cell runs a while; ten of 300 kB each queue behind it.
    let (sleeping, frame) = request("execute_request", cell("import time\ntime.sleep(60)"));
    socket.send(Message::text(frame)).await.unwrap();
    let big = format!("x = '{}'", "a".repeat(300_000));
    let mut queued = Vec::new();
    for _ in 0..10 {
        let (msg_id, frame) = request("execute_request", cell(&big));
        socket.send(Message::text(frame)).await.unwrap();
        queued.push(msg_id);
    }
    // Three fit in 1 MiB; the other seven are refused at once, each with
    // an error reply (between busy and idle, as clients wait for).
    let mut refused = 0;
    for msg_id in &queued[3..] {
        let (reply, iopub) = answer(&mut socket, msg_id).await;
        assert_eq!(reply["msg_type"], "execute_reply");
        assert_eq!(reply["content"]["status"], "error", "{reply}");
        assert_eq!(reply["content"]["ename"], "ResourceExhausted");
        let why = reply["content"]["evalue"].as_str().unwrap();
        assert!(why.contains("jupyter.connection_budget_mib"), "{why}");
        assert_eq!(iopub[0]["content"]["execution_state"], "busy");
        refused += 1;
    }
    assert_eq!(refused, 7);

    // The kernel goes on: the sleeping cell is stopped, what queued behind
    // it aborted, and a new cell runs.
    let interrupted = call(
        &server,
        &key,
        reqwest::Method::POST,
        &format!("/api/kernels/{id}/interrupt"),
    )
    .await;
    assert_eq!(interrupted.status(), 204);
    let (reply, _) = answer(&mut socket, &sleeping).await;
    assert_eq!(reply["content"]["ename"], "KeyboardInterrupt");
    for msg_id in &queued[..3] {
        let (reply, _) = answer(&mut socket, msg_id).await;
        assert_eq!(reply["content"]["status"], "aborted");
    }
    let (reply, iopub) = ask(&mut socket, "execute_request", cell("print(6 * 7)")).await;
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(streamed(&iopub), "42\n");
}

#[tokio::test]
async fn a_reply_echoes_a_short_header_however_big_the_requests_was() {
    let server = TestServer::start().await;
    let key = server.api_key("headers").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap();
    let mut socket = open(&server, id, &key).await;

    let long = "h".repeat(1024 * 1024);
    let frame = json!({
        "header": {"msg_id": "big-1", "msg_type": "kernel_info_request", "session": "s1",
            "username": long, "date": "2026-11-29T00:00:00Z", "version": "5.3",
            "extra": long, "nested": {"deeper": [long]}},
        "parent_header": {}, "metadata": {}, "content": {}, "channel": "shell",
    });
    socket.send(Message::text(frame.to_string())).await.unwrap();
    let mut seen = 0;
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("an answer in time")
            .expect("the socket open")
            .unwrap();
        let Message::Text(text) = frame else { continue };
        assert!(text.len() < 8 * 1024, "a reply of {} bytes", text.len());
        let message: Value = serde_json::from_str(&text).unwrap();
        let parent = message["parent_header"].as_object().unwrap();
        for (name, value) in parent {
            assert!(
                [
                    "msg_id", "session", "username", "date", "msg_type", "version"
                ]
                .contains(&name.as_str()),
                "{name} echoed"
            );
            assert!(
                value.as_str().is_none_or(|text| text.len() <= 256),
                "{name}"
            );
        }
        assert_eq!(parent["msg_id"], "big-1");
        assert_eq!(parent["username"].as_str().unwrap().len(), 256);
        seen += 1;
        if message["msg_type"] == "status" && message["content"]["execution_state"] == "idle" {
            break;
        }
    }
    assert_eq!(seen, 3, "busy, kernel_info_reply, idle");

    // A frame over jupyter.max_message_mib (4) closes the socket, saying why.
    let _ = socket
        .send(Message::text("x".repeat(5 * 1024 * 1024)))
        .await;
    let close = tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => break frame,
                None | Some(Err(_)) => break None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("closed in time")
    .expect("a close frame");
    assert_eq!(u16::from(close.code), 1009);
    assert!(
        close.reason.contains("jupyter.max_message_mib"),
        "{}",
        close.reason
    );
}

#[tokio::test]
async fn a_connection_that_does_not_read_is_closed_once_its_frames_exceed_its_budget() {
    let server = TestServer::start_configured(|config| {
        config.jupyter.connection_budget_mib = 1;
        config.jupyter.messages_per_second = 1_000_000;
    })
    .await;
    let key = server.api_key("slow").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap().to_string();
    let mut socket = open(&server, &id, &key).await;
    let connections = || async {
        let model: Value = call(
            &server,
            &key,
            reqwest::Method::GET,
            &format!("/api/kernels/{id}"),
        )
        .await
        .json()
        .await
        .unwrap();
        model["connections"].as_u64().unwrap()
    };
    assert_eq!(connections().await, 1);

    // Requests, each answered with three frames (~2 kB), and nothing read:
    // past the socket's buffers, the frames pile up on the server.
    let (_, frame) = request("kernel_info_request", json!({}));
    let mut sent = 0u64;
    let mut cut = false;
    'flood: for _ in 0..100 {
        for _ in 0..500 {
            if socket.send(Message::text(frame.clone())).await.is_err() {
                break 'flood;
            }
            sent += 1;
        }
        if connections().await == 0 {
            cut = true;
            break;
        }
    }
    if !cut {
        cut = connections().await == 0;
    }
    assert!(cut, "{sent} requests unread and the connection still held");

    // Reading now: what was sent before the cut, then a close saying why.
    let mut frames = 0u64;
    let close = tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => break frame,
                None | Some(Err(_)) => break None,
                Some(Ok(_)) => frames += 1,
            }
        }
    })
    .await
    .expect("closed in time")
    .expect("a close frame");
    assert_eq!(u16::from(close.code), 1008);
    assert!(
        close.reason.contains("jupyter.connection_budget_mib"),
        "{}",
        close.reason
    );
    assert!(
        frames < 3 * sent,
        "{frames} frames of {sent} requests' answers"
    );
    // The kernel is fine for others.
    let mut other = open(&server, &id, &key).await;
    let (reply, _) = ask(&mut other, "kernel_info_request", json!({})).await;
    assert_eq!(reply["msg_type"], "kernel_info_reply");
}

#[tokio::test]
async fn a_flood_of_restart_requests_restarts_the_kernel_a_bounded_number_of_times() {
    let server = TestServer::start_configured(|config| {
        config.jupyter.restarts_per_minute = 2;
    })
    .await;
    let key = server.api_key("restarts").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap().to_string();
    let mut socket = open(&server, &id, &key).await;

    // Forty restarts asked for at once, on control.
    for _ in 0..40 {
        let (_, frame) = request("shutdown_request", json!({"restart": true}));
        let frame = frame.replace("\"shell\"", "\"control\"");
        socket.send(Message::text(frame)).await.unwrap();
    }
    let (mut ok, mut refused, mut restarting) = (0, 0, 0);
    while ok + refused < 40 {
        let message = next_message(&mut socket).await;
        match (message["channel"].as_str(), message["msg_type"].as_str()) {
            (Some("control"), Some("shutdown_reply")) => {
                if message["content"]["status"] == "ok" {
                    ok += 1;
                } else {
                    assert_eq!(message["content"]["status"], "error", "{message}");
                    let why = message["content"]["evalue"].as_str().unwrap();
                    assert!(why.contains("restarts_per_minute"), "{why}");
                    refused += 1;
                }
            }
            // A restart asked for shows `starting`: `restarting` is
            // jupyter_server's word for a kernel that died (JupyterLab says
            // so), never sent here.
            (Some("iopub"), Some("status")) => {
                let state = &message["content"]["execution_state"];
                assert_ne!(state, "restarting", "{message}");
                if state == "starting" {
                    restarting += 1;
                }
            }
            _ => {}
        }
    }
    // Through the REST API: joined or done until the minute's restarts are
    // spent, then 429 with Retry-After.
    let path = format!("/api/kernels/{id}/restart");
    let mut answered = Vec::new();
    let refusal = loop {
        let response = call(&server, &key, reqwest::Method::POST, &path).await;
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        answered.push(response.status());
        assert!(answered.len() <= 2, "more restarts than the minute allows");
    };
    let wait: u64 = refusal.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: Value = refusal.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("restarts_per_minute"),
        "{body}"
    );

    // Every restart's frames are in before this reply (one ordered stream).
    let (info, frame) = request("kernel_info_request", json!({}));
    socket.send(Message::text(frame)).await.unwrap();
    loop {
        let message = next_message(&mut socket).await;
        if message["msg_type"] == "status" {
            let state = &message["content"]["execution_state"];
            assert_ne!(state, "restarting", "{message}");
            if state == "starting" {
                restarting += 1;
            }
        }
        if message["parent_header"]["msg_id"] == info && message["msg_type"] == "kernel_info_reply"
        {
            break;
        }
    }
    assert!(
        (1..=2).contains(&restarting),
        "{restarting} restarts for 40 requests and {} more",
        answered.len()
    );
    // The kernel runs cells after it all.
    let (reply, iopub) = ask(&mut socket, "execute_request", cell("print(6 * 7)")).await;
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(streamed(&iopub), "42\n");
}

#[tokio::test]
async fn a_revoked_keys_socket_and_kernel_are_closed_within_seconds() {
    let server = TestServer::start_configured(|config| config.auth.revocation_check_secs = 1).await;
    let key = server.api_key("leaving").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap().to_string();
    let mut socket = open(&server, &id, &key).await;
    let (_, iopub) = ask(&mut socket, "execute_request", cell("print('before')")).await;
    assert_eq!(streamed(&iopub), "before\n");
    let staying = server.api_key("staying").await;
    let kept = start_kernel(&server, &staying).await;
    let kept = kept["id"].as_str().unwrap();

    server.revoke("leaving").await;
    // The socket it opened before is closed, though its token was checked
    // only when it opened.
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a revoked key's socket stayed open");
    // Another key's kernel goes on.
    let model = call(
        &server,
        &staying,
        reqwest::Method::GET,
        &format!("/api/kernels/{kept}"),
    )
    .await;
    assert_eq!(model.status(), 200);
}

/// What a notebook front end relies on beyond cells: `clear_output`,
/// display ids and their updates and the pager's payload are forwarded as
/// Jupyter messages; completion, inspection, is_complete and history are
/// answered by the session's real kernel (ipykernel), not by the gateway.
#[tokio::test]
async fn front_end_messages_are_forwarded_and_the_kernel_answers_its_questions() {
    let server = TestServer::start().await;
    let key = server.api_key("front-end").await;
    let kernel = start_kernel(&server, &key).await;
    let id = kernel["id"].as_str().unwrap();
    let mut socket = open(&server, id, &key).await;
    let kinds = |iopub: &[Value]| -> Vec<String> {
        iopub
            .iter()
            .map(|m| m["msg_type"].as_str().unwrap().to_string())
            .filter(|t| t != "status" && t != "execute_input")
            .collect()
    };

    let (reply, iopub) = ask(
        &mut socket,
        "execute_request",
        cell("from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')"),
    )
    .await;
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(kinds(&iopub), ["stream", "clear_output", "stream"]);
    assert_eq!(iopub[3]["content"], json!({"wait": true}));

    let (_, iopub) = ask(
        &mut socket,
        "execute_request",
        cell("h = display('v1', display_id=True)\nh.update('v2')"),
    )
    .await;
    assert_eq!(kinds(&iopub), ["display_data", "update_display_data"]);
    let (shown, updated) = (&iopub[2]["content"], &iopub[3]["content"]);
    let display_id = shown["transient"]["display_id"].as_str().unwrap();
    assert!(!display_id.is_empty());
    assert_eq!(updated["transient"], json!({"display_id": display_id}));
    assert_eq!(updated["data"], json!({"text/plain": "'v2'"}));

    let (reply, _) = ask(&mut socket, "execute_request", cell("zip?")).await;
    let payload = &reply["content"]["payload"];
    assert_eq!(payload.as_array().map(Vec::len), Some(1), "{reply}");
    assert_eq!(payload[0]["source"], "page");
    assert_eq!(payload[0]["start"], 0);
    assert!(
        payload[0]["data"]["text/plain"]
            .as_str()
            .unwrap()
            .contains("zip(*iterables"),
        "{payload}"
    );

    // The kernel's own answers: a name the session holds completes.
    ask(&mut socket, "execute_request", cell("x_unique_name = 1")).await;
    let (reply, iopub) = ask(
        &mut socket,
        "complete_request",
        json!({"code": "x_unique_n", "cursor_pos": 10}),
    )
    .await;
    assert_eq!(reply["msg_type"], "complete_reply");
    assert_eq!(
        (
            &reply["content"]["matches"],
            &reply["content"]["cursor_start"]
        ),
        (&json!(["x_unique_name"]), &json!(0)),
        "{reply}"
    );
    assert_eq!(iopub.len(), 2, "busy and idle around it");
    let (reply, _) = ask(
        &mut socket,
        "inspect_request",
        json!({"code": "zip", "cursor_pos": 3, "detail_level": 0}),
    )
    .await;
    assert_eq!(reply["content"]["found"], true, "{reply}");
    let (reply, _) = ask(
        &mut socket,
        "is_complete_request",
        json!({"code": "for i in range(3):"}),
    )
    .await;
    assert_eq!(
        reply["content"],
        json!({"status": "incomplete", "indent": "    "})
    );
    let (reply, _) = ask(
        &mut socket,
        "history_request",
        json!({"hist_access_type": "tail", "n": 1, "output": false, "raw": true}),
    )
    .await;
    assert_eq!(
        reply["content"]["history"][0][2], "x_unique_name = 1",
        "{reply}"
    );
}
