//! Several runcell nodes on one PostgreSQL database
//! (`RUNCELL_TEST_DATABASE_URL`, a throwaway server that `scripts/test.sh`
//! starts). Node A is the `runcell` binary, so that it can be killed as a
//! crash kills it; node B runs in this process. A session made on A is held
//! by A: a page on B watches its turns live, and what B's pages ask is done
//! by A; when A dies, B takes the session over once A's lease lapses.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use app::protocol::{CellStatus, EventBody, KernelLoss, ServerMessage, TurnStatus};
use runcell_store::scratch::ScratchDatabase;

use crate::support::{
    Client, PATIENCE, TestServer, ask, ask_at, bearer, history, history_at, http, http_as,
};

const RUNCELL: &str = env!("CARGO_BIN_EXE_runcell");

/// A node that is a process of its own: killed (as a crash kills it) when
/// dropped, so that a failed assertion leaves no server behind.
struct NodeProcess(Child);

impl NodeProcess {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `runcell serve` as a separate process on `data`, on the database.
fn node_process(data: &std::path::Path, database_url: &str) -> (NodeProcess, String) {
    let mut command = Command::new(RUNCELL);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .env("RUNCELL_DATABASE_URL", database_url)
        .env("RUNCELL_LLM", "scripted")
        .env("RUNCELL_LOG", "info")
        .env_remove("RUNCELL_ADDR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    #[expect(
        clippy::zombie_processes,
        reason = "NodeProcess kills and waits for the child when dropped"
    )]
    let mut child = command.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "node A exited early"
        );
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let addr = rest.trim().to_string();
            // Keep reading its log, so that it never blocks on a full pipe.
            std::thread::spawn(move || for _ in stderr.lines() {});
            return (NodeProcess(child), format!("http://{addr}"));
        }
    }
}

async fn node(database_url: &str) -> TestServer {
    let url = database_url.to_string();
    TestServer::start_configured(move |config| {
        config.database_url = url.as_str().into();
    })
    .await
}

async fn new_session_at(base: &str) -> String {
    let response = http()
        .post(format!("{base}/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
    let body: serde_json::Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().to_string()
}

fn finished(events: &[app::protocol::SessionEvent]) -> Option<TurnStatus> {
    events.iter().find_map(|e| match &e.event {
        EventBody::TurnFinished { status, .. } => Some(*status),
        _ => None,
    })
}

/// Events a page receives until `until` says stop; fails on a gap.
async fn watch(
    page: &mut Client,
    last: &mut u64,
    patience: Duration,
    until: impl Fn(&EventBody) -> bool,
) -> Vec<app::protocol::SessionEvent> {
    let mut seen = Vec::new();
    loop {
        match page.next_within(patience).await {
            Some(ServerMessage::Event(event)) => {
                assert_eq!(event.seq, *last + 1, "no gap, no repeat");
                *last = event.seq;
                let done = until(&event.event);
                seen.push(event);
                if done {
                    return seen;
                }
            }
            Some(_) => {}
            None => panic!("the page's socket closed"),
        }
    }
}

#[tokio::test]
async fn two_nodes_serve_one_session_and_the_survivor_takes_it_over() {
    let Some(db) = ScratchDatabase::create("cluster").await else {
        return;
    };
    let a_data = tempfile::tempdir().unwrap();
    let (mut a, a_url) = node_process(a_data.path(), &db.url);
    let b = node(&db.url).await;
    b.ready().await;

    // A key made for B's database works on A, and a token B signs too.
    let key = b.api_key("shared").await;
    let token = b.token_for(&key).await;
    let on_a = bearer(&token)
        .get(format!("{a_url}/v1/code_interpreter/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(on_a.status(), 200, "a token B signed works on A");

    // A session made on A is held by A. A page on B watches it.
    let id = new_session_at(&a_url).await;
    let mut page = b.connect(&id, 0).await;
    page.welcome().await;
    let mut last = 0;
    let asked = ask_at(&a_url, &id, "```python\nx = 41\nprint('on a', x)\n```").await;
    assert_eq!(finished(&asked), Some(TurnStatus::Ok), "{asked:?}");
    let watched = watch(&mut page, &mut last, PATIENCE, |e| {
        matches!(e, EventBody::TurnFinished { .. })
    })
    .await;
    assert_eq!(
        watched,
        crate::support::as_a_page_is_sent(&asked),
        "the page on B saw A's turn as A told it"
    );

    // Asked on B, run by A: the variable A's kernel holds is there.
    let follow_up = ask(&b, &id, "```python\nprint('x is', x + 1)\n```").await;
    assert!(
        format!("{follow_up:?}").contains("x is 42"),
        "{follow_up:?}"
    );
    watch(&mut page, &mut last, PATIENCE, |e| {
        matches!(e, EventBody::TurnFinished { .. })
    })
    .await;
    // The page's own frames go to A too.
    page.ask("```python\nprint('from the page on b', x)\n```")
        .await;
    let from_page = watch(&mut page, &mut last, PATIENCE, |e| {
        matches!(e, EventBody::TurnFinished { .. })
    })
    .await;
    assert!(format!("{from_page:?}").contains("from the page on b 41"));

    // A file uploaded on B is in A's kernel; a link shared on B opens on A.
    let put = |overwrite: bool| {
        http()
            .put(b.url(&format!(
                "/api/sessions/{id}/files?path=t.csv&overwrite={overwrite}"
            )))
            .body(b"a,b\n1,2\n".to_vec())
            .send()
    };
    let uploaded = put(false).await.unwrap();
    assert_eq!(uploaded.status(), 201, "{:?}", uploaded.text().await);
    // A's refusal comes back as what it is.
    assert_eq!(put(false).await.unwrap().status(), 409, "exists already");
    let read = ask_at(
        &a_url,
        &id,
        "```python\nprint(open('t.csv').read().split()[1])\n```",
    )
    .await;
    assert!(format!("{read:?}").contains("1,2"), "{read:?}");
    let listed = http()
        .get(b.url(&format!("/api/sessions/{id}/files")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listed.contains("t.csv"), "{listed}");
    let shared: serde_json::Value = http()
        .post(b.url(&format!("/api/sessions/{id}/share?files=true")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let link = shared["token"].as_str().unwrap().to_string();
    let opened = http_as(None)
        .get(format!("{a_url}/s/{link}"))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    assert!(opened.text().await.unwrap().contains("from the page on b"));
    // The link's copy of the files is on A; B serves it, and a fork made
    // on B (held by B) starts with it.
    let shared_file = http_as(None)
        .get(b.url(&format!("/s/{link}/files?path=t.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(shared_file.status(), 200);
    assert_eq!(shared_file.bytes().await.unwrap().as_ref(), b"a,b\n1,2\n");
    let forked = http()
        .post(b.url(&format!("/s/{link}/fork")))
        .send()
        .await
        .unwrap();
    assert_eq!(forked.status(), 303);
    let fork_id = forked.headers()["location"]
        .to_str()
        .unwrap()
        .trim_start_matches("/sessions/")
        .to_string();
    let in_fork = ask(
        &b,
        &fork_id,
        "```python\nprint(open('t.csv').read().split()[1])\n```",
    )
    .await;
    assert!(format!("{in_fork:?}").contains("1,2"), "{in_fork:?}");
    let stranger = http_as(Some("5742a7e0000000000000000000000002"))
        .get(b.url(&format!("/api/sessions/{id}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 404, "someone else's session, on B too");

    // A turn runs long on A; A is killed in the middle of it.
    page.ask("```python\nimport time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n```")
        .await;
    watch(&mut page, &mut last, PATIENCE, |e| {
        matches!(e, EventBody::CellOutput { .. }) && format!("{e:?}").contains("tick")
    })
    .await;
    let before_kill = history(&b, &id).await;
    a.kill();

    // B takes the session over once A's lease lapses (20 s after its last
    // heartbeat): the cut-short cell and turn are closed and the kernel
    // marked lost, on the page B serves, with nothing A stored lost.
    let rest = watch(&mut page, &mut last, Duration::from_secs(60), |e| {
        matches!(e, EventBody::KernelLost { .. })
    })
    .await;
    assert!(
        rest.iter().any(|e| matches!(
            &e.event,
            EventBody::CellFinished {
                status: CellStatus::Error,
                ..
            }
        )),
        "{rest:?}"
    );
    assert_eq!(finished(&rest), Some(TurnStatus::Cancelled), "{rest:?}");
    assert!(matches!(
        rest.last().map(|e| &e.event),
        Some(EventBody::KernelLost {
            reason: KernelLoss::ServerRestart
        })
    ));
    let after = history(&b, &id).await;
    assert_eq!(
        after[..before_kill.len()],
        before_kill[..],
        "nothing stored is lost"
    );
    assert_eq!(after.last().map(|e| e.seq), Some(last));

    // The session goes on on B, in a new kernel.
    let more = ask(&b, &id, "```python\nprint('then on node b')\n```").await;
    assert!(format!("{more:?}").contains("then on node b"));

    // Both nodes restart (A on its own data directory): every session is
    // there, from either.
    let b = b.restart().await;
    b.ready().await;
    let (mut a, a_url) = node_process(a_data.path(), &db.url);
    let everything = history(&b, &id).await;
    assert!(everything.len() > after.len());
    // B, loading the session again, closed it with a `kernel_lost` that its
    // writer stores a moment later; A, following B, shows it once it is
    // stored.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let at_a = history_at(&a_url, &id).await;
        if at_a == everything {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "A never caught up with B: {:?} against {:?}",
            at_a.last(),
            everything.last()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = http()
        .get(format!("{a_url}/api/sessions"))
        .send()
        .await
        .unwrap();
    assert!(listed.text().await.unwrap().contains(&id));
    a.kill();
    drop(b);
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.drop_now().await;
}

/// Two web-only nodes on one database: no local jail, every session's code
/// on E2B (here runcell's own E2B-compatible endpoints on a third server,
/// as E2B's cloud is out of reach of the tests).
#[tokio::test]
async fn web_only_nodes_run_every_session_on_e2b() {
    let Some(db) = ScratchDatabase::create("web_nodes").await else {
        return;
    };
    let provider = TestServer::start().await;
    let key = provider.api_key("upstream").await;
    let web_node = || {
        let (url, key, base) = (db.url.clone(), key.clone(), provider.url(""));
        TestServer::start_configured(move |config| {
            config.database_url = url.as_str().into();
            config.sandbox.jail = false;
            config.e2b.api_key = key.as_str().into();
            config.e2b.api_url = base.clone();
            config.e2b.sandbox_url = base;
        })
    };
    let a = web_node().await;
    let b = web_node().await;
    a.ready().await;
    b.ready().await;
    let id = a.new_session().await;
    let program = "```python\nimport os\nprint('on e2b:', os.environ.get('E2B_SANDBOX'))\n```";
    for node in [&a, &b] {
        let events = ask(node, &id, program).await;
        assert!(format!("{events:?}").contains("on e2b: true"), "{events:?}");
    }
    // The jail is not on offer, and E2B's protocol is not served.
    let refused = http()
        .post(a.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({"code": "print(1)", "language": "python", "backend": "jail"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("jail"));
    let served = http().post(a.url("/sandboxes")).send().await.unwrap();
    assert_eq!(served.status(), 404);
    drop((a, b));
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.drop_now().await;
}

/// `runcell bench cluster`, small: events published on one node reach
/// pages on the other in order, all of them, and all are stored (the bench
/// fails otherwise).
#[tokio::test]
async fn the_cluster_bench_loses_nothing() {
    let Some(db) = ScratchDatabase::create("bench_cluster").await else {
        return;
    };
    runcell_bench::stream::run_cluster(
        runcell_bench::stream::StreamBenchOptions {
            sessions: 3,
            events_per_session: 60,
            interval: Duration::from_millis(2),
        },
        &db.url,
    )
    .await
    .unwrap();
    db.drop_now().await;
}

/// A node that was silent past its lease (cut off from the database, say)
/// but kept running: the session it held was taken over, so it retires its
/// copy. Its page is disconnected (to reconnect to the session as it is),
/// and what it is asked next goes to the new holder.
#[tokio::test]
async fn a_node_taken_over_while_silent_lets_the_session_go() {
    let Some(db) = ScratchDatabase::create("silent_node").await else {
        return;
    };
    let a = node(&db.url).await;
    let b = node(&db.url).await;
    a.ready().await;
    b.ready().await;
    let id = a.new_session().await;
    let first = ask(&a, &id, "```python\nprint('first on a')\n```").await;
    assert_eq!(finished(&first), Some(TurnStatus::Ok));
    let mut page = a.join(&id).await;

    // A misses its heartbeats (as the database sees it); B needs the
    // session and takes it over.
    let a_id = std::fs::read_to_string(a.data_dir().join("node-id")).unwrap();
    let pg = runcell_store::PostgresStore::open(&db.url).await.unwrap();
    sqlx::query("UPDATE nodes SET seen_ms = seen_ms - 60000 WHERE id = $1")
        .bind(a_id.trim())
        .execute(pg.pool())
        .await
        .unwrap();
    let on_b = ask(&b, &id, "```python\nprint('then on b')\n```").await;
    assert!(format!("{on_b:?}").contains("then on b"), "{on_b:?}");

    // A notices at its next sweep: its page is let go.
    loop {
        match page.next_within(Duration::from_secs(15)).await {
            None => break,
            Some(_) => continue,
        }
    }
    // Asked on A, done by B; both tell the same history.
    let again = ask(&a, &id, "```python\nprint('asked on a, run on b')\n```").await;
    assert!(
        format!("{again:?}").contains("asked on a, run on b"),
        "{again:?}"
    );
    assert_eq!(history(&a, &id).await, history(&b, &id).await);
    pg.close().await;
    drop((a, b));
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.drop_now().await;
}
