//! Server functions, and the ports on the server that they call.
//!
//! The server crate provides an implementation of each port as context; the
//! functions here only parse, call the port and map the result.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::protocol::SessionEvent;

/// Everything needed to render a session's notebook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLog {
    pub session_id: String,
    pub events: Vec<SessionEvent>,
}

#[cfg(feature = "ssr")]
pub mod ports {
    use crate::protocol::SessionEvent;

    /// Why a session's history cannot be read.
    #[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
    pub enum LogError {
        #[error("that is not a session id")]
        InvalidId,
        #[error("the session store is unavailable")]
        Unavailable,
    }

    /// Read access to sessions' event histories.
    pub trait SessionLogs: Send + Sync + 'static {
        /// The events of a session, oldest first; empty for a session that has
        /// not started yet.
        fn events(&self, session_id: &str) -> Result<Vec<SessionEvent>, LogError>;
    }

    /// How the port travels in Leptos context.
    pub type SharedSessionLogs = std::sync::Arc<dyn SessionLogs>;
}

/// A session's history, for the first render and for pages that load it later.
#[server(prefix = "/api", endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionLog, ServerFnError> {
    use ports::{LogError, SharedSessionLogs};

    let logs = use_context::<SharedSessionLogs>()
        .ok_or_else(|| ServerFnError::new("the session store is not configured"))?;
    match logs.events(&session_id) {
        Ok(events) => Ok(SessionLog { session_id, events }),
        Err(err) => {
            if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                response.set_status(match err {
                    LogError::InvalidId => http::StatusCode::NOT_FOUND,
                    LogError::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
                });
            }
            Err(ServerFnError::new(err.to_string()))
        }
    }
}
