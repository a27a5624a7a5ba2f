//! A data frame the kernel showed, as a table of the page's own: styled in
//! both themes, scrolled inside its box, sorted by a click on a column's
//! header, copied as tab-separated text or saved as CSV. What is copied
//! or saved is what the kernel showed; nothing is run again.

use leptos::prelude::*;

use crate::components::{copy_text, data_url, save_as};
use crate::protocol::Table;
use crate::render::table::{Sort, numeric_columns, order, to_csv, to_tsv};

/// "1 row × 2 columns".
fn shape(rows: usize, columns: usize) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} × {}",
        plural(rows, "row", "rows"),
        plural(columns, "column", "columns")
    )
}

/// How many rows are in the page at once, and by how many the window moves.
const WINDOW: usize = 120;
#[cfg(feature = "hydrate")]
const STEP: usize = 40;
/// A row's height until one is measured, in CSS pixels.
const ROW_PX: f64 = 30.0;

#[component]
pub(super) fn TableView(table: Table, name: String, index: usize) -> impl IntoView {
    let numeric = numeric_columns(&table);
    let sort = RwSignal::new(None::<Sort>);
    let copied = RwSignal::new(false);
    let table = StoredValue::new(table);
    let numeric = StoredValue::new(numeric);
    let (columns, index_columns, size, elided) = table.with_value(|t| {
        let index_columns = t.index_columns.min(t.columns.len());
        (
            t.columns.clone(),
            index_columns,
            shape(t.rows.len(), t.columns.len() - index_columns),
            t.elided.clone(),
        )
    });
    let file = [String::from("table-"), name, format!("-{}.csv", index + 1)].concat();
    let filter = RwSignal::new(String::new());
    // The rows shown, in order: sorted, then those matching the filter.
    let visible = Memo::new(move |_| {
        let wanted = filter.with(|f| f.trim().to_lowercase());
        table.with_value(|t| {
            numeric
                .with_value(|n| order(t, n, sort.get()))
                .into_iter()
                .filter(|&r| {
                    wanted.is_empty()
                        || t.rows[r].iter().any(|v| v.to_lowercase().contains(&wanted))
                })
                .collect::<Vec<usize>>()
        })
    });
    // What Copy and Download take: every row shown, in the order shown
    // (not only those scrolled into view).
    let shown = move || {
        table.with_value(|t| {
            let rows = visible.with_untracked(|v| v.iter().map(|&r| t.rows[r].clone()).collect());
            Table { rows, ..t.clone() }
        })
    };
    // Only the rows near the view are in the page (a frame may bring ten
    // thousand): from `start`, [`WINDOW`] of them, the rest stood in for by
    // two spacers of their height.
    let start = RwSignal::new(0usize);
    let row_px = StoredValue::new(ROW_PX);
    let total_rows = table.with_value(|t| t.rows.len());
    let width = table.with_value(|t| t.columns.len());
    Effect::new(move |_| {
        filter.track();
        start.set(0);
    });
    let label = format!("Table, {size}");

    let header = columns
        .into_iter()
        .enumerate()
        .map(|(i, column)| {
            let aria_sort = move || {
                sort.get().filter(|s| s.column == i).map(|s| {
                    if s.ascending {
                        "ascending"
                    } else {
                        "descending"
                    }
                })
            };
            let arrow = move || match sort.get().filter(|s| s.column == i) {
                Some(s) if s.ascending => "↑",
                Some(_) => "↓",
                None => "",
            };
            let numeric = numeric.with_value(|n| n.get(i).copied().unwrap_or(false));
            let title = if column.is_empty() {
                "index".to_string()
            } else {
                column.clone()
            };
            view! {
                <th scope="col" class:num=numeric aria-sort=aria_sort>
                    <button
                        type="button"
                        class="sort"
                        title=format!("Sort by {title}")
                        on:click=move |_| sort.update(|s| *s = Some(Sort::after_click(*s, i)))
                    >
                        {if column.is_empty() {
                            // The index's column has no name: a reader still
                            // hears what the button sorts by.
                            view! { <span class="visually-hidden">"index"</span> }.into_any()
                        } else {
                            column.into_any()
                        }}
                        <span class="arrow" aria-hidden="true">{arrow}</span>
                    </button>
                </th>
            }
        })
        .collect_view();

    let spacer = move |rows: usize| {
        (rows > 0).then(|| {
            let height = format!("height: {}px", (rows as f64 * row_px.get_value()).round());
            view! {
                <tr class="spacer" aria-hidden="true">
                    <td colspan=width style=height></td>
                </tr>
            }
        })
    };
    let rows = move || {
        let order = visible.get();
        let first = start.get().min(order.len().saturating_sub(1));
        let last = (first + WINDOW).min(order.len());
        let body = order[first..last]
            .iter()
            .copied()
            .map(|r| {
                table.with_value(|t| {
                    t.rows[r]
                        .iter()
                        .enumerate()
                        .map(|(i, value)| {
                            let numeric =
                                numeric.with_value(|n| n.get(i).copied().unwrap_or(false));
                            if i < index_columns {
                                view! { <th scope="row">{value.clone()}</th> }.into_any()
                            } else {
                                view! { <td class:num=numeric>{value.clone()}</td> }.into_any()
                            }
                        })
                        .collect_view()
                })
            })
            .enumerate()
            .map(|(at, cells)| view! { <tr aria-rowindex=first + at + 2>{cells}</tr> })
            .collect_view();
        (spacer(first), body, spacer(order.len() - last))
    };
    let on_scroll = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let Some(scroller) = ev
                .current_target()
                .and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok())
            else {
                return;
            };
            if let Some(row) = scroller
                .query_selector("tbody tr:not(.spacer)")
                .ok()
                .flatten()
                .and_then(|r| r.dyn_into::<web_sys::HtmlElement>().ok())
                && row.offset_height() > 0
            {
                row_px.set_value(f64::from(row.offset_height()));
            }
            let top = f64::from(scroller.scroll_top());
            let at = (top / row_px.get_value()) as usize;
            let wanted = at.saturating_sub(STEP) / STEP * STEP;
            if wanted != start.get_untracked() {
                start.set(wanted);
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };

    view! {
        <figure class="out out-table">
            <div class="table-scroll" tabindex="0" role="region" aria-label=label on:scroll=on_scroll>
                <table aria-rowcount=move || visible.with(Vec::len) + 1>
                    <thead><tr aria-rowindex="1">{header}</tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <figcaption>
                <span class="table-size">
                    {move || {
                        let matching = visible.with(Vec::len);
                        let whole = match &elided {
                            Some(whole) => format!("{size} shown, of {whole}"),
                            None => size.clone(),
                        };
                        if matching == total_rows {
                            whole
                        } else {
                            format!("{matching} of {total_rows} rows match · {whole}")
                        }
                    }}
                </span>
                <span class="cell-actions js-only">
                    <input
                        type="search"
                        class="table-filter"
                        aria-label="Filter rows"
                        placeholder="Filter rows"
                        prop:value=move || filter.get()
                        on:input=move |ev| filter.set(event_target_value(&ev))
                    />
                    <button
                        type="button"
                        on:click=move |_| {
                            copy_text(&to_tsv(&shown()));
                            copied.set(true);
                        }
                    >
                        {move || if copied.get() { "Copied" } else { "Copy table" }}
                    </button>
                    <button
                        type="button"
                        on:click=move |_| {
                            let csv = to_csv(&shown());
                            save_as(&file, &data_url("text/csv;charset=utf-8", csv.as_bytes()));
                        }
                    >
                        "Download CSV"
                    </button>
                </span>
            </figcaption>
        </figure>
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_headers_index_and_values_escaped() {
        let table = Table {
            columns: vec!["".into(), "name".into(), "units".into()],
            index_columns: 1,
            rows: vec![vec!["0".into(), "<b>x</b>".into(), "3".into()]],
            elided: Some("1000 rows × 2 columns".into()),
        };
        let html = Owner::new()
            .with(|| view! { <TableView table name="c1".to_string() index=0/> }.to_html());
        assert!(html.contains(r#"<th scope="row">0</th>"#), "{html}");
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<b>x"), "{html}");
        // The number column is marked for right alignment, the text one not.
        assert!(html.contains(r#"<td class="num">3</td>"#), "{html}");
        assert!(
            html.contains(r#"<span class="visually-hidden">index</span>"#),
            "{html}"
        );
        assert!(
            html.contains("1 row × 2 columns shown, of 1000 rows × 2 columns"),
            "{html}"
        );
        assert!(
            html.contains(r#"role="region""#) && html.contains(r#"tabindex="0""#),
            "{html}"
        );
    }
}
