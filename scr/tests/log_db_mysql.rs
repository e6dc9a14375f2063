//! The MySQL/MariaDB log database (`SCR_LOG_DB_HOST=mysql://…`, the server
//! LLNL's SCR logs to) against a real MariaDB server: the tests every log
//! server passes (`common/logdb.rs`: jobs log exactly what they write to
//! the text log, migrations apply once under concurrent first opens, a
//! foreign or newer schema is refused, a wrong password never fails the
//! job, the run loop's run is adopted, job ids compare byte for byte,
//! `scr interval --db mysql://…`), and what only MySQL needs: a migration
//! cut short after its self-committing DDL is applied again, and a prefix
//! longer than the jobs' key is refused rather than cut.
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
