//! The story every [`UserStore`] must tell: a first sign-in makes an
//! account, a second finds it (with the provider's new name and email), the
//! admins list's role follows the list while an admin's choice stays, two issuers with one subject are two people, an
//! admin changes roles and limits and disables and enables, a disabled
//! person's keys are revoked, usage adds up, and the audit log pages
//! newest first. Written against the traits only; both stores run it.

use runcell_protocol::OwnerId;

use super::keys::{KeyRecord, KeyStore};
use super::users::{AuditEntry, Identity, LimitOverrides, Role, RoleBy, UserStore};

fn alice(issuer: &str) -> Identity {
    Identity {
        issuer: issuer.into(),
        subject: "alice".into(),
        name: "Alice".into(),
        email: "alice@example.test".into(),
        email_verified: true,
    }
}

fn key_of(user_id: &str, id: &str, name: &str) -> KeyRecord {
    KeyRecord {
        id: id.into(),
        name: name.into(),
        prefix: "rc_abcd".into(),
        created_ms: 1,
        last_used_ms: None,
        revoked_ms: None,
        user_id: Some(user_id.into()),
    }
}

pub async fn run<S: UserStore + KeyStore>(store: &S) {
    let idp = "http://127.0.0.1:1/idp";
    let owner = OwnerId::random();
    let first = store
        .sign_in_user(&alice(idp), owner, false, 1_000)
        .await
        .expect("first sign-in");
    assert_eq!(first.role_before, None);
    let first = first.user;
    assert_eq!(first.owner, owner);
    assert_eq!(first.role, Role::Member);
    assert_eq!(first.role_by, RoleBy::List);
    assert_eq!(first.last_seen_ms, Some(1_000));
    assert_eq!(first.limits, LimitOverrides::default());
    assert!(!first.is_disabled());

    // The same person again: the same account, the provider's new details,
    // the first owner kept.
    let renamed = Identity {
        name: "Alice B.".into(),
        ..alice(idp)
    };
    let again = store
        .sign_in_user(&renamed, OwnerId::random(), false, 2_000)
        .await
        .expect("second sign-in");
    assert_eq!(again.role_before, Some(Role::Member));
    let again = again.user;
    assert_eq!(again.id, first.id);
    assert_eq!(again.owner, owner);
    assert_eq!(again.name, "Alice B.");
    assert_eq!(again.created_ms, 1_000);
    assert_eq!(again.last_seen_ms, Some(2_000));

    // Named an admin by the list: an admin; taken off it, a member again
    // on the next sign-in (the list's role is read again, never ratcheted).
    let admin = store
        .sign_in_user(&alice(idp), OwnerId::random(), true, 3_000)
        .await
        .expect("promoted");
    assert_eq!(admin.role_before, Some(Role::Member));
    assert_eq!(
        (admin.user.role, admin.user.role_by),
        (Role::Admin, RoleBy::List)
    );
    let off_the_list = store
        .sign_in_user(&alice(idp), OwnerId::random(), false, 4_000)
        .await
        .expect("member sign-in");
    assert_eq!(off_the_list.role_before, Some(Role::Admin));
    assert_eq!(off_the_list.user.role, Role::Member);

    // Made an admin on the admin page: the list does not take it back,
    // and listing them later leaves it the admin's.
    assert!(store.set_role(&first.id, Role::Admin).await.expect("role"));
    let kept = store
        .sign_in_user(&alice(idp), OwnerId::random(), false, 4_500)
        .await
        .expect("an admin's admin");
    assert_eq!(
        (kept.user.role, kept.user.role_by),
        (Role::Admin, RoleBy::Admin)
    );
    let listed = store
        .sign_in_user(&alice(idp), OwnerId::random(), true, 4_600)
        .await
        .expect("listed too");
    assert_eq!(listed.user.role_by, RoleBy::Admin);

    // Another issuer's `alice` is someone else.
    let other = store
        .sign_in_user(&alice("header:x-user"), OwnerId::random(), false, 5_000)
        .await
        .expect("another issuer")
        .user;
    assert_ne!(other.id, first.id);
    assert_ne!(other.owner, owner);
    let all = store.users().await.expect("list");
    assert_eq!(
        all.iter().map(|u| u.id.as_str()).collect::<Vec<_>>(),
        [first.id.as_str(), other.id.as_str()]
    );

    assert!(store.set_role(&first.id, Role::Member).await.expect("role"));
    assert!(!store.set_role("nobody", Role::Admin).await.expect("role"));
    let limits = LimitOverrides {
        live_kernels: Some(1),
        storage_mib: Some(10),
        ..LimitOverrides::default()
    };
    assert!(store.set_limits(&other.id, &limits).await.expect("limits"));
    let read = store.user(&other.id).await.expect("read").expect("exists");
    assert_eq!(read.limits, limits);
    assert_eq!(store.user("nobody").await.expect("read"), None);

    store
        .add_usage(&other.id, 3, 1_500, 20_000)
        .await
        .expect("usage");
    store
        .add_usage(&other.id, 2, 500, 20_000)
        .await
        .expect("usage");
    let used = store.user(&other.id).await.expect("read").expect("exists");
    assert_eq!((used.runs, used.model_ms), (5, 2_000));
    assert_eq!(used.model_ms_on(20_000), 2_000);
    // A new day counts from nothing; the total goes on.
    store
        .add_usage(&other.id, 1, 250, 20_001)
        .await
        .expect("usage");
    let used = store.user(&other.id).await.expect("read").expect("exists");
    assert_eq!((used.runs, used.model_ms), (6, 2_250));
    assert_eq!(used.model_ms_on(20_001), 250);
    assert_eq!(used.model_ms_on(20_000), 0);

    // Seen at most once a minute.
    store.touch_user(&other.id, 5_500).await.expect("touch");
    let seen = store.user(&other.id).await.expect("read").expect("exists");
    assert_eq!(seen.last_seen_ms, Some(5_000));
    store.touch_user(&other.id, 70_000).await.expect("touch");
    let seen = store.user(&other.id).await.expect("read").expect("exists");
    assert_eq!(seen.last_seen_ms, Some(70_000));

    // Their keys: two people may both name a key `laptop`; disabling one
    // revokes theirs only.
    store
        .create_key(&key_of(&first.id, "k-a", "laptop"), "digest-a")
        .await
        .expect("alice's key");
    store
        .create_key(&key_of(&other.id, "k-b", "laptop"), "digest-b")
        .await
        .expect("the other's key of the same name");
    assert!(
        store
            .create_key(&key_of(&other.id, "k-c", "laptop"), "digest-c")
            .await
            .is_err(),
        "one person's live key names are theirs once"
    );
    assert!(
        store
            .set_disabled(&other.id, Some(80_000))
            .await
            .expect("disable")
    );
    assert_eq!(
        store
            .revoke_keys_of(&other.id, 80_000)
            .await
            .expect("revoke"),
        1
    );
    assert_eq!(
        store
            .revoke_keys_of(&other.id, 80_001)
            .await
            .expect("again"),
        0
    );
    let revoked = store.key("k-b").await.expect("read").expect("exists");
    assert_eq!(revoked.revoked_ms, Some(80_000));
    let ids_of = |user: String| async move {
        store
            .keys_of_user(&user)
            .await
            .expect("a person's keys")
            .into_iter()
            .map(|k| k.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids_of(first.id.clone()).await, ["k-a"]);
    assert_eq!(ids_of(other.id.clone()).await, ["k-b"]);
    assert_eq!(revoked.user_id.as_deref(), Some(other.id.as_str()));
    assert!(
        store
            .key("k-a")
            .await
            .expect("read")
            .expect("exists")
            .is_live()
    );
    assert_eq!(
        store.disabled_users().await.expect("disabled"),
        vec![(other.id.clone(), other.owner)]
    );
    // A command-line revoke by name touches no person's key.
    assert!(
        !store
            .revoke_key("laptop", 90_000)
            .await
            .expect("revoke by name")
    );
    assert!(store.revoke_key_id("k-a", 95_000).await.expect("by id"));
    assert!(!store.revoke_key_id("k-a", 96_000).await.expect("again"));
    assert!(store.set_disabled(&other.id, None).await.expect("enable"));
    assert!(store.disabled_users().await.expect("disabled").is_empty());

    // The audit log, newest first, in pages.
    for (at, action) in [(1, "sign_in"), (2, "key_created"), (3, "user_disabled")] {
        store
            .audit(&AuditEntry {
                id: 0,
                at_ms: at,
                actor: (at != 1).then(|| first.id.clone()),
                action: action.into(),
                subject: Some(other.id.clone()),
                detail: format!("step {at}"),
            })
            .await
            .expect("audit");
    }
    let newest = store.audit_log(None, 2).await.expect("log");
    assert_eq!(
        newest.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["user_disabled", "key_created"]
    );
    assert_eq!(newest[0].actor.as_deref(), Some(first.id.as_str()));
    let older = store
        .audit_log(Some(newest[1].id), 10)
        .await
        .expect("older");
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].action, "sign_in");
    assert_eq!(older[0].actor, None);
    assert_eq!(older[0].detail, "step 1");
}
