//! Frames about runs that wait for the socket, in order.

use std::collections::{BTreeSet, VecDeque};

use crate::protocol::{ClientMessage, Output};

/// How much output waits for the socket to come back; output beyond it is
/// dropped (and the run says so), results, errors and ends never are.
const OUTBOX_OUTPUT_BYTES: usize = 2 * 1024 * 1024;
/// Said after a run's output when some of it could not wait.
const LOST_NOTE: &str =
    "\n(Some of this program's output was lost while the page was reconnecting.)\n";

/// Frames for the server, while the socket cannot take them.
#[derive(Default)]
pub(super) struct Outbox {
    /// The page attached over the current socket: frames may go out.
    pub(super) open: bool,
    pub(super) frames: VecDeque<ClientMessage>,
    /// Bytes of output waiting.
    output_bytes: usize,
    /// Runs some of whose output was dropped.
    lost: BTreeSet<u64>,
}

impl Outbox {
    pub(super) fn push(&mut self, message: ClientMessage) {
        match &message {
            ClientMessage::BrowserOutput {
                run,
                output: Output::Stdout { text } | Output::Stderr { text },
            } => {
                // Output after a gap would read as if nothing were missing.
                if self.lost.contains(run) || self.output_bytes + text.len() > OUTBOX_OUTPUT_BYTES {
                    self.lost.insert(*run);
                    return;
                }
                self.output_bytes += text.len();
            }
            ClientMessage::BrowserDone { run, .. } if self.lost.remove(run) => {
                self.frames.push_back(ClientMessage::BrowserOutput {
                    run: *run,
                    output: Output::Stderr {
                        text: LOST_NOTE.into(),
                    },
                });
            }
            _ => {}
        }
        self.frames.push_back(message);
    }

    pub(super) fn pop(&mut self) -> Option<ClientMessage> {
        let message = self.frames.pop_front()?;
        if let ClientMessage::BrowserOutput {
            output: Output::Stdout { text } | Output::Stderr { text },
            ..
        } = &message
        {
            self.output_bytes = self.output_bytes.saturating_sub(text.len());
        }
        Some(message)
    }

    /// Puts back a frame that could not go out after all.
    pub(super) fn unpop(&mut self, message: ClientMessage) {
        if let ClientMessage::BrowserOutput {
            output: Output::Stdout { text } | Output::Stderr { text },
            ..
        } = &message
        {
            self.output_bytes += text.len();
        }
        self.frames.push_front(message);
    }
}
