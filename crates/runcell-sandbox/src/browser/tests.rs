//! The Browser sandbox's server side, with the tests playing the page.
use super::*;
use crate::Limits;
use crate::limit_error;
use std::time::Duration;

fn quick() -> BrowserSettings {
    BrowserSettings {
        attach_wait: Duration::from_millis(300),
        gone_grace: Duration::from_millis(300),
        stop_grace: Duration::from_millis(300),
        prepare_wait: Duration::from_millis(300),
    }
}

/// Graces long enough that a test's page can come back or drain its
/// connection before they run out.
fn patient() -> BrowserSettings {
    BrowserSettings {
        attach_wait: Duration::from_secs(5),
        gone_grace: Duration::from_secs(5),
        stop_grace: Duration::from_secs(5),
        prepare_wait: Duration::from_secs(5),
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
        env: Vec::new(),
        cwd: None,
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

    /// The next run sent to the page, its program started at once, as a
    /// page whose Python is ready and has the packages starts it: its id
    /// and code (`fresh:` before the code when it must start from empty
    /// globals).
    async fn next_run(&mut self) -> (u64, String) {
        let (run, code) = self.next_run_unstarted().await;
        // A run that already ended: nothing to start.
        let _ = self.send(run, Reply::Started).await;
        (run, code)
    }

    /// The next run sent to the page, its program not started yet.
    async fn next_run_unstarted(&mut self) -> (u64, String) {
        match tokio::time::timeout(Duration::from_secs(5), self.rx.recv()).await {
            Ok(Some(ServerMessage::BrowserRun {
                run, code, fresh, ..
            })) => (run, if fresh { format!("fresh:{code}") } else { code }),
            other => panic!("expected a browser run, got {other:?}"),
        }
    }

    async fn expect_stop(&mut self, run: u64) {
        let next = tokio::time::timeout(Duration::from_secs(5), self.rx.recv()).await;
        assert_eq!(next, Ok(Some(ServerMessage::BrowserStop { run })));
    }

    /// The page's connection closes.
    fn close(&self) {
        self.tabs.detach(self.session, self.link.conn());
    }

    /// Another connection of the same session (a tab, or this tab again).
    fn another(&self) -> Self {
        Self::open(&self.tabs, self.session)
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
    attached_with(quick(), kernel).await
}

async fn attached_with(settings: BrowserSettings, kernel: &str) -> (Page, Box<dyn SandboxSession>) {
    let tabs = BrowserTabs::new(settings);
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

/// A new kernel of `page`'s session runs a program, and `page` (in Python
/// `python`) is the one asked to run it: it is the runner.
async fn runs_in(page: &mut Page, python_id: &str) {
    let kernel = page
        .tabs
        .sandbox(page.session)
        .open_session()
        .await
        .unwrap();
    let request = python("1");
    let (outcome, ()) = tokio::join!(run(&*kernel, &request), async {
        let (run, code) = page.next_run().await;
        assert_eq!(code, "fresh:1");
        page.done(run, python_id).await;
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
}

fn interrupted() -> Output {
    Output::Error {
        name: "KeyboardInterrupt".into(),
        value: String::new(),
        traceback: Vec::new(),
    }
}

fn known_sessions(tabs: &BrowserTabs) -> usize {
    tabs.sessions.lock().len()
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
        page.say(
            run,
            Output::Rich {
                data: value,
                main: false,
                metadata: String::new(),
                display_id: None,
            },
        )
        .await;
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
        page.close();
    });
    let err = kernel
        .run(&python("while True: pass"), None, &CancellationToken::new())
        .await
        .unwrap_err();
    page.await.unwrap();
    // Not the program's failure: the sandbox is unavailable.
    assert!(matches!(err, SandboxError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("went away"), "{err}");
}

#[tokio::test]
async fn a_python_that_starts_afresh_mid_run_ends_it_unless_it_was_stopping() {
    let (mut page, kernel) = attached("k").await;
    let (tabs, session) = (Arc::clone(&page.tabs), page.session);
    let cancel = CancellationToken::new();
    let page = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            // The page's Python restarts under the program.
            let _ = page.next_run().await;
            page.attach("k2");
            // Stopped, a program that would not stop: the page ends its
            // Python and starts another.
            let (run, _) = page.next_run().await;
            cancel.cancel();
            page.expect_stop(run).await;
            page.attach("k3");
        }
    });
    let err = kernel
        .run(&python("while True: pass"), None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("started afresh"), "{err}");
    // The next kernel runs in the new Python; its stop is what ends it.
    let kernel = tabs.sandbox(session).open_session().await.unwrap();
    let outcome = kernel
        .run(&python("while True: pass"), None, &cancel)
        .await
        .unwrap();
    page.await.unwrap();
    assert_eq!(outcome.error.unwrap().name, limit_error::CANCELLED);
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
async fn a_runs_wall_time_counts_from_its_programs_start() {
    let settings = BrowserSettings {
        prepare_wait: Duration::from_secs(2),
        ..quick()
    };
    let (mut page, kernel) = attached_with(settings, "k").await;
    let page = tokio::spawn(async move {
        // Packages load for longer than the program may run: not its time.
        let (run, _) = page.next_run_unstarted().await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        page.send(run, Reply::Started).await.unwrap();
        page.say(run, stdout("loaded\n")).await;
        page.done(run, "k").await;
        // A page that never starts the program: stopped after the prepare
        // wait and the wall time together.
        let (run, _) = page.next_run_unstarted().await;
        page.expect_stop(run).await;
        page.say(run, interrupted()).await;
        page.done(run, "k").await;
        // Started, then longer than the wall time: the program's own limit.
        let (run, _) = page.next_run().await;
        page.expect_stop(run).await;
        page.done(run, "k").await;
    });
    let mut short = python("import sympy");
    short.limits.wall = Duration::from_millis(300);
    let outcome = run(&*kernel, &short).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.stdout, "loaded\n");

    let started = std::time::Instant::now();
    let outcome = run(&*kernel, &short).await;
    let error = outcome.error.unwrap();
    assert_eq!(error.name, limit_error::TIMEOUT);
    assert!(
        error.value.contains("did not start the program within 2 s"),
        "{error:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(2_300));

    let outcome = run(&*kernel, &short).await;
    let error = outcome.error.unwrap();
    assert_eq!(error.name, limit_error::TIMEOUT);
    assert!(error.value.contains("ran longer than"), "{error:?}");
    page.await.unwrap();
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

fn rich(bytes: usize) -> Output {
    Output::Rich {
        data: [("text/html".to_string(), "x".repeat(bytes))].into(),
        main: false,
        metadata: String::new(),
        display_id: None,
    }
}

/// A page that sends more rich results than the budget allows, by size or
/// by count: what does not fit is dropped, the run is stopped with the
/// output error, and what is kept stays within the budget.
#[tokio::test]
async fn rich_results_past_the_budget_are_dropped_and_stop_the_run() {
    use crate::{MAX_RESULTS, serialized_len};
    // (sizes the page sends, results kept, what the error says)
    let cases = [
        (
            vec![200_000; 40],
            5,
            "a display of 200016 bytes was dropped",
        ),
        (vec![10; 100], MAX_RESULTS, "more than 64 results"),
    ];
    for (sizes, kept, says) in cases {
        let (mut page, kernel) = attached_with(patient(), "k").await;
        let page = tokio::spawn(async move {
            let (run, _) = page.next_run().await;
            for size in sizes {
                page.say(run, rich(size)).await;
            }
            page.expect_stop(run).await;
            page.done(run, "k").await;
        });
        let (events, mut received) = mpsc::channel(1024);
        let request = python("for _ in range(40): display(HTML('x' * 200_000))");
        let outcome = kernel
            .run(&request, Some(&events), &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        drop(events);
        let mut forwarded = 0;
        while let Some(event) = received.recv().await {
            forwarded += usize::from(matches!(event, RunEvent::Result { .. }));
        }
        assert_eq!(outcome.results.len(), kept);
        assert_eq!(forwarded, kept);
        assert!(serialized_len(&outcome.results) <= request.limits.output_bytes);
        assert!(outcome.truncated);
        let error = outcome.error.unwrap();
        assert_eq!(error.name, limit_error::OUTPUT);
        assert!(error.value.contains(says), "{error:?}");
    }
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

#[tokio::test]
async fn a_run_the_page_finished_before_its_python_restarted_is_not_lost() {
    // The page's done and its new Python arrive together; which the run
    // sees first is up to the scheduler, so try it many times.
    for _ in 0..20 {
        let (mut page, kernel) = attached("old").await;
        let (request, cancel) = (python("print(1)"), CancellationToken::new());
        let (outcome, ()) = tokio::join!(kernel.run(&request, None, &cancel), async {
            let (run, _) = page.next_run().await;
            page.say(run, stdout("1\n")).await;
            page.done(run, "old").await;
            page.attach("new");
        });
        let outcome = outcome.unwrap();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert_eq!(outcome.stdout, "1\n");
    }
}

#[tokio::test]
async fn a_stop_goes_to_the_connection_the_page_came_back_on() {
    let (mut first, kernel) = attached_with(patient(), "k").await;
    let cancel = CancellationToken::new();
    let page = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let (run, _) = first.next_run().await;
            // The socket drops; the same Python comes back on another one.
            first.close();
            let mut again = first.another();
            again.attach("k");
            cancel.cancel();
            again.expect_stop(run).await;
            again.say(run, interrupted()).await;
            again.done(run, "k").await;

            // The time limit passes while the page is away: the stop goes
            // to the connection it had...
            let (run, _) = again.next_run().await;
            again.close();
            again.expect_stop(run).await;
            // ...and again to the one it comes back on.
            let mut third = again.another();
            third.attach("k");
            third.expect_stop(run).await;
            third.done(run, "k").await;
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
async fn a_stop_waits_for_room_on_a_busy_connection() {
    let (mut page, kernel) = attached_with(patient(), "k").await;
    let cancel = CancellationToken::new();
    let page = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let (run, _) = page.next_run().await;
            // The connection is full of frames the page has not read yet.
            let filler = ServerMessage::BrowserStop { run: 0 };
            let mut queued = 0;
            while page.link.tx.try_send(filler.clone()).is_ok() {
                queued += 1;
            }
            cancel.cancel();
            // The run asks for the stop while there is no room for it.
            tokio::time::sleep(Duration::from_millis(100)).await;
            for _ in 0..queued {
                assert_eq!(page.rx.recv().await, Some(filler.clone()));
            }
            page.expect_stop(run).await;
            page.done(run, "k").await;
        }
    });
    let outcome = kernel
        .run(&python("while True: pass"), None, &cancel)
        .await
        .unwrap();
    page.await.unwrap();
    assert_eq!(outcome.error.unwrap().name, limit_error::CANCELLED);
}

#[tokio::test]
async fn another_page_of_the_session_waits_while_the_runner_lives() {
    let (mut page, kernel) = attached("a").await;
    let mut other = page.another();
    let request = python("print('a')");
    let (outcome, ()) = tokio::join!(run(&*kernel, &request), async {
        let (run, _) = page.next_run().await;
        // A second tab opens mid-run: it does not take the runner's place,
        // nor may it answer for it.
        other.attach("b");
        let forged = other.send(run, Reply::Done { kernel: "b".into() }).await;
        assert_eq!(forged, Err(BrowserError::NotAttached));
        page.say(run, stdout("a\n")).await;
        page.done(run, "a").await;
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.stdout, "a\n");
    // The next run goes to the runner too, in the same Python.
    let request = python("x");
    let (outcome, ()) = tokio::join!(run(&*kernel, &request), async {
        let (run, code) = page.next_run().await;
        assert_eq!(code, "x");
        page.done(run, "a").await;
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert!(other.rx.try_recv().is_err(), "the standby was sent nothing");
}

#[tokio::test]
async fn when_the_runner_closes_the_standby_that_attached_last_takes_over() {
    let (mut a, kernel) = attached("a").await;
    let mut b = a.another();
    b.attach("b");
    let mut c = a.another();
    c.attach("c");
    let request = python("x = 1");
    let (outcome, ()) = tokio::join!(run(&*kernel, &request), async {
        let (run, _) = a.next_run().await;
        a.done(run, "a").await;
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    a.close();
    // Another Python: the session's kernel is gone, as a reaped one is.
    let err = kernel
        .run(&python("x"), None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound(_)), "{err}");
    runs_in(&mut c, "c").await;
    assert!(
        b.rx.try_recv().is_err(),
        "the older standby was sent nothing"
    );
    c.close();
    runs_in(&mut b, "b").await;
}

#[tokio::test]
async fn a_reloaded_page_is_the_runner_again() {
    // The old socket closes before the new page attaches...
    let (first, _) = attached("before").await;
    first.close();
    let mut second = first.another();
    second.attach("after");
    runs_in(&mut second, "after").await;
    // ...or after it.
    let mut third = second.another();
    third.attach("again");
    second.close();
    runs_in(&mut third, "again").await;
}

#[tokio::test]
async fn a_runner_that_leaves_mid_run_keeps_its_place_for_the_grace() {
    let (mut a, kernel) = attached_with(patient(), "a").await;
    let mut b = a.another();
    b.attach("b");
    // Its socket drops and the same Python comes back: the run finishes
    // there, not in the standby.
    let request = python("print(1)");
    let (outcome, _again) = tokio::join!(run(&*kernel, &request), async move {
        let (run, _) = a.next_run().await;
        a.close();
        let again = a.another();
        again.attach("a");
        again.say(run, stdout("1\n")).await;
        again.done(run, "a").await;
        again
    });
    assert_eq!(outcome.stdout, "1\n");
    assert!(b.rx.try_recv().is_err(), "the standby was sent nothing");

    // It leaves for good: the run fails after the grace, then the standby
    // runs the session's programs.
    let tabs = BrowserTabs::new(quick());
    let session = SessionId::random();
    let (mut a, mut b) = (Page::open(&tabs, session), Page::open(&tabs, session));
    a.attach("a");
    b.attach("b");
    let kernel = tabs.sandbox(session).open_session().await.unwrap();
    let (request, cancel) = (python("1"), CancellationToken::new());
    let (err, ()) = tokio::join!(kernel.run(&request, None, &cancel), async {
        let _ = a.next_run().await;
        a.close();
    });
    assert!(matches!(err, Err(SandboxError::Unavailable(_))), "{err:?}");
    runs_in(&mut b, "b").await;
}

#[tokio::test]
async fn a_session_is_forgotten_when_nothing_is_left_of_it() {
    let tabs = BrowserTabs::new(quick());
    let session = SessionId::random();
    let a = Page::open(&tabs, session);
    a.attach("a");
    let b = a.another();
    b.attach("b");
    a.close();
    assert_eq!(known_sessions(&tabs), 1, "b is the runner now");
    b.close();
    assert_eq!(known_sessions(&tabs), 0);

    // A run that waits for a page keeps the session while it waits.
    let kernel = tabs.sandbox(session).open_session().await.unwrap();
    let mut late = Page::open(&tabs, session);
    let request = python("1");
    let (outcome, ()) = tokio::join!(run(&*kernel, &request), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Another connection of the session closes meanwhile.
        tabs.detach(session, 9999);
        late.attach("late");
        let (run, _) = late.next_run().await;
        late.done(run, "late").await;
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    late.close();
    assert_eq!(known_sessions(&tabs), 0);

    // Neither a run with no page nor one whose page went away leaves
    // anything behind.
    let kernel = tabs.sandbox(session).open_session().await.unwrap();
    assert!(run_err(&*kernel).await.is_some());
    assert_eq!(known_sessions(&tabs), 0);
    let mut gone = Page::open(&tabs, session);
    gone.attach("gone");
    let (err, ()) = tokio::join!(run_err(&*kernel), async {
        let _ = gone.next_run().await;
        gone.close();
    });
    assert!(err.is_some());
    assert_eq!(known_sessions(&tabs), 0);
}

async fn run_err(kernel: &dyn SandboxSession) -> Option<SandboxError> {
    kernel
        .run(&python("1"), None, &CancellationToken::new())
        .await
        .err()
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

/// A page's result: a frame's data comes as JSON text and is passed on as
/// JSON, as a kernel's; data that is not a JSON object is left out, and
/// every other value stays text (JSON or not).
#[test]
fn a_frames_data_from_the_page_is_json_and_anything_else_stays_text() {
    use serde_json::json;
    let table = crate::TABLE_DATA_MIME;
    let cases = [
        (
            r#"{"columns":["","a"],"index_columns":1,"rows":[["0","1"]],"total_rows":1}"#,
            Some(
                json!({"columns": ["", "a"], "index_columns": 1, "rows": [["0", "1"]], "total_rows": 1}),
            ),
        ),
        (r#"["not", "an", "object"]"#, None),
        ("{not json", None),
        ("", None),
        ("\"text\"", None),
    ];
    for (text, expected) in cases {
        let data = [
            (table.to_string(), text.to_string()),
            ("text/plain".to_string(), "{\"a\": 1}".to_string()),
        ]
        .into();
        let read = session::result_data(data);
        assert_eq!(read.get(table), expected.as_ref(), "{text}");
        assert_eq!(read.get("text/plain"), Some(&json!("{\"a\": 1}")), "{text}");
    }
}

/// The worker's Python (public/py-worker.mjs) with real pandas, the
/// sandbox's Python's (Pyodide's own builds are not reachable here): a
/// frame or series printed alone is shown as a bundle with its data, after
/// what was printed before it, its text exactly as print writes it; any
/// other print is print; a frame's bundle has its data.
#[test]
fn the_workers_python_shows_a_frame_printed_alone_as_the_jail_does() {
    use serde_json::{Value, json};
    let python = format!("{}/bin/python3", crate::jail::PYTHON_ENV);
    let has_pandas = std::process::Command::new(&python)
        .args(["-I", "-c", "import pandas"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_pandas {
        eprintln!("skipped: no {python} with pandas (scripts/setup.sh makes it)");
        return;
    }
    let frame = "import pandas as pd, sys\n\
        df = pd.DataFrame({'region': ['north', 'south', 'east'], 'units': [10, 30, 20], 'share': [0.1, 0.25, 1/3]})\n";
    let printed = "  region  units     share\n0  north     10  0.100000\n1  south     30  0.250000\n2   east     20  0.333333";
    let table = |rows: Value| json!({"columns": ["", "region", "units", "share"], "index_columns": 1, "rows": rows, "total_rows": 3});
    // (program after `frame`, what it shows)
    let cases: [(&str, Value); 8] = [
        (
            "print('Top regions:')\nprint(df.sort_values('units', ascending=False))",
            json!([
                ["out", "Top regions:\n"],
                [
                    "shown",
                    "  region  units     share\n1  south     30  0.250000\n2   east     20  0.333333\n0  north     10  0.100000",
                    table(json!([
                        ["1", "south", "30", "0.250000"],
                        ["2", "east", "20", "0.333333"],
                        ["0", "north", "10", "0.100000"],
                    ]))
                ]
            ]),
        ),
        (
            "print(df['units'].rename('u'))",
            json!([["shown", "0    10\n1    30\n2    20\nName: u, dtype: int64", {"columns": ["", "u"], "index_columns": 1, "rows": [["0", "10"], ["1", "30"], ["2", "20"]], "total_rows": 3}]]),
        ),
        (
            "print('rows:', df)",
            json!([["out", format!("rows: {printed}\n")]]),
        ),
        ("print(df, end='')", json!([["out", printed]])),
        (
            "print(df, file=sys.stderr)",
            json!([["err", format!("{printed}\n")]]),
        ),
        (
            "print(df.head(0))",
            json!([[
                "out",
                "Empty DataFrame\nColumns: [region, units, share]\nIndex: []\n"
            ]]),
        ),
        (
            "df.columns = pd.MultiIndex.from_tuples([('a', 'r'), ('a', 'u'), ('b', 's')])\nprint(df[[('a', 'u')]])",
            json!([["out", "    a\n    u\n0  10\n1  30\n2  20\n"]]),
        ),
        (
            "_ = df",
            json!([[
                "bundle",
                [
                    "application/vnd.runcell.table+json",
                    "text/html",
                    "text/plain"
                ]
            ]]),
        ),
    ];
    let programs: Vec<String> = cases
        .iter()
        .map(|(program, _)| format!("{frame}{program}"))
        .collect();
    let mut child = std::process::Command::new(&python)
        .args(["-I", "-c", include_str!("worker_tables.py")])
        .arg(serde_json::to_string(&programs).unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(include_bytes!("../../../../public/py-worker.mjs"))
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), cases.len());
    for ((program, expected), mut got) in cases.into_iter().zip(lines) {
        // A shown bundle: its text (exactly as print writes it) and its
        // data, beside pandas' HTML.
        for event in got.as_array_mut().unwrap() {
            if event[0] == "shown" {
                let mut bundle = event[1].as_object().unwrap().clone();
                assert!(bundle["text/html"].as_str().unwrap().contains("<table"));
                *event = json!([
                    "shown",
                    bundle.remove("text/plain").unwrap(),
                    bundle.remove(crate::TABLE_DATA_MIME).unwrap(),
                ]);
            }
        }
        assert_eq!(got, expected, "{program}");
    }
}
