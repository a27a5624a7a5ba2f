//! Sizes as people read them.
//!
//! In integers only: formatting an `f64` would bring the standard
//! library's float printing (some 15 KB) into the browser bundle.

/// `1.2 KB`, `3.4 MB`: sizes as people read them.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut scale = 1;
    let mut unit = 0;
    while bytes / scale >= 1000 && unit < UNITS.len() - 1 {
        scale *= 1000;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{} {}", one_decimal(bytes, scale), UNITS[unit])
    }
}

/// A limit as the server states it (`50 MiB`).
pub fn mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} MiB", one_decimal(bytes, MIB))
    }
}

/// `num / den` with one decimal (`1.2`), rounded to the nearest and a tie
/// to the even digit, as `format!("{:.1}")` rounds an exact value. For a
/// `den` up to `u64::MAX / 20` (sizes' and times' scales are far below);
/// u64 only, as 128-bit division and printing would add to the bundle.
pub fn one_decimal(num: u64, den: u64) -> String {
    let den = den.max(1);
    let (mut whole, rest) = (num / den, num % den);
    let scaled = rest.saturating_mul(10);
    let (mut tenth, rest) = (scaled / den, scaled % den);
    let twice = rest.saturating_mul(2);
    if twice > den || (twice == den && !tenth.is_multiple_of(2)) {
        tenth += 1;
    }
    if tenth == 10 {
        (whole, tenth) = (whole + 1, 0);
    }
    format!("{whole}.{tenth}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(41), "41 B");
        assert_eq!(human_size(1_250), "1.2 KB");
        assert_eq!(human_size(52_428_800), "52.4 MB");
        assert_eq!(mib(52_428_800), "50 MiB");
        assert_eq!(mib(1_572_864), "1.5 MiB");
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(999_999), "1000.0 KB");
        assert_eq!(human_size(u64::MAX), "18446744073.7 GB");
        assert_eq!(mib(0), "0 MiB");
    }

    #[test]
    fn one_decimal_rounds_as_float_formatting_does() {
        // Exact values, ties included, as `{:.1}` shows them.
        for (num, den) in [
            (1_250, 1000),
            (1_750, 1000),
            (1, 4),
            (3, 4),
            (49, 1000),
            (51, 1000),
            (0, 7),
            (2, 3),
            (12_375, 1000),
            (5, 0),
        ] {
            let float = format!("{:.1}", num as f64 / den.max(1) as f64);
            assert_eq!(one_decimal(num, den), float, "{num}/{den}");
        }
    }
}
