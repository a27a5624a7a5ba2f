//! The story every [`KeyStore`] must tell: create, list, look up by id and
//! by digest, note uses, revoke by name (twice, and names no key has), and
//! reuse a revoked key's name. Written against the trait only, so that
//! another implementation runs the same story from its own tests; the
//! unknown ids and names, the double revoke and the refused creates are
//! part of it.

use super::StoreError;
use super::keys::{KeyRecord, KeyStore, TOUCH_EVERY_MS};

const CI: &str = "5e55a000-0000-4000-8000-0000000000c1";
const LAPTOP: &str = "5e55a000-0000-4000-8000-0000000000c2";
const CI_AGAIN: &str = "5e55a000-0000-4000-8000-0000000000c3";
const NOBODY: &str = "5e55a000-0000-4000-8000-0000000000ff";

/// A use of `ci` a full minute after its first: due, as
/// `KeyRecord::needs_touch` says, in every backend.
const LATER_USE: u64 = 10_000 + TOUCH_EVERY_MS;

/// When the story revokes `ci` the first time.
const REVOKED_AT: u64 = 100_000;

fn record(id: &str, name: &str, created_ms: u64) -> KeyRecord {
    KeyRecord {
        id: id.into(),
        name: name.into(),
        prefix: format!("rc_{}", &name[..2]),
        created_ms,
        last_used_ms: None,
        revoked_ms: None,
        user_id: None,
    }
}

async fn key(store: &dyn KeyStore, id: &str) -> Option<KeyRecord> {
    store.key(id).await.expect("read a key")
}

async fn ids(store: &dyn KeyStore) -> Vec<String> {
    store
        .keys()
        .await
        .expect("list keys")
        .into_iter()
        .map(|k| k.id)
        .collect()
}

/// Everything but the reopen; call [`after_reopen`] on the same data next.
pub async fn run(store: &dyn KeyStore) {
    // An empty store knows no key.
    assert!(store.keys().await.expect("list").is_empty());
    assert_eq!(key(store, NOBODY).await, None);
    assert_eq!(store.key_by_digest("d-none").await.expect("lookup"), None);

    // Create: what was stored is what is read, by id and by digest.
    let ci = record(CI, "ci", 1_000);
    let laptop = record(LAPTOP, "laptop", 2_000);
    store.create_key(&ci, "d-ci").await.expect("create ci");
    store
        .create_key(&laptop, "d-laptop")
        .await
        .expect("create laptop");
    assert_eq!(key(store, CI).await, Some(ci.clone()));
    assert_eq!(
        store.key_by_digest("d-laptop").await.expect("lookup"),
        Some(laptop.clone())
    );
    assert_eq!(
        store.key_by_digest("d-ci").await.expect("lookup"),
        Some(ci.clone())
    );
    assert_eq!(
        store.keys().await.expect("list"),
        [ci.clone(), laptop.clone()],
        "every key, oldest first"
    );

    // A live key's name is not given twice, and a refused key leaves nothing.
    let taken = store
        .create_key(&record(CI_AGAIN, "ci", 3_000), "d-ci-again")
        .await;
    assert!(
        matches!(&taken, Err(StoreError::NameTaken(name)) if name == "ci"),
        "{taken:?}"
    );
    assert_eq!(key(store, CI_AGAIN).await, None);
    assert_eq!(
        store.key_by_digest("d-ci-again").await.expect("lookup"),
        None
    );
    // Nor is a digest, whatever the name.
    assert!(
        store
            .create_key(&record(CI_AGAIN, "other", 3_000), "d-ci")
            .await
            .is_err(),
        "a digest belongs to one key"
    );
    assert_eq!(ids(store).await, [CI, LAPTOP]);

    // Uses: the first is written, then at most one a minute, never back.
    store.touch_key(CI, 10_000).await.expect("touch");
    assert_eq!(
        key(store, CI).await.and_then(|k| k.last_used_ms),
        Some(10_000)
    );
    store
        .touch_key(CI, 10_000 + TOUCH_EVERY_MS - 1)
        .await
        .expect("touch");
    store.touch_key(CI, 5_000).await.expect("touch");
    assert_eq!(
        key(store, CI).await.and_then(|k| k.last_used_ms),
        Some(10_000),
        "written at most once a minute"
    );
    // A full minute later it is due, as `KeyRecord::needs_touch` says.
    store.touch_key(CI, LATER_USE).await.expect("touch");
    assert_eq!(
        key(store, CI).await.and_then(|k| k.last_used_ms),
        Some(LATER_USE)
    );
    assert_eq!(
        key(store, LAPTOP).await.and_then(|k| k.last_used_ms),
        None,
        "a use touches its own key only"
    );
    // A use of a key that does not exist is nothing, not an error.
    store
        .touch_key(NOBODY, 20_000)
        .await
        .expect("touch unknown");
    assert_eq!(key(store, NOBODY).await, None);

    // Revoke by name: once; the key stays listed and found, dead.
    assert!(store.revoke_key("ci", REVOKED_AT).await.expect("revoke"));
    let revoked = key(store, CI).await.expect("still there");
    assert_eq!(revoked.revoked_ms, Some(REVOKED_AT));
    assert!(!revoked.is_live());
    assert_eq!(
        store.key_by_digest("d-ci").await.expect("lookup"),
        Some(revoked.clone()),
        "a revoked key is still found, so that it can be refused by name"
    );
    assert!(
        !store
            .revoke_key("ci", REVOKED_AT + 1)
            .await
            .expect("revoke again"),
        "a name with no live key revokes nothing"
    );
    assert_eq!(
        key(store, CI).await.and_then(|k| k.revoked_ms),
        Some(REVOKED_AT),
        "a second revoke leaves the first time"
    );
    assert!(!store.revoke_key("nobody", 1).await.expect("revoke unknown"));
    assert!(key(store, LAPTOP).await.is_some_and(|k| k.is_live()));

    // The name is free again once its key is revoked; the digest is not.
    assert!(
        store
            .create_key(&record(CI_AGAIN, "ci", 110_000), "d-ci")
            .await
            .is_err(),
        "a revoked key's digest is never reused"
    );
    let again = record(CI_AGAIN, "ci", 110_000);
    store
        .create_key(&again, "d-ci-again")
        .await
        .expect("a new key under the old name");
    assert_eq!(ids(store).await, [CI, LAPTOP, CI_AGAIN]);
    assert_eq!(
        store.key_by_digest("d-ci-again").await.expect("lookup"),
        Some(again)
    );
    // Revoking the name now revokes the new key only.
    assert!(store.revoke_key("ci", 120_000).await.expect("revoke"));
    assert_eq!(
        key(store, CI_AGAIN).await.and_then(|k| k.revoked_ms),
        Some(120_000)
    );
    assert_eq!(
        key(store, CI).await.and_then(|k| k.revoked_ms),
        Some(REVOKED_AT)
    );

    // The revocation watch reads only what was revoked since its last look.
    let revoked_since = |since| async move {
        store
            .keys_revoked_since(since)
            .await
            .expect("revoked since")
            .into_iter()
            .map(|k| k.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(revoked_since(0).await, [CI, CI_AGAIN]);
    assert_eq!(revoked_since(REVOKED_AT + 1).await, [CI_AGAIN]);
    assert!(revoked_since(120_001).await.is_empty());
    // No key here is a person's.
    assert!(
        store
            .keys_of_user("someone")
            .await
            .expect("none")
            .is_empty()
    );
}

/// What [`run`] left, read back from a reopened store.
pub async fn after_reopen(store: &dyn KeyStore) {
    assert_eq!(ids(store).await, [CI, LAPTOP, CI_AGAIN]);
    let ci = key(store, CI).await.expect("ci kept");
    assert_eq!(ci.revoked_ms, Some(REVOKED_AT));
    assert_eq!(ci.last_used_ms, Some(LATER_USE));
    assert_eq!(
        store.key_by_digest("d-laptop").await.expect("lookup"),
        Some(record(LAPTOP, "laptop", 2_000))
    );
    assert!(!store.revoke_key("ci", 130_000).await.expect("revoke"));
}
