//! What every test stands on: a fake upstream index on 127.0.0.1, and the
//! index served for one account on a listener of its own over it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use runcell_packages::{Account, Notice, PackageIndex, PackagesConfig};
use sha2_010::{Digest, Sha256};

pub(crate) const JSON: &str = "application/vnd.pypi.simple.v1+json";

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
pub(crate) struct Fake {
    routes: Arc<Mutex<HashMap<String, Canned>>>,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    pub(crate) down: Arc<AtomicBool>,
    /// Milliseconds each answer waits before it is sent.
    pub(crate) delay_ms: Arc<AtomicU64>,
    /// Requests being answered now, and the most at once so far.
    pub(crate) in_flight: Arc<AtomicUsize>,
    pub(crate) most_in_flight: Arc<AtomicUsize>,
}

impl Fake {
    pub(crate) async fn start() -> (Self, String) {
        let fake = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = state.clone();
                let service = service_fn(move |request: Request<Incoming>| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(state.answer_later(request.uri().path()).await) }
                });
                tokio::spawn(
                    hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned(),
                );
            }
        });
        (fake, format!("http://{addr}"))
    }

    /// The answer to `path` after the delay, counted in flight meanwhile.
    async fn answer_later(&self, path: &str) -> Response<Full<Bytes>> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        let answer = self.answer(path);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        answer
    }

    fn answer(&self, path: &str) -> Response<Full<Bytes>> {
        *self.hits.lock().entry(path.to_string()).or_default() += 1;
        let status = |status| {
            let mut response = Response::new(Full::default());
            *response.status_mut() = status;
            response
        };
        if self.down.load(Ordering::SeqCst) {
            return status(StatusCode::SERVICE_UNAVAILABLE);
        }
        let Some(canned) = self.routes.lock().get(path).cloned() else {
            return status(StatusCode::NOT_FOUND);
        };
        let mut response = Response::new(Full::from(canned.body));
        *response.status_mut() = canned.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(canned.content_type),
        );
        if let Some(location) = canned.location {
            headers.insert(
                header::LOCATION,
                HeaderValue::from_str(&location).expect("location"),
            );
        }
        response
    }

    pub(crate) fn set(&self, path: &str, content_type: &'static str, body: impl Into<Vec<u8>>) {
        let canned = Canned {
            status: StatusCode::OK,
            content_type,
            body: body.into(),
            location: None,
        };
        self.routes.lock().insert(path.to_string(), canned);
    }

    pub(crate) fn redirect(&self, path: &str, to: &str) {
        let canned = Canned {
            status: StatusCode::FOUND,
            content_type: "text/plain",
            body: Vec::new(),
            location: Some(to.into()),
        };
        self.routes.lock().insert(path.to_string(), canned);
    }

    pub(crate) fn hits(&self, path: &str) -> usize {
        self.hits.lock().get(path).copied().unwrap_or(0)
    }

    pub(crate) fn total_hits(&self) -> usize {
        self.hits.lock().values().sum()
    }
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A file's entry on a PEP 691 page.
pub(crate) fn json_file(
    filename: &str,
    url: &str,
    sha: &str,
    size: Option<usize>,
) -> serde_json::Value {
    let mut file = serde_json::json!({"filename": filename, "url": url, "hashes": {"sha256": sha}});
    if let Some(size) = size {
        file["size"] = size.into();
    }
    file
}

pub(crate) fn json_page(name: &str, files: &[serde_json::Value]) -> String {
    serde_json::json!({"meta": {"api-version": "1.1"}, "name": name, "files": files}).to_string()
}

/// Bytes standing in for a wheel (the index never unzips them).
pub(crate) fn wheel(tag: &str, len: usize) -> Vec<u8> {
    let mut bytes = format!("PK\u{3}\u{4} pkg/__init__.py {tag} ").into_bytes();
    bytes.resize(len.max(bytes.len()), b'w');
    bytes
}

/// An index served on its own listener for one account, over a fake upstream.
pub(crate) struct Jail {
    pub(crate) fake: Fake,
    pub(crate) upstream: String,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) index: Arc<PackageIndex>,
    pub(crate) account: Arc<Account>,
    pub(crate) notices: Arc<Mutex<Vec<Notice>>>,
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
}

impl Jail {
    pub(crate) async fn start(config: PackagesConfig) -> Self {
        let (fake, upstream) = Fake::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        Self::over(fake, upstream, dir, config).await
    }

    pub(crate) async fn over(
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
    pub(crate) async fn again(self, config: PackagesConfig) -> Self {
        Self::over(self.fake, self.upstream, self.dir, config).await
    }

    pub(crate) async fn get(&self, path: &str, accept: &str) -> (StatusCode, String, Vec<u8>) {
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
    pub(crate) async fn get_all_at_once(
        &self,
        paths: &[String],
    ) -> Vec<reqwest::Result<StatusCode>> {
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

    pub(crate) async fn json(&self, path: &str) -> serde_json::Value {
        let (status, kind, body) = self.get(path, JSON).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(kind, JSON);
        serde_json::from_slice(&body).expect("json")
    }

    pub(crate) fn notices(&self) -> Vec<Notice> {
        self.notices.lock().clone()
    }

    pub(crate) fn refusals(&self) -> Vec<String> {
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
    pub(crate) fn demo(&self) -> Vec<u8> {
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

pub(crate) fn config(edit: impl FnOnce(&mut PackagesConfig)) -> PackagesConfig {
    let mut config = PackagesConfig::default();
    edit(&mut config);
    config
}

/// Puts project `many` upstream: `count` wheels of `len` bytes, sizes
/// listed or not; their paths on the index.
pub(crate) fn many_files(jail: &Jail, count: usize, len: usize, listed: bool) -> Vec<String> {
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
pub(crate) fn cache_bytes(jail: &Jail) -> u64 {
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

pub(crate) fn walk_pages(jail: &Jail) -> u64 {
    std::fs::read_dir(jail.dir.path().join("packages/pages")).map_or(0, |entries| {
        entries
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}
