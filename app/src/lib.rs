//! runcell's user interface (Leptos, rendered on the server and hydrated in the
//! browser) and the wire types server and browser both use.
//!
//! The wire comes from the `runcell-protocol` crate, re-exported here under
//! the names the components use:
//! - [`protocol`]: the WebSocket frames, one serde definition for both sides.
//! - [`reader`]: the page's reading of those frames, by hand (no serde code
//!   in the bundle).
//! - [`notebook`]: the pure fold from events to cells that both sides render.
//! - [`render`]: markdown and ANSI to safe HTML (and the page's dates).
//!
//! The page's own:
//! - [`api`]: server functions, the ports on the server they call (the
//!   server crate implements them), and the types they return.
//!
//! The page, by role (each depends only on those above it):
//! - [`contexts`]: the page's state and its `provide_*`/`use_*` functions.
//! - `browser` (hydrate only): socket, uploads, the page's Python, scrolling.
//! - [`components`]: the notebook's parts, taking state from context.
//! - [`routes`]: the page bodies (session, share link, not found).

#![recursion_limit = "256"]

pub mod api;
#[cfg(feature = "hydrate")]
mod browser;
pub mod components;
pub mod contexts;
pub mod render;
pub mod routes;

pub use runcell_protocol as protocol;
pub use runcell_protocol::{notebook, reader};

use leptos::prelude::*;
use leptos_meta::{Meta, MetaTags, Stylesheet, provide_meta_context};

/// The name of the browser bundle's files under `/pkg`.
pub const OUTPUT_NAME: &str = "runcell";

/// Where a page is read only: a share link's page, `/s/{token}`.
pub const SHARE_LINK_PREFIX: &str = "/s/";

/// Whether the page at `path` is brought to life in the browser. A share
/// link's page is read as the server renders it, the same with or without
/// JavaScript, so it loads no bundle at all.
pub fn hydrates(path: &str) -> bool {
    !path.starts_with(SHARE_LINK_PREFIX)
}

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    let parts = use_context::<http::request::Parts>();
    // Seen under load in CI: a page rendered with none of its request's
    // context (no path, no nonce), whose scripts the policy then refused.
    // Said in the log, to find where the context is lost.
    #[cfg(feature = "ssr")]
    if parts.is_none() {
        leptos::logging::warn!(
            "runcell: a page shell rendered without its request's context (no request parts; nonce {})",
            if use_nonce().is_some() {
                "present"
            } else {
                "missing"
            }
        );
    }
    #[cfg(feature = "ssr")]
    let live = parts.is_none_or(|parts| hydrates(parts.uri.path()));
    #[cfg(not(feature = "ssr"))]
    let live = true;
    // The one key that lets a script run on this page (the hydration
    // loader and the line below); what a title, a question or an output
    // might smuggle into the HTML has none, so it never runs.
    let nonce = use_nonce();
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.insert_header(
            http::header::CONTENT_SECURITY_POLICY,
            page_policy(nonce.as_deref()),
        );
    }
    view! {
        <!DOCTYPE html>
        <html lang="en" data-theme=components::current_theme().name()>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                // Marks pages where scripts run, so that CSS can hide what is
                // only for readers without JavaScript, with no flash.
                {live.then(|| view! { <script nonce=nonce inner_html=PAGE_GUARD></script> })}
                {live.then(|| view! { <HydrationScripts options/> })}
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The first script of a live page: marks it as one where scripts run (so
/// that CSS hides what is only for readers without JavaScript, with no
/// flash), and watches the bundle. Should the bundle fail to load, or panic
/// (a hydration mismatch, a bug), the page says so with a Reload button and
/// its connection dot says "page error": a dead page never looks alive. It
/// is plain JavaScript, so it works when the bundle never ran.
const PAGE_GUARD: &str = r#"(function(){var root=document.documentElement;root.classList.add('js');
function ours(x,file){if(typeof WebAssembly!=='undefined'&&(x instanceof WebAssembly.RuntimeError||x instanceof WebAssembly.CompileError||x instanceof WebAssembly.LinkError))return true;
var text=String(file||'')+' '+String(x&&x.stack||'')+' '+String(x);return text.indexOf('/pkg/')>=0;}
function show(){var conn=document.querySelector('.conn');if(conn){conn.setAttribute('data-state','failed');
var dot=conn.querySelector('.dot');while(conn.lastChild&&conn.lastChild!==dot)conn.removeChild(conn.lastChild);conn.appendChild(document.createTextNode('page error'));}
var note=document.createElement('div');note.className='page-failed';note.setAttribute('role','alert');
note.appendChild(document.createTextNode('This page stopped working: its script failed. Nothing is lost: the session is kept on the server. '));
var again=document.createElement('button');again.type='button';again.className='primary';again.textContent='Reload';again.onclick=function(){location.reload();};
note.appendChild(again);document.body.insertBefore(note,document.body.firstChild);}
function failed(){if(root.hasAttribute('data-page-failed'))return;root.setAttribute('data-page-failed','true');
if(document.body)show();else document.addEventListener('DOMContentLoaded',show);}
addEventListener('error',function(e){if(ours(e.error,e.filename))failed();});
addEventListener('unhandledrejection',function(e){if(ours(e.reason,''))failed();});})();"#;

/// The policy of every page this app renders: scripts run only with this
/// response's `nonce` (and what those load: the bundle, its wasm), so that no
/// text a stranger wrote into the page can run in this origin; without a
/// nonce no script runs at all. The rest is the policy every response gets.
#[cfg(feature = "ssr")]
pub fn page_policy(nonce: Option<&str>) -> http::HeaderValue {
    let scripts = match nonce {
        Some(nonce)
            if nonce
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            format!("'nonce-{nonce}' 'strict-dynamic' 'wasm-unsafe-eval'")
        }
        _ => "'none'".to_string(),
    };
    let policy = format!(
        "script-src {scripts}; object-src 'none'; base-uri 'self'; \
         frame-ancestors 'none'; form-action 'self'"
    );
    http::HeaderValue::from_str(&policy)
        .unwrap_or_else(|_| http::HeaderValue::from_static("script-src 'none'"))
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    components::provide_theme();
    view! {
        <Stylesheet id="leptos" href=format!("/pkg/{OUTPUT_NAME}.css")/>
        <components::PageTitle text="runcell".to_string()/>
        <Meta name="description" content="Ask in plain language; watch the code run."/>
        <Meta name="color-scheme" content="light dark"/>
        {pages()}
    }
}

/// The page for the request's path: leptos_router's routes, which also
/// give axum its list of page routes.
#[cfg(any(feature = "ssr", not(feature = "hydrate")))]
fn pages() -> impl IntoView {
    use leptos_router::{
        ParamSegment, SsrMode, StaticSegment,
        components::{Route, Router, Routes},
    };
    view! {
            <Router>
                <Routes fallback=routes::NotFound>
                    <Route path=StaticSegment("") view=routes::HomePage/>
                    // Async: the whole notebook is in the first response, so the page
                    // reads the same with JavaScript off.
                    <Route
                        path=(StaticSegment("sessions"), ParamSegment("id"))
                        view=routes::SessionPage
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=(StaticSegment("s"), ParamSegment("token"))
                        view=routes::ShareLinkPage
                        ssr=SsrMode::Async
                    />
                </Routes>
            </Router>
    }
}

/// The browser's side: the document's own page, picked by its path as the
/// server's routes picked it. Every link leaves the document
/// (`rel="external"`) and a path reached within it loads as a page of its
/// own (`browser::page_data`), so the bundle carries no router.
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
fn pages() -> impl IntoView {
    match routes::Route::of(&browser::page_data::document_path()) {
        routes::Route::Home => view! { <routes::HomePage/> }.into_any(),
        routes::Route::Session => view! { <routes::SessionPage/> }.into_any(),
        routes::Route::ShareLink | routes::Route::NotFound => {
            view! { <routes::NotFound/> }.into_any()
        }
    }
}

/// The browser's entry point, called by the `frontend` crate.
#[cfg(feature = "hydrate")]
pub fn hydrate() {
    browser::page_data::remember_document_path();
    browser::page_data::reload_on_history_moves();
    hydrate_body(App);
    // For tests and the page guard: the page came to life whole.
    if let Some(root) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.document_element())
    {
        let _ = root.set_attribute("data-hydrated", "true");
    }
}
