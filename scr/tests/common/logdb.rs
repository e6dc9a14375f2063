//! The log database servers' tests, written once: `log_db_server.rs`
//! (PostgreSQL) and `log_db_mysql.rs` (MySQL/MariaDB) each include this
//! file (`#[path = "common/logdb.rs"] mod logdb;`, beside `mod common;`),
//! start from a [`LogServer`] and run these, so both servers are held to
//! the same behaviour. Raw SQL goes through the library's own [`Store`] (rendered
//! for the server), so nothing here speaks a client library directly.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::{assert_same_records, run_with_system, scr_json, Cluster};
use scr::comm::Comm;
use scr::log::database::{each_record, read_all, DbLog};
use scr::log::migrate::{migrate_to, MIGRATIONS, SCHEMA_VERSION};
use scr::log::read_log;
use scr::log::store::{Col, DbError, DbSettings, Secret, Store, Value};
use scr::log::writer::{Entry, EventType};
use scr::{Flags, Scr};

/// A throwaway server a ci/tests.d script started.
pub trait LogServer: Sync {
    /// The `scr` command (the test's `env!("CARGO_BIN_EXE_scr")`).
    fn scr_bin(&self) -> &'static str;
    /// SCR_LOG_DB_HOST for it, without user, password or database.
    fn host(&self) -> String;
    /// A user allowed to create databases.
    fn user(&self) -> &str;
    /// Its password.
    fn pass(&self) -> &str;
    /// A URL with user and password, for `scr interval --db`.
    fn url(&self, db: &str) -> String;
    /// The library's store on database `db`.
    fn store(&self, db: &str) -> Box<dyn Store>;
    /// How the server names the schema a connection is in, in SQL.
    fn current_schema(&self) -> &'static str;
    /// The server as messages show it, connected to `db`.
    fn shown(&self, db: &str) -> String;
    /// Create database `name` (from an administrative connection).
    fn create_database(&self, name: &str);
}

/// Where a throwaway server is and who may create databases on it, from
/// `<PREFIX>_HOST` (host:port), `<PREFIX>_USER` and `<PREFIX>_PASS`, which
/// `script` (the ci/tests.d script that starts the server) sets.
pub struct Login {
    pub host: String,
    pub user: String,
    pub pass: String,
}

impl Login {
    pub fn from_env(prefix: &str, script: &str) -> Login {
        let var = |k: &str| {
            let k = format!("{prefix}_{k}");
            std::env::var(&k)
                .unwrap_or_else(|_| panic!("{k} is not set: run {script}, which starts a server"))
        };
        Login {
            host: var("HOST"),
            user: var("USER"),
            pass: var("PASS"),
        }
    }
}

static DBS: AtomicU32 = AtomicU32::new(0);

/// A new, empty database for one test.
pub fn fresh_db(srv: &dyn LogServer, tag: &str) -> String {
    let name = format!(
        "scr_test_{tag}_{}_{}",
        std::process::id(),
        DBS.fetch_add(1, Ordering::Relaxed)
    );
    srv.create_database(&name);
    name
}

/// The settings a site would give, for database `db`.
pub fn db_settings(srv: &dyn LogServer, db: &str) -> DbSettings {
    DbSettings {
        name: Some(db.to_string()),
        host: Some(srv.host()),
        user: Some(srv.user().to_string()),
        pass: Some(Secret::new(srv.pass().to_string())),
        debug: false,
        username: Some("u".into()),
        jobname: None,
    }
}

/// A site configuration logging to database `db` with password `pass`.
pub fn system(srv: &dyn LogServer, cl: &Cluster, db: &str, pass: &str) -> PathBuf {
    let p = cl.root.join("scr.conf");
    std::fs::write(
        &p,
        format!(
            "SCR_LOG_SYSLOG_ENABLE=0\nSCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_HOST={}\n\
             SCR_LOG_DB_NAME={db}\nSCR_LOG_DB_USER={}\nSCR_LOG_DB_PASS={pass}\n",
            srv.host(),
            srv.user()
        ),
    )
    .unwrap();
    p
}

/// Open the database log of job `jobid` in `prefix` on database `db`.
pub fn open_log(
    srv: &dyn LogServer,
    db: &str,
    prefix: &str,
    jobid: &str,
) -> Result<DbLog<Box<dyn Store>>, DbError> {
    DbLog::open_on(
        srv.store(db),
        &db_settings(srv, db),
        Path::new(prefix),
        jobid,
    )
}

/// The integer the query `sql` gives.
pub fn count(s: &mut dyn Store, sql: &str) -> i64 {
    let rows = s.query(sql, &[], &[Col::Int], "counting").unwrap();
    rows[0][0].int().unwrap()
}

const ON: &[(&str, &str)] = &[("SCR_LOG_ENABLE", "1"), ("SCR_COPY_TYPE", "XOR")];

/// Write checkpoint `name`: one file per rank under `prefix/name`.
pub fn write(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str) {
    let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, vec![7u8; 500 + comm.rank()]).unwrap();
    assert!(out.complete(true).unwrap());
}

/// Two runs of a 4-rank job under the site file `sys` with `env` (the
/// second with the adaptive policy too), `pause` apart, each writing two
/// checkpoints; the second restarts from the first's last.
pub fn two_runs(cl: &Cluster, sys: &Path, env: &[(&str, &str)], pause: std::time::Duration) {
    let prefix = cl.prefix.clone();
    let adaptive = [env, &[("SCR_CHECKPOINT_ADAPTIVE", "1")]].concat();
    for run in 0..2 {
        if run == 1 {
            std::thread::sleep(pause);
        }
        let env = if run == 1 { &adaptive[..] } else { env };
        run_with_system(
            cl,
            4,
            |r| r,
            Some(sys),
            env,
            |scr, comm| {
                if run == 1 {
                    assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.2"));
                    let r = scr.start_restart().unwrap();
                    assert!(r.complete(true).unwrap());
                    scr.need_checkpoint().unwrap();
                }
                write(scr, comm, &prefix, &format!("ckpt.{}", 2 * run + 1));
                write(scr, comm, &prefix, &format!("ckpt.{}", 2 * run + 2));
                None
            },
        );
    }
}

/// Two runs of a 4-rank job log to the server exactly what they write to
/// the text log (read whole and streamed); the second run's adaptive policy
/// reads the first from the server; `scr interval --db URL` reads it.
pub fn a_job_logs_what_it_writes_to_the_text_log(srv: &dyn LogServer) {
    let db = fresh_db(srv, "job");
    let cl = Cluster::new();
    let sys = system(srv, &cl, &db, srv.pass());
    let prefix = cl.prefix.clone();
    two_runs(&cl, &sys, ON, std::time::Duration::ZERO);
    let mut c = srv.store(&db);
    let c = c.as_mut();
    assert_eq!(
        count(c, "SELECT MAX(version) FROM schema_version"),
        SCHEMA_VERSION
    );
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM jobs WHERE jobid = '77' AND username = 'tester'"
        ),
        1
    );
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM runs WHERE launched_by = 'library' AND procs = 4 \
             AND nodes = 4 AND last_s >= start_s"
        ),
        2
    );
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM transfers WHERE type IN ('WRITE', 'ENCODE')"
        ),
        8
    );
    assert_eq!(
        count(c, "SELECT COUNT(*) FROM events WHERE run_id IS NULL"),
        0
    );
    let txt = read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records;
    let rows = read_all(c).unwrap();
    // The whole entry: what was logged is what each reader gives back.
    assert_same_records(&txt, &rows);
    // Streamed row by row (what `scr interval --db` reads): the same.
    let mut streamed = Vec::new();
    each_record(c, &mut |r| streamed.push(r)).unwrap();
    assert_eq!(streamed, rows);
    assert_two_runs_read_back(srv, &db, &txt);
}

/// The second of two runs, each of two checkpoints, logged to database
/// `db` (`txt`: their text log): its adaptive policy read the first run's
/// checkpoints from the server, and `scr interval --db URL` reads 2 runs
/// and 4 checkpoint costs there. Gives the policy's note.
pub fn assert_two_runs_read_back(
    srv: &dyn LogServer,
    db: &str,
    txt: &[scr::log::Record],
) -> String {
    let interval = txt
        .iter()
        .find(|r| r.is_event("CHECKPOINT_INTERVAL"))
        .and_then(|r| r.entry.note.clone())
        .unwrap_or_default();
    let source = format!("2 checkpoints in {}", srv.shown(db));
    assert!(interval.contains(&source), "{source:?} not in {interval:?}");
    // `scr interval` reads the server as it reads a file.
    let json = scr_json(
        srv.scr_bin(),
        [
            "interval",
            "--json",
            "--mtbf",
            "86400",
            "--db",
            &srv.url(db),
        ],
    );
    assert_eq!(json["log_estimates"]["runs"], 2, "{json}");
    assert_eq!(
        json["log_estimates"]["cache_checkpoint"]["samples"], 4,
        "{json}"
    );
    interval
}

/// Four processes opening a new database at once apply each migration
/// once; an older database is upgraded step by step.
pub fn concurrent_first_opens_apply_each_migration_once(srv: &dyn LogServer) {
    let db = fresh_db(srv, "migrate");
    let applied: Vec<Vec<i64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| migrate_to(srv.store(&db).as_mut(), MIGRATIONS).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<i64> = applied.into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, vec![1, 2]);
    assert_eq!(
        count(
            srv.store(&db).as_mut(),
            "SELECT COUNT(*) FROM schema_version"
        ),
        2
    );
    let db2 = fresh_db(srv, "upgrade");
    let mut c = srv.store(&db2);
    assert_eq!(migrate_to(c.as_mut(), &MIGRATIONS[..1]).unwrap(), vec![1]);
    assert_eq!(migrate_to(c.as_mut(), MIGRATIONS).unwrap(), vec![2]);
    assert!(migrate_to(c.as_mut(), MIGRATIONS).unwrap().is_empty());
}

/// A database with one of our table names and no schema_version, or with
/// a newer schema, is refused for writing and reading and left as it was.
pub fn foreign_and_newer_schemas_are_refused_and_left_alone(srv: &dyn LogServer) {
    let foreign = fresh_db(srv, "foreign");
    srv.store(&foreign)
        .batch("CREATE TABLE jobs (x INTEGER)", "test")
        .unwrap();
    let e = open_log(srv, &foreign, "/p", "1").unwrap_err();
    assert!(matches!(e, DbError::NotOurs { .. }), "{e}");
    let newer = fresh_db(srv, "newer");
    let mut c = srv.store(&newer);
    c.batch(
        "CREATE TABLE schema_version (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL, \
         what TEXT NOT NULL)",
        "test",
    )
    .unwrap();
    c.execute(
        "INSERT INTO schema_version VALUES (?1, 'later', 'future')",
        &[Value::Int(Some(SCHEMA_VERSION + 1))],
        "test",
    )
    .unwrap();
    let e = open_log(srv, &newer, "/p", "1").unwrap_err();
    assert!(matches!(e, DbError::Newer { .. }), "{e}");
    assert!(matches!(
        read_all(srv.store(&newer).as_mut()),
        Err(DbError::Newer { .. })
    ));
    assert_eq!(count(c.as_mut(), "SELECT COUNT(*) FROM schema_version"), 1);
    let jobs = format!(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'jobs' \
         AND table_schema = {}",
        srv.current_schema()
    );
    assert_eq!(count(c.as_mut(), &jobs), 0);
}

/// A wrong password: the job's checkpoints and text log go on, and
/// nothing reaches the server, not even the schema.
pub fn a_wrong_password_is_a_warning_and_the_job_goes_on(srv: &dyn LogServer) {
    let db = fresh_db(srv, "badpw");
    let cl = Cluster::new();
    let sys = system(srv, &cl, &db, "not-the-password");
    let prefix = cl.prefix.clone();
    run_with_system(
        &cl,
        2,
        |r| r,
        Some(&sys),
        ON,
        |scr, comm| {
            write(scr, comm, &prefix, "ckpt.1");
            None
        },
    );
    let txt = read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records;
    assert!(txt
        .iter()
        .any(|r| r.is_event("CHECKPOINT_END") && r.entry.name.as_deref() == Some("ckpt.1")));
    let tables = format!(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = {}",
        srv.current_schema()
    );
    assert_eq!(count(srv.store(&db).as_mut(), &tables), 0);
}

/// The run loop's RUN_START opens a run, the library's START adopts it
/// (one row), RUN_END closes it with its note.
pub fn the_library_adopts_the_run_the_run_loop_opened(srv: &dyn LogServer) {
    let db = fresh_db(srv, "adopt");
    let mut launcher = open_log(srv, &db, "/p", "55").unwrap();
    let mut app = open_log(srv, &db, "/p", "55").unwrap();
    launcher
        .insert(100.0, 0, "login", &Entry::event(EventType::RunStart))
        .unwrap();
    app.insert(
        101.0,
        0,
        "n0",
        &Entry::event(EventType::Start).procs_nodes(8, 2),
    )
    .unwrap();
    assert_eq!(app.run_row(), launcher.run_row());
    launcher
        .insert(
            150.0,
            0,
            "login",
            &Entry::event(EventType::RunEnd).note("finished"),
        )
        .unwrap();
    let rows = srv
        .store(&db)
        .query(
            "SELECT launched_by, start_s, app_start_s, last_s, end_s, end_note, procs FROM runs",
            &[],
            &[
                Col::Text,
                Col::Real,
                Col::Real,
                Col::Real,
                Col::Real,
                Col::Text,
                Col::Int,
            ],
            "test",
        )
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![
            Value::Text(Some("run_loop".into())),
            Value::Real(Some(100.0)),
            Value::Real(Some(101.0)),
            Value::Real(Some(150.0)),
            Value::Real(Some(150.0)),
            Value::Text(Some("finished".into())),
            Value::Int(Some(8)),
        ]]
    );
}

/// Job ids that differ only in case or trailing spaces are different jobs,
/// as in SQLite.
pub fn job_ids_compare_byte_for_byte(srv: &dyn LogServer) {
    let db = fresh_db(srv, "ids");
    for id in ["Job", "job", "job "] {
        open_log(srv, &db, "/p", id).unwrap();
        open_log(srv, &db, "/p", id).unwrap();
    }
    assert_eq!(
        count(srv.store(&db).as_mut(), "SELECT COUNT(*) FROM jobs"),
        3
    );
}
