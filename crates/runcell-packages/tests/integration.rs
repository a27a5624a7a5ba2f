//! The index end to end: a fake upstream on 127.0.0.1, the index served on
//! its own listener, and a client standing in for the jail's pip.
#![expect(
    clippy::expect_used,
    reason = "a failed step should fail the test where it happened"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use runcell_packages::{Account, Mode, Notice, PackageIndex, PackagesConfig};
use sha2_010::{Digest, Sha256};

const JSON: &str = "application/vnd.pypi.simple.v1+json";

/// One canned answer of the fake upstream.
#[derive(Clone)]
struct Canned {
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
    location: Option<String>,
}

/// An upstream index that answers what it was given and counts what it was asked.
#[derive(Clone, Default)]
struct Fake {
    routes: Arc<Mutex<HashMap<String, Canned>>>,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    down: Arc<AtomicBool>,
    /// Milliseconds each answer waits before it is sent.
    delay_ms: Arc<AtomicU64>,
    /// Requests being answered now, and the most at once so far.
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl Fake {
    async fn start() -> (Self, String) {
        let fake = Self::default();
        let state = fake.clone();
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let state = state.clone();
            async move {
                let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                state.most_in_flight.fetch_max(now, Ordering::SeqCst);
                let delay = state.delay_ms.load(Ordering::SeqCst);
                if delay > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                }
                let answer = state.answer(uri.path());
                state.in_flight.fetch_sub(1, Ordering::SeqCst);
                answer
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (fake, format!("http://{addr}"))
    }

    fn answer(&self, path: &str) -> Response {
        *self.hits.lock().entry(path.to_string()).or_default() += 1;
        if self.down.load(Ordering::SeqCst) {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        let Some(canned) = self.routes.lock().get(path).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let mut response = (
            canned.status,
            [(header::CONTENT_TYPE, canned.content_type)],
            canned.body,
        )
            .into_response();
        if let Some(location) = canned.location {
            response.headers_mut().insert(
                header::LOCATION,
                HeaderValue::from_str(&location).expect("location"),
            );
        }
        response
    }

    fn set(&self, path: &str, content_type: &'static str, body: impl Into<Vec<u8>>) {
        let canned = Canned {
            status: StatusCode::OK,
            content_type,
            body: body.into(),
            location: None,
        };
        self.routes.lock().insert(path.to_string(), canned);
    }

    fn redirect(&self, path: &str, to: &str) {
        let canned = Canned {
            status: StatusCode::FOUND,
            content_type: "text/plain",
            body: Vec::new(),
            location: Some(to.into()),
        };
        self.routes.lock().insert(path.to_string(), canned);
    }

    fn hits(&self, path: &str) -> usize {
        self.hits.lock().get(path).copied().unwrap_or(0)
    }

    fn total_hits(&self) -> usize {
        self.hits.lock().values().sum()
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A file's entry on a PEP 691 page.
fn json_file(filename: &str, url: &str, sha: &str, size: Option<usize>) -> serde_json::Value {
    let mut file = serde_json::json!({"filename": filename, "url": url, "hashes": {"sha256": sha}});
    if let Some(size) = size {
        file["size"] = size.into();
    }
    file
}

fn json_page(name: &str, files: &[serde_json::Value]) -> String {
    serde_json::json!({"meta": {"api-version": "1.1"}, "name": name, "files": files}).to_string()
}

/// Bytes standing in for a wheel (the index never unzips them).
fn wheel(tag: &str, len: usize) -> Vec<u8> {
    let mut bytes = format!("PK\u{3}\u{4} pkg/__init__.py {tag} ").into_bytes();
    bytes.resize(len.max(bytes.len()), b'w');
    bytes
}

/// An index served on its own listener for one account, over a fake upstream.
struct Jail {
    fake: Fake,
    upstream: String,
    dir: tempfile::TempDir,
    index: Arc<PackageIndex>,
    account: Arc<Account>,
    notices: Arc<Mutex<Vec<Notice>>>,
    base: String,
    client: reqwest::Client,
}

impl Jail {
    async fn start(config: PackagesConfig) -> Self {
        let (fake, upstream) = Fake::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        Self::over(fake, upstream, dir, config).await
    }

    async fn over(
        fake: Fake,
        upstream: String,
        dir: tempfile::TempDir,
        config: PackagesConfig,
    ) -> Self {
        let index = PackageIndex::new(
            config,
            dir.path().join("packages"),
            format!("{upstream}/simple/"),
        )
        .expect("index");
        let account = Account::new("test");
        let notices = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&notices);
        account.set_sink(Some(Box::new(move |notice| sink.lock().push(notice))));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(Arc::clone(&index).serve(listener, Arc::clone(&account)));
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        Self {
            fake,
            upstream,
            dir,
            index,
            account,
            notices,
            base,
            client,
        }
    }

    /// Restarts the index over the same upstream and cache with `config`.
    async fn again(self, config: PackagesConfig) -> Self {
        Self::over(self.fake, self.upstream, self.dir, config).await
    }

    async fn get(&self, path: &str, accept: &str) -> (StatusCode, String, Vec<u8>) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header(header::ACCEPT, accept)
            .send()
            .await
            .expect("request");
        let status = response.status();
        let kind = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, kind, response.bytes().await.expect("body").to_vec())
    }

    /// GETs every path at once, each on a connection of its own; the
    /// statuses in order.
    async fn get_all_at_once(&self, paths: &[String]) -> Vec<reqwest::Result<StatusCode>> {
        let requests = paths.iter().map(|path| {
            let client = reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client");
            let url = format!("{}{path}", self.base);
            async move { client.get(url).send().await.map(|r| r.status()) }
        });
        futures::future::join_all(requests).await
    }

    async fn json(&self, path: &str) -> serde_json::Value {
        let (status, kind, body) = self.get(path, JSON).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(kind, JSON);
        serde_json::from_slice(&body).expect("json")
    }

    fn notices(&self) -> Vec<Notice> {
        self.notices.lock().clone()
    }

    fn refusals(&self) -> Vec<String> {
        self.notices()
            .into_iter()
            .filter_map(|n| match n {
                Notice::Refused { reason, .. } => Some(reason),
                Notice::Served { .. } => None,
            })
            .collect()
    }

    /// Puts project `demo` upstream (JSON): one wheel (with a relative URL),
    /// an sdist, a file without a hash and another project's wheel; its bytes.
    fn demo(&self) -> Vec<u8> {
        let bytes = wheel("demo", 1000);
        let sdist = b"sdist bytes".to_vec();
        let files = [
            json_file(
                "demo-1.0-py3-none-any.whl",
                "../../files/demo-1.0-py3-none-any.whl",
                &sha256(&bytes),
                Some(bytes.len()),
            ),
            json_file(
                "demo-1.0.tar.gz",
                &format!("{}/files/demo-1.0.tar.gz", self.upstream),
                &sha256(&sdist),
                None,
            ),
            serde_json::json!({"filename": "demo-0.9-py3-none-any.whl", "url": "/files/demo-0.9-py3-none-any.whl", "hashes": {}}),
            json_file(
                "other-1.0-py3-none-any.whl",
                "/files/other-1.0-py3-none-any.whl",
                &sha256(&bytes),
                None,
            ),
        ];
        self.fake
            .set("/simple/demo/", JSON, json_page("demo", &files));
        self.fake.set(
            "/files/demo-1.0-py3-none-any.whl",
            "application/octet-stream",
            bytes.clone(),
        );
        self.fake
            .set("/files/demo-1.0.tar.gz", "application/octet-stream", sdist);
        bytes
    }
}

fn config(edit: impl FnOnce(&mut PackagesConfig)) -> PackagesConfig {
    let mut config = PackagesConfig::default();
    edit(&mut config);
    config
}

#[tokio::test]
async fn names_must_be_normalised_and_valid() {
    let jail = Jail::start(PackagesConfig::default()).await;
    jail.demo();
    for path in [
        "/simple/Foo_Bar/",
        "/simple/%2e%2e/",
        "/simple/..%2Fx/",
        "/simple/demo",
        "/simple/a%20b/",
        "/files/abc/demo-1.0-py3-none-any.whl",
    ] {
        let (status, _, body) = jail.get(path, JSON).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (_, _, body) = jail.get("/simple/Foo_Bar/", "text/html").await;
    assert!(String::from_utf8_lossy(&body).contains("/simple/foo-bar/"));
    let sha = "0".repeat(64);
    for name in [
        "..%2Fdemo-1.0-py3-none-any.whl",
        "demo-1.0-py3-none-any.exe",
        "%2e%2e",
    ] {
        let (status, _, _) = jail.get(&format!("/files/{sha}/{name}"), JSON).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}");
    }
    assert_eq!(jail.fake.total_hits(), 0, "nothing reached upstream");
}

#[tokio::test]
async fn the_policy_refuses_denied_unlisted_and_everything_when_off() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let (status, _, body) = jail.get("/simple/pip/", JSON).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&body).contains("(packages.deny)"));
    assert_eq!(
        jail.notices(),
        vec![Notice::Refused {
            project: "pip".into(),
            reason: "runcell's package policy does not allow 'pip' (packages.deny)".into()
        }]
    );

    let jail = jail
        .again(config(|c| {
            c.mode = Mode::Allowlist;
            c.allow = vec!["Demo".into(), "other".into()];
            c.deny = vec!["Other".into()];
        }))
        .await;
    jail.demo();
    assert_eq!(
        jail.json("/simple/demo/").await["files"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let (status, _, body) = jail.get("/simple/numpy/", JSON).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&body).contains("(packages.allow)"));
    let (status, _, _) = jail.get("/simple/other/", JSON).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "deny wins over allow");
    assert_eq!(
        jail.fake.hits("/simple/numpy/") + jail.fake.hits("/simple/other/"),
        0
    );

    let jail = jail.again(config(|c| c.mode = Mode::Off)).await;
    for path in ["/simple/", "/simple/demo/"] {
        let (status, _, _) = jail.get(path, JSON).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
    }
}

#[tokio::test]
async fn json_pages_are_filtered_and_rewritten() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let bytes = jail.demo();
    let sha = sha256(&bytes);
    let page = jail.json("/simple/demo/").await;
    assert_eq!(page["meta"]["api-version"], "1.1");
    assert_eq!(page["name"], "demo");
    assert_eq!(page["versions"], serde_json::json!(["1.0"]));
    let files = page["files"].as_array().expect("files");
    assert_eq!(files.len(), 1, "{page}");
    assert_eq!(files[0]["filename"], "demo-1.0-py3-none-any.whl");
    assert_eq!(
        files[0]["url"],
        format!("/files/{sha}/demo-1.0-py3-none-any.whl#sha256={sha}")
    );
    assert_eq!(files[0]["hashes"]["sha256"], sha);
    assert_eq!(files[0]["size"], bytes.len());

    let (status, kind, body) = jail.get("/simple/demo/", "text/html").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/html"), "{kind}");
    let html = String::from_utf8_lossy(&body);
    assert!(html.contains(&format!("<a href=\"/files/{sha}/demo-1.0-py3-none-any.whl#sha256={sha}\">demo-1.0-py3-none-any.whl</a>")), "{html}");

    let root = jail.json("/simple/").await;
    assert_eq!(root["projects"], serde_json::json!([{"name": "demo"}]));
    let (_, _, body) = jail.get("/simple/", "text/html").await;
    assert!(String::from_utf8_lossy(&body).contains("<a href=\"demo/\">demo</a>"));
    assert_eq!(jail.index.cached_projects(), vec!["demo".to_string()]);

    let jail = jail
        .again(config(|c| {
            c.sdists = true;
            c.page_ttl_secs = 0;
        }))
        .await;
    let page = jail.json("/simple/demo/").await;
    let names: Vec<&str> = page["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["filename"].as_str())
        .collect();
    assert_eq!(names, ["demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz"]);
    assert!(
        !jail
            .index
            .jail_env()
            .iter()
            .any(|(k, _)| k == "PIP_ONLY_BINARY")
    );
}

#[tokio::test]
async fn html_pages_are_parsed() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let (a, b) = (wheel("a", 10), wheel("b", 10));
    let html = format!(
        "<!DOCTYPE html><html><body>\n\
         <A HREF=\"../../files/html_pkg-1.0-py3-none-any.whl?x=1&amp;y=2#sha256={}\" data-requires-python=\"&gt;=3.8\">html_pkg-1.0-py3-none-any.whl</A><br/>\n\
         <a data-yanked=\"broken &amp; bad\" href='{}/files/Html.Pkg-2.0-py3-none-any.whl#sha256={}'>Html.Pkg-2.0-py3-none-any.whl</a>\n\
         <a href=\"/files/html_pkg-3.0-py3-none-any.whl#md5=00\">html_pkg-3.0-py3-none-any.whl</a>\n\
         </body></html>",
        sha256(&a),
        jail.upstream,
        sha256(&b)
    );
    jail.fake.set("/simple/html-pkg/", "text/html", html);
    jail.fake.set(
        "/files/html_pkg-1.0-py3-none-any.whl",
        "application/octet-stream",
        a.clone(),
    );
    let page = jail.json("/simple/html-pkg/").await;
    let files = page["files"].as_array().expect("files");
    assert_eq!(files.len(), 2, "{page}");
    assert_eq!(files[0]["requires-python"], ">=3.8");
    assert!(files[0].get("yanked").is_none());
    assert_eq!(files[1]["yanked"], "broken & bad");
    let (_, _, body) = jail.get("/simple/html-pkg/", "text/html").await;
    let html = String::from_utf8_lossy(&body);
    assert!(html.contains("data-requires-python=\"&gt;=3.8\""), "{html}");
    assert!(html.contains("data-yanked=\"broken &amp; bad\""), "{html}");
    let (status, _, body) = jail
        .get(
            &format!("/files/{}/html_pkg-1.0-py3-none-any.whl", sha256(&a)),
            "*/*",
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, a),
        "the relative URL, query kept, resolved against the page"
    );
}

#[tokio::test]
async fn a_file_is_downloaded_once_then_served_from_the_cache() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let bytes = jail.demo();
    let sha = sha256(&bytes);
    let path = format!("/files/{sha}/demo-1.0-py3-none-any.whl");
    let (status, _, _) = jail.get(&path, "*/*").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the page is fetched first if it is not cached"
    );
    let (status, kind, body) = jail.get(&path, "*/*").await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "application/octet-stream")
    );
    assert_eq!(body, bytes);
    assert_eq!(jail.fake.hits("/files/demo-1.0-py3-none-any.whl"), 1);
    let blob = jail
        .dir
        .path()
        .join(format!("packages/blobs/sha256/{}/{sha}", &sha[..2]));
    assert_eq!(std::fs::read(blob).expect("the blob"), bytes);
    let served = |cached| Notice::Served {
        project: "demo".into(),
        version: "1.0".into(),
        filename: "demo-1.0-py3-none-any.whl".into(),
        bytes: bytes.len() as u64,
        cached,
    };
    assert_eq!(jail.notices(), vec![served(false), served(true)]);
    assert_eq!(
        jail.account.installed(),
        vec![("demo".to_string(), "1.0".to_string())]
    );
    assert_eq!(jail.account.bytes_served(), 2 * bytes.len() as u64);

    let (status, _, _) = jail
        .get(
            &format!("/files/{}/demo-1.0-py3-none-any.whl", "a".repeat(64)),
            "*/*",
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a hash the page does not list"
    );
    let (status, _, _) = jail
        .get(
            &format!("/files/{}/demo-1.0.tar.gz", sha256(b"sdist bytes")),
            "*/*",
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "sdists are not served by default"
    );
}

#[tokio::test]
async fn a_file_that_does_not_match_its_hash_is_refused_and_not_kept() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let listed = wheel("listed", 100);
    let sha = sha256(&listed);
    jail.fake.set(
        "/simple/bad/",
        JSON,
        json_page(
            "bad",
            &[json_file(
                "bad-1.0-py3-none-any.whl",
                "/files/bad.whl",
                &sha,
                None,
            )],
        ),
    );
    jail.fake.set(
        "/files/bad.whl",
        "application/octet-stream",
        wheel("tampered", 100),
    );
    jail.json("/simple/bad/").await;
    for round in 1..=2 {
        let (status, _, body) = jail
            .get(&format!("/files/{sha}/bad-1.0-py3-none-any.whl"), "*/*")
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_GATEWAY,
            "{}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(
            jail.fake.hits("/files/bad.whl"),
            round,
            "nothing was cached"
        );
    }
    assert!(
        jail.refusals()
            .iter()
            .all(|r| r.contains("did not match its sha256")),
        "{:?}",
        jail.refusals()
    );
    assert_eq!(jail.account.bytes_served(), 0);
    assert!(jail.account.installed().is_empty());
    let tmp = std::fs::read_dir(jail.dir.path().join("packages/tmp"))
        .expect("tmp")
        .count();
    assert_eq!(tmp, 0, "the partial download was deleted");
}

#[tokio::test]
async fn files_over_the_size_cap_are_refused() {
    let jail = Jail::start(config(|c| c.max_file_mib = 1)).await;
    let big = wheel("big", 1_600_000);
    let sha = sha256(&big);
    let files = [
        json_file(
            "big-1.0-py3-none-any.whl",
            "/files/big.whl",
            &sha,
            Some(big.len()),
        ),
        json_file("big-2.0-py3-none-any.whl", "/files/big.whl", &sha, None),
    ];
    jail.fake
        .set("/simple/big/", JSON, json_page("big", &files));
    jail.fake
        .set("/files/big.whl", "application/octet-stream", big);
    jail.json("/simple/big/").await;
    let (status, _, body) = jail
        .get(&format!("/files/{sha}/big-1.0-py3-none-any.whl"), "*/*")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&body).contains("is 2 MiB, over packages.max_file_mib (1)"));
    assert_eq!(
        jail.fake.hits("/files/big.whl"),
        0,
        "the listed size was enough"
    );
    let (status, _, body) = jail
        .get(&format!("/files/{sha}/big-2.0-py3-none-any.whl"), "*/*")
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert!(String::from_utf8_lossy(&body).contains("packages.max_file_mib"));
    assert_eq!(jail.fake.hits("/files/big.whl"), 1);
    assert_eq!(jail.refusals().len(), 2);
    assert!(
        !jail
            .dir
            .path()
            .join(format!("packages/blobs/sha256/{}/{sha}", &sha[..2]))
            .exists()
    );
}

#[tokio::test]
async fn an_account_may_be_served_only_so_much() {
    let jail = Jail::start(config(|c| c.max_session_mib = 1)).await;
    let (a, b) = (wheel("a", 600_000), wheel("b", 600_000));
    let files = [
        json_file(
            "two-1.0-py3-none-any.whl",
            "/files/a.whl",
            &sha256(&a),
            Some(a.len()),
        ),
        json_file(
            "two-2.0-py3-none-any.whl",
            "/files/b.whl",
            &sha256(&b),
            None,
        ),
    ];
    jail.fake
        .set("/simple/two/", JSON, json_page("two", &files));
    jail.fake
        .set("/files/a.whl", "application/octet-stream", a.clone());
    jail.fake
        .set("/files/b.whl", "application/octet-stream", b.clone());
    let (status, _, _) = jail
        .get(
            &format!("/files/{}/two-1.0-py3-none-any.whl", sha256(&a)),
            "*/*",
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = jail
        .get(
            &format!("/files/{}/two-2.0-py3-none-any.whl", sha256(&b)),
            "*/*",
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "an unlisted size is counted once known"
    );
    assert!(
        String::from_utf8_lossy(&body).contains("packages.max_session_mib (1;"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, _) = jail
        .get(
            &format!("/files/{}/two-1.0-py3-none-any.whl", sha256(&a)),
            "*/*",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "refused on its listed size");
    assert_eq!(jail.account.bytes_served(), a.len() as u64);
    assert_eq!(
        jail.account.installed(),
        vec![("two".to_string(), "1.0".to_string())]
    );
}

#[tokio::test]
async fn redirects_stay_on_the_same_host() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let bytes = wheel("r", 50);
    let sha = sha256(&bytes);
    let files = [
        json_file("redir-1.0-py3-none-any.whl", "/away", &sha, None),
        json_file("redir-2.0-py3-none-any.whl", "/here", &sha, None),
    ];
    jail.fake
        .set("/simple/redir/", JSON, json_page("redir", &files));
    jail.fake.redirect("/away", "http://127.0.0.2:1/x");
    jail.fake.redirect("/here", "/there");
    jail.fake
        .set("/there", "application/octet-stream", bytes.clone());
    jail.json("/simple/redir/").await;
    let (status, _, body) = jail
        .get(&format!("/files/{sha}/redir-1.0-py3-none-any.whl"), "*/*")
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(
        String::from_utf8_lossy(&body).contains("another host"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, body) = jail
        .get(&format!("/files/{sha}/redir-2.0-py3-none-any.whl"), "*/*")
        .await;
    assert_eq!((status, body), (StatusCode::OK, bytes));
}

#[tokio::test]
async fn a_stale_page_stands_in_while_upstream_is_down() {
    let jail = Jail::start(config(|c| c.page_ttl_secs = 0)).await;
    jail.demo();
    jail.json("/simple/demo/").await;
    jail.fake.down.store(true, Ordering::SeqCst);
    let page = jail.json("/simple/demo/").await;
    assert_eq!(page["files"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        jail.fake.hits("/simple/demo/"),
        2,
        "upstream was asked again"
    );
    let (status, _, body) = jail.get("/simple/never-cached/", JSON).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(
        String::from_utf8_lossy(&body).contains("503"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    jail.fake.down.store(false, Ordering::SeqCst);
    let (status, _, _) = jail.get("/simple/nothing-here/", JSON).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "upstream's 404 passes through"
    );
}

#[tokio::test]
async fn a_fresh_page_is_not_fetched_again() {
    let jail = Jail::start(PackagesConfig::default()).await;
    jail.demo();
    jail.json("/simple/demo/").await;
    jail.json("/simple/demo/").await;
    assert_eq!(jail.fake.hits("/simple/demo/"), 1);
}

#[tokio::test]
async fn offline_serves_only_what_the_cache_holds() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let (one, two) = (wheel("one", 10), wheel("two", 10));
    let files = [
        json_file(
            "off-1.0-py3-none-any.whl",
            "/files/one.whl",
            &sha256(&one),
            None,
        ),
        json_file(
            "off-2.0-py3-none-any.whl",
            "/files/two.whl",
            &sha256(&two),
            None,
        ),
    ];
    jail.fake
        .set("/simple/off/", JSON, json_page("off", &files));
    jail.fake
        .set("/files/one.whl", "application/octet-stream", one.clone());
    jail.fake
        .set("/files/two.whl", "application/octet-stream", two.clone());
    let (status, _, _) = jail
        .get(
            &format!("/files/{}/off-1.0-py3-none-any.whl", sha256(&one)),
            "*/*",
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let jail = jail.again(config(|c| c.offline = true)).await;
    let before = jail.fake.total_hits();
    let page = jail.json("/simple/off/").await;
    let names: Vec<&str> = page["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["filename"].as_str())
        .collect();
    assert_eq!(names, ["off-1.0-py3-none-any.whl"]);
    let (status, _, body) = jail
        .get(
            &format!("/files/{}/off-1.0-py3-none-any.whl", sha256(&one)),
            "*/*",
        )
        .await;
    assert_eq!((status, body), (StatusCode::OK, one));
    let (status, _, _) = jail
        .get(
            &format!("/files/{}/off-2.0-py3-none-any.whl", sha256(&two)),
            "*/*",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = jail.get("/simple/demo/", JSON).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains("not in runcell's offline package cache"));
    assert_eq!(jail.fake.total_hits(), before, "upstream was never asked");
}

#[tokio::test]
async fn the_router_answers_without_a_listener_and_jail_env_points_pip_at_it() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let router = jail.index.router(Arc::clone(&jail.account));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    let response = jail
        .client
        .get(format!("http://{addr}/elsewhere"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let env: HashMap<String, String> = jail.index.jail_env().into_iter().collect();
    assert_eq!(env["PIP_INDEX_URL"], "http://127.0.0.1:3141/simple/");
    assert_eq!(env["PIP_ONLY_BINARY"], ":all:");
    assert_eq!(env["PIP_NO_CACHE_DIR"], "1");
    assert_eq!(jail.index.upstream(), format!("{}/simple/", jail.upstream));
}

#[tokio::test]
async fn many_connections_at_once_are_all_answered() {
    let jail = Jail::start(PackagesConfig::default()).await;
    jail.demo();
    let paths = vec!["/simple/demo/".to_string(); 20];
    for status in jail.get_all_at_once(&paths).await {
        assert_eq!(status.expect("answered"), StatusCode::OK);
    }
    assert_eq!(jail.fake.hits("/simple/demo/"), 1, "one fetch for all");
}

/// A session has a listener for each of its jails (kernels, contexts, a
/// command), all on one account: idle ones must not hold the connections
/// the one that installs needs (a command's `pip install` hung behind a
/// session's seven kernels).
#[tokio::test]
async fn idle_listeners_of_an_account_leave_its_connections_to_the_busy_one() {
    let jail = Jail::start(PackagesConfig::default()).await;
    jail.demo();
    for _ in 0..12 {
        let idle = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        tokio::spawn(Arc::clone(&jail.index).serve(idle, Arc::clone(&jail.account)));
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let last = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/simple/demo/", last.local_addr().expect("addr"));
    tokio::spawn(Arc::clone(&jail.index).serve(last, Arc::clone(&jail.account)));
    let answered = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        jail.client.get(url).send(),
    )
    .await
    .expect("answered within 10 s")
    .expect("answered");
    assert_eq!(answered.status(), StatusCode::OK);
}

/// The shared cache stays under `max_cache_mib`: a file past it pushes out
/// the one served longest ago, which is fetched again when asked for.
#[tokio::test]
async fn the_cache_keeps_under_its_size_by_removing_what_was_served_longest_ago() {
    let jail = Jail::start(config(|c| {
        c.max_cache_mib = 2;
        c.max_session_mib = 100;
    }))
    .await;
    let versions = ["1.0", "2.0", "3.0"];
    let mut files = Vec::new();
    let mut paths = Vec::new();
    for version in versions {
        let bytes = wheel(version, 800 * 1024);
        let filename = format!("big-{version}-py3-none-any.whl");
        files.push(json_file(
            &filename,
            &format!("/files/{filename}"),
            &sha256(&bytes),
            Some(bytes.len()),
        ));
        jail.fake.set(
            &format!("/files/{filename}"),
            "application/octet-stream",
            bytes.clone(),
        );
        paths.push(format!("/files/{}/{filename}", sha256(&bytes)));
    }
    jail.fake
        .set("/simple/big/", JSON, json_page("big", &files));
    let blobs = |jail: &Jail| {
        std::fs::read_dir(jail.dir.path().join("packages/blobs/sha256"))
            .expect("blobs")
            .flatten()
            .map(|d| std::fs::read_dir(d.path()).expect("dir").count())
            .sum::<usize>()
    };
    for path in &paths[..2] {
        assert_eq!(jail.get(path, "*/*").await.0, StatusCode::OK);
    }
    assert_eq!(blobs(&jail), 2);
    // The first is served again (from the cache): now the second is the
    // one served longest ago, and the third pushes it out.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(jail.get(&paths[0], "*/*").await.0, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(jail.get(&paths[2], "*/*").await.0, StatusCode::OK);
    assert_eq!(blobs(&jail), 2, "over 2 MiB: one removed");
    assert_eq!(jail.get(&paths[0], "*/*").await.0, StatusCode::OK);
    assert_eq!(jail.fake.hits("/files/big-1.0-py3-none-any.whl"), 1);
    assert_eq!(jail.get(&paths[1], "*/*").await.0, StatusCode::OK);
    assert_eq!(
        jail.fake.hits("/files/big-2.0-py3-none-any.whl"),
        2,
        "the one served longest ago was removed and fetched again"
    );
}

/// A jail's client that speaks HTTP/2 (prior knowledge, as h2c) gets no
/// HTTP/2 connection: one connection would carry many requests at once
/// past the account's connection cap.
#[tokio::test]
async fn the_index_speaks_http1_only() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let jail = Jail::start(PackagesConfig::default()).await;
    let mut stream = tokio::net::TcpStream::connect(jail.base.trim_start_matches("http://"))
        .await
        .expect("connect");
    // The client preface, then an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("preface");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut buf = [0_u8; 256];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let is_h2_settings = answer.len() >= 9 && answer[3] == 0x04;
    assert!(
        !is_h2_settings,
        "the index answered HTTP/2: {:?}",
        &answer[..answer.len().min(32)]
    );
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 4"),
        "an HTTP/1 refusal or a closed connection: {}",
        String::from_utf8_lossy(&answer)
    );
}

/// Puts project `many` upstream: `count` wheels of `len` bytes, sizes
/// listed or not; their paths on the index.
fn many_files(jail: &Jail, count: usize, len: usize, listed: bool) -> Vec<String> {
    let mut files = Vec::new();
    let mut paths = Vec::new();
    for n in 0..count {
        let bytes = wheel(&format!("many{n}"), len);
        let filename = format!("many-{n}.0-py3-none-any.whl");
        files.push(json_file(
            &filename,
            &format!("/files/{filename}"),
            &sha256(&bytes),
            listed.then_some(bytes.len()),
        ));
        jail.fake.set(
            &format!("/files/{filename}"),
            "application/octet-stream",
            bytes.clone(),
        );
        paths.push(format!("/files/{}/{filename}", sha256(&bytes)));
    }
    jail.fake
        .set("/simple/many/", JSON, json_page("many", &files));
    paths
}

/// Bytes of the cache's files and pages on disk.
fn cache_bytes(jail: &Jail) -> u64 {
    fn walk(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
    }
    walk(&jail.dir.path().join("packages/blobs")) + walk(&jail.dir.path().join("packages/pages"))
}

/// Many requests at once for files past the session's budget: the budget
/// is reserved before a download starts, so upstream is asked only for
/// what fits, whether the page lists the sizes or not.
#[tokio::test]
async fn a_burst_of_downloads_is_held_to_the_sessions_budget_before_it_starts() {
    for listed in [true, false] {
        let jail = Jail::start(config(|c| c.max_session_mib = 1)).await;
        let paths = many_files(&jail, 20, 200 * 1024, listed);
        let statuses = jail.get_all_at_once(&paths).await;
        let served = statuses
            .iter()
            .filter(|s| matches!(s, Ok(StatusCode::OK)))
            .count();
        assert_eq!(
            served, 5,
            "1 MiB holds five 200 KiB files (sizes listed: {listed})"
        );
        assert_eq!(jail.account.bytes_served(), 5 * 200 * 1024);
        let page_bytes = walk_pages(&jail);
        assert!(
            cache_bytes(&jail) - page_bytes <= 5 * 200 * 1024,
            "only what the session could be served was downloaded and kept (sizes listed: {listed}): {} bytes",
            cache_bytes(&jail) - page_bytes
        );
        if listed {
            let downloads: usize = (0..20)
                .map(|n| {
                    jail.fake
                        .hits(&format!("/files/many-{n}.0-py3-none-any.whl"))
                })
                .sum();
            assert_eq!(downloads, 5, "upstream was asked only for what fit");
        }
    }
}

fn walk_pages(jail: &Jail) -> u64 {
    std::fs::read_dir(jail.dir.path().join("packages/pages")).map_or(0, |entries| {
        entries
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

/// A session's requests reach upstream a few at a time however many it
/// sends: `max_session_fetches` per session, `max_fetches` in all.
#[tokio::test]
async fn upstream_fetches_in_flight_are_bounded_per_session() {
    let jail = Jail::start(config(|c| c.max_session_fetches = 2)).await;
    for n in 0..8 {
        let bytes = wheel(&format!("p{n}"), 10);
        let name = format!("p{n}");
        jail.fake.set(
            &format!("/simple/{name}/"),
            JSON,
            json_page(
                &name,
                &[json_file(
                    &format!("{name}-1.0-py3-none-any.whl"),
                    "/files/x.whl",
                    &sha256(&bytes),
                    None,
                )],
            ),
        );
    }
    jail.fake.delay_ms.store(150, Ordering::SeqCst);
    let paths: Vec<String> = (0..8).map(|n| format!("/simple/p{n}/")).collect();
    for status in jail.get_all_at_once(&paths).await {
        assert_eq!(status.expect("answered"), StatusCode::OK);
    }
    assert_eq!(jail.fake.total_hits(), 8);
    let most = jail.fake.most_in_flight.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} fetches at once");
}

/// Project pages count in `max_cache_mib` and go like files when it is
/// passed.
#[tokio::test]
async fn project_pages_are_counted_in_the_cache_and_removed_like_files() {
    let jail = Jail::start(config(|c| c.max_cache_mib = 1)).await;
    for n in 0..30 {
        let name = format!("page{n}");
        // About 100 KiB a page: a long description of files.
        let files: Vec<_> = (0..600)
            .map(|v| {
                json_file(
                    &format!("{name}-{v}.0-py3-none-any.whl"),
                    &format!("/files/{name}-{v}.whl"),
                    &sha256(format!("{name}{v}").as_bytes()),
                    Some(10),
                )
            })
            .collect();
        jail.fake
            .set(&format!("/simple/{name}/"), JSON, json_page(&name, &files));
        let (status, _, _) = jail.get(&format!("/simple/{name}/"), JSON).await;
        assert_eq!(status, StatusCode::OK);
    }
    let pages = walk_pages(&jail);
    assert!(
        pages <= 1024 * 1024,
        "the pages stay within max_cache_mib: {pages} bytes"
    );
    assert!(pages > 0);
}

/// `/simple/` lists what this session asked for, never another session's.
#[tokio::test]
async fn the_root_lists_only_what_the_session_itself_asked_for() {
    let jail = Jail::start(PackagesConfig::default()).await;
    jail.demo();
    assert_eq!(jail.get("/simple/demo/", JSON).await.0, StatusCode::OK);
    let other = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let other_url = format!("http://{}/simple/", other.local_addr().expect("addr"));
    tokio::spawn(Arc::clone(&jail.index).serve(other, Account::new("another session")));
    let theirs: serde_json::Value = jail
        .client
        .get(&other_url)
        .header(header::ACCEPT, JSON)
        .send()
        .await
        .expect("root")
        .json()
        .await
        .expect("json");
    assert_eq!(theirs["projects"], serde_json::json!([]));
    let mine = jail.json("/simple/").await;
    assert_eq!(mine["projects"], serde_json::json!([{"name": "demo"}]));
}

/// A page of many files comes in chunks and is one valid document.
#[tokio::test]
async fn a_long_page_is_streamed_whole() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let files: Vec<_> = (0..300)
        .map(|v| {
            json_file(
                &format!("long-{v}.0-py3-none-any.whl"),
                &format!("/files/long-{v}.whl"),
                &sha256(format!("{v}").as_bytes()),
                Some(10),
            )
        })
        .collect();
    jail.fake
        .set("/simple/long/", JSON, json_page("long", &files));
    let page = jail.json("/simple/long/").await;
    assert_eq!(page["files"].as_array().map(Vec::len), Some(300));
    assert_eq!(page["versions"].as_array().map(Vec::len), Some(300));
    assert_eq!(
        page["files"][299]["filename"],
        "long-299.0-py3-none-any.whl"
    );
    let (status, _, html) = jail.get("/simple/long/", "text/html").await;
    assert_eq!(status, StatusCode::OK);
    let html = String::from_utf8_lossy(&html);
    assert_eq!(html.matches("<a href=").count(), 300);
    assert!(html.ends_with("</body></html>\n"));
}
