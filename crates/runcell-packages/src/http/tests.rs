//! `answer` for requests the index refuses before it asks upstream (here
//! a port where nothing listens), with the exact answers axum's router gave.

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;

use super::respond::{self, ResponseBody};
use super::*;
use crate::index::Failure;
use crate::{Mode, PackagesConfig};

const SHA: &str = "01cc40bac9dc2ef08c45b760cfbf147b9d323411076a1505e4058a4e822d3e9b";
const TEXT: &str = "text/plain; charset=utf-8";

/// An index over an upstream nobody answers, its cache in `dir`.
fn index(dir: &tempfile::TempDir, config: PackagesConfig) -> Arc<PackageIndex> {
    PackageIndex::new(
        config,
        dir.path().join("packages"),
        "http://127.0.0.1:9/simple/".into(),
    )
    .expect("index")
}

/// The status, `Content-Type`, `Content-Length` and body of `response`.
async fn parts(response: Response<ResponseBody>) -> (StatusCode, String, String, String) {
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .unwrap_or("-")
            .to_string()
    };
    let (status, kind, length) = (
        response.status(),
        header(header::CONTENT_TYPE),
        header(header::CONTENT_LENGTH),
    );
    let body = response.into_body().collect().await.expect("body");
    let body = String::from_utf8_lossy(&body.to_bytes()).into_owned();
    (status, kind, length, body)
}

async fn ask(
    index: &PackageIndex,
    method: Method,
    path: &str,
) -> (StatusCode, String, String, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(())
        .expect("request");
    parts(answer(index, &Account::new("test"), request).await).await
}

#[tokio::test]
async fn paths_that_are_no_route_get_404() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = index(&dir, PackagesConfig::default());
    for path in [
        "/",
        "/elsewhere",
        "/simple",
        "/SIMPLE/",
        "//simple/",
        "/simple%2F",
        "/simple/demo",
        "/simple/demo//",
        "/simple/demo/extra/",
        "/files",
        "/files/",
        "/files//",
        "/files///",
        &format!("/files/{SHA}"),
        &format!("/files/{SHA}/"),
        &format!("/files/{SHA}//"),
        &format!("/files/{SHA}/x.whl/"),
        &format!("/files/{SHA}%2Fx.whl"),
        "*",
    ] {
        for method in [Method::GET, Method::POST, Method::DELETE] {
            let want = (
                StatusCode::NOT_FOUND,
                TEXT.into(),
                "10".into(),
                "not found\n".into(),
            );
            assert_eq!(
                ask(&index, method.clone(), path).await,
                want,
                "{method} {path}"
            );
        }
        let want = (
            StatusCode::NOT_FOUND,
            TEXT.into(),
            "10".into(),
            String::new(),
        );
        assert_eq!(ask(&index, Method::HEAD, path).await, want, "HEAD {path}");
    }
}

#[tokio::test]
async fn hostile_segments_get_the_answers_they_got_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = index(&dir, PackagesConfig::default());
    let bad_name = |raw: &str, ask: &str| {
        format!("'{raw}' is not a normalised project name; ask for /simple/{ask}/\n")
    };
    let bad_file = |raw: &str| format!("'{raw}' is not a file this index serves\n");
    let not_utf8 = |key: &str| format!("Invalid URL: Invalid UTF-8 in `{key}`");
    for (path, status, body) in [
        ("/simple//", 404, bad_name("", "")),
        ("/simple/Demo/", 404, bad_name("Demo", "demo")),
        ("/simple/a%2Fb/", 404, bad_name("a/b", "a/b")),
        ("/simple/a%2fb/", 404, bad_name("a/b", "a/b")),
        ("/simple/%2F/", 404, bad_name("/", "/")),
        ("/simple/..%2F/", 404, bad_name("../", "-/")),
        ("/simple/../", 404, bad_name("..", "-")),
        ("/simple/%2E%2E/", 404, bad_name("..", "-")),
        ("/simple/./", 404, bad_name(".", "-")),
        ("/simple/%zz/", 404, bad_name("%zz", "%zz")),
        ("/simple/%/", 404, bad_name("%", "%")),
        ("/simple/%252F/", 404, bad_name("%2F", "%2f")),
        ("/simple/demo%00/", 404, bad_name("demo\\0", "demo\\0")),
        ("/simple/a%20b/", 404, bad_name("a b", "a b")),
        ("/simple/%C3%A9/", 404, bad_name("é", "é")),
        ("/simple/{x}/", 404, bad_name("{x}", "{x}")),
        ("/simple/%ff/", 400, not_utf8("project")),
        ("/simple/%c3/", 400, not_utf8("project")),
        ("/files/abc/def", 404, bad_file("def")),
        (
            &format!("/files//{SHA}.whl"),
            404,
            bad_file(&format!("{SHA}.whl")),
        ),
        (&format!("/files/{SHA}/.."), 404, bad_file("..")),
        (
            &format!("/files/{SHA}/a%00b.whl"),
            404,
            bad_file("a\\0b.whl"),
        ),
        (
            &format!("/files/{SHA}/..%2F..%2Fetc%2Fpasswd"),
            404,
            bad_file("../../etc/passwd"),
        ),
        ("/files/%ff/%fe", 400, not_utf8("sha256")),
        ("/files/%ff/x.whl", 400, not_utf8("sha256")),
        (&format!("/files/{SHA}/%fe"), 400, not_utf8("filename")),
    ] {
        let status = StatusCode::from_u16(status).expect("status");
        let length = body.len().to_string();
        let got = ask(&index, Method::GET, path).await;
        assert_eq!(
            got,
            (status, TEXT.into(), length.clone(), body),
            "GET {path}"
        );
        let got = ask(&index, Method::HEAD, path).await;
        assert_eq!(
            got,
            (status, TEXT.into(), length, String::new()),
            "HEAD {path}"
        );
        // The method is checked before the segments are read.
        let got = ask(&index, Method::POST, path).await;
        let want = (
            StatusCode::METHOD_NOT_ALLOWED,
            "-".into(),
            "-".into(),
            String::new(),
        );
        assert_eq!(got, want, "POST {path}");
    }
}

#[tokio::test]
async fn a_405_says_which_methods_a_route_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = index(&dir, PackagesConfig::default());
    let request = Request::builder()
        .method(Method::PUT)
        .uri("/simple/")
        .body("a body nobody reads")
        .expect("request");
    let response = answer(&index, &Account::new("test"), request).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        response.headers().get(header::ALLOW),
        Some(&HeaderValue::from_static("GET,HEAD"))
    );
    assert_eq!(response.headers().len(), 1, "{:?}", response.headers());
}

#[tokio::test]
async fn the_root_is_refused_when_the_index_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = PackagesConfig {
        mode: Mode::Off,
        ..PackagesConfig::default()
    };
    let index = index(&dir, config);
    let text = "runcell's package index is off (packages.mode = \"off\")\n";
    let want = (StatusCode::FORBIDDEN, TEXT.into(), "55".into(), text.into());
    assert_eq!(ask(&index, Method::GET, "/simple/").await, want);
    let want = (
        StatusCode::FORBIDDEN,
        TEXT.into(),
        "55".into(),
        String::new(),
    );
    assert_eq!(ask(&index, Method::HEAD, "/simple/").await, want);
}

#[tokio::test]
async fn failures_map_to_404_403_and_502_as_plain_text() {
    let refused = Failure::Refused {
        project: "p".into(),
        reason: "denied".into(),
        metric: "policy",
    };
    let upstream = Failure::Upstream {
        project: "p".into(),
        reason: "down".into(),
        metric: "upstream",
    };
    for (failure, status, body) in [
        (
            Failure::NotFound("gone".into()),
            StatusCode::NOT_FOUND,
            "gone\n",
        ),
        (
            Failure::BadName("bad".into()),
            StatusCode::NOT_FOUND,
            "bad\n",
        ),
        (refused, StatusCode::FORBIDDEN, "denied\n"),
        (upstream, StatusCode::BAD_GATEWAY, "down\n"),
    ] {
        let response = respond::finish(respond::failure(failure), false);
        let length = body.len().to_string();
        assert_eq!(
            parts(response).await,
            (status, TEXT.into(), length, body.into())
        );
    }
}

#[tokio::test]
async fn a_streamed_body_gets_no_length_and_head_drops_any_body() {
    let chunks = futures::stream::iter([Ok::<_, std::io::Error>("ab"), Ok("c")]);
    let streamed = respond::with_type(StatusCode::OK, TEXT, respond::streamed(chunks));
    let got = parts(respond::finish(streamed, false)).await;
    assert_eq!(got, (StatusCode::OK, TEXT.into(), "-".into(), "abc".into()));

    let mut stated = respond::text(StatusCode::OK, "whole");
    stated
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(1000_u64));
    let got = parts(respond::finish(stated, true)).await;
    assert_eq!(
        got,
        (StatusCode::OK, TEXT.into(), "1000".into(), String::new())
    );
}
