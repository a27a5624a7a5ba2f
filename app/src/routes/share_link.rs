//! `/s/{token}`: a session seen through its share link, read-only.

use leptos::prelude::*;

use crate::api::{ShareLinkLog, display_title};
use crate::components::{Cells, Header, PageTitle, ShareLinkFiles};
use crate::contexts::{SessionState, ShareLinkOffer, provide_session, provide_share_link_offer};

/// `/s/{token}`: a shared session, read-only.
#[cfg(any(feature = "ssr", not(feature = "hydrate")))]
#[component]
pub fn ShareLinkPage() -> impl IntoView {
    use crate::api::load_share_link;
    use crate::components::{LoadProblem, problem_of};
    use leptos_router::hooks::use_params_map;

    let params = use_params_map();
    let token = move || params.read().get("token").unwrap_or_default();
    let log = Resource::new(token, load_share_link);

    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the shared session…"</p> }>
            <ErrorBoundary fallback=|errors| {
                view! { <LoadProblem heading="This link does not work" why=problem_of(&errors)/> }
            }>
                {move || Suspend::new(async move {
                    log.await.map(|log| view! { <ShareLinkView log/> })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

/// The browser's side of `/s/{token}`: nothing. A share link's page loads
/// no bundle (see [`crate::hydrates`]), and every link to one leaves the
/// page (`rel="external"`), so the bundle carries none of its code.
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
#[component]
pub fn ShareLinkPage() -> impl IntoView {}

/// A shared session, read-only, with a way to fork it.
#[component]
pub fn ShareLinkView(log: ShareLinkLog) -> impl IntoView {
    let ShareLinkLog {
        token,
        title,
        events,
        files,
        cut,
    } = log;
    provide_session(SessionState::for_share_link(&events));
    provide_share_link_offer(ShareLinkOffer::new(&token, &files));
    let heading = display_title(&title).to_string();
    view! {
        <PageTitle text=format!("{heading} · shared · runcell")/>
        <div class="page shared">
            <Header/>
            <div class="column">
                <div class="session-bar">
                    <h1 class="session-title">{heading}</h1>
                    <a
                        class="button download-notebook"
                        href=format!("/s/{token}/notebook.ipynb")
                        download=""
                        rel="external"
                        title="Download this session as a Jupyter notebook"
                    >
                        "Download .ipynb"
                    </a>
                    <form class="fork" method="post" action=format!("/s/{token}/fork")>
                        <button type="submit" class="primary">"Fork"</button>
                    </form>
                </div>
                <p class="notice shared-notice">
                    "A shared session, read-only. Fork it to get your own copy to continue; "
                    "its code can be run again there with Re-run all."
                </p>
                <main class="notebook" id="main" tabindex="-1">
                    <Cells/>
                </main>
                {cut
                    .then(|| {
                        view! {
                            <p class="notice share-cut" role="note">
                                "This session is too long to show whole: the page ends here. "
                                <a
                                    href=format!("/s/{token}/notebook.ipynb")
                                    download=""
                                    rel="external"
                                >
                                    "Download all of it as a Jupyter notebook"
                                </a>
                                ", or fork it to open it in full."
                            </p>
                        }
                    })}
                {(!files.is_empty()).then(|| view! { <ShareLinkFiles files/> })}
            </div>
        </div>
    }
}
