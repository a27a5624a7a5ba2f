//! Stateful sessions in the jail: the Python kernel keeps its variables, rich
//! results come back as MIME bundles, and limits leave the session usable.

use std::time::Duration;

use runcell_sandbox::jail::{JailConfig, JailSandbox, JailSession};
use runcell_sandbox::{Contexts, Language, Limits, RunOutcome, RunRequest, SandboxSession};
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
                env: Vec::new(),
                cwd: None,
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
    include_str!("../../../../scripts/sandbox-requirements.txt")
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
        "import importlib.metadata as m\nfor name in ['ipykernel', 'numpy', 'pandas', 'matplotlib', 'openpyxl', 'pyarrow', 'scipy', 'statsmodels', 'scikit-learn', 'seaborn', 'sympy', 'tabulate', 'plotly', 'nbformat', 'e2b-charts']:\n    print(name, m.version(name))",
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

async fn js(session: &JailSession, code: &str) -> RunOutcome {
    run_in(session, code, Language::Javascript, Duration::from_secs(20)).await
}

#[tokio::test]
async fn javascript_keeps_state_awaits_at_the_top_and_gives_the_last_value() {
    let session = session().await;
    assert!(js(&session, "const z = 1").await.error.is_none());
    let outcome = js(&session, "z + 1").await;
    assert_eq!(plain(&outcome), Some("2"), "{outcome:?}");
    // Declared again, as in a console.
    let outcome = js(&session, "let n = 1; let m = 2; n + m").await;
    assert_eq!(plain(&outcome), Some("3"), "{outcome:?}");
    let outcome = js(&session, "let n = 5; n").await;
    assert_eq!(plain(&outcome), Some("5"), "{outcome:?}");
    let outcome = js(
        &session,
        "async function main() { return 'Hello, World!' }\nawait main()",
    )
    .await;
    assert_eq!(plain(&outcome), Some("Hello, World!"), "{outcome:?}");
    let outcome = js(
        &session,
        "console.log('out'); console.error('err'); ({a: [1, 2]})",
    )
    .await;
    assert_eq!(outcome.stdout, "out\n");
    assert_eq!(outcome.stderr, "err\n");
    assert_eq!(plain(&outcome), Some("{ a: [ 1, 2 ] }"), "{outcome:?}");
    let outcome = js(&session, "import path from 'path'\npath.join('a', 'b')").await;
    assert_eq!(plain(&outcome), Some("a/b"), "{outcome:?}");
    let outcome = js(&session, "[process.getuid(), process.cwd()].join(' ')").await;
    assert_eq!(plain(&outcome), Some("1000 /home/user"), "{outcome:?}");
    // An error names its line in the cell, and the kernel goes on.
    let outcome = js(&session, "const ok = 1\nnull.boom").await;
    let error = outcome.error.expect("an error");
    assert_eq!(error.name, "TypeError");
    assert!(
        error.traceback.join("\n").contains("<anonymous>:2"),
        "{error:?}"
    );
    assert_eq!(plain(&js(&session, "z").await), Some("1"));
    session.close().await;
}

#[tokio::test]
async fn typescript_is_type_stripped_with_its_lines_kept() {
    let session = session().await;
    let ts = |code: &'static str| {
        run_in(
            &session,
            code,
            Language::Typescript,
            Duration::from_secs(20),
        )
    };
    let outcome = ts(
        "function subtract(x: number, y: number): number {\n  return x - y;\n}\n\nsubtract(1, 2)",
    )
    .await;
    assert_eq!(plain(&outcome), Some("-1"), "{outcome:?}");
    let outcome = ts("interface P { a: number }\nconst message: string = 'hi';\nconst p: P = { a: 1 };\n`${message} ${p.a}`").await;
    assert_eq!(plain(&outcome), Some("hi 1"), "{outcome:?}");
    // State kept between TypeScript cells; line numbers are the cell's own.
    let outcome = ts("const len: number = message.length;\nconst none: any = null;\nnone.x").await;
    let error = outcome.error.expect("an error");
    assert!(
        error.traceback.join("\n").contains("<anonymous>:3"),
        "{error:?}"
    );
    let outcome = ts("const bad: number = ;").await;
    assert_eq!(outcome.error.expect("a syntax error").name, "SyntaxError");
    session.close().await;
}

#[tokio::test]
async fn a_javascript_loop_is_stopped_at_its_time_limit_and_the_kernel_kept() {
    let session = session().await;
    assert!(js(&session, "let kept = 7").await.error.is_none());
    let outcome = run_in(
        &session,
        "while (true) {}",
        Language::Javascript,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(
        outcome.error.expect("a timeout").name,
        "Timeout",
        "{:?}",
        outcome.stdout
    );
    let outcome = run_in(
        &session,
        "await new Promise(() => {})",
        Language::Javascript,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(outcome.error.expect("a timeout").name, "Timeout");
    assert_eq!(plain(&js(&session, "kept").await), Some("7"));
    session.close().await;
}

#[tokio::test]
async fn r_keeps_state_and_shows_values_as_r_prints_them() {
    let session = session().await;
    let r = |code: &'static str| run_in(&session, code, Language::R, Duration::from_secs(30));
    assert!(r("x <- c(1, 2, 3, 4)").await.error.is_none());
    let outcome = r("mean(x)").await;
    assert_eq!(plain(&outcome), Some("[1] 2.5"), "{outcome:?}");
    let outcome = r("cat('out\\n'); message('err'); Sys.getenv('HOME')").await;
    assert_eq!(outcome.stdout, "out\n", "{outcome:?}");
    assert!(outcome.stderr.contains("err"), "{outcome:?}");
    assert_eq!(plain(&outcome), Some("[1] \"/home/user\""), "{outcome:?}");
    let outcome = r("stop('boom')").await;
    assert!(outcome.error.expect("an error").value.contains("boom"));
    let outcome = r("length(x)").await;
    assert_eq!(plain(&outcome), Some("[1] 4"), "{outcome:?}");
    session.close().await;
}

async fn java(session: &JailSession, code: &str) -> RunOutcome {
    run_in(session, code, Language::Java, Duration::from_secs(30)).await
}

#[tokio::test]
async fn java_keeps_state_and_shows_the_last_value() {
    let session = session().await;
    let outcome = java(&session, "int x = 41;\nimport java.util.*;").await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert_eq!(outcome.results.len(), 0, "{outcome:?}");
    assert_eq!(plain(&java(&session, "x + 1").await), Some("42"));
    let outcome = java(
        &session,
        "System.out.println(\"out\");\nSystem.err.println(\"err\");\nvar l = new ArrayList<>(List.of(3, 1, 2));\nCollections.sort(l);\nl.toString() + \"\\t\" + System.getProperty(\"user.dir\")",
    )
    .await;
    assert_eq!(outcome.stdout, "out\n", "{outcome:?}");
    assert_eq!(outcome.stderr, "err\n", "{outcome:?}");
    assert_eq!(
        plain(&outcome),
        Some("[1, 2, 3]\t/home/user"),
        "{outcome:?}"
    );
    // A method and a class stay defined; an exception names its line.
    let outcome = java(
        &session,
        "int half(int n) {\n    if (n % 2 != 0) throw new IllegalArgumentException(\"odd \" + n);\n    return n / 2;\n}\nrecord P(int a) {}\nhalf(8)",
    )
    .await;
    assert_eq!(plain(&outcome), Some("4"), "{outcome:?}");
    let outcome = java(&session, "int a = 1;\nhalf(new P(3).a());").await;
    let error = outcome.error.expect("an error");
    assert_eq!(error.name, "java.lang.IllegalArgumentException");
    assert_eq!(error.value, "odd 3");
    assert_eq!(
        error.traceback,
        [
            "java.lang.IllegalArgumentException: odd 3",
            "\tat half, line 2 of an earlier cell",
            "\tat line 2"
        ]
    );
    // A compile error names its line, and what ran before it stays.
    let outcome = java(&session, "int b = 2;\nint c = \"no\";").await;
    let error = outcome.error.expect("an error");
    assert_eq!(error.name, "CompilationException");
    assert_eq!(
        error.traceback,
        [
            "line 2: incompatible types: java.lang.String cannot be converted to int",
            "    int c = \"no\";"
        ]
    );
    assert_eq!(plain(&java(&session, "a + b + x").await), Some("44"));
    session.close().await;
}

#[tokio::test]
async fn java_displays_update_and_clear_as_ijava_names_them() {
    let session = session().await;
    let outcome = java(
        &session,
        "String id = display(\"v1\");\nSystem.out.println(\"between\");\nupdateDisplay(id, \"<b>v2</b>\", \"text/html\");\ndisplay(\"shown\")",
    )
    .await;
    assert_eq!(outcome.error, None, "{outcome:?}");
    assert_eq!(outcome.stdout, "between\n");
    // The updated display in its place, and the last display (not its id).
    assert_eq!(
        outcome.results,
        [
            serde_json::json!({"text/html": "<b>v2</b>"})
                .as_object()
                .unwrap()
                .clone(),
            serde_json::json!({"text/plain": "shown"})
                .as_object()
                .unwrap()
                .clone(),
        ]
    );
    let outcome = java(
        &session,
        "System.out.println(\"a\");\nclearOutput();\nSystem.out.println(\"b\");",
    )
    .await;
    assert_eq!(outcome.stdout, "b\n", "{outcome:?}");
    session.close().await;
}

#[tokio::test]
async fn a_java_loop_is_stopped_at_its_time_limit_and_the_kernel_kept() {
    let session = session().await;
    assert!(java(&session, "int kept = 7;").await.error.is_none());
    let outcome = run_in(
        &session,
        "long n = 0;\nwhile (true) { n++; }",
        Language::Java,
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(outcome.error.expect("a timeout").name, "Timeout");
    assert_eq!(plain(&java(&session, "kept").await), Some("7"));
    session.close().await;
}

// A kernel starts from nothing the session wrote. Each test below plants,
// in the session's home (which is also the kernel's working directory),
// the files its language's kernel would read or run as it starts, or would
// import by itself later; each planted file, were it run, makes a file in
// `~/ran` named after itself. A kernel started afresh on those files must
// run none of them, and work.

/// Runs `script` with Bash in the session's home; it must succeed.
async fn bash(session: &JailSession, script: &str) -> String {
    let outcome = run_in(session, script, Language::Bash, Duration::from_secs(120)).await;
    assert!(
        outcome.error.is_none() && outcome.exit_code == Some(0),
        "{outcome:?}"
    );
    outcome.stdout
}

/// Which planted files ran, one a line.
async fn planted_that_ran(session: &JailSession) -> String {
    bash(session, "ls -A ran").await
}

/// A kernel of `language` started afresh on the session's files, as a
/// restart starts one: a context of its own.
async fn fresh_kernel(session: &JailSession, language: Language) -> String {
    session.create_context(language, None).await.unwrap()
}

async fn run_in_fresh(
    session: &JailSession,
    context: &str,
    language: Language,
    code: &str,
) -> RunOutcome {
    session
        .run_in_context(
            context,
            &RunRequest {
                code: code.into(),
                language,
                limits: Limits::default(),
                env: Vec::new(),
                cwd: None,
            },
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

/// What Python would run at start without `-I`, and what IPython, ipykernel
/// and Jupyter read from the home; and modules the kernel imports by itself
/// after it is up (`stack_data` and `executing` for a traceback, `pexpect`
/// for a `!command`), which a module of the same name in the home must not
/// replace.
const PYTHON_PLANTS: &str = r#"set -e
mkdir -p ran
mark() { printf "open('/home/user/ran/%s', 'w').close()\n" "$1" > "$2"; }
site=.local/lib/$(cd /opt/runcell/python/lib && echo python3.*)/site-packages
mkdir -p "$site" .ipython/profile_default/startup .config/ipython/profile_default/startup .jupyter
for name in sitecustomize usercustomize ipykernel_launcher stack_data executing pexpect; do
  mark "$name" "$name.py"
done
mark user-site-sitecustomize "$site/sitecustomize.py"
mark user-site-usercustomize "$site/usercustomize.py"
echo "import os; open('/home/user/ran/home-pth', 'w').close()" > planted.pth
echo "import os; open('/home/user/ran/user-site-pth', 'w').close()" > "$site/planted.pth"
mark ipython-startup .ipython/profile_default/startup/00-planted.py
mark ipython-config .ipython/profile_default/ipython_config.py
mark ipython-kernel-config .ipython/profile_default/ipython_kernel_config.py
mark xdg-ipython-startup .config/ipython/profile_default/startup/00-planted.py
mark jupyter-config .jupyter/jupyter_config.py
mark jupyter-kernel-config .jupyter/ipython_kernel_config.py
mark cwd-ipython-config ipython_config.py
mark cwd-ipython-kernel-config ipython_kernel_config.py
echo 'value = 42' > mine.py
"#;

#[tokio::test]
async fn a_python_kernel_runs_nothing_the_session_planted() {
    let session = session().await;
    bash(&session, PYTHON_PLANTS).await;
    let kernel = fresh_kernel(&session, Language::Python).await;
    let python = |code: &'static str| run_in_fresh(&session, &kernel, Language::Python, code);
    let error = python("1 / 0").await;
    let shell = python("!echo shell").await;
    // The person's own modules in the home are still imported.
    let mine = python("import mine; mine.value").await;
    assert_eq!(planted_that_ran(&session).await, "");
    assert_eq!(
        error.error.as_ref().map(|e| e.name.as_str()),
        Some("ZeroDivisionError"),
        "{error:?}"
    );
    // Run in a terminal, as IPython runs a `!command`.
    assert_eq!(shell.stdout, "shell\r\n", "{shell:?}");
    assert_eq!(plain(&mine), Some("42"), "{mine:?}");
    // The planted files are ones that run when asked to.
    let outcome = py(&session, "exec(open('sitecustomize.py').read())").await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert_eq!(planted_that_ran(&session).await, "sitecustomize\n");
    session.close().await;
}

/// A package of each name the JavaScript and TypeScript kernel loads (its
/// own Node modules, sucrase and what sucrase requires) in each place Node
/// looks for packages it cannot find beside the requiring file: the home's
/// `.node_modules` and `.node_libraries`, and `node_modules` in the
/// working directory.
const NODE_PLANTS: &str = r#"set -e
mkdir -p ran
names="$(cd /opt/runcell/node/node_modules && ls -d */ @*/*/ | sed 's|/$||') net fs path util crypto inspector worker_threads module"
for dir in .node_modules .node_libraries node_modules; do
  for name in $names; do
    mkdir -p "$dir/$name"
    echo "require('fs').writeFileSync('/home/user/ran/$dir-${name//\//-}', '')" > "$dir/$name/index.js"
  done
done
"#;

#[tokio::test]
async fn a_javascript_kernel_runs_nothing_the_session_planted() {
    let session = session().await;
    bash(&session, NODE_PLANTS).await;
    let kernel = fresh_kernel(&session, Language::Javascript).await;
    let sum = run_in_fresh(&session, &kernel, Language::Javascript, "1 + 1").await;
    // Where Node looks for a package it finds nowhere else: not the home.
    let global = run_in_fresh(
        &session,
        &kernel,
        Language::Javascript,
        "JSON.stringify(require('module').globalPaths)",
    )
    .await;
    // TypeScript loads sucrase with its first cell.
    let kernel = fresh_kernel(&session, Language::Typescript).await;
    let typescript = run_in_fresh(
        &session,
        &kernel,
        Language::Typescript,
        "import path from 'path'\nconst n: number = 2;\npath.join('a', String(n))",
    )
    .await;
    assert_eq!(planted_that_ran(&session).await, "");
    assert_eq!(plain(&sum), Some("2"), "{sum:?}");
    assert_eq!(plain(&global), Some(r#"["/usr/lib/node"]"#), "{global:?}");
    assert_eq!(plain(&typescript), Some("a/2"), "{typescript:?}");
    // The planted packages are ones that run when asked for.
    let outcome = js(&session, "require('/home/user/.node_modules/sucrase')").await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert_eq!(planted_that_ran(&session).await, ".node_modules-sucrase\n");
    session.close().await;
}

/// The user profile and environment file R reads from the working
/// directory or the home, a saved workspace with a `.First`, and a package
/// IRkernel imports (`uuid`) installed in the user library R would put
/// first (`~/R/<platform>-library/<version>`).
const R_PLANTS: &str = r#"set -e
mkdir -p ran /tmp/uuid/R
lib=$(Rscript --vanilla -e 'cat(path.expand(Sys.getenv("R_LIBS_USER")))')
mkdir -p "$lib"
printf 'Package: uuid\nVersion: 99.0\nTitle: Planted\nDescription: Planted.\nLicense: MIT\nAuthor: nobody\nMaintainer: nobody <nobody@example.com>\n' > /tmp/uuid/DESCRIPTION
echo 'export(UUIDgenerate)' > /tmp/uuid/NAMESPACE
cat > /tmp/uuid/R/uuid.R <<'END'
.onLoad <- function(lib, pkg) file.create("/home/user/ran/user-library")
UUIDgenerate <- function(use.time = NA, n = 1L, output = "string") {
  vapply(seq_len(n), function(i) paste(sample(c(0:9, letters[1:6]), 32, TRUE), collapse = ""), "")
}
END
R CMD INSTALL --no-test-load -l "$lib" /tmp/uuid > /tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
echo 'invisible(file.create("/home/user/ran/Rprofile"))' > .Rprofile
echo 'RUNCELL_PLANTED=Renviron' > .Renviron
Rscript --vanilla -e '.First <- function() file.create("/home/user/ran/RData"); save(.First, file = ".RData")'
"#;

#[tokio::test]
async fn an_r_kernel_runs_nothing_the_session_planted() {
    let session = session().await;
    bash(&session, R_PLANTS).await;
    let kernel = fresh_kernel(&session, Language::R).await;
    let r = |code: &'static str| run_in_fresh(&session, &kernel, Language::R, code);
    let environ = r("Sys.getenv('RUNCELL_PLANTED')").await;
    let uuid = r("find.package('uuid')").await;
    let first = r("exists('.First')").await;
    assert_eq!(planted_that_ran(&session).await, "");
    assert_eq!(plain(&environ), Some("[1] \"\""), "{environ:?}");
    assert_eq!(
        plain(&uuid),
        Some("[1] \"/usr/lib/R/site-library/uuid\""),
        "{uuid:?}"
    );
    assert_eq!(plain(&first), Some("[1] FALSE"), "{first:?}");
    // The planted profile is one that runs when asked to.
    let outcome = r("source('.Rprofile')").await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert_eq!(planted_that_ran(&session).await, "Rprofile\n");
    session.close().await;
}

/// What a JVM started in the home could load from it: classes named as the
/// Java kernel's engine and its inner classes (the JVM's default class path
/// is the working directory), HotSpot's settings files, and the Python
/// files the wrapper kernel's Python would run without `-I`.
const JAVA_PLANTS: &str = r#"set -e
mkdir -p ran src
for name in JShellKernel 'JShellKernel$Framed'; do
  cat > "src/$name.java" <<END
public class ${name#*\$} {
  static { try { new java.io.File("/home/user/ran/$name").createNewFile(); } catch (Exception e) {} }
  public static void main(String[] args) {}
}
END
done
javac -d . src/JShellKernel.java
mkdir -p jdk/jshell && cp JShellKernel.class jdk/jshell/JShell.class
echo '+PrintFlagsFinal' > .hotspotrc
echo 'quiet' > .hotspot_compiler
printf "open('/home/user/ran/sitecustomize', 'w').close()\n" > sitecustomize.py
printf "open('/home/user/ran/ipykernel', 'w').close()\n" > ipykernel.py
"#;

#[tokio::test]
async fn a_java_kernel_runs_nothing_the_session_planted() {
    let session = session().await;
    bash(&session, JAVA_PLANTS).await;
    let kernel = fresh_kernel(&session, Language::Java).await;
    let outcome = run_in_fresh(&session, &kernel, Language::Java, "6 * 7").await;
    assert_eq!(plain(&outcome), Some("42"), "{outcome:?}");
    assert_eq!(outcome.stdout, "", "{outcome:?}");
    assert_eq!(planted_that_ran(&session).await, "");
    session.close().await;
}

/// The table data of each result that has it, as JSON text, and its text.
fn tables_of(outcome: &RunOutcome) -> Vec<(String, String)> {
    outcome
        .results
        .iter()
        .filter_map(|r| {
            let data = r.get(runcell_sandbox::TABLE_DATA_MIME)?;
            let text = r.get("text/plain")?.as_str()?;
            Some((data.to_string(), text.to_string()))
        })
        .collect()
}

#[tokio::test]
async fn a_frame_printed_alone_is_shown_as_a_table_with_its_printed_text() {
    let session = session().await;
    let setup = "import sys\nimport pandas as pd\n\
                 df = pd.DataFrame({'region': ['north', 'south'], 'units': [3, 5]})";
    assert!(py(&session, setup).await.error.is_none());
    let outcome = py(&session, "print(df)").await;
    assert_eq!(outcome.stdout, "", "{outcome:?}");
    assert_eq!(
        tables_of(&outcome),
        [(
            r#"{"columns":["","region","units"],"index_columns":1,"rows":[["0","north","3"],["1","south","5"]],"total_rows":2}"#.to_string(),
            "  region  units\n0  north      3\n1  south      5".to_string()
        )]
    );
    assert!(outcome.results[0].contains_key("text/html"), "{outcome:?}");
    // A series: its own text, a table of one column named as it is.
    let outcome = py(&session, "print(df.set_index('region')['units'])").await;
    assert_eq!(
        tables_of(&outcome),
        [(
            r#"{"columns":["region","units"],"index_columns":1,"rows":[["north","3"],["south","5"]],"total_rows":2}"#.to_string(),
            "region\nnorth    3\nsouth    5\nName: units, dtype: int64".to_string()
        )]
    );
    // A label printed first stays before the table.
    let outcome = py(&session, "print('Units:')\nprint(df.head(1))").await;
    assert_eq!(outcome.stdout, "Units:\n");
    assert_eq!(tables_of(&outcome).len(), 1);
    // Any other print is print.
    for (code, stdout, stderr) in [
        (
            "print('units', df)",
            "units   region  units\n0  north      3\n1  south      5\n",
            "",
        ),
        (
            "print(df, file=sys.stderr)",
            "",
            "  region  units\n0  north      3\n1  south      5\n",
        ),
        (
            "print(df, end='')",
            "  region  units\n0  north      3\n1  south      5",
            "",
        ),
        (
            "print(df.iloc[0:0])",
            "Empty DataFrame\nColumns: [region, units]\nIndex: []\n",
            "",
        ),
        ("print(len(df))", "2\n", ""),
        (
            "import io, contextlib\nwith contextlib.redirect_stdout(io.StringIO()) as f:\n    print(df)\nprint(len(f.getvalue()))",
            "48\n",
            "",
        ),
    ] {
        let outcome = py(&session, code).await;
        assert_eq!(
            (outcome.stdout.as_str(), outcome.stderr.as_str()),
            (stdout, stderr),
            "{code}"
        );
        assert!(outcome.results.is_empty(), "{code}: {outcome:?}");
    }
    session.close().await;
}

#[tokio::test]
async fn a_figure_with_nothing_drawn_is_left_out_and_a_plot_is_not() {
    let session = session().await;
    let left_out = "runcell: a figure with nothing drawn on it was left out\n";
    for blank in [
        "import matplotlib.pyplot as plt\nplt.figure()\nplt.show()",
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.set_title('sales');",
        "import matplotlib.pyplot as plt\nfig, axes = plt.subplots(1, 2)",
    ] {
        let outcome = py(&session, blank).await;
        assert!(outcome.error.is_none(), "{outcome:?}");
        assert!(outcome.results.is_empty(), "{blank}: {outcome:?}");
        assert_eq!(outcome.stderr, left_out, "{blank}");
    }
    for drawn in [
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9])",
        "import matplotlib.pyplot as plt\nfig, axes = plt.subplots(1, 2)\naxes[1].bar(['a', 'b'], [1, 2])",
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.text(0.5, 0.5, 'no data')",
    ] {
        let outcome = py(&session, drawn).await;
        assert_eq!(outcome.stderr, "", "{drawn}");
        let pngs = outcome
            .results
            .iter()
            .filter(|r| r.get("image/png").is_some())
            .count();
        assert_eq!(pngs, 1, "{drawn}: {outcome:?}");
    }
    session.close().await;
}

/// A kernel E2B's formatters were registered in (an E2B sandbox runcell
/// serves) keeps E2B's behaviour: print is stdout, every figure is shown.
#[tokio::test]
async fn a_kernel_with_e2bs_formatters_prints_frames_and_shows_blank_figures() {
    let session = session().await;
    let e2b = "from IPython import get_ipython\n\
               from IPython.core.formatters import BaseFormatter\n\
               shown = get_ipython().display_formatter\n\
               shown.formatters['e2b/data'] = BaseFormatter(parent=shown)";
    assert!(py(&session, e2b).await.error.is_none());
    let outcome = py(
        &session,
        "import pandas as pd\nprint(pd.DataFrame({'a': [1]}))",
    )
    .await;
    assert_eq!(outcome.stdout, "   a\n0  1\n");
    assert!(outcome.results.is_empty(), "{outcome:?}");
    let outcome = py(
        &session,
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()",
    )
    .await;
    assert_eq!(outcome.stderr, "");
    assert_eq!(
        outcome
            .results
            .iter()
            .filter(|r| r.get("image/png").is_some())
            .count(),
        1,
        "{outcome:?}"
    );
    session.close().await;
}
