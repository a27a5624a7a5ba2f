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
    pub models: ModelChoices,
}

/// The models a person can pick from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChoices {
    /// `openai`, `embedded` or `scripted`.
    pub backend: String,
    /// The model used when none is picked.
    pub default_model: String,
    /// Every model the backend lists, the default among them.
    pub models: Vec<String>,
    /// Why the list could not be read, if it could not (the server is down,
    /// the model file is missing...).
    pub problem: Option<String>,
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

    /// The models on offer, as last read from the backend.
    pub trait ModelCatalog: Send + Sync + 'static {
        fn choices(&self) -> super::ModelChoices;
    }

    pub type SharedModelCatalog = std::sync::Arc<dyn ModelCatalog>;
}

/// A session's history, for the first render and for pages that load it later.
#[server(prefix = "/api", endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionLog, ServerFnError> {
    use ports::{LogError, SharedModelCatalog, SharedSessionLogs};

    let logs = use_context::<SharedSessionLogs>()
        .ok_or_else(|| ServerFnError::new("the session store is not configured"))?;
    let models = use_context::<SharedModelCatalog>()
        .map(|catalog| catalog.choices())
        .unwrap_or_default();
    match logs.events(&session_id) {
        Ok(events) => Ok(SessionLog {
            session_id,
            events,
            models,
        }),
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
