//! Checks every [`Llm`] backend must pass: the same `pub async fn`s run
//! against the scripted model, the embedded model and a real
//! OpenAI-compatible server. They panic with a message on failure.

use std::time::Duration;

use futures::StreamExt;

use super::tools::{EXECUTE_CODE, ExecuteCode, execute_code_spec};
use super::{ChatRequest, Completion, Llm, LlmError, LlmEvent, Message, ToolChoice};

/// Long enough for a small CPU model to answer; only a hang trips it.
const PATIENCE: Duration = Duration::from_secs(300);

/// Reads a whole stream: the events before `Done`, and the completion.
pub async fn collect(
    llm: &dyn Llm,
    request: ChatRequest,
) -> Result<(Vec<LlmEvent>, Completion), LlmError> {
    let mut stream = llm.chat(request).await?;
    let mut events = Vec::new();
    let read = async {
        while let Some(item) = stream.next().await {
            match item? {
                LlmEvent::Done(completion) => {
                    if let Some(extra) = stream.next().await {
                        panic!("an event after Done: {extra:?}");
                    }
                    return Ok(completion);
                }
                event => events.push(event),
            }
        }
        panic!(
            "the stream ended without Done after {} events",
            events.len()
        );
    };
    let completion = tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("no answer within {PATIENCE:?}"))?;
    Ok((events, completion))
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        messages,
        max_tokens: Some(64),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

/// Text streams in pieces that add up to the completion's text.
pub async fn streams_text(llm: &dyn Llm, prompt: &str) {
    let (events, completion) = collect(llm, request(vec![Message::user(prompt)]))
        .await
        .unwrap_or_else(|e| panic!("{}: chat failed: {e}", llm.backend()));
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !completion.text.trim().is_empty(),
        "{}: empty answer",
        llm.backend()
    );
    assert_eq!(
        streamed,
        completion.text,
        "{}: deltas differ from the text",
        llm.backend()
    );
    if llm.capabilities().streaming {
        let pieces = events
            .iter()
            .filter(|e| matches!(e, LlmEvent::Text(_)))
            .count();
        assert!(
            pieces > 1,
            "{}: the answer came in {pieces} piece(s)",
            llm.backend()
        );
    }
}

/// Offered `execute_code` and required to use it, the model calls it with
/// arguments that parse, streamed as fragments that add up to them.
pub async fn calls_the_tool(llm: &dyn Llm, prompt: &str) -> ExecuteCode {
    let mut request = request(vec![
        Message::system("You write Python code and run it with the execute_code tool."),
        Message::user(prompt),
    ]);
    request.tools = vec![execute_code_spec()];
    request.tool_choice = ToolChoice::Named(EXECUTE_CODE.into());
    request.max_tokens = Some(256);
    let (events, completion) = collect(llm, request)
        .await
        .unwrap_or_else(|e| panic!("{}: chat failed: {e}", llm.backend()));
    let call = completion
        .tool_calls
        .first()
        .unwrap_or_else(|| panic!("{}: no tool call in {completion:?}", llm.backend()));
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ToolCallDelta {
                index: 0,
                arguments,
                ..
            } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        streamed,
        call.arguments,
        "{}: fragments differ from the arguments",
        llm.backend()
    );
    ExecuteCode::parse(&call.name, &call.arguments)
        .unwrap_or_else(|e| panic!("{}: {e}: {:?}", llm.backend(), call.arguments))
}

/// Dropping a stream mid-answer stops it, and the backend answers the next
/// request.
pub async fn cancels_mid_stream(llm: &dyn Llm, long_prompt: &str) {
    let mut long = request(vec![Message::user(long_prompt)]);
    long.max_tokens = Some(512);
    let mut stream = llm
        .chat(long)
        .await
        .unwrap_or_else(|e| panic!("{}: chat failed: {e}", llm.backend()));
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .unwrap_or_else(|_| panic!("{}: no first event", llm.backend()));
    assert!(
        matches!(
            first,
            Some(Ok(LlmEvent::Text(_) | LlmEvent::ToolCallDelta { .. }))
        ),
        "{}: first event {first:?}",
        llm.backend()
    );
    drop(stream);
    let mut next = request(vec![Message::user("Say OK.")]);
    next.max_tokens = Some(8);
    collect(llm, next)
        .await
        .unwrap_or_else(|e| panic!("{}: the request after a cancel failed: {e}", llm.backend()));
}

/// A model name the backend does not serve is `ModelNotFound`, whether the
/// backend says so before streaming or as the stream's first item.
pub async fn refuses_an_unknown_model(llm: &dyn Llm) {
    let mut bad = request(vec![Message::user("hello")]);
    bad.model = Some("no-such-model-runcell".into());
    let error = match llm.chat(bad).await {
        Err(e) => e,
        Ok(mut stream) => match stream.next().await {
            Some(Err(e)) => e,
            other => panic!("{}: an unknown model answered {other:?}", llm.backend()),
        },
    };
    assert!(
        matches!(error, LlmError::ModelNotFound { .. }),
        "{}: {error:?}",
        llm.backend()
    );
    assert_eq!(error.code(), "llm_model_not_found");
}
