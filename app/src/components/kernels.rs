//! "Kernels in use", in the sessions list: which of the viewer's notebooks
//! hold a kernel (their variables), running or idle for how long, with a
//! Close button each. A new kernel closes the longest-idle one when all
//! are taken; this is how a person frees one themselves, and what a
//! refusal ("all running") points to. Shown once the page is live (the
//! list is asked for by the page, and refreshed whenever a turn starts or
//! ends here and when the person comes back to the page's tab).

use leptos::prelude::*;

use crate::api::{KernelInUse as ListedKernel, KernelsInUse as HeldKernels};
use crate::contexts::use_session;

/// How a listed kernel is doing, in words.
pub fn state_of(kernel: &ListedKernel) -> String {
    if kernel.running {
        return "running".into();
    }
    match kernel.idle_ms / 60_000 {
        0 => "idle under a minute".into(),
        1 => "idle 1 minute".into(),
        minutes => format!("idle {minutes} minutes"),
    }
}

/// The notebook's name in the list.
fn name_of(kernel: &ListedKernel, current: &str) -> String {
    match kernel.title.trim() {
        _ if kernel.session_id == current => "This notebook".into(),
        "" => "Untitled notebook".into(),
        title => crate::api::display_title(title).to_string(),
    }
}

#[component]
pub fn KernelsInUse(current: String) -> impl IntoView {
    let state = use_session();
    let held = RwSignal::new(HeldKernels::default());
    let said = RwSignal::new(None::<String>);
    let current = StoredValue::new(current);
    let refresh = move || {
        #[cfg(feature = "hydrate")]
        // A failure leaves the list as it was: it is a convenience, the
        // runs say the rest.
        crate::browser::kernels::list(move |answer| {
            if let Ok(list) = answer {
                held.set(list);
            }
        });
    };
    // Asked for when the page is live, and again whenever a turn starts or
    // ends here (this notebook's kernel comes and goes with its runs).
    // A memo, so that the streamed events in between ask nothing.
    #[cfg(feature = "hydrate")]
    {
        let busy = Memo::new(move |_| state.notebook.with(|n| n.is_busy()));
        Effect::new(move |_| {
            busy.track();
            refresh();
        });
        // Kernels come and go in the person's other tabs too: the list is
        // asked for again when they come back to this one.
        let back = move || {
            let shown = web_sys::window()
                .and_then(|w| w.document())
                .is_none_or(|d| !d.hidden());
            if shown {
                refresh();
            }
        };
        let focus = window_event_listener(leptos::ev::focus, move |_| back());
        let visible = window_event_listener(
            leptos::ev::Custom::<web_sys::Event>::new("visibilitychange"),
            move |_| back(),
        );
        on_cleanup(move || {
            focus.remove();
            visible.remove();
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (state, refresh);
    let close = move |id: String, name: String| {
        #[cfg(feature = "hydrate")]
        crate::browser::kernels::close(&id, move |answer| {
            said.set(Some(match answer {
                Ok(()) => format!(
                    "Closed the kernel of “{name}”: its variables are gone; its files are kept, and its next run starts a new kernel."
                ),
                Err(why) => format!("Not closed: {why}."),
            }));
            refresh();
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (id, name, said);
    };
    view! {
        <section class="kernels-in-use" aria-labelledby="kernels-heading" hidden=move || held.with(|h| h.kernels.is_empty()) && said.with(Option::is_none)>
            // Focusable from script: a refused run's notice leads here.
            <h2 id="kernels-heading" tabindex="-1">
                "Kernels in use "
                <span class="count">{move || held.with(|h| format!("({} of {})", h.kernels.len(), h.cap))}</span>
            </h2>
            <p class="kernels-hint">
                "Each notebook that ran code keeps its variables in a kernel. When all are taken, a new one closes your longest-idle kernel; close one here to choose."
            </p>
            <ul class="kernel-list">
                <For each=move || held.get().kernels key=|k| (k.session_id.clone(), k.running, k.idle_ms / 60_000) let:kernel>
                    {
                        let name = name_of(&kernel, &current.get_value());
                        let closing = name.clone();
                        let id = kernel.session_id.clone();
                        view! {
                            <li class="kernel-entry">
                                <a href=kernel.url.clone() rel="external" class="kernel-name">{name.clone()}</a>
                                <span class="kernel-state">{format!("{} · {}", kernel.backend_label, state_of(&kernel))}</span>
                                <button
                                    type="button"
                                    class="kernel-close"
                                    disabled=kernel.running
                                    title=if kernel.running { "Stop its program first" } else { "Close this kernel: its variables are gone, its files stay" }
                                    aria-label=format!("Close the kernel of {name}")
                                    on:click=move |_| close(id.clone(), closing.clone())
                                >
                                    "Close"
                                </button>
                            </li>
                        }
                    }
                </For>
            </ul>
            <p class="kernels-said" role="status">{move || said.get()}</p>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(running: bool, idle_ms: u64, title: &str) -> ListedKernel {
        ListedKernel {
            session_id: "s1".into(),
            title: title.into(),
            url: "/sessions/s1".into(),
            backend: runcell_protocol::SandboxKind::Jail,
            backend_label: "Local sandbox".into(),
            running,
            idle_ms,
        }
    }

    #[test]
    fn a_kernel_says_how_it_is_doing_and_whose_it_is() {
        assert_eq!(state_of(&kernel(true, 0, "")), "running");
        assert_eq!(state_of(&kernel(false, 59_999, "")), "idle under a minute");
        assert_eq!(state_of(&kernel(false, 60_000, "")), "idle 1 minute");
        assert_eq!(
            state_of(&kernel(false, 7 * 60_000 + 5, "")),
            "idle 7 minutes"
        );
        assert_eq!(name_of(&kernel(false, 0, "Primes"), "s1"), "This notebook");
        assert_eq!(name_of(&kernel(false, 0, "Primes"), "s2"), "Primes");
        assert_eq!(name_of(&kernel(false, 0, " "), "s2"), "Untitled notebook");
    }
}
