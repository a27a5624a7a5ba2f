//! The notices about the notebook's kernel, in the composer's band: the
//! kernel that ran the cells is gone, or a run found no kernel free.

use leptos::prelude::*;

use crate::contexts::{ConnState, use_session};
use crate::notebook::Notebook;
use crate::protocol::{ClientMessage, KernelLoss};

/// Says so when the kernel that ran the cells above is gone, and offers to
/// rebuild it; once code has run in the new kernel (an Edit & run, a
/// Regenerate, a new question, which rebuilds its version's variables
/// first), the notice would no longer be true, and goes.
#[component]
pub fn KernelNotice() -> impl IntoView {
    let state = use_session();
    let lost = move || state.notebook.with(shown_loss);
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
        // A run refused for want of a kernel says so in the same band.
        <super::refusal::RefusalNotice/>
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

/// The loss the notice tells of: the kernel's, until code runs in the new
/// one.
fn shown_loss(notebook: &Notebook) -> Option<KernelLoss> {
    notebook.kernel_lost().filter(|_| !notebook.kernel_used())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        CellId, CellKind, CellStatus, EventBody, SessionEvent, TurnId, TurnKind, TurnStatus,
    };

    fn ran_code(turn: u64, code: u64) -> Vec<EventBody> {
        vec![
            EventBody::TurnStarted {
                turn: TurnId(turn),
                turn_kind: TurnKind::Ask,
                alternative_to: None,
            },
            EventBody::CellStarted {
                cell_id: CellId(code),
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(1),
                source: None,
            },
            EventBody::CellStarted {
                cell_id: CellId(code + 1),
                cell_kind: CellKind::Result,
                language: None,
                attempt: Some(1),
                source: Some(CellId(code)),
            },
            EventBody::CellFinished {
                cell_id: CellId(code + 1),
                status: CellStatus::Ok,
                elapsed_ms: 1,
                error: None,
            },
            EventBody::TurnFinished {
                turn: TurnId(turn),
                status: TurnStatus::Ok,
                elapsed_ms: 1,
                final_cell: Some(CellId(code)),
            },
        ]
    }

    #[test]
    fn the_restart_notice_goes_once_code_ran_in_the_new_kernel() {
        let mut bodies = ran_code(1, 1);
        bodies.push(EventBody::KernelLost {
            reason: KernelLoss::ServerRestart,
        });
        let lost = Notebook::from_events(&SessionEvent::numbered(bodies.clone(), 1));
        assert_eq!(shown_loss(&lost), Some(KernelLoss::ServerRestart));

        bodies.extend(ran_code(2, 10));
        let ran = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(ran.kernel_lost(), Some(KernelLoss::ServerRestart));
        assert_eq!(shown_loss(&ran), None);
    }
}
