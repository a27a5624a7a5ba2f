//! E2B's wire formats, as both sides of runcell speak them: the control
//! plane's JSON, the code interpreter's NDJSON lines, envd's entries and the
//! Connect protocol's envelopes. Pinned in `shared/notes/e2b-protocol.md`
//! (e2b 2.63.0, e2b-code-interpreter 2.11.5).

mod code;
mod connect;
mod control;
mod envd;
#[cfg(test)]
mod tests;
mod times;

pub use self::code::*;
pub use self::connect::*;
pub use self::control::*;
pub use self::envd::*;
pub use self::times::*;

/// The code interpreter's port inside a sandbox.
pub const CODE_PORT: u16 = 49999;
/// envd's port (files, processes) inside a sandbox.
pub const ENVD_PORT: u16 = 49983;
/// The envd version runcell's stand-in claims: the SDKs gate features on it.
pub const ENVD_VERSION: &str = "0.6.13";
/// The code interpreter SDKs' default template.
pub const DEFAULT_TEMPLATE: &str = "code-interpreter-v1";
/// The home of a sandbox's default user.
pub const HOME: &str = "/home/user";
/// How often the code interpreter says it is still there.
pub const KEEPALIVE_SECS: u64 = 5;

/// Routing headers of every data-plane request.
pub const SANDBOX_ID_HEADER: &str = "e2b-sandbox-id";
pub const SANDBOX_PORT_HEADER: &str = "e2b-sandbox-port";
pub const ACCESS_TOKEN_HEADER: &str = "x-access-token";
pub const TRAFFIC_TOKEN_HEADER: &str = "e2b-traffic-access-token";
pub const API_KEY_HEADER: &str = "x-api-key";
