use std::process::ExitCode;

use clap::Parser;
use runcell::cli::{Cli, Command};
use runcell::{Config, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let (Command::Serve(settings) | Command::Config(settings)) = &cli.command;
    let config = match Config::load(&settings.overrides()) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("runcell: {err}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Config(_) => {
            print!("{}", config.to_toml());
            ExitCode::SUCCESS
        }
        Command::Serve(_) => {
            telemetry::init(&config.log);
            match runcell::serve(config).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    tracing::error!("{err}");
                    eprintln!("runcell: {err}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
