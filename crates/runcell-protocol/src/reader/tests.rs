use std::fmt::Debug;

use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::*;
use crate::page::SessionPageData;
use crate::{CellKind, CellStatus, ErrorCode, KernelCap, KernelLoss, TurnKind, TurnStatus};

// The witnesses: samples of every kind of frame, event, output and message
// of the page's Python, each made by a `match` on the kinds with no `_`
// arm. A kind's list (`EventKind::ALL`...) holds every variant (see
// `wire/names.rs`), so a new variant does not compile until it has an arm
// here, and `every_kind_has_samples_of_its_own` fails until the arm gives
// samples of it. Enums of names are sampled through `Named::ALL`.

/// Every sample `of` gives, kind by kind.
fn every<K: Named, T>(of: fn(K) -> Vec<T>) -> Vec<T> {
    K::ALL.iter().flat_map(|&kind| of(kind)).collect()
}

fn frames_of(kind: ServerMessageKind) -> Vec<ServerMessage> {
    match kind {
        ServerMessageKind::Welcome => vec![ServerMessage::Welcome {
            protocol: crate::PROTOCOL_VERSION,
            session_id: "s".into(),
            last_seq: 7,
        }],
        ServerMessageKind::Event => SessionEvent::numbered(every(events_of), 1)
            .into_iter()
            .map(ServerMessage::Event)
            .collect(),
        ServerMessageKind::Error => ErrorCode::ALL
            .iter()
            .map(|&code| ServerMessage::Error {
                code,
                message: "no".into(),
            })
            .collect(),
        ServerMessageKind::BrowserRun => vec![
            ServerMessage::BrowserRun {
                run: 7,
                code: "print(1)".into(),
                fresh: true,
                timeout_ms: 30_000,
                prepare_ms: 180_000,
            },
            ServerMessage::BrowserRun {
                run: 8,
                code: String::new(),
                fresh: false,
                timeout_ms: 0,
                prepare_ms: 0,
            },
        ],
        ServerMessageKind::BrowserStop => vec![ServerMessage::BrowserStop { run: 7 }],
    }
}

fn events_of(kind: EventKind) -> Vec<EventBody> {
    match kind {
        EventKind::TurnStarted => TurnKind::ALL
            .iter()
            .zip(1..)
            .map(|(&turn_kind, turn)| EventBody::TurnStarted {
                turn: TurnId(turn),
                turn_kind,
                alternative_to: None,
            })
            .chain([EventBody::TurnStarted {
                turn: TurnId(4),
                turn_kind: TurnKind::Ask,
                alternative_to: Some(TurnId(1)),
            }])
            .collect(),
        EventKind::BranchSelected => vec![EventBody::BranchSelected { turn: TurnId(1) }],
        EventKind::KernelRestored => vec![
            EventBody::KernelRestored {
                programs: 2,
                error: None,
            },
            EventBody::KernelRestored {
                programs: 0,
                error: Some(CellError {
                    code: "restore_failed".into(),
                    message: "program 1 of 2 failed".into(),
                }),
            },
        ],
        EventKind::UserMessage => vec![
            EventBody::UserMessage {
                cell_id: CellId(1),
                text: "héllo \"there\"".into(),
                markup: None,
            },
            EventBody::UserMessage {
                cell_id: CellId(1),
                text: "héllo *there*".into(),
                markup: Some("<p>héllo <em>there</em></p>\n".into()),
            },
        ],
        EventKind::CellStarted => CellKind::ALL
            .iter()
            .map(|&cell_kind| EventBody::CellStarted {
                cell_id: CellId(9),
                cell_kind,
                language: None,
                attempt: None,
                source: None,
            })
            .chain([EventBody::CellStarted {
                cell_id: CellId(2),
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(2),
                source: Some(CellId(1)),
            }])
            .collect(),
        EventKind::CellDelta => vec![
            EventBody::CellDelta {
                cell_id: CellId(2),
                text: "x = 1".into(),
                highlight: Some(Highlight {
                    html: "<span class=\"hl-n\">x</span>".into(),
                    upto: 1,
                }),
            },
            EventBody::CellDelta {
                cell_id: CellId(2),
                text: String::new(),
                highlight: None,
            },
        ],
        EventKind::CellReset => vec![EventBody::CellReset { cell_id: CellId(2) }],
        EventKind::CellOutput => every(outputs_of)
            .into_iter()
            .map(|output| EventBody::CellOutput {
                cell_id: CellId(3),
                output,
            })
            .collect(),
        EventKind::CellCleared => vec![
            EventBody::CellCleared {
                cell_id: CellId(3),
                wait: false,
            },
            EventBody::CellCleared {
                cell_id: CellId(3),
                wait: true,
            },
        ],
        EventKind::DisplayUpdated => vec![
            EventBody::DisplayUpdated {
                display_id: "d1".into(),
                output: Output::Rich {
                    data: [("text/plain".to_string(), "'v2'".to_string())].into(),
                    main: false,
                    metadata: String::new(),
                    display_id: Some("d1".into()),
                },
            },
            EventBody::DisplayUpdated {
                display_id: String::new(),
                output: Output::Stdout { text: "x".into() },
            },
        ],
        EventKind::CellNote => vec![EventBody::CellNote {
            cell_id: CellId(2),
            note: "Sent back: the program printed nothing.".into(),
        }],
        EventKind::CellFinished => CellStatus::ALL
            .iter()
            .map(|&status| EventBody::CellFinished {
                cell_id: CellId(9),
                status,
                elapsed_ms: 1,
                error: None,
            })
            .chain([EventBody::CellFinished {
                cell_id: CellId(2),
                status: CellStatus::Error,
                elapsed_ms: 12,
                error: Some(CellError {
                    code: "llm_unreachable".into(),
                    message: "no server".into(),
                }),
            }])
            .collect(),
        EventKind::TurnFinished => TurnStatus::ALL
            .iter()
            .map(|&status| EventBody::TurnFinished {
                turn: TurnId(1),
                status,
                elapsed_ms: 20,
                final_cell: Some(CellId(2)),
            })
            .chain([EventBody::TurnFinished {
                turn: TurnId(1),
                status: TurnStatus::Ok,
                elapsed_ms: 0,
                final_cell: None,
            }])
            .collect(),
        EventKind::KernelLost => KernelLoss::ALL
            .iter()
            .map(|&reason| EventBody::KernelLost { reason })
            .collect(),
        EventKind::KernelRefused => KernelCap::ALL
            .iter()
            .zip(1..)
            .map(|(&cap, held)| EventBody::KernelRefused {
                cell_id: CellId(held.into()),
                cap,
                held,
            })
            .collect(),
    }
}

fn outputs_of(kind: OutputKind) -> Vec<Output> {
    match kind {
        OutputKind::Stdout => vec![Output::Stdout {
            text: "hi\n".into(),
        }],
        OutputKind::Stderr => vec![Output::Stderr {
            text: String::new(),
        }],
        OutputKind::Rich => vec![
            Output::Rich {
                data: [("text/plain".to_string(), "3".to_string())].into(),
                main: true,
                metadata: String::new(),
                display_id: None,
            },
            Output::Rich {
                data: BTreeMap::new(),
                main: false,
                metadata: String::new(),
                display_id: Some("9f2c".into()),
            },
        ],
        OutputKind::Table => vec![
            Output::Table {
                table: Table {
                    columns: vec!["".into(), "a".into()],
                    index_columns: 1,
                    rows: vec![vec!["0".into(), "1.5".into()]],
                    elided: Some("1000 rows × 2 columns".into()),
                },
                text: "   a\n0  1.5".into(),
                main: true,
            },
            Output::Table {
                table: Table::default(),
                text: String::new(),
                main: false,
            },
        ],
        OutputKind::Image => vec![
            Output::Image {
                url: "/api/sessions/x/figures/4.png".into(),
                text: "<Figure>".into(),
                width: None,
                height: None,
            },
            Output::Image {
                url: "/api/sessions/x/figures/5.png".into(),
                text: String::new(),
                width: Some(640),
                height: Some(480),
            },
        ],
        OutputKind::File => vec![Output::File {
            path: "/home/user/a.csv".into(),
            name: "a.csv".into(),
            size: 12,
        }],
        OutputKind::Package => vec![
            Output::Package {
                project: "numpy".into(),
                version: "2.1.0".into(),
                size: 16_100_000,
                cached: true,
                refused: None,
            },
            Output::Package {
                project: "torch".into(),
                version: String::new(),
                size: 0,
                cached: false,
                refused: Some("Larger than the index's limit.".into()),
            },
        ],
        OutputKind::Error => vec![
            Output::Error {
                name: "ZeroDivisionError".into(),
                value: "division by zero".into(),
                traceback: vec!["\u{1b}[31mline\u{1b}[0m".into()],
            },
            Output::Error {
                name: "E".into(),
                value: String::new(),
                traceback: Vec::new(),
            },
        ],
    }
}

/// The page's Python's messages have no serde form: each sample is the
/// message as the frame sends it and what it is read as.
fn worker_messages_of(kind: WorkerKind) -> Vec<(Value, FromWorker)> {
    match kind {
        WorkerKind::Frame => vec![(
            json!({"t": "frame", "interruptible": true}),
            FromWorker::Frame {
                interruptible: true,
            },
        )],
        WorkerKind::Broken => vec![
            (
                json!({"t": "broken"}),
                FromWorker::Broken {
                    message: String::new(),
                },
            ),
            (
                json!({"t": "broken", "message": "no"}),
                FromWorker::Broken {
                    message: "no".into(),
                },
            ),
        ],
        WorkerKind::Loading => vec![(
            json!({"t": "loading", "stage": "numpy"}),
            FromWorker::Loading {
                stage: "numpy".into(),
            },
        )],
        WorkerKind::Ready => vec![(
            json!({"t": "ready", "ms": 900}),
            FromWorker::Ready { ms: 900 },
        )],
        WorkerKind::Failed => vec![(
            json!({"t": "failed", "message": "x"}),
            FromWorker::Failed {
                message: "x".into(),
            },
        )],
        WorkerKind::Started => vec![(
            json!({"t": "started", "run": 2}),
            FromWorker::Started { run: 2 },
        )],
        WorkerKind::Out => vec![(
            json!({"t": "out", "run": 1, "stream": "stdout", "text": "hi"}),
            FromWorker::Out {
                run: 1,
                stream: "stdout".into(),
                text: "hi".into(),
            },
        )],
        WorkerKind::Result => vec![(
            json!({"t": "result", "run": 1, "data": {"text/plain": "3"}}),
            FromWorker::Result {
                run: 1,
                data: [("text/plain".to_string(), "3".to_string())].into(),
            },
        )],
        WorkerKind::Error => vec![
            (
                json!({"t": "error", "run": 1, "name": "E", "value": "v"}),
                FromWorker::Error {
                    run: 1,
                    name: "E".into(),
                    value: "v".into(),
                    traceback: Vec::new(),
                },
            ),
            (
                json!({"t": "error", "run": 1, "name": "E", "value": "v", "traceback": ["a"]}),
                FromWorker::Error {
                    run: 1,
                    name: "E".into(),
                    value: "v".into(),
                    traceback: vec!["a".into()],
                },
            ),
        ],
        WorkerKind::Done => vec![(json!({"t": "done", "run": 2}), FromWorker::Done { run: 2 })],
    }
}

/// The names serde's derived `Deserialize` has for `T`'s variants, in
/// order, as it lists them refusing `unknown` (a name none has).
fn serde_names<T: DeserializeOwned + Debug>(unknown: Value) -> Vec<String> {
    let refusal = match serde_json::from_value::<T>(unknown) {
        Ok(read) => panic!("an unknown name was read as {read:?}"),
        Err(e) => e.to_string(),
    };
    let (_, expected) = refusal
        .split_once("expected")
        .unwrap_or_else(|| panic!("no list of variants in: {refusal}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

fn names<K: Named>() -> Vec<String> {
    K::ALL.iter().map(|k| k.name().to_string()).collect()
}

#[test]
fn the_names_are_serdes() {
    let tag = |key: &str| json!({ key: "?" });
    assert_eq!(serde_names::<EventBody>(tag("kind")), names::<EventKind>());
    assert_eq!(serde_names::<Output>(tag("type")), names::<OutputKind>());
    assert_eq!(
        serde_names::<ServerMessage>(tag("type")),
        names::<ServerMessageKind>()
    );
    assert_eq!(serde_names::<CellKind>(json!("?")), names::<CellKind>());
    assert_eq!(serde_names::<TurnKind>(json!("?")), names::<TurnKind>());
    assert_eq!(serde_names::<KernelLoss>(json!("?")), names::<KernelLoss>());
    assert_eq!(serde_names::<KernelCap>(json!("?")), names::<KernelCap>());
    assert_eq!(serde_names::<TurnStatus>(json!("?")), names::<TurnStatus>());
    assert_eq!(serde_names::<CellStatus>(json!("?")), names::<CellStatus>());
    assert_eq!(serde_names::<ErrorCode>(json!("?")), names::<ErrorCode>());
    // And serde writes them so.
    fn written<K: Named + serde::Serialize>() {
        for &k in K::ALL {
            assert_eq!(serde_json::to_value(k).ok(), Some(json!(k.name())));
        }
    }
    written::<CellKind>();
    written::<TurnKind>();
    written::<KernelLoss>();
    written::<KernelCap>();
    written::<TurnStatus>();
    written::<CellStatus>();
    written::<ErrorCode>();
    assert_eq!(ErrorCode::named("busy"), Some(ErrorCode::Busy));
    assert_eq!(ErrorCode::named("Busy"), None);
}

#[test]
fn every_kind_has_samples_of_its_own() {
    /// `of(kind)` for every kind: some samples, each of that kind and
    /// tagged with its name at `key` (as serde writes it, or as `tagged`
    /// gives it).
    fn check<K: Named + Debug, T: Debug>(
        of: fn(K) -> Vec<T>,
        kind_of: fn(&T) -> K,
        tagged: fn(&T) -> Value,
        key: &str,
    ) {
        for &kind in K::ALL {
            let samples = of(kind);
            assert!(!samples.is_empty(), "no sample of {kind:?}");
            for sample in &samples {
                assert_eq!(kind_of(sample), kind, "{sample:?}");
                assert_eq!(tagged(sample)[key], json!(kind.name()), "{sample:?}");
            }
        }
    }
    check(frames_of, ServerMessage::kind, to_value, "type");
    check(events_of, EventBody::kind, to_value, "kind");
    check(outputs_of, Output::kind, to_value, "type");
    check(
        worker_messages_of,
        |(_, message)| message.kind(),
        |(sent, _)| sent.clone(),
        "t",
    );
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

#[test]
fn every_frame_the_server_sends_reads_back_the_same() {
    for message in every(frames_of) {
        let text = serde_json::to_string(&message).unwrap_or_default();
        assert_eq!(server_message_text(&text), Ok(message), "{text}");
    }
}

#[test]
fn every_message_of_the_page_python_is_read() {
    for (sent, message) in every(worker_messages_of) {
        let text = sent.to_string();
        assert_eq!(from_worker_text(&text), Ok(message), "{text}");
    }
}

#[test]
fn a_rich_outputs_metadata_is_not_kept() {
    let rich =
        json!({"type": "rich", "data": {"text/html": "<b>"}, "metadata": "{\"isolated\":true}"});
    assert_eq!(
        output(&rich),
        Ok(Output::Rich {
            data: [("text/html".to_string(), "<b>".to_string())].into(),
            main: false,
            metadata: String::new(),
            display_id: None,
        })
    );
}

#[test]
fn a_session_logs_events_are_read_by_hand_and_come_back_the_same() {
    let log = SessionPageData {
        session_id: "s".into(),
        title: "t".into(),
        events: SessionEvent::numbered(every(events_of), 1),
        models: Default::default(),
        backends: Vec::new(),
        backend: None,
        pyodide_url: None,
        upload_limit: 0,
        share_path: None,
        share_files: false,
        sessions: Vec::new(),
        account: Default::default(),
    };
    let text = serde_json::to_string(&log).unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<SessionPageData>(&text).ok(),
        Some(log)
    );
    let broken = text.replacen("\"seq\":1", "\"seq\":-1", 1);
    assert!(serde_json::from_str::<SessionPageData>(&broken).is_err());
}

#[test]
fn defaults_and_nulls_are_read_as_serde_reads_them() {
    let cases = [
        (
            json!({"type": "browser_run", "run": 1, "code": "x", "timeout_ms": 5}),
            Some(ServerMessage::BrowserRun {
                run: 1,
                code: "x".into(),
                fresh: false,
                timeout_ms: 5,
                prepare_ms: 0,
            }),
        ),
        (
            json!({"type": "event", "seq": 1, "ts_ms": 0, "extra": [1],
                   "event": {"kind": "cell_output", "cell_id": 3,
                             "output": {"type": "table", "table": {"columns": [], "rows": []}}}}),
            Some(ServerMessage::Event(SessionEvent {
                seq: 1,
                ts_ms: 0,
                event: EventBody::CellOutput {
                    cell_id: CellId(3),
                    output: Output::Table {
                        table: Table::default(),
                        text: String::new(),
                        main: false,
                    },
                },
            })),
        ),
        (
            json!({"type": "event", "seq": 2, "ts_ms": 0,
                   "event": {"kind": "cell_started", "cell_id": 3, "cell_kind": "code",
                             "language": null, "attempt": null, "source": null}}),
            Some(ServerMessage::Event(SessionEvent {
                seq: 2,
                ts_ms: 0,
                event: EventBody::CellStarted {
                    cell_id: CellId(3),
                    cell_kind: CellKind::Code,
                    language: None,
                    attempt: None,
                    source: None,
                },
            })),
        ),
        (
            json!({"type": "event", "seq": 3, "ts_ms": 0,
                   "event": {"kind": "cell_output", "cell_id": 3,
                             "output": {"type": "package", "project": "six"}}}),
            Some(ServerMessage::Event(SessionEvent {
                seq: 3,
                ts_ms: 0,
                event: EventBody::CellOutput {
                    cell_id: CellId(3),
                    output: Output::Package {
                        project: "six".into(),
                        version: String::new(),
                        size: 0,
                        cached: false,
                        refused: None,
                    },
                },
            })),
        ),
    ];
    for (frame, want) in cases {
        let serde = serde_json::from_value::<ServerMessage>(frame.clone()).ok();
        assert_eq!(serde, want, "serde: {frame}");
        assert_eq!(server_message(&frame).ok(), want, "{frame}");
    }
}

#[test]
fn a_package_output_round_trips() {
    for package in [
        Output::Package {
            project: "numpy".into(),
            version: "2.1.0".into(),
            size: 16_100_000,
            cached: true,
            refused: None,
        },
        Output::Package {
            project: "torch".into(),
            version: "2.5.1".into(),
            size: 0,
            cached: false,
            refused: Some("Larger than the index's limit.".into()),
        },
    ] {
        let value = serde_json::to_value(&package).unwrap_or_default();
        assert_eq!(value["type"], "package", "{value}");
        assert_eq!(output(&value), Ok(package.clone()), "{value}");
        assert_eq!(
            serde_json::from_value::<Output>(value.clone()).ok(),
            Some(package),
            "{value}"
        );
    }
    // A refusal is written only when there is one.
    let installed = json!({"type": "package", "project": "six", "version": "1.16.0",
                           "size": 11053, "cached": false});
    let read = output(&installed);
    assert_eq!(
        read.as_ref()
            .ok()
            .map(serde_json::to_value)
            .and_then(Result::ok),
        Some(installed)
    );
    // The project is what a package output is of.
    assert!(output(&json!({"type": "package", "version": "1"})).is_err());
    assert!(output(&json!({"type": "package", "project": "six", "cached": "yes"})).is_err());
}

#[test]
fn hostile_frames_are_refused_not_panicked_on() {
    let event = |body: Value| json!({"type": "event", "seq": 1, "ts_ms": 0, "event": body});
    let frames = [
        json!(null),
        json!([]),
        json!("welcome"),
        json!(5),
        json!({}),
        json!({"type": 5}),
        json!({"type": "hello"}),
        json!({"type": "welcome", "protocol": 2, "session_id": "s"}),
        json!({"type": "welcome", "protocol": 4_294_967_296u64, "session_id": "s", "last_seq": 0}),
        json!({"type": "welcome", "protocol": 2, "session_id": 3, "last_seq": 0}),
        json!({"type": "welcome", "protocol": 2, "session_id": "s", "last_seq": -1}),
        json!({"type": "welcome", "protocol": 2, "session_id": "s", "last_seq": 1.5}),
        json!({"type": "welcome", "protocol": 2, "session_id": "s", "last_seq": "1"}),
        json!({"type": "error", "code": "oops", "message": "x"}),
        json!({"type": "error", "code": null, "message": "x"}),
        json!({"type": "browser_run", "run": 1, "code": "x", "fresh": "yes", "timeout_ms": 1}),
        json!({"type": "browser_stop"}),
        json!({"type": "event", "seq": 1, "ts_ms": 0}),
        json!({"type": "event", "seq": 1, "event": {"kind": "kernel_lost", "reason": "fork"}}),
        event(json!(null)),
        event(json!({"kind": "nothing"})),
        event(json!({"kind": "turn_started", "turn": 1, "turn_kind": "dance"})),
        event(json!({"kind": "user_message", "cell_id": 1})),
        event(json!({"kind": "user_message", "cell_id": 1, "text": null})),
        event(
            json!({"kind": "cell_started", "cell_id": 1, "cell_kind": "code", "attempt": 4_294_967_296u64}),
        ),
        event(json!({"kind": "cell_started", "cell_id": 1, "cell_kind": "code", "language": 3})),
        event(json!({"kind": "cell_delta", "cell_id": 1, "text": "", "highlight": {"html": ""}})),
        event(json!({"kind": "cell_delta", "cell_id": 1, "text": "", "highlight": "x"})),
        event(json!({"kind": "cell_finished", "cell_id": 1, "status": "fine", "elapsed_ms": 1})),
        event(
            json!({"kind": "cell_finished", "cell_id": 1, "status": "ok", "elapsed_ms": 1, "error": {"code": "x"}}),
        ),
        event(json!({"kind": "turn_finished", "turn": 1, "status": "streaming", "elapsed_ms": 1})),
        event(json!({"kind": "kernel_lost", "reason": "fire"})),
        event(json!({"kind": "cell_output", "cell_id": 1})),
        event(json!({"kind": "cell_cleared"})),
        event(json!({"kind": "cell_cleared", "cell_id": 1, "wait": "yes"})),
        event(json!({"kind": "display_updated", "display_id": "d"})),
        event(
            json!({"kind": "display_updated", "display_id": 3, "output": {"type": "stdout", "text": ""}}),
        ),
        event(
            json!({"kind": "display_updated", "display_id": "d", "output": {"type": "rich", "data": {}, "display_id": 5}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "shell", "text": ""}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "rich", "data": {"a": 1}}}),
        ),
        event(json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "rich", "data": []}})),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "table", "table": {"columns": [], "rows": [[1]]}}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "table", "table": {"columns": [null], "rows": []}}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "table", "table": {"columns": [], "rows": [], "index_columns": -1}}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "file", "path": "/p", "name": "n"}}),
        ),
        event(
            json!({"kind": "cell_output", "cell_id": 1, "output": {"type": "error", "name": "E", "value": "v", "traceback": "t"}}),
        ),
    ];
    for frame in frames {
        assert!(server_message(&frame).is_err(), "{frame} was read");
        assert!(
            serde_json::from_value::<ServerMessage>(frame.clone()).is_err(),
            "serde reads {frame}: the reader should too"
        );
    }
    for text in ["", "{", "nul", "{\"type\":\"welcome\"", "\u{0}"] {
        assert!(server_message_text(text).is_err(), "{text:?}");
    }
}

#[test]
fn files_lists_are_read() {
    let item = FileItem {
        path: "/home/user/a.csv".into(),
        name: "a.csv".into(),
        kind: "file".into(),
        size: 3,
        modified_ms: Some(5),
    };
    let bare = FileItem {
        modified_ms: None,
        ..item.clone()
    };
    let list = json!({"files": [item, {"path": "/home/user/a.csv", "name": "a.csv", "kind": "file", "size": 3}]});
    assert_eq!(file_items(&list), Ok(vec![item, bare]));
    for bad in [
        json!({}),
        json!({"files": {}}),
        json!({"files": [{"path": "/p", "name": "n", "kind": "file"}]}),
        json!({"files": [{"path": "/p", "name": "n", "kind": "file", "size": -1}]}),
    ] {
        assert!(file_items(&bad).is_err(), "{bad}");
    }
}

#[test]
fn the_page_pythons_broken_messages_are_refused() {
    for message in [
        json!({"t": "started", "run": "2"}),
        json!({"t": "done"}),
        json!({"t": "done", "run": -2}),
        json!({"t": "frame"}),
        json!({"t": "frame", "interruptible": 1}),
        json!({"t": "result", "run": 1, "data": {"a": 1}}),
        json!({"t": "launch"}),
        json!({"type": "done", "run": 2}),
        json!("done"),
    ] {
        let text = message.to_string();
        assert!(from_worker_text(&text).is_err(), "{text} was read");
    }
    assert!(from_worker_text("{\"t\":").is_err());
}

/// JSON built from the protocol's own names (its fields' and every
/// kind's and variant's), so that random frames are often nearly right.
fn frame_like() -> impl Strategy<Value = Value> {
    fn of<K: Named>() -> impl Iterator<Item = &'static str> {
        K::ALL.iter().map(|k| k.name())
    }
    let fields = [
        "type",
        "kind",
        "t",
        "seq",
        "ts_ms",
        "event",
        "protocol",
        "session_id",
        "last_seq",
        "code",
        "message",
        "run",
        "fresh",
        "timeout_ms",
        "prepare_ms",
        "turn",
        "turn_kind",
        "alternative_to",
        "programs",
        "error",
        "cell_id",
        "text",
        "cell_kind",
        "language",
        "attempt",
        "source",
        "highlight",
        "html",
        "upto",
        "output",
        "wait",
        "display_id",
        "note",
        "data",
        "main",
        "table",
        "columns",
        "rows",
        "index_columns",
        "elided",
        "url",
        "width",
        "height",
        "path",
        "name",
        "size",
        "value",
        "traceback",
        "project",
        "version",
        "cached",
        "refused",
        "status",
        "elapsed_ms",
        "final_cell",
        "reason",
    ];
    let names = prop::sample::select(
        fields
            .into_iter()
            .chain(of::<ServerMessageKind>())
            .chain(of::<EventKind>())
            .chain(of::<OutputKind>())
            .chain(of::<CellKind>())
            .chain(of::<TurnKind>())
            .chain(of::<KernelLoss>())
            .chain(of::<TurnStatus>())
            .chain(of::<CellStatus>())
            .chain(of::<ErrorCode>())
            .collect::<Vec<_>>(),
    );
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..5).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        names.clone().prop_map(Value::from),
        ".*".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(names.clone(), inner, 0..8).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn has_array(v: &Value) -> bool {
    match v {
        Value::Array(_) => true,
        Value::Object(map) => map.values().any(has_array),
        _ => false,
    }
}

proptest! {
    /// Whatever serde reads, the reader reads the same; nothing panics.
    /// (serde also reads a struct from an array of its fields in order,
    /// which no server writes: frames with arrays are only checked not to
    /// panic.)
    #[test]
    fn the_reader_agrees_with_serde(frame in frame_like()) {
        let read = server_message(&frame);
        if !has_array(&frame)
            && let Ok(message) = serde_json::from_value::<ServerMessage>(frame.clone())
        {
            prop_assert_eq!(read, Ok(message));
        }
        let _ = from_worker(&frame);
        let _ = file_items(&frame);
    }

    #[test]
    fn any_text_is_read_or_refused(text in ".*") {
        let _ = server_message_text(&text);
        let _ = from_worker_text(&text);
    }
}

/// A refused run's event, as the server writes it and the page reads it.
#[test]
fn a_kernel_refusal_round_trips() {
    let event = EventBody::KernelRefused {
        cell_id: CellId(5),
        cap: KernelCap::Owner,
        held: 3,
    };
    let written = to_value(&event);
    assert_eq!(
        written,
        json!({"kind": "kernel_refused", "cell_id": 5, "cap": "owner", "held": 3})
    );
    assert_eq!(event_body(&written), Ok(event));
    for (bad, field) in [
        (
            json!({"kind": "kernel_refused", "cell_id": 5, "cap": "owner"}),
            "held",
        ),
        (
            json!({"kind": "kernel_refused", "cell_id": 5, "cap": "everyone", "held": 3}),
            "cap",
        ),
        (
            json!({"kind": "kernel_refused", "cell_id": 5, "cap": "owner", "held": 4_294_967_296_u64}),
            "held",
        ),
    ] {
        assert_eq!(event_body(&bad), Err(Unreadable(field)), "{bad}");
        assert!(serde_json::from_value::<EventBody>(bad).is_err());
    }
}
