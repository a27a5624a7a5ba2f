//! A PNG's size from the start of its base64, so that a figure's room is
//! kept before it loads (the page never jumps under the reader). The bundle
//! carries no base64 crate: the 32 characters needed are read here.

/// Width and height from the PNG's header (its first chunk, IHDR), read
/// from the first 32 base64 characters (line breaks skipped); `None` for
/// what is not a PNG, or for a size no figure has.
pub fn png_size(b64: &str) -> Option<(u32, u32)> {
    let mut bytes = Vec::with_capacity(24);
    let mut bits = 0u32;
    let mut count = 0;
    for c in b64.chars().filter(|c| !c.is_whitespace()).take(32) {
        let value = match c {
            'A'..='Z' => c as u32 - 'A' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 26,
            '0'..='9' => c as u32 - '0' as u32 + 52,
            '+' => 62,
            '/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | value;
        count += 1;
        if count == 4 {
            bytes.extend_from_slice(&bits.to_be_bytes()[1..]);
            bits = 0;
            count = 0;
        }
    }
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let word =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let (width, height) = (word(16), word(20));
    let sane = |n: u32| (1..=20_000).contains(&n);
    (sane(width) && sane(height)).then_some((width, height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pngs_size_is_read_from_its_header() {
        // A real 1×1 PNG.
        let one = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
        assert_eq!(png_size(one), Some((1, 1)));
        // A header saying 640×480 (the base64 of 24 bytes), wrapped.
        assert_eq!(
            png_size("iVBORw0KGgoAAAAN\nSUhEUgAAAoAAAAHg"),
            Some((640, 480))
        );
        assert_eq!(png_size("bm90IGEgcG5n"), None);
        assert_eq!(png_size(""), None);
        assert_eq!(png_size("iVBORw0KGgoAAAANSUhEUv////////////"), None);
        assert_eq!(png_size("iVBORw0KGgo!AAANSUhEUgAAAoAAAAHg"), None);
    }
}
