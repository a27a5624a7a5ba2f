//! `runcell chat`: read a question (with line editing and history), draw
//! its turn, again; the session, and its variables, last between
//! questions. Lines that start with `/` are the client's own commands.

use std::io::Write;
use std::path::{Path, PathBuf};

use anstyle::{AnsiColor, Style};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config as EditorConfig, Editor};

use super::engine::{Backend, ClientError, Uploaded};
use super::look::{Look, clean};
use super::panels::Panels;
use super::turn::{self, Ending, Interrupts, Sink, Spinner};
use super::{ChatOptions, HIGHLIGHTER, client_dir, figures_dir, read_upload};

const PROMPT: &str = "› ";
const MORE: &str = "… ";
/// The most lines one question may take (an unclosed code fence ends there).
const MAX_QUESTION_LINES: usize = 2000;

const HELP: &str = "\
Ask in plain language; a line that opens a ``` code fence goes on until it is closed.
  /files              the files in the session
  /upload PATH        put a file into the session (/upload --replace PATH replaces one)
  /download NAME [TO] save a file of the session here (or to TO)
  /share              a read-only link to the session
  /rerun              run the session's code again in a fresh kernel
  /new                start a new session
  /session            this session's id and page
  /exit               leave (also Ctrl+D, or Ctrl+C twice)
Ctrl+C during a turn stops it.";

type LineEditor = Editor<(), FileHistory>;

/// What one read of the prompt gave.
enum Input {
    Line(String),
    /// Ctrl+C at the prompt.
    Interrupted,
    /// Ctrl+D, or the end of piped input.
    End,
}

/// Reads a line on a thread of its own (the editor blocks).
async fn read(editor: LineEditor, prompt: &'static str) -> Option<(LineEditor, Input)> {
    let joined = tokio::task::spawn_blocking(move || {
        let mut editor = editor;
        let input = match editor.readline(prompt) {
            Ok(line) => Input::Line(line),
            Err(ReadlineError::Interrupted) => Input::Interrupted,
            Err(ReadlineError::Eof) => Input::End,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a line");
                Input::End
            }
        };
        (editor, input)
    })
    .await;
    joined.ok()
}

fn new_editor() -> rustyline::Result<LineEditor> {
    let config = EditorConfig::builder()
        .auto_add_history(true)
        .max_history_size(1000)
        .map_or_else(|_| EditorConfig::default(), |b| b.build());
    Editor::with_config(config)
}

/// Whether `text` has a code fence left open.
fn open_fence(text: &str) -> bool {
    text.lines()
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
        % 2
        == 1
}

pub async fn run(engine: &dyn Backend, options: &ChatOptions, mut interrupts: Interrupts) -> u8 {
    let look = Look::of_stdout();
    let mut stdout = std::io::stdout();
    let history = client_dir().join("chat_history");
    let mut editor = match new_editor() {
        Ok(editor) => editor,
        Err(e) => {
            super::complain(&format!("cannot read from this terminal: {e}"));
            return super::CANNOT;
        }
    };
    let _ = editor.load_history(&history);

    let Some(mut session) = super::session_to_use(engine, options.session.as_deref()).await else {
        return super::CANNOT;
    };
    let model = match &options.model {
        Some(model) => Some(model.clone()),
        None => engine.default_model().await,
    };
    let title = look.paint(Style::new().bold(), "runcell chat");
    let model_note = model.map_or(String::new(), |m| format!(" · model {}", clean(&m)));
    let _ = writeln!(stdout, "{title} · {}{model_note}", engine.describe());
    let _ = writeln!(
        stdout,
        "{}",
        look.paint(
            Style::new().dimmed(),
            &format!(
                "session {session} · /help for commands · /exit, Ctrl+D or Ctrl+C twice to leave"
            )
        )
    );

    let mut spinner = Spinner::new(true);
    let mut interrupted_at_prompt = false;
    let code = 'chat: loop {
        let _ = stdout.flush();
        // A terminal's Ctrl+C at the prompt is a key (the editor reads it);
        // a signal there comes from elsewhere (a piped chat): it leaves.
        interrupts.forget();
        let (back, input) = tokio::select! {
            read = read(editor, PROMPT) => match read {
                Some(read) => read,
                None => return 0,
            },
            () = interrupts.next() => return super::INTERRUPTED,
        };
        editor = back;
        let mut text = match input {
            Input::End => break 0,
            Input::Interrupted => {
                if interrupted_at_prompt {
                    break 0;
                }
                interrupted_at_prompt = true;
                let _ = writeln!(
                    stdout,
                    "{}",
                    look.paint(
                        Style::new().dimmed(),
                        "(Ctrl+C again, /exit or Ctrl+D to leave)"
                    )
                );
                continue;
            }
            Input::Line(line) => line,
        };
        interrupted_at_prompt = false;
        let mut lines = 1;
        while open_fence(&text) && lines < MAX_QUESTION_LINES {
            let Some((back, more)) = read(editor, MORE).await else {
                return 0;
            };
            editor = back;
            match more {
                Input::Line(line) => {
                    text.push('\n');
                    text.push_str(&line);
                    lines += 1;
                }
                Input::Interrupted => {
                    text.clear();
                    break;
                }
                Input::End => break,
            }
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        if matches!(trimmed, "exit" | "quit") {
            break 0;
        }
        if let Some(command) = trimmed.strip_prefix('/') {
            match command_of(command) {
                Command::Exit => break 'chat 0,
                Command::Help => {
                    let _ = writeln!(stdout, "{HELP}");
                }
                Command::New => match engine.new_session().await {
                    Ok(id) => {
                        session = id;
                        let _ = writeln!(stdout, "new session {session}");
                    }
                    Err(e) => say_error(&look, &e),
                },
                Command::Session => {
                    let page = engine.page(&session).unwrap_or_default();
                    let _ = writeln!(stdout, "session {session} {page}");
                }
                Command::Files => match engine.files(&session).await {
                    Ok(files) if files.is_empty() => {
                        let _ = writeln!(stdout, "no files yet (/upload PATH adds one)");
                    }
                    Ok(files) => {
                        for file in files {
                            let _ = writeln!(
                                stdout,
                                "  {:<40} {:>10}",
                                clean(&file.path),
                                if file.kind == "directory" {
                                    "dir".to_string()
                                } else {
                                    format!("{} B", file.size)
                                }
                            );
                        }
                    }
                    Err(e) => say_error(&look, &e),
                },
                Command::Upload { path, replace } => {
                    upload(engine, &session, &path, replace, &look).await;
                }
                Command::Download { name, to } => {
                    download(engine, &session, &name, to.as_deref(), &look).await;
                }
                Command::Share => match engine.share(&session).await {
                    Ok(url) => {
                        let _ = writeln!(stdout, "{}", clean(&url));
                    }
                    Err(e) => say_error(&look, &e),
                },
                Command::Rerun => {
                    let started = engine.rerun(&session).await;
                    if let Some(code) = follow(
                        engine,
                        &session,
                        started,
                        options,
                        &mut interrupts,
                        &mut spinner,
                    )
                    .await
                    {
                        break 'chat code;
                    }
                }
                Command::Unknown(word) => {
                    let _ = writeln!(stdout, "no command /{} (/help lists them)", clean(&word));
                }
            }
            continue;
        }
        let started = engine.ask(&session, &text, options.model.as_deref()).await;
        if let Some(code) = follow(
            engine,
            &session,
            started,
            options,
            &mut interrupts,
            &mut spinner,
        )
        .await
        {
            break code;
        }
    };
    spinner.clear();
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = editor.save_history(&history);
    let _ = writeln!(stdout, "session {session}");
    code
}

/// Follows a turn that was asked for (or says why it did not start);
/// `Some(code)` when the chat should end.
async fn follow(
    engine: &dyn Backend,
    session: &str,
    started: Result<super::engine::TurnStream, ClientError>,
    options: &ChatOptions,
    interrupts: &mut Interrupts,
    spinner: &mut Spinner,
) -> Option<u8> {
    let look = Look::of_stdout();
    let turn = match started {
        Ok(turn) => turn,
        Err(e) => {
            say_error(&look, &e);
            return None;
        }
    };
    let figures = figures_dir(options.figures.as_deref(), session);
    let mut stdout = std::io::stdout();
    let mut panels = Panels::new(&mut stdout, look, &HIGHLIGHTER, Some(figures));
    let ending = turn::follow(
        engine,
        session,
        turn,
        Sink::Panels(&mut panels),
        interrupts,
        spinner,
    )
    .await;
    match ending {
        Ending::Finished(_) => None,
        Ending::Broken(e) => {
            say_error(&look, &e);
            None
        }
        Ending::Left => Some(super::INTERRUPTED),
    }
}

fn say_error(look: &Look, error: &ClientError) {
    let line = look.paint(
        Style::new().fg_color(Some(AnsiColor::Red.into())),
        &clean(&error.to_string()),
    );
    println!("{line}");
}

#[derive(Debug, PartialEq, Eq)]
enum Command {
    Exit,
    Help,
    New,
    Session,
    Files,
    Upload { path: PathBuf, replace: bool },
    Download { name: String, to: Option<PathBuf> },
    Share,
    Rerun,
    Unknown(String),
}

/// A command line (after its `/`). Paths are the rest of the line, so they
/// may hold spaces.
fn command_of(line: &str) -> Command {
    let (word, rest) = line
        .trim()
        .split_once(char::is_whitespace)
        .map_or((line.trim(), ""), |(w, r)| (w, r.trim()));
    match word {
        "exit" | "quit" | "q" => Command::Exit,
        "help" | "?" => Command::Help,
        "new" => Command::New,
        "session" => Command::Session,
        "files" | "ls" => Command::Files,
        "upload" if !rest.is_empty() => {
            let (replace, path) = match rest.strip_prefix("--replace") {
                Some(path) => (true, path.trim()),
                None => (false, rest),
            };
            Command::Upload {
                path: PathBuf::from(path),
                replace,
            }
        }
        "download" if !rest.is_empty() => {
            let (name, to) = match rest.split_once(char::is_whitespace) {
                Some((name, to)) => (name, Some(PathBuf::from(to.trim()))),
                None => (rest, None),
            };
            Command::Download {
                name: name.to_string(),
                to,
            }
        }
        "share" => Command::Share,
        "rerun" => Command::Rerun,
        other => Command::Unknown(other.chars().take(40).collect()),
    }
}

async fn upload(engine: &dyn Backend, session: &str, path: &Path, replace: bool, look: &Look) {
    let (name, bytes) = match read_upload(path) {
        Ok(file) => file,
        Err(e) => return say_error(look, &e),
    };
    match engine.upload(session, &name, bytes, replace).await {
        Ok(Uploaded::Written(file)) => {
            println!("uploaded {} ({} bytes)", clean(&file.path), file.size);
        }
        Ok(Uploaded::Exists) => println!(
            "{} is already in the session: kept (/upload --replace {} replaces it)",
            clean(&name),
            path.display()
        ),
        Err(e) => say_error(look, &e),
    }
}

async fn download(engine: &dyn Backend, session: &str, name: &str, to: Option<&Path>, look: &Look) {
    let bytes = match engine.download(session, name).await {
        Ok(bytes) => bytes,
        Err(e) => return say_error(look, &e),
    };
    // Only the file's own name is used here: never a path the server chose.
    let file_name = Path::new(name)
        .file_name()
        .map_or_else(|| "download".into(), |n| n.to_os_string());
    let target = match to {
        Some(to) if to.is_dir() => to.join(file_name),
        Some(to) => to.to_path_buf(),
        None => PathBuf::from(file_name),
    };
    // Never over a file (or through a link) that is there.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)
        .and_then(|mut file| file.write_all(&bytes));
    match written {
        Ok(()) => println!("saved {} ({} bytes)", target.display(), bytes.len()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => say_error(
            look,
            &ClientError::Local(format!(
                "{} exists here already: name another place (/download {} PATH)",
                target.display(),
                clean(name)
            )),
        ),
        Err(e) => say_error(look, &ClientError::Io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_with_their_arguments() {
        let cases = [
            ("exit", Command::Exit),
            ("files", Command::Files),
            (
                "upload my data.csv",
                Command::Upload {
                    path: "my data.csv".into(),
                    replace: false,
                },
            ),
            (
                "upload --replace a.csv",
                Command::Upload {
                    path: "a.csv".into(),
                    replace: true,
                },
            ),
            (
                "download out.png /tmp/x.png",
                Command::Download {
                    name: "out.png".into(),
                    to: Some("/tmp/x.png".into()),
                },
            ),
            ("upload", Command::Unknown("upload".into())),
            ("frobnicate now", Command::Unknown("frobnicate".into())),
        ];
        for (line, expected) in cases {
            assert_eq!(command_of(line), expected, "{line}");
        }
    }

    #[test]
    fn an_open_fence_asks_for_more() {
        assert!(open_fence("run this\n```python"));
        assert!(!open_fence("```python\nprint(1)\n```"));
        assert!(!open_fence("plain question"));
    }
}
