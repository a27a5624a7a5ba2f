//! How often a model's replies are Python programs that run: each task is
//! asked once, the program is taken from the reply (the constrained tool
//! call's arguments, or else a `<tool_call>` object or a fenced block in the
//! text), run as Python in the sandbox under a 5 s limit, and counted when
//! it exits 0 and prints something. Works with any [`Llm`]; meant for
//! `runcell bench`.

use std::time::{Duration, Instant};

use futures::StreamExt;

use runcell_llm::fenced::program_of;
use runcell_llm::tools::execute_code_spec;
use runcell_llm::{ChatRequest, Llm, LlmEvent, Message, ToolChoice};
use runcell_sandbox::{Language, Limits, RunRequest, Sandbox};
use tokio_util::sync::CancellationToken;

/// Small tasks with a checkable printed answer.
pub const TASKS: [&str; 8] = [
    "Write Python that prints the factorial of 5.",
    "Write Python that counts the letter r in the word strawberry and prints the count.",
    "Write Python that prints the first 10 Fibonacci numbers.",
    "Write Python that prints all prime numbers below 50.",
    "Write Python that reverses the string 'runcell' and prints it.",
    "Write Python that prints the sum of the integers from 1 to 100.",
    "Write Python that prints whether 97 is a prime number.",
    "Write Python that prints today's weekday name using the datetime module.",
];

/// The agent's own instructions, so the rate is the one users get.
const SYSTEM: &str = runcell_agent::agent::SYSTEM_PROMPT;

/// One task's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskResult {
    pub task: String,
    /// The program found in the reply, if any.
    pub code: Option<String>,
    /// It exited 0 and printed something.
    pub runnable: bool,
    pub stdout: String,
    pub seconds: f64,
    pub completion_tokens: u32,
}

/// All tasks' outcomes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnableReport {
    pub constrained: bool,
    pub results: Vec<TaskResult>,
}

impl RunnableReport {
    pub fn runnable(&self) -> usize {
        self.results.iter().filter(|r| r.runnable).count()
    }
    pub fn extracted(&self) -> usize {
        self.results.iter().filter(|r| r.code.is_some()).count()
    }
}

/// Runs `code` as Python in `sandbox` (model-written code never runs on
/// the host): (exit 0 with output, stdout).
pub async fn run_python(sandbox: &dyn Sandbox, code: &str) -> (bool, String) {
    let request = RunRequest {
        code: code.to_owned(),
        language: Language::Python,
        limits: Limits {
            wall: Duration::from_secs(5),
            ..Limits::default()
        },
        env: Vec::new(),
        cwd: None,
    };
    match sandbox.run(request, None, CancellationToken::new()).await {
        Ok(outcome) => {
            let ok = outcome.error.is_none()
                && outcome.exit_code.unwrap_or(0) == 0
                && !outcome.stdout.trim().is_empty();
            (ok, outcome.stdout)
        }
        Err(_) => (false, String::new()),
    }
}

/// Asks `model` each task and counts the replies whose program runs.
/// `constrained`: the `execute_code` call is required (constrained decoding
/// on backends that have it); otherwise the tool is offered and the model
/// answers freely.
pub async fn runnable_rate(
    model: &dyn Llm,
    sandbox: &dyn Sandbox,
    tasks: &[&str],
    constrained: bool,
) -> RunnableReport {
    let mut report = RunnableReport {
        constrained,
        results: Vec::new(),
    };
    for task in tasks {
        let started = Instant::now();
        let request = ChatRequest {
            messages: vec![Message::system(SYSTEM), Message::user(*task)],
            tools: vec![execute_code_spec()],
            tool_choice: if constrained {
                ToolChoice::Required
            } else {
                ToolChoice::Auto
            },
            max_tokens: Some(300),
            temperature: Some(0.0),
            ..ChatRequest::default()
        };
        let completion = match model.chat(request).await {
            Ok(mut stream) => {
                let mut done = None;
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(LlmEvent::Done(c)) => done = Some(c),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "eval task failed");
                            break;
                        }
                    }
                }
                done
            }
            Err(e) => {
                tracing::warn!(error = %e, "eval task failed");
                None
            }
        };
        let code = completion.as_ref().and_then(program_of).map(|c| c.code);
        let (runnable, stdout) = match &code {
            Some(code) => run_python(sandbox, code).await,
            None => (false, String::new()),
        };
        report.results.push(TaskResult {
            task: (*task).to_string(),
            code,
            runnable,
            stdout,
            seconds: started.elapsed().as_secs_f64(),
            completion_tokens: completion
                .and_then(|c| c.usage)
                .map_or(0, |u| u.completion_tokens),
        });
    }
    report
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use runcell_llm::{Completion, FinishReason, ToolCall};

    fn text(t: &str) -> Completion {
        Completion {
            text: t.into(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: None,
        }
    }

    #[test]
    fn programs_are_found_in_each_reply_shape() {
        let check = |c: Completion, want: Option<&str>| {
            assert_eq!(program_of(&c).map(|p| p.code).as_deref(), want, "{c:?}");
        };
        check(text("```python\nprint(1)\n```"), Some("print(1)"));
        check(
            text("```json\n{}\n```\n```\nprint(2)\n```"),
            Some("print(2)"),
        );
        check(
            text(
                "<tool_call>\n{\"name\": \"execute_code\", \"arguments\": {\"language\": \"python\", \"code\": \"print(3)\"}}\n</tool_call>",
            ),
            Some("print(3)"),
        );
        check(text("no code here"), None);
        let mut call = text("");
        call.tool_calls.push(ToolCall {
            id: "call_0".into(),
            name: "execute_code".into(),
            arguments: r#"{"language": "python", "code": "print(4)"}"#.into(),
        });
        check(call, Some("print(4)"));
    }
}
