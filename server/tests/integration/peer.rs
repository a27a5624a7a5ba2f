//! Real peers some tests need: the fetched model file and llama-cpp-python's
//! OpenAI-compatible server. Missing, a test says `skipped: ...` and passes,
//! unless `RUNCELL_TEST_REQUIRE_PEERS=1` (what `scripts/test.sh` sets).

use std::path::PathBuf;

use runcell_bench::llm::{LlamaCppServer, default_llama_python};
use runcell_server::config::DEFAULT_MODEL_FILE;

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
    let python = default_llama_python();
    if python.is_none() {
        missing(
            "llama-cpp-python (~/.cache/runcell/llama-cpp-python-0.3.36)",
            "run scripts/setup-llama-cpp-python.sh",
        );
    }
    python
}

/// llama-cpp-python's OpenAI-compatible server with the test model, set up
/// for streamed tool calls (that needs `chatml-function-calling` and a
/// forced tool); `None` when a peer is missing.
pub async fn llama_server() -> Option<LlamaCppServer> {
    let model = model_file()?;
    let python = llama_cpp_python()?;
    let args = [
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "4096",
        "--n_threads",
        "2",
    ];
    Some(
        LlamaCppServer::start(&python, &model, &args)
            .await
            .expect("llama_cpp.server did not start"),
    )
}
