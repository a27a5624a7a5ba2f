//! envd: the filesystem's entries and the process service's messages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An upload's answer: one per file written.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct WrittenEntry {
    pub path: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// Connect's `filesystem.EntryInfo` in proto3 JSON (int64 as a string, zero
/// values omitted).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    pub path: String,
    #[serde(default, with = "int64_string")]
    pub size: u64,
    #[serde(default)]
    pub mode: u32,
    #[serde(default)]
    pub permissions: String,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub group: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

pub const FILE_TYPE_FILE: &str = "FILE_TYPE_FILE";
pub const FILE_TYPE_DIRECTORY: &str = "FILE_TYPE_DIRECTORY";
pub const FILE_TYPE_SYMLINK: &str = "FILE_TYPE_SYMLINK";
/// Anything else (a pipe, a socket, a device).
pub const FILE_TYPE_UNSPECIFIED: &str = "FILE_TYPE_UNSPECIFIED";

/// proto3 JSON writes int64 as a string and accepts either.
mod int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(u64),
        }
        match Either::deserialize(deserializer)? {
            Either::Number(n) => Ok(n),
            Either::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `process.Process/Start`'s request.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct StartRequest {
    pub process: ProcessConfig,
    #[serde(default)]
    pub stdin: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ProcessConfig {
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// One of `Start`'s answers: `{"event": {...}}`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ProcessEventJson {
    pub event: ProcessEvent,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessEvent {
    Start {
        pid: u32,
    },
    /// Base64 bytes under `stdout`, `stderr` or `pty`.
    Data(BTreeMap<String, String>),
    Keepalive {},
    End(ProcessEnd),
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessEnd {
    /// Omitted when 0, as Go's protojson writes it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_code: i32,
    #[serde(default)]
    pub exited: bool,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}
