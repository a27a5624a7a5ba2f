//! The files the data tasks are about, generated from fixed seeds so they
//! are the same on every machine and every run, and the sums the answers
//! about them are computed with.

use std::collections::BTreeMap;

/// A small deterministic generator (64-bit LCG), so the files are the same
/// on every machine and every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub(super) const REGIONS: [&str; 4] = ["North", "South", "East", "West"];
pub(super) const PRODUCTS: [(&str, f64); 3] = [("Widget", 4.5), ("Gadget", 12.0), ("Gizmo", 27.5)];
pub(super) const MONTHS: [&str; 6] = ["January", "February", "March", "April", "May", "June"];

/// One row of sales.csv.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sale {
    pub(super) date: String,
    pub(super) month: usize,
    pub(super) region: &'static str,
    pub(super) product: &'static str,
    pub(super) units: u32,
    pub(super) price: f64,
}

impl Sale {
    pub(super) fn revenue(&self) -> f64 {
        f64::from(self.units) * self.price
    }
}

pub(super) fn sum_by<K: Ord + Clone>(
    sales: &[Sale],
    key: impl Fn(&Sale) -> K,
    value: impl Fn(&Sale) -> f64,
) -> BTreeMap<K, f64> {
    let mut totals = BTreeMap::new();
    for s in sales {
        *totals.entry(key(s)).or_insert(0.0) += value(s);
    }
    totals
}

pub(super) fn arg_max<K: Clone>(totals: &BTreeMap<K, f64>) -> Option<K> {
    totals
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, _)| k.clone())
}

/// 48 sales rows, January to June 2024. The seed is the first one for which
/// the region with the largest single sale is not the region with the
/// largest total, and the top month is clear: the mistake of taking the
/// largest row instead of the largest group then gives a wrong answer.
pub(super) fn sales() -> Vec<Sale> {
    for seed in 1.. {
        let mut rng = Rng(seed);
        let rows: Vec<Sale> = (0..48)
            .map(|i| {
                let month = i % 6;
                let (product, base) = PRODUCTS[rng.below(3) as usize];
                let cents = (base * 100.0) as u64 + rng.below(200);
                Sale {
                    date: format!("2024-{:02}-{:02}", month + 1, 1 + rng.below(28)),
                    month,
                    region: REGIONS[rng.below(4) as usize],
                    product,
                    units: 1 + rng.below(60) as u32,
                    price: cents as f64 / 100.0,
                }
            })
            .collect();
        let by_region = sum_by(&rows, |s| s.region, Sale::revenue);
        let top_row = rows
            .iter()
            .max_by(|a, b| a.revenue().total_cmp(&b.revenue()))
            .map(|s| s.region);
        let mut months: Vec<f64> = sum_by(&rows, |s| s.month, Sale::revenue)
            .into_values()
            .collect();
        months.sort_by(f64::total_cmp);
        let clear = months.len() == 6 && months[5] - months[4] > 50.0;
        if top_row != arg_max(&by_region) && clear {
            return rows;
        }
    }
    unreachable!("the seeds are endless")
}

pub(super) fn sales_csv(rows: &[Sale]) -> Vec<u8> {
    let mut out = String::from("date,region,product,units,price\n");
    for s in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.2}\n",
            s.date, s.region, s.product, s.units, s.price
        ));
    }
    out.into_bytes()
}

/// One row of customers.csv.
pub(super) struct Customer {
    pub(super) id: u32,
    pub(super) name: &'static str,
    pub(super) country: &'static str,
}

const CUSTOMERS: [(&str, &str); 10] = [
    ("Ada Byron", "Germany"),
    ("Bo Chen", "France"),
    ("Cy Diaz", "Germany"),
    ("Di Evans", "Spain"),
    ("Ed Fox", "France"),
    ("Flo Gray", "Germany"),
    ("Gus Hill", "Italy"),
    ("Hal Ito", "Spain"),
    ("Ivy Jones", "Italy"),
    ("Jo Kim", "France"),
];

/// customers.csv and orders.csv, and each order's (customer, amount).
pub(super) fn shop() -> (Vec<Customer>, Vec<(u32, u32, f64)>) {
    let customers: Vec<Customer> = CUSTOMERS
        .iter()
        .enumerate()
        .map(|(i, (name, country))| Customer {
            id: 101 + i as u32,
            name,
            country,
        })
        .collect();
    let mut rng = Rng(7);
    let orders = (0..40)
        .map(|i| {
            let customer = 101 + rng.below(10) as u32;
            let amount = (500 + rng.below(30_000)) as f64 / 100.0;
            (5001 + i, customer, amount)
        })
        .collect();
    (customers, orders)
}

pub(super) fn customers_csv(customers: &[Customer]) -> Vec<u8> {
    let mut out = String::from("customer_id,name,country\n");
    for c in customers {
        out.push_str(&format!("{},{},{}\n", c.id, c.name, c.country));
    }
    out.into_bytes()
}

pub(super) fn orders_csv(orders: &[(u32, u32, f64)]) -> Vec<u8> {
    let mut out = String::from("order_id,customer_id,amount\n");
    for (id, customer, amount) in orders {
        out.push_str(&format!("{id},{customer},{amount:.2}\n"));
    }
    out.into_bytes()
}

/// One record of employees.json.
pub(super) struct Employee {
    pub(super) name: String,
    pub(super) department: &'static str,
    pub(super) salary: u32,
    pub(super) start: String,
}

pub(super) fn employees() -> Vec<Employee> {
    let first = [
        "Ana", "Ben", "Cara", "Dev", "Eli", "Fay", "Gil", "Hana", "Ian", "June",
    ];
    let last = ["Ng", "Ortiz", "Park", "Quinn"];
    let departments = ["Engineering", "Sales", "Support", "Finance"];
    let mut rng = Rng(11);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    while out.len() < 20 {
        let name = format!(
            "{} {}",
            first[rng.below(10) as usize],
            last[rng.below(4) as usize]
        );
        if !seen.insert(name.clone()) {
            continue;
        }
        out.push(Employee {
            name,
            department: departments[rng.below(4) as usize],
            salary: 40_000 + 500 * rng.below(160) as u32,
            start: format!(
                "{}-{:02}-{:02}",
                2012 + rng.below(12),
                1 + rng.below(12),
                1 + rng.below(28)
            ),
        });
    }
    out
}

pub(super) fn employees_json(employees: &[Employee]) -> Vec<u8> {
    let records: Vec<serde_json::Value> = employees
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name, "department": e.department,
                "salary": e.salary, "start_date": e.start,
            })
        })
        .collect();
    serde_json::to_vec_pretty(&records).unwrap_or_default()
}

/// One line of server.log.
pub(super) struct LogLine {
    pub(super) level: &'static str,
    pub(super) ip: String,
    pub(super) status: u16,
    pub(super) ms: u32,
}

pub(super) fn log_lines() -> Vec<LogLine> {
    let mut rng = Rng(23);
    (0..200)
        .map(|_| {
            let status = match rng.below(20) {
                0..=14 => 200,
                15..=16 => 404,
                _ => 500,
            };
            LogLine {
                level: match status {
                    500 => "ERROR",
                    404 => "WARN",
                    _ => "INFO",
                },
                // A few addresses, one of them clearly busiest.
                ip: format!("10.0.0.{}", [1, 2, 3, 4, 5, 5, 5, 6][rng.below(8) as usize]),
                status,
                ms: 5 + rng.below(400) as u32,
            }
        })
        .collect()
}

pub(super) fn server_log(lines: &[LogLine]) -> Vec<u8> {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(&format!(
            "2025-01-03T{:02}:{:02}:{:02} {} {} GET /api/item/{} {} {}ms\n",
            10 + i / 60,
            i % 60,
            (i * 7) % 60,
            l.level,
            l.ip,
            i % 17,
            l.status,
            l.ms
        ));
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sales_data_punishes_the_largest_row_mistake() {
        let rows = sales();
        assert_eq!(rows.len(), 48);
        assert_eq!(rows, sales(), "the same rows every time");
        let top_row = rows
            .iter()
            .max_by(|a, b| a.revenue().total_cmp(&b.revenue()))
            .unwrap();
        let by_region = sum_by(&rows, |s| s.region, Sale::revenue);
        assert_ne!(Some(top_row.region), arg_max(&by_region));
    }
}
