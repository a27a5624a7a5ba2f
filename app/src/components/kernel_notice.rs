//! The notice shown when the kernel that ran the cells is gone.

use leptos::prelude::*;

use crate::contexts::{ConnState, use_session};
use crate::notebook::Notebook;
use crate::protocol::{ClientMessage, KernelLoss};

/// Says so when the kernel that ran the cells above is gone, and offers to
/// rebuild it.
#[component]
pub fn KernelNotice() -> impl IntoView {
    let state = use_session();
    let lost = move || state.notebook.with(Notebook::kernel_lost);
    let busy = move || state.notebook.with(Notebook::is_busy);
    let connected = move || state.conn.get() == ConnState::Connected;
    let rerun = move |_| {
        if !state.send_frame(ClientMessage::RerunAll) {
            state
                .problem
                .set(Some("Not re-run: the server is not connected.".into()));
        }
    };
    view! {
        <Show when=move || lost().is_some()>
            <div class="kernel-lost" role="status">
                <p>
                    {move || match lost() {
                        Some(KernelLoss::Fork) => {
                            "This is a fork: its cells were copied, not run here, so none of their variables exist yet."
                        }
                        Some(KernelLoss::ForkWithoutFiles) => {
                            "This is a fork of a link shared without its files: its cells were copied, not run here, so none of their variables exist yet, and files its code reads may be missing. Upload them (Files) first."
                        }
                        Some(KernelLoss::Import) => {
                            "These cells come from an imported notebook: their outputs are the notebook's, and nothing has run here yet."
                        }
                        _ => {
                            "The server restarted since these cells ran, and their kernel with it: variables from the cells above are gone."
                        }
                    }}
                    " Re-run all runs the code cells that succeeded again, in order, in a fresh kernel."
                </p>
                <button
                    type="button"
                    class="primary js-only"
                    disabled=move || busy() || !connected()
                    on:click=rerun
                >
                    "Re-run all"
                </button>
            </div>
        </Show>
    }
}
