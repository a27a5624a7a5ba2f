//! Project pages and the root: names, the policy, upstream's formats,
//! redirects, staleness, offline, streaming.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::{StatusCode, header};
use runcell_packages::{Account, Mode, Notice, PackagesConfig};

use crate::support::*;

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
