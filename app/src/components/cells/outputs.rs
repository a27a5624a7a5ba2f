//! A result cell's body: its outputs as markup (`render::outputs`, the
//! same functions on the server and in the page, so a result is static
//! HTML that hydration leaves as it is), wired by the page's output
//! controller (`browser::outputs`), with Copy output and Download.

use leptos::prelude::*;

use crate::api::session_file_url;
use crate::components::{copy_text, data_url, use_theme};
use crate::contexts::{use_session, use_share_link_offer};
use crate::notebook::Cell;
use crate::protocol::CellStatus;
use crate::render::outputs::{Place, outputs_html};

#[component]
pub(super) fn ResultBody(cell: Memo<Option<Cell>>) -> impl IntoView {
    let printed = move || cell.with(|c| c.as_ref().map(Cell::printed).unwrap_or_default());
    let copied = RwSignal::new(false);
    let cell_name = move || cell.with(|c| c.as_ref().map(|c| c.id.to_string()).unwrap_or_default());
    let state = use_session();
    let theme = use_theme();
    // A share link's page links only the files its link offers.
    let offer = state.read_only.then(use_share_link_offer).flatten();
    // The question the result answers: what a figure is of, in words. A
    // memo of its own, so that the notebook's every event does not render
    // the outputs again (only a change of the question does).
    let question = Memo::new(move |_| {
        let turn = cell.with(|c| c.as_ref().and_then(|c| c.turn));
        state.notebook.with(|n| {
            turn.and_then(|turn| n.question(turn))
                .unwrap_or_default()
                .to_string()
        })
    });
    let markup = Memo::new(move |_| {
        let question = question.get();
        let session = state.session_id.get_value();
        let file_href = |path: &str| match &offer {
            Some(offer) => offer.href(path),
            None if state.read_only => None,
            None => Some(session_file_url(&session, path)),
        };
        let name = cell_name();
        let place = Place {
            cell: &name,
            question: &question,
            // The frame of an HTML output follows the switch from here on
            // (the controller), without rendering the outputs again.
            scheme: theme.get_untracked().color_scheme(),
            file_href: &file_href,
        };
        cell.with(|c| {
            c.as_ref()
                .map(|c| outputs_html(&c.outputs, &place))
                .unwrap_or_default()
        })
    });
    let list = NodeRef::<leptos::html::Div>::new();
    #[cfg(feature = "hydrate")]
    crate::browser::outputs::control(list, cell, move || {
        let theme = theme.get();
        crate::browser::outputs::FrameTheme {
            name: theme.name(),
            scheme: theme.color_scheme(),
        }
    });

    view! {
        <div class="cell-body outputs">
            <div class="output-list" node_ref=list inner_html=markup></div>
            <Show when=move || cell.with(|c| c.as_ref().is_some_and(|c| c.outputs.is_empty() && c.status != CellStatus::Streaming))>
                <p class="out-empty">"(no output)"</p>
            </Show>
            <Show when=move || !printed().is_empty()>
                <div class="cell-actions">
                    <button
                        type="button"
                        class="js-only"
                        on:click=move |_| {
                            copy_text(&printed());
                            copied.set(true);
                        }
                    >
                        {move || if copied.get() { "Copied" } else { "Copy output" }}
                    </button>
                    <a
                        class="button"
                        download=move || format!("output-{}.txt", cell_name())
                        href=move || data_url("text/plain;charset=utf-8", printed().as_bytes())
                    >
                        "Download"
                    </a>
                </div>
            </Show>
        </div>
    }
}
