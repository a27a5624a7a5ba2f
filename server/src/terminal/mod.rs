//! The terminal client: `runcell ask` (one question, its turn printed, then
//! exit) and `runcell chat` (a conversation). Each turn is drawn as the
//! notebook draws it, as panels: code, result, explanation.
//!
//! Both talk to a running runcell over the notebook's NDJSON API
//! ([`remote`]), so a session made here is an ordinary session of the
//! client's owner; or, with `--embedded`, run the engine in this process
//! ([`embedded`]). Everything drawn comes through [`look`], which keeps
//! what a program or a model wrote from driving the terminal.

mod chat;
mod embedded;
mod engine;
mod identity;
mod look;
mod markdown;
mod panels;
mod remote;
mod turn;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::LazyLock;

use anstyle::{AnsiColor, Style};
use app::protocol::TurnStatus;

pub use engine::{Backend, ClientError};
use identity::{Identities, client_dir};
use look::Look;
use panels::Panels;

use runcell_agent::highlight::Highlighter;
use runcell_server::config::{Config, Overrides};
use turn::{Ending, Interrupts, Sink, Spinner};

/// The grammars, loaded once.
static HIGHLIGHTER: LazyLock<Highlighter> = LazyLock::new(Highlighter::new);

/// Where the client finds runcell.
#[derive(Clone, Debug)]
pub struct Connect {
    /// A server's address; ignored when `embedded`.
    pub url: String,
    pub key: Option<String>,
    /// Run the engine in this process, on `data_dir`.
    pub embedded: bool,
    pub data_dir: Option<PathBuf>,
    /// A browser's hand-over code: become its owner first.
    pub join: Option<String>,
}

/// `runcell ask`.
#[derive(Clone, Debug)]
pub struct AskOptions {
    pub connect: Connect,
    pub question: String,
    pub session: Option<String>,
    pub files: Vec<PathBuf>,
    /// Replace a file of the same name already in the session.
    pub replace: bool,
    pub json: bool,
    pub model: Option<String>,
    pub figures: Option<PathBuf>,
}

/// `runcell chat`.
#[derive(Clone, Debug)]
pub struct ChatOptions {
    pub connect: Connect,
    pub session: Option<String>,
    pub model: Option<String>,
    pub figures: Option<PathBuf>,
}

/// Exit statuses.
const FAILED_TURN: u8 = 1;
const CANNOT: u8 = 2;
const INTERRUPTED: u8 = 130;

/// Connects to runcell as `connect` says.
async fn open(connect: &Connect) -> Result<Box<dyn Backend>, ClientError> {
    let identities = Identities::in_dir(&client_dir());
    if connect.embedded {
        let overrides = Overrides {
            data_dir: connect.data_dir.clone(),
            ..Overrides::default()
        };
        let config = Config::load(&overrides).map_err(|e| ClientError::Local(e.to_string()))?;
        let engine = embedded::InProcess::start(config, &identities).await?;
        Ok(Box::new(engine))
    } else {
        let engine = remote::Remote::connect(&connect.url, connect.key.clone(), identities).await?;
        if let Some(code) = &connect.join {
            if std::io::stdin().is_terminal() && !confirm_join(&engine).await? {
                return Err(ClientError::Local("not joined".into()));
            }
            let moved = engine.join(code).await?;
            eprintln!(
                "joined: this terminal is now the owner of the browser that made the code, and lists its sessions; {moved} session(s) of this terminal moved there"
            );
        }
        Ok(Box::new(engine))
    }
}

/// Asks the person at the terminal before a join: whoever made the code
/// will see what is asked here, and this terminal's sessions go there.
async fn confirm_join(engine: &remote::Remote) -> Result<bool, ClientError> {
    let sessions = engine.session_count().await?;
    eprint!(
        "--join makes this terminal the owner of the browser that made the code, at {}: that browser will see what you ask here, and this terminal's {sessions} session(s) move there. Join? [y/N] ",
        look::clean(&engine.describe())
    );
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| ClientError::Local(e.to_string()))??;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// An error on standard error, cleaned: it may quote what a server or a
/// program sent.
fn complain(error: &dyn std::fmt::Display) {
    let look = Look::of_stderr();
    let line = look.paint(
        Style::new().fg_color(Some(AnsiColor::Red.into())),
        &look::clean(&format!("runcell: {error}")),
    );
    eprintln!("{line}");
}

/// Where a session's images go: `figures`, or the session's directory in
/// the client's own (not a shared temporary directory another user could
/// prepare).
fn figures_dir(figures: Option<&Path>, session: &str) -> PathBuf {
    let base = figures.map_or_else(|| client_dir().join("figures"), Path::to_path_buf);
    let safe: String = session
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    base.join(safe)
}

/// The largest file the client reads to upload (the server's own limit,
/// 50 MiB by default, is smaller still).
const MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// Reads a file to upload, within [`MAX_UPLOAD_BYTES`].
fn read_upload(path: &Path) -> Result<(String, Vec<u8>), ClientError> {
    let size = std::fs::metadata(path)
        .map_err(|e| ClientError::Local(format!("cannot read {}: {e}", path.display())))?
        .len();
    if size > MAX_UPLOAD_BYTES {
        return Err(ClientError::Local(format!(
            "{} is over the 1 GiB a client uploads",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ClientError::Local(format!("{} names no file", path.display())))?
        .to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| ClientError::Local(format!("cannot read {}: {e}", path.display())))?;
    Ok((name, bytes))
}

/// The session asked for, if it is one of the client's, or a new one;
/// `None` (and said why) when there is neither.
async fn session_to_use(engine: &dyn Backend, asked: Option<&str>) -> Option<String> {
    let found = match asked {
        Some(id) => engine.check_session(id).await.map(|()| id.to_string()),
        None => engine.new_session().await,
    };
    match (found, asked) {
        (Ok(id), _) => Some(id),
        (Err(e), Some(id)) if e.is_not_found() => {
            complain(&format!(
                "no session {id} of yours at {}",
                engine.describe()
            ));
            None
        }
        (Err(e), _) => {
            complain(&e);
            None
        }
    }
}

/// `runcell ask`: one turn, printed; the exit status says how it ended.
pub async fn ask(options: AskOptions) -> ExitCode {
    let engine = match open(&options.connect).await {
        Ok(engine) => engine,
        Err(e) => {
            complain(&e);
            return ExitCode::from(CANNOT);
        }
    };
    let code = ask_on(&*engine, &options).await;
    engine.close().await;
    ExitCode::from(code)
}

async fn ask_on(engine: &dyn Backend, options: &AskOptions) -> u8 {
    let Some(session) = session_to_use(engine, options.session.as_deref()).await else {
        return CANNOT;
    };
    for path in &options.files {
        let uploaded = match read_upload(path) {
            Ok((name, bytes)) => engine
                .upload(&session, &name, bytes, options.replace)
                .await
                .map(|u| (name, u)),
            Err(e) => Err(e),
        };
        match uploaded {
            Ok((_, engine::Uploaded::Written(file))) => {
                eprintln!("uploaded {} ({} bytes)", look::clean(&file.path), file.size);
            }
            Ok((name, engine::Uploaded::Exists)) => {
                eprintln!(
                    "{} is already in the session: the session's copy is kept (--replace replaces it)",
                    look::clean(&name)
                );
            }
            Err(e) => {
                complain(&e);
                return CANNOT;
            }
        }
    }
    // From here Ctrl+C stops the turn rather than ending the client (until
    // here it ends it, as it would any command).
    let mut interrupts = match Interrupts::listen() {
        Ok(interrupts) => interrupts,
        Err(e) => {
            complain(&e);
            return CANNOT;
        }
    };
    let turn = match engine
        .ask(&session, &options.question, options.model.as_deref())
        .await
    {
        Ok(turn) => turn,
        Err(e) => {
            complain(&e);
            return CANNOT;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let mut spinner = Spinner::new(!options.json);
    let ending = if options.json {
        turn::follow::<std::io::Sink>(
            engine,
            &session,
            turn,
            Sink::Json(&mut stdout),
            &mut interrupts,
            &mut spinner,
        )
        .await
    } else {
        let figures = figures_dir(options.figures.as_deref(), &session);
        let mut panels = Panels::new(&mut stdout, Look::of_stdout(), &HIGHLIGHTER, Some(figures));
        turn::follow(
            engine,
            &session,
            turn,
            Sink::Panels(&mut panels),
            &mut interrupts,
            &mut spinner,
        )
        .await
    };
    let _ = stdout.flush();
    drop(stdout);
    if !options.json {
        let follow_up = match engine.page(&session) {
            Some(page) => format!("session {session} · {page}"),
            None => format!("session {session}"),
        };
        eprintln!("{follow_up}");
    }
    match ending {
        Ending::Finished(TurnStatus::Ok) => 0,
        Ending::Finished(_) => FAILED_TURN,
        Ending::Broken(e) => {
            complain(&e);
            CANNOT
        }
        Ending::Left => INTERRUPTED,
    }
}

/// `runcell chat`: a conversation until `/exit`, Ctrl+D or a second Ctrl+C.
pub async fn chat(options: ChatOptions) -> ExitCode {
    let engine = match open(&options.connect).await {
        Ok(engine) => engine,
        Err(e) => {
            complain(&e);
            return ExitCode::from(CANNOT);
        }
    };
    let interrupts = match Interrupts::listen() {
        Ok(interrupts) => interrupts,
        Err(e) => {
            complain(&e);
            engine.close().await;
            return ExitCode::from(CANNOT);
        }
    };
    let code = chat::run(&*engine, &options, interrupts).await;
    engine.close().await;
    ExitCode::from(code)
}
