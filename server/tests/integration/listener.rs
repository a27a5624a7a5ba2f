//! The listener's own bounds (issue 40, point 4): a connection that never
//! finishes its request head is closed, a head too big is refused, and
//! connections over a cap get a `503` while the server goes on serving.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TestServer, http};

/// Generous: far above the configured one-second timeout, so a loaded
/// machine cannot fail it, while a server without the timeout never closes.
const PATIENCE: Duration = Duration::from_secs(20);

/// Reads until the server closes the connection; what it wrote, or `None`
/// if it still holds the connection after [`PATIENCE`].
async fn read_until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(seen)
}

async fn short_timeouts(max_per_address: usize) -> TestServer {
    TestServer::start_configured(|config| {
        config.http.header_read_timeout_secs = 1;
        config.http.max_connections_per_address = max_per_address;
        config.http.max_header_kib = 16;
    })
    .await
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_head_is_closed() {
    let server = short_timeouts(64).await;
    // Half a request head, then silence: a slow-loris client.
    let mut partial = TcpStream::connect(server.addr).await.unwrap();
    partial
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    assert!(
        read_until_closed(&mut partial).await.is_some(),
        "a partial head is held open"
    );
    // A connection that says nothing at all is closed the same way.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    assert!(
        read_until_closed(&mut silent).await.is_some(),
        "a silent connection is held open"
    );
    // A finished request on a kept-alive connection, then idleness.
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answered = read_until_closed(&mut idle)
        .await
        .expect("an idle keep-alive connection is held open");
    assert!(
        answered.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answered)
    );
}

#[tokio::test]
async fn a_head_bigger_than_its_bound_is_refused() {
    let server = short_timeouts(64).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
    for n in 0..1000 {
        head.extend_from_slice(format!("X-Filler-{n}: {}\r\n", "a".repeat(100)).as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    // The server may close before all of it is written.
    let _ = stream.write_all(&head).await;
    let answer = read_until_closed(&mut stream).await.expect("closed");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );
    // Others are served.
    let response = http().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn connections_over_the_cap_get_a_503_and_the_server_goes_on() {
    let server = short_timeouts(4).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        // A started request keeps each connection busy (not yet timed out).
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .unwrap();
        held.push(stream);
    }
    let response = http().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    // Once they are gone (closed by the client, or by the head timeout),
    // the address is served again.
    drop(held);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = http()
            .get(server.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status();
        if status == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
