//! The behaviour every sandbox backend owes, as `pub async fn`s that each
//! backend's tests call (the object_store pattern). A check panics with a
//! message saying what the backend did instead.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxSessionExt,
};

fn request(code: &str, language: Language, wall: Duration) -> RunRequest {
    RunRequest {
        code: code.into(),
        language,
        limits: Limits {
            wall,
            ..Limits::default()
        },
    }
}

async fn run(sandbox: &dyn Sandbox, code: &str, language: Language) -> RunOutcome {
    match sandbox
        .run(
            request(code, language, Duration::from_secs(20)),
            None,
            CancellationToken::new(),
        )
        .await
    {
        Ok(outcome) => outcome,
        Err(e) => panic!("{language:?} run failed: {e}"),
    }
}

fn hello(language: Language) -> &'static str {
    match language {
        Language::Python => "print('hello')",
        Language::Javascript => "console.log('hello')",
        Language::Bash => "echo hello",
        Language::C => "#include <stdio.h>\nint main(void){puts(\"hello\");}",
    }
}

/// Every language the backend claims says hello on stdout, without error.
pub async fn says_hello_in_every_language(sandbox: &dyn Sandbox) {
    for language in sandbox.capabilities().languages {
        let outcome = run(sandbox, hello(language), language).await;
        assert_eq!(outcome.stdout, "hello\n", "{language:?}: {outcome:?}");
        assert!(outcome.error.is_none(), "{language:?}: {outcome:?}");
        assert_eq!(
            outcome.exit_code.unwrap_or(0),
            0,
            "{language:?}: {outcome:?}"
        );
    }
}

/// Output is streamed as it is produced, in order, and matches the summary.
pub async fn streams_output_in_order(sandbox: &dyn Sandbox) {
    let (sender, mut receiver) = mpsc::channel(64);
    let code = "import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)\nprint('oops', file=sys.stderr)";
    let outcome = sandbox
        .run(
            request(code, Language::Python, Duration::from_secs(20)),
            Some(sender),
            CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("streaming run failed: {e}"));
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
            RunEvent::Stderr { ts_ms, .. }
            | RunEvent::Result { ts_ms, .. }
            | RunEvent::Error { ts_ms, .. } => *ts_ms,
        };
        assert!(ts >= last_ts, "events out of order");
        last_ts = ts;
    }
    assert_eq!(stdout, "0\n1\n2\n");
    assert!(
        chunks >= 2,
        "stdout came in {chunks} chunk(s): not streamed"
    );
    assert_eq!(outcome.stdout, stdout);
    assert!(outcome.stderr.contains("oops"));
}

/// A run past its wall time is stopped and reported as `Timeout`.
pub async fn stops_runs_at_the_time_limit(sandbox: &dyn Sandbox) {
    let outcome = sandbox
        .run(
            request("while True: pass", Language::Python, Duration::from_secs(1)),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("run failed: {e}"));
    assert_eq!(outcome.error.map(|e| e.name), Some("Timeout".to_string()));
}

/// Cancelling stops a run promptly and says so.
pub async fn cancels_runs(sandbox: &dyn Sandbox) {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let outcome = sandbox
        .run(
            request(
                "import time\ntime.sleep(60)",
                Language::Python,
                Duration::from_secs(60),
            ),
            None,
            cancel,
        )
        .await
        .unwrap_or_else(|e| panic!("run failed: {e}"));
    assert_eq!(outcome.error.map(|e| e.name), Some("Cancelled".to_string()));
}

/// Bad programs are refused before anything runs.
pub async fn refuses_bad_programs(sandbox: &dyn Sandbox) {
    for code in ["x".repeat(super::MAX_CODE_BYTES + 1), "print(1)\0".into()] {
        let result = sandbox
            .run(
                request(&code, Language::Python, Duration::from_secs(5)),
                None,
                CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(result, Err(SandboxError::InvalidInput(_))),
            "{result:?}"
        );
    }
}

/// A session keeps files between runs (and variables, if stateful), and two
/// sessions share nothing.
pub async fn sessions_keep_state_and_stay_apart(sandbox: &dyn Sandbox) {
    let caps = sandbox.capabilities();
    let first = sandbox
        .open_session()
        .await
        .unwrap_or_else(|e| panic!("open_session: {e}"));
    let second = sandbox
        .open_session()
        .await
        .unwrap_or_else(|e| panic!("open_session: {e}"));
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
    }
    let other = second
        .run(
            &quick("import os\nprint(os.path.exists('note.txt'))"),
            None,
            &token,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(other.stdout, "False\n", "sessions must not share files");
    assert_ne!(first.id(), second.id());
    first.close().await;
    second.close().await;
}

/// A session's files: written from outside, read by the code; written by
/// the code, read from outside; listed; and nothing outside the home.
pub async fn session_files_go_both_ways(sandbox: &dyn Sandbox) {
    let session = sandbox
        .open_session()
        .await
        .unwrap_or_else(|e| panic!("open_session: {e}"));
    let files = session.files().unwrap_or_else(|| {
        panic!(
            "{} claims files but has none",
            sandbox.capabilities().backend
        )
    });
    let token = CancellationToken::new();
    let quick = |code: &str| request(code, Language::Python, Duration::from_secs(20));
    let entry = files
        .write("/home/user/in/data.csv", b"a,b\n1,2\n3,4\n".to_vec())
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
/// session's own, and shares its files.
pub async fn contexts_keep_their_own_state(sandbox: &dyn Sandbox) {
    let session = sandbox
        .open_session()
        .await
        .unwrap_or_else(|e| panic!("open_session: {e}"));
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
