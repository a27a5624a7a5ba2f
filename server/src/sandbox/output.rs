//! Output of a run: UTF-8 decoding across read boundaries and the byte cap.

/// Collects one stream's bytes as text, keeping at most `cap` bytes in total
/// across all collectors that share the budget.
#[derive(Debug, Default)]
pub struct OutputCollector {
    text: String,
    /// Bytes of an incomplete UTF-8 sequence carried to the next chunk.
    carry: Vec<u8>,
}

impl OutputCollector {
    /// Decodes `chunk` (continuing any sequence the last chunk cut), keeping at
    /// most `budget` more bytes. Returns the text kept (to stream) and how many
    /// bytes it used; invalid sequences become U+FFFD.
    pub fn push(&mut self, chunk: &[u8], budget: usize) -> (String, usize) {
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(chunk);
        // Hold back an incomplete sequence at the end for the next chunk.
        let keep = incomplete_tail(&bytes);
        self.carry = bytes.split_off(bytes.len() - keep);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        text.truncate(fit(&text, budget).len());
        self.text.push_str(&text);
        let used = text.len();
        (text, used)
    }

    /// Whatever is left once the stream ends.
    pub fn finish(&mut self, budget: usize) -> (String, usize) {
        if self.carry.is_empty() {
            return (String::new(), 0);
        }
        let rest = std::mem::take(&mut self.carry);
        let mut text = String::from_utf8_lossy(&rest).into_owned();
        if text.len() > budget {
            text.clear();
        }
        self.text.push_str(&text);
        let used = text.len();
        (text, used)
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
        let snow = "☃".as_bytes();
        assert_eq!(out.push(&snow[..1], 100).0, "");
        assert_eq!(out.push(&snow[1..], 100).0, "☃");
        assert_eq!(out.text(), "☃");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut out = OutputCollector::default();
        let (text, _) = out.push(b"a\xffb", 100);
        assert_eq!(text, "a\u{fffd}b");
    }

    #[test]
    fn the_budget_is_respected_at_char_boundaries() {
        let mut out = OutputCollector::default();
        let (text, used) = out.push("aé☃".as_bytes(), 4);
        assert_eq!(text, "aé");
        assert_eq!(used, 3);
    }

    proptest! {
        #[test]
        fn any_split_of_valid_text_decodes_to_the_same_text(s in "\\PC{0,200}", cut in 0usize..800) {
            let bytes = s.as_bytes();
            let cut = cut.min(bytes.len());
            let mut out = OutputCollector::default();
            out.push(&bytes[..cut], usize::MAX);
            out.push(&bytes[cut..], usize::MAX);
            out.finish(usize::MAX);
            prop_assert_eq!(out.text(), s.as_str());
        }
    }
}
