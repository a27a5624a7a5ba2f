//! The command line: its arguments ([`Cli`]) here, and a module per
//! command with the `run` that `main` calls for it.

pub mod ask;
pub mod bench;
pub mod chat;
pub mod config;
pub mod doctor;
pub mod keys;
pub mod packages;
pub mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use runcell_server::config::{Config, Overrides};

#[derive(Debug, Parser)]
#[command(
    name = "runcell",
    version,
    about = "A self-hostable code interpreter for the browser"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the notebook, the WebSocket and the API.
    Serve(Settings),
    /// Print the effective configuration (secrets redacted) and exit.
    Config(Settings),
    /// Ask one question and print its turn as panels: the code, its
    /// result, the explanation. Exits 1 when the turn failed or was stopped.
    Ask(AskArgs),
    /// Talk to runcell in the terminal: each question's code, result and
    /// explanation as panels; variables last between questions.
    Chat(ChatArgs),
    /// Make, list and revoke API keys (for `/v1` and `/mcp`).
    Keys {
        #[command(subcommand)]
        action: KeysCommand,
    },
    /// runcell's package index: fill its cache ahead (for a machine that
    /// will run offline, `packages.offline = true`).
    Packages {
        #[command(subcommand)]
        action: PackagesCommand,
    },
    /// Check every sandbox isolation layer and run hello-world in each
    /// language inside the jail; exits non-zero if anything is missing.
    /// Takes the same settings as `serve` (the uid range, the caps on all
    /// jails together).
    Doctor(Settings),
    /// Measure and print a table beside the targets: the sandbox (latency
    /// percentiles, idle memory), the language models, the event stream
    /// to pages (added latency, lost events), the agent's answers (how
    /// many are right, through a running runcell's API), or one-shot
    /// programs per second through the API beside bare processes.
    Bench(BenchArgs),
}

/// Where the terminal client finds runcell, and what it asks for.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The runcell server to talk to.
    #[arg(long, env = "RUNCELL_URL", default_value = "http://127.0.0.1:3000")]
    pub url: String,
    /// An API key, for a server whose pages ask for one.
    #[arg(long, env = "RUNCELL_API_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// Run runcell's engine in this process instead of talking to a
    /// server: the embedded model, the local jail, the data directory.
    #[arg(long)]
    pub embedded: bool,
    /// Become the owner of a browser's sessions with the code its "Use in
    /// a terminal" button gives: both then list the same sessions, and the
    /// sessions this terminal had move there.
    #[arg(long, value_name = "CODE", conflicts_with = "embedded")]
    pub join: Option<String>,
    /// `--embedded`: the data directory [default: ./data]
    #[arg(long, requires = "embedded")]
    pub data_dir: Option<PathBuf>,
    /// The model to ask [default: the server's]
    #[arg(long)]
    pub model: Option<String>,
    /// Where images are saved [default: <temporary directory>/runcell/<session>]
    #[arg(long)]
    pub figures: Option<PathBuf>,
}

impl ClientArgs {
    pub fn connect(&self) -> crate::terminal::Connect {
        crate::terminal::Connect {
            url: self.url.clone(),
            key: self.key.clone(),
            embedded: self.embedded,
            data_dir: self.data_dir.clone(),
            join: self.join.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question (`-` reads it from standard input).
    pub question: String,
    /// Ask in this session (its variables and files are there); a new one
    /// by default.
    #[arg(long)]
    pub session: Option<String>,
    /// Upload this file into the session first (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Replace a file of the same name already in the session.
    #[arg(long)]
    pub replace: bool,
    /// Print the turn's events as NDJSON, one a line, instead of panels.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Go on with this session [default: a new one]
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key; it is printed once, on the last line, and only its
    /// digest is kept.
    Create {
        /// A name to tell the key by (letters, digits, `.`, `_`, `-`).
        #[arg(long)]
        name: String,
        #[command(flatten)]
        settings: Settings,
    },
    /// List the keys (never the keys themselves).
    List {
        #[command(flatten)]
        settings: Settings,
    },
    /// Revoke the live key of that name: its tokens stop working at once.
    Revoke {
        name: String,
        #[command(flatten)]
        settings: Settings,
    },
}

impl KeysCommand {
    pub fn settings(&self) -> &Settings {
        match self {
            Self::Create { settings, .. }
            | Self::List { settings }
            | Self::Revoke { settings, .. } => settings,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PackagesCommand {
    /// Fetch what a requirements file needs (with its dependencies, as a
    /// session's `pip install -r` would, under the same policy) into the
    /// index's cache, through a jail: pip resolves, the index downloads
    /// and checks each file.
    Fetch {
        /// The requirements file (pip's format).
        #[arg(short = 'r', long = "requirement")]
        requirements: PathBuf,
        #[command(flatten)]
        settings: Settings,
    },
}

impl PackagesCommand {
    pub fn settings(&self) -> &Settings {
        match self {
            Self::Fetch { settings, .. } => settings,
        }
    }
}

/// `runcell bench`'s arguments: what to measure, and each bench's knobs.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[arg(value_enum, default_value_t = BenchTarget::Sandbox)]
    pub target: BenchTarget,
    /// Samples per measure.
    #[arg(long, default_value_t = 20)]
    pub iterations: usize,
    /// Idle sessions to open for the memory measure (0 skips it).
    #[arg(long, default_value_t = 100)]
    pub idle_sessions: usize,
    /// `llm`: the GGUF to measure [default: ./data/models/<default model>];
    /// `agent`: the model to ask for [default: the server's]
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// `agent`: the runcell to ask [default: http://127.0.0.1:3000];
    /// `throughput`: the runcell to measure (with `RUNCELL_API_KEY`)
    /// [default: one started from this binary].
    #[arg(long)]
    pub url: Option<String>,
    /// `throughput`: concurrency levels (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4])]
    pub concurrency: Vec<usize>,
    /// `agent`: only the tasks whose id contains this (repeatable);
    /// `dabench`: only these question ids.
    #[arg(long)]
    pub only: Vec<String>,
    /// `dabench`: the directory with the questions, labels and tables.
    #[arg(long, default_value = "../shared/dabench")]
    pub dabench_dir: PathBuf,
    /// `dabench`: a sample of this many questions, spread over levels.
    #[arg(long)]
    pub sample: Option<usize>,
    /// `agent`: write every turn's details (code, output, explanation,
    /// verdicts) to this JSON file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `agent`: the longest one turn may take, in seconds.
    #[arg(long, default_value_t = 300)]
    pub turn_timeout: u64,
    /// `dabench`: the longest a question is "typed" after its file is
    /// uploaded, in seconds: the server reads the conversation ahead
    /// meanwhile, as it does for a page's person (0: asked at once).
    #[arg(long, default_value_t = 30)]
    pub typing: u64,
    /// `llm`: threads for both engines.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// `llm`: tokens generated per run.
    #[arg(long, default_value_t = 64)]
    pub tokens: u32,
    /// `llm`: llama-cpp-python's interpreter [default: the one
    /// scripts/setup-llama-cpp-python.sh builds]
    #[arg(long)]
    pub llama_python: Option<PathBuf>,
    /// `llm`: also measure how often replies are programs that run
    /// (constrained vs unconstrained; minutes).
    #[arg(long)]
    pub eval: bool,
    /// `stream`: sessions streaming at once.
    #[arg(long, default_value_t = 50)]
    pub sessions: usize,
    /// `stream`: events each session publishes.
    #[arg(long, default_value_t = 200)]
    pub events: usize,
    /// `stream`: milliseconds between two events of a session.
    #[arg(long, default_value_t = 5)]
    pub interval_ms: u64,
    /// `cluster`: the PostgreSQL database both nodes share
    /// (`scripts/pg-cluster.sh start DIR` makes a throwaway one)
    /// [default: RUNCELL_DATABASE_URL]
    #[arg(long)]
    pub database_url: Option<String>,
    /// `abuse`: how long the attacks last, in seconds.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// `abuse`: anonymous pages attacking at once.
    #[arg(long, default_value_t = 24)]
    pub anonymous: usize,
    /// `abuse`: how far the server's RSS may grow, in MiB (what the
    /// budgets let the attacks hold: 256 MiB of idle histories, two
    /// imports being parsed, pages being sent, and the allocator's keep).
    #[arg(long, default_value_t = 1536)]
    pub rss_budget_mib: u64,
}

/// What `runcell bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchTarget {
    Sandbox,
    Llm,
    Stream,
    /// `stream` across two nodes on one PostgreSQL database.
    Cluster,
    Agent,
    /// InfiAgent-DABench's questions through the agent (`--dabench-dir`).
    Dabench,
    Throughput,
    /// The review's attacks at once against a runcell started from this
    /// binary, while a key and a signed-in page use it.
    Abuse,
}

/// Settings that may be given as flags; they win over the environment
/// (`RUNCELL_ADDR`, `RUNCELL_DATA_DIR`, `RUNCELL_DATABASE_URL`) and
/// `runcell.toml`.
#[derive(Debug, Args)]
pub struct Settings {
    /// Address to listen on [default: 127.0.0.1:3000]
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// Directory for runcell's files and its runcell.toml [default: ./data]
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// PostgreSQL for sessions and keys, shared by several nodes
    /// (postgres://user:password@host:port/db) [default: SQLite in the data directory]
    #[arg(long)]
    pub database_url: Option<String>,
}

impl Settings {
    /// The effective configuration (defaults, `runcell.toml`, the
    /// environment, these flags); when it cannot be read, says why and
    /// gives the exit code for it (2).
    pub fn load(&self) -> Result<Config, ExitCode> {
        Config::load(&self.overrides()).map_err(|err| {
            eprintln!("runcell: {err}");
            ExitCode::from(2)
        })
    }

    pub fn overrides(&self) -> Overrides {
        Overrides {
            addr: self.addr,
            data_dir: self.data_dir.clone(),
            database_url: self.database_url.clone(),
        }
    }
}
