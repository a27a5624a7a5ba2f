//! A `curl` command per operation on the page.

use serde_json::Value;

use super::model::{Body, Parameter, Security};

/// Where the examples send requests: `runcell serve`'s default address, as
/// in the README's examples.
pub const BASE: &str = "http://localhost:3000";

/// The shell variable that holds the key or token in every example.
pub const KEY_VARIABLE: &str = "RUNCELL_KEY";

/// Names a shell gives a meaning of its own; a parameter called so gets a
/// prefix (`$PARAM_PATH`), so that the example does not read `$PATH`.
const SHELL_NAMES: [&str; 12] = [
    "PATH", "HOME", "PWD", "OLDPWD", "USER", "SHELL", "IFS", "TERM", "LANG", "UID", "RANDOM",
    "SECONDS",
];

/// A `curl` command that calls `method path`: path parameters and
/// required query and header parameters as shell variables, the key from
/// `$RUNCELL_KEY` when credentials are needed, and the body's example.
pub fn command(
    method: &str,
    path: &str,
    parameters: &[Parameter],
    body: Option<&Body>,
    security: &Security,
) -> String {
    let mut url = String::from(BASE);
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        url.push_str(&in_double_quotes(&rest[..open]));
        url.push('$');
        url.push_str(&variable(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    url.push_str(&in_double_quotes(rest));
    let query: Vec<String> = parameters
        .iter()
        .filter(|p| p.location == "query" && p.required)
        .map(|p| format!("{}=${}", in_double_quotes(&p.name), variable(&p.name)))
        .collect();
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }

    let mut first = String::from("curl");
    if url.contains(['[', ']', '{', '}']) {
        // curl would read brackets and braces as a pattern of URLs.
        first.push_str(" --globoff");
    }
    if method != "GET" {
        first.push_str(&format!(" -X {method}"));
    }
    first.push_str(&format!(" \"{url}\""));
    let mut lines = vec![first];
    if *security != Security::Open {
        lines.push(format!("-H \"Authorization: Bearer ${KEY_VARIABLE}\""));
    }
    for header in parameters
        .iter()
        .filter(|p| p.location == "header" && p.required)
    {
        lines.push(format!(
            "-H \"{}: ${}\"",
            in_double_quotes(&header.name),
            variable(&header.name)
        ));
    }
    if let Some(body) = body {
        lines.extend(body_lines(body));
    }
    lines.join(" \\\n  ")
}

/// How the body is sent: the first media type's example, or a file.
fn body_lines(body: &Body) -> Vec<String> {
    let Some(content) = body.contents.first() else {
        return Vec::new();
    };
    let media = content.media_type.as_str();
    let essence = media.split(';').next().unwrap_or("").trim();
    let compact = content
        .example
        .as_deref()
        .and_then(|e| serde_json::from_str::<Value>(e).ok())
        .and_then(|e| serde_json::to_string(&e).ok());
    let is_json = essence == "application/json" || essence.ends_with("+json");
    match (is_json, compact) {
        (true, Some(json)) => vec![
            format!("-H {}", in_single_quotes(&format!("content-type: {media}"))),
            format!("-d {}", in_single_quotes(&json)),
        ],
        _ if essence == "multipart/form-data" => vec!["-F 'file=@data.csv'".into()],
        _ if !body.required => Vec::new(),
        (true, None) => vec![
            format!("-H {}", in_single_quotes(&format!("content-type: {media}"))),
            "-d @body.json".into(),
        ],
        (false, _) => vec![
            format!("-H {}", in_single_quotes(&format!("content-type: {media}"))),
            "--data-binary @data.csv".into(),
        ],
    }
}

/// A shell variable for a parameter: `id` → `ID`, `max-rows` → `MAX_ROWS`.
fn variable(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if SHELL_NAMES.contains(&out.as_str()) {
        out.insert_str(0, "PARAM_");
    }
    out
}

/// `text` as it must be written between `"`s in a shell.
fn in_double_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` between `'`s, each `'` in it closed, escaped and reopened.
fn in_single_quotes(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::super::model::Content;
    use super::super::schema::Shape;
    use super::*;

    fn parameter(name: &str, location: &str, required: bool) -> Parameter {
        Parameter {
            name: name.into(),
            location: location.into(),
            required,
            shape: Shape::default(),
            description: None,
        }
    }

    fn json_body(example: Option<&str>) -> Body {
        Body {
            description: None,
            required: true,
            contents: vec![Content {
                media_type: "application/json".into(),
                shape: None,
                example: example.map(str::to_owned),
            }],
        }
    }

    #[test]
    fn curl_commands() {
        let bearer = Security::AnyOf(vec![vec!["bearer".into()]]);
        assert_eq!(
            command(
                "GET",
                "/v1/s/{id}/files",
                &[
                    parameter("id", "path", true),
                    parameter("path", "query", true),
                    parameter("overwrite", "query", false),
                ],
                None,
                &bearer
            ),
            "curl \"http://localhost:3000/v1/s/$ID/files?path=$PARAM_PATH\" \\\n  \
             -H \"Authorization: Bearer $RUNCELL_KEY\""
        );
        assert_eq!(
            command(
                "POST",
                "/v1/auth/token",
                &[],
                Some(&json_body(Some("{\n  \"key\": \"it's\"\n}"))),
                &Security::Open
            ),
            "curl -X POST \"http://localhost:3000/v1/auth/token\" \\\n  \
             -H 'content-type: application/json' \\\n  \
             -d '{\"key\":\"it'\\''s\"}'"
        );
        assert!(
            command("POST", "/a", &[], Some(&json_body(None)), &Security::Open)
                .ends_with("-d @body.json")
        );
        let odd = command("DELETE", "/a/\"$(x)`{y", &[], None, &Security::Open);
        assert_eq!(
            odd,
            "curl --globoff -X DELETE \"http://localhost:3000/a/\\\"\\$(x)\\`{y\""
        );
        assert!(command("GET", "/a/[b]", &[], None, &Security::Open).contains("--globoff"));
    }
}
