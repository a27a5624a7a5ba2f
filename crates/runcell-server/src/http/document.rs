//! The frame of the server's own pages, outside the app: the sign-in page
//! and its notices, the terminal's code, the account and admin pages.

use app::render::markdown::escape;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// One of the server's own pages (sign-in, notices, the terminal's code,
/// the account and admin pages), outside the app: the site's styles and
/// icon, `main` (already escaped HTML) in a `<main class="{class}">`, and
/// never cached.
pub fn server_page(title: &str, class: &str, main: &str, status: StatusCode) -> Response {
    let html = format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · runcell</title><link rel="stylesheet" href="/pkg/{css}.css"><link rel="icon" href="/favicon.svg" type="image/svg+xml"></head>
<body><main class="{class}">
{main}
</main></body></html>"#,
        title = escape(title),
        css = app::OUTPUT_NAME,
    );
    (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response()
}
