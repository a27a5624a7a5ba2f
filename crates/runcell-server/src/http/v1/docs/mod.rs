//! The API reference at `/v1/docs/`: the OpenAPI document (with this
//! server's bounds) read into a model ([`model`], [`schema`], [`example`])
//! and rendered as one server-side HTML page ([`html`]) with no script, so
//! that it is light, works everywhere and can be made accessible (Swagger
//! UI, which it replaces, sent 1.5 MB of script and failed axe-core).
//!
//! The page depends only on the document, which depends only on the
//! configuration: it is rendered once, when the router is built.

mod anchor;
mod curl;
mod example;
mod html;
mod model;
mod schema;

use serde_json::Value;

/// The reference page for `doc`, a whole HTML document. Never fails: what
/// the document lacks, or has in the wrong shape, is left out.
pub fn page(doc: &Value) -> String {
    html::page(model::read(doc))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Config;

    /// Every operation of runcell's own document is on the page, under its
    /// anchor, linked from the contents, with an example.
    #[test]
    fn every_operation_of_the_document_is_on_the_page() {
        let doc = super::super::document(&Config::default());
        let html = page(&doc);
        let paths = doc["paths"].as_object().expect("paths");
        let mut operations = 0;
        for (path, item) in paths {
            for method in item.as_object().expect("a path item").keys() {
                let id = anchor::slug(&format!("{method} {path}"));
                assert!(html.contains(&format!("id=\"{id}\"")), "{method} {path}");
                assert!(html.contains(&format!("href=\"#{id}\"")), "{method} {path}");
                operations += 1;
            }
        }
        assert!(operations >= 9, "{operations}");
        assert_eq!(
            html.matches("<pre tabindex=\"0\" role=\"group\" aria-label=\"curl example")
                .count(),
            operations
        );
        for name in doc["components"]["schemas"]
            .as_object()
            .expect("schemas")
            .keys()
        {
            assert!(
                html.contains(&format!("id=\"schema-{}\"", anchor::slug(name))),
                "{name}"
            );
        }
        // The server's own bounds, and how to authenticate.
        let most = Config::default().sandbox.max_timeout_secs;
        assert!(html.contains(&format!("≤ {most}")), "the timeout's bound");
        assert!(html.contains(
            "<code>Authorization: Bearer &lt;token&gt;</code> (the token's format: JWT)"
        ));
        assert!(html.contains("$RUNCELL_KEY"));
        assert!(html.starts_with("<!DOCTYPE html><html lang=\"en\">"));
        assert_eq!(html.matches("<h1").count(), 1);
        assert!(!html.contains("<script"));
    }

    #[test]
    fn what_the_document_says_is_escaped() {
        let hostile = "<script>alert(1)</script>";
        let doc = json!({
            "info": {"title": hostile, "description": hostile},
            "tags": [{"name": hostile, "description": hostile}],
            "paths": {format!("/x/\"><script>/{{id}}"): {"get": {
                "tags": [hostile],
                "summary": hostile,
                "description": format!("{hostile} [x](javascript:alert(1))"),
                "parameters": [{"name": hostile, "in": "query", "required": true, "description": hostile,
                    "schema": {"type": hostile, "pattern": hostile, "enum": [hostile]}}],
                "responses": {hostile: {"description": hostile, "content": {hostile: {
                    "schema": {"$ref": format!("#/components/schemas/{hostile}")},
                    "example": {hostile: hostile}}}}},
            }}},
            "components": {
                "schemas": {hostile: {"type": "object", "description": hostile, "properties": {hostile: {"type": "string", "description": hostile}}}},
                "securitySchemes": {hostile: {"type": "http", "scheme": hostile, "description": hostile}},
            },
        });
        let html = page(&doc);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("href=\"javascript:"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        // Attributes too: the path's quote does not end an attribute.
        assert!(
            html.contains("aria-label=\"curl example: GET /x/&quot;&gt;&lt;script&gt;/{id}\""),
            "{html}"
        );
    }

    #[test]
    fn a_schema_that_refers_to_itself_ends() {
        let doc = json!({
            "paths": {"/a": {"post": {
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}},
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Me"}}}}},
            }}},
            "components": {"schemas": {
                "Me": {"$ref": "#/components/schemas/Me"},
                "Node": {"type": "object", "properties": {
                    "next": {"$ref": "#/components/schemas/Node"},
                    "all": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Node"}]}},
                    "name": {"type": "string", "example": "n"},
                }},
            }},
        });
        let html = page(&doc);
        assert!(html.contains("id=\"schema-node\""), "{html}");
        assert!(html.contains("href=\"#schema-me\""), "{html}");
    }

    #[test]
    fn a_malformed_document_still_renders() {
        for doc in [
            json!(null),
            json!("openapi"),
            json!({}),
            json!({"paths": [], "info": 3, "tags": "x", "components": {"schemas": []}}),
            json!({"paths": {"/a": null, "/b": {"get": [], "put": {"responses": {"200": []}, "parameters": [null, {"in": "path"}]}}}}),
            json!({"paths": {"/c": {"post": {"requestBody": {"content": {"application/json": {"schema": 7, "example": null}}}, "security": 3}}}}),
            json!({"components": {"schemas": {"A": {"properties": {"x": {"oneOf": 5, "allOf": [1, null]}}}}}}),
        ] {
            let html = page(&doc);
            assert!(html.contains("<h1>"), "{doc}: {html}");
            assert!(html.contains("id=\"content\""), "{doc}");
        }
    }
}
