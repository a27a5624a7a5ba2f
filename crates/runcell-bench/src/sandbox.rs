//! `runcell bench sandbox`: the sandbox's speed and memory, measured
//! server-side.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use runcell_sandbox::jail::{JailConfig, JailSandbox, program};
use runcell_sandbox::sessions::{SandboxSessions, SessionSettings};
use runcell_sandbox::{Language, Limits, RunRequest, Sandbox, SandboxSession};

use crate::{BenchError, fail};

/// Median and 99th percentile, in milliseconds.
pub(crate) fn stats(samples: &mut [Duration]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        ms(samples[i.min(samples.len() - 1)])
    };
    (at(0.5), at(0.99))
}

fn row(name: &str, samples: &mut [Duration], target: &str) {
    let (p50, p99) = stats(samples);
    println!(
        "{name:<44} {p50:>9.2} {p99:>9.2}  {:>4}  {target}",
        samples.len()
    );
}

fn request(code: &str, language: Language) -> RunRequest {
    RunRequest {
        code: code.into(),
        language,
        limits: Limits::default(),
        env: Vec::new(),
        cwd: None,
    }
}

fn hello(language: Language) -> &'static str {
    match language {
        Language::Python => "print(1)",
        Language::Javascript => "console.log(1)",
        Language::Typescript => "console.log(1 as number)",
        Language::R => "cat(1, '\\n', sep = '')",
        Language::Java => "System.out.println(1)",
        Language::Bash => "echo 1",
        Language::C => "#include <stdio.h>\nint main(void){puts(\"1\");}",
    }
}

/// The same program as a bare process, no jail, for comparison: the
/// command the jail runs (`jail::program`), in `dir`.
async fn bare(language: Language, dir: &Path) -> Result<Duration, BenchError> {
    let (file, mut command) = program(language, "runcell-compile-failed", "");
    std::fs::write(dir.join(file), hello(language)).map_err(fail)?;
    // The TypeScript runner is the kernel's file, which jails find in
    // their /etc: here, a copy beside the program.
    let kernel = dir.join("node_kernel.js");
    for arg in &mut command {
        if arg == runcell_sandbox::jail::NODE_KERNEL_PATH {
            std::fs::write(&kernel, runcell_sandbox::jail::NODE_KERNEL).map_err(fail)?;
            *arg = kernel.to_string_lossy().into_owned();
        }
    }
    let started = Instant::now();
    let status = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .map_err(fail)?;
    if !status.success() {
        return Err(BenchError(format!("bare {language:?} failed: {status}")));
    }
    Ok(started.elapsed())
}

/// Resident memory of every process of a uid in `uids`, in bytes.
/// Resident and proportional memory (`VmRSS`, `Pss` of `smaps_rollup`),
/// in bytes, of every process running as one of `uids`.
fn memory_of_uids(uids: &std::ops::Range<u32>) -> (u64, u64) {
    let (mut rss, mut pss) = (0, 0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    let kib = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    for entry in entries.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let owned = status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|u| u.parse::<u32>().ok())
            .is_some_and(|u| uids.contains(&u));
        if owned {
            rss += kib(&status, "VmRSS:");
            let rollup =
                std::fs::read_to_string(entry.path().join("smaps_rollup")).unwrap_or_default();
            pss += kib(&rollup, "Pss:");
        }
    }
    (rss, pss)
}

/// The longest idle kernels are given for their pages to be merged.
const MERGE_WAIT: Duration = Duration::from_secs(300);

/// How many times the kernel's same-page merging has scanned everything.
fn full_scans() -> Option<u64> {
    std::fs::read_to_string("/sys/kernel/mm/ksm/full_scans")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

pub async fn run(iterations: usize, idle_sessions: usize) -> Result<(), BenchError> {
    // `RUNCELL_SANDBOX__SHARE_KERNEL_MEMORY=false` measures without sharing.
    let config = JailConfig {
        share_kernel_memory: std::env::var("RUNCELL_SANDBOX__SHARE_KERNEL_MEMORY")
            .map_or(true, |v| v != "false"),
        ..JailConfig::default()
    };
    let uids = config.uid_base..config.uid_base + config.uid_count;
    let sharing = config.share_kernel_memory;
    let jail = JailSandbox::new(config);
    if let Some(reason) = jail.unavailable() {
        return Err(BenchError(format!("the jail is unavailable: {reason}")));
    }
    let sandbox: Arc<dyn Sandbox> = jail.clone();
    let token = CancellationToken::new();
    println!(
        "{:<44} {:>9} {:>9}  {:>4}  target",
        "measure (ms)", "p50", "p99", "n"
    );
    warm_round_trip(sandbox.as_ref(), &token, iterations).await?;
    new_sessions(&sandbox, iterations).await?;
    one_shots(sandbox.as_ref(), &token, iterations).await?;
    if idle_sessions > 0 {
        idle_memory(sandbox.as_ref(), &uids, sharing, idle_sessions).await?;
    }
    Ok(())
}

/// Warm round-trip in a session.
async fn warm_round_trip(
    sandbox: &dyn Sandbox,
    token: &CancellationToken,
    iterations: usize,
) -> Result<(), BenchError> {
    let session = sandbox.open_session().await.map_err(fail)?;
    session
        .run(&request("x = 1", Language::Python), None, token)
        .await
        .map_err(fail)?;
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations.max(1) * 5 {
        let started = Instant::now();
        let outcome = session
            .run(&request("x + 1", Language::Python), None, token)
            .await
            .map_err(fail)?;
        samples.push(started.elapsed());
        if outcome.error.is_some() {
            return Err(BenchError(format!("x + 1 failed: {outcome:?}")));
        }
    }
    row(
        "warm `x + 1` round-trip in a session",
        &mut samples,
        "<= 5 ms p50",
    );
    session.close().await;
    Ok(())
}

/// New session: from the pool, and cold.
async fn new_sessions(sandbox: &Arc<dyn Sandbox>, iterations: usize) -> Result<(), BenchError> {
    let pool = SandboxSessions::new(
        Arc::clone(sandbox),
        SessionSettings {
            pool_size: 1,
            ..SessionSettings::default()
        },
    );
    let tracker = tokio_util::task::TaskTracker::new();
    let stop = CancellationToken::new();
    pool.spawn_maintenance(&tracker, stop.clone());
    let mut pooled = Vec::new();
    for _ in 0..iterations.clamp(1, 20) {
        let wait_until = Instant::now() + Duration::from_secs(30);
        while pool.pooled().await == 0 && Instant::now() < wait_until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        let info = pool.create(Language::Python, "bench").await.map_err(fail)?;
        pooled.push(started.elapsed());
        pool.delete(&info.session_id).await.map_err(fail)?;
    }
    row(
        "new session ready, from the pool",
        &mut pooled,
        "<= 50 ms p50",
    );
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    let mut cold = Vec::new();
    for _ in 0..iterations.clamp(1, 10) {
        let started = Instant::now();
        let session = sandbox.open_session().await.map_err(fail)?;
        cold.push(started.elapsed());
        session.close().await;
    }
    row("new session ready, cold (kernel start)", &mut cold, "");
    Ok(())
}

/// One-shot runs against the bare process.
async fn one_shots(
    sandbox: &dyn Sandbox,
    token: &CancellationToken,
    iterations: usize,
) -> Result<(), BenchError> {
    let scratch = tempfile::tempdir().map_err(fail)?;
    for language in Language::ALL {
        let code = hello(language);
        let mut jailed = Vec::new();
        let mut plain = Vec::new();
        for _ in 0..iterations.max(1) {
            let started = Instant::now();
            let outcome = sandbox
                .run(request(code, language), None, token.clone())
                .await
                .map_err(fail)?;
            jailed.push(started.elapsed());
            if outcome.stdout != "1\n" {
                return Err(BenchError(format!(
                    "{language:?} one-shot failed: {outcome:?}"
                )));
            }
            // Let background work (a warm jail being replaced) settle, so
            // that each sample measures the run alone.
            tokio::time::sleep(Duration::from_millis(50)).await;
            plain.push(bare(language, scratch.path()).await?);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (jail_p50, _) = stats(&mut jailed);
        let (bare_p50, _) = stats(&mut plain);
        row(
            &format!("one-shot {} in the jail", language.name()),
            &mut jailed,
            &format!("<= 1.3x bare: {:.2}x", jail_p50 / bare_p50),
        );
        row(
            &format!("one-shot {} bare process", language.name()),
            &mut plain,
            "",
        );
    }
    Ok(())
}

/// Idle sessions' memory: resident and proportional, once they are up
/// and once their pages had time to be merged (`share_kernel_memory`).
async fn idle_memory(
    sandbox: &dyn Sandbox,
    uids: &std::ops::Range<u32>,
    sharing: bool,
    idle_sessions: usize,
) -> Result<(), BenchError> {
    let (rss_before, pss_before) = memory_of_uids(uids);
    let started = Instant::now();
    let mut open: Vec<Box<dyn SandboxSession>> = Vec::new();
    for _ in 0..idle_sessions {
        open.push(sandbox.open_session().await.map_err(fail)?);
    }
    let took = started.elapsed();
    let mib_each = |bytes: u64, before: u64| {
        bytes.saturating_sub(before) as f64 / (1024.0 * 1024.0) / idle_sessions as f64
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, pss) = memory_of_uids(uids);
    println!(
        "{idle_sessions} idle sessions (opened in {:.1} s), each: {:.1} MiB resident, {:.1} MiB proportional",
        took.as_secs_f64(),
        mib_each(rss, rss_before),
        mib_each(pss, pss_before),
    );
    if sharing {
        let (waited, first) = wait_for_merging(uids).await;
        let (rss, pss) = memory_of_uids(uids);
        println!(
            "  after {:.0} s of merging ({} full scans), each: {:.1} MiB resident, {:.1} MiB proportional (target <= 20 MiB)",
            waited.elapsed().as_secs_f64(),
            full_scans()
                .zip(first)
                .map_or(0, |(now, first)| now - first),
            mib_each(rss, rss_before),
            mib_each(pss, pss_before),
        );
    }
    for session in open {
        session.close().await;
    }
    Ok(())
}

/// The kernel's merging scans a few thousand pages a second (its own
/// settings), and pages merge over several scans: waits (up to
/// [`MERGE_WAIT`]) until a scan merged next to nothing more. When the
/// wait began, and the full scans counted then.
async fn wait_for_merging(uids: &std::ops::Range<u32>) -> (Instant, Option<u64>) {
    let waited = Instant::now();
    let first = full_scans();
    let (mut scans, mut last) = (first, memory_of_uids(uids).1);
    while waited.elapsed() < MERGE_WAIT {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let now = full_scans();
        if now == scans {
            continue;
        }
        scans = now;
        let pss = memory_of_uids(uids).1;
        let settled = pss + pss / 50 >= last;
        last = pss;
        if settled && now.zip(first).is_some_and(|(now, first)| now >= first + 2) {
            break;
        }
    }
    (waited, first)
}
