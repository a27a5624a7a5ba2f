//! Files: downloaded once and checked, refused past their caps and the
//! session's budget.

use http::StatusCode;
use runcell_packages::{Notice, PackagesConfig};

use crate::support::*;

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
