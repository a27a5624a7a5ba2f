//! `runcell ask` and `runcell chat`: the real binary against a real server
//! (the scripted model), piped as a program would run them, and typed into
//! a real terminal (tmux) as a person would.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use app::protocol::{EventBody, ServerMessage, TurnStatus};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::support::{TestServer, http};

const RUNCELL: &str = env!("CARGO_BIN_EXE_runcell");

/// How long a step may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// The client binary with its own directory and none of the caller's
/// settings.
fn client(dir: &Path) -> Command {
    let mut command = Command::new(RUNCELL);
    command
        .env("RUNCELL_CLIENT_DIR", dir)
        .env("TMPDIR", dir)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("RUNCELL_API_KEY")
        .env_remove("RUNCELL_URL")
        .kill_on_drop(true);
    command
}

struct Asked {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

async fn ask(server: &TestServer, dir: &Path, args: &[&str]) -> Asked {
    ask_with(client(dir), server, args).await
}

async fn ask_with(mut command: Command, server: &TestServer, args: &[&str]) -> Asked {
    server.ready().await;
    command
        .arg("ask")
        .args(["--url", &server.url("")])
        .args(args)
        .stdin(Stdio::null());
    let output = tokio::time::timeout(PATIENCE, command.output())
        .await
        .expect("runcell ask finished in time")
        .unwrap();
    Asked {
        status: output.status,
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Where `needle` is in `text` (the test fails if it is not).
fn at(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} is not in:\n{text}"))
}

fn code(program: &str) -> String {
    format!("Run this:\n```python\n{program}\n```")
}

#[tokio::test]
async fn ask_prints_code_result_and_explanation_in_order_and_plain_when_piped() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let asked = ask(
        &server,
        dir.path(),
        &[&code(
            "squares = [i * i for i in range(5)]\nprint('squares:', squares)",
        )],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    let out = &asked.stdout;
    let order = [
        at(out, "── code · python"),
        at(out, "squares = [i * i for i in range(5)]"),
        at(out, "── result"),
        at(out, "squares: [0, 1, 4, 9, 16]"),
        at(out, "── explanation"),
        at(out, "The code ran"),
        at(out, "✓ done in"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order:\n{out}"
    );
    assert!(
        !out.contains('\u{1b}'),
        "escape codes in piped output: {out:?}"
    );
    // The session is named on stderr, so that it can be followed up.
    let session = asked
        .stderr
        .split_whitespace()
        .nth(1)
        .expect("the session's id")
        .to_string();

    // A follow-up in the same session sees the variable.
    let asked = ask(
        &server,
        dir.path(),
        &["--session", &session, &code("print('total', sum(squares))")],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    assert!(asked.stdout.contains("total 30"), "{}", asked.stdout);

    // Another client (another owner) cannot use it.
    let stranger = tempfile::tempdir().unwrap();
    let asked = ask(
        &server,
        stranger.path(),
        &["--session", &session, &code("print(squares)")],
    )
    .await;
    assert_eq!(asked.status.code(), Some(2));
    assert!(asked.stderr.contains("no session"), "{}", asked.stderr);
}

#[tokio::test]
async fn a_failing_program_shows_its_error_and_the_fix_and_a_lost_cause_exits_1() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let asked = ask(
        &server,
        dir.path(),
        &["#scripted: fail_first\n```python\nprint('fixed', 6 * 7)\n```"],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    let out = &asked.stdout;
    let order = [
        at(out, "── code · python ─"),
        at(out, "── result ─"),
        at(out, "RuntimeError: scripted failure"),
        at(out, "(failed ·"),
        at(out, "── code · python · fix 1"),
        at(out, "── result · fix 1"),
        at(out, "fixed 42"),
        at(out, "✓ done"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order:\n{out}"
    );

    // A program that fails however often it is fixed: the turn fails.
    let asked = ask(&server, dir.path(), &[&code("1 / 0")]).await;
    assert_eq!(asked.status.code(), Some(1), "{}", asked.stdout);
    assert!(
        asked.stdout.contains("ZeroDivisionError"),
        "{}",
        asked.stdout
    );
    assert!(asked.stdout.contains("· fix 2"), "{}", asked.stdout);
    assert!(asked.stdout.contains("✗ failed"), "{}", asked.stdout);
}

#[tokio::test]
async fn json_prints_the_turns_events_and_files_are_uploaded_first() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sales.csv");
    std::fs::write(&data, "region,units\nNorth,3\nSouth,5\nNorth,4\n").unwrap();
    let question = code(
        "import pandas as pd\nt = pd.read_csv('sales.csv').groupby('region')['units'].sum()\nprint(t.to_dict())",
    );
    let asked = ask(
        &server,
        dir.path(),
        &["--json", "--file", data.to_str().unwrap(), &question],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    let events: Vec<EventBody> = asked
        .stdout
        .lines()
        .map(|line| match serde_json::from_str::<ServerMessage>(line) {
            Ok(ServerMessage::Event(event)) => event.event,
            other => panic!("not an event line: {line} ({other:?})"),
        })
        .collect();
    assert!(matches!(
        events.first(),
        Some(EventBody::TurnStarted { .. })
    ));
    assert!(matches!(
        events.last(),
        Some(EventBody::TurnFinished {
            status: TurnStatus::Ok,
            ..
        })
    ));
    assert!(
        asked.stdout.contains("{'North': 7, 'South': 5}"),
        "{}",
        asked.stdout
    );
    assert!(
        asked.stderr.contains("uploaded /home/user/sales.csv"),
        "{}",
        asked.stderr
    );
}

#[tokio::test]
async fn a_hostile_program_cannot_drive_the_terminal_even_with_colours_forced() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Clear the screen, set the title, write the clipboard, a device
    // control string; and a colour, which is redrawn.
    let program = r#"print("\x1b[2J\x1b[Hcleared \x1b]0;owned\x07titled \x1b]52;c;ZXZpbA==\x1b\\clip \x1bP+q\x1b\\dcs \x1b[31mred\x1b[0m")"#;
    let mut command = client(dir.path());
    command.env("CLICOLOR_FORCE", "1");
    let asked = ask_with(command, &server, &[&code(program)]).await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    let out = &asked.stdout;
    assert!(out.contains("cleared titled clip dcs"), "{out:?}");
    for hostile in ["\u{1b}[2J", "\u{1b}[H", "\u{1b}]", "\u{1b}P", "\u{7}"] {
        assert!(!out.contains(hostile), "{hostile:?} got through: {out:?}");
    }
    // Colours were on: the program's red is drawn again as red.
    assert!(out.contains("\u{1b}[31mred"), "{out:?}");
}

#[tokio::test]
async fn a_server_that_asks_for_a_key_is_answered_with_one() {
    let server = TestServer::start_configured(|config| {
        config.auth.mode = runcell_server::config::AuthMode::Required;
    })
    .await;
    let key = server.api_key("terminal").await;
    let dir = tempfile::tempdir().unwrap();
    let asked = ask(&server, dir.path(), &[&code("print(1 + 1)")]).await;
    assert_eq!(asked.status.code(), Some(2));
    assert!(asked.stderr.contains("--key"), "{}", asked.stderr);

    let asked = ask(
        &server,
        dir.path(),
        &["--key", "rc_not_a_key", &code("print(1)")],
    )
    .await;
    assert_eq!(asked.status.code(), Some(2));
    assert!(
        asked.stderr.contains("refused the API key"),
        "{}",
        asked.stderr
    );

    let mut command = client(dir.path());
    command.env("RUNCELL_API_KEY", &key);
    let asked = ask_with(command, &server, &[&code("print('two', 1 + 1)")]).await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    assert!(asked.stdout.contains("two 2"), "{}", asked.stdout);
}

#[tokio::test]
async fn a_dead_server_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::support::closed_port();
    let output = tokio::time::timeout(
        PATIENCE,
        client(dir.path())
            .args(["ask", "--url", &format!("http://127.0.0.1:{port}"), "hello"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("cannot reach runcell at"), "{stderr}");
}

/// `runcell chat` with piped input and output, its output read as it comes.
struct Chat {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    seen: String,
}

impl Chat {
    fn start(server: &TestServer, dir: &Path) -> Self {
        let mut child = client(dir)
            .args(["chat", "--url", &server.url("")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: String::new(),
        }
    }

    async fn send(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Reads until a line contains `needle`; returns that line.
    async fn until(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in time; the chat said:\n{}", self.seen))
                .unwrap_or_else(|| panic!("the chat ended before {needle:?}:\n{}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(needle) {
                return line;
            }
        }
    }

    async fn interrupt(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .await
            .unwrap();
        assert!(status.success());
    }
}

#[tokio::test]
async fn chat_keeps_the_session_ctrl_c_stops_a_runaway_turn_and_share_links_open() {
    let server = TestServer::start().await;
    server.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let mut chat = Chat::start(&server, dir.path());
    chat.until("runcell chat").await;

    // A question typed over several lines (a code fence stays open).
    // The loop counts before it says so: Ctrl+C, sent on seeing it, cannot
    // land before the first count (it landed inside a flushing print once,
    // on a loaded machine, and the count was still 0).
    chat.send("```python\nn = 0\nwhile True:\n    n += 1\n    if n == 1:\n        print('spin' + 'ning', flush=True)\n```")
        .await;
    chat.until("spinning").await;
    chat.interrupt().await;
    chat.until("■ stopped").await;

    // The chat goes on, in the same session, with the loop's variable.
    chat.send("```python\nprint('after the stop', n > 0)\n```")
        .await;
    chat.until("after the stop True").await;
    chat.until("✓ done").await;

    // A file, then the list.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hello\n").unwrap();
    chat.send(&format!("/upload {}", file.display())).await;
    chat.until("uploaded /home/user/notes.txt").await;
    chat.send("/files").await;
    chat.until("/home/user/notes.txt").await;

    // The share link it prints opens, for anyone.
    chat.send("/share").await;
    let link = chat.until("/s/").await;
    let url = link.trim();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let page = http().get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let body = page.text().await.unwrap();
    assert!(
        body.contains("after the stop"),
        "the shared page shows the session"
    );

    chat.send("/exit").await;
    let status = tokio::time::timeout(PATIENCE, chat.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    assert!(
        !chat.seen.contains('\u{1b}'),
        "escape codes when piped: {:?}",
        chat.seen
    );
}

#[tokio::test]
async fn a_second_ctrl_c_leaves_the_chat() {
    let server = TestServer::start().await;
    server.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let mut chat = Chat::start(&server, dir.path());
    chat.until("runcell chat").await;
    // A program that ignores the interrupt: the turn cannot end before the
    // second Ctrl+C.
    chat.send(
        "```python\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('de' + 'af', flush=True)\nwhile True:\n    time.sleep(0.1)\n```",
    )
    .await;
    chat.until("deaf").await;
    chat.interrupt().await;
    chat.until("Stopping").await;
    chat.interrupt().await;
    let status = tokio::time::timeout(PATIENCE, chat.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
}

/// A tmux server of the test's own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server of its own (`name` and this process's id) running
    /// `command` in a session "chat" of `columns` × `rows`.
    async fn open(name: &str, command: &str, columns: u16, rows: u16) -> Self {
        let tmux = Tmux {
            socket: format!("runcell-{name}-{}", std::process::id()),
        };
        let (columns, rows) = (columns.to_string(), rows.to_string());
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            &columns,
            "-y",
            &rows,
            command,
        ])
        .await;
        tmux
    }

    async fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .await
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    async fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "chat"];
        args.extend_from_slice(keys);
        self.run(&args).await;
    }

    /// The screen, with its colours when `escapes`.
    async fn screen(&self, escapes: bool) -> String {
        if escapes {
            self.run(&["capture-pane", "-p", "-e", "-t", "chat"]).await
        } else {
            self.run(&["capture-pane", "-p", "-t", "chat"]).await
        }
    }

    /// Waits until the screen satisfies `test`; returns the screen.
    async fn wait_for(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let screen = self.screen(false).await;
            if test(&screen) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the terminal never showed {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// tmux, or `None` (and why) when it is missing outside CI.
fn tmux_here() -> bool {
    let found = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing: scripts/setup.sh test installs it"
        );
        eprintln!("skipped: tmux is not installed (scripts/setup.sh test installs it)");
    }
    found
}

#[tokio::test]
async fn chat_in_a_real_terminal_edits_lines_streams_and_stops() {
    if !tmux_here() {
        return;
    }
    // The model writes slowly enough for the screen to be seen mid-turn.
    let server = TestServer::start_configured(|config| config.llm.scripted_delay_ms = 100).await;
    server.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "env -u NO_COLOR TERM=xterm-256color RUNCELL_CLIENT_DIR={dir} TMPDIR={dir} {RUNCELL} chat --url {url}",
        dir = dir.path().display(),
        url = server.url(""),
    );
    let tmux = Tmux::open("test", &command, 100, 50).await;
    tmux.wait_for("the prompt", |s| {
        s.contains("runcell chat") && s.contains("›")
    })
    .await;

    // Line editing: typed "les", home (Ctrl+A), "/fi": the command is /files.
    tmux.keys(&["les"]).await;
    tmux.keys(&["C-a"]).await;
    tmux.keys(&["/fi", "Enter"]).await;
    tmux.wait_for("/files' answer", |s| s.contains("no files yet"))
        .await;

    // A slow answer: the code panel is seen open before the turn ends.
    tmux.keys(&["say hello to the terminal, line by line", "Enter"])
        .await;
    tmux.wait_for("the code panel streaming", |s| {
        // The header is drawn before the first line arrives: wait for a
        // bordered line of code, still before the turn ends.
        s.contains("╭─ code · python") && s.contains("│ ") && !s.contains("✓ done")
    })
    .await;
    tmux.wait_for("the turn's end", |s| s.contains("✓ done"))
        .await;
    let coloured = tmux.screen(true).await;
    assert!(coloured.contains('\u{1b}'), "colours on a terminal");

    // Ctrl+C stops a runaway program; the prompt comes back.
    tmux.keys(&["```python", "Enter"]).await;
    tmux.keys(&["while True: pass", "Enter"]).await;
    tmux.keys(&["```", "Enter"]).await;
    tmux.wait_for("the program running", |s| s.contains("╭─ result"))
        .await;
    tmux.keys(&["C-c"]).await;
    tmux.wait_for("the stop", |s| s.contains("■ stopped")).await;

    // History: Up brings back the last line typed, on the prompt's row.
    tmux.wait_for("the prompt again", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()) == Some("›")
    })
    .await;
    tmux.keys(&["Up"]).await;
    tmux.wait_for("the recalled line", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()) == Some("› ```")
    })
    .await;
    tmux.keys(&["C-u"]).await;

    // Ctrl+C twice at the prompt leaves.
    tmux.keys(&["C-c"]).await;
    tmux.wait_for("the hint", |s| s.contains("Ctrl+C again"))
        .await;
    tmux.keys(&["C-c"]).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while Command::new("tmux")
        .args(["-L", &tmux.socket, "has-session", "-t", "chat"])
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chat did not leave"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn embedded_runs_the_engine_in_process_and_keeps_sessions_in_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let embedded = |args: &[&str]| {
        let mut command = client(dir.path());
        command
            .args(["ask", "--embedded", "--data-dir"])
            .arg(&data)
            .args(args)
            .env("RUNCELL_LLM", "scripted")
            .env("RUNCELL_SANDBOX__POOL_SIZE", "0")
            .env_remove("RUNCELL_DATABASE_URL")
            .stdin(Stdio::null());
        command
    };
    let output = tokio::time::timeout(
        PATIENCE,
        embedded(&[&code("answer = 6 * 7\nprint('answer', answer)")]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("answer 42"), "{stdout}");
    assert!(
        data.join("runcell.db").is_file(),
        "SQLite in the data directory"
    );
    let session = stderr.split_whitespace().nth(1).unwrap().to_string();

    // The session is there in the next run (its kernel is not: a new
    // process), and it is this client's.
    let output = tokio::time::timeout(
        PATIENCE,
        embedded(&["--session", &session, &code("print('again')")]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("again"), "{stdout}");
}

#[tokio::test]
async fn a_browsers_code_makes_the_terminal_its_owner_with_its_sessions() {
    let server = TestServer::start().await;
    server.ready().await;
    // The browser (the test's owner) has a session with a variable in it.
    let browsers = server.new_session().await;
    crate::support::ask(&server, &browsers, &code("shared = 'from the browser'")).await;

    // A terminal that made a session of its own first.
    let dir = tempfile::tempdir().unwrap();
    let asked = ask(&server, dir.path(), &[&code("kept = 'terminal first'")]).await;
    assert!(asked.status.success(), "{}", asked.stderr);
    let terminals = asked.stderr.split_whitespace().nth(1).unwrap().to_string();

    // "Use in a terminal" in the browser: a page with the command.
    let page = crate::support::http_as(Some(crate::support::OWNER))
        .post(server.url("/terminal"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    let code_at = at(&page, "--join ") + "--join ".len();
    let join_code: String = page[code_at..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert_eq!(join_code.len(), 32, "{page}");
    assert!(page.contains(&format!("runcell chat --url {}", server.url(""))));

    // The terminal joins and follows up the browser's session.
    let asked = ask(
        &server,
        dir.path(),
        &[
            "--join",
            &join_code,
            "--session",
            &browsers,
            &code("print(shared)"),
        ],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    assert!(
        asked.stdout.contains("from the browser"),
        "{}",
        asked.stdout
    );

    // The browser's sidebar lists both, the terminal's first session too.
    let listed: serde_json::Value = crate::support::http_as(Some(crate::support::OWNER))
        .get(server.url("/api/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(
        ids.contains(&browsers.as_str()) && ids.contains(&terminals.as_str()),
        "{listed}"
    );

    // The terminal's own first session moved, kernel and all.
    let asked = ask(
        &server,
        dir.path(),
        &["--session", &terminals, &code("print(kept)")],
    )
    .await;
    assert!(asked.status.success(), "{}\n{}", asked.stdout, asked.stderr);
    assert!(asked.stdout.contains("terminal first"), "{}", asked.stdout);
    assert!(!asked.stdout.contains("kernel is gone"), "{}", asked.stdout);

    // Another site's page may not join.
    let refused = reqwest::Client::new()
        .post(server.url("/api/owner/join"))
        .header("origin", "http://evil.example")
        .header("sec-fetch-site", "cross-site")
        .json(&serde_json::json!({ "code": join_code }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // A code works once.
    let other = tempfile::tempdir().unwrap();
    let asked = ask(
        &server,
        other.path(),
        &["--join", &join_code, &code("print(1)")],
    )
    .await;
    assert_eq!(asked.status.code(), Some(2));
    assert!(asked.stderr.contains("unknown, used"), "{}", asked.stderr);
}

#[tokio::test]
async fn a_join_typed_at_a_terminal_asks_first() {
    if !tmux_here() {
        return;
    }
    let server = TestServer::start().await;
    server.ready().await;
    let page = crate::support::http_as(Some(crate::support::OWNER))
        .post(server.url("/terminal"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let code_at = at(&page, "--join ") + "--join ".len();
    let join_code: String = page[code_at..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "env RUNCELL_CLIENT_DIR={dir} {RUNCELL} chat --url {url} --join {join_code}",
        dir = dir.path().display(),
        url = server.url(""),
    );
    let tmux = Tmux::open("join", &command, 120, 30).await;
    tmux.wait_for("the question", |s| s.contains("Join? [y/N]"))
        .await;
    tmux.keys(&["y", "Enter"]).await;
    tmux.wait_for("the join and the prompt", |s| {
        s.contains("joined: this terminal is now the owner") && s.contains("›")
    })
    .await;
    tmux.keys(&["C-d"]).await;
}
