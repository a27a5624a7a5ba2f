//! The composer: where the person asks.

use leptos::prelude::*;

use crate::contexts::session::MESSAGE_ID;
use crate::contexts::{ConnState, use_session};
use crate::notebook::Notebook;
use crate::protocol::{ClientMessage, validate_ask};

/// The message box. Enter sends; Shift+Enter starts a new line.
#[component]
pub fn Prompt() -> impl IntoView {
    let state = use_session();
    // What was typed before the page came to life is kept.
    let draft = RwSignal::new(typed_before_hydration());
    // Messages sent while a turn runs wait here, in order, each with a way
    // to take it back; the first leaves when the turn ends.
    let queued = RwSignal::new(Vec::<Queued>::new());
    let next_id = StoredValue::new(0u32);
    // After Stop (which hides itself), the keyboard lands in the message box.
    let message = NodeRef::<leptos::html::Textarea>::new();
    let stop_button = NodeRef::<leptos::html::Button>::new();
    let connected = move || state.conn.get() == ConnState::Connected;
    let busy = move || state.notebook.with(Notebook::is_busy);
    let send = move |text: String| {
        state.send_frame(ClientMessage::Ask {
            text,
            model: state.picked_model(),
            backend: state.picked_backend(),
            alternative_to: None,
        })
    };
    let stop = move || {
        if !state.send_frame(ClientMessage::Stop) {
            state
                .problem
                .set(Some("Not stopped: the server is not connected.".into()));
        }
        // Stop means stop: the messages queued behind the turn are taken
        // back into the box (before what is typed there), not sent.
        let taken: Vec<String> =
            queued.with_untracked(|q| q.iter().map(|m| m.text.clone()).collect());
        if !taken.is_empty() {
            queued.set(Vec::new());
            draft.update(|d| {
                let mut texts = taken;
                if !d.trim().is_empty() {
                    texts.push(std::mem::take(d));
                }
                *d = texts.join("\n\n");
            });
        }
        if let Some(message) = message.get_untracked() {
            let _ = message.focus();
        }
    };

    // A session with a question (one opened from the home page's form, its
    // first turn running, or one with answers) starts with the keyboard in
    // the message box: Stop is the next Tab stop while a turn runs, and
    // Escape in the box stops too. An empty session starts at the top (its
    // first Tab stop is the skip link). Only when nothing else has the
    // focus, and not on a touch screen (focus there opens the on-screen
    // keyboard over the answer).
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(message) = message.get()
            && state
                .notebook
                .with_untracked(|n| n.first_question().is_some())
        {
            focus_first(&message, None);
        }
    });

    // A turn that ends while Stop has the keyboard hides Stop: the keyboard
    // goes to the message box, not back to the page's start.
    Effect::new(move |was_busy: Option<bool>| {
        let now = busy();
        #[cfg(feature = "hydrate")]
        if was_busy == Some(true)
            && !now
            && let (Some(message), Some(stop)) =
                (message.get_untracked(), stop_button.get_untracked())
        {
            focus_first(&message, Some(&stop));
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = was_busy;
        now
    });

    // When a turn ends (and the page is connected), the first message
    // queued leaves; if it cannot, it stays first.
    Effect::new(move |was_ready: Option<bool>| {
        let ready = !busy() && connected();
        if ready && was_ready == Some(false) {
            let first = queued.with_untracked(|q| q.first().cloned());
            if let Some(first) = first {
                queued.update(|q| {
                    q.remove(0);
                });
                if !send(first.text.clone()) {
                    queued.update(|q| q.insert(0, first));
                }
            }
        }
        ready
    });
    let cancel = move |id: u32| {
        let text = queued.with_untracked(|q| q.iter().find(|m| m.id == id).map(|m| m.text.clone()));
        queued.update(|q| q.retain(|m| m.id != id));
        // Taken back, not lost: into the box, if the box is empty.
        if let Some(text) = text
            && draft.with_untracked(String::is_empty)
        {
            draft.set(text);
        }
        if let Some(message) = message.get_untracked() {
            let _ = message.focus();
        }
    };

    // Returns whether the message left; the draft is kept whenever it did not.
    let submit = move || {
        let text = draft.get_untracked();
        if let Err(err) = validate_ask(&text) {
            state.problem.set(Some(format!("Not sent: {err}.")));
            return;
        }
        // Sending brings the conversation's end (where the question goes)
        // into view and follows it from there.
        #[cfg(feature = "hydrate")]
        crate::browser::scroll::jump_to_latest(state);
        if busy() || !queued.with_untracked(Vec::is_empty) {
            let id = next_id.get_value();
            next_id.set_value(id + 1);
            queued.update(|q| q.push(Queued { id, text }));
            draft.set(String::new());
            state.problem.set(None);
            return;
        }
        if send(text) {
            draft.set(String::new());
            state.problem.set(None);
        } else {
            state
                .problem
                .set(Some("Not sent: the server is not connected.".into()));
        }
    };

    view! {
        // Without scripts the form posts the question, and the page
        // reloads itself while the turn runs (see `NoScriptRefresh`).
        <form
            class="prompt"
            aria-label="Ask"
            method="post"
            action=format!("/sessions/{}/ask", state.session_id.get_value())
            on:submit=move |ev| {
                ev.prevent_default();
                submit();
            }
        >
            // Shown while the reader looks above the latest output; it
            // counts only cells that arrived since.
            // On a phone it is a round "↓" with the count on it, over the
            // corner above the band: the band does not grow while it shows.
            <button
                type="button"
                class="jump-latest js-only"
                hidden=move || state.following.get()
                data-count=move || state.unseen.get()
                on:click=move |_| {
                    #[cfg(feature = "hydrate")]
                    crate::browser::scroll::jump_to_latest(state);
                }
            >
                <span aria-hidden="true">"↓ "</span>
                <span class="jump-words">
                    {move || match state.unseen.get() {
                        0 => "Jump to latest".to_string(),
                        1 => "Jump to latest (1 new cell)".to_string(),
                        n => format!("Jump to latest ({n} new cells)"),
                    }}
                </span>
            </button>
            <p class="problem-line" role="alert">{move || state.problem.get()}</p>
            <Show when=move || !queued.with(Vec::is_empty)>
                <ul class="queued" aria-label="Queued messages">
                    <For each=move || queued.get() key=|m| m.id let:queued_message>
                        <li>
                            <span class="queued-label">"Queued, sent when this turn ends:"</span>
                            <span class="queued-text">{queued_message.text.clone()}</span>
                            <button
                                type="button"
                                aria-label=format!("Cancel queued message: {}", queued_message.text)
                                on:click=move |_| cancel(queued_message.id)
                            >
                                "Cancel"
                            </button>
                        </li>
                    </For>
                </ul>
            </Show>
            <div class="prompt-row">
                <textarea
                    name="message"
                    id=MESSAGE_ID
                    node_ref=message
                    aria-label="Message"
                    aria-keyshortcuts="Enter Escape"
                    placeholder="Ask in plain language, e.g. plot the primes below 1000"
                    rows="2"
                    prop:value=move || draft.get()
                    on:input=move |ev| {
                        let was_empty = draft.with_untracked(|d| d.trim().is_empty());
                        draft.set(event_target_value(&ev));
                        // A question begun: the server may read the
                        // conversation ahead while it is written.
                        if was_empty && !draft.with_untracked(|d| d.trim().is_empty()) {
                            state.send_frame(ClientMessage::Composing {
                                model: state.picked_model(),
                            });
                        }
                    }
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                            ev.prevent_default();
                            submit();
                        } else if ev.key() == "Escape" && busy() {
                            ev.prevent_default();
                            stop();
                        }
                    }
                ></textarea>
                <button
                    type="button"
                    node_ref=stop_button
                    class="stop js-only"
                    title="Stop this turn (Escape in the message box)"
                    aria-keyshortcuts="Escape"
                    hidden=move || !busy()
                    disabled=move || !connected()
                    on:click=move |_| stop()
                >
                    "Stop"
                </button>
                // Disabled only on a live page that lost its link (a page
                // without scripts posts the form instead).
                <button
                    type="submit"
                    class="primary"
                    disabled=move || state.send.with_value(Option::is_some) && !connected()
                >
                    "Send"
                </button>
            </div>
        </form>
    }
}

/// A message that waits for the turn to end.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Queued {
    id: u32,
    text: String,
}

/// What the person typed in the message box before the page was hydrated
/// (the server-rendered box takes keys from the first paint).
fn typed_before_hydration() -> String {
    #[cfg(feature = "hydrate")]
    {
        crate::browser::typed_message()
    }
    #[cfg(not(feature = "hydrate"))]
    String::new()
}

/// Focuses the message box, unless something else has the focus already
/// (but `giving_way`, about to hide: Stop as a turn ends) or the screen is a
/// touch screen.
#[cfg(feature = "hydrate")]
fn focus_first(
    message: &web_sys::HtmlTextAreaElement,
    giving_way: Option<&web_sys::HtmlButtonElement>,
) {
    let giving_way = giving_way.map(|e| -> &web_sys::Element { e });
    let elsewhere = document().active_element().is_some_and(|active| {
        active.tag_name() != "BODY" && giving_way.is_none_or(|e| &active != e)
    });
    let touch = window().navigator().max_touch_points() > 0;
    if !elsewhere && !touch {
        let _ = message.focus();
    }
}
