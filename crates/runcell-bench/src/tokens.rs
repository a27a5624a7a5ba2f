//! What a question cost the model, in tokens and seconds: the change in the
//! server's `/metrics` counters between two reads (the benches ask one
//! question at a time, so the change is that question's).

use serde::Serialize;

/// The model's work, as counted by the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tokens {
    /// Prompt tokens of the turn's requests...
    pub prompt: f64,
    /// ...of which found already read (the prompt cache).
    pub reused: f64,
    /// Tokens read ahead of the question (after the upload, while typed).
    pub ahead: f64,
    /// Generated.
    pub generated: f64,
    /// Seconds from each request to its first token (reading the prompt,
    /// and waiting for the model), summed.
    pub reading_s: f64,
    /// Seconds from each first token to the request's end, summed.
    pub generating_s: f64,
    /// Seconds spent reading ahead.
    pub ahead_s: f64,
    /// Readings ahead finished.
    pub ahead_done: f64,
}

impl Tokens {
    /// The counters in a Prometheus text page (every backend together).
    pub fn parse(text: &str) -> Self {
        let mut t = Self::default();
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            if !value.is_finite() || value < 0.0 {
                continue;
            }
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let kind = |k: &str| labels.contains(&format!("kind=\"{k}\""));
            let slot = match name {
                "runcell_llm_prompt_tokens_total" if kind("reused") => &mut t.reused,
                "runcell_llm_prompt_tokens_total" if kind("computed") => &mut t.prompt,
                "runcell_llm_tokens_total" if kind("completion") => &mut t.generated,
                "runcell_llm_prefill_tokens_total" if kind("computed") => &mut t.ahead,
                "runcell_llm_time_to_first_token_seconds_sum" => &mut t.reading_s,
                "runcell_llm_generation_seconds_sum" => &mut t.generating_s,
                "runcell_llm_prefill_seconds_sum" => &mut t.ahead_s,
                "runcell_llm_prefill_seconds_count" => &mut t.ahead_done,
                _ => continue,
            };
            *slot += value;
        }
        // `prompt` counted the computed part: the whole is both.
        t.prompt += t.reused;
        t
    }

    /// What grew from `before` to `self`.
    pub fn since(&self, before: &Self) -> Self {
        let d = |a: f64, b: f64| (a - b).max(0.0);
        Self {
            prompt: d(self.prompt, before.prompt),
            reused: d(self.reused, before.reused),
            ahead: d(self.ahead, before.ahead),
            generated: d(self.generated, before.generated),
            reading_s: d(self.reading_s, before.reading_s),
            generating_s: d(self.generating_s, before.generating_s),
            ahead_s: d(self.ahead_s, before.ahead_s),
            ahead_done: d(self.ahead_done, before.ahead_done),
        }
    }

    /// The share of prompt tokens reused, in percent.
    pub fn reused_pct(&self) -> f64 {
        100.0 * self.reused / self.prompt.max(1.0)
    }

    /// One line for a question's report.
    pub fn summary(&self) -> String {
        format!(
            "prompt {:.0} ({:.0}% reused) ahead {:.0} generated {:.0}; reading {:.1}s generating {:.1}s",
            self.prompt,
            self.reused_pct(),
            self.ahead,
            self.generated,
            self.reading_s,
            self.generating_s
        )
    }
}

/// The server's counters now; `None` when `/metrics` cannot be read.
pub async fn read(http: &reqwest::Client, base: &str) -> Option<Tokens> {
    let response = http.get(format!("{base}/metrics")).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    Some(Tokens::parse(&response.text().await.ok()?))
}

/// Waits (up to `patience`) until the server has finished one more reading
/// ahead than `before` counted: a person typing their question gives it
/// that long.
pub async fn ahead_read(
    http: &reqwest::Client,
    base: &str,
    before: &Tokens,
    patience: std::time::Duration,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    while started.elapsed() < patience {
        if read(http, base)
            .await
            .is_some_and(|now| now.ahead_done > before.ahead_done)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    started.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_and_subtracted() {
        let page = "# HELP x\n\
runcell_llm_prompt_tokens_total{backend=\"embedded\",kind=\"reused\"} 700\n\
runcell_llm_prompt_tokens_total{backend=\"embedded\",kind=\"computed\"} 300\n\
runcell_llm_tokens_total{backend=\"embedded\",kind=\"completion\"} 150\n\
runcell_llm_tokens_total{backend=\"embedded\",kind=\"prompt\"} 1000\n\
runcell_llm_prefill_tokens_total{backend=\"embedded\",kind=\"computed\"} 500\n\
runcell_llm_prefill_seconds_sum{backend=\"embedded\"} 8.5\n\
runcell_llm_prefill_seconds_count{backend=\"embedded\"} 2\n\
runcell_llm_time_to_first_token_seconds_sum{backend=\"embedded\"} 4\n\
runcell_llm_generation_seconds_sum{backend=\"embedded\"} 5\n\
runcell_llm_generation_seconds_sum{backend=\"embedded\"} NaN\n\
garbage\n";
        let after = Tokens::parse(page);
        assert_eq!(
            after,
            Tokens {
                prompt: 1000.0,
                reused: 700.0,
                ahead: 500.0,
                generated: 150.0,
                reading_s: 4.0,
                generating_s: 5.0,
                ahead_s: 8.5,
                ahead_done: 2.0,
            }
        );
        let before = Tokens {
            prompt: 400.0,
            reused: 100.0,
            ..Tokens::default()
        };
        let turn = after.since(&before);
        assert_eq!(turn.prompt, 600.0);
        assert_eq!(turn.reused, 600.0);
        assert_eq!(turn.reused_pct(), 100.0);
        assert_eq!(Tokens::default().reused_pct(), 0.0);
    }
}
