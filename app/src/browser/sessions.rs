//! Keeping sessions in place: a rename from the sidebar, sent without
//! leaving the page (the form still posts on its own without scripts).

use super::xhr::{message_of, send, string_field};

/// Renames the session `id`; `done` gets the title the server kept (cut
/// as a question's would be) or why it refused.
pub fn rename(id: &str, title: &str, done: impl FnOnce(Result<String, String>) + 'static) -> bool {
    let body = serde_json::json!({ "title": title }).to_string();
    send(
        "PATCH",
        &format!("/api/sessions/{id}"),
        Some(&body),
        move |xhr| {
            if xhr.status().unwrap_or(0) != 200 {
                return done(Err(message_of(xhr)));
            }
            done(
                string_field(xhr, "title")
                    .ok_or_else(|| "the server's answer named no title".to_string()),
            );
        },
    )
}
