//! "Import .ipynb": a Jupyter notebook, picked or dropped on the button,
//! becomes a new session (`browser::import`).

use leptos::prelude::*;

#[component]
pub fn ImportNotebook() -> impl IntoView {
    let problem = RwSignal::new(None::<String>);
    let dragging = RwSignal::new(false);
    view! {
        <label
            class="button import-notebook js-only"
            class:dragging=move || dragging.get()
            title="Open a Jupyter notebook (.ipynb) as a new session: pick it, or drop it here"
            on:dragover=move |ev| {
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=move |ev| {
                ev.prevent_default();
                dragging.set(false);
                #[cfg(feature = "hydrate")]
                if let Some(list) = ev.data_transfer().and_then(|d| d.files()) {
                    crate::browser::import::import_first(&list, problem);
                }
            }
        >
            "Import .ipynb"
            <input
                type="file"
                accept=".ipynb,application/x-ipynb+json"
                aria-label="Import a Jupyter notebook"
                on:change=move |ev| {
                    #[cfg(feature = "hydrate")]
                    crate::browser::import::import_from_input(&ev, problem);
                    #[cfg(not(feature = "hydrate"))]
                    let _ = ev;
                }
            />
        </label>
        <span class="import-problem" role="status">{move || problem.get()}</span>
    }
}
