//! The theme switch: the system's theme, light or dark, kept in a cookie
//! (`runcell_theme`) that the server reads to render `<html data-theme>`,
//! so a page never flashes the other theme. Without scripts the switch is a
//! form (`POST /theme`, back to the page); with them it changes the page at
//! once and writes the same cookie.

use leptos::prelude::*;

/// The cookie that holds the theme.
pub const THEME_COOKIE: &str = "runcell_theme";

/// A theme a person can pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Theme {
    /// The system's (light or dark).
    Auto,
    Light,
    Dark,
}

impl Theme {
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "light" => Some(Self::Light),
            "dark" => Some(Self::Dark),
            _ => None,
        }
    }

    /// The one a click on the switch picks.
    fn next(self) -> Self {
        match self {
            Self::Auto => Self::Light,
            Self::Light => Self::Dark,
            Self::Dark => Self::Auto,
        }
    }

    /// The CSS `color-scheme` it stands for.
    pub fn color_scheme(self) -> &'static str {
        match self {
            Self::Auto => "light dark",
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Auto => "Theme: system",
            Self::Light => "Theme: light",
            Self::Dark => "Theme: dark",
        }
    }
}

/// The theme on show, shared by the switch and what follows it (HTML
/// outputs' frames): provided once by the app.
#[derive(Clone, Copy)]
struct ThemeChoice(RwSignal<Theme>);

/// Makes the theme the page was rendered in the page's theme signal.
pub fn provide_theme() {
    provide_context(ThemeChoice(RwSignal::new(current_theme())));
}

/// The theme on show (tracked); the rendered one where none was provided.
pub fn use_theme() -> RwSignal<Theme> {
    use_context::<ThemeChoice>()
        .map(|choice| choice.0)
        .unwrap_or_else(|| RwSignal::new(current_theme()))
}

/// The theme this request's page is rendered in (the server reads the
/// cookie; the page, what the server wrote on `<html>`).
pub fn current_theme() -> Theme {
    #[cfg(feature = "ssr")]
    {
        use_context::<http::request::Parts>()
            .and_then(|parts| theme_in(&parts.headers))
            .unwrap_or(Theme::Auto)
    }
    #[cfg(not(feature = "ssr"))]
    {
        #[cfg(feature = "hydrate")]
        {
            document()
                .document_element()
                .and_then(|root| root.get_attribute("data-theme"))
                .and_then(|name| Theme::parse(&name))
                .unwrap_or(Theme::Auto)
        }
        #[cfg(not(feature = "hydrate"))]
        Theme::Auto
    }
}

/// The theme a request's cookies name, if one does.
#[cfg(feature = "ssr")]
pub fn theme_in(headers: &http::HeaderMap) -> Option<Theme> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == THEME_COOKIE)
        .and_then(|(_, value)| Theme::parse(value.trim()))
}

/// The page's own path, where the form goes back to.
fn current_path() -> String {
    #[cfg(feature = "ssr")]
    {
        use_context::<http::request::Parts>()
            .map(|parts| parts.uri.path().to_string())
            .unwrap_or_else(|| "/".into())
    }
    #[cfg(not(feature = "ssr"))]
    {
        #[cfg(feature = "hydrate")]
        {
            window()
                .location()
                .pathname()
                .unwrap_or_else(|_| "/".into())
        }
        #[cfg(not(feature = "hydrate"))]
        "/".to_string()
    }
}

/// The switch, in the header.
#[component]
pub fn ThemeSwitch() -> impl IntoView {
    let theme = use_theme();
    let back = current_path();
    view! {
        <form
            method="post"
            action="/theme"
            class="theme-form"
            on:submit=move |ev| {
                ev.prevent_default();
                let picked = theme.get_untracked().next();
                theme.set(picked);
                #[cfg(feature = "hydrate")]
                apply(picked);
            }
        >
            <input type="hidden" name="back" value=back/>
            <button
                type="submit"
                name="theme"
                value=move || theme.get().next().name()
                class="theme-switch"
                title="Switch between the system's theme, light and dark"
            >
                {move || theme.get().label()}
            </button>
        </form>
    }
}

/// Shows `theme` at once and keeps it for the next pages.
#[cfg(feature = "hydrate")]
fn apply(theme: Theme) {
    use wasm_bindgen::JsCast;
    if let Some(root) = document().document_element() {
        let _ = root.set_attribute("data-theme", theme.name());
    }
    if let Ok(html) = document().dyn_into::<web_sys::HtmlDocument>() {
        let _ = html.set_cookie(&format!(
            "{THEME_COOKIE}={}; Path=/; Max-Age=34560000; SameSite=Lax",
            theme.name()
        ));
    }
}
