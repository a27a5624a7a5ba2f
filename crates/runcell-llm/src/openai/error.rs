//! Turning what a server said (an HTTP status and body, an error event in
//! the stream, a transport failure) into one typed [`LlmError`].

use std::time::Duration;

use crate::LlmError;

/// The longest server message kept in an error.
const MESSAGE_LIMIT: usize = 300;
/// The longest wait a `Retry-After` header may ask for.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);

/// The message a server put in an error body: `{"error":{"message"}}`,
/// `{"error":"..."}`, `{"detail":...}`, `{"message":...}` or the text itself.
pub(crate) fn server_message(body: &str) -> String {
    let message = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(value) => json_message(&value).unwrap_or_else(|| body.trim().to_owned()),
        Err(_) => body.trim().to_owned(),
    };
    truncate(&message)
}

fn json_message(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    };
    let error = value.get("error");
    error
        .and_then(|e| e.get("message"))
        .and_then(text)
        .or_else(|| error.filter(|e| e.is_string()).and_then(text))
        .or_else(|| value.get("message").and_then(text))
        .or_else(|| value.get("detail").and_then(detail_message))
        .or_else(|| error.and_then(text))
}

/// FastAPI's `detail` is a string or a list of `{"msg": ...}`.
fn detail_message(detail: &serde_json::Value) -> Option<String> {
    match detail {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => {
            let msgs: Vec<String> = items
                .iter()
                .filter_map(|i| i.get("msg").and_then(|m| m.as_str()).map(str::to_owned))
                .collect();
            Some(if msgs.is_empty() {
                detail.to_string()
            } else {
                msgs.join("; ")
            })
        }
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn truncate(message: &str) -> String {
    match message.char_indices().nth(MESSAGE_LIMIT) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

fn mentions_context_length(lower: &str) -> bool {
    [
        "context length",
        "context_length",
        "maximum context",
        "context window",
        "context size",
        "too many tokens",
    ]
    .iter()
    .any(|p| lower.contains(p))
        || (lower.contains("exceed") && (lower.contains("token") || lower.contains("context")))
}

fn mentions_missing_model(lower: &str) -> bool {
    lower.contains("model")
        && [
            "not found",
            "does not exist",
            "not exist",
            "no such model",
            "unknown model",
        ]
        .iter()
        .any(|p| lower.contains(p))
}

/// The error an HTTP status and body mean.
pub(crate) fn from_status(
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    model: &str,
) -> LlmError {
    let message = server_message(body);
    let lower = body.to_lowercase();
    match status {
        401 | 403 => LlmError::Auth { status, message },
        404 => LlmError::ModelNotFound {
            model: model.to_owned(),
            message: if mentions_missing_model(&lower) {
                message
            } else {
                format!("HTTP 404 ({message}); does the base URL end in /v1?")
            },
        },
        429 => LlmError::RateLimited {
            message,
            retry_after: retry_after.map(|d| d.min(RETRY_AFTER_CAP)),
        },
        400..=499 if mentions_missing_model(&lower) => LlmError::ModelNotFound {
            model: model.to_owned(),
            message,
        },
        400 | 413 | 422 if mentions_context_length(&lower) => LlmError::ContextTooLong { message },
        400..=499 => LlmError::BadRequest { status, message },
        _ => LlmError::Server { status, message },
    }
}

/// The error an in-stream error payload means (`data: {"error": ...}` or
/// `event: error`). Its HTTP status was 200, so the payload's `code` or
/// `type` says which kind it is; anything unrecognised is a server failure.
pub(crate) fn from_event(data: &str, model: &str) -> LlmError {
    let value: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
    let error = value.get("error").unwrap_or(&value);
    let code = error.get("code");
    let kind = error
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_lowercase();
    let code_text = code
        .and_then(|c| c.as_str())
        .unwrap_or_default()
        .to_lowercase();
    let status = code
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or_else(|| {
            let kind = format!("{kind} {code_text}");
            if kind.contains("auth") || kind.contains("api_key") {
                401
            } else if kind.contains("rate_limit") {
                429
            } else if kind.contains("not_found") {
                404
            } else if ["context_length", "exceed_context", "invalid_request"]
                .iter()
                .any(|k| kind.contains(k))
            {
                400
            } else {
                500
            }
        });
    let body = if data.trim().is_empty() {
        "(no details)"
    } else {
        data
    };
    from_status(status, body, None, model)
}

/// The error a transport failure (connect, reset, read) means.
pub(crate) fn from_transport(err: &reqwest::Error, url: &str, timeout: Duration) -> LlmError {
    if err.is_timeout() {
        return LlmError::Timeout(timeout);
    }
    LlmError::Unreachable {
        url: url.to_owned(),
        detail: transport_detail(err),
    }
}

/// The innermost causes of a transport error, without the URL reqwest adds.
pub(crate) fn transport_detail(err: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.contains(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    if causes.is_empty() {
        // reqwest's own message names the URL, which may hold credentials.
        let what = if err.is_connect() {
            "the connection failed"
        } else if err.is_body() || err.is_decode() {
            "the reply could not be read"
        } else {
            "the request failed"
        };
        causes.push(what.to_owned());
    }
    truncate(&causes.join(": "))
}

/// `Retry-After` (seconds) or OpenAI's `retry-after-ms`.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// Whether trying the same request again may succeed.
pub(crate) fn is_retryable(err: &LlmError) -> bool {
    match err {
        LlmError::RateLimited { message, .. } => !message.to_lowercase().contains("quota"),
        LlmError::Server { status, .. } => *status != 501,
        LlmError::Unreachable { .. } | LlmError::Timeout(_) => true,
        _ => false,
    }
}

/// Replaces every occurrence of the API key in `err`'s messages.
pub(crate) fn redact(err: LlmError, key: Option<&str>) -> LlmError {
    let Some(key) = key.filter(|k| k.len() >= 4) else {
        return err;
    };
    let clean = |s: String| {
        let mut s = s.replace(key, "[redacted]");
        // A message cut to length may end in the key's first characters.
        let body = s.strip_suffix('…').unwrap_or(&s).len();
        for len in (4..key.len()).rev() {
            if let Some(prefix) = key.get(..len)
                && s[..body].ends_with(prefix)
            {
                s.replace_range(body - len..body, "[redacted]");
                break;
            }
        }
        s
    };
    match err {
        LlmError::Unreachable { url, detail } => LlmError::Unreachable {
            url: clean(url),
            detail: clean(detail),
        },
        LlmError::Auth { status, message } => LlmError::Auth {
            status,
            message: clean(message),
        },
        LlmError::ModelNotFound { model, message } => LlmError::ModelNotFound {
            model,
            message: clean(message),
        },
        LlmError::ContextTooLong { message } => LlmError::ContextTooLong {
            message: clean(message),
        },
        LlmError::RateLimited {
            message,
            retry_after,
        } => LlmError::RateLimited {
            message: clean(message),
            retry_after,
        },
        LlmError::BadRequest { status, message } => LlmError::BadRequest {
            status,
            message: clean(message),
        },
        LlmError::Server { status, message } => LlmError::Server {
            status,
            message: clean(message),
        },
        LlmError::MalformedStream(m) => LlmError::MalformedStream(clean(m)),
        LlmError::Backend(m) => LlmError::Backend(clean(m)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_bodies_become_kinds() {
        let cases: &[(u16, &str, &str)] = &[
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided"}}"#,
                "llm_auth",
            ),
            (403, "forbidden", "llm_auth"),
            (404, "404 page not found", "llm_model_not_found"),
            (
                404,
                r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
                "llm_model_not_found",
            ),
            (
                400,
                r#"{"error":{"message":"model \"x\" not found, try pulling it first","type":"api_error"}}"#,
                "llm_model_not_found",
            ),
            (
                400,
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","code":400}"#,
                "llm_context_too_long",
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
                "llm_context_too_long",
            ),
            (
                400,
                r#"{"error":{"message":"bad temperature"}}"#,
                "llm_bad_request",
            ),
            (
                422,
                r#"{"detail":[{"msg":"field required"}]}"#,
                "llm_bad_request",
            ),
            (429, r#"{"error":"slow down"}"#, "llm_rate_limited"),
            (500, "Internal Server Error", "llm_server_error"),
            (
                503,
                r#"{"error":{"message":"Loading model","code":503}}"#,
                "llm_server_error",
            ),
        ];
        for (status, body, code) in cases {
            let err = from_status(*status, body, None, "m");
            assert_eq!(err.code(), *code, "{status} {body}: {err}");
        }
    }

    #[test]
    fn messages_are_extracted_and_truncated() {
        let cases: &[(&str, &str)] = &[
            (r#"{"error":{"message":"boom","type":"x"}}"#, "boom"),
            (r#"{"error":"boom"}"#, "boom"),
            (r#"{"detail":"boom"}"#, "boom"),
            (r#"{"detail":[{"msg":"a"},{"msg":"b"}]}"#, "a; b"),
            (r#"{"object":"error","message":"boom"}"#, "boom"),
            ("  plain text\n", "plain text"),
        ];
        for (body, expect) in cases {
            assert_eq!(server_message(body), *expect);
        }
        let long = "é".repeat(1000);
        assert_eq!(server_message(&long).chars().count(), MESSAGE_LIMIT + 1);
    }

    #[test]
    fn stream_error_events_become_kinds() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"error":{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}}"#,
                "llm_server_error",
            ),
            (
                r#"{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}"#,
                "llm_rate_limited",
            ),
            (
                r#"{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                "llm_context_too_long",
            ),
            (
                r#"{"code":500,"message":"oops","type":"server_error"}"#,
                "llm_server_error",
            ),
            ("not json", "llm_server_error"),
        ];
        for (data, code) in cases {
            assert_eq!(from_event(data, "m").code(), *code, "{data}");
        }
    }

    #[test]
    fn the_key_never_survives() {
        let err = from_status(401, r#"{"error":"bad key sk-secret-123"}"#, None, "m");
        let err = redact(err, Some("sk-secret-123"));
        assert!(!err.to_string().contains("sk-secret-123"), "{err}");
        // Cut to length in the middle of the key: its start goes too.
        let body = format!(
            "{{\"error\":\"{}sk-secret-123\"}}",
            "x".repeat(MESSAGE_LIMIT - 7)
        );
        let err = redact(from_status(401, &body, None, "m"), Some("sk-secret-123"));
        assert!(!err.to_string().contains("sk-sec"), "{err}");
        assert!(err.to_string().contains("[redacted]"), "{err}");
    }

    #[test]
    fn retry_after_is_read_and_capped() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let err = from_status(429, "", Some(Duration::from_secs(3600)), "m");
        assert!(
            matches!(err, LlmError::RateLimited { retry_after: Some(d), .. } if d == RETRY_AFTER_CAP)
        );
    }
}
