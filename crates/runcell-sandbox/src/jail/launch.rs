//! How a jail is started: the server forks, and the child joins the run's
//! cgroups, sets its rlimits and becomes the run's host uid ([`confine`])
//! before it execs `bwrap` (namespaces, mounts, seccomp); and what each
//! language's program is.

use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::process::Stdio;

use command_fds::{CommandFdExt, FdMapping};

use super::identity::{HostId, JAIL_UID};
use super::{JailSandbox, NODE_ENV, PYTHON_ENV, RunGroup};
use crate::{Language, Limits, SandboxError};

pub(super) const BWRAP: &str = "/usr/bin/bwrap";
/// The descriptors bubblewrap reads the filter and the program from.
const SECCOMP_FD: i32 = 10;
const CODE_FD: i32 = 11;
/// The descriptor a warm jail waits on, all set up, before it goes on.
const BLOCK_FD: i32 = 12;
/// A host-wide backstop on processes of the jail uid, should a cgroup fail.
const NPROC_BACKSTOP: u32 = 4096;

/// A file holding `bytes`, unlinked, opened for reading from the start.
fn memory_file(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let mut file = tempfile::tempfile()?;
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}

/// The program for each language, run in `/home/user`. C is compiled first; a
/// failed compile prints `marker` so that it cannot be mistaken for the
/// program's own failure (the program never sees the marker).
pub fn program(language: Language, marker: &str, dir: &str) -> (String, Vec<String>) {
    let file = |name: &str| format!("{dir}{name}");
    match language {
        Language::Python => (
            file("main.py"),
            vec![
                format!("{PYTHON_ENV}/bin/python3"),
                "-u".into(),
                file("main.py"),
            ],
        ),
        Language::Javascript => (
            file("main.js"),
            vec!["/usr/bin/node".into(), file("main.js")],
        ),
        // Types stripped and the program run by the kernel's own code,
        // once, as a script (top-level await included).
        Language::Typescript => (
            file("main.ts"),
            vec![
                "/usr/bin/node".into(),
                super::etc::NODE_KERNEL_PATH.into(),
                "--typescript".into(),
                "--run".into(),
                file("main.ts"),
            ],
        ),
        Language::R => (
            file("main.R"),
            vec![
                "/usr/bin/Rscript".into(),
                "--no-save".into(),
                file("main.R"),
            ],
        ),
        // Run by the kernel's own engine, once, as a script: JShell's
        // snippets (no class or `main` needed), compiled in memory.
        Language::Java => (file("main.jsh"), java_script(&file("main.jsh"))),
        Language::Bash => (file("main.sh"), vec!["/bin/bash".into(), file("main.sh")]),
        Language::C => {
            // A path with a slash, so that exec does not search the PATH.
            let binary = if dir.is_empty() {
                "./.main".to_string()
            } else {
                file(".main")
            };
            (
                file("main.c"),
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    format!(
                        r#"gcc -O2 -std=gnu17 -o {binary} {dir}main.c -lm || {{ printf '\n%s\n' "$0" >&2; exit 1; }}; exec {binary}"#
                    ),
                    marker.into(),
                ],
            )
        }
    }
}

/// The command that runs `script` with the Java kernel's engine: its
/// classes when the server compiled them, else its source. The class path
/// is never the working directory, the JVM's default (see
/// `java_kernel.py`).
fn java_script(script: &str) -> Vec<String> {
    use super::etc::{JAVA, JSHELL_CLASSES_PATH, JSHELL_ENGINE_PATH, jail_etc};
    let compiled = jail_etc().is_ok_and(|etc| {
        etc.join(JSHELL_CLASSES_PATH.trim_start_matches("/etc/"))
            .join("JShellKernel.class")
            .is_file()
    });
    let engine: [&str; 3] = if compiled {
        ["-cp", JSHELL_CLASSES_PATH, "JShellKernel"]
    } else {
        ["-cp", "/etc/runcell", JSHELL_ENGINE_PATH]
    };
    [JAVA, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        .into_iter()
        .chain(engine)
        .chain(["--run", script])
        .map(String::from)
        .collect()
}

/// How a jailed program gets its code.
#[derive(Debug)]
pub(crate) enum Code<'a> {
    /// It has none (a kernel).
    None,
    /// Copied into `Mounts::code_file` as the jail is made.
    File(&'a [u8]),
    /// Bound read-only from this host file into `Mounts::code_file`, and
    /// written there later: the jail is made, then waits, before its
    /// seccomp filter and its program, until a byte comes down `release`
    /// (bubblewrap's `--block-fd`): a warm jail.
    Later {
        host_file: &'a std::path::Path,
        release: OwnedFd,
        /// The command waits on `release` itself, started: the jail's
        /// seccomp filter is on and its interpreter up ([`started_ahead`]);
        /// otherwise bubblewrap waits, before both.
        started: bool,
    },
}

/// Python's `-c` program in a warm jail whose interpreter starts ahead of
/// its program ([`started_ahead`]): it waits for the byte on [`BLOCK_FD`],
/// then runs `/home/user/main.py` as `python3 -u main.py` would: as
/// `__main__`, with that `__file__`, `sys.argv` and `sys.path[0]`, its
/// uncaught errors printed by `sys.excepthook` without this code's own
/// frame and exiting with status 1, `SystemExit` left to the interpreter.
const PYTHON_STARTED: &str = r#"import os as _os, sys as _sys
if not _os.read(12, 1):
    _os._exit(0)
_os.close(12)
def _runcell_main():
    import importlib.machinery, types
    path = '/home/user/main.py'
    main = types.ModuleType('__main__')
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader('__main__', path)
    main.__annotations__ = {}
    main.__builtins__ = __builtins__
    _sys.modules['__main__'] = main
    _sys.argv[:] = ['main.py']
    _sys.path[0] = '/home/user'
    with open(path, 'rb') as f:
        source = f.read()
    try:
        exec(compile(source, path, 'exec', dont_inherit=True), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code is _runcell_main.__code__:
            tb = tb.tb_next
        _sys.excepthook(type(e), e.with_traceback(tb), tb)
        _sys.exit(1)
_runcell_main()
"#;

/// The program file and command of a warm jail for `language` whose
/// interpreter starts before its program comes (Python: its start-up, some
/// 8 ms of a one-shot run, is then off the request's path), or `None` if
/// the language's command runs only once its program is there.
pub(crate) fn started_ahead(language: Language) -> Option<(String, Vec<String>)> {
    match language {
        Language::Python => Some((
            "main.py".into(),
            vec![
                format!("{PYTHON_ENV}/bin/python3"),
                "-u".into(),
                "-c".into(),
                PYTHON_STARTED.into(),
            ],
        )),
        _ => None,
    }
}

/// What a jail mounts beyond the read-only system.
#[derive(Debug, Default)]
pub(crate) struct Mounts {
    /// A host directory to use as `/home/user`; a fresh sized tmpfs if `None`.
    pub home: Option<std::path::PathBuf>,
    /// The program's file, copied from [`CODE_FD`]: a name in `/home/user`
    /// or an absolute path in the jail.
    pub code_file: Option<String>,
    /// Host directories bound read-write at the same path (kernel sockets).
    pub shared: Vec<std::path::PathBuf>,
    /// Environment variables beyond (or replacing) the defaults.
    pub env: Vec<(String, String)>,
    /// Where the program starts, if not `/home/user`.
    pub cwd: Option<String>,
    /// A network namespace the server made ([`super::loopback`]) for the
    /// jail to join; bubblewrap makes one if `None`.
    pub netns: Option<RawFd>,
}

/// The most of a jail's disk its `/dev/shm` takes.
const MAX_SHM_BYTES: u64 = 64 * 1024 * 1024;

/// The smallest tmpfs given (a size of 0 would mean no bound at all).
const MIN_TMPFS_BYTES: u64 = 1024 * 1024;
/// `/root`, for programs that expect root's home to exist.
const ROOT_HOME_BYTES: u64 = 4 * 1024 * 1024;

/// How a jail's disk limit is shared among its tmpfses: `/home/user` has
/// its part ([`Limits::home_bytes`]); of the rest, `/dev/shm` (POSIX shared
/// memory, multiprocessing's semaphores: `/dev` itself is read-only) has a
/// quarter within bounds, `/root` [`ROOT_HOME_BYTES`], and `/tmp` what is
/// left.
struct DiskShares {
    home: u64,
    shm: u64,
    tmp: u64,
}

impl DiskShares {
    fn of(limits: &Limits) -> Self {
        let home = limits.home_bytes();
        let scratch = limits.disk_bytes - home;
        let shm = (scratch / 4).clamp(MIN_TMPFS_BYTES, MAX_SHM_BYTES);
        let tmp = scratch
            .saturating_sub(shm + ROOT_HOME_BYTES)
            .max(MIN_TMPFS_BYTES);
        Self { home, shm, tmp }
    }
}

/// bubblewrap's arguments, in the order it applies them: a later mount
/// may hide what an earlier one put below it.
fn bwrap_args(
    limits: &Limits,
    mounts: &Mounts,
    etc: &std::path::Path,
    code: &Code<'_>,
    command: Vec<String>,
) -> Vec<String> {
    let DiskShares { home, shm, tmp } = DiskShares::of(limits);
    let mut args: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(|s| (*s).to_string()));
    push(&["--ro-bind", "/usr", "/usr"]);
    push(&["--ro-bind", &etc.to_string_lossy(), "/etc"]);
    // Merged-/usr systems have /bin, /lib… as links into /usr.
    for dir in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = format!("/{dir}");
        match std::fs::read_link(&host) {
            Ok(target) => push(&["--symlink", &target.to_string_lossy(), &host]),
            Err(_) if std::path::Path::new(&host).is_dir() => push(&["--ro-bind", &host, &host]),
            Err(_) => {}
        }
    }
    // What the JavaScript/TypeScript kernel loads (sucrase), when installed.
    if std::path::Path::new(NODE_ENV).is_dir() {
        push(&["--ro-bind", NODE_ENV, NODE_ENV]);
    }
    push(&[
        "--ro-bind",
        PYTHON_ENV,
        PYTHON_ENV,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
    ]);
    push(&["--size", &shm.to_string(), "--tmpfs", "/dev/shm"]);
    push(&["--size", &tmp.to_string(), "--tmpfs", "/tmp"]);
    // root's home as E2B's sandboxes have it (a code context may start in
    // it): small, empty in every jail, and a share of the disk limit.
    push(&["--size", &ROOT_HOME_BYTES.to_string(), "--tmpfs", "/root"]);
    // After the /tmp tmpfs, or it would hide binds below /tmp.
    for dir in &mounts.shared {
        let dir = dir.to_string_lossy();
        push(&["--bind", &dir, &dir]);
    }
    match &mounts.home {
        Some(host) => push(&["--bind", &host.to_string_lossy(), "/home/user"]),
        None => push(&["--size", &home.to_string(), "--tmpfs", "/home/user"]),
    }
    if let Some(file) = &mounts.code_file {
        let path = if file.starts_with('/') {
            file.clone()
        } else {
            format!("/home/user/{file}")
        };
        match code {
            Code::Later {
                host_file, started, ..
            } => {
                push(&["--ro-bind", &host_file.to_string_lossy(), &path]);
                if !started {
                    push(&["--block-fd", &BLOCK_FD.to_string()]);
                }
            }
            Code::None | Code::File(_) => push(&["--file", &CODE_FD.to_string(), &path]),
        }
    }
    let cwd = mounts.cwd.as_deref().unwrap_or("/home/user");
    push(&["--chdir", cwd, "--unshare-all"]);
    if mounts.netns.is_some() {
        // The namespace the jail's first process joined before bwrap.
        push(&["--share-net"]);
    }
    push(&[
        "--unshare-user",
        "--disable-userns",
        "--uid",
        &JAIL_UID.to_string(),
        "--gid",
        &JAIL_UID.to_string(),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        &format!("{PYTHON_ENV}/bin:/usr/local/bin:/usr/bin:/bin"),
        "--setenv",
        "HOME",
        "/home/user",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "MPLBACKEND",
        "Agg",
        "--seccomp",
        &SECCOMP_FD.to_string(),
    ]);
    for (key, value) in &mounts.env {
        push(&["--setenv", key, value]);
    }
    push(&["--"]);
    args.extend(command);
    args
}

impl JailSandbox {
    /// Starts `command` in a new jail as the host uid `user`, inside
    /// `group`, with `mounts`; `code` becomes the file `mounts.code_file`
    /// names.
    pub(crate) fn spawn_jail(
        &self,
        user: HostId,
        limits: &Limits,
        group: &RunGroup,
        mounts: &Mounts,
        command: Vec<String>,
        code: Code<'_>,
    ) -> Result<tokio::process::Child, SandboxError> {
        if user.uid == 0 || user.gid == 0 {
            return Err(SandboxError::Internal("a jail never runs as root".into()));
        }
        let ready = self.ready()?;
        let internal =
            |what: &str, e: &dyn std::fmt::Display| SandboxError::Internal(format!("{what}: {e}"));
        // Opened here: between fork and exec the child only writes to them.
        let procs = group
            .procs_files()
            .iter()
            .map(|path| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map(OwnedFd::from)
                    .map_err(|e| internal(&format!("{}", path.display()), &e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A kernel (no program of its own) lives on, idle: its pages are
        // worth merging with other kernels'.
        let share_pages = ready.share_pages && matches!(code, Code::None);
        let mut cmd = tokio::process::Command::new(BWRAP);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(bwrap_args(limits, mounts, ready.etc, &code, command))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        confine(
            &mut cmd,
            Confinement {
                procs: procs.iter().map(AsRawFd::as_raw_fd).collect(),
                file_bytes: limits.file_bytes,
                user,
                share_pages,
                netns: mounts.netns,
            },
        );
        let mut fds = vec![FdMapping {
            parent_fd: memory_file(&ready.seccomp).map_err(|e| internal("seccomp file", &e))?,
            child_fd: SECCOMP_FD,
        }];
        match code {
            Code::None => {}
            Code::File(code) => fds.push(FdMapping {
                parent_fd: memory_file(code).map_err(|e| internal("code file", &e))?,
                child_fd: CODE_FD,
            }),
            Code::Later { release, .. } => fds.push(FdMapping {
                parent_fd: release,
                child_fd: BLOCK_FD,
            }),
        }
        cmd.fd_mappings(fds)
            .map_err(|e| internal("descriptors", &e))?;
        let child = cmd
            .spawn()
            .map_err(|e| internal("cannot start the jail", &e));
        drop(procs);
        child
    }
}

/// What the child of a fork does to itself before it execs `bwrap`.
struct Confinement {
    /// Open `cgroup.procs` files of the run's groups.
    procs: Vec<RawFd>,
    /// The largest file it may write.
    file_bytes: u64,
    /// The host uid and gid it becomes.
    user: HostId,
    /// Its memory open to same-page merging (`shared_pages`).
    share_pages: bool,
    /// The network namespace it joins, if the server made one.
    netns: Option<RawFd>,
}

/// Makes `cmd`'s child, between fork and exec: join the run's cgroups (so
/// that everything it starts is counted and killed with them), join the
/// network namespace the server made for it, if any, take its rlimits (file size, descriptors, no core files, a host-wide backstop on
/// processes of its uid), drop every supplementary group and become the
/// run's host uid and gid, for real, effective and saved ids. Any failure
/// fails the spawn; nothing runs half-confined.
///
/// This replaces a chain of `sh` (cgroups), `prlimit` and `setpriv`: three
/// programs less to exec for every jail.
#[allow(unsafe_code)]
fn confine(cmd: &mut tokio::process::Command, confinement: Confinement) {
    let Confinement {
        procs,
        file_bytes,
        user,
        share_pages,
        netns,
    } = confinement;
    let limit = |cur: u64| libc::rlimit {
        rlim_cur: cur,
        rlim_max: cur,
    };
    let rlimits = [
        (libc::RLIMIT_FSIZE, limit(file_bytes)),
        (libc::RLIMIT_NOFILE, limit(256)),
        (libc::RLIMIT_CORE, limit(0)),
        (libc::RLIMIT_NPROC, limit(u64::from(NPROC_BACKSTOP))),
    ];
    let (uid, gid) = (user.uid, user.gid);
    let check = |result: libc::c_int| {
        if result == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes plain system calls
    // (personality, prctl, write, setns, setrlimit, setgroups, setresgid,
    // setresuid) on values prepared before the fork, and allocates nothing
    // (`last_os_error` does not).
    unsafe {
        cmd.pre_exec(move || {
            if share_pages {
                super::shared_pages::open_to_merging();
            }
            for &fd in &procs {
                // "0" is the writing process itself.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // While still root: the namespace is the host user namespace's.
            if let Some(netns) = netns {
                check(libc::setns(netns, libc::CLONE_NEWNET))?;
            }
            for (resource, value) in &rlimits {
                check(libc::setrlimit(*resource, value))?;
            }
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setresgid(gid, gid, gid))?;
            check(libc::setresuid(uid, uid, uid))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_python_waits_on_the_descriptor_the_release_is_mapped_to() {
        assert!(PYTHON_STARTED.contains(&format!("_os.read({BLOCK_FD}, 1)")));
        assert!(PYTHON_STARTED.contains(&format!("_os.close({BLOCK_FD})")));
        let (file, command) = started_ahead(Language::Python).unwrap();
        assert_eq!(file, "main.py");
        assert_eq!(command.last().map(String::as_str), Some(PYTHON_STARTED));
        assert!(started_ahead(Language::C).is_none());
    }

    /// What `python3 -u main.py` gives in `dir`, and what the started
    /// interpreter gives for the same file (released at once).
    fn both_ways(dir: &std::path::Path) -> [(String, String, Option<i32>); 2] {
        let python = format!("{PYTHON_ENV}/bin/python3");
        let main = dir.join("main.py");
        let started = PYTHON_STARTED
            .replace("/home/user/main.py", &main.to_string_lossy())
            .replace("'/home/user'", &format!("{:?}", dir.to_string_lossy()))
            .replace(
                "if not _os.read(12, 1):\n    _os._exit(0)\n_os.close(12)\n",
                "",
            );
        let run = |args: &[&str]| {
            let out = std::process::Command::new(&python)
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                out.status.code(),
            )
        };
        [run(&["-u", "main.py"]), run(&["-u", "-c", &started])]
    }

    #[test]
    fn a_started_python_runs_its_program_as_python_runs_a_script() {
        if !std::path::Path::new(PYTHON_ENV).is_dir() {
            // The sandbox's Python is made by scripts/setup.sh; the
            // integration tests refuse to run without it.
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for program in [
            "import sys\nprint(sys.argv, sys.path[0] == __import__('os').getcwd(), __name__, sorted(globals()))\n",
            "def f():\n    raise ValueError('boom')\nf()\n",
            "x = (\n",
            "import sys\nprint('out')\nsys.exit(3)\n",
            "try:\n    1 / 0\nexcept ZeroDivisionError:\n    raise KeyError('k')\n",
            "import inspect\ndef g():\n    return 1\nprint(inspect.getsource(g), end='')\n",
        ] {
            std::fs::write(dir.path().join("main.py"), program).unwrap();
            let [plain, started] = both_ways(dir.path());
            assert_eq!(started, plain, "{program}");
        }
    }
}
