//! The language-model layer against real peers: llama-cpp-python's
//! OpenAI-compatible server, and a server that is not there at all.

use std::time::Duration;

use app::notebook::{Cell, Notebook};
use app::protocol::{CellKind, CellStatus, EventBody, ServerMessage, TurnStatus};
use runcell_llm::openai::{OpenAiClient, OpenAiConfig};
use runcell_llm::{Llm, conformance};
use runcell_server::config::{LlmBackend, LlmConfig, SandboxConfig};

use crate::peer::llama_server;
use crate::support::{Client, TestServer, closed_port, http};

/// A small model on two shared cores: answers take seconds.
const ANSWER_PATIENCE: Duration = Duration::from_secs(240);

fn openai_backend(base_url: &str) -> LlmConfig {
    LlmConfig {
        backend: LlmBackend::Openai,
        base_url: base_url.into(),
        max_tokens: 96,
        max_retries: 0,
        timeout_secs: 120,
        ..LlmConfig::default()
    }
}

/// The cells of the next turn, however long the model takes; `notebook`
/// holds the session so far.
async fn turn(client: &mut Client, notebook: &mut Notebook) -> (Vec<Cell>, TurnStatus) {
    loop {
        let frame = client.next_within(ANSWER_PATIENCE).await;
        let Some(ServerMessage::Event(event)) = frame else {
            panic!("expected an event, got {frame:?}");
        };
        notebook.apply(&event);
        if let EventBody::TurnFinished { turn, status, .. } = event.event {
            return (notebook.cells_of(turn).cloned().collect(), status);
        }
    }
}

/// `/api/models` once `ready` holds (the list is read in the background).
async fn picker(
    server: &TestServer,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut listed = serde_json::Value::Null;
    for _ in 0..100 {
        listed = http()
            .get(server.url("/api/models"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ready(&listed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    listed
}

#[tokio::test]
async fn the_openai_client_passes_the_conformance_suite_against_llama_cpp_python() {
    let Some(peer) = llama_server().await else {
        return;
    };
    let client = OpenAiClient::new(OpenAiConfig {
        max_retries: 0,
        ..OpenAiConfig::new(&peer.base_url)
    })
    .unwrap();
    let models = client.models().await.unwrap();
    assert_eq!(models.len(), 1, "{models:?}");
    assert!(models[0].id.ends_with(".gguf"), "{models:?}");

    conformance::streams_text(&client, "Name three colours.").await;
    let call =
        conformance::calls_the_tool(&client, "Write Python that prints the factorial of 5.").await;
    assert_eq!(call.language, "python");
    conformance::cancels_mid_stream(&client, "Count from 1 to 200, one number per line.").await;
    conformance::refuses_an_unknown_model(&client).await;

    // The notebook, answered by the real server through the whole stack.
    let server = TestServer::start_with_llm(
        SandboxConfig {
            pool_size: 0,
            ..SandboxConfig::default()
        },
        openai_backend(&peer.base_url),
    )
    .await;
    let listed = picker(&server, |l| {
        l["models"].as_array().is_some_and(|m| !m.is_empty())
    })
    .await;
    assert_eq!(listed["backend"], "openai");
    assert_eq!(listed["models"][0], models[0].id.as_str(), "{listed}");

    let mut page = server.join(&server.new_session().await).await;
    page.ask("Write Python that prints the factorial of 5.")
        .await;
    let (cells, _) = turn(&mut page, &mut Notebook::default()).await;
    let kinds: Vec<CellKind> = cells.iter().map(|c| c.kind).collect();
    // A small model may write a program that fails and then fix it: every
    // attempt is a code cell and a result cell. The turn ends with an
    // explanation, or (a tiny model's fix being gibberish now and then) with
    // a code cell that names the model's failure.
    assert_eq!(kinds.first(), Some(&CellKind::User), "{cells:#?}");
    assert_eq!(kinds.get(1), Some(&CellKind::Code), "{cells:#?}");
    assert_eq!(kinds.get(2), Some(&CellKind::Result), "{cells:#?}");
    let code = &cells[1];
    assert_eq!(code.status, CellStatus::Ok, "{cells:#?}");
    assert!(!code.text.trim().is_empty());
    let last = &cells[kinds.len() - 1];
    match last.kind {
        CellKind::Explanation => assert!(!last.text.trim().is_empty(), "{cells:#?}"),
        CellKind::Code => {
            assert_eq!(last.status, CellStatus::Error, "{cells:#?}");
            let error = last.error.as_ref().map(|e| e.code.as_str());
            assert!(error.is_some_and(|c| c.starts_with("llm_")), "{cells:#?}");
        }
        _ => panic!("the turn ended on neither an explanation nor a model error: {cells:#?}"),
    }
}

#[tokio::test]
async fn a_dead_model_server_is_an_error_cell_and_the_session_goes_on() {
    let port = closed_port();
    let server = TestServer::start_with_llm(
        SandboxConfig {
            pool_size: 0,
            ..SandboxConfig::default()
        },
        openai_backend(&format!("http://127.0.0.1:{port}/v1")),
    )
    .await;
    let mut page = server.join(&server.new_session().await).await;
    let mut notebook = Notebook::default();
    for _ in 0..2 {
        page.ask("anyone there?").await;
        let (cells, status) = turn(&mut page, &mut notebook).await;
        assert_eq!(status, TurnStatus::Error);
        let code = &cells[1];
        assert_eq!(code.kind, CellKind::Code);
        assert_eq!(code.status, CellStatus::Error);
        assert_eq!(
            code.error.as_ref().map(|e| e.code.as_str()),
            Some("llm_unreachable")
        );
        assert_eq!(cells.len(), 2, "nothing runs without a program");
    }
    // The picker says why there is nothing to pick.
    let listed = picker(&server, |l| !l["problem"].is_null()).await;
    assert!(
        listed["problem"]
            .as_str()
            .is_some_and(|p| p.contains("cannot be reached")),
        "{listed}"
    );
    let health = http().get(server.url("/healthz")).send().await.unwrap();
    assert!(health.status().is_success());
}
