//! `runcell bench TARGET`: the arguments turned into a bench's options and
//! the bench run (the benches are the `runcell-bench` crate); a failed
//! bench says why and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use runcell_bench::BenchError;
use runcell_bench::abuse::AbuseOptions;
use runcell_bench::agent::AgentBenchOptions;
use runcell_bench::dabench::DabenchOptions;
use runcell_bench::llm::LlmBenchOptions;
use runcell_bench::stream::StreamBenchOptions;
use runcell_bench::throughput::ThroughputOptions;
use runcell_server::Config;

use super::{BenchArgs, BenchTarget};

/// The runcell the agent benches ask when no `--url` is given.
const LOCAL_RUNCELL: &str = "http://127.0.0.1:3000";

pub async fn run(args: &BenchArgs) -> ExitCode {
    let result = match args.target {
        BenchTarget::Sandbox => {
            runcell_bench::sandbox::run(args.iterations, args.idle_sessions).await
        }
        BenchTarget::Llm => runcell_bench::llm::run(llm_options(args)).await,
        BenchTarget::Agent => runcell_bench::agent::run(agent_options(args)).await,
        BenchTarget::Dabench => match dabench_options(args) {
            Ok(options) => runcell_bench::dabench::run(options).await,
            Err(e) => Err(e),
        },
        BenchTarget::Throughput => {
            runcell_bench::throughput::run(ThroughputOptions {
                url: args.url.clone(),
                concurrency: args.concurrency.clone(),
            })
            .await
        }
        BenchTarget::Abuse => {
            runcell_bench::abuse::run(AbuseOptions {
                seconds: args.seconds,
                anonymous: args.anonymous,
                rss_budget_mib: args.rss_budget_mib,
            })
            .await
        }
        BenchTarget::Stream => runcell_bench::stream::run(stream_options(args)).await,
        BenchTarget::Cluster => {
            let Some(database_url) = cluster_database_url(args) else {
                eprintln!(
                    "runcell bench cluster needs a PostgreSQL database: --database-url or RUNCELL_DATABASE_URL (scripts/pg-cluster.sh start DIR makes a throwaway one)"
                );
                return ExitCode::FAILURE;
            };
            runcell_bench::stream::run_cluster(stream_options(args), &database_url).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runcell: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--model` as the name a server is asked for.
fn model_name(args: &BenchArgs) -> Option<String> {
    args.model
        .as_ref()
        .map(|m| m.to_string_lossy().into_owned())
}

fn llm_options(args: &BenchArgs) -> LlmBenchOptions {
    LlmBenchOptions {
        model: args.model.clone().unwrap_or_else(|| {
            let defaults = Config::default();
            defaults.llm.model_file(&defaults.data_dir)
        }),
        llama_python: args
            .llama_python
            .clone()
            .or_else(runcell_bench::llm::default_llama_python),
        threads: args.threads,
        max_tokens: args.tokens,
        ttft_samples: args.iterations,
        eval: args.eval,
    }
}

fn agent_options(args: &BenchArgs) -> AgentBenchOptions {
    AgentBenchOptions {
        url: args.url.clone().unwrap_or_else(|| LOCAL_RUNCELL.into()),
        model: model_name(args),
        only: args.only.clone(),
        out: args.out.clone(),
        turn_timeout: Duration::from_secs(args.turn_timeout),
    }
}

/// The options, or why `--only` is not a list of question ids.
fn dabench_options(args: &BenchArgs) -> Result<DabenchOptions, BenchError> {
    let only = args
        .only
        .iter()
        .map(|id| id.parse())
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|e| BenchError::new(format!("--only takes question ids for dabench: {e}")))?;
    Ok(DabenchOptions {
        url: args.url.clone().unwrap_or_else(|| LOCAL_RUNCELL.into()),
        model: model_name(args),
        dir: args.dabench_dir.clone(),
        only,
        sample: args.sample,
        out: args.out.clone(),
        turn_timeout: Duration::from_secs(args.turn_timeout),
        typing: Duration::from_secs(args.typing),
    })
}

fn stream_options(args: &BenchArgs) -> StreamBenchOptions {
    StreamBenchOptions {
        sessions: args.sessions,
        events_per_session: args.events,
        interval: Duration::from_millis(args.interval_ms),
    }
}

/// `--database-url`, else `RUNCELL_DATABASE_URL`; none when both are
/// missing or blank.
fn cluster_database_url(args: &BenchArgs) -> Option<String> {
    let url = args
        .database_url
        .clone()
        .or_else(|| std::env::var("RUNCELL_DATABASE_URL").ok())
        .unwrap_or_default();
    (!url.trim().is_empty()).then_some(url)
}
