//! `runcell`: reads the command line and runs the command, each with its
//! own `run` in a module of [`runcell::cli`].

use std::process::ExitCode;

use clap::Parser;
use runcell::cli::{self, Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(settings) => cli::serve::run(&settings).await,
        Command::Config(settings) => cli::config::run(&settings),
        Command::Ask(args) => cli::ask::run(&args).await,
        Command::Chat(args) => cli::chat::run(&args).await,
        Command::Keys { action } => cli::keys::run(&action).await,
        Command::Packages { action } => cli::packages::run(&action).await,
        Command::Doctor(settings) => cli::doctor::run(&settings).await,
        Command::Bench(args) => cli::bench::run(&args).await,
    }
}
