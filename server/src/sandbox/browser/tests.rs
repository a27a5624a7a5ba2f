//! The Browser sandbox's server side, with the tests playing the page.
use super::*;
use crate::sandbox::Limits;
use crate::sandbox::limit_error;
use std::time::Duration;

fn quick() -> BrowserSettings {
    BrowserSettings {
        attach_wait: Duration::from_millis(300),
        gone_grace: Duration::from_millis(300),
        stop_grace: Duration::from_millis(300),
    }
}

fn python(code: &str) -> RunRequest {
    RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: Limits {
            wall: Duration::from_secs(5),
            ..Limits::default()
        },
    }
}

fn stdout(text: &str) -> Output {
    Output::Stdout { text: text.into() }
}

/// A page as the tests play it: a connection of `session`'s.
struct Page {
    tabs: Arc<BrowserTabs>,
    session: SessionId,
    link: TabLink,
    rx: mpsc::Receiver<ServerMessage>,
}

impl Page {
    fn open(tabs: &Arc<BrowserTabs>, session: SessionId) -> Self {
        let (link, rx) = tabs.link();
        Self {
            tabs: Arc::clone(tabs),
            session,
            link,
            rx,
        }
    }

    fn attach(&self, kernel: &str) {
        self.tabs.attach(self.session, &self.link, kernel).unwrap();
    }

    /// The next run sent to the page: its id and code (`fresh:` before
    /// the code when it must start from empty globals).
    async fn next_run(&mut self) -> (u64, String) {
        match tokio::time::timeout(Duration::from_secs(5), self.rx.recv()).await {
            Ok(Some(ServerMessage::BrowserRun {
                run, code, fresh, ..
            })) => (run, if fresh { format!("fresh:{code}") } else { code }),
            other => panic!("expected a browser run, got {other:?}"),
        }
    }

    async fn expect_stop(&mut self, run: u64) {
        assert_eq!(
            self.rx.recv().await,
            Some(ServerMessage::BrowserStop { run })
        );
    }

    async fn send(&self, run: u64, reply: Reply) -> Result<(), BrowserError> {
        self.tabs
            .reply(self.session, self.link.conn(), run, reply)
            .await
    }

    async fn say(&self, run: u64, output: Output) {
        self.send(run, Reply::Output(output)).await.unwrap();
    }

    async fn done(&self, run: u64, kernel: &str) {
        self.send(
            run,
            Reply::Done {
                kernel: kernel.into(),
            },
        )
        .await
        .unwrap();
    }
}

/// A session with a page attached in Python `kernel`, and a kernel of
/// the session's.
async fn attached(kernel: &str) -> (Page, Box<dyn SandboxSession>) {
    let tabs = BrowserTabs::new(quick());
    let session = SessionId::random();
    let page = Page::open(&tabs, session);
    page.attach(kernel);
    let sandbox = tabs.sandbox(session).open_session().await.unwrap();
    (page, sandbox)
}

async fn run(kernel: &dyn SandboxSession, request: &RunRequest) -> RunOutcome {
    kernel
        .run(request, None, &CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_run_goes_to_the_attached_page_and_its_replies_come_back() {
    let (mut page, kernel) = attached("k1").await;
    let (events_tx, mut events) = mpsc::channel(16);
    let page = tokio::spawn(async move {
        let (run, code) = page.next_run().await;
        assert_eq!(
            code, "fresh:print(1)",
            "a new kernel starts from empty globals"
        );
        page.say(run, stdout("1\n")).await;
        let value = [("text/plain".to_string(), "2".to_string())].into();
        page.say(run, Output::Rich { data: value }).await;
        page.done(run, "k1").await;
        // The run is over: its id is not answerable any more.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let late = page
            .send(
                run,
                Reply::Done {
                    kernel: "k1".into(),
                },
            )
            .await;
        assert_eq!(late, Err(BrowserError::UnknownRun(run)));
        page
    });
    let outcome = kernel
        .run(
            &python("print(1)"),
            Some(&events_tx),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "1\n");
    assert_eq!(outcome.results.len(), 1);
    assert!(outcome.error.is_none());
    assert!(matches!(events.recv().await, Some(RunEvent::Stdout { text, .. }) if text == "1\n"));
    assert!(matches!(
        events.recv().await,
        Some(RunEvent::Result { main: true, .. })
    ));
    let mut page = page.await.unwrap();

    // The second run keeps the globals.
    let page = tokio::spawn(async move {
        let (run, code) = page.next_run().await;
        assert_eq!(code, "x");
        page.done(run, "k1").await;
    });
    assert!(run(&*kernel, &python("x")).await.error.is_none());
    page.await.unwrap();
}

#[tokio::test]
async fn only_the_attached_page_may_answer() {
    let tabs = BrowserTabs::new(quick());
    let session = SessionId::random();
    let page = Page::open(&tabs, session);
    let other = Page::open(&tabs, session);
    for bad in ["", "no spaces", &"k".repeat(65)] {
        assert_eq!(
            tabs.attach(session, &page.link, bad),
            Err(BrowserError::BadKernel),
            "{bad:?}"
        );
    }
    let done = || Reply::Done { kernel: "k".into() };
    assert_eq!(page.send(1, done()).await, Err(BrowserError::NotAttached));
    page.attach("k");
    assert_eq!(other.send(1, done()).await, Err(BrowserError::NotAttached));
    assert_eq!(
        page.send(99, done()).await,
        Err(BrowserError::UnknownRun(99))
    );
    // Another session's run is not this page's to answer.
    let (run, _replies) = tabs.start_run(SessionId::random());
    assert_eq!(
        page.send(run, done()).await,
        Err(BrowserError::UnknownRun(run))
    );
}

#[tokio::test]
async fn with_no_page_a_run_fails_clearly() {
    let tabs = BrowserTabs::new(quick());
    let kernel = tabs
        .sandbox(SessionId::random())
        .open_session()
        .await
        .unwrap();
    let err = kernel
        .run(&python("1"), None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("pick Browser"), "{err}");
}

#[tokio::test]
async fn a_page_that_goes_away_ends_the_run_after_the_grace() {
    let (mut page, kernel) = attached("k").await;
    let page = tokio::spawn(async move {
        let _ = page.next_run().await;
        page.tabs.detach(page.session, page.link.conn());
    });
    let outcome = run(&*kernel, &python("while True: pass")).await;
    page.await.unwrap();
    assert_eq!(outcome.error.unwrap().name, "BrowserGone");
}

#[tokio::test]
async fn a_page_that_comes_back_finishes_the_run() {
    let (mut page, kernel) = attached("k").await;
    let page = tokio::spawn(async move {
        let (run, _) = page.next_run().await;
        page.tabs.detach(page.session, page.link.conn());
        // The same Python reconnects on a new socket.
        let again = Page::open(&page.tabs, page.session);
        again.attach("k");
        again.say(run, stdout("late\n")).await;
        again.done(run, "k").await;
    });
    let outcome = run(&*kernel, &python("print('late')")).await;
    page.await.unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.stdout, "late\n");
}

#[tokio::test]
async fn stop_and_the_time_limit_ask_the_page_to_stop() {
    let (mut page, kernel) = attached("k").await;
    let cancel = CancellationToken::new();
    let page = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let (run, _) = page.next_run().await;
            cancel.cancel();
            page.expect_stop(run).await;
            let interrupted = Output::Error {
                name: "KeyboardInterrupt".into(),
                value: String::new(),
                traceback: Vec::new(),
            };
            page.say(run, interrupted).await;
            page.done(run, "k").await;
            // A page that never confirms: the run ends anyway.
            let (run, _) = page.next_run().await;
            page.expect_stop(run).await;
        }
    });
    let outcome = kernel
        .run(&python("while True: pass"), None, &cancel)
        .await
        .unwrap();
    assert_eq!(outcome.error.unwrap().name, limit_error::CANCELLED);
    let mut quick_wall = python("while True: pass");
    quick_wall.limits.wall = Duration::from_millis(200);
    let outcome = run(&*kernel, &quick_wall).await;
    page.await.unwrap();
    assert_eq!(outcome.error.unwrap().name, limit_error::TIMEOUT);
}

#[tokio::test]
async fn output_past_the_limit_is_cut_and_stops_the_run() {
    let (mut page, kernel) = attached("k").await;
    let page = tokio::spawn(async move {
        let (run, _) = page.next_run().await;
        for _ in 0..3 {
            page.say(run, stdout(&"x".repeat(60))).await;
        }
        page.expect_stop(run).await;
        page.done(run, "k").await;
    });
    let mut request = python("while True: print('x' * 60)");
    request.limits.output_bytes = 100;
    let outcome = run(&*kernel, &request).await;
    page.await.unwrap();
    assert_eq!(outcome.stdout.len(), 100);
    assert!(outcome.truncated);
    assert_eq!(outcome.error.unwrap().name, limit_error::OUTPUT);
}

#[tokio::test]
async fn a_restarted_page_python_is_a_new_kernel() {
    let (mut page, kernel) = attached("first").await;
    let page = tokio::spawn(async move {
        let (run, _) = page.next_run().await;
        page.done(run, "first").await;
        page.attach("second");
    });
    run(&*kernel, &python("x = 1")).await;
    page.await.unwrap();
    let err = kernel
        .run(&python("x"), None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound(_)), "{err}");
    let bash = RunRequest {
        language: Language::Bash,
        ..python("ls")
    };
    let err = kernel
        .run(&bash, None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::InvalidInput(_)), "{err}");
}

#[test]
fn the_runtime_is_found_in_the_site() {
    let site = tempfile::tempdir().unwrap();
    assert_eq!(find_runtime(site.path()), None);
    let dir = site.path().join("pyodide/314.0.7-abc");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(find_runtime(site.path()), None, "no loader, no runtime");
    std::fs::write(dir.join("pyodide.mjs"), "export {}").unwrap();
    let runtime = find_runtime(site.path()).unwrap();
    assert_eq!(runtime.url, "/pyodide/314.0.7-abc/");
    assert!(runtime.imports.is_empty(), "no lock file, no packages");
    std::fs::write(
        dir.join("pyodide-lock.json"),
        r#"{"packages":{"sympy":{"imports":["isympy","sympy"]},"six":{"imports":["six"]}}}"#,
    )
    .unwrap();
    let runtime = find_runtime(site.path()).unwrap();
    assert_eq!(runtime.imports, ["isympy", "six", "sympy"]);
}
