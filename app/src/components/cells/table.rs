//! A data frame the kernel showed, as a table of the page's own: styled in
//! both themes, scrolled inside its box, sorted by a click on a column's
//! header, copied as tab-separated text or saved as CSV. What is copied
//! or saved is what the kernel showed; nothing is run again.

use leptos::prelude::*;

use super::outputs::data_url;
use crate::components::{copy_text, save_as};
use crate::protocol::Table;
use crate::render::table::{Sort, numeric_columns, order, to_csv, to_tsv};

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
            format!(
                "{} rows × {} columns",
                t.rows.len(),
                t.columns.len() - index_columns
            ),
            t.elided.clone(),
        )
    });
    let file = [String::from("table-"), name, format!("-{}.csv", index + 1)].concat();
    // What Copy and Download take: the rows in the order shown.
    let shown = move || {
        table.with_value(|t| {
            let rows = numeric
                .with_value(|n| order(t, n, sort.get_untracked()))
                .into_iter()
                .map(|r| t.rows[r].clone())
                .collect();
            Table { rows, ..t.clone() }
        })
    };
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

    let rows = move || {
        let shown = table.with_value(|t| numeric.with_value(|n| order(t, n, sort.get())));
        shown
            .into_iter()
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
            .map(|cells| view! { <tr>{cells}</tr> })
            .collect_view()
    };

    view! {
        <figure class="out out-table">
            <div class="table-scroll" tabindex="0" role="region" aria-label=label>
                <table>
                    <thead><tr>{header}</tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <figcaption>
                <span class="table-size">
                    {match elided {
                        Some(whole) => format!("{size} shown, of {whole}"),
                        None => size,
                    }}
                </span>
                <span class="cell-actions js-only">
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
            html.contains("1 rows × 2 columns shown, of 1000 rows × 2 columns"),
            "{html}"
        );
        assert!(
            html.contains(r#"role="region""#) && html.contains(r#"tabindex="0""#),
            "{html}"
        );
    }
}
