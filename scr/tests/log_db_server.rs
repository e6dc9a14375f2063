//! The server log database (SCR_LOG_DB_HOST) against a real PostgreSQL
//! server: thread-communicator jobs log to it exactly what they write to
//! the text log, migrations apply once under concurrent first opens, a
//! foreign or newer schema is refused, a wrong password never fails the
//! job, the run loop's run row is adopted by the library's START, job ids
//! compare byte for byte, and `scr interval --db postgresql://…` reads it
//! (the tests are `common/logdb.rs`, shared with MySQL's).
//!
//! Needs a server: `ci/tests.d/logdb-server.sh` starts a throwaway one and
//! sets `SCR_TEST_PG_HOST` (host:port), `SCR_TEST_PG_USER` (allowed to
//! create databases) and `SCR_TEST_PG_PASS`, then runs `cargo test -p scr
//! --test log_db_server -- --ignored`. Each test makes its own database.

mod common;
#[path = "common/logdb.rs"]
mod logdb;

use logdb::{LogServer, Login};
use scr::log::server::{PgStore, ServerSettings};
use scr::log::store::Store;

/// The server `ci/tests.d/logdb-server.sh` started.
struct Server(Login);

fn server() -> Server {
    Server(Login::from_env("SCR_TEST_PG", "ci/tests.d/logdb-server.sh"))
}

impl Server {
    fn settings(&self, db: &str) -> ServerSettings {
        ServerSettings::parse(
            &self.0.host,
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
        self.0.host.clone()
    }
    fn user(&self) -> &str {
        &self.0.user
    }
    fn pass(&self) -> &str {
        &self.0.pass
    }
    fn url(&self, db: &str) -> String {
        format!(
            "postgresql://{}:{}@{}/{db}",
            self.0.user, self.0.pass, self.0.host
        )
    }
    fn store(&self, db: &str) -> Box<dyn Store> {
        Box::new(PgStore::connect(&self.settings(db)).unwrap())
    }
    fn current_schema(&self) -> &'static str {
        "current_schema()"
    }
    fn shown(&self, db: &str) -> String {
        self.settings(db).shown().to_string()
    }
    fn create_database(&self, name: &str) {
        self.settings("postgres")
            .connect()
            .unwrap()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
    }
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn a_job_logs_to_the_server_what_it_writes_to_the_text_log() {
    logdb::a_job_logs_what_it_writes_to_the_text_log(&server());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn concurrent_first_opens_apply_each_migration_once() {
    logdb::concurrent_first_opens_apply_each_migration_once(&server());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn foreign_and_newer_schemas_are_refused_and_left_alone() {
    logdb::foreign_and_newer_schemas_are_refused_and_left_alone(&server());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn a_wrong_password_is_a_warning_and_the_job_goes_on() {
    logdb::a_wrong_password_is_a_warning_and_the_job_goes_on(&server());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn the_library_adopts_the_run_the_run_loop_opened() {
    logdb::the_library_adopts_the_run_the_run_loop_opened(&server());
}

#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn job_ids_compare_byte_for_byte() {
    logdb::job_ids_compare_byte_for_byte(&server());
}

/// A job's statements give up after 10 s; a tool reading the whole log
/// back (`scr interval --db`, through `each_record`) may take 10 min: a
/// site's database of a million runs takes longer than 10 s to sort and
/// send (results/hardening.md).
#[test]
#[ignore = "needs a PostgreSQL server: ci/tests.d/logdb-server.sh"]
fn a_reader_of_the_whole_log_has_a_longer_bound_than_a_writer() {
    use scr::log::store::{Col, Value};
    let srv = server();
    let show = |s: &mut PgStore| {
        s.query("SHOW statement_timeout", &[], &[Col::Text], "test")
            .unwrap()
    };
    let text = |t: &str| vec![vec![Value::Text(Some(t.into()))]];
    let settings = srv.settings("postgres");
    assert_eq!(show(&mut PgStore::connect(&settings).unwrap()), text("10s"));
    assert_eq!(
        show(&mut PgStore::connect_reader(&settings).unwrap()),
        text("10min")
    );
}
