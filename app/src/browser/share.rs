//! Sharing in place: the share controls' forms, sent without leaving the
//! page (the forms still work on their own without scripts).

use super::xhr::{message_of, send, string_field};

fn share_url(session_id: &str) -> String {
    format!("/api/sessions/{session_id}/share")
}

/// Makes (or moves on) the session's link; `done` gets its path.
pub fn share(
    session_id: &str,
    files: bool,
    done: impl FnOnce(Result<String, String>) + 'static,
) -> bool {
    let url = format!("{}?files={files}", share_url(session_id));
    send("POST", &url, None, move |xhr| {
        if xhr.status().unwrap_or(0) != 200 {
            return done(Err(message_of(xhr)));
        }
        done(
            string_field(xhr, "path")
                .ok_or_else(|| "the server's answer named no link".to_string()),
        );
    })
}

/// Revokes the session's link.
pub fn unshare(session_id: &str, done: impl FnOnce(Result<(), String>) + 'static) -> bool {
    send("DELETE", &share_url(session_id), None, move |xhr| {
        if xhr.status().unwrap_or(0) == 204 {
            done(Ok(()));
        } else {
            done(Err(message_of(xhr)));
        }
    })
}
