//! The controls inside a result's outputs. The outputs are markup
//! (`render::outputs`, rendered by the server for the first view and by
//! the page for what streams in), so their buttons are wired here, once
//! per result, by the names that markup writes: "Show all" on a long
//! stream, Download PNG on a figure the page holds, a table's sort,
//! filter, window of rows, Copy and CSV, a chart's frame (handed its
//! chart, sized, told the theme) and an HTML output's frame (the theme).
//! What is read from the page's own markup is only which output and which
//! control; the data (a table's rows, a chart's JSON) comes from the
//! cell's outputs.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{Element, HtmlElement, HtmlIFrameElement, HtmlInputElement};

use super::clipboard::copy_text;
use super::download::save as save_as;
use crate::notebook::Cell;
use crate::protocol::{Output, Table, chart_of};
use crate::render::outputs::{CAPPED_LINES, chart_message, data_url, output_document};
use crate::render::table::{Sort, numeric_columns, to_csv, to_tsv};
use crate::render::table_markup::{ROW_PX, View, aria_sort, arrow, body, caption, only, visible};

/// By how many rows a table's window moves as it scrolls.
const STEP: usize = 40;
/// The shortest and tallest a chart's frame is made, in CSS pixels.
const MIN_HEIGHT: f64 = 80.0;
const MAX_HEIGHT: f64 = 1600.0;

type Outputs = Memo<Option<Cell>>;

/// The page's theme as the frames are told it: its name (`auto`, `light`,
/// `dark`) and its colour scheme (`light dark`, `light`, `dark`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameTheme {
    pub name: &'static str,
    pub scheme: &'static str,
}

/// Wires the controls in the outputs `list` shows of `cell`, and keeps
/// its frames in the theme `theme` reads (tracked).
pub fn control(
    list: NodeRef<leptos::html::Div>,
    cell: Outputs,
    theme: impl Fn() -> FrameTheme + Copy + Send + Sync + 'static,
) {
    Effect::new(move |wired: Option<bool>| {
        if wired == Some(true) {
            return true;
        }
        let Some(element) = list.get() else {
            return false;
        };
        listen(&element, "click", false, move |event| click(&event, cell));
        listen(&element, "input", false, move |event| input(&event, cell));
        // A table's box scrolls, and scrolling does not bubble.
        listen(&element, "scroll", true, move |event| scroll(&event, cell));
        true
    });
    // Each chart's frame asks for its chart and says its height.
    let handle = window_event_listener(leptos::ev::message, move |event| {
        if let Some(element) = list.get_untracked() {
            from_frame(&event, &element, cell, untrack(theme));
        }
    });
    on_cleanup(move || handle.remove());
    // The frames follow the theme switch.
    Effect::new(move |_| {
        let theme = theme();
        if let Some(element) = list.get() {
            retheme(&element, cell, theme);
        }
    });
}

/// Calls `handle` on `kind` events within `element` for as long as the
/// element lives (the closure goes with it).
fn listen(
    element: &Element,
    kind: &str,
    capture: bool,
    handle: impl FnMut(web_sys::Event) + 'static,
) {
    let closure = Closure::<dyn FnMut(web_sys::Event)>::new(handle).into_js_value();
    let _ =
        element.add_event_listener_with_callback_and_bool(kind, closure.unchecked_ref(), capture);
}

fn target(event: &web_sys::Event) -> Option<Element> {
    event.target().and_then(|t| t.dyn_into::<Element>().ok())
}

fn closest(element: &Element, selector: &str) -> Option<Element> {
    element.closest(selector).ok().flatten()
}

fn find(element: &Element, selector: &str) -> Option<Element> {
    element.query_selector(selector).ok().flatten()
}

fn number<T: std::str::FromStr>(element: &Element, name: &str) -> Option<T> {
    element.get_attribute(name).and_then(|v| v.parse().ok())
}

/// Runs `read` on the `index`th output of the cell, if there is one.
fn with_output<T>(cell: Outputs, index: usize, read: impl FnOnce(&Output) -> T) -> Option<T> {
    cell.with_untracked(|c| c.as_ref().and_then(|c| c.outputs.get(index)).map(read))
}

/// Runs `read` on the table a table's figure shows.
fn with_table<T>(cell: Outputs, figure: &Element, read: impl FnOnce(&Table) -> T) -> Option<T> {
    let index = number(figure, "data-output")?;
    with_output(cell, index, |output| match output {
        Output::Table { table, .. } => Some(read(table)),
        _ => None,
    })
    .flatten()
}

fn click(event: &web_sys::Event, cell: Outputs) {
    let Some(button) = target(event).and_then(|t| closest(&t, "button")) else {
        return;
    };
    let class = button.class_name();
    let has = |name: &str| class.split_whitespace().any(|c| c == name);
    if has("show-all") {
        show_all(&button);
    } else if has("save-figure") {
        let figure = closest(&button, "figure");
        let src = figure
            .and_then(|f| find(&f, "img"))
            .and_then(|i| i.get_attribute("src"));
        if let (Some(src), Some(file)) = (src, button.get_attribute("data-file")) {
            save_as(&file, &src);
        }
    } else if let Some(figure) = closest(&button, "figure.out-table") {
        if has("sort") {
            let Some(column) = number(&button, "data-column") else {
                return;
            };
            let sort = Sort::after_click(sort_of(&figure), column);
            let _ = figure.set_attribute(
                "data-sort",
                &format!("{}:{}", sort.column, if sort.ascending { "a" } else { "d" }),
            );
            redraw(&figure, cell);
        } else if has("table-copy") {
            if let Some(text) = with_table(cell, &figure, |t| to_tsv(&shown(t, &figure))) {
                copy_text(&text);
                button.set_text_content(Some("Copied"));
            }
        } else if has("table-csv") {
            let csv = with_table(cell, &figure, |t| to_csv(&shown(t, &figure)));
            if let (Some(csv), Some(file)) = (csv, figure.get_attribute("data-file")) {
                save_as(&file, &data_url("text/csv;charset=utf-8", csv.as_bytes()));
            }
        }
    }
}

/// A capped stream's box opened to the page's height, or capped again.
fn show_all(button: &Element) {
    let Some(pre) = button.previous_element_sibling() else {
        return;
    };
    let opening = button.get_attribute("aria-expanded").as_deref() != Some("true");
    let lines: usize = number(button, "data-lines").unwrap_or(CAPPED_LINES);
    let _ = pre.class_list().toggle_with_force("capped", !opening);
    let _ = button.set_attribute("aria-expanded", &opening.to_string());
    if opening {
        let _ = pre.remove_attribute("tabindex");
        let _ = pre.remove_attribute("aria-label");
        button.set_text_content(Some("Show less"));
    } else {
        let _ = pre.set_attribute("tabindex", "0");
        let label = button.get_attribute("data-label").unwrap_or_default();
        let _ = pre.set_attribute("aria-label", &label);
        button.set_text_content(Some(&format!("Show all {lines} lines")));
    }
}

fn input(event: &web_sys::Event, cell: Outputs) {
    let Some(field) = target(event).filter(|t| t.class_list().contains("table-filter")) else {
        return;
    };
    if let Some(figure) = closest(&field, "figure.out-table") {
        // A new filter shows its matches from the first.
        let _ = figure.set_attribute("data-start", "0");
        redraw(&figure, cell);
    }
}

fn scroll(event: &web_sys::Event, cell: Outputs) {
    let Some(scroller) = target(event)
        .filter(|t| t.class_list().contains("table-scroll"))
        .and_then(|t| t.dyn_into::<HtmlElement>().ok())
    else {
        return;
    };
    let Some(figure) = closest(&scroller, "figure.out-table") else {
        return;
    };
    let mut row_px = number(&figure, "data-row-px").unwrap_or(ROW_PX);
    if let Some(row) = find(&scroller, "tbody tr:not(.spacer)")
        .and_then(|r| r.dyn_into::<HtmlElement>().ok())
        .filter(|r| r.offset_height() > 0)
    {
        row_px = f64::from(row.offset_height());
        let _ = figure.set_attribute("data-row-px", &row_px.to_string());
    }
    let at = (f64::from(scroller.scroll_top()) / row_px) as usize;
    let wanted = at.saturating_sub(STEP) / STEP * STEP;
    if number(&figure, "data-start") != Some(wanted) {
        let _ = figure.set_attribute("data-start", &wanted.to_string());
        redraw(&figure, cell);
    }
}

/// The sort a table's figure is shown in (`data-sort`: `2:a`, `0:d`).
fn sort_of(figure: &Element) -> Option<Sort> {
    let sort = figure.get_attribute("data-sort")?;
    let (column, way) = sort.split_once(':')?;
    Some(Sort {
        column: column.parse().ok()?,
        ascending: way == "a",
    })
}

fn filter_of(figure: &Element) -> String {
    find(figure, "input.table-filter")
        .and_then(|i| i.dyn_into::<HtmlInputElement>().ok())
        .map(|i| i.value())
        .unwrap_or_default()
}

/// The rows a table's figure shows, in the order shown (what Copy and
/// Download take: not only those scrolled into view).
fn shown(table: &Table, figure: &Element) -> Table {
    let filter = filter_of(figure);
    let view = View {
        sort: sort_of(figure),
        filter: &filter,
        ..View::default()
    };
    only(table, &visible(table, &numeric_columns(table), &view))
}

/// A table's rows, header and caption drawn again for its sort, filter
/// and scroll.
fn redraw(figure: &Element, cell: Outputs) {
    let sort = sort_of(figure);
    let filter = filter_of(figure);
    let view = View {
        sort,
        filter: &filter,
        start: number(figure, "data-start").unwrap_or(0),
        row_px: number(figure, "data-row-px").unwrap_or(ROW_PX),
    };
    let drawn = with_table(cell, figure, |table| {
        let numeric = numeric_columns(table);
        let rows = visible(table, &numeric, &view);
        (
            body(table, &numeric, &rows, &view),
            rows.len(),
            caption(table, rows.len()),
        )
    });
    let Some((rows, matching, said)) = drawn else {
        return;
    };
    if let Some(tbody) = find(figure, "tbody") {
        tbody.set_inner_html(&rows);
    }
    if let Some(table) = find(figure, "table") {
        let _ = table.set_attribute("aria-rowcount", &(matching + 1).to_string());
    }
    if let Some(size) = find(figure, ".table-size") {
        size.set_text_content(Some(&said));
    }
    let Ok(headers) = figure.query_selector_all("thead th") else {
        return;
    };
    for i in 0..headers.length() {
        let Some(th) = headers.item(i).and_then(|n| n.dyn_into::<Element>().ok()) else {
            continue;
        };
        let column = i as usize;
        let _ = match aria_sort(sort, column) {
            Some(way) => th.set_attribute("aria-sort", way),
            None => th.remove_attribute("aria-sort"),
        };
        if let Some(span) = find(&th, ".arrow") {
            span.set_text_content(Some(arrow(sort, column)));
        }
    }
}

/// The frames of `element` matching `selector`.
fn frames(element: &Element, selector: &str) -> Vec<HtmlIFrameElement> {
    let Ok(found) = element.query_selector_all(selector) else {
        return Vec::new();
    };
    (0..found.length())
        .filter_map(|i| found.item(i).and_then(|n| n.dyn_into().ok()))
        .collect()
}

/// Answers what a chart's frame posts (untrusted: it is checked to come
/// from a chart frame of this result, and read as data): `ready` gets the
/// chart, `height` sizes the frame, within bounds.
fn from_frame(event: &web_sys::MessageEvent, element: &Element, cell: Outputs, theme: FrameTheme) {
    let Some(source) = event.source() else {
        return;
    };
    let Some((frame, window)) = frames(element, "figure.out-chart iframe")
        .into_iter()
        .filter_map(|f| f.content_window().map(|w| (f, w)))
        .find(|(_, w)| js_sys::Object::is(&source, w))
    else {
        return;
    };
    let Some(text) = event.data().as_string() else {
        return;
    };
    let Ok(said) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    match said["t"].as_str() {
        Some("ready") => {
            let index = closest(&frame, "figure").and_then(|f| number(&f, "data-output"));
            let message = index.and_then(|index| {
                with_output(cell, index, |output| match output {
                    Output::Rich { data, .. } => {
                        chart_of(data).map(|(kind, spec)| chart_message(kind, spec, theme.name))
                    }
                    _ => None,
                })
                .flatten()
            });
            if let Some(message) = message {
                let _ = window.post_message(&message.into(), "*");
            }
        }
        Some("height") => {
            if let Some(h) = said["h"].as_f64().filter(|h| h.is_finite()) {
                let h = h.clamp(MIN_HEIGHT, MAX_HEIGHT);
                let _ = HtmlElement::style(&frame).set_property("height", &format!("{h}px"));
            }
        }
        _ => {}
    }
}

/// Tells every chart frame the theme, and renders every HTML output's
/// frame again in its colour scheme if it was drawn in another.
fn retheme(element: &Element, cell: Outputs, theme: FrameTheme) {
    let message = serde_json::json!({ "theme": theme.name }).to_string();
    for frame in frames(element, "figure.out-chart iframe") {
        if let Some(window) = frame.content_window() {
            let _ = window.post_message(&message.as_str().into(), "*");
        }
    }
    let scheme = theme.scheme;
    for frame in frames(element, "iframe.out-html") {
        if frame.get_attribute("data-scheme").as_deref() == Some(scheme) {
            continue;
        }
        let Some(index) = number(&frame, "data-output") else {
            continue;
        };
        let html = with_output(cell, index, |output| match output {
            Output::Rich { data, .. } => data.get("text/html").cloned(),
            _ => None,
        })
        .flatten();
        if let Some(html) = html {
            frame.set_srcdoc(&output_document(&html, scheme));
            let _ = frame.set_attribute("data-scheme", scheme);
        }
    }
}
