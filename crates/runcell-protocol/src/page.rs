//! What the pages' server functions return: a session's notebook as its page
//! needs it, a share link's, the sidebar's lists, and the helpers that name
//! a session's files and titles.

use serde::{Deserialize, Serialize};

use crate::{SandboxKind, SessionEvent};

/// Everything needed to render a session's notebook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPageData {
    pub session_id: String,
    /// The first question, or the owner's name for it; empty before any.
    pub title: String,
    /// Read with the page's own reader ([`crate::reader`]) here too, so
    /// that serde and the page (which reads the whole struct by hand,
    /// [`crate::reader::session_page_data`]) read events alike.
    #[serde(deserialize_with = "crate::reader::deserialize_events")]
    pub events: Vec<SessionEvent>,
    pub models: ModelChoices,
    /// The sandbox backends on offer, the default first.
    #[serde(default)]
    pub backends: Vec<SandboxKind>,
    /// The backend the session's programs run on now (what the picker
    /// shows); `None` when the server did not say.
    #[serde(default)]
    pub backend: Option<SandboxKind>,
    /// Where the page loads Pyodide from, when `browser` is on offer.
    #[serde(default)]
    pub pyodide_url: Option<String>,
    /// The largest file the page may upload, in bytes (0: no limit known).
    #[serde(default)]
    pub upload_limit: u64,
    /// The live share link's path (`/s/…`), if the session is shared.
    pub share_path: Option<String>,
    /// The link offers the session's files too.
    #[serde(default)]
    pub share_files: bool,
    /// The viewer's sessions, for the sidebar, most recent first.
    pub sessions: Vec<SessionSummary>,
    /// Who is signed in, and whether signing in is on offer.
    #[serde(default)]
    pub account: AccountMenu,
}

/// The sidebar's account menu: the person signed in (their name, and
/// whether they may open the admin page), or whether a sign-in is offered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountMenu {
    /// The signed-in person's name; `None` for an anonymous browser (or a
    /// key's sign-in, which has no person).
    pub name: Option<String>,
    pub admin: bool,
    /// The server offers a sign-in with an identity provider.
    pub sign_in: bool,
}

/// A session as the sidebar lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub id: String,
    pub title: String,
    pub updated_ms: u64,
}

/// A kernel one of the viewer's notebooks holds, as `GET /api/kernels`
/// lists it ("Kernels in use" in the sessions list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInUse {
    pub session_id: String,
    /// The notebook's title (empty before its first question).
    pub title: String,
    pub url: String,
    pub backend: SandboxKind,
    /// What the sandbox picker calls the backend.
    pub backend_label: String,
    /// A program runs in it now.
    pub running: bool,
    /// Since its last run ended (0 while one runs).
    pub idle_ms: u64,
}

/// `GET /api/kernels`: the kernels, the running and most recently used
/// first, and how many the viewer's notebooks may hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelsInUse {
    pub kernels: Vec<KernelInUse>,
    pub cap: usize,
}

/// One of the viewer's sessions, as its page needs it (the server's answer
/// to a page's request; [`SessionPageData`] adds what the page asks besides).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPage {
    pub title: String,
    pub events: Vec<SessionEvent>,
    pub share_path: Option<String>,
    pub share_files: bool,
}

/// A session seen through a share link, read-only: what the link shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareLinkLog {
    pub token: String,
    pub title: String,
    pub events: Vec<SessionEvent>,
    /// The session's files, when the owner shared them with the link (as
    /// they were then).
    #[serde(default)]
    pub files: Vec<FileItem>,
    /// Whether the session is longer than the page shows: `events` are
    /// its first part only (the `.ipynb` download has all of it).
    #[serde(default)]
    pub cut: bool,
}

/// A file or directory in the session's home, as the server lists it
/// (`GET /api/sessions/{id}/files`, and a share link's files).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileItem {
    /// `/home/user/…`
    pub path: String,
    pub name: String,
    /// `file`, `directory` or `symlink`.
    pub kind: String,
    pub size: u64,
    #[serde(default)]
    pub modified_ms: Option<u64>,
}

/// `text` as a URL query value.
pub fn query_value(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Where a file of a session of the viewer's downloads (and is deleted).
pub fn session_file_url(session_id: &str, path: &str) -> String {
    format!(
        "/api/sessions/{session_id}/files?path={}",
        query_value(path)
    )
}

/// The models a person can pick from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChoices {
    /// `openai`, `embedded` or `scripted`.
    pub backend: String,
    /// The model used when none is picked.
    pub default_model: String,
    /// Every model the backend lists, the default among them.
    pub models: Vec<String>,
    /// Why the list could not be read, if it could not (the server is down,
    /// the model file is missing...).
    pub problem: Option<String>,
}

/// The longest title kept; longer ones are cut at a character boundary.
pub const MAX_TITLE_CHARS: usize = 80;

/// A title from a question: its first line that is not a code fence,
/// trimmed and cut to [`MAX_TITLE_CHARS`].
pub fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with("```"))
        .unwrap_or("");
    let mut title: String = line.chars().take(MAX_TITLE_CHARS).collect();
    if line.chars().count() > MAX_TITLE_CHARS {
        title.pop();
        title.push('…');
    }
    title
}

/// The title a session takes when its first question `before` is edited
/// into `after`: `after`'s, if `title` is still the one `before` gave it (or
/// none yet); `None` when it stays (a title the person chose, or nothing
/// new). The server stores it and an open page shows it by the same rule.
pub fn title_after_edit(title: &str, before: &str, after: &str) -> Option<String> {
    let named_by_question = title.is_empty() || title == title_from(before);
    let renamed = title_from(after);
    (named_by_question && !renamed.is_empty() && renamed != title).then_some(renamed)
}

/// A title to show: the stored one, or a stand-in for a session that has none.
pub fn display_title(title: &str) -> &str {
    if title.trim().is_empty() {
        "Untitled session"
    } else {
        title
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edited_first_question_renames_only_a_title_it_gave() {
        let before = "plot the primes below 1000";
        let after = "  plot the primes below 2000\nas a chart";
        assert_eq!(
            title_after_edit(before, before, after).as_deref(),
            Some("plot the primes below 2000")
        );
        assert_eq!(
            title_after_edit("", before, after).as_deref(),
            Some("plot the primes below 2000")
        );
        assert_eq!(title_after_edit("My primes", before, after), None);
        assert_eq!(title_after_edit(before, before, before), None);
        assert_eq!(title_after_edit(before, before, "```\n```"), None);
    }

    #[test]
    fn query_values() {
        assert_eq!(
            query_value("/home/user/a b&c.csv"),
            "/home/user/a%20b%26c.csv"
        );
        assert_eq!(query_value("é"), "%C3%A9");
    }
}
