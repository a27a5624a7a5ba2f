//! The two time formats: a stream line's ISO-8601 time and the control
//! plane's RFC 3339.

/// The ISO-8601 time a stream line carries, from milliseconds since the
/// epoch, as Python's `isoformat()` writes it (microseconds, `+00:00`).
pub fn timestamp(ms: u64) -> String {
    const PYTHON: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00"
    );
    utc(ms).format(PYTHON).unwrap_or_default()
}

/// RFC 3339 (seconds), for the control plane's times.
pub fn rfc3339(ms: u64) -> String {
    utc(ms - ms % 1000)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A Unix time in milliseconds as a UTC date, at most the last second of
/// year 9999 (the formats have four-digit years).
fn utc(ms: u64) -> time::OffsetDateTime {
    const LAST_MS: u64 = 253_402_300_799_000;
    let nanos = i128::from(ms.min(LAST_MS)) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}
