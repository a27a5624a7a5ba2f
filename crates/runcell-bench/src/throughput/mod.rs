//! `runcell bench throughput`: one-shot programs through the API, as an
//! evaluation harness sends them, beside a bare process per program.
//!
//! Every program of the public set (`programs.txt`), and Python programs of
//! an evaluation task's size and larger (1 to 10 KiB, made of the set's),
//! runs in its right and its broken variant, at concurrency 1, 2 and 4,
//! each run on a new connection as a harness sends them: once through
//! `POST /v1/code_interpreter/run` of a real runcell (its own, started from
//! this binary with the default settings and a new key, or the one `--url`
//! names with `RUNCELL_API_KEY`), once as a bare process (the same
//! interpreter and file, no jail). It prints programs/s, p50/p99 latency and
//! the ratio, where the server's time went (each step of a run, from its
//! `/metrics`), and what a program's size costs (sequential runs of 0 to
//! 100 KiB beside bare ones); it fails if any verdict (passed: exit status 0 and no error)
//! differs from the bare run's, or if the bare runs do not pass every right
//! variant and fail every broken one (a broken set proves nothing).

pub mod programs;
pub mod steps;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use self::programs::Program;
use self::steps::{Scrape, StepReport};
use crate::own_server::OwnServer;
use crate::sandbox::stats;
use crate::{BenchError, fail};
use runcell_sandbox::Language;
use runcell_sandbox::jail::{PYTHON_ENV, program};

pub struct ThroughputOptions {
    /// A running runcell to measure; `None`: start one from this binary.
    pub url: Option<String>,
    /// Concurrency levels to measure at.
    pub concurrency: Vec<usize>,
}

/// One run to make: a program's variant.
#[derive(Clone)]
struct Job {
    program: Arc<Program>,
    broken: bool,
}

impl Job {
    fn code(&self) -> &str {
        if self.broken {
            &self.program.broken
        } else {
            &self.program.right
        }
    }
}

/// What one pass over every job saw.
struct Pass {
    wall: Duration,
    latencies: Vec<Duration>,
    /// Passed or not, per job, in job order.
    verdicts: Vec<bool>,
    /// Answers 429 that were waited out and retried.
    throttled: usize,
}

impl Pass {
    fn rate(&self) -> f64 {
        self.verdicts.len() as f64 / self.wall.as_secs_f64()
    }
}

/// Where runs go.
#[derive(Clone)]
enum Runner {
    /// A bare process in a scratch directory of the worker's own.
    Bare(Arc<Vec<PathBuf>>),
    Api {
        http: reqwest::Client,
        url: String,
        key: String,
    },
}

impl Runner {
    /// Runs `job` (as worker `worker`): passed or not, and the 429s waited out.
    async fn run(&self, worker: usize, job: &Job) -> Result<(bool, usize), BenchError> {
        match self {
            Self::Bare(dirs) => Ok((bare(&dirs[worker], job).await?, 0)),
            Self::Api { http, url, key } => api(http, url, key, job).await,
        }
    }
}

/// The command the jail runs (`jail::program`), with no jail.
async fn bare(dir: &Path, job: &Job) -> Result<bool, BenchError> {
    let (file, command) = program(job.program.language, "runcell-compile-failed", "");
    tokio::fs::write(dir.join(file), job.code())
        .await
        .map_err(fail)?;
    let status = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .current_dir(dir)
        .env_clear()
        .env(
            "PATH",
            format!("{PYTHON_ENV}/bin:/usr/local/bin:/usr/bin:/bin"),
        )
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .env("MPLBACKEND", "Agg")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .map_err(fail)?;
    Ok(status.success())
}

#[derive(serde::Deserialize)]
struct RunAnswer {
    exit_code: Option<i32>,
    error: Option<serde_json::Value>,
}

/// The longest a 429 is waited out, whatever `Retry-After` says.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

async fn api(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    job: &Job,
) -> Result<(bool, usize), BenchError> {
    let body = serde_json::json!({"code": job.code(), "language": job.program.language.name()});
    let mut throttled = 0;
    loop {
        let answer = http
            .post(format!("{url}/v1/code_interpreter/run"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .map_err(fail)?;
        let status = answer.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            throttled += 1;
            let wait = answer
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| BenchError("a 429 without Retry-After".into()))?;
            tokio::time::sleep(Duration::from_secs(wait).min(MAX_RETRY_WAIT)).await;
            continue;
        }
        if !status.is_success() {
            let text = answer.text().await.unwrap_or_default();
            return Err(BenchError(format!(
                "{}: {status}: {}",
                job.program.name,
                text.chars().take(300).collect::<String>()
            )));
        }
        let answer: RunAnswer = answer.json().await.map_err(fail)?;
        return Ok((
            answer.exit_code == Some(0) && answer.error.is_none(),
            throttled,
        ));
    }
}

/// Runs every job with `concurrency` workers pulling from one queue.
async fn pass(
    runner: &Runner,
    jobs: &Arc<Vec<Job>>,
    concurrency: usize,
) -> Result<Pass, BenchError> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let (runner, jobs, next) = (runner.clone(), Arc::clone(jobs), Arc::clone(&next));
        workers.spawn(async move {
            let mut seen = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    return Ok::<_, BenchError>(seen);
                };
                let began = Instant::now();
                let (passed, throttled) = runner.run(worker, job).await?;
                seen.push((i, passed, began.elapsed(), throttled));
            }
        });
    }
    let mut verdicts = vec![false; jobs.len()];
    let mut latencies = Vec::with_capacity(jobs.len());
    let mut throttled = 0;
    while let Some(done) = workers.join_next().await {
        for (i, passed, took, waits) in done.map_err(fail)?? {
            verdicts[i] = passed;
            latencies.push(took);
            throttled += waits;
        }
    }
    Ok(Pass {
        wall: started.elapsed(),
        latencies,
        verdicts,
        throttled,
    })
}

/// The sizes of the Python programs made of the set's, beside its own.
const BUNDLE_KIB: [usize; 3] = [1, 4, 10];
/// Program sizes the size sweep runs, KiB (0: `pass`).
const SWEEP_KIB: [usize; 4] = [0, 1, 10, 100];
/// Sequential runs of each size.
const SWEEP_RUNS: usize = 20;

/// What a program's size costs: programs of `x = 1` lines from nothing to
/// 100 KiB, run one at a time through the API and bare; the extra time
/// over the bare run should not grow with the size.
async fn sizes(
    bare_runner: &Runner,
    api_runner: &Runner,
    http: &reqwest::Client,
    url: &str,
    key: &str,
) -> Result<(), BenchError> {
    println!(
        "a program's size, {SWEEP_RUNS} sequential runs each (p50 ms): bare, runcell, the difference, and the server's process step"
    );
    let mut first_extra = None;
    for kib in SWEEP_KIB {
        let code = if kib == 0 {
            "pass\n".to_string()
        } else {
            "x = 1\n".repeat(kib * 1024 / 6)
        };
        let program = Arc::new(Program {
            name: format!("py-lines-{kib}k"),
            language: Language::Python,
            right: code.clone(),
            broken: code,
        });
        let job = Job {
            program,
            broken: false,
        };
        let jobs = Arc::new(vec![job; SWEEP_RUNS]);
        // One run first: warm jails and the page cache ready.
        bare_runner.run(0, &jobs[0]).await?;
        api_runner.run(0, &jobs[0]).await?;
        let mut bare = pass(bare_runner, &jobs, 1).await?;
        let before = Scrape::read(http, url, key).await?;
        let mut api = pass(api_runner, &jobs, 1).await?;
        let after = Scrape::read(http, url, key).await?;
        let process = StepReport::between(&before, &after)
            .steps
            .iter()
            .find(|(step, _, _)| *step == "process")
            .map_or(0.0, |(_, ms, _)| *ms);
        let (bare_p50, _) = stats(&mut bare.latencies);
        let (api_p50, _) = stats(&mut api.latencies);
        let extra = api_p50 - bare_p50;
        let growth = extra - *first_extra.get_or_insert(extra);
        println!(
            "  {kib:>4} KiB  bare {bare_p50:6.1}  runcell {api_p50:6.1}  +{extra:5.1} ({growth:+5.1} from 0 KiB)  process {process:6.1}"
        );
    }
    Ok(())
}

fn ms(samples: &mut [Duration]) -> String {
    let (p50, p99) = stats(samples);
    format!("{p50:>7.1} {p99:>7.1}")
}

pub async fn run(options: ThroughputOptions) -> Result<(), BenchError> {
    let jobs = jobs()?;
    let max_workers = options.concurrency.iter().copied().max().unwrap_or(1);
    let scratch = tempfile::tempdir().map_err(fail)?;
    let dirs: Vec<PathBuf> = (0..max_workers)
        .map(|i| {
            let dir = scratch.path().join(format!("w{i}"));
            std::fs::create_dir_all(&dir).map(|()| dir)
        })
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    let bare_runner = Runner::Bare(Arc::new(dirs));

    let own;
    let (url, key) = match options.url {
        Some(url) => (
            url.trim_end_matches('/').to_string(),
            std::env::var("RUNCELL_API_KEY")
                .map_err(|_| BenchError("--url needs RUNCELL_API_KEY".into()))?,
        ),
        None => {
            own = OwnServer::start(&["bench"]).await?;
            (own.url.clone(), own.keys[0].clone())
        }
    };
    // A new connection per run, as an evaluation harness makes them.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(fail)?;
    let api_runner = Runner::Api {
        http: http.clone(),
        url: url.clone(),
        key: key.clone(),
    };

    print_header(&jobs, &url);
    // First, on a quiet server: what a program's size costs.
    sizes(&bare_runner, &api_runner, &http, &url, &key).await?;
    let mut problems = Vec::new();
    let mut step_lines = Vec::new();
    for &concurrency in &options.concurrency {
        let concurrency = concurrency.max(1);
        let mut bare_pass = pass(&bare_runner, &jobs, concurrency).await?;
        problems.extend(bare_problems(&jobs, &bare_pass));
        let before = Scrape::read(&http, &url, &key).await?;
        let mut api_pass = pass(&api_runner, &jobs, concurrency).await?;
        let after = Scrape::read(&http, &url, &key).await?;
        step_lines.push(format!(
            "{concurrency:>4}  {}",
            StepReport::between(&before, &after).line()
        ));
        problems.extend(differences(&jobs, &api_pass, &bare_pass, concurrency));
        println!(
            "{concurrency:>4}  {:>10.1} {:>10.1} {:>5.2}x  {}  {}  {:>4}",
            bare_pass.rate(),
            api_pass.rate(),
            api_pass.rate() / bare_pass.rate(),
            ms(&mut bare_pass.latencies),
            ms(&mut api_pass.latencies),
            api_pass.throttled,
        );
    }
    println!("where a run's time went in the server (mean ms per run, from its /metrics):");
    for line in &step_lines {
        println!("{line}");
    }
    python_only(&bare_runner, &api_runner, &jobs).await?;
    if problems.is_empty() {
        println!("every verdict the same as the bare run's");
        Ok(())
    } else {
        for problem in problems.iter().take(50) {
            println!("  {problem}");
        }
        Err(BenchError(format!("{} verdicts differ", problems.len())))
    }
}

/// Every program of the set and the bundles made of it, each right and
/// broken.
fn jobs() -> Result<Arc<Vec<Job>>, BenchError> {
    let mut set = programs::all().map_err(fail)?;
    set.extend(programs::bundles(&set, &BUNDLE_KIB));
    Ok(Arc::new(
        set.into_iter()
            .map(Arc::new)
            .flat_map(|program| {
                [false, true].map(|broken| Job {
                    program: Arc::clone(&program),
                    broken,
                })
            })
            .collect(),
    ))
}

/// What is measured, and the table's head.
fn print_header(jobs: &[Job], url: &str) {
    let by_language = |language: Language| {
        jobs.iter()
            .filter(|j| j.program.language == language)
            .count()
            / 2
    };
    println!(
        "runcell bench throughput: {} programs ({} python, {} javascript, {} bash, {} c), each right and broken, through {url}/v1/code_interpreter/run beside a bare process",
        jobs.len() / 2,
        by_language(Language::Python),
        by_language(Language::Javascript),
        by_language(Language::Bash),
        by_language(Language::C),
    );
    println!(
        "{:>4}  {:>10} {:>10} {:>6}  {:>15}  {:>15}  {:>4}",
        "conc", "bare /s", "runcell /s", "ratio", "bare p50 p99", "runcell p50 p99", "429s"
    );
}

/// The bare runs that did not pass a right variant or did not fail a
/// broken one: the set itself is wrong there.
fn bare_problems(jobs: &[Job], bare: &Pass) -> Vec<String> {
    jobs.iter()
        .zip(&bare.verdicts)
        .filter(|(job, passed)| **passed == job.broken)
        .map(|(job, &passed)| {
            format!(
                "bare {} ({}) {}",
                job.program.name,
                if job.broken { "broken" } else { "right" },
                if passed { "passed" } else { "failed" }
            )
        })
        .collect()
}

/// The jobs whose verdict in runcell differs from the bare run's.
fn differences(jobs: &[Job], api: &Pass, bare: &Pass, concurrency: usize) -> Vec<String> {
    jobs.iter()
        .zip(api.verdicts.iter().zip(&bare.verdicts))
        .filter(|(_, (jailed, plain))| jailed != plain)
        .map(|(job, (&jailed, &plain))| {
            format!(
                "at concurrency {concurrency}, {} ({}) {} in runcell, {} bare",
                job.program.name,
                if job.broken { "broken" } else { "right" },
                if jailed { "passed" } else { "failed" },
                if plain { "passed" } else { "failed" }
            )
        })
        .collect()
}

/// The Python programs alone at concurrency 2: the figure an evaluation
/// harness of Python tasks (HumanEval through scripts/bench-humaneval.sh)
/// sees.
async fn python_only(
    bare_runner: &Runner,
    api_runner: &Runner,
    jobs: &[Job],
) -> Result<(), BenchError> {
    let python: Arc<Vec<Job>> = Arc::new(
        jobs.iter()
            .filter(|j| j.program.language == Language::Python)
            .cloned()
            .collect(),
    );
    let bare_python = pass(bare_runner, &python, 2).await?;
    let api_python = pass(api_runner, &python, 2).await?;
    println!(
        "python only, concurrency 2: bare {:.1}/s, runcell {:.1}/s, {:.2}x",
        bare_python.rate(),
        api_python.rate(),
        api_python.rate() / bare_python.rate()
    );
    Ok(())
}
