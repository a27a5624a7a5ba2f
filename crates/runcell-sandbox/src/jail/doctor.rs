//! `runcell doctor`: every isolation layer checked, and hello-world in each
//! language inside the jail, as a table. Then what a hostile program would
//! try, from inside a real jail: odd socket families, x32 system calls, the
//! host's `/etc`; and from the host: the jail's uid, the caps on all jails.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{JailConfig, JailSandbox, ParentCaps};
use crate::{Language, Limits, RunOutcome, RunRequest, Sandbox};

/// One line of the report.
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    fn new(name: &str, ok: bool, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ok,
            detail: detail.into(),
        }
    }
}

fn hello(language: Language) -> (&'static str, &'static str) {
    match language {
        Language::Python => (
            "import os, socket\nprint('hello', os.getuid(), socket.gethostname())",
            "hello",
        ),
        Language::Javascript => ("console.log('hello', process.getuid())", "hello"),
        Language::Typescript => (
            "const who: string = 'hello';\nconsole.log(who, process.getuid())",
            "hello",
        ),
        Language::R => (
            "cat('hello', Sys.info()[['effective_user']], '\\n')",
            "hello",
        ),
        Language::Java => (
            "System.out.println(\"hello \" + System.getProperty(\"user.name\"))",
            "hello",
        ),
        Language::Bash => ("echo hello $(id -u) $(hostname)", "hello"),
        Language::C => (
            "#include <stdio.h>\nint main(void){puts(\"hello\");return 0;}",
            "hello",
        ),
    }
}

/// Socket families that must be refused, and those that must work (a
/// refusal prints the errno name).
const SOCKETS: &str = r#"
import errno, socket
def attempt(family, kind, proto=0):
    try:
        socket.socket(family, kind, proto).close()
        return "created"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
refused = {
    "AF_VSOCK": attempt(40, socket.SOCK_STREAM),
    "AF_ALG": attempt(38, socket.SOCK_SEQPACKET),
    "AF_PACKET": attempt(17, socket.SOCK_RAW),
    "NETLINK_NETFILTER": attempt(16, socket.SOCK_RAW, 12),
}
allowed = {
    "AF_UNIX": attempt(socket.AF_UNIX, socket.SOCK_STREAM),
    "AF_INET": attempt(socket.AF_INET, socket.SOCK_STREAM),
    "AF_INET6": attempt(socket.AF_INET6, socket.SOCK_STREAM),
    "NETLINK_ROUTE": attempt(16, socket.SOCK_RAW, 0),
}
bad = {k: v for k, v in refused.items() if v == "created"}
bad.update({k: v for k, v in allowed.items() if v != "created"})
print("ok" if not bad else f"wrong: {bad}", refused)
"#;

/// getpid through the x32 ABI must be refused by the filter (EPERM), not
/// merely absent from the kernel (ENOSYS).
const X32: &str = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(0x40000000 | 39)
e = ctypes.get_errno()
print("ok" if r == -1 and e == errno.EPERM else f"wrong: {r} {errno.errorcode.get(e, e)}")
"#;

/// The jail's `/etc` is the minimal one.
const ETC: &str = r#"
import os
present = sorted(n for n in ["environment", "systemd", "shadow", "npmrc", "pip.conf", "gitconfig", "ssh", "sudoers"]
                 if os.path.lexists("/etc/" + n))
users = sorted(l.split(":")[0] for l in open("/etc/passwd") if l.strip())
ok = not present and users == ["nobody", "root", "user"]
print("ok" if ok else f"wrong: host files {present}, users {users}", len(os.listdir("/etc")), "entries")
"#;

/// With the package index: inside a jail, its root answers on the jail's
/// loopback, and nothing else does there.
const INDEX: &str = r#"
import json, os, socket, urllib.request
url = os.environ.get("PIP_INDEX_URL", "")
asked = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(asked, timeout=20) as answer:
    projects = len(json.load(answer).get("projects", []))
try:
    socket.create_connection(("127.0.0.1", 1), timeout=5).close()
    other = "reached"
except OSError:
    other = "refused"
print("ok" if url and other == "refused" else f"wrong: 127.0.0.1:1 {other}", url, projects, "projects cached")
"#;

/// Runs every check; the report passes when every line is ok.
pub async fn run_checks(config: JailConfig) -> Vec<Check> {
    let jail = JailSandbox::new(config);
    let jail = jail.as_ref();
    let mut checks = vec![match jail.unavailable() {
        None => Check::new(
            "isolation layers",
            true,
            format!(
                "bubblewrap, user namespaces, seccomp; cgroups {:?}",
                jail.cgroup_mode()
            ),
        ),
        Some(reason) => Check::new("isolation layers", false, reason),
    }];
    if jail.unavailable().is_some() {
        return checks;
    }
    for language in Language::ALL {
        let (code, expect) = hello(language);
        let started = Instant::now();
        let result = run(jail, code, language).await;
        let ms = started.elapsed().as_millis();
        let name = format!("{} in the jail", language.name());
        checks.push(match result {
            Ok(outcome) if outcome.error.is_none() && outcome.stdout.starts_with(expect) => {
                Check::new(&name, true, format!("{} ({ms} ms)", outcome.stdout.trim()))
            }
            Ok(outcome) => Check::new(&name, false, failure(&outcome)),
            Err(e) => Check::new(&name, false, e.to_string()),
        });
    }
    for (name, code) in [
        ("odd socket families refused", SOCKETS),
        ("x32 system calls refused", X32),
        ("/etc is the jail's own", ETC),
    ] {
        checks.push(match run(jail, code, Language::Python).await {
            Ok(outcome) if outcome.stdout.starts_with("ok") => {
                Check::new(name, true, outcome.stdout.trim())
            }
            Ok(outcome) => Check::new(name, false, failure(&outcome)),
            Err(e) => Check::new(name, false, e.to_string()),
        });
    }
    if jail.packages_site().is_some() {
        let name = "the package index in a jail";
        checks.push(match run(jail, INDEX, Language::Python).await {
            Ok(outcome) if outcome.stdout.starts_with("ok") => {
                Check::new(name, true, outcome.stdout.trim())
            }
            Ok(outcome) => Check::new(name, false, failure(&outcome)),
            Err(e) => Check::new(name, false, e.to_string()),
        });
    }
    checks.push(total_caps(jail));
    checks.push(host_uid(jail).await);
    checks
}

async fn run(
    jail: &JailSandbox,
    code: &str,
    language: Language,
) -> Result<RunOutcome, crate::SandboxError> {
    jail.run(
        RunRequest {
            code: code.into(),
            language,
            limits: Limits::default(),
            env: Vec::new(),
            cwd: None,
        },
        None,
        CancellationToken::new(),
    )
    .await
}

fn failure(outcome: &RunOutcome) -> String {
    format!(
        "{} {:?}: {}",
        outcome.stdout.trim(),
        outcome
            .error
            .as_ref()
            .map(|e| format!("{}: {}", e.name, e.value)),
        outcome.stderr.trim()
    )
}

fn total_caps(jail: &JailSandbox) -> Check {
    const NAME: &str = "a cap on all jails together";
    match jail.total_caps() {
        Some(ParentCaps {
            memory_bytes: Some(memory),
            pids: Some(pids),
            cpu_millis: Some(cpu),
        }) => Check::new(
            NAME,
            true,
            format!(
                "memory {} MiB, {pids} processes, {}.{:03} CPUs",
                memory / (1024 * 1024),
                cpu / 1000,
                cpu % 1000
            ),
        ),
        other => Check::new(
            NAME,
            false,
            format!("runcell's parent cgroup lacks a memory, pids or CPU cap: {other:?}"),
        ),
    }
}

/// A run's host uid, seen from the host: from the range, and not nobody's.
async fn host_uid(jail: &JailSandbox) -> Check {
    const NAME: &str = "the jail's host uid is its own";
    let Some(range) = jail.uid_range() else {
        return Check::new(NAME, false, "no uid range");
    };
    let tag = format!("3.{}", 100_000 + u64::from(std::process::id()) % 900_000);
    let code = format!("exec sleep {tag}");
    let watch = async {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(found) = jailed_processes(&format!("sleep {tag}")).into_iter().next() {
                return Some(found);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    };
    let (_, found) = tokio::join!(run(jail, &code, Language::Bash), watch);
    match found {
        Some(p) if range.contains(&p.uid) && p.uid != 65534 && p.in_runcell_group => Check::new(
            NAME,
            true,
            format!("uid {} of {}..{}", p.uid, range.start, range.end),
        ),
        Some(p) => Check::new(
            NAME,
            false,
            format!("{p:?}; the range is {}..{}", range.start, range.end),
        ),
        None => Check::new(NAME, false, "the run's process was not found"),
    }
}

/// A process on the host, as a jail's would be seen from outside.
#[derive(Clone, Debug)]
pub struct HostProcess {
    pub pid: u32,
    pub uid: u32,
    /// Whether it is in one of runcell's cgroups.
    pub in_runcell_group: bool,
}

/// The host's processes whose command line contains `needle`.
pub fn jailed_processes(needle: &str) -> Vec<HostProcess> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let dir = entry.path();
            let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if !cmdline.contains(needle) {
                return None;
            }
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            let in_runcell_group = std::fs::read_to_string(dir.join("cgroup"))
                .is_ok_and(|c| c.contains(&format!("/{}/", super::cgroup::PARENT)));
            Some(HostProcess {
                pid,
                uid,
                in_runcell_group,
            })
        })
        .collect()
}
