//! Files coming in (a raw body or a multipart form, each file at most a set
//! size) and going out (with a content type and a download name).

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::spool::{Spool, too_large};
use runcell_sandbox::files::Contents;

/// One file of a request: where it goes and what it holds (spooled on
/// the server's disk).
pub struct Upload {
    pub path: String,
    pub bytes: Contents,
}

/// The files a request carries: its raw body to `path`, or each file field
/// of a multipart form (to `path`, or to `path` + the field's file name
/// when `path` ends with `/`, or to the file name when there is no `path`).
/// Each goes to `spool` as it arrives, never to memory: a file over
/// `max_bytes` is refused with 413 before it is all read, and so is a form
/// whose files come to more than that together (or more than
/// [`MAX_FORM_FILES`] files); a body that stops sending is dropped (408),
/// and one more request than the spool takes at once gets 429.
pub async fn uploads(
    spool: &Spool,
    request: Request,
    path: Option<&str>,
    max_bytes: usize,
) -> Result<Vec<Upload>, ApiError> {
    let max = max_bytes as u64;
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    // Refused before a byte is read when the size is announced.
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if !multipart && announced.is_some_and(|n| n > max) {
        return Err(too_large(max));
    }
    if !multipart {
        let path = path
            .filter(|p| !p.ends_with('/'))
            .ok_or_else(|| ApiError::BadRequest("say where the file goes: ?path=".into()))?;
        let place = spool.place()?;
        let bytes = spool.body(&place, request.into_body(), max).await?;
        return Ok(vec![Upload {
            path: path.to_string(),
            bytes,
        }]);
    }
    let place = spool.place()?;
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let mut files = Vec::new();
    let mut total = 0;
    while let Some(field) = form.next_field().await.map_err(|e| form_broke(&e))? {
        let Some(name) = field.file_name().map(str::to_string) else {
            continue;
        };
        if files.len() == MAX_FORM_FILES {
            return Err(ApiError::TooLarge(format!(
                "a form may carry at most {MAX_FORM_FILES} files"
            )));
        }
        let target = match path {
            Some(dir) if dir.ends_with('/') => format!("{dir}{name}"),
            Some(path) => path.to_string(),
            None => name,
        };
        let left = max - total;
        let bytes = spool
            .take(&place, field, left, |e| form_broke(&e))
            .await
            .map_err(|e| match e {
                ApiError::TooLarge(_) if left < max => ApiError::TooLarge(format!(
                    "the files of one form may come to at most {} MiB together: send them one by one",
                    max_bytes / (1024 * 1024)
                )),
                ApiError::TooLarge(_) => too_large(max),
                other => other,
            })?;
        total += bytes.len();
        files.push(Upload {
            path: target,
            bytes,
        });
    }
    if files.is_empty() {
        return Err(ApiError::BadRequest("the form has no file in it".into()));
    }
    Ok(files)
}

/// The most files one multipart form may carry.
pub const MAX_FORM_FILES: usize = 100;

/// A form that broke off: its body's own error (an idle body's time-out
/// included) or the form's.
fn form_broke(error: &axum::extract::multipart::MultipartError) -> ApiError {
    match super::spool::broke(error) {
        timed_out @ ApiError::TimedOut(_) => timed_out,
        _ => ApiError::BadRequest(error.body_text()),
    }
}

/// A file to download: its type from its name, and the name to save it as.
pub fn download(name: &str, bytes: Vec<u8>) -> Response {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    (
        [
            (header::CONTENT_TYPE, mime.to_string()),
            (header::CONTENT_DISPOSITION, attachment(name)),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        bytes,
    )
        .into_response()
}

/// What RFC 8187's `ext-value` escapes: everything but letters, digits and
/// `-._~` (a subset of its `attr-char`, as before).
const EXT_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266): an ASCII
/// name for old clients, the exact one for the rest.
fn attachment(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let exact = percent_encoding::utf8_percent_encode(name, EXT_VALUE);
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{exact}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_names_are_safe_headers() {
        assert_eq!(
            attachment("out.csv"),
            "attachment; filename=\"out.csv\"; filename*=UTF-8''out.csv"
        );
        let odd = attachment("été \"q\"\r\n.txt");
        assert!(axum::http::HeaderValue::from_str(&odd).is_ok(), "{odd}");
        assert!(odd.contains("filename*=UTF-8''%C3%A9t%C3%A9%20%22q%22%0D%0A.txt"));
        assert!(attachment("a-b_c.~d/e%f").ends_with("''a-b_c.~d%2Fe%25f"));
    }
}
