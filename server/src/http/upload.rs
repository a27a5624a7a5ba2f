//! Files coming in (a raw body or a multipart form, each file at most a set
//! size) and going out (with a content type and a download name).

use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// One file of a request: where it goes and its bytes.
pub struct Upload {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// The files a request carries: its raw body to `path`, or each file field
/// of a multipart form (to `path`, or to `path` + the field's file name
/// when `path` ends with `/`, or to the file name when there is no `path`).
/// A file over `max_bytes` is refused with 413 before it is all read, and so
/// is a form whose files come to more than that together (or more than
/// [`MAX_FORM_FILES`] files): what a request carries is held in memory.
pub async fn uploads(
    request: Request,
    path: Option<&str>,
    max_bytes: usize,
) -> Result<Vec<Upload>, ApiError> {
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
        .and_then(|v| v.parse::<usize>().ok());
    if !multipart && announced.is_some_and(|n| n > max_bytes) {
        return Err(too_large(max_bytes));
    }
    if !multipart {
        let path = path
            .filter(|p| !p.ends_with('/'))
            .ok_or_else(|| ApiError::BadRequest("say where the file goes: ?path=".into()))?;
        let bytes = read_at_most(request.into_body(), max_bytes).await?;
        return Ok(vec![Upload {
            path: path.to_string(),
            bytes,
        }]);
    }
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let mut files = Vec::new();
    let mut total = 0;
    while let Some(mut field) = form
        .next_field()
        .await
        .map_err(|e| ApiError::BadRequest(e.body_text()))?
    {
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
        let mut bytes = Vec::new();
        while let Some(chunk) = field
            .chunk()
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?
        {
            if bytes.len() + chunk.len() > max_bytes {
                return Err(too_large(max_bytes));
            }
            total += chunk.len();
            if total > max_bytes {
                return Err(ApiError::TooLarge(format!(
                    "the files of one form may come to at most {} MiB together: send them one by one",
                    max_bytes / (1024 * 1024)
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
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

fn too_large(max_bytes: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "a file may be at most {} MiB",
        max_bytes / (1024 * 1024)
    ))
}

/// The body, if it is at most `max_bytes` (413 as soon as it is more).
async fn read_at_most(body: Body, max_bytes: usize) -> Result<Vec<u8>, ApiError> {
    match axum::body::to_bytes(body, max_bytes).await {
        Ok(bytes) => Ok(bytes.into()),
        Err(e) if over_limit(&e) => Err(too_large(max_bytes)),
        Err(e) => Err(ApiError::BadRequest(format!("the body broke off: {e}"))),
    }
}

/// Whether `to_bytes` stopped at its limit (rather than a broken body).
fn over_limit(error: &axum::Error) -> bool {
    std::error::Error::source(error).is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
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

    #[tokio::test]
    async fn a_body_is_read_up_to_its_limit_and_no_further() {
        let read = read_at_most(Body::from(vec![7u8; 10]), 10).await;
        assert_eq!(read.ok(), Some(vec![7u8; 10]));
        let chunks =
            futures::stream::iter([vec![1u8; 6], vec![2u8; 6]].map(Ok::<_, std::io::Error>));
        let read = read_at_most(Body::from_stream(chunks), 10).await;
        assert!(matches!(read, Err(ApiError::TooLarge(_))));
        let broken = futures::stream::iter([Ok(vec![1u8; 2]), Err(std::io::Error::other("cut"))]);
        let read = read_at_most(Body::from_stream(broken), 10).await;
        assert!(matches!(read, Err(ApiError::BadRequest(m)) if m.contains("broke off")));
    }
}
