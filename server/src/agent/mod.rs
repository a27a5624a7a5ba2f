//! What answers a person's message: for now the chat responder, which streams
//! the model's reply; the notebook agent (code, result, explanation) grows
//! from it.

mod chat;

pub use chat::{ChatResponder, SYSTEM_PROMPT};
