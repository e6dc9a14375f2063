//! The MySQL/MariaDB log database (`SCR_LOG_DB_HOST=mysql://…`, the server
//! LLNL's SCR logs to) against a real MariaDB server: the tests every log
//! server passes (`common/logdb.rs`: jobs log exactly what they write to
//! the text log, migrations apply once under concurrent first opens, a
//! foreign or newer schema is refused, a wrong password never fails the
//! job, the run loop's run is adopted, job ids compare byte for byte,
//! `scr interval --db mysql://…`), and what only MySQL needs: a migration
//! cut short after its self-committing DDL is applied again, a prefix
//! longer than the jobs' key is refused rather than cut, and a database
//! made from SCR 3.1's `scr.mysql` takes entries in SCR 3.1's tables.
//!
//! Needs a server: `ci/tests.d/logdb-mysql.sh` starts a throwaway one and
//! sets `SCR_TEST_MYSQL_HOST` (host:port), `SCR_TEST_MYSQL_USER` (allowed to
//! create databases) and `SCR_TEST_MYSQL_PASS`, then runs `cargo test -p
//! scr --test log_db_mysql -- --ignored`. Each test makes its own database.

mod common;
#[path = "common/logdb.rs"]
mod logdb;

use logdb::{count, fresh_db, open_log, LogServer, Login};
use mysql::prelude::Queryable;
use scr::log::migrate::{migrate_to, MIGRATIONS};
use scr::log::mysql::{MySettings, MyStore};
use scr::log::store::Store;

/// The server `ci/tests.d/logdb-mysql.sh` started.
struct Server(Login);

fn server() -> Server {
    Server(Login::from_env(
        "SCR_TEST_MYSQL",
        "ci/tests.d/logdb-mysql.sh",
    ))
}

impl Server {
    fn settings(&self, db: &str) -> MySettings {
        MySettings::parse(
            &self.host(),
            Some(db),
            Some(&self.0.user),
            Some(&self.0.pass),
            None,
        )
        .unwrap()
    }
}

impl LogServer for Server {
    fn scr_bin(&self) -> &'static str {
        env!("CARGO_BIN_EXE_scr")
    }
    fn host(&self) -> String {
        format!("mysql://{}", self.0.host)
    }
    fn user(&self) -> &str {
        &self.0.user
    }
    fn pass(&self) -> &str {
        &self.0.pass
    }
    fn url(&self, db: &str) -> String {
        format!(
            "mysql://{}:{}@{}/{db}",
            self.0.user, self.0.pass, self.0.host
        )
    }
    fn store(&self, db: &str) -> Box<dyn Store> {
        Box::new(MyStore::connect(&self.settings(db)).unwrap())
    }
    fn current_schema(&self) -> &'static str {
        "DATABASE()"
    }
    fn shown(&self, db: &str) -> String {
        self.settings(db).shown().to_string()
    }
    fn create_database(&self, name: &str) {
        self.settings("mysql")
            .connect()
            .unwrap()
            .query_drop(format!("CREATE DATABASE {name}"))
            .unwrap();
    }
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_job_logs_to_mysql_what_it_writes_to_the_text_log() {
    logdb::a_job_logs_what_it_writes_to_the_text_log(&server());
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn concurrent_first_opens_apply_each_migration_once() {
    logdb::concurrent_first_opens_apply_each_migration_once(&server());
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn foreign_and_newer_schemas_are_refused_and_left_alone() {
    logdb::foreign_and_newer_schemas_are_refused_and_left_alone(&server());
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_wrong_password_is_a_warning_and_the_job_goes_on() {
    logdb::a_wrong_password_is_a_warning_and_the_job_goes_on(&server());
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn the_library_adopts_the_run_the_run_loop_opened() {
    logdb::the_library_adopts_the_run_the_run_loop_opened(&server());
}

#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn job_ids_compare_byte_for_byte() {
    // MySQL's text collations fold case and ignore trailing spaces: with
    // a `VARCHAR` key in `utf8mb4_bin`, `job` and `job ` were one job.
    logdb::job_ids_compare_byte_for_byte(&server());
}

/// A migration whose tables and indexes were made but whose record was not
/// (the process died between MySQL's self-committing DDL and the INSERT)
/// is applied again over them.
#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_migration_cut_short_after_its_ddl_is_applied_again() {
    let srv = server();
    let db = fresh_db(&srv, "cut");
    let mut s = srv.store(&db);
    assert_eq!(migrate_to(s.as_mut(), MIGRATIONS).unwrap(), vec![1, 2]);
    s.batch("DELETE FROM schema_version", "test").unwrap();
    assert_eq!(migrate_to(s.as_mut(), MIGRATIONS).unwrap(), vec![1, 2]);
    assert_eq!(count(s.as_mut(), "SELECT COUNT(*) FROM schema_version"), 2);
}

/// A prefix longer than the jobs' key (2,048 bytes) is refused by the
/// server, never cut into another job's row.
#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_prefix_longer_than_the_key_is_refused_not_cut() {
    let srv = server();
    let db = fresh_db(&srv, "long");
    let base = format!("/{}", "p".repeat(2047));
    open_log(&srv, &db, &base, "55").unwrap();
    let e = open_log(&srv, &db, &format!("{base}q"), "55").unwrap_err();
    assert!(e.to_string().contains("adding the job"), "{e}");
    assert_eq!(
        count(srv.store(&db).as_mut(), "SELECT COUNT(*) FROM jobs"),
        1
    );
}

/// A writer whose job's lock another connection holds gives up after
/// `LOCK_WAIT_S` with `LockTimeout` (no entry written, nothing left
/// locked), and writes once the lock is free.
#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_writer_gives_up_on_a_lock_held_elsewhere_and_goes_on_after_it() {
    use scr::log::store::DbError;
    use scr::log::writer::{Entry, EventType};
    let srv = server();
    let db = fresh_db(&srv, "lock");
    let mut log = open_log(&srv, &db, "/p", "9").unwrap();
    let job = count(
        srv.store(&db).as_mut(),
        "SELECT id FROM jobs WHERE jobid = '9'",
    );
    let mut holder = srv.settings(&db).connect().unwrap();
    let lock = format!("SHA1(CONCAT(DATABASE(), ':', {job}))");
    let got: Option<i64> = holder
        .query_first(format!("SELECT GET_LOCK({lock}, 0)"))
        .unwrap();
    assert_eq!(got, Some(1));
    let e = log
        .insert(100.0, 0, "n0", &Entry::event(EventType::Start))
        .unwrap_err();
    assert!(matches!(e, DbError::LockTimeout { .. }), "{e}");
    assert_eq!(
        count(srv.store(&db).as_mut(), "SELECT COUNT(*) FROM events"),
        0
    );
    holder
        .query_drop(format!("DO RELEASE_LOCK({lock})"))
        .unwrap();
    log.insert(101.0, 0, "n0", &Entry::event(EventType::Start))
        .unwrap();
    assert_eq!(
        count(srv.store(&db).as_mut(), "SELECT COUNT(*) FROM events"),
        1
    );
}

/// A new database holding SCR 3.1's tables, as a site makes it from
/// `scr.mysql`.
fn scr31_db(srv: &Server, tag: &str) -> String {
    let db = fresh_db(srv, tag);
    let mut admin = srv.settings(&db).connect().unwrap();
    for stmt in scr::log::scr31::SCHEMA
        .split(';')
        .filter(|s| !s.trim().is_empty())
    {
        admin.query_drop(stmt).unwrap();
    }
    db
}

/// What a record keeps in SCR 3.1's tables: its kind, time to the second,
/// dataset, name, note, paths and file count, seconds and bytes as `FLOAT`
/// (a transfer's missing values as the zeros its NOT NULL columns hold).
type Kept = (
    i64,
    bool,
    String,
    Option<u64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
    Option<u32>,
    Option<u32>,
);

fn kept(r: &scr::log::Record) -> Kept {
    let e = &r.entry;
    let transfer = e.kind.is_transfer();
    let zero = |v: Option<f64>| {
        if transfer {
            Some(v.unwrap_or(0.0))
        } else {
            v
        }
    };
    let float = |v: Option<f64>| v.map(|v| (v as f32).to_bits());
    (
        r.time_s.floor() as i64,
        transfer,
        e.kind.name().to_string(),
        if transfer {
            Some(e.dset.unwrap_or(0))
        } else {
            e.dset
        },
        e.name.clone().filter(|n| !n.is_empty()),
        e.note.clone(),
        e.from.clone().filter(|p| !p.is_empty()),
        e.to.clone().filter(|p| !p.is_empty()),
        if transfer {
            Some(e.files.unwrap_or(0))
        } else {
            e.files
        },
        float(zero(e.secs)),
        float(zero(e.bytes)),
    )
}

/// A site whose database was made from SCR 3.1's `scr.mysql` keeps it: the
/// library writes its entries into SCR 3.1's tables (a job is its user and
/// `SCR_JOB_NAME`, types are looked up by name, a transfer's every column
/// filled) and makes none of its own there; `scr interval --db` and the
/// second run's adaptive policy read them back; a job without
/// `SCR_JOB_NAME` logs nothing there and goes on.
#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_job_logs_into_scr_31s_own_tables() {
    use scr::log::scr31;

    let srv = server();
    let db = scr31_db(&srv, "scr31");
    let mut s = srv.store(&db);
    assert!(scr31::is_scr31(s.as_mut()).unwrap());
    let cl = common::Cluster::new();
    let sys = logdb::system(&srv, &cl, &db, srv.pass());
    let prefix = cl.prefix.clone();
    let named: &[(&str, &str)] = &[
        ("SCR_LOG_ENABLE", "1"),
        ("SCR_COPY_TYPE", "XOR"),
        ("SCR_JOB_NAME", "heat"),
    ];
    // SCR 3.1's times are whole seconds and its events and transfers
    // separate tables: entries of one second cannot be ordered across
    // them, so the second run starts in a later one (as any real relaunch
    // does) for its policy to tell its own START from the first run's rows.
    logdb::two_runs(&cl, &sys, named, std::time::Duration::from_millis(1100));
    let c = s.as_mut();
    // None of this library's tables: the database stays SCR 3.1's.
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() \
             AND table_name IN ('schema_version', 'runs')"
        ),
        0
    );
    // One job across both runs: the user and the job name.
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM jobs j JOIN usernames u ON u.id = j.username_id \
             JOIN jobnames n ON n.id = j.jobname_id WHERE u.name = 'tester' AND n.name = 'heat'"
        ),
        1
    );
    assert_eq!(count(c, "SELECT COUNT(*) FROM jobs"), 1);
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM events e JOIN types t ON t.id = e.type_id WHERE t.name = 'START'"
        ),
        2
    );
    // Each type once, however many rows use it.
    assert_eq!(
        count(c, "SELECT COUNT(*) - COUNT(DISTINCT name) FROM types"),
        0
    );
    // Checkpoint transfers: start before end, bandwidth bytes over seconds.
    assert_eq!(
        count(
            c,
            "SELECT COUNT(*) FROM transfers x JOIN types t ON t.id = x.type_id \
             WHERE t.name IN ('WRITE', 'ENCODE') AND x.start <= x.`end` AND x.dset_id > 0 \
             AND (x.secs = 0 OR ABS(x.bw - x.bytes / x.secs) <= 1e-3 * x.bw + 1)"
        ),
        8
    );
    // What the job wrote to its text log is what SCR 3.1's tables keep.
    let txt = scr::log::read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records;
    let rows = scr::log::mysql::read_records(&srv.settings(&db)).unwrap();
    let (mut want, mut got): (Vec<Kept>, Vec<Kept>) = (
        txt.iter().map(kept).collect(),
        rows.iter().map(kept).collect(),
    );
    want.sort();
    got.sort();
    assert_eq!(want, got);
    assert!(rows
        .iter()
        .all(|r| r.jobid.as_deref() == Some("tester/heat")));
    let mut streamed = Vec::new();
    scr::log::mysql::each_record(&srv.settings(&db), &mut |r| streamed.push(r)).unwrap();
    assert_eq!(streamed, rows);
    // The second run's adaptive policy read the first run's checkpoints,
    // and only those: its own START (job `tester/heat` there, not its job
    // id) is not an earlier run.
    let interval = logdb::assert_two_runs_read_back(&srv, &db, &txt);
    assert!(interval.contains(" of 1 earlier runs in "), "{interval}");
    // Without SCR_JOB_NAME: no row (SCR 3.1 logs none either), the job goes on.
    let before = count(c, "SELECT COUNT(*) FROM events");
    common::run_with_system(
        &cl,
        4,
        |r| r,
        Some(&sys),
        &named[..2],
        |scr, comm| {
            logdb::write(scr, comm, &prefix, "ckpt.9");
            None
        },
    );
    assert_eq!(count(c, "SELECT COUNT(*) FROM events"), before);
    let e = scr::log::mysql::open_sink(&logdb::db_settings(&srv, &db), &prefix, "9").unwrap_err();
    assert!(e.to_string().contains("set SCR_JOB_NAME"), "{e}");
}

/// A job name longer than SCR 3.1's `VARCHAR(512)` is refused by the
/// server, never cut and added as another name (as 3.1's `INSERT IGNORE`
/// would); 512 characters fit.
#[test]
#[ignore = "needs a MySQL/MariaDB server: ci/tests.d/logdb-mysql.sh"]
fn a_job_name_longer_than_scr_31s_column_is_refused_not_cut() {
    let srv = server();
    let db = scr31_db(&srv, "scr31long");
    let open = |name: String| {
        let mut settings = logdb::db_settings(&srv, &db);
        settings.jobname = Some(name);
        scr::log::mysql::open_sink(&settings, std::path::Path::new("/p"), "1")
    };
    open("j".repeat(512)).unwrap();
    // `INSERT IGNORE` would add its first 512 characters as a name.
    let e = open("k".repeat(513)).unwrap_err();
    assert!(e.to_string().contains("adding a name"), "{e}");
    let mut s = srv.store(&db);
    assert_eq!(count(s.as_mut(), "SELECT COUNT(*) FROM jobnames"), 1);
    assert_eq!(count(s.as_mut(), "SELECT COUNT(*) FROM jobs"), 1);
}
