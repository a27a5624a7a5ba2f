//! The reference as one HTML page, rendered with Leptos' `view!` on the
//! server: every text and attribute from the document is escaped by the
//! renderer, and descriptions go through the app's markdown renderer, which
//! turns raw HTML into text and drops unsafe links. No script: the page is
//! read, not run.

use app::render::markdown;
use leptos::prelude::*;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::anchor;
use super::curl::{self, BASE, KEY_VARIABLE};
use super::model::{
    Auth, Body, Content, Group, NamedShape, Operation, Parameter, Reference, Response, Security,
};
use super::schema::{Field, Part, Shape};

/// The page's styles: inline, since the page must stand without the site's
/// bundle (and the content security policy leaves styles open).
const STYLE: &str = include_str!("style.css");

/// The site's icon, in the page itself: the page stands without the
/// site's files, and the browser asks for an icon either way.
const ICON: &str = include_str!("../../../../../../public/favicon.svg");

/// What a `data:` URL must escape of an SVG document.
const NOT_IN_DATA_URL: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>');

/// Where the machine-readable document is served.
const DOCUMENT_URL: &str = "/v1/openapi.json";

/// The whole page, doctype included.
pub fn page(reference: Reference) -> String {
    let body = Owner::new().with(|| view! { <Page reference/> }.to_html());
    // The renderer marks where an empty `Option` or list would go (`<!>`),
    // for hydration, which this page never has. No such text comes from
    // the document: its `<` are escaped, in text and in markdown alike.
    format!("<!DOCTYPE html>{}", body.replace("<!>", ""))
}

#[component]
fn Page(reference: Reference) -> impl IntoView {
    let Reference {
        title,
        version,
        description,
        auth,
        groups,
        schemas,
    } = reference;
    let heading = format!("{title} API reference");
    view! {
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link
                    rel="icon"
                    type="image/svg+xml"
                    href=format!("data:image/svg+xml,{}", utf8_percent_encode(ICON.trim(), NOT_IN_DATA_URL))
                />
                <title>{heading.clone()}</title>
                <style inner_html=STYLE></style>
            </head>
            <body>
                <a class="skip" href="#content">"Skip to the reference"</a>
                <header>
                    <h1>{heading}</h1>
                    {version.map(|v| view! { <p class="version">"Version " {v}</p> })}
                    {description.map(|d| view! { <Markdown text=d/> })}
                    <p>
                        "The same description for programs: "
                        <a href=DOCUMENT_URL>
                            <code>{DOCUMENT_URL}</code>
                        </a>
                        " (OpenAPI, with this server's limits)."
                    </p>
                </header>
                <div class="layout">
                    {contents(&groups, &schemas)}
                    <main id="content" tabindex="-1">
                        <Authentication auth/>
                        {groups.into_iter().map(|group| view! { <GroupView group/> }).collect_view()}
                        <Schemas schemas/>
                    </main>
                </div>
            </body>
        </html>
    }
}

/// The table of contents: each tag's operations, then the schemas.
fn contents(groups: &[Group], schemas: &[NamedShape]) -> impl IntoView + use<> {
    let groups = groups
        .iter()
        .map(|group| {
            let operations = group
                .operations
                .iter()
                .map(|op| {
                    view! {
                        <li>
                            <a href=format!("#{}", op.anchor)>
                                <MethodBadge method=op.method.clone()/>
                                " "
                                <code>{breakable(&op.path)}</code>
                            </a>
                        </li>
                    }
                })
                .collect_view();
            view! {
                <li>
                    <a href=format!("#{}", group.anchor)>{group.name.clone()}</a>
                    <ul class="operations">{operations}</ul>
                </li>
            }
        })
        .collect_view();
    let schemas = schemas
        .iter()
        .map(|s| {
            view! {
                <li>
                    <a href=format!("#{}", s.anchor)>
                        <code>{s.name.clone()}</code>
                    </a>
                </li>
            }
        })
        .collect_view();
    view! {
        <nav aria-labelledby="contents-heading">
            <h2 id="contents-heading">"Contents"</h2>
            <ul>
                <li>
                    <a href="#authentication">"Authentication"</a>
                </li>
                {groups}
                <li>
                    <a href="#schemas">"Schemas"</a>
                    <ul class="schema-list">{schemas}</ul>
                </li>
            </ul>
        </nav>
    }
}

#[component]
fn Authentication(auth: Vec<Auth>) -> impl IntoView {
    let schemes = auth
        .into_iter()
        .map(|scheme| {
            view! {
                <dt>
                    <code>{scheme.name}</code>
                </dt>
                <dd>
                    <p>
                        "Send " <code>{scheme.send}</code>
                        {scheme.note.map(|note| view! { " (" {note} ")" })} "."
                    </p>
                    {scheme.description.map(|d| view! { <Markdown text=d/> })}
                </dd>
            }
        })
        .collect_view();
    view! {
        <section id="authentication" aria-labelledby="authentication-heading">
            <h2 id="authentication-heading">"Authentication"</h2>
            <p>
                "Each operation says which of these schemes it needs; one that needs none says so."
            </p>
            <dl class="schemes">{schemes}</dl>
            <p>
                "The examples send requests to " <code>{BASE}</code>
                " (where " <code>"runcell serve"</code> " listens unless told otherwise) "
                "and read the API key or access token from " <code>{format!("${KEY_VARIABLE}")}</code>
                ". Path and query values are shell variables too (" <code>"$ID"</code> ")."
            </p>
        </section>
    }
}

#[component]
fn GroupView(group: Group) -> impl IntoView {
    let heading = format!("{}-heading", group.anchor);
    let labelled_by = heading.clone();
    view! {
        <section class="group" id=group.anchor aria-labelledby=labelled_by>
            <h2 id=heading>{group.name}</h2>
            {group.description.map(|d| view! { <Markdown text=d/> })}
            {group
                .operations
                .into_iter()
                .map(|operation| view! { <OperationView operation/> })
                .collect_view()}
        </section>
    }
}

#[component]
fn OperationView(operation: Operation) -> impl IntoView {
    let Operation {
        anchor,
        method,
        path,
        summary,
        description,
        deprecated,
        security,
        parameters,
        body,
        responses,
    } = operation;
    let curl = curl::command(&method, &path, &parameters, body.as_ref(), &security);
    let heading = format!("{anchor}-heading");
    let labelled_by = heading.clone();
    let name = format!("{method} {path}");
    let parameters = (!parameters.is_empty()).then(|| {
        view! {
            <h4>"Parameters"</h4>
            <ParameterTable
                parameters
                caption=format!("Parameters of {name}")
                id=format!("{anchor}-parameters")
                location=true
            />
        }
    });
    let body = body.map(|body| view! { <BodyView body/> });
    let responses = responses
        .into_iter()
        .map(|response| {
            view! { <ResponseView response name=name.clone() anchor=anchor.clone()/> }
        })
        .collect_view();
    view! {
        <section class="operation" id=anchor aria-labelledby=labelled_by>
            <h3 id=heading>
                <MethodBadge method/>
                " "
                <code class="path">{breakable(&path)}</code>
            </h3>
            {summary.map(|s| view! { <div class="summary"><Markdown text=s/></div> })}
            {deprecated.then(|| view! { <p class="deprecated">"Deprecated."</p> })}
            {description.map(|d| view! { <Markdown text=d/> })}
            <SecurityView security/>
            {parameters}
            {body}
            <h4>"Responses"</h4>
            {responses}
            <h4>"Example"</h4>
            // Focusable, since a long line scrolls it; a group, since a
            // `pre` may not carry a name of its own.
            <pre tabindex="0" role="group" aria-label=format!("curl example: {name}")>
                <code>{curl}</code>
            </pre>
        </section>
    }
}

#[component]
fn MethodBadge(method: String) -> impl IntoView {
    let class = format!("method {}", method.to_ascii_lowercase());
    view! { <span class=class>{method}</span> }
}

#[component]
fn SecurityView(security: Security) -> impl IntoView {
    match security {
        Security::Open => view! { <p class="security">"Credentials: none."</p> }.into_any(),
        Security::AnyOf(alternatives) => {
            let alternatives = alternatives
                .into_iter()
                .enumerate()
                .map(|(i, schemes)| {
                    let schemes = schemes
                        .into_iter()
                        .enumerate()
                        .map(|(j, scheme)| {
                            view! {
                                {(j > 0).then_some(" and ")}
                                <a href="#authentication">
                                    <code>{scheme}</code>
                                </a>
                            }
                        })
                        .collect_view();
                    view! {
                        {(i > 0).then_some(" or ")}
                        {schemes}
                    }
                })
                .collect_view();
            view! { <p class="security">"Credentials: " {alternatives} "."</p> }.into_any()
        }
    }
}

/// Parameters, or a response's headers (`location` false: they have none).
/// On a narrow screen the table scrolls in its box, which can then be
/// focused (to scroll it from the keyboard) and is named by the caption.
#[component]
fn ParameterTable(
    parameters: Vec<Parameter>,
    caption: String,
    id: String,
    location: bool,
) -> impl IntoView {
    let rows = parameters
        .into_iter()
        .map(|p| {
            let Shape {
                label,
                constraints,
                description: schema_description,
                ..
            } = p.shape;
            view! {
                <tr>
                    <th scope="row">
                        <code>{p.name}</code>
                    </th>
                    {location.then(|| view! { <td>{p.location}</td> })}
                    <td>
                        <Label parts=label/>
                    </td>
                    <td>{if p.required { "yes" } else { "no" }}</td>
                    <td class="description">
                        {p.description.or(schema_description).map(|d| view! { <Markdown text=d/> })}
                        <Constraints constraints/>
                    </td>
                </tr>
            }
        })
        .collect_view();
    let labelled_by = id.clone();
    view! {
        <div class="table" role="region" tabindex="0" aria-labelledby=labelled_by>
            <table>
                <caption id=id class="visually-hidden">{caption}</caption>
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        {location.then(|| view! { <th scope="col">"In"</th> })}
                        <th scope="col">"Type"</th>
                        <th scope="col">"Required"</th>
                        <th scope="col">"Description"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

#[component]
fn BodyView(body: Body) -> impl IntoView {
    view! {
        <h4>"Request body"</h4>
        <p>{if body.required { "Required." } else { "Optional." }}</p>
        {body.description.map(|d| view! { <Markdown text=d/> })}
        {body.contents.into_iter().map(|content| view! { <ContentView content/> }).collect_view()}
    }
}

/// A response of the operation `name`, whose section is `anchor`.
#[component]
fn ResponseView(response: Response, name: String, anchor: String) -> impl IntoView {
    let headers = (!response.headers.is_empty()).then(|| {
        let caption = format!("Headers of the {} response of {name}", response.status);
        let id = format!("{anchor}-{}-headers", anchor::slug(&response.status));
        view! { <ParameterTable parameters=response.headers caption id location=false/> }
    });
    view! {
        <div class="response">
            <h5>
                <span class="status">{response.status}</span>
                {response.reason.map(|r| view! { " " {r} })}
            </h5>
            {response.description.map(|d| view! { <Markdown text=d/> })}
            {headers}
            {response
                .contents
                .into_iter()
                .map(|content| view! { <ContentView content/> })
                .collect_view()}
        </div>
    }
}

#[component]
fn ContentView(content: Content) -> impl IntoView {
    let Content {
        media_type,
        shape,
        example,
    } = content;
    view! {
        <p class="content-type">
            <code>{media_type}</code>
            {shape
                .as_ref()
                .map(|shape| view! { ": " <Label parts=shape.label.clone()/> })}
        </p>
        {shape.map(|shape| shape_body(shape, 0))}
        // An empty object says nothing a reader needs (the curl command
        // still sends it).
        {example
            .filter(|example| example != "{}")
            .map(|example| {
                view! {
                    <p class="example-label">"Example:"</p>
                    <pre tabindex="0" role="group" aria-label="Example body">
                        <code>{example}</code>
                    </pre>
                }
            })}
    }
}

/// A schema's description, constraints, fields and variants (its label is
/// shown by whoever names it).
fn shape_body(shape: Shape, depth: usize) -> AnyView {
    let Shape {
        constraints,
        description,
        fields,
        variants,
        ..
    } = shape;
    let fields = (!fields.is_empty()).then(|| fields_view(fields, depth));
    let variants = (!variants.is_empty()).then(|| {
        let items = variants
            .into_iter()
            .map(|variant| {
                view! {
                    <li>
                        <Label parts=variant.label.clone()/>
                        {shape_body(variant, depth + 1)}
                    </li>
                }
            })
            .collect_view();
        view! { <ol class="variants">{items}</ol> }
    });
    view! {
        {description.map(|d| view! { <Markdown text=d/> })}
        <Constraints constraints/>
        {fields}
        {variants}
    }
    .into_any()
}

/// An object's fields as a definition list: name, type and whether it is
/// required, then what it means, its constraints and its own fields.
fn fields_view(fields: Vec<Field>, depth: usize) -> AnyView {
    let items = fields
        .into_iter()
        .map(|field| {
            let Field {
                name,
                required,
                shape,
            } = field;
            view! {
                <dt>
                    <code class="name">{name}</code>
                    " "
                    <span class="type">
                        <Label parts=shape.label.clone()/>
                    </span>
                    " "
                    {if required {
                        view! { <span class="required">"required"</span> }.into_any()
                    } else {
                        view! { <span class="optional">"optional"</span> }.into_any()
                    }}
                </dt>
                <dd>{shape_body(shape, depth + 1)}</dd>
            }
        })
        .collect_view();
    view! { <dl class="fields">{items}</dl> }.into_any()
}

#[component]
fn Schemas(schemas: Vec<NamedShape>) -> impl IntoView {
    let items = schemas
        .into_iter()
        .map(
            |NamedShape {
                 name,
                 anchor,
                 shape,
             }| {
                let heading = format!("{anchor}-heading");
                let labelled_by = heading.clone();
                view! {
                    <section class="schema" id=anchor aria-labelledby=labelled_by>
                        <h3 id=heading>
                            <code>{name}</code>
                        </h3>
                        <p class="schema-type">
                            <Label parts=shape.label.clone()/>
                        </p>
                        {shape_body(shape, 0)}
                    </section>
                }
            },
        )
        .collect_view();
    view! {
        <section id="schemas" aria-labelledby="schemas-heading">
            <h2 id="schemas-heading">"Schemas"</h2>
            {items}
        </section>
    }
}

/// A path that a narrow screen may wrap after any `/`.
fn breakable(path: &str) -> impl IntoView + use<> {
    path.split_inclusive('/')
        .map(|segment| view! { {segment.to_owned()} <wbr/> })
        .collect_view()
}

/// A type label, its named schemas linked to their sections.
#[component]
fn Label(parts: Vec<Part>) -> impl IntoView {
    parts
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => text.into_any(),
            Part::Link { name, anchor } => view! {
                <a href=format!("#{anchor}")>
                    <code>{name}</code>
                </a>
            }
            .into_any(),
        })
        .collect_view()
}

#[component]
fn Constraints(constraints: Vec<String>) -> impl IntoView {
    (!constraints.is_empty()).then(|| {
        let items = constraints
            .into_iter()
            .map(|c| view! { <li>{c}</li> })
            .collect_view();
        view! { <ul class="constraints">{items}</ul> }
    })
}

/// Markdown from the document, made safe by the app's renderer, with its
/// headings turned into bold paragraphs so that the page's outline stays
/// the page's own.
#[component]
fn Markdown(text: String) -> impl IntoView {
    view! { <div class="md" inner_html=demote_headings(&markdown::to_html(&text))></div> }
}

/// `<h1>`...`<h6>` as the markdown renderer writes them (raw HTML in the
/// source is text by then, so every such tag is the renderer's own).
fn demote_headings(html: &str) -> String {
    let mut out = html.to_owned();
    for level in 1..=6 {
        out = out
            .replace(&format!("<h{level}>"), "<p class=\"heading\">")
            .replace(&format!("</h{level}>"), "</p>");
    }
    out
}
