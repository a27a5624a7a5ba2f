//! The terminal client's own files: the owner id it has on each server (so
//! that `--session ID` finds its sessions again, and they stay its own
//! across runs), and the chat's line history. Kept in
//! `$RUNCELL_CLIENT_DIR`, else `$XDG_STATE_HOME/runcell`, else
//! `~/.local/state/runcell`, readable by the user only.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use runcell_protocol::OwnerId;

/// The most servers remembered (a hostile or broken file cannot grow this).
const MAX_ENTRIES: usize = 1000;
/// A larger owners file is not read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The client's directory.
pub fn client_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RUNCELL_CLIENT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(state).join("runcell");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/state/runcell")
}

/// The owner ids this client has, one per server (or data directory).
pub struct Identities {
    file: PathBuf,
}

impl Identities {
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            file: dir.join("owners.json"),
        }
    }

    /// The owner id this client has at `place`, if any.
    pub fn owner(&self, place: &str) -> Option<OwnerId> {
        self.read().get(place).and_then(|id| id.parse().ok())
    }

    /// Remembers `owner` for `place`.
    pub fn remember(&self, place: &str, owner: OwnerId) -> std::io::Result<()> {
        let mut all = self.read();
        all.insert(place.to_string(), owner.to_string());
        while all.len() > MAX_ENTRIES {
            let Some(first) = all.keys().next().cloned() else {
                break;
            };
            all.remove(&first);
        }
        let text = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
        if let Some(dir) = self.file.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        // Written beside and renamed, so that a crash leaves the old file.
        let temp = self.file.with_extension("json.new");
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        out.write_all(text.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&temp, &self.file)
    }

    fn read(&self) -> BTreeMap<String, String> {
        let Ok(meta) = std::fs::metadata(&self.file) else {
            return BTreeMap::new();
        };
        if meta.len() > MAX_FILE_BYTES {
            return BTreeMap::new();
        }
        std::fs::read_to_string(&self.file)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_kept_per_place_and_a_broken_file_is_no_owner() {
        let dir = tempfile::tempdir().unwrap();
        let ids = Identities::in_dir(&dir.path().join("nested"));
        assert_eq!(ids.owner("http://a"), None);
        let (a, b) = (OwnerId::random(), OwnerId::random());
        ids.remember("http://a", a).unwrap();
        ids.remember("embedded:/data", b).unwrap();
        assert_eq!(ids.owner("http://a"), Some(a));
        assert_eq!(ids.owner("embedded:/data"), Some(b));
        let mode = std::fs::metadata(dir.path().join("nested/owners.json"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        std::fs::write(dir.path().join("nested/owners.json"), "{not json").unwrap();
        assert_eq!(ids.owner("http://a"), None);
        ids.remember("http://a", a).unwrap();
        assert_eq!(ids.owner("http://a"), Some(a));
    }
}
