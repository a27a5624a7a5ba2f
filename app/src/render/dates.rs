//! Dates the same on the server and in the page (no time zone database in
//! the bundle): a day as `YYYY-MM-DD`, in UTC; once the page is live, in
//! the reader's own time zone (the browser's clock knows it).

/// The day of `ms` (milliseconds since the Unix epoch), `YYYY-MM-DD` in UTC.
pub fn iso_day(ms: u64) -> String {
    let days = i64::try_from(ms / 86_400_000).unwrap_or(0);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The day of `ms` in the reader's time zone, `YYYY-MM-DD` (in the page).
#[cfg(feature = "hydrate")]
pub fn local_day(ms: u64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64));
    format!(
        "{:04}-{:02}-{:02}",
        date.get_full_year(),
        date.get_month() + 1,
        date.get_date()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_read_in_utc() {
        assert_eq!(iso_day(0), "1970-01-01");
        assert_eq!(iso_day(951_782_400_000), "2000-02-29");
        assert_eq!(iso_day(1_795_941_944_000), "2026-11-29");
        assert_eq!(iso_day(1_795_996_799_999), "2026-11-29");
    }
}
