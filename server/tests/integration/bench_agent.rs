//! `runcell bench agent`'s harness against a real server with the scripted
//! model: a task's files are uploaded, its questions asked in one session,
//! and the verdicts read from the streamed turn, so that the figures the
//! bench prints for real models come from a harness that is itself tested.

use std::time::Duration;

use runcell_bench::agent::run_task;
use runcell_bench::agent::tasks::{Expect, Task, Turn};

use crate::support::TestServer;

fn task(id: &str, files: Vec<(String, Vec<u8>)>, turns: &[(&str, Expect)]) -> Task {
    Task {
        id: id.into(),
        category: "test",
        files,
        turns: turns
            .iter()
            .map(|(q, e)| Turn {
                question: (*q).to_string(),
                expect: e.clone(),
            })
            .collect(),
    }
}

fn code(text: &str) -> String {
    format!("```python\n{text}\n```")
}

#[tokio::test]
async fn the_bench_judges_turns_from_the_streamed_events() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let base = server.url("");
    let base = base.trim_end_matches('/');
    let timeout = Duration::from_secs(120);

    // A file, a question about it, and a follow-up that needs the first
    // turn's variable: both right, both ran, nothing invented.
    let csv = "x,y\n1,a\n2,b\n3,c\n".as_bytes().to_vec();
    let first =
        code("import pandas as pd\ndf = pd.read_csv('data.csv')\nprint('total:', df.x.sum())");
    let second = code("print('rows:', len(df) * 14)");
    let good = task(
        "good",
        vec![("data.csv".into(), csv)],
        &[
            (&first, Expect::Number(6.0)),
            (&second, Expect::Number(42.0)),
        ],
    );
    let result = run_task(&http, base, &good, None, timeout).await;
    assert!(
        result.right() && result.ran() && !result.invented(),
        "{result:#?}"
    );
    assert_eq!(result.turns[1].output, "rows: 42\n");
    assert!(result.turns.iter().all(|t| t.first_code_seconds.is_some()));

    // A wrong answer is wrong, even when the explanation is fine.
    let wrong = task(
        "wrong",
        Vec::new(),
        &[(&code("print(41)"), Expect::Number(42.0))],
    );
    let result = run_task(&http, base, &wrong, None, timeout).await;
    assert!(!result.right() && result.ran(), "{result:#?}");

    // A model that keeps inventing a figure: two withdrawn, then the output
    // quoted, so what stands invents nothing.
    let inventing = task(
        "inventing",
        Vec::new(),
        &[(
            &format!("#scripted: invent\n{}", code("print('answer:', 42)")),
            Expect::Number(42.0),
        )],
    );
    let result = run_task(&http, base, &inventing, None, timeout).await;
    let turn = &result.turns[0];
    assert!(turn.right && turn.fallback, "{turn:#?}");
    assert_eq!(turn.withdrawn, 2);
    assert!(turn.invented.is_empty());

    // A program that fails is neither right nor ran; a plot is an image.
    let failing = task(
        "failing",
        Vec::new(),
        &[(&code("raise SystemExit(3)"), Expect::Number(3.0))],
    );
    let result = run_task(&http, base, &failing, None, timeout).await;
    assert!(!result.ran() && !result.right(), "{result:#?}");
    let plot = task(
        "plot",
        Vec::new(),
        &[(
            &code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"),
            Expect::Image,
        )],
    );
    let result = run_task(&http, base, &plot, None, timeout).await;
    assert!(result.right(), "{result:#?}");
}
