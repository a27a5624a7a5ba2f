//! The admin page (`/admin`): every account with what it used, one
//! account's role, limits and status to change, and the audit log. Plain
//! server-rendered HTML and forms: it works without JavaScript, with a
//! keyboard and with a screen reader.

use std::sync::Arc;

use app::render::markdown::escape;
use axum::Form;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::ApiError;
use super::people::{Admin, duration, maybe_when, page, when};
use crate::accounts::{AccountError, Accounts};
use crate::http::state::AppState;
use runcell_agent::notebook::Notebooks;
use runcell_store::{LimitOverrides, Role, UserRecord};

/// Audit entries on one page of the log.
const AUDIT_PAGE: u32 = 50;

/// What the admin pages use.
#[derive(Clone)]
pub struct AdminState {
    accounts: Arc<Accounts>,
    notebooks: Arc<Notebooks>,
}

impl FromRef<AppState> for AdminState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            accounts: Arc::clone(&state.accounts),
            notebooks: Arc::clone(&state.notebooks),
        }
    }
}

fn failed(err: AccountError) -> Response {
    match err {
        AccountError::Store(err) => ApiError::from(err).into_response(),
        AccountError::NotFound => page(
            "No such account",
            "<p role=\"alert\">There is no such account. <a href=\"/admin\">All accounts</a></p>",
            StatusCode::NOT_FOUND,
        ),
        other => page(
            "Not done",
            &format!(
                "<p role=\"alert\">{}</p><p><a href=\"/admin\">All accounts</a></p>",
                escape(&other.to_string())
            ),
            StatusCode::BAD_REQUEST,
        ),
    }
}

#[derive(Debug, Deserialize)]
pub struct LogPage {
    before: Option<i64>,
}

/// `GET /admin`: the accounts and the newest audit entries.
pub async fn overview(
    State(state): State<AdminState>,
    Admin(_admin): Admin,
    Query(log): Query<LogPage>,
) -> Response {
    let users = match state.accounts.users().await {
        Ok(users) => users,
        Err(err) => return failed(err),
    };
    let mut rows = String::new();
    for user in &users {
        let notebooks = state
            .notebooks
            .list(user.owner)
            .await
            .map_or_else(|_| "?".to_string(), |list| list.len().to_string());
        let files = kept(&state, user).await;
        rows.push_str(&format!(
            "<tr><th scope=\"row\"><a href=\"/admin/users/{id}\">{name}</a></th><td>{email}</td><td>{role}</td><td>{status}</td><td>{seen}</td><td>{runs}</td><td>{today} today, {total} in all</td><td>{notebooks}</td><td>{files}</td></tr>\n",
            id = escape(&user.id),
            name = escape(user.display_name()),
            email = escape(&user.email),
            role = user.role,
            status = status(user),
            seen = maybe_when(user.last_seen_ms),
            runs = user.runs,
            today = duration(state.accounts.model_ms_today(user)),
            total = duration(user.model_ms),
        ));
    }
    let audit = match audit_table(&state.accounts, log.before).await {
        Ok(audit) => audit,
        Err(err) => return failed(err),
    };
    let body = format!(
        r#"<section aria-labelledby="people-heading">
<h2 id="people-heading">People</h2>
<div class="people-scroll" tabindex="0" role="region" aria-labelledby="people-heading">
<table class="people-table">
<caption>Everyone who has signed in ({count}), oldest first</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Status</th><th scope="col">Last seen</th><th scope="col">Turns</th><th scope="col">Model time</th><th scope="col">Notebooks</th><th scope="col">Files</th></tr></thead>
<tbody>
{rows}</tbody>
</table>
</div>
</section>
{audit}"#,
        count = users.len(),
    );
    page("Admin", &body, StatusCode::OK)
}

/// The files a person's notebooks keep, as people read sizes.
async fn kept(state: &AdminState, user: &UserRecord) -> String {
    state
        .notebooks
        .kept_bytes_of(user.owner)
        .await
        .map_or_else(|_| "?".to_string(), mib)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn status(user: &UserRecord) -> String {
    match user.disabled_ms {
        Some(at) => format!("disabled since {}", when(at)),
        None => "active".into(),
    }
}

/// The audit log's page before `before`, with a link to older entries.
async fn audit_table(accounts: &Accounts, before: Option<i64>) -> Result<String, AccountError> {
    let entries = accounts.audit_log(before, AUDIT_PAGE).await?;
    let names: std::collections::HashMap<String, String> = accounts
        .users()
        .await?
        .into_iter()
        .map(|u| (u.id.clone(), u.display_name().to_string()))
        .collect();
    let who = |id: &Option<String>| match id {
        Some(id) => names.get(id).cloned().unwrap_or_else(|| id.clone()),
        None => "the server".into(),
    };
    let mut rows = String::new();
    for entry in &entries {
        rows.push_str(&format!(
            "<tr><td>{at}</td><td>{actor}</td><td>{action}</td><td>{detail}</td></tr>\n",
            at = when(entry.at_ms),
            actor = escape(&who(&entry.actor)),
            action = escape(&entry.action.replace('_', " ")),
            detail = escape(&entry.detail),
        ));
    }
    let older = match entries.last() {
        Some(last) if entries.len() == AUDIT_PAGE as usize => {
            format!(
                "<p><a href=\"/admin?before={}\">Older entries</a></p>",
                last.id
            )
        }
        _ => String::new(),
    };
    let empty = if entries.is_empty() {
        "<p>Nothing has been logged yet.</p>"
    } else {
        ""
    };
    Ok(format!(
        r#"<section aria-labelledby="audit-heading">
<h2 id="audit-heading">Audit log</h2>
{empty}<div class="people-scroll" tabindex="0" role="region" aria-labelledby="audit-heading">
<table class="people-table">
<caption>Sign-ins, key changes and admin actions, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Detail</th></tr></thead>
<tbody>
{rows}</tbody>
</table>
</div>
{older}
</section>"#
    ))
}

/// `GET /admin/users/{id}`: one account, with its forms.
pub async fn user_page(
    State(state): State<AdminState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Response {
    let user = match state.accounts.user(&id).await {
        Ok(user) => user,
        Err(err) => return failed(err),
    };
    let limits = state.accounts.limits_of(&user);
    let defaults = state.accounts.limits_of(&UserRecord {
        limits: LimitOverrides::default(),
        ..user.clone()
    });
    let field = |name: &str, label: &str, set: Option<u32>, default: u32, unit: &str| {
        format!(
            r#"<p><label for="{name}">{label}</label>
<input id="{name}" name="{name}" type="number" min="1" inputmode="numeric" value="{value}" aria-describedby="{name}-default">
<span id="{name}-default" class="people-hint">blank: the default, {default} {unit}</span></p>"#,
            value = set.map(|v| v.to_string()).unwrap_or_default(),
        )
    };
    let o = &user.limits;
    let own = admin.id == user.id;
    let (status_action, status_word) = if user.is_disabled() {
        ("false", "Enable this account")
    } else {
        ("true", "Disable this account")
    };
    let status_form = if own {
        "<p>You cannot disable your own account.</p>".to_string()
    } else {
        format!(
            r#"<form method="post" action="/admin/users/{id}/status">
<input type="hidden" name="disabled" value="{status_action}">
<p class="people-hint">Disabling signs them out everywhere within seconds: their pages, turns and kernels are closed, and their API keys revoked (with the MCP, Jupyter and E2B sessions the keys opened).</p>
<button type="submit">{status_word}</button>
</form>"#,
            id = escape(&user.id),
        )
    };
    let body = format!(
        r#"<dl class="people-facts">
<dt>Email</dt><dd>{email}</dd>
<dt>Signed in with</dt><dd>{issuer}</dd>
<dt>Status</dt><dd>{status}</dd>
<dt>First signed in</dt><dd>{created}</dd>
<dt>Last seen</dt><dd>{seen}</dd>
<dt>Turns</dt><dd>{runs}</dd>
<dt>Model time</dt><dd>{today} today (of {allowed}), {total} in all</dd>
<dt>Files</dt><dd>{files} (of {storage_mib} MiB)</dd>
</dl>
<section aria-labelledby="role-heading">
<h2 id="role-heading">Role</h2>
<form method="post" action="/admin/users/{id}/role">
<p><label for="role">Role</label>
<select id="role" name="role">
<option value="member"{member}>member</option>
<option value="admin"{admin_selected}>admin: sees and governs everyone</option>
</select>
<button type="submit">Change role</button></p>
</form>
</section>
<section aria-labelledby="limits-heading">
<h2 id="limits-heading">Limits</h2>
<form method="post" action="/admin/users/{id}/limits">
{kernels}
{sessions}
{turns}
{model}
{storage}
<button type="submit">Save limits</button>
</form>
</section>
<section aria-labelledby="status-heading">
<h2 id="status-heading">Status</h2>
{status_form}
</section>
<p><a href="/admin">All accounts and the audit log</a></p>"#,
        id = escape(&user.id),
        email = escape(&user.email),
        issuer = escape(&user.issuer),
        status = status(&user),
        created = when(user.created_ms),
        seen = maybe_when(user.last_seen_ms),
        runs = user.runs,
        today = duration(state.accounts.model_ms_today(&user)),
        allowed = duration(u64::from(limits.model_seconds_per_day) * 1000),
        total = duration(user.model_ms),
        files = kept(&state, &user).await,
        storage_mib = limits.storage_mib,
        member = if user.role == Role::Member {
            " selected"
        } else {
            ""
        },
        admin_selected = if user.role == Role::Admin {
            " selected"
        } else {
            ""
        },
        kernels = field(
            "live_kernels",
            "Live kernels at once",
            o.live_kernels,
            defaults.live_kernels,
            "kernels"
        ),
        sessions = field(
            "sessions",
            "Notebooks kept",
            o.sessions,
            defaults.sessions,
            "notebooks"
        ),
        turns = field(
            "runs_per_minute",
            "Turns a minute",
            o.runs_per_minute,
            defaults.runs_per_minute,
            "turns"
        ),
        model = field(
            "model_seconds_per_day",
            "Model seconds a day",
            o.model_seconds_per_day,
            defaults.model_seconds_per_day,
            "seconds"
        ),
        storage = field(
            "storage_mib",
            "Files kept (MiB)",
            o.storage_mib,
            defaults.storage_mib,
            "MiB"
        ),
    );
    page(user.display_name(), &body, StatusCode::OK)
}

#[derive(Debug, Deserialize)]
pub struct RoleForm {
    role: String,
}

/// `POST /admin/users/{id}/role`.
pub async fn set_role(
    State(state): State<AdminState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    Form(form): Form<RoleForm>,
) -> Response {
    let role = match form.role.parse::<Role>() {
        Ok(role) => role,
        Err(reason) => return failed(AccountError::Refused(reason)),
    };
    match state.accounts.set_role(&admin, &id, role).await {
        Ok(_) => back_to(&id),
        Err(err) => failed(err),
    }
}

/// The limits form: each field a whole number, or blank for the default.
#[derive(Debug, Deserialize)]
pub struct LimitsForm {
    live_kernels: Option<String>,
    sessions: Option<String>,
    runs_per_minute: Option<String>,
    model_seconds_per_day: Option<String>,
    storage_mib: Option<String>,
}

fn limit(name: &str, value: Option<&str>) -> Result<Option<u32>, AccountError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => match text.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(AccountError::Refused(format!(
                "{name} must be a whole number above 0, or blank for the default"
            ))),
        },
    }
}

impl LimitsForm {
    fn overrides(&self) -> Result<LimitOverrides, AccountError> {
        Ok(LimitOverrides {
            live_kernels: limit("Live kernels", self.live_kernels.as_deref())?,
            sessions: limit("Notebooks kept", self.sessions.as_deref())?,
            runs_per_minute: limit("Turns a minute", self.runs_per_minute.as_deref())?,
            model_seconds_per_day: limit(
                "Model seconds a day",
                self.model_seconds_per_day.as_deref(),
            )?,
            storage_mib: limit("Files kept", self.storage_mib.as_deref())?,
        })
    }
}

/// `POST /admin/users/{id}/limits`.
pub async fn set_limits(
    State(state): State<AdminState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    Form(form): Form<LimitsForm>,
) -> Response {
    let overrides = match form.overrides() {
        Ok(overrides) => overrides,
        Err(err) => return failed(err),
    };
    match state.accounts.set_limits(&admin, &id, &overrides).await {
        Ok(_) => back_to(&id),
        Err(err) => failed(err),
    }
}

#[derive(Debug, Deserialize)]
pub struct StatusForm {
    disabled: bool,
}

/// `POST /admin/users/{id}/status`: disables or enables the account.
pub async fn set_status(
    State(state): State<AdminState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    Form(form): Form<StatusForm>,
) -> Response {
    match state
        .accounts
        .set_disabled(&admin, &id, form.disabled)
        .await
    {
        Ok(_) => back_to(&id),
        Err(err) => failed(err),
    }
}

fn back_to(id: &str) -> Response {
    let id: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Redirect::to(&format!("/admin/users/{id}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_whole_numbers_or_blank() {
        let form = LimitsForm {
            live_kernels: Some(" 2 ".into()),
            sessions: Some(String::new()),
            runs_per_minute: None,
            model_seconds_per_day: Some("600".into()),
            storage_mib: None,
        };
        let overrides = form.overrides().expect("valid");
        assert_eq!(overrides.live_kernels, Some(2));
        assert_eq!(overrides.sessions, None);
        assert_eq!(overrides.model_seconds_per_day, Some(600));
        for bad in ["0", "-1", "1.5", "many", "99999999999"] {
            assert!(limit("x", Some(bad)).is_err(), "{bad}");
        }
    }
}
