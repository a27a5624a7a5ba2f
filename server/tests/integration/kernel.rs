//! Stateful sessions in the jail: the Python kernel keeps its variables, rich
//! results come back as MIME bundles, and limits leave the session usable.

use std::time::Duration;

use runcell::sandbox::jail::{JailConfig, JailSandbox, JailSession};
use runcell::sandbox::{Language, Limits, RunOutcome, RunRequest, SandboxSession};
use tokio_util::sync::CancellationToken;

async fn session() -> JailSession {
    let jail = JailSandbox::new(JailConfig::default());
    assert!(jail.unavailable().is_none(), "{:?}", jail.unavailable());
    JailSession::open(jail, Limits::default()).await.unwrap()
}

async fn run_in(
    session: &JailSession,
    code: &str,
    language: Language,
    wall: Duration,
) -> RunOutcome {
    session
        .run(
            &RunRequest {
                code: code.into(),
                language,
                limits: Limits {
                    wall,
                    ..Limits::default()
                },
            },
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

async fn py(session: &JailSession, code: &str) -> RunOutcome {
    run_in(session, code, Language::Python, Duration::from_secs(30)).await
}

fn plain(outcome: &RunOutcome) -> Option<&str> {
    outcome.results.last()?.get("text/plain")?.as_str()
}

#[tokio::test]
async fn variables_persist_between_runs() {
    let session = session().await;
    assert!(py(&session, "x = 41").await.error.is_none());
    let outcome = py(&session, "x + 1").await;
    assert_eq!(plain(&outcome), Some("42"), "{outcome:?}");
    let outcome = py(&session, "import os; print(os.getuid(), os.getcwd())").await;
    assert_eq!(outcome.stdout, "1000 /home/user\n");
    session.close().await;
}

#[tokio::test]
async fn errors_come_back_as_jupyter_gives_them() {
    let session = session().await;
    let outcome = py(&session, "undefined_name").await;
    let error = outcome.error.unwrap();
    assert_eq!(error.name, "NameError");
    assert!(error.value.contains("undefined_name"));
    assert!(!error.traceback.is_empty());
    // The session goes on.
    assert_eq!(plain(&py(&session, "1 + 1").await), Some("2"));
    session.close().await;
}

#[tokio::test]
async fn a_plot_comes_back_as_a_png() {
    let session = session().await;
    let outcome = py(
        &session,
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    )
    .await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    let png = outcome
        .results
        .iter()
        .find_map(|r| r.get("image/png")?.as_str())
        .expect("a PNG result");
    assert!(png.starts_with("iVBOR"), "base64 PNG expected");
    let outcome = py(&session, "import pandas as pd\npd.DataFrame({'a': [1, 2]})").await;
    assert!(outcome.results[0].contains_key("text/html"), "{outcome:?}");
    session.close().await;
}

#[tokio::test]
async fn files_persist_across_runs_and_languages() {
    let session = session().await;
    assert!(
        py(&session, "open('shared.txt', 'w').write('from python')")
            .await
            .error
            .is_none()
    );
    let outcome = run_in(
        &session,
        "cat shared.txt; echo ' and bash' >> shared.txt",
        Language::Bash,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(outcome.stdout, "from python");
    let outcome = run_in(
        &session,
        "console.log(require('fs').readFileSync('shared.txt', 'utf8').trim())",
        Language::Javascript,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(outcome.stdout, "from python and bash\n", "{outcome:?}");
    session.close().await;
}

#[tokio::test]
async fn a_timeout_interrupts_and_keeps_the_variables() {
    let session = session().await;
    py(&session, "kept = 'still here'").await;
    let outcome = run_in(
        &session,
        "while True: pass",
        Language::Python,
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        outcome.error.as_ref().map(|e| e.name.as_str()),
        Some("Timeout"),
        "{outcome:?}"
    );
    assert_eq!(plain(&py(&session, "kept").await), Some("'still here'"));
    session.close().await;
}

#[tokio::test]
async fn running_out_of_memory_restarts_the_kernel() {
    let session = session().await;
    py(&session, "lost = 1").await;
    let outcome = py(&session, "b = bytearray(4 * 1024**3)").await;
    let error = outcome.error.unwrap();
    assert_eq!(error.name, "MemoryLimit", "{error:?}");
    assert!(error.value.contains("restarted"));
    let outcome = py(&session, "lost").await;
    assert_eq!(outcome.error.map(|e| e.name), Some("NameError".into()));
    assert_eq!(plain(&py(&session, "2 * 21").await), Some("42"));
    session.close().await;
}

#[tokio::test]
async fn output_over_the_limit_is_cut_and_the_session_goes_on() {
    let session = session().await;
    let outcome = py(
        &session,
        "import sys\nfor _ in range(50):\n    sys.stdout.write('z' * 100_000)",
    )
    .await;
    assert_eq!(
        outcome.error.as_ref().map(|e| e.name.as_str()),
        Some("OutputLimit"),
        "{outcome:?}"
    );
    assert!(outcome.truncated);
    assert!(outcome.stdout.len() <= Limits::default().output_bytes);
    assert_eq!(plain(&py(&session, "'alive'").await), Some("'alive'"));
    session.close().await;
}

#[tokio::test]
async fn a_kernel_that_ignores_interrupts_is_replaced_and_says_so() {
    let session = session().await;
    py(&session, "lost_on_restart = 1").await;
    let code = "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass";
    let outcome = run_in(&session, code, Language::Python, Duration::from_secs(1)).await;
    let error = outcome.error.unwrap();
    assert_eq!(error.name, "Timeout", "{error:?}");
    assert!(
        error.value.contains("restarted"),
        "the caller must be told: {error:?}"
    );
    let after = py(&session, "lost_on_restart").await;
    assert_eq!(after.error.map(|e| e.name), Some("NameError".into()));
    assert_eq!(plain(&py(&session, "'fresh'").await), Some("'fresh'"));
    session.close().await;
}

/// The packages `scripts/sandbox-requirements.txt` pins, as `(name, version)`.
fn pinned() -> Vec<(&'static str, &'static str)> {
    include_str!("../../../scripts/sandbox-requirements.txt")
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| line.trim().split_once("=="))
        .collect()
}

#[tokio::test]
async fn the_data_stack_imports_and_works_in_the_jail() {
    let session = session().await;
    // Each pinned package is there at its pinned version.
    let outcome = py(
        &session,
        "import importlib.metadata as m\nfor name in ['ipykernel', 'numpy', 'pandas', 'matplotlib', 'openpyxl', 'pyarrow', 'scipy', 'statsmodels', 'scikit-learn', 'seaborn', 'sympy', 'tabulate', 'plotly', 'nbformat']:\n    print(name, m.version(name))",
    )
    .await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    let pins = pinned();
    assert!(pins.len() >= 12, "{pins:?}");
    for (name, version) in pins {
        assert!(
            outcome.stdout.contains(&format!("{name} {version}\n")),
            "{name}=={version} is not what the jail has:\n{}",
            outcome.stdout
        );
    }
    // Each one does its job, all in one kernel, under the default memory
    // limit.
    let code = r#"
import pandas as pd
df = pd.DataFrame({'x': [1, 2, 3, 4], 'y': [2.0, 4.1, 5.9, 8.2], 'g': ['a', 'b', 'a', 'b']})
df.to_excel('t.xlsx', index=False)
print('xlsx', pd.read_excel('t.xlsx').equals(df))
df.to_parquet('t.parquet')
print('parquet', pd.read_parquet('t.parquet').equals(df))
from scipy import stats
print('scipy', round(stats.linregress(df.x, df.y).slope, 2))
import statsmodels.formula.api as smf
print('statsmodels', round(smf.ols('y ~ x', df).fit().params['x'], 2))
from sklearn.linear_model import LinearRegression
print('sklearn', round(float(LinearRegression().fit(df[['x']], df.y).coef_[0]), 2))
import sympy
t = sympy.Symbol('t')
print('sympy', sympy.integrate(t**2, t))
from tabulate import tabulate
print(tabulate(df.groupby('g').y.sum().reset_index(), headers='keys', tablefmt='github').splitlines()[0])
import seaborn as sns, matplotlib.pyplot as plt
sns.barplot(data=df, x='g', y='y')
plt.show()
"#;
    let outcome = py(&session, code).await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    for line in [
        "xlsx True\n",
        "parquet True\n",
        "scipy 2.04\n",
        "statsmodels 2.04\n",
        "sklearn 2.04\n",
        "sympy t**3/3\n",
        "|    | g   |",
    ] {
        assert!(outcome.stdout.contains(line), "{line}\n{}", outcome.stdout);
    }
    let png = outcome
        .results
        .iter()
        .find_map(|r| r.get("image/png")?.as_str());
    assert!(png.is_some_and(|p| p.starts_with("iVBOR")), "{outcome:?}");
    session.close().await;
}

#[tokio::test]
async fn a_fresh_kernel_imports_none_of_the_data_stack() {
    let session = session().await;
    let outcome = py(
        &session,
        "import sys\nprint(sorted(m for m in ['numpy', 'pandas', 'matplotlib', 'openpyxl', 'pyarrow', 'scipy', 'statsmodels', 'sklearn', 'seaborn', 'sympy', 'tabulate'] if m in sys.modules))",
    )
    .await;
    assert_eq!(outcome.stdout, "[]\n", "{outcome:?}");
    session.close().await;
}
