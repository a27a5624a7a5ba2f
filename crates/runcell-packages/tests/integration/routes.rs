//! The routes as a jail reaches them, through `PackageIndex::answer`
//! (no socket): what each route answers GET and HEAD with, 405 for other
//! methods, and segments decoded once before the index sees them.

use std::collections::HashMap;

use http::header::{self, HeaderMap};
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use runcell_packages::PackagesConfig;

use crate::support::*;

const WHEEL: &str = "demo-1.0-py3-none-any.whl";

/// What the index answered: its status, headers and whole body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn ask(jail: &Jail, method: Method, path: &str, accept: &str) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::ACCEPT, accept)
        .body(())
        .expect("request");
    let (parts, body) = jail.index.answer(&jail.account, request).await.into_parts();
    let body = body.collect().await.expect("body").to_bytes().to_vec();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// `demo`'s JSON page as the index writes it, for a wheel with `sha`.
/// A body as JSON when it is JSON (key order is serde_json's, which a
/// workspace build may set to insertion order), else as text.
fn body(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
}

fn demo_page(sha: &str) -> String {
    format!(
        r#"{{"meta":{{"api-version":"1.1"}},"name":"demo","versions":["1.0"],"files":[{{"filename":"{WHEEL}","hashes":{{"sha256":"{sha}"}},"size":1000,"url":"/files/{sha}/{WHEEL}#sha256={sha}"}}]}}"#
    )
}

#[tokio::test]
async fn answer_works_without_a_listener_and_jail_env_points_pip_at_it() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let answer = ask(&jail, Method::GET, "/elsewhere", "*/*").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.text(), "not found\n");
    let env: HashMap<String, String> = jail.index.jail_env().into_iter().collect();
    assert_eq!(env["PIP_INDEX_URL"], "http://127.0.0.1:3141/simple/");
    assert_eq!(env["PIP_ONLY_BINARY"], ":all:");
    assert_eq!(env["PIP_NO_CACHE_DIR"], "1");
    assert_eq!(jail.index.upstream(), format!("{}/simple/", jail.upstream));
}

/// Each route's GET: the page or file, its type, and its length when the
/// body is whole (a project page is streamed, so has none).
#[tokio::test]
async fn each_route_answers_get_with_its_type_length_and_body() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let bytes = jail.demo();
    let sha = sha256(&bytes);

    let page = ask(&jail, Method::GET, "/simple/demo/", JSON).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header(header::CONTENT_TYPE), Some(JSON));
    assert_eq!(page.header(header::CONTENT_LENGTH), None);
    assert_eq!(body(&page.text()), body(&demo_page(&sha)));

    let html = ask(&jail, Method::GET, "/simple/demo/", "text/html").await;
    assert_eq!(
        html.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert!(
        html.text()
            .contains(&format!(r#"<a href="/files/{sha}/{WHEEL}#sha256={sha}""#)),
        "{}",
        html.text()
    );

    let root = ask(&jail, Method::GET, "/simple/", JSON).await;
    let want = r#"{"meta":{"api-version":"1.1"},"projects":[{"name":"demo"}]}"#;
    assert_eq!(root.status, StatusCode::OK);
    assert_eq!(root.header(header::CONTENT_TYPE), Some(JSON));
    assert_eq!(root.header(header::CONTENT_LENGTH), Some("59"));
    assert_eq!(root.text(), want);

    let file = ask(&jail, Method::GET, &format!("/files/{sha}/{WHEEL}"), "*/*").await;
    assert_eq!(file.status, StatusCode::OK);
    assert_eq!(
        file.header(header::CONTENT_TYPE),
        Some("application/octet-stream")
    );
    assert_eq!(file.header(header::CONTENT_LENGTH), Some("1000"));
    assert_eq!(file.body, bytes);
}

/// HEAD is answered as GET was (axum's `get` routed both): the same status
/// and headers, no body.
#[tokio::test]
async fn head_answers_like_get_without_the_body() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let sha = sha256(&jail.demo());
    let file = format!("/files/{sha}/{WHEEL}");
    for (path, content_type, length) in [
        ("/simple/demo/", JSON, None),
        ("/simple/", JSON, Some("59")),
        (file.as_str(), "application/octet-stream", Some("1000")),
        ("/elsewhere", "text/plain; charset=utf-8", Some("10")),
        ("/simple/Demo/", "text/plain; charset=utf-8", Some("63")),
    ] {
        let head = ask(&jail, Method::HEAD, path, JSON).await;
        let get = ask(&jail, Method::GET, path, JSON).await;
        assert_eq!(head.status, get.status, "{path}");
        assert_eq!(
            head.header(header::CONTENT_TYPE),
            Some(content_type),
            "{path}"
        );
        assert_eq!(head.header(header::CONTENT_LENGTH), length, "{path}");
        assert_eq!(head.body, b"", "{path}");
        assert!(!get.body.is_empty(), "{path}");
    }
}

/// Another method on a route gets 405 and the methods it takes, and never
/// reaches upstream; on a path that is no route it gets the 404 GET gets.
#[tokio::test]
async fn other_methods_get_405_with_allow_on_routes_and_404_elsewhere() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let sha = sha256(&jail.demo());
    let file = format!("/files/{sha}/{WHEEL}");
    let methods = [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::OPTIONS,
        Method::PATCH,
        Method::TRACE,
        Method::from_bytes(b"FOO").expect("method"),
    ];
    for path in ["/simple/", "/simple/demo/", "/simple//", file.as_str()] {
        for method in methods.clone() {
            let answer = ask(&jail, method.clone(), path, JSON).await;
            assert_eq!(
                answer.status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            assert_eq!(
                answer.header(header::ALLOW),
                Some("GET,HEAD"),
                "{method} {path}"
            );
            assert_eq!(answer.header(header::CONTENT_TYPE), None, "{method} {path}");
            assert_eq!(answer.body, b"", "{method} {path}");
        }
    }
    assert_eq!(jail.fake.total_hits(), 0, "a 405 never reaches upstream");
    for path in ["/elsewhere", "/simple/demo", "/"] {
        let answer = ask(&jail, Method::POST, path, JSON).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.header(header::ALLOW), None, "{path}");
        assert_eq!(answer.text(), "not found\n", "{path}");
    }
}

/// Segments are percent-decoded once, after the route is matched: an
/// encoded name is the name, and an encoded `/` or `..` is part of one
/// segment, which the index then refuses by name.
#[tokio::test]
async fn segments_are_decoded_once_and_hostile_ones_refused_by_name() {
    let jail = Jail::start(PackagesConfig::default()).await;
    let bytes = jail.demo();
    let sha = sha256(&bytes);
    let not_served = |name: &str| format!("'{name}' is not a file this index serves\n");
    let cases: Vec<(String, StatusCode, String)> = vec![
        ("/simple/de%6Do/".into(), StatusCode::OK, demo_page(&sha)),
        (
            format!("/files/{sha}/de%6Do-1.0-py3-none-any.whl"),
            StatusCode::OK,
            String::from_utf8_lossy(&bytes).into_owned(),
        ),
        (
            format!("/files/{sha}/..%2F..%2Fetc%2Fpasswd"),
            StatusCode::NOT_FOUND,
            not_served("../../etc/passwd"),
        ),
        (
            format!("/files/{sha}/..%2f{WHEEL}"),
            StatusCode::NOT_FOUND,
            not_served(&format!("../{WHEEL}")),
        ),
        (
            format!("/files/{sha}/%2E%2E"),
            StatusCode::NOT_FOUND,
            not_served(".."),
        ),
        (
            format!("/files//{WHEEL}"),
            StatusCode::NOT_FOUND,
            not_served(WHEEL),
        ),
        (
            format!("/files/{}/{WHEEL}", sha.to_uppercase()),
            StatusCode::NOT_FOUND,
            not_served(WHEEL),
        ),
        (
            format!("/files/{sha}/%ff"),
            StatusCode::BAD_REQUEST,
            "Invalid URL: Invalid UTF-8 in `filename`".into(),
        ),
        (
            format!("/files/{sha}%2F{WHEEL}"),
            StatusCode::NOT_FOUND,
            "not found\n".into(),
        ),
    ];
    for (path, status, expected) in cases {
        let answer = ask(&jail, Method::GET, &path, JSON).await;
        assert_eq!(
            (answer.status, body(&answer.text())),
            (status, body(&expected)),
            "{path}"
        );
    }
    assert_eq!(jail.fake.hits(&format!("/files/{WHEEL}")), 1);
    assert_eq!(jail.fake.hits("/simple/demo/"), 1);
    assert_eq!(
        jail.fake.total_hits(),
        2,
        "nothing hostile reached upstream"
    );
}
