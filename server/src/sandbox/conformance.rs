//! The behaviour every sandbox backend owes, as `pub async fn`s that each
//! backend's tests call (the object_store pattern). A check panics with a
//! message saying what the backend did instead.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError};

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
