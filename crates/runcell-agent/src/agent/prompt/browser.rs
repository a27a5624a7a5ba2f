//! What the model and the person are told about the Browser sandbox
//! (Pyodide in the person's page): the packages the site ships with it
//! (its lock file's imports, read by `runcell_sandbox::browser::find_runtime`),
//! that nothing installs others, and where a missing package can be had.

/// The packages the small models reach for first; the note says which of
/// them the Browser sandbox lacks.
const USUAL: [&str; 3] = ["numpy", "pandas", "matplotlib"];

/// Added to the system prompt when the programs run in the person's page
/// (the Browser sandbox), where most of the jail's packages are missing.
/// The worker's policy lets a program reach this site alone, and nothing
/// installs packages: said so, not that there is no network at all.
pub fn browser_note(imports: &[String]) -> String {
    let extra = if imports.is_empty() {
        String::new()
    } else {
        format!(" and {}", imports.join(", "))
    };
    let missing: Vec<&str> = USUAL
        .into_iter()
        .filter(|name| !imports.iter().any(|i| i == name))
        .collect();
    let missing = match missing.as_slice() {
        [] => String::new(),
        [one] => format!(" there is no {one};"),
        [rest @ .., last] => format!(" there is no {} or {last};", rest.join(", ")),
    };
    format!(
        "The programs run in the person's web browser (Pyodide): only Python's standard \
         library{extra} can be imported;{missing} there is no pip (never write `%pip`, `!pip` or \
         `pip install`), no other package can be installed, and no other web site can be \
         reached."
    )
}

/// Why a program that installs packages is not run as written in the
/// Browser sandbox.
pub fn pip_refusal(imports: &[String]) -> String {
    format!(
        "the Browser sandbox cannot install packages (there is no pip); it has {}",
        what_it_has(imports)
    )
}

/// The Browser sandbox's packages, as a person reads them.
fn what_it_has(imports: &[String]) -> String {
    if imports.is_empty() {
        "Python's standard library only".to_string()
    } else {
        format!("Python's standard library and {}", imports.join(", "))
    }
}

/// For the person, when a turn in the Browser sandbox found no answer
/// because a package is missing (or its program tried to install one):
/// what the sandbox has, and how to run on the local one instead. `None`
/// when the failure was something else.
pub fn browser_remedy(report: &str, imports: &[String]) -> Option<String> {
    let module = missing_module(report);
    let pip = report.contains(PIP_MARK);
    if module.is_none() && !pip {
        return None;
    }
    let wanted = match module {
        Some(name) => format!("`{name}`"),
        None => "other packages".to_string(),
    };
    Some(format!(
        "The Browser sandbox runs Python in this page and has {}; it cannot install \
         packages. For {wanted}, choose the local sandbox in the Sandbox picker and ask \
         again.",
        what_it_has(imports)
    ))
}

/// What [`pip_refusal`] says, to find it in a report.
const PIP_MARK: &str = "cannot install packages (there is no pip)";

/// The module a report says is missing: CPython's and Pyodide's
/// `No module named 'x'`, and Pyodide's `The module 'x' is included in the
/// Pyodide distribution, but it is not installed`.
fn missing_module(report: &str) -> Option<&str> {
    let after = report
        .split_once("No module named '")
        .or_else(|| report.split_once("The module '"))?
        .1;
    let (name, _) = after.split_once('\'')?;
    let top = name.split('.').next()?;
    let plain = !top.is_empty()
        && top.len() <= 100
        && top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    plain.then_some(top)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The imports of the lock file `scripts/build.sh` serves (Pyodide
    /// 314.0.7 with `scripts/pyodide-wheels.txt`).
    fn shipped() -> Vec<String> {
        [
            "bs4",
            "dateutil",
            "isympy",
            "mpmath",
            "pytz",
            "six",
            "soupsieve",
            "sympy",
            "typing_extensions",
            "tzdata",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn the_note_names_the_shipped_packages_and_says_there_is_no_pip() {
        assert_eq!(
            browser_note(&shipped()),
            "The programs run in the person's web browser (Pyodide): only Python's standard \
             library and bs4, dateutil, isympy, mpmath, pytz, six, soupsieve, sympy, \
             typing_extensions, tzdata can be imported; there is no numpy, pandas or \
             matplotlib; there is no pip (never write `%pip`, `!pip` or `pip install`), no \
             other package can be installed, and no other web site can be reached."
        );
        // A vendored package is never said to be missing.
        let note = browser_note(&["numpy".into(), "pandas".into()]);
        assert!(note.contains("there is no matplotlib;"), "{note}");
        assert!(!note.contains("no numpy"), "{note}");
        // Programs reach the site itself (the worker's connect-src is
        // 'self'): the note must not claim there is no network.
        assert!(!note.contains("no network"), "{note}");
    }

    #[test]
    fn the_imports_are_read_back_from_the_note() {}

    #[test]
    fn a_missing_package_gets_the_sandbox_picker() {
        let report = "Traceback (most recent call last):\n  File \"<exec>\", line 1, in <module>\n\
                      ModuleNotFoundError: No module named 'numpy'\n";
        assert_eq!(
            browser_remedy(report, &["six".into(), "sympy".into()]).as_deref(),
            Some(
                "The Browser sandbox runs Python in this page and has Python's standard \
                 library and six, sympy; it cannot install packages. For `numpy`, choose the \
                 local sandbox in the Sandbox picker and ask again."
            )
        );
        let pyodide = "ModuleNotFoundError: The module 'pandas' is included in the Pyodide \
                       distribution, but it is not installed.\nYou can install it by calling:\n  \
                       await micropip.install(\"pandas\") in Python, or\nSee \
                       https://pyodide.org/en/stable/usage/loading-packages.html for more details.";
        assert!(
            browser_remedy(pyodide, &[])
                .unwrap()
                .contains("For `pandas`, choose the local")
        );
        let refused = pip_refusal(&[]);
        assert_eq!(
            refused,
            "the Browser sandbox cannot install packages (there is no pip); it has Python's \
             standard library only"
        );
        assert!(
            browser_remedy(&refused, &[])
                .unwrap()
                .contains("For other packages,")
        );
        assert_eq!(
            browser_remedy("ZeroDivisionError: division by zero", &[]),
            None
        );
    }
}
