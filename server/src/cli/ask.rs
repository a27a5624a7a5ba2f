//! `runcell ask QUESTION`: one turn, drawn as panels (or NDJSON).

use std::io::Read as _;
use std::process::ExitCode;

use super::AskArgs;
use crate::terminal::{self, AskOptions};

pub async fn run(args: &AskArgs) -> ExitCode {
    let question = if args.question == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            eprintln!("runcell: cannot read the question from standard input: {e}");
            return ExitCode::from(2);
        }
        text
    } else {
        args.question.clone()
    };
    if question.trim().is_empty() {
        eprintln!("runcell: the question is empty");
        return ExitCode::from(2);
    }
    terminal::ask(AskOptions {
        connect: args.client.connect(),
        question,
        session: args.session.clone(),
        files: args.files.clone(),
        replace: args.replace,
        json: args.json,
        model: args.client.model.clone(),
        figures: args.client.figures.clone(),
    })
    .await
}
