//! The story every [`Store`] must tell: create, append, reopen, share,
//! revoke, fork, delete. Written against the trait only, so that another
//! implementation (Postgres, say) runs the same story from its own tests.

use std::collections::BTreeMap;

use runcell_protocol::{CellId, CellKind, EventBody, Output, SessionEvent, TurnId, TurnKind};

use super::{SessionRecord, Store};
use runcell_protocol::{OwnerId, SessionId};

const ALICE: &str = "0123456789abcdef0123456789abcdef";
const BOB: &str = "fedcba9876543210fedcba9876543210";
const CAROL: &str = "00000000000000000000000000000c01";
const NOTES: &str = "5e55a000-0000-4000-8000-000000000001";
const OTHER: &str = "5e55a000-0000-4000-8000-000000000002";
const FORK: &str = "5e55a000-0000-4000-8000-000000000003";

fn owner(hex: &str) -> OwnerId {
    hex.parse().expect("a valid owner id")
}

fn session(id: &str) -> SessionId {
    id.parse().expect("a valid session id")
}

fn record(id: &str, owner_hex: &str, at: u64) -> SessionRecord {
    SessionRecord {
        id: session(id),
        owner: owner(owner_hex),
        title: String::new(),
        created_ms: at,
        updated_ms: at,
        forked_from: None,
    }
}

/// A turn's worth of events: a question, a code cell, a result with a PNG.
fn turn(first_seq: u64, turn: u64, question: &str) -> Vec<SessionEvent> {
    let cell = turn * 10;
    let png = "iVBORw0KGgo".repeat(2_000);
    let bodies = vec![
        EventBody::TurnStarted {
            turn: TurnId(turn),
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        },
        EventBody::UserMessage {
            cell_id: CellId(cell),
            text: question.to_string(),
            markup: None,
        },
        EventBody::CellStarted {
            cell_id: CellId(cell + 1),
            cell_kind: CellKind::Code,
            language: Some("python".into()),
            attempt: Some(1),
            source: None,
        },
        EventBody::CellDelta {
            cell_id: CellId(cell + 1),
            text: "print('é 😀')".into(),
            highlight: None,
        },
        EventBody::CellOutput {
            cell_id: CellId(cell + 2),
            output: Output::Rich {
                data: BTreeMap::from([("image/png".to_string(), png)]),
                main: false,
                metadata: String::new(),
                display_id: None,
            },
        },
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, event)| SessionEvent {
            seq: first_seq + i as u64,
            ts_ms: 1_000 + first_seq + i as u64,
            event,
        })
        .collect()
}

async fn title_of(store: &dyn Store, id: &str) -> Option<String> {
    store
        .session(session(id))
        .await
        .expect("read")
        .map(|s| s.title)
}

fn tagged(id: &str, events: &[SessionEvent]) -> Vec<(SessionId, SessionEvent)> {
    events.iter().map(|e| (session(id), e.clone())).collect()
}

/// Everything but the reopen; call [`after_reopen`] on the same data next.
pub async fn run(store: &dyn Store) {
    // Create.
    store
        .create_session(&record(NOTES, ALICE, 100))
        .await
        .expect("create");
    store
        .create_session(&record(OTHER, BOB, 200))
        .await
        .expect("create");
    assert!(
        matches!(
            store.create_session(&record(NOTES, BOB, 300)).await,
            Err(super::StoreError::Exists)
        ),
        "an id is never taken over"
    );
    assert_eq!(
        store
            .session(session(NOTES))
            .await
            .expect("read")
            .map(|s| s.owner),
        Some(owner(ALICE))
    );
    assert_eq!(store.session(session(FORK)).await.expect("read"), None);
    assert!(
        store
            .sessions_of(owner(ALICE))
            .await
            .expect("list")
            .is_empty(),
        "a session without events is not listed"
    );
    assert_eq!(
        store.count_sessions_of(owner(ALICE)).await.expect("count"),
        1,
        "but it is held"
    );
    assert_eq!(
        store.count_sessions_of(owner(CAROL)).await.expect("count"),
        0
    );

    // Append, interleaved across sessions, in one batch and then another.
    let first = turn(1, 1, "plot the primes below 1000\nand label them");
    let second = turn(6, 2, "now only the twin primes");
    let mut batch = tagged(NOTES, &first);
    batch.extend(tagged(OTHER, &turn(1, 1, "how many r's in strawberry?")));
    store.append_events(&batch).await.expect("append");
    store
        .append_events(&tagged(NOTES, &second))
        .await
        .expect("append");
    let all: Vec<SessionEvent> = first.iter().chain(&second).cloned().collect();
    assert_eq!(store.events(session(NOTES)).await.expect("events"), all);
    let notes = store
        .session(session(NOTES))
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        notes.title, "plot the primes below 1000",
        "the first question names it"
    );
    assert_eq!(
        notes.updated_ms,
        all.last().map(|e| e.ts_ms).unwrap_or_default()
    );

    // Lists are per owner, newest first.
    let alices = store.sessions_of(owner(ALICE)).await.expect("list");
    assert_eq!(
        alices.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![session(NOTES)]
    );
    assert!(
        store
            .sessions_of(owner(CAROL))
            .await
            .expect("list")
            .is_empty()
    );

    // Rename.
    assert!(
        store
            .rename_session(session(NOTES), "Primes")
            .await
            .expect("rename")
    );
    assert!(
        !store
            .rename_session(session(FORK), "nobody")
            .await
            .expect("rename")
    );
    assert_eq!(title_of(store, NOTES).await, Some("Primes".into()));

    // Share, share again (same link, moved on), revoke.
    let link = store
        .share(session(NOTES), 3, false, 5_000)
        .await
        .expect("share");
    assert_eq!((link.upto_seq, link.files), (3, false));
    let again = store
        .share(session(NOTES), 10, true, 6_000)
        .await
        .expect("share");
    assert_eq!(
        (again.token.clone(), again.upto_seq, again.files),
        (link.token.clone(), 10, true),
        "sharing again moves the link on, with the files if asked"
    );
    assert_eq!(
        store.shared(&link.token).await.expect("shared"),
        Some(again.clone())
    );
    assert_eq!(
        store.share_of(session(NOTES)).await.expect("share_of"),
        Some(again)
    );
    assert_eq!(
        store.revoke_shares(session(NOTES)).await.expect("revoke"),
        1
    );
    assert_eq!(store.shared(&link.token).await.expect("shared"), None);
    assert_eq!(
        store.revoke_shares(session(NOTES)).await.expect("revoke"),
        0
    );
    // Two shares at once (two clicks, two tabs) still make one link.
    let (one, two) = futures::join!(
        store.share(session(NOTES), 10, false, 7_000),
        store.share(session(NOTES), 10, false, 7_000)
    );
    let fresh = one.expect("share");
    assert_eq!(two.expect("share").token, fresh.token);
    assert_ne!(fresh.token, link.token, "a revoked link never comes back");

    // Fork: a new session for someone else with the events copied.
    let mut forked = record(FORK, CAROL, 8_000);
    forked.title = "Primes".into();
    forked.forked_from = Some(fresh.token.to_string());
    store.create_session(&forked).await.expect("fork");
    store
        .append_events(&tagged(FORK, &all))
        .await
        .expect("fork events");
    assert_eq!(store.events(session(FORK)).await.expect("events"), all);
    assert_eq!(title_of(store, FORK).await, Some("Primes".into()));

    // Delete: the events and the link go with it; late events are dropped.
    assert!(store.delete_session(session(NOTES)).await.expect("delete"));
    assert!(!store.delete_session(session(NOTES)).await.expect("delete"));
    assert!(
        store
            .events(session(NOTES))
            .await
            .expect("events")
            .is_empty()
    );
    assert_eq!(store.shared(&fresh.token).await.expect("shared"), None);
    store
        .append_events(&tagged(NOTES, &turn(11, 3, "late")))
        .await
        .expect("late events are not an error");
    assert!(
        store
            .events(session(NOTES))
            .await
            .expect("events")
            .is_empty()
    );
    assert_eq!(
        store.events(session(FORK)).await.expect("events"),
        all,
        "the fork is its own"
    );

    // A batch bigger than any one statement keeps every event, in order.
    const BULK: &str = "5e55a000-0000-4000-8000-000000000005";
    store
        .create_session(&record(BULK, CAROL, 9_000))
        .await
        .expect("create");
    let many: Vec<SessionEvent> = (1..=1_001)
        .map(|seq| SessionEvent {
            seq,
            ts_ms: 9_000 + seq,
            event: EventBody::CellDelta {
                cell_id: CellId(1),
                text: format!("token {seq} "),
                highlight: None,
            },
        })
        .collect();
    store
        .append_events(&tagged(BULK, &many))
        .await
        .expect("bulk");
    assert_eq!(store.events(session(BULK)).await.expect("events"), many);
    assert!(store.delete_session(session(BULK)).await.expect("delete"));

    // Sessions that never began are pruned; the rest stay.
    const EMPTY: &str = "5e55a000-0000-4000-8000-000000000004";
    store
        .create_session(&record(EMPTY, CAROL, 50))
        .await
        .expect("create");
    assert_eq!(store.prune_empty(60).await.expect("prune"), 1);
    assert_eq!(store.session(session(EMPTY)).await.expect("read"), None);
    assert!(store.session(session(FORK)).await.expect("read").is_some());
}

/// What must still be there after the store was closed and opened again.
pub async fn after_reopen(store: &dyn Store) {
    assert_eq!(store.session(session(NOTES)).await.expect("read"), None);
    let fork = store
        .session(session(FORK))
        .await
        .expect("read")
        .expect("the fork lasts");
    assert_eq!((fork.owner, fork.title.as_str()), (owner(CAROL), "Primes"));
    let events = store.events(session(FORK)).await.expect("events");
    assert_eq!(events.len(), 10);
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    let other = store
        .session(session(OTHER))
        .await
        .expect("read")
        .expect("lasts");
    assert_eq!(other.title, "how many r's in strawberry?");
    assert_eq!(store.events(session(OTHER)).await.expect("events").len(), 5);

    // Bob joins Carol's owner: his sessions go with him, and nobody else's.
    let moved = store.move_sessions(owner(BOB), owner(CAROL)).await;
    assert_eq!(moved.expect("move"), 1);
    let carols: Vec<SessionId> = store
        .sessions_of(owner(CAROL))
        .await
        .expect("list")
        .iter()
        .map(|s| s.id)
        .collect();
    assert!(carols.contains(&session(OTHER)) && carols.contains(&session(FORK)));
    assert!(
        store
            .sessions_of(owner(BOB))
            .await
            .expect("list")
            .is_empty()
    );
    assert_eq!(
        store
            .move_sessions(owner(BOB), owner(CAROL))
            .await
            .expect("move"),
        0
    );
}
