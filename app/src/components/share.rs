//! Share controls: make, copy, update and revoke a session's share link.

use leptos::prelude::*;

use crate::components::copy_link;

/// Whether a link offers the session's files: off unless ticked.
#[component]
fn ShareFilesBox(checked: bool) -> impl IntoView {
    view! {
        <label class="share-files" title="Readers of the link can download the session's files as they are now">
            <input type="checkbox" name="files" value="on" checked=checked/>
            " with its files"
        </label>
    }
}

/// Share: make a read-only link (with the session's files, if ticked), copy
/// it, move it on, or revoke it.
#[component]
#[expect(
    clippy::needless_pass_by_value,
    reason = "props are owned: Leptos builds them for the component"
)]
pub fn ShareControls(
    session_id: String,
    share_path: Option<String>,
    share_files: bool,
) -> impl IntoView {
    let copied = RwSignal::new(false);
    match share_path {
        None => view! {
            <form class="share" method="post" action=format!("/sessions/{session_id}/share")>
                <ShareFilesBox checked=false/>
                <button type="submit">"Share"</button>
            </form>
        }
        .into_any(),
        Some(path) => {
            let copy_path = path.clone();
            let href = path.clone();
            view! {
                <div class="share shared-link" id="share">
                    <span>"Shared: "</span>
                    <a class="share-link" href=href target="_blank" rel="external">
                        {path}
                    </a>
                    <button
                        type="button"
                        class="js-only"
                        on:click=move |_| {
                            copy_link(&copy_path);
                            copied.set(true);
                        }
                    >
                        {move || if copied.get() { "Copied" } else { "Copy link" }}
                    </button>
                    <form method="post" action=format!("/sessions/{session_id}/share")>
                        <ShareFilesBox checked=share_files/>
                        <button type="submit" title="Include what happened since it was shared">
                            "Update link"
                        </button>
                    </form>
                    <form method="post" action=format!("/sessions/{session_id}/unshare")>
                        <button type="submit" class="danger">"Stop sharing"</button>
                    </form>
                </div>
            }
            .into_any()
        }
    }
}
