//! The database sink, written once for the three databases: [`DbLog`] over any
//! [`Store`] keeps a job's row, tracks its runs, and inserts each entry
//! with the one mapping of [`super::row`]; [`read_all`] reads every entry
//! back as records. [`super::db`] and [`super::server`] only supply the
//! store.
//!
//! Runs. A row of `runs` is one launch of the application. The run loop's
//! `RUN_START` opens one (`launched_by = 'run_loop'`); the library's `START`
//! adopts the newest run of its job that the run loop opened and no
//! application has claimed yet, else opens its own (`'library'`).
//! `RUN_END` closes the run with its note; `last_s` follows the newest entry
//! of the run, so a run that died without `RUN_END` still has a duration.
//! Each entry is one transaction holding the job's lock, so a `START`
//! adopts a run exactly once however many processes log.
//!
//! Failure policy: the caller ([`super::writer::Logger`]) warns once and
//! carries on; a database problem never fails the application's call.

use std::path::{Path, PathBuf};

use super::event::{Entry, Record, Stamp};
use super::migrate::{check_readable, migrate};
use super::row;
use super::sink::{LogSink, LogWriteError, Target};
use super::store::{transaction, Col, DbError, DbSettings, Lock, Store, Value};
use super::time::{format_timestamp, now_s};

/// An open database log of one job on one process.
#[derive(Debug)]
pub struct DbLog<S> {
    store: S,
    job_row: i64,
    run_row: Option<i64>,
    debug: bool,
}

/// The first column of the first row, as an integer.
fn first_int(rows: &[Vec<Value>]) -> Option<i64> {
    rows.first().and_then(|r| r[0].int())
}

/// The id a statement that must give one gave.
fn the_id(s: &dyn Store, rows: &[Vec<Value>], what: &'static str) -> Result<i64, DbError> {
    first_int(rows).ok_or_else(|| DbError::NoRow {
        path: s.location().to_path_buf(),
        what,
    })
}

impl<S: Store> DbLog<S> {
    /// Bring `store`'s schema up to date and find or add the row of job
    /// `jobid` in `prefix`.
    pub fn open_on(
        mut store: S,
        settings: &DbSettings,
        prefix: &Path,
        jobid: &str,
    ) -> Result<DbLog<S>, DbError> {
        migrate(&mut store)?;
        let prefix = prefix.to_string_lossy().into_owned();
        if settings.debug {
            eprintln!(
                "SCR: log db {}: add job {jobid:?} {prefix:?}",
                store.location().display()
            );
        }
        let job = [
            Value::Text(Some(jobid.to_string())),
            Value::Text(Some(prefix)),
        ];
        let mut values = job.to_vec();
        values.extend([
            Value::Text(settings.username.clone()),
            Value::Text(settings.jobname.clone()),
            Value::Real(Some(now_s())),
        ]);
        let insert = store.dialect().insert_job();
        store.execute(insert, &values, "adding the job")?;
        let rows = store.query(
            "SELECT id FROM jobs WHERE jobid = ?1 AND prefix = ?2",
            &job,
            &[Col::Int],
            "finding the job",
        )?;
        let job_row = the_id(&store, &rows, "finding the job")?;
        Ok(DbLog {
            store,
            job_row,
            run_row: None,
            debug: settings.debug,
        })
    }

    /// The database file, or `postgresql://user@host:port/dbname`.
    pub fn path(&self) -> &Path {
        self.store.location()
    }

    /// The `runs` row this process's entries belong to, once a `START` or
    /// `RUN_START` has been logged.
    pub fn run_row(&self) -> Option<i64> {
        self.run_row
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
        let stamp = Stamp {
            time_s: unix_s,
            offset_s,
            host,
            jobid: "",
        };
        self.insert_stamped(&stamp, e)
    }

    fn insert_stamped(&mut self, stamp: &Stamp<'_>, e: &Entry) -> Result<(), DbError> {
        if self.debug {
            let time = format_timestamp(stamp.time_s, stamp.offset_s);
            eprintln!(
                "SCR: log db {}: insert {time} {}",
                self.path().display(),
                e.kind.name()
            );
        }
        let (job, run) = (self.job_row, self.run_row);
        let run = transaction(&mut self.store, Lock::Job(job), |s| {
            let run = track_run(s, job, run, stamp, e)?;
            let (sql, values) = row::insert(job, run, stamp, e);
            s.execute(&sql, &values, "adding the entry")?;
            if let Some(id) = run {
                s.execute(
                    "UPDATE runs SET last_s = {GREATEST}(last_s, ?2) WHERE id = ?1",
                    &[Value::Int(Some(id)), Value::Real(Some(stamp.time_s))],
                    "updating the run",
                )?;
            }
            Ok(run)
        })?;
        self.run_row = run;
        Ok(())
    }
}

/// What `e` does to the `runs` table; the run its row belongs to.
fn track_run(
    s: &mut dyn Store,
    job: i64,
    run: Option<i64>,
    stamp: &Stamp<'_>,
    e: &Entry,
) -> Result<Option<i64>, DbError> {
    let (job_v, time_v) = (Value::Int(Some(job)), Value::Real(Some(stamp.time_s)));
    let host_v = Value::Text(Some(stamp.host.to_string()));
    if e.is_event("START") {
        let procs = Value::Int(e.procs.map(|v| i64::try_from(v).unwrap_or(i64::MAX)));
        let nodes = Value::Int(e.nodes.map(|v| i64::try_from(v).unwrap_or(i64::MAX)));
        let adopt = s.query(
            "SELECT id FROM runs WHERE job_id = ?1 AND launched_by = 'run_loop' \
             AND app_start_s IS NULL AND end_s IS NULL \
             ORDER BY start_s DESC, id DESC LIMIT 1",
            std::slice::from_ref(&job_v),
            &[Col::Int],
            "finding the run",
        )?;
        if let Some(id) = first_int(&adopt) {
            s.execute(
                "UPDATE runs SET app_start_s = ?2, procs = ?3, nodes = ?4 WHERE id = ?1",
                &[Value::Int(Some(id)), time_v, procs, nodes],
                "adopting the run",
            )?;
            return Ok(Some(id));
        }
        return s
            .insert_id(
                "INSERT INTO runs (job_id, launched_by, host, start_s, app_start_s, last_s, \
                 procs, nodes) VALUES (?1, 'library', ?2, ?3, ?3, ?3, ?4, ?5)",
                &[job_v, host_v, time_v, procs, nodes],
                "adding the run",
            )
            .map(Some);
    }
    if e.is_event("RUN_START") {
        return s
            .insert_id(
                "INSERT INTO runs (job_id, launched_by, host, start_s, last_s) \
                 VALUES (?1, 'run_loop', ?2, ?3, ?3)",
                &[job_v, host_v, time_v],
                "adding the run",
            )
            .map(Some);
    }
    if e.is_event("RUN_END") {
        let run = match run {
            Some(id) => Some(id),
            None => first_int(&s.query(
                "SELECT id FROM runs WHERE job_id = ?1 AND end_s IS NULL \
                 ORDER BY start_s DESC, id DESC LIMIT 1",
                &[job_v],
                &[Col::Int],
                "finding the run",
            )?),
        };
        if let Some(id) = run {
            s.execute(
                "UPDATE runs SET end_s = ?2, end_note = ?3 WHERE id = ?1",
                &[Value::Int(Some(id)), time_v, Value::Text(e.note.clone())],
                "ending the run",
            )?;
        }
        return Ok(run);
    }
    Ok(run)
}

impl<S: Store> LogSink for DbLog<S> {
    fn target(&self) -> Target {
        Target::Database(self.path().to_path_buf())
    }

    fn write(&mut self, stamp: &Stamp<'_>, entry: &Entry) -> Result<(), LogWriteError> {
        self.insert_stamped(stamp, entry)
            .map_err(|e| LogWriteError::Db(Box::new(e)))
    }
}

/// Every entry of the database as log records (the form the text log
/// parser gives), in time order; events before transfers at equal times.
/// An older schema is read as it is, a newer one refused. A job id
/// recorded under several prefixes reads as `jobid@prefix`.
pub fn read_all(s: &mut dyn Store) -> Result<Vec<Record>, DbError> {
    let mut records = Vec::new();
    each_record(s, &mut |r| records.push(r))?;
    Ok(records)
}

/// [`read_all`] handing each record to `each` in the same order, as its
/// row is read where the store streams ([`Store::query_each`]). A bad row
/// ends the reading with its error after the records before it.
pub fn each_record(s: &mut dyn Store, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    check_readable(s)?;
    let path: PathBuf = s.location().to_path_buf();
    s.query_each(
        &row::select_all(),
        &[],
        &row::read_columns(),
        "reading entries",
        &mut |r| {
            each(row::record(&r, &path)?);
            Ok(())
        },
    )
}
