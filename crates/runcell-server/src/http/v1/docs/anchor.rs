//! Fragment ids for the page's sections: readable (`post-v1-auth-token`),
//! made only of characters that need no escaping in a URL or a CSS
//! selector, and unique within the page.

use std::collections::HashSet;

/// `text` as an id: ASCII letters, digits, `_` and `-`, lower case, every
/// other run of characters one `-`.
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "section".into()
    } else {
        trimmed.into()
    }
}

/// The slug of `text`, with `-2`, `-3`... when an earlier one took it.
pub fn unique(taken: &mut HashSet<String>, text: &str) -> String {
    let base = slug(text);
    let mut candidate = base.clone();
    let mut n = 1;
    while !taken.insert(candidate.clone()) {
        n += 1;
        candidate = format!("{base}-{n}");
    }
    candidate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_and_unique() {
        assert_eq!(
            slug("GET /v1/code_interpreter/sessions/{id}"),
            "get-v1-code_interpreter-sessions-id"
        );
        assert_eq!(slug("\"><script>"), "script");
        assert_eq!(slug("ÄÖ"), "section");
        let mut taken = HashSet::new();
        assert_eq!(unique(&mut taken, "a b"), "a-b");
        assert_eq!(unique(&mut taken, "a/b"), "a-b-2");
        assert_eq!(unique(&mut taken, "a-b"), "a-b-3");
    }
}
