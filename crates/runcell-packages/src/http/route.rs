//! Which route a request path names, and its segments percent-decoded.
//!
//! The rules are the ones the index answered by when axum's router
//! (matchit 0.8) matched `/simple/`, `/simple/{project}/` and
//! `/files/{sha256}/{filename}`, kept so that a jail gets the same answers:
//! the path is matched as sent (a `%2F` never splits a segment), a segment
//! followed by more of the route may be empty (`/simple//` names project
//! `""`), the last one may not (`/files/<sha>/` is no route), and each
//! segment is percent-decoded once, after matching.

use std::borrow::Cow;

/// A route and its segments, still as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route<'a> {
    /// `/simple/`
    Root,
    /// `/simple/{project}/`
    Project(Segment<'a>),
    /// `/files/{sha256}/{filename}`
    File {
        sha256: Segment<'a>,
        filename: Segment<'a>,
    },
}

/// One segment of a path, percent-encoded as the client sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Segment<'a> {
    /// The route's name for it, for the error that names it.
    key: &'static str,
    raw: &'a str,
}

/// A segment that is not UTF-8 once percent-decoded (axum's `Path` said
/// so in these words, with 400).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Invalid URL: Invalid UTF-8 in `{key}`")]
pub(super) struct InvalidUtf8 {
    pub key: &'static str,
}

impl Segment<'_> {
    /// The segment percent-decoded; escapes that are not two hex digits
    /// stay as they are.
    pub fn decode(self) -> Result<String, InvalidUtf8> {
        percent_encoding::percent_decode_str(self.raw)
            .decode_utf8()
            .map(Cow::into_owned)
            .map_err(|_| InvalidUtf8 { key: self.key })
    }
}

/// The route `path` (a request URI's path, without its query) names.
pub(super) fn route(path: &str) -> Option<Route<'_>> {
    if path == "/simple/" {
        return Some(Route::Root);
    }
    if let Some(rest) = path.strip_prefix("/simple/") {
        let project = rest.strip_suffix('/').filter(|p| !p.contains('/'))?;
        return Some(Route::Project(Segment {
            key: "project",
            raw: project,
        }));
    }
    let (sha256, filename) = path.strip_prefix("/files/")?.split_once('/')?;
    if filename.is_empty() || filename.contains('/') {
        return None;
    }
    Some(Route::File {
        sha256: Segment {
            key: "sha256",
            raw: sha256,
        },
        filename: Segment {
            key: "filename",
            raw: filename,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The route a path names, written as `root`, `project:<raw>` or
    /// `file:<raw sha256>:<raw filename>`; `-` for none.
    fn named(path: &str) -> String {
        match route(path) {
            None => "-".into(),
            Some(Route::Root) => "root".into(),
            Some(Route::Project(p)) => format!("project:{}", p.raw),
            Some(Route::File { sha256, filename }) => {
                format!("file:{}:{}", sha256.raw, filename.raw)
            }
        }
    }

    #[test]
    fn paths_name_the_routes_axum_matched() {
        for (path, want) in [
            ("/simple/", "root"),
            ("/simple", "-"),
            ("/SIMPLE/", "-"),
            ("//simple/", "-"),
            ("/simple%2F", "-"),
            ("/simple%2Fdemo%2F", "-"),
            ("/simple/demo/", "project:demo"),
            ("/simple/demo", "-"),
            ("/simple//", "project:"),
            ("/simple/demo//", "-"),
            ("/simple/demo/extra/", "-"),
            ("/simple/../", "project:.."),
            ("/simple/a%2Fb/", "project:a%2Fb"),
            ("/simple/%ff/", "project:%ff"),
            ("/files/abc/x.whl", "file:abc:x.whl"),
            ("/files//x.whl", "file::x.whl"),
            ("/files/abc/", "-"),
            ("/files/abc//", "-"),
            ("/files/abc", "-"),
            ("/files/", "-"),
            ("/files//", "-"),
            ("/files///", "-"),
            ("/files", "-"),
            ("/files/abc/x.whl/", "-"),
            ("/files/abc/x.whl/extra", "-"),
            ("/files/abc%2Fx.whl", "-"),
            (
                "/files/abc/..%2F..%2Fetc%2Fpasswd",
                "file:abc:..%2F..%2Fetc%2Fpasswd",
            ),
            ("/files/abc/..", "file:abc:.."),
            ("*", "-"),
            ("/", "-"),
            ("", "-"),
        ] {
            assert_eq!(named(path), want, "{path}");
        }
    }

    #[test]
    fn segments_are_percent_decoded_once() {
        let segment = |raw| Segment {
            key: "project",
            raw,
        };
        for (raw, want) in [
            ("demo", Ok("demo")),
            ("de%6Do", Ok("demo")),
            ("de%6do", Ok("demo")),
            ("a%2Fb", Ok("a/b")),
            ("a%2fb", Ok("a/b")),
            ("%2E%2E", Ok("..")),
            ("%252F", Ok("%2F")),
            ("%C3%A9", Ok("é")),
            ("a%00b", Ok("a\0b")),
            ("%zz", Ok("%zz")),
            ("%", Ok("%")),
            ("%2", Ok("%2")),
            ("", Ok("")),
            ("%ff", Err(InvalidUtf8 { key: "project" })),
            ("%c3", Err(InvalidUtf8 { key: "project" })),
        ] {
            assert_eq!(
                segment(raw).decode().as_deref().map_err(|e| *e),
                want,
                "{raw}"
            );
        }
        assert_eq!(
            InvalidUtf8 { key: "filename" }.to_string(),
            "Invalid URL: Invalid UTF-8 in `filename`"
        );
    }
}
