//! The server's own account of where a run's time goes, read from its
//! `/metrics` before and after a pass: `runcell_run_step_seconds` (each step
//! of a one-shot run in the jail, by whether the jail was made ahead) and
//! `runcell_api_request_duration_seconds` (the whole request, from its
//! headers to its response's head).

use std::collections::BTreeMap;

use crate::{BenchError, fail};

/// The request route whose time is the whole of a run's.
const RUN_ROUTE: &str = "/v1/code_interpreter/run";

/// The steps, in the order a run takes them.
pub const STEPS: [&str; 4] = ["jail", "hand_over", "process", "ending"];

/// Sums and counts of the series that matter, by series and labels.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// `(series, labels)` → (sum of seconds, count).
    totals: BTreeMap<(String, String), (f64, f64)>,
}

impl Scrape {
    pub async fn read(http: &reqwest::Client, url: &str, key: &str) -> Result<Self, BenchError> {
        let text = http
            .get(format!("{url}/metrics"))
            .bearer_auth(key)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(fail)?
            .text()
            .await
            .map_err(fail)?;
        Ok(Self::parse(&text))
    }

    /// The `_sum` and `_count` lines of the run-step and API-time series.
    fn parse(text: &str) -> Self {
        let mut totals: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for line in text.lines() {
            let Some((name_labels, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match name_labels.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (name_labels, ""),
            };
            for series in [
                "runcell_run_step_seconds",
                "runcell_api_request_duration_seconds",
            ] {
                let Some(rest) = name.strip_prefix(series) else {
                    continue;
                };
                let entry = totals
                    .entry((series.to_string(), labels.to_string()))
                    .or_default();
                match rest {
                    "_sum" => entry.0 = value,
                    "_count" => entry.1 = value,
                    _ => {}
                }
            }
        }
        Self { totals }
    }

    /// What happened between `before` and `self`: per series and labels,
    /// (seconds, count).
    fn since(&self, before: &Self) -> BTreeMap<(String, String), (f64, f64)> {
        self.totals
            .iter()
            .map(|(key, (sum, count))| {
                let (sum0, count0) = before.totals.get(key).copied().unwrap_or_default();
                (key.clone(), (sum - sum0, count - count0))
            })
            .filter(|(_, (_, count))| *count > 0.0)
            .collect()
    }
}

/// One pass's steps: the mean milliseconds of each, per run.
#[derive(Debug, Default)]
pub struct StepReport {
    /// Runs the server answered under the run route.
    pub requests: f64,
    /// Mean request time, ms.
    pub request_ms: f64,
    /// Per step: mean ms per run that took it, and how many did.
    pub steps: Vec<(&'static str, f64, f64)>,
    /// Runs whose jail was made ahead.
    pub warm: f64,
    /// Runs whose jail was made on the request.
    pub made: f64,
}

impl StepReport {
    pub fn between(before: &Scrape, after: &Scrape) -> Self {
        let delta = after.since(before);
        let mut report = Self::default();
        for ((series, labels), (sum, count)) in &delta {
            if series == "runcell_api_request_duration_seconds"
                && labels.contains(&format!("route=\"{RUN_ROUTE}\""))
            {
                report.requests += count;
                report.request_ms += sum * 1000.0;
            }
        }
        if report.requests > 0.0 {
            report.request_ms /= report.requests;
        }
        for step in STEPS {
            let (mut sum, mut count) = (0.0, 0.0);
            for ((series, labels), (s, c)) in &delta {
                if series == "runcell_run_step_seconds"
                    && labels.contains(&format!("step=\"{step}\""))
                {
                    sum += s;
                    count += c;
                    if step == "jail" {
                        if labels.contains("jail=\"warm\"") {
                            report.warm += c;
                        } else {
                            report.made += c;
                        }
                    }
                }
            }
            if count > 0.0 {
                report.steps.push((step, sum * 1000.0 / count, count));
            }
        }
        report
    }

    /// The request's time that no step of the run accounts for: HTTP, the
    /// key's check and admission, the answer's encoding.
    pub fn outside_ms(&self) -> f64 {
        let runs = self.steps.iter().map(|(_, ms, n)| ms * n).sum::<f64>();
        if self.requests > 0.0 {
            self.request_ms - runs / self.requests
        } else {
            0.0
        }
    }

    /// One line: the request's mean, what is outside the run, and each step.
    pub fn line(&self) -> String {
        let mut line = format!(
            "request {:.1} ms = http+admit {:.1}",
            self.request_ms,
            self.outside_ms()
        );
        for (step, ms, _) in &self.steps {
            line.push_str(&format!(" + {step} {ms:.1}"));
        }
        line.push_str(&format!(
            "  (jails: {} warm, {} made)",
            self.warm, self.made
        ));
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_is_the_difference_of_two_scrapes_by_step() {
        let before = Scrape::parse(
            "# TYPE runcell_run_step_seconds histogram\n\
             runcell_run_step_seconds_bucket{step=\"process\",jail=\"warm\",le=\"0.01\"} 1\n\
             runcell_run_step_seconds_sum{step=\"process\",jail=\"warm\"} 0.010\n\
             runcell_run_step_seconds_count{step=\"process\",jail=\"warm\"} 1\n\
             runcell_api_request_duration_seconds_sum{route=\"/v1/code_interpreter/run\"} 0.012\n\
             runcell_api_request_duration_seconds_count{route=\"/v1/code_interpreter/run\"} 1\n",
        );
        let after = Scrape::parse(
            "runcell_run_step_seconds_sum{step=\"process\",jail=\"warm\"} 0.030\n\
             runcell_run_step_seconds_count{step=\"process\",jail=\"warm\"} 3\n\
             runcell_run_step_seconds_sum{step=\"jail\",jail=\"warm\"} 0.002\n\
             runcell_run_step_seconds_count{step=\"jail\",jail=\"warm\"} 1\n\
             runcell_run_step_seconds_sum{step=\"jail\",jail=\"made\"} 0.008\n\
             runcell_run_step_seconds_count{step=\"jail\",jail=\"made\"} 1\n\
             runcell_api_request_duration_seconds_sum{route=\"/v1/code_interpreter/run\"} 0.040\n\
             runcell_api_request_duration_seconds_count{route=\"/v1/code_interpreter/run\"} 3\n\
             runcell_api_request_duration_seconds_sum{route=\"/v1/sessions\"} 9\n\
             runcell_api_request_duration_seconds_count{route=\"/v1/sessions\"} 9\n",
        );
        let report = StepReport::between(&before, &after);
        assert_eq!(report.requests, 2.0);
        assert!((report.request_ms - 14.0).abs() < 1e-9);
        assert_eq!(report.steps.len(), 2);
        let (step, ms, runs) = report.steps[0];
        assert_eq!((step, runs), ("jail", 2.0));
        assert!((ms - 5.0).abs() < 1e-9);
        let (step, ms, runs) = report.steps[1];
        assert_eq!((step, runs), ("process", 2.0));
        assert!((ms - 10.0).abs() < 1e-9);
        assert_eq!((report.warm, report.made), (1.0, 1.0));
        // 14 ms a request, 5 + 10 in the run's steps.
        assert!((report.outside_ms() + 1.0).abs() < 1e-9);
    }
}
