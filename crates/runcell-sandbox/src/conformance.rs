//! The behaviour every sandbox backend owes, as `pub async fn`s that each
//! backend's tests call (the object_store pattern). A check panics with a
//! message saying what the backend did instead.
//!
//! Checks consult the backend's [`Capabilities`]: what a backend does not
//! claim is skipped, and each skip is said on stderr (`SKIPPED: ...`), never
//! passed in silence. Claiming less does not make a backend pass: the
//! suite's programs are Python, so every backend must claim Python; every
//! run check runs in a session, which every backend opens (and in one-shot
//! runs too, where the backend claims them); and
//! [`refuses_what_it_does_not_claim`] checks that whatever a backend leaves
//! out is refused plainly rather than half there.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    Capabilities, Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError,
    SandboxSession, SandboxSessionExt,
};

fn request(code: &str, language: Language, wall: Duration) -> RunRequest {
    RunRequest {
        code: code.into(),
        language,
        limits: Limits {
            wall,
            ..Limits::default()
        },
        env: Vec::new(),
        cwd: None,
    }
}

/// The backend's claims, once it meets the floor every backend must: the
/// suite's programs are Python.
fn claims(sandbox: &dyn Sandbox) -> Capabilities {
    let caps = sandbox.capabilities();
    assert!(
        caps.languages.contains(&Language::Python),
        "{} claims no Python: the suite's programs are Python, so it cannot pass",
        caps.backend
    );
    caps
}

/// Says that part of `check` is skipped for `caps`' backend, and why.
fn skip(caps: &Capabilities, check: &str, why: &str) {
    eprintln!("SKIPPED: {} {check}: {why}", caps.backend);
}

async fn open(sandbox: &dyn Sandbox) -> Box<dyn SandboxSession> {
    sandbox
        .open_session()
        .await
        .unwrap_or_else(|e| panic!("{} open_session: {e}", sandbox.capabilities().backend))
}

/// Where a check runs its programs.
enum Place {
    /// [`Sandbox::run`]: a fresh environment for each program.
    OneShot,
    /// A session of the backend's, closed when the check is done with it.
    Session(Box<dyn SandboxSession>),
}

impl Place {
    fn name(&self) -> &'static str {
        match self {
            Self::OneShot => "one-shot run",
            Self::Session(_) => "session",
        }
    }

    async fn run(
        &self,
        sandbox: &dyn Sandbox,
        request: RunRequest,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        match self {
            Self::OneShot => sandbox.run(request, events, cancel).await,
            Self::Session(session) => session.run(&request, events.as_ref(), &cancel).await,
        }
    }

    /// After a run that was stopped, a session still runs programs (a
    /// one-shot run has nothing left to check).
    async fn goes_on(&self, sandbox: &dyn Sandbox) {
        if let Self::Session(_) = self {
            let after = self
                .run(
                    sandbox,
                    request("print('after')", Language::Python, Duration::from_secs(20)),
                    None,
                    CancellationToken::new(),
                )
                .await
                .unwrap_or_else(|e| panic!("a run after a stopped one failed: {e}"));
            assert_eq!(
                after.stdout, "after\n",
                "a session must go on after a stopped run: {after:?}"
            );
        }
    }

    async fn close(self) {
        if let Self::Session(session) = self {
            session.close().await;
        }
    }
}

/// Every place `sandbox` runs programs: one-shot runs where it claims them
/// (the skip said otherwise), then a session of its own.
async fn places(sandbox: &dyn Sandbox, check: &str) -> Vec<Place> {
    let caps = claims(sandbox);
    let mut places = Vec::new();
    if caps.one_shot {
        places.push(Place::OneShot);
    } else {
        skip(
            &caps,
            check,
            "one-shot runs are not claimed; checked in a session alone",
        );
    }
    places.push(Place::Session(open(sandbox).await));
    places
}

fn hello(language: Language) -> &'static str {
    match language {
        Language::Python => "print('hello')",
        Language::Javascript => "console.log('hello')",
        Language::Typescript => "const greeting: string = 'hello';\nconsole.log(greeting)",
        Language::R => "cat('hello\\n')",
        Language::Java => "System.out.println(\"hello\")",
        Language::Bash => "echo hello",
        Language::C => "#include <stdio.h>\nint main(void){puts(\"hello\");}",
    }
}

/// Every language the backend claims says hello on stdout, without error.
pub async fn says_hello_in_every_language(sandbox: &dyn Sandbox) {
    let languages = claims(sandbox).languages;
    for place in places(sandbox, "says_hello_in_every_language").await {
        let at = place.name();
        for &language in &languages {
            let outcome = place
                .run(
                    sandbox,
                    request(hello(language), language, Duration::from_secs(20)),
                    None,
                    CancellationToken::new(),
                )
                .await
                .unwrap_or_else(|e| panic!("{language:?} run failed ({at}): {e}"));
            assert_eq!(
                outcome.stdout, "hello\n",
                "{language:?} ({at}): {outcome:?}"
            );
            assert!(outcome.error.is_none(), "{language:?} ({at}): {outcome:?}");
            assert_eq!(
                outcome.exit_code.unwrap_or(0),
                0,
                "{language:?} ({at}): {outcome:?}"
            );
        }
        place.close().await;
    }
}

/// Output is streamed as it is produced, in order, and matches the summary.
pub async fn streams_output_in_order(sandbox: &dyn Sandbox) {
    for place in places(sandbox, "streams_output_in_order").await {
        let at = place.name();
        let (sender, mut receiver) = mpsc::channel(64);
        let code = "import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)\nprint('oops', file=sys.stderr)";
        let outcome = place
            .run(
                sandbox,
                request(code, Language::Python, Duration::from_secs(20)),
                Some(sender),
                CancellationToken::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("streaming run failed ({at}): {e}"));
        let mut stdout = String::new();
        let mut chunks = 0;
        let mut last_ts = 0;
        while let Ok(event) = receiver.try_recv() {
            let ts = match &event {
                RunEvent::Stdout { text, ts_ms } => {
                    stdout.push_str(text);
                    chunks += 1;
                    *ts_ms
                }
                other => other.ts_ms(),
            };
            assert!(ts >= last_ts, "events out of order ({at})");
            last_ts = ts;
        }
        assert_eq!(stdout, "0\n1\n2\n", "{at}");
        assert!(
            chunks >= 2,
            "stdout came in {chunks} chunk(s) ({at}): not streamed"
        );
        assert_eq!(outcome.stdout, stdout, "{at}");
        assert!(outcome.stderr.contains("oops"), "{at}: {outcome:?}");
        place.close().await;
    }
}

/// A run past its wall time is stopped and reported as `Timeout`; a
/// session goes on after it.
pub async fn stops_runs_at_the_time_limit(sandbox: &dyn Sandbox) {
    for place in places(sandbox, "stops_runs_at_the_time_limit").await {
        let at = place.name();
        let outcome = place
            .run(
                sandbox,
                request("while True: pass", Language::Python, Duration::from_secs(1)),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("run failed ({at}): {e}"));
        assert_eq!(
            outcome.error.map(|e| e.name),
            Some("Timeout".to_string()),
            "{at}"
        );
        place.goes_on(sandbox).await;
        place.close().await;
    }
}

/// Cancelling stops a run promptly and says so; a session goes on after
/// it. Skipped for a backend that does not claim `interrupt`.
pub async fn cancels_runs(sandbox: &dyn Sandbox) {
    let caps = claims(sandbox);
    if !caps.interrupt {
        skip(&caps, "cancels_runs", "interrupting a run is not claimed");
        return;
    }
    for place in places(sandbox, "cancels_runs").await {
        let at = place.name();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let outcome = place
            .run(
                sandbox,
                request(
                    "import time\ntime.sleep(60)",
                    Language::Python,
                    Duration::from_secs(60),
                ),
                None,
                cancel,
            )
            .await
            .unwrap_or_else(|e| panic!("run failed ({at}): {e}"));
        assert_eq!(
            outcome.error.map(|e| e.name),
            Some("Cancelled".to_string()),
            "{at}"
        );
        place.goes_on(sandbox).await;
        place.close().await;
    }
}

/// Bad programs are refused before anything runs.
pub async fn refuses_bad_programs(sandbox: &dyn Sandbox) {
    for place in places(sandbox, "refuses_bad_programs").await {
        let at = place.name();
        for code in ["x".repeat(super::MAX_CODE_BYTES + 1), "print(1)\0".into()] {
            let result = place
                .run(
                    sandbox,
                    request(&code, Language::Python, Duration::from_secs(5)),
                    None,
                    CancellationToken::new(),
                )
                .await;
            assert!(
                matches!(result, Err(SandboxError::InvalidInput(_))),
                "{at}: {result:?}"
            );
        }
        place.close().await;
    }
}

/// What a backend does not claim is refused plainly, not half there: a
/// one-shot run with `NotSupported`, a language it does not name with
/// `InvalidInput` (in a session, and in a one-shot run where it has them),
/// execution contexts with `NotSupported`; and its sessions offer files and
/// contexts exactly when it claims them.
pub async fn refuses_what_it_does_not_claim(sandbox: &dyn Sandbox) {
    let caps = claims(sandbox);
    let backend = caps.backend;
    let quick = |language: Language| request(hello(language), language, Duration::from_secs(20));
    if !caps.one_shot {
        let result = sandbox
            .run(quick(Language::Python), None, CancellationToken::new())
            .await;
        assert!(
            matches!(result, Err(SandboxError::NotSupported(_))),
            "{backend} claims no one-shot runs, yet: {result:?}"
        );
    }
    let session = open(sandbox).await;
    assert_eq!(
        session.files().is_some(),
        caps.files,
        "{backend}: a session's files must be there exactly when claimed"
    );
    assert_eq!(
        session.contexts().is_some(),
        caps.contexts,
        "{backend}: a session's contexts must be there exactly when claimed"
    );
    if !caps.contexts {
        let result = session.create_context(Language::Python, None).await;
        assert!(
            matches!(result, Err(SandboxError::NotSupported(_))),
            "{backend} claims no contexts, yet: {result:?}"
        );
    }
    let token = CancellationToken::new();
    for language in Language::ALL {
        if caps.languages.contains(&language) {
            continue;
        }
        let result = session.run(&quick(language), None, &token).await;
        assert!(
            matches!(result, Err(SandboxError::InvalidInput(_))),
            "{backend} claims no {language:?}, yet its session: {result:?}"
        );
        if caps.one_shot {
            let result = sandbox
                .run(quick(language), None, CancellationToken::new())
                .await;
            assert!(
                matches!(result, Err(SandboxError::InvalidInput(_))),
                "{backend} claims no {language:?}, yet its one-shot run: {result:?}"
            );
        }
    }
    session.close().await;
}

/// A session's program gives the value of its last expression as the main
/// result (`text/plain`, its repr), and an exception by its name and
/// message, after what it printed before it.
pub async fn sessions_report_values_and_errors(sandbox: &dyn Sandbox) {
    claims(sandbox);
    let session = open(sandbox).await;
    let token = CancellationToken::new();
    let quick = |code: &str| request(code, Language::Python, Duration::from_secs(20));
    let (sender, mut receiver) = mpsc::channel(64);
    let valued = session
        .run(&quick("value = 6 * 7\nvalue"), Some(&sender), &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(sender);
    assert!(valued.error.is_none(), "{valued:?}");
    let plain: Vec<_> = valued
        .results
        .iter()
        .map(|bundle| bundle.get("text/plain").and_then(|text| text.as_str()))
        .collect();
    assert_eq!(
        plain,
        [Some("42")],
        "the last value is the result: {valued:?}"
    );
    let mut mains = 0;
    while let Some(event) = receiver.recv().await {
        if let RunEvent::Result { main, .. } = event {
            assert!(main, "the last value is the main result");
            mains += 1;
        }
    }
    assert_eq!(mains, 1, "the result is streamed once");
    let failed = session
        .run(&quick("print('before')\n1 / 0"), None, &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed.stdout, "before\n", "{failed:?}");
    let error = failed
        .error
        .unwrap_or_else(|| panic!("an exception must be the run's error"));
    assert_eq!(error.name, "ZeroDivisionError", "{error:?}");
    assert!(error.value.contains("division by zero"), "{error:?}");
    session.close().await;
}

/// A session keeps files between runs (and variables, if stateful), and two
/// sessions share nothing: no files where `isolated_sessions` is claimed,
/// no variables in any case.
pub async fn sessions_keep_state_and_stay_apart(sandbox: &dyn Sandbox) {
    let caps = claims(sandbox);
    let first = open(sandbox).await;
    let second = open(sandbox).await;
    let token = CancellationToken::new();
    let quick = |code: &str| request(code, Language::Python, Duration::from_secs(20));
    let wrote = first
        .run(
            &quick("open('note.txt','w').write('kept')\nvalue = 6 * 7"),
            None,
            &token,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(wrote.error.is_none(), "{wrote:?}");
    let read = first
        .run(&quick("print(open('note.txt').read())"), None, &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read.stdout, "kept\n", "files must last within a session");
    if caps.stateful {
        let value = first
            .run(&quick("print(value)"), None, &token)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            value.stdout, "42\n",
            "variables must last in a stateful session"
        );
    } else {
        skip(
            &caps,
            "sessions_keep_state_and_stay_apart",
            "stateful sessions are not claimed; variables not checked",
        );
    }
    if caps.isolated_sessions {
        let other = second
            .run(
                &quick("import os\nprint(os.path.exists('note.txt'))"),
                None,
                &token,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(other.stdout, "False\n", "sessions must not share files");
    } else {
        skip(
            &caps,
            "sessions_keep_state_and_stay_apart",
            "isolated sessions are not claimed; not checked that two share no files",
        );
    }
    // Isolated or not, a new session starts with variables of its own.
    let fresh = second
        .run(&quick("print('value' in dir())"), None, &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fresh.stdout, "False\n",
        "a new session must not see another's variables"
    );
    assert_ne!(first.id(), second.id());
    first.close().await;
    second.close().await;
}

/// A session's files: written from outside, read by the code; written by
/// the code, read from outside; listed; and nothing outside the home.
///
/// Skipped for a backend that does not claim `files`.
pub async fn session_files_go_both_ways(sandbox: &dyn Sandbox) {
    let caps = claims(sandbox);
    if !caps.files {
        skip(
            &caps,
            "session_files_go_both_ways",
            "a session's files are not claimed",
        );
        return;
    }
    let session = open(sandbox).await;
    let files = session
        .files()
        .unwrap_or_else(|| panic!("{} claims files but has none", caps.backend));
    let token = CancellationToken::new();
    let quick = |code: &str| request(code, Language::Python, Duration::from_secs(20));
    let entry = files
        .write("/home/user/in/data.csv", b"a,b\n1,2\n3,4\n".to_vec().into())
        .await
        .unwrap_or_else(|e| panic!("write: {e}"));
    assert_eq!(entry.path, "/home/user/in/data.csv");
    assert_eq!(entry.size, 12, "{entry:?}");
    let counted = session
        .run(
            &quick("print(sum(1 for _ in open('in/data.csv')) - 1)\nopen('out.txt','w').write('made by code')"),
            None,
            &token,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        counted.stdout, "2\n",
        "the code must see the file: {counted:?}"
    );
    let made = files
        .read("out.txt")
        .await
        .unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(made, b"made by code");
    let names: Vec<String> = files
        .list("/home/user", 1)
        .await
        .unwrap_or_else(|e| panic!("list: {e}"))
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(
        names.contains(&"in".to_string()) && names.contains(&"out.txt".to_string()),
        "{names:?}"
    );
    for outside in [
        "/etc/passwd",
        "../../etc/passwd",
        "/home/user/../../etc/hostname",
    ] {
        assert!(
            matches!(
                files.read(outside).await,
                Err(SandboxError::InvalidInput(_))
            ),
            "{outside} must be refused"
        );
    }
    assert!(matches!(
        files.read("missing.txt").await,
        Err(SandboxError::NotFound(_))
    ));
    files
        .remove("in")
        .await
        .unwrap_or_else(|e| panic!("remove: {e}"));
    assert!(matches!(
        files.stat("in/data.csv").await,
        Err(SandboxError::NotFound(_))
    ));
    session.close().await;
}

/// A context made in a session keeps its own variables, apart from the
/// session's own, and shares its files. Skipped for a backend that does
/// not claim `contexts`.
pub async fn contexts_keep_their_own_state(sandbox: &dyn Sandbox) {
    let caps = claims(sandbox);
    if !caps.contexts {
        skip(
            &caps,
            "contexts_keep_their_own_state",
            "execution contexts are not claimed",
        );
        return;
    }
    let session = open(sandbox).await;
    let token = CancellationToken::new();
    let quick = |code: &str| request(code, Language::Python, Duration::from_secs(20));
    let context = session
        .create_context(Language::Python, Some("/home/user"))
        .await
        .unwrap_or_else(|e| panic!("create_context: {e}"));
    let run_in = |code: &'static str| {
        let session = &session;
        let context = &context;
        let token = &token;
        async move {
            session
                .run_in_context(context, &quick(code), None, token)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    run_in("mine = 'context'\nopen('shared.txt','w').write('from the context')").await;
    session
        .run(&quick("mine = 'session'"), None, &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run_in("print(mine)").await.stdout, "context\n");
    let own = session
        .run(
            &quick("print(mine, open('shared.txt').read())"),
            None,
            &token,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(own.stdout, "session from the context\n");
    session
        .restart_context(&context)
        .await
        .unwrap_or_else(|e| panic!("restart_context: {e}"));
    let fresh = run_in("print('mine' in dir())").await;
    assert_eq!(fresh.stdout, "False\n", "a restarted context starts afresh");
    session
        .delete_context(&context)
        .await
        .unwrap_or_else(|e| panic!("delete_context: {e}"));
    assert!(matches!(
        session
            .run_in_context(&context, &quick("1"), None, &token)
            .await,
        Err(SandboxError::NotFound(_))
    ));
    session.close().await;
}
