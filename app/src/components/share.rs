//! Share controls: make, copy, update and revoke a session's share link.
//! With scripts the page stays where it is: the new link appears in place
//! and takes focus; without them the forms post and the page comes back.

use leptos::prelude::*;

use crate::components::copy_link;
#[cfg(feature = "hydrate")]
use crate::contexts::use_session;

/// Whether a link offers the session's files: off unless ticked.
#[component]
fn ShareFilesBox(files: RwSignal<bool>) -> impl IntoView {
    view! {
        <label class="share-files" title="Readers of the link can download the session's files as they are now">
            <input
                type="checkbox"
                name="files"
                value="on"
                prop:checked=move || files.get()
                on:change=move |ev| files.set(event_target_checked(&ev))
            />
            " with its files"
        </label>
    }
}

/// Share: make a read-only link (with the session's files, if ticked), copy
/// it, move it on, or revoke it.
#[component]
pub fn ShareControls(
    session_id: String,
    share_path: Option<String>,
    share_files: bool,
) -> impl IntoView {
    #[cfg(feature = "hydrate")]
    let state = use_session();
    let link = RwSignal::new(share_path);
    // The box is ticked as the link was made; a new link starts unticked.
    let files = RwSignal::new(share_files && link.get_untracked().is_some());
    let copied = RwSignal::new(false);
    let busy = RwSignal::new(false);
    // Where the keyboard goes after a change: the new link, or Share.
    let link_ref = NodeRef::<leptos::html::A>::new();
    let share_ref = NodeRef::<leptos::html::Button>::new();
    let focus_after = RwSignal::new(false);
    Effect::new(move |_| {
        let shared = link.get().is_some();
        if !focus_after.get_untracked() {
            return;
        }
        let focused = if shared {
            link_ref.get().map(|a| a.focus())
        } else {
            share_ref.get().map(|b| b.focus())
        };
        if focused.is_some() {
            focus_after.set(false);
        }
    });
    let id = StoredValue::new(session_id);
    #[cfg(feature = "hydrate")]
    let failed = move |why: String| {
        busy.set(false);
        state.problem.set(Some(format!("Not shared: {why}.")));
    };
    let share = move |ev: leptos::ev::SubmitEvent| {
        #[cfg(feature = "hydrate")]
        {
            ev.prevent_default();
            busy.set(true);
            let sent = crate::browser::share::share(
                &id.get_value(),
                files.get_untracked(),
                move |answer| match answer {
                    Ok(path) => {
                        busy.set(false);
                        copied.set(false);
                        state.problem.set(None);
                        focus_after.set(true);
                        link.set(Some(path));
                    }
                    Err(why) => failed(why),
                },
            );
            if !sent {
                failed("the request could not be sent".into());
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    let unshare = move |ev: leptos::ev::SubmitEvent| {
        #[cfg(feature = "hydrate")]
        {
            ev.prevent_default();
            busy.set(true);
            let sent =
                crate::browser::share::unshare(&id.get_value(), move |answer| match answer {
                    Ok(()) => {
                        busy.set(false);
                        state.problem.set(None);
                        focus_after.set(true);
                        files.set(false);
                        link.set(None);
                    }
                    Err(why) => failed(why),
                });
            if !sent {
                failed("the request could not be sent".into());
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    let action = move || format!("/sessions/{}/share", id.get_value());
    let unshare_action = move || format!("/sessions/{}/unshare", id.get_value());

    move || match link.get() {
        None => view! {
            <form class="share" method="post" action=action on:submit=share>
                <ShareFilesBox files/>
                <button type="submit" node_ref=share_ref disabled=move || busy.get()>
                    "Share"
                </button>
            </form>
        }
        .into_any(),
        Some(path) => {
            let copy_path = path.clone();
            let href = path.clone();
            view! {
                <div class="share shared-link" id="share">
                    <span>"Shared: "</span>
                    <a
                        class="share-link"
                        href=href
                        target="_blank"
                        rel="external"
                        node_ref=link_ref
                    >
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
                    <form method="post" action=action on:submit=share>
                        <ShareFilesBox files/>
                        <button
                            type="submit"
                            title="Include what happened since it was shared"
                            disabled=move || busy.get()
                        >
                            "Update link"
                        </button>
                    </form>
                    <form method="post" action=unshare_action on:submit=unshare>
                        <button type="submit" class="danger" disabled=move || busy.get()>
                            "Stop sharing"
                        </button>
                    </form>
                </div>
            }
            .into_any()
        }
    }
}
