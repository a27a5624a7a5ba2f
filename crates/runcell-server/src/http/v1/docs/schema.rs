//! JSON Schemas (as OpenAPI 3.0 and 3.1 write them) to what a reader needs:
//! a type label whose named schemas are links, constraints in words, a
//! description, and the fields of an object. Pure and total: a schema of
//! the wrong shape gives less output, never a panic, and the walk is
//! bounded (a `$ref` is followed at most one level, nesting at most
//! [`MAX_DEPTH`] levels), so a schema that refers to itself ends.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

/// Nested inline schemas deeper than this are shown as "…".
pub const MAX_DEPTH: usize = 6;

/// How many `$ref`s in a row are followed to find what a name stands for.
const MAX_HOPS: usize = 8;

/// One piece of a type label: words, or the name of a component schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Link { name: String, anchor: String },
}

/// A schema as the page shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub label: Vec<Part>,
    pub constraints: Vec<String>,
    pub description: Option<String>,
    /// The properties of an object (or of an array's items).
    pub fields: Vec<Field>,
    /// `oneOf`/`anyOf` alternatives that are objects of their own.
    pub variants: Vec<Shape>,
}

/// A property of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub required: bool,
    pub shape: Shape,
}

/// The component schemas of a document, by name, with the anchor of each.
#[derive(Debug, Default)]
pub struct Schemas<'a> {
    by_name: BTreeMap<String, (&'a Value, String)>,
}

impl<'a> Schemas<'a> {
    /// The schemas under `components.schemas`, each given an anchor not
    /// in `taken`.
    pub fn new(doc: &'a Value, taken: &mut HashSet<String>) -> Self {
        let by_name = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, schema)| {
                let anchor = super::anchor::unique(taken, &format!("schema-{name}"));
                (name.clone(), (schema, anchor))
            })
            .collect();
        Self { by_name }
    }

    /// Every schema, by name, with its anchor and its shape.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, Shape)> + '_ {
        self.by_name
            .iter()
            .map(|(name, (schema, anchor))| (name.as_str(), anchor.as_str(), self.shape(schema)))
    }

    /// The shape of `schema`, whose references are links.
    pub fn shape(&self, schema: &Value) -> Shape {
        self.walk(schema, 0)
    }

    /// The shape of `schema` with a top-level reference opened: a request
    /// body or response shows the fields of the schema it names, and links
    /// to the schemas those fields name.
    pub fn opened(&self, schema: &Value) -> Shape {
        let Some(name) = reference(schema) else {
            return self.shape(schema);
        };
        let label = vec![self.link(name)];
        let mut shape = match self.resolve(name) {
            Some(target) => self.walk(target, 0),
            None => Shape::default(),
        };
        shape.label = label;
        if let Some(own) = text(schema, "description") {
            shape.description = Some(own);
        }
        shape
    }

    /// The schema `name` stands for, through chains of references; none
    /// for an unknown name or a loop.
    pub fn resolve(&self, name: &str) -> Option<&'a Value> {
        let mut seen = HashSet::new();
        let mut name = name;
        for _ in 0..MAX_HOPS {
            if !seen.insert(name) {
                return None;
            }
            let (schema, _) = self.by_name.get(name)?;
            match reference(schema) {
                Some(next) => name = next,
                None => return Some(schema),
            }
        }
        None
    }

    fn link(&self, name: &str) -> Part {
        match self.by_name.get(name) {
            Some((_, anchor)) => Part::Link {
                name: name.into(),
                anchor: anchor.clone(),
            },
            None => Part::Text(name.into()),
        }
    }

    fn walk(&self, schema: &Value, depth: usize) -> Shape {
        let Some(object) = schema.as_object() else {
            // `true` (anything) or a value that is no schema.
            return Shape {
                label: vec![Part::Text("any".into())],
                ..Shape::default()
            };
        };
        if depth > MAX_DEPTH {
            return Shape {
                label: vec![Part::Text("…".into())],
                ..Shape::default()
            };
        }
        let mut shape = Shape {
            description: text(schema, "description"),
            constraints: constraints(object),
            ..Shape::default()
        };
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            // Only this document's schemas are links; another reference
            // is shown as written.
            shape.label = vec![match reference(schema) {
                Some(name) => self.link(name),
                None => Part::Text(target.into()),
            }];
            return shape;
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(alternatives) = object.get(key).and_then(Value::as_array) {
                self.alternatives(&mut shape, alternatives, depth);
                self.nullable(&mut shape, object);
                return shape;
            }
        }
        if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
            for (i, part) in parts.iter().enumerate() {
                let part = self.walk(part, depth + 1);
                if i > 0 {
                    shape.label.push(Part::Text(" and ".into()));
                }
                shape.label.extend(part.label);
                shape.fields.extend(part.fields);
                shape.constraints.extend(part.constraints);
                if shape.description.is_none() {
                    shape.description = part.description;
                }
            }
            self.nullable(&mut shape, object);
            return shape;
        }
        self.typed(&mut shape, object, depth);
        self.nullable(&mut shape, object);
        shape
    }

    /// `oneOf`/`anyOf`: simple alternatives join the label ("string or
    /// null"); objects of their own are listed as variants.
    fn alternatives(&self, shape: &mut Shape, alternatives: &[Value], depth: usize) {
        let walked: Vec<Shape> = alternatives
            .iter()
            .map(|a| self.walk(a, depth + 1))
            .collect();
        if walked
            .iter()
            .any(|v| !v.fields.is_empty() || !v.variants.is_empty())
        {
            shape.label = vec![Part::Text("one of the variants below".into())];
            shape.variants = walked;
            return;
        }
        for (i, alternative) in walked.into_iter().enumerate() {
            if i > 0 {
                shape.label.push(Part::Text(" or ".into()));
            }
            shape.label.extend(alternative.label);
            shape.constraints.extend(alternative.constraints);
            if shape.description.is_none() {
                shape.description = alternative.description;
            }
        }
    }

    /// A schema with `type` (a name or, in 3.1, a list of names), or with
    /// only `properties`/`items`/`enum` to say what it is.
    fn typed(&self, shape: &mut Shape, object: &Map<String, Value>, depth: usize) {
        let mut names: Vec<&str> = match object.get("type") {
            Some(Value::String(name)) => vec![name.as_str()],
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if names.is_empty() {
            if object.contains_key("properties") {
                names.push("object");
            } else if object.contains_key("items") {
                names.push("array");
            } else if !object.contains_key("enum") && !object.contains_key("const") {
                names.push("any");
            }
        }
        // "null" goes last: "string or null".
        names.sort_by_key(|name| *name == "null");
        for (i, name) in names.into_iter().enumerate() {
            if i > 0 {
                shape.label.push(Part::Text(" or ".into()));
            }
            match name {
                "array" => self.array(shape, object, depth),
                "object" => self.object(shape, object, depth),
                name => {
                    let label = match object.get("format").and_then(Value::as_str) {
                        Some(format) if name != "null" => format!("{name} ({format})"),
                        _ => name.to_owned(),
                    };
                    shape.label.push(Part::Text(label));
                }
            }
        }
        if shape.label.is_empty() {
            // An `enum` or `const` alone: its values say it all.
            shape.label.push(Part::Text("value".into()));
        }
    }

    fn array(&self, shape: &mut Shape, object: &Map<String, Value>, depth: usize) {
        shape.label.push(Part::Text("array".into()));
        let Some(items) = object.get("items") else {
            return;
        };
        let items = self.walk(items, depth + 1);
        shape.label.push(Part::Text(" of ".into()));
        shape.label.extend(items.label);
        shape.fields.extend(items.fields);
        shape.variants.extend(items.variants);
        shape
            .constraints
            .extend(items.constraints.into_iter().map(|c| format!("each: {c}")));
    }

    fn object(&self, shape: &mut Shape, object: &Map<String, Value>, depth: usize) {
        let required: HashSet<&str> = required(object).collect();
        let properties = object.get("properties").and_then(Value::as_object);
        shape.fields.extend(
            properties
                .into_iter()
                .flatten()
                .map(|(name, schema)| Field {
                    name: name.clone(),
                    required: required.contains(name.as_str()),
                    shape: self.walk(schema, depth + 1),
                }),
        );
        match object.get("additionalProperties") {
            Some(values @ Value::Object(_)) if properties.is_none_or(Map::is_empty) => {
                let values = self.walk(values, depth + 1);
                shape.label.push(Part::Text("map of string to ".into()));
                shape.label.extend(values.label);
                shape.fields.extend(values.fields);
            }
            Some(Value::Bool(false)) => {
                shape.label.push(Part::Text("object".into()));
                shape.constraints.push("no properties but these".into());
            }
            _ => shape.label.push(Part::Text("object".into())),
        }
    }

    /// OpenAPI 3.0's `nullable: true`.
    fn nullable(&self, shape: &mut Shape, object: &Map<String, Value>) {
        if object.get("nullable") == Some(&Value::Bool(true)) {
            shape.label.push(Part::Text(" or null".into()));
        }
    }
}

/// The names an object schema's `required` lists.
pub fn required(object: &Map<String, Value>) -> impl Iterator<Item = &str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The component name a `$ref` to `#/components/schemas/...` points at.
pub fn reference(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)?
        .strip_prefix("#/components/schemas/")
}

/// A string member, trimmed; none when missing, empty or not a string.
pub fn text(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The constraints a schema states, in words.
fn constraints(object: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let number = |key: &str| object.get(key).filter(|v| v.is_number());
    // 3.0 writes `exclusiveMinimum: true` beside `minimum`; 3.1 a number.
    let exclusive = |key: &str| object.get(key) == Some(&Value::Bool(true));
    if let Some(min) = number("minimum") {
        out.push(format!(
            "{} {min}",
            if exclusive("exclusiveMinimum") {
                ">"
            } else {
                "≥"
            }
        ));
    }
    if let Some(min) = number("exclusiveMinimum") {
        out.push(format!("> {min}"));
    }
    if let Some(max) = number("maximum") {
        out.push(format!(
            "{} {max}",
            if exclusive("exclusiveMaximum") {
                "<"
            } else {
                "≤"
            }
        ));
    }
    if let Some(max) = number("exclusiveMaximum") {
        out.push(format!("< {max}"));
    }
    for (key, words) in [
        ("multipleOf", "multiple of"),
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
        ("minProperties", "at least {} properties"),
        ("maxProperties", "at most {} properties"),
    ] {
        if let Some(n) = number(key) {
            out.push(if words.contains("{}") {
                words.replace("{}", &n.to_string())
            } else {
                format!("{words} {n}")
            });
        }
    }
    if let Some(pattern) = object.get("pattern").and_then(Value::as_str) {
        out.push(format!("matches {pattern}"));
    }
    if object.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push("items are unique".into());
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        out.push(format!("one of {}", values.join(", ")));
    }
    if let Some(value) = object.get("const") {
        out.push(format!("exactly {value}"));
    }
    if let Some(value) = object.get("default") {
        out.push(format!("default {value}"));
    }
    for (key, words) in [
        ("readOnly", "read-only"),
        ("writeOnly", "write-only"),
        ("deprecated", "deprecated"),
    ] {
        if object.get(key) == Some(&Value::Bool(true)) {
            out.push(words.into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn words(label: &[Part]) -> String {
        label
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.clone(),
                Part::Link { name, .. } => format!("[{name}]"),
            })
            .collect()
    }

    fn doc() -> Value {
        json!({"components": {"schemas": {
            "Run": {
                "type": "object",
                "required": ["code"],
                "properties": {
                    "code": {"type": "string", "maxLength": 10, "pattern": "^a$", "description": "The program"},
                    "timeout": {"type": ["number", "null"], "format": "double", "exclusiveMinimum": 0, "maximum": 600},
                    "language": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Language"}]},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                }
            },
            "Language": {"type": "string", "enum": ["python", "bash"]},
            "Alias": {"$ref": "#/components/schemas/Language"},
            "Me": {"$ref": "#/components/schemas/Me"},
            "Ping": {"$ref": "#/components/schemas/Pong"},
            "Pong": {"$ref": "#/components/schemas/Ping"},
            "Tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}},
        }}})
    }

    #[test]
    fn fields_types_and_constraints_read_as_words() {
        let doc = doc();
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        let run = schemas.opened(&json!({"$ref": "#/components/schemas/Run"}));
        assert_eq!(words(&run.label), "[Run]");
        let field = |name: &str| {
            run.fields
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        let code = field("code");
        assert!(code.required);
        assert_eq!(words(&code.shape.label), "string");
        assert_eq!(
            code.shape.constraints,
            ["at most 10 characters", "matches ^a$"]
        );
        assert_eq!(code.shape.description.as_deref(), Some("The program"));
        let timeout = field("timeout");
        assert!(!timeout.required);
        assert_eq!(words(&timeout.shape.label), "number (double) or null");
        assert_eq!(timeout.shape.constraints, ["> 0", "≤ 600"]);
        assert_eq!(words(&field("language").shape.label), "null or [Language]");
        assert_eq!(words(&field("tags").shape.label), "array of string");
        assert_eq!(field("tags").shape.constraints, ["at most 3 items"]);
        assert_eq!(words(&field("env").shape.label), "map of string to string");
        let language = schemas.shape(&doc["components"]["schemas"]["Language"]);
        assert_eq!(language.constraints, [r#"one of "python", "bash""#]);
    }

    #[test]
    fn references_that_loop_end() {
        let doc = doc();
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        assert!(schemas.resolve("Me").is_none());
        assert!(schemas.resolve("Ping").is_none());
        assert!(schemas.resolve("Alias").is_some());
        for name in ["Me", "Ping", "Tree"] {
            let shape = schemas.opened(&json!({"$ref": format!("#/components/schemas/{name}")}));
            assert_eq!(words(&shape.label), format!("[{name}]"));
        }
        let tree = schemas.opened(&json!({"$ref": "#/components/schemas/Tree"}));
        assert_eq!(words(&tree.fields[0].shape.label), "array of [Tree]");
        assert_eq!(schemas.all().count(), 7);
    }

    #[test]
    fn deep_nesting_is_cut() {
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"inner": schema}});
        }
        let doc = json!({});
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        let mut shape = schemas.shape(&schema);
        let mut depth = 0;
        while let Some(field) = shape.fields.first() {
            shape = field.shape.clone();
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH + 1);
        assert_eq!(words(&shape.label), "…");
    }

    #[test]
    fn schemas_of_the_wrong_shape_give_less() {
        let doc = json!({"components": {"schemas": {"A": 3, "B": {"type": 7, "properties": [], "required": "x", "enum": "y"}}}});
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        for (_, _, shape) in schemas.all() {
            assert!(shape.fields.is_empty());
        }
        let unknown = schemas.opened(&json!({"$ref": "#/components/schemas/Nope"}));
        assert_eq!(words(&unknown.label), "Nope");
        let elsewhere = schemas.shape(&json!({"$ref": "https://example.com/x.json"}));
        assert_eq!(words(&elsewhere.label), "https://example.com/x.json");
    }

    #[test]
    fn variants_that_are_objects_are_listed() {
        let doc = json!({});
        let schemas = Schemas::new(&doc, &mut HashSet::new());
        let shape = schemas.shape(&json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}},
        ]}));
        assert_eq!(shape.variants.len(), 2);
        assert_eq!(shape.variants[1].fields[0].name, "b");
    }
}
