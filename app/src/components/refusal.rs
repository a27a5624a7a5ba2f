//! The notice shown when a run found no kernel free: not a failed cell,
//! but what happened and what to do, in the composer's band. The code that
//! did not run stays in its cell; the notice offers to close the person's
//! longest-idle kernel and run it again (a refused question is asked again,
//! as a new version of it), and leads to "Kernels in use".

use leptos::prelude::*;

use crate::api::{KernelInUse as ListedKernel, KernelsInUse as HeldKernels};
use crate::contexts::{ConnState, use_session};
use crate::notebook::{Notebook, Refused};
use crate::protocol::{ClientMessage, KernelCap, TurnId, TurnKind};

/// How often the notice asks again which kernels are held, while it shows
/// and none of them is idle (a program elsewhere may end at any moment).
#[cfg(feature = "hydrate")]
const ASK_AGAIN: std::time::Duration = std::time::Duration::from_secs(3);

#[component]
pub fn RefusalNotice() -> impl IntoView {
    let state = use_session();
    let refused = Memo::new(move |_| state.notebook.with(shown_refusal));
    // A refused question (its look at the data or its program found no
    // kernel) is asked again; refused code is run again.
    let asked = Memo::new(move |_| {
        refused
            .get()
            .is_some_and(|(turn, _)| state.notebook.with(|n| question_of(n, turn).is_some()))
    });
    let dismissed = RwSignal::new(None::<TurnId>);
    let held = RwSignal::new(None::<HeldKernels>);
    let said = RwSignal::new(None::<String>);
    let shown = move || {
        refused
            .get()
            .filter(|(turn, _)| dismissed.get() != Some(*turn))
    };
    let idle = move || {
        held.with(|h| {
            h.as_ref()
                .and_then(|h| longest_idle(&h.kernels, &state.session_id.get_value()))
                .cloned()
        })
    };
    let busy = move || state.notebook.with(Notebook::is_busy);
    let connected = move || state.conn.get() == ConnState::Connected;
    #[cfg(feature = "hydrate")]
    {
        let ask = move || {
            crate::browser::kernels::list(move |answer| {
                if let Ok(list) = answer {
                    held.set(Some(list));
                }
            });
        };
        Effect::new(move |_| {
            if shown().is_some() {
                ask();
            }
        });
        let tick = set_interval_with_handle(
            move || {
                let waiting = shown_untracked(refused, dismissed)
                    && held.with_untracked(|h| {
                        h.as_ref().is_none_or(|h| {
                            longest_idle(&h.kernels, &state.session_id.get_value()).is_none()
                        })
                    });
                if waiting {
                    ask();
                }
            },
            ASK_AGAIN,
        );
        on_cleanup(move || {
            if let Ok(tick) = tick {
                tick.clear();
            }
        });
    }
    let close_and_run = move |_| {
        let Some((turn, refusal)) = refused.get_untracked() else {
            return;
        };
        let Some(kernel) = idle() else {
            return;
        };
        let Some(run) = state.notebook.with_untracked(|n| {
            if let Some(question) = question_of(n, turn) {
                return Some(ClientMessage::Ask {
                    text: question.to_string(),
                    model: state.picked_model(),
                    backend: state.picked_backend(),
                    alternative_to: Some(turn),
                });
            }
            let cell = n.cell(refusal.cell_id)?;
            Some(ClientMessage::Run {
                code: cell.text.clone(),
                language: cell.language.clone().unwrap_or_else(|| "python".into()),
                source: Some(refusal.cell_id),
                backend: state.picked_backend(),
            })
        }) else {
            return;
        };
        said.set(Some("Closing that kernel…".into()));
        #[cfg(feature = "hydrate")]
        crate::browser::kernels::close(&kernel.session_id, move |answer| match answer {
            Ok(()) if state.send_frame(run) => {
                said.set(None);
                held.set(None);
            }
            Ok(()) => said.set(Some(
                "Closed that kernel, but not run: the server is not connected.".into(),
            )),
            Err(why) => said.set(Some(format!("Not closed: {why}."))),
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (kernel, run);
    };
    let to_list = move |ev: leptos::ev::MouseEvent| {
        #[cfg(feature = "hydrate")]
        if crate::browser::kernels::show_list() {
            ev.prevent_default();
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    view! {
        <Show when=move || shown().is_some()>
            <div class="kernel-refused" role="alert">
                <p class="refused-what">
                    {move || shown().map(|(_, r)| what_happened(r, asked.get())).unwrap_or_default()}
                </p>
                <p class="refused-idle">
                    {move || match idle() {
                        Some(kernel) => format!(
                            "Your longest-idle kernel is “{}” ({}).",
                            name_of(&kernel),
                            super::kernels::state_of(&kernel)
                        ),
                        None if asked.get() => "Stop a program that runs, or wait for one to end, then ask again.".into(),
                        None => "Stop a program that runs, or wait for one to end, then run this code again.".into(),
                    }}
                </p>
                <div class="refused-actions">
                    <Show when=move || idle().is_some()>
                        <button
                            type="button"
                            class="primary js-only"
                            disabled=move || busy() || !connected()
                            on:click=close_and_run
                        >
                            {move || if asked.get() {
                                "Close the longest-idle kernel and ask again"
                            } else {
                                "Close the longest-idle kernel and run again"
                            }}
                        </button>
                    </Show>
                    <a href="#kernels-heading" class="refused-list" on:click=to_list>
                        "See Kernels in use"
                    </a>
                    <button
                        type="button"
                        class="refused-dismiss js-only"
                        aria-label="Dismiss this notice"
                        on:click=move |_| dismissed.set(refused.get_untracked().map(|(t, _)| t))
                    >
                        "Dismiss"
                    </button>
                </div>
                <p class="refused-said" role="status">{move || said.get()}</p>
            </div>
        </Show>
    }
}

/// Whether the notice shows, read without tracking (for the timer).
#[cfg(feature = "hydrate")]
fn shown_untracked(
    refused: Memo<Option<(TurnId, Refused)>>,
    dismissed: RwSignal<Option<TurnId>>,
) -> bool {
    refused
        .get_untracked()
        .is_some_and(|(turn, _)| dismissed.get_untracked() != Some(turn))
}

/// The refusal the notice tells of: the newest turn's on show, once it is
/// over (a new run, or one that ran, makes it no longer true).
fn shown_refusal(notebook: &Notebook) -> Option<(TurnId, Refused)> {
    let turn = notebook.turns().next_back()?;
    turn.status?;
    Some((turn.id, turn.refused?))
}

/// The refused turn's question, when it was one (a turn of code run as
/// written has none).
fn question_of(notebook: &Notebook, turn: TurnId) -> Option<&str> {
    notebook
        .all_turns()
        .iter()
        .find(|t| t.id == turn && t.kind == TurnKind::Ask)
        .and_then(|t| notebook.question(t.id))
}

/// What happened, in plain words; `asked`: the turn was a question.
fn what_happened(refused: Refused, asked: bool) -> String {
    let held = refused.held;
    let whose = match refused.cap {
        KernelCap::Owner => {
            format!(
                "your notebooks hold all {held} kernels they may, and each is running a program"
            )
        }
        KernelCap::Server => format!("all {held} kernels this server runs at once are in use"),
        KernelCap::Anonymous => {
            format!("pages without an account hold all {held} kernels they may share")
        }
        KernelCap::Client => {
            format!("pages from your address hold all {held} kernels they may")
        }
    };
    let kept = if asked {
        "Your question is kept above, to ask again."
    } else {
        "Your code is kept above, to run again."
    };
    format!("Not run: all kernels are in use ({whose}). {kept}")
}

/// The viewer's idle kernel that has been idle longest, but this
/// notebook's own.
fn longest_idle<'a>(kernels: &'a [ListedKernel], current: &str) -> Option<&'a ListedKernel> {
    kernels
        .iter()
        .filter(|k| !k.running && k.session_id != current)
        .max_by_key(|k| k.idle_ms)
}

/// A kernel's notebook, as the notice names it.
fn name_of(kernel: &ListedKernel) -> String {
    match kernel.title.trim() {
        "" => "Untitled notebook".into(),
        title => crate::api::display_title(title).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        CellId, CellKind, CellStatus, EventBody, SandboxKind, SessionEvent, TurnStatus,
    };

    fn kernel(id: &str, running: bool, idle_ms: u64) -> ListedKernel {
        ListedKernel {
            session_id: id.into(),
            title: format!("Notebook {id}"),
            url: format!("/sessions/{id}"),
            backend: SandboxKind::Jail,
            backend_label: "Local sandbox".into(),
            running,
            idle_ms,
        }
    }

    #[test]
    fn the_longest_idle_kernel_is_another_notebooks_that_does_not_run() {
        let kernels = [
            kernel("a", true, 0),
            kernel("b", false, 5_000),
            kernel("here", false, 90_000),
            kernel("c", false, 60_000),
        ];
        assert_eq!(
            longest_idle(&kernels, "here").map(|k| k.session_id.as_str()),
            Some("c")
        );
        assert_eq!(longest_idle(&kernels[..1], "here"), None);
        assert_eq!(name_of(&kernels[1]), "Notebook b");
    }

    fn turn(id: u64, refused: bool, finished: bool) -> Vec<EventBody> {
        let mut bodies = vec![
            EventBody::TurnStarted {
                turn: TurnId(id),
                turn_kind: TurnKind::Run,
                alternative_to: None,
            },
            EventBody::CellStarted {
                cell_id: CellId(id * 10),
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: None,
                source: None,
            },
            EventBody::CellFinished {
                cell_id: CellId(id * 10),
                status: CellStatus::Ok,
                elapsed_ms: 0,
                error: None,
            },
        ];
        if refused {
            bodies.push(EventBody::KernelRefused {
                cell_id: CellId(id * 10),
                cap: KernelCap::Owner,
                held: 4,
            });
        }
        if finished {
            bodies.push(EventBody::TurnFinished {
                turn: TurnId(id),
                status: TurnStatus::Error,
                elapsed_ms: 1,
                final_cell: Some(CellId(id * 10)),
            });
        }
        bodies
    }

    fn notebook(bodies: Vec<EventBody>) -> Notebook {
        Notebook::from_events(&SessionEvent::numbered(bodies, 1))
    }

    #[test]
    fn the_notice_tells_of_the_newest_turn_once_it_is_over() {
        let refusal = Refused {
            cell_id: CellId(10),
            cap: KernelCap::Owner,
            held: 4,
        };
        assert_eq!(
            shown_refusal(&notebook(turn(1, true, true))),
            Some((TurnId(1), refusal))
        );
        assert_eq!(shown_refusal(&notebook(turn(1, true, false))), None);
        let mut ran_since = turn(1, true, true);
        ran_since.extend(turn(2, false, false));
        assert_eq!(shown_refusal(&notebook(ran_since)), None);
        assert_eq!(
            what_happened(refusal, false),
            "Not run: all kernels are in use (your notebooks hold all 4 kernels they may, and each is running a program). Your code is kept above, to run again."
        );
        assert_eq!(
            what_happened(refusal, true),
            "Not run: all kernels are in use (your notebooks hold all 4 kernels they may, and each is running a program). Your question is kept above, to ask again."
        );
    }

    #[test]
    fn a_refused_question_is_asked_again_and_refused_code_run_again() {
        let run = notebook(turn(1, true, true));
        assert_eq!(question_of(&run, TurnId(1)), None);
        let mut bodies = turn(2, true, true);
        bodies[0] = EventBody::TurnStarted {
            turn: TurnId(2),
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        };
        bodies.insert(
            1,
            EventBody::UserMessage {
                cell_id: CellId(19),
                text: "mean neg of ABC News".into(),
                markup: None,
            },
        );
        let asked = notebook(bodies);
        assert_eq!(question_of(&asked, TurnId(2)), Some("mean neg of ABC News"));
        assert_eq!(question_of(&asked, TurnId(3)), None);
    }
}
