//! The `[packages]` section of the server's config file: which projects a
//! jail may install, from where, and how much.

use serde::{Deserialize, Serialize};

/// The package index's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PackagesConfig {
    /// Off, only the projects in `allow`, or every project not denied.
    pub mode: Mode,
    /// Project names (any spelling; normalised on use); used when `mode = "allowlist"`.
    pub allow: Vec<String>,
    /// Refused in every mode. `pip` by default: a session's installer is the jail's own.
    pub deny: Vec<String>,
    /// Source distributions served too (they build code at install time); wheels only by default.
    pub sdists: bool,
    /// The upstream simple index URL; `None`: [`crate::default_index_url`].
    pub index_url: Option<String>,
    /// The largest single file served, in MiB.
    pub max_file_mib: u64,
    /// The most bytes one account (a session or a one-shot run) may be served, in MiB.
    pub max_session_mib: u64,
    /// The most the shared cache keeps of files and project pages, in MiB:
    /// past it, those used longest ago are removed (they are fetched again
    /// if asked for).
    pub max_cache_mib: u64,
    /// Upstream fetches (project pages and files) in flight at once, over
    /// every session; more wait their turn.
    pub max_fetches: u32,
    /// Upstream fetches one session (or one-shot run) may have in flight
    /// at once; more wait their turn.
    pub max_session_fetches: u32,
    /// Never ask upstream: serve only what the cache holds.
    pub offline: bool,
    /// A cached project page older than this is fetched again (the stale copy
    /// is used if upstream fails).
    pub page_ttl_secs: u64,
    /// Certificates (PEM) the upstream's is checked against besides the
    /// built-in roots: an internal mirror's, or a proxy's. Unset: the file
    /// `SSL_CERT_FILE` names, else the system's bundle
    /// (`/etc/ssl/certs/ca-certificates.crt`) when there is one.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for PackagesConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Open,
            allow: Vec::new(),
            deny: vec!["pip".into()],
            sdists: false,
            index_url: None,
            max_file_mib: 100,
            max_session_mib: 500,
            max_cache_mib: 5120,
            max_fetches: 8,
            max_session_fetches: 2,
            offline: false,
            page_ttl_secs: 600,
            ca_file: None,
        }
    }
}

/// Whether jails get an index, and which projects it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No index: jails have no packages beyond their image's.
    Off,
    /// Only the projects in `allow` (less those in `deny`).
    Allowlist,
    /// Every project not in `deny`.
    #[default]
    Open,
}

/// A setting of the `[packages]` section that cannot be used, named as the
/// configuration file spells it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackagesConfigError {
    /// A size cap that is 0.
    #[error("invalid setting `{0}`: must be more than 0")]
    Zero(&'static str),
}

impl PackagesConfigError {
    /// The setting refused, e.g. `packages.max_file_mib`.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Zero(setting) => setting,
        }
    }
}

impl PackagesConfig {
    /// Whether these settings can be used: the size caps more than 0.
    pub fn validate(&self) -> Result<(), PackagesConfigError> {
        for (setting, value) in [
            ("packages.max_file_mib", self.max_file_mib),
            ("packages.max_session_mib", self.max_session_mib),
        ] {
            if value == 0 {
                return Err(PackagesConfigError::Zero(setting));
            }
        }
        Ok(())
    }

    pub(crate) fn max_file_bytes(&self) -> u64 {
        self.max_file_mib.saturating_mul(1024 * 1024)
    }

    pub(crate) fn max_session_bytes(&self) -> u64 {
        self.max_session_mib.saturating_mul(1024 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_sections() {
        let config: PackagesConfig =
            serde_json::from_str(r#"{"mode":"allowlist","allow":["NumPy"]}"#)
                .expect("a partial section");
        assert_eq!(config.mode, Mode::Allowlist);
        assert_eq!(config.deny, vec!["pip".to_string()]);
        assert_eq!(config.max_file_mib, 100);
        assert!(serde_json::from_str::<PackagesConfig>(r#"{"modes":"off"}"#).is_err());
    }

    #[test]
    fn the_defaults_pass_and_a_0_cap_is_refused_by_name() {
        assert_eq!(PackagesConfig::default().validate(), Ok(()));
        let said = |config: PackagesConfig| config.validate().map_err(|e| e.to_string());
        assert_eq!(
            said(PackagesConfig {
                max_file_mib: 0,
                ..PackagesConfig::default()
            }),
            Err("invalid setting `packages.max_file_mib`: must be more than 0".into())
        );
        let err = PackagesConfig {
            max_session_mib: 0,
            ..PackagesConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.setting(), "packages.max_session_mib");
        assert_eq!(
            err.to_string(),
            "invalid setting `packages.max_session_mib`: must be more than 0"
        );
    }
}
