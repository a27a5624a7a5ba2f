//! A `runcell serve` a bench starts from its own binary, the way a person
//! does (`serve --addr … --data-dir …`), with the scripted model (no model
//! is loaded) and keys made before it starts; killed when dropped.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{BenchError, fail};

pub(crate) struct OwnServer {
    child: tokio::process::Child,
    pid: u32,
    pub addr: SocketAddr,
    pub url: String,
    /// The keys made for it, in the order their names were given.
    pub keys: Vec<String>,
    _data: tempfile::TempDir,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl OwnServer {
    /// Makes a key for each of `key_names`, starts the server and waits
    /// until it answers `/healthz` and its start-up work has settled.
    pub async fn start(key_names: &[&str]) -> Result<Self, BenchError> {
        Self::start_with(key_names, &[]).await
    }

    /// As [`Self::start`], with `env` (`RUNCELL_*` settings) set for it.
    pub async fn start_with(
        key_names: &[&str],
        env: &[(&str, String)],
    ) -> Result<Self, BenchError> {
        let exe = std::env::current_exe().map_err(fail)?;
        let data = tempfile::tempdir().map_err(fail)?;
        let mut keys = Vec::new();
        for name in key_names {
            keys.push(make_key(&exe, data.path(), name).await?);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(fail)?
            .port();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let child = tokio::process::Command::new(&exe)
            .args(["serve", "--addr", &addr.to_string(), "--data-dir"])
            .arg(data.path())
            .env("RUNCELL_LLM", "scripted")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(fail)?;
        let pid = child
            .id()
            .ok_or_else(|| BenchError("the server exited at once".into()))?;
        let server = Self {
            child,
            pid,
            addr,
            url: format!("http://{addr}"),
            keys,
            _data: data,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            if Instant::now() > deadline {
                return Err(BenchError(
                    "the server did not answer /healthz in 60 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Let its start-up work (the kernel pool) settle.
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// `runcell keys create --name <name>` in `data`: the key it prints last.
async fn make_key(exe: &Path, data: &Path, name: &str) -> Result<String, BenchError> {
    let created = tokio::process::Command::new(exe)
        .args(["keys", "create", "--name", name, "--data-dir"])
        .arg(data)
        .output()
        .await
        .map_err(fail)?;
    if !created.status.success() {
        return Err(BenchError(format!(
            "runcell keys create: {}",
            String::from_utf8_lossy(&created.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&created.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string())
}

/// Process `pid`'s resident memory in MiB, from `/proc/<pid>/status`.
pub(crate) fn rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024)
}
