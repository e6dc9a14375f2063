//! Writer of SCR's text log (`<prefix>/.scr/log`) and of the same lines to
//! syslog (developer guide, "Logging").
//!
//! A line is what [`super::parse`] reads back:
//! `<timestamp>: host=…, jobid=…, event=TYPE[, note="…"][, dset=N][, name="…"][, secs=F][, procs=N][, nodes=N]`
//! or `<timestamp>: host=…, jobid=…, xfer=TYPE[, from="…"][, to="…"][, dset=N][, name="…"][, secs=F][, bytes=N][, files=N]`.
//!
//! Differences from LLNL SCR, on purpose:
//! - the timestamp is local time *with* its UTC offset and milliseconds
//!   (`2026-11-22T10:11:12.345+01:00`): SCR's zone-less local time is
//!   ambiguous across zones and daylight-saving changes;
//! - free-text values (`note`, `name`, `from`, `to`) are always quoted, and
//!   `host`/`jobid` are quoted when they hold a comma, quote, backslash or
//!   space, with `"` and `\` escaped, so a value can never split a field.
//!   Control characters (a newline would end the line) become spaces; that
//!   is the only way a value does not read back exactly.
//!
//! The file is opened with `O_APPEND` and each line goes out in one
//! `write()`, so lines of concurrent writers (several jobs sharing a
//! prefix, a launcher script) never interleave. Only the process that opens
//! a [`Logger`] writes: the library opens one on rank 0 only, so a
//! collective event appears once.
//!
//! Syslog goes through `libc::syslog` with the fixed format `"%s"`: the
//! message is data, never a format string. With `SCR_LOG_DB_ENABLE=1` each
//! entry also goes to the SQLite database of [`super::db`]; a database that
//! cannot be opened or written is a warning (once), never an error of the
//! call that logged.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::db::{DbLog, DbSettings};
use crate::config::{Config, ConfigError};

/// Name of the text log below `<prefix>/.scr/`.
pub const LOG_FILE: &str = "log";

/// Path of the text log of `prefix`.
pub fn log_path(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join(LOG_FILE)
}

/// Errors of the log writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogWriteError {
    /// The text log could not be opened for appending.
    #[error("cannot open log {path} for appending: {source} (check that the prefix's .scr directory exists and is writable, or set SCR_LOG_TXT_ENABLE=0)")]
    Open {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line could not be written.
    #[error("cannot append to log {path}: {source}")]
    Write {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A logging parameter has a bad value.
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// The database log.
    #[error(transparent)]
    Db(Box<super::db::DbError>),
}

impl From<ConfigError> for LogWriteError {
    fn from(e: ConfigError) -> Self {
        LogWriteError::Config(Box::new(e))
    }
}

/// Event types (`event=TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum EventType {
    Start,
    ComputeStart,
    ComputeEnd,
    CheckpointStart,
    CheckpointEnd,
    OutputStart,
    OutputEnd,
    RebuildStart,
    RebuildSuccess,
    RebuildFail,
    RestartSuccess,
    RestartFail,
    FetchStart,
    FetchSuccess,
    FetchFail,
    FlushStart,
    FlushSuccess,
    FlushFail,
    AsyncFlushStart,
    AsyncFlushSuccess,
    AsyncFlushFail,
    Crc32Mismatch,
    Halt,
    RunStart,
    RunEnd,
    NodeFail,
    ScavengeStart,
    ScavengeEnd,
    CheckpointInterval,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 29] = [
        EventType::Start,
        EventType::ComputeStart,
        EventType::ComputeEnd,
        EventType::CheckpointStart,
        EventType::CheckpointEnd,
        EventType::OutputStart,
        EventType::OutputEnd,
        EventType::RebuildStart,
        EventType::RebuildSuccess,
        EventType::RebuildFail,
        EventType::RestartSuccess,
        EventType::RestartFail,
        EventType::FetchStart,
        EventType::FetchSuccess,
        EventType::FetchFail,
        EventType::FlushStart,
        EventType::FlushSuccess,
        EventType::FlushFail,
        EventType::AsyncFlushStart,
        EventType::AsyncFlushSuccess,
        EventType::AsyncFlushFail,
        EventType::Crc32Mismatch,
        EventType::Halt,
        EventType::RunStart,
        EventType::RunEnd,
        EventType::NodeFail,
        EventType::ScavengeStart,
        EventType::ScavengeEnd,
        EventType::CheckpointInterval,
    ];

    /// The name written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Start => "START",
            EventType::ComputeStart => "COMPUTE_START",
            EventType::ComputeEnd => "COMPUTE_END",
            EventType::CheckpointStart => "CHECKPOINT_START",
            EventType::CheckpointEnd => "CHECKPOINT_END",
            EventType::OutputStart => "OUTPUT_START",
            EventType::OutputEnd => "OUTPUT_END",
            EventType::RebuildStart => "REBUILD_START",
            EventType::RebuildSuccess => "REBUILD_SUCCESS",
            EventType::RebuildFail => "REBUILD_FAIL",
            EventType::RestartSuccess => "RESTART_SUCCESS",
            EventType::RestartFail => "RESTART_FAIL",
            EventType::FetchStart => "FETCH_START",
            EventType::FetchSuccess => "FETCH_SUCCESS",
            EventType::FetchFail => "FETCH_FAIL",
            EventType::FlushStart => "FLUSH_START",
            EventType::FlushSuccess => "FLUSH_SUCCESS",
            EventType::FlushFail => "FLUSH_FAIL",
            EventType::AsyncFlushStart => "ASYNC_FLUSH_START",
            EventType::AsyncFlushSuccess => "ASYNC_FLUSH_SUCCESS",
            EventType::AsyncFlushFail => "ASYNC_FLUSH_FAIL",
            EventType::Crc32Mismatch => "CRC32_MISMATCH",
            EventType::Halt => "HALT",
            EventType::RunStart => "RUN_START",
            EventType::RunEnd => "RUN_END",
            EventType::NodeFail => "NODE_FAIL",
            EventType::ScavengeStart => "SCAVENGE_START",
            EventType::ScavengeEnd => "SCAVENGE_END",
            // Not in SCR: the adaptive Need_checkpoint policy's choice
            // (secs = the interval, note = why).
            EventType::CheckpointInterval => "CHECKPOINT_INTERVAL",
        }
    }
}

/// Transfer types (`xfer=TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum XferType {
    Write,
    Encode,
    Checkpoint,
    Output,
    Fetch,
    FlushSync,
    FlushAsync,
}

impl XferType {
    /// Every transfer type.
    pub const ALL: [XferType; 7] = [
        XferType::Write,
        XferType::Encode,
        XferType::Checkpoint,
        XferType::Output,
        XferType::Fetch,
        XferType::FlushSync,
        XferType::FlushAsync,
    ];

    /// The name written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            XferType::Write => "WRITE",
            XferType::Encode => "ENCODE",
            XferType::Checkpoint => "CHECKPOINT",
            XferType::Output => "OUTPUT",
            XferType::Fetch => "FETCH",
            XferType::FlushSync => "FLUSH_SYNC",
            XferType::FlushAsync => "FLUSH_ASYNC",
        }
    }
}

/// What a line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// `event=TYPE`.
    Event(EventType),
    /// `xfer=TYPE`.
    Xfer(XferType),
}

/// One log entry, built with the setters and written by [`Logger::log`]
/// (or formatted by [`format_line`]). Fields left `None` are not written.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Event or transfer type.
    pub kind: EntryKind,
    /// `note=` (events).
    pub note: Option<String>,
    /// `from=` (transfers).
    pub from: Option<String>,
    /// `to=` (transfers).
    pub to: Option<String>,
    /// `dset=`.
    pub dset: Option<u64>,
    /// `name=`.
    pub name: Option<String>,
    /// `secs=`: duration of the operation.
    pub secs: Option<f64>,
    /// `bytes=` (transfers).
    pub bytes: Option<u64>,
    /// `files=` (transfers).
    pub files: Option<u64>,
    /// `procs=` (START).
    pub procs: Option<u64>,
    /// `nodes=` (START).
    pub nodes: Option<u64>,
}

impl Entry {
    fn new(kind: EntryKind) -> Entry {
        Entry {
            kind,
            note: None,
            from: None,
            to: None,
            dset: None,
            name: None,
            secs: None,
            bytes: None,
            files: None,
            procs: None,
            nodes: None,
        }
    }
    /// An event.
    pub fn event(t: EventType) -> Entry {
        Entry::new(EntryKind::Event(t))
    }
    /// A transfer.
    pub fn xfer(t: XferType) -> Entry {
        Entry::new(EntryKind::Xfer(t))
    }
    /// Set `note=`.
    pub fn note(mut self, v: impl Into<String>) -> Entry {
        self.note = Some(v.into());
        self
    }
    /// Set `from=`.
    pub fn from(mut self, v: impl Into<String>) -> Entry {
        self.from = Some(v.into());
        self
    }
    /// Set `to=`.
    pub fn to(mut self, v: impl Into<String>) -> Entry {
        self.to = Some(v.into());
        self
    }
    /// Set `dset=` (a negative id is not written).
    pub fn dset(mut self, v: i64) -> Entry {
        self.dset = u64::try_from(v).ok();
        self
    }
    /// Set `name=`.
    pub fn name(mut self, v: impl Into<String>) -> Entry {
        self.name = Some(v.into());
        self
    }
    /// Set `secs=` (a negative or non-finite value is not written).
    pub fn secs(mut self, v: f64) -> Entry {
        self.secs = (v.is_finite() && v >= 0.0).then_some(v);
        self
    }
    /// Set `bytes=`.
    pub fn bytes(mut self, v: u64) -> Entry {
        self.bytes = Some(v);
        self
    }
    /// Set `files=`.
    pub fn files(mut self, v: u64) -> Entry {
        self.files = Some(v);
        self
    }
    /// Set `procs=` and `nodes=` (START).
    pub fn procs_nodes(mut self, procs: u64, nodes: u64) -> Entry {
        self.procs = Some(procs);
        self.nodes = Some(nodes);
        self
    }
}

/// Control characters would end or corrupt the line: spaces instead.
fn clean(v: &str) -> impl Iterator<Item = char> + '_ {
    v.chars().map(|c| if c.is_control() { ' ' } else { c })
}

fn push_quoted(out: &mut String, v: &str) {
    out.push('"');
    for c in clean(v) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// Bare when the parser reads it back unchanged, quoted otherwise.
fn push_value(out: &mut String, v: &str) {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| !(c.is_whitespace() || c.is_control() || matches!(c, ',' | '"' | '\\')));
    if bare {
        out.push_str(v);
    } else {
        push_quoted(out, v);
    }
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
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

/// One log line (without the newline) at `unix_s`, shown in the zone
/// `offset_s` seconds east of UTC.
pub fn format_line(unix_s: f64, offset_s: i64, host: &str, jobid: &str, e: &Entry) -> String {
    let mut out = format_timestamp(unix_s, offset_s);
    out.push_str(": host=");
    push_value(&mut out, host);
    out.push_str(", jobid=");
    push_value(&mut out, jobid);
    match e.kind {
        EntryKind::Event(t) => {
            out.push_str(", event=");
            out.push_str(t.as_str());
        }
        EntryKind::Xfer(t) => {
            out.push_str(", xfer=");
            out.push_str(t.as_str());
        }
    }
    let quoted = [("note", &e.note), ("from", &e.from), ("to", &e.to)];
    for (k, v) in quoted {
        if let Some(v) = v {
            out.push_str(&format!(", {k}="));
            push_quoted(&mut out, v);
        }
    }
    if let Some(d) = e.dset {
        out.push_str(&format!(", dset={d}"));
    }
    if let Some(n) = &e.name {
        out.push_str(", name=");
        push_quoted(&mut out, n);
    }
    if let Some(s) = e.secs.filter(|s| s.is_finite() && *s >= 0.0) {
        // Display of f64 is the shortest text that reads back exactly,
        // never in exponent form.
        out.push_str(&format!(", secs={s}"));
    }
    let counts = [
        ("bytes", e.bytes),
        ("files", e.files),
        ("procs", e.procs),
        ("nodes", e.nodes),
    ];
    for (k, v) in counts {
        if let Some(v) = v {
            out.push_str(&format!(", {k}={v}"));
        }
    }
    out
}

/// Which sinks logging uses (SCR_LOG_ENABLE, SCR_LOG_TXT_ENABLE,
/// SCR_LOG_SYSLOG_ENABLE, SCR_LOG_DB_*).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// Append to `<prefix>/.scr/log`.
    pub txt: bool,
    /// Send each line to syslog (LOG_LOCAL7 | LOG_INFO, prefixed "SCR").
    pub syslog: bool,
    /// Write to the log database (SCR_LOG_DB_ENABLE=1).
    pub db: Option<DbSettings>,
}

impl LogSettings {
    /// From the configuration: `None` when SCR_LOG_ENABLE is 0 (the
    /// default) or every sink is off.
    pub fn from_config(cfg: &Config) -> Result<Option<LogSettings>, LogWriteError> {
        if !cfg.get_bool("SCR_LOG_ENABLE")?.unwrap_or(false) {
            return Ok(None);
        }
        let s = LogSettings {
            txt: cfg.get_bool("SCR_LOG_TXT_ENABLE")?.unwrap_or(true),
            syslog: cfg.get_bool("SCR_LOG_SYSLOG_ENABLE")?.unwrap_or(true),
            db: DbSettings::from_config(cfg).map_err(|e| match e {
                super::db::DbError::Config(c) => LogWriteError::Config(c),
                other => LogWriteError::Db(Box::new(other)),
            })?,
        };
        Ok((s.txt || s.syslog || s.db.is_some()).then_some(s))
    }
}

/// An open event log of one job on one process.
#[derive(Debug)]
pub struct Logger {
    host: String,
    jobid: String,
    txt: Option<(PathBuf, File)>,
    syslog: bool,
    warned: AtomicBool,
    db: Option<Mutex<DbLog>>,
    db_warned: AtomicBool,
}

impl Logger {
    /// Open the sinks `settings` asks for; the text log is
    /// `<prefix>/.scr/log`, created (mode 0644 less the umask) when missing.
    /// A database that cannot be opened is a warning and is left out; only
    /// the text log's failure is an error.
    pub fn open(
        prefix: &Path,
        host: &str,
        jobid: &str,
        settings: LogSettings,
    ) -> Result<Logger, LogWriteError> {
        let txt = if settings.txt {
            let path = log_path(prefix);
            let file = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o644)
                .open(&path)
                .map_err(|source| LogWriteError::Open {
                    path: path.clone(),
                    source,
                })?;
            Some((path, file))
        } else {
            None
        };
        let db = settings
            .db
            .as_ref()
            .and_then(|d| match DbLog::open(d, prefix, jobid) {
                Ok(db) => Some(Mutex::new(db)),
                Err(e) => {
                    eprintln!("SCR: warning: database log disabled: {e}");
                    None
                }
            });
        Ok(Logger {
            host: host.to_owned(),
            jobid: jobid.to_owned(),
            txt,
            syslog: settings.syslog,
            warned: AtomicBool::new(false),
            db,
            db_warned: AtomicBool::new(false),
        })
    }

    /// The log database's path, when the database log is open.
    pub fn db_path(&self) -> Option<PathBuf> {
        self.db.as_ref().map(|d| {
            d.lock()
                .unwrap_or_else(|p| p.into_inner())
                .path()
                .to_path_buf()
        })
    }

    /// The text log's path, when the text log is on.
    pub fn path(&self) -> Option<&Path> {
        self.txt.as_ref().map(|(p, _)| p.as_path())
    }

    /// Write `e` stamped with the current time.
    pub fn log(&self, e: &Entry) -> Result<(), LogWriteError> {
        self.log_at(crate::clock::Clock::unix_s(&crate::clock::SystemClock), e)
    }

    /// Write `e`; a failure is printed as a warning the first time and
    /// otherwise ignored (logging never fails the application's call).
    pub fn log_or_warn(&self, e: &Entry) {
        if let Err(err) = self.log(e) {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!("SCR: warning: {err} (further log errors not shown)");
            }
        }
    }

    /// Write `e` stamped with `unix_s` (local time with its offset). Only a
    /// text log failure is returned; a database failure is a warning, once.
    pub fn log_at(&self, unix_s: f64, e: &Entry) -> Result<(), LogWriteError> {
        let offset = local_offset_s(unix_s.floor() as i64);
        if let Some(db) = &self.db {
            let mut db = db.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = db.insert(unix_s, offset, &self.host, e) {
                if !self.db_warned.swap(true, Ordering::Relaxed) {
                    eprintln!("SCR: warning: {err} (further database log errors not shown)");
                }
            }
        }
        let line = format_line(unix_s, offset, &self.host, &self.jobid, e);
        if self.syslog {
            send_syslog(&line);
        }
        if let Some((path, file)) = &self.txt {
            let mut buf = line.into_bytes();
            buf.push(b'\n');
            let werr = |source| LogWriteError::Write {
                path: path.clone(),
                source,
            };
            // One write() of the whole line: with O_APPEND the kernel puts
            // it at the end in one piece. A short write (disk full) appends
            // the rest rather than lose it.
            let mut f = file;
            let n = f.write(&buf).map_err(werr)?;
            if n < buf.len() {
                f.write_all(&buf[n..]).map_err(werr)?;
            }
        }
        Ok(())
    }
}

/// Send one message to syslog at LOG_LOCAL7 | LOG_INFO, as "SCR <line>".
/// The process's openlog() settings are left alone (they belong to the
/// application).
fn send_syslog(line: &str) {
    let msg = format!("SCR {line}").replace('\0', " ");
    let Ok(msg) = CString::new(msg) else {
        return;
    };
    // SAFETY: both pointers are valid NUL-terminated strings for the
    // duration of the call, and the format "%s" consumes exactly the one
    // string argument given.
    unsafe {
        libc::syslog(
            libc::LOG_LOCAL7 | libc::LOG_INFO,
            c"%s".as_ptr(),
            msg.as_ptr(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse_line, RecordKind};
    use super::*;

    fn full(kind: EntryKind) -> Entry {
        let e = Entry::new(kind)
            .dset(17)
            .name(r#"ckpt "a", b\c"#)
            .secs(12.345_678_9);
        match kind {
            EntryKind::Event(EventType::Start) => e.procs_nodes(64, 4),
            EntryKind::Event(_) => e.note("node n3 failed, rank 12"),
            EntryKind::Xfer(_) => e
                .from("/dev/shm/u/scr.7/scr.dataset.17")
                .to("/p/lustre/run, 2")
                .bytes(1_048_576_000)
                .files(64),
        }
    }

    #[test]
    fn every_kind_round_trips_through_the_parser() {
        let kinds = EventType::ALL
            .iter()
            .map(|&t| EntryKind::Event(t))
            .chain(XferType::ALL.iter().map(|&t| EntryKind::Xfer(t)));
        let t = 1_795_350_672.345;
        for (i, kind) in kinds.enumerate() {
            let e = full(kind);
            let offset = [0, 3600, -5 * 3600 - 1800, 13 * 3600 + 45 * 60][i % 4];
            let line = format_line(t, offset, "rzgenie12", "job 42,x", &e);
            let r = parse_line(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
            assert!((r.time_s - t).abs() <= 1e-3, "{line}: {}", r.time_s);
            assert_eq!(r.host.as_deref(), Some("rzgenie12"));
            assert_eq!(r.jobid.as_deref(), Some("job 42,x"));
            match kind {
                EntryKind::Event(t) => {
                    assert_eq!(r.kind, RecordKind::Event(t.as_str().into()))
                }
                EntryKind::Xfer(t) => {
                    assert_eq!(r.kind, RecordKind::Transfer(t.as_str().into()))
                }
            }
            assert_eq!(r.note, e.note, "{line}");
            assert_eq!(r.dset, e.dset);
            assert_eq!(r.name, e.name, "{line}");
            assert_eq!(r.secs, e.secs);
            assert_eq!(r.bytes, e.bytes.map(|b| b as f64));
            assert_eq!(r.files, e.files);
            assert_eq!(r.procs, e.procs);
            assert_eq!(r.nodes, e.nodes);
            assert_eq!(r.other.get("from"), e.from.as_ref());
            assert_eq!(r.other.get("to"), e.to.as_ref());
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
    }

    #[test]
    fn minimal_lines_and_awkward_values() {
        let l = format_line(0.0, 0, "n1", "7", &Entry::event(EventType::Halt));
        assert_eq!(
            l,
            "1970-01-01T00:00:00.000+00:00: host=n1, jobid=7, event=HALT"
        );
        // Newlines cannot survive (one record per line): they become spaces.
        let e = Entry::event(EventType::RunEnd).note("a\nb\"");
        let l = format_line(0.0, 0, "", "", &e);
        assert!(!l.contains('\n'));
        let r = parse_line(&l).unwrap();
        assert_eq!(r.note.as_deref(), Some("a b\""));
        assert_eq!(r.host.as_deref(), Some(""));
        // Values the parser would reject are simply not written.
        let e = Entry::xfer(XferType::Write).secs(f64::NAN).dset(-1);
        let r = parse_line(&format_line(0.0, 0, "h", "j", &e)).unwrap();
        assert_eq!((r.secs, r.dset), (None, None));
    }

    #[test]
    fn appends_whole_lines_and_reports_open_errors() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".scr")).unwrap();
        let s = LogSettings {
            txt: true,
            syslog: false,
            db: None,
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let prefix = tmp.path().to_path_buf();
                let s = s.clone();
                std::thread::spawn(move || {
                    let log = Logger::open(&prefix, &format!("h{t}"), "9", s).unwrap();
                    for i in 0..50 {
                        let e = Entry::event(EventType::ComputeEnd)
                            .dset(i)
                            .note("x".repeat(500));
                        log.log(&e).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let p = super::super::read_log(&log_path(tmp.path()), true).unwrap();
        assert_eq!(p.records.len(), 200);
        let missing = tmp.path().join("nope");
        assert!(matches!(
            Logger::open(&missing, "h", "j", s),
            Err(LogWriteError::Open { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_values_round_trip(
            host in "[ -~]{0,20}",
            note in "\\PC{0,40}",
            name in "[ -~]{0,40}",
            secs in 0.0f64..1e9,
            t in 0.0f64..4e9,
            off_min in -1439i64..1439,
        ) {
            let e = Entry::event(EventType::CheckpointEnd).note(note.clone()).name(name.clone()).secs(secs);
            let line = format_line(t, off_min * 60, &host, "1", &e);
            let r = parse_line(&line).unwrap();
            proptest::prop_assert_eq!(r.note, Some(note));
            proptest::prop_assert_eq!(r.name, Some(name));
            proptest::prop_assert_eq!(r.host, Some(host));
            proptest::prop_assert_eq!(r.secs, Some(secs));
            proptest::prop_assert!((r.time_s - t).abs() <= 1e-3 + 1e-9, "{} vs {}", r.time_s, t);
        }
    }
}
