//! The shared cache: under its size, pages counted like files.

use http::StatusCode;

use crate::support::*;

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
