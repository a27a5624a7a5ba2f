//! The Browser sandbox as any backend: the conformance suite, and hostile
//! programs, against a page played by a scripted tab, whose Python is a
//! real one (`scripted.rs`): every output, error, value and stop below is
//! what real code did, carried in the page's own frames.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{BrowserSandbox, BrowserSettings, BrowserTabs, ScriptedTab};
use crate::{
    Capabilities, Language, Limits, RunEvent, RunRequest, Sandbox, SandboxError, SandboxKind,
    conformance, limit_error,
};
use runcell_protocol::SessionId;

/// Waits long enough for anything a test's Python does; only a failing
/// test waits them out.
fn patient() -> BrowserSettings {
    BrowserSettings {
        attach_wait: Duration::from_secs(10),
        gone_grace: Duration::from_secs(10),
        stop_grace: Duration::from_secs(5),
        prepare_wait: Duration::from_secs(10),
    }
}

/// A notebook session's Browser sandbox, whose page is a scripted tab.
fn browser_with(settings: BrowserSettings) -> (ScriptedTab, BrowserSandbox) {
    let tabs = BrowserTabs::new(settings);
    let session = SessionId::random();
    let tab = ScriptedTab::open(&tabs, session)
        .expect("the scripted tab needs python3 (scripts/setup.sh installs it)");
    (tab, tabs.sandbox(session))
}

fn browser() -> (ScriptedTab, BrowserSandbox) {
    browser_with(patient())
}

fn python(code: &str) -> RunRequest {
    RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: Limits {
            wall: Duration::from_secs(20),
            ..Limits::default()
        },
        env: Vec::new(),
        cwd: None,
    }
}

/// What a page's Python does, and no more: the suite skips the rest (one-
/// shot runs, isolated sessions, files, contexts) and checks that each is
/// refused.
#[test]
fn it_claims_what_a_page_does() {
    let tabs = BrowserTabs::new(BrowserSettings::default());
    assert_eq!(
        tabs.sandbox(SessionId::random()).capabilities(),
        Capabilities {
            backend: SandboxKind::Browser,
            languages: vec![Language::Python],
            stateful: true,
            files: false,
            interrupt: true,
            one_shot: false,
            isolated_sessions: false,
            contexts: false,
        }
    );
}

// ---- the conformance suite every backend runs ----

#[tokio::test]
async fn conformance_says_hello_in_every_language() {
    let (_tab, browser) = browser();
    conformance::says_hello_in_every_language(&browser).await;
}

#[tokio::test]
async fn conformance_streams_output_in_order() {
    let (_tab, browser) = browser();
    conformance::streams_output_in_order(&browser).await;
}

#[tokio::test]
async fn conformance_stops_runs_at_the_time_limit() {
    let (_tab, browser) = browser();
    conformance::stops_runs_at_the_time_limit(&browser).await;
}

#[tokio::test]
async fn conformance_cancels_runs() {
    let (_tab, browser) = browser();
    conformance::cancels_runs(&browser).await;
}

#[tokio::test]
async fn conformance_refuses_bad_programs() {
    let (_tab, browser) = browser();
    conformance::refuses_bad_programs(&browser).await;
}

#[tokio::test]
async fn conformance_sessions_keep_state_and_stay_apart() {
    let (_tab, browser) = browser();
    conformance::sessions_keep_state_and_stay_apart(&browser).await;
}

#[tokio::test]
async fn conformance_session_files_go_both_ways() {
    let (_tab, browser) = browser();
    conformance::session_files_go_both_ways(&browser).await;
}

#[tokio::test]
async fn conformance_contexts_keep_their_own_state() {
    let (_tab, browser) = browser();
    conformance::contexts_keep_their_own_state(&browser).await;
}

#[tokio::test]
async fn conformance_refuses_what_it_does_not_claim() {
    let (_tab, browser) = browser();
    conformance::refuses_what_it_does_not_claim(&browser).await;
}

#[tokio::test]
async fn conformance_sessions_report_values_and_errors() {
    let (_tab, browser) = browser();
    conformance::sessions_report_values_and_errors(&browser).await;
}

// ---- hostile programs ----

#[tokio::test]
async fn a_flood_of_output_is_cut_at_the_limit_and_the_python_goes_on() {
    let (_tab, browser) = browser();
    let session = browser.open_session().await.unwrap();
    let token = CancellationToken::new();
    session
        .run(&python("kept = 1"), None, &token)
        .await
        .unwrap();
    let mut flood = python("while True: print('x' * 1000)");
    flood.limits.output_bytes = 100_000;
    let outcome = session.run(&flood, None, &token).await.unwrap();
    assert_eq!(outcome.error.unwrap().name, limit_error::OUTPUT);
    assert!(outcome.truncated);
    assert!(outcome.stdout.len() <= 100_000, "{}", outcome.stdout.len());
    // The stop reached the program: the same Python, its globals kept,
    // runs the next one.
    let after = session
        .run(&python("print(kept)"), None, &token)
        .await
        .unwrap();
    assert_eq!(after.stdout, "1\n", "{after:?}");
}

/// The runner's Python, as the session's tabs know it.
fn runner_kernel(browser: &BrowserSandbox) -> Option<String> {
    let sessions = browser.tabs.sessions.lock();
    let tabs = sessions.get(&browser.session)?;
    let runner = tabs.runner.borrow();
    runner.as_ref().map(|tab| tab.kernel.clone())
}

#[tokio::test]
async fn a_program_that_will_not_stop_ends_its_python_and_another_takes_over() {
    let (_tab, browser) = browser();
    let session = browser.open_session().await.unwrap();
    let first = runner_kernel(&browser).unwrap();
    let cancel = CancellationToken::new();
    let (events, mut seen) = mpsc::channel(16);
    let deaf = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('deaf', flush=True)\nwhile True: time.sleep(0.01)";
    let request = python(deaf);
    // Stopped once it is deaf.
    let (outcome, ()) = tokio::join!(session.run(&request, Some(&events), &cancel), async {
        let first = seen.recv().await;
        assert!(matches!(first, Some(RunEvent::Stdout { .. })), "{first:?}");
        cancel.cancel();
    });
    let outcome = outcome.unwrap();
    assert!(outcome.stderr.contains("did not stop"), "{outcome:?}");
    assert_eq!(outcome.error.unwrap().name, limit_error::CANCELLED);
    // The tab starts another Python, which attaches as a new kernel.
    let mut waited = Duration::ZERO;
    while runner_kernel(&browser).as_ref() == Some(&first) {
        assert!(waited < Duration::from_secs(10), "no other Python attached");
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    // The session's kernel is gone, as a reaped one is; a new session runs.
    let token = CancellationToken::new();
    let gone = session.run(&python("1"), None, &token).await.unwrap_err();
    assert!(matches!(gone, SandboxError::NotFound(_)), "{gone}");
    let again = browser.open_session().await.unwrap();
    let fresh = again
        .run(&python("print('signal' in dir())"), None, &token)
        .await
        .unwrap();
    assert_eq!(fresh.stdout, "False\n", "{fresh:?}");
}

/// What a program can make its page send (a page's Python can post to the
/// page): forged frames change nothing but its own run, and a frame the
/// socket would refuse (over its bound, not UTF-8) closes the tab's
/// connection, which ends the run as a page that went away.
#[tokio::test]
async fn frames_a_program_forges_are_read_as_a_hostile_pages() {
    let forge = "import sys\ntab = sys.modules['__main__']\n";
    // (what the program does, what its run ends with)
    let cases: [(String, Result<String, &str>); 4] = [
        (
            format!(
                "{forge}tab.post_line(b'not a frame')\n\
                 tab.post({{'type': 'browser_output', 'run': tab.current + 1000, \
                   'output': {{'type': 'stdout', 'text': 'forged'}}}})\n\
                 tab.post({{'type': 'ask', 'text': 'hello'}})\n\
                 tab.post({{'type': 'browser_attach', 'kernel': 'not a kernel'}})\n\
                 print('mine')"
            ),
            Ok("mine\n".to_string()),
        ),
        (
            format!(
                "{forge}tab.post({{'type': 'browser_output', 'run': tab.current, \
                   'output': {{'type': 'stdout', 'text': 'y' * 200_000}}}})"
            ),
            Ok("y".repeat(200_000)),
        ),
        (
            format!(
                "{forge}tab.post({{'type': 'browser_output', 'run': tab.current, \
                   'output': {{'type': 'stdout', 'text': 'x' * 300_000}}}})\n\
                 import time\ntime.sleep(30)"
            ),
            Err("went away"),
        ),
        (
            format!("{forge}tab.post_line(b'\\xff\\xfe')\nimport time\ntime.sleep(30)"),
            Err("went away"),
        ),
    ];
    for (code, expect) in cases {
        let (_tab, browser) = browser_with(BrowserSettings {
            gone_grace: Duration::from_millis(300),
            ..patient()
        });
        let session = browser.open_session().await.unwrap();
        let result = session
            .run(&python(&code), None, &CancellationToken::new())
            .await;
        match (expect, result) {
            (Ok(printed), Ok(outcome)) => {
                assert!(outcome.error.is_none(), "{code}: {outcome:?}");
                assert!(
                    outcome.stdout == printed,
                    "{code}: printed {} bytes: {:?}…",
                    outcome.stdout.len(),
                    &outcome.stdout[..outcome.stdout.len().min(100)]
                );
            }
            (Err(says), Err(e)) => {
                assert!(matches!(e, SandboxError::Unavailable(_)), "{code}: {e}");
                assert!(e.to_string().contains(says), "{code}: {e}");
            }
            (expect, got) => panic!("{code}: expected {expect:?}, got {got:?}"),
        }
    }
}
