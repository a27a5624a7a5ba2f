//! What the model is told about a session's files: a profile of each data
//! file computed in the session's kernel, or else the first lines of the
//! small text files.

use std::collections::HashMap;

use super::Kernels;
use crate::agent::profile::{self, Format, NoteFile, Profile};
use runcell_protocol::{OwnerId, SessionId};
use runcell_sandbox::files::{FileEntry, FileKind};
use runcell_sandbox::{Language, Limits, RunRequest};

/// Text files up to this size show the model their first lines.
const PEEK_MAX_BYTES: u64 = 256 * 1024;

/// How many lines of a text file the model sees.
const PEEK_LINES: usize = 5;

/// How many text files the model sees the first lines of.
const PEEK_FILES: usize = 10;

fn is_text(name: &str) -> bool {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        extension.as_deref(),
        Some(
            "csv"
                | "tsv"
                | "txt"
                | "json"
                | "jsonl"
                | "md"
                | "py"
                | "log"
                | "xml"
                | "yaml"
                | "yml"
                | "ini"
                | "toml"
                | "html"
                | "sql"
        )
    )
}

/// The first lines of a text file, each cut to 200 bytes.
fn first_lines(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .take(PEEK_LINES)
        .map(|line| runcell_sandbox::fit(line, 200).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Kernels {
    /// What the model is told about the session's files: a profile of
    /// each data file (columns, dtypes, rows; JSON's shape; text's lines),
    /// computed in the session's kernel, which is opened for it if it has
    /// none, as the question's program would; each other file's path and
    /// size. When no profile can be had (the kernel cannot run it, or it
    /// failed), the first lines of small text files instead. `None` when
    /// the session has no files.
    pub async fn files_note(&self, session: SessionId, owner: OwnerId) -> Option<String> {
        let mut entries = self.list_files(session).await.ok()?;
        let is_profiled = |entries: &[FileEntry]| {
            entries
                .iter()
                .any(|e| e.kind == FileKind::File && Format::of(&e.name).is_some())
        };
        // The profiles are the kernel's view of the files: with their times
        // there, a profile is kept while its kernel is.
        if is_profiled(&entries) && !matches!(self.live_files(session), Ok(Some(_))) {
            if self.attach(session, owner).await.ok().flatten().is_none() {
                return self.first_lines_note(session, &entries).await;
            }
            entries = self.list_files(session).await.ok()?;
        }
        let files: Vec<&FileEntry> = entries
            .iter()
            .filter(|e| e.kind == FileKind::File)
            .collect();
        if files.is_empty() {
            return None;
        }
        let mut known: HashMap<&str, Profile> = HashMap::new();
        let mut missing = Vec::new();
        for entry in files.iter().filter(|e| Format::of(&e.name).is_some()) {
            if known.len() + missing.len() == profile::MAX_PROFILED {
                break;
            }
            match self.profiles.get(session, entry) {
                Some(found) => {
                    known.insert(&entry.path, found);
                }
                None => missing.push(*entry),
            }
        }
        if !missing.is_empty() {
            match self.profile_files(session, owner, &missing).await {
                Some(found) => {
                    let present: Vec<&str> = files.iter().map(|e| e.path.as_str()).collect();
                    for (entry, found) in missing.iter().zip(found) {
                        if let Some(found) = found {
                            self.profiles.put(session, entry, found.clone(), &present);
                            known.insert(&entry.path, found);
                        }
                    }
                }
                // The profile could not run: today's note, for all of them.
                None => return self.first_lines_note(session, &entries).await,
            }
        }
        let shown: Vec<NoteFile> = files
            .iter()
            .map(|e| NoteFile {
                path: &e.path,
                size: e.size,
                profile: known.get(e.path.as_str()),
            })
            .collect();
        profile::note(&shown)
    }

    /// The column names of the session's tables, as the files' note last
    /// told them.
    pub fn table_columns(&self, session: SessionId) -> Vec<String> {
        self.profiles.columns(session)
    }

    /// The session's tables (each with its path) as the files' note last
    /// profiled them: what a look at the data is decided from.
    pub(crate) fn table_profiles(&self, session: SessionId) -> Vec<(String, profile::Table)> {
        self.profiles.tables(session)
    }

    /// Profiles `files` in the session's kernel: one for each, in order
    /// (`None` for one it did not get to); `None` when the run failed.
    pub(super) async fn profile_files(
        &self,
        session: SessionId,
        owner: OwnerId,
        files: &[&FileEntry],
    ) -> Option<Vec<Option<Profile>>> {
        let asked: Vec<(String, Format)> = files
            .iter()
            .filter_map(|e| Some((e.path.clone(), Format::of(&e.name)?)))
            .collect();
        let request = RunRequest {
            code: profile::program(&asked),
            language: Language::Python,
            limits: Limits {
                wall: profile::WALL,
                output_bytes: profile::MAX_OUTPUT_BYTES,
                ..Limits::default()
            },
            env: Vec::new(),
            cwd: None,
        };
        let started = std::time::Instant::now();
        let outcome = self.run_quietly(session, owner, &request).await?;
        let ms = runcell_core::clock::millis(started.elapsed());
        if let Some(error) = &outcome.error {
            tracing::info!(error = %error.name, ms, "the files could not be profiled");
            return None;
        }
        let profiles = profile::parse(&outcome.stdout, asked.len());
        if profiles.is_none() {
            tracing::info!(ms, "the files' profiler said nothing readable");
        }
        tracing::debug!(ms, files = asked.len(), "files profiled");
        profiles
    }

    /// Today's note without a kernel: each file's path and size, and the
    /// first lines of small text files.
    pub(super) async fn first_lines_note(
        &self,
        session: SessionId,
        entries: &[FileEntry],
    ) -> Option<String> {
        let live = self.live_files(session).ok()?;
        let mut peeks = Vec::new();
        let mut peeked = 0;
        for entry in entries.iter().filter(|e| e.kind == FileKind::File) {
            // Only the first few are read: the note has room for little.
            let head =
                if peeked < PEEK_FILES && entry.size <= PEEK_MAX_BYTES && is_text(&entry.name) {
                    peeked += 1;
                    let bytes = match &live {
                        Some(kernel) => match kernel.files() {
                            Some(files) => files.read(&entry.path).await.ok(),
                            None => None,
                        },
                        None => self.uploads.read(session, &entry.path).await.ok(),
                    };
                    bytes.map(|b| first_lines(&b))
                } else {
                    None
                };
            peeks.push((entry.path.clone(), entry.size, head));
        }
        let note = crate::agent::prompt::files_note(&peeks)?;
        Some(format!("{note}\n\n{}", profile::SHOW_THE_TABLE))
    }
}
