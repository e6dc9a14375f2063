//! Parser for SCR's text log, LLNL's and ours.
//!
//! A line is `<timestamp>: key=value, key=value, ...`. Values may be quoted
//! (`note="node 3 failed, rank 12"`), so a comma inside quotes does not end
//! the value. Every line is either an event (`event=TYPE`) or a transfer
//! (`xfer=TYPE`). Timestamps are `YYYY-MM-DDTHH:MM:SS` (LLNL SCR writes local
//! time without a zone; a space may replace the `T`), optionally with
//! fractional seconds and a zone (`Z`, `+hh:mm`, `-hhmm`), or plain Unix
//! seconds. Times without a zone are read as UTC: only differences matter,
//! and a log mixing zoned and unzoned stamps from one job is not expected.
//!
//! A line reads as a [`Record`]: its stamp and the [`Entry`] the writer
//! logged, the same type every sink writes.
//!
//! Bad lines never panic: [`parse_line`] returns a [`LineError`], and
//! [`read_log`] either stops at the first (strict) or skips and counts them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::event::{Entry, EntryKind, Record};
// `pub(crate)`: halt/time.rs reads dates through this path.
pub(crate) use super::time::days_from_civil;

/// What went wrong on one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// No `: ` separates the timestamp from the fields.
    #[error("no '<timestamp>: ' prefix")]
    NoTimestamp,
    /// The timestamp is not in a recognised form.
    #[error("unrecognised timestamp {0:?} (expected YYYY-MM-DDTHH:MM:SS[.frac][Z|+hh:mm] or Unix seconds)")]
    BadTimestamp(String),
    /// A field is not `key=value`.
    #[error("field {0:?} is not key=value")]
    BadField(String),
    /// A quoted value has no closing quote.
    #[error("unterminated quote in field {0:?}")]
    UnterminatedQuote(String),
    /// The line has neither `event=` nor `xfer=`.
    #[error("neither event= nor xfer= present")]
    NoKind,
    /// A numeric field does not parse or is negative/non-finite.
    #[error("field {key}={value:?} is not a valid non-negative number")]
    BadNumber {
        /// The field name.
        key: String,
        /// Its text.
        value: String,
    },
}

/// Errors reading a log file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The file could not be read.
    #[error("{path}: {source} (check the path and permissions)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line could not be parsed (strict mode).
    #[error("{path}:{line}: {error}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        error: LineError,
    },
}

/// A parsed log: its records in file order and the bad lines skipped.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Records, in file order.
    pub records: Vec<Record>,
    /// Number of lines skipped as malformed (lenient mode).
    pub skipped: usize,
    /// The first few skipped lines' errors, for a warning.
    pub first_errors: Vec<LogError>,
}

fn num(s: &str, lo: i64, hi: i64) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = s.parse().ok()?;
    (lo..=hi).contains(&v).then_some(v)
}

/// Parse a timestamp into seconds since the epoch.
pub fn parse_timestamp(text: &str) -> Result<f64, LineError> {
    let bad = || LineError::BadTimestamp(text.to_string());
    let s = text.trim();
    if let Ok(v) = s.parse::<f64>() {
        return if v.is_finite() { Ok(v) } else { Err(bad()) };
    }
    let b = s.as_bytes();
    if b.len() < 19
        || !b[..19].is_ascii()
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let y = num(&s[0..4], 0, 9999).ok_or_else(bad)?;
    let mo = num(&s[5..7], 1, 12).ok_or_else(bad)?;
    let d = num(&s[8..10], 1, 31).ok_or_else(bad)?;
    let h = num(&s[11..13], 0, 23).ok_or_else(bad)?;
    let mi = num(&s[14..16], 0, 59).ok_or_else(bad)?;
    let sec = num(&s[17..19], 0, 60).ok_or_else(bad)?;
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix(['.', ',']) {
        let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        if end == 0 {
            return Err(bad());
        }
        frac = format!("0.{}", &r[..end])
            .parse::<f64>()
            .map_err(|_| bad())?;
        rest = &r[end..];
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(bad()),
            };
            let digits: String = rest[1..].chars().filter(|&c| c != ':').collect();
            if !digits.is_ascii() || (digits.len() != 4 && digits.len() != 2) {
                return Err(bad());
            }
            let oh = num(&digits[0..2], 0, 23).ok_or_else(bad)?;
            let om = if digits.len() == 4 {
                num(&digits[2..4], 0, 59).ok_or_else(bad)?
            } else {
                0
            };
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    Ok(secs as f64 + frac)
}

/// Split `key=value, key="quoted, value", ...` into pairs.
fn fields(text: &str) -> Result<Vec<(String, String)>, LineError> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| LineError::BadField(rest.to_string()))?;
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(',') || key.contains(char::is_whitespace) {
            return Err(LineError::BadField(rest.to_string()));
        }
        let after = rest[eq + 1..].trim_start();
        let (value, tail) = if let Some(q) = after.strip_prefix('"') {
            let mut val = String::new();
            let mut chars = q.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            val.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    _ => val.push(c),
                }
            }
            let end = end.ok_or_else(|| LineError::UnterminatedQuote(rest.to_string()))?;
            (val, &q[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        out.push((key.to_string(), value));
        let tail = tail.trim_start();
        rest = match tail.strip_prefix(',') {
            Some(t) => t.trim_start(),
            None if tail.is_empty() => "",
            None => return Err(LineError::BadField(tail.to_string())),
        };
    }
    Ok(out)
}

fn number(key: &str, value: &str) -> Result<f64, LineError> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(LineError::BadNumber {
            key: key.to_string(),
            value: value.to_string(),
        }),
    }
}

fn count(key: &str, value: &str) -> Result<u64, LineError> {
    value.parse::<u64>().map_err(|_| LineError::BadNumber {
        key: key.to_string(),
        value: value.to_string(),
    })
}

/// Parse one log line.
pub fn parse_line(line: &str) -> Result<Record, LineError> {
    let line = line.trim_end_matches(['\r', '\n']);
    // The timestamp itself contains ':' (HH:MM:SS), so split at ": ".
    let sep = line.find(": ").ok_or(LineError::NoTimestamp)?;
    let time_s = parse_timestamp(&line[..sep])?;
    let (mut host, mut jobid, mut kind) = (None, None, None);
    let mut e = Entry::of_kind(EntryKind::OtherEvent(String::new()));
    let mut other = BTreeMap::new();
    for (key, value) in fields(&line[sep + 2..])? {
        match key.as_str() {
            "host" => host = Some(value),
            "jobid" => jobid = Some(value),
            "event" => kind = Some(EntryKind::event(&value.to_ascii_uppercase())),
            "xfer" => kind = Some(EntryKind::xfer(&value.to_ascii_uppercase())),
            "note" => e.note = Some(value),
            "from" => e.from = Some(value),
            "to" => e.to = Some(value),
            "dset" => e.dset = Some(count(&key, &value)?),
            "name" => e.name = Some(value),
            "secs" => e.secs = Some(number(&key, &value)?),
            "bytes" => e.bytes = Some(number(&key, &value)?),
            "files" => e.files = Some(count(&key, &value)?),
            "procs" => e.procs = Some(count(&key, &value)?),
            "nodes" => e.nodes = Some(count(&key, &value)?),
            _ => {
                other.insert(key, value);
            }
        }
    }
    e.kind = kind.ok_or(LineError::NoKind)?;
    Ok(Record {
        time_s,
        host,
        jobid,
        entry: e,
        other,
    })
}

/// How many skipped-line errors [`read_log`] keeps for a warning.
pub const KEPT_ERRORS: usize = 8;

/// Parse log text. `strict`: the first bad line is an error; otherwise bad
/// lines (and blank ones, silently) are skipped and counted.
pub fn parse_text(path: &Path, text: &str, strict: bool) -> Result<Parsed, LogError> {
    let mut parsed = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(r) => parsed.records.push(r),
            Err(error) => {
                let e = LogError::Line {
                    path: path.to_path_buf(),
                    line: i + 1,
                    error,
                };
                if strict {
                    return Err(e);
                }
                parsed.skipped += 1;
                if parsed.first_errors.len() < KEPT_ERRORS {
                    parsed.first_errors.push(e);
                }
            }
        }
    }
    Ok(parsed)
}

/// Read and parse a log file (invalid UTF-8 is replaced, not fatal).
pub fn read_log(path: &Path, strict: bool) -> Result<Parsed, LogError> {
    let bytes = std::fs::read(path).map_err(|source| LogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_text(path, &String::from_utf8_lossy(&bytes), strict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llnl_style_lines() {
        let r = parse_line(
            "2026-11-22T10:11:12: host=rzgenie12, jobid=4242, event=START, procs=64, nodes=4",
        )
        .unwrap();
        assert_eq!(
            r.entry.kind,
            EntryKind::Event(super::super::event::EventType::Start)
        );
        assert_eq!(r.entry.procs, Some(64));
        assert_eq!(r.entry.nodes, Some(4));
        assert_eq!(r.jobid.as_deref(), Some("4242"));
        assert_eq!(r.time_s, parse_timestamp("2026-11-22T10:11:12Z").unwrap());
        let r = parse_line("2026-11-22T10:11:40: host=rzgenie12, jobid=4242, xfer=FLUSH_SYNC, from=/dev/shm/scr, to=/p/lustre/out, dset=3, name=ckpt.3, secs=12.5, bytes=1.048576e9, files=64").unwrap();
        assert!(r.is_transfer("FLUSH_SYNC"));
        assert_eq!(r.entry.secs, Some(12.5));
        assert_eq!(r.entry.files, Some(64));
        assert_eq!(r.entry.bytes, Some(1_048_576_000.0));
        assert_eq!(r.entry.from.as_deref(), Some("/dev/shm/scr"));
        // A field this library does not know is kept as written.
        let r = parse_line("2026-11-22T10:11:12: event=rebuild_end, rank=3").unwrap();
        assert_eq!(r.entry.kind, EntryKind::OtherEvent("REBUILD_END".into()));
        assert!(r.is_event("REBUILD_END"));
        assert_eq!(r.other.get("rank").map(String::as_str), Some("3"));
    }

    #[test]
    fn our_style_lines_with_zone_and_quotes() {
        let a = parse_line(r#"2026-11-22T10:11:12.250+01:00: host=n1, jobid=7, event=RUN_END, note="failed, node n3 lost", secs=3600"#).unwrap();
        assert_eq!(a.entry.note.as_deref(), Some("failed, node n3 lost"));
        assert_eq!(a.entry.secs, Some(3600.0));
        let b = parse_line("2026-11-22T09:11:12.25Z: host=n1, jobid=7, event=RUN_START").unwrap();
        assert!(
            (a.time_s - b.time_s).abs() < 1e-9,
            "{} vs {}",
            a.time_s,
            b.time_s
        );
        let c = parse_line("2026-11-22 09:11:12-0130: jobid=7, event=halt").unwrap();
        assert!(c.is_event("HALT"));
        assert_eq!(c.time_s - b.time_s, 5400.0 - 0.25);
        assert_eq!(
            parse_line("1700000000.5: event=NODE_FAIL").unwrap().time_s,
            1_700_000_000.5
        );
    }

    #[test]
    fn malformed_lines_are_typed_errors() {
        type Check = fn(&LineError) -> bool;
        let cases: [(&str, Check); 8] = [
            ("no separator at all", |e| {
                matches!(e, LineError::NoTimestamp)
            }),
            ("2026-13-22T10:11:12: event=START", |e| {
                matches!(e, LineError::BadTimestamp(_))
            }),
            ("2026-11-22T10:11:12: host=a, garbage, event=START", |e| {
                matches!(e, LineError::BadField(_))
            }),
            (r#"2026-11-22T10:11:12: event=RUN_END, note="open"#, |e| {
                matches!(e, LineError::UnterminatedQuote(_))
            }),
            ("2026-11-22T10:11:12: host=a, jobid=1", |e| {
                matches!(e, LineError::NoKind)
            }),
            ("2026-11-22T10:11:12: xfer=WRITE, secs=-3", |e| {
                matches!(e, LineError::BadNumber { .. })
            }),
            ("2026-11-22T10:11:12: xfer=WRITE, secs=NaN", |e| {
                matches!(e, LineError::BadNumber { .. })
            }),
            ("2026-11-22T1é:11:12: event=START", |e| {
                matches!(e, LineError::BadTimestamp(_))
            }),
        ];
        for (line, ok) in cases {
            let e = parse_line(line).expect_err(line);
            assert!(ok(&e), "{line}: {e:?}");
        }
    }

    #[test]
    fn lenient_skips_and_counts_strict_names_file_and_line() {
        let text =
            "2026-11-22T10:11:12: event=START\n\nbroken line\n2026-11-22T10:11:13: event=HALT\n";
        let p = parse_text(Path::new("x/log"), text, false).unwrap();
        assert_eq!((p.records.len(), p.skipped), (2, 1));
        let e = parse_text(Path::new("x/log"), text, true).unwrap_err();
        assert!(matches!(&e, LogError::Line { line: 3, .. }), "{e:?}");
        assert!(e.to_string().starts_with("x/log:3:"), "{e}");
        assert!(matches!(
            read_log(Path::new("/nonexistent/log"), false),
            Err(LogError::Io { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_lines_never_panic(line in "\\PC{0,120}") {
            let _ = parse_line(&line);
        }

        #[test]
        fn near_valid_lines_never_panic(
            stamp in "[0-9T:+Z. -]{0,30}",
            fields in proptest::collection::vec(("[a-z]{1,6}", "[ -~]{0,12}"), 0..6),
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let line = format!("{stamp}: {}", body.join(", "));
            if let Ok(r) = parse_line(&line) {
                proptest::prop_assert!(r.time_s.is_finite());
            }
        }
    }
}
