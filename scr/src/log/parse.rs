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
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use super::event::{Entry, EntryKind, Record};

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
    /// The line is longer than [`MAX_LINE_BYTES`]; its text is not kept.
    #[error("line of {bytes} bytes is longer than the {MAX_LINE_BYTES}-byte limit for log lines (not read)")]
    TooLong {
        /// Its length in bytes (without the newline).
        bytes: u64,
    },
}

/// Longest log line read; SCR's own lines are a few hundred bytes, so a
/// longer one is damage (a block of zeros, a binary file), not an entry.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Most characters of a bad line's text an error quotes.
pub const EXCERPT_CHARS: usize = 80;

/// `text`, cut to [`EXCERPT_CHARS`] characters with a note of how long it
/// was, so an error never echoes a whole (possibly huge) line.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
    }
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
    /// The path is a device, a directory or a socket: only regular files and
    /// pipes are read as logs (`/dev/zero` would never end).
    #[error("{path}: is a {kind}, not a log file (give a regular file or a pipe)")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
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

/// Parse a timestamp into seconds since the epoch: Unix seconds, or an
/// ISO stamp ([`crate::civil::parse_iso_stamp`]).
pub fn parse_timestamp(text: &str) -> Result<f64, LineError> {
    let s = text.trim();
    if let Ok(v) = s.parse::<f64>() {
        if v.is_finite() {
            return Ok(v);
        }
    }
    crate::civil::parse_iso_stamp(s).ok_or_else(|| LineError::BadTimestamp(excerpt(text)))
}

/// Split `key=value, key="quoted, value", ...` into pairs.
fn fields(text: &str) -> Result<Vec<(String, String)>, LineError> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| LineError::BadField(excerpt(rest)))?;
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(',') || key.contains(char::is_whitespace) {
            return Err(LineError::BadField(excerpt(rest)));
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
            let end = end.ok_or_else(|| LineError::UnterminatedQuote(excerpt(rest)))?;
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
            None => return Err(LineError::BadField(excerpt(tail))),
        };
    }
    Ok(out)
}

fn number(key: &str, value: &str) -> Result<f64, LineError> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(LineError::BadNumber {
            key: excerpt(key),
            value: excerpt(value),
        }),
    }
}

fn count(key: &str, value: &str) -> Result<u64, LineError> {
    value.parse::<u64>().map_err(|_| LineError::BadNumber {
        key: excerpt(key),
        value: excerpt(value),
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
    parse_reader(path, text.as_bytes(), strict)
}

/// The next line of `r` into `buf` (without its newline), keeping at most
/// `max` bytes: `None` at the end, `Some(len)` with the line's whole length
/// otherwise (longer than `max` when it was cut). Memory stays bounded by
/// `max` whatever the input.
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Option<u64>> {
    buf.clear();
    let mut len = 0u64;
    let mut any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(any.then_some(len));
        }
        any = true;
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        let room = max.saturating_sub(buf.len()).min(take);
        buf.extend_from_slice(&avail[..room]);
        len += take as u64;
        r.consume(take + usize::from(done));
        if done {
            return Ok(Some(len));
        }
    }
}

/// Parse a log read from `r` line by line (streamed: memory holds one line
/// of at most [`MAX_LINE_BYTES`] and the records). A longer line is one
/// [`LineError::TooLong`] with its line number. `strict`: the first bad
/// line is an error; otherwise bad lines are skipped and counted, the
/// first [`KEPT_ERRORS`] kept for a warning.
pub fn parse_reader(path: &Path, r: impl BufRead, strict: bool) -> Result<Parsed, LogError> {
    let mut records = Vec::new();
    let parsed = each_record(path, r, strict, |rec| records.push(rec))?;
    Ok(Parsed { records, ..parsed })
}

/// [`parse_reader`] handing each record to `sink` in file order instead of
/// keeping it: memory holds one line, whatever the log's length. The
/// result counts and keeps the skipped lines; its `records` stay empty.
pub fn each_record(
    path: &Path,
    mut r: impl BufRead,
    strict: bool,
    mut sink: impl FnMut(Record),
) -> Result<Parsed, LogError> {
    let mut parsed = Parsed::default();
    let mut buf = Vec::with_capacity(1024);
    let mut number = 0usize;
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    while let Some(len) = next_line(&mut r, &mut buf, MAX_LINE_BYTES).map_err(io)? {
        number += 1;
        let result = if len > MAX_LINE_BYTES as u64 {
            Err(LineError::TooLong { bytes: len })
        } else {
            let line = String::from_utf8_lossy(&buf);
            if line.trim().is_empty() {
                continue;
            }
            parse_line(&line)
        };
        match result {
            Ok(rec) => sink(rec),
            Err(error) => {
                let e = LogError::Line {
                    path: path.to_path_buf(),
                    line: number,
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

/// What kind of file `ft` is, when it is not one a log is read from.
fn not_a_log(ft: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() || ft.is_fifo() {
        None
    } else if ft.is_dir() {
        Some("directory")
    } else if ft.is_char_device() {
        Some("character device")
    } else if ft.is_block_device() {
        Some("block device")
    } else if ft.is_socket() {
        Some("socket")
    } else {
        Some("special file")
    }
}

/// Read and parse a log file, streamed (invalid UTF-8 is replaced, not
/// fatal). Regular files and pipes only: a device is refused before it is
/// read.
pub fn read_log(path: &Path, strict: bool) -> Result<Parsed, LogError> {
    let mut records = Vec::new();
    let parsed = read_log_each(path, strict, |rec| records.push(rec))?;
    Ok(Parsed { records, ..parsed })
}

/// [`read_log`] handing each record to `sink` ([`each_record`]).
pub fn read_log_each(
    path: &Path,
    strict: bool,
    sink: impl FnMut(Record),
) -> Result<Parsed, LogError> {
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let md = std::fs::metadata(path).map_err(io)?;
    if let Some(kind) = not_a_log(md.file_type()) {
        return Err(LogError::NotAFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    let f = std::fs::File::open(path).map_err(io)?;
    each_record(
        path,
        std::io::BufReader::with_capacity(1 << 16, f),
        strict,
        sink,
    )
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

    #[test]
    fn a_line_over_the_limit_is_reported_once_with_its_number_and_skipped() {
        let long = "x".repeat(MAX_LINE_BYTES + 1000);
        let text =
            format!("2026-11-22T10:11:12: event=START\n{long}\n2026-11-22T10:11:13: event=HALT\n");
        let p = parse_text(Path::new("x/log"), &text, false).unwrap();
        assert_eq!((p.records.len(), p.skipped), (2, 1));
        let e = &p.first_errors[0];
        assert!(
            matches!(e, LogError::Line { line: 2, error: LineError::TooLong { bytes }, .. }
                if *bytes == long.len() as u64),
            "{e:?}"
        );
        let shown = e.to_string();
        assert!(
            shown.starts_with("x/log:2: line of") && shown.len() < 200,
            "{shown}"
        );
        let strict = parse_text(Path::new("x/log"), &text, true).unwrap_err();
        assert!(
            matches!(strict, LogError::Line { line: 2, .. }),
            "{strict:?}"
        );
    }

    #[test]
    fn a_block_of_zero_bytes_is_skipped_as_long_lines_not_kept() {
        // 300 KiB of NUL bytes without a newline (a crash left them), then a line.
        let mut bytes = vec![0u8; 300 * 1024];
        bytes.extend_from_slice(b"\n2026-11-22T10:11:13: event=HALT\n");
        let p = parse_reader(Path::new("z"), &bytes[..], false).unwrap();
        assert_eq!((p.records.len(), p.skipped), (1, 1));
        assert!(matches!(
            p.first_errors[0],
            LogError::Line {
                line: 1,
                error: LineError::TooLong { bytes: 307_200 },
                ..
            }
        ));
    }

    #[test]
    fn errors_quote_an_excerpt_never_the_whole_line() {
        let line = format!("2026-11-22T10:11:12: {}", "garbage ".repeat(2000));
        let e = parse_line(&line).unwrap_err();
        assert!(matches!(e, LineError::BadField(_)), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.len() < 200 && shown.contains("bytes in all"),
            "{shown}"
        );
        let stamp = format!("{}: event=START", "9".repeat(5000) + "x");
        let shown = parse_line(&stamp).unwrap_err().to_string();
        assert!(shown.len() < 300, "{shown}");
    }

    #[test]
    fn warnings_are_capped_and_every_bad_line_counted() {
        let text = "not a log line\n".repeat(1000);
        let p = parse_text(Path::new("x"), &text, false).unwrap();
        assert_eq!(p.skipped, 1000);
        assert_eq!(p.first_errors.len(), KEPT_ERRORS);
        assert!(matches!(p.first_errors[7], LogError::Line { line: 8, .. }));
    }

    #[test]
    fn a_device_is_refused_before_it_is_read() {
        let e = read_log(Path::new("/dev/zero"), false).unwrap_err();
        assert!(
            matches!(
                e,
                LogError::NotAFile {
                    kind: "character device",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("/dev/zero: is a character device"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_log(dir.path(), false),
            Err(LogError::NotAFile {
                kind: "directory",
                ..
            })
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
