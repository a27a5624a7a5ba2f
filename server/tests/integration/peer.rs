//! Real peers some tests need: the fetched model file and llama-cpp-python's
//! OpenAI-compatible server. Missing, a test says `skipped: ...` and passes,
//! unless `RUNCELL_TEST_REQUIRE_PEERS=1` (what `scripts/test.sh` sets).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use runcell::config::DEFAULT_MODEL_FILE;

/// A missing peer: the test is skipped (said on stderr), or fails when
/// peers are required.
pub fn missing(what: &str, how: &str) {
    if std::env::var("RUNCELL_TEST_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("{what} is missing and RUNCELL_TEST_REQUIRE_PEERS=1: {how}");
    }
    eprintln!("skipped: {what} is missing ({how})");
}

/// The GGUF the tests use: `RUNCELL_TEST_MODEL`, else the default model
/// under the checkout's `data/models/`.
pub fn model_file() -> Option<PathBuf> {
    let path = std::env::var_os("RUNCELL_TEST_MODEL").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../data/models")
                .join(DEFAULT_MODEL_FILE)
        },
        PathBuf::from,
    );
    if path.is_file() {
        Some(path)
    } else {
        missing(
            &format!("model file {}", path.display()),
            "run scripts/fetch-model.sh data",
        );
        None
    }
}

/// llama-cpp-python's interpreter, as `scripts/setup-llama-cpp-python.sh`
/// builds it.
pub fn llama_cpp_python() -> Option<PathBuf> {
    let cache = std::env::var_os("RUNCELL_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/runcell"),
        PathBuf::from,
    );
    let python = cache.join("llama-cpp-python-0.3.36/bin/python");
    if python.is_file() {
        Some(python)
    } else {
        missing(
            &format!("llama-cpp-python ({})", python.display()),
            "run scripts/setup-llama-cpp-python.sh",
        );
        None
    }
}

/// `python -m llama_cpp.server` on a free loopback port, killed on drop.
pub struct LlamaServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
}

impl LlamaServer {
    pub async fn start() -> Option<Self> {
        let model = model_file()?;
        let python = llama_cpp_python()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("no free port")
            .port();
        let child = tokio::process::Command::new(python)
            .args(["-m", "llama_cpp.server", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .arg("--model")
            .arg(&model)
            // Real streamed tool calls need this format (and a forced tool).
            .args(["--chat_format", "chatml-function-calling"])
            .args(["--n_ctx", "4096", "--n_threads", "2", "--verbose", "false"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("cannot start llama_cpp.server");
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let http = reqwest::Client::new();
        loop {
            let up = http
                .get(format!("{}/models", server.base_url))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return Some(server);
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not start in 120 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
