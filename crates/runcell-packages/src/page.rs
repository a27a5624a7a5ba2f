//! A project's page: read from upstream (PEP 691 JSON or PEP 503 HTML) and
//! written for a jail, with every file's URL pointing back at this index.

use std::collections::BTreeSet;
use std::collections::HashMap;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::name;

/// The media type of a PEP 691 JSON page.
pub(crate) const JSON_TYPE: &str = "application/vnd.pypi.simple.v1+json";
/// What a page is asked upstream with: JSON first.
pub(crate) const UPSTREAM_ACCEPT: &str = "application/vnd.pypi.simple.v1+json, text/html;q=0.1";
/// The API version this index answers with (PEP 700).
const API_VERSION: &str = "1.1";

/// One distribution file a project page lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileEntry {
    pub filename: String,
    /// Upstream's URL of the file, absolute.
    pub url: String,
    /// Lowercase hex.
    pub sha256: String,
    pub version: String,
    pub wheel: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    /// `None`: not yanked; `Some("")`: yanked without a reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yanked: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A project page as the cache keeps it: every file with a sha256 whose
/// filename names this project (sdists too; the policy is applied on use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Page {
    /// When it was fetched, in seconds since the Unix epoch.
    pub fetched_at: u64,
    pub files: Vec<FileEntry>,
}

/// The format a client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Html,
}

impl Format {
    /// The format an `Accept` header prefers: JSON if it ranks PEP 691's
    /// JSON type at least as high as any HTML type, else HTML.
    pub fn from_accept(accept: Option<&str>) -> Self {
        let (mut json, mut html) = (0.0_f32, 0.0_f32);
        for item in accept.unwrap_or("").split(',') {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                JSON_TYPE | "application/vnd.pypi.simple.latest+json" => json = json.max(q),
                "text/html"
                | "application/vnd.pypi.simple.v1+html"
                | "application/vnd.pypi.simple.latest+html" => html = html.max(q),
                _ => {}
            }
        }
        if json > 0.0 && json >= html {
            Self::Json
        } else {
            Self::Html
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => JSON_TYPE,
            Self::Html => "text/html; charset=utf-8",
        }
    }
}

/// A file as upstream listed it, before it is checked.
struct Listed {
    filename: String,
    url: String,
    sha256: Option<String>,
    requires_python: Option<String>,
    yanked: Option<String>,
    size: Option<u64>,
}

#[derive(Deserialize)]
struct JsonPage {
    files: Vec<JsonFile>,
}

#[derive(Deserialize)]
struct JsonFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: HashMap<String, String>,
    #[serde(default, rename = "requires-python")]
    requires_python: Option<String>,
    #[serde(default)]
    yanked: Option<serde_json::Value>,
    #[serde(default)]
    size: Option<u64>,
}

/// The files of `project`'s upstream page `body` (JSON if `json`, else
/// HTML), fetched from `page_url`: only those with a sha256, a URL and a
/// filename naming this project. `None` if a JSON body does not parse.
pub(crate) fn parse_upstream(
    project: &str,
    page_url: &Url,
    body: &[u8],
    json: bool,
) -> Option<Vec<FileEntry>> {
    let listed = if json {
        let page: JsonPage = serde_json::from_slice(body).ok()?;
        page.files
            .into_iter()
            .map(|f| Listed {
                sha256: f.hashes.get("sha256").cloned(),
                yanked: match f.yanked {
                    Some(serde_json::Value::Bool(true)) => Some(String::new()),
                    Some(serde_json::Value::String(reason)) => Some(reason),
                    _ => None,
                },
                filename: f.filename,
                url: f.url,
                requires_python: f.requires_python,
                size: f.size,
            })
            .collect()
    } else {
        parse_html(&String::from_utf8_lossy(body))
    };
    Some(
        listed
            .into_iter()
            .filter_map(|l| checked(project, page_url, l))
            .collect(),
    )
}

fn checked(project: &str, page_url: &Url, listed: Listed) -> Option<FileEntry> {
    let sha256 = listed.sha256?.to_ascii_lowercase();
    if !is_sha256(&sha256) || !name::is_safe_filename(&listed.filename) {
        return None;
    }
    let (named, version, wheel) = name::parse_filename(&listed.filename)?;
    let mut url = page_url.join(&listed.url).ok()?;
    if named != project || !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.set_fragment(None);
    Some(FileEntry {
        filename: listed.filename,
        url: url.into(),
        sha256,
        version,
        wheel,
        requires_python: listed.requires_python,
        yanked: listed.yanked,
        size: listed.size,
    })
}

/// Whether `s` is 64 lowercase hex digits.
pub(crate) fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The `<a>` anchors of a PEP 503 page. Linear in the page, which the
/// caller has bounded.
fn parse_html(html: &str) -> Vec<Listed> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = lower[at..].find("<a") {
        let start = at + found + 2;
        at = start;
        if !lower[start..].starts_with(|c: char| c.is_ascii_whitespace()) {
            continue;
        }
        let (attrs, after) = attributes(html, start);
        let Some(end) = lower[after..].find("</a>") else {
            break;
        };
        let text = unescape(html[after..after + end].trim());
        at = after + end + 4;
        let Some(href) = attrs.get("href") else {
            continue;
        };
        let (url, fragment) = href.split_once('#').unwrap_or((href, ""));
        out.push(Listed {
            filename: text,
            url: url.to_string(),
            sha256: fragment.strip_prefix("sha256=").map(str::to_string),
            requires_python: attrs.get("data-requires-python").cloned(),
            yanked: attrs.get("data-yanked").cloned(),
            size: None,
        });
    }
    out
}

/// The attributes of a tag whose name ends at `at`, unescaped, and where
/// the tag ends (past its `>`).
fn attributes(html: &str, mut at: usize) -> (HashMap<String, String>, usize) {
    let bytes = html.as_bytes();
    let mut attrs = HashMap::new();
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= bytes.len() {
            return (attrs, at);
        }
        if bytes[at] == b'>' {
            return (attrs, at + 1);
        }
        let name_start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() && !b"=>".contains(&bytes[at]) {
            at += 1;
        }
        let name = html[name_start..at].to_ascii_lowercase();
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let mut value = String::new();
        if at < bytes.len() && bytes[at] == b'=' {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            let (value_start, value_end) = match bytes.get(at) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let close = html[at + 1..]
                        .find(char::from(quote))
                        .map_or(bytes.len(), |i| at + 1 + i);
                    let span = (at + 1, close);
                    at = (close + 1).min(bytes.len());
                    span
                }
                _ => {
                    let start = at;
                    while at < bytes.len() && !bytes[at].is_ascii_whitespace() && bytes[at] != b'>'
                    {
                        at += 1;
                    }
                    (start, at)
                }
            };
            value = unescape(&html[value_start..value_end]);
        }
        if name.is_empty() {
            at += 1;
        } else {
            attrs.entry(name).or_insert(value);
        }
    }
}

/// `s` with the five entities PEP 503 pages use decoded.
fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

/// `s` safe in HTML text and in a double-quoted attribute.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// Where a jail fetches `file`: this index's own file route, with its hash.
fn local_url(file: &FileEntry) -> String {
    format!("/files/{0}/{1}#sha256={0}", file.sha256, file.filename)
}

/// Files rendered into one chunk of a streamed page.
const FILES_PER_CHUNK: usize = 64;

/// `project`'s page for a jail, listing the files of `page` at `listed`,
/// as a stream of chunks rendered as they are read.
pub(crate) fn render_project_stream(
    project: &str,
    page: std::sync::Arc<Page>,
    listed: Vec<usize>,
    format: Format,
) -> impl futures::Stream<Item = Result<String, std::convert::Infallible>> + Send + 'static {
    let head = {
        let files: Vec<&FileEntry> = listed.iter().filter_map(|i| page.files.get(*i)).collect();
        project_head(project, &files, format)
    };
    let tail = match format {
        Format::Json => "]}".to_string(),
        Format::Html => "</body></html>\n".to_string(),
    };
    let chunks = listed.len().div_ceil(FILES_PER_CHUNK);
    let body = (0..chunks).map(move |chunk| {
        let mut out = String::new();
        let first = chunk * FILES_PER_CHUNK;
        for (n, i) in listed.iter().enumerate().skip(first).take(FILES_PER_CHUNK) {
            if let Some(file) = page.files.get(*i) {
                project_file(&mut out, file, format, n == 0);
            }
        }
        out
    });
    futures::stream::iter(
        std::iter::once(head)
            .chain(body)
            .chain(std::iter::once(tail))
            .map(Ok),
    )
}

/// A page's opening, up to its first file.
fn project_head(project: &str, files: &[&FileEntry], format: Format) -> String {
    match format {
        Format::Json => {
            let versions: BTreeSet<&str> = files.iter().map(|f| f.version.as_str()).collect();
            let head = serde_json::json!({
                "meta": {"api-version": API_VERSION},
                "name": project,
                "versions": versions,
            })
            .to_string();
            // `{...}` opened again for the files that follow.
            format!("{},\"files\":[", head.trim_end_matches('}'))
        }
        Format::Html => html_head(&format!("Links for {}", escape(project))),
    }
}

/// One file's entry, appended to `out` (`first`: no separator before it).
fn project_file(out: &mut String, f: &FileEntry, format: Format, first: bool) {
    match format {
        Format::Json => {
            let mut file = serde_json::json!({
                "filename": f.filename,
                "url": local_url(f),
                "hashes": {"sha256": f.sha256},
            });
            if let Some(rp) = &f.requires_python {
                file["requires-python"] = rp.clone().into();
            }
            match f.yanked.as_deref() {
                Some("") => file["yanked"] = true.into(),
                Some(reason) => file["yanked"] = reason.into(),
                None => {}
            }
            if let Some(size) = f.size {
                file["size"] = size.into();
            }
            if !first {
                out.push(',');
            }
            out.push_str(&file.to_string());
        }
        Format::Html => {
            out.push_str(&format!("<a href=\"{}\"", escape(&local_url(f))));
            if let Some(rp) = &f.requires_python {
                out.push_str(&format!(" data-requires-python=\"{}\"", escape(rp)));
            }
            if let Some(reason) = &f.yanked {
                out.push_str(&format!(" data-yanked=\"{}\"", escape(reason)));
            }
            out.push_str(&format!(">{}</a><br/>\n", escape(&f.filename)));
        }
    }
}

/// `project`'s page for a jail, listing `files`, whole (the stream's
/// chunks joined).
#[cfg(test)]
pub(crate) fn render_project(project: &str, files: &[&FileEntry], format: Format) -> String {
    use futures::StreamExt;
    let page = std::sync::Arc::new(Page {
        fetched_at: 0,
        files: files.iter().map(|f| (*f).clone()).collect(),
    });
    let listed = (0..files.len()).collect();
    let chunks: Vec<_> =
        futures::executor::block_on(render_project_stream(project, page, listed, format).collect());
    chunks.into_iter().map(|c| c.unwrap_or_default()).collect()
}

/// The index's root for a jail, listing `projects`.
pub(crate) fn render_root(projects: &[String], format: Format) -> String {
    match format {
        Format::Json => {
            let projects: Vec<serde_json::Value> = projects
                .iter()
                .map(|p| serde_json::json!({"name": p}))
                .collect();
            serde_json::json!({"meta": {"api-version": API_VERSION}, "projects": projects})
                .to_string()
        }
        Format::Html => {
            let mut out = html_head("Simple index");
            for p in projects {
                let p = escape(p);
                out.push_str(&format!("<a href=\"{p}/\">{p}</a><br/>\n"));
            }
            out.push_str("</body></html>\n");
            out
        }
    }
}

fn html_head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"{API_VERSION}\"><title>{title}</title></head><body>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_format() {
        for (accept, want) in [
            (None, Format::Html),
            (Some("*/*"), Format::Html),
            (Some("text/html"), Format::Html),
            (Some(JSON_TYPE), Format::Json),
            (
                Some(
                    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01",
                ),
                Format::Json,
            ),
            (
                Some("application/vnd.pypi.simple.v1+json;q=0, text/html"),
                Format::Html,
            ),
            (
                Some("text/html;q=0.9, application/vnd.pypi.simple.latest+json;q=0.5"),
                Format::Html,
            ),
        ] {
            assert_eq!(Format::from_accept(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn html_anchors_with_odd_markup() {
        let sha = "ab".repeat(32);
        let html = format!(
            "<a>no href</a><abbr>x</abbr><a\thref=x.whl#sha256={sha} data-yanked>x-1.0-py3-none-any.whl</a>\
             <a href=\"y\" data-requires-python='&lt;4'>x-2.0-py3-none-any.whl</a><a href=\"unclosed\""
        );
        let listed = parse_html(&html);
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].url, "x.whl");
        assert_eq!(listed[0].sha256.as_deref(), Some(sha.as_str()));
        assert_eq!(listed[0].yanked.as_deref(), Some(""));
        assert_eq!(listed[1].requires_python.as_deref(), Some("<4"));
        assert_eq!(listed[1].sha256, None);
        let base = Url::parse("http://127.0.0.1:9/simple/x/").expect("url");
        let files = parse_upstream("x", &base, html.as_bytes(), false).expect("parsed");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].url, "http://127.0.0.1:9/simple/x/x.whl");
        assert_eq!(parse_upstream("x", &base, b"not json", true), None);
    }

    #[test]
    fn rendered_html_escapes_what_upstream_sent() {
        let file = FileEntry {
            filename: "x-1.0-py3-none-any.whl".into(),
            url: "http://127.0.0.1:9/x.whl".into(),
            sha256: "cd".repeat(32),
            version: "1.0".into(),
            wheel: true,
            requires_python: Some("\"><script>".into()),
            yanked: None,
            size: None,
        };
        let html = render_project("x", &[&file], Format::Html);
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("data-requires-python=\"&quot;&gt;&lt;script&gt;\""),
            "{html}"
        );
    }
}
