//! The tasks about customers.csv joined with orders.csv, each answer
//! computed from the generated customers and orders.

use std::collections::BTreeMap;

use super::data::{arg_max, customers_csv, orders_csv, shop};
use super::{Task, number, round, task, text, turn};

pub(super) fn tasks() -> Vec<Task> {
    let (customers, orders) = shop();
    let files = || {
        vec![
            ("customers.csv".to_string(), customers_csv(&customers)),
            ("orders.csv".to_string(), orders_csv(&orders)),
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
    let mut tasks = vec![task(
        "join-country-total",
        "data",
        files(),
        vec![turn(
            "Join orders.csv with customers.csv on customer_id. What is the total order amount of customers in Germany, rounded to 2 decimals?",
            number(round(germany, 2)),
        )],
    )];
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
    tasks.push(task(
        "join-top-customer",
        "data",
        files(),
        vec![turn(
            "Using orders.csv and customers.csv, which customer (by name) spent the most in total?",
            text(&[top_spender], &other_names),
        )],
    ));
    tasks
}
