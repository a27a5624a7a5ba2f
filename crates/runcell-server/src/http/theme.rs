//! `POST /theme` (form): the theme switch without scripts. Sets the theme
//! cookie the pages are rendered by, then goes back to the page it was on.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use super::extract::ApiForm;
use app::components::{THEME_COOKIE, Theme};

#[derive(Debug, Deserialize)]
pub struct ThemeForm {
    theme: String,
    #[serde(default)]
    back: String,
}

/// How long a browser keeps the theme (400 days, the most browsers allow).
const MAX_AGE_SECS: u64 = 400 * 24 * 60 * 60;

pub async fn set(ApiForm(form): ApiForm<ThemeForm>) -> Result<Response, ApiError> {
    let theme = Theme::parse(&form.theme)
        .ok_or_else(|| ApiError::BadRequest("the theme is `auto`, `light` or `dark`".into()))?;
    // Only a path of this site: never another site's address.
    let back = Some(form.back.as_str())
        .filter(|b| b.starts_with('/') && !b.starts_with("//") && !b.contains('\\'))
        .unwrap_or("/");
    let cookie = format!(
        "{THEME_COOKIE}={}; Path=/; Max-Age={MAX_AGE_SECS}; SameSite=Lax",
        theme.name()
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(back).unwrap_or(HeaderValue::from_static("/")),
    );
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}
