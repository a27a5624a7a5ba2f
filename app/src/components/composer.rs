//! The composer: where the person asks.

use leptos::prelude::*;

use crate::contexts::{ConnState, use_session};
use crate::notebook::Notebook;
use crate::protocol::{ClientMessage, validate_ask};

/// The message box. Enter sends; Shift+Enter starts a new line.
#[component]
pub fn Prompt() -> impl IntoView {
    let state = use_session();
    let draft = RwSignal::new(String::new());
    // After Stop (which hides itself), the keyboard lands in the message box.
    let message = NodeRef::<leptos::html::Textarea>::new();
    let connected = move || state.conn.get() == ConnState::Connected;
    let busy = move || state.notebook.with(Notebook::is_busy);
    let send = move |text: String| {
        let model = Some(state.model.get_untracked()).filter(|m| !m.is_empty());
        let backend = state.picked_backend();
        state.send_frame(ClientMessage::Ask {
            text,
            model,
            backend,
        })
    };
    let stop = move || {
        if !state.send_frame(ClientMessage::Stop) {
            state
                .problem
                .set(Some("Not stopped: the server is not connected.".into()));
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
        <form
            class="prompt"
            aria-label="Ask"
            on:submit=move |ev| {
                ev.prevent_default();
                submit();
            }
        >
            <p class="problem-line" role="alert">{move || state.problem.get()}</p>
            <div class="prompt-row">
                <textarea
                    name="message"
                    node_ref=message
                    aria-label="Message"
                    placeholder="Ask in plain language, e.g. plot the primes below 1000"
                    rows="2"
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                            ev.prevent_default();
                            submit();
                        }
                    }
                ></textarea>
                <button
                    type="button"
                    class="stop js-only"
                    hidden=move || !busy()
                    disabled=move || !connected()
                    on:click=move |_| stop()
                >
                    "Stop"
                </button>
                <button type="submit" class="primary" disabled=move || !connected()>
                    "Send"
                </button>
            </div>
        </form>
    }
}
