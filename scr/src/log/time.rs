//! Time in the logs: the clock the writers stamp with, the zoned stamp the
//! text log and the databases' `time` column show, and the civil-date
//! arithmetic both directions share (Howard Hinnant's algorithms).
//!
//! Bottom layer of `log/`: imports nothing else of the module.

use crate::clock::{Clock, SystemClock};

/// Seconds since the Unix epoch now, from the system clock
/// ([`crate::clock`]): the one clock read of the log writers.
pub fn now_s() -> f64 {
    SystemClock.unix_s()
}

/// Days since 1970-01-01 to a civil date `(year, month, day)`.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days from 1970-01-01 to a civil date.
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
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
    let local_ms = ms.saturating_add(offset_s * 1000);
    let days = local_ms.div_euclid(86_400_000);
    let in_day = local_ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, frac) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let sign = if offset_s < 0 { '-' } else { '+' };
    let off = offset_s.abs() / 60;
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:03}{sign}{:02}:{:02}",
        off / 60,
        off % 60
    )
}

/// This machine's UTC offset at `unix_s`, in seconds east (0 when unknown).
pub fn local_offset_s(unix_s: i64) -> i64 {
    let t = unix_s as libc::time_t;
    // SAFETY: `tm` is a plain C struct for which all-zero is a valid value;
    // localtime_r writes only into it and reads `t`; both outlive the call.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    proptest::proptest! {
        #[test]
        fn civil_dates_round_trip(days in -1_000_000i64..1_000_000) {
            let (y, m, d) = civil_from_days(days);
            proptest::prop_assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
