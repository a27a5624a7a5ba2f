//! The agent benchmark's tasks: questions with known answers, and the files
//! they are asked about. The files are generated here from a fixed seed and
//! every answer about them is computed here from the same rows, so nothing
//! is typed in by hand that could drift from the data.

use std::collections::BTreeMap;

/// What a turn's result must show to count as right.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// This number appears in what the program printed (as a figure,
    /// rounded to the precision either side gives).
    Number(f64),
    /// The last printed line that names any of `right` or `wrong` names one
    /// of `right` and none of `wrong` (case-insensitive): the answer line,
    /// not a table that lists every candidate.
    Text {
        right: Vec<String>,
        wrong: Vec<String>,
    },
    /// An image was shown.
    Image,
}

#[derive(Clone, Debug)]
pub struct Turn {
    pub question: String,
    pub expect: Expect,
}

#[derive(Clone, Debug)]
pub struct Task {
    pub id: String,
    pub category: &'static str,
    /// Files uploaded before the first question: (name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    pub turns: Vec<Turn>,
}

fn turn(question: &str, expect: Expect) -> Turn {
    Turn {
        question: question.to_string(),
        expect,
    }
}

fn number(n: f64) -> Expect {
    Expect::Number(n)
}

fn text(right: &[&str], wrong: &[&str]) -> Expect {
    Expect::Text {
        right: right.iter().map(|s| s.to_string()).collect(),
        wrong: wrong.iter().map(|s| s.to_string()).collect(),
    }
}

fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

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

const REGIONS: [&str; 4] = ["North", "South", "East", "West"];
const PRODUCTS: [(&str, f64); 3] = [("Widget", 4.5), ("Gadget", 12.0), ("Gizmo", 27.5)];
const MONTHS: [&str; 6] = ["January", "February", "March", "April", "May", "June"];

/// One row of sales.csv.
#[derive(Clone, Debug, PartialEq)]
pub struct Sale {
    pub date: String,
    pub month: usize,
    pub region: &'static str,
    pub product: &'static str,
    pub units: u32,
    pub price: f64,
}

impl Sale {
    fn revenue(&self) -> f64 {
        f64::from(self.units) * self.price
    }
}

fn sum_by<K: Ord + Clone>(
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

fn arg_max<K: Clone>(totals: &BTreeMap<K, f64>) -> Option<K> {
    totals
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, _)| k.clone())
}

/// 48 sales rows, January to June 2024. The seed is the first one for which
/// the region with the largest single sale is not the region with the
/// largest total, and the top month is clear: the mistake of taking the
/// largest row instead of the largest group then gives a wrong answer.
pub fn sales() -> Vec<Sale> {
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

fn sales_csv(rows: &[Sale]) -> Vec<u8> {
    let mut out = String::from("date,region,product,units,price\n");
    for s in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.2}\n",
            s.date, s.region, s.product, s.units, s.price
        ));
    }
    out.into_bytes()
}

struct Customer {
    id: u32,
    name: &'static str,
    country: &'static str,
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
fn shop() -> (Vec<Customer>, Vec<(u32, u32, f64)>) {
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

struct Employee {
    name: String,
    department: &'static str,
    salary: u32,
    start: String,
}

fn employees() -> Vec<Employee> {
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

fn employees_json(employees: &[Employee]) -> Vec<u8> {
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

struct LogLine {
    level: &'static str,
    ip: String,
    status: u16,
    ms: u32,
}

fn log_lines() -> Vec<LogLine> {
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

fn server_log(lines: &[LogLine]) -> Vec<u8> {
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

/// Every task, in a fixed order.
pub fn all() -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut add =
        |id: &str, category: &'static str, files: Vec<(String, Vec<u8>)>, turns: Vec<Turn>| {
            tasks.push(Task {
                id: id.to_string(),
                category,
                files,
                turns,
            });
        };
    let none = Vec::new;

    // Arithmetic.
    add(
        "sum-squares",
        "arithmetic",
        none(),
        vec![turn(
            "What is the sum of the squares of the integers from 1 to 50?",
            number(42925.0),
        )],
    );
    add(
        "two-pow-100",
        "arithmetic",
        none(),
        vec![turn(
            "What is 2 to the power of 100?",
            text(&["1267650600228229401496703205376"], &[]),
        )],
    );
    add(
        "factorial-17",
        "arithmetic",
        none(),
        vec![turn("Compute 17 factorial.", number(355_687_428_096_000.0))],
    );
    add(
        "compound-interest",
        "arithmetic",
        none(),
        vec![turn(
            "I invest 1000 dollars at 5% interest compounded yearly. How much do I have after 10 years, rounded to cents?",
            number(1628.89),
        )],
    );
    add(
        "fibonacci-30",
        "arithmetic",
        none(),
        vec![turn(
            "What is the 30th Fibonacci number, if the first two are 1 and 1?",
            number(832_040.0),
        )],
    );
    add(
        "primes-below-1000",
        "arithmetic",
        none(),
        vec![turn(
            "How many prime numbers are there below 1000?",
            number(168.0),
        )],
    );
    add(
        "gcd",
        "arithmetic",
        none(),
        vec![turn(
            "What is the greatest common divisor of 1071 and 462?",
            number(21.0),
        )],
    );
    add(
        "percent-of",
        "arithmetic",
        none(),
        vec![turn("What is 15% of 2480?", number(372.0))],
    );
    add(
        "fahrenheit",
        "arithmetic",
        none(),
        vec![turn(
            "Convert 100 degrees Fahrenheit to Celsius, rounded to 2 decimals.",
            number(37.78),
        )],
    );
    add(
        "leap-seconds",
        "arithmetic",
        none(),
        vec![turn(
            "How many seconds are there in a leap year?",
            number(31_622_400.0),
        )],
    );
    add(
        "sqrt-two",
        "arithmetic",
        none(),
        vec![turn(
            "What is the square root of 2, to 6 decimal places?",
            number(round(std::f64::consts::SQRT_2, 6)),
        )],
    );

    // Strings.
    add(
        "strawberry",
        "strings",
        none(),
        vec![turn(
            "How many r's are in the word strawberry?",
            number(3.0),
        )],
    );
    add(
        "reverse",
        "strings",
        none(),
        vec![turn(
            "Reverse the string 'runcell'.",
            text(&["llecnur"], &[]),
        )],
    );
    add(
        "palindrome",
        "strings",
        none(),
        vec![turn(
            "Is 'A man, a plan, a canal: Panama' a palindrome if we ignore case, spaces and punctuation?",
            text(
                &["true", "yes", "is a palindrome"],
                &["false", "not a palindrome"],
            ),
        )],
    );
    add(
        "vowels",
        "strings",
        none(),
        vec![turn(
            "How many vowels are in 'The quick brown fox jumps over the lazy dog'?",
            number(11.0),
        )],
    );
    add(
        "caesar",
        "strings",
        none(),
        vec![turn(
            "Encode 'hello world' with a Caesar shift of 3.",
            text(&["khoor zruog"], &[]),
        )],
    );
    add(
        "word-count",
        "strings",
        none(),
        vec![turn(
            "How many words are in the sentence 'the cat and the hat sat on the mat with the bat'?",
            number(12.0),
        )],
    );
    add(
        "most-common-letter",
        "strings",
        none(),
        vec![turn(
            "Which letter appears most often in the word 'bookkeeper'?",
            text(
                &["'e'", "\"e\"", ": e", " e "],
                &["'o'", "'k'", ": o", ": k"],
            ),
        )],
    );

    // Dates.
    add(
        "days-between",
        "dates",
        none(),
        vec![turn(
            "How many days are there from 2024-01-01 to 2024-12-25?",
            number(359.0),
        )],
    );
    add(
        "weekday-2000",
        "dates",
        none(),
        vec![turn(
            "What day of the week was 1 January 2000?",
            text(
                &["saturday"],
                &[
                    "sunday",
                    "monday",
                    "tuesday",
                    "wednesday",
                    "thursday",
                    "friday",
                ],
            ),
        )],
    );
    add(
        "plus-100-days",
        "dates",
        none(),
        vec![turn(
            "What date is 100 days after 2025-03-01?",
            text(&["2025-06-09", "june 9", "9 june"], &[]),
        )],
    );
    add(
        "leap-2100",
        "dates",
        none(),
        vec![turn(
            "Is the year 2100 a leap year?",
            text(
                &["false", "not a leap year", "no"],
                &["true", "is a leap year", "yes"],
            ),
        )],
    );
    add(
        "mondays-2025",
        "dates",
        none(),
        vec![turn(
            "How many Mondays are there in the year 2025?",
            number(52.0),
        )],
    );

    // Data: one CSV.
    let rows = sales();
    let csv = || vec![("sales.csv".to_string(), sales_csv(&rows))];
    let by_region = sum_by(&rows, |s| s.region, Sale::revenue);
    let top_region = arg_max(&by_region).unwrap_or("North");
    let others: Vec<&str> = REGIONS
        .iter()
        .copied()
        .filter(|r| *r != top_region)
        .collect();
    add(
        "csv-top-region",
        "data",
        csv(),
        vec![turn(
            "Using the uploaded sales.csv, which region has the largest total revenue (units times price)?",
            text(&[top_region], &others),
        )],
    );
    let by_month = sum_by(&rows, |s| s.month, Sale::revenue);
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
    add(
        "csv-top-month",
        "data",
        csv(),
        vec![turn(
            "In sales.csv, what is the total revenue (units times price) per month, and which month had the highest?",
            Expect::Text {
                right: month_names(top_month),
                wrong: wrong_months,
            },
        )],
    );
    let big = rows.iter().filter(|s| s.units > 40).count();
    add(
        "csv-filter-count",
        "data",
        csv(),
        vec![turn(
            "In sales.csv, how many rows have more than 40 units?",
            number(big as f64),
        )],
    );
    let gadgets: Vec<f64> = rows
        .iter()
        .filter(|s| s.product == "Gadget")
        .map(|s| s.price)
        .collect();
    let mean_gadget = gadgets.iter().sum::<f64>() / gadgets.len().max(1) as f64;
    add(
        "csv-mean-price",
        "data",
        csv(),
        vec![turn(
            "In sales.csv, what is the average price of a Gadget, rounded to 2 decimals?",
            number(round(mean_gadget, 2)),
        )],
    );
    let east_units: u32 = rows
        .iter()
        .filter(|s| s.region == "East")
        .map(|s| s.units)
        .sum();
    add(
        "csv-sum-filter",
        "data",
        csv(),
        vec![turn(
            "How many units were sold in the East region in total, according to sales.csv?",
            number(f64::from(east_units)),
        )],
    );
    let mut units: Vec<u32> = rows.iter().map(|s| s.units).collect();
    units.sort_unstable();
    let median = f64::from(units[23] + units[24]) / 2.0;
    add(
        "csv-median",
        "data",
        csv(),
        vec![turn(
            "What is the median number of units per row in sales.csv?",
            number(median),
        )],
    );
    let total_revenue: f64 = rows.iter().map(Sale::revenue).sum();
    add(
        "csv-total",
        "data",
        csv(),
        vec![turn(
            "What is the total revenue (units times price) over all of sales.csv, rounded to 2 decimals?",
            number(round(total_revenue, 2)),
        )],
    );
    let by_product = sum_by(&rows, |s| s.product, |s| f64::from(s.units));
    let top_product = arg_max(&by_product).unwrap_or("Widget");
    let other_products: Vec<&str> = PRODUCTS
        .iter()
        .map(|p| p.0)
        .filter(|p| *p != top_product)
        .collect();
    add(
        "csv-top-product",
        "data",
        csv(),
        vec![turn(
            "Which product sold the most units in total in sales.csv?",
            text(&[top_product], &other_products),
        )],
    );

    // Data: a join of two files.
    let (customers, orders) = shop();
    let mut customers_csv = String::from("customer_id,name,country\n");
    for c in &customers {
        customers_csv.push_str(&format!("{},{},{}\n", c.id, c.name, c.country));
    }
    let mut orders_csv = String::from("order_id,customer_id,amount\n");
    for (id, customer, amount) in &orders {
        orders_csv.push_str(&format!("{id},{customer},{amount:.2}\n"));
    }
    let shop_files = || {
        vec![
            (
                "customers.csv".to_string(),
                customers_csv.clone().into_bytes(),
            ),
            ("orders.csv".to_string(), orders_csv.clone().into_bytes()),
        ]
    };
    let country = |id: u32| {
        customers
            .iter()
            .find(|c| c.id == id)
            .map_or("", |c| c.country)
    };
    let germany: f64 = orders
        .iter()
        .filter(|o| country(o.1) == "Germany")
        .map(|o| o.2)
        .sum();
    add(
        "join-country-total",
        "data",
        shop_files(),
        vec![turn(
            "Join orders.csv with customers.csv on customer_id. What is the total order amount of customers in Germany, rounded to 2 decimals?",
            number(round(germany, 2)),
        )],
    );
    let mut spent: BTreeMap<&str, f64> = BTreeMap::new();
    for (_, customer, amount) in &orders {
        let name = customers
            .iter()
            .find(|c| c.id == *customer)
            .map_or("", |c| c.name);
        *spent.entry(name).or_insert(0.0) += amount;
    }
    let top_spender = arg_max(&spent).unwrap_or("");
    let other_names: Vec<&str> = customers
        .iter()
        .map(|c| c.name)
        .filter(|n| *n != top_spender)
        .collect();
    add(
        "join-top-customer",
        "data",
        shop_files(),
        vec![turn(
            "Using orders.csv and customers.csv, which customer (by name) spent the most in total?",
            text(&[top_spender], &other_names),
        )],
    );

    // Data: JSON records.
    let staff = employees();
    let json = || vec![("employees.json".to_string(), employees_json(&staff))];
    let engineers: Vec<f64> = staff
        .iter()
        .filter(|e| e.department == "Engineering")
        .map(|e| f64::from(e.salary))
        .collect();
    let mean_engineer = engineers.iter().sum::<f64>() / engineers.len().max(1) as f64;
    add(
        "json-mean-salary",
        "data",
        json(),
        vec![turn(
            "From employees.json, what is the average salary in the Engineering department, rounded to 2 decimals?",
            number(round(mean_engineer, 2)),
        )],
    );
    let early = staff
        .iter()
        .filter(|e| e.start.as_str() < "2020-01-01")
        .count();
    add(
        "json-count-before",
        "data",
        json(),
        vec![turn(
            "In employees.json, how many employees have a start_date before 2020-01-01?",
            number(early as f64),
        )],
    );
    let best_paid = staff
        .iter()
        .max_by_key(|e| e.salary)
        .map_or(String::new(), |e| e.name.clone());
    let rest: Vec<&str> = staff
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| *n != best_paid)
        .collect();
    add(
        "json-top-salary",
        "data",
        json(),
        vec![turn(
            "Who is the highest-paid employee in employees.json?",
            text(&[&best_paid], &rest),
        )],
    );

    // Data: a log file.
    let lines = log_lines();
    let log = || vec![("server.log".to_string(), server_log(&lines))];
    let errors = lines.iter().filter(|l| l.level == "ERROR").count();
    add(
        "log-errors",
        "data",
        log(),
        vec![turn(
            "How many ERROR lines are in server.log?",
            number(errors as f64),
        )],
    );
    let mut per_ip: BTreeMap<String, f64> = BTreeMap::new();
    for l in &lines {
        *per_ip.entry(l.ip.clone()).or_insert(0.0) += 1.0;
    }
    let busiest = arg_max(&per_ip).unwrap_or_default();
    let quiet: Vec<String> = per_ip
        .keys()
        .filter(|ip| **ip != busiest)
        .cloned()
        .collect();
    let quiet: Vec<&str> = quiet.iter().map(String::as_str).collect();
    add(
        "log-busiest-ip",
        "data",
        log(),
        vec![turn(
            "In server.log, which IP address made the most requests?",
            text(&[&busiest], &quiet),
        )],
    );
    let slow: Vec<f64> = lines
        .iter()
        .filter(|l| l.status == 500)
        .map(|l| f64::from(l.ms))
        .collect();
    let mean_slow = slow.iter().sum::<f64>() / slow.len().max(1) as f64;
    add(
        "log-mean-ms",
        "data",
        log(),
        vec![turn(
            "In server.log, what is the average response time in milliseconds of the requests with status 500, rounded to 1 decimal?",
            number(round(mean_slow, 1)),
        )],
    );

    // Follow-ups that depend on the previous turn.
    add(
        "follow-squares",
        "follow-up",
        none(),
        vec![
            turn(
                "Make a list of the squares of the numbers 1 to 10 and print it.",
                number(100.0),
            ),
            turn(
                "Now keep only the even ones and print their sum.",
                number(220.0),
            ),
        ],
    );
    add(
        "follow-product",
        "follow-up",
        none(),
        vec![
            turn(
                "Store 12345 times 6789 in a variable x and print it.",
                number(83_810_205.0),
            ),
            turn("What is x divided by 5?", number(16_762_041.0)),
        ],
    );
    add(
        "follow-primes",
        "follow-up",
        none(),
        vec![
            turn("List the prime numbers below 50.", number(47.0)),
            turn("How many of them are there?", number(15.0)),
        ],
    );
    add(
        "follow-dataframe",
        "follow-up",
        csv(),
        vec![
            turn(
                "Load sales.csv into a DataFrame called df and print how many rows it has.",
                number(48.0),
            ),
            turn(
                "What is the total of the units column?",
                number(f64::from(units.iter().sum::<u32>())),
            ),
        ],
    );
    add(
        "follow-words",
        "follow-up",
        none(),
        vec![
            turn(
                "Split the sentence 'to be or not to be that is the question' into a list of words and print it.",
                text(&["question"], &[]),
            ),
            turn("How many of those words are unique?", number(8.0)),
        ],
    );

    // Plots: an image must be shown.
    add(
        "plot-primes",
        "plot",
        none(),
        vec![turn(
            "Plot the prime numbers below 1000 as a histogram.",
            Expect::Image,
        )],
    );
    add(
        "plot-sales",
        "plot",
        csv(),
        vec![turn(
            "Draw a bar chart of the total units per region in sales.csv.",
            Expect::Image,
        )],
    );
    add(
        "plot-sine",
        "plot",
        none(),
        vec![turn("Plot sin(x) for x from 0 to 2 pi.", Expect::Image)],
    );
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_enough_tasks_of_every_kind_with_unique_ids() {
        let tasks = all();
        assert!(tasks.len() >= 40, "{} tasks", tasks.len());
        let ids: std::collections::BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), tasks.len());
        for category in [
            "arithmetic",
            "strings",
            "dates",
            "data",
            "follow-up",
            "plot",
        ] {
            assert!(tasks.iter().any(|t| t.category == category), "{category}");
        }
        assert!(tasks.iter().any(|t| t.turns.len() > 1));
    }

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
