//! The client against local servers on `127.0.0.1:0`: recorded streams
//! replayed byte for byte, and every failure the client must name.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use super::models::parse_models;
use super::*;
use crate::{
    Completion, FinishReason, Message, ResponseSchema, ToolCall, ToolChoice, ToolSpec, Usage,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm");
const KEY: &str = "sk-test-0123456789secret";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Serves `app` on a free port; returns its API base (`.../v1`).
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn config(base: &str) -> OpenAiConfig {
    OpenAiConfig {
        api_key: Some(KEY.into()),
        model: Some("m".to_owned()),
        request_timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(5),
        ..OpenAiConfig::new(base)
    }
}

fn client(base: &str) -> OpenAiClient {
    OpenAiClient::new(config(base)).unwrap()
}

/// An SSE response sending `bytes` in pieces of `piece` bytes.
fn sse(bytes: &[u8], piece: usize) -> Response {
    let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
        .chunks(piece.max(1))
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap()
}

fn error_response(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

/// A server answering every chat with what `answer(n, body)` returns, `n`
/// counting requests from 0. Returns the base URL and the bodies received.
async fn chat_server<F>(answer: F) -> (String, Arc<Mutex<Vec<Value>>>)
where
    F: Fn(usize, &Value, &HeaderMap) -> Response + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let bodies = seen.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(
            move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let response = answer(n, &body, &headers);
                bodies.lock().unwrap().push(body);
                async move { response }
            },
        ),
    );
    (serve(app).await, seen)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    }
}

async fn run(
    client: &OpenAiClient,
    request: ChatRequest,
) -> Result<Vec<Result<LlmEvent, LlmError>>, LlmError> {
    let stream = client.chat(request).await?;
    Ok(stream.collect().await)
}

fn text(t: &str) -> Result<LlmEvent, LlmError> {
    Ok(LlmEvent::Text(t.to_owned()))
}

fn frag(
    index: usize,
    id: Option<&str>,
    name: Option<&str>,
    arguments: &str,
) -> Result<LlmEvent, LlmError> {
    Ok(LlmEvent::ToolCallDelta {
        index,
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        arguments: arguments.to_owned(),
    })
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

fn done(
    text: &str,
    tool_calls: Vec<ToolCall>,
    finish_reason: FinishReason,
    usage: Option<(u32, u32)>,
) -> Result<LlmEvent, LlmError> {
    Ok(LlmEvent::Done(Completion {
        text: text.to_owned(),
        tool_calls,
        finish_reason,
        usage: usage.map(|(prompt_tokens, completion_tokens)| Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens: 0,
        }),
    }))
}

fn fixture_cases() -> Vec<(&'static str, Vec<Result<LlmEvent, LlmError>>)> {
    let vllm_args = r#"{"code": "import math\nprint(math.factorial(10))"}"#;
    let vllm_id = "chatcmpl-tool-4d2a6c1e0b9f48a7";
    let llama_id = "Xb4kT9pQ2wL7nR1sV8mC3zF6hJ0dG5aE";
    let (a, b, c) = (
        "call_3QvK8mZ1aB2cD4eF6gH8iJ0k",
        "call_7LmN9pQ1rS3tU5vW7xY9zA1b",
        "call_2BcD4eF6gH8iJ0kL2mN4oP6q",
    );
    vec![
        (
            "vllm_tool_calls.sse",
            vec![
                frag(0, Some(vllm_id), Some("execute_code"), ""),
                frag(0, None, None, r#"{"code": ""#),
                frag(0, None, None, r"import math\n"),
                frag(0, None, None, "print(math."),
                frag(0, None, None, "factorial(10))"),
                frag(0, None, None, r#""}"#),
                done(
                    "",
                    vec![call(vllm_id, "execute_code", vllm_args)],
                    FinishReason::ToolCalls,
                    Some((312, 33)),
                ),
            ],
        ),
        (
            "ollama_tool_call.sse",
            vec![
                frag(
                    0,
                    Some("call_x7kq2m9d"),
                    Some("execute_code"),
                    r#"{"code":"print(sum(range(101)))"}"#,
                ),
                done(
                    "",
                    vec![call(
                        "call_x7kq2m9d",
                        "execute_code",
                        r#"{"code":"print(sum(range(101)))"}"#,
                    )],
                    FinishReason::ToolCalls,
                    Some((187, 24)),
                ),
            ],
        ),
        (
            "llama_server_text.sse",
            vec![
                text("Voilà"),
                text(": le"),
                text(" café"),
                text(" ☕ coûte"),
                text(" 3"),
                text(" €"),
                text("."),
                done("Voilà: le café ☕ coûte 3 €.", vec![], FinishReason::Stop, Some((24, 9))),
            ],
        ),
        (
            "llama_server_tool_call.sse",
            vec![
                frag(0, Some(llama_id), Some("execute_code"), "{\""),
                frag(0, None, None, "code"),
                frag(0, None, None, "\":\""),
                frag(0, None, None, "print("),
                frag(0, None, None, "2**"),
                frag(0, None, None, "100)"),
                frag(0, None, None, "\"}"),
                done(
                    "",
                    vec![call(llama_id, "execute_code", r#"{"code":"print(2**100)"}"#)],
                    FinishReason::ToolCalls,
                    Some((230, 21)),
                ),
            ],
        ),
        (
            "openai_parallel_tools.sse",
            vec![
                frag(0, Some(a), Some("get_weather"), ""),
                frag(0, None, None, r#"{"ci"#),
                frag(1, Some(b), Some("get_weather"), ""),
                frag(1, None, None, r#"{"city": "#),
                frag(0, None, None, r#"ty": "Paris"}"#),
                frag(2, Some(c), Some("get_time"), "{}"),
                frag(1, None, None, r#""Kyōto"}"#),
                done(
                    "",
                    vec![
                        call(a, "get_weather", r#"{"city": "Paris"}"#),
                        call(b, "get_weather", r#"{"city": "Kyōto"}"#),
                        call(c, "get_time", "{}"),
                    ],
                    FinishReason::ToolCalls,
                    Some((82, 61)),
                ),
            ],
        ),
        (
            "keepalive_crlf.sse",
            vec![text("4"), text("2"), done("42", vec![], FinishReason::Stop, None)],
        ),
        (
            "vllm_error_mid_stream.sse",
            vec![
                text("Let"),
                text(" me"),
                Err(LlmError::Server {
                    status: 500,
                    message: "CUDA error: an illegal memory access was encountered".to_owned(),
                }),
            ],
        ),
        (
            "event_error.sse",
            vec![
                text("Hi"),
                Err(LlmError::RateLimited {
                    message: "Rate limit reached for gpt-4o in organization org-xxx on tokens per min (TPM)"
                        .to_owned(),
                    retry_after: None,
                }),
            ],
        ),
        (
            "cut_before_finish.sse",
            vec![
                text("The answer"),
                text(" is"),
                Err(LlmError::MalformedStream(
                    "the stream ended before the reply was complete".to_owned(),
                )),
            ],
        ),
    ]
}

#[tokio::test]
async fn recorded_streams_replay_to_the_exact_events() {
    let piece = Arc::new(AtomicUsize::new(1));
    let name = Arc::new(Mutex::new(String::new()));
    let (p, n) = (piece.clone(), name.clone());
    let (base, _) =
        chat_server(move |_, _, _| sse(&fixture(&n.lock().unwrap()), p.load(Ordering::SeqCst)))
            .await;
    let client = client(&base);
    for (file, expect) in fixture_cases() {
        for size in [1, 3, 7, 64, 100_000] {
            piece.store(size, Ordering::SeqCst);
            file.clone_into(&mut name.lock().unwrap());
            let events = run(&client, ask("hi")).await;
            assert_eq!(events.as_ref(), Ok(&expect), "{file} in pieces of {size}");
        }
    }
}

#[tokio::test]
async fn a_stream_closed_after_its_finish_reason_needs_no_done_marker() {
    let (base, _) = chat_server(|_, _, _| {
        let whole = String::from_utf8(fixture("llama_server_text.sse")).unwrap();
        let cut = whole.strip_suffix("data: [DONE]\n\n").unwrap().to_owned();
        sse(cut.as_bytes(), 5)
    })
    .await;
    let events = run(&client(&base), ask("hi")).await.unwrap();
    let expect = &fixture_cases()[2];
    assert_eq!(expect.0, "llama_server_text.sse");
    assert_eq!(events, expect.1);
}

#[tokio::test]
async fn requests_carry_the_key_options_and_model() {
    let (base, seen) = chat_server(|_, _, headers| {
        assert_eq!(
            headers.get(header::AUTHORIZATION).unwrap(),
            &format!("Bearer {KEY}")
        );
        sse(&fixture("keepalive_crlf.sse"), 50)
    })
    .await;
    run(&client(&base), ask("hi")).await.unwrap();
    let body = seen.lock().unwrap()[0].clone();
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn error_statuses_become_typed_errors_without_the_key() {
    let cases: Vec<(u16, Value, &str)> = vec![
        (
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}"),
                "type": "invalid_request_error", "code": "invalid_api_key"}}),
            "llm_auth",
        ),
        (
            404,
            json!({"object": "error", "message": "The model `m` does not exist.",
                "type": "NotFoundError", "param": null, "code": 404}),
            "llm_model_not_found",
        ),
        (
            400,
            json!({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion).",
                "type": "BadRequestError", "param": null, "code": 400}),
            "llm_context_too_long",
        ),
        (
            400,
            json!({"error": {"message": "temperature must be <= 2"}}),
            "llm_bad_request",
        ),
    ];
    for (status, body, code) in cases {
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        let (base, _) = chat_server(move |_, _, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            error_response(status, body.clone())
        })
        .await;
        let err = run(&client(&base), ask("hi")).await.unwrap_err();
        assert_eq!(err.code(), code, "{status}: {err}");
        assert!(!err.to_string().contains(KEY), "{err}");
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "{status} must not be retried"
        );
        if let LlmError::ModelNotFound { model, .. } = &err {
            assert_eq!(model, "m");
        }
    }
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_servers_delay() {
    let (base, seen) = chat_server(|n, _, _| {
        if n == 0 {
            let mut r = error_response(429, json!({"error": {"message": "slow down"}}));
            r.headers_mut()
                .insert("retry-after-ms", "30".parse().unwrap());
            r
        } else {
            sse(&fixture("keepalive_crlf.sse"), 16)
        }
    })
    .await;
    let started = Instant::now();
    let events = run(&client(&base), ask("hi")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert!(matches!(events.last(), Some(Ok(LlmEvent::Done(_)))));
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_max_retries_times() {
    let (base, seen) = chat_server(|_, _, _| {
        error_response(500, json!({"error": {"message": "boom", "code": 500}}))
    })
    .await;
    let err = run(&client(&base), ask("hi")).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::Server {
            status: 500,
            message: "boom".to_owned()
        }
    );
    assert_eq!(seen.lock().unwrap().len(), 3);
}

/// Sends `head`, then breaks the connection.
fn breaking_after(head: Vec<u8>) -> Response {
    let head = Bytes::from(head);
    let chunks =
        futures::stream::once(async move { Ok(head) }).chain(futures::stream::once(async {
            // Let the headers and `head` go out before the failure.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(std::io::Error::other("the GPU caught fire"))
        }));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(chunks))
        .unwrap()
}

#[tokio::test]
async fn a_failure_after_tokens_is_the_last_item_and_never_retried() {
    let (base, seen) =
        chat_server(|_, _, _| breaking_after(fixture("cut_before_finish.sse"))).await;
    let events = run(&client(&base), ask("hi")).await.unwrap();
    assert_eq!(events[..2], [text("The answer"), text(" is")]);
    assert_eq!(events.len(), 3);
    assert!(
        matches!(&events[2], Err(LlmError::MalformedStream(m)) if m.contains("connection closed")),
        "{:?}",
        events[2]
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_connection_broken_before_any_event_is_retried() {
    let (base, seen) = chat_server(|n, _, _| {
        if n == 0 {
            // A role-only delta yields no event: the reply has not started.
            breaking_after(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
                    .to_vec(),
            )
        } else {
            sse(&fixture("keepalive_crlf.sse"), 16)
        }
    })
    .await;
    let events = run(&client(&base), ask("hi")).await.unwrap();
    assert_eq!(events[0], text("4"));
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let client = OpenAiClient::new(OpenAiConfig {
        max_retries: 1,
        ..config(&base)
    })
    .unwrap();
    match run(&client, ask("hi")).await {
        Err(LlmError::Unreachable { url, detail }) => {
            assert_eq!(url, base);
            assert!(!detail.is_empty());
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "never"
        }),
    );
    let base = serve(app).await;
    let client = OpenAiClient::new(OpenAiConfig {
        request_timeout: Duration::from_millis(200),
        max_retries: 0,
        ..config(&base)
    })
    .unwrap();
    let started = Instant::now();
    let err = run(&client, ask("hi")).await.unwrap_err();
    assert_eq!(err, LlmError::Timeout(Duration::from_millis(200)));
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Sends `head`, then nothing for `stall`, then nothing more.
fn stalling(head: &'static [u8], stall: Duration) -> Response {
    let chunks =
        futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from_static(head)) })
            .chain(futures::stream::once(async move {
                tokio::time::sleep(stall).await;
                Ok(Bytes::new())
            }));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(chunks))
        .unwrap()
}

#[tokio::test]
async fn a_stalled_stream_times_out_after_its_tokens() {
    let head: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let (base, _) = chat_server(move |_, _, _| stalling(head, Duration::from_secs(30))).await;
    let client = OpenAiClient::new(OpenAiConfig {
        request_timeout: Duration::from_millis(200),
        ..config(&base)
    })
    .unwrap();
    let events = run(&client, ask("hi")).await.unwrap();
    assert_eq!(
        events,
        [
            text("Hi"),
            Err(LlmError::Timeout(Duration::from_millis(200)))
        ]
    );
}

fn schema_request() -> ChatRequest {
    ChatRequest {
        response_schema: Some(ResponseSchema {
            name: "answer shape".to_owned(),
            schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        }),
        ..ask("hi")
    }
}

#[tokio::test]
async fn refused_json_schema_falls_back_to_json_object_once() {
    let (base, seen) = chat_server(
        |_, body, _| match body["response_format"]["type"].as_str() {
            Some("json_schema") => error_response(
                400,
                json!({"error": {"message": "Unsupported response_format type: json_schema"}}),
            ),
            Some("json_object") => {
                assert_eq!(body["response_format"]["schema"]["type"], "object");
                sse(&fixture("keepalive_crlf.sse"), 16)
            }
            other => panic!("unexpected response_format {other:?}"),
        },
    )
    .await;
    let client = client(&base);
    run(&client, schema_request()).await.unwrap();
    run(&client, schema_request()).await.unwrap();
    let kinds: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| b["response_format"]["type"].clone())
        .collect();
    assert_eq!(kinds, ["json_schema", "json_object", "json_object"]);
    assert_eq!(
        seen.lock().unwrap()[0]["response_format"]["json_schema"]["name"],
        "answer_shape"
    );
}

#[tokio::test]
async fn refused_stream_options_are_dropped_once() {
    let (base, seen) = chat_server(|_, body, _| {
        if body.get("stream_options").is_some() {
            error_response(
                400,
                json!({"detail": "Unrecognized request argument supplied: stream_options"}),
            )
        } else {
            sse(&fixture("keepalive_crlf.sse"), 16)
        }
    })
    .await;
    let client = client(&base);
    run(&client, ask("hi")).await.unwrap();
    run(&client, ask("hi")).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn models_are_listed_and_the_first_is_the_default() {
    let chat = post(|axum::Json(body): axum::Json<Value>| async move {
        assert_eq!(body["model"], "qwen2.5:0.5b");
        sse(&fixture("keepalive_crlf.sse"), 16)
    });
    let app = Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [
                    {"id": "qwen2.5:0.5b", "object": "model", "created": 1, "owned_by": "library"},
                    {"id": "llama3.2:3b", "object": "model", "created": 1, "owned_by": "library"}]}))
            }),
        )
        .route("/v1/chat/completions", chat);
    let base = serve(app).await;
    let client = OpenAiClient::new(OpenAiConfig {
        model: None,
        ..config(&base)
    })
    .unwrap();
    let models = client.models().await.unwrap();
    assert_eq!(
        models,
        [
            ModelInfo {
                id: "qwen2.5:0.5b".into(),
                owned_by: Some("library".into())
            },
            ModelInfo {
                id: "llama3.2:3b".into(),
                owned_by: Some("library".into())
            },
        ]
    );
    let events = run(&client, ask("hi")).await.unwrap();
    assert!(matches!(events.last(), Some(Ok(LlmEvent::Done(_)))));
}

#[test]
fn model_lists_of_every_shape_parse() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"object": "list", "data": [{"id": "a", "owned_by": "vllm"}]}),
            vec!["a"],
        ),
        (
            json!({"models": [{"name": "a.gguf", "model": "a.gguf", "capabilities": ["completion"]}],
                   "object": "list", "data": [{"id": "a.gguf", "object": "model", "owned_by": "llamacpp"}]}),
            vec!["a.gguf"],
        ),
        (
            json!({"models": [{"name": "llama3:latest", "size": 1}]}),
            vec!["llama3:latest"],
        ),
        (json!(["x", {"id": "y"}]), vec!["x", "y"]),
        (json!({"data": []}), vec![]),
    ];
    for (value, expect) in cases {
        let ids: Vec<String> = parse_models(&value).into_iter().map(|m| m.id).collect();
        assert_eq!(ids, expect, "{value}");
    }
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted() {
    let (base, _) = chat_server(|_, _, _| {
        axum::Json(
            json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}),
        )
        .into_response()
    })
    .await;
    let events = run(&client(&base), ask("hi")).await.unwrap();
    assert_eq!(
        events,
        [
            text("Hello"),
            done("Hello", vec![], FinishReason::Stop, Some((3, 1)))
        ]
    );
}

/// Tells `tx` when it is dropped, i.e. when the server gives up the body.
struct DropSignal(Option<std::sync::mpsc::Sender<Instant>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(Instant::now());
        }
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let (base, _) = chat_server(move |_, _, _| {
        let signal = DropSignal(tx.lock().unwrap().take());
        let chunks = futures::stream::unfold(signal, |signal| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let chunk = Bytes::from_static(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
            );
            Some((Ok::<_, std::io::Error>(chunk), signal))
        });
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(chunks))
            .unwrap()
    })
    .await;
    let client = client(&base);
    let mut stream = client.chat(ask("hi")).await.unwrap();
    for _ in 0..3 {
        assert_eq!(stream.next().await.unwrap(), text("x"));
    }
    let dropped = Instant::now();
    drop(stream);
    let closed = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(2)))
        .await
        .unwrap()
        .expect("the server never saw the connection close");
    let after = closed.saturating_duration_since(dropped);
    assert!(
        after < Duration::from_millis(100),
        "closed {after:?} after the drop"
    );
}

#[test]
fn requests_map_to_the_openai_shape() {
    let request = ChatRequest {
        model: None,
        messages: vec![
            Message::system("be brief"),
            Message {
                tool_calls: vec![call("c1", "execute_code", r#"{"code":"1+1"}"#)],
                ..Message::assistant("")
            },
            Message::tool("c1", "2"),
        ],
        tools: vec![ToolSpec {
            name: "execute_code".into(),
            description: "Runs Python".into(),
            parameters: json!({"type": "object"}),
        }],
        tool_choice: ToolChoice::Named("execute_code".into()),
        response_schema: None,
        max_tokens: Some(64),
        temperature: Some(0.0),
        seed: Some(7),
        // Whose request it is stays in runcell: the body below has no trace.
        requester: crate::Requester::Known("0123456789abcdef".into()),
        shared_messages: 1,
        conversation: Some("a-session".into()),
    };
    let body = request_body(&request, "m", true, false, None);
    assert_eq!(
        body,
        json!({
            "model": "m",
            "stream": true,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "execute_code", "arguments": "{\"code\":\"1+1\"}"}}]},
                {"role": "tool", "content": "2", "tool_call_id": "c1"},
            ],
            "tools": [{"type": "function", "function": {"name": "execute_code",
                "description": "Runs Python", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "execute_code"}},
            "max_tokens": 64,
            "temperature": 0.0,
            "seed": 7,
        })
    );
    let choices = [
        (ToolChoice::Auto, json!("auto")),
        (ToolChoice::Required, json!("required")),
        (ToolChoice::None, json!("none")),
    ];
    for (choice, expect) in choices {
        let request = ChatRequest {
            tool_choice: choice,
            ..request.clone()
        };
        assert_eq!(
            request_body(&request, "m", true, true, None)["tool_choice"],
            expect
        );
    }
    let without_tools = request_body(&request, "m", false, true, None);
    assert!(without_tools.get("tools").is_none() && without_tools.get("tool_choice").is_none());
}

#[test]
fn response_formats_follow_the_mode() {
    let cases = [
        (StructuredOutputMode::Auto, Some("json_schema")),
        (StructuredOutputMode::JsonSchema, Some("json_schema")),
        (StructuredOutputMode::JsonObject, Some("json_object")),
        (StructuredOutputMode::Off, None),
    ];
    for (mode, expect) in cases {
        let client = OpenAiClient::new(OpenAiConfig {
            structured_output: mode,
            ..config("http://127.0.0.1:9/v1")
        })
        .unwrap();
        let format = client.response_format(&schema_request());
        assert_eq!(
            format.as_ref().and_then(|f| f["type"].as_str()),
            expect,
            "{mode:?}"
        );
        assert_eq!(client.capabilities().structured_output, expect.is_some());
    }
}

#[test]
fn secrets_stay_out_of_debug_and_urls() {
    let config = OpenAiConfig {
        api_key: Some(KEY.into()),
        ..OpenAiConfig::new("http://user:pass@example.com/v1?token=abc")
    };
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(KEY) && !shown.contains("pass") && !shown.contains("abc"),
        "{shown}"
    );
    let client = OpenAiClient::new(config).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
    assert!(OpenAiClient::new(OpenAiConfig::new("ftp://x")).is_err());
    // https works (the TLS backend is compiled in).
    assert!(OpenAiClient::new(OpenAiConfig::default()).is_ok());
    assert_eq!(client.backend(), "openai");
}

/// Against a real server, when `RUNCELL_TEST_OPENAI_BASE_URL` names one
/// (`RUNCELL_TEST_OPENAI_MODEL` and `OPENAI_API_KEY` optional).
#[tokio::test]
async fn a_real_server_streams_a_reply_when_configured() {
    let Ok(base) = std::env::var("RUNCELL_TEST_OPENAI_BASE_URL") else {
        eprintln!("skipped: set RUNCELL_TEST_OPENAI_BASE_URL to run against a real server");
        return;
    };
    let client = OpenAiClient::new(OpenAiConfig {
        api_key: std::env::var("OPENAI_API_KEY").ok().map(Into::into),
        model: std::env::var("RUNCELL_TEST_OPENAI_MODEL").ok(),
        ..OpenAiConfig::new(base)
    })
    .unwrap();
    assert!(!client.models().await.unwrap().is_empty());
    let request = ChatRequest {
        max_tokens: Some(16),
        temperature: Some(0.0),
        ..ask("Say hello.")
    };
    let events = run(&client, request).await.unwrap();
    let Some(Ok(LlmEvent::Done(completion))) = events.last() else {
        panic!("no Done: {events:?}");
    };
    assert!(!completion.text.is_empty(), "{completion:?}");
}

/// Recorded from llama-cpp-python 0.3.36 (`--chat_format
/// chatml-function-calling`, forced tool): it repeats the call's id and name
/// on every fragment, and mirrors it into the legacy `function_call`.
#[tokio::test]
async fn a_recorded_llama_cpp_python_tool_call_assembles_once() {
    let (base, _) =
        chat_server(|_, _, _| sse(&fixture("llama_cpp_python_tool_call.sse"), 13)).await;
    let events = run(&client(&base), ask("hi")).await.unwrap();
    let Some(Ok(LlmEvent::Done(completion))) = events.last() else {
        panic!("no completion in {events:?}");
    };
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(completion.tool_calls.len(), 1, "{completion:?}");
    let call = &completion.tool_calls[0];
    assert_eq!(call.name, "execute_code");
    assert!(call.id.starts_with("call__0_execute_code_"), "{call:?}");
    assert_eq!(call.arguments, r#"{ "language": "python", "code": ""}"#);
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            Ok(LlmEvent::ToolCallDelta { arguments, .. }) => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, call.arguments);
}

/// A server that streams one line without end is cut off at the reply
/// limit, not buffered until memory runs out.
#[tokio::test]
async fn an_endless_line_is_cut_off_at_the_reply_limit() {
    let (base, _) = chat_server(|_, _, _| {
        let chunk = Bytes::from(vec![b'a'; 256 * 1024]);
        let endless = futures::stream::repeat(chunk).map(Ok::<_, std::io::Error>);
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(endless))
            .unwrap()
    })
    .await;
    let error = match run(&client(&base), ask("hi")).await {
        Err(e) => e,
        Ok(events) => events
            .into_iter()
            .find_map(Result::err)
            .expect("an endless line must end in an error"),
    };
    assert!(
        matches!(&error, LlmError::MalformedStream(m) if m.contains("larger than")),
        "{error:?}"
    );
}

/// The pause before a retry is the doubled base delay with jitter: between
/// half of it and all of it, capped; a server's `Retry-After` wins, capped.
#[test]
fn backoffs_double_with_jitter_and_are_capped() {
    let client = OpenAiClient::new(OpenAiConfig {
        retry_base_delay: Duration::from_millis(100),
        ..OpenAiConfig::new("http://127.0.0.1:9/v1")
    })
    .unwrap();
    for retry in 0..6 {
        let full = Duration::from_millis(100 * (1 << retry)).min(MAX_BACKOFF);
        for _ in 0..50 {
            let wait = client.backoff(retry, None);
            assert!(wait >= full / 2 && wait <= full, "retry {retry}: {wait:?}");
        }
    }
    assert_eq!(client.backoff(40, None).max(MAX_BACKOFF), MAX_BACKOFF);
    assert_eq!(
        client.backoff(0, Some(Duration::from_secs(3))),
        Duration::from_secs(3)
    );
    assert_eq!(
        client.backoff(0, Some(Duration::from_secs(3600))),
        RETRY_AFTER_CAP
    );
}

/// llama-cpp-python's server ends the stream it is sending when any other
/// request arrives, `/v1/models` included (its `interrupt_requests`): the
/// catalog's refresh every 30 s cut programs mid tool call. While a stream
/// is open the list comes from the last reading.
#[tokio::test]
async fn the_model_list_is_not_asked_for_while_a_stream_is_open() {
    let listed = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&listed);
    let head: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let app = Router::new()
        .route(
            "/v1/models",
            get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async {
                    axum::Json(
                        json!({"object": "list", "data": [{"id": "m.gguf", "owned_by": "me"}]}),
                    )
                }
            }),
        )
        .route(
            "/v1/chat/completions",
            post(move || async move { stalling(head, Duration::from_secs(30)) }),
        );
    let base = serve(app).await;
    let client = OpenAiClient::new(config(&base)).unwrap();
    assert_eq!(client.models().await.unwrap()[0].id, "m.gguf");
    assert_eq!(listed.load(Ordering::SeqCst), 1);
    let mut stream = client.chat(ask("hi")).await.unwrap();
    assert!(matches!(stream.next().await, Some(Ok(LlmEvent::Text(_)))));
    // The stream is open: the list is the last one read, the server not asked.
    assert_eq!(client.models().await.unwrap()[0].id, "m.gguf");
    assert_eq!(listed.load(Ordering::SeqCst), 1);
    // Closed, the list is read again.
    drop(stream);
    client.models().await.unwrap();
    assert_eq!(listed.load(Ordering::SeqCst), 2);
}
