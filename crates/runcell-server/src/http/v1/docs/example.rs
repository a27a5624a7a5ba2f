//! Examples on the page: a `curl` command per operation, and an example
//! body where the document gives examples (of the body, or of its fields).

use serde_json::{Map, Value};

use super::model::{Body, Parameter, Security};
use super::schema::{MAX_DEPTH, Schemas, reference, required};

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

/// The example of a media type: its own `example` or first `examples`
/// entry, else one made from its schema's examples.
pub fn of_media(schemas: &Schemas<'_>, media: &Value) -> Option<Value> {
    if let Some(example) = media.get("example") {
        return Some(example.clone());
    }
    let named = media
        .get("examples")
        .and_then(Value::as_object)
        .and_then(|examples| examples.values().find_map(|e| e.get("value")));
    if let Some(example) = named {
        return Some(example.clone());
    }
    of_schema(schemas, media.get("schema")?, &mut Vec::new()).map(|(example, _)| example)
}

/// A schema's example, and whether the document gave any of it: its own,
/// else (for an object) one made of its fields' examples, with required
/// fields that have a default or a single choice filled in (`{}` for an
/// object that needs no field). None when a required field has no value.
/// `open` holds the references being followed, so that a schema that
/// contains itself ends.
fn of_schema<'a>(
    schemas: &Schemas<'a>,
    schema: &'a Value,
    open: &mut Vec<&'a str>,
) -> Option<(Value, bool)> {
    let object = schema.as_object()?;
    if let Some(example) = object.get("example") {
        return Some((example.clone(), true));
    }
    if let Some(first) = object
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return Some((first.clone(), true));
    }
    if open.len() > MAX_DEPTH {
        return None;
    }
    if let Some(name) = reference(schema) {
        if open.contains(&name) {
            return None;
        }
        let target = schemas.resolve(name)?;
        open.push(name);
        let example = of_schema(schemas, target, open);
        open.pop();
        return example;
    }
    if let Some(value) = ["default", "const"]
        .iter()
        .find_map(|key| object.get(*key))
        .or_else(|| object.get("enum").and_then(Value::as_array)?.first())
    {
        return Some((value.clone(), false));
    }
    let properties = object.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = required(object).collect();
    let mut out = Map::new();
    let mut given = false;
    let mut complete = true;
    open.push("");
    for (name, property) in properties {
        let needed = required.contains(&name.as_str());
        match of_schema(schemas, property, open) {
            Some((example, true)) => {
                out.insert(name.clone(), example);
                given = true;
            }
            Some((value, false)) if needed => {
                out.insert(name.clone(), value);
            }
            None if needed => complete = false,
            _ => {}
        }
    }
    open.pop();
    (given || complete).then_some((Value::Object(out), given))
}

/// A `curl` command that calls `method path`: path parameters and
/// required query and header parameters as shell variables, the key from
/// `$RUNCELL_KEY` when credentials are needed, and the body's example.
pub fn curl(
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
    use std::collections::HashSet;

    use serde_json::json;

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
            curl(
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
            curl(
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
            curl("POST", "/a", &[], Some(&json_body(None)), &Security::Open)
                .ends_with("-d @body.json")
        );
        let odd = curl("DELETE", "/a/\"$(x)`{y", &[], None, &Security::Open);
        assert_eq!(
            odd,
            "curl --globoff -X DELETE \"http://localhost:3000/a/\\\"\\$(x)\\`{y\""
        );
        assert!(curl("GET", "/a/[b]", &[], None, &Security::Open).contains("--globoff"));
    }

    #[test]
    fn examples_come_from_the_schema_and_end() {
        let doc = json!({"components": {"schemas": {
            "Run": {
                "type": "object",
                "required": ["code", "language", "other"],
                "properties": {
                    "code": {"type": "string", "example": "print(1)"},
                    "language": {"$ref": "#/components/schemas/Language"},
                    "other": {"type": "string"},
                    "me": {"$ref": "#/components/schemas/Run"},
                }
            },
            "Language": {"type": "string", "enum": ["python", "bash"]},
            "Plain": {"type": "object", "properties": {"a": {"type": "string"}}},
            "Needs": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
            "Nested": {"type": "object", "required": ["plain"], "properties": {
                "plain": {"$ref": "#/components/schemas/Plain"},
                "optional": {"$ref": "#/components/schemas/Plain"},
            }},
        }}});
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        let media =
            |name: &str| json!({"schema": {"$ref": format!("#/components/schemas/{name}")}});
        assert_eq!(
            of_media(&schemas, &media("Run")),
            Some(json!({"code": "print(1)", "language": "python"}))
        );
        assert_eq!(of_media(&schemas, &media("Plain")), Some(json!({})));
        assert_eq!(of_media(&schemas, &media("Needs")), None);
        assert_eq!(
            of_media(&schemas, &media("Nested")),
            Some(json!({"plain": {}}))
        );
        assert_eq!(
            of_media(&schemas, &json!({"example": [1], "schema": {}})),
            Some(json!([1]))
        );
        assert_eq!(
            of_media(&schemas, &json!({"examples": {"one": {"value": 2}}})),
            Some(json!(2))
        );
    }
}
