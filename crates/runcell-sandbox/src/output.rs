//! Output of a run: UTF-8 decoding across read boundaries, and the one
//! budget that everything a run shows (printed text, rich results, its
//! error) draws from, whichever backend ran it.

use std::io::Write;

use super::{ExecError, RunEvent, RunOutcome, limit_error};

/// The most rich results (displays, the last expression's value) one run
/// keeps, whatever their size.
pub const MAX_RESULTS: usize = 64;
/// The most of a result's Jupyter metadata kept; more is dropped, the
/// result kept.
pub const MAX_METADATA_BYTES: usize = 4 * 1024;
/// The most bytes of one traceback (its lines, a newline after each).
pub const MAX_TRACEBACK_BYTES: usize = 64 * 1024;
/// The most bytes of an error's name.
pub const MAX_ERROR_NAME_BYTES: usize = 256;
/// The most bytes of an error's value (its message).
pub const MAX_ERROR_VALUE_BYTES: usize = 16 * 1024;
/// Room an error always gets, even when the output used the whole budget,
/// so that a run that failed still says why: the only bytes an outcome
/// holds beyond `Limits::output_bytes` (with the short notes of what a cut
/// left out, and the server's own limit errors).
pub const ERROR_FLOOR_BYTES: usize = 4 * 1024;

/// The first thing a run's budget refused. Once something is refused the
/// run is stopped, and nothing it shows after is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Printed text beyond the budget.
    Text,
    /// A rich result of this many bytes (its serialized MIME bundle) that
    /// did not fit.
    Result { bytes: usize },
    /// A rich result beyond [`MAX_RESULTS`].
    TooManyResults,
    /// A piece of output (a stream line) of more than this many bytes,
    /// refused before it was read whole.
    Oversized { at_least: usize },
}

impl Dropped {
    /// What the `OutputLimit` error says, with `limit` the run's budget.
    pub fn message(self, limit: usize) -> String {
        match self {
            Self::Text => format!("the output passed {limit} bytes; the rest was dropped"),
            Self::Result { bytes } => format!(
                "the output would have passed {limit} bytes: a display of {bytes} bytes was \
                 dropped, and the run was stopped"
            ),
            Self::TooManyResults => format!(
                "the run displayed more than {MAX_RESULTS} results; the rest was dropped, \
                 and the run was stopped"
            ),
            Self::Oversized { at_least } => format!(
                "the output would have passed {limit} bytes: a piece of more than {at_least} \
                 bytes was dropped, and the run was stopped"
            ),
        }
    }
}

/// What one run may show: stdout, stderr, each rich result (its serialized
/// MIME bundle, so an image counts by its base64 length) and its error all
/// draw from `Limits::output_bytes`; at most [`MAX_RESULTS`] results; a
/// traceback of at most [`MAX_TRACEBACK_BYTES`]. Every backend keeps a run's
/// outcome and events through one of these.
#[derive(Debug)]
pub struct OutputBudget {
    limit: usize,
    used: usize,
    results: usize,
    dropped: Option<Dropped>,
    /// An error was cut to fit.
    cut: bool,
    /// A `clear_output(wait=True)` waits for the next output.
    clear_pending: bool,
    /// The display id of each of the outcome's results, in order.
    display_ids: Vec<Option<String>>,
}

impl OutputBudget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: 0,
            results: 0,
            dropped: None,
            cut: false,
            clear_pending: false,
            display_ids: Vec::new(),
        }
    }

    /// Bytes kept so far.
    pub fn used(&self) -> usize {
        self.used
    }

    pub fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.used)
    }

    /// Something was refused: the run must be stopped.
    pub fn overflowed(&self) -> bool {
        self.dropped.is_some()
    }

    pub fn dropped(&self) -> Option<Dropped> {
        self.dropped
    }

    /// Something was refused or cut: the outcome's `truncated`.
    pub fn truncated(&self) -> bool {
        self.dropped.is_some() || self.cut
    }

    /// The `OutputLimit` error that says what was refused, if anything was.
    pub fn limit_error(&self) -> Option<ExecError> {
        self.dropped
            .map(|d| ExecError::new(limit_error::OUTPUT, d.message(self.limit)))
    }

    fn refuse(&mut self, dropped: Dropped) {
        self.dropped.get_or_insert(dropped);
    }

    /// Refuses a piece of output seen to be too big before it was read.
    pub fn refuse_oversized(&mut self, at_least: usize) {
        self.refuse(Dropped::Oversized { at_least });
    }

    /// How many bytes of `text`'s start fit (a char boundary); the rest is
    /// refused.
    pub fn take_text(&mut self, text: &str) -> usize {
        if self.dropped.is_some() {
            return 0;
        }
        let kept = fit(text, self.remaining()).len();
        self.used += kept;
        if kept < text.len() {
            self.refuse(Dropped::Text);
        }
        kept
    }

    /// Whether a rich result fits; if so its bytes are taken.
    pub fn take_result(
        &mut self,
        data: &serde_json::Map<String, serde_json::Value>,
        metadata: &serde_json::Map<String, serde_json::Value>,
    ) -> bool {
        if self.dropped.is_some() {
            return false;
        }
        if self.results >= MAX_RESULTS {
            self.refuse(Dropped::TooManyResults);
            return false;
        }
        let noted = if metadata.is_empty() {
            0
        } else {
            serialized_len(metadata)
        };
        let bytes = serialized_len(data) + noted;
        if bytes > self.remaining() {
            self.refuse(Dropped::Result { bytes });
            return false;
        }
        self.used += bytes;
        self.results += 1;
        true
    }

    /// The error cut to what is left (at least [`ERROR_FLOOR_BYTES`]): its
    /// name, its value and its traceback (head and last lines) each within
    /// their own bound too.
    pub fn take_error(&mut self, error: ExecError) -> ExecError {
        let room = self.remaining().max(ERROR_FLOOR_BYTES);
        let (name, name_cut) = cut_text(error.name, MAX_ERROR_NAME_BYTES);
        let room = room.saturating_sub(name.len());
        let (value, value_cut) = cut_text(error.value, MAX_ERROR_VALUE_BYTES.min(room / 2));
        let room = room.saturating_sub(value.len());
        let (traceback, traceback_cut) =
            cut_traceback(error.traceback, MAX_TRACEBACK_BYTES.min(room));
        self.used += name.len() + value.len() + lines_len(&traceback);
        self.cut |= name_cut || value_cut || traceback_cut;
        ExecError {
            name,
            value,
            traceback,
        }
    }

    /// Whether an update's data fits; if so its bytes are taken (an update
    /// replaces a result, so it is not counted among [`MAX_RESULTS`]; its
    /// bytes are, since the budget bounds the work, not what stays shown).
    fn take_update(
        &mut self,
        data: &serde_json::Map<String, serde_json::Value>,
        metadata: &serde_json::Map<String, serde_json::Value>,
    ) -> bool {
        if self.dropped.is_some() {
            return false;
        }
        let bytes = serialized_len(data) + serialized_len(metadata);
        if bytes > self.remaining() {
            self.refuse(Dropped::Result { bytes });
            return false;
        }
        self.used += bytes;
        true
    }

    /// Clears what `outcome` shows, as a notebook clears a cell's output
    /// (its error stays: it is the run's, not an output).
    fn clear(&mut self, outcome: &mut RunOutcome) {
        outcome.stdout.clear();
        outcome.stderr.clear();
        outcome.results.clear();
        self.display_ids.clear();
        self.clear_pending = false;
    }

    /// A `clear_output(wait=True)` takes effect before new output.
    fn before_output(&mut self, outcome: &mut RunOutcome) {
        if self.clear_pending {
            self.clear(outcome);
        }
    }

    /// Takes a streamed event into `outcome` as far as the budget allows and
    /// gives back what to pass on (the kept part), if anything. An error is
    /// kept as the outcome's (the first one) and not passed on: backends
    /// send the final error when the run ends. A clear empties the
    /// outcome's output (at once, or with `wait` before the next output)
    /// and an update replaces the results of its display id, as a notebook
    /// shows them; both are passed on for the streams to do the same.
    pub fn record(&mut self, outcome: &mut RunOutcome, event: RunEvent) -> Option<RunEvent> {
        match event {
            RunEvent::Stdout { mut text, ts_ms } => {
                text.truncate(self.take_text(&text));
                if text.is_empty() {
                    return None;
                }
                self.before_output(outcome);
                outcome.stdout.push_str(&text);
                Some(RunEvent::Stdout { text, ts_ms })
            }
            RunEvent::Stderr { mut text, ts_ms } => {
                text.truncate(self.take_text(&text));
                if text.is_empty() {
                    return None;
                }
                self.before_output(outcome);
                outcome.stderr.push_str(&text);
                Some(RunEvent::Stderr { text, ts_ms })
            }
            RunEvent::Result {
                data,
                main,
                mut metadata,
                display_id,
                ts_ms,
            } => {
                // Metadata is a note on the result: past its own bound it
                // is dropped, the result kept.
                if serialized_len(&metadata) > MAX_METADATA_BYTES {
                    metadata.clear();
                }
                let display_id = display_id.filter(|id| id.len() <= crate::MAX_DISPLAY_ID_BYTES);
                if !self.take_result(&data, &metadata) {
                    return None;
                }
                self.before_output(outcome);
                outcome.results.push(data.clone());
                self.display_ids.push(display_id.clone());
                Some(RunEvent::Result {
                    data,
                    main,
                    metadata,
                    display_id,
                    ts_ms,
                })
            }
            RunEvent::Page { data, ts_ms } => {
                if !self.take_result(&data, &serde_json::Map::new()) {
                    return None;
                }
                self.before_output(outcome);
                outcome.results.push(data.clone());
                self.display_ids.push(None);
                Some(RunEvent::Page { data, ts_ms })
            }
            RunEvent::Clear { wait, ts_ms } => {
                if wait {
                    self.clear_pending = true;
                } else {
                    self.clear(outcome);
                }
                Some(RunEvent::Clear { wait, ts_ms })
            }
            RunEvent::Update {
                display_id,
                data,
                mut metadata,
                ts_ms,
            } => {
                if display_id.len() > crate::MAX_DISPLAY_ID_BYTES {
                    return None;
                }
                if serialized_len(&metadata) > MAX_METADATA_BYTES {
                    metadata.clear();
                }
                if !self.take_update(&data, &metadata) {
                    return None;
                }
                for (result, id) in outcome.results.iter_mut().zip(&self.display_ids) {
                    if id.as_deref() == Some(display_id.as_str()) {
                        result.clone_from(&data);
                    }
                }
                Some(RunEvent::Update {
                    display_id,
                    data,
                    metadata,
                    ts_ms,
                })
            }
            RunEvent::Error { error, .. } => {
                if outcome.error.is_none() {
                    outcome.error = Some(self.take_error(error));
                }
                None
            }
        }
    }
}

/// The length of `value` as JSON, without making the JSON.
pub fn serialized_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Plain data into a counter cannot fail; an unencodable value counts
    // as what was written before it.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Bytes of lines, a newline after each.
fn lines_len(lines: &[String]) -> usize {
    lines.iter().map(|l| l.len() + 1).sum()
}

/// `text` within `max` bytes: its start (at a char boundary) and a note of
/// how much was left out, which may pass `max` by a few bytes. Whether it
/// was cut.
pub fn cut_text(text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let head = fit(&text, max.saturating_sub(NOTE_BYTES));
    let left_out = text.len() - head.len();
    (format!("{head}… ({left_out} bytes left out)"), true)
}

/// Room kept for a note of what a cut left out.
const NOTE_BYTES: usize = 40;

/// A traceback within `max` bytes (a newline after each line): each line at
/// most a quarter of `max`, then its first lines and its last ones (where
/// the exception is) with a line between that says how many were left
/// out. Whether it was cut.
pub fn cut_traceback(lines: Vec<String>, max: usize) -> (Vec<String>, bool) {
    if lines_len(&lines) <= max {
        return (lines, false);
    }
    let line_max = max / 4;
    let lines: Vec<String> = lines
        .into_iter()
        .map(|line| cut_text(line, line_max).0)
        .collect();
    if lines_len(&lines) <= max {
        return (lines, true);
    }
    let room = max.saturating_sub(NOTE_BYTES);
    let mut head = 0;
    let mut head_bytes = 0;
    while let Some(line) = lines.get(head) {
        let cost = line.len() + 1;
        if head_bytes + cost > room / 2 {
            break;
        }
        head_bytes += cost;
        head += 1;
    }
    let mut tail = lines.len();
    let mut tail_bytes = 0;
    while tail > head {
        let cost = lines[tail - 1].len() + 1;
        if head_bytes + tail_bytes + cost > room {
            break;
        }
        tail_bytes += cost;
        tail -= 1;
    }
    let left_out = tail - head;
    let mut lines = lines;
    let rest = lines.split_off(tail);
    lines.truncate(head);
    lines.push(format!(
        "… ({left_out} line{} left out) …",
        if left_out == 1 { "" } else { "s" }
    ));
    lines.extend(rest);
    (lines, true)
}

/// Collects one stream's bytes as text, within a budget that other
/// collectors and results may share.
#[derive(Debug, Default)]
pub struct OutputCollector {
    text: String,
    /// Bytes of an incomplete UTF-8 sequence carried to the next chunk.
    carry: Vec<u8>,
}

impl OutputCollector {
    /// Decodes `chunk` (continuing any sequence the last chunk cut), keeping
    /// what fits in `budget`. Returns the text kept (to stream); invalid
    /// sequences become U+FFFD.
    pub fn push(&mut self, chunk: &[u8], budget: &mut OutputBudget) -> String {
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(chunk);
        // Hold back an incomplete sequence at the end for the next chunk.
        let keep = incomplete_tail(&bytes);
        self.carry = bytes.split_off(bytes.len() - keep);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        text.truncate(budget.take_text(&text));
        self.text.push_str(&text);
        text
    }

    /// Keeps whatever is left once the stream ends.
    pub fn finish(&mut self, budget: &mut OutputBudget) {
        if self.carry.is_empty() {
            return;
        }
        let rest = std::mem::take(&mut self.carry);
        let mut text = String::from_utf8_lossy(&rest).into_owned();
        text.truncate(budget.take_text(&text));
        self.text.push_str(&text);
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn into_text(self) -> String {
        self.text
    }
}

/// The longest start of `text` within `budget` bytes that ends on a char
/// boundary.
pub fn fit(text: &str, budget: usize) -> &str {
    let mut cut = text.len().min(budget);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// How many bytes at the end of `bytes` start a UTF-8 sequence that is not
/// complete yet (0 to 3).
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sequences_cut_between_reads_are_joined() {
        let mut out = OutputCollector::default();
        let mut budget = OutputBudget::new(100);
        let snow = "☃".as_bytes();
        assert_eq!(out.push(&snow[..1], &mut budget), "");
        assert_eq!(out.push(&snow[1..], &mut budget), "☃");
        assert_eq!(out.text(), "☃");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut out = OutputCollector::default();
        let text = out.push(b"a\xffb", &mut OutputBudget::new(100));
        assert_eq!(text, "a\u{fffd}b");
    }

    #[test]
    fn the_budget_is_respected_at_char_boundaries() {
        let mut out = OutputCollector::default();
        let mut budget = OutputBudget::new(4);
        let text = out.push("aé☃".as_bytes(), &mut budget);
        assert_eq!(text, "aé");
        assert_eq!(budget.used(), 3);
        assert_eq!(budget.dropped(), Some(Dropped::Text));
    }

    fn bundle(mime: &str, bytes: usize) -> serde_json::Map<String, serde_json::Value> {
        let mut data = serde_json::Map::new();
        data.insert(mime.into(), "x".repeat(bytes).into());
        data
    }

    /// What a budget of `limit` keeps of each piece in turn (bytes), and
    /// what it refused first.
    #[test]
    fn the_budget_keeps_what_fits_and_nothing_after_a_refusal() {
        enum Piece {
            Text(&'static str),
            Plain(usize),
        }
        use Piece::{Plain, Text};
        // `{"text/plain":"…"}` is 17 bytes around its text.
        /// (limit, pieces, bytes kept of each, what was refused)
        type Case = (usize, Vec<Piece>, Vec<usize>, Option<Dropped>);
        let cases: [Case; 6] = [
            (100, vec![Text("abc"), Plain(10)], vec![3, 27], None),
            (
                44,
                vec![Plain(10), Plain(10)],
                vec![27, 0],
                Some(Dropped::Result { bytes: 27 }),
            ),
            (
                40,
                vec![Plain(30), Text("abc")],
                vec![0, 0],
                Some(Dropped::Result { bytes: 47 }),
            ),
            (
                10,
                vec![Text("abcdefghijkl"), Plain(0)],
                vec![10, 0],
                Some(Dropped::Text),
            ),
            (2, vec![Text("é☃")], vec![2], Some(Dropped::Text)),
            (0, vec![Text("")], vec![0], None),
        ];
        for (limit, pieces, expect, dropped) in cases {
            let mut budget = OutputBudget::new(limit);
            let kept: Vec<usize> = pieces
                .iter()
                .map(|piece| {
                    let before = budget.used();
                    match piece {
                        Text(text) => budget.take_text(text),
                        Plain(bytes) => {
                            budget.take_result(
                                &bundle("text/plain", *bytes),
                                &serde_json::Map::new(),
                            );
                            budget.used() - before
                        }
                    }
                })
                .collect();
            assert_eq!(kept, expect, "limit {limit}");
            assert_eq!(budget.dropped(), dropped, "limit {limit}");
            assert!(budget.used() <= limit);
            assert_eq!(budget.overflowed(), dropped.is_some());
            assert_eq!(budget.limit_error().is_some(), dropped.is_some());
        }
    }

    #[test]
    fn results_are_counted_as_well_as_measured() {
        let mut budget = OutputBudget::new(usize::MAX);
        for _ in 0..MAX_RESULTS {
            assert!(budget.take_result(&bundle("text/plain", 1), &serde_json::Map::new()));
        }
        assert!(!budget.take_result(&bundle("text/plain", 1), &serde_json::Map::new()));
        assert_eq!(budget.dropped(), Some(Dropped::TooManyResults));
        let error = budget.limit_error().unwrap();
        assert_eq!(error.name, limit_error::OUTPUT);
        assert!(error.value.contains("more than 64 results"), "{error:?}");
    }

    #[test]
    fn an_image_counts_by_its_base64_length() {
        let mut budget = OutputBudget::new(1024 * 1024);
        let png = bundle("image/png", 2 * 1024 * 1024);
        assert!(!budget.take_result(&png, &serde_json::Map::new()));
        assert_eq!(budget.used(), 0);
        let error = budget.limit_error().unwrap();
        assert!(
            error
                .value
                .contains(&format!("a display of {} bytes", 2 * 1024 * 1024 + 16)),
            "{error:?}"
        );
        // JSON escapes count too: a control character is six bytes.
        assert_eq!(serialized_len(&bundle("text/plain", 0)), 17);
        assert_eq!(serialized_len(&"\u{1}"), 8);
    }

    #[test]
    fn recorded_events_fill_the_outcome_within_the_budget() {
        let mut budget = OutputBudget::new(30);
        let mut outcome = RunOutcome::default();
        let out = |text: &str| RunEvent::Stdout {
            text: text.into(),
            ts_ms: 0,
        };
        let result = |bytes| RunEvent::Result {
            data: bundle("text/plain", bytes),
            main: false,
            metadata: serde_json::Map::new(),
            display_id: None,
            ts_ms: 0,
        };
        assert_eq!(budget.record(&mut outcome, out("hi\n")), Some(out("hi\n")));
        assert!(budget.record(&mut outcome, result(5)).is_some());
        assert_eq!(budget.record(&mut outcome, result(50)), None);
        assert_eq!(budget.record(&mut outcome, out("more")), None);
        let error = RunEvent::Error {
            error: ExecError::new("ValueError", "bad"),
            ts_ms: 0,
        };
        assert_eq!(budget.record(&mut outcome, error), None);
        assert_eq!(outcome.stdout, "hi\n");
        assert_eq!(outcome.results.len(), 1);
        assert_eq!(outcome.error.as_ref().unwrap().value, "bad");
        assert!(budget.truncated());
    }

    #[test]
    fn a_results_metadata_is_kept_within_its_bound_and_counted() {
        let mut budget = OutputBudget::new(64 * 1024);
        let mut outcome = RunOutcome::default();
        let with = |metadata: serde_json::Map<String, serde_json::Value>| RunEvent::Result {
            data: bundle("text/plain", 1),
            main: true,
            metadata,
            display_id: None,
            ts_ms: 0,
        };
        let small = bundle("isolated", 4);
        let Some(RunEvent::Result { metadata, .. }) =
            budget.record(&mut outcome, with(small.clone()))
        else {
            panic!("the result was dropped")
        };
        assert_eq!(metadata, small);
        let used = budget.used;
        assert!(used >= serialized_len(&small), "metadata counts: {used}");
        // A hostile kernel's huge metadata: dropped, the result kept.
        let huge = bundle("width", MAX_METADATA_BYTES + 1);
        let Some(RunEvent::Result { metadata, data, .. }) = budget.record(&mut outcome, with(huge))
        else {
            panic!("the result was dropped")
        };
        assert!(metadata.is_empty());
        assert_eq!(data, bundle("text/plain", 1));
        assert!(budget.used - used < MAX_METADATA_BYTES);
    }

    #[test]
    fn a_clear_empties_the_outcome_at_once_or_before_the_next_output() {
        let mut budget = OutputBudget::new(1024);
        let mut outcome = RunOutcome::default();
        let out = |text: &str| RunEvent::Stdout {
            text: text.into(),
            ts_ms: 0,
        };
        let clear = |wait| RunEvent::Clear { wait, ts_ms: 0 };
        budget.record(&mut outcome, out("a\n"));
        budget.record(&mut outcome, result_with_id("x", None));
        assert_eq!(
            budget.record(&mut outcome, clear(false)),
            Some(clear(false))
        );
        assert_eq!((outcome.stdout.as_str(), outcome.results.len()), ("", 0));
        budget.record(&mut outcome, out("b\n"));
        // With wait, the output stays until the next one comes.
        assert_eq!(budget.record(&mut outcome, clear(true)), Some(clear(true)));
        assert_eq!(outcome.stdout, "b\n");
        budget.record(&mut outcome, out("c\n"));
        assert_eq!(outcome.stdout, "c\n");
        budget.record(&mut outcome, clear(true));
        budget.record(&mut outcome, result_with_id("y", None));
        assert_eq!(outcome.stdout, "");
        assert_eq!(outcome.results, vec![bundle_of("y")]);
        // Cleared bytes stay counted: the budget bounds the work.
        assert_eq!(
            budget.used(),
            "a\nb\nc\n".len() + serialized_len(&bundle_of("x")) + serialized_len(&bundle_of("y"))
        );
        // The run's error is not an output: a clear leaves it.
        budget.record(
            &mut outcome,
            RunEvent::Error {
                error: ExecError::new("E", "v"),
                ts_ms: 0,
            },
        );
        budget.record(&mut outcome, clear(false));
        assert_eq!(outcome.error.map(|e| e.value).as_deref(), Some("v"));
    }

    fn bundle_of(text: &str) -> serde_json::Map<String, serde_json::Value> {
        let mut data = serde_json::Map::new();
        data.insert("text/plain".into(), text.into());
        data
    }

    fn result_with_id(text: &str, id: Option<&str>) -> RunEvent {
        RunEvent::Result {
            data: bundle_of(text),
            main: false,
            metadata: serde_json::Map::new(),
            display_id: id.map(str::to_string),
            ts_ms: 0,
        }
    }

    #[test]
    fn an_update_replaces_every_result_of_its_display_id() {
        let mut budget = OutputBudget::new(1024);
        let mut outcome = RunOutcome::default();
        for (text, id) in [
            ("v1", Some("d")),
            ("other", Some("e")),
            ("v1 again", Some("d")),
            ("plain", None),
        ] {
            budget.record(&mut outcome, result_with_id(text, id));
        }
        let update = |id: &str, text: &str| RunEvent::Update {
            display_id: id.into(),
            data: bundle_of(text),
            metadata: serde_json::Map::new(),
            ts_ms: 0,
        };
        assert_eq!(
            budget.record(&mut outcome, update("d", "v2")),
            Some(update("d", "v2"))
        );
        assert_eq!(
            outcome.results,
            vec![
                bundle_of("v2"),
                bundle_of("other"),
                bundle_of("v2"),
                bundle_of("plain")
            ]
        );
        // An id no result has changes nothing here, and is passed on (an
        // earlier run may show it).
        assert_eq!(
            budget.record(&mut outcome, update("z", "new")),
            Some(update("z", "new"))
        );
        assert_eq!(outcome.results.len(), 4);
        // An id past its bound is dropped, on a result and on an update.
        let long = "i".repeat(crate::MAX_DISPLAY_ID_BYTES + 1);
        let Some(RunEvent::Result { display_id, .. }) =
            budget.record(&mut outcome, result_with_id("long", Some(&long)))
        else {
            panic!("the result was dropped")
        };
        assert_eq!(display_id, None);
        assert_eq!(budget.record(&mut outcome, update(&long, "x")), None);
        // An update past the budget is refused and stops the run.
        let mut small = OutputBudget::new(10);
        let mut nothing = RunOutcome::default();
        assert_eq!(
            small.record(&mut nothing, update("d", "far too long")),
            None
        );
        assert!(small.overflowed());
    }

    #[test]
    fn errors_are_cut_but_always_say_what_failed() {
        let mut budget = OutputBudget::new(1024 * 1024);
        assert_eq!(budget.take_text(&"o".repeat(1024 * 1024)), 1024 * 1024);
        let huge = "é".repeat(25 * 1024 * 1024);
        let error = budget.take_error(ExecError {
            name: "ValueError".into(),
            value: huge.clone(),
            traceback: vec![
                "Traceback (most recent call last):".into(),
                "  File \"<stdin>\", line 1".into(),
                format!("ValueError: {huge}"),
            ],
        });
        assert_eq!(error.name, "ValueError");
        assert!(error.value.starts_with("éé"), "{}", &error.value[..20]);
        assert!(error.value.ends_with("bytes left out)"));
        let size = error.name.len() + error.value.len() + lines_len(&error.traceback);
        assert!(size <= ERROR_FLOOR_BYTES + 2 * NOTE_BYTES, "{size}");
        assert_eq!(error.traceback[0], "Traceback (most recent call last):");
        assert!(error.traceback.last().unwrap().starts_with("ValueError: é"));
        assert!(budget.truncated());
        assert!(!budget.overflowed());
        // A small error is kept whole and counted.
        let mut budget = OutputBudget::new(100);
        let small = ExecError {
            name: "E".into(),
            value: "v".into(),
            traceback: vec!["t".into()],
        };
        assert_eq!(budget.take_error(small.clone()), small);
        assert_eq!(budget.used(), 4);
        assert!(!budget.truncated());
    }

    /// `cut_traceback(lines, max)`: the lines kept, by their first bytes.
    #[test]
    fn tracebacks_keep_their_head_and_their_last_lines() {
        let numbered: Vec<String> = (0..100).map(|i| format!("line {i:03}")).collect();
        let cases: [(Vec<String>, usize, Vec<&str>); 4] = [
            (vec!["a".into(), "b".into()], 4, vec!["a", "b"]),
            (
                numbered.clone(),
                200,
                vec![
                    "line 000",
                    "line 001",
                    "line 002",
                    "line 003",
                    "line 004",
                    "line 005",
                    "line 006",
                    "line 007",
                    "… (83 lines left out) …",
                    "line 091",
                    "line 092",
                    "line 093",
                    "line 094",
                    "line 095",
                    "line 096",
                    "line 097",
                    "line 098",
                    "line 099",
                ],
            ),
            (numbered, 0, vec!["… (100 lines left out) …"]),
            (
                vec!["head".into(), "☃".repeat(400)],
                400,
                vec!["head", "☃☃☃"],
            ),
        ];
        for (lines, max, expect) in cases {
            let whole = lines_len(&lines) <= max;
            let (kept, cut) = cut_traceback(lines, max);
            assert_eq!(cut, !whole);
            assert_eq!(kept.len(), expect.len(), "{kept:?}");
            for (line, start) in kept.iter().zip(&expect) {
                assert!(
                    line.starts_with(start),
                    "{line:?} does not start with {start:?}"
                );
            }
            assert!(lines_len(&kept) <= max.max(NOTE_BYTES), "{kept:?}");
        }
    }

    proptest! {
        #[test]
        fn any_split_of_valid_text_decodes_to_the_same_text(s in "\\PC{0,200}", cut in 0usize..800) {
            let bytes = s.as_bytes();
            let cut = cut.min(bytes.len());
            let mut out = OutputCollector::default();
            let mut budget = OutputBudget::new(usize::MAX);
            out.push(&bytes[..cut], &mut budget);
            out.push(&bytes[cut..], &mut budget);
            out.finish(&mut budget);
            prop_assert_eq!(out.text(), s.as_str());
        }

        #[test]
        fn a_cut_traceback_fits_and_ends_with_its_last_line(
            lines in proptest::collection::vec("\\PC{0,300}", 0..60),
            max in 200usize..4000,
        ) {
            let whole = lines.clone();
            let (kept, cut) = cut_traceback(lines, max);
            prop_assert!(lines_len(&kept) <= max);
            if !cut {
                prop_assert_eq!(kept, whole);
            } else if let Some(last) = whole.last() {
                prop_assert_eq!(kept.last(), Some(&cut_text(last.clone(), max / 4).0));
            }
        }
    }
}
