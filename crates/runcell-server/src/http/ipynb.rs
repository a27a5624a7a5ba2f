//! A session downloaded as a Jupyter notebook (`notebook::ipynb`): the
//! owner's `/api/sessions/{id}/notebook.ipynb` and a share link's
//! `/s/{token}/notebook.ipynb`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::owner::Owner;
use runcell_agent::notebook::{Notebooks, parse_link_token, parse_session_id};

/// `GET /api/sessions/{id}/notebook.ipynb`.
pub async fn owned(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let notebook = notebooks
        .notebook_owned(owner, parse_session_id(&id)?)
        .await?;
    Ok(download(&notebook))
}

/// `GET /s/{token}/notebook.ipynb`.
pub async fn shared(
    State(notebooks): State<Arc<Notebooks>>,
    Path(token): Path<String>,
) -> Result<Response, ApiError> {
    let notebook = notebooks
        .notebook_shared(&parse_link_token(&token)?)
        .await?;
    Ok(download(&notebook))
}

/// How many notebook imports may be read at once, and how big each may
/// be (`notebook.imports_in_flight`, `notebook.import_mib`): an import is
/// read whole and parsed, so both bound what anonymous posts can make the
/// server hold.
#[derive(Clone)]
pub struct ImportGate {
    permits: Arc<tokio::sync::Semaphore>,
    max_bytes: usize,
}

impl ImportGate {
    pub fn new(in_flight: usize, max_bytes: usize) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(in_flight.max(1))),
            max_bytes,
        }
    }
}

/// `POST /api/sessions/import`: a Jupyter notebook (the file's bytes as
/// the body) becomes a new session of the caller's; answers like
/// `POST /api/sessions`. A place is taken before the body is read, and
/// the body is cut at its bound as it arrives.
pub async fn import(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    axum::Extension(gate): axum::Extension<ImportGate>,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let Ok(_permit) = gate.permits.try_acquire() else {
        return Err(ApiError::Busy(
            "other notebooks are being imported; try again in a moment".into(),
        ));
    };
    let limited = http_body_util::Limited::new(body, gate.max_bytes);
    let bytes = http_body_util::BodyExt::collect(limited)
        .await
        .map_err(|err| {
            if err.is::<http_body_util::LengthLimitError>() {
                ApiError::TooLarge(format!(
                    "the notebook is over {} MiB (notebook.import_mib)",
                    gate.max_bytes / (1024 * 1024)
                ))
            } else {
                ApiError::BadRequest(format!("the notebook did not arrive whole: {err}"))
            }
        })?
        .to_bytes();
    Ok(super::sessions::created(
        notebooks.import_notebook(owner, &bytes).await?.id(),
    ))
}

fn download(notebook: &serde_json::Value) -> Response {
    let title = notebook["metadata"]["runcell"]["title"]
        .as_str()
        .unwrap_or_default();
    let body = serde_json::to_string_pretty(notebook).unwrap_or_default();
    (
        [
            (header::CONTENT_TYPE, "application/x-ipynb+json".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}.ipynb\"", file_stem(title)),
            ),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        body,
    )
        .into_response()
}

/// A file name from a title: ASCII letters, digits and dashes, at most 60.
fn file_stem(title: &str) -> String {
    let mut stem = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            stem.push(c.to_ascii_lowercase());
        } else if !stem.ends_with('-') && !stem.is_empty() {
            stem.push('-');
        }
        if stem.len() >= 60 {
            break;
        }
    }
    let stem = stem.trim_end_matches('-');
    if stem.is_empty() {
        "runcell-session".into()
    } else {
        stem.into()
    }
}

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn a_title_becomes_a_plain_file_name() {
        assert_eq!(
            file_stem("Plot the primes below 1000!"),
            "plot-the-primes-below-1000"
        );
        assert_eq!(file_stem("\"; rm -rf / ; \u{202e}"), "rm-rf");
        assert_eq!(file_stem(""), "runcell-session");
        assert_eq!(file_stem("ünïcödé"), "n-c-d");
        assert!(file_stem(&"a".repeat(500)).len() <= 60);
    }
}
