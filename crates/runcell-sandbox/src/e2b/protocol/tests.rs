use proptest::prelude::*;
use serde::Serialize;

use super::*;

fn line(value: &impl Serialize) -> String {
    String::from_utf8(ndjson_line(value)).unwrap()
}

#[test]
fn lines_are_spaced_as_python_writes_them() {
    assert_eq!(
        line(&Line::NumberOfExecutions { execution_count: 1 }),
        "{\"type\": \"number_of_executions\", \"execution_count\": 1}\n"
    );
    assert_eq!(
        line(&Line::Stdout {
            text: "hello\n".into(),
            timestamp: "2026-11-21T23:10:00.123456+00:00".into()
        }),
        "{\"type\": \"stdout\", \"text\": \"hello\\n\", \"timestamp\": \"2026-11-21T23:10:00.123456+00:00\"}\n"
    );
    let mut bundle = serde_json::Map::new();
    bundle.insert("text/plain".into(), "42".into());
    assert_eq!(
        line(&Line::Result(ResultLine::from_bundle(&bundle, true))),
        "{\"type\": \"result\", \"text\": \"42\", \"extra\": {}, \"is_main_result\": true}\n"
    );
    assert_eq!(
        line(&Line::Error {
            name: "ZeroDivisionError".into(),
            value: "division by zero".into(),
            traceback: "\u{1b}[0;31m---\u{1b}[0m\nZeroDivisionError: division by zero".into(),
        }),
        "{\"type\": \"error\", \"name\": \"ZeroDivisionError\", \"value\": \"division by zero\", \"traceback\": \"\\u001b[0;31m---\\u001b[0m\\nZeroDivisionError: division by zero\"}\n"
    );
    assert_eq!(line(&Line::Keepalive), "{\"type\": \"keepalive\"}\n");
    assert_eq!(
        line(&Line::EndOfExecution),
        "{\"type\": \"end_of_execution\"}\n"
    );
    assert_eq!(
        line(&serde_json::json!({"a": [1, 2], "é": "☃ 😀"})),
        "{\"a\": [1, 2], \"\\u00e9\": \"\\u2603 \\ud83d\\ude00\"}\n"
    );
}

#[test]
fn results_name_their_formats_and_keep_the_rest_in_extra() {
    let bundle = serde_json::json!({
        "text/plain": "'abc'",
        "image/png": "iVBOR",
        "text/html": "<b>x</b>",
        "application/x-custom": "zzz",
    });
    let result = ResultLine::from_bundle(bundle.as_object().unwrap(), false);
    assert_eq!(result.text.as_deref(), Some("abc"));
    assert_eq!(result.formats["png"], "iVBOR");
    assert_eq!(result.formats["html"], "<b>x</b>");
    assert_eq!(result.extra["application/x-custom"], "zzz");
    let back = result.to_bundle();
    assert_eq!(back["image/png"], "iVBOR");
    assert_eq!(back["text/plain"], "abc");
    assert_eq!(back["application/x-custom"], "zzz");
    // The SDK's own lines parse, unknown types included.
    let parsed: Line = serde_json::from_str(
        "{\"type\": \"result\", \"text\": \"<Figure>\", \"png\": \"iVBO\", \"chart\": {\"type\": \"line\"}, \"extra\": {}, \"is_main_result\": false}",
    )
    .unwrap();
    let Line::Result(result) = parsed else {
        panic!("not a result: {parsed:?}")
    };
    assert_eq!(result.formats["png"], "iVBO");
    assert!(!result.is_main_result);
    assert_eq!(
        serde_json::from_str::<Line>("{\"type\": \"something_new\", \"x\": 1}").unwrap(),
        Line::Unknown
    );
}

#[test]
fn languages_are_normalized_as_the_code_interpreter_does() {
    assert_eq!(normalize_language(None), "python");
    assert_eq!(normalize_language(Some("")), "python");
    assert_eq!(normalize_language(Some("JS")), "javascript");
    assert_eq!(normalize_language(Some("ts")), "typescript");
    assert_eq!(normalize_language(Some("Bash")), "bash");
}

#[test]
fn times_are_written_as_python_and_go_write_them() {
    assert_eq!(timestamp(0), "1970-01-01T00:00:00.000000+00:00");
    assert_eq!(
        timestamp(1_795_302_600_123),
        "2026-11-21T23:10:00.123000+00:00"
    );
    assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(951_782_400_999), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_795_302_600_123), "2026-11-21T23:10:00Z");
    assert_eq!(timestamp(999), "1970-01-01T00:00:00.999000+00:00");
    assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
}

#[test]
fn process_events_match_envd() {
    let start = ProcessEventJson {
        event: ProcessEvent::Start { pid: 77 },
    };
    assert_eq!(
        serde_json::to_string(&start).unwrap(),
        "{\"event\":{\"start\":{\"pid\":77}}}"
    );
    let data = ProcessEventJson {
        event: ProcessEvent::Data([("stdout".to_string(), "b3V0".to_string())].into()),
    };
    assert_eq!(
        serde_json::to_string(&data).unwrap(),
        "{\"event\":{\"data\":{\"stdout\":\"b3V0\"}}}"
    );
    let end = |code| ProcessEventJson {
        event: ProcessEvent::End(ProcessEnd {
            exit_code: code,
            exited: true,
            status: format!("exit status {code}"),
            error: None,
        }),
    };
    assert_eq!(
        serde_json::to_string(&end(1)).unwrap(),
        "{\"event\":{\"end\":{\"exitCode\":1,\"exited\":true,\"status\":\"exit status 1\"}}}"
    );
    assert_eq!(
        serde_json::to_string(&end(0)).unwrap(),
        "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}"
    );
    let keepalive = ProcessEventJson {
        event: ProcessEvent::Keepalive {},
    };
    assert_eq!(
        serde_json::to_string(&keepalive).unwrap(),
        "{\"event\":{\"keepalive\":{}}}"
    );
    let parsed: ProcessEventJson = serde_json::from_str(
        "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}",
    )
    .unwrap();
    assert_eq!(parsed, end(0));
}

#[test]
fn entries_write_int64_as_text_and_read_either() {
    let entry = EntryInfo {
        name: "a.txt".into(),
        kind: FILE_TYPE_FILE.into(),
        path: "/home/user/a.txt".into(),
        size: 12,
        mode: 0o644,
        ..EntryInfo::default()
    };
    let json = serde_json::to_value(&entry).unwrap();
    assert_eq!(json["size"], "12");
    assert_eq!(json["type"], "FILE_TYPE_FILE");
    let back: EntryInfo =
        serde_json::from_str("{\"name\":\"a\",\"path\":\"/a\",\"size\":7}").unwrap();
    assert_eq!(back.size, 7);
}

#[test]
fn envelopes_carry_flag_and_length_and_end_the_stream() {
    let message = b"{\"process\":{}}";
    let bytes = envelope(FLAG_MESSAGE, message);
    assert_eq!(&bytes[..5], &[0, 0, 0, 0, 14]);
    assert_eq!(single_envelope(&bytes).unwrap(), message);
    assert_eq!(end_stream(None), [2, 0, 0, 0, 2, b'{', b'}']);
    let failed = end_stream(Some(("not_found", "gone")));
    assert_eq!(failed[0], FLAG_END_STREAM);
    let json: serde_json::Value = serde_json::from_slice(&failed[5..]).unwrap();
    assert_eq!(json["error"]["code"], "not_found");
    assert_eq!(single_envelope(&bytes[..7]), Err(EnvelopeError::Truncated));
    let huge = [0, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        single_envelope(&huge),
        Err(EnvelopeError::TooLarge(_))
    ));
}

proptest! {
    /// Envelopes split anywhere come back whole and in order.
    #[test]
    fn envelopes_survive_any_split(
        messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
        cuts in proptest::collection::vec(1usize..16, 1..40),
    ) {
        let mut stream = Vec::new();
        for m in &messages {
            stream.extend(envelope(FLAG_MESSAGE, m));
        }
        stream.extend(end_stream(None));
        let mut reader = Envelopes::default();
        let mut got = Vec::new();
        let mut rest = &stream[..];
        let mut cuts = cuts.into_iter().cycle();
        while !rest.is_empty() {
            let n = cuts.next().unwrap_or(1).min(rest.len());
            reader.push(&rest[..n]);
            rest = &rest[n..];
            while let Some(envelope) = reader.next_envelope().unwrap() {
                got.push(envelope);
            }
        }
        prop_assert!(reader.is_empty());
        prop_assert_eq!(got.len(), messages.len() + 1);
        for (i, m) in messages.iter().enumerate() {
            prop_assert_eq!(&got[i], &(FLAG_MESSAGE, m.clone()));
        }
        prop_assert_eq!(got[messages.len()].0, FLAG_END_STREAM);
    }

    /// Whatever the text, a line is one line of valid JSON, pure ASCII,
    /// that reads back as it was.
    #[test]
    fn lines_are_ascii_json_on_one_line(text in any::<String>()) {
        let bytes = ndjson_line(&Line::Stdout { text: text.clone(), timestamp: String::new() });
        prop_assert!(bytes.is_ascii());
        prop_assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        let back: Line = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(back, Line::Stdout { text, timestamp: String::new() });
    }
}
