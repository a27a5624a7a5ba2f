//! Sizes as people read them.

/// `1.2 KB`, `3.4 MB`: sizes as people read them.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A limit as the server states it (`50 MiB`).
pub fn mib(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib.fract() == 0.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
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
    }
}
