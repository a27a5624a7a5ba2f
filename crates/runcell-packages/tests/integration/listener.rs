//! The listener: connections under the account's cap, HTTP/1 only.

use std::sync::Arc;

use http::StatusCode;
use runcell_packages::PackagesConfig;

use crate::support::*;

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

/// The status line, the header lines but `date` (sorted) and the body a
/// raw HTTP/1.1 request was answered with, on a connection of its own.
async fn raw(jail: &Jail, method: &str, path: &str) -> (String, Vec<String>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(jail.base.trim_start_matches("http://"))
        .await
        .expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAccept: {JSON}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await
    .expect("answered within 10 s")
    .expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.split("\r\n").map(str::to_string);
    let status = lines.next().unwrap_or_default();
    let mut headers: Vec<String> = lines.filter(|l| !l.starts_with("date:")).collect();
    headers.sort();
    (status, headers, body.to_string())
}

/// On the wire, HEAD keeps a whole body's length and a streamed one has
/// neither length nor chunks; a 405 has an empty body of length 0.
#[tokio::test]
async fn head_and_405_are_framed_as_axum_framed_them() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let sha = sha256(&jail.demo());
    let file = format!("/files/{sha}/demo-1.0-py3-none-any.whl");
    let close = "connection: close";
    let json = format!("content-type: {JSON}");
    let text = "content-type: text/plain; charset=utf-8";
    let ok = "HTTP/1.1 200 OK";
    for (method, path, status, headers, body) in [
        ("HEAD", "/simple/demo/", ok, vec![close, &json], ""),
        (
            "HEAD",
            "/simple/",
            ok,
            vec![close, "content-length: 59", &json],
            "",
        ),
        (
            "HEAD",
            &file,
            ok,
            vec![
                close,
                "content-length: 1000",
                "content-type: application/octet-stream",
            ],
            "",
        ),
        (
            "POST",
            "/simple/",
            "HTTP/1.1 405 Method Not Allowed",
            vec!["allow: GET,HEAD", close, "content-length: 0"],
            "",
        ),
        (
            "HEAD",
            "/elsewhere",
            "HTTP/1.1 404 Not Found",
            vec![close, "content-length: 10", text],
            "",
        ),
        (
            "GET",
            "/simple/%ff/",
            "HTTP/1.1 400 Bad Request",
            vec![close, "content-length: 39", text],
            "Invalid URL: Invalid UTF-8 in `project`",
        ),
    ] {
        let want = (
            status.to_string(),
            headers.into_iter().map(str::to_string).collect(),
            body.to_string(),
        );
        assert_eq!(raw(&jail, method, path).await, want, "{method} {path}");
    }
    let (status, headers, body) = raw(&jail, "GET", "/simple/demo/").await;
    assert_eq!(status, ok);
    assert_eq!(headers, [close, &json, "transfer-encoding: chunked"]);
    assert!(body.ends_with("]}\r\n0\r\n\r\n"), "{body}");
}
