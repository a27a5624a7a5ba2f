//! The sandboxes' settings: the local jail's sessions and limits, and E2B
//! (the cloud backend, and runcell's own E2B-compatible endpoints). The
//! server's configuration file holds them as its `[sandbox]` and `[e2b]`
//! sections.

use runcell_core::Secret;
use serde::{Deserialize, Serialize};

use super::Limits;

/// The local sandbox's sessions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Python sessions kept started, so that a new one is ready at once.
    pub pool_size: usize,
    /// Seconds a session may sit unused before it is closed.
    pub session_idle_secs: u64,
    /// Sandbox sessions open at once, at most.
    pub max_sessions: usize,
    /// The part of `max_sessions`, in percent, that the notebooks of
    /// anonymous pages (no key, not signed in) may hold together; the rest
    /// stays for keys and signed-in people.
    pub anonymous_share_percent: u8,
    /// Sandbox sessions the anonymous pages of one client address (an
    /// IPv6 client's /64; the forwarded one where `http.trust_forwarded`)
    /// may hold together.
    pub anonymous_sessions_per_client: usize,
    /// Wall time a run gets unless it asks for less or more.
    pub timeout_secs: u64,
    /// The most wall time a run may ask for.
    pub max_timeout_secs: u64,
    /// The rest are the most a run may use (and what it gets by default).
    pub memory_mib: u64,
    pub pids: u32,
    /// CPU quota in thousandths of a core.
    pub cpu_millis: u32,
    pub output_kib: u64,
    pub file_mib: u64,
    /// `/home/user` and `/tmp` together.
    pub disk_mib: u64,
    /// The largest file uploaded into a session.
    pub upload_mib: u64,
    /// The first of the host uids jails run as (one per session or run, the
    /// same number as gid); none may belong to a host user or group.
    pub uid_base: u32,
    /// How many uids from `uid_base`: at least the sessions, the warm pool
    /// and the one-shot runs that may be under way at once.
    pub uid_count: u32,
    /// Memory of every jail together, in MiB; 0 is three quarters of the
    /// host's memory.
    pub total_memory_mib: u64,
    /// Processes of every jail together.
    pub total_pids: u64,
    /// CPU time of every jail together, in thousandths of a core; 0 is
    /// three quarters of the host's CPUs (at least one core), leaving the
    /// rest to the server and its model. Never below `cpu_millis`.
    pub total_cpu_millis: u64,
    /// Whether this node offers the local jail (`RUNCELL_SANDBOX__JAIL`).
    /// `false` makes a web-only node: every session's code runs on E2B
    /// (which then must be configured), no jail is started here, and E2B's
    /// protocol is not served (it would run on jails).
    pub jail: bool,
    /// Idle kernels share the memory they hold alike (the interpreter's
    /// modules, loaded the same way in each): the kernel's same-page
    /// merging is turned on for them, with their address layout fixed so
    /// that their pages match. See SECURITY.md for what it trades.
    pub share_kernel_memory: bool,
}

/// A setting of the `[sandbox]` or `[e2b]` section that cannot be used,
/// named as the configuration file spells it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SandboxConfigError {
    /// A limit, count or timeout that is 0.
    #[error("invalid setting `{0}`: must be more than 0")]
    Zero(&'static str),
    #[error("invalid setting `sandbox.anonymous_share_percent`: must be at most 100")]
    ShareOver100,
    #[error(
        "invalid setting `sandbox.timeout_secs`: must not be more than sandbox.max_timeout_secs"
    )]
    TimeoutOverMax,
}

impl SandboxConfigError {
    /// The setting refused, e.g. `sandbox.memory_mib`.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Zero(setting) => setting,
            Self::ShareOver100 => "sandbox.anonymous_share_percent",
            Self::TimeoutOverMax => "sandbox.timeout_secs",
        }
    }
}

/// The first of `settings` that is 0.
fn none_zero(settings: &[(&'static str, u64)]) -> Result<(), SandboxConfigError> {
    match settings.iter().find(|(_, value)| *value == 0) {
        Some((setting, _)) => Err(SandboxConfigError::Zero(setting)),
        None => Ok(()),
    }
}

impl SandboxConfig {
    /// Whether these settings can be used: every limit more than 0, the
    /// anonymous share a percentage, the default timeout within the most.
    pub fn validate(&self) -> Result<(), SandboxConfigError> {
        none_zero(&[
            ("sandbox.max_timeout_secs", self.max_timeout_secs),
            ("sandbox.timeout_secs", self.timeout_secs),
            ("sandbox.memory_mib", self.memory_mib),
            ("sandbox.pids", u64::from(self.pids)),
            ("sandbox.cpu_millis", u64::from(self.cpu_millis)),
            ("sandbox.output_kib", self.output_kib),
            ("sandbox.file_mib", self.file_mib),
            ("sandbox.disk_mib", self.disk_mib),
            ("sandbox.upload_mib", self.upload_mib),
            (
                "sandbox.anonymous_share_percent",
                u64::from(self.anonymous_share_percent),
            ),
            (
                "sandbox.anonymous_sessions_per_client",
                self.anonymous_sessions_per_client as u64,
            ),
        ])?;
        if self.anonymous_share_percent > 100 {
            return Err(SandboxConfigError::ShareOver100);
        }
        if self.timeout_secs > self.max_timeout_secs {
            return Err(SandboxConfigError::TimeoutOverMax);
        }
        Ok(())
    }

    /// [`Self::upload_mib`] in bytes.
    pub fn upload_bytes(&self) -> usize {
        usize::try_from(self.upload_mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
    }

    /// The most any run may use.
    pub fn max_limits(&self) -> Limits {
        Limits {
            wall: std::time::Duration::from_secs(self.max_timeout_secs),
            memory_bytes: self.memory_mib * 1024 * 1024,
            pids: self.pids,
            cpu_millis: self.cpu_millis,
            output_bytes: usize::try_from(self.output_kib * 1024).unwrap_or(usize::MAX),
            file_bytes: self.file_mib * 1024 * 1024,
            disk_bytes: self.disk_mib * 1024 * 1024,
        }
    }

    /// What a run gets when it asks for nothing.
    pub fn default_limits(&self) -> Limits {
        Limits {
            wall: std::time::Duration::from_secs(self.timeout_secs.min(self.max_timeout_secs)),
            ..self.max_limits()
        }
    }

    /// What a run gets when it asks for `timeout` seconds of wall time (or
    /// nothing); asking for none or more than the most is refused, saying so.
    pub fn limits_with_timeout(&self, timeout: Option<f64>) -> Result<Limits, String> {
        let mut limits = self.default_limits();
        if let Some(timeout) = timeout {
            let most = self.max_timeout_secs;
            if !(timeout > 0.0 && timeout <= std::time::Duration::from_secs(most).as_secs_f64()) {
                return Err(format!(
                    "timeout must be more than 0 and at most {most} seconds"
                ));
            }
            limits.wall = std::time::Duration::from_secs_f64(timeout);
        }
        Ok(limits)
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            pool_size: 2,
            session_idle_secs: 15 * 60,
            max_sessions: 32,
            anonymous_share_percent: 50,
            anonymous_sessions_per_client: 4,
            timeout_secs: 30,
            max_timeout_secs: 300,
            memory_mib: 512,
            pids: 128,
            cpu_millis: 1000,
            output_kib: 1024,
            file_mib: 10,
            disk_mib: 256,
            upload_mib: 50,
            uid_base: 600_000,
            uid_count: 1024,
            total_memory_mib: 0,
            total_pids: 8192,
            total_cpu_millis: 0,
            jail: true,
            share_kernel_memory: true,
        }
    }
}

/// E2B: the cloud backend (when `api_key` is set) and runcell's own
/// E2B-compatible endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct E2bConfig {
    /// An E2B API key (`E2B_API_KEY`): when set, E2B is offered as a
    /// backend. Never printed.
    pub api_key: Secret,
    /// E2B's domain (`E2B_DOMAIN`): the API is `https://api.{domain}`.
    pub domain: String,
    /// The control plane's base URL (`E2B_API_URL`), instead of the domain's.
    pub api_url: String,
    /// One base URL for every sandbox's ports (`E2B_SANDBOX_URL`), routed by
    /// headers, instead of `https://{port}-{id}.{domain}`.
    pub sandbox_url: String,
    /// The template sandboxes are made from.
    pub template: String,
    /// The timeout sandboxes are created with; it is renewed while a session
    /// is in use.
    pub sandbox_timeout_secs: u64,
    /// Serve E2B's protocol on runcell's address, backed by the local jail.
    pub serve: bool,
    /// The longest timeout a sandbox of the served protocol may ask for.
    pub max_sandbox_timeout_secs: u64,
}

impl Default for E2bConfig {
    fn default() -> Self {
        Self {
            api_key: Secret::default(),
            domain: "e2b.app".into(),
            api_url: String::new(),
            sandbox_url: String::new(),
            template: "code-interpreter-v1".into(),
            sandbox_timeout_secs: 300,
            serve: true,
            max_sandbox_timeout_secs: 3600,
        }
    }
}

impl E2bConfig {
    /// Whether runs can go to E2B.
    pub fn enabled(&self) -> bool {
        !self.api_key.is_empty()
    }

    /// Whether these settings can be used: both timeouts more than 0.
    pub fn validate(&self) -> Result<(), SandboxConfigError> {
        none_zero(&[
            ("e2b.sandbox_timeout_secs", self.sandbox_timeout_secs),
            (
                "e2b.max_sandbox_timeout_secs",
                self.max_sandbox_timeout_secs,
            ),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `validate` says of the defaults with `change` made.
    fn said(change: impl FnOnce(&mut SandboxConfig)) -> Result<(), String> {
        let mut config = SandboxConfig::default();
        change(&mut config);
        config.validate().map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_pass() {
        assert_eq!(SandboxConfig::default().validate(), Ok(()));
        assert_eq!(E2bConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        type Change = fn(&mut SandboxConfig);
        let cases: [(Change, &str); 14] = [
            // A 0 is said before it is compared with `timeout_secs`.
            (
                |c| c.max_timeout_secs = 0,
                "invalid setting `sandbox.max_timeout_secs`: must be more than 0",
            ),
            (
                |c| c.timeout_secs = 0,
                "invalid setting `sandbox.timeout_secs`: must be more than 0",
            ),
            (
                |c| c.memory_mib = 0,
                "invalid setting `sandbox.memory_mib`: must be more than 0",
            ),
            (
                |c| c.pids = 0,
                "invalid setting `sandbox.pids`: must be more than 0",
            ),
            (
                |c| c.cpu_millis = 0,
                "invalid setting `sandbox.cpu_millis`: must be more than 0",
            ),
            (
                |c| c.output_kib = 0,
                "invalid setting `sandbox.output_kib`: must be more than 0",
            ),
            (
                |c| c.file_mib = 0,
                "invalid setting `sandbox.file_mib`: must be more than 0",
            ),
            (
                |c| c.disk_mib = 0,
                "invalid setting `sandbox.disk_mib`: must be more than 0",
            ),
            (
                |c| c.upload_mib = 0,
                "invalid setting `sandbox.upload_mib`: must be more than 0",
            ),
            (
                |c| c.anonymous_share_percent = 0,
                "invalid setting `sandbox.anonymous_share_percent`: must be more than 0",
            ),
            (
                |c| c.anonymous_share_percent = 101,
                "invalid setting `sandbox.anonymous_share_percent`: must be at most 100",
            ),
            (
                |c| c.anonymous_sessions_per_client = 0,
                "invalid setting `sandbox.anonymous_sessions_per_client`: must be more than 0",
            ),
            (
                |c| c.timeout_secs = 500,
                "invalid setting `sandbox.timeout_secs`: must not be more than sandbox.max_timeout_secs",
            ),
            // The most is a default's bound too.
            (|c| c.timeout_secs = 300, ""),
        ];
        for (change, says) in cases {
            let said = said(change).err().unwrap_or_default();
            assert_eq!(said, says);
        }
    }

    #[test]
    fn e2b_timeouts_are_refused_at_0() {
        let config = E2bConfig {
            sandbox_timeout_secs: 0,
            ..E2bConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(err.setting(), "e2b.sandbox_timeout_secs");
        assert_eq!(
            err.to_string(),
            "invalid setting `e2b.sandbox_timeout_secs`: must be more than 0"
        );
        let config = E2bConfig {
            max_sandbox_timeout_secs: 0,
            ..E2bConfig::default()
        };
        assert_eq!(
            config.validate().map_err(|e| e.to_string()),
            Err("invalid setting `e2b.max_sandbox_timeout_secs`: must be more than 0".into())
        );
    }
}
