//! Example bodies on the page, where the document gives examples (of the
//! body, or of its fields).

use serde_json::{Map, Value};

use super::schema::{MAX_DEPTH, Schemas, reference, required};

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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;

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
