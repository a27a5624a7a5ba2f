//! The tasks about sales.csv, each answer computed from its rows.

use super::data::{MONTHS, PRODUCTS, REGIONS, Sale, arg_max, sales, sales_csv, sum_by};
use super::{Expect, Task, Turn, number, round, task, text, turn};

/// sales.csv's rows, generated once for all of its tasks.
pub(super) struct Sales {
    rows: Vec<Sale>,
}

impl Sales {
    pub(super) fn generate() -> Self {
        Self { rows: sales() }
    }

    fn task(&self, id: &str, category: &'static str, turns: Vec<Turn>) -> Task {
        let files = vec![("sales.csv".to_string(), sales_csv(&self.rows))];
        task(id, category, files, turns)
    }

    /// Questions about the rows: sums and tops by group, a filter, a mean,
    /// a median.
    pub(super) fn questions(&self) -> Vec<Task> {
        let rows = &self.rows;
        let mut tasks = Vec::new();
        let by_region = sum_by(rows, |s| s.region, Sale::revenue);
        let top_region = arg_max(&by_region).unwrap_or("North");
        let others: Vec<&str> = REGIONS
            .iter()
            .copied()
            .filter(|r| *r != top_region)
            .collect();
        tasks.push(self.task(
            "csv-top-region",
            "data",
            vec![turn(
                "Using the uploaded sales.csv, which region has the largest total revenue (units times price)?",
                text(&[top_region], &others),
            )],
        ));
        let by_month = sum_by(rows, |s| s.month, Sale::revenue);
        let top_month = arg_max(&by_month).unwrap_or(0);
        let month_names = |m: usize| {
            vec![
                MONTHS[m].to_string(),
                format!("2024-{:02}", m + 1),
                MONTHS[m][..3].to_string(),
            ]
        };
        let wrong_months: Vec<String> = (0..6)
            .filter(|m| *m != top_month)
            .flat_map(month_names)
            .collect();
        tasks.push(self.task(
            "csv-top-month",
            "data",
            vec![turn(
                "In sales.csv, what is the total revenue (units times price) per month, and which month had the highest?",
                Expect::Text {
                    right: month_names(top_month),
                    wrong: wrong_months,
                },
            )],
        ));
        let big = rows.iter().filter(|s| s.units > 40).count();
        tasks.push(self.task(
            "csv-filter-count",
            "data",
            vec![turn(
                "In sales.csv, how many rows have more than 40 units?",
                number(big as f64),
            )],
        ));
        let gadgets: Vec<f64> = rows
            .iter()
            .filter(|s| s.product == "Gadget")
            .map(|s| s.price)
            .collect();
        let mean_gadget = gadgets.iter().sum::<f64>() / gadgets.len().max(1) as f64;
        tasks.push(self.task(
            "csv-mean-price",
            "data",
            vec![turn(
                "In sales.csv, what is the average price of a Gadget, rounded to 2 decimals?",
                number(round(mean_gadget, 2)),
            )],
        ));
        let east_units: u32 = rows
            .iter()
            .filter(|s| s.region == "East")
            .map(|s| s.units)
            .sum();
        tasks.push(self.task(
            "csv-sum-filter",
            "data",
            vec![turn(
                "How many units were sold in the East region in total, according to sales.csv?",
                number(f64::from(east_units)),
            )],
        ));
        let mut units: Vec<u32> = rows.iter().map(|s| s.units).collect();
        units.sort_unstable();
        let median = f64::from(units[23] + units[24]) / 2.0;
        tasks.push(self.task(
            "csv-median",
            "data",
            vec![turn(
                "What is the median number of units per row in sales.csv?",
                number(median),
            )],
        ));
        let total_revenue: f64 = rows.iter().map(Sale::revenue).sum();
        tasks.push(self.task(
            "csv-total",
            "data",
            vec![turn(
                "What is the total revenue (units times price) over all of sales.csv, rounded to 2 decimals?",
                number(round(total_revenue, 2)),
            )],
        ));
        let by_product = sum_by(rows, |s| s.product, |s| f64::from(s.units));
        let top_product = arg_max(&by_product).unwrap_or("Widget");
        let other_products: Vec<&str> = PRODUCTS
            .iter()
            .map(|p| p.0)
            .filter(|p| *p != top_product)
            .collect();
        tasks.push(self.task(
            "csv-top-product",
            "data",
            vec![turn(
                "Which product sold the most units in total in sales.csv?",
                text(&[top_product], &other_products),
            )],
        ));
        tasks
    }

    /// A follow-up on a DataFrame the first turn loaded.
    pub(super) fn follow_up(&self) -> Vec<Task> {
        let units: u32 = self.rows.iter().map(|s| s.units).sum();
        vec![self.task(
            "follow-dataframe",
            "follow-up",
            vec![
                turn(
                    "Load sales.csv into a DataFrame called df and print how many rows it has.",
                    number(48.0),
                ),
                turn(
                    "What is the total of the units column?",
                    number(f64::from(units)),
                ),
            ],
        )]
    }

    /// A chart of the rows.
    pub(super) fn plot(&self) -> Vec<Task> {
        vec![self.task(
            "plot-sales",
            "plot",
            vec![turn(
                "Draw a bar chart of the total units per region in sales.csv.",
                Expect::Image,
            )],
        )]
    }
}
