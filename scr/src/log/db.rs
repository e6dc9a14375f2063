//! The database log (SCR_LOG_DB_ENABLE): the same entries as the text log,
//! in an embedded SQLite database with tables `jobs`, `runs`, `events` and
//! `transfers` (docs/formats.md, "The log database").
//!
//! Where: `<prefix>/.scr/log.db` by default; `SCR_LOG_DB_NAME` names another
//! file (an absolute path, or a name relative to `<prefix>/.scr/`), so a
//! site can collect every job in one place. With `SCR_LOG_DB_HOST` set the
//! same tables live on a PostgreSQL server instead ([`super::server`];
//! `SCR_LOG_DB_NAME` is then the database, with `SCR_LOG_DB_USER` and
//! `SCR_LOG_DB_PASS`: SCR's settings, though LLNL's SCR speaks MySQL).
//!
//! The schema is versioned: `schema_version` lists every migration applied
//! (version, when, what). Opening for writing applies the missing ones, each
//! in its own `BEGIN IMMEDIATE` transaction that re-reads the version first,
//! so two processes opening a new database at once apply each migration
//! exactly once. A database written by a newer version of this library is
//! refused ([`DbError::Newer`]), never downgraded or written into; a SQLite
//! file with tables but no `schema_version` is not ours and is refused too.
//!
//! Runs. A row of `runs` is one launch of the application. The run loop's
//! `RUN_START` opens one (`launched_by = 'run_loop'`); the library's `START`
//! adopts the newest run of its job that the run loop opened and no
//! application has claimed yet, else opens its own (`'library'`).
//! `RUN_END` closes the run with its note; `last_s` follows the newest entry
//! of the run, so a run that died without `RUN_END` still has a duration.
//!
//! Failure policy: the caller ([`super::writer::Logger`]) warns once and
//! carries on; a database problem never fails the application's call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::parse::{Record, RecordKind};
use super::writer::{format_timestamp, Entry, EntryKind};
use crate::clock::{Clock, SystemClock};
use crate::config::{Config, ConfigError};

/// Default file name below `<prefix>/.scr/`.
pub const DB_FILE: &str = "log.db";

/// How long a writer waits for another process's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version reached after it (1, 2, ...).
    pub version: i64,
    /// What it does, recorded in `schema_version.what`.
    pub what: &'static str,
    /// The statements.
    pub sql: &'static str,
}

/// Every migration, in order; the last one's version is
/// [`SCHEMA_VERSION`]. Never edit a released step: add a new one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "tables jobs, runs, events, transfers",
        sql: "
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    jobid        TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    username     TEXT,
    jobname      TEXT,
    first_seen_s REAL NOT NULL,
    UNIQUE (jobid, prefix)
);
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs(id),
    launched_by TEXT NOT NULL CHECK (launched_by IN ('library', 'run_loop')),
    host        TEXT NOT NULL,
    start_s     REAL NOT NULL,
    app_start_s REAL,
    last_s      REAL NOT NULL,
    end_s       REAL,
    end_note    TEXT,
    procs       INTEGER,
    nodes       INTEGER
);
CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    job_id   INTEGER NOT NULL REFERENCES jobs(id),
    run_id   INTEGER REFERENCES runs(id),
    time_s   REAL NOT NULL,
    time     TEXT NOT NULL,
    host     TEXT NOT NULL,
    type     TEXT NOT NULL,
    dset     INTEGER,
    name     TEXT,
    secs     REAL,
    note     TEXT,
    procs    INTEGER,
    nodes    INTEGER
);
CREATE TABLE transfers (
    id        INTEGER PRIMARY KEY,
    job_id    INTEGER NOT NULL REFERENCES jobs(id),
    run_id    INTEGER REFERENCES runs(id),
    time_s    REAL NOT NULL,
    time      TEXT NOT NULL,
    host      TEXT NOT NULL,
    type      TEXT NOT NULL,
    from_path TEXT,
    to_path   TEXT,
    dset      INTEGER,
    name      TEXT,
    secs      REAL,
    bytes     INTEGER,
    files     INTEGER
);",
    },
    Migration {
        version: 2,
        what: "indexes for reading a job's entries in time order",
        sql: "
CREATE INDEX runs_by_job ON runs (job_id, start_s);
CREATE INDEX events_by_job ON events (job_id, time_s);
CREATE INDEX transfers_by_job ON transfers (job_id, time_s);",
    },
];

/// The schema version this library writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// Errors of the database log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// SQLite refused an operation.
    #[error("log database {path}: {what}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The database was written by a newer library.
    #[error("log database {path} has schema version {found}, newer than the {known} this library knows: refusing to use it (upgrade the library or set SCR_LOG_DB_NAME to another file)")]
    Newer {
        /// The database file.
        path: PathBuf,
        /// Its version.
        found: i64,
        /// Ours.
        known: i64,
    },
    /// A SQLite file that is not an SCR log database.
    #[error("{path} is a SQLite database but not an SCR log (it has table {table:?} and no schema_version): refusing to write into it")]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// One of its tables.
        table: String,
    },
    /// Reading: the file has no SCR log schema at all.
    #[error("{path} holds no SCR log (no schema_version table)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// Reading: a row holds a value the log format does not allow.
    #[error("log database {path}: table {table}, row id {id}: {what}")]
    BadRow {
        /// The file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The row's id.
        id: i64,
        /// What is wrong.
        what: String,
    },
    /// SCR_LOG_DB_HOST (or a `--db` URL) does not name a usable server.
    #[error("log database server {host:?}: {why}")]
    BadServer {
        /// The configured host.
        host: String,
        /// What is wrong with it.
        why: String,
    },
    /// The log database server refused an operation or could not be reached.
    #[error("log database {server}: {what}: {source}")]
    Server {
        /// `postgresql://user@host:port/dbname` (never the password).
        server: String,
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: Box<postgres::Error>,
    },
    /// A logging parameter has a bad value.
    #[error(transparent)]
    Config(Box<ConfigError>),
}

impl From<ConfigError> for DbError {
    fn from(e: ConfigError) -> Self {
        DbError::Config(Box::new(e))
    }
}

/// A password: kept out of `Debug` output and messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap `s`.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The password itself, for the connection only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What SCR_LOG_DB_* say (read from the site's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSettings {
    /// `SCR_LOG_DB_NAME`: file name or absolute path; with a host, the
    /// server's database (default `scr`).
    pub name: Option<String>,
    /// `SCR_LOG_DB_HOST`: a PostgreSQL server instead of a file.
    pub host: Option<String>,
    /// `SCR_LOG_DB_USER` (server only; default the job's user).
    pub user: Option<String>,
    /// `SCR_LOG_DB_PASS` (server only).
    pub pass: Option<Secret>,
    /// `SCR_LOG_DB_DEBUG` > 0: echo each statement to stderr.
    pub debug: bool,
    /// `SCR_USER_NAME`, recorded in `jobs.username`.
    pub username: Option<String>,
    /// `SCR_JOB_NAME`, recorded in `jobs.jobname`.
    pub jobname: Option<String>,
}

fn nonempty(cfg: &Config, name: &str) -> Option<String> {
    cfg.get(name).map(|e| e.value).filter(|v| !v.is_empty())
}

impl DbSettings {
    /// `None` unless SCR_LOG_DB_ENABLE=1 (the caller checks SCR_LOG_ENABLE).
    pub fn from_config(cfg: &Config) -> Result<Option<DbSettings>, DbError> {
        if !cfg.get_bool("SCR_LOG_DB_ENABLE")?.unwrap_or(false) {
            return Ok(None);
        }
        Ok(Some(DbSettings {
            name: nonempty(cfg, "SCR_LOG_DB_NAME"),
            host: nonempty(cfg, "SCR_LOG_DB_HOST"),
            user: nonempty(cfg, "SCR_LOG_DB_USER"),
            pass: nonempty(cfg, "SCR_LOG_DB_PASS").map(Secret),
            debug: cfg.get_u64("SCR_LOG_DB_DEBUG")?.unwrap_or(0) > 0,
            username: nonempty(cfg, "SCR_USER_NAME"),
            jobname: nonempty(cfg, "SCR_JOB_NAME"),
        }))
    }

    /// The database file for `prefix`.
    pub fn path(&self, prefix: &Path) -> PathBuf {
        db_path(prefix, self.name.as_deref())
    }
}

/// `<prefix>/.scr/log.db`, or `name` (absolute, or relative to
/// `<prefix>/.scr/`).
pub fn db_path(prefix: &Path, name: Option<&str>) -> PathBuf {
    let dir = prefix.join(".scr");
    match name {
        Some(n) if Path::new(n).is_absolute() => PathBuf::from(n),
        Some(n) => dir.join(n),
        None => dir.join(DB_FILE),
    }
}

fn sql_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(rusqlite::Error) -> DbError + 'a {
    move |source| DbError::Sqlite {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The newest migration applied, or `None` when `schema_version` is absent.
pub fn schema_version(conn: &Connection, path: &Path) -> Result<Option<i64>, DbError> {
    let has: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err(path, "reading the schema"))?;
    if has.is_none() {
        return Ok(None);
    }
    conn.query_row("SELECT MAX(version) FROM schema_version", [], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .map(|v| Some(v.unwrap_or(0)))
    .map_err(sql_err(path, "reading schema_version"))
}

/// Bring `conn` to [`SCHEMA_VERSION`], applying each missing migration once
/// in its own transaction. Returns the migrations applied by this call.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<Vec<i64>, DbError> {
    migrate_to(conn, path, MIGRATIONS)
}

/// [`migrate`] with an explicit list (tests build older databases with a
/// prefix of [`MIGRATIONS`]).
pub fn migrate_to(
    conn: &mut Connection,
    path: &Path,
    migrations: &[Migration],
) -> Result<Vec<i64>, DbError> {
    let known = migrations.last().map_or(0, |m| m.version);
    let mut applied = Vec::new();
    for m in migrations {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, "locking for a migration"))?;
        let version = match schema_version(&tx, path)? {
            Some(v) => v,
            None => {
                let other: Option<String> = tx
                    .query_row(
                        "SELECT name FROM sqlite_master WHERE type = 'table' \
                         AND name NOT LIKE 'sqlite_%' LIMIT 1",
                        [],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql_err(path, "reading the schema"))?;
                if let Some(table) = other {
                    return Err(DbError::NotOurs {
                        path: path.to_path_buf(),
                        table,
                    });
                }
                tx.execute_batch(
                    "CREATE TABLE schema_version (
                        version    INTEGER PRIMARY KEY,
                        applied_at TEXT NOT NULL,
                        what       TEXT NOT NULL)",
                )
                .map_err(sql_err(path, "creating schema_version"))?;
                0
            }
        };
        if version > known {
            return Err(DbError::Newer {
                path: path.to_path_buf(),
                found: version,
                known,
            });
        }
        if version >= m.version {
            continue;
        }
        tx.execute_batch(m.sql)
            .map_err(sql_err(path, "applying a migration"))?;
        let now = SystemClock.unix_s();
        tx.execute(
            "INSERT INTO schema_version (version, applied_at, what) VALUES (?1, ?2, ?3)",
            params![
                m.version,
                format_timestamp(now, super::writer::local_offset_s(now as i64)),
                m.what
            ],
        )
        .map_err(sql_err(path, "recording a migration"))?;
        tx.commit()
            .map_err(sql_err(path, "committing a migration"))?;
        applied.push(m.version);
    }
    Ok(applied)
}

/// Open (creating if missing) the database at `path` for writing and bring
/// its schema up to date.
pub fn open_for_writing(path: &Path) -> Result<Connection, DbError> {
    let mut conn = Connection::open(path).map_err(sql_err(path, "opening"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sql_err(path, "setting the busy timeout"))?;
    conn.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(sql_err(path, "enabling foreign keys"))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

fn to_i64(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

/// An open database log of one job on one process: the SQLite file or
/// the server.
#[derive(Debug)]
pub enum DbLog {
    /// `<prefix>/.scr/log.db` or SCR_LOG_DB_NAME.
    Sqlite(SqliteLog),
    /// SCR_LOG_DB_HOST.
    Server(Box<super::server::ServerLog>),
}

impl DbLog {
    /// Open the database `settings` name for `prefix` (a server when
    /// SCR_LOG_DB_HOST is set), migrate it, and find or add this job's row.
    pub fn open(settings: &DbSettings, prefix: &Path, jobid: &str) -> Result<DbLog, DbError> {
        if settings.host.is_some() {
            return super::server::ServerLog::open(settings, prefix, jobid)
                .map(|l| DbLog::Server(Box::new(l)));
        }
        SqliteLog::open(settings, prefix, jobid).map(DbLog::Sqlite)
    }

    /// The database file, or `postgresql://user@host:port/dbname`.
    pub fn path(&self) -> &Path {
        match self {
            DbLog::Sqlite(l) => l.path(),
            DbLog::Server(l) => l.path(),
        }
    }

    /// The `runs` row this process's entries belong to, once a `START` or
    /// `RUN_START` has been logged.
    pub fn run_row(&self) -> Option<i64> {
        match self {
            DbLog::Sqlite(l) => l.run_row(),
            DbLog::Server(l) => l.run_row(),
        }
    }

    /// Record `e`, stamped `unix_s` shown in the zone `offset_s` east of
    /// UTC, as written by `host`; one transaction. A `START` adopts the
    /// newest run of its job the run loop opened that no application has
    /// claimed, else opens its own; `RUN_START` opens a run; `RUN_END`
    /// closes it.
    pub fn insert(
        &mut self,
        unix_s: f64,
        offset_s: i64,
        host: &str,
        e: &Entry,
    ) -> Result<(), DbError> {
        match self {
            DbLog::Sqlite(l) => l.insert(unix_s, offset_s, host, e),
            DbLog::Server(l) => l.insert(unix_s, offset_s, host, e),
        }
    }
}

/// The type name an entry is stored under (`START`, `FLUSH_SYNC`, ...).
pub(crate) fn entry_kind_name(e: &Entry) -> &'static str {
    match e.kind {
        EntryKind::Event(t) => t.as_str(),
        EntryKind::Xfer(t) => t.as_str(),
    }
}

/// The SQLite database log.
#[derive(Debug)]
pub struct SqliteLog {
    conn: Connection,
    path: PathBuf,
    job_row: i64,
    run_row: Option<i64>,
    debug: bool,
}

impl SqliteLog {
    /// Open the database file `settings` name for `prefix`, migrate it, and
    /// find or add this job's row.
    pub fn open(settings: &DbSettings, prefix: &Path, jobid: &str) -> Result<SqliteLog, DbError> {
        let path = settings.path(prefix);
        let conn = open_for_writing(&path)?;
        let prefix_s = prefix.to_string_lossy().into_owned();
        let mut db = SqliteLog {
            conn,
            path,
            job_row: 0,
            run_row: None,
            debug: settings.debug,
        };
        db.trace("INSERT OR IGNORE INTO jobs", &[jobid, &prefix_s]);
        db.conn
            .execute(
                "INSERT OR IGNORE INTO jobs (jobid, prefix, username, jobname, first_seen_s) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    jobid,
                    prefix_s,
                    settings.username,
                    settings.jobname,
                    SystemClock.unix_s()
                ],
            )
            .map_err(sql_err(&db.path, "adding the job"))?;
        db.job_row = db
            .conn
            .query_row(
                "SELECT id FROM jobs WHERE jobid = ?1 AND prefix = ?2",
                params![jobid, prefix_s],
                |r| r.get(0),
            )
            .map_err(sql_err(&db.path, "finding the job"))?;
        Ok(db)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `runs` row this process's entries belong to, once a `START` or
    /// `RUN_START` has been logged.
    pub fn run_row(&self) -> Option<i64> {
        self.run_row
    }

    fn trace(&self, what: &str, values: &[&str]) {
        if self.debug {
            eprintln!("SCR: log db {}: {what} {values:?}", self.path.display());
        }
    }

    /// Record `e`, stamped `unix_s` shown in the zone `offset_s` east of
    /// UTC, as written by `host`; one transaction.
    pub fn insert(
        &mut self,
        unix_s: f64,
        offset_s: i64,
        host: &str,
        e: &Entry,
    ) -> Result<(), DbError> {
        let time = format_timestamp(unix_s, offset_s);
        let kind = entry_kind_name(e);
        self.trace("insert", &[&time, kind]);
        let path = self.path.clone();
        let job = self.job_row;
        let mut run = self.run_row;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(&path, "locking"))?;
        match e.kind {
            EntryKind::Event(t) if t.as_str() == "START" => {
                let adopt: Option<i64> = tx
                    .query_row(
                        "SELECT id FROM runs WHERE job_id = ?1 AND launched_by = 'run_loop' \
                         AND app_start_s IS NULL AND end_s IS NULL \
                         ORDER BY start_s DESC, id DESC LIMIT 1",
                        params![job],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql_err(&path, "finding the run"))?;
                let procs = to_i64(e.procs);
                let nodes = to_i64(e.nodes);
                run = Some(match adopt {
                    Some(id) => {
                        tx.execute(
                            "UPDATE runs SET app_start_s = ?2, procs = ?3, nodes = ?4 WHERE id = ?1",
                            params![id, unix_s, procs, nodes],
                        )
                        .map_err(sql_err(&path, "adopting the run"))?;
                        id
                    }
                    None => {
                        tx.execute(
                            "INSERT INTO runs (job_id, launched_by, host, start_s, app_start_s, \
                             last_s, procs, nodes) VALUES (?1, 'library', ?2, ?3, ?3, ?3, ?4, ?5)",
                            params![job, host, unix_s, procs, nodes],
                        )
                        .map_err(sql_err(&path, "adding the run"))?;
                        tx.last_insert_rowid()
                    }
                });
            }
            EntryKind::Event(t) if t.as_str() == "RUN_START" => {
                tx.execute(
                    "INSERT INTO runs (job_id, launched_by, host, start_s, last_s) \
                     VALUES (?1, 'run_loop', ?2, ?3, ?3)",
                    params![job, host, unix_s],
                )
                .map_err(sql_err(&path, "adding the run"))?;
                run = Some(tx.last_insert_rowid());
            }
            EntryKind::Event(t) if t.as_str() == "RUN_END" => {
                if run.is_none() {
                    run = tx
                        .query_row(
                            "SELECT id FROM runs WHERE job_id = ?1 AND end_s IS NULL \
                             ORDER BY start_s DESC, id DESC LIMIT 1",
                            params![job],
                            |r| r.get(0),
                        )
                        .optional()
                        .map_err(sql_err(&path, "finding the run"))?;
                }
                if let Some(id) = run {
                    tx.execute(
                        "UPDATE runs SET end_s = ?2, end_note = ?3 WHERE id = ?1",
                        params![id, unix_s, e.note],
                    )
                    .map_err(sql_err(&path, "ending the run"))?;
                }
            }
            _ => {}
        }
        match e.kind {
            EntryKind::Event(_) => tx.execute(
                "INSERT INTO events (job_id, run_id, time_s, time, host, type, dset, name, \
                 secs, note, procs, nodes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    job,
                    run,
                    unix_s,
                    time,
                    host,
                    kind,
                    to_i64(e.dset),
                    e.name,
                    e.secs,
                    e.note,
                    to_i64(e.procs),
                    to_i64(e.nodes)
                ],
            ),
            EntryKind::Xfer(_) => tx.execute(
                "INSERT INTO transfers (job_id, run_id, time_s, time, host, type, from_path, \
                 to_path, dset, name, secs, bytes, files) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    job,
                    run,
                    unix_s,
                    time,
                    host,
                    kind,
                    e.from,
                    e.to,
                    to_i64(e.dset),
                    e.name,
                    e.secs,
                    to_i64(e.bytes),
                    to_i64(e.files)
                ],
            ),
        }
        .map_err(sql_err(&path, "adding the entry"))?;
        if let Some(id) = run {
            tx.execute(
                "UPDATE runs SET last_s = MAX(last_s, ?2) WHERE id = ?1",
                params![id, unix_s],
            )
            .map_err(sql_err(&path, "updating the run"))?;
        }
        tx.commit().map_err(sql_err(&path, "committing"))?;
        self.run_row = run;
        Ok(())
    }
}

/// Every entry of the database at `path` as log records (the form the text
/// log parser gives), in time order; events before transfers at equal times.
/// Opens read-only: an older schema is read as it is, a newer one refused.
/// A job id recorded under several prefixes reads as `jobid@prefix`.
pub fn read_records(path: &Path) -> Result<Vec<Record>, DbError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql_err(path, "opening"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sql_err(path, "setting the busy timeout"))?;
    match schema_version(&conn, path)? {
        None | Some(0) => {
            return Err(DbError::Empty {
                path: path.to_path_buf(),
            })
        }
        Some(v) if v > SCHEMA_VERSION => {
            return Err(DbError::Newer {
                path: path.to_path_buf(),
                found: v,
                known: SCHEMA_VERSION,
            })
        }
        Some(_) => {}
    }
    let jobid = "CASE WHEN (SELECT COUNT(*) FROM jobs j2 WHERE j2.jobid = j.jobid) > 1 \
                 THEN j.jobid || '@' || j.prefix ELSE j.jobid END";
    let sql = format!(
        "SELECT 0 AS k, e.id, e.time_s, e.host, {jobid}, e.type, e.note, e.dset, e.name, e.secs, \
                NULL, NULL, e.procs, e.nodes, NULL, NULL \
           FROM events e JOIN jobs j ON j.id = e.job_id \
         UNION ALL \
         SELECT 1 AS k, t.id, t.time_s, t.host, {jobid}, t.type, NULL, t.dset, t.name, t.secs, \
                t.bytes, t.files, NULL, NULL, t.from_path, t.to_path \
           FROM transfers t JOIN jobs j ON j.id = t.job_id \
         ORDER BY 3, 1, 2"
    );
    let mut stmt = conn
        .prepare(&sql)
        .map_err(sql_err(path, "reading entries"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(RawEntry {
                transfer: r.get::<_, i64>(0)? != 0,
                id: r.get(1)?,
                time_s: r.get(2)?,
                host: r.get(3)?,
                jobid: r.get(4)?,
                ty: r.get(5)?,
                note: r.get(6)?,
                dset: r.get(7)?,
                name: r.get(8)?,
                secs: r.get(9)?,
                bytes: r.get(10)?,
                files: r.get(11)?,
                procs: r.get(12)?,
                nodes: r.get(13)?,
                from: r.get(14)?,
                to: r.get(15)?,
            })
        })
        .map_err(sql_err(path, "reading entries"))?;
    let mut out = Vec::new();
    for row in rows {
        let raw = row.map_err(sql_err(path, "reading an entry"))?;
        out.push(raw_to_record(raw, path)?);
    }
    Ok(out)
}

/// One row of `events` or `transfers` as stored, before it is checked.
#[derive(Debug, Clone)]
pub(crate) struct RawEntry {
    pub transfer: bool,
    pub id: i64,
    pub time_s: f64,
    pub host: String,
    pub jobid: String,
    pub ty: String,
    pub note: Option<String>,
    pub dset: Option<i64>,
    pub name: Option<String>,
    pub secs: Option<f64>,
    pub bytes: Option<i64>,
    pub files: Option<i64>,
    pub procs: Option<i64>,
    pub nodes: Option<i64>,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// Check a stored row and turn it into a log record; a value the log format
/// does not allow is [`DbError::BadRow`] naming the table and row id.
pub(crate) fn raw_to_record(raw: RawEntry, path: &Path) -> Result<Record, DbError> {
    let table = if raw.transfer { "transfers" } else { "events" };
    let id = raw.id;
    let bad = |what: String| DbError::BadRow {
        path: path.to_path_buf(),
        table,
        id,
        what,
    };
    let count = |field: &str, v: Option<i64>| -> Result<Option<u64>, DbError> {
        v.map(|v| u64::try_from(v).map_err(|_| bad(format!("{field}={v} is negative"))))
            .transpose()
    };
    if !raw.time_s.is_finite() {
        return Err(bad(format!("time_s={} is not a time", raw.time_s)));
    }
    if let Some(s) = raw.secs.filter(|s| !(s.is_finite() && *s >= 0.0)) {
        return Err(bad(format!("secs={s} is not a non-negative number")));
    }
    let mut other = std::collections::BTreeMap::new();
    if let Some(f) = raw.from {
        other.insert("from".to_string(), f);
    }
    if let Some(t) = raw.to {
        other.insert("to".to_string(), t);
    }
    Ok(Record {
        time_s: raw.time_s,
        host: Some(raw.host),
        jobid: Some(raw.jobid),
        kind: if raw.transfer {
            RecordKind::Transfer(raw.ty)
        } else {
            RecordKind::Event(raw.ty)
        },
        note: raw.note,
        dset: count("dset", raw.dset)?,
        name: raw.name,
        secs: raw.secs,
        bytes: count("bytes", raw.bytes)?.map(|b| b as f64),
        files: count("files", raw.files)?,
        procs: count("procs", raw.procs)?,
        nodes: count("nodes", raw.nodes)?,
        other,
    })
}

#[cfg(test)]
mod tests {
    use super::super::writer::{EventType, XferType};
    use super::*;

    fn settings(name: Option<&str>) -> DbSettings {
        DbSettings {
            name: name.map(str::to_owned),
            host: None,
            user: None,
            pass: None,
            debug: false,
            username: Some("u".into()),
            jobname: None,
        }
    }

    fn versions(conn: &Connection) -> Vec<(i64, String)> {
        let mut s = conn
            .prepare("SELECT version, what FROM schema_version ORDER BY version")
            .unwrap();
        let rows = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows
    }

    #[test]
    fn a_fresh_database_gets_every_migration_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log.db");
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(schema_version(&conn, &path).unwrap(), None);
        assert_eq!(migrate(&mut conn, &path).unwrap(), vec![1, 2]);
        assert_eq!(
            versions(&conn),
            MIGRATIONS
                .iter()
                .map(|m| (m.version, m.what.to_string()))
                .collect::<Vec<_>>()
        );
        for table in ["jobs", "runs", "events", "transfers"] {
            let n: i64 = conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
        // Re-opening applies nothing and keeps the rows.
        drop(conn);
        let mut conn = open_for_writing(&path).unwrap();
        assert_eq!(migrate(&mut conn, &path).unwrap(), Vec::<i64>::new());
        assert_eq!(versions(&conn).len(), MIGRATIONS.len());
        assert_eq!(schema_version(&conn, &path).unwrap(), Some(SCHEMA_VERSION));
    }

    #[test]
    fn an_older_database_is_upgraded_and_keeps_its_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("old.db");
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(
            migrate_to(&mut conn, &path, &MIGRATIONS[..1]).unwrap(),
            vec![1]
        );
        conn.execute(
            "INSERT INTO jobs (jobid, prefix, first_seen_s) VALUES ('7', '/p', 1.0)",
            [],
        )
        .unwrap();
        drop(conn);
        // A version-1 database reads as it is.
        assert!(read_records(&path).unwrap().is_empty());
        let mut conn = open_for_writing(&path).unwrap();
        assert_eq!(schema_version(&conn, &path).unwrap(), Some(2));
        let idx: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '%_by_job'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(idx, 3);
        let jobs: i64 = conn
            .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(jobs, 1);
        assert!(migrate(&mut conn, &path).unwrap().is_empty());
    }

    #[test]
    fn a_newer_database_is_refused_and_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("new.db");
        let mut conn = open_for_writing(&path).unwrap();
        conn.execute(
            "INSERT INTO schema_version (version, applied_at, what) VALUES (?1, 'later', 'future')",
            params![SCHEMA_VERSION + 1],
        )
        .unwrap();
        let before = versions(&conn);
        let e = migrate(&mut conn, &path).unwrap_err();
        assert!(
            matches!(e, DbError::Newer { found, known, .. }
                if found == SCHEMA_VERSION + 1 && known == SCHEMA_VERSION),
            "{e}"
        );
        assert!(e.to_string().contains("new.db"), "{e}");
        drop(conn);
        assert!(matches!(
            open_for_writing(&path),
            Err(DbError::Newer { .. })
        ));
        assert!(matches!(read_records(&path), Err(DbError::Newer { .. })));
        let s = settings(Some(path.to_str().unwrap()));
        assert!(matches!(
            DbLog::open(&s, tmp.path(), "1"),
            Err(DbError::Newer { .. })
        ));
        let conn = Connection::open(&path).unwrap();
        assert_eq!(versions(&conn), before, "nothing was downgraded");
    }

    #[test]
    fn foreign_and_empty_databases_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("other.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE accounts (id INTEGER)")
            .unwrap();
        drop(conn);
        let e = open_for_writing(&path).unwrap_err();
        assert!(
            matches!(&e, DbError::NotOurs { table, .. } if table == "accounts"),
            "{e}"
        );
        assert!(matches!(read_records(&path), Err(DbError::Empty { .. })));
        let missing = tmp.path().join("none.db");
        assert!(matches!(
            read_records(&missing),
            Err(DbError::Sqlite { .. })
        ));
        assert!(!missing.exists(), "reading never creates a database");
    }

    #[test]
    fn paths_and_server_settings() {
        let p = Path::new("/p");
        assert_eq!(db_path(p, None), Path::new("/p/.scr/log.db"));
        assert_eq!(db_path(p, Some("site.db")), Path::new("/p/.scr/site.db"));
        assert_eq!(
            db_path(p, Some("/var/scr/all.db")),
            Path::new("/var/scr/all.db")
        );
        // A host means the server: nothing listens on port 1, so opening
        // fails at once, naming the server and never the password.
        let mut s = settings(None);
        s.host = Some("127.0.0.1:1".into());
        s.pass = Some(Secret::new("hunter2"));
        let e = DbLog::open(&s, p, "1").unwrap_err();
        assert!(matches!(e, DbError::Server { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("postgresql://u@127.0.0.1:1/scr"), "{msg}");
        assert!(msg.contains("connecting"), "{msg}");
        assert!(!msg.contains("hunter2") && !format!("{s:?}").contains("hunter2"));
        s.host = Some("mysql://dbhost/scr".into());
        let e = DbLog::open(&s, p, "1").unwrap_err();
        assert!(matches!(e, DbError::BadServer { .. }), "{e}");
        assert!(e.to_string().contains("PostgreSQL"), "{e}");
    }

    #[test]
    fn runs_are_opened_adopted_and_closed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".scr")).unwrap();
        let s = settings(None);
        // The run loop opens a run; the application's START adopts it.
        let mut launcher = DbLog::open(&s, tmp.path(), "55").unwrap();
        let mut app = DbLog::open(&s, tmp.path(), "55").unwrap();
        launcher
            .insert(100.0, 0, "n0", &Entry::event(EventType::RunStart))
            .unwrap();
        app.insert(
            101.0,
            3600,
            "n1",
            &Entry::event(EventType::Start).procs_nodes(8, 2),
        )
        .unwrap();
        assert_eq!(app.run_row(), launcher.run_row());
        app.insert(
            150.0,
            3600,
            "n1",
            &Entry::xfer(XferType::Write)
                .dset(1)
                .secs(2.5)
                .bytes(10)
                .files(2)
                .to("/p/ckpt"),
        )
        .unwrap();
        launcher
            .insert(
                160.0,
                0,
                "n0",
                &Entry::event(EventType::RunEnd).note("failed: node n1 lost"),
            )
            .unwrap();
        // A second launch by the library alone opens its own run.
        let mut app2 = DbLog::open(&s, tmp.path(), "55").unwrap();
        app2.insert(
            200.0,
            0,
            "n0",
            &Entry::event(EventType::Start).procs_nodes(8, 2),
        )
        .unwrap();
        assert_ne!(app2.run_row(), app.run_row());
        let conn = Connection::open(app2.path()).unwrap();
        let mut st = conn
            .prepare(
                "SELECT launched_by, start_s, app_start_s, last_s, end_s, end_note, procs \
                 FROM runs ORDER BY id",
            )
            .unwrap();
        type RunRow = (
            String,
            f64,
            Option<f64>,
            f64,
            Option<f64>,
            Option<String>,
            Option<i64>,
        );
        let runs: Vec<RunRow> = st
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            runs,
            vec![
                (
                    "run_loop".into(),
                    100.0,
                    Some(101.0),
                    160.0,
                    Some(160.0),
                    Some("failed: node n1 lost".into()),
                    Some(8)
                ),
                (
                    "library".into(),
                    200.0,
                    Some(200.0),
                    200.0,
                    None,
                    None,
                    Some(8)
                ),
            ]
        );
        let recs = read_records(&s.path(tmp.path())).unwrap();
        let kinds: Vec<_> = recs.iter().map(|r| r.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                RecordKind::Event("RUN_START".into()),
                RecordKind::Event("START".into()),
                RecordKind::Transfer("WRITE".into()),
                RecordKind::Event("RUN_END".into()),
                RecordKind::Event("START".into()),
            ]
        );
        let w = &recs[2];
        assert_eq!(
            (
                w.dset,
                w.secs,
                w.bytes,
                w.files,
                w.host.as_deref(),
                w.jobid.as_deref()
            ),
            (
                Some(1),
                Some(2.5),
                Some(10.0),
                Some(2),
                Some("n1"),
                Some("55")
            )
        );
        assert_eq!(w.other.get("to").map(String::as_str), Some("/p/ckpt"));
        assert_eq!((recs[1].procs, recs[1].nodes), (Some(8), Some(2)));
        // The estimator sees the run loop's run, ended by a failure.
        let runs = crate::interval::estimate::runs(&recs);
        assert_eq!(runs[0].end, crate::interval::estimate::RunEnd::Failed);
        assert_eq!(runs[0].duration_s, 60.0, "{runs:?}");
    }

    #[test]
    fn bad_rows_are_reported_with_table_and_id() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log.db");
        let conn = open_for_writing(&path).unwrap();
        conn.execute_batch(
            "INSERT INTO jobs (id, jobid, prefix, first_seen_s) VALUES (1, 'j', '/p', 0);
             INSERT INTO transfers (id, job_id, time_s, time, host, type, secs)
                VALUES (41, 1, 5.0, 'x', 'h', 'WRITE', -3.0);",
        )
        .unwrap();
        let e = read_records(&path).unwrap_err();
        assert!(
            matches!(
                &e,
                DbError::BadRow {
                    table: "transfers",
                    id: 41,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("log.db"), "{e}");
    }
}
