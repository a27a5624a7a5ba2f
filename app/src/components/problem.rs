//! A page whose data could not be loaded: what the error boundary around
//! each page body shows.

use leptos::prelude::*;

use crate::api::{LoadError, UNREACHABLE};
use crate::components::Header;

/// The page in place of one that could not be loaded: `heading`, then why
/// (`why`: [`problem_of`] an error boundary's errors, or a [`LoadError`]'s
/// sentence).
#[component]
pub fn LoadProblem(heading: &'static str, why: String) -> impl IntoView {
    view! {
        <div class="page">
            <Header/>
            <main class="problem" role="alert" id="main" tabindex="-1">
                <h1>{heading}</h1>
                <p>{why}</p>
                <p><a href="/" rel="external">"Start a new session"</a></p>
            </main>
        </div>
    }
}

/// What the page says of an error boundary's first error (a
/// [`LoadError`]'s sentence; anything else was not the server's answer).
pub fn problem_of(errors: &ArcRwSignal<Errors>) -> String {
    errors
        .with_untracked(|errors| errors.iter().next().map(|(_, error)| problem_text(error)))
        .unwrap_or_default()
}

/// What the page says about `error`.
fn problem_text(error: &Error) -> String {
    match error.downcast_ref::<LoadError>() {
        Some(err) => err.to_string(),
        None => UNREACHABLE.to_string(),
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    /// What the page shows when a page body fails with `error`.
    fn page_for(error: impl Into<Error>) -> String {
        let error: Error = error.into();
        Owner::new().with(|| {
            view! {
                <ErrorBoundary fallback=|errors| {
                        view! { <LoadProblem heading="This link does not work" why=problem_of(&errors)/> }
                }>{Err::<(), Error>(error.clone())}</ErrorBoundary>
            }
            .to_html()
        })
    }

    #[test]
    fn the_boundary_shows_a_load_error_as_the_server_said_it() {
        let html = page_for(LoadError::LinkNotFound);
        assert!(
            html.contains(r#"<main role="alert" id="main" tabindex="-1" class="problem">"#),
            "{html}"
        );
        assert!(html.contains("This link does not work"), "{html}");
        assert!(
            html.contains("this link does not exist or was revoked"),
            "{html}"
        );
        assert!(html.contains("Start a new session"), "{html}");
    }

    #[test]
    fn any_other_error_says_the_server_was_not_reached() {
        let html = page_for(std::io::Error::other("connection reset"));
        assert!(html.contains(UNREACHABLE), "{html}");
        assert!(!html.contains("connection reset"), "{html}");
    }
}
