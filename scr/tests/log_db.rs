//! The database log end to end: thread-communicator jobs with
//! SCR_LOG_DB_ENABLE=1 in the system config file (a site setting) write
//! their entries to `<prefix>/.scr/log.db` on rank 0 only; the rows match
//! the text log line for line; `scr interval --db` reads them; a database
//! that cannot be used never fails the job.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use common::{assert_same_records, run_with_system, scr_json, Cluster};
use rusqlite::Connection;
use scr::comm::Comm;
use scr::log::db::{read_records, SCHEMA_VERSION};
use scr::log::read_log;
use scr::{Flags, Scr};

fn system(cl: &Cluster, text: &str) -> PathBuf {
    let p = cl.root.join("scr.conf");
    // Syslog is a site setting too (default 1): off so tests leave the
    // host's syslog alone.
    std::fs::write(&p, format!("SCR_LOG_SYSLOG_ENABLE=0\n{text}")).unwrap();
    p
}

fn write(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str, flags: Flags) {
    let mut out = scr.start_output(Some(name), flags).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, vec![7u8; 500 + comm.rank()]).unwrap();
    assert!(out.complete(true).unwrap());
}

/// One 2-rank run that writes checkpoint `name`, with system file `sys`.
fn one_checkpoint(cl: &Cluster, sys: &Path, env: &[(&str, &str)], name: &str) {
    let prefix = cl.prefix.clone();
    run_with_system(
        cl,
        2,
        |r| r,
        Some(sys),
        env,
        |scr, comm| {
            write(scr, comm, &prefix, name, Flags::CHECKPOINT);
            None
        },
    );
}

const ON: &[(&str, &str)] = &[("SCR_LOG_ENABLE", "1"), ("SCR_COPY_TYPE", "XOR")];

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn a_job_writes_the_same_entries_to_the_database_and_the_text_log() {
    let cl = Cluster::new();
    let sys = system(&cl, "SCR_LOG_DB_ENABLE=1\n");
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
                write(
                    scr,
                    comm,
                    &prefix,
                    &format!("ckpt.{}", 2 * run + 1),
                    Flags::CHECKPOINT,
                );
                write(
                    scr,
                    comm,
                    &prefix,
                    &format!("ckpt.{}", 2 * run + 2),
                    Flags::CHECKPOINT,
                );
                None
            },
        );
    }
    let db = prefix.join(".scr").join("log.db");
    let conn = Connection::open(&db).unwrap();
    assert_eq!(
        count(&conn, "SELECT MAX(version) FROM schema_version"),
        SCHEMA_VERSION
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM jobs WHERE jobid = '77' AND username = 'tester'"
        ),
        1
    );
    // One run per launch, opened by the library's START, with its size.
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM runs WHERE launched_by = 'library' AND procs = 4 AND nodes = 4 \
             AND host = 'n0' AND last_s >= start_s"
        ),
        2
    );
    // Rank 0 writes each collective entry once: 4 checkpoints' WRITE+ENCODE.
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM transfers WHERE type IN ('WRITE', 'ENCODE')"
        ),
        8
    );
    let bytes: i64 = (0..4).map(|r| 500 + r).sum();
    assert_eq!(
        count(
            &conn,
            &format!(
                "SELECT COUNT(*) FROM transfers WHERE type = 'WRITE' AND bytes = {bytes} \
                 AND files = 4 AND secs >= 0 AND to_path IS NOT NULL"
            )
        ),
        4
    );
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM events WHERE run_id IS NULL"),
        0,
        "every library entry belongs to its run"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM events e JOIN runs r ON r.id = e.run_id \
             WHERE e.type = 'RESTART_SUCCESS' AND r.id = (SELECT MAX(id) FROM runs)"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM events WHERE time NOT LIKE '____-__-__T__:__:__.___%'"
        ),
        0,
        "zoned timestamps as in the text log"
    );
    // The text log and the database hold the same entries.
    let txt = read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records;
    let rows = read_records(&db).unwrap();
    // The whole entry: what was logged is what each reader gives back.
    assert_same_records(&txt, &rows);
    // And `scr interval` reads the database as it reads the text log.
    let args = ["interval", "--json", "--mtbf", "86400", "--db"].map(OsStr::new);
    let json = scr_json(
        env!("CARGO_BIN_EXE_scr"),
        args.into_iter().chain([db.as_os_str()]),
    );
    assert_eq!(json["log_estimates"]["runs"], 2, "{json}");
    assert_eq!(
        json["log_estimates"]["cache_checkpoint"]["samples"], 4,
        "{json}"
    );
}

#[test]
fn users_cannot_switch_the_database_on_and_a_named_file_is_used() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    // From the environment: ignored with a warning (a site setting).
    let sys = system(&cl, "");
    let mut env = ON.to_vec();
    env.push(("SCR_LOG_DB_ENABLE", "1"));
    one_checkpoint(&cl, &sys, &env, "ckpt.1");
    assert!(prefix.join(".scr").join("log").exists());
    assert!(!prefix.join(".scr").join("log.db").exists());
    // The site names a file elsewhere.
    let site_db = cl.root.join("site.db");
    let sys = system(
        &cl,
        &format!(
            "SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_NAME={}\n",
            site_db.display()
        ),
    );
    one_checkpoint(&cl, &sys, ON, "ckpt.2");
    assert!(!prefix.join(".scr").join("log.db").exists());
    let rows = read_records(&site_db).unwrap();
    assert!(rows
        .iter()
        .any(|r| r.is_transfer("WRITE") && r.entry.dset == Some(2)));
}

#[test]
fn an_unusable_database_never_fails_the_job() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    // A database from a newer library: refused and left alone.
    let newer = cl.root.join("newer.db");
    let conn = Connection::open(&newer).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT, what TEXT);
         INSERT INTO schema_version VALUES ({}, 'later', 'future');",
        SCHEMA_VERSION + 1
    ))
    .unwrap();
    drop(conn);
    let before = std::fs::read(&newer).unwrap();
    let cases = [
        format!("SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_NAME={}\n", newer.display()),
        format!(
            "SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_NAME={}\n",
            cl.root.join("no/such/dir/x.db").display()
        ),
        // A server nobody runs (connection refused at once) and one of a
        // kind this library does not speak.
        "SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_HOST=127.0.0.1:1\n".to_string(),
        "SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_HOST=mysql://db.example/scr\n".to_string(),
    ];
    for (i, text) in cases.iter().enumerate() {
        let sys = system(&cl, text);
        let name = format!("ckpt.{}", i + 1);
        one_checkpoint(&cl, &sys, ON, &name);
        // The text log still has the checkpoint.
        let txt = read_log(&prefix.join(".scr").join("log"), true)
            .unwrap()
            .records;
        assert!(
            txt.iter()
                .any(|r| r.is_event("CHECKPOINT_END")
                    && r.entry.name.as_deref() == Some(name.as_str())),
            "case {i}: {text}"
        );
    }
    assert_eq!(std::fs::read(&newer).unwrap(), before, "never downgraded");
    assert!(!prefix.join(".scr").join("log.db").exists());
}

/// The child half of [`db_debug_echoes_each_statement_on_stderr`]: one
/// checkpoint with the database log on, SCR_LOG_DB_DEBUG from the parent.
#[test]
fn db_debug_child() {
    let Ok(level) = std::env::var("SCR_TEST_DB_DEBUG_CHILD") else {
        return; // run by the parent only
    };
    let cl = Cluster::new();
    let sys = system(
        &cl,
        &format!("SCR_LOG_DB_ENABLE=1\nSCR_LOG_DB_DEBUG={level}\n"),
    );
    one_checkpoint(&cl, &sys, ON, "ckpt.1");
    assert!(cl.prefix.join(".scr").join("log.db").exists());
}

/// SCR_LOG_DB_DEBUG=1 echoes the job's row and every entry inserted into
/// the database on stderr; 0 prints none of it. The job runs in a child
/// process (this test binary, filtered to `db_debug_child`) so its stderr
/// can be read.
#[test]
fn db_debug_echoes_each_statement_on_stderr() {
    let stderr_of = |level: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "db_debug_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("SCR_TEST_DB_DEBUG_CHILD", level)
            .output()
            .expect("the child test runs");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "child failed:\n{err}");
        err
    };
    let on = stderr_of("1");
    assert!(
        on.contains("SCR: log db ") && on.contains(": add job "),
        "{on}"
    );
    assert!(on.contains(": insert ") && on.contains("WRITE"), "{on}");
    let off = stderr_of("0");
    assert!(!off.contains("SCR: log db "), "{off}");
}
