//! `runcell bench dabench`'s harness against a real server with the
//! scripted model, on a question set written here in the benchmark's
//! format (the benchmark's own data is evaluation data, never in the
//! repository): the table is uploaded, the question asked as one message,
//! and the `@name[value]` answers read from the streamed turn and scored
//! with the benchmark's rule. It checks the harness, never a rate.

use std::path::Path;
use std::time::Duration;

use runcell_bench::dabench::{Asking, Question, QuestionResult, load, run_question};
use runcell_bench::heuristics;

use crate::support::TestServer;

fn question(id: u64, program: &str, format: &str) -> Question {
    Question {
        id,
        question: format!("```python\n{program}\n```"),
        constraints: "Use the file as it is.".into(),
        format: format.into(),
        file_name: "table.csv".into(),
        level: "easy".into(),
    }
}

/// Asks `question` of the server at `base` and scores it against `pairs`.
async fn ask(
    http: &reqwest::Client,
    base: &str,
    tables: &Path,
    question: &Question,
    pairs: &[(&str, &str)],
) -> QuestionResult {
    run_question(
        http,
        base,
        tables,
        question,
        &labels(pairs),
        Asking {
            model: None,
            timeout: Duration::from_secs(120),
            // The scripted model reads nothing ahead: no typing to wait for.
            typing: Duration::ZERO,
        },
    )
    .await
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
        .collect()
}

#[tokio::test]
async fn the_dabench_harness_scores_answers_from_the_streamed_turn() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let base = server.url("");
    let base = base.trim_end_matches('/');
    let dir = tempfile::tempdir().unwrap();
    let tables = dir.path().join("da-dev-tables");
    std::fs::create_dir_all(&tables).unwrap();
    std::fs::write(tables.join("table.csv"), " x,label\n1,a\n2,b\n3,c\n").unwrap();

    // Right: the program reads the uploaded table (a header with a leading
    // space) and prints the answers in the asked form.
    let read = "import pandas as pd\ndf = pd.read_csv('table.csv')\n";
    let both = question(
        1,
        &format!("{read}print(f\"@total[{{df[' x'].sum()}}] @mean[{{df[' x'].mean():.2f}}]\")"),
        "@total[value] @mean[value]",
    );
    let result = ask(
        &http,
        base,
        &tables,
        &both,
        &[("total", "6"), ("mean", "2.00")],
    )
    .await;
    assert!(result.right && result.ran, "{result:#?}");
    assert_eq!((result.parts_right, result.parts), (2, 2));
    assert!(result.first_code_seconds.is_some());

    // A float within 1e-6 is right; a missing sub-answer makes it wrong.
    let half = question(
        2,
        &format!("{read}print('@total[6.0000000001]')"),
        "@total[v] @mean[v]",
    );
    let result = ask(
        &http,
        base,
        &tables,
        &half,
        &[("total", "6"), ("mean", "2.00")],
    )
    .await;
    assert!(!result.right && result.ran, "{result:#?}");
    assert_eq!(result.parts_right, 1);

    // A program that fails answered nothing, and ran is false.
    let failing = question(3, "raise SystemExit(3)", "@total[v]");
    let result = ask(&http, base, &tables, &failing, &[("total", "6")]).await;
    assert!(!result.right && !result.ran, "{result:#?}");
    assert!(
        result.explanation.starts_with("No answer was computed"),
        "{result:#?}"
    );

    // The heuristics that fired are read from the server's /metrics: a
    // question with a template gets the format note, and a column written
    // without its space is repaired by runcell, not hinted at.
    let before = heuristics::read(&http, base).await.expect("/metrics");
    let misspelt = question(5, &format!("{read}print(df['x'].sum())"), "@total[v]");
    let result = ask(&http, base, &tables, &misspelt, &[("total", "6")]).await;
    assert!(!result.right, "{result:#?}");
    let after = heuristics::read(&http, base).await.expect("/metrics");
    let fired = heuristics::fired(&before, &after);
    assert!(fired.contains_key("note:format"), "{fired:?}");
    assert!(fired.contains_key("hint:repaired_column"), "{fired:?}");
    assert!(!fired.contains_key("hint:closest_key"), "{fired:?}");
    // What the model did is counted too (the scripted model reuses nothing).
    assert!(
        result.tokens.prompt > 0.0 && result.tokens.generated > 0.0,
        "{:?}",
        result.tokens
    );
    assert_eq!(result.tokens.reused, 0.0);

    // A table that is not there is a problem recorded, not a crash.
    let mut missing = question(4, "print(1)", "@a[v]");
    missing.file_name = "absent.csv".into();
    let result = ask(&http, base, &tables, &missing, &[("a", "1")]).await;
    assert!(result.problem.is_some() && !result.right);

    // The files load as the benchmark writes them.
    std::fs::write(
        dir.path().join("da-dev-questions.jsonl"),
        serde_json::to_string(&both).unwrap() + "\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("da-dev-labels.jsonl"),
        "{\"id\": 1, \"common_answers\": [[\"total\", \"6\"], [\"mean\", \"2.00\"]]}\n",
    )
    .unwrap();
    let loaded = load(dir.path()).unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].1.len(), 2);
}
