//! Times for `scr halt --before TIME` and `--after TIME` (SCR's `scr_halt`
//! parses them with `parsetime.py`, before that Perl's Date::Manip).
//!
//! Accepted forms, case-insensitive, words separated by spaces or commas,
//! in the local time zone unless the text gives an offset:
//!
//! | form | meaning |
//! | --- | --- |
//! | `@1795426800`, `1795426800` (9 digits or more) | seconds since the epoch |
//! | `now`, `now+90s`, `+15m`, `+2h`, `+1d`, `+1h30m`, `+1h 30m`, `+1.5h`, `+1:30`, `+0:00:45`, `+90` (seconds) | relative to now |
//! | `2026-11-22 14:00`, `2026-11-22T14:00:30`, `2026-11-22T14:00Z`, `…+01:00` | ISO date and time |
//! | `2026-11-22`, `11/22`, `11/22/2026`, `Nov 22`, `22 November 2026`, `Nov 22nd` | a date (time 00:00) |
//! | `14:00`, `14:00:30`, `2pm`, `2:30 pm`, `1400`, `14`, `noon`, `midnight` | a time of day |
//! | `today`, `tomorrow`, `mon` … `sunday` | a day (time 00:00 unless one is given) |
//!
//! A date and a time combine (`tomorrow 2pm`, `fri 14:00`, `Nov 22 9am`).
//! As in `parsetime.py`: a time of day alone means its next occurrence
//! (tomorrow when it has passed today), a weekday its next occurrence (next
//! week when the time has passed today), and a month and day without a year
//! the next such date. A bare number of 1–2 digits is an hour (the day when
//! a month name is given), 4 digits `HHMM` (a year when a month is given and
//! it is 1970 or later). Explicit dates may lie in the past: the job then
//! halts at its next check.

use jiff::civil::{Date, DateTime, Time};
use jiff::fmt::temporal::Pieces;
use jiff::tz::Offset;
/// The zone TIMEs are read in (`TimeZone::system()` for this machine's).
pub use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// The zone `east_s` seconds east of UTC (`fixed_zone(3600)` is UTC+01:00;
/// UTC when out of range): tests fix the zone with it, `scr halt` uses
/// [`TimeZone::system`].
pub fn fixed_zone(east_s: i64) -> TimeZone {
    i32::try_from(east_s)
        .ok()
        .and_then(|s| Offset::from_seconds(s).ok())
        .map_or(TimeZone::UTC, TimeZone::fixed)
}

/// Why a TIME could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeError {
    /// Nothing was given.
    #[error("empty time: give e.g. \"14:00\", \"2026-11-22 14:00\", \"+2h\" or \"@1795426800\"")]
    Empty,
    /// One word of the text is not a time, date or day.
    #[error("time {text:?}: cannot read {word:?}: {why}")]
    Word {
        /// The whole text.
        text: String,
        /// The word.
        word: String,
        /// What is wrong with it.
        why: String,
    },
    /// The words do not combine into one time.
    #[error("time {text:?}: {why}")]
    Invalid {
        /// The whole text.
        text: String,
        /// What is wrong.
        why: String,
    },
}

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Index of the name `word` abbreviates (at least 3 letters), if any.
fn name_index(word: &str, names: &[&str]) -> Option<usize> {
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    names
        .iter()
        .position(|n| n.starts_with(word) || (word == "sept" && *n == "september"))
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parse `s` as a number in `lo..=hi`.
fn ranged(s: &str, lo: i64, hi: i64) -> Option<i64> {
    if !digits(s) || s.len() > 10 {
        return None;
    }
    let v: i64 = s.parse().ok()?;
    (lo..=hi).contains(&v).then_some(v)
}

/// `H:MM` or `H:MM:SS`.
fn clock(s: &str) -> Option<(i64, i64, i64)> {
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        [h, m] if m.len() == 2 => Some((ranged(h, 0, 23)?, ranged(m, 0, 59)?, 0)),
        [h, m, sec] if m.len() == 2 && sec.len() == 2 => {
            Some((ranged(h, 0, 23)?, ranged(m, 0, 59)?, ranged(sec, 0, 60)?))
        }
        _ => None,
    }
}

/// A duration after `+`: `90`, `90s`, `15m`, `2h`, `1d`, `1h30m` (any
/// form of [`crate::units::parse_duration`]), or `H:MM[:SS]`.
fn duration_s(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |p: &str| ranged(p, 0, 1_000_000_000);
        return match parts.as_slice() {
            [h, m] => Some(num(h)? * 3600 + num(m)? * 60),
            [h, m, sec] => Some(num(h)? * 3600 + num(m)? * 60 + num(sec)?),
            _ => None,
        };
    }
    let d = crate::units::parse_duration(s).ok()?;
    i64::try_from(d.as_secs()).ok()
}

/// What the words of a TIME said.
#[derive(Default)]
struct Parts {
    date: Option<(i64, i64, i64)>,
    month: Option<i64>,
    day: Option<i64>,
    year: Option<i64>,
    weekday: Option<i64>,
    day_offset: Option<i64>,
    time: Option<(i64, i64, i64)>,
    pm: Option<bool>,
    zone_s: Option<i64>,
    small: Vec<i64>,
    four: Vec<(String, i64)>,
}

/// Seconds since the epoch that `text` names, `now_s` being now in `zone`.
pub fn parse_time(text: &str, now_s: i64, zone: &TimeZone) -> Result<i64, TimeError> {
    let lower = text.trim().to_ascii_lowercase();
    if lower.is_empty() {
        return Err(TimeError::Empty);
    }
    let invalid = |why: &str| TimeError::Invalid {
        text: text.to_string(),
        why: why.to_string(),
    };
    if let Some(d) = lower.strip_prefix('@') {
        return d
            .trim()
            .parse::<i64>()
            .map_err(|_| invalid("after '@' give seconds since the epoch"));
    }
    if digits(&lower) && lower.len() >= 9 {
        return lower
            .parse::<i64>()
            .map_err(|_| invalid("too many digits for seconds since the epoch"));
    }
    if lower == "now" {
        return Ok(now_s);
    }
    let rel = lower
        .strip_prefix("now")
        .map(str::trim_start)
        .unwrap_or(&lower);
    if let Some(d) = rel.strip_prefix('+') {
        let secs = duration_s(d).ok_or_else(|| {
            invalid("after '+' give a duration such as 90s, 15m, 2h, 1d, 1h30m or 1:30")
        })?;
        return now_s
            .checked_add(secs)
            .ok_or_else(|| invalid("duration too long"));
    }

    let mut p = Parts::default();
    for word in lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
    {
        read_word(text, word, &mut p)?;
    }
    resolve(text, p, now_s, zone)
}

/// Record what one word says in `p`.
fn read_word(text: &str, word: &str, p: &mut Parts) -> Result<(), TimeError> {
    let bad = |why: &str| TimeError::Word {
        text: text.to_string(),
        word: word.to_string(),
        why: why.to_string(),
    };
    let set_time = |p: &mut Parts, t: (i64, i64, i64)| {
        if p.time.replace(t).is_some() {
            return Err(bad("a second time of day"));
        }
        Ok(())
    };
    match word {
        "today" => p.day_offset = Some(0),
        "tomorrow" => p.day_offset = Some(1),
        "noon" => set_time(p, (12, 0, 0))?,
        "midnight" => set_time(p, (0, 0, 0))?,
        "am" | "a.m." => p.pm = Some(false),
        "pm" | "p.m." => p.pm = Some(true),
        "utc" | "gmt" | "z" => p.zone_s = Some(0),
        _ => {
            if let Some(i) = name_index(word, &WEEKDAYS) {
                p.weekday = Some(i as i64);
            } else if let Some(i) = name_index(word, &MONTHS) {
                p.month = Some(i as i64 + 1);
            } else if word.len() >= 10 && word.as_bytes()[4] == b'-' && digits(&word[..4]) {
                // ISO date, maybe with a time and a zone: jiff's reader.
                let pieces = Pieces::parse(word).map_err(|e| {
                    bad(&format!(
                        "not an ISO date YYYY-MM-DD[THH:MM[:SS]][zone]: {e}"
                    ))
                })?;
                if pieces.time_zone_annotation().is_some() {
                    return Err(bad("give the zone as an offset (Z, +01:00), not a name"));
                }
                let date = pieces.date();
                if !(1970..=9999).contains(&date.year()) {
                    return Err(bad("year out of range"));
                }
                p.date = Some((date.year().into(), date.month().into(), date.day().into()));
                if let Some(t) = pieces.time() {
                    set_time(p, (t.hour().into(), t.minute().into(), t.second().into()))?;
                }
                if let Some(o) = pieces.to_numeric_offset() {
                    p.zone_s = Some(o.seconds().into());
                }
            } else if word.contains('/') {
                let parts: Vec<&str> = word.split('/').collect();
                let (m, d, y) = match parts.as_slice() {
                    [m, d] => (m, d, None),
                    [m, d, y] => (m, d, Some(*y)),
                    _ => return Err(bad("a date with '/' is MM/DD or MM/DD/YYYY")),
                };
                let m = ranged(m, 1, 12).ok_or_else(|| bad("month out of range"))?;
                let d = ranged(d, 1, 31).ok_or_else(|| bad("day out of range"))?;
                match y {
                    Some(y) => {
                        let y = match y.len() {
                            2 => ranged(y, 0, 99).map(|v| 2000 + v),
                            4 => ranged(y, 1970, 9999),
                            _ => None,
                        }
                        .ok_or_else(|| bad("year must be YY or YYYY"))?;
                        p.date = Some((y, m, d));
                    }
                    None => {
                        p.month = Some(m);
                        p.day = Some(d);
                    }
                }
            } else if let Some(t) = word
                .strip_suffix("am")
                .map(|t| (t, false))
                .or_else(|| word.strip_suffix("pm").map(|t| (t, true)))
            {
                let (t, pm) = t;
                p.pm = Some(pm);
                let c = if t.contains(':') {
                    clock(t)
                } else {
                    match t.len() {
                        1 | 2 => ranged(t, 0, 23).map(|h| (h, 0, 0)),
                        3 | 4 => ranged(t, 0, 2359)
                            .filter(|v| v % 100 < 60)
                            .map(|v| (v / 100, v % 100, 0)),
                        _ => None,
                    }
                }
                .ok_or_else(|| bad("expected e.g. 2pm, 2:30pm or 230pm"))?;
                set_time(p, c)?;
            } else if word.contains(':') {
                let c = clock(word).ok_or_else(|| bad("a time is HH:MM or HH:MM:SS"))?;
                set_time(p, c)?;
            } else if let Some(n) = ["st", "nd", "rd", "th"]
                .iter()
                .find_map(|s| word.strip_suffix(s))
                .filter(|n| digits(n))
            {
                let d = ranged(n, 1, 31).ok_or_else(|| bad("day out of range"))?;
                if p.day.replace(d).is_some() {
                    return Err(bad("a second day of the month"));
                }
            } else if digits(word) && word.len() <= 2 {
                p.small.push(ranged(word, 0, 99).unwrap_or(99));
            } else if digits(word) && word.len() == 4 {
                p.four
                    .push((word.to_string(), ranged(word, 0, 9999).unwrap_or(0)));
            } else {
                return Err(bad(
                    "not a date, time, weekday, month, 'today', 'tomorrow', 'noon' or 'midnight'",
                ));
            }
        }
    }
    Ok(())
}

/// Combine the parts into seconds since the epoch.
fn resolve(text: &str, mut p: Parts, now_s: i64, zone: &TimeZone) -> Result<i64, TimeError> {
    let invalid = |why: String| TimeError::Invalid {
        text: text.to_string(),
        why,
    };
    // Bare numbers: with a month name, a 1-2 digit number is the day and a
    // 4-digit one from 1970 on the year; otherwise hours and HHMM.
    let mut small = std::mem::take(&mut p.small).into_iter();
    if p.month.is_some() && p.day.is_none() {
        p.day = small.next();
    }
    for (word, v) in std::mem::take(&mut p.four) {
        if p.month.is_some() && p.year.is_none() && v >= 1970 {
            p.year = Some(v);
        } else if v <= 2359 && v % 100 < 60 && p.time.is_none() {
            p.time = Some((v / 100, v % 100, 0));
        } else {
            return Err(invalid(format!(
                "{word:?} is neither HHMM nor a year after a month"
            )));
        }
    }
    if let Some(h) = small.next() {
        if p.time.replace((h, 0, 0)).is_some() {
            return Err(invalid(format!("{h} is a second time of day")));
        }
    }
    if let Some(extra) = small.next() {
        return Err(invalid(format!("do not know what {extra} is")));
    }
    let kinds = [
        p.date.is_some(),
        p.month.is_some(),
        p.weekday.is_some(),
        p.day_offset.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err(invalid(
            "give one of: a date, a month and day, a weekday, today/tomorrow".into(),
        ));
    }
    if p.day.is_some() && p.month.is_none() {
        return Err(invalid("a day of the month needs a month".into()));
    }
    if p.year.is_some() && p.day.is_none() {
        return Err(invalid("a year needs a month and a day".into()));
    }
    let (mut h, mi, s) = p.time.unwrap_or((0, 0, 0));
    if let Some(pm) = p.pm {
        if p.time.is_none() || !(1..=12).contains(&h) {
            return Err(invalid("am/pm goes with an hour from 1 to 12".into()));
        }
        h = match (pm, h) {
            (false, 12) => 0,
            (true, 12) => 12,
            (true, h) => h + 12,
            (false, h) => h,
        };
    }
    let now_ts = Timestamp::from_second(now_s)
        .map_err(|_| invalid(format!("now ({now_s} s) is outside the calendar")))?;
    let today = zone.to_datetime(now_ts).date();
    // jiff has no second 60: a leap second is the second after :59.
    let leap = i64::from(s == 60);
    let time = Time::new(h as i8, mi as i8, s.min(59) as i8, 0)
        .map_err(|_| invalid(format!("{h:02}:{mi:02}:{s:02} is not a time of day")))?;
    let ymd = |y: i64, m: i64, d: i64| {
        i16::try_from(y)
            .ok()
            .and_then(|y| Date::new(y, m as i8, d as i8).ok())
            .ok_or_else(|| invalid(format!("{y:04}-{m:02} has no day {d}")))
    };
    let later = |d: Date, n: i64| {
        d.checked_add(n.days())
            .map_err(|_| invalid("the date is outside the calendar".into()))
    };
    let date = if let Some((y, m, d)) = p.date {
        ymd(y, m, d)?
    } else if let Some(m) = p.month {
        ymd(
            p.year.unwrap_or(i64::from(today.year())),
            m,
            p.day.unwrap_or(1),
        )?
    } else if let Some(wd) = p.weekday {
        let from = i64::from(today.weekday().to_monday_zero_offset());
        later(today, (wd - from).rem_euclid(7))?
    } else {
        later(today, p.day_offset.unwrap_or(0))?
    };
    let tz = p.zone_s.map_or_else(|| zone.clone(), fixed_zone);
    let to_unix = |d: Date| {
        tz.to_ambiguous_timestamp(DateTime::from_parts(d, time))
            .compatible()
            .map(|t| t.as_second() + leap)
            .map_err(|_| invalid("the time is outside the calendar".into()))
    };
    let mut t = to_unix(date)?;
    let only_time = kinds.iter().all(|k| !k);
    if t <= now_s {
        if only_time {
            t = to_unix(later(date, 1)?)?;
        } else if p.weekday.is_some() {
            t = to_unix(later(date, 7)?)?;
        } else if p.month.is_some() && p.year.is_none() {
            let next = i64::from(date.year()) + 1;
            t = to_unix(ymd(next, date.month().into(), date.day().into())?)?;
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UTC+01:00, now = Sunday 2026-11-22 10:30:00 local.
    fn zone() -> TimeZone {
        fixed_zone(3600)
    }

    fn now() -> i64 {
        at(2026, 11, 22, 10, 30, 0)
    }

    fn at(y: i16, m: i8, d: i8, h: i8, mi: i8, s: i8) -> i64 {
        let dt = DateTime::new(y, m, d, h, mi, s, 0).unwrap();
        zone().to_timestamp(dt).unwrap().as_second()
    }

    fn parse(t: &str) -> Result<i64, TimeError> {
        parse_time(t, now(), &zone())
    }

    #[test]
    fn the_zone_is_fixed_and_leap_days_follow_the_calendar() {
        let c = zone().to_datetime(Timestamp::from_second(now()).unwrap());
        assert_eq!(
            (c.year(), c.month(), c.day(), c.hour(), c.minute()),
            (2026, 11, 22, 10, 30)
        );
        assert_eq!(c.weekday(), jiff::civil::Weekday::Sunday);
        assert_eq!(parse("feb 29 2028"), Ok(at(2028, 2, 29, 0, 0, 0)));
        assert!(parse("feb 29 2100").is_err());
        assert!(parse("2027-02-29").is_err());
        // An offset out of range is UTC, not a panic.
        assert_eq!(fixed_zone(100 * 3600), TimeZone::UTC);
    }

    #[test]
    fn epoch_seconds_and_relative_times() {
        assert_eq!(parse("@1795426800"), Ok(1_795_426_800));
        assert_eq!(parse("1795426800"), Ok(1_795_426_800));
        assert_eq!(parse("now"), Ok(now()));
        assert_eq!(parse("+90s"), Ok(now() + 90));
        assert_eq!(parse("now+15m"), Ok(now() + 900));
        assert_eq!(parse("now + 2h"), Ok(now() + 7200));
        assert_eq!(parse("+1h30m"), Ok(now() + 5400));
        assert_eq!(parse("+1d"), Ok(now() + 86_400));
        assert_eq!(parse("+1:30"), Ok(now() + 5400));
        assert_eq!(parse("+0:00:45"), Ok(now() + 45));
        assert_eq!(parse("+90"), Ok(now() + 90));
        assert!(parse("+soon").is_err());
        assert!(parse("+5x").is_err());
    }

    #[test]
    fn iso_dates_and_times() {
        assert_eq!(parse("2026-11-22 14:00"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(
            parse("2026-11-22T14:00:30"),
            Ok(at(2026, 11, 22, 14, 0, 30))
        );
        assert_eq!(parse("2026-12-01"), Ok(at(2026, 12, 1, 0, 0, 0)));
        // An explicit offset overrides the local zone.
        assert_eq!(parse("2026-11-22T14:00Z"), Ok(at(2026, 11, 22, 15, 0, 0)));
        assert_eq!(
            parse("2026-11-22T14:00+02:00"),
            Ok(at(2026, 11, 22, 13, 0, 0))
        );
        assert_eq!(
            parse("2026-11-22 14:00 utc"),
            Ok(at(2026, 11, 22, 15, 0, 0))
        );
        // Explicit dates may be in the past (the job halts at once).
        assert_eq!(parse("2026-11-21 09:00"), Ok(at(2026, 11, 21, 9, 0, 0)));
        assert!(parse("2026-02-30").is_err());
        assert!(parse("2026-13-01").is_err());
    }

    #[test]
    fn times_of_day_roll_to_their_next_occurrence() {
        assert_eq!(parse("14:00"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(parse("14:00:30"), Ok(at(2026, 11, 22, 14, 0, 30)));
        assert_eq!(parse("2pm"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(parse("2:30 pm"), Ok(at(2026, 11, 22, 14, 30, 0)));
        assert_eq!(parse("1400"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(parse("14"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(parse("noon"), Ok(at(2026, 11, 22, 12, 0, 0)));
        assert_eq!(parse("12am"), Ok(at(2026, 11, 23, 0, 0, 0)));
        // Passed today: tomorrow.
        assert_eq!(parse("9:00"), Ok(at(2026, 11, 23, 9, 0, 0)));
        assert_eq!(parse("10:30"), Ok(at(2026, 11, 23, 10, 30, 0)));
        assert_eq!(parse("midnight"), Ok(at(2026, 11, 23, 0, 0, 0)));
        assert!(parse("25:00").is_err());
        assert!(parse("13pm").is_err());
        assert!(parse("14:00 15:00").is_err());
    }

    #[test]
    fn days_weekdays_and_months() {
        assert_eq!(parse("tomorrow 2pm"), Ok(at(2026, 11, 23, 14, 0, 0)));
        assert_eq!(parse("tomorrow"), Ok(at(2026, 11, 23, 0, 0, 0)));
        assert_eq!(parse("today 11:00"), Ok(at(2026, 11, 22, 11, 0, 0)));
        // Today is Sunday: "mon" is tomorrow, "sun 9am" has passed → next week.
        assert_eq!(parse("mon 3pm"), Ok(at(2026, 11, 23, 15, 0, 0)));
        assert_eq!(parse("Friday, 14:00"), Ok(at(2026, 11, 27, 14, 0, 0)));
        assert_eq!(parse("sun 9am"), Ok(at(2026, 11, 29, 9, 0, 0)));
        assert_eq!(parse("sunday 11am"), Ok(at(2026, 11, 22, 11, 0, 0)));
        assert_eq!(parse("Nov 22 14:00"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(
            parse("December 11th 03:00am"),
            Ok(at(2026, 12, 11, 3, 0, 0))
        );
        assert_eq!(parse("22 nov 2027 9am"), Ok(at(2027, 11, 22, 9, 0, 0)));
        assert_eq!(parse("3pm 12/11"), Ok(at(2026, 12, 11, 15, 0, 0)));
        assert_eq!(parse("11/30/2026 8:15"), Ok(at(2026, 11, 30, 8, 15, 0)));
        // A month and day that passed this year: next year.
        assert_eq!(parse("jan 5"), Ok(at(2027, 1, 5, 0, 0, 0)));
        assert_eq!(parse("11/01"), Ok(at(2027, 11, 1, 0, 0, 0)));
        assert!(parse("feb 30").is_err());
        assert!(parse("mon tomorrow").is_err());
        assert!(parse("22nd").is_err());
    }

    #[test]
    fn errors_name_the_word() {
        assert_eq!(parse("  "), Err(TimeError::Empty));
        let e = parse("tomorrow teatime").unwrap_err();
        assert!(
            matches!(&e, TimeError::Word { word, .. } if word == "teatime"),
            "{e}"
        );
        assert!(e.to_string().contains("teatime"), "{e}");
        assert!(parse("@soon").is_err());
        assert!(parse("12345").is_err());
    }

    #[test]
    fn the_system_zone_agrees_with_its_offset() {
        let z = TimeZone::system();
        let utc = parse_time("2026-11-22 14:00 utc", now(), &z).unwrap();
        let local = parse_time("2026-11-22 14:00", now(), &z).unwrap();
        assert_eq!(utc - local, crate::civil::local_offset_s(local));
    }

    #[test]
    fn forms_newly_accepted_through_the_crates() {
        // Fractions and spaces in durations (humantime).
        assert_eq!(parse("+1.5h"), Ok(now() + 5400));
        assert_eq!(parse("now + 1h 30m"), Ok(now() + 5400));
        assert_eq!(parse("+2w"), Ok(now() + 14 * 86_400));
        // ISO: an hour alone after T, a compact offset, fractional seconds (jiff).
        assert_eq!(parse("2026-11-22T14"), Ok(at(2026, 11, 22, 14, 0, 0)));
        assert_eq!(
            parse("2026-11-22T14:00:00.5+0200"),
            Ok(at(2026, 11, 22, 13, 0, 0))
        );
        assert!(parse("2026-11-22T14:00[europe/paris]").is_err());
        // An hour past 23 given as a bare number is refused, not carried
        // into the next day.
        assert!(parse("25").is_err());
    }
}
