//! The tasks about employees.json, each answer computed from the generated
//! records.

use super::data::{employees, employees_json};
use super::{Task, number, round, task, text, turn};

pub(super) fn tasks() -> Vec<Task> {
    let staff = employees();
    let files = || vec![("employees.json".to_string(), employees_json(&staff))];
    let engineers: Vec<f64> = staff
        .iter()
        .filter(|e| e.department == "Engineering")
        .map(|e| f64::from(e.salary))
        .collect();
    let mean_engineer = engineers.iter().sum::<f64>() / engineers.len().max(1) as f64;
    let mut tasks = vec![task(
        "json-mean-salary",
        "data",
        files(),
        vec![turn(
            "From employees.json, what is the average salary in the Engineering department, rounded to 2 decimals?",
            number(round(mean_engineer, 2)),
        )],
    )];
    let early = staff
        .iter()
        .filter(|e| e.start.as_str() < "2020-01-01")
        .count();
    tasks.push(task(
        "json-count-before",
        "data",
        files(),
        vec![turn(
            "In employees.json, how many employees have a start_date before 2020-01-01?",
            number(early as f64),
        )],
    ));
    let best_paid = staff
        .iter()
        .max_by_key(|e| e.salary)
        .map_or(String::new(), |e| e.name.clone());
    let rest: Vec<&str> = staff
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| *n != best_paid)
        .collect();
    tasks.push(task(
        "json-top-salary",
        "data",
        files(),
        vec![turn(
            "Who is the highest-paid employee in employees.json?",
            text(&[&best_paid], &rest),
        )],
    ));
    tasks
}
