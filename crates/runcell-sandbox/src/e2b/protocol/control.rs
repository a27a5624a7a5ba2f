//! The control plane: sandboxes made, listed, renewed and killed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `POST /sandboxes` and `POST /v2/sandboxes`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
}

/// A created (or connected) sandbox.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxJson {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(default)]
    pub envd_version: String,
    #[serde(default)]
    pub envd_access_token: Option<String>,
    #[serde(default)]
    pub traffic_access_token: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
}

/// One of `GET /v2/sandboxes`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub started_at: String,
    pub end_at: String,
    pub cpu_count: u32,
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: String,
    pub envd_version: String,
    pub metadata: BTreeMap<String, String>,
}

/// `POST /sandboxes/{id}/timeout`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TimeoutBody {
    pub timeout: u64,
}

/// `POST /sandboxes/{id}/connect` (and `/v2/…`): E2B's newer SDKs send no
/// `timeout` unless asked (`{}`), and E2B's API then gives the sandbox
/// [`CONNECT_TIMEOUT_SECS`]; other fields (`memory`, for paused sandboxes)
/// are ignored.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ConnectBody {
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// The timeout a connect without one gives, as E2B's API does.
pub const CONNECT_TIMEOUT_SECS: u64 = 300;

/// The control plane's (and envd's HTTP) error body.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ErrorJson {
    pub code: u16,
    pub message: String,
}
