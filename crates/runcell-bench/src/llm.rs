//! `runcell bench llm`: the embedded model beside llama.cpp (llama-cpp-python)
//! on the same GGUF and the same chat, and the time to first token through
//! runcell's OpenAI client beside a bare HTTP request to the same server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::llm_eval::{TASKS, runnable_rate};
use crate::sandbox::stats;
use crate::{BenchError, fail};
use runcell_embedded::{EmbeddedConfig, EmbeddedModel, FENCED_CODE_CALLS};
use runcell_llm::openai::{OpenAiClient, OpenAiConfig};
use runcell_llm::{ChatRequest, Llm, LlmEvent, Message};
use runcell_sandbox::jail::{JailConfig, JailSandbox};

/// What to measure with.
#[derive(Clone, Debug)]
pub struct LlmBenchOptions {
    pub model: PathBuf,
    /// llama-cpp-python's interpreter; `None` skips the llama.cpp columns.
    pub llama_python: Option<PathBuf>,
    pub threads: usize,
    /// Tokens to generate per run.
    pub max_tokens: u32,
    /// Samples for the time-to-first-token comparison.
    pub ttft_samples: usize,
    /// Also measure how often replies are programs that run (minutes).
    pub eval: bool,
}

const TASK: &str = "Write a Python function that returns the first n prime numbers, \
                    then print the first 30 of them, one per line. Explain each step in a comment.";

fn messages() -> Vec<Message> {
    vec![
        Message::system("You are a helpful coding assistant. Answer with code."),
        Message::user(TASK),
    ]
}

#[derive(Debug, serde::Deserialize)]
struct LlamaTimings {
    load_s: f64,
    prompt_tokens: usize,
    prefill_s: f64,
    generated_tokens: usize,
    generation_s: f64,
}

pub async fn run(options: LlmBenchOptions) -> Result<(), BenchError> {
    println!(
        "model {} · {} thread(s) · {} tokens generated per run",
        options.model.display(),
        options.threads,
        options.max_tokens
    );
    println!(
        "{:<28} {:>8} {:>8} {:>11} {:>10} {:>9}",
        "engine", "load s", "prompt", "prefill t/s", "gen t/s", "RSS MiB"
    );

    let rss_before = own_rss_mib();
    let mut memory = format!("RSS before load {rss_before} MiB");
    let config = EmbeddedConfig {
        path: options.model.clone(),
        threads: options.threads,
        context_tokens: 4096,
        max_tokens: options.max_tokens,
        ..EmbeddedConfig::default()
    };
    let started = Instant::now();
    let model = tokio::task::spawn_blocking(move || EmbeddedModel::load(config))
        .await
        .map_err(fail)?
        .map_err(fail)?;
    let load = started.elapsed();
    memory.push_str(&format!(", after load {} MiB", own_rss_mib()));
    let request = ChatRequest {
        messages: messages(),
        max_tokens: Some(options.max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    // Cold: the first request, from an empty cache.
    let answer = complete(&model, request).await?;
    let embedded = model
        .last_stats()
        .ok_or_else(|| fail("no timings recorded"))?;
    let rss = own_rss_mib().saturating_sub(rss_before);
    memory.push_str(&format!(
        ", after the first answer {} MiB, peak {} MiB",
        own_rss_mib(),
        own_peak_rss_mib()
    ));
    println!(
        "{:<28} {:>8.2} {:>8} {:>11.1} {:>10.1} {:>9}",
        "runcell embedded (candle)",
        load.as_secs_f64(),
        embedded.prompt_tokens,
        embedded.prefill_tokens_per_s(),
        embedded.generated_tokens_per_s(),
        rss
    );
    println!("{memory}");
    follow_up(&model, &answer).await?;
    if options.eval {
        runnable_rates(&model).await?;
    }
    drop(model);

    let Some(python) = options.llama_python.as_deref() else {
        println!(
            "llama.cpp: skipped (llama-cpp-python not found; scripts/setup-llama-cpp-python.sh)"
        );
        return Ok(());
    };
    compare_llama_cpp(python, &options, embedded.generated_tokens_per_s(), &answer).await
}

/// llama.cpp on the same model, prompt and follow-up, beside the embedded
/// engine's generation speed (`embedded_gen`, tokens/s); then its time to
/// a first token.
async fn compare_llama_cpp(
    python: &Path,
    options: &LlmBenchOptions,
    embedded_gen: f64,
    answer: &str,
) -> Result<(), BenchError> {
    let llama = llama_cpp_timings(python, options).await?;
    let llama_gen = llama.generated_tokens as f64 / llama.generation_s.max(1e-9);
    println!(
        "{:<28} {:>8.2} {:>8} {:>11.1} {:>10.1} {:>9}",
        "llama.cpp (llama-cpp-python)",
        llama.load_s,
        llama.prompt_tokens,
        llama.prompt_tokens as f64 / llama.prefill_s.max(1e-9),
        llama_gen,
        "-"
    );
    let ratio = embedded_gen / llama_gen.max(1e-9);
    println!(
        "generation speed vs llama.cpp: {ratio:.2}x (target >= 0.5x) {}",
        if ratio >= 0.5 { "ok" } else { "MISSED" }
    );

    llama_follow_up(python, options, answer).await?;
    if options.ttft_samples > 0 {
        time_to_first_token(python, options).await?;
    }
    Ok(())
}

/// Runs `request` to the end; the reply's text.
async fn complete(model: &dyn Llm, request: ChatRequest) -> Result<String, BenchError> {
    let mut stream = model.chat(request).await.map_err(fail)?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event.map_err(fail)? {
            LlmEvent::Text(t) => text.push_str(&t),
            LlmEvent::Done(done) if text.is_empty() => text = done.text,
            _ => {}
        }
    }
    Ok(text)
}

/// The next question of the conversation that got `answer`.
fn follow_up_request(model: Option<String>, answer: &str) -> ChatRequest {
    let mut messages = messages();
    messages.push(Message::assistant(answer));
    messages.push(Message::user(
        "Now change it to print the first 40 primes, ten per line.",
    ));
    ChatRequest {
        model,
        messages,
        max_tokens: Some(1),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

/// Time until the first streamed event of `request`.
async fn first_token(model: &dyn Llm, request: ChatRequest) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let mut stream = model.chat(request).await.map_err(fail)?;
    let first = stream.next().await;
    let elapsed = started.elapsed();
    first.transpose().map_err(fail)?;
    while let Some(event) = stream.next().await {
        event.map_err(fail)?;
    }
    Ok(elapsed)
}

/// Time to first token of a follow-up question, with the conversation so far
/// in the KV cache (warm) and from an empty cache (cold).
async fn follow_up(model: &EmbeddedModel, answer: &str) -> Result<(), BenchError> {
    let warm = first_token(model, follow_up_request(None, answer)).await?;
    let warm_stats = model.last_stats().unwrap_or_default();
    model.set_prefix_cache(false);
    let cold = first_token(model, follow_up_request(None, answer)).await;
    model.set_prefix_cache(true);
    let cold = cold?;
    println!(
        "follow-up of {} prompt tokens ({} shared with the last request): first token cold {:.0} ms, warm {:.0} ms",
        warm_stats.prompt_tokens,
        warm_stats.cached_tokens,
        cold.as_secs_f64() * 1000.0,
        warm.as_secs_f64() * 1000.0
    );
    Ok(())
}

/// The same through llama-cpp-python's server, which keeps the last prompt's
/// cache: warm right after the conversation's first request, cold after an
/// unrelated one.
async fn llama_follow_up(
    python: &Path,
    options: &LlmBenchOptions,
    answer: &str,
) -> Result<(), BenchError> {
    let server = LlamaCppServer::start(
        python,
        &options.model,
        &[
            "--n_threads",
            &options.threads.to_string(),
            "--n_ctx",
            "4096",
        ],
    )
    .await?;
    let client = OpenAiClient::new(OpenAiConfig::new(&server.base_url)).map_err(fail)?;
    let model = client
        .models()
        .await
        .map_err(fail)?
        .first()
        .map(|m| m.id.clone());
    // The conversation so far, with the embedded model's answer as the last
    // message: its prompt is the follow-up's but for the last question.
    let mut so_far = follow_up_request(model.clone(), answer);
    so_far.messages = messages();
    so_far.messages.push(Message::assistant(answer));
    first_token(&client, so_far).await?;
    let warm = first_token(&client, follow_up_request(model.clone(), answer)).await?;
    let unrelated = ChatRequest {
        model: model.clone(),
        messages: vec![Message::user("Name three colours.")],
        max_tokens: Some(1),
        ..ChatRequest::default()
    };
    first_token(&client, unrelated).await?;
    let cold = first_token(&client, follow_up_request(model, answer)).await?;
    drop(server);
    println!(
        "llama.cpp follow-up: first token cold {:.0} ms, warm {:.0} ms",
        cold.as_secs_f64() * 1000.0,
        warm.as_secs_f64() * 1000.0
    );
    Ok(())
}

/// Over the eval tasks: how many replies held a program that ran (exit 0,
/// printed something) in the jail, with the tool call forced (constrained
/// decoding: as a fenced block, and as JSON arguments) and with the model
/// free to answer.
async fn runnable_rates(model: &EmbeddedModel) -> Result<(), BenchError> {
    let jail = JailSandbox::new(JailConfig::default());
    if let Some(reason) = jail.unavailable() {
        return Err(fail(format!("the jail is unavailable: {reason}")));
    }
    println!(
        "\nrunnable programs over {} tasks (in the jail, 5 s):",
        TASKS.len()
    );
    for (label, constrained, fenced) in [
        ("constrained, fenced code block", true, true),
        ("constrained, JSON arguments", true, false),
        ("unconstrained (tool offered)", false, true),
    ] {
        model.set_fenced_code_calls(fenced);
        let started = Instant::now();
        let report = runnable_rate(model, jail.as_ref(), &TASKS, constrained).await;
        println!(
            "  {label:<32} {} runnable, {} with code, of {} ({:.0} s)",
            report.runnable(),
            report.extracted(),
            report.results.len(),
            started.elapsed().as_secs_f64()
        );
        for result in report.results.iter().filter(|r| !r.runnable) {
            let code = result.code.as_deref().unwrap_or("(no program)");
            let shown: String = code.lines().take(3).collect::<Vec<_>>().join(" | ");
            println!(
                "    not runnable: {} -> {}",
                result.task,
                shown.chars().take(100).collect::<String>()
            );
        }
    }
    model.set_fenced_code_calls(FENCED_CODE_CALLS);
    println!();
    Ok(())
}

async fn llama_cpp_timings(
    python: &Path,
    options: &LlmBenchOptions,
) -> Result<LlamaTimings, BenchError> {
    let script = PathBuf::from("scripts/bench-llama-cpp.py");
    let mut child = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&options.model)
        .arg(options.threads.to_string())
        .arg(options.max_tokens.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", python.display())))?;
    let input = serde_json::to_vec(&messages()).map_err(fail)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&input).await.map_err(fail)?;
    }
    let output = child.wait_with_output().await.map_err(fail)?;
    if !output.status.success() {
        return Err(fail(format!(
            "{} failed: {}",
            script.display(),
            output.status
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| fail(format!("llama.cpp timings: {e}")))
}

/// Starts llama-cpp-python's server and compares the first token through
/// runcell's client with the first token read straight off the socket.
async fn time_to_first_token(python: &Path, options: &LlmBenchOptions) -> Result<(), BenchError> {
    let server = LlamaCppServer::start(
        python,
        &options.model,
        &["--n_threads", &options.threads.to_string()],
    )
    .await?;
    let base = server.base_url.clone();
    let http = reqwest::Client::new();
    let client = OpenAiClient::new(OpenAiConfig::new(&base)).map_err(fail)?;
    let models = client.models().await.map_err(fail)?;
    let model = models.first().map(|m| m.id.clone()).unwrap_or_default();
    let request = ChatRequest {
        model: Some(model.clone()),
        messages: messages(),
        max_tokens: Some(8),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let body = serde_json::json!({
        "model": model,
        "messages": messages(),
        "max_tokens": 8,
        "temperature": 0.0,
        "stream": true,
    });

    // The same prompt each time: the server's prompt cache makes prefill
    // small, so the comparison is dominated by the paths themselves.
    let mut direct = Vec::new();
    let mut through = Vec::new();
    for i in 0..=options.ttft_samples {
        let started = Instant::now();
        let mut response = http
            .post(format!("{base}/chat/completions"))
            .json(&body)
            .send()
            .await
            .map_err(fail)?;
        while let Some(chunk) = response.chunk().await.map_err(fail)? {
            if String::from_utf8_lossy(&chunk).contains("\"content\": \"") {
                break;
            }
        }
        let bare = started.elapsed();
        drop(response);

        let started = Instant::now();
        let mut stream = client.chat(request.clone()).await.map_err(fail)?;
        while let Some(event) = stream.next().await {
            if matches!(event.map_err(fail)?, LlmEvent::Text(_)) {
                break;
            }
        }
        let ours = started.elapsed();
        drop(stream);
        if i > 0 {
            direct.push(bare);
            through.push(ours);
        }
    }
    drop(server);
    let (direct_p50, _) = stats(&mut direct);
    let (through_p50, _) = stats(&mut through);
    println!(
        "time to first token, p50 of {}: straight from the server {direct_p50:.1} ms, through runcell's client {through_p50:.1} ms, overhead {:.1} ms (target <= 5 ms)",
        direct.len(),
        through_p50 - direct_p50
    );
    Ok(())
}

/// `python -m llama_cpp.server` on a free loopback port, ready to answer;
/// killed on drop. The bench and the integration tests' real peer.
pub struct LlamaCppServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
}

impl LlamaCppServer {
    /// Starts it with `model` and `extra` arguments and waits (up to 120 s)
    /// until `/v1/models` answers.
    pub async fn start(python: &Path, model: &Path, extra: &[&str]) -> Result<Self, BenchError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(fail)?
            .port();
        let child = tokio::process::Command::new(python)
            .args(["-m", "llama_cpp.server", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .arg("--model")
            .arg(model)
            .args(extra)
            .args(["--verbose", "false"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start {}: {e}", python.display())))?;
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !http
            .get(format!("{}/models", server.base_url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if Instant::now() > deadline {
                return Err(fail("llama_cpp.server did not start in 120 s"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(server)
    }
}

impl Drop for LlamaCppServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The interpreter `scripts/setup-llama-cpp-python.sh` builds, if it is there.
pub fn default_llama_python() -> Option<PathBuf> {
    let cache = std::env::var_os("RUNCELL_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/runcell"),
        PathBuf::from,
    );
    Some(cache.join("llama-cpp-python-0.3.36/bin/python")).filter(|p| p.is_file())
}

/// This process's peak resident memory so far, in MiB.
fn own_peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// This process's resident memory, in MiB.
fn own_rss_mib() -> u64 {
    crate::own_server::rss_mib(std::process::id()).unwrap_or(0)
}
