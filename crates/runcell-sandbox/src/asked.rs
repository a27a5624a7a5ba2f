//! Limits a caller asks for, for one run: each at least its least and at
//! most the server's, so a request may lower a limit but never raise it.
//! Asking for more is an error, not a clamp.

use super::Limits;
use crate::config::SandboxConfig;

/// A limit a request may lower, in the units it is asked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    MemoryMib,
    Pids,
    CpuMillis,
    OutputKib,
    FileMib,
    DiskMib,
}

impl Limit {
    pub const ALL: [Self; 6] = [
        Self::MemoryMib,
        Self::Pids,
        Self::CpuMillis,
        Self::OutputKib,
        Self::FileMib,
        Self::DiskMib,
    ];

    /// Its name on the wire (`limits.memory_mib`…).
    pub fn name(self) -> &'static str {
        match self {
            Self::MemoryMib => "memory_mib",
            Self::Pids => "pids",
            Self::CpuMillis => "cpu_millis",
            Self::OutputKib => "output_kib",
            Self::FileMib => "file_mib",
            Self::DiskMib => "disk_mib",
        }
    }

    /// The least it may be: 1, but a tenth of a percent of a core cannot be
    /// given (the kernel's smallest CPU quota is 1% of a core).
    pub fn least(self) -> u64 {
        match self {
            Self::CpuMillis => 10,
            _ => 1,
        }
    }

    /// The most it may be: the server's own.
    pub fn most(self, server: &SandboxConfig) -> u64 {
        match self {
            Self::MemoryMib => server.memory_mib,
            Self::Pids => u64::from(server.pids),
            Self::CpuMillis => u64::from(server.cpu_millis),
            Self::OutputKib => server.output_kib,
            Self::FileMib => server.file_mib,
            Self::DiskMib => server.disk_mib,
        }
    }

    fn lower(self, limits: &mut Limits, value: u64) {
        let mib = 1024 * 1024;
        match self {
            Self::MemoryMib => limits.memory_bytes = value * mib,
            Self::Pids => limits.pids = u32::try_from(value).unwrap_or(u32::MAX),
            Self::CpuMillis => limits.cpu_millis = u32::try_from(value).unwrap_or(u32::MAX),
            Self::OutputKib => {
                limits.output_bytes = usize::try_from(value * 1024).unwrap_or(usize::MAX);
            }
            Self::FileMib => limits.file_bytes = value * mib,
            Self::DiskMib => limits.disk_bytes = value * mib,
        }
    }
}

/// Why asked-for limits were refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("{0}")]
    Timeout(String),
    #[error("limits.{name} must be at least {least} and at most {most}", name = .limit.name())]
    OutOfRange { limit: Limit, least: u64, most: u64 },
}

/// The limits for one run: the server's defaults with `timeout` seconds of
/// wall time if asked, lowered where `asked` says.
pub fn lowered(
    server: &SandboxConfig,
    timeout: Option<f64>,
    asked: &[(Limit, Option<u64>)],
) -> Result<Limits, LimitError> {
    let mut limits = server
        .limits_with_timeout(timeout)
        .map_err(LimitError::Timeout)?;
    for &(limit, value) in asked {
        let Some(value) = value else { continue };
        let (least, most) = (limit.least(), limit.most(server));
        if value < least || value > most {
            return Err(LimitError::OutOfRange { limit, least, most });
        }
        limit.lower(&mut limits, value);
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_may_lower_a_limit_but_never_raise_it() {
        let server = SandboxConfig::default();
        let limits = lowered(
            &server,
            Some(2.5),
            &[(Limit::MemoryMib, Some(64)), (Limit::CpuMillis, Some(10))],
        )
        .unwrap();
        assert_eq!(limits.memory_bytes, 64 * 1024 * 1024);
        assert_eq!(limits.cpu_millis, 10);
        assert_eq!(limits.wall.as_secs_f64(), 2.5);
        assert_eq!(limits.pids, server.pids, "what is not asked stays");
        for (limit, value) in [
            (Limit::MemoryMib, server.memory_mib + 1),
            (Limit::CpuMillis, 9),
            (Limit::Pids, 0),
        ] {
            let refused = lowered(&server, None, &[(limit, Some(value))]).unwrap_err();
            assert!(
                matches!(refused, LimitError::OutOfRange { .. }),
                "{refused}"
            );
            assert!(
                refused
                    .to_string()
                    .starts_with(&format!("limits.{} must be at least", limit.name()))
            );
        }
        assert!(matches!(
            lowered(&server, Some(0.0), &[]),
            Err(LimitError::Timeout(_))
        ));
    }
}
