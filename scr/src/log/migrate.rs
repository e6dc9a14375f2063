//! The log databases' schema, versioned: [`MIGRATIONS`], defined once and
//! rendered for SQLite or PostgreSQL, and the one runner that applies them
//! through [`Store`].
//!
//! `schema_version` lists every migration applied (version, when, what).
//! Opening for writing applies the missing ones, each in its own
//! transaction that holds the migration lock and re-reads the version
//! first, so processes opening a new database at once apply each migration
//! exactly once. A database written by a newer version of this library is
//! refused ([`DbError::Newer`]), never downgraded or written into; one with
//! tables but no `schema_version` is not ours and is refused too
//! ([`DbError::NotOurs`]).

use super::store::{transaction, Col, DbError, Lock, Store, Value};
use super::time::{format_timestamp, local_offset_s, now_s};

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version reached after it (1, 2, ...).
    pub version: i64,
    /// What it does, recorded in `schema_version.what`.
    pub what: &'static str,
    /// The statements, in the portable form ([`super::store::Dialect::render`]).
    pub sql: &'static str,
}

/// Every migration, in order; the last one's version is
/// [`SCHEMA_VERSION`]. Never edit a released step: add a new one (a test
/// pins what each step renders to on both servers).
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "tables jobs, runs, events, transfers",
        sql: "
CREATE TABLE jobs (
    id           {ID},
    jobid        {JOBID_KEY} NOT NULL,
    prefix       {PREFIX_KEY} NOT NULL,
    username     TEXT,
    jobname      TEXT,
    first_seen_s {REAL} NOT NULL,
    UNIQUE (jobid, prefix)
){TABLE};
CREATE TABLE runs (
    id          {ID},
    job_id      {INT} NOT NULL REFERENCES jobs(id),
    launched_by TEXT NOT NULL CHECK (launched_by IN ('library', 'run_loop')),
    host        TEXT NOT NULL,
    start_s     {REAL} NOT NULL,
    app_start_s {REAL},
    last_s      {REAL} NOT NULL,
    end_s       {REAL},
    end_note    TEXT,
    procs       {INT},
    nodes       {INT}
){TABLE};
CREATE TABLE events (
    id       {ID},
    job_id   {INT} NOT NULL REFERENCES jobs(id),
    run_id   {INT} REFERENCES runs(id),
    time_s   {REAL} NOT NULL,
    time     TEXT NOT NULL,
    host     TEXT NOT NULL,
    type     TEXT NOT NULL,
    dset     {INT},
    name     TEXT,
    secs     {REAL},
    note     TEXT,
    procs    {INT},
    nodes    {INT}
){TABLE};
CREATE TABLE transfers (
    id        {ID},
    job_id    {INT} NOT NULL REFERENCES jobs(id),
    run_id    {INT} REFERENCES runs(id),
    time_s    {REAL} NOT NULL,
    time      TEXT NOT NULL,
    host      TEXT NOT NULL,
    type      TEXT NOT NULL,
    from_path TEXT,
    to_path   TEXT,
    dset      {INT},
    name      TEXT,
    secs      {REAL},
    bytes     {INT},
    files     {INT}
){TABLE};",
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

/// The table of applied migrations, created with the first one.
const SCHEMA_VERSION_TABLE: &str = "CREATE TABLE schema_version (
                        version    {INT} PRIMARY KEY,
                        applied_at TEXT NOT NULL,
                        what       TEXT NOT NULL){TABLE}";

/// The first text column of the first row of `sql`, if any and not NULL.
fn first_text(s: &mut dyn Store, sql: &str, what: &'static str) -> Result<Option<String>, DbError> {
    let rows = s.query(sql, &[], &[Col::Text], what)?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|r| r[0].text().map(str::to_owned)))
}

/// The newest migration applied, or `None` when `schema_version` is absent.
pub fn schema_version(s: &mut dyn Store) -> Result<Option<i64>, DbError> {
    let has = s.dialect().has_schema_version();
    if first_text(s, has, "reading the schema")?.is_none() {
        return Ok(None);
    }
    let rows = s.query(
        "SELECT MAX(version) FROM schema_version",
        &[],
        &[Col::Int],
        "reading schema_version",
    )?;
    Ok(Some(rows.first().and_then(|r| r[0].int()).unwrap_or(0)))
}

/// The schema version of a database about to be read: an older one reads
/// as it is; none at all is [`DbError::Empty`], a newer one
/// [`DbError::Newer`].
pub fn check_readable(s: &mut dyn Store) -> Result<i64, DbError> {
    let path = s.location().to_path_buf();
    match schema_version(s)? {
        None | Some(0) => Err(DbError::Empty { path }),
        Some(v) if v > SCHEMA_VERSION => Err(DbError::Newer {
            path,
            found: v,
            known: SCHEMA_VERSION,
        }),
        Some(v) => Ok(v),
    }
}

/// Bring the database to [`SCHEMA_VERSION`] with [`MIGRATIONS`].
pub fn migrate(s: &mut dyn Store) -> Result<Vec<i64>, DbError> {
    migrate_to(s, MIGRATIONS)
}

/// Bring the database to the last of `migrations` (tests build older
/// databases with a prefix of [`MIGRATIONS`]), applying each missing step
/// once in its own transaction under the migration lock. Returns the
/// versions this call applied.
pub fn migrate_to(s: &mut dyn Store, migrations: &[Migration]) -> Result<Vec<i64>, DbError> {
    let known = migrations.last().map_or(0, |m| m.version);
    let mut applied = Vec::new();
    for m in migrations {
        if transaction(s, Lock::Migrations, |s| apply(s, m, known))? {
            applied.push(m.version);
        }
    }
    Ok(applied)
}

/// Inside the migration lock: apply `m` unless the database already has
/// it; whether it was applied.
fn apply(s: &mut dyn Store, m: &Migration, known: i64) -> Result<bool, DbError> {
    let version = match schema_version(s)? {
        Some(v) => v,
        None => {
            let foreign = s.dialect().foreign_table();
            if let Some(table) = first_text(s, foreign, "reading the schema")? {
                return Err(DbError::NotOurs {
                    path: s.location().to_path_buf(),
                    table,
                });
            }
            s.batch(SCHEMA_VERSION_TABLE, "creating schema_version")?;
            0
        }
    };
    if version > known {
        return Err(DbError::Newer {
            path: s.location().to_path_buf(),
            found: version,
            known,
        });
    }
    if version >= m.version {
        return Ok(false);
    }
    s.batch(m.sql, "applying a migration")?;
    let now = now_s();
    s.execute(
        "INSERT INTO schema_version (version, applied_at, what) VALUES (?1, ?2, ?3)",
        &[
            Value::Int(Some(m.version)),
            Value::Text(Some(format_timestamp(now, local_offset_s(now as i64)))),
            Value::Text(Some(m.what.to_string())),
        ],
        "recording a migration",
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::store::Dialect;
    use super::*;

    /// The schema as the two servers received it before the migrations were
    /// written once: rendering must give exactly these statements, or a
    /// database made by an older library would differ from a new one.
    const SQLITE_V1: &str = "
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
);";

    const POSTGRES_V1: &str = "
CREATE TABLE jobs (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    jobid        TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    username     TEXT,
    jobname      TEXT,
    first_seen_s DOUBLE PRECISION NOT NULL,
    UNIQUE (jobid, prefix)
);
CREATE TABLE runs (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    job_id      BIGINT NOT NULL REFERENCES jobs(id),
    launched_by TEXT NOT NULL CHECK (launched_by IN ('library', 'run_loop')),
    host        TEXT NOT NULL,
    start_s     DOUBLE PRECISION NOT NULL,
    app_start_s DOUBLE PRECISION,
    last_s      DOUBLE PRECISION NOT NULL,
    end_s       DOUBLE PRECISION,
    end_note    TEXT,
    procs       BIGINT,
    nodes       BIGINT
);
CREATE TABLE events (
    id       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    job_id   BIGINT NOT NULL REFERENCES jobs(id),
    run_id   BIGINT REFERENCES runs(id),
    time_s   DOUBLE PRECISION NOT NULL,
    time     TEXT NOT NULL,
    host     TEXT NOT NULL,
    type     TEXT NOT NULL,
    dset     BIGINT,
    name     TEXT,
    secs     DOUBLE PRECISION,
    note     TEXT,
    procs    BIGINT,
    nodes    BIGINT
);
CREATE TABLE transfers (
    id        BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    job_id    BIGINT NOT NULL REFERENCES jobs(id),
    run_id    BIGINT REFERENCES runs(id),
    time_s    DOUBLE PRECISION NOT NULL,
    time      TEXT NOT NULL,
    host      TEXT NOT NULL,
    type      TEXT NOT NULL,
    from_path TEXT,
    to_path   TEXT,
    dset      BIGINT,
    name      TEXT,
    secs      DOUBLE PRECISION,
    bytes     BIGINT,
    files     BIGINT
);";

    #[test]
    fn migrations_render_to_the_schema_of_earlier_releases() {
        assert_eq!(Dialect::Sqlite.render(MIGRATIONS[0].sql), SQLITE_V1);
        assert_eq!(Dialect::Postgres.render(MIGRATIONS[0].sql), POSTGRES_V1);
        for d in [Dialect::Sqlite, Dialect::Postgres] {
            assert_eq!(d.render(MIGRATIONS[1].sql), MIGRATIONS[1].sql);
        }
        assert!(Dialect::Sqlite
            .render(SCHEMA_VERSION_TABLE)
            .contains("version    INTEGER PRIMARY KEY,"));
        assert!(Dialect::Postgres
            .render(SCHEMA_VERSION_TABLE)
            .contains("version    BIGINT PRIMARY KEY,"));
        let versions: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    }
}
