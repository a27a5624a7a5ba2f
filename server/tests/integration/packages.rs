//! Packages on demand: sessions in the jail `pip install` through runcell's
//! own index, which reaches the upstream the host's pip is configured with
//! (these tests need it, as the SDK suites need their registries). The
//! project is a small pure-Python wheel at a pinned version. What the index
//! refuses on its own (names, paths, hashes, sizes, redirects) is tested
//! against a fake upstream in `runcell-packages`.

use app::protocol::{CellKind, EventBody, Output, SessionEvent};
use serde_json::{Value, json};

use crate::support::{TestServer, ask, http, new_v1_session};

const RUN: &str = "/v1/code_interpreter/run";
const PINNED: &str = "humanize==4.9.0";
/// What the pinned version prints for a megabyte.
const USE_IT: &str = "import humanize; print(humanize.naturalsize(10**6), humanize.__file__)";

async fn run_in(client: &reqwest::Client, server: &TestServer, session: &str, code: &str) -> Value {
    let response = client
        .post(server.url(RUN))
        .json(&json!({"code": code, "language": "python", "session_id": session, "timeout": 240}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The package notes a `/v1` run's results carry.
fn notes(outcome: &Value) -> Vec<Value> {
    outcome["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("application/vnd.runcell.package+json").cloned())
        .collect()
}

async fn metric(server: &TestServer, line_start: &str) -> f64 {
    let text = http()
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_session_installs_a_pinned_wheel_and_the_next_one_gets_it_from_the_cache() {
    let server = TestServer::start().await;
    let client = server.api().await;

    let first = new_v1_session(&client, &server).await;
    let missing = run_in(&client, &server, &first, USE_IT).await;
    assert_eq!(missing["error"]["name"], "ModuleNotFoundError", "{missing}");
    let installed = run_in(&client, &server, &first, &format!("%pip install {PINNED}")).await;
    let served = notes(&installed);
    assert_eq!(served.len(), 1, "{installed}");
    assert_eq!(served[0]["project"], "humanize");
    assert_eq!(served[0]["version"], "4.9.0");
    assert_eq!(served[0]["cached"], false, "{installed}");
    assert!(served[0]["size"].as_u64().unwrap() > 10_000);
    let used = run_in(&client, &server, &first, USE_IT).await;
    assert!(
        used["stdout"]
            .as_str()
            .unwrap()
            .starts_with("1.0 MB /home/user/.local/lib/python3"),
        "{used}"
    );

    // Another session: the same file, from the cache, never upstream.
    let second = new_v1_session(&client, &server).await;
    let again = run_in(&client, &server, &second, &format!("!pip install {PINNED}")).await;
    let served = notes(&again);
    assert_eq!(served.len(), 1, "{again}");
    assert_eq!(served[0]["cached"], true, "{again}");
    let used = run_in(&client, &server, &second, USE_IT).await;
    assert!(
        used["stdout"].as_str().unwrap().starts_with("1.0 MB"),
        "{used}"
    );

    let cached = metric(&server, "runcell_package_files_total{source=\"cache\"}").await;
    let upstream = metric(&server, "runcell_package_files_total{source=\"upstream\"}").await;
    assert!(
        cached >= 1.0 && upstream >= 1.0,
        "cache {cached}, upstream {upstream}"
    );
    // The cache is the server's, in its data directory.
    let blobs = walk_files(&server.data_dir().join("packages"));
    assert!(blobs > 0, "nothing in the cache");
}

fn walk_files(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            if e.path().is_dir() {
                walk_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[tokio::test]
async fn a_denied_project_and_odd_requests_are_refused_plainly() {
    let server = TestServer::start_configured(|config| {
        config.packages.deny = vec!["Humanize".into()];
    })
    .await;
    let client = server.api().await;
    let session = new_v1_session(&client, &server).await;
    let refused = run_in(
        &client,
        &server,
        &session,
        &format!("%pip install {PINNED}"),
    )
    .await;
    let said = notes(&refused);
    assert_eq!(said.len(), 1, "{refused}");
    assert_eq!(said[0]["project"], "humanize");
    let reason = said[0]["refused"].as_str().unwrap();
    assert!(reason.contains("packages.deny"), "{reason}");
    let used = run_in(&client, &server, &session, USE_IT).await;
    assert_eq!(used["error"]["name"], "ModuleNotFoundError", "{used}");

    // What the index answers from inside the jail to requests pip would
    // never make: names that are not normalised, paths, other files.
    let probe = r#"
import os, urllib.request, urllib.error
base = os.environ["PIP_INDEX_URL"].rsplit("/simple/", 1)[0]
for path in ["/simple/Foo_Bar/", "/simple/..%2F..%2Fetc/", "/files/../../etc/passwd",
             "/files/" + "0" * 64 + "/x-1.0-py3-none-any.whl", "/simple/humanize/", "/admin"]:
    try:
        code = urllib.request.urlopen(base + path, timeout=20).status
    except urllib.error.HTTPError as e:
        code = e.code
    print(path, code)
"#;
    let answered = run_in(&client, &server, &session, probe).await;
    let lines = answered["stdout"].as_str().unwrap();
    for line in lines.lines() {
        let code: u16 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((400..500).contains(&code), "{line} in\n{lines}");
    }
    assert_eq!(lines.lines().count(), 6, "{answered}");
    let refusals = metric(&server, "runcell_package_refusals_total{reason=\"policy\"}").await;
    assert!(refusals >= 1.0, "{refusals}");
}

#[tokio::test]
async fn the_jail_reaches_its_index_and_nothing_else() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let server = TestServer::start().await;
    let client = server.api().await;
    let session = new_v1_session(&client, &server).await;
    let probe = format!(
        r#"
import os, socket
print(sorted(name for _, name in socket.if_nameindex()))
routes = [l.split()[1] for l in open("/proc/net/route").read().splitlines()[1:]]
print("routes", routes)
def reach(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "reached"
    except OSError as e:
        return type(e).__name__
print("index", reach(int(os.environ["PIP_INDEX_URL"].split(":")[2].split("/")[0])))
print("host", reach({port}))
try:
    socket.getaddrinfo("example.com", 443)
    print("dns resolved")
except OSError:
    print("dns refused")
"#
    );
    let outcome = run_in(&client, &server, &session, &probe).await;
    let stdout = outcome["stdout"].as_str().unwrap();
    assert!(stdout.contains("['lo']"), "{stdout}");
    assert!(stdout.contains("routes []"), "{stdout}");
    assert!(stdout.contains("index reached"), "{stdout}");
    assert!(stdout.contains("host ConnectionRefusedError"), "{stdout}");
    assert!(stdout.contains("dns refused"), "{stdout}");
    host.set_nonblocking(true).unwrap();
    assert!(host.accept().is_err(), "the jail reached the host's port");
}

/// The code cells of a turn (their whole text, in order) and every output.
fn cells(events: &[SessionEvent]) -> (Vec<String>, Vec<Output>) {
    let mut code: Vec<(app::protocol::CellId, String)> = Vec::new();
    let mut outputs = Vec::new();
    for event in events {
        match &event.event {
            EventBody::CellStarted {
                cell_id,
                cell_kind: CellKind::Code,
                ..
            } => code.push((*cell_id, String::new())),
            EventBody::CellDelta { cell_id, text, .. } => {
                if let Some((_, whole)) = code.iter_mut().find(|(id, _)| id == cell_id) {
                    whole.push_str(text);
                }
            }
            EventBody::CellOutput { output, .. } => outputs.push(output.clone()),
            _ => {}
        }
    }
    (code.into_iter().map(|(_, text)| text).collect(), outputs)
}

#[tokio::test]
async fn the_agent_installs_a_missing_module_and_runs_the_program_again() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let events = ask(
        &server,
        &id,
        "How big is a megabyte, said for people?\n```python\nimport humanize\nprint(humanize.naturalsize(10**6))\n```",
    )
    .await;
    let (code, outputs) = cells(&events);
    assert_eq!(
        code,
        [
            "import humanize\nprint(humanize.naturalsize(10**6))",
            "%pip install humanize",
            "import humanize\nprint(humanize.naturalsize(10**6))",
        ],
        "{events:?}"
    );
    assert!(
        outputs.iter().any(
            |o| matches!(o, Output::Package { project, refused: None, .. } if project == "humanize")
        ),
        "{outputs:?}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Stdout { text } if text == "1.0 MB\n")),
        "{outputs:?}"
    );

    // A server started afresh on the same data: the notebook's next kernel
    // installs what it had (from the cache) before its first run.
    let server = server.restart().await;
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&json!({"code": "import humanize\nprint(humanize.intword(1_200_000))", "language": "python"}))
        .send()
        .await
        .unwrap();
    let events = crate::support::ndjson_events(response).await;
    let (_, outputs) = cells(&events);
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Stdout { text } if text == "1.2 million\n")),
        "{outputs:?}"
    );
}

#[tokio::test]
async fn a_refused_install_is_said_and_the_model_is_told() {
    let server = TestServer::start_configured(|config| {
        config.packages.mode = runcell_sandbox::packages::Mode::Allowlist;
        config.packages.allow = vec!["six".into()];
    })
    .await;
    let id = server.new_session().await;
    let events = ask(
        &server,
        &id,
        "```python\nimport humanize\nprint(humanize.naturalsize(10**6))\n```",
    )
    .await;
    let (code, outputs) = cells(&events);
    assert!(
        code.iter().any(|c| c == "%pip install humanize"),
        "{code:?}"
    );
    let refused = outputs.iter().find_map(|o| match o {
        Output::Package {
            project,
            refused: Some(reason),
            ..
        } if project == "humanize" => Some(reason.clone()),
        _ => None,
    });
    let reason = refused.unwrap_or_else(|| panic!("no refusal in {outputs:?}"));
    assert!(reason.contains("packages"), "{reason}");
    // Tried once a turn, however the model answers the refusal.
    assert_eq!(
        code.iter().filter(|c| c.starts_with("%pip")).count(),
        1,
        "{code:?}"
    );
}

#[tokio::test]
async fn a_cache_filled_by_packages_fetch_serves_an_offline_server() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("data");
    let requirements = data.path().join("requirements.txt");
    std::fs::write(&requirements, format!("{PINNED}\n")).unwrap();
    let fetched = tokio::process::Command::new(env!("CARGO_BIN_EXE_runcell"))
        .args(["packages", "fetch", "-r"])
        .arg(&requirements)
        .arg("--data-dir")
        .arg(&dir)
        .env_remove("RUNCELL_LOG")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&fetched.stdout);
    assert!(fetched.status.success(), "{fetched:?}");
    assert!(stdout.contains("1 files fetched"), "{stdout}");

    // The upstream is never asked now: a name that cannot resolve.
    let server = TestServer::start_configured(|config| {
        config.data_dir = dir.clone();
        config.packages.offline = true;
        config.packages.index_url = Some("https://upstream.invalid/simple/".into());
    })
    .await;
    let client = server.api().await;
    let session = new_v1_session(&client, &server).await;
    let installed = run_in(
        &client,
        &server,
        &session,
        &format!("%pip install {PINNED}"),
    )
    .await;
    let served = notes(&installed);
    assert_eq!(served.len(), 1, "{installed}");
    assert_eq!(served[0]["cached"], true, "{installed}");
    let used = run_in(&client, &server, &session, USE_IT).await;
    assert!(
        used["stdout"].as_str().unwrap().starts_with("1.0 MB"),
        "{used}"
    );
    // What the cache lacks is not there, said as pip says it.
    let missing = run_in(&client, &server, &session, "%pip install pyfiglet==1.0.2").await;
    assert!(
        missing["stdout"]
            .as_str()
            .unwrap()
            .contains("No matching distribution"),
        "{missing}"
    );
}
