//! A person's own page (`/account`): who they are signed in as, their
//! limits and what they used today, and their API keys (for `/v1`, MCP,
//! Jupyter, E2B and `runcell chat --key`): made here, shown once, revoked
//! here. Each change is written to the audit log.

use std::sync::Arc;

use app::render::markdown::escape;
use axum::Form;
use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::ApiError;
use super::people::{Person, duration, maybe_when, page, when};
use crate::accounts::{AccountError, Accounts};
use crate::auth::{Auth, AuthError};
use crate::http::state::AppState;
use runcell_store::UserRecord;

/// What the account page uses.
#[derive(Clone)]
pub struct AccountState {
    accounts: Arc<Accounts>,
    auth: Arc<Auth>,
}

impl FromRef<AppState> for AccountState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            accounts: Arc::clone(&state.accounts),
            auth: Arc::clone(&state.auth),
        }
    }
}

fn failed(err: AuthError) -> Response {
    match err {
        AuthError::Store(err) => ApiError::from(err).into_response(),
        other => page(
            "Not done",
            &format!(
                "<p role=\"alert\">{}</p><p><a href=\"/account\">Your account</a></p>",
                escape(&other.to_string())
            ),
            StatusCode::BAD_REQUEST,
        ),
    }
}

/// Revoked keys the account page lists, the latest.
const REVOKED_SHOWN: usize = 20;

/// `GET /account`.
pub async fn overview(State(state): State<AccountState>, Person(me): Person) -> Response {
    account_page(&state, &me, None).await
}

/// A name the form sent that was refused, and why: shown at the form.
struct Refused<'a> {
    name: &'a str,
    why: String,
}

/// The account page; with the form's refused name and the reason beside
/// the field when `refused` (status 400).
async fn account_page(
    state: &AccountState,
    me: &UserRecord,
    refused: Option<Refused<'_>>,
) -> Response {
    let keys = match state.auth.keys_of(&me.id).await {
        Ok(keys) => keys,
        Err(err) => return failed(err),
    };
    let limits = state.accounts.limits_of(me);
    // Live keys all (a few: `auth.keys_per_person`), revoked ones only the
    // latest: the page stays small however many keys were ever made.
    let revoked = keys.iter().filter(|key| !key.is_live()).count();
    let hidden = revoked.saturating_sub(REVOKED_SHOWN);
    let mut skipped = 0;
    let shown = keys.iter().filter(|key| {
        let older_revoked = !key.is_live() && skipped < hidden;
        if older_revoked {
            skipped += 1;
        }
        !older_revoked
    });
    let mut rows = String::new();
    for key in shown {
        let status = match key.revoked_ms {
            Some(at) => format!("revoked {}", when(at)),
            None => format!(
                r#"live <form method="post" action="/account/keys/{id}/revoke" class="people-inline"><button type="submit" aria-label="Revoke the key {name}">Revoke</button></form>"#,
                id = escape(&key.id),
                name = escape(&key.name),
            ),
        };
        rows.push_str(&format!(
            "<tr><th scope=\"row\">{name}</th><td><code>{prefix}…</code></td><td>{created}</td><td>{used}</td><td>{status}</td></tr>\n",
            name = escape(&key.name),
            prefix = escape(&key.prefix),
            created = when(key.created_ms),
            used = maybe_when(key.last_used_ms),
        ));
    }
    let table = if keys.is_empty() {
        "<p>You have no API keys yet.</p>".to_string()
    } else {
        format!(
            r#"<div class="people-scroll" tabindex="0" role="region" aria-labelledby="keys-heading">
<table class="people-table">
<caption>Your API keys, oldest first{older}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Begins</th><th scope="col">Made</th><th scope="col">Last used</th><th scope="col">Status</th></tr></thead>
<tbody>
{rows}</tbody>
</table>
</div>"#,
            older = if hidden > 0 {
                format!(" ({hidden} older revoked keys not shown)")
            } else {
                String::new()
            }
        )
    };
    let body = format!(
        r#"<dl class="people-facts">
<dt>Name</dt><dd>{name}</dd>
<dt>Email</dt><dd>{email}</dd>
<dt>Role</dt><dd>{role}</dd>
<dt>Model time today</dt><dd>{today} of {allowed}</dd>
<dt>Turns a minute</dt><dd>up to {turns}</dd>
<dt>Live kernels</dt><dd>up to {kernels}</dd>
<dt>Notebooks kept</dt><dd>up to {sessions}</dd>
</dl>
<section aria-labelledby="keys-heading">
<h2 id="keys-heading">API keys</h2>
<p>A key lets a program use runcell as you: the <code>/v1</code> API, MCP, Jupyter, E2B's SDK, or <code>runcell chat --url … --key …</code>. It stops working when you revoke it, or if your account is disabled.</p>
{table}
{form}
</section>"#,
        name = escape(me.display_name()),
        email = escape(&me.email),
        role = me.role,
        today = duration(state.accounts.model_ms_today(me)),
        allowed = duration(u64::from(limits.model_seconds_per_day) * 1000),
        turns = limits.runs_per_minute,
        kernels = limits.live_kernels,
        sessions = limits.sessions,
        form = key_form(refused.as_ref()),
    );
    let status = if refused.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    page("Your account", &body, status)
}

/// What a key's name may hold, as the form says it: the browser shows it
/// under its own "match the requested format", the hint beside the field.
const NAME_RULE: &str = "letters, digits, spaces, . _ and - only, up to 64";

/// The form that makes a key; a refused name is kept in the field, which
/// is marked invalid and described by the reason.
fn key_form(refused: Option<&Refused<'_>>) -> String {
    let (value, invalid, error) = match refused {
        Some(refused) => (
            format!(" value=\"{}\"", escape(refused.name)),
            " aria-invalid=\"true\"",
            format!(
                "\n<span id=\"key-name-error\" class=\"account-error\" role=\"alert\">Not made: {}</span>",
                escape(&refused.why)
            ),
        ),
        None => (String::new(), "", String::new()),
    };
    let described = if refused.is_some() {
        "key-name-error key-name-hint"
    } else {
        "key-name-hint"
    };
    // Browsers read `pattern` with the `v` flag, where a `-` in a class must
    // be escaped: unescaped, the pattern is an error and checks nothing.
    format!(
        r#"<form method="post" action="/account/keys" class="people-form">
<p><label for="key-name">Name of a new key</label>
<input id="key-name" name="name" required maxlength="64" pattern="[A-Za-z0-9._\- ]+" title="{NAME_RULE}" aria-describedby="{described}"{invalid}{value}>{error}
<span id="key-name-hint" class="people-hint">{NAME_RULE}; e.g. <code>work laptop</code></span></p>
<button type="submit">Make a key</button>
</form>"#
    )
}

#[derive(Debug, Deserialize)]
pub struct NewKey {
    name: String,
}

/// `POST /account/keys`: makes a key and shows it, once.
pub async fn create(
    State(state): State<AccountState>,
    Person(me): Person,
    Form(form): Form<NewKey>,
) -> Response {
    let name = form.name.trim();
    match state.accounts.make_key(&me, name).await {
        Ok((key, record)) => new_key_page(&record.name, key.as_str()),
        Err(AccountError::Key(AuthError::BadName(why))) => {
            account_page(&state, &me, Some(Refused { name, why })).await
        }
        Err(AccountError::KeyRefused(refusal)) => {
            let mut response = page(
                "No new key",
                &format!(
                    "<p role=\"alert\">{}</p><p><a href=\"/account\">Your account</a></p>",
                    escape(&refusal.to_string())
                ),
                StatusCode::TOO_MANY_REQUESTS,
            );
            let wait = refusal.retry_after_secs();
            if wait > 0
                && let Ok(value) = axum::http::HeaderValue::from_str(&wait.to_string())
            {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, value);
            }
            response
        }
        Err(AccountError::Key(err)) => failed(err),
        Err(AccountError::Store(err)) => ApiError::from(err).into_response(),
        Err(other) => page(
            "Not done",
            &format!("<p role=\"alert\">{}</p>", escape(&other.to_string())),
            StatusCode::BAD_REQUEST,
        ),
    }
}

/// The script of the new key's Copy button (`public/account-key.js`).
const COPY_SCRIPT: &str = "/account-key.js";

/// The new key's page, its one script allowed by its own policy: the
/// default's, with scripts of this site (none inline).
const NEW_KEY_POLICY: &str = "script-src 'self'; frame-ancestors 'none'; base-uri 'self'; \
     object-src 'none'; form-action 'self'";

/// The page that shows a new key `key` named `name`, once: the key as text
/// to select, and a Copy button (shown by its script) that says what it
/// did at the start of the page's live region.
fn new_key_page(name: &str, key: &str) -> Response {
    let body = format!(
        r#"<p>Your new key <strong>{name}</strong>:</p>
<pre class="people-key" id="new-key"><code>{key}</code></pre>
<p><button type="button" data-copies="new-key" data-says="copy-said" hidden>Copy the key</button></p>
<p role="status"><strong id="copy-said"></strong>Copy it now: it is shown this once and never again (runcell keeps only its digest).</p>
<p><a href="/account">Back to your account</a></p>
<script src="{COPY_SCRIPT}" defer></script>"#,
        name = escape(name),
        key = escape(key),
    );
    let mut response = page("New API key", &body, StatusCode::OK);
    response.headers_mut().insert(
        axum::http::header::CONTENT_SECURITY_POLICY,
        axum::http::HeaderValue::from_static(NEW_KEY_POLICY),
    );
    response
}

/// `POST /account/keys/{id}/revoke`.
pub async fn revoke(
    State(state): State<AccountState>,
    Person(me): Person,
    Path(id): Path<String>,
) -> Response {
    match state.auth.revoke_key_of(&me.id, &id).await {
        Ok(true) => {
            state
                .accounts
                .note(
                    Some(&me.id),
                    "key_revoked",
                    Some(&id),
                    format!("{} revoked one of their API keys", me.display_name()),
                )
                .await;
            Redirect::to("/account").into_response()
        }
        Ok(false) => page(
            "No such key",
            "<p role=\"alert\">You have no live key of that id. <a href=\"/account\">Your account</a></p>",
            StatusCode::NOT_FOUND,
        ),
        Err(err) => failed(err),
    }
}
