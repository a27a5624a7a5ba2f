//! Server-sent events, as OpenAI-compatible servers send them: `data:` lines
//! (several make one multi-line payload), `event:` lines, `:` comments
//! (keep-alives), a blank line ending each event; LF, CRLF or CR line ends;
//! bytes arriving split anywhere, even inside a UTF-8 character.
//!
//! llama.cpp's server has been seen to write `error: {...}` lines, which are
//! no SSE field at all; they are read as an `error` event.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` name, if one was given.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// An incremental parser: feed it bytes as they arrive.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the line being read (complete lines never stay here).
    line: Vec<u8>,
    /// The last byte fed was a CR: a LF right after it ends no new line.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Parses `bytes`, appending every event they complete to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
    }

    /// The stream ended: a last event not followed by a blank line still
    /// counts (servers that close right after the payload are common).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out);
        }
        self.dispatch(out);
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // a comment: keep-alive
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => self.push_data(&value),
            b"event" => self.event = Some(value.into_owned()),
            b"error" => {
                self.event = Some("error".to_owned());
                self.push_data(&value);
            }
            _ => {} // id, retry and unknown fields
        }
    }

    fn push_data(&mut self, value: &str) {
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if std::mem::take(&mut self.has_data) {
            out.push(SseEvent {
                event,
                data: std::mem::take(&mut self.data),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_split(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let mut start = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        for cut in cuts {
            parser.feed(&bytes[start..cut], &mut out);
            start = cut;
        }
        parser.feed(&bytes[start..], &mut out);
        parser.finish(&mut out);
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn reads_the_forms_servers_send() {
        let cases: &[(&str, Vec<SseEvent>)] = &[
            ("data: {\"a\":1}\n\n", vec![ev(None, "{\"a\":1}")]),
            ("data:{\"a\":1}\r\n\r\n", vec![ev(None, "{\"a\":1}")]),
            ("data: x\r\rdata: y\r\r", vec![ev(None, "x"), ev(None, "y")]),
            (": ping\n\ndata: x\n\n: ping\n\n", vec![ev(None, "x")]),
            ("data: a\ndata: b\n\n", vec![ev(None, "a\nb")]),
            ("event: error\ndata: {}\n\n", vec![ev(Some("error"), "{}")]),
            (
                "error: {\"code\":500}\n\n",
                vec![ev(Some("error"), "{\"code\":500}")],
            ),
            ("id: 7\nretry: 10\ndata: x\n\n", vec![ev(None, "x")]),
            ("data: [DONE]", vec![ev(None, "[DONE]")]),
            ("event: ping\n\n", vec![]),
            ("data\n\n", vec![ev(None, "")]),
        ];
        for (input, expect) in cases {
            assert_eq!(
                &parse_split(input.as_bytes(), &[]),
                expect,
                "input {input:?}"
            );
        }
    }

    fn arb_stream() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            "\\PC{0,20}".prop_map(|s| format!("data: {s}")),
            Just(": ping".to_owned()),
            Just("event: error".to_owned()),
            Just(String::new()),
            Just("data: [DONE]".to_owned()),
            Just("data: {\"é\":\"日本\"}".to_owned()),
        ];
        let eol = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        proptest::collection::vec((line, eol), 0..30).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(l, e)| format!("{}{e}", l.replace(['\r', '\n'], " ")))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn splitting_never_changes_the_events(
            stream in arb_stream(),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
        ) {
            let bytes = stream.as_bytes();
            let whole = parse_split(bytes, &[]);
            prop_assert_eq!(&parse_split(bytes, &cuts), &whole);
            let every_byte: Vec<usize> = (0..bytes.len()).collect();
            prop_assert_eq!(parse_split(bytes, &every_byte), whole);
        }

        #[test]
        fn utf8_split_inside_a_character_survives(text in "\\PC{0,60}", cut in any::<usize>()) {
            let text = text.replace(['\r', '\n'], " ");
            let stream = format!("data: {text}\n\n");
            let events = parse_split(stream.as_bytes(), &[cut]);
            prop_assert_eq!(events, vec![ev(None, &text)]);
        }
    }
}
