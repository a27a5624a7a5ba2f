//! `runcell chat`: a conversation in the terminal, each turn as panels.

use std::process::ExitCode;

use super::ChatArgs;
use crate::terminal::{self, ChatOptions};

pub async fn run(args: &ChatArgs) -> ExitCode {
    terminal::chat(ChatOptions {
        connect: args.client.connect(),
        session: args.session.clone(),
        model: args.client.model.clone(),
        figures: args.client.figures.clone(),
    })
    .await
}
