//! An interactive chart (Plotly, Vega-Lite): drawn in a frame of its own
//! (`/chart-frame.html`, sandboxed with an opaque origin, loading its
//! libraries from this site alone), which the page hands the chart's JSON.
//! Without JavaScript: the PNG the bundle carries, if any, else its text.

use leptos::prelude::*;

/// The shortest and tallest a chart's frame is made, in CSS pixels.
#[cfg(feature = "hydrate")]
const MIN_HEIGHT: f64 = 80.0;
#[cfg(feature = "hydrate")]
const MAX_HEIGHT: f64 = 1600.0;

#[component]
pub(super) fn ChartView(
    /// `plotly` or `vegalite`.
    kind: &'static str,
    /// The chart's JSON, as the program made it.
    spec: String,
    /// A static image of it, for pages without JavaScript.
    png: Option<String>,
    /// Its text form.
    text: String,
) -> impl IntoView {
    let frame = NodeRef::<leptos::html::Iframe>::new();
    let height = RwSignal::new(460.0_f64);
    #[cfg(feature = "hydrate")]
    {
        // The chart follows the page's theme switch: the frame gets the
        // theme with the chart, and again whenever it changes.
        let theme = crate::components::use_theme();
        let handle = window_event_listener(leptos::ev::message, move |event| {
            let message = || chart_message(kind, &spec, theme.get_untracked().name());
            answer(&event, frame, message, height);
        });
        on_cleanup(move || handle.remove());
        Effect::new(move |_| {
            let name = theme.get().name();
            if let Some(window) = frame.get_untracked().and_then(|f| f.content_window()) {
                let message = serde_json::json!({ "theme": name }).to_string();
                let _ = window.post_message(&wasm_bindgen::JsValue::from_str(&message), "*");
            }
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (spec, frame, kind);
    let fallback = match png {
        Some(png) => view! {
            <img class="no-js-only" src=format!("data:image/png;base64,{}", png.trim()) alt=text/>
        }
        .into_any(),
        None => view! {
            <pre class="out out-value no-js-only">{format!("{text}\n(an interactive chart: it needs JavaScript)")}</pre>
        }
        .into_any(),
    };
    view! {
        <figure class="out out-chart">
            <iframe
                class="js-only"
                node_ref=frame
                src="/chart-frame.html"
                sandbox="allow-scripts"
                title="Interactive chart"
                style:height=move || format!("{}px", height.get())
            ></iframe>
            {fallback}
        </figure>
    }
}

/// What the frame is handed: the kind, the chart's JSON text and the
/// page's theme.
#[cfg(any(feature = "hydrate", test))]
fn chart_message(kind: &str, spec: &str, theme: &str) -> String {
    serde_json::json!({ "kind": kind, "spec": spec, "theme": theme }).to_string()
}

/// Answers what the chart's frame posts (untrusted: it is checked to come
/// from this chart's frame, and read as data): `ready` gets the chart,
/// `height` sizes the frame, within bounds. The chart's message is made
/// only for a `ready`: every frame's messages reach every chart's listener.
#[cfg(feature = "hydrate")]
fn answer(
    event: &web_sys::MessageEvent,
    frame: NodeRef<leptos::html::Iframe>,
    message: impl FnOnce() -> String,
    height: RwSignal<f64>,
) {
    let Some(frame) = frame.get_untracked() else {
        return;
    };
    let Some(window) = frame.content_window() else {
        return;
    };
    let from_frame = event
        .source()
        .is_some_and(|source| js_sys::Object::is(&source, &window));
    if !from_frame {
        return;
    }
    let Some(text) = event.data().as_string() else {
        return;
    };
    let Ok(said) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    match said["t"].as_str() {
        Some("ready") => {
            let _ = window.post_message(&wasm_bindgen::JsValue::from_str(&message()), "*");
        }
        Some("height") => {
            if let Some(h) = said["h"].as_f64().filter(|h| h.is_finite()) {
                height.set(h.clamp(MIN_HEIGHT, MAX_HEIGHT));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_gets_the_chart_as_json_text_with_the_theme() {
        let hostile =
            r#"{"data": [], "layout": {"title": "</script><script>alert(1)</script>\""}}"#;
        let message = chart_message("plotly", hostile, "dark");
        let read: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert_eq!(read["kind"], "plotly");
        assert_eq!(read["theme"], "dark");
        // The spec stays text, exactly as the program made it.
        assert_eq!(read["spec"].as_str(), Some(hostile));
    }
}
