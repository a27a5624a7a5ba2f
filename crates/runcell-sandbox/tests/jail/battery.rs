//! The jail under attack: a battery of hostile programs. Before anything
//! destructive, `jail()` checks that the jail is really in place (non-root uid,
//! own pid namespace, no network) and fails at once if not, so a broken jail
//! can never turn the battery loose on the host.

use std::time::Duration;

use runcell_sandbox::jail::doctor::{HostProcess, jailed_processes};
use runcell_sandbox::jail::{JailConfig, JailSandbox};
use runcell_sandbox::{
    Language, Limits, RunOutcome, RunRequest, Sandbox, SandboxSession, conformance,
};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

static CHECKED: OnceCell<()> = OnceCell::const_new();

/// The jail, once containment is confirmed.
async fn jail() -> std::sync::Arc<JailSandbox> {
    let jail = JailSandbox::new(JailConfig::default());
    if let Some(reason) = jail.unavailable() {
        panic!("the jail is unavailable, so the battery cannot run: {reason}");
    }
    CHECKED
        .get_or_init(|| async {
            let probe = r#"
import os, socket
assert os.getuid() != 0 and os.geteuid() != 0, "runs as root"
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
assert len(pids) <= 3 and max(pids) < 10, f"sees other processes: {pids}"
ifaces = [name for _, name in socket.if_nameindex()]
assert ifaces == ["lo"], f"network interfaces: {ifaces}"
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    raise SystemExit("reached the network")
except OSError:
    pass
print("contained", os.getuid())
"#;
            let outcome = run_with(
                &JailSandbox::new(JailConfig::default()),
                probe,
                Language::Python,
                quick(),
            )
            .await;
            assert!(
                outcome.error.is_none() && outcome.stdout.starts_with("contained 1000"),
                "CONTAINMENT CHECK FAILED, refusing to run the battery: {outcome:?}"
            );
        })
        .await;
    jail
}

fn quick() -> Limits {
    Limits {
        wall: Duration::from_secs(10),
        ..Limits::default()
    }
}

async fn run_with(
    jail: &JailSandbox,
    code: &str,
    language: Language,
    limits: Limits,
) -> RunOutcome {
    jail.run(
        RunRequest {
            code: code.into(),
            language,
            limits,
            env: Vec::new(),
            cwd: None,
        },
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

async fn run(code: &str, language: Language) -> RunOutcome {
    run_with(&*jail().await, code, language, quick()).await
}

fn error_name(outcome: &RunOutcome) -> &str {
    outcome.error.as_ref().map_or("", |e| e.name.as_str())
}

/// A neighbour session that holds state: it must answer during the attack
/// and still have its variable afterwards, whatever the hostile program did.
async fn with_neighbour<F: Future<Output = RunOutcome>>(hostile: F) -> RunOutcome {
    let jail = jail().await;
    let neighbour = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    let python = |code: &str| RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: quick(),
        env: Vec::new(),
        cwd: None,
    };
    let set = neighbour
        .run(&python("kept = sum(range(1000))"), None, &token)
        .await
        .unwrap();
    assert!(set.error.is_none(), "{set:?}");
    let during = async {
        neighbour
            .run(
                &python("import time\ntime.sleep(1)\nprint(kept)"),
                None,
                &token,
            )
            .await
            .unwrap()
    };
    let (outcome, during) = tokio::join!(hostile, during);
    assert_eq!(
        during.stdout, "499500\n",
        "the neighbour was disturbed: {during:?}"
    );
    let after = neighbour
        .run(&python("print(kept)"), None, &token)
        .await
        .unwrap();
    assert_eq!(
        after.stdout, "499500\n",
        "the neighbour lost its state: {after:?}"
    );
    neighbour.close().await;
    outcome
}

/// Runs a Python program that prints `ok` when the attack failed as it should.
async fn python_says_ok(code: &str) {
    let outcome = with_neighbour(run(code, Language::Python)).await;
    assert_eq!(outcome.stdout.trim(), "ok", "{outcome:?}");
}

// ---- reading and writing where it must not ----

#[tokio::test]
async fn cannot_read_etc_shadow() {
    python_says_ok(
        // The jail's /etc has no shadow at all; the host's is root's alone.
        "try:\n    open('/etc/shadow').read()\n    print('read it')\nexcept (PermissionError, FileNotFoundError):\n    print('ok')",
    )
    .await;
}

#[tokio::test]
async fn cannot_write_system_directories() {
    python_says_ok(
        r#"
bad = []
for path in ["/usr/evil", "/etc/evil", "/proc/sys/kernel/hostname", "/usr/bin/python3"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        bad.append(path)
    except OSError:
        pass
print("ok" if not bad else bad)
"#,
    )
    .await;
}

#[tokio::test]
async fn cannot_follow_a_symlink_out_of_home() {
    python_says_ok(
        r#"
import os
os.symlink("/etc/shadow", "shadow")
os.symlink("/root", "rootdir")
ok = True
try:
    open("shadow").read(); ok = False
except OSError:
    pass
ok = ok and not os.path.exists("rootdir/.cargo")
print("ok" if ok else "escaped")
"#,
    )
    .await;
}

#[tokio::test]
async fn a_run_cannot_see_another_runs_files() {
    let jail = jail().await;
    let first = run_with(
        &jail,
        "open('secret.txt','w').write('mine'); print('written')",
        Language::Python,
        quick(),
    )
    .await;
    assert_eq!(first.stdout, "written\n");
    let second = run_with(
        &jail,
        "import os; print(sorted(os.listdir('.')))",
        Language::Python,
        quick(),
    )
    .await;
    assert_eq!(second.stdout, "['main.py']\n", "{second:?}");
}

#[tokio::test]
async fn no_secret_reaches_the_jail() {
    // The server's own environment (API keys, tokens, paths) must not appear
    // in the jail's environment or in any /proc/*/environ it can read.
    let outcome = run(
        r#"
import os, glob
seen = dict(os.environ)
for path in glob.glob("/proc/*/environ"):
    try:
        seen[path] = open(path, "rb").read().decode(errors="replace")
    except OSError:
        pass
text = repr(seen)
print("HOME" in os.environ, "CARGO" in text, "RUST" in text, "OPENAI" in text, "RUNCELL" in text)
"#,
        Language::Python,
    )
    .await;
    assert_eq!(
        outcome.stdout, "True False False False False\n",
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_hosts_etc_is_not_in_the_jail() {
    // A secret in the host's /etc (a drop-in, /etc/environment) never shows.
    let canary = Canary::new();
    let code = format!(
        r#"
import getpass, os
seen = os.path.exists({path:?})
users = sorted(l.split(":")[0] for l in open("/etc/passwd") if l.strip())
host = [n for n in ["environment", "systemd", "npmrc", "pip.conf", "shadow"] if os.path.lexists("/etc/" + n)]
me = getpass.getuser()
ok = not seen and users == ["nobody", "root", "user"] and not host and me == "user"
print("ok" if ok else (seen, users, host, me))
"#,
        path = canary.0
    );
    python_says_ok(&code).await;
    // What programs need from /etc is still there.
    let outcome = run(
        "getent hosts localhost sandbox | wc -l; cc --version >/dev/null && echo cc; date +%Z",
        Language::Bash,
    )
    .await;
    assert_eq!(outcome.stdout, "2\ncc\nUTC\n", "{outcome:?}");
}

/// A file in the host's `/etc`, removed when dropped.
struct Canary(String);

impl Canary {
    fn new() -> Self {
        let path = format!("/etc/runcell-canary-{}", uuid::Uuid::new_v4().simple());
        std::fs::write(&path, "OPENAI_API_KEY=sk-canary\n").unwrap();
        Self(path)
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---- the network ----

#[tokio::test]
async fn cannot_reach_a_port_on_the_hosts_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\nexcept OSError:\n    print('ok')"
    );
    python_says_ok(&code).await;
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "something reached the host's port"
    );
}

// ---- privileged system calls ----

#[tokio::test]
async fn privileged_system_calls_are_refused() {
    python_says_ok(
        r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
results = {
    "ptrace": libc.ptrace(0, 0, 0, 0),
    "unshare": libc.unshare(0x10000000),
    "setns": libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0),
    "keyctl": libc.syscall(250, 0, 0, 0, 0),
    "mount": libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
    "bpf": libc.syscall(321, 0, 0, 0),
}
print("ok" if all(r == -1 for r in results.values()) else results)
"#,
    )
    .await;
    let outcome = with_neighbour(run(
        "mount -t tmpfs none /tmp 2>/dev/null || unshare -r true 2>/dev/null || echo ok",
        Language::Bash,
    ))
    .await;
    assert_eq!(outcome.stdout.trim(), "ok", "{outcome:?}");
}

#[tokio::test]
async fn odd_socket_families_and_x32_system_calls_are_refused() {
    python_says_ok(
        r#"
import ctypes, errno, socket
def attempt(*args):
    try:
        socket.socket(*args).close()
        return "created"
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
got = {
    "vsock": attempt(40, socket.SOCK_STREAM),
    "alg": attempt(38, socket.SOCK_SEQPACKET),
    "netfilter": attempt(16, socket.SOCK_RAW, 12),
    "unix": attempt(socket.AF_UNIX, socket.SOCK_STREAM),
    "inet6": attempt(socket.AF_INET6, socket.SOCK_DGRAM),
}
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    got["vsock pair"] = "created"
except OSError as e:
    got["vsock pair"] = errno.errorcode.get(e.errno, e.errno)
libc = ctypes.CDLL(None, use_errno=True)
got["x32 getpid"] = (libc.syscall(0x40000000 | 39), errno.errorcode.get(ctypes.get_errno()))
want = {
    "vsock": "EAFNOSUPPORT", "alg": "EAFNOSUPPORT", "netfilter": "EPROTONOSUPPORT",
    "unix": "created", "inet6": "created", "vsock pair": "EAFNOSUPPORT",
    "x32 getpid": (-1, "EPERM"),
}
# if_nameindex needs NETLINK_ROUTE, which stays.
names = [n for _, n in socket.if_nameindex()]
print("ok" if got == want and names == ["lo"] else (got, names))
"#,
    )
    .await;
    let outcome = run(
        r#"
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    int vsock = socket(40, SOCK_STREAM, 0);
    int vsock_errno = errno;
    long x32 = syscall(0x40000000 | SYS_getpid);
    int x32_errno = errno;
    printf("%d %d %ld %d\n", vsock, vsock_errno == EAFNOSUPPORT, x32, x32_errno == EPERM);
    return 0;
}
"#,
        Language::C,
    )
    .await;
    assert_eq!(outcome.stdout, "-1 1 -1 1\n", "{outcome:?}");
}

#[tokio::test]
async fn a_foreign_arch_system_call_kills_the_program() {
    // getpid through the i386 ABI (int 0x80): the filter kills the process.
    let outcome = run(
        "#include <stdio.h>\nint main(void){long r; puts(\"before\"); fflush(stdout); __asm__ volatile(\"int $0x80\" : \"=a\"(r) : \"a\"(20L)); printf(\"after %ld\\n\", r); return 0;}",
        Language::C,
    )
    .await;
    assert_eq!(outcome.stdout, "before\n", "{outcome:?}");
    let error = outcome.error.expect("killed");
    assert_eq!(error.name, "Signal", "{error:?}");
    assert!(error.value.contains(&libc::SIGSYS.to_string()), "{error:?}");
}

// ---- identities ----

/// The host process whose command line holds `needle`, waiting for it.
async fn find_process(needle: &str) -> HostProcess {
    for _ in 0..500 {
        if let Some(found) = jailed_processes(needle).into_iter().next() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no process {needle:?}");
}

fn python(code: &str) -> RunRequest {
    RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: quick(),
        env: Vec::new(),
        cwd: None,
    }
}

/// Runs `script` on the host with `sh -c` as `uid` (and its gid); its
/// standard output.
fn as_uid(uid: u32, script: &str) -> String {
    let output = std::process::Command::new("/usr/bin/setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .args(["--clear-groups", "--", "/bin/sh", "-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A session's kernel starts a sleeper the host can find, keeps a secret in
/// its home, and says where its files are on the host.
async fn marked_session(
    jail: &JailSandbox,
    tag: &str,
) -> (Box<dyn SandboxSession>, HostProcess, std::path::PathBuf) {
    let session = jail.open_session().await.unwrap();
    let code = format!(
        r#"
import os, subprocess
sleeper = subprocess.Popen(["sleep", "{tag}"])
open("secret.txt", "w").write("mine")
args = open("/proc/self/cmdline", "rb").read().split(b"\0")
print(os.path.dirname(os.path.dirname(args[args.index(b"-f") + 1].decode())))
"#
    );
    let outcome = session
        .run(&python(&code), None, &CancellationToken::new())
        .await
        .unwrap();
    assert!(outcome.error.is_none(), "{outcome:?}");
    let root = std::path::PathBuf::from(outcome.stdout.trim());
    let process = find_process(&format!("sleep {tag}")).await;
    (session, process, root)
}

#[tokio::test]
async fn sessions_have_host_uids_of_their_own_and_cannot_reach_each_other() {
    use std::os::unix::fs::MetadataExt;
    let jail = jail().await;
    let range = jail.uid_range().unwrap();
    let base = 9000 + std::process::id() % 1000;
    let (a, a_sleeper, a_root) = marked_session(&jail, &format!("{base}.1")).await;
    let (b, b_sleeper, b_root) = marked_session(&jail, &format!("{base}.2")).await;
    for sleeper in [&a_sleeper, &b_sleeper] {
        assert!(range.contains(&sleeper.uid), "{sleeper:?} not in {range:?}");
        assert!(sleeper.in_runcell_group, "{sleeper:?}");
    }
    assert_ne!(a_sleeper.uid, b_sleeper.uid, "two sessions share a uid");

    // On the host: only root enters a session's directory, and its home and
    // sockets are its uid's alone.
    let meta = std::fs::symlink_metadata(&a_root).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7077), (0, 0o010), "{a_root:?}");
    assert_eq!(meta.gid(), a_sleeper.uid);
    for dir in ["home", "ipc"] {
        let meta = std::fs::symlink_metadata(a_root.join(dir)).unwrap();
        assert_eq!(
            (meta.uid(), meta.mode() & 0o7777),
            (a_sleeper.uid, 0o700),
            "{dir}"
        );
    }
    // B's uid, even outside its jail, can neither read A's files nor signal
    // or inspect A's processes.
    let a_secret = a_root.join("home/secret.txt");
    let b_tries = as_uid(
        b_sleeper.uid,
        &format!(
            "cat {secret} 2>/dev/null && echo read; ls {root} 2>/dev/null && echo listed;              kill -0 {pid} 2>/dev/null && echo signalled; cat /proc/{pid}/environ >/dev/null 2>&1 && echo environ; echo done",
            secret = a_secret.display(),
            root = a_root.display(),
            pid = a_sleeper.pid,
        ),
    );
    assert_eq!(b_tries, "done\n");
    assert_eq!(
        as_uid(a_sleeper.uid, &format!("cat {}", a_secret.display())),
        "mine"
    );
    // Inside B's jail, A's directory and processes do not even exist.
    let inside = b
        .run(
            &python(&format!(
                "import os\nprint(os.path.exists({a:?}), os.path.exists({b:?}), len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)",
                a = a_root.join("home").display().to_string(),
                b = b_root.display().to_string(),
            )),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(inside.stdout, "False True True\n", "{inside:?}");
    a.close().await;
    b.close().await;
    assert!(!a_root.exists() && !b_root.exists());
}

#[tokio::test]
async fn a_one_shot_run_has_a_host_uid_of_its_own() {
    let jail = jail().await;
    let range = jail.uid_range().unwrap();
    // Sleeps about 2 s; the fraction makes its command line unique.
    let tag = format!("2.{}", 100_000 + std::process::id() % 900_000);
    let code = format!("sleep {tag}; echo done");
    let needle = format!("sleep {tag}");
    let (outcome, sleeper) = tokio::join!(
        run_with(&jail, &code, Language::Bash, quick()),
        find_process(&needle),
    );
    assert_eq!(outcome.stdout, "done\n");
    assert!(
        range.contains(&sleeper.uid) && sleeper.uid != 65534,
        "{sleeper:?}"
    );
}

// ---- resource exhaustion ----

#[tokio::test]
async fn filling_the_kernels_socket_directory_stops_at_a_small_cap() {
    let jail = jail().await;
    let hostile = async {
        let session = jail.open_session().await.unwrap();
        let code = r#"
import errno, os
args = open("/proc/self/cmdline", "rb").read().split(b"\0")
ipc = os.path.dirname(args[args.index(b"-f") + 1].decode())
def fill():
    big = os.path.join(ipc, "big")
    try:
        with open(big, "wb") as f:
            for _ in range(64):
                f.write(b"x" * 65536)
                f.flush()
        return "wrote 4 MiB"
    except OSError as e:
        if e.errno != errno.ENOSPC:
            return f"big: {e}"
    os.remove(big)
    try:
        for i in range(5000):
            open(os.path.join(ipc, f"junk{i}"), "w").close()
        return "made 5000 files"
    except OSError as e:
        return "ok" if e.errno == errno.ENOSPC else f"files: {e}"
print(fill(), ipc)
"#;
        let token = CancellationToken::new();
        let outcome = session.run(&python(code), None, &token).await.unwrap();
        let ipc = outcome
            .stdout
            .split_whitespace()
            .last()
            .unwrap_or("")
            .to_string();
        // On the host: a tmpfs of its own, and what the program left there is small.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(
            mounts.lines().any(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                fields.get(1) == Some(&ipc.as_str()) && fields.get(2) == Some(&"tmpfs")
            }),
            "{ipc} is not a tmpfs: {outcome:?}"
        );
        let used: u64 = std::fs::read_dir(&ipc)
            .unwrap()
            .flatten()
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .sum();
        assert!(used <= 1024 * 1024, "{used} bytes in {ipc}");
        // The kernel still answers, over sockets in the full directory.
        let after = session
            .run(&python("print(6 * 7)"), None, &token)
            .await
            .unwrap();
        assert_eq!(after.stdout, "42\n", "{after:?}");
        session.close().await;
        outcome
    };
    let outcome = with_neighbour(hostile).await;
    assert!(outcome.stdout.starts_with("ok "), "{outcome:?}");
}

#[tokio::test]
async fn a_python_fork_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        r#"
import os, time
children = 0
for _ in range(3000):
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        children += 1
    except OSError:
        break
print("forked", children)
raise SystemExit(1 if children < 3000 else 0)
"#,
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_c_fork_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        "#include <unistd.h>\n#include <stdio.h>\nint main(void){int n=0;for(int i=0;i<3000;i++){pid_t p=fork();if(p==0){sleep(30);_exit(0);}if(p<0){printf(\"refused after %d\\n\",n);return 1;}n++;}return 0;}",
        Language::C,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_thread_bomb_is_bounded() {
    let outcome = with_neighbour(run(
        "import threading, time\nfor _ in range(3000):\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "ProcessLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_4_gib_allocation_hits_the_memory_limit() {
    let outcome = with_neighbour(run(
        "b = bytearray(4 * 1024**3)\nprint('allocated')",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "MemoryLimit", "{outcome:?}");
}

#[tokio::test]
async fn filling_the_disk_hits_the_disk_limit() {
    let outcome = with_neighbour(run(
        "chunk = b'x' * (1024 * 1024)\ni = 0\nwhile True:\n    with open(f'fill{i}', 'wb') as f:\n        for _ in range(8):\n            f.write(chunk)\n    i += 1\n",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "DiskLimit", "{outcome:?}");
}

/// Issue 40: `/dev` is read-only, and `/dev/shm` is a bounded share of
/// the disk rather than a tmpfs of half the host's memory.
#[tokio::test]
async fn dev_is_read_only_and_shared_memory_is_bounded() {
    let outcome = run(
        r#"
import os
try:
    open("/dev/planted", "w")
    print("dev writable")
except OSError:
    print("dev refused")
st = os.statvfs("/dev/shm")
print("shm bytes", st.f_blocks * st.f_frsize)
written = 0
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(1024):
            f.write(b"x" * (1024 * 1024))
            f.flush()
            written += 1
except OSError:
    pass
print("shm filled at", written)
"#,
        Language::Python,
    )
    .await;
    assert!(outcome.stdout.contains("dev refused"), "{outcome:?}");
    let size: u64 = outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("shm bytes "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX);
    assert!(size <= 64 * 1024 * 1024, "{outcome:?}");
    let filled: u64 = outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("shm filled at "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX);
    assert!(filled <= 64, "{outcome:?}");
}

/// Issue 40: every jail together runs under a CPU cap (`cpu.max` or its v1
/// quota on runcell's parent group) below the host's CPUs, beside the
/// memory and pids caps, so busy runs always leave the server and its model
/// a share of the machine.
#[tokio::test]
async fn jails_together_run_under_a_cpu_cap_below_the_hosts() {
    let jail = jail().await;
    let caps = jail.total_caps().expect("the jail is ready");
    let cpu = caps.cpu_millis.expect("the parent group has a CPU cap");
    assert_eq!(cpu, JailConfig::default().total.cpu_millis, "{caps:?}");
    let host = std::thread::available_parallelism().map_or(1, |n| n.get() as u64) * 1000;
    if host > 1000 {
        assert!(
            cpu < host,
            "the cap {cpu} leaves the server nothing of {host}"
        );
    }
    assert!(
        caps.memory_bytes.is_some() && caps.pids.is_some(),
        "{caps:?}"
    );
}

#[tokio::test]
async fn one_huge_file_hits_the_file_limit() {
    let outcome = run(
        "with open('big', 'wb') as f:\n    f.write(b'x' * (64 * 1024 * 1024))",
        Language::Python,
    )
    .await;
    assert_eq!(error_name(&outcome), "DiskLimit", "{outcome:?}");
}

#[tokio::test]
async fn a_zip_bomb_written_then_read_is_contained() {
    let outcome = with_neighbour(run(
        r#"
import zipfile
with zipfile.ZipFile("bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("zeros", b"\0" * (200 * 1024 * 1024))
data = zipfile.ZipFile("bomb.zip").read("zeros")
with open("out", "wb") as f:
    for _ in range(10):
        f.write(data)
"#,
        Language::Python,
    ))
    .await;
    assert!(
        matches!(error_name(&outcome), "MemoryLimit" | "DiskLimit"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn output_without_newlines_is_cut_at_the_limit() {
    let outcome = with_neighbour(run(
        "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * (1024 * 1024))",
        Language::Python,
    ))
    .await;
    assert_eq!(error_name(&outcome), "OutputLimit", "{outcome:?}");
    assert!(outcome.truncated);
    assert_eq!(outcome.stdout.len(), Limits::default().output_bytes);
}

#[tokio::test]
async fn a_busy_loop_times_out() {
    let limits = Limits {
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let outcome = with_neighbour(async {
        run_with(&*jail().await, "while True: pass", Language::Python, limits).await
    })
    .await;
    assert_eq!(error_name(&outcome), "Timeout", "{outcome:?}");
}

#[tokio::test]
async fn a_loop_ignoring_sigint_and_sigterm_is_still_stopped() {
    let limits = Limits {
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.01)";
    let outcome = run_with(&*jail().await, code, Language::Python, limits).await;
    assert_eq!(error_name(&outcome), "Timeout", "{outcome:?}");
}

#[tokio::test]
async fn no_daemon_outlives_its_run() {
    let tag = format!("{}.{}", 4000 + std::process::id() % 1000, 17);
    let code = format!(
        "setsid sleep {tag} < /dev/null > /dev/null 2>&1 &\nnohup sleep {tag} > /dev/null 2>&1 &\necho started"
    );
    let outcome = run(&code, Language::Bash).await;
    assert_eq!(outcome.stdout, "started\n", "{outcome:?}");
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&tag))
        .collect();
    assert!(survivors.is_empty(), "left behind: {survivors:?}");
}

#[tokio::test]
async fn signalling_every_visible_process_hurts_only_the_run() {
    let outcome = with_neighbour(run("kill -9 -1; echo still here", Language::Bash)).await;
    assert!(
        outcome.exit_code.is_some() || outcome.error.is_some(),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn killing_its_parent_ends_only_the_run() {
    let outcome = with_neighbour(run("kill -9 $PPID; sleep 1; echo after", Language::Bash)).await;
    // The jail's init dies with its parent's kill; the run ends without waiting
    // for its time limit.
    assert_ne!(error_name(&outcome), "Timeout", "{outcome:?}");
}

// ---- odd programs and odd output ----

#[tokio::test]
async fn oversized_and_nul_programs_are_refused_before_running() {
    // A 2 MB source and NUL bytes: the shared check every backend passes.
    conformance::refuses_bad_programs(&*jail().await).await;
}

#[tokio::test]
async fn invalid_utf8_output_arrives_as_replacement_characters() {
    let outcome = run(
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe done\\n')",
        Language::Python,
    )
    .await;
    assert_eq!(outcome.stdout, "ok \u{fffd}\u{fffd} done\n");
}

#[tokio::test]
async fn a_segfault_is_reported_as_a_signal() {
    let outcome = run(
        "int main(void){ volatile int *p = 0; return *p; }",
        Language::C,
    )
    .await;
    assert_eq!(error_name(&outcome), "Signal", "{outcome:?}");
}

#[tokio::test]
async fn a_compile_error_is_reported_as_such() {
    let outcome = run("int main(void){ return undeclared; }", Language::C).await;
    assert_eq!(error_name(&outcome), "CompileError", "{outcome:?}");
    assert!(outcome.stderr.contains("undeclared"));
    assert!(!outcome.stderr.contains("runcell-compile-failed"));
}

#[tokio::test]
async fn a_one_shot_java_program_fails_with_its_line() {
    let outcome = run(
        "int x = 2;\nSystem.out.println(\"x=\" + x);\nint y = x / 0;\nSystem.out.println(\"never\");",
        Language::Java,
    )
    .await;
    assert_eq!(outcome.stdout, "x=2\n", "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(1), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .starts_with("java.lang.ArithmeticException: / by zero\n\tat line 3\n"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn every_language_says_hello_as_an_unprivileged_user() {
    let cases = [
        (
            Language::Python,
            "import os; print('hi', os.getuid())",
            "hi 1000\n",
        ),
        (
            Language::Javascript,
            "console.log('hi', process.getuid())",
            "hi 1000\n",
        ),
        (Language::Bash, "echo hi $(id -u)", "hi 1000\n"),
        (
            Language::Java,
            "System.out.println(\"hi \" + new com.sun.security.auth.module.UnixSystem().getUid());",
            "hi 1000\n",
        ),
        (
            Language::C,
            "#include <stdio.h>\n#include <unistd.h>\nint main(void){printf(\"hi %d\\n\", getuid());}",
            "hi 1000\n",
        ),
    ];
    for (language, code, want) in cases {
        let outcome = run(code, language).await;
        assert_eq!(outcome.stdout, want, "{language:?}: {outcome:?}");
        assert!(outcome.error.is_none());
    }
}

// ---- the conformance suite every backend runs ----

#[tokio::test]
async fn conformance_says_hello_in_every_language() {
    conformance::says_hello_in_every_language(&*jail().await).await;
}

#[tokio::test]
async fn conformance_streams_output_in_order() {
    conformance::streams_output_in_order(&*jail().await).await;
}

#[tokio::test]
async fn conformance_stops_runs_at_the_time_limit() {
    conformance::stops_runs_at_the_time_limit(&*jail().await).await;
}

#[tokio::test]
async fn conformance_cancels_runs() {
    conformance::cancels_runs(&*jail().await).await;
}

#[tokio::test]
async fn conformance_sessions_keep_state_and_stay_apart() {
    conformance::sessions_keep_state_and_stay_apart(&*jail().await).await;
}

#[tokio::test]
async fn conformance_session_files_go_both_ways() {
    conformance::session_files_go_both_ways(&*jail().await).await;
}

#[tokio::test]
async fn conformance_contexts_keep_their_own_state() {
    conformance::contexts_keep_their_own_state(&*jail().await).await;
}

#[tokio::test]
async fn conformance_refuses_what_it_does_not_claim() {
    conformance::refuses_what_it_does_not_claim(&*jail().await).await;
}

#[tokio::test]
async fn conformance_sessions_report_values_and_errors() {
    conformance::sessions_report_values_and_errors(&*jail().await).await;
}

#[tokio::test]
async fn a_session_program_leaves_no_file_in_the_home() {
    // Bash, JavaScript and C run from the jail's own /tmp, not the home.
    let jail = jail().await;
    let session = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    for (language, code) in [
        (Language::Bash, "echo hi"),
        (Language::Javascript, "console.log('hi')"),
        (
            Language::C,
            "#include <stdio.h>\nint main(void){puts(\"hi\");}",
        ),
    ] {
        let request = RunRequest {
            code: code.into(),
            language,
            limits: quick(),
            env: Vec::new(),
            cwd: None,
        };
        let outcome = session.run(&request, None, &token).await.unwrap();
        assert_eq!(outcome.stdout, "hi\n", "{language:?}: {outcome:?}");
    }
    let listed = session.files().unwrap().list("", 1).await.unwrap();
    // The kernel's own `.ipython` may be there; no program file is.
    assert!(listed.iter().all(|e| e.name.starts_with('.')), "{listed:?}");
    session.close().await;
}

// ---- the kernel's own sockets ----

/// Runs Python cells one after another in a new session of `jail`.
async fn cells(jail: &JailSandbox, codes: &[&str]) -> Vec<RunOutcome> {
    let session = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    let mut outcomes = Vec::new();
    for code in codes {
        let request = RunRequest {
            code: (*code).into(),
            language: Language::Python,
            limits: quick(),
            env: Vec::new(),
            cwd: None,
        };
        outcomes.push(session.run(&request, None, &token).await.unwrap());
    }
    session.close().await;
    outcomes
}

#[tokio::test]
async fn a_cell_writing_a_huge_frame_into_its_kernels_sockets_loses_only_its_kernel() {
    // A ZMTP frame header declaring 2^44 bytes, written into every socket
    // of the kernel process: among them the connections the server reads.
    let hostile = r#"
import os, stat
header = b"\x02" + (1 << 44).to_bytes(8, "big")
for fd in os.listdir("/proc/self/fd"):
    try:
        if stat.S_ISSOCK(os.fstat(int(fd)).st_mode):
            os.write(int(fd), header)
    except OSError:
        pass
import time
time.sleep(2)
"#;
    let outcome = with_neighbour(async {
        let jail = jail().await;
        let outcomes = cells(
            &jail,
            &["before = 1", hostile, "print('again', 'before' in dir())"],
        )
        .await;
        assert_eq!(
            outcomes[2].stdout, "again False\n",
            "the session's next run needs a new kernel: {:?}",
            outcomes[2]
        );
        outcomes[1].clone()
    })
    .await;
    let error = outcome.error.as_ref().expect("the run must fail");
    assert_eq!(error.name, "KernelProtocolError", "{outcome:?}");
    assert!(error.value.contains("restarted"), "{error:?}");
    // At once, not at the time limit.
    assert!(
        u128::from(outcome.duration_ms) < quick().wall.as_millis(),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn files_in_the_home_do_not_run_when_a_kernel_starts() {
    let plant = r#"
import os, site
def plant(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
mark = lambda name: f"open('/home/user/MARK-{name}', 'w').write('x')\nprint('HIJACKED')\n"
plant("/home/user/ipykernel_launcher.py", mark("launcher") + "raise SystemExit(3)\n")
plant("/home/user/.ipython/profile_default/startup/00-x.py", mark("startup"))
plant("/home/user/.ipython/profile_default/ipython_kernel_config.py", mark("ipython-config"))
plant("/home/user/.jupyter/jupyter_config.py", mark("jupyter-config"))
plant(site.getusersitepackages() + "/x.pth", "import os; " + mark("pth").replace("\n", "; "))
plant("/home/user/mymodule.py", "VALUE = 42\n")
print("planted")
"#;
    let outcomes = cells(
        &*jail().await,
        &[
            plant,
            "import os\nos._exit(1)",
            "import os, mymodule\nprint(sorted(f for f in os.listdir('/home/user') if f.startswith('MARK')), mymodule.VALUE)",
        ],
    )
    .await;
    assert_eq!(outcomes[0].stdout, "planted\n", "{:?}", outcomes[0]);
    assert_eq!(
        outcomes[1].error.as_ref().map(|e| e.name.as_str()),
        Some("KernelDied"),
        "{:?}",
        outcomes[1]
    );
    assert_eq!(outcomes[2].stdout, "[] 42\n", "{:?}", outcomes[2]);
    assert!(outcomes[2].error.is_none(), "{:?}", outcomes[2]);
}

#[tokio::test]
async fn a_link_left_in_the_socket_directory_is_not_followed() {
    // A root-owned file on the host, which the jail cannot see; the cell
    // points the kernel's connection file and a socket name at it.
    let victim = std::env::temp_dir().join(format!("rc-victim-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&victim, "untouched").unwrap();
    let code = format!(
        r#"
import os, sys
ipc = os.path.dirname(sys.argv[sys.argv.index("-f") + 1])
for name in ("connection.json", "k-1", "k-2", "k-4"):
    try:
        os.remove(os.path.join(ipc, name))
    except FileNotFoundError:
        pass
    os.symlink({victim:?}, os.path.join(ipc, name))
os._exit(1)
"#,
        victim = victim.to_string_lossy()
    );
    let outcomes = cells(&*jail().await, &[&code, "print('fine')"]).await;
    assert_eq!(outcomes[1].stdout, "fine\n", "{:?}", outcomes[1]);
    let meta = std::fs::symlink_metadata(&victim).unwrap();
    assert!(meta.is_file());
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    std::fs::remove_file(&victim).unwrap();
}

/// Everything an outcome shows, in bytes: what the output budget covers.
fn shown_bytes(outcome: &RunOutcome) -> usize {
    let error = outcome.error.as_ref().map_or(0, |e| {
        e.name.len() + e.value.len() + e.traceback.iter().map(|l| l.len() + 1).sum::<usize>()
    });
    outcome.stdout.len()
        + outcome.stderr.len()
        + runcell_sandbox::serialized_len(&outcome.results)
        + error
}

/// What an outcome may hold beyond the budget: the room an error always
/// gets, and the notes of what was cut.
const SLACK: usize = runcell_sandbox::ERROR_FLOOR_BYTES + 1024;

/// The outcome shows no more than the default output limit allows.
fn assert_within_budget(outcome: &RunOutcome) {
    let budget = Limits::default().output_bytes;
    let shown = shown_bytes(outcome);
    assert!(shown <= budget + SLACK, "{shown} bytes shown");
}

/// Runs `code` in a fresh session's kernel, then `after` in the same
/// kernel, with a neighbour watching.
async fn in_a_kernel(code: &str, after: &str) -> (RunOutcome, RunOutcome) {
    let jail = jail().await;
    let session = jail.open_session().await.unwrap();
    let token = CancellationToken::new();
    let python = |code: &str| RunRequest {
        code: code.into(),
        language: Language::Python,
        limits: quick(),
        env: Vec::new(),
        cwd: None,
    };
    let outcome =
        with_neighbour(async { session.run(&python(code), None, &token).await.unwrap() }).await;
    let next = session.run(&python(after), None, &token).await.unwrap();
    session.close().await;
    (outcome, next)
}

#[tokio::test]
async fn a_display_flood_in_a_kernel_is_cut_at_the_output_limit() {
    let (outcome, next) = in_a_kernel(
        "from IPython.display import display, HTML\nx = 'x' * 2_000_000\nfor _ in range(40):\n    display(HTML(x))",
        "print(len(x))",
    )
    .await;
    assert_within_budget(&outcome);
    assert_eq!(error_name(&outcome), "OutputLimit");
    let value = &outcome.error.as_ref().unwrap().value;
    assert!(value.contains("a display of 2000"), "{value}");
    assert!(outcome.results.is_empty());
    assert!(outcome.truncated);
    // The kernel keeps its variables unless it did not come back from the
    // interrupt within its grace (a loaded machine), and then it says so.
    if value.contains("the kernel was restarted") {
        assert_eq!(error_name(&next), "NameError", "{next:?}");
    } else {
        assert_eq!(next.stdout, "2000000\n", "{next:?}");
    }
}

#[tokio::test]
async fn many_small_displays_are_cut_at_the_result_count() {
    let (outcome, next) = in_a_kernel(
        "from IPython.display import display\nfor i in range(1000):\n    display(i)",
        "print('after')",
    )
    .await;
    assert_eq!(outcome.results.len(), runcell_sandbox::MAX_RESULTS);
    assert_eq!(error_name(&outcome), "OutputLimit", "{:?}", outcome.error);
    assert_eq!(next.stdout, "after\n", "{next:?}");
}

#[tokio::test]
async fn a_huge_last_expression_is_dropped() {
    let (outcome, next) = in_a_kernel("y = 1\n'x' * 50_000_000", "print(y)").await;
    assert_within_budget(&outcome);
    assert_eq!(error_name(&outcome), "OutputLimit", "{:?}", outcome.error);
    assert!(outcome.results.is_empty());
    assert_eq!(next.stdout, "1\n", "{next:?}");
}

#[tokio::test]
async fn a_huge_traceback_in_a_kernel_is_cut() {
    let (outcome, next) = in_a_kernel("z = 2\nraise ValueError('x' * 5_000_000)", "print(z)").await;
    assert_within_budget(&outcome);
    // The program's own error, cut: it says what failed.
    assert_eq!(error_name(&outcome), "ValueError", "{:?}", outcome.error);
    assert!(outcome.truncated);
    assert_eq!(next.stdout, "2\n", "{next:?}");
}

/// Messages over the wire's frame limit (16 MiB) are read past, not kept:
/// the run is over its output limit, and the kernel keeps its variables.
#[tokio::test]
async fn messages_too_big_for_the_wire_are_read_past_and_the_kernel_lives() {
    for cell in [
        "print('x' * 50_000_000)",
        "raise ValueError('x' * 50_000_000)",
    ] {
        let (outcome, next) = in_a_kernel(&format!("w = 3\n{cell}"), "print(w)").await;
        assert_within_budget(&outcome);
        assert_eq!(error_name(&outcome), "OutputLimit", "{:?}", outcome.error);
        assert!(outcome.truncated);
        assert_eq!(next.stdout, "3\n", "{cell}: {next:?}");
    }
}

#[tokio::test]
async fn a_one_shot_traceback_is_not_kept_twice() {
    // Its stderr fits the budget; the error read from it draws from what
    // is left.
    let outcome = with_neighbour(run("raise ValueError('x' * 900_000)", Language::Python)).await;
    assert_eq!(error_name(&outcome), "ValueError", "{:?}", outcome.error);
    assert!(outcome.stderr.len() > 900_000);
    assert_within_budget(&outcome);
    assert!(outcome.truncated);
}

#[tokio::test]
async fn a_warm_jail_runs_only_its_own_program_in_a_fresh_home() {
    // The first run of a language is cold and makes warm jails; the runs
    // after it take them: each must see its own program as main.py, a home
    // without what an earlier run left, and be able to write there.
    let jail = JailSandbox::new(JailConfig::default());
    for i in 0..4 {
        let code = format!(
            r#"
import os
mine = open("main.py").read()
assert "run {i}" in mine, mine
assert not os.path.exists("left-behind"), os.listdir(".")
open("left-behind", "w").write("run {i}")
print("run {i}", os.getuid())
"#
        );
        let outcome = run_with(&jail, &code, Language::Python, quick()).await;
        assert_eq!(outcome.stdout, format!("run {i} 1000\n"), "{outcome:?}");
        assert!(outcome.error.is_none(), "{outcome:?}");
    }
    // A warm bash jail too, with its exit status and its stderr.
    for _ in 0..3 {
        let outcome = run_with(
            &jail,
            "echo out; echo err >&2; exit 3",
            Language::Bash,
            quick(),
        )
        .await;
        assert_eq!(
            (outcome.stdout.as_str(), outcome.stderr.as_str()),
            ("out\n", "err\n")
        );
        assert_eq!(outcome.exit_code, Some(3), "{outcome:?}");
    }
}

/// Closing a session (its sandbox killed) ends the cell it is running at
/// once, in the kernel and in a one-shot process, however long the program
/// meant to run: the close no longer waits for the run to finish.
#[tokio::test]
async fn closing_a_session_ends_what_it_is_running() {
    let jail = jail().await;
    for (code, language) in [
        (
            "import time\nprint('started', flush=True)\ntime.sleep(120)",
            Language::Python,
        ),
        ("echo started; sleep 120", Language::Bash),
    ] {
        let session: std::sync::Arc<dyn SandboxSession> =
            std::sync::Arc::from(jail.open_session().await.unwrap());
        let (events, mut seen) = tokio::sync::mpsc::channel(16);
        let running = {
            let session = std::sync::Arc::clone(&session);
            let request = RunRequest {
                code: code.into(),
                language,
                limits: Limits {
                    wall: Duration::from_secs(300),
                    ..quick()
                },
                env: Vec::new(),
                cwd: None,
            };
            tokio::spawn(async move {
                session
                    .run(&request, Some(&events), &CancellationToken::new())
                    .await
            })
        };
        // The program has started.
        while let Some(event) = seen.recv().await {
            if matches!(event, runcell_sandbox::RunEvent::Stdout { .. }) {
                break;
            }
        }
        // Bounds far above the time a close takes (well under a second),
        // below the session's 30 s wall limit that would end the program.
        tokio::time::timeout(Duration::from_secs(15), session.close())
            .await
            .unwrap_or_else(|_| panic!("{language:?}: the close waited for the program"));
        let ran = tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .unwrap_or_else(|_| panic!("{language:?}: the run outlived its session"))
            .unwrap();
        let err = ran.expect_err("a run whose session closed under it fails");
        assert!(err.to_string().contains("closed"), "{language:?}: {err}");
    }
}
