//! Prometheus metrics: every series is `runcell_`-prefixed and recorded
//! through the `metrics` facade; `GET /metrics` renders them.
//!
//! The recorder is process-wide: the first call to [`handle`] installs it.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use runcell_protocol::{Language, SandboxKind};

/// Seconds: from a millisecond to ten minutes.
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 600.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The recorder's handle, installing it on first use; `None` if another
/// recorder was installed first (then `/metrics` says so).
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .as_ref()
}

fn describe() {
    describe_counter!(
        "runcell_runs_total",
        "Programs run, by language, sandbox backend and outcome (ok, error, timeout, cancelled, refused)"
    );
    describe_histogram!(
        "runcell_run_duration_seconds",
        "Wall time of a program's run, by language and backend"
    );
    describe_histogram!(
        "runcell_run_step_seconds",
        "Wall time of each step of a one-shot run in the local jail (what a request spends outside them is HTTP and admission): jail (a warm jail taken and its cgroup lowered, or a uid leased, a cgroup made and bwrap started), hand_over (the program written and the jail released), process (the interpreter's start, the program and its output, to its exit), ending (what it left killed, the outcome classified); `jail` says whether the jail was made ahead (warm) or on the request (made)"
    );
    describe_histogram!(
        "runcell_api_request_duration_seconds",
        "Wall time of an HTTP request under /v1 and /mcp, from its headers to its response's head, by route"
    );
    describe_gauge!(
        "runcell_sandbox_pool_size",
        "Sandbox sessions started and waiting in the warm pool"
    );
    describe_gauge!(
        "runcell_sandbox_sessions",
        "Live sandbox sessions (API sessions and notebook kernels)"
    );
    describe_gauge!(
        "runcell_notebook_sessions",
        "Notebook sessions held in memory"
    );
    describe_counter!(
        "runcell_llm_requests_total",
        "Chat requests to the language model, by backend and outcome"
    );
    describe_counter!(
        "runcell_llm_prompt_tokens_total",
        "Prompt tokens of model requests: reused from the backend's prompt cache, or computed"
    );
    describe_histogram!(
        "runcell_llm_generation_seconds",
        "From a model request's first token to its end"
    );
    describe_counter!(
        "runcell_llm_prefill_tokens_total",
        "Tokens of prompts read ahead of their request (while a person types, after an upload)"
    );
    describe_histogram!(
        "runcell_llm_prefill_seconds",
        "Time taken reading a prompt ahead of its request"
    );
    describe_counter!(
        "runcell_llm_tokens_total",
        "Tokens the language model read (prompt) and wrote (completion), as reported or counted"
    );
    describe_histogram!(
        "runcell_llm_request_duration_seconds",
        "Time from a chat request to its last token"
    );
    describe_histogram!(
        "runcell_llm_time_to_first_token_seconds",
        "Time from a chat request to its first token"
    );
    describe_gauge!("runcell_websocket_connections", "Notebook WebSockets open");
    describe_counter!(
        "runcell_api_requests_total",
        "HTTP requests under /v1 and /mcp, by route and status"
    );
    describe_counter!(
        "runcell_rate_limited_total",
        "Requests refused by a per-key limit, by which limit"
    );
    describe_gauge!(
        "runcell_http_connections",
        "HTTP connections open (every listener's, before any route)"
    );
    describe_counter!(
        "runcell_http_connections_refused_total",
        "HTTP connections answered 503 and closed at once: over the cap in all or per client address"
    );
    describe_counter!(
        "runcell_explanations_total",
        "Explanations written, by outcome: grounded (every figure in the output or the question), regrounded (after one withdrawn for an invented figure), pruned (the second still invented one: its grounded sentences stood), fallback (a plain statement quoting the output stood instead), uncomputed (a reply without a program named figures nothing computed and was withdrawn)"
    );
    describe_counter!(
        "runcell_fix_hints_total",
        "Failed programs whose error had a known remedy, by the remedy told (closest_key, corr_over_text, ...)"
    );
    describe_counter!(
        "runcell_prompt_notes_total",
        "Questions that got a note for their kind (format: a template such as @name[value] for the answer; form: a form said in words; missing: how to treat gaps; chart; product)"
    );
    describe_counter!(
        "runcell_unanswered_total",
        "Programs that ran but did not answer (printed nothing, only empty values or only an unasked chart, never grouped for a per-group question, or printed a whole column for one value), by reason and whether a fix was asked"
    );
    describe_counter!(
        "runcell_package_files_total",
        "Package files the jails' index served, by source (cache, or upstream: downloaded and checked first)"
    );
    describe_counter!(
        "runcell_package_bytes_total",
        "Bytes of package files the jails' index served, by source (cache, upstream)"
    );
    describe_counter!(
        "runcell_package_refusals_total",
        "Requests the jails' package index refused or could not answer, by reason: policy (packages.mode/allow/deny), name (not a normalised project or file name), size (packages.max_file_mib), session_size (packages.max_session_mib), hash (a download did not match its sha256), upstream (upstream failed with no cached copy)"
    );
}

/// The package index served a file of `bytes` from `source` (`cache` or `upstream`).
pub fn package_file_served(source: &'static str, bytes: u64) {
    counter!("runcell_package_files_total", "source" => source).increment(1);
    counter!("runcell_package_bytes_total", "source" => source).increment(bytes);
}

/// The package index refused a request, for `reason` (see `runcell_package_refusals_total`).
pub fn package_refused(reason: &'static str) {
    counter!("runcell_package_refusals_total", "reason" => reason).increment(1);
}

/// An explanation stood (`grounded`, `regrounded`, `pruned` to its grounded
/// sentences, or a `fallback` quoting the output), or a reply without a
/// program was withdrawn (`uncomputed`).
pub fn explained(outcome: &'static str) {
    counter!("runcell_explanations_total", "outcome" => outcome).increment(1);
}

/// A failed program's error had a known remedy, `hint`.
pub fn fix_hint(hint: &'static str) {
    counter!("runcell_fix_hints_total", "hint" => hint).increment(1);
}

/// A question got the note for its kind, `note`.
pub fn prompt_note(note: &'static str) {
    counter!("runcell_prompt_notes_total", "note" => note).increment(1);
}

/// A program ran but did not answer; `retried`: it went back as a fix.
pub fn unanswered(reason: &'static str, retried: bool) {
    counter!("runcell_unanswered_total", "reason" => reason, "fixed" => if retried { "asked" } else { "no_attempts_left" })
        .increment(1);
}

/// A program ended (or could not start).
pub fn run_finished(
    language: Language,
    backend: SandboxKind,
    outcome: &'static str,
    took: Duration,
) {
    let (language, backend) = (language.name(), backend.name());
    counter!("runcell_runs_total", "language" => language, "backend" => backend, "outcome" => outcome)
        .increment(1);
    histogram!("runcell_run_duration_seconds", "language" => language, "backend" => backend)
        .record(took.as_secs_f64());
}

/// One step of a one-shot run in a `jail` (`warm` or `made`) took `took`
/// (see `runcell_run_step_seconds`).
pub fn run_step(step: &'static str, jail: &'static str, took: Duration) {
    histogram!("runcell_run_step_seconds", "step" => step, "jail" => jail)
        .record(took.as_secs_f64());
}

/// The gauges read at scrape time.
pub fn set_sizes(pool: usize, sandbox_sessions: usize, notebook_sessions: usize) {
    gauge!("runcell_sandbox_pool_size").set(pool as f64);
    gauge!("runcell_sandbox_sessions").set(sandbox_sessions as f64);
    gauge!("runcell_notebook_sessions").set(notebook_sessions as f64);
}

/// A model request's tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// The prompt's tokens...
    pub prompt: u64,
    /// ...of which the backend found these already read (its prompt cache).
    pub reused: u64,
    /// Generated.
    pub completion: u64,
}

pub fn llm_finished(
    backend: &'static str,
    outcome: &'static str,
    took: Duration,
    first_token: Option<Duration>,
    tokens: Tokens,
) {
    let Tokens {
        prompt: prompt_tokens,
        reused,
        completion: completion_tokens,
    } = tokens;
    counter!("runcell_llm_requests_total", "backend" => backend, "outcome" => outcome).increment(1);
    histogram!("runcell_llm_request_duration_seconds", "backend" => backend)
        .record(took.as_secs_f64());
    if let Some(first) = first_token {
        histogram!("runcell_llm_time_to_first_token_seconds", "backend" => backend)
            .record(first.as_secs_f64());
    }
    counter!("runcell_llm_tokens_total", "backend" => backend, "kind" => "prompt")
        .increment(prompt_tokens);
    counter!("runcell_llm_tokens_total", "backend" => backend, "kind" => "completion")
        .increment(completion_tokens);
    // Of the prompt: read again from the cache, or computed.
    counter!("runcell_llm_prompt_tokens_total", "backend" => backend, "kind" => "reused")
        .increment(reused);
    counter!("runcell_llm_prompt_tokens_total", "backend" => backend, "kind" => "computed")
        .increment(prompt_tokens.saturating_sub(reused));
    if let Some(first) = first_token {
        histogram!("runcell_llm_generation_seconds", "backend" => backend)
            .record(took.saturating_sub(first).as_secs_f64());
    }
}

/// A prompt read ahead of its request (while a person types, after an
/// upload): its tokens computed and reused, and how long the reading took.
pub fn llm_prefilled(backend: &'static str, computed: u64, reused: u64, took: Duration) {
    counter!("runcell_llm_prefill_tokens_total", "backend" => backend, "kind" => "computed")
        .increment(computed);
    counter!("runcell_llm_prefill_tokens_total", "backend" => backend, "kind" => "reused")
        .increment(reused);
    histogram!("runcell_llm_prefill_seconds", "backend" => backend).record(took.as_secs_f64());
}

/// Counts a WebSocket as open until dropped.
#[derive(Debug)]
pub struct SocketOpen(());

impl SocketOpen {
    pub fn new() -> Self {
        gauge!("runcell_websocket_connections").increment(1.0);
        Self(())
    }
}

impl Default for SocketOpen {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SocketOpen {
    fn drop(&mut self) {
        gauge!("runcell_websocket_connections").decrement(1.0);
    }
}

/// An API request under `route` was answered in `took` (to its head).
pub fn api_request_time(route: &str, took: Duration) {
    histogram!("runcell_api_request_duration_seconds", "route" => route.to_string())
        .record(took.as_secs_f64());
}

pub fn api_request(route: &str, status: u16) {
    counter!("runcell_api_requests_total", "route" => route.to_string(), "status" => status.to_string())
        .increment(1);
}

pub fn connections_open(count: usize) {
    gauge!("runcell_http_connections").set(count as f64);
}

pub fn connection_refused() {
    counter!("runcell_http_connections_refused_total").increment(1);
}

pub fn rate_limited(which: &'static str) {
    counter!("runcell_rate_limited_total", "limit" => which).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_render_in_prometheus_text() {
        let handle = handle().expect("the first recorder");
        run_finished(
            Language::Python,
            SandboxKind::Jail,
            "ok",
            Duration::from_millis(30),
        );
        llm_finished(
            "scripted",
            "ok",
            Duration::from_millis(80),
            Some(Duration::from_millis(5)),
            Tokens {
                prompt: 10,
                reused: 7,
                completion: 3,
            },
        );
        let socket = SocketOpen::new();
        let text = handle.render();
        assert!(
            text.contains(
                "runcell_runs_total{language=\"python\",backend=\"jail\",outcome=\"ok\"}"
            ),
            "{text}"
        );
        assert!(text.contains("runcell_run_duration_seconds_bucket{language=\"python\",backend=\"jail\",le=\"0.05\"}"), "{text}");
        assert!(text.contains("# HELP runcell_llm_tokens_total"), "{text}");
        assert!(
            text.contains(
                "runcell_llm_prompt_tokens_total{backend=\"scripted\",kind=\"reused\"} 7"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "runcell_llm_prompt_tokens_total{backend=\"scripted\",kind=\"computed\"} 3"
            ),
            "{text}"
        );
        assert!(text.contains("runcell_websocket_connections"), "{text}");
        drop(socket);
    }
}
