//! The server log database (SCR_LOG_DB_HOST) against a real PostgreSQL
//! server: thread-communicator jobs log to it exactly what they write to
//! the text log, migrations apply once under concurrent first opens, a
//! foreign or newer schema is refused, a wrong password never fails the
//! job, the run loop's run row is adopted by the library's START, and
//! `scr interval --db postgresql://…` reads it.
//!
//! Needs a server: `ci/tests.d/logdb-server.sh` starts a throwaway one and
//! sets `SCR_TEST_PG_HOST` (host:port), `SCR_TEST_PG_USER` (allowed to
//! create databases) and `SCR_TEST_PG_PASS`, then runs `cargo test -p scr
//! --test log_db_server -- --ignored`. Each test makes its own database.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use common::{run_with_system, Cluster};
use postgres::Client;
use scr::comm::Comm;
use scr::log::db::{DbError, DbSettings, Secret, SCHEMA_VERSION};
use scr::log::migrate::{migrate_to, MIGRATIONS};
use scr::log::read_log;
use scr::log::server::{each_record, read_records, PgStore, ServerLog, ServerSettings};
use scr::log::writer::{Entry, EventType};
use scr::{Flags, Scr};

struct Server {
    host: String,
    user: String,
    pass: String,
}

fn server() -> Server {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: run ci/tests.d/logdb-server.sh, which starts a server")
        })
    };
    Server {
        host: var("SCR_TEST_PG_HOST"),
        user: var("SCR_TEST_PG_USER"),
        pass: var("SCR_TEST_PG_PASS"),
    }
}

static DBS: AtomicU32 = AtomicU32::new(0);

impl Server {
    fn settings(&self, db: &str) -> ServerSettings {
        ServerSettings::parse(
            &self.host,
            Some(db),
            Some(&self.user),
            Some(&self.pass),
            None,
        )
        .unwrap()
    }

    fn connect(&self, db: &str) -> Client {
        self.settings(db).connect().unwrap()
    }

    /// A new, empty database for one test.
    fn fresh_db(&self, tag: &str) -> String {
        let name = format!(
            "scr_test_{tag}_{}_{}",
            std::process::id(),
            DBS.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = self.connect("postgres");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        name
    }

    fn url(&self, db: &str) -> String {
        format!(
            "postgresql://{}:{}@{}/{db}",
            self.user, self.pass, self.host
        )
    }

    /// A site configuration logging to database `db`.
    fn system(&self, cl: &Cluster, db: &str, pass: &str) -> PathBuf {
        let p = cl.root.join("scr.conf");
        std::fs::write(
            &p,
            format!(
                "SCR_LOG_SYSLOG_ENABLE=0\nSCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_HOST={}\n\
                 SCR_LOG_DB_NAME={db}\nSCR_LOG_DB_USER={}\nSCR_LOG_DB_PASS={pass}\n",
                self.host, self.user
            ),
        )
        .unwrap();
        p
    }
}

fn count(c: &mut Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

const ON: &[(&str, &str)] = &[("SCR_LOG_ENABLE", "1"), ("SCR_COPY_TYPE", "XOR")];

fn write(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str) {
    let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, vec![7u8; 500 + comm.rank()]).unwrap();
    assert!(out.complete(true).unwrap());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn a_job_logs_to_the_server_what_it_writes_to_the_text_log() {
    let srv = server();
    let db = srv.fresh_db("job");
    let cl = Cluster::new();
    let sys = srv.system(&cl, &db, &srv.pass);
    let prefix = cl.prefix.clone();
    for run in 0..2 {
        run_with_system(
            &cl,
            4,
            |r| r,
            Some(&sys),
            ON,
            |scr, comm| {
                if run == 1 {
                    assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.2"));
                    let r = scr.start_restart().unwrap();
                    assert!(r.complete(true).unwrap());
                }
                write(scr, comm, &prefix, &format!("ckpt.{}", 2 * run + 1));
                write(scr, comm, &prefix, &format!("ckpt.{}", 2 * run + 2));
                None
            },
        );
    }
    let mut c = srv.connect(&db);
    assert_eq!(
        count(&mut c, "SELECT MAX(version) FROM schema_version"),
        SCHEMA_VERSION
    );
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM jobs WHERE jobid = '77' AND username = 'tester'"
        ),
        1
    );
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM runs WHERE launched_by = 'library' AND procs = 4 \
             AND nodes = 4 AND last_s >= start_s"
        ),
        2
    );
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM transfers WHERE type IN ('WRITE', 'ENCODE')"
        ),
        8
    );
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM events WHERE run_id IS NULL"),
        0
    );
    let txt = read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records;
    let rows = read_records(&srv.settings(&db)).unwrap();
    assert_eq!(txt.len(), rows.len());
    for (a, b) in txt.iter().zip(&rows) {
        // The whole entry: what was logged is what each reader gives back.
        assert_eq!(a.entry, b.entry, "{a:?} vs {b:?}");
        assert!((a.time_s - b.time_s).abs() < 1e-3, "{a:?} vs {b:?}");
        assert_eq!((&a.host, &a.jobid), (&b.host, &b.jobid));
    }
    // Streamed row by row (what `scr interval --db` reads): the same.
    let mut streamed = Vec::new();
    each_record(&srv.settings(&db), &mut |r| streamed.push(r)).unwrap();
    assert_eq!(streamed, rows);
    // `scr interval` reads the server as it reads a file.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(["interval", "--json", "--mtbf", "86400", "--db"])
        .arg(srv.url(&db))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["log_estimates"]["runs"], 2, "{json}");
    assert_eq!(
        json["log_estimates"]["cache_checkpoint"]["samples"], 4,
        "{json}"
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn concurrent_first_opens_apply_each_migration_once() {
    let srv = server();
    let db = srv.fresh_db("migrate");
    let applied: Vec<Vec<i64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut c = PgStore::connect(&srv.settings(&db)).unwrap();
                    migrate_to(&mut c, MIGRATIONS).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<i64> = applied.into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, vec![1, 2]);
    let mut c = srv.connect(&db);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM schema_version"), 2);
    // An older database is upgraded step by step.
    let db2 = srv.fresh_db("upgrade");
    let mut c = PgStore::connect(&srv.settings(&db2)).unwrap();
    assert_eq!(migrate_to(&mut c, &MIGRATIONS[..1]).unwrap(), vec![1]);
    assert_eq!(migrate_to(&mut c, MIGRATIONS).unwrap(), vec![2]);
    assert!(migrate_to(&mut c, MIGRATIONS).unwrap().is_empty());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn foreign_and_newer_schemas_are_refused_and_left_alone() {
    let srv = server();
    let settings = |db: &str| DbSettings {
        name: Some(db.to_string()),
        host: Some(srv.host.clone()),
        user: Some(srv.user.clone()),
        pass: Some(Secret::new(srv.pass.clone())),
        debug: false,
        username: Some("u".into()),
        jobname: None,
    };
    let foreign = srv.fresh_db("foreign");
    srv.connect(&foreign)
        .batch_execute("CREATE TABLE jobs (x INTEGER)")
        .unwrap();
    let e = ServerLog::open(&settings(&foreign), Path::new("/p"), "1").unwrap_err();
    assert!(matches!(e, DbError::NotOurs { .. }), "{e}");
    let newer = srv.fresh_db("newer");
    srv.connect(&newer)
        .batch_execute(&format!(
            "CREATE TABLE schema_version (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL, \
             what TEXT NOT NULL); INSERT INTO schema_version VALUES ({}, 'later', 'future')",
            SCHEMA_VERSION + 1
        ))
        .unwrap();
    let e = ServerLog::open(&settings(&newer), Path::new("/p"), "1").unwrap_err();
    assert!(matches!(e, DbError::Newer { .. }), "{e}");
    assert!(matches!(
        read_records(&srv.settings(&newer)),
        Err(DbError::Newer { .. })
    ));
    let mut c = srv.connect(&newer);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM schema_version"), 1);
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'jobs' \
             AND table_schema = current_schema()"
        ),
        0
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn a_wrong_password_is_a_warning_and_the_job_goes_on() {
    let srv = server();
    let db = srv.fresh_db("badpw");
    let cl = Cluster::new();
    let sys = srv.system(&cl, &db, "not-the-password");
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
    // Nothing reached the server, not even the schema.
    let mut c = srv.connect(&db);
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ),
        0
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn the_library_adopts_the_run_the_run_loop_opened() {
    let srv = server();
    let db = srv.fresh_db("adopt");
    let settings = DbSettings {
        name: Some(db.clone()),
        host: Some(srv.host.clone()),
        user: Some(srv.user.clone()),
        pass: Some(Secret::new(srv.pass.clone())),
        debug: false,
        username: Some("u".into()),
        jobname: None,
    };
    let mut launcher = ServerLog::open(&settings, Path::new("/p"), "55").unwrap();
    let mut app = ServerLog::open(&settings, Path::new("/p"), "55").unwrap();
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
    let mut c = srv.connect(&db);
    let row = c
        .query_one(
            "SELECT launched_by, start_s, app_start_s, last_s, end_s, end_note, procs FROM runs",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "run_loop");
    assert_eq!(row.get::<_, f64>(1), 100.0);
    assert_eq!(row.get::<_, Option<f64>>(2), Some(101.0));
    assert_eq!(row.get::<_, f64>(3), 150.0);
    assert_eq!(row.get::<_, Option<f64>>(4), Some(150.0));
    assert_eq!(row.get::<_, Option<String>>(5).as_deref(), Some("finished"));
    assert_eq!(row.get::<_, Option<i64>>(6), Some(8));
}
