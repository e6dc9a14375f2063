//! What the log databases share below their sinks: the settings
//! (`SCR_LOG_DB_*`), the errors, and [`Store`], the small trait through
//! which the one migration runner ([`super::migrate`]), the one entry→row
//! mapping ([`super::row`]) and the one database sink
//! ([`super::database`]) speak to SQLite ([`super::db`]), PostgreSQL
//! ([`super::server`]) or MySQL/MariaDB ([`super::mysql`]).
//!
//! Statements are written once, in a portable form that each store renders
//! for its server ([`Dialect::render`]): `?1`, `?2` … placeholders, and
//! `{ID}`, `{INT}`, `{REAL}`, `{GREATEST}` where the servers spell a type or
//! a function differently; `{CAST_INT}`, `{CAST_REAL}`, `{CAST_TEXT}` for
//! the type of a `CAST`; `{JOBID_KEY}` and `{PREFIX_KEY}` for the two text
//! columns of the jobs' unique key (MySQL indexes no unbounded `TEXT`, and
//! compares its text as bytes only in binary strings);
//! `{TABLE}` after a table's closing parenthesis (MySQL's engine and
//! byte-exact collation).

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};

/// Default database file name below `<prefix>/.scr/`.
pub const DB_FILE: &str = "log.db";

/// Errors of the database log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// SQLite refused an operation.
    #[cfg(feature = "logdb-sqlite")]
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
    /// A database that is not an SCR log database.
    #[error("{path} is a SQLite database but not an SCR log (it has table {table:?} and no schema_version): refusing to write into it")]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// One of its tables.
        table: String,
    },
    /// Reading: the database has no SCR log schema at all.
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
    /// A statement that must give a row (the job just added, the id of a
    /// run just inserted) gave none.
    #[error("log database {path}: {what}: no row")]
    NoRow {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
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
    #[cfg(feature = "logdb-postgres")]
    #[error("log database {server}: {what}: {source}")]
    Server {
        /// `postgresql://user@host:port/dbname` (never the password).
        server: String,
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: Box<postgres::Error>,
    },
    /// Another writer held the database's lock for this job (or its
    /// migrations) longer than the wait allows.
    #[error("log database {path}: {what}: gave up waiting {secs} s for another writer's lock")]
    LockTimeout {
        /// The server.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The wait.
        secs: i64,
    },
    /// The MySQL/MariaDB log database server refused an operation or could
    /// not be reached.
    #[cfg(feature = "logdb-mysql")]
    #[error("log database {server}: {what}: {source}")]
    MySql {
        /// `mysql://user@host:port/dbname` (never the password).
        server: String,
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: Box<mysql::Error>,
    },
    /// The server's database holds SCR 3.1's own tables, which key a job by
    /// user and `SCR_JOB_NAME`, and this job has no job name (SCR 3.1 logs
    /// nothing there without one either).
    #[error("log database {server} has SCR 3.1's tables, which name a job by its user and SCR_JOB_NAME: set SCR_JOB_NAME to log there (or SCR_LOG_DB_NAME to a database of this library's own tables)", server = server.display())]
    Scr31NoJobName {
        /// The server, as shown in messages.
        server: PathBuf,
    },
    /// A logging parameter has a bad value.
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// A setting asks for a log database that this build of the library
    /// leaves out (its cargo feature is off): refused, never ignored.
    #[error("{param} asks for the {what}, but this scr library was built without the cargo feature `{feature}`: enable it on the scr dependency (features = [\"{feature}\"]) or {instead}")]
    NotBuilt {
        /// The parameter and its value (`SCR_LOG_DB_ENABLE=1`).
        param: String,
        /// The database it asks for.
        what: &'static str,
        /// The cargo feature of `scr` that builds it.
        feature: &'static str,
        /// The other way out, for the message.
        instead: &'static str,
    },
}

impl DbError {
    /// The SQLite log (SCR_LOG_DB_ENABLE=1 without a host) in a build
    /// without `logdb-sqlite`.
    pub fn sqlite_not_built() -> DbError {
        DbError::NotBuilt {
            param: "SCR_LOG_DB_ENABLE=1".into(),
            what: "SQLite log database",
            feature: "logdb-sqlite",
            instead: "set SCR_LOG_DB_ENABLE=0",
        }
    }

    /// The MySQL log (SCR_LOG_DB_HOST=mysql://…) in a build without
    /// `logdb-mysql`.
    pub fn mysql_not_built(host: &str) -> DbError {
        DbError::NotBuilt {
            param: format!("SCR_LOG_DB_HOST={}", crate::config::secret::redact(host)),
            what: "MySQL/MariaDB log database",
            feature: "logdb-mysql",
            instead: "unset SCR_LOG_DB_HOST",
        }
    }

    /// The server log (SCR_LOG_DB_HOST) in a build without `logdb-postgres`.
    pub fn postgres_not_built(host: &str) -> DbError {
        DbError::NotBuilt {
            param: format!("SCR_LOG_DB_HOST={}", crate::config::secret::redact(host)),
            what: "PostgreSQL log database",
            feature: "logdb-postgres",
            instead: "unset SCR_LOG_DB_HOST",
        }
    }
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
    /// `SCR_LOG_DB_HOST`: a PostgreSQL server (or a `mysql://` URL: a
    /// MySQL/MariaDB server) instead of a file.
    pub host: Option<String>,
    /// `SCR_LOG_DB_USER` (server only; default the job's user).
    pub user: Option<String>,
    /// `SCR_LOG_DB_PASS` (server only).
    pub pass: Option<Secret>,
    /// `SCR_LOG_DB_DEBUG` > 0: echo each entry's statements to stderr.
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

    /// The database file for `prefix` (when no host is set).
    pub fn path(&self, prefix: &Path) -> PathBuf {
        db_path(prefix, self.name.as_deref())
    }
}

/// Whether SCR_LOG_DB_HOST (or `scr interval --db`) names a MySQL/MariaDB
/// server (`mysql://` or `mariadb://`); known in every build, so a build
/// without that server refuses it by name.
pub fn is_mysql_url(s: &str) -> bool {
    let l = s.trim().to_ascii_lowercase();
    l.starts_with("mysql://") || l.starts_with("mariadb://")
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

/// A value bound to a statement or read from a row: the three column types
/// of the log's tables, each possibly NULL.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `{INT}` (and ids).
    Int(Option<i64>),
    /// `{REAL}`.
    Real(Option<f64>),
    /// `TEXT`.
    Text(Option<String>),
}

impl Value {
    /// The integer, when this is a non-NULL `Int`.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => *v,
            _ => None,
        }
    }
    /// The number, when this is a non-NULL `Real`.
    pub fn real(&self) -> Option<f64> {
        match self {
            Value::Real(v) => *v,
            _ => None,
        }
    }
    /// The text, when this is a non-NULL `Text`.
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(v) => v.as_deref(),
            _ => None,
        }
    }
}

/// The type a query's column is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// [`Value::Int`].
    Int,
    /// [`Value::Real`].
    Real,
    /// [`Value::Text`].
    Text,
}

/// Which server's SQL a store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
    /// A MySQL or MariaDB server (SCR 3.1's log database).
    MySql,
}

/// `jobs.jobid` and `jobs.prefix` on MySQL, in bytes: binary strings, so
/// they compare byte for byte as in SQLite and PostgreSQL (MySQL's text
/// collations fold case or ignore trailing spaces), and their unique key
/// fits InnoDB's 3,072 bytes. A longer job id or prefix is refused by the
/// server (strict mode): a warning, never cut into another job's row.
pub const MYSQL_KEY_BYTES: (u32, u32) = (512, 2048);

impl Dialect {
    /// `sql` (the portable form) as this server reads it.
    pub fn render(self, sql: &str) -> String {
        let words: [(&str, &str); 10] = match self {
            Dialect::Sqlite => [
                ("{ID}", "INTEGER PRIMARY KEY"),
                ("{INT}", "INTEGER"),
                ("{REAL}", "REAL"),
                ("{GREATEST}", "MAX"),
                ("{CAST_INT}", "INTEGER"),
                ("{CAST_REAL}", "REAL"),
                ("{CAST_TEXT}", "TEXT"),
                ("{JOBID_KEY}", "TEXT"),
                ("{PREFIX_KEY}", "TEXT"),
                ("{TABLE}", ""),
            ],
            Dialect::Postgres => [
                (
                    "{ID}",
                    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                ),
                ("{INT}", "BIGINT"),
                ("{REAL}", "DOUBLE PRECISION"),
                ("{GREATEST}", "GREATEST"),
                ("{CAST_INT}", "BIGINT"),
                ("{CAST_REAL}", "DOUBLE PRECISION"),
                ("{CAST_TEXT}", "TEXT"),
                ("{JOBID_KEY}", "TEXT"),
                ("{PREFIX_KEY}", "TEXT"),
                ("{TABLE}", ""),
            ],
            Dialect::MySql => [
                ("{ID}", "BIGINT AUTO_INCREMENT PRIMARY KEY"),
                ("{INT}", "BIGINT"),
                ("{REAL}", "DOUBLE"),
                ("{GREATEST}", "GREATEST"),
                ("{CAST_INT}", "SIGNED"),
                ("{CAST_REAL}", "DOUBLE"),
                ("{CAST_TEXT}", "CHAR"),
                ("{JOBID_KEY}", "VARBINARY(512)"),
                ("{PREFIX_KEY}", "VARBINARY(2048)"),
                (
                    "{TABLE}",
                    " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
                ),
            ],
        };
        let mut out = words
            .iter()
            .fold(sql.to_string(), |s, (from, to)| s.replace(from, to));
        match self {
            // `?N` is SQLite's numbered placeholder, `$N` PostgreSQL's; the
            // statements hold no other `?` (every value is a parameter).
            Dialect::Postgres => out = out.replace('?', "$"),
            // MySQL's DDL commits by itself, so a migration cut short
            // between a table and its record is applied again: each
            // CREATE TABLE must then find its table there. (Its `?N` become
            // positional `?` where the statement is run: `mysql::positional`.)
            Dialect::MySql => out = out.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS "),
            Dialect::Sqlite => {}
        }
        out
    }

    /// Add the row of a job unless its (jobid, prefix) is there already.
    pub(crate) fn insert_job(self) -> &'static str {
        match self {
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO jobs (jobid, prefix, username, jobname, first_seen_s) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (jobid, prefix) DO NOTHING"
            }
            // Not INSERT IGNORE, which would also truncate a value too long
            // for its column into another job's key.
            Dialect::MySql => {
                "INSERT INTO jobs (jobid, prefix, username, jobname, first_seen_s) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON DUPLICATE KEY UPDATE id = id"
            }
        }
    }

    /// One text column, non-NULL when the table `schema_version` exists.
    pub(crate) fn has_schema_version(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            }
            Dialect::Postgres => "SELECT to_regclass('schema_version')::text",
            Dialect::MySql => {
                "SELECT table_name FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = 'schema_version'"
            }
        }
    }

    /// One text column: a table that makes a database without
    /// `schema_version` not ours. A SQLite file must hold nothing else; a
    /// server database may be shared, so only our own table names count.
    pub(crate) fn foreign_table(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%' LIMIT 1"
            }
            Dialect::Postgres => {
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() \
                 AND table_name IN ('jobs', 'runs', 'events', 'transfers') LIMIT 1"
            }
            Dialect::MySql => {
                "SELECT table_name FROM information_schema.tables \
                 WHERE table_schema = DATABASE() \
                 AND table_name IN ('jobs', 'runs', 'events', 'transfers') LIMIT 1"
            }
        }
    }
}

/// A connection to one log database, as the shared code needs it. Each
/// method takes a statement in the portable form and renders it with
/// [`Dialect::render`]; `what` names the step in the error.
pub trait Store: Send + std::fmt::Debug {
    /// The server's SQL.
    fn dialect(&self) -> Dialect;
    /// The database file, or the server as `postgresql://user@host:port/db`
    /// (never the password): for messages.
    fn location(&self) -> &Path;
    /// Run statements without parameters or results.
    fn batch(&mut self, sql: &str, what: &'static str) -> Result<(), DbError>;
    /// Run one statement with `params` (`?1` is `params[0]`).
    fn execute(&mut self, sql: &str, params: &[Value], what: &'static str) -> Result<(), DbError>;
    /// Run one query; each row's columns read as `cols` say, handed to
    /// `each` as it is read, so the rows need not all be in memory at
    /// once; the first error `each` returns ends the query.
    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
        each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
    /// Run one INSERT (`?1` is `params[0]`) and give the `id` of the row it
    /// added: `RETURNING id` where the server has it, MySQL's
    /// `LAST_INSERT_ID()` of this connection otherwise.
    fn insert_id(
        &mut self,
        sql: &str,
        params: &[Value],
        what: &'static str,
    ) -> Result<i64, DbError> {
        let rows = self.query(&format!("{sql} RETURNING id"), params, &[Col::Int], what)?;
        rows.first()
            .and_then(|r| r[0].int())
            .ok_or_else(|| DbError::NoRow {
                path: self.location().to_path_buf(),
                what,
            })
    }
    /// [`Store::query_each`], every row collected.
    fn query(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
    ) -> Result<Vec<Vec<Value>>, DbError> {
        let mut out = Vec::new();
        self.query_each(sql, params, cols, what, &mut |r| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }
}

/// A store chosen at run time (the server a URL names) is a store.
impl Store for Box<dyn Store> {
    fn dialect(&self) -> Dialect {
        (**self).dialect()
    }
    fn location(&self) -> &Path {
        (**self).location()
    }
    fn batch(&mut self, sql: &str, what: &'static str) -> Result<(), DbError> {
        (**self).batch(sql, what)
    }
    fn execute(&mut self, sql: &str, params: &[Value], what: &'static str) -> Result<(), DbError> {
        (**self).execute(sql, params, what)
    }
    fn insert_id(
        &mut self,
        sql: &str,
        params: &[Value],
        what: &'static str,
    ) -> Result<i64, DbError> {
        (**self).insert_id(sql, params, what)
    }
    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
        each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        (**self).query_each(sql, params, cols, what, each)
    }
}

/// Key of the server's advisory lock that serialises migrations.
const MIGRATION_LOCK: i64 = 0x5343_525f_4c4f_4744; // "SCR_LOGD"

/// Whom a transaction keeps out until it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// Every other migrator of the database.
    Migrations,
    /// Every other writer of the job with this `jobs` row.
    Job(i64),
}

/// Run `body` in one transaction that holds `lock`: SQLite's `BEGIN
/// IMMEDIATE` (the database's write lock), or on the server a transaction
/// holding an advisory lock. Committed when `body` succeeds, rolled back
/// otherwise.
pub(crate) fn transaction<T>(
    s: &mut dyn Store,
    lock: Lock,
    body: impl FnOnce(&mut dyn Store) -> Result<T, DbError>,
) -> Result<T, DbError> {
    let what = match lock {
        Lock::Migrations => "locking for a migration",
        Lock::Job(_) => "locking",
    };
    let key = match lock {
        Lock::Migrations => MIGRATION_LOCK,
        Lock::Job(row) => row,
    };
    match s.dialect() {
        Dialect::Sqlite => s.batch("BEGIN IMMEDIATE", what)?,
        Dialect::Postgres => {
            s.batch("BEGIN", "starting a transaction")?;
            let locked = s.execute(
                "SELECT pg_advisory_xact_lock(?1)",
                &[Value::Int(Some(key))],
                what,
            );
            if let Err(e) = locked {
                rollback(s);
                return Err(e);
            }
        }
        // A named lock of the session (MySQL has no transaction-scoped
        // one), released after the commit or rollback; named after the
        // database, since the server's lock names are global.
        Dialect::MySql => {
            let got = s.query(
                "SELECT GET_LOCK(SHA1(CONCAT(DATABASE(), ':', ?1)), ?2)",
                &[Value::Int(Some(key)), Value::Int(Some(LOCK_WAIT_S))],
                &[Col::Int],
                what,
            )?;
            if got.first().and_then(|r| r[0].int()) != Some(1) {
                return Err(DbError::LockTimeout {
                    path: s.location().to_path_buf(),
                    what,
                    secs: LOCK_WAIT_S,
                });
            }
            s.batch("START TRANSACTION", "starting a transaction")
                .inspect_err(|_| release(s, key))?;
        }
    }
    let out = match body(&mut *s).and_then(|v| s.batch("COMMIT", "committing").map(|()| v)) {
        Ok(v) => Ok(v),
        Err(e) => {
            rollback(s);
            Err(e)
        }
    };
    if s.dialect() == Dialect::MySql {
        release(s, key);
    }
    out
}

/// The bound on one statement (PostgreSQL) or one wait for the server
/// (MySQL) when reading a whole log back (`scr interval --db`, the adaptive
/// policy's history): a site's database of a million runs takes longer
/// than a writer's 10 s to sort and send (21 s for MariaDB, over 10 s for
/// PostgreSQL, on this project's 2-core machine; results/hardening.md).
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// How long a MySQL writer waits for another's lock on the same job (or
/// migration) before giving up with [`DbError::LockTimeout`].
pub const LOCK_WAIT_S: i64 = 10;

/// Release a MySQL named lock; a failure (the connection is gone) releases
/// it with the session.
fn release(s: &mut dyn Store, key: i64) {
    let _ = s.query(
        "SELECT RELEASE_LOCK(SHA1(CONCAT(DATABASE(), ':', ?1)))",
        &[Value::Int(Some(key))],
        &[Col::Int],
        "unlocking",
    );
}

/// End a failed transaction; the failure that got here is what the caller
/// reports, so a failed rollback (the connection is gone) adds nothing.
fn rollback(s: &mut dyn Store) {
    let _ = s.batch("ROLLBACK", "rolling back");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_render_for_each_server() {
        let sql = "UPDATE runs SET last_s = {GREATEST}(last_s, ?2) WHERE id = ?1";
        assert_eq!(
            Dialect::Sqlite.render(sql),
            "UPDATE runs SET last_s = MAX(last_s, ?2) WHERE id = ?1"
        );
        assert_eq!(
            Dialect::Postgres.render(sql),
            "UPDATE runs SET last_s = GREATEST(last_s, $2) WHERE id = $1"
        );
        assert_eq!(
            Dialect::Postgres.render("x {ID}, y {INT}, z {REAL}"),
            "x BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, y BIGINT, z DOUBLE PRECISION"
        );
    }

    #[test]
    fn paths_and_secrets() {
        let p = Path::new("/p");
        assert_eq!(db_path(p, None), Path::new("/p/.scr/log.db"));
        assert_eq!(db_path(p, Some("site.db")), Path::new("/p/.scr/site.db"));
        assert_eq!(
            db_path(p, Some("/var/scr/all.db")),
            Path::new("/var/scr/all.db")
        );
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }
}
