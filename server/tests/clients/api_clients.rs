//! Real clients against a live server: schemathesis fuzzes the OpenAPI
//! surface (no 5xx, every answer matches its schema), and the official MCP
//! Python SDK uses `/mcp` as its sandbox, and E2B's official SDKs use runcell
//! as their cloud. All come from the venv that
//! `scripts/setup-api-clients.sh` builds.

use std::path::PathBuf;
use std::process::Command;

use crate::peer::missing;
use crate::support::{TestServer, http};

/// The clients' venv: `RUNCELL_CACHE` (or `~/.cache/runcell`) `/api-clients`.
fn venv() -> Option<PathBuf> {
    venv_named("api-clients")
}

/// A directory `scripts/setup-api-clients.sh` fills, by name.
fn cache_dir(name: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("RUNCELL_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/runcell"))
        })?;
    Some(cache.join(name))
}

/// A venv of `scripts/setup-api-clients.sh`'s, by name.
fn venv_named(name: &str) -> Option<PathBuf> {
    let venv = cache_dir(name)?;
    venv.join("bin/python").is_file().then_some(venv)
}

const HOW: &str = "run scripts/setup-api-clients.sh";

/// Runs a client to its end off the async runtime; its exit and output.
async fn run(mut command: Command) -> (bool, String) {
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_schema_mismatch() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (schemathesis)", HOW);
    };
    // Limits are tested on their own; here they would only make the
    // fuzzer's requests 429 depending on how fast this machine is.
    let server = TestServer::start_configured(|config| {
        config.auth.runs_per_minute = 60_000;
        config.auth.run_burst = 1_000;
    })
    .await;
    let key = server.api_key("schemathesis").await;
    let token = server.token_for(&key).await;
    let mut command = Command::new(venv.join("bin/st"));
    command
        .current_dir(std::env::temp_dir())
        .arg("--no-color")
        .arg("--config-file")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/schemathesis.toml"
        ))
        .args(["run", &server.url("/v1/openapi.json")])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args([
            "--max-examples",
            "20",
            "--seed",
            "1",
            "--request-timeout",
            "60",
        ]);
    let (ok, output) = run(command).await;
    assert!(ok, "schemathesis found problems:\n{output}");
    // Every operation of the document was exercised (the files routes too).
    assert!(output.contains("Selected: 9/9"), "{output}");
    // Its "mostly rejected" warning is a heuristic about how well it
    // fuzzed (random `session_id`s are 404s), not a finding; a run that was
    // mostly 401 would have failed (`missing_auth` in schemathesis.toml).
    assert!(output.contains("Test cases:"), "{output}");
}

#[tokio::test]
async fn the_official_mcp_client_lists_tools_and_runs_code() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (mcp)", HOW);
    };
    let server = TestServer::start().await;
    let key = server.api_key("mcp").await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/mcp_check.py");
    // With the API key itself, as MCP clients with static headers send it...
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("/mcp"), &key]);
    let (ok, output) = run(command).await;
    assert!(ok, "the MCP client failed:\n{output}");
    assert!(output.contains("ok: a closed session is gone"), "{output}");
    // ...and with an access token.
    let token = server.token_for(&key).await;
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("/mcp"), &token]);
    let (ok, output) = run(command).await;
    assert!(ok, "the MCP client failed with a token:\n{output}");
    // A wrong credential is refused before any tool runs.
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("/mcp"), "rc_wrong"]);
    let (ok, output) = run(command).await;
    assert!(!ok, "a wrong key must not get in:\n{output}");
    assert!(!output.contains("ok: the tools are listed"), "{output}");
}

/// Over plain HTTP (loopback included) the owner cookie is not `Secure`:
/// Python's `http.cookiejar` would never send a `Secure` one back, and a
/// session made through the API answered 404 to the client that made it.
#[tokio::test]
async fn pythons_cookie_jar_keeps_the_session_its_client_made() {
    let server = TestServer::start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/cookie_check.py");
    let mut command = Command::new("python3");
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("")]);
    let (ok, output) = run(command).await;
    assert!(ok, "the cookie jar check failed:\n{output}");
    assert!(output.contains("ok: the cookie jar keeps"), "{output}");
}

#[tokio::test]
async fn the_official_e2b_sdk_runs_on_runcell() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (e2b, e2b-code-interpreter)", HOW);
    };
    e2b_check(&venv).await;
}

/// The same check with the older pair (e2b-code-interpreter 2.9.1, e2b
/// 2.39.1), the versions E2B's own suites ran with against runcell.
#[tokio::test]
async fn the_older_e2b_sdk_pair_runs_on_runcell() {
    let Some(venv) = venv_named("api-clients-e2b-older") else {
        return missing("the older E2B SDKs' venv", HOW);
    };
    e2b_check(&venv).await;
}

async fn e2b_check(venv: &std::path::Path) {
    let server = TestServer::start().await;
    let key = server.api_key("e2b-sdk").await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/e2b_check.py");
    let base = server.url("");
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .env("E2B_API_URL", &base)
        .env("E2B_SANDBOX_URL", &base)
        .env("E2B_API_KEY", &key)
        .env("E2B_VALIDATE_API_KEY", "false")
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG")
        .arg(script);
    let (ok, output) = run(command).await;
    assert!(ok, "the E2B SDK failed:\n{output}");
    assert!(
        output.contains("ok: all E2B SDK calls answered"),
        "{output}"
    );
}

#[tokio::test]
async fn jupyters_own_clients_run_cells_through_the_gateway() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (jupyter_server, nbclient)", HOW);
    };
    let server = TestServer::start().await;
    let key = server.api_key("jupyter").await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/jupyter_check.py"
    );
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("/jupyter"), &key]);
    let (ok, output) = run(command).await;
    assert!(ok, "a Jupyter client failed:\n{output}");
    for step in [
        "ok: state is kept between cells",
        "ok: a PNG display_data",
        "ok: an interrupted `while True` stops",
        "ok: a restart forgets",
        "ok: nbclient ran a notebook through the gateway; nbformat validates it",
        "ok: Open WebUI's way",
    ] {
        assert!(output.contains(step), "{step} is missing:\n{output}");
    }
}

/// JupyterLab itself (the venv's, in gateway mode) in Debian's Chromium,
/// driven by playwright-core from `end2end/node_modules`: a notebook on the
/// gateway's `python3` kernel where Tab completes a name, an updated display
/// shows its new value and `clear_output` clears.
#[tokio::test]
async fn jupyterlab_in_chromium_completes_updates_and_clears_through_the_gateway() {
    let Some(venv) = venv().filter(|venv| venv.join("bin/jupyter-lab").is_file()) else {
        return missing("the API clients' venv (jupyterlab)", HOW);
    };
    let playwright = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../end2end/node_modules/playwright-core"
    ));
    if !playwright.is_dir() || !std::path::Path::new("/usr/bin/chromium").is_file() {
        return missing(
            "playwright-core in end2end/node_modules or /usr/bin/chromium",
            "run scripts/setup.sh test",
        );
    }
    let server = TestServer::start().await;
    let key = server.api_key("jupyterlab").await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/jupyterlab_check.mjs"
    );
    let mut command = Command::new("node");
    command
        .current_dir(std::env::temp_dir())
        .env("PLAYWRIGHT_CORE", &playwright)
        .arg(script)
        .arg(server.url("/jupyter"))
        .arg(&key)
        .arg(venv.join("bin/python"));
    let (ok, output) = run(command).await;
    assert!(ok, "JupyterLab failed through the gateway:\n{output}");
    for step in [
        "ok: the notebook opened on the gateway's python3 kernel",
        "ok: Tab completes x_unique_n to x_unique_name",
        "ok: an updated display shows v2, not v1",
        "ok: clear_output leaves only b",
        "ok: JupyterLab in Chromium through the gateway",
    ] {
        assert!(output.contains(step), "{step} is missing:\n{output}");
    }
}

#[tokio::test]
async fn a_session_downloads_as_a_notebook_that_nbformat_validates() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (nbformat)", HOW);
    };
    let server = TestServer::start().await;
    let id = server.new_session().await;
    for question in [
        "```python\nimport matplotlib.pyplot as plt\nimport pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\nplt.plot(df['a'])\nplt.show()\nprint('rows', len(df))\ndf\n```",
        "```python\nimport sys\nprint('to stderr', file=sys.stderr)\nprint(undefined_name)\n```",
    ] {
        let response = http()
            .post(server.url(&format!("/api/sessions/{id}/ask")))
            .json(&serde_json::json!({ "text": question }))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        response.bytes().await.unwrap();
    }
    let owned = http()
        .get(server.url(&format!("/api/sessions/{id}/notebook.ipynb")))
        .send()
        .await
        .unwrap();
    assert_eq!(owned.status(), 200);
    assert_eq!(owned.headers()["content-type"], "application/x-ipynb+json");
    assert!(
        owned.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"import-matplotlib-pyplot-as-plt")
    );
    let owned = owned.text().await.unwrap();
    let notebook: serde_json::Value = serde_json::from_str(&owned).unwrap();
    let outputs: Vec<&str> = notebook["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["outputs"].as_array().into_iter().flatten())
        .map(|o| o["output_type"].as_str().unwrap())
        .collect();
    for kind in ["stream", "display_data", "execute_result", "error"] {
        assert!(outputs.contains(&kind), "no {kind} output: {outputs:?}");
    }
    assert!(owned.contains("image/png"), "the figure is in the notebook");
    // Someone else's session is not theirs to download.
    let stranger = crate::support::http_as(Some("5742a7e0000000000000000000000002"))
        .get(server.url(&format!("/api/sessions/{id}/notebook.ipynb")))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 404);
    // A share link downloads the same notebook, without a cookie.
    let shared: serde_json::Value = http()
        .post(server.url(&format!("/api/sessions/{id}/share")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = shared["token"].as_str().unwrap();
    let via_link = crate::support::http_as(None)
        .get(server.url(&format!("/s/{token}/notebook.ipynb")))
        .send()
        .await
        .unwrap();
    assert_eq!(via_link.status(), 200);
    let via_link = via_link.text().await.unwrap();
    assert_eq!(via_link, owned);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.ipynb");
    std::fs::write(&path, &owned).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/ipynb_check.py");
    let mut command = Command::new(venv.join("bin/python"));
    command.arg(script).arg(&path);
    let (ok, output) = run(command).await;
    assert!(ok, "nbformat refused the notebook:\n{output}\n{owned}");
    assert!(output.contains("ok: "), "{output}");
}

/// E2B's JavaScript SDKs (`@e2b/code-interpreter` 2.8.0, `e2b` 2.51.0, the
/// version E2B's JS suites ran with) on runcell.
#[tokio::test]
async fn the_e2b_javascript_sdk_runs_on_runcell() {
    let Some(sdk) =
        cache_dir("e2b-js").filter(|dir| dir.join("node_modules/@e2b/code-interpreter").is_dir())
    else {
        return missing("E2B's JavaScript SDKs", HOW);
    };
    let server = TestServer::start().await;
    let key = server.api_key("e2b-js-sdk").await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/e2b_check.mjs");
    let base = server.url("");
    let mut command = Command::new("node");
    command
        .current_dir(std::env::temp_dir())
        .env("E2B_JS_SDK", &sdk)
        .env("E2B_API_URL", &base)
        .env("E2B_SANDBOX_URL", &base)
        .env("E2B_API_KEY", &key)
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG")
        .arg(script);
    let (ok, output) = run(command).await;
    assert!(ok, "the E2B JavaScript SDK failed:\n{output}");
    assert!(
        output.contains("ok: all E2B JS SDK calls answered"),
        "{output}"
    );
}

/// Jupyter's own conformance suite for kernels (jupyter_kernel_test) on the
/// JavaScript and TypeScript kernel and on R's IRkernel.
#[tokio::test]
async fn the_kernels_pass_jupyter_kernel_test() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (jupyter_kernel_test)", HOW);
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/kernel_conformance.py"
    );
    // The kernel the jail runs, as the binary carries it.
    let kernel_dir = tempfile::tempdir().expect("a temporary directory");
    let kernel = kernel_dir.path().join("node_kernel.js");
    std::fs::write(&kernel, runcell_sandbox::jail::NODE_KERNEL).expect("the kernel written");
    // The Java kernel beside it, as kernel_conformance.py looks for it.
    let java = kernel_dir.path().join("java_kernel");
    std::fs::create_dir(&java).expect("the Java kernel's directory");
    std::fs::write(
        java.join("java_kernel.py"),
        runcell_sandbox::jail::JAVA_KERNEL,
    )
    .expect("the Java kernel written");
    std::fs::write(
        java.join("JShellKernel.java"),
        runcell_sandbox::jail::JSHELL_ENGINE,
    )
    .expect("the Java kernel's engine written");
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .env("RUNCELL_NODE_KERNEL", kernel)
        .arg(script);
    let (ok, output) = run(command).await;
    assert!(ok, "the kernel conformance run failed:\n{output}");
    assert!(output.contains("ok: kernel conformance"), "{output}");
}

/// jupyter_kernel_test through the gateway: a kernel spec per language
/// whose argv is `gateway_bridge.py`, which relays ZeroMQ to the gateway's
/// kernel WebSocket, so the suite checks what a front end gets (cells,
/// displays and their updates, clear_output, the pager, and completion,
/// inspection, is_complete and history answered by the real kernels).
#[tokio::test]
async fn the_gateways_kernels_pass_jupyter_kernel_test() {
    let Some(venv) = venv() else {
        return missing("the API clients' venv (jupyter_kernel_test)", HOW);
    };
    let server = TestServer::start().await;
    let key = server.api_key("kernel-test").await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/gateway_kernel_test.py"
    );
    let mut command = Command::new(venv.join("bin/python"));
    command
        .current_dir(std::env::temp_dir())
        .args([script, &server.url("/jupyter"), &key]);
    let (ok, output) = run(command).await;
    assert!(
        ok,
        "jupyter_kernel_test failed through the gateway:\n{output}"
    );
    assert!(
        output.contains("ok: jupyter_kernel_test through the gateway"),
        "{output}"
    );
    for (test, class) in [
        ("test_completion", "Python"),
        ("test_inspect", "Python"),
        ("test_is_complete", "Python"),
        ("test_pager", "Python"),
        ("test_clear_output", "Python"),
        ("test_update_display_data", "Python"),
        ("test_completion", "R"),
        ("test_clear_output", "R"),
        ("test_inspect", "R"),
        ("test_completion", "JavaScript"),
        ("test_is_complete", "TypeScript"),
        ("test_completion", "Java"),
        ("test_inspect", "Java"),
        ("test_is_complete", "Java"),
        ("test_clear_output", "Java"),
        ("test_update_display_data", "Java"),
    ] {
        let line = format!("{test} (__main__.{class}.{test}) ... ok");
        assert!(output.contains(&line), "{line} is missing:\n{output}");
    }
}
