//! The jail's `/etc`: a directory made once per server process with only
//! what programs need, bound read-only over `/etc`. The host's own `/etc`
//! (its users, service drop-ins with secrets in `Environment=`,
//! `/etc/environment`, package-manager credentials) never reaches a jail.
//!
//! What is in it, and why:
//! - `passwd`, `group`: root, nobody and the jail's `user` (1000, home
//!   `/home/user`), so that `whoami`, `getpass.getuser()` and `~` work.
//! - `hosts`, `hostname`: `localhost` and `sandbox` resolve without DNS.
//! - `nsswitch.conf`: glibc looks only in those files (no systemd, NIS).
//! - `ld.so.cache`, `ld.so.conf`, `ld.so.conf.d/`: the loader finds
//!   libraries; gcc's linker reads them too.
//! - `localtime`, `timezone`: the host's time zone.
//! - `alternatives/`: the links `/usr/bin/cc`, `c++`, `awk`... and the
//!   libraries chosen the same way (`libblas.so.3`, R's) go through.
//! - `fonts/`: fontconfig (matplotlib asks it for fonts).
//! - `mime.types`: Python's `mimetypes`.
//! - `os-release`, `debian_version`: `platform` and installers read them.
//! - `protocols`, `services`: `getprotobyname`, `getservbyname`.
//! - `python3/`, `python3.*/`: Debian's Python reads its `sitecustomize` there.
//! - `ssl/openssl.cnf`: OpenSSL's configuration, read by node and Python
//!   at start. No certificates: there is no network.
//! - `R/`: R's own settings (`Renviron`, `ldpaths`: R's `etc` links there).
//! - `java-*/`: Debian's JDK reads its settings there (its `conf` links).
//! - `runcell/node_kernel.js`: the JavaScript and TypeScript kernel
//!   ([`NODE_KERNEL`]), and `runcell/java_kernel.py` with
//!   `runcell/JShellKernel.java`, the Java kernel ([`JAVA_KERNEL`],
//!   [`JSHELL_ENGINE`]): part of this binary, so that what runs is always
//!   the kernel the server was built with.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::identity::{JAIL_UID, JAIL_USER};

/// Where each server process keeps its `/etc` for jails.
const ROOT: &str = "/run/runcell";
const PREFIX: &str = "etc-";

/// Host files copied as they are (those missing are skipped).
const COPIED: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "fonts",
    "mime.types",
    "os-release",
    "debian_version",
    "protocols",
    "services",
    "python3",
    "ssl/openssl.cnf",
    "R",
];

/// The JavaScript and TypeScript kernel (`node_kernel.js`) and where jails
/// find it.
pub const NODE_KERNEL: &str = include_str!("node_kernel.js");
pub const NODE_KERNEL_PATH: &str = "/etc/runcell/node_kernel.js";

/// The Java kernel: a wrapper kernel in Python ([`JAVA_KERNEL`]) and the
/// JShell engine it starts in a JVM ([`JSHELL_ENGINE`], a single-file
/// program the JVM compiles as it starts), both part of this binary.
pub const JAVA_KERNEL: &str = include_str!("java_kernel/java_kernel.py");
pub const JAVA_KERNEL_PATH: &str = "/etc/runcell/java_kernel.py";
pub const JSHELL_ENGINE: &str = include_str!("java_kernel/JShellKernel.java");
pub const JSHELL_ENGINE_PATH: &str = "/etc/runcell/JShellKernel.java";
/// The JVM (Debian's alternatives link).
pub const JAVA: &str = "/usr/bin/java";

/// Where the JShell engine's classes are, compiled once per server process
/// (a JVM given the source compiles it as it starts: 1.3 s more for every
/// Java kernel on one core).
pub const JSHELL_CLASSES_PATH: &str = "/etc/runcell/java";

/// Compiles the JShell engine beside its source with the host's `javac`
/// (the JDK's own, from the same package as `jshell`). Without it the Java
/// kernel compiles the source itself as it starts; nothing else changes.
fn compile_jshell_engine(dir: &Path) {
    let source = dir.join(JSHELL_ENGINE_PATH.trim_start_matches("/etc/"));
    let classes = dir.join(JSHELL_CLASSES_PATH.trim_start_matches("/etc/"));
    let javac = Path::new("/usr/bin/javac");
    if !javac.exists() {
        return;
    }
    let compiled = std::process::Command::new(javac)
        .arg("-J-XX:+UseSerialGC")
        .arg("-d")
        .arg(&classes)
        .arg(&source)
        .stdin(std::process::Stdio::null())
        .output();
    match compiled {
        Ok(out) if out.status.success() => {}
        Ok(out) => tracing::warn!(
            stderr = %String::from_utf8_lossy(&out.stderr),
            "the Java kernel's engine did not compile; kernels compile it as they start"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "javac did not run; Java kernels compile their engine as they start"
        ),
    }
}

/// The jail's `/etc` for this process, made on first use.
pub fn jail_etc() -> Result<&'static Path, String> {
    static ETC: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ETC.get_or_init(|| {
        let dir = Path::new(ROOT).join(format!("{PREFIX}{}", std::process::id()));
        build(Path::new("/etc"), &dir)
            .map(|()| dir)
            .map_err(|e| format!("cannot make the jail's /etc: {e}"))
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(Clone::clone)
}

/// Makes `dir` afresh from `host` (normally `/etc`).
fn build(host: &Path, dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    // A directory of a process that had this pid before.
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::DirBuilder::new().mode(0o755).create(dir)?;
    let write = |name: &str, text: &str| -> std::io::Result<()> {
        fs::write(dir.join(name), text)?;
        fs::set_permissions(dir.join(name), fs::Permissions::from_mode(0o644))
    };
    write(
        "passwd",
        &format!(
            "root:x:0:0:root:/root:/usr/sbin/nologin\n\
             {JAIL_USER}:x:{JAIL_UID}:{JAIL_UID}:{JAIL_USER}:/home/user:/bin/bash\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
    )?;
    write(
        "group",
        &format!("root:x:0:\n{JAIL_USER}:x:{JAIL_UID}:\nnogroup:x:65534:\n"),
    )?;
    write(
        "hosts",
        "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    )?;
    write("hostname", "sandbox\n")?;
    write(
        "nsswitch.conf",
        "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n\
         protocols: files\nservices: files\nethers: files\nrpc: files\n",
    )?;
    for name in COPIED {
        copy(&host.join(name), &dir.join(name))?;
    }
    fs::DirBuilder::new()
        .mode(0o755)
        .create(dir.join("runcell"))?;
    let kernel = NODE_KERNEL_PATH.trim_start_matches("/etc/");
    write(kernel, NODE_KERNEL)?;
    write(JAVA_KERNEL_PATH.trim_start_matches("/etc/"), JAVA_KERNEL)?;
    write(
        JSHELL_ENGINE_PATH.trim_start_matches("/etc/"),
        JSHELL_ENGINE,
    )?;
    compile_jshell_engine(dir);
    // Debian's Python keeps its sitecustomize in /etc/python3.X, its JDK
    // its settings (security policy, logging) in /etc/java-N-openjdk.
    for entry in fs::read_dir(host)?.flatten() {
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if name_text.starts_with("python3.") || name_text.starts_with("java-") {
            copy(&entry.path(), &dir.join(&name))?;
        }
    }
    alternatives(host, dir)
}

/// Copies `from` to `to`: files, directories (recursively) and symbolic
/// links as links; anything else, and a missing `from`, is left out.
fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = match fs::symlink_metadata(from) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if let Some(parent) = to.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    let kind = meta.file_type();
    if kind.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if kind.is_dir() {
        fs::DirBuilder::new().mode(0o755).create(to)?;
        for entry in fs::read_dir(from)?.flatten() {
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if kind.is_file() {
        fs::copy(from, to)?;
        fs::set_permissions(to, fs::Permissions::from_mode(0o644))
    } else {
        Ok(())
    }
}

/// The links of `host/alternatives` that programs in `/usr/bin` and
/// `/usr/sbin` go through (`cc`, `c++`, `awk`...), copied as links.
fn alternatives(host: &Path, dir: &Path) -> std::io::Result<()> {
    let through = host.join("alternatives");
    fs::DirBuilder::new()
        .mode(0o755)
        .create(dir.join("alternatives"))?;
    // Programs, and libraries chosen the same way (R's BLAS and LAPACK).
    let mut dirs: Vec<PathBuf> = ["/usr/bin", "/usr/sbin", "/usr/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Ok(entries) = fs::read_dir("/usr/lib") {
        dirs.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains("-linux-"))
                .map(|e| e.path()),
        );
    }
    for bin in dirs {
        let Ok(entries) = fs::read_dir(bin) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(target) = fs::read_link(entry.path()) else {
                continue;
            };
            let Ok(name) = target.strip_prefix(&through) else {
                continue;
            };
            let to = dir.join("alternatives").join(name);
            if name.components().count() == 1 && fs::symlink_metadata(&to).is_err() {
                copy(&through.join(name), &to)?;
            }
        }
    }
    Ok(())
}

/// Removes the `/etc` directories of server processes that are gone.
pub fn remove_stale() {
    let Ok(entries) = fs::read_dir(ROOT) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_string_lossy()
            .strip_prefix(PREFIX)
            .map(str::to_string)
        else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir
            && pid.parse::<u32>().is_ok()
            && pid != std::process::id().to_string()
            && !Path::new("/proc").join(&pid).exists()
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_files_are_copied() {
        let host = tempfile::tempdir().unwrap();
        let h = host.path();
        fs::write(h.join("environment"), "OPENAI_API_KEY=sk-secret\n").unwrap();
        fs::create_dir_all(h.join("systemd/system/x.service.d")).unwrap();
        fs::write(h.join("systemd/system/x.service.d/k.conf"), "secret").unwrap();
        fs::write(h.join("passwd"), "alice:x:1001:1001::/home/alice:/bin/sh\n").unwrap();
        fs::write(h.join("mime.types"), "text/plain txt\n").unwrap();
        fs::create_dir_all(h.join("ld.so.conf.d")).unwrap();
        fs::write(h.join("ld.so.conf.d/libc.conf"), "/usr/local/lib\n").unwrap();
        std::os::unix::fs::symlink("/usr/share/zoneinfo/Etc/UTC", h.join("localtime")).unwrap();
        fs::create_dir_all(h.join("ssl/private")).unwrap();
        fs::write(h.join("ssl/private/key.pem"), "secret").unwrap();
        fs::write(h.join("ssl/openssl.cnf"), "# conf\n").unwrap();

        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("etc");
        build(h, &dir).unwrap();
        assert!(!dir.join("environment").exists());
        assert!(!dir.join("systemd").exists());
        assert!(!dir.join("ssl/private").exists());
        assert!(dir.join("ssl/openssl.cnf").is_file());
        assert!(dir.join("mime.types").is_file());
        assert!(dir.join("ld.so.conf.d/libc.conf").is_file());
        assert_eq!(
            fs::read_link(dir.join("localtime")).unwrap(),
            Path::new("/usr/share/zoneinfo/Etc/UTC")
        );
        let passwd = fs::read_to_string(dir.join("passwd")).unwrap();
        assert!(!passwd.contains("alice"));
        assert!(passwd.contains("user:x:1000:1000:user:/home/user:/bin/bash"));
        // A second build (a reused pid) starts afresh.
        build(h, &dir).unwrap();
    }
}
