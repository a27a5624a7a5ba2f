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

/// Runs `code` as written in a notebook session (no model); gives what it
/// printed.
async fn notebook_run(server: &TestServer, id: &str, code: &str) -> String {
    let response = crate::support::http()
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&json!({ "code": code, "language": "python" }))
        .send()
        .await
        .unwrap();
    // The turn's own lines, to its end; then the whole history, folded.
    crate::support::ndjson_events(response).await;
    let events = crate::support::history(server, id).await;
    let notebook = app::notebook::Notebook::from_events(&events);
    notebook
        .cells()
        .rev()
        .find(|cell| cell.kind == app::protocol::CellKind::Result)
        .map(|cell| cell.printed())
        .unwrap_or_default()
}

async fn notebook_list(server: &TestServer, id: &str) -> Vec<String> {
    let listed: Value = crate::support::http()
        .get(server.url(&format!("/api/sessions/{id}/files")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "file")
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_notebooks_files_outlive_its_kernel() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let owner = crate::support::http();
    let url = |query: &str| server.url(&format!("/api/sessions/{id}/files{query}"));

    // Several files at once into a session that has no kernel yet: all
    // of them are there, for the panel and then for the code.
    let puts = ["a.csv", "b.csv", "c.txt"].map(|name| {
        owner
            .put(url(&format!("?path={name}")))
            .body(format!("{name}\n1\n"))
            .send()
    });
    for response in futures::future::join_all(puts).await {
        assert_eq!(response.unwrap().status(), 201);
    }
    assert_eq!(
        notebook_list(&server, &id).await,
        ["/home/user/a.csv", "/home/user/b.csv", "/home/user/c.txt"]
    );
    let seen = notebook_run(
        &server,
        &id,
        "import os\nprint(sorted(os.listdir('/home/user')))\n\
         open('out.csv', 'w').write('total\\n3\\n')\nos.remove('c.txt')",
    )
    .await;
    assert!(seen.contains("'a.csv', 'b.csv', 'c.txt'"), "{seen}");
    assert_eq!(
        notebook_list(&server, &id).await,
        ["/home/user/a.csv", "/home/user/b.csv", "/home/user/out.csv"],
        "what the code wrote is listed, what it removed is gone"
    );

    // After a restart there is no kernel: the panel still lists what the
    // session keeps, downloads it, and the next kernel starts with it.
    let server = server.restart().await;
    let url = |query: &str| server.url(&format!("/api/sessions/{id}/files{query}"));
    assert_eq!(
        notebook_list(&server, &id).await,
        ["/home/user/a.csv", "/home/user/b.csv", "/home/user/out.csv"]
    );
    let download = owner.get(url("?path=out.csv")).send().await.unwrap();
    assert_eq!(download.status(), 200);
    assert_eq!(download.bytes().await.unwrap().as_ref(), b"total\n3\n");
    let again = owner
        .put(url("?path=a.csv"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(status_and_code(again).await, (409, "conflict".to_string()));
    let seen = notebook_run(&server, &id, "print(open('out.csv').read().split()[1])").await;
    assert_eq!(seen, "3\n");
    assert!(
        notebook_run(&server, &id, "import os\nprint(os.path.exists('c.txt'))")
            .await
            .contains("False"),
        "a file the code removed does not come back"
    );

    // Deleting the session removes what it kept.
    let kept = server.data_dir().join("uploads").join(&id);
    assert!(kept.is_dir());
    let deleted = owner
        .delete(server.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    assert!(!kept.exists());
}

#[tokio::test]
async fn pipes_made_by_code_hang_nothing_and_the_quota_holds() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        // A 4 MiB home (3/4 of the disk limit).
        config.sandbox.disk_mib = 5;
        config.sandbox.file_mib = 4;
    })
    .await;
    let session = Session::open(&server).await;
    session
        .python("import os\nos.mkfifo('/home/user/pipe.csv')\nprint('made')")
        .await;
    // Read without waiting for a writer that never comes.
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        session.get("?path=pipe.csv"),
    )
    .await
    .expect("a download of a pipe answered");
    assert_eq!(status_and_code(read).await.0, 400);
    let replace = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        session.put("?path=pipe.csv&overwrite=true", b"now a file"),
    )
    .await
    .expect("replacing a pipe answered");
    assert_eq!(replace.status(), 201);
    assert_eq!(
        session
            .get("?path=pipe.csv")
            .await
            .bytes()
            .await
            .unwrap()
            .as_ref(),
        b"now a file"
    );

    // A notebook session keeps no more than a home holds, and says so.
    let id = server.new_session().await;
    let owner = crate::support::http();
    let url = |query: &str| server.url(&format!("/api/sessions/{id}/files{query}"));
    let first = owner
        .put(url("?path=one.bin"))
        .body(vec![1u8; 3 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 201);
    let second = owner
        .put(url("?path=two.bin"))
        .body(vec![2u8; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    let status = second.status().as_u16();
    let body: Value = second.json().await.unwrap();
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("its files may take"),
        "{body}"
    );
    assert_eq!(notebook_list(&server, &id).await, ["/home/user/one.bin"]);
}

/// The head of a notebook upload as a page sends it.
fn owner_headers() -> Vec<(&'static str, String)> {
    vec![
        ("cookie", crate::support::cookie_of(crate::support::OWNER)),
        ("content-type", "application/octet-stream".into()),
    ]
}

#[tokio::test]
async fn an_unfinished_upload_waits_on_disk_not_in_memory() {
    const UPLOADS: usize = 8;
    const SIZE: usize = 40 * 1024 * 1024;
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.sandbox.upload_mib = 64;
        config.http.uploads_in_flight = UPLOADS;
        config.http.body_idle_timeout_secs = 120;
    })
    .await;
    let id = server.new_session().await;
    let before = crate::support::rss_bytes();
    let headers = owner_headers();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let mut held = Vec::new();
    for i in 0..UPLOADS {
        // Each held ten bytes short of its end, as an attacker would.
        held.push(
            crate::support::unfinished_request(
                &server,
                "PUT",
                &format!("/api/sessions/{id}/files?path=big{i}.bin"),
                &headers,
                SIZE,
                SIZE - 10,
            )
            .await,
        );
    }
    crate::support::wait_for_spool(&server, (UPLOADS * (SIZE - 10)) as u64, UPLOADS).await;
    let grown = crate::support::rss_bytes().saturating_sub(before);
    let sent = (UPLOADS * SIZE) as u64;
    assert!(
        grown < sent / 3,
        "the server grew by {} MiB while {} MiB of bodies waited",
        grown / (1024 * 1024),
        sent / (1024 * 1024)
    );
    // One finished upload still goes in whole.
    let mut last = held.pop().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut last, &[b'x'; 10])
        .await
        .unwrap();
    let (status, body) = crate::support::answer_of(&mut last).await;
    assert_eq!(status, 201, "{body}");
    let written: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(written["files"][0]["size"], SIZE as u64);
    drop(held);
}

#[tokio::test]
async fn a_stalled_upload_is_dropped_and_few_are_under_way_at_once() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.http.uploads_in_flight = 2;
        config.http.body_idle_timeout_secs = 1;
    })
    .await;
    let id = server.new_session().await;
    let headers = owner_headers();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let path = |name: &str| format!("/api/sessions/{id}/files?path={name}");
    let mut stalled = Vec::new();
    for name in ["a", "b"] {
        stalled.push(
            crate::support::unfinished_request(&server, "PUT", &path(name), &headers, 100, 5).await,
        );
    }
    crate::support::wait_for_spool(&server, 10, 2).await;
    // A third, whole, is refused while the two are under way.
    let owner = crate::support::http();
    let refused = owner
        .put(server.url(&path("c")))
        .body("whole")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(status_and_code(refused).await, (429, "busy".to_string()));
    // The stalled ones are dropped with 408 once they send nothing for a
    // second, and leave nothing on disk.
    for mut stream in stalled {
        let (status, body) = crate::support::answer_of(&mut stream).await;
        assert_eq!(status, 408, "{body}");
        assert!(body.contains("timed_out"), "{body}");
    }
    assert_eq!(crate::support::spooled(&server), (0, 0));
    let put = owner
        .put(server.url(&path("c")))
        .body("whole")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
}

/// Issue 40 (suspected): a socket in the home, downloaded from the page,
/// is a clear 400 saying what it is, not a 500.
#[tokio::test]
async fn a_socket_in_the_home_is_refused_as_one() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let printed = notebook_run(
        &server,
        &id,
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('/home/user/s.sock')\nprint('made')",
    )
    .await;
    assert!(printed.contains("made"), "{printed}");
    let response = crate::support::http()
        .get(server.url(&format!("/api/sessions/{id}/files?path=s.sock")))
        .send()
        .await
        .unwrap();
    let (status, code) = status_and_code(response).await;
    assert_eq!(status, 400, "{code}");
}
