//! An OpenAPI document (as JSON) read into what the page shows: the API's
//! title and description, how to authenticate, its operations grouped by
//! tag, and its schemas. Reading never fails: a member that is missing or
//! of the wrong type is left out of the page.

use std::collections::HashSet;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::anchor;
use super::example;
use super::schema::{Schemas, Shape, text};

/// The ids of the page's fixed sections, which no generated anchor takes.
pub const FIXED_IDS: [&str; 4] = ["content", "authentication", "operations", "schemas"];

/// The methods an OpenAPI path item may hold, in the order they are shown.
const METHODS: [&str; 8] = [
    "get", "post", "put", "patch", "delete", "head", "options", "trace",
];

/// The tag of operations that name none.
const UNTAGGED: &str = "other";

/// Everything the page shows.
#[derive(Debug, Default)]
pub struct Reference {
    pub title: String,
    pub version: Option<String>,
    pub description: Option<String>,
    pub auth: Vec<Auth>,
    pub groups: Vec<Group>,
    pub schemas: Vec<NamedShape>,
}

/// A security scheme.
#[derive(Debug)]
pub struct Auth {
    pub name: String,
    /// What to send: `Authorization: Bearer <token>`.
    pub send: String,
    /// What that is, when the scheme says: "a JWT".
    pub note: Option<String>,
    pub description: Option<String>,
}

/// The operations of one tag.
#[derive(Debug)]
pub struct Group {
    pub name: String,
    pub anchor: String,
    pub description: Option<String>,
    pub operations: Vec<Operation>,
}

#[derive(Debug)]
pub struct Operation {
    pub anchor: String,
    /// Upper case: `POST`.
    pub method: String,
    pub path: String,
    pub summary: Option<String>,
    pub description: Option<String>,
    pub deprecated: bool,
    pub security: Security,
    pub parameters: Vec<Parameter>,
    pub body: Option<Body>,
    pub responses: Vec<Response>,
}

/// Which credentials an operation needs.
#[derive(Debug, PartialEq, Eq)]
pub enum Security {
    /// None.
    Open,
    /// One of these alternatives, each a list of schemes sent together.
    AnyOf(Vec<Vec<String>>),
}

#[derive(Debug)]
pub struct Parameter {
    pub name: String,
    /// `path`, `query`, `header` or `cookie`.
    pub location: String,
    pub required: bool,
    pub shape: Shape,
    pub description: Option<String>,
}

#[derive(Debug)]
pub struct Body {
    pub description: Option<String>,
    pub required: bool,
    pub contents: Vec<Content>,
}

/// One media type of a body.
#[derive(Debug)]
pub struct Content {
    pub media_type: String,
    pub shape: Option<Shape>,
    /// An example body, as pretty-printed JSON.
    pub example: Option<String>,
}

#[derive(Debug)]
pub struct Response {
    pub status: String,
    /// The status's standard phrase: `Not Found`.
    pub reason: Option<&'static str>,
    pub description: Option<String>,
    pub headers: Vec<Parameter>,
    pub contents: Vec<Content>,
}

/// A component schema.
#[derive(Debug)]
pub struct NamedShape {
    pub name: String,
    pub anchor: String,
    pub shape: Shape,
}

/// Reads `doc`.
pub fn read(doc: &Value) -> Reference {
    let mut taken: HashSet<String> = FIXED_IDS.iter().map(|id| (*id).to_owned()).collect();
    let schemas = Schemas::new(doc, &mut taken);
    let info = doc.get("info").unwrap_or(&Value::Null);
    let reader = Reader { doc, schemas };
    Reference {
        title: text(info, "title").unwrap_or_else(|| "API".into()),
        version: text(info, "version"),
        description: text(info, "description"),
        auth: reader.auth(),
        groups: reader.groups(&mut taken),
        schemas: reader
            .schemas
            .all()
            .map(|(name, anchor, shape)| NamedShape {
                name: name.into(),
                anchor: anchor.into(),
                shape,
            })
            .collect(),
    }
}

struct Reader<'a> {
    doc: &'a Value,
    schemas: Schemas<'a>,
}

impl<'a> Reader<'a> {
    fn auth(&self) -> Vec<Auth> {
        object(self.doc.pointer("/components/securitySchemes"))
            .map(|(name, scheme)| {
                let (send, note) = what_to_send(scheme);
                Auth {
                    name: name.clone(),
                    send,
                    note,
                    description: text(scheme, "description"),
                }
            })
            .collect()
    }

    /// The operations, grouped by their first tag: the document's tags
    /// first, in its order, then any others as they come.
    fn groups(&self, taken: &mut HashSet<String>) -> Vec<Group> {
        let mut groups: Vec<Group> = array(self.doc.get("tags"))
            .filter_map(|tag| {
                Some(Group {
                    name: text(tag, "name")?,
                    anchor: String::new(),
                    description: text(tag, "description"),
                    operations: Vec::new(),
                })
            })
            .collect();
        for (path, item) in object(self.doc.get("paths")) {
            let shared = array(item.get("parameters"));
            for method in METHODS {
                let Some(operation) = item.get(method).filter(|o| o.is_object()) else {
                    continue;
                };
                let tag = array(operation.get("tags"))
                    .find_map(Value::as_str)
                    .unwrap_or(UNTAGGED);
                let at = match groups.iter().position(|g| g.name == tag) {
                    Some(at) => at,
                    None => {
                        groups.push(Group {
                            name: tag.into(),
                            anchor: String::new(),
                            description: None,
                            operations: Vec::new(),
                        });
                        groups.len() - 1
                    }
                };
                let operation = self.operation(method, path, operation, shared.clone(), taken);
                groups[at].operations.push(operation);
            }
        }
        groups.retain(|g| !g.operations.is_empty());
        for group in &mut groups {
            group.anchor = anchor::unique(taken, &format!("tag-{}", group.name));
        }
        groups
    }

    fn operation(
        &self,
        method: &str,
        path: &str,
        operation: &'a Value,
        shared: impl Iterator<Item = &'a Value>,
        taken: &mut HashSet<String>,
    ) -> Operation {
        let parameters = self.parameters(shared, operation);
        let body = self
            .component(operation.get("requestBody"), "requestBodies")
            .filter(|b| b.is_object())
            .map(|body| Body {
                description: text(body, "description"),
                required: body.get("required") == Some(&Value::Bool(true)),
                contents: self.contents(body, true),
            });
        let responses = object(operation.get("responses"))
            .filter_map(|(status, response)| {
                let response = self.component(Some(response), "responses")?;
                // Errors share their schema across operations: named and
                // linked, where a success's is opened.
                let failure = status.starts_with(['4', '5']);
                Some(Response {
                    status: status.clone(),
                    reason: StatusCode::from_bytes(status.as_bytes())
                        .ok()
                        .and_then(|s| s.canonical_reason()),
                    description: text(response, "description"),
                    headers: object(response.get("headers"))
                        .filter_map(|(name, header)| {
                            let header = self.component(Some(header), "headers")?;
                            Some(self.parameter(name, "header", header))
                        })
                        .collect(),
                    contents: self.contents(response, !failure),
                })
            })
            .collect();
        let security = security(
            operation
                .get("security")
                .or_else(|| self.doc.get("security")),
        );
        let method = method.to_ascii_uppercase();
        Operation {
            anchor: anchor::unique(taken, &format!("{method} {path}")),
            method,
            path: path.into(),
            summary: text(operation, "summary"),
            description: text(operation, "description"),
            deprecated: operation.get("deprecated") == Some(&Value::Bool(true)),
            security,
            parameters,
            body,
            responses,
        }
    }

    /// The path item's parameters, with the operation's own replacing those
    /// of the same name and place.
    fn parameters(
        &self,
        shared: impl Iterator<Item = &'a Value>,
        operation: &'a Value,
    ) -> Vec<Parameter> {
        let mut out: Vec<Parameter> = Vec::new();
        for parameter in shared.chain(array(operation.get("parameters"))) {
            let Some(parameter) = self.component(Some(parameter), "parameters") else {
                continue;
            };
            let (Some(name), Some(location)) = (text(parameter, "name"), text(parameter, "in"))
            else {
                continue;
            };
            let parameter = self.parameter(&name, &location, parameter);
            out.retain(|p| (&p.name, &p.location) != (&parameter.name, &parameter.location));
            out.push(parameter);
        }
        out
    }

    /// A parameter or a response header (which has no name or place of its
    /// own).
    fn parameter(&self, name: &str, location: &str, parameter: &Value) -> Parameter {
        let schema = parameter.get("schema").or_else(|| {
            object(parameter.get("content")).find_map(|(_, media)| media.get("schema"))
        });
        Parameter {
            name: name.into(),
            location: location.into(),
            // Path parameters are always required.
            required: location == "path" || parameter.get("required") == Some(&Value::Bool(true)),
            shape: schema.map(|s| self.schemas.shape(s)).unwrap_or_default(),
            description: text(parameter, "description"),
        }
    }

    /// The media types of a body; `open`: with the fields of the schema
    /// each names.
    fn contents(&self, holder: &Value, open: bool) -> Vec<Content> {
        object(holder.get("content"))
            .map(|(media_type, media)| {
                let schema = media.get("schema");
                Content {
                    media_type: media_type.clone(),
                    shape: schema.map(|s| {
                        if open {
                            self.schemas.opened(s)
                        } else {
                            self.schemas.shape(s)
                        }
                    }),
                    example: example::of_media(&self.schemas, media)
                        .and_then(|e| serde_json::to_string_pretty(&e).ok()),
                }
            })
            .collect()
    }

    /// `value`, or the component it refers to (`#/components/{kind}/...`),
    /// one reference deep.
    fn component(&self, value: Option<&'a Value>, kind: &str) -> Option<&'a Value> {
        let value = value?;
        let Some(target) = value.get("$ref").and_then(Value::as_str) else {
            return Some(value);
        };
        let name = target.strip_prefix(&format!("#/components/{kind}/"))?;
        self.doc
            .get("components")?
            .get(kind)?
            .get(name)
            .filter(|c| c.get("$ref").is_none())
    }
}

/// What a client sends for a security scheme, and what it is when the
/// scheme says.
fn what_to_send(scheme: &Value) -> (String, Option<String>) {
    let kind = scheme.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "http" => {
            let name = text(scheme, "scheme").unwrap_or_else(|| "bearer".into());
            let send = if name.eq_ignore_ascii_case("bearer") {
                "Authorization: Bearer <token>".to_owned()
            } else if name.eq_ignore_ascii_case("basic") {
                "Authorization: Basic <base64 of user:password>".to_owned()
            } else {
                format!("Authorization: {name} <credentials>")
            };
            let note =
                text(scheme, "bearerFormat").map(|format| format!("the token's format: {format}"));
            (send, note)
        }
        "apiKey" => {
            let name = text(scheme, "name").unwrap_or_else(|| "key".into());
            let send = match scheme.get("in").and_then(Value::as_str) {
                Some("query") => format!("?{name}=<key>"),
                Some("cookie") => format!("Cookie: {name}=<key>"),
                _ => format!("{name}: <key>"),
            };
            (send, Some("an API key".into()))
        }
        "oauth2" | "openIdConnect" => (
            "Authorization: Bearer <token>".into(),
            Some(if kind == "oauth2" {
                "an OAuth 2 access token".into()
            } else {
                "an OpenID Connect token".into()
            }),
        ),
        "mutualTLS" => ("a client TLS certificate".into(), None),
        _ => ("credentials".into(), None),
    }
}

/// An operation's security requirements: none listed, or only `{}` among
/// them, is open.
fn security(requirements: Option<&Value>) -> Security {
    let alternatives: Vec<Vec<String>> = array(requirements)
        .filter_map(Value::as_object)
        .map(|r| r.keys().cloned().collect::<Vec<_>>())
        .collect();
    if alternatives.is_empty() || alternatives.iter().any(Vec::is_empty) {
        Security::Open
    } else {
        Security::AnyOf(alternatives)
    }
}

/// The members of an object, or nothing.
fn object(value: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> + Clone {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::iter)
}

/// The items of an array, or nothing.
fn array(value: Option<&Value>) -> impl Iterator<Item = &Value> + Clone {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flat_map(|items| items.iter())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn operations_are_grouped_by_tag_in_the_documents_order() {
        let doc = json!({
            "info": {"title": "T", "version": "1"},
            "tags": [{"name": "b", "description": "Bees"}, {"name": "a"}, {"name": "unused"}],
            "security": [{"key": []}],
            "paths": {
                "/x/{id}": {
                    "parameters": [{"name": "id", "in": "path", "schema": {"type": "string"}}],
                    "get": {"tags": ["a"], "parameters": [{"name": "q", "in": "query", "required": true}]},
                    "delete": {"tags": ["b"], "security": []},
                },
                "/y": {"post": {"responses": {"200": {"description": "OK"}}}},
            },
        });
        let reference = read(&doc);
        let names: Vec<&str> = reference.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["b", "a", UNTAGGED]);
        let get = &reference.groups[1].operations[0];
        assert_eq!(
            (get.method.as_str(), get.anchor.as_str()),
            ("GET", "get-x-id")
        );
        let parameters: Vec<(&str, bool)> = get
            .parameters
            .iter()
            .map(|p| (p.name.as_str(), p.required))
            .collect();
        assert_eq!(parameters, [("id", true), ("q", true)]);
        assert_eq!(get.security, Security::AnyOf(vec![vec!["key".into()]]));
        assert_eq!(reference.groups[0].operations[0].security, Security::Open);
        assert_eq!(reference.groups[2].operations[0].responses[0].status, "200");
    }

    #[test]
    fn documents_of_the_wrong_shape_read_as_less() {
        for doc in [
            json!(null),
            json!([]),
            json!({"paths": 3, "tags": {}, "info": "x", "components": []}),
            json!({"paths": {"/a": {"get": 1, "post": {"tags": 2, "parameters": {}, "responses": []}}}}),
            json!({"paths": {"/a": {"get": {"parameters": [1, {"name": 2}], "requestBody": {"content": 1}, "responses": {"200": 5, "201": {"$ref": "#/components/responses/Nope"}}}}}}),
            json!({"components": {"securitySchemes": {"a": 1, "b": {"type": "http"}}, "schemas": 4}}),
        ] {
            let reference = read(&doc);
            assert_eq!(reference.title, "API", "{doc}");
        }
        let odd = read(&json!({"paths": {"/a": {"post": {"tags": 2}}}}));
        assert_eq!(odd.groups[0].operations[0].path, "/a");
    }
}
