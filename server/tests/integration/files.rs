//! `/v1/code_interpreter/sessions/{id}/files` against a live server and the
//! real jail: every call, and every refusal (paths out of the home, links
//! made by code that lead out, files too big, overwrites not asked for,
//! sessions that are not the caller's).

use serde_json::{Value, json};

use crate::support::TestServer;

const SESSIONS: &str = "/v1/code_interpreter/sessions";

struct Session<'a> {
    server: &'a TestServer,
    api: reqwest::Client,
    id: String,
}

impl<'a> Session<'a> {
    async fn open(server: &'a TestServer) -> Self {
        let api = server.api().await;
        let created: Value = api
            .post(server.url(SESSIONS))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = created["session_id"].as_str().unwrap().to_string();
        Self { server, api, id }
    }

    fn files_url(&self, query: &str) -> String {
        self.server
            .url(&format!("{SESSIONS}/{}/files{query}", self.id))
    }

    async fn put(&self, query: &str, body: &'static [u8]) -> reqwest::Response {
        self.api
            .put(self.files_url(query))
            .body(body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, query: &str) -> reqwest::Response {
        self.api.get(self.files_url(query)).send().await.unwrap()
    }

    async fn list(&self) -> Vec<Value> {
        let body: Value = self.get("").await.json().await.unwrap();
        body["files"].as_array().unwrap().clone()
    }

    /// Runs Python in the session; gives its stdout.
    async fn python(&self, code: &str) -> String {
        let outcome: Value = self
            .api
            .post(self.server.url("/v1/code_interpreter/run"))
            .json(&json!({"code": code, "language": "python", "session_id": self.id}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(outcome["error"].is_null(), "{outcome}");
        outcome["stdout"].as_str().unwrap().to_string()
    }
}

async fn status_and_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

const CSV: &[u8] = b"region,amount\nnorth,10\nsouth,32\neast,7\n";

#[tokio::test]
async fn files_go_in_and_out_and_the_code_sees_them() {
    let server = TestServer::start().await;
    let session = Session::open(&server).await;

    let put = session.put("?path=sales.csv", CSV).await;
    assert_eq!(put.status(), 201);
    let written: Value = put.json().await.unwrap();
    assert_eq!(written["files"][0]["path"], "/home/user/sales.csv");
    assert_eq!(written["files"][0]["size"], CSV.len());

    // The code reads what was uploaded...
    let rows = session
        .python("import csv\nprint(len(list(csv.DictReader(open('/home/user/sales.csv')))))")
        .await;
    assert_eq!(rows, "3\n");
    // ...and what it writes can be listed and downloaded.
    session
        .python("import os\nos.makedirs('out', exist_ok=True)\nopen('out/total.csv', 'w').write('total\\n49\\n')")
        .await;
    let listed = session.list().await;
    let paths: Vec<&str> = listed.iter().filter_map(|f| f["path"].as_str()).collect();
    for path in [
        "/home/user/sales.csv",
        "/home/user/out",
        "/home/user/out/total.csv",
    ] {
        assert!(paths.contains(&path), "{path} in {paths:?}");
    }
    let download = session.get("?path=/home/user/out/total.csv").await;
    assert_eq!(download.status(), 200);
    assert_eq!(download.headers()["content-type"], "text/csv");
    assert_eq!(
        download.headers()["content-disposition"],
        "attachment; filename=\"total.csv\"; filename*=UTF-8''total.csv"
    );
    assert_eq!(download.bytes().await.unwrap().as_ref(), b"total\n49\n");
    let same = session.get("?path=sales.csv").await;
    assert_eq!(same.bytes().await.unwrap().as_ref(), CSV);

    // A multipart form: each file keeps its name, in the directory asked for.
    let form = reqwest::multipart::Form::new()
        .part(
            "a",
            reqwest::multipart::Part::bytes(b"one".to_vec()).file_name("one.txt"),
        )
        .part(
            "b",
            reqwest::multipart::Part::bytes(b"two".to_vec()).file_name("two.txt"),
        );
    let put = session
        .api
        .put(session.files_url("?path=inbox/"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let read = session
        .python("print(open('inbox/one.txt').read(), open('inbox/two.txt').read())")
        .await;
    assert_eq!(read, "one two\n");

    // Deleted means gone.
    let deleted = session
        .api
        .delete(session.files_url("?path=sales.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(
        status_and_code(session.get("?path=sales.csv").await)
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn an_upload_never_replaces_a_file_unless_asked() {
    let server = TestServer::start().await;
    let session = Session::open(&server).await;
    assert_eq!(session.put("?path=a.txt", b"first").await.status(), 201);
    let (status, code) = status_and_code(session.put("?path=a.txt", b"second").await).await;
    assert_eq!((status, code.as_str()), (409, "conflict"));
    let kept = session.get("?path=a.txt").await.bytes().await.unwrap();
    assert_eq!(kept.as_ref(), b"first");
    assert_eq!(
        session
            .put("?path=a.txt&overwrite=true", b"second")
            .await
            .status(),
        201
    );
    let replaced = session.get("?path=a.txt").await.bytes().await.unwrap();
    assert_eq!(replaced.as_ref(), b"second");
}

#[tokio::test]
async fn paths_and_links_out_of_the_home_are_refused_both_ways() {
    let server = TestServer::start().await;
    let session = Session::open(&server).await;
    for path in [
        "../etc/passwd",
        "/etc/passwd",
        "/home/user/../../etc/hosts",
        "/tmp/x",
    ] {
        let query = format!("?path={}", urlencoding(path));
        let (status, _) = status_and_code(session.get(&query).await).await;
        assert_eq!(status, 400, "GET {path}");
        let response = session
            .api
            .put(session.files_url(&query))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "PUT {path}");
    }
    // Links the code makes that lead out of the home are not followed.
    session
        .python("import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('/etc', 'etc')")
        .await;
    for path in ["passwd", "etc/hostname"] {
        let (status, _) = status_and_code(session.get(&format!("?path={path}")).await).await;
        assert_eq!(status, 400, "GET {path}");
    }
    let through = session.put("?path=etc/evil&overwrite=true", b"x").await;
    assert_eq!(through.status(), 400);
    let over = session.put("?path=passwd&overwrite=true", b"x").await;
    assert_eq!(over.status(), 400);
    assert!(
        !std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .starts_with('x')
    );
    // A path is needed to upload a raw body or to delete.
    assert_eq!(session.put("", b"x").await.status(), 400);
    let no_path = session
        .api
        .delete(session.files_url(""))
        .send()
        .await
        .unwrap();
    assert_eq!(no_path.status(), 400);
}

#[tokio::test]
async fn big_files_unknown_sessions_and_other_keys_are_refused() {
    let server = TestServer::start_configured(|config| config.sandbox.upload_mib = 1).await;
    let session = Session::open(&server).await;
    let big = vec![b'x'; 1024 * 1024 + 1];
    let response = session
        .api
        .put(session.files_url("?path=big.bin"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    let (status, code) = status_and_code(response).await;
    assert_eq!((status, code.as_str()), (413, "too_large"));
    let form = reqwest::multipart::Form::new().part(
        "f",
        reqwest::multipart::Part::bytes(big).file_name("big.bin"),
    );
    let response = session
        .api
        .put(session.files_url(""))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert!(
        !session.list().await.iter().any(|f| f["name"] == "big.bin"),
        "nothing was written"
    );

    let unknown = session
        .api
        .get(server.url(&format!("{SESSIONS}/{}/files", uuid::Uuid::new_v4())))
        .send()
        .await
        .unwrap();
    assert_eq!(
        status_and_code(unknown).await,
        (404, "not_found".to_string())
    );
    // Another key sees neither the session nor its files.
    let other = server.api().await;
    for response in [
        other.get(session.files_url("")).send().await.unwrap(),
        other
            .put(session.files_url("?path=x"))
            .body("x")
            .send()
            .await
            .unwrap(),
        other
            .delete(session.files_url("?path=x"))
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(response.status(), 404);
    }
    let anonymous = reqwest::Client::new()
        .get(session.files_url(""))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// `path` as a query value.
fn urlencoding(path: &str) -> String {
    form_urlencoded::byte_serialize(path.as_bytes()).collect()
}

#[tokio::test]
async fn a_notebook_sessions_files_are_its_owners_alone() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let url = |query: &str| server.url(&format!("/api/sessions/{id}/files{query}"));
    let owner = crate::support::http();
    let empty: Value = owner
        .get(url(""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(empty["files"], json!([]), "no kernel, no files");

    let put = owner
        .put(url("?path=sales.csv"))
        .body(CSV)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let listed: Value = owner
        .get(url(""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["files"][0]["path"], "/home/user/sales.csv");
    let download = owner.get(url("?path=sales.csv")).send().await.unwrap();
    assert_eq!(download.headers()["content-type"], "text/csv");
    assert_eq!(download.bytes().await.unwrap().as_ref(), CSV);
    let again = owner
        .put(url("?path=sales.csv"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(status_and_code(again).await, (409, "conflict".to_string()));
    let replaced = owner
        .put(url("?path=sales.csv&overwrite=true"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(replaced.status(), 201);
    let outside = owner
        .get(url("?path=%2Fetc%2Fpasswd"))
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), 400);

    // Another owner, and nobody at all, see nothing.
    for client in [
        crate::support::http_as(Some("someone-else")),
        crate::support::http_as(None),
    ] {
        for response in [
            client.get(url("")).send().await.unwrap(),
            client.get(url("?path=sales.csv")).send().await.unwrap(),
            client.put(url("?path=x")).body("x").send().await.unwrap(),
            client.delete(url("?path=sales.csv")).send().await.unwrap(),
        ] {
            assert_eq!(response.status(), 404);
        }
    }
    let deleted = owner.delete(url("?path=sales.csv")).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    let listed: Value = owner
        .get(url(""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["files"], json!([]));
}
