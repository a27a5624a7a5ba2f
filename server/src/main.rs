use std::process::ExitCode;

use clap::Parser;
use runcell::cli::{BenchTarget, Cli, Command};
use runcell::telemetry;
use runcell_server::Config;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match &cli.command {
        Command::Ask(args) => return ask(args).await,
        Command::Chat(args) => {
            return runcell::terminal::chat(runcell::terminal::ChatOptions {
                connect: args.client.connect(),
                session: args.session.clone(),
                model: args.client.model.clone(),
                figures: args.client.figures.clone(),
            })
            .await;
        }
        Command::Serve(settings) | Command::Config(settings) | Command::Doctor(settings) => {
            settings
        }
        Command::Keys { action } => action.settings(),
        Command::Packages { action } => action.settings(),
        Command::Bench {
            target,
            iterations,
            idle_sessions,
            model,
            threads,
            tokens,
            llama_python,
            eval,
            sessions,
            events,
            interval_ms,
            database_url,
            seconds,
            anonymous,
            rss_budget_mib,
            url,
            concurrency,
            only,
            dabench_dir,
            sample,
            out,
            turn_timeout,
            typing,
        } => {
            let result = match target {
                BenchTarget::Sandbox => {
                    runcell::bench::sandbox::run(*iterations, *idle_sessions).await
                }
                BenchTarget::Llm => {
                    let options = runcell::bench::llm::LlmBenchOptions {
                        model: model.clone().unwrap_or_else(|| {
                            let defaults = Config::default();
                            defaults.llm.model_file(&defaults.data_dir)
                        }),
                        llama_python: llama_python
                            .clone()
                            .or_else(runcell::bench::llm::default_llama_python),
                        threads: *threads,
                        max_tokens: *tokens,
                        ttft_samples: *iterations,
                        eval: *eval,
                    };
                    runcell::bench::llm::run(options).await
                }
                BenchTarget::Agent => {
                    runcell::bench::agent::run(runcell::bench::agent::AgentBenchOptions {
                        url: url
                            .clone()
                            .unwrap_or_else(|| "http://127.0.0.1:3000".into()),
                        model: model.as_ref().map(|m| m.to_string_lossy().into_owned()),
                        only: only.clone(),
                        out: out.clone(),
                        turn_timeout: std::time::Duration::from_secs(*turn_timeout),
                    })
                    .await
                }
                BenchTarget::Dabench => {
                    let ids: Result<Vec<u64>, _> = only.iter().map(|id| id.parse()).collect();
                    match ids {
                        Ok(ids) => {
                            runcell::bench::dabench::run(runcell::bench::dabench::DabenchOptions {
                                url: url
                                    .clone()
                                    .unwrap_or_else(|| "http://127.0.0.1:3000".into()),
                                model: model.as_ref().map(|m| m.to_string_lossy().into_owned()),
                                dir: dabench_dir.clone(),
                                only: ids,
                                sample: *sample,
                                out: out.clone(),
                                turn_timeout: std::time::Duration::from_secs(*turn_timeout),
                                typing: std::time::Duration::from_secs(*typing),
                            })
                            .await
                        }
                        Err(e) => Err(runcell::bench::BenchError::new(format!(
                            "--only takes question ids for dabench: {e}"
                        ))),
                    }
                }
                BenchTarget::Throughput => {
                    runcell::bench::throughput::run(runcell::bench::throughput::ThroughputOptions {
                        url: url.clone(),
                        concurrency: concurrency.clone(),
                    })
                    .await
                }
                BenchTarget::Abuse => {
                    runcell::bench::abuse::run(runcell::bench::abuse::AbuseOptions {
                        seconds: *seconds,
                        anonymous: *anonymous,
                        rss_budget_mib: *rss_budget_mib,
                    })
                    .await
                }
                BenchTarget::Stream => {
                    runcell::bench::stream::run(runcell::bench::stream::StreamBenchOptions {
                        sessions: *sessions,
                        events_per_session: *events,
                        interval: std::time::Duration::from_millis(*interval_ms),
                    })
                    .await
                }
                BenchTarget::Cluster => {
                    let url = database_url
                        .clone()
                        .or_else(|| std::env::var("RUNCELL_DATABASE_URL").ok())
                        .unwrap_or_default();
                    if url.trim().is_empty() {
                        eprintln!(
                            "runcell bench cluster needs a PostgreSQL database: --database-url or RUNCELL_DATABASE_URL (scripts/pg-cluster.sh start DIR makes a throwaway one)"
                        );
                        return ExitCode::FAILURE;
                    }
                    runcell::bench::stream::run_cluster(
                        runcell::bench::stream::StreamBenchOptions {
                            sessions: *sessions,
                            events_per_session: *events,
                            interval: std::time::Duration::from_millis(*interval_ms),
                        },
                        &url,
                    )
                    .await
                }
            };
            return match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("runcell: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    };
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
        Command::Keys { action } => match runcell::cli::keys::run(&action, &config).await {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("runcell: {err}");
                ExitCode::FAILURE
            }
        },
        Command::Packages { action } => runcell::cli::packages::run(&action, &config).await,
        Command::Doctor(_) => doctor(&config).await,
        Command::Bench { .. } | Command::Ask(_) | Command::Chat(_) => ExitCode::SUCCESS,
        Command::Serve(_) => {
            telemetry::init(&config.log);
            match runcell_server::serve(config).await {
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

async fn ask(args: &runcell::cli::AskArgs) -> ExitCode {
    let question = if args.question == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            eprintln!("runcell: cannot read the question from standard input: {e}");
            return ExitCode::from(2);
        }
        text
    } else {
        args.question.clone()
    };
    if question.trim().is_empty() {
        eprintln!("runcell: the question is empty");
        return ExitCode::from(2);
    }
    runcell::terminal::ask(runcell::terminal::AskOptions {
        connect: args.client.connect(),
        question,
        session: args.session.clone(),
        files: args.files.clone(),
        replace: args.replace,
        json: args.json,
        model: args.client.model.clone(),
        figures: args.client.figures.clone(),
    })
    .await
}

async fn doctor(config: &Config) -> ExitCode {
    let mut jail = runcell_sandbox::jail::JailConfig::from_settings(&config.sandbox);
    jail.packages = runcell_sandbox::packages::index_for_jails(&config.packages, &config.data_dir)
        .map(runcell_sandbox::jail::JailPackages);
    let checks = runcell_sandbox::jail::doctor::run_checks(jail).await;
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for check in &checks {
        let mark = if check.ok { "ok  " } else { "FAIL" };
        println!("{mark}  {:width$}  {}", check.name, check.detail);
    }
    if checks.iter().all(|c| c.ok) {
        ExitCode::SUCCESS
    } else {
        println!("\nThe sandbox cannot run code until every line above is ok.");
        ExitCode::FAILURE
    }
}
