//! Control groups for one run: memory (with swap), pids and CPU quota, on
//! cgroup v1 or v2, whichever the host has; plus a kill-all for the group.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::Limits;

const ROOT: &str = "/sys/fs/cgroup";
/// The folder, under each hierarchy, that holds runcell's groups.
pub(crate) const PARENT: &str = "runcell";

/// Which cgroup layout the host offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupMode {
    /// One unified hierarchy with the memory, pids and cpu controllers.
    V2,
    /// Separate v1 hierarchies; `kill_v2` is a unified hierarchy without
    /// controllers whose `cgroup.kill` still works (hybrid hosts).
    V1 { unified: Option<PathBuf> },
}

#[derive(Debug, thiserror::Error)]
#[error("cgroups: {0}")]
pub struct CgroupError(pub String);

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> CgroupError {
    CgroupError(format!("{what} {}: {e}", path.display()))
}

/// Finds the layout and checks that runcell can make groups in it.
pub fn detect() -> Result<CgroupMode, CgroupError> {
    let root = Path::new(ROOT);
    if root.join("cgroup.controllers").is_file() {
        let controllers = fs::read_to_string(root.join("cgroup.controllers"))
            .map_err(|e| io_err("cannot read", &root.join("cgroup.controllers"), &e))?;
        for needed in ["memory", "pids", "cpu"] {
            if !controllers.split_whitespace().any(|c| c == needed) {
                return Err(CgroupError(format!(
                    "the v2 hierarchy lacks the {needed} controller"
                )));
            }
        }
        let parent = root.join(PARENT);
        make_dir(&parent)?;
        // Controllers must be enabled for the children of every level.
        for level in [root, parent.as_path()] {
            let control = level.join("cgroup.subtree_control");
            fs::write(&control, "+memory +pids +cpu")
                .map_err(|e| io_err("cannot enable controllers in", &control, &e))?;
        }
        return Ok(CgroupMode::V2);
    }
    for controller in ["memory", "pids", "cpu"] {
        let dir = root.join(controller);
        if !dir.join("cgroup.procs").is_file() {
            return Err(CgroupError(format!(
                "no cgroup v2 and no v1 {controller} hierarchy under {ROOT}"
            )));
        }
        make_dir(&dir.join(PARENT))?;
    }
    let unified = root.join("unified");
    let unified = (unified.join("cgroup.procs").is_file()
        && make_dir(&unified.join(PARENT)).is_ok())
    .then_some(unified);
    Ok(CgroupMode::V1 { unified })
}

/// Caps on every jail together, held by runcell's parent group: however
/// many sessions and runs there are, they share this much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TotalCaps {
    pub memory_bytes: u64,
    pub pids: u64,
    /// CPU time of every jail together, in thousandths of a core, so that
    /// jails can never take the CPU the server (and its model) needs.
    pub cpu_millis: u64,
}

/// What the parent group holds now, as the kernel reports it (`None` where
/// there is no cap, or it cannot be read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParentCaps {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub cpu_millis: Option<u64>,
}

/// The CFS period the parent's CPU quota is counted in (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// The parent group's directories: (memory, pids, cpu).
fn parent_dirs(mode: &CgroupMode) -> (PathBuf, PathBuf, PathBuf) {
    let root = Path::new(ROOT);
    match mode {
        CgroupMode::V2 => (root.join(PARENT), root.join(PARENT), root.join(PARENT)),
        CgroupMode::V1 { .. } => (
            root.join("memory").join(PARENT),
            root.join("pids").join(PARENT),
            root.join("cpu").join(PARENT),
        ),
    }
}

/// `cpu_millis` as a quota for [`CPU_PERIOD_US`].
fn cpu_quota_us(cpu_millis: u64) -> u64 {
    (cpu_millis.saturating_mul(CPU_PERIOD_US) / 1000).max(MIN_CPU_QUOTA_US)
}

/// Writes `caps` to the parent group (every jail's group is below it).
pub fn set_parent_caps(mode: &CgroupMode, caps: &TotalCaps) -> Result<(), CgroupError> {
    let (memory_dir, pids_dir, cpu_dir) = parent_dirs(mode);
    let write = |path: PathBuf, value: &str| {
        fs::write(&path, value).map_err(|e| io_err("cannot write", &path, &e))
    };
    let memory = caps.memory_bytes.to_string();
    match mode {
        CgroupMode::V2 => {
            write(memory_dir.join("memory.max"), &memory)?;
            write(memory_dir.join("memory.swap.max"), "0").ok();
        }
        CgroupMode::V1 { .. } => {
            // A limit only holds for the groups below if it is hierarchical
            // (always so on recent kernels, where the file cannot be changed).
            let hierarchy = memory_dir.join("memory.use_hierarchy");
            if fs::read_to_string(&hierarchy).is_ok_and(|v| v.trim() == "0") {
                write(hierarchy, "1")?;
            }
            let limit = memory_dir.join("memory.limit_in_bytes");
            let memsw = memory_dir.join("memory.memsw.limit_in_bytes");
            // memory+swap may never be below memory: raise it first if the
            // memory limit is going up.
            if write(limit.clone(), &memory).is_err() {
                write(memsw.clone(), &memory).ok();
                write(limit, &memory)?;
            }
            // Absent where swap accounting is off.
            write(memsw, &memory).ok();
        }
    }
    write(pids_dir.join("pids.max"), &caps.pids.to_string())?;
    let quota = cpu_quota_us(caps.cpu_millis);
    match mode {
        CgroupMode::V2 => write(cpu_dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}")),
        CgroupMode::V1 { .. } => {
            // v1 refuses a parent quota below a child's: a run's own quota
            // is never above the total (`JailConfig::from_settings`).
            write(
                cpu_dir.join("cpu.cfs_period_us"),
                &CPU_PERIOD_US.to_string(),
            )?;
            write(cpu_dir.join("cpu.cfs_quota_us"), &quota.to_string())
        }
    }
}

/// The caps the parent group holds now, as the kernel reports them.
pub fn parent_caps(mode: &CgroupMode) -> ParentCaps {
    let (memory_dir, pids_dir, cpu_dir) = parent_dirs(mode);
    let read =
        |path: PathBuf| -> Option<u64> { fs::read_to_string(path).ok()?.trim().parse().ok() };
    let memory = match mode {
        CgroupMode::V2 => read(memory_dir.join("memory.max")),
        // v1 reports "no limit" as a huge page-rounded number.
        CgroupMode::V1 { .. } => {
            read(memory_dir.join("memory.limit_in_bytes")).filter(|&m| m < 1 << 62)
        }
    };
    // A quota over its period, in thousandths of a core; "max" or -1 is none.
    let millis = |quota: &str, period: &str| -> Option<u64> {
        let quota: u64 = quota.trim().parse().ok()?;
        let period: u64 = period.trim().parse().ok()?;
        (period > 0).then(|| quota * 1000 / period)
    };
    let cpu = match mode {
        CgroupMode::V2 => fs::read_to_string(cpu_dir.join("cpu.max"))
            .ok()
            .and_then(|line| {
                let (quota, period) = line.trim().split_once(' ')?;
                millis(quota, period)
            }),
        CgroupMode::V1 { .. } => {
            let quota = fs::read_to_string(cpu_dir.join("cpu.cfs_quota_us")).ok();
            let period = fs::read_to_string(cpu_dir.join("cpu.cfs_period_us")).ok();
            quota.zip(period).and_then(|(q, p)| millis(&q, &p))
        }
    };
    ParentCaps {
        memory_bytes: memory,
        pids: read(pids_dir.join("pids.max")),
        cpu_millis: cpu,
    }
}

/// Three quarters of the host's CPUs, at least one: the default CPU total
/// for jails, leaving the rest to the server and its model.
pub fn default_total_cpu_millis() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as u64;
    (cpus * 1000 / 4 * 3).max(1000)
}

/// Three quarters of the host's memory: the default total for jails.
pub fn default_total_memory() -> u64 {
    let kib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(4 * 1024 * 1024);
    kib * 1024 / 4 * 3
}

/// Removes runcell's groups that are empty and older than a minute: left by
/// a server that stopped, or by a removal the kernel refused for a while
/// (memory still being uncharged). A fresh group is never touched: a launcher
/// may be about to join it.
pub fn remove_stale_groups() {
    let root = Path::new(ROOT);
    let mut parents = vec![root.join(PARENT)];
    for controller in ["memory", "pids", "cpu", "unified"] {
        parents.push(root.join(controller).join(PARENT));
    }
    for parent in parents {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(60));
            let empty =
                fs::read_to_string(path.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
            if path.is_dir() && old && empty {
                let _ = fs::remove_dir(&path);
            }
        }
    }
}

fn make_dir(path: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err("cannot create", path, &e)),
    }
}

/// One run's groups; removed (after killing what is left) on drop.
#[derive(Debug)]
pub struct RunGroup {
    mode: CgroupMode,
    /// Every directory the run's processes join.
    dirs: Vec<PathBuf>,
    /// What [`Self::apply`] last wrote: memory, processes, CPU quota.
    applied: parking_lot::Mutex<Option<(u64, u64, u64)>>,
}

/// The smallest CPU quota a cgroup takes, in microseconds a period.
const MIN_CPU_QUOTA_US: u64 = 1000;

impl RunGroup {
    pub fn create(mode: &CgroupMode, name: &str, limits: &Limits) -> Result<Self, CgroupError> {
        let root = Path::new(ROOT);
        let group = Self {
            mode: mode.clone(),
            dirs: match mode {
                CgroupMode::V2 => vec![root.join(PARENT).join(name)],
                CgroupMode::V1 { unified } => {
                    let mut dirs: Vec<PathBuf> = ["memory", "pids", "cpu"]
                        .iter()
                        .map(|c| root.join(c).join(PARENT).join(name))
                        .collect();
                    if let Some(unified) = unified {
                        dirs.push(unified.join(PARENT).join(name));
                    }
                    dirs
                }
            },
            applied: parking_lot::Mutex::new(None),
        };
        for dir in &group.dirs {
            make_dir(dir)?;
        }
        group.apply(limits)?;
        Ok(group)
    }

    fn write(&self, dir: usize, file: &str, value: &str) -> Result<(), CgroupError> {
        let path = self.dirs[dir].join(file);
        fs::write(&path, value).map_err(|e| io_err("cannot write", &path, &e))
    }

    /// Sets the group's limits; lowering them is always possible while the
    /// group uses little (a warm jail waiting for its program). Only what
    /// differs from the limits already set is written: a warm jail asked
    /// for the limits it was made with costs no write (a CPU quota's is
    /// slow: it takes a lock across every CPU).
    pub fn apply(&self, limits: &Limits) -> Result<(), CgroupError> {
        let period: u64 = 100_000;
        // The kernel refuses quotas under 1 ms a period (1% of a core).
        let quota = (u64::from(limits.cpu_millis) * period / 1000).max(MIN_CPU_QUOTA_US);
        let wanted = (limits.memory_bytes, u64::from(limits.pids), quota);
        let mut applied = self.applied.lock();
        let before = applied.take();
        let changed = |field: fn(&(u64, u64, u64)) -> u64| {
            before.is_none_or(|before| field(&before) != field(&wanted))
        };
        let memory = limits.memory_bytes.to_string();
        let pids = limits.pids.to_string();
        match self.mode {
            CgroupMode::V2 => {
                if changed(|l| l.0) {
                    self.write(0, "memory.max", &memory)?;
                    self.write(0, "memory.swap.max", "0").ok();
                }
                if changed(|l| l.1) {
                    self.write(0, "pids.max", &pids)?;
                }
                if changed(|l| l.2) {
                    self.write(0, "cpu.max", &format!("{quota} {period}"))?;
                }
            }
            CgroupMode::V1 { .. } => {
                if changed(|l| l.0) {
                    // Lowered in this order (memsw may not go under memory's
                    // limit, memory may not go over memsw's): memsw fails
                    // when raising, so it is written again after.
                    let memsw = self.write(0, "memory.memsw.limit_in_bytes", &memory);
                    self.write(0, "memory.limit_in_bytes", &memory)?;
                    // Absent where swap accounting is off; memory alone still holds.
                    if memsw.is_err() {
                        self.write(0, "memory.memsw.limit_in_bytes", &memory).ok();
                    }
                }
                if changed(|l| l.1) {
                    self.write(1, "pids.max", &pids)?;
                }
                if changed(|l| l.2) {
                    if before.is_none() {
                        self.write(2, "cpu.cfs_period_us", &period.to_string())?;
                    }
                    self.write(2, "cpu.cfs_quota_us", &quota.to_string())?;
                }
            }
        }
        *applied = Some(wanted);
        Ok(())
    }

    /// The `cgroup.procs` files a launcher writes its pid to before it execs.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Whether the kernel killed something for lack of memory.
    pub fn oom_killed(&self) -> bool {
        let (file, key) = match self.mode {
            CgroupMode::V2 => ("memory.events", "oom_kill"),
            CgroupMode::V1 { .. } => ("memory.oom_control", "oom_kill"),
        };
        counter(&self.dirs[0].join(file), key) > 0
    }

    /// Whether a fork was refused at the pids limit.
    pub fn pids_exhausted(&self) -> bool {
        let dir = match self.mode {
            CgroupMode::V2 => &self.dirs[0],
            CgroupMode::V1 { .. } => &self.dirs[1],
        };
        counter(&dir.join("pids.events"), "max") > 0
    }

    fn kill_file(&self) -> Option<PathBuf> {
        match &self.mode {
            CgroupMode::V2 => Some(self.dirs[0].join("cgroup.kill")),
            CgroupMode::V1 { unified: Some(_) } => self.dirs.last().map(|d| d.join("cgroup.kill")),
            CgroupMode::V1 { unified: None } => None,
        }
    }

    /// Sends every process in the group SIGKILL, without waiting for them
    /// to be gone.
    fn signal_all(&self, kill_file: Option<&Path>) {
        let pids = self.pids();
        if pids.is_empty() || kill_file.is_some_and(|f| fs::write(f, "1").is_ok()) {
            return;
        }
        // No cgroup.kill on this host: signal each process.
        for pid in pids {
            let _ = std::process::Command::new("/usr/bin/kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// Kills every process in the group and waits until it is empty.
    pub fn kill_all(&self) {
        let kill_file = self.kill_file();
        let mut pause = Duration::from_micros(250);
        for _ in 0..200 {
            if self.pids().is_empty() {
                return;
            }
            self.signal_all(kill_file.as_deref());
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        tracing::warn!(group = ?self.dirs[0], "processes survived the kill-all");
    }

    /// Whether no process is left in the group.
    pub fn is_empty(&self) -> bool {
        self.pids().is_empty()
    }

    fn pids(&self) -> Vec<u32> {
        self.dirs
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    }
}

impl Drop for RunGroup {
    fn drop(&mut self) {
        self.kill_all();
        for dir in &self.dirs {
            // The kernel may need a moment to release a group whose last
            // process just died.
            for _ in 0..50 {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }
    }
}

/// Reads `key N` from a flat-keyed cgroup file; 0 when absent.
fn counter(path: &Path, key: &str) -> u64 {
    fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_flat_keyed_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.oom_control");
        fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(counter(&file, "oom_kill"), 3);
        assert_eq!(counter(&file, "under_oom"), 0);
        assert_eq!(counter(&dir.path().join("missing"), "oom_kill"), 0);
    }
}
