//! The tasks about server.log, each answer computed from the generated
//! lines.

use std::collections::BTreeMap;

use super::data::{arg_max, log_lines, server_log};
use super::{Task, number, round, task, text, turn};

pub(super) fn tasks() -> Vec<Task> {
    let lines = log_lines();
    let files = || vec![("server.log".to_string(), server_log(&lines))];
    let errors = lines.iter().filter(|l| l.level == "ERROR").count();
    let mut tasks = vec![task(
        "log-errors",
        "data",
        files(),
        vec![turn(
            "How many ERROR lines are in server.log?",
            number(errors as f64),
        )],
    )];
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
    tasks.push(task(
        "log-busiest-ip",
        "data",
        files(),
        vec![turn(
            "In server.log, which IP address made the most requests?",
            text(&[&busiest], &quiet),
        )],
    ));
    let slow: Vec<f64> = lines
        .iter()
        .filter(|l| l.status == 500)
        .map(|l| f64::from(l.ms))
        .collect();
    let mean_slow = slow.iter().sum::<f64>() / slow.len().max(1) as f64;
    tasks.push(task(
        "log-mean-ms",
        "data",
        files(),
        vec![turn(
            "In server.log, what is the average response time in milliseconds of the requests with status 500, rounded to 1 decimal?",
            number(round(mean_slow, 1)),
        )],
    ));
    tasks
}
