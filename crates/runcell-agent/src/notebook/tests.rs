//! The notebook service's stories: what share, fork, unshare and delete do,
//! and in which order, as plain Rust over a real SQLite store and the
//! session files on disk (no kernel is started: files are kept files).

use std::sync::Arc;

use runcell_protocol::{CellId, CellKind, CellStatus, EventBody, KernelLoss, SandboxKind};
use tokio_util::sync::CancellationToken;

use super::{AskedTurn, NotebookError, Notebooks, parse_link_token, parse_session_id};
use crate::agent::TurnRefusal;
use crate::session::SessionChannel;
use runcell_protocol::OwnerId;

struct Fixture {
    notebooks: Arc<Notebooks>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

/// The service as the server assembles it (`state.rs`), over a new data
/// directory: a SQLite store, the jail (no kernel started until one is
/// asked for) and the scripted model.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).expect("the data directory");
    let store = runcell_store::SqliteStore::open_in(&data_dir)
        .await
        .expect("a store in a new data directory");
    let settings = runcell_sandbox::config::SandboxConfig::default();
    let jail: Arc<dyn runcell_sandbox::Sandbox> = runcell_sandbox::jail::JailSandbox::new(
        runcell_sandbox::jail::JailConfig::from_settings(&settings),
    );
    let backends =
        runcell_sandbox::backends::Backends::new(runcell_sandbox::sessions::SandboxSessions::new(
            jail,
            runcell_sandbox::sessions::SessionSettings {
                pool_size: 0,
                ..Default::default()
            },
        ));
    let kernels = crate::agent::Kernels::new(
        backends,
        None,
        crate::session::uploads::Uploads::new(&data_dir)
            .with_quota(settings.default_limits().home_bytes()),
    );
    let agent = crate::agent::Agent::new(
        Arc::new(runcell_llm::scripted::ScriptedLlm::default()),
        kernels,
        crate::agent::AgentSettings {
            limits: settings.default_limits(),
            ..Default::default()
        },
    );
    let shutdown = CancellationToken::new();
    let runner = Arc::new(crate::agent::TurnRunner::new(
        Arc::new(agent),
        tokio_util::task::TaskTracker::new(),
        shutdown.clone(),
    ));
    let hub = Arc::new(crate::session::SessionHub::new(Arc::new(store)));
    Fixture {
        notebooks: Arc::new(Notebooks::new(hub, runner, shutdown.clone(), None)),
        shutdown,
        _dir: dir,
    }
}

fn asked(text: &str) -> EventBody {
    EventBody::UserMessage {
        cell_id: CellId(1),
        text: text.into(),
        markup: None,
    }
}

/// Uploads `bytes` to `path` in the session, as its owner's page would.
async fn put(
    notebooks: &Notebooks,
    channel: &Arc<SessionChannel>,
    path: &str,
    bytes: &[u8],
    overwrite: bool,
) {
    notebooks
        .upload(channel, path, bytes.to_vec().into(), overwrite)
        .await
        .unwrap();
}

async fn read(notebooks: &Notebooks, channel: &Arc<SessionChannel>, path: &str) -> String {
    let (_, bytes) = notebooks.read_file(channel, path).await.unwrap();
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn a_fork_gets_the_cells_and_the_files_as_they_were_shared() {
    let f = fixture().await;
    let (alice, bob) = (OwnerId::random(), OwnerId::random());
    let session = f.notebooks.create(alice).await.unwrap();
    session.log().publish(asked("how many rows?"));
    put(&f.notebooks, &session, "data.csv", b"a,b\n1,2\n", false).await;
    let link = f.notebooks.share(&session, true).await.unwrap();
    assert!(link.files);
    assert_eq!(link.upto_seq, session.log().last_seq());

    // What happens after the link was made is not in it.
    session.log().publish(asked("and the mean?"));
    put(&f.notebooks, &session, "data.csv", b"changed", true).await;
    let (_, shared) = f
        .notebooks
        .read_shared_file(&link.token, "data.csv")
        .await
        .unwrap();
    assert_eq!(shared, b"a,b\n1,2\n");

    let fork = f.notebooks.fork(bob, &link.token).await.unwrap();
    assert_eq!(fork.owner(), bob);
    let questions: Vec<_> = fork
        .log()
        .events_after(0)
        .into_iter()
        .filter_map(|e| match e.event {
            EventBody::UserMessage { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(questions, ["how many rows?"]);
    assert_eq!(read(&f.notebooks, &fork, "data.csv").await, "a,b\n1,2\n");
    // The fork is bob's own: a change there leaves alice's alone.
    put(&f.notebooks, &fork, "data.csv", b"bob's", true).await;
    assert_eq!(read(&f.notebooks, &session, "data.csv").await, "changed");
    // ... and it is not alice's to open.
    assert!(matches!(
        f.notebooks.open_owned(alice, fork.id()).await,
        Err(NotebookError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_link_without_files_offers_none_and_forks_without_them() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    session.log().publish(asked("hi"));
    put(&f.notebooks, &session, "secret.txt", b"mine", false).await;
    let link = f.notebooks.share(&session, false).await.unwrap();
    let token = link.token;
    assert!(f.notebooks.shared_files(&token).await.is_empty());
    assert!(matches!(
        f.notebooks.read_shared_file(&token, "secret.txt").await,
        Err(NotebookError::NoSharedFiles)
    ));
    let fork = f.notebooks.fork(OwnerId::random(), &token).await.unwrap();
    assert!(f.notebooks.list_files(&fork).await.unwrap().is_empty());
}

/// The kernel loss a fork's history records, if any.
fn loss_of(channel: &SessionChannel) -> Option<KernelLoss> {
    channel
        .log()
        .events_after(0)
        .into_iter()
        .find_map(|e| match e.event {
            EventBody::KernelLost { reason } => Some(reason),
            _ => None,
        })
}

/// Code ran in the session: its fork has a kernel to rebuild.
fn ran_code(session: &SessionChannel) {
    session.log().publish(EventBody::CellStarted {
        cell_id: CellId(2),
        cell_kind: CellKind::Result,
        language: None,
        attempt: Some(1),
        source: None,
    });
    session.log().publish(EventBody::CellFinished {
        cell_id: CellId(2),
        status: CellStatus::Ok,
        elapsed_ms: 1,
        error: None,
    });
}

#[tokio::test]
async fn a_fork_says_when_the_files_its_code_may_read_were_left_behind() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    session.log().publish(asked("how many rows?"));
    ran_code(&session);
    put(&f.notebooks, &session, "data.csv", b"a\n1\n", false).await;

    let without = f.notebooks.share(&session, false).await.unwrap();
    let fork = f
        .notebooks
        .fork(OwnerId::random(), &without.token)
        .await
        .unwrap();
    assert_eq!(loss_of(&fork), Some(KernelLoss::ForkWithoutFiles));

    let with = f.notebooks.share(&session, true).await.unwrap();
    let fork = f
        .notebooks
        .fork(OwnerId::random(), &with.token)
        .await
        .unwrap();
    assert_eq!(loss_of(&fork), Some(KernelLoss::Fork));
}

#[tokio::test]
async fn a_fork_of_a_session_without_files_is_a_plain_fork() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    session.log().publish(asked("2+2?"));
    ran_code(&session);
    let link = f.notebooks.share(&session, false).await.unwrap();
    let fork = f
        .notebooks
        .fork(OwnerId::random(), &link.token)
        .await
        .unwrap();
    assert_eq!(loss_of(&fork), Some(KernelLoss::Fork));
}

#[tokio::test]
async fn sharing_again_without_files_drops_the_copy_and_keeps_the_link() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    put(&f.notebooks, &session, "a.txt", b"1", false).await;
    let with = f.notebooks.share(&session, true).await.unwrap();
    assert_eq!(f.notebooks.shared_files(&with.token).await.len(), 1);
    let without = f.notebooks.share(&session, false).await.unwrap();
    assert_eq!(without.token, with.token);
    assert!(f.notebooks.shared_files(&with.token).await.is_empty());
}

#[tokio::test]
async fn unsharing_revokes_the_link_then_drops_its_files() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    put(&f.notebooks, &session, "a.txt", b"1", false).await;
    let link = f.notebooks.share(&session, true).await.unwrap();
    let token = link.token.clone();
    f.notebooks.unshare(&session).await.unwrap();
    assert!(matches!(
        f.notebooks.fork(OwnerId::random(), &token).await,
        Err(NotebookError::LinkGone)
    ));
    assert!(f.notebooks.shared_files(&token).await.is_empty());
    // The session's own files stay.
    assert_eq!(read(&f.notebooks, &session, "a.txt").await, "1");
    // A link made again is a new one.
    let again = f.notebooks.share(&session, false).await.unwrap();
    assert_ne!(again.token, link.token);
}

#[tokio::test]
async fn deleting_ends_the_session_its_link_and_its_files() {
    let f = fixture().await;
    let owner = OwnerId::random();
    let session = f.notebooks.create(owner).await.unwrap();
    session.log().publish(asked("hi"));
    put(&f.notebooks, &session, "a.txt", b"1", false).await;
    let link = f.notebooks.share(&session, true).await.unwrap();
    let stop = session.stop_token();
    f.notebooks.delete(&session).await.unwrap();

    assert!(stop.is_cancelled(), "its turns were stopped");
    assert!(matches!(
        f.notebooks.open_owned(owner, session.id()).await,
        Err(NotebookError::NotFound(_))
    ));
    // A page or request that still holds it can start nothing more.
    assert_eq!(
        f.notebooks.start(&session, AskedTurn::RerunAll).await,
        Err(TurnRefusal::Deleted)
    );
    let token = link.token;
    assert!(matches!(
        f.notebooks.fork(OwnerId::random(), &token).await,
        Err(NotebookError::LinkGone)
    ));
    assert!(f.notebooks.shared_files(&token).await.is_empty());
    assert!(f.notebooks.list_files(&session).await.unwrap().is_empty());
    assert!(f.notebooks.list(owner).await.unwrap().is_empty());
}

/// What a request naming session `raw` gets: its id parsed, then opened.
async fn open_raw(
    notebooks: &Notebooks,
    owner: OwnerId,
    raw: &str,
) -> Result<Arc<SessionChannel>, NotebookError> {
    notebooks.open_owned(owner, parse_session_id(raw)?).await
}

/// What a request forking the link `raw` gets: its token parsed, then
/// forked.
async fn fork_raw(
    notebooks: &Notebooks,
    owner: OwnerId,
    raw: &str,
) -> Result<Arc<SessionChannel>, NotebookError> {
    notebooks.fork(owner, &parse_link_token(raw)?).await
}

#[tokio::test]
async fn ids_and_tokens_that_are_not_ours_look_the_same_as_missing_ones() {
    let f = fixture().await;
    let owner = OwnerId::random();
    let theirs = f.notebooks.create(OwnerId::random()).await.unwrap();
    for id in [theirs.id().to_string(), "nonsense".into(), "x".repeat(500)] {
        match open_raw(&f.notebooks, owner, &id).await {
            Err(NotebookError::NotFound(shown)) => assert!(shown.chars().count() <= 40),
            other => panic!("{id}: {:?}", other.map(|c| c.id())),
        }
    }
    for token in ["", "nope", "s_0000"] {
        assert!(matches!(
            fork_raw(&f.notebooks, owner, token).await,
            Err(NotebookError::LinkGone)
        ));
    }
}

#[tokio::test]
async fn renaming_keeps_a_cut_title_and_refuses_an_empty_one() {
    let f = fixture().await;
    let owner = OwnerId::random();
    let session = f.notebooks.create(owner).await.unwrap();
    session.log().publish(asked("hi"));
    f.notebooks.flush().await;
    assert!(matches!(
        f.notebooks.rename(&session, "  \n ").await,
        Err(NotebookError::EmptyTitle)
    ));
    let kept = f
        .notebooks
        .rename(&session, &format!("{}\nsecond line", "t".repeat(200)))
        .await
        .unwrap();
    assert_eq!(
        kept.chars().count(),
        runcell_protocol::page::MAX_TITLE_CHARS
    );
    let listed = f.notebooks.list(owner).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].title, kept);
}

#[tokio::test]
async fn turns_are_checked_before_they_start() {
    let f = fixture().await;
    let session = f.notebooks.create(OwnerId::random()).await.unwrap();
    let ask = AskedTurn::question;
    assert_eq!(
        f.notebooks.start(&session, ask("  ")).await,
        Err(TurnRefusal::Empty)
    );
    let cobol = AskedTurn::Run {
        code: "DISPLAY 'HI'".into(),
        language: "cobol".into(),
        source: None,
        backend: None,
    };
    assert!(matches!(
        f.notebooks.start(&session, cobol).await,
        Err(TurnRefusal::InvalidCode(_))
    ));
    // A name that is no backend at all is refused with the frame or body
    // that carried it (`app::protocol`'s tests); one this server does not
    // offer, here.
    for elsewhere in [SandboxKind::E2b, SandboxKind::Browser] {
        let elsewhere = AskedTurn::Ask {
            text: "hi".into(),
            model: None,
            backend: Some(elsewhere),
            alternative_to: None,
        };
        assert!(matches!(
            f.notebooks.start(&session, elsewhere).await,
            Err(TurnRefusal::Backend(_))
        ));
    }
    // Nothing was started by any of them.
    assert_eq!(session.log().last_seq(), 0);
}

#[tokio::test]
async fn nothing_new_is_made_once_the_server_shuts_down() {
    let f = fixture().await;
    f.shutdown.cancel();
    assert!(matches!(
        f.notebooks.create(OwnerId::random()).await,
        Err(NotebookError::ShuttingDown)
    ));
}

#[tokio::test]
async fn a_link_shows_the_owners_name_for_the_session_never_a_later_question() {
    let f = fixture().await;
    let owner = OwnerId::random();
    let session = f.notebooks.create(owner).await.unwrap();
    session.log().publish(EventBody::KernelLost {
        reason: KernelLoss::Fork,
    });
    let link = f.notebooks.share(&session, false).await.unwrap();
    // Asked after the link was made: it names the session, not the link.
    session.log().publish(asked("my private question"));
    f.notebooks.flush().await;
    let title = |token| {
        let notebooks = f.notebooks.clone();
        async move {
            let (record, _) = notebooks.hub.shared_events(&token).await.unwrap().unwrap();
            record.title
        }
    };
    assert_eq!(title(link.token.clone()).await, "");
    // A rename is the owner's name for it, and reaches the link.
    f.notebooks
        .rename(&session, "Quarterly numbers")
        .await
        .unwrap();
    assert_eq!(title(link.token.clone()).await, "Quarterly numbers");
}
