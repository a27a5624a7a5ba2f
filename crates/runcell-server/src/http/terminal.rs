//! A browser and a terminal as one owner (`notebook::handover`): the
//! page's "Use in a terminal" form, answered with the command to type, and
//! the terminal's join. Each parses, calls the notebook service and maps.

use std::sync::Arc;

use app::render::markdown::escape;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use super::cookies::set_cookie;
use super::document::server_page;
use super::extract::ApiJson;
use super::owner::{Owner, owner_cookie};
use super::request_origin::RequestOrigin;
use runcell_agent::notebook::{HANDOVER_TTL_MS, Notebooks};

/// `POST /terminal` (the sidebar's form): a page with the command that
/// makes a terminal this browser's owner.
pub async fn offer(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    origin: RequestOrigin,
) -> Response {
    let code = notebooks.offer_handover(owner);
    let command = format!("runcell chat --url {} --join {code}", origin.base_url());
    let main = format!(
        r#"<h1>Use these sessions in a terminal</h1>
<p>Type this in a terminal where runcell is installed:</p>
<pre><code>{command}</code></pre>
<p>The code works once, within {minutes} minutes. From then on the terminal and this browser are one owner: the terminal's sessions move here and show in this sidebar, and this browser's sessions can be followed up from the terminal (<code>--session ID</code>).</p>
<p><a href="/">Back to runcell</a></p>"#,
        command = escape(&command),
        minutes = HANDOVER_TTL_MS / 60_000,
    );
    server_page(
        "Use in a terminal",
        "signin terminal-offer",
        &main,
        StatusCode::OK,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    code: String,
}

/// `POST /api/owner/join {"code"}` → `{"owner", "moved"}`, and the owner
/// cookie: the caller is now the owner the code names, with its sessions.
pub async fn join(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    origin: RequestOrigin,
    ApiJson(body): ApiJson<JoinBody>,
) -> Result<Response, ApiError> {
    let joined = notebooks.join(owner, &body.code).await?;
    let mut response = Json(json!({
        "owner": joined.owner.to_string(),
        "moved": joined.moved,
    }))
    .into_response();
    set_cookie(
        &mut response,
        &owner_cookie(joined.owner, origin.cookies_secure()),
    );
    Ok(response)
}
