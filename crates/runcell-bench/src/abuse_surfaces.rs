//! The abuse bench's attackers on the surfaces accounts and packages added:
//! a jail flooding its package index (an HTTP/2 connection tried first,
//! then HTTP/1 requests pipelined on many connections, half never read,
//! for big, slow pages and files of a package upstream this bench serves
//! itself on loopback), and a person making as many API keys as they are
//! let and opening sandbox sessions with each.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;
use sha2_010::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::attackers::{Answers, attacker, client_from};
use crate::{BenchError, fail};

/// Files each upstream project lists that can really be downloaded...
const REAL_FILES: usize = 8;
/// ...of this size each...
const FILE_BYTES: usize = 4 * 1024 * 1024;
/// ...and entries that only make its page long (about 2 MiB a page).
const PADDING_FILES: usize = 10_000;
/// How long upstream takes to answer anything.
const UPSTREAM_DELAY: Duration = Duration::from_millis(500);

/// The package upstream the flooding jail's index fetches from: on
/// loopback, slow, with big pages and files.
pub(crate) struct Upstream {
    /// Its simple index, for `packages.index_url`.
    pub index_url: String,
    stop: CancellationToken,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The bytes of real file `n`.
fn file_bytes(n: usize) -> Vec<u8> {
    let mut bytes = format!("PK\u{3}\u{4} file {n} ").into_bytes();
    bytes.resize(FILE_BYTES, b'a' + (n % 26) as u8);
    bytes
}

impl Upstream {
    pub(crate) async fn start() -> Result<Self, BenchError> {
        let files: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
            (0..REAL_FILES)
                .map(|n| {
                    let bytes = file_bytes(n);
                    let sha = hex::encode(Sha256::digest(&bytes));
                    (bytes, sha)
                })
                .collect(),
        );
        let page_files = Arc::clone(&files);
        let app = axum::Router::new()
            .route(
                "/simple/{project}/",
                axum::routing::get(move |Path(project): Path<String>| {
                    let files = Arc::clone(&page_files);
                    async move {
                        tokio::time::sleep(UPSTREAM_DELAY).await;
                        page(&project, &files).into_response()
                    }
                }),
            )
            .route(
                "/files/{n}",
                axum::routing::get(move |Path(n): Path<usize>| {
                    let files = Arc::clone(&files);
                    async move {
                        tokio::time::sleep(UPSTREAM_DELAY).await;
                        match files.get(n) {
                            Some((bytes, _)) => bytes.clone().into_response(),
                            None => axum::http::StatusCode::NOT_FOUND.into_response(),
                        }
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
        });
        Ok(Self {
            index_url: format!("http://{addr}/simple/"),
            stop,
        })
    }
}

/// `project`'s page: the real files (sizes listed), then the padding.
fn page(project: &str, files: &[(Vec<u8>, String)]) -> impl IntoResponse {
    let mut entries: Vec<serde_json::Value> = files
        .iter()
        .enumerate()
        .map(|(n, (bytes, sha))| {
            serde_json::json!({
                "filename": format!("{project}-{n}.0-py3-none-any.whl"),
                "url": format!("/files/{n}"),
                "hashes": {"sha256": sha},
                "size": bytes.len(),
            })
        })
        .collect();
    entries.extend((0..PADDING_FILES).map(|n| {
        serde_json::json!({
            "filename": format!("{project}-0.{n}-py3-none-any.whl"),
            "url": "/files/none",
            "hashes": {"sha256": format!("{n:064x}")},
        })
    }));
    (
        [(header::CONTENT_TYPE, "application/vnd.pypi.simple.v1+json")],
        serde_json::json!({"meta": {"api-version": "1.1"}, "name": project, "files": entries})
            .to_string(),
    )
}

/// The program a hostile run executes in its jail for `seconds`: an
/// HTTP/2 connection first (what it is answered is printed), then 16
/// threads of pipelined HTTP/1 requests for 200 projects' pages and the
/// files the first page lists, half of them never reading their answers.
fn flood_program(seconds: u64) -> String {
    format!(
        r##"import json, socket, threading, time, urllib.request
END = time.time() + {seconds}
INDEX = ("127.0.0.1", 3141)
try:
    s = socket.create_connection(INDEX, timeout=5)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    got = s.recv(64)
    print("h2:", "SETTINGS" if len(got) >= 9 and got[3] == 4 else (got[:12].decode("latin1") or "closed"))
except Exception as e:
    print("h2:", type(e).__name__)
files = []
try:
    req = urllib.request.Request("http://127.0.0.1:3141/simple/flood0/", headers={{"Accept": "application/vnd.pypi.simple.v1+json"}})
    page = json.load(urllib.request.urlopen(req, timeout=60))
    files = [f["url"].split("#")[0] for f in page["files"] if "size" in f]
except Exception as e:
    print("page:", type(e).__name__)
def flood(i):
    n = 0
    while time.time() < END:
        try:
            s = socket.create_connection(INDEX, timeout=10)
            paths = [f"/simple/flood{{(i * 37 + n + k) % 200}}/" for k in range(10)] + files
            s.sendall(b"".join(f"GET {{p}} HTTP/1.1\r\nHost: x\r\nAccept: application/vnd.pypi.simple.v1+json\r\n\r\n".encode() for p in paths))
            if i % 2 == 0:
                s.settimeout(2)
                try:
                    while s.recv(65536):
                        pass
                except Exception:
                    pass
            else:
                time.sleep(3)
            s.close()
        except Exception:
            time.sleep(0.2)
        n += 10
threads = [threading.Thread(target=flood, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("flooded")
"##
    )
}

/// A hostile key's runs flooding their jail's package index, one after
/// another until `stop`.
pub(crate) fn spawn_index_flood(
    tasks: &mut tokio::task::JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    url: String,
    key: String,
    seconds: u64,
) -> Result<(), BenchError> {
    let client = client_from(attacker(21), Duration::from_secs(seconds + 60))?;
    let (stop, answers) = (stop.clone(), Arc::clone(answers));
    tasks.spawn(async move {
        while !stop.is_cancelled() {
            let run = client
                .post(format!("{url}/v1/code_interpreter/run"))
                .bearer_auth(&key)
                .json(&serde_json::json!({
                    "code": flood_program(seconds.min(30)),
                    "language": "python",
                    "timeout": seconds.min(30) + 30,
                }))
                .send()
                .await;
            match run {
                Ok(response) if response.status().is_success() => {
                    let body: serde_json::Value = response.json().await.unwrap_or_default();
                    let stdout = body["stdout"].as_str().unwrap_or_default().to_string();
                    let h2 = stdout
                        .lines()
                        .find_map(|l| l.strip_prefix("h2: "))
                        .unwrap_or("no answer");
                    answers.note("index flood: HTTP/2 answered", h2.to_string());
                    answers.note(
                        "index flood: run",
                        if stdout.contains("flooded") {
                            "done"
                        } else {
                            "cut short"
                        },
                    );
                }
                other => {
                    answers.note_status("index flood: run", &other);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    });
    Ok(())
}

/// The person `mallory` (named by the trusted proxy header, from the
/// proxy's address) making keys as fast as she is answered, each opening
/// `/v1` sessions; how many sessions she was given is counted in
/// `sessions`.
pub(crate) fn spawn_key_hoarder(
    tasks: &mut tokio::task::JoinSet<()>,
    stop: &CancellationToken,
    answers: &Arc<Answers>,
    url: String,
    sessions: Arc<std::sync::atomic::AtomicU64>,
) -> Result<(), BenchError> {
    let client = client_from(std::net::Ipv4Addr::LOCALHOST, Duration::from_secs(60))?;
    let (stop, answers) = (stop.clone(), Arc::clone(answers));
    tasks.spawn(async move {
        let mut n = 0_u64;
        while !stop.is_cancelled() {
            n += 1;
            let made = client
                .post(format!("{url}/account/keys"))
                .header("x-forwarded-user", "mallory")
                .header("origin", &url)
                .form(&[("name", format!("k{n}"))])
                .send()
                .await;
            answers.note_status("many keys: make a key", &made);
            let key = match made {
                Ok(made) if made.status().is_success() => {
                    let page = made.text().await.unwrap_or_default();
                    page.split("<code>")
                        .nth(1)
                        .and_then(|rest| rest.split("</code>").next())
                        .map(str::to_string)
                }
                _ => None,
            };
            let Some(key) = key else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            for _ in 0..3 {
                let opened = client
                    .post(format!("{url}/v1/code_interpreter/sessions"))
                    .bearer_auth(&key)
                    .json(&serde_json::json!({}))
                    .send()
                    .await;
                if matches!(&opened, Ok(r) if r.status().as_u16() == 201) {
                    sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                answers.note_status("many keys: /v1 session", &opened);
            }
        }
    });
    Ok(())
}
