//! The SQLite log database (SCR_LOG_DB_ENABLE): the same entries as the
//! text log, in an embedded SQLite file with tables `jobs`, `runs`,
//! `events` and `transfers` (docs/formats.md, "The log database").
//!
//! Where: `<prefix>/.scr/log.db` by default; `SCR_LOG_DB_NAME` names another
//! file (an absolute path, or a name relative to `<prefix>/.scr/`), so a
//! site can collect every job in one place. With `SCR_LOG_DB_HOST` set the
//! same tables live on a PostgreSQL server instead ([`super::server`]).
//!
//! This module only connects: [`SqliteStore`] is the [`Store`] through
//! which the shared schema ([`super::migrate`]), sink
//! ([`super::database`]) and mapping ([`super::row`]) reach the file.
//! Migrations and entries each take SQLite's write lock (`BEGIN
//! IMMEDIATE`) and wait up to [`BUSY_TIMEOUT`] for another process's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params_from_iter, Connection, OpenFlags};

use super::database::{read_all, DbLog};
use super::event::Record;
use super::migrate::migrate;
use super::store::{Col, Dialect, Store, Value};

// The settings, errors and schema the database sinks share, re-exported
// where callers have always found them.
pub use super::migrate::{Migration, MIGRATIONS, SCHEMA_VERSION};
pub use super::store::{db_path, DbError, DbSettings, Secret, DB_FILE};

/// How long a writer waits for another process's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite database log of one job on one process.
pub type SqliteLog = DbLog<SqliteStore>;

/// A connection to a SQLite log database.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

fn sql_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(rusqlite::Error) -> DbError + 'a {
    move |source| DbError::Sqlite {
        path: path.to_path_buf(),
        what,
        source,
    }
}

impl SqliteStore {
    /// Open (creating if missing) the file at `path` for writing, with the
    /// busy timeout and foreign keys on; the schema is left as it is.
    pub fn open(path: &Path) -> Result<SqliteStore, DbError> {
        let conn = Connection::open(path).map_err(sql_err(path, "opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_err(path, "setting the busy timeout"))?;
        conn.execute_batch("PRAGMA foreign_keys = ON")
            .map_err(sql_err(path, "enabling foreign keys"))?;
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Open an existing file read-only: reading never creates a database.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore, DbError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql_err(path, "opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_err(path, "setting the busy timeout"))?;
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
        })
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Int(Some(v)) => ToSqlOutput::from(*v),
            Value::Real(Some(v)) => ToSqlOutput::from(*v),
            Value::Text(Some(v)) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Value::Int(None) | Value::Real(None) | Value::Text(None) => {
                ToSqlOutput::Owned(rusqlite::types::Value::Null)
            }
        })
    }
}

fn read(row: &rusqlite::Row<'_>, cols: &[Col]) -> rusqlite::Result<Vec<Value>> {
    cols.iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(match c {
                Col::Int => Value::Int(row.get(i)?),
                Col::Real => Value::Real(row.get(i)?),
                Col::Text => Value::Text(row.get(i)?),
            })
        })
        .collect()
}

impl Store for SqliteStore {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn location(&self) -> &Path {
        &self.path
    }

    fn batch(&mut self, sql: &str, what: &'static str) -> Result<(), DbError> {
        let sql = Dialect::Sqlite.render(sql);
        self.conn
            .execute_batch(&sql)
            .map_err(sql_err(&self.path, what))
    }

    fn execute(&mut self, sql: &str, params: &[Value], what: &'static str) -> Result<(), DbError> {
        let sql = Dialect::Sqlite.render(sql);
        self.conn
            .execute(&sql, params_from_iter(params))
            .map(drop)
            .map_err(sql_err(&self.path, what))
    }

    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
        each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let sql = Dialect::Sqlite.render(sql);
        let err = |e| sql_err(&self.path, what)(e);
        let mut stmt = self.conn.prepare(&sql).map_err(err)?;
        let mut rows = stmt.query(params_from_iter(params)).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            each(read(r, cols).map_err(err)?)?;
        }
        Ok(())
    }
}

impl DbLog<SqliteStore> {
    /// Open the database file `settings` name for `prefix`, migrate it, and
    /// find or add this job's row.
    pub fn open(settings: &DbSettings, prefix: &Path, jobid: &str) -> Result<SqliteLog, DbError> {
        let store = SqliteStore::open(&settings.path(prefix))?;
        DbLog::open_on(store, settings, prefix, jobid)
    }
}

/// Open (creating if missing) the database at `path` for writing and bring
/// its schema up to date.
pub fn open_for_writing(path: &Path) -> Result<SqliteStore, DbError> {
    let mut store = SqliteStore::open(path)?;
    migrate(&mut store)?;
    Ok(store)
}

/// Every entry of the database at `path` as log records (the form the text
/// log parser gives), in time order; events before transfers at equal times.
/// Opens read-only: an older schema is read as it is, a newer one refused.
/// A job id recorded under several prefixes reads as `jobid@prefix`.
pub fn read_records(path: &Path) -> Result<Vec<Record>, DbError> {
    read_all(&mut SqliteStore::open_read_only(path)?)
}

/// [`read_records`] handing each record to `each` as its row is read
/// (`scr interval --db`: memory holds one row, not the database).
pub fn each_record(path: &Path, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    super::database::each_record(&mut SqliteStore::open_read_only(path)?, each)
}

#[cfg(test)]
mod tests {
    use super::super::event::{Entry, EntryKind, EventType, XferType};
    use super::super::migrate::{migrate_to, schema_version};
    use super::*;
    use rusqlite::params;

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
        let mut st = SqliteStore::open(&path).unwrap();
        assert_eq!(schema_version(&mut st).unwrap(), None);
        assert_eq!(migrate(&mut st).unwrap(), vec![1, 2]);
        let conn = &st.conn;
        assert_eq!(
            versions(conn),
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
        drop(st);
        let mut st = open_for_writing(&path).unwrap();
        assert_eq!(migrate(&mut st).unwrap(), Vec::<i64>::new());
        assert_eq!(versions(&st.conn).len(), MIGRATIONS.len());
        assert_eq!(schema_version(&mut st).unwrap(), Some(SCHEMA_VERSION));
    }

    #[test]
    fn an_older_database_is_upgraded_and_keeps_its_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("old.db");
        let mut st = SqliteStore::open(&path).unwrap();
        assert_eq!(migrate_to(&mut st, &MIGRATIONS[..1]).unwrap(), vec![1]);
        st.conn
            .execute(
                "INSERT INTO jobs (jobid, prefix, first_seen_s) VALUES ('7', '/p', 1.0)",
                [],
            )
            .unwrap();
        drop(st);
        // A version-1 database reads as it is.
        assert!(read_records(&path).unwrap().is_empty());
        let mut st = open_for_writing(&path).unwrap();
        assert_eq!(schema_version(&mut st).unwrap(), Some(2));
        let idx: i64 = st
            .conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '%_by_job'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(idx, 3);
        let jobs: i64 = st
            .conn
            .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(jobs, 1);
        assert!(migrate(&mut st).unwrap().is_empty());
    }

    #[test]
    fn a_newer_database_is_refused_and_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("new.db");
        let mut st = open_for_writing(&path).unwrap();
        st.conn
            .execute(
                "INSERT INTO schema_version (version, applied_at, what) VALUES (?1, 'later', 'future')",
                params![SCHEMA_VERSION + 1],
            )
            .unwrap();
        let before = versions(&st.conn);
        let e = migrate(&mut st).unwrap_err();
        assert!(
            matches!(e, DbError::Newer { found, known, .. }
                if found == SCHEMA_VERSION + 1 && known == SCHEMA_VERSION),
            "{e}"
        );
        assert!(e.to_string().contains("new.db"), "{e}");
        drop(st);
        assert!(matches!(
            open_for_writing(&path),
            Err(DbError::Newer { .. })
        ));
        assert!(matches!(read_records(&path), Err(DbError::Newer { .. })));
        let s = settings(Some(path.to_str().unwrap()));
        assert!(matches!(
            SqliteLog::open(&s, tmp.path(), "1"),
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
    fn runs_are_opened_adopted_and_closed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".scr")).unwrap();
        let s = settings(None);
        // The run loop opens a run; the application's START adopts it.
        let mut launcher = SqliteLog::open(&s, tmp.path(), "55").unwrap();
        let mut app = SqliteLog::open(&s, tmp.path(), "55").unwrap();
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
        let mut app2 = SqliteLog::open(&s, tmp.path(), "55").unwrap();
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
        // Streamed row by row, the same records in the same order.
        let mut streamed = Vec::new();
        each_record(&s.path(tmp.path()), &mut |r| streamed.push(r)).unwrap();
        assert_eq!(streamed, recs);
        let kinds: Vec<_> = recs.iter().map(|r| r.entry.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                EntryKind::Event(EventType::RunStart),
                EntryKind::Event(EventType::Start),
                EntryKind::Xfer(XferType::Write),
                EntryKind::Event(EventType::RunEnd),
                EntryKind::Event(EventType::Start),
            ]
        );
        let w = &recs[2];
        assert_eq!(
            (
                w.entry.dset,
                w.entry.secs,
                w.entry.bytes,
                w.entry.files,
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
        assert_eq!(w.entry.to.as_deref(), Some("/p/ckpt"));
        assert_eq!(
            (recs[1].entry.procs, recs[1].entry.nodes),
            (Some(8), Some(2))
        );
        // The estimator sees the run loop's run, ended by a failure.
        let runs = crate::interval::estimate::runs(&recs);
        assert_eq!(runs[0].end, crate::interval::estimate::RunEnd::Failed);
        assert_eq!(runs[0].duration_s, 60.0, "{runs:?}");
    }

    #[test]
    fn bad_rows_are_reported_with_table_and_id() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log.db");
        let st = open_for_writing(&path).unwrap();
        st.conn
            .execute_batch(
                "INSERT INTO jobs (id, jobid, prefix, first_seen_s) VALUES (1, 'j', '/p', 0);
             INSERT INTO transfers (id, job_id, time_s, time, host, type, secs)
                VALUES (40, 1, 4.0, 'x', 'h', 'WRITE', 3.0);
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
        // Streamed, the rows before the bad one arrive, then its error.
        let mut before = Vec::new();
        let e = each_record(&path, &mut |r| before.push(r.entry.secs)).unwrap_err();
        assert!(matches!(&e, DbError::BadRow { id: 41, .. }), "{e}");
        assert_eq!(before, vec![Some(3.0)]);
    }
}
