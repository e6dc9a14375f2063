//! [`Logger`]: the event log of one job on one process, a set of
//! [`LogSink`]s that each entry goes to under one stamp — the text log,
//! syslog and a log database as SCR_LOG_* ask ([`LogSettings`]), or any
//! sinks a caller adds ([`Logger::new`], [`Logger::with`]).
//!
//! Only the process that opens a [`Logger`] writes: the library opens one
//! on rank 0 only, so a collective event appears once. A sink either
//! reports its failures to the caller of [`Logger::log`] (the text log) or
//! is warned about once and otherwise ignored (a database that cannot be
//! opened or written, [`OnError::WarnOnce`]): logging never fails the
//! application's call through a database.
//!
//! The top layer of `log/`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::event::Stamp;
use super::sink::{LogSink, Target};
use super::store::{is_mysql_url, DbError, DbSettings};
use super::syslog::SyslogSink;
use super::text::TextSink;
use super::time::now_s;
use crate::config::Config;

// The entry builder and what a line is made of, re-exported where the call
// sites outside `log/` have always named them (`log::writer::Entry`).
pub use super::event::{Entry, EntryKind, EventType, XferType};
pub use super::format::format_line;
pub use super::sink::LogWriteError;
pub use super::text::{log_path, LOG_FILE};
pub use super::time::{format_timestamp, local_offset_s};

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
                DbError::Config(c) => LogWriteError::Config(c),
                other => LogWriteError::Db(Box::new(other)),
            })?,
        };
        Ok((s.txt || s.syslog || s.db.is_some()).then_some(s))
    }
}

/// Open the log database `settings` name for `prefix`: the server when
/// SCR_LOG_DB_HOST is set, else the SQLite file; migrated, with this job's
/// row found or added.
pub fn open_database(
    settings: &DbSettings,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    match &settings.host {
        Some(host) => open_server(settings, host, prefix, jobid),
        None => open_sqlite(settings, prefix, jobid),
    }
}

/// The server SCR_LOG_DB_HOST names: MySQL/MariaDB for a `mysql://` or
/// `mariadb://` URL, else PostgreSQL.
fn open_server(
    settings: &DbSettings,
    host: &str,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    if is_mysql_url(host) {
        open_mysql(settings, host, prefix, jobid)
    } else {
        open_postgres(settings, host, prefix, jobid)
    }
}

#[cfg(feature = "logdb-mysql")]
fn open_mysql(
    settings: &DbSettings,
    _host: &str,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    super::mysql::open_sink(settings, prefix, jobid)
}

#[cfg(not(feature = "logdb-mysql"))]
fn open_mysql(_: &DbSettings, host: &str, _: &Path, _: &str) -> Result<Box<dyn LogSink>, DbError> {
    Err(DbError::mysql_not_built(host))
}

#[cfg(feature = "logdb-postgres")]
fn open_postgres(
    settings: &DbSettings,
    _host: &str,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    Ok(Box::new(super::server::ServerLog::open(
        settings, prefix, jobid,
    )?))
}

#[cfg(not(feature = "logdb-postgres"))]
fn open_postgres(
    _: &DbSettings,
    host: &str,
    _: &Path,
    _: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    Err(DbError::postgres_not_built(host))
}

#[cfg(feature = "logdb-sqlite")]
fn open_sqlite(
    settings: &DbSettings,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    Ok(Box::new(super::db::SqliteLog::open(
        settings, prefix, jobid,
    )?))
}

#[cfg(not(feature = "logdb-sqlite"))]
fn open_sqlite(_: &DbSettings, _: &Path, _: &str) -> Result<Box<dyn LogSink>, DbError> {
    Err(DbError::sqlite_not_built())
}

/// What the logger does when a sink fails to write an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Return the error from [`Logger::log`].
    Report,
    /// Print a warning the first time; never fail the call.
    WarnOnce,
}

#[derive(Debug)]
struct Slot {
    target: Target,
    on_error: OnError,
    warned: AtomicBool,
    sink: Mutex<Box<dyn LogSink>>,
}

/// An open event log of one job on one process.
#[derive(Debug)]
pub struct Logger {
    host: String,
    jobid: String,
    sinks: Vec<Slot>,
    warned: AtomicBool,
}

impl Logger {
    /// A logger of job `jobid` on `host` with no sinks yet.
    pub fn new(host: &str, jobid: &str) -> Logger {
        Logger {
            host: host.to_owned(),
            jobid: jobid.to_owned(),
            sinks: Vec::new(),
            warned: AtomicBool::new(false),
        }
    }

    /// This logger with `sink` added after the others.
    pub fn with(mut self, sink: Box<dyn LogSink>, on_error: OnError) -> Logger {
        self.sinks.push(Slot {
            target: sink.target(),
            on_error,
            warned: AtomicBool::new(false),
            sink: Mutex::new(sink),
        });
        self
    }

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
        let txt = settings.txt.then(|| TextSink::open(prefix)).transpose()?;
        let mut log = Logger::new(host, jobid);
        if let Some(d) = &settings.db {
            match open_database(d, prefix, jobid) {
                Ok(db) => log = log.with(db, OnError::WarnOnce),
                Err(e) => eprintln!("SCR: warning: database log disabled: {e}"),
            }
        }
        if settings.syslog {
            log = log.with(Box::new(SyslogSink), OnError::WarnOnce);
        }
        if let Some(txt) = txt {
            log = log.with(Box::new(txt), OnError::Report);
        }
        Ok(log)
    }

    /// Where each sink writes, in the order entries go out.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.sinks.iter().map(|s| &s.target)
    }

    /// The log database's path (or server), when a database log is open.
    pub fn db_path(&self) -> Option<PathBuf> {
        self.targets().find_map(|t| match t {
            Target::Database(p) => Some(p.clone()),
            _ => None,
        })
    }

    /// The text log's path, when the text log is on.
    pub fn path(&self) -> Option<&Path> {
        self.targets().find_map(|t| match t {
            Target::Text(p) => Some(p.as_path()),
            _ => None,
        })
    }

    /// Write `e` stamped with the current time.
    pub fn log(&self, e: &Entry) -> Result<(), LogWriteError> {
        self.log_at(now_s(), e)
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

    /// Write `e` stamped with `unix_s` (local time with its offset) to every
    /// sink. The first failure of a [`OnError::Report`] sink is returned,
    /// after every sink has had the entry.
    pub fn log_at(&self, unix_s: f64, e: &Entry) -> Result<(), LogWriteError> {
        let stamp = Stamp {
            time_s: unix_s,
            offset_s: local_offset_s(unix_s.floor() as i64),
            host: &self.host,
            jobid: &self.jobid,
        };
        let mut first = None;
        for slot in &self.sinks {
            let mut sink = slot.sink.lock().unwrap_or_else(|p| p.into_inner());
            let Err(err) = sink.write(&stamp, e) else {
                continue;
            };
            match slot.on_error {
                OnError::Report => {
                    first.get_or_insert(err);
                }
                OnError::WarnOnce => {
                    if !slot.warned.swap(true, Ordering::Relaxed) {
                        let what = slot.target.label();
                        eprintln!("SCR: warning: {err} (further {what} log errors not shown)");
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::Secret;
    use super::*;
    use std::sync::Arc;

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

    /// A sink that keeps what it gets, or fails every write.
    #[derive(Debug)]
    struct Memory {
        got: Arc<Mutex<Vec<String>>>,
        fail: bool,
    }

    impl LogSink for Memory {
        fn target(&self) -> Target {
            Target::Text(PathBuf::from(if self.fail { "/bad" } else { "/mem" }))
        }
        fn write(&mut self, stamp: &Stamp<'_>, e: &Entry) -> Result<(), LogWriteError> {
            if self.fail {
                return Err(LogWriteError::Write {
                    path: PathBuf::from("/bad"),
                    source: std::io::Error::other("disk full"),
                });
            }
            let line = format_line(stamp.time_s, 0, stamp.host, stamp.jobid, e);
            self.got.lock().unwrap().push(line);
            Ok(())
        }
    }

    #[test]
    fn every_sink_gets_the_entry_and_only_reporting_sinks_fail_the_call() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let memory = |fail| {
            Box::new(Memory {
                got: Arc::clone(&got),
                fail,
            })
        };
        let quiet = Logger::new("n0", "7")
            .with(memory(true), OnError::WarnOnce)
            .with(memory(false), OnError::Report);
        quiet.log_at(1.0, &Entry::event(EventType::Halt)).unwrap();
        let loud = Logger::new("n0", "7")
            .with(memory(true), OnError::Report)
            .with(memory(false), OnError::Report);
        let e = loud
            .log_at(2.0, &Entry::event(EventType::Halt))
            .unwrap_err();
        assert!(matches!(e, LogWriteError::Write { .. }), "{e}");
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].starts_with("1970-01-01T00:00:02.000+00:00: host=n0, jobid=7, event=HALT"));
        assert_eq!(loud.path(), Some(Path::new("/bad")));
        assert_eq!(loud.db_path(), None);
    }

    #[test]
    #[cfg(all(feature = "logdb-sqlite", feature = "logdb-postgres"))]
    fn a_host_opens_the_server_never_showing_the_password() {
        // Nothing listens on port 1, so opening fails at once, naming the
        // server and never the password.
        let s = DbSettings {
            username: Some("u".into()),
            ..db_settings(Some("127.0.0.1:1"))
        };
        let p = Path::new("/p");
        let e = open_database(&s, p, "1").unwrap_err();
        assert!(matches!(e, DbError::Server { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("postgresql://u@127.0.0.1:1/scr"), "{msg}");
        assert!(msg.contains("connecting"), "{msg}");
        assert!(!msg.contains("hunter2") && !format!("{s:?}").contains("hunter2"));
        // A mysql:// URL goes to MySQL/MariaDB (or, in a build without
        // it, is refused naming the feature), never to PostgreSQL.
        let mut s = s;
        s.host = Some("mysql://127.0.0.1:1/scr".into());
        let e = open_database(&s, p, "1").unwrap_err();
        let msg = e.to_string();
        if cfg!(feature = "logdb-mysql") {
            assert!(
                msg.contains("mysql://u@127.0.0.1:1/scr: connecting"),
                "{msg}"
            );
        } else {
            assert!(matches!(e, DbError::NotBuilt { .. }), "{e}");
            assert!(msg.contains("logdb-mysql"), "{msg}");
        }
        assert!(!msg.contains("hunter2"), "{msg}");
        // Without a host, the SQLite file below the prefix.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".scr")).unwrap();
        s.host = None;
        let db = open_database(&s, tmp.path(), "1").unwrap();
        assert_eq!(
            db.target(),
            Target::Database(tmp.path().join(".scr/log.db"))
        );
    }

    fn db_settings(host: Option<&str>) -> DbSettings {
        DbSettings {
            name: None,
            host: host.map(String::from),
            user: None,
            pass: Some(Secret::new("hunter2")),
            debug: false,
            username: None,
            jobname: None,
        }
    }

    /// SCR_LOG_DB_ENABLE=1 in a build without SQLite: the database is
    /// refused with an error naming the parameter and the feature (which
    /// `Logger::open` prints as its warning), and the text log goes on.
    #[test]
    #[cfg(not(feature = "logdb-sqlite"))]
    fn sqlite_log_is_refused_naming_the_parameter_and_the_feature() {
        let tmp = tempfile::tempdir().unwrap();
        let e = open_database(&db_settings(None), tmp.path(), "1").unwrap_err();
        assert!(matches!(e, DbError::NotBuilt { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("SCR_LOG_DB_ENABLE=1"), "{msg}");
        assert!(msg.contains("`logdb-sqlite`"), "{msg}");
        // SCR_LOG_DB_* are the site's: read from the system config file.
        let system = tmp.path().join("scr.conf");
        let site = "SCR_LOG_ENABLE=1\nSCR_LOG_DB_ENABLE=1\nSCR_LOG_SYSLOG_ENABLE=0\n";
        std::fs::write(&system, site).unwrap();
        let env = crate::config::MapEnv::new([("SCR_PREFIX", tmp.path().to_str().unwrap())]);
        let opts = crate::config::LoadOptions {
            system_file: Some(system),
            read_app_conf: false,
        };
        let cfg = Config::load(&env, &opts).unwrap();
        let settings = LogSettings::from_config(&cfg).unwrap().unwrap();
        assert!(settings.db.is_some(), "the setting is read, not dropped");
        std::fs::create_dir_all(tmp.path().join(".scr")).unwrap();
        let log = Logger::open(tmp.path(), "n0", "1", settings).unwrap();
        assert_eq!(log.db_path(), None);
        assert_eq!(log.path(), Some(tmp.path().join(".scr/log").as_path()));
        assert!(!tmp.path().join(".scr/log.db").exists());
    }

    /// `host` given as SCR_LOG_DB_HOST in a build without `feature` is
    /// refused naming the parameter (as `shown`) and the feature, never
    /// showing the password `hunter2`.
    #[cfg(any(not(feature = "logdb-postgres"), not(feature = "logdb-mysql")))]
    fn assert_refused_naming_the_feature(host: &str, shown: &str, feature: &str) {
        let s = db_settings(Some(host));
        let e = open_database(&s, Path::new("/p"), "1").unwrap_err();
        assert!(matches!(e, DbError::NotBuilt { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(shown), "{msg}");
        assert!(msg.contains(&format!("`{feature}`")), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }

    /// SCR_LOG_DB_HOST in a build without PostgreSQL: refused likewise,
    /// never showing the password.
    #[test]
    #[cfg(not(feature = "logdb-postgres"))]
    fn server_log_is_refused_naming_the_parameter_and_the_feature() {
        assert_refused_naming_the_feature(
            "postgresql://u:hunter2@db/scr",
            "SCR_LOG_DB_HOST=postgresql://u:",
            "logdb-postgres",
        );
    }

    /// A `mysql://` SCR_LOG_DB_HOST in a build without `logdb-mysql` is
    /// refused naming the parameter and that feature, never sent to
    /// PostgreSQL, never showing the password.
    #[test]
    #[cfg(not(feature = "logdb-mysql"))]
    fn mysql_log_is_refused_naming_the_parameter_and_the_feature() {
        assert_refused_naming_the_feature(
            "mysql://u:hunter2@db/scr",
            "SCR_LOG_DB_HOST=mysql://u:",
            "logdb-mysql",
        );
    }
}
