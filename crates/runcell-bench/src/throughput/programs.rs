//! The public program set of `runcell bench throughput` (`programs.txt`):
//! small tests of our own, each in a right and a broken variant.

use runcell_sandbox::Language;

/// The set, as committed.
const PROGRAMS: &str = include_str!("programs.txt");

/// One program of the set.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub language: Language,
    /// The variant that passes (exit status 0).
    pub right: String,
    /// The same program with its expected value wrong: it fails.
    pub broken: String,
}

#[derive(Debug, thiserror::Error)]
#[error("programs.txt, {name}: {problem}")]
pub struct SetError {
    name: String,
    problem: String,
}

/// Every program of the set.
pub fn all() -> Result<Vec<Program>, SetError> {
    parse(PROGRAMS)
}

fn parse(text: &str) -> Result<Vec<Program>, SetError> {
    let mut programs = Vec::new();
    let mut current: Option<(String, Language, String)> = None;
    let finish = |(name, language, body): (String, Language, String)| {
        let (right, broken) = variants(&body).map_err(|problem| SetError {
            name: name.clone(),
            problem,
        })?;
        Ok::<_, SetError>(Program {
            name,
            language,
            right,
            broken,
        })
    };
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("### ") {
            if let Some(done) = current.take() {
                programs.push(finish(done)?);
            }
            let mut words = header.split_whitespace();
            let (Some(name), Some(language), None) = (words.next(), words.next(), words.next())
            else {
                return Err(SetError {
                    name: header.into(),
                    problem: "a header is `### name language`".into(),
                });
            };
            let language: Language = language.parse().map_err(|e| SetError {
                name: name.into(),
                problem: format!("{e}"),
            })?;
            current = Some((name.to_string(), language, String::new()));
        } else if let Some((_, _, body)) = &mut current {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some(done) = current.take() {
        programs.push(finish(done)?);
    }
    Ok(programs)
}

/// Python programs of an evaluation task's size and larger: the set's own
/// Python programs one after another (each a function and its checks)
/// until the text holds `kib` KiB, for each of `sizes_kib`; the broken
/// variant breaks the last one. HumanEval's programs are 0.4 to 4 KB.
pub fn bundles(set: &[Program], sizes_kib: &[usize]) -> Vec<Program> {
    let python: Vec<&Program> = set
        .iter()
        .filter(|p| p.language == Language::Python)
        .collect();
    let mut bundles = Vec::new();
    if python.is_empty() {
        return bundles;
    }
    for &kib in sizes_kib {
        let mut right = String::new();
        let mut last = python[0];
        for program in python.iter().cycle() {
            if right.len() >= kib * 1024 {
                break;
            }
            right.push_str(&program.right);
            last = program;
        }
        let head = right.len() - last.right.len();
        let broken = format!("{}{}", &right[..head], last.broken);
        bundles.push(Program {
            name: format!("py-bundle-{kib}k"),
            language: Language::Python,
            right,
            broken,
        });
    }
    bundles
}

/// The right and the broken text of a body with one `@@right|wrong@@`.
fn variants(body: &str) -> Result<(String, String), String> {
    let (head, rest) = body.split_once("@@").ok_or("no `@@right|wrong@@` marker")?;
    let (marked, tail) = rest.split_once("@@").ok_or("an unclosed `@@` marker")?;
    if tail.contains("@@") {
        return Err("more than one marker".into());
    }
    let (right, wrong) = marked
        .split_once('|')
        .ok_or("a marker is `@@right|wrong@@`")?;
    if wrong.contains('|') {
        return Err("a marker's values hold no `|`".into());
    }
    if right == wrong || right.is_empty() || wrong.is_empty() {
        return Err("a marker needs two different values".into());
    }
    Ok((
        format!("{head}{right}{tail}"),
        format!("{head}{wrong}{tail}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_set_has_150_programs_in_every_language_with_unique_names() {
        let programs = all().unwrap();
        assert!(programs.len() >= 150, "{}", programs.len());
        // TypeScript and R are not in the set yet.
        for language in [
            Language::Python,
            Language::Javascript,
            Language::Bash,
            Language::C,
        ] {
            assert!(
                programs.iter().filter(|p| p.language == language).count() >= 10,
                "{language:?}"
            );
        }
        let mut names: Vec<_> = programs.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), programs.len());
        assert!(programs.iter().all(|p| p.right != p.broken));
    }

    #[test]
    fn bundles_are_python_programs_of_at_least_their_size_broken_at_the_end() {
        let set = all().unwrap();
        let bundles = bundles(&set, &[1, 10]);
        assert_eq!(bundles.len(), 2);
        for (bundle, kib) in bundles.iter().zip([1, 10]) {
            assert_eq!(bundle.name, format!("py-bundle-{kib}k"));
            assert!(bundle.right.len() >= kib * 1024);
            assert!(bundle.right.len() < kib * 1024 + 2048);
            assert_ne!(bundle.right, bundle.broken);
            // Only the last program differs.
            let same = bundle
                .right
                .bytes()
                .zip(bundle.broken.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            assert!(same > bundle.right.len() - 600, "{same}");
        }
    }

    #[test]
    fn a_marker_gives_two_variants_and_bad_markers_are_named() {
        let set = parse("# a comment\n### one python\nassert f() == @@1|2@@\n").unwrap();
        assert_eq!(set.len(), 1);
        assert_eq!(set[0].right, "assert f() == 1\n");
        assert_eq!(set[0].broken, "assert f() == 2\n");
        for bad in [
            "### x python\nassert 1\n",
            "### x python\n@@1|2\n",
            "### x python\n@@1|1@@\n",
            "### x python\n@@1@@\n",
            "### x python\n@@1|2@@ @@3|4@@\n",
            "### x python\n@@\"a|b\"|\"c\"@@\n",
            "### x cobol\n@@1|2@@\n",
            "### x\n@@1|2@@\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
