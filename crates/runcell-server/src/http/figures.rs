//! A figure's bytes, by the address its page names it with
//! (`notebook::figures`): the owner's `/sessions/{id}/figures/{seq}.png`
//! and a share link's `/s/{token}/figures/{seq}.png`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::owner::Owner;
use runcell_agent::notebook::{Notebooks, parse_figure_name, parse_link_token, parse_session_id};

/// `GET /sessions/{id}/figures/{seq}.png`: a figure of the caller's
/// session. What an event holds never changes, so it is kept for good (by
/// the caller's browser only).
pub async fn owned(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    Path((id, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let seq = figure_seq(&name)?;
    let png = notebooks.figure(owner, parse_session_id(&id)?, seq).await?;
    Ok(png_response(png, "private, max-age=31536000, immutable"))
}

/// `GET /s/{token}/figures/{seq}.png`: a figure a share link shows, asked
/// again each time (a revoked link shows nothing more).
pub async fn shared(
    State(notebooks): State<Arc<Notebooks>>,
    Path((token, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let seq = figure_seq(&name)?;
    let png = notebooks
        .shared_figure(&parse_link_token(&token)?, seq)
        .await?;
    Ok(png_response(png, "no-cache"))
}

fn figure_seq(name: &str) -> Result<u64, ApiError> {
    parse_figure_name(name).ok_or_else(|| ApiError::NotFound("no such figure".into()))
}

fn png_response(png: Vec<u8>, cache: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, cache),
        ],
        png,
    )
        .into_response()
}
