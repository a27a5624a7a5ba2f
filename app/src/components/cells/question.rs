//! Under a question: its versions (← 2/3 →), Edit and Regenerate, and
//! what its kernel needed first. An edited question or a regenerated
//! answer is a new turn beside the old one, which stays reachable: the
//! notebook shows one branch, the server keeps them all.

use leptos::prelude::*;

use crate::contexts::use_session;
use crate::notebook::{Cell, Notebook, Restored, Versions};
use crate::protocol::{ClientMessage, TurnId, TurnKind};
use crate::render::markdown;

/// The versions switcher, the question's actions and its kernel note.
/// The switcher and the actions are markup ([`tools_html`]) that follows
/// the notebook, and the editor is markup of its own that follows only
/// whether it is open (so a turn finishing elsewhere never takes an open
/// editor); their clicks and keys are read here by what the markup names
/// (`data-act`).
#[component]
pub fn QuestionTools(cell: Memo<Option<Cell>>) -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let turn = cell.with_untracked(|c| c.as_ref().and_then(|c| c.turn));
    let Some(turn) = turn else {
        return ().into_any();
    };
    let restored =
        Memo::new(move |_| notebook.with(|n| n.turn(turn).and_then(|t| t.restored.clone())));
    let editing = RwSignal::new(false);
    let tools = NodeRef::<leptos::html::Div>::new();
    let slot = NodeRef::<leptos::html::Div>::new();
    let markup = Memo::new(move |_| {
        // Only a finished question can be edited or asked again, and only
        // while nothing runs (a new version would wait behind the running
        // turn).
        let finished = notebook.with(|n| {
            n.turn(turn)
                .is_some_and(|t| t.kind == TurnKind::Ask && t.status.is_some())
        });
        let tools = Tools {
            versions: notebook.with(|n| n.versions(turn)),
            finished,
            busy: notebook.with(Notebook::is_busy),
            editing: editing.get(),
            read_only: state.read_only,
        };
        tools_html(&tools)
    });
    let editor = move || {
        if editing.get() {
            editor_html(&untrack(|| super::text_of(cell)))
        } else {
            String::new()
        }
    };
    // The editor takes the keyboard as it opens; Cancel and Escape give it
    // back to Edit. Both once the markup has followed (the next frame).
    let focus_later = move |node: NodeRef<leptos::html::Div>, selector: &'static str| {
        #[cfg(feature = "hydrate")]
        request_animation_frame(move || {
            use wasm_bindgen::JsCast;
            if let Some(element) = node
                .get_untracked()
                .and_then(|n| n.query_selector(selector).ok().flatten())
                .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
            {
                let _ = element.focus();
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (node, selector);
    };
    let open = move || {
        editing.set(true);
        focus_later(slot, "textarea");
    };
    let close = move || {
        editing.set(false);
        focus_later(tools, "button[data-act=edit]");
    };
    let ask_again = move |text: String| {
        if text.trim().is_empty() {
            return;
        }
        let message = ClientMessage::Ask {
            text,
            model: state.picked_model(),
            backend: state.picked_backend(),
            alternative_to: Some(turn),
        };
        if state.send_frame(message) {
            editing.set(false);
            state.problem.set(None);
        } else {
            state
                .problem
                .set(Some("Not sent: the server is not connected.".into()));
        }
    };
    let select = move |to: Option<TurnId>| {
        if let Some(to) = to
            && !state.send_frame(ClientMessage::SelectBranch { turn: to })
        {
            state
                .problem
                .set(Some("Not switched: the server is not connected.".into()));
        }
    };
    let draft = move || {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            slot.get_untracked()
                .and_then(|s| s.query_selector("textarea").ok().flatten())
                .and_then(|t| t.dyn_into::<web_sys::HtmlTextAreaElement>().ok())
                .map(|t| t.value())
                .unwrap_or_default()
        }
        #[cfg(not(feature = "hydrate"))]
        String::new()
    };
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some((act, turn)) = acted(&ev) else {
            return;
        };
        match act.as_str() {
            "select" => select(turn.and_then(|t| t.parse::<u64>().ok()).map(TurnId)),
            "edit" => open(),
            "regenerate" => ask_again(super::text_of(cell)),
            "send" => ask_again(draft()),
            "cancel" => close(),
            _ => {}
        }
    };
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        if ev.key() == "Enter" && !ev.shift_key() {
            ev.prevent_default();
            ask_again(draft());
        } else if ev.key() == "Escape" {
            ev.prevent_default();
            close();
        }
    };
    let on_input = move |_: leptos::ev::Event| {
        // The box grows with the question, from 2 to 12 rows.
        #[cfg(feature = "hydrate")]
        {
            let rows = editor_rows(&draft());
            if let Some(textarea) = slot
                .get_untracked()
                .and_then(|s| s.query_selector("textarea").ok().flatten())
            {
                let _ = textarea.set_attribute("rows", &rows.to_string());
            }
        }
    };

    view! {
        <div class="question-editor-slot" node_ref=slot inner_html=editor on:keydown=on_keydown on:input=on_input></div>
        <div class="question-tools" node_ref=tools inner_html=markup on:click=on_click></div>
        <div class="restored-slot" inner_html=move || restored.with(|r| r.as_ref().map(restored_html).unwrap_or_default())></div>
    }
    .into_any()
}

/// The act a click in the tools asked for (`data-act`), with its button's
/// `data-turn`, if it was on a button that names one.
fn acted(ev: &leptos::ev::MouseEvent) -> Option<(String, Option<String>)> {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let button = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .and_then(|e| e.closest("button").ok().flatten())?;
        let act = button.get_attribute("data-act")?;
        Some((act, button.get_attribute("data-turn")))
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = ev;
        None
    }
}

/// What the tools show.
struct Tools {
    versions: Option<Versions>,
    /// The question's turn has finished (Edit and Regenerate apply).
    finished: bool,
    /// A turn runs: nothing switches or asks again until it ends.
    busy: bool,
    editing: bool,
    read_only: bool,
}

/// How tall the editor is for `text`: its lines, from 2 to 12.
fn editor_rows(text: &str) -> usize {
    text.lines().count().clamp(2, 12)
}

/// The question's editor, holding `text`.
fn editor_html(text: &str) -> String {
    format!(
        "<textarea class=\"question-editor\" aria-label=\"Edit the question\" aria-keyshortcuts=\"Enter Escape\" rows=\"{}\">{}</textarea>",
        editor_rows(text),
        markdown::escape(text)
    )
}

/// The versions switcher (‹ 2 / 3 ›) and Edit and Regenerate, or Send and
/// Cancel while the editor is open; a share link's page shows only the
/// count.
fn tools_html(tools: &Tools) -> String {
    let hidden = if tools.read_only { " hidden" } else { "" };
    let mut out = String::new();
    if let Some(v) = &tools.versions {
        // One step to a neighbouring version, if there is one.
        let step = |to: Option<TurnId>, label: &str, glyph: &str| {
            let disabled = if to.is_none() || tools.busy {
                " disabled"
            } else {
                ""
            };
            let turn = to
                .map(|t| format!(" data-turn=\"{}\"", t.0))
                .unwrap_or_default();
            format!(
                "<button type=\"button\" class=\"js-only\"{hidden} aria-label=\"{label}\"{disabled} data-act=\"select\"{turn}>{glyph}</button>"
            )
        };
        out.push_str(&format!(
            "<nav class=\"versions\" aria-label=\"Versions of this question\">{}<span class=\"versions-count\">{} / {}</span>{}</nav>",
            step(v.previous, "Previous version", "‹"),
            v.position,
            v.count,
            step(v.next, "Next version", "›"),
        ));
    }
    out.push_str(&format!(
        "<div class=\"cell-actions question-actions js-only\"{hidden}>"
    ));
    if tools.editing {
        out.push_str("<button type=\"button\" class=\"primary\" data-act=\"send\">Send</button><button type=\"button\" data-act=\"cancel\">Cancel</button>");
    } else {
        let disabled = if tools.finished && !tools.busy {
            ""
        } else {
            " disabled"
        };
        out.push_str(&format!(
            "<button type=\"button\"{disabled} data-act=\"edit\">Edit</button><button type=\"button\" title=\"Ask this question again; the answer you have stays as version 1\"{disabled} data-act=\"regenerate\">Regenerate</button>"
        ));
    }
    out.push_str("</div>");
    out
}

/// The kernel's note, as markup.
fn restored_html(restored: &Restored) -> String {
    let failed = if restored.error.is_some() {
        " data-failed=\"true\""
    } else {
        ""
    };
    format!(
        "<p class=\"restored\"{failed}>{}</p>",
        markdown::escape(&restored_note(restored))
    )
}

/// What a turn's kernel needed before it ran, in words.
fn restored_note(restored: &Restored) -> String {
    match &restored.error {
        Some(e) => e.message.clone(),
        // The first question's other version: nothing came before it.
        None if restored.programs == 0 => {
            "Started in a fresh kernel: the other version's variables are not here.".into()
        }
        None if restored.programs == 1 => {
            "Variables rebuilt for this version: 1 earlier program re-ran first.".into()
        }
        None => format!(
            "Variables rebuilt for this version: {} earlier programs re-ran first.",
            restored.programs
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(versions: Option<Versions>, finished: bool, busy: bool, editing: bool) -> Tools {
        Tools {
            versions,
            finished,
            busy,
            editing,
            read_only: false,
        }
    }

    const SECOND_OF_THREE: Versions = Versions {
        position: 2,
        count: 3,
        previous: Some(TurnId(1)),
        next: Some(TurnId(7)),
    };

    #[test]
    fn a_finished_question_offers_its_versions_edit_and_regenerate() {
        assert_eq!(
            tools_html(&tools(Some(SECOND_OF_THREE), true, false, false)),
            "<nav class=\"versions\" aria-label=\"Versions of this question\">\
             <button type=\"button\" class=\"js-only\" aria-label=\"Previous version\" data-act=\"select\" data-turn=\"1\">‹</button>\
             <span class=\"versions-count\">2 / 3</span>\
             <button type=\"button\" class=\"js-only\" aria-label=\"Next version\" data-act=\"select\" data-turn=\"7\">›</button></nav>\
             <div class=\"cell-actions question-actions js-only\">\
             <button type=\"button\" data-act=\"edit\">Edit</button>\
             <button type=\"button\" title=\"Ask this question again; the answer you have stays as version 1\" data-act=\"regenerate\">Regenerate</button></div>"
        );
    }

    #[test]
    fn while_a_turn_runs_nothing_switches_or_asks_again() {
        let html = tools_html(&tools(Some(SECOND_OF_THREE), true, true, false));
        assert_eq!(html.matches(" disabled").count(), 4, "{html}");
        // The last version has no next one; an unfinished question no Edit.
        let last = Versions {
            next: None,
            ..SECOND_OF_THREE
        };
        let html = tools_html(&tools(Some(last), false, false, false));
        assert!(
            html.contains("aria-label=\"Next version\" disabled data-act=\"select\">"),
            "{html}"
        );
        assert!(
            html.contains("aria-label=\"Previous version\" data-act=\"select\" data-turn=\"1\">"),
            "{html}"
        );
        assert!(
            html.contains("<button type=\"button\" disabled data-act=\"edit\">"),
            "{html}"
        );
        // No versions yet: only the actions.
        assert!(
            tools_html(&tools(None, true, false, false)).starts_with("<div class=\"cell-actions")
        );
    }

    #[test]
    fn the_editor_holds_the_question_as_text_and_sends_or_cancels() {
        let open = tools_html(&tools(None, true, false, true));
        assert_eq!(
            open,
            "<div class=\"cell-actions question-actions js-only\">\
             <button type=\"button\" class=\"primary\" data-act=\"send\">Send</button>\
             <button type=\"button\" data-act=\"cancel\">Cancel</button></div>"
        );
        assert_eq!(
            editor_html("plot </textarea><b>x</b>"),
            "<textarea class=\"question-editor\" aria-label=\"Edit the question\" aria-keyshortcuts=\"Enter Escape\" rows=\"2\">\
             plot &lt;/textarea&gt;&lt;b&gt;x&lt;/b&gt;</textarea>"
        );
        assert_eq!(editor_rows(&"line\n".repeat(40)), 12);
    }

    #[test]
    fn a_share_page_hides_the_controls() {
        let html = tools_html(&Tools {
            read_only: true,
            ..tools(Some(SECOND_OF_THREE), true, false, false)
        });
        assert_eq!(html.matches(" hidden").count(), 3, "{html}");
    }
}
