//! Project names and distribution filenames: PEP 503 normalisation, the
//! PEP 508 name grammar, and the project and version a filename names.

/// The longest project name accepted.
const MAX_NAME: usize = 100;

/// The PEP 503 form of `name`: runs of `-`, `_` and `.` become one `-`, lowercase.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for ch in name.chars() {
        if matches!(ch, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(ch.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// Whether `name` is a valid project name (PEP 508:
/// `^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`, ignoring case), at most 100 characters.
pub fn is_project_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    name.len() <= MAX_NAME
        && first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `filename` is safe to put in a path and a URL as it is: ASCII
/// letters, digits and `._+!-`, no `..`, not empty, at most 255 bytes.
pub(crate) fn is_safe_filename(filename: &str) -> bool {
    !filename.is_empty()
        && filename.len() <= 255
        && !filename.contains("..")
        && filename
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'!' | b'-'))
}

/// The normalised project, the version and whether it is a wheel, from a
/// wheel's (`{name}-{ver}(-{build})?-{py}-{abi}-{plat}.whl`) or an sdist's
/// (`{name}-{ver}.tar.gz` or `.zip`, split at the last `-`) filename.
pub fn parse_filename(filename: &str) -> Option<(String, String, bool)> {
    if let Some(stem) = filename.strip_suffix(".whl") {
        let parts: Vec<&str> = stem.split('-').collect();
        if !(parts.len() == 5 || parts.len() == 6) || parts.iter().any(|p| p.is_empty()) {
            return None;
        }
        let (name, version) = (parts[0], parts[1]);
        if parts.len() == 6 && !parts[2].starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        return named(name, version, true);
    }
    let stem = filename
        .strip_suffix(".tar.gz")
        .or_else(|| filename.strip_suffix(".zip"))?;
    let (name, version) = stem.rsplit_once('-')?;
    named(name, version, false)
}

fn named(name: &str, version: &str, wheel: bool) -> Option<(String, String, bool)> {
    let version_ok = !version.is_empty()
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'!'));
    (is_project_name(name) && version_ok).then(|| (normalize(name), version.to_string(), wheel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_as_pep_503_says() {
        for (raw, want) in [
            ("Foo_Bar", "foo-bar"),
            ("foo.-_bar", "foo-bar"),
            ("Django", "django"),
            ("a--b__c..d", "a-b-c-d"),
        ] {
            assert_eq!(normalize(raw), want, "{raw}");
        }
    }

    #[test]
    fn project_names() {
        for ok in ["a", "foo-bar", "Foo_Bar", "x1.2", "zope.interface"] {
            assert!(is_project_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "../x",
            "..",
            "a/b",
            "a b",
            "é",
            "%2e%2e",
            &"a".repeat(101),
        ] {
            assert!(!is_project_name(bad), "{bad}");
        }
    }

    #[test]
    fn filenames() {
        let check = |f: &str, want: Option<(&str, &str, bool)>| {
            let got = parse_filename(f);
            let got = got.as_ref().map(|(p, v, w)| (p.as_str(), v.as_str(), *w));
            assert_eq!(got, want, "{f}");
        };
        check(
            "Foo_Bar-1.0-py3-none-any.whl",
            Some(("foo-bar", "1.0", true)),
        );
        check(
            "numpy-2.1.0-1-cp312-cp312-manylinux_2_17_x86_64.whl",
            Some(("numpy", "2.1.0", true)),
        );
        check(
            "torch-2.0.0+cpu-cp311-cp311-linux_x86_64.whl",
            Some(("torch", "2.0.0+cpu", true)),
        );
        check("foo-1.0-x-py3-none-any.whl", None);
        check("foo-1.0-none-any.whl", None);
        check("foo-bar-1.0.tar.gz", Some(("foo-bar", "1.0", false)));
        check("foo-1.0.zip", Some(("foo", "1.0", false)));
        check("foo-1.0.tar.bz2", None);
        check("foo.tar.gz", None);
        check("../x-1.0-py3-none-any.whl", None);
        assert!(is_safe_filename(
            "torch-2.0.0+cpu-cp311-cp311-linux_x86_64.whl"
        ));
        for bad in ["a/b.whl", "a\\b.whl", "..whl", "a\n.whl", "", "a b.whl"] {
            assert!(!is_safe_filename(bad), "{bad:?}");
        }
    }
}
