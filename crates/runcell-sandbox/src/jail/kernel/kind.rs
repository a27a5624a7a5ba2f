//! Which kernel a language runs in, and how each is started: its command,
//! its environment, and the Python that ipykernel runs once it is up.

use std::path::Path;

use super::super::PYTHON_ENV;
use crate::Language;

/// Which kernel a language runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelKind {
    Python,
    Javascript,
    Typescript,
    R,
    Java,
}

impl KernelKind {
    /// The kernel of a language, if it has one (Bash and C run as one
    /// process each).
    pub fn of(language: Language) -> Option<Self> {
        match language {
            Language::Python => Some(Self::Python),
            Language::Javascript => Some(Self::Javascript),
            Language::Typescript => Some(Self::Typescript),
            Language::R => Some(Self::R),
            Language::Java => Some(Self::Java),
            Language::Bash | Language::C => None,
        }
    }

    /// How people call it, in messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::Python => "Python",
            Self::Javascript => "JavaScript",
            Self::Typescript => "TypeScript",
            Self::R => "R",
            Self::Java => "Java",
        }
    }

    pub(super) fn kernel_name(self) -> &'static str {
        match self {
            Self::Python => "python3",
            Self::Javascript => "javascript",
            Self::Typescript => "typescript",
            Self::R => "ir",
            Self::Java => "java",
        }
    }

    /// The command that starts the kernel on `connection_file`; `site` is
    /// where a session's installed packages are, when it can install.
    pub(super) fn command(self, connection_file: &Path, site: Option<&str>) -> Vec<String> {
        let file = connection_file.to_string_lossy().into_owned();
        match self {
            // `-I`: neither the working directory (the session's home) nor
            // PYTHON* variables nor the user site take part in starting
            // the kernel, so a planted `ipykernel_launcher.py` or `.pth`
            // file is never run; IPython's own configuration lives in the
            // jail's private /tmp (KERNEL_ENV). The home is put back on
            // `sys.path` once the kernel is up, after every installed
            // package (HOME_ON_PATH), so cells import from it. The
            // session's own packages are put on the path as a directory,
            // not a site (`site_on_path`): a `.pth` file there is not run
            // by a kernel. ipykernel is started as its
            // launcher does, but without debugpy (LAUNCH): an idle kernel
            // is 7.5 MiB smaller.
            Self::Python => vec![
                format!("{PYTHON_ENV}/bin/python3"),
                "-I".into(),
                "-c".into(),
                LAUNCH.into(),
                "-f".into(),
                file,
                // History in memory (front ends ask for it; no file is
                // written), completion from the live namespace (jedi's
                // first answer takes seconds).
                "--HistoryManager.hist_file=:memory:".into(),
                "--IPCompleter.use_jedi=False".into(),
                "--IPKernelApp.log_level=ERROR".into(),
                format!(
                    "--IPKernelApp.exec_lines={HOME_ON_PATH}; {}{LEFT_OUT_BACK}; exec({TABLE_DATA:?}); exec({NOTEBOOK_HOOKS:?})",
                    site.map(site_on_path).unwrap_or_default()
                ),
            ],
            Self::Javascript | Self::Typescript => {
                let mut command = vec![
                    "/usr/bin/node".into(),
                    super::super::etc::NODE_KERNEL_PATH.into(),
                    "-f".into(),
                    file,
                ];
                if self == Self::Typescript {
                    command.push("--typescript".into());
                }
                command
            }
            // `--no-init-file`: neither `.Rprofile` in the working
            // directory (the session's home) nor `~/.Rprofile` runs as the
            // kernel starts; `--no-restore`: nor is a `.RData` loaded. The
            // user's `.Renviron` is kept out by R_ENVIRON_USER (R_ENV), not
            // by `--no-environ`, which would drop R_HOME's own settings
            // too (Debian's Renviron.site sets R_LIBS_SITE). The site
            // profile is Debian's (no network: its CRAN mirror is unused).
            Self::R => vec![
                "/usr/bin/R".into(),
                "--slave".into(),
                "--no-save".into(),
                "--no-restore".into(),
                "--no-init-file".into(),
                "-e".into(),
                "IRkernel::main()".into(),
                "--args".into(),
                file,
            ],
            // ipykernel's wrapper-kernel base speaks Jupyter; the cells run
            // in JShell, in a JVM it starts (`java_kernel.py`). `-I` as for
            // Python: nothing in the home takes part in starting it.
            Self::Java => vec![
                format!("{PYTHON_ENV}/bin/python3"),
                "-I".into(),
                super::super::etc::JAVA_KERNEL_PATH.into(),
                "-f".into(),
                file,
                "--IPKernelApp.log_level=ERROR".into(),
            ],
        }
    }

    pub(super) fn env(self) -> Vec<(String, String)> {
        let pairs: &[(&str, &str)] = match self {
            Self::Python | Self::Java => KERNEL_ENV,
            Self::R => R_ENV,
            Self::Javascript | Self::Typescript => &[],
        };
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    /// A cell that moves the kernel to `cwd`.
    pub fn chdir(self, cwd: &str) -> String {
        // A JSON string is a string literal in all four languages (Java
        // reads `\u2028` as JSON writes it; JSON's `\/` is never written).
        let quoted = serde_json::to_string(cwd).unwrap_or_default();
        match self {
            Self::Python => format!("import os as _os; _os.chdir({quoted}); del _os"),
            Self::Javascript | Self::Typescript => format!("process.chdir({quoted})"),
            Self::R => format!("invisible(setwd({quoted}))"),
            // A JVM cannot change its working directory: `user.dir` is
            // where programs look for it (and E2B's Java kernel reports).
            Self::Java => format!("System.setProperty(\"user.dir\", {quoted});"),
        }
    }
}

/// The kernel's environment beyond the jail's defaults. IPython's and
/// Jupyter's configuration and data live in the jail's own /tmp (a fresh
/// tmpfs each jail), not in the session's home, so no file the session left
/// runs when a kernel starts.
const KERNEL_ENV: &[(&str, &str)] = &[
    // Figures are sent to the page as PNG when a cell shows them.
    ("MPLBACKEND", "module://matplotlib_inline.backend_inline"),
    // Plotly figures as their JSON (`application/vnd.plotly.v1+json`),
    // which the page draws, not as HTML carrying all of plotly.js.
    ("PLOTLY_RENDERER", "plotly_mimetype"),
    ("IPYTHONDIR", "/tmp/.ipython"),
    ("JUPYTER_CONFIG_DIR", "/tmp/.jupyter"),
    ("JUPYTER_DATA_DIR", "/tmp/.jupyter/data"),
    ("JUPYTER_RUNTIME_DIR", "/tmp/.jupyter/runtime"),
];

/// The R kernel's environment beyond the jail's defaults: nothing in the
/// session's home takes part in starting it. `/dev/null` is read for the
/// user's `.Renviron` (which could name another profile, library or default
/// packages), and the user library, which R puts before the site library
/// when it exists (`~/R/<platform>-library/<version>`, where a planted
/// `uuid` or `IRkernel` would be loaded in place of the real one), is a
/// directory of the jail's own /tmp (a fresh tmpfs each jail) that does not
/// exist when the kernel starts. A library in the home is still used by a
/// cell that asks for it (`library(x, lib.loc = ...)`, `.libPaths()`).
const R_ENV: &[(&str, &str)] = &[
    ("R_ENVIRON_USER", "/dev/null"),
    ("R_LIBS_USER", "/tmp/.R/library"),
];

/// Starts ipykernel as `python -m ipykernel_launcher` does, with two of
/// the packages it imports at start kept out: debugpy (the visual debugger,
/// 108 modules that nothing of runcell's uses: 7.5 MiB of every idle kernel)
/// and psutil (0.8 MiB: ipykernel takes it for its usage reports, which
/// runcell never asks for). ipykernel takes their absence as it takes a
/// venv without them. [`LEFT_OUT_BACK`] lets cells import them again.
const LAUNCH: &str = "import sys; sys.modules['debugpy'] = sys.modules['psutil'] = None; from ipykernel import kernelapp; kernelapp.launch_new_instance()";

/// Once the kernel is up, the packages [`LAUNCH`] kept out can be imported
/// by cells like any other.
const LEFT_OUT_BACK: &str =
    "import sys as _s; _s.modules.pop('debugpy', None); _s.modules.pop('psutil', None); del _s";

/// Run by the kernel once it is up: a data frame shown is also given as
/// its data ([`crate::TABLE_DATA_MIME`]: its first 10,000 rows or
/// 2 MB of values, whichever comes first, and how many rows it has), each
/// value as pandas writes it in its own tables (`format_array`, `str` if
/// that fails). Registered by name, so pandas is imported only
/// by the cells that use it. Any failure leaves the frame to its HTML.
const TABLE_DATA: &str = r#"def _runcell_table_data():
    from IPython import get_ipython
    from IPython.core.formatters import JSONFormatter
    class TableData(JSONFormatter):
        format_type = 'application/vnd.runcell.table+json'
    shown = get_ipython().display_formatter
    formatter = TableData(parent=shown)
    shown.formatters[formatter.format_type] = formatter
    def frame(df, most_rows=10000, most_chars=2000000):
        try:
            from pandas.io.formats.format import format_array
        except Exception:
            format_array = None
        def texts(values):
            if format_array is not None:
                try:
                    return [v.strip() for v in format_array(values, None)]
                except Exception:
                    pass
            return [str(v) for v in values]
        def name(n):
            return ' '.join(map(str, n)) if isinstance(n, tuple) else ('' if n is None else str(n))
        if df.columns.nlevels > 1:
            return None  # headers over several columns: its HTML shows them
        head = df.head(most_rows)
        values = [texts(head.index.get_level_values(i)._values) for i in range(head.index.nlevels)]
        values += [texts(head.iloc[:, j]._values) for j in range(head.shape[1])]
        rows, size = [], 0
        for i in range(len(head)):
            row = [column[i] for column in values]
            size += sum(map(len, row))
            if size > most_chars:
                break
            rows.append(row)
        index = [name(n) for n in df.index.names]
        return {'columns': index + [name(c) for c in df.columns], 'index_columns': len(index), 'rows': rows, 'total_rows': len(df)}
    # pandas 3 names its classes' module `pandas`; earlier ones, where they live.
    for module in ('pandas', 'pandas.core.frame'):
        formatter.for_type_by_name(module, 'DataFrame', frame)
_runcell_table_data()
del _runcell_table_data"#;

/// Run by the kernel once it is up, after [`TABLE_DATA`]: a frame printed
/// alone is shown as a displayed one is (the page's table, its text kept),
/// and a figure with nothing drawn on it is left out, said on stderr; both
/// off in a kernel E2B's formatters were registered in, whose clients see
/// what E2B's own kernels give.
const NOTEBOOK_HOOKS: &str = include_str!("notebook_hooks.py");

/// Run by the kernel once it is up, when the session can install packages:
/// their directory made (so that what pip puts there later is found) and
/// put on `sys.path` after the environment's own, whose packages stay the
/// ones imported (a session cannot shadow numpy under pandas). A path entry,
/// not a site (`site.addsitedir`): a `.pth` file there, which any cell can
/// write, is not run as each kernel starts; a package that needs its `.pth`
/// (an editable install) is not imported by a kernel.
fn site_on_path(site: &str) -> String {
    let quoted = serde_json::to_string(site).unwrap_or_default();
    format!(
        "import os as _o, sys as _s; _o.makedirs({quoted}, exist_ok=True); _s.path.insert(1 + max((i for i, p in enumerate(_s.path) if p.endswith('site-packages')), default=len(_s.path) - 1), {quoted}); del _o, _s; "
    )
}

/// Run by the kernel once it is up: the working directory on `sys.path`,
/// last: after the environment's packages (and the session's own, which
/// [`site_on_path`] puts after the environment's), so that cells import
/// their modules from it but no file the session wrote stands in for a
/// module the kernel imports by itself later (`stack_data` for the first
/// traceback, `pexpect` for the first `!command`) or one a package imports
/// (`matplotlib_inline`, loaded by matplotlib for the first figure). A
/// module in the home whose name an installed package has is not imported
/// in its place, as it would be by a plain `python3` there.
const HOME_ON_PATH: &str = "import sys as _s; _s.path.insert(1 + max((i for i, p in enumerate(_s.path) if p.endswith(('site-packages', 'dist-packages'))), default=len(_s.path) - 1), ''); del _s";

#[cfg(test)]
mod tests {
    use super::*;

    /// `sys.path` once the kernel's first lines ran on `path`, with the
    /// session's packages in `site` when given.
    fn path_after_start(path: &[&str], site: Option<&str>) -> String {
        let lines = format!(
            "import sys; sys.path[:] = {path:?}; {HOME_ON_PATH}; {}print(sys.path)",
            site.map(site_on_path).unwrap_or_default()
        );
        let out = std::process::Command::new(format!("{PYTHON_ENV}/bin/python3"))
            .args(["-I", "-c", &lines])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn the_home_comes_after_every_installed_package() {
        if !Path::new(PYTHON_ENV).is_dir() {
            // The sandbox's Python is made by scripts/setup.sh; the
            // integration tests refuse to run without it.
            return;
        }
        let system = [
            "/usr/lib/python311.zip",
            "/usr/lib/python3.11",
            "/env/site-packages",
        ];
        assert_eq!(
            path_after_start(&system, None),
            "['/usr/lib/python311.zip', '/usr/lib/python3.11', '/env/site-packages', '']\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site-packages");
        let site = site.to_str().unwrap();
        assert_eq!(
            path_after_start(&system, Some(site)),
            format!(
                "['/usr/lib/python311.zip', '/usr/lib/python3.11', '/env/site-packages', '{site}', '']\n"
            )
        );
        assert!(Path::new(site).is_dir());
        assert_eq!(
            path_after_start(&["/usr/lib/python3.11"], None),
            "['/usr/lib/python3.11', '']\n"
        );
    }
}
