//! `runcell bench abuse`: the review's attacks at once, on loopback, against
//! a `runcell serve` started from this binary, while a well-behaved key and
//! a signed-in page go on using it. Prints the good users' latencies (p50,
//! p99), what the attackers were answered, and the server's RSS; fails on
//! any good request answered with a 5xx or not at all, on a good user never
//! answered right, on the server dying, or on its RSS growing past the
//! budget. Answers that came but were wrong (a turn whose kernel could not
//! start in time) are counted and shown, not failed on.
//!
//! Attackers come from other loopback addresses (127.0.0.2 and up) than the
//! good users (127.0.0.1), as strangers on a network would: the caps per
//! client address are what keep them apart. Their attacks (the first five
//! in `abuse_attacks.rs`):
//! - partial request heads held open (three addresses, 250 each);
//! - anonymous pages (no cookie, a new owner each time) making sessions and
//!   asking for programs that keep a CPU busy;
//! - one hostile key opening `/v1` sessions, one-shot busy runs and MCP
//!   sessions as fast as it is answered;
//! - notebook imports of 7 MiB, several at once;
//! - a long shared session read by slow readers of its share page, and its
//!   session socket opened many times by a page that never reads;
//! - a hostile key's runs flooding their jail's package index (HTTP/2 tried,
//!   then pipelined HTTP/1 on many connections, for big slow pages and files
//!   of an upstream on loopback), and a person making as many API keys as
//!   they are let, each opening sandbox sessions (`abuse_surfaces.rs`).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::abuse_attacks::program;
use crate::attackers::{Answers, client_from, cookie};
use crate::own_server::{OwnServer, rss_mib};
use crate::sandbox::stats;
use crate::{BenchError, abuse_attacks, abuse_surfaces, fail};

pub struct AbuseOptions {
    /// How long the attacks last.
    pub seconds: u64,
    /// Anonymous pages attacking at once.
    pub anonymous: usize,
    /// How much the server's RSS may grow over its size before the attacks.
    pub rss_budget_mib: u64,
}

/// What one kind of good request saw.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    ok: u64,
    server_errors: u64,
    /// Answers that were not right, but not 5xx (first few kept).
    wrong: u64,
    examples: Vec<String>,
}

/// What one good request got, as a [`Tally`] records it: right or why
/// not, and the status when there was an answer.
type Answered = (Result<(), String>, Option<u16>);

impl Tally {
    fn record(&mut self, started: Instant, outcome: Result<(), String>, status: Option<u16>) {
        self.latencies.push(started.elapsed());
        match outcome {
            Ok(()) => self.ok += 1,
            Err(why) => {
                if status.is_none_or(|s| s >= 500) {
                    self.server_errors += 1;
                } else {
                    self.wrong += 1;
                }
                if self.examples.len() < 5 {
                    self.examples.push(why);
                }
            }
        }
    }

    fn row(&mut self, name: &str) {
        let (p50, p99) = stats(&mut self.latencies);
        println!(
            "{name:<40} {:>6} {:>6} {:>6} {:>6} {p50:>9.1} {p99:>9.1}",
            self.latencies.len(),
            self.ok,
            self.server_errors,
            self.wrong
        );
    }
}

/// The good users' tallies, taken when the attacks stop.
struct GoodUsers {
    key_runs: Tally,
    page_turns: Tally,
    page_loads: Tally,
}

/// What the server's process did over the attacks.
struct ServerSeen {
    alive: bool,
    /// RSS in MiB: before the attacks, at most during them, at the end.
    rss_before: u64,
    peak: u64,
    rss_end: u64,
}

pub async fn run(options: AbuseOptions) -> Result<(), BenchError> {
    println!(
        "runcell bench abuse: {} s of attacks ({} anonymous pages, one hostile key, held heads, imports, slow readers, silent sockets) against runcell serve, while a key and a signed-in page use it",
        options.seconds, options.anonymous
    );
    let upstream = abuse_surfaces::Upstream::start().await?;
    let mut server = OwnServer::start_with(
        &["good", "hostile"],
        &[
            ("RUNCELL_PACKAGES__INDEX_URL", upstream.index_url.clone()),
            ("RUNCELL_PACKAGES__MAX_SESSION_MIB", "64".into()),
            // People named by a proxy on this machine: the key hoarder.
            ("RUNCELL_AUTH__TRUSTED_HEADER", "X-Forwarded-User".into()),
            ("RUNCELL_AUTH__TRUSTED_PROXIES", "127.0.0.1".into()),
        ],
    )
    .await?;
    let (server_addr, url) = (server.addr, server.url.clone());
    let (good_key, hostile_key) = (server.keys[0].clone(), server.keys[1].clone());
    let rss_before = rss_mib(server.pid()).unwrap_or(0);
    let stop = CancellationToken::new();
    let answers = Arc::new(Answers::default());
    let peak = Arc::new(AtomicU64::new(rss_before));
    let mut tasks = JoinSet::new();
    spawn_rss_sampler(&mut tasks, &stop, server.pid(), Arc::clone(&peak));

    let long = abuse_attacks::share_long_session(&url).await?;
    abuse_attacks::spawn_held_heads(&mut tasks, &stop, &answers, server_addr);
    abuse_attacks::spawn_anonymous_pages(&mut tasks, &stop, &answers, &url, options.anonymous)?;
    abuse_attacks::spawn_hostile_key(&mut tasks, &stop, &answers, &url, &hostile_key)?;
    abuse_attacks::spawn_imports(&mut tasks, &stop, &answers, &url)?;
    abuse_attacks::spawn_slow_readers(&mut tasks, &stop, &answers, server_addr, &long);
    abuse_attacks::spawn_silent_sockets(&mut tasks, &stop, &answers, server_addr, &long);
    // The new surfaces: a jail flooding its package index, a key hoarder.
    abuse_surfaces::spawn_index_flood(
        &mut tasks,
        &stop,
        &answers,
        url.clone(),
        hostile_key.clone(),
        options.seconds,
    )?;
    let hoarded = Arc::new(AtomicU64::new(0));
    abuse_surfaces::spawn_key_hoarder(
        &mut tasks,
        &stop,
        &answers,
        url.clone(),
        Arc::clone(&hoarded),
    )?;

    // Let the attacks build up before the good users start counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let good_client = client_from(Ipv4Addr::LOCALHOST, Duration::from_secs(60))?;
    let key_runs = spawn_good_key(&mut tasks, &stop, &good_client, &url, &good_key);
    let cookies = sign_in(&good_client, &url, &good_key).await?;
    let (page_turns, page_loads) =
        spawn_signed_in_page(&mut tasks, &stop, &good_client, &url, cookies);

    tokio::time::sleep(Duration::from_secs(options.seconds)).await;
    let alive = server.alive();
    let rss_end = rss_mib(server.pid()).unwrap_or(0);
    stop.cancel();
    // Tasks notice the stop at their next await; the rest are aborted.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    let mut good = GoodUsers {
        key_runs: std::mem::take(&mut *key_runs.lock()),
        page_turns: std::mem::take(&mut *page_turns.lock()),
        page_loads: std::mem::take(&mut *page_loads.lock()),
    };
    let seen = ServerSeen {
        alive,
        rss_before,
        peak: peak.load(Ordering::Relaxed),
        rss_end,
    };
    print_tables(&options, &mut good, &answers, &seen);
    verdict(&options, &good, &seen, hoarded.load(Ordering::Relaxed))
}

/// The server's RSS, sampled into `peak` until `stop`.
fn spawn_rss_sampler(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    pid: u32,
    peak: Arc<AtomicU64>,
) {
    let stop = stop.clone();
    tasks.spawn(async move {
        while !stop.is_cancelled() {
            if let Some(rss) = rss_mib(pid) {
                peak.fetch_max(rss, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

/// The good key: one-shot runs, one after another.
fn spawn_good_key(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    client: &reqwest::Client,
    url: &str,
    key: &str,
) -> Arc<Mutex<Tally>> {
    let key_runs = Arc::new(Mutex::new(Tally::default()));
    let (stop, tally, client) = (stop.clone(), Arc::clone(&key_runs), client.clone());
    let (url, key) = (format!("{url}/v1/code_interpreter/run"), key.to_string());
    tasks.spawn(async move {
        while !stop.is_cancelled() {
            let started = Instant::now();
            let (outcome, status) = one_shot_run(&client, &url, &key).await;
            tally.lock().record(started, outcome, status);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    key_runs
}

/// One run of `print(6 * 7)` through `/v1`: right when it printed 42.
async fn one_shot_run(client: &reqwest::Client, url: &str, key: &str) -> Answered {
    let result = client
        .post(url)
        .bearer_auth(key)
        .json(&serde_json::json!({"code": "print(6 * 7)", "language": "python"}))
        .send()
        .await;
    match result {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let right = status == 200 && body.contains("42");
            (
                if right {
                    Ok(())
                } else {
                    Err(format!(
                        "{status}: {}",
                        body.chars().take(200).collect::<String>()
                    ))
                },
                Some(status),
            )
        }
        Err(err) => (Err(err.to_string()), None),
    }
}

/// Signs in with the good key as a page does: the cookies to send.
async fn sign_in(client: &reqwest::Client, url: &str, key: &str) -> Result<String, BenchError> {
    let signed_in = client
        .post(format!("{url}/login"))
        .form(&[("api_key", key), ("next", "/")])
        .send()
        .await
        .map_err(fail)?;
    let cookies = [
        cookie(&signed_in, "runcell_signin"),
        cookie(&signed_in, "runcell_owner"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("; ");
    if !cookies.contains("runcell_signin=") {
        return Err(BenchError(format!(
            "signing in with the good key failed: {}",
            signed_in.status()
        )));
    }
    Ok(cookies)
}

/// The signed-in page: asks in its session, and loads its page; the
/// tallies of its turns and of its page loads.
fn spawn_signed_in_page(
    tasks: &mut JoinSet<()>,
    stop: &CancellationToken,
    client: &reqwest::Client,
    url: &str,
    cookies: String,
) -> (Arc<Mutex<Tally>>, Arc<Mutex<Tally>>) {
    let page_turns = Arc::new(Mutex::new(Tally::default()));
    let page_loads = Arc::new(Mutex::new(Tally::default()));
    let (stop, turns, loads, client) = (
        stop.clone(),
        Arc::clone(&page_turns),
        Arc::clone(&page_loads),
        client.clone(),
    );
    let url = url.to_string();
    tasks.spawn(async move {
        let mut session: Option<String> = None;
        while !stop.is_cancelled() {
            let started = Instant::now();
            let id = match &session {
                Some(id) => id.clone(),
                None => match new_session(&client, &url, &cookies).await {
                    Ok(id) => {
                        session = Some(id.clone());
                        id
                    }
                    Err((why, status)) => {
                        turns.lock().record(started, Err(why), status);
                        // Refused (not lost): wait before asking again.
                        if status.is_some() {
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        continue;
                    }
                },
            };
            let (outcome, status) = ask(&client, &url, &id, &cookies).await;
            turns.lock().record(started, outcome, status);

            let started = Instant::now();
            let (outcome, status) = load_page(&client, &url, &id, &cookies).await;
            loads.lock().record(started, outcome, status);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    (page_turns, page_loads)
}

/// A new session of the signed-in page: its id, or why not (with the
/// status when the server answered).
async fn new_session(
    client: &reqwest::Client,
    url: &str,
    cookies: &str,
) -> Result<String, (String, Option<u16>)> {
    let made = client
        .post(format!("{url}/api/sessions"))
        .header("cookie", cookies)
        .send()
        .await;
    match made {
        Ok(made) if made.status().as_u16() == 201 => {
            let body: serde_json::Value = made.json().await.unwrap_or_default();
            Ok(body["id"].as_str().unwrap_or_default().to_string())
        }
        Ok(made) => {
            let status = made.status().as_u16();
            let text = made.text().await.unwrap_or_default();
            Err((format!("new session: {status} {text}"), Some(status)))
        }
        Err(err) => Err((err.to_string(), None)),
    }
}

/// A turn of `print(6 * 7)` in session `id`, to its answer: right when
/// the streamed turn printed 42 and ended ok.
async fn ask(client: &reqwest::Client, url: &str, id: &str, cookies: &str) -> Answered {
    let asked = client
        .post(format!("{url}/api/sessions/{id}/ask"))
        .header("cookie", cookies)
        .json(&program("print(6 * 7)"))
        .send()
        .await;
    match asked {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let right =
                status == 200 && body.contains("42\\n") && body.contains("\"status\":\"ok\"");
            (
                if right {
                    Ok(())
                } else {
                    let tail: String = body
                        .chars()
                        .rev()
                        .take(300)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    Err(format!("ask: {status} …{tail}"))
                },
                Some(status),
            )
        }
        Err(err) => (Err(err.to_string()), None),
    }
}

/// Session `id`'s page: right when it shows the 42.
async fn load_page(client: &reqwest::Client, url: &str, id: &str, cookies: &str) -> Answered {
    let page = client
        .get(format!("{url}/sessions/{id}"))
        .header("cookie", cookies)
        .send()
        .await;
    match page {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            (
                if status == 200 && body.contains("42") {
                    Ok(())
                } else {
                    Err(format!("page: {status}"))
                },
                Some(status),
            )
        }
        Err(err) => (Err(err.to_string()), None),
    }
}

/// The good users' table, what the attackers were answered, the RSS.
fn print_tables(
    options: &AbuseOptions,
    good: &mut GoodUsers,
    answers: &Answers,
    seen: &ServerSeen,
) {
    println!();
    println!(
        "{:<40} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9}",
        "good user", "asked", "right", "5xx", "wrong", "p50 ms", "p99 ms"
    );
    good.key_runs.row("key: one-shot run (/v1)");
    good.page_turns.row("signed-in page: ask, to the answer");
    good.page_loads.row("signed-in page: its session's page");
    println!();
    println!("{:<40} {:<34} {:>8}", "attack", "answered", "times");
    for ((attack, answer), count) in answers.counts() {
        println!("{attack:<40} {answer:<34} {count:>8}");
    }
    println!();
    let ServerSeen {
        alive,
        rss_before,
        peak,
        rss_end,
    } = seen;
    println!(
        "server RSS: {rss_before} MiB before, {peak} MiB at most, {rss_end} MiB at the end (budget: +{} MiB); alive: {alive}",
        options.rss_budget_mib
    );
}

/// Fails on what the bench fails on (see the module's comment), naming
/// each problem; says what was wrong but not failed on.
fn verdict(
    options: &AbuseOptions,
    good: &GoodUsers,
    seen: &ServerSeen,
    hoarded: u64,
) -> Result<(), BenchError> {
    let mut problems = Vec::new();
    if !seen.alive {
        problems.push("the server died".to_string());
    }
    for (name, tally) in [
        ("the key's runs", &good.key_runs),
        ("the page's turns", &good.page_turns),
        ("the page loads", &good.page_loads),
    ] {
        if tally.ok == 0 {
            problems.push(format!("{name}: none answered right"));
        }
        if tally.server_errors > 0 {
            problems.push(format!(
                "{name}: {} 5xx or lost, e.g. {:?}",
                tally.server_errors, tally.examples
            ));
        } else if tally.wrong > 0 {
            println!(
                "{name}: {} answered wrong, e.g. {:?}",
                tally.wrong, tally.examples
            );
        }
    }
    // A person's keys together hold at most the person's live kernels
    // (`auth.user_limits.live_kernels`, 4 by default).
    println!("the key hoarder was given {hoarded} sandbox sessions over all her keys");
    if hoarded > 4 {
        problems.push(format!(
            "one person's keys held {hoarded} sandbox sessions, past her 4 live kernels"
        ));
    }
    if seen.peak.saturating_sub(seen.rss_before) > options.rss_budget_mib {
        problems.push(format!(
            "the server's RSS grew by {} MiB, over the budget of {} MiB",
            seen.peak - seen.rss_before,
            options.rss_budget_mib
        ));
    }
    if problems.is_empty() {
        println!("abuse: the good users were served throughout");
        Ok(())
    } else {
        Err(BenchError(problems.join("; ")))
    }
}
