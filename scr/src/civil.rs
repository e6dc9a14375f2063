//! Dates and times: the one place the library does calendar arithmetic,
//! over the `jiff` crate (docs/dependencies.md). The log's zoned stamps,
//! the index's UTC times and the ISO stamps of log lines are written and
//! read here; `halt::time` builds its TIME grammar on the same types.
//!
//! Bottom layer: imports nothing else of the crate.

use jiff::civil::DateTime;
use jiff::fmt::temporal::Pieces;
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

/// `ts` clamped into the range `jiff` represents (years -9999..=9999), so
/// any number of seconds formats to something instead of failing.
fn timestamp_ms(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// The civil date and time of `ts` in the zone `offset_s` seconds east.
fn local(ts: Timestamp, offset_s: i64) -> DateTime {
    let offset = i32::try_from(offset_s)
        .ok()
        .and_then(|s| Offset::from_seconds(s).ok())
        .unwrap_or(Offset::UTC);
    TimeZone::fixed(offset).to_datetime(ts)
}

/// `YYYY-MM-DDTHH:MM:SS.mmm±hh:mm` for `unix_s` seconds since the epoch,
/// shown in the zone `offset_s` seconds east of UTC (clamped to ±23:59).
pub fn format_timestamp(unix_s: f64, offset_s: i64) -> String {
    let offset_s = (offset_s / 60).clamp(-(23 * 60 + 59), 23 * 60 + 59) * 60;
    let ms = if unix_s.is_finite() {
        (unix_s * 1000.0).floor() as i64
    } else {
        0
    };
    let dt = local(timestamp_ms(ms), offset_s);
    let sign = if offset_s < 0 { '-' } else { '+' };
    let off = offset_s.abs() / 60;
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{sign}{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond(),
        off / 60,
        off % 60
    )
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC for `unix_s` seconds since the epoch (the
/// index's times).
pub fn utc_timestamp(unix_s: i64) -> String {
    let dt = local(timestamp_ms(unix_s.saturating_mul(1000)), 0);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// `YYYY-MM-DD HH:MM:SS` (whole seconds, rounded down) for `unix_s` in the
/// zone `offset_s` seconds east: a MySQL `DATETIME` as SCR 3.1 writes it
/// (the writing process's local time, no zone).
pub fn sql_datetime(unix_s: f64, offset_s: i64) -> String {
    let stamp = format_timestamp(unix_s, offset_s);
    // `YYYY-MM-DDTHH:MM:SS.mmm±hh:mm`: the date, a space, the time.
    format!("{} {}", &stamp[..10], &stamp[11..19])
}

/// Seconds since the epoch of a `YYYY-MM-DD HH:MM:SS` `DATETIME` read as
/// this machine's local time (`TZ`, else /etc/localtime), as SCR 3.1's
/// tables hold it; a time the zone skips or repeats is taken as the offset
/// before the change gives it. `None` for anything else.
pub fn local_sql_datetime_s(text: &str) -> Option<f64> {
    // The same fixed shape as a log stamp, without a zone.
    if text.len() != 19 || text.as_bytes()[10] != b' ' || parse_iso_stamp(text).is_none() {
        return None;
    }
    let dt: DateTime = text.replace(' ', "T").parse().ok()?;
    let ts = TimeZone::system().to_timestamp(dt).ok()?;
    Some(ts.as_second() as f64)
}

/// This machine's UTC offset at `unix_s`, in seconds east: the system's
/// time zone (`TZ`, else /etc/localtime; UTC when neither is readable).
pub fn local_offset_s(unix_s: i64) -> i64 {
    let ts = timestamp_ms(unix_s.saturating_mul(1000));
    i64::from(TimeZone::system().to_offset(ts).seconds())
}

/// Seconds since the epoch of an ISO stamp `YYYY-MM-DD(T| )HH:MM:SS`, with
/// optional fractional seconds (`.` or `,`, up to 9 digits) and zone (`Z`,
/// `±hh:mm`, `±hhmm`, `±hh`); a stamp without a zone is UTC. A leap second
/// (`:60`) is the second after `:59`. `None` for anything else.
pub fn parse_iso_stamp(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    // The fixed shape first: jiff reads more forms (`20261122T1400`, a
    // bare date, `[zone]` annotations) that a log line never has.
    let shaped = b.len() >= 19
        && b[..19].is_ascii()
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && b[16] == b':'
        && text[..19]
            .bytes()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16].contains(&i) || c.is_ascii_digit());
    if !shaped || text.contains('[') {
        return None;
    }
    let pieces = Pieces::parse(text).ok()?;
    let time = pieces.time()?;
    let offset = pieces.to_numeric_offset().unwrap_or(Offset::UTC);
    let dt = pieces.date().to_datetime(time);
    let ts = TimeZone::fixed(offset).to_timestamp(dt).ok()?;
    // jiff reads second 60 as 59.
    let leap = if &text[17..19] == "60" { 1.0 } else { 0.0 };
    Some(ts.as_second() as f64 + f64::from(time.subsec_nanosecond()) / 1e9 + leap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_datetimes_are_local_whole_seconds_and_read_back() {
        assert_eq!(
            sql_datetime(1_795_349_472.999, -(5 * 3600 + 1800)),
            "2026-11-22 06:41:12"
        );
        // Written in this machine's zone, read in it: the whole second.
        for t in [1_795_349_472.75, 1_700_000_000.0, 86_400.5] {
            let text = sql_datetime(t, local_offset_s(t as i64));
            assert_eq!(local_sql_datetime_s(&text), Some(t.floor()), "{text}");
        }
        for bad in [
            "2026-11-22T06:41:12",
            "2026-11-22 06:41",
            "2026-13-01 00:00:00",
            "",
        ] {
            assert_eq!(local_sql_datetime_s(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn timestamps_carry_the_zone() {
        assert_eq!(
            format_timestamp(1_795_349_472.345, 0),
            "2026-11-22T12:11:12.345+00:00"
        );
        assert_eq!(
            format_timestamp(1_795_349_472.345, -(5 * 3600 + 1800)),
            "2026-11-22T06:41:12.345-05:30"
        );
        assert_eq!(
            format_timestamp(-0.5, 3600),
            "1970-01-01T00:59:59.500+01:00"
        );
        // A day boundary crossed by the offset.
        assert_eq!(
            format_timestamp(1_795_305_600.0, 14 * 3600),
            "2026-11-22T14:00:00.000+14:00"
        );
        // Out of the calendar's range: clamped, not a panic.
        assert!(format_timestamp(1e300, 0).starts_with("9999-12-"));
    }

    #[test]
    fn utc_timestamps_of_the_index() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00");
        assert!(utc_timestamp(i64::MIN).starts_with("-9999"));
    }

    #[test]
    fn iso_stamps_with_and_without_zones() {
        assert_eq!(parse_iso_stamp("1970-01-01T00:00:00"), Some(0.0));
        assert_eq!(parse_iso_stamp("1970-01-01 01:00:00+01"), Some(0.0));
        assert_eq!(parse_iso_stamp("1970-01-01T00:00:00,5Z"), Some(0.5));
        assert_eq!(parse_iso_stamp("1970-01-01T00:00:60"), Some(60.0));
        assert_eq!(parse_iso_stamp("1969-12-31T23:30:00-0030"), Some(0.0));
        for bad in [
            "1970-01-01",
            "19700101T000000",
            "1970-01-01T00:00:00[UTC]",
            "1970-02-30T00:00:00",
            "1970-01-01T00:00:00+26:00",
            "1970-01-01T24:00:00",
            "1970-01-01T00:00:00 junk",
        ] {
            assert_eq!(parse_iso_stamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_system_offset_is_within_a_day() {
        assert!(local_offset_s(1_795_349_472).abs() < 86_400);
    }
}
