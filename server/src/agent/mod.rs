//! What answers a person's message. For now the echo responder, which streams
//! the message back; the language-model agent replaces it.

mod echo;

pub use echo::{EchoResponder, chunks};
