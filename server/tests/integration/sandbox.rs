//! The jail under attack: a battery of hostile programs. Before anything
//! destructive, `jail()` checks that the jail is really in place (non-root uid,
//! own pid namespace, no network) and fails at once if not, so a broken jail
//! can never turn the battery loose on the host.

use std::time::Duration;

use runcell::sandbox::jail::{JailConfig, JailSandbox};
use runcell::sandbox::{Language, Limits, RunOutcome, RunRequest, Sandbox, conformance};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

static CHECKED: OnceCell<()> = OnceCell::const_new();

/// The jail, once containment is confirmed.
async fn jail() -> std::sync::Arc<JailSandbox> {
    let jail = JailSandbox::new(JailConfig::default());
    if let Some(reason) = jail.unavailable() {
        panic!("the jail is unavailable, so the battery cannot run: {reason}");
    }
    CHECKED
        .get_or_init(|| async {
            let probe = r#"
import os, socket
assert os.getuid() != 0 and os.geteuid() != 0, "runs as root"
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
assert len(pids) <= 3 and max(pids) < 10, f"sees other processes: {pids}"
ifaces = [name for _, name in socket.if_nameindex()]
assert ifaces == ["lo"], f"network interfaces: {ifaces}"
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    raise SystemExit("reached the network")
except OSError:
    pass
print("contained", os.getuid())
"#;
            let outcome = run_with(
                &JailSandbox::new(JailConfig::default()),
                probe,
                Language::Python,
                quick(),
            )
            .await;
            assert!(
                outcome.error.is_none() && outcome.stdout.starts_with("contained 65534"),
                "CONTAINMENT CHECK FAILED, refusing to run the battery: {outcome:?}"
            );
        })
        .await;
    jail
}

fn quick() -> Limits {
    Limits {
        wall: Duration::from_secs(10),
        ..Limits::default()
    }
}

async fn run_with(
    jail: &JailSandbox,
    code: &str,
    language: Language,
    limits: Limits,
) -> RunOutcome {
    jail.run(
        RunRequest {
            code: code.into(),
            language,
            limits,
        },
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

async fn run(code: &str, language: Language) -> RunOutcome {
    run_with(&*jail().await, code, language, quick()).await
}

fn error_name(outcome: &RunOutcome) -> &str {
    outcome.error.as_ref().map_or("", |e| e.name.as_str())
}

/// A neighbour session that holds state: it must answer during the attack
/// and still have its variable afterwards, whatever the hostile program did.
async fn with_neighbour<F: Future<Output = RunOutcome>>(hostile: F) -> RunOutcome {
    let jail = jail().await;
    let neighbour = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    let python = |code: &str| RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: quick(),
    };
    let set = neighbour
        .run(&python("kept = sum(range(1000))"), None, &token)
        .await
        .unwrap();
    assert!(set.error.is_none(), "{set:?}");
    let during = async {
        neighbour
            .run(
                &python("import time\ntime.sleep(1)\nprint(kept)"),
                None,
                &token,
            )
            .await
            .unwrap()
    };
    let (outcome, during) = tokio::join!(hostile, during);
    assert_eq!(
        during.stdout, "499500\n",
        "the neighbour was disturbed: {during:?}"
    );
    let after = neighbour
        .run(&python("print(kept)"), None, &token)
        .await
        .unwrap();
    assert_eq!(
        after.stdout, "499500\n",
        "the neighbour lost its state: {after:?}"
    );
    neighbour.close().await;
    outcome
}

/// Runs a Python program that prints `ok` when the attack failed as it should.
async fn python_says_ok(code: &str) {
    let outcome = with_neighbour(run(code, Language::Python)).await;
    assert_eq!(outcome.stdout.trim(), "ok", "{outcome:?}");
}

// ---- reading and writing where it must not ----

#[tokio::test]
async fn cannot_read_etc_shadow() {
    python_says_ok(
        "try:\n    open('/etc/shadow').read()\n    print('read it')\nexcept PermissionError:\n    print('ok')",
    )
    .await;
}

#[tokio::test]
async fn cannot_write_system_directories() {
    python_says_ok(
        r#"
bad = []
for path in ["/usr/evil", "/etc/evil", "/proc/sys/kernel/hostname", "/usr/bin/python3"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        bad.append(path)
    except OSError:
        pass
print("ok" if not bad else bad)
"#,
    )
    .await;
}

#[tokio::test]
async fn cannot_follow_a_symlink_out_of_home() {
    python_says_ok(
        r#"
import os
os.symlink("/etc/shadow", "shadow")
os.symlink("/root", "rootdir")
ok = True
try:
    open("shadow").read(); ok = False
except OSError:
    pass
ok = ok and not os.path.exists("rootdir/.cargo")
print("ok" if ok else "escaped")
"#,
    )
    .await;
}

#[tokio::test]
async fn a_run_cannot_see_another_runs_files() {
    let jail = jail().await;
    let first = run_with(
        &jail,
        "open('secret.txt','w').write('mine'); print('written')",
        Language::Python,
        quick(),
    )
    .await;
    assert_eq!(first.stdout, "written\n");
    let second = run_with(
        &jail,
        "import os; print(sorted(os.listdir('.')))",
        Language::Python,
        quick(),
    )
    .await;
    assert_eq!(second.stdout, "['main.py']\n", "{second:?}");
}

#[tokio::test]
async fn no_secret_reaches_the_jail() {
    // The server's own environment (API keys, tokens, paths) must not appear
    // in the jail's environment or in any /proc/*/environ it can read.
    let outcome = run(
        r#"
import os, glob
seen = dict(os.environ)
for path in glob.glob("/proc/*/environ"):
    try:
        seen[path] = open(path, "rb").read().decode(errors="replace")
    except OSError:
        pass
text = repr(seen)
print("HOME" in os.environ, "CARGO" in text, "RUST" in text, "OPENAI" in text, "RUNCELL" in text)
"#,
        Language::Python,
    )
    .await;
    assert_eq!(
        outcome.stdout, "True False False False False\n",
        "{outcome:?}"
    );
}

// ---- the network ----

#[tokio::test]
async fn cannot_reach_a_port_on_the_hosts_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\nexcept OSError:\n    print('ok')"
    );
    python_says_ok(&code).await;
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "something reached the host's port"
    );
}

// ---- privileged system calls ----

#[tokio::test]
async fn privileged_system_calls_are_refused() {
    python_says_ok(
        r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
results = {
    "ptrace": libc.ptrace(0, 0, 0, 0),
    "unshare": libc.unshare(0x10000000),
    "setns": libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0),
    "keyctl": libc.syscall(250, 0, 0, 0, 0),
    "mount": libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
    "bpf": libc.syscall(321, 0, 0, 0),
}
print("ok" if all(r == -1 for r in results.values()) else results)
"#,
    )
    .await;
    let outcome = with_neighbour(run(
        "mount -t tmpfs none /tmp 2>/dev/null || unshare -r true 2>/dev/null || echo ok",
        Language::Bash,
    ))
    .await;
    assert_eq!(outcome.stdout.trim(), "ok", "{outcome:?}");
}

// ---- resource exhaustion ----

#[tokio::test]
async fn a_python_fork_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        r#"
import os, time
children = 0
for _ in range(3000):
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        children += 1
    except OSError:
        break
print("forked", children)
raise SystemExit(1 if children < 3000 else 0)
"#,
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_c_fork_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        "#include <unistd.h>\n#include <stdio.h>\nint main(void){int n=0;for(int i=0;i<3000;i++){pid_t p=fork();if(p==0){sleep(30);_exit(0);}if(p<0){printf(\"refused after %d\\n\",n);return 1;}n++;}return 0;}",
        Language::C,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_thread_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        "import threading, time\nfor _ in range(3000):\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_4_gib_allocation_hits_the_memory_limit() {
    let outcome = with_neighbour(run(
        "b = bytearray(4 * 1024**3)\nprint('allocated')",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "MemoryLimit", "{outcome:?}");
}

#[tokio::test]
async fn filling_the_disk_hits_the_disk_limit() {
    let outcome = with_neighbour(run(
        "chunk = b'x' * (1024 * 1024)\ni = 0\nwhile True:\n    with open(f'fill{i}', 'wb') as f:\n        for _ in range(8):\n            f.write(chunk)\n    i += 1\n",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "DiskLimit", "{outcome:?}");
}

#[tokio::test]
async fn one_huge_file_hits_the_file_limit() {
    let outcome = run(
        "with open('big', 'wb') as f:\n    f.write(b'x' * (64 * 1024 * 1024))",
        Language::Python,
    )
    .await;
    assert_eq!(error_name(&outcome), "DiskLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_zip_bomb_written_then_read_is_contained() {
    let outcome = with_neighbour(run(
        r#"
import zipfile
with zipfile.ZipFile("bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("zeros", b"\0" * (200 * 1024 * 1024))
data = zipfile.ZipFile("bomb.zip").read("zeros")
with open("out", "wb") as f:
    for _ in range(10):
        f.write(data)
"#,
        Language::Python,
    ))
    .await;
    assert!(
        matches!(error_name(&outcome), "MemoryLimit" | "DiskLimit"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn output_without_newlines_is_cut_at_the_limit() {
    let outcome = with_neighbour(run(
        "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * (1024 * 1024))",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "OutputLimit", "{outcome:?}");
    assert!(outcome.truncated);
    assert_eq!(outcome.stdout.len(), Limits::default().output_bytes);
}

#[tokio::test]
async fn a_busy_loop_times_out() {
    let limits = Limits {
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let outcome = with_neighbour(async {
        run_with(&*jail().await, "while True: pass", Language::Python, limits).await
    })
    .await;
    assert_eq!(error_name(&outcome), "Timeout", "{outcome:?}");
}

#[tokio::test]
async fn a_loop_ignoring_sigint_and_sigterm_is_still_stopped() {
    let limits = Limits {
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.01)";
    let outcome = run_with(&*jail().await, code, Language::Python, limits).await;
    assert_eq!(error_name(&outcome), "Timeout", "{outcome:?}");
}

#[tokio::test]
async fn no_daemon_outlives_its_run() {
    let tag = format!("{}.{}", 4000 + std::process::id() % 1000, 17);
    let code = format!(
        "setsid sleep {tag} < /dev/null > /dev/null 2>&1 &\nnohup sleep {tag} > /dev/null 2>&1 &\necho started"
    );
    let outcome = run(&code, Language::Bash).await;
    assert_eq!(outcome.stdout, "started\n", "{outcome:?}");
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&tag))
        .collect();
    assert!(survivors.is_empty(), "left behind: {survivors:?}");
}

#[tokio::test]
async fn signalling_every_visible_process_hurts_only_the_run() {
    let outcome = with_neighbour(run("kill -9 -1; echo still here", Language::Bash)).await;
    assert!(
        outcome.exit_code.is_some() || outcome.error.is_some(),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn killing_its_parent_ends_only_the_run() {
    let outcome = with_neighbour(run("kill -9 $PPID; sleep 1; echo after", Language::Bash)).await;
    // The jail's init dies with its parent's kill; the run ends without waiting
    // for its time limit.
    assert_ne!(error_name(&outcome), "Timeout", "{outcome:?}");
}

// ---- odd programs and odd output ----

#[tokio::test]
async fn oversized_and_nul_programs_are_refused_before_running() {
    // A 2 MB source and NUL bytes: the shared check every backend passes.
    conformance::refuses_bad_programs(&*jail().await).await;
}

#[tokio::test]
async fn invalid_utf8_output_arrives_as_replacement_characters() {
    let outcome = run(
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe done\\n')",
        Language::Python,
    )
    .await;
    assert_eq!(outcome.stdout, "ok \u{fffd}\u{fffd} done\n");
}

#[tokio::test]
async fn a_segfault_is_reported_as_a_signal() {
    let outcome = run(
        "int main(void){ volatile int *p = 0; return *p; }",
        Language::C,
    )
    .await;
    assert_eq!(error_name(&outcome), "Signal", "{outcome:?}");
}

#[tokio::test]
async fn a_compile_error_is_reported_as_such() {
    let outcome = run("int main(void){ return undeclared; }", Language::C).await;
    assert_eq!(error_name(&outcome), "CompileError", "{outcome:?}");
    assert!(outcome.stderr.contains("undeclared"));
    assert!(!outcome.stderr.contains("runcell-compile-failed"));
}

#[tokio::test]
async fn every_language_says_hello_as_an_unprivileged_user() {
    let cases = [
        (
            Language::Python,
            "import os; print('hi', os.getuid())",
            "hi 65534\n",
        ),
        (
            Language::Javascript,
            "console.log('hi', process.getuid())",
            "hi 65534\n",
        ),
        (Language::Bash, "echo hi $(id -u)", "hi 65534\n"),
        (
            Language::C,
            "#include <stdio.h>\n#include <unistd.h>\nint main(void){printf(\"hi %d\\n\", getuid());}",
            "hi 65534\n",
        ),
    ];
    for (language, code, want) in cases {
        let outcome = run(code, language).await;
        assert_eq!(outcome.stdout, want, "{language:?}: {outcome:?}");
        assert!(outcome.error.is_none());
    }
}

// ---- the conformance suite every backend runs ----

#[tokio::test]
async fn conformance_says_hello_in_every_language() {
    conformance::says_hello_in_every_language(&*jail().await).await;
}

#[tokio::test]
async fn conformance_streams_output_in_order() {
    conformance::streams_output_in_order(&*jail().await).await;
}

#[tokio::test]
async fn conformance_stops_runs_at_the_time_limit() {
    conformance::stops_runs_at_the_time_limit(&*jail().await).await;
}

#[tokio::test]
async fn conformance_cancels_runs() {
    conformance::cancels_runs(&*jail().await).await;
}

#[tokio::test]
async fn conformance_sessions_keep_state_and_stay_apart() {
    conformance::sessions_keep_state_and_stay_apart(&*jail().await).await;
}

#[tokio::test]
async fn conformance_session_files_go_both_ways() {
    conformance::session_files_go_both_ways(&*jail().await).await;
}

#[tokio::test]
async fn conformance_contexts_keep_their_own_state() {
    conformance::contexts_keep_their_own_state(&*jail().await).await;
}

#[tokio::test]
async fn a_session_program_leaves_no_file_in_the_home() {
    // Bash, JavaScript and C run from the jail's own /tmp, not the home.
    let jail = jail().await;
    let session = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    for (language, code) in [
        (Language::Bash, "echo hi"),
        (Language::Javascript, "console.log('hi')"),
        (
            Language::C,
            "#include <stdio.h>\nint main(void){puts(\"hi\");}",
        ),
    ] {
        let request = RunRequest {
            code: code.into(),
            language,
            limits: quick(),
        };
        let outcome = session.run(&request, None, &token).await.unwrap();
        assert_eq!(outcome.stdout, "hi\n", "{language:?}: {outcome:?}");
    }
    let listed = session.files().unwrap().list("", 1).await.unwrap();
    // The kernel's own `.ipython` may be there; no program file is.
    assert!(listed.iter().all(|e| e.name.starts_with('.')), "{listed:?}");
    session.close().await;
}

/// Everything an outcome shows, in bytes: what the output budget covers.
fn shown_bytes(outcome: &RunOutcome) -> usize {
    let error = outcome.error.as_ref().map_or(0, |e| {
        e.name.len() + e.value.len() + e.traceback.iter().map(|l| l.len() + 1).sum::<usize>()
    });
    outcome.stdout.len()
        + outcome.stderr.len()
        + runcell::sandbox::serialized_len(&outcome.results)
        + error
}

/// What an outcome may hold beyond the budget: the room an error always
/// gets, and the notes of what was cut.
const SLACK: usize = runcell::sandbox::ERROR_FLOOR_BYTES + 1024;

/// Runs `code` in a fresh session's kernel, then `after` in the same
/// kernel, with a neighbour watching.
async fn in_a_kernel(code: &str, after: &str) -> (RunOutcome, RunOutcome) {
    let jail = jail().await;
    let session = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    let python = |code: &str| RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: quick(),
    };
    let outcome =
        with_neighbour(async { session.run(&python(code), None, &token).await.unwrap() }).await;
    let next = session.run(&python(after), None, &token).await.unwrap();
    session.close().await;
    (outcome, next)
}

#[tokio::test]
async fn a_display_flood_in_a_kernel_is_cut_at_the_output_limit() {
    let (outcome, next) = in_a_kernel(
        "from IPython.display import display, HTML\nx = 'x' * 2_000_000\nfor _ in range(40):\n    display(HTML(x))",
        "print(len(x))",
    )
    .await;
    let budget = Limits::default().output_bytes;
    assert!(
        shown_bytes(&outcome) <= budget + SLACK,
        "{}",
        shown_bytes(&outcome)
    );
    assert_eq!(error_name(&outcome), "OutputLimit");
    let value = &outcome.error.as_ref().unwrap().value;
    assert!(value.contains("a display of 2000"), "{value}");
    assert!(outcome.results.is_empty());
    assert!(outcome.truncated);
    assert_eq!(next.stdout, "2000000\n", "{next:?}");
}

#[tokio::test]
async fn many_small_displays_are_cut_at_the_result_count() {
    let (outcome, next) = in_a_kernel(
        "from IPython.display import display\nfor i in range(1000):\n    display(i)",
        "print('after')",
    )
    .await;
    assert_eq!(outcome.results.len(), runcell::sandbox::MAX_RESULTS);
    assert_eq!(error_name(&outcome), "OutputLimit", "{:?}", outcome.error);
    assert_eq!(next.stdout, "after\n", "{next:?}");
}

#[tokio::test]
async fn a_huge_last_expression_is_dropped() {
    let (outcome, next) = in_a_kernel("y = 1\n'x' * 50_000_000", "print(y)").await;
    let budget = Limits::default().output_bytes;
    assert!(
        shown_bytes(&outcome) <= budget + SLACK,
        "{}",
        shown_bytes(&outcome)
    );
    assert_eq!(error_name(&outcome), "OutputLimit", "{:?}", outcome.error);
    assert!(outcome.results.is_empty());
    assert_eq!(next.stdout, "1\n", "{next:?}");
}

#[tokio::test]
async fn a_huge_traceback_in_a_kernel_is_cut() {
    let (outcome, next) =
        in_a_kernel("z = 2\nraise ValueError('x' * 50_000_000)", "print(z)").await;
    let budget = Limits::default().output_bytes;
    assert!(
        shown_bytes(&outcome) <= budget + SLACK,
        "{}",
        shown_bytes(&outcome)
    );
    // The program's own error, cut: it says what failed.
    assert_eq!(error_name(&outcome), "ValueError", "{:?}", outcome.error);
    assert!(outcome.truncated);
    assert_eq!(next.stdout, "2\n", "{next:?}");
}

#[tokio::test]
async fn a_one_shot_traceback_is_not_kept_twice() {
    // Its stderr fits the budget; the error read from it draws from what
    // is left.
    let outcome = with_neighbour(run("raise ValueError('x' * 900_000)", Language::Python)).await;
    let budget = Limits::default().output_bytes;
    assert_eq!(error_name(&outcome), "ValueError", "{:?}", outcome.error);
    assert!(outcome.stderr.len() > 900_000);
    assert!(
        shown_bytes(&outcome) <= budget + SLACK,
        "{}",
        shown_bytes(&outcome)
    );
    assert!(outcome.truncated);
}
