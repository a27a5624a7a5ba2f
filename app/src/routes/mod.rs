//! The pages, one file each: the route component loads the page's data
//! (a server function in `crate::api`), shows why when it
//! could not, and the page body provides the page's state
//! (`crate::contexts`) to the components under it.

mod not_found;
mod session;
mod share_link;

pub use not_found::NotFound;
pub use session::{SessionPage, SessionView};
pub use share_link::{ShareLinkPage, ShareLinkView};

use leptos::prelude::*;

use crate::components::Header;

/// The page in place of one that could not be loaded.
#[component]
fn Problem(heading: &'static str, err: ServerFnError) -> impl IntoView {
    view! {
        <div class="page">
            <Header/>
            <main class="problem" role="alert">
                <h1>{heading}</h1>
                <p>{problem_text(&err)}</p>
                <p><a href="/" rel="external">"Start a new session"</a></p>
            </main>
        </div>
    }
}

fn problem_text(err: &ServerFnError) -> String {
    match err {
        ServerFnError::ServerError(message) => message.clone(),
        _ => "The server could not be reached.".to_string(),
    }
}
