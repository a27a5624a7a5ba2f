//! Why a page's data could not be loaded: the server functions' one error
//! type, sent to the browser as JSON and shown by the pages' error boundary.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// What a page says when the server could not be asked at all.
pub const UNREACHABLE: &str = "The server could not be reached.";

/// Why a session or a share link could not be loaded. Its `Display` is the
/// sentence the page shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum LoadError {
    #[error("that is not a session id")]
    InvalidId,
    /// No such session, or not the viewer's: the two look the same.
    #[error("there is no such session, or it is not yours")]
    NotFound,
    /// No such link, or a revoked one.
    #[error("this link does not exist or was revoked")]
    LinkNotFound,
    #[error("the session store is unavailable")]
    Unavailable,
    /// The server runs without a session store in context.
    #[error("the session store is not configured")]
    NotConfigured,
    /// The call failed on its way (network, encoding): the detail is kept
    /// for debugging, the page says only that the server was not reached.
    #[error("{UNREACHABLE}")]
    Unreachable(String),
    /// The page was served without its data (the browser reads a session's
    /// data from its page only): loading it again is the remedy.
    #[error("its data did not come with the page: reload the page to try again")]
    NotWithPage,
}

impl FromServerFnError for LoadError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        Self::Unreachable(value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_says_only_that_the_server_was_not_reached() {
        let err = LoadError::from_server_fn_error(ServerFnErrorErr::Request("refused".into()));
        assert_eq!(err.to_string(), UNREACHABLE);
        let json = serde_json::to_string(&LoadError::LinkNotFound).unwrap();
        assert_eq!(
            serde_json::from_str::<LoadError>(&json).unwrap(),
            LoadError::LinkNotFound
        );
    }
}
