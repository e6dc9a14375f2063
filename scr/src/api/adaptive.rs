//! The adaptive Need_checkpoint policy inside the library
//! (`SCR_CHECKPOINT_ADAPTIVE=1`): collects what [`crate::interval::adaptive`]
//! decides from — the levels of the configured CKPT descriptors, this run's
//! checkpoint costs per level, `SCR_MTBF`, and earlier runs' logs in this
//! prefix — and logs each new choice as a `CHECKPOINT_INTERVAL` event whose
//! note says why. Only rank 0 decides (Need_checkpoint broadcasts its
//! answer); only configuration errors, identical on every rank, are errors.

use std::path::Path;

use super::Scr;
use crate::cache::Job;
use crate::error::ScrResult;
use crate::interval::adaptive::{decide, Decision, History, Inputs, MtbfConfig};
use crate::log::store::{DbError, DbSettings};
use crate::log::writer::{log_path, Entry, EventType};
use crate::log::{read_log, Record};

/// What the policy keeps between calls (meaningful on rank 0).
#[derive(Debug, Default)]
pub(super) struct AdaptiveState {
    /// Earlier runs' logs, read at the first call (`Some(None)`: none).
    history: Option<Option<History>>,
    /// The decision last written to the log.
    logged: Option<Decision>,
}

/// The distinct INTERVALs of the job's CKPT descriptors, ascending.
fn level_intervals(job: &Job) -> Vec<u64> {
    let mut v: Vec<u64> = job
        .sets
        .iter()
        .map(|d| d.descriptor.interval.max(1))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// SCR_FLUSH as the policy's top level: when the flush is synchronous,
/// every SCR_FLUSH checkpoints, and SCR_MTBF gives one figure more than the
/// `ckpt_levels` CKPT levels (the last for failures only the prefix
/// survives). Otherwise the flush is not a level, as before 2026-11-28.
fn flush_level(job: &Job, mtbf: Option<&MtbfConfig>, ckpt_levels: usize) -> Option<u64> {
    let f = &job.settings.flush;
    let per_level = match mtbf {
        Some(MtbfConfig::PerLevel(v)) => v.len(),
        _ => 0,
    };
    (f.every > 0 && !f.asynchronous && per_level == ckpt_levels + 1).then_some(f.every)
}

/// Drop this run's own records (its START, the newest of this job, and
/// everything of this job after it): the history is earlier runs only.
fn drop_this_run(records: &mut Vec<Record>, jobid: &str) {
    let ours = |r: &Record| r.jobid.as_deref() == Some(jobid);
    if let Some(i) = records.iter().rposition(|r| r.is_event("START") && ours(r)) {
        let mut k = 0;
        records.retain(|r| {
            let keep = k < i || !ours(r);
            k += 1;
            keep
        });
    }
}

/// Every record of the server log database `s` names, and the server as
/// shown in messages: MySQL/MariaDB for a `mysql://` URL, else PostgreSQL.
fn read_server(s: &DbSettings) -> Result<(String, Vec<Record>), DbError> {
    let host = s.host.as_deref().unwrap_or("");
    if crate::log::store::is_mysql_url(host) {
        read_mysql(s)
    } else {
        read_postgres(s)
    }
}

#[cfg(feature = "logdb-postgres")]
fn read_postgres(s: &DbSettings) -> Result<(String, Vec<Record>), DbError> {
    use crate::log::server::{read_records, ServerSettings};
    let srv = ServerSettings::from_db_settings(s)?;
    let recs = read_records(&srv)?;
    Ok((srv.shown().to_string(), recs))
}

#[cfg(not(feature = "logdb-postgres"))]
fn read_postgres(s: &DbSettings) -> Result<(String, Vec<Record>), DbError> {
    Err(DbError::postgres_not_built(s.host.as_deref().unwrap_or("")))
}

#[cfg(feature = "logdb-mysql")]
fn read_mysql(s: &DbSettings) -> Result<(String, Vec<Record>), DbError> {
    use crate::log::mysql::{read_records, MySettings};
    let srv = MySettings::from_db_settings(s)?;
    let recs = read_records(&srv)?;
    Ok((srv.shown().to_string(), recs))
}

#[cfg(not(feature = "logdb-mysql"))]
fn read_mysql(s: &DbSettings) -> Result<(String, Vec<Record>), DbError> {
    Err(DbError::mysql_not_built(s.host.as_deref().unwrap_or("")))
}

/// Every record of the SQLite log database at `path`.
#[cfg(feature = "logdb-sqlite")]
fn read_sqlite(path: &Path) -> Result<Vec<Record>, DbError> {
    crate::log::db::read_records(path)
}

#[cfg(not(feature = "logdb-sqlite"))]
fn read_sqlite(_: &Path) -> Result<Vec<Record>, DbError> {
    Err(DbError::sqlite_not_built())
}

/// Earlier runs' records: the log database when SCR_LOG_DB_ENABLE=1 and it
/// exists, else the text log; `None` when neither exists or is readable (a
/// warning: the policy then works from this run and SCR_MTBF alone).
fn read_history(job: &Job) -> Option<History> {
    let settings = DbSettings::from_config(&job.cfg).ok().flatten();
    if let Some(s) = settings.as_ref().filter(|s| s.host.is_some()) {
        // The server holds every job of the site: this job's earlier runs
        // are those logged under its id and prefix (the history reads the
        // rest as other jobs, which is what they are).
        let read = read_server(s);
        return match read {
            Ok((shown, mut recs)) => {
                if job.log.as_ref().is_some_and(|l| l.db_path().is_some()) {
                    drop_this_run(&mut recs, &job.jobid);
                    // In SCR 3.1's tables this job is its user and job name.
                    #[cfg(feature = "logdb-mysql")]
                    if let Some((user, name)) = crate::log::scr31::user_and_job_name(s) {
                        drop_this_run(&mut recs, &crate::log::scr31::job_key(&user, &name));
                    }
                }
                Some(History::from_records(shown, &recs))
            }
            Err(e) => {
                eprintln!("SCR: warning: adaptive checkpoint policy ignores the logs: {e}");
                None
            }
        };
    }
    // Without SQLite in this build no database was written by it: the
    // text log is the history (SCR_LOG_DB_ENABLE=1 was warned about at init).
    let db = settings
        .filter(|_| cfg!(feature = "logdb-sqlite"))
        .map(|s| s.path(&job.prefix));
    let logged_to = |p: &Path, db: bool| {
        job.log.as_ref().is_some_and(|l| {
            if db {
                l.db_path().as_deref() == Some(p)
            } else {
                l.path() == Some(p)
            }
        })
    };
    let (path, is_db) = match db.filter(|p| p.exists()) {
        Some(p) => (p, true),
        None => (log_path(&job.prefix), false),
    };
    if !path.exists() {
        return None;
    }
    let records = if is_db {
        read_sqlite(&path).map_err(|e| e.to_string())
    } else {
        read_log(&path, false)
            .map(|p| p.records)
            .map_err(|e| e.to_string())
    };
    match records {
        Ok(mut recs) => {
            if logged_to(&path, is_db) {
                drop_this_run(&mut recs, &job.jobid);
            }
            Some(History::from_records(path.display().to_string(), &recs))
        }
        Err(e) => {
            eprintln!("SCR: warning: adaptive checkpoint policy ignores the logs: {e}");
            None
        }
    }
}

impl Scr {
    /// The adaptive policy's answer: `None` when SCR_CHECKPOINT_ADAPTIVE is
    /// off; on rank 0 whether to checkpoint `since_s` seconds after the
    /// last checkpoint ended; `Some(false)` elsewhere (rank 0's answer is
    /// what Need_checkpoint broadcasts).
    pub(super) fn adaptive_need(&mut self, since_s: f64) -> ScrResult<Option<bool>> {
        let Some(job) = self.job.as_ref().filter(|_| !self.finalized) else {
            return Ok(None);
        };
        if !job.settings.need.adaptive {
            return Ok(None);
        }
        // Parsed at init; a bad SCR_MTBF is reported here, where it is used.
        let mtbf = job.settings.need.mtbf.clone()?;
        if !job.rank().is_root() {
            return Ok(Some(false));
        }
        let mut levels = level_intervals(job);
        let mut measured = vec![Vec::new(); levels.len()];
        for &(ckpt, cost) in &self.need.costs {
            let iv = job.sets[job.desc_for(ckpt)].descriptor.interval.max(1);
            if let Some(k) = levels.iter().position(|&l| l == iv) {
                measured[k].push(cost);
            }
        }
        let flush_every = flush_level(job, mtbf.as_ref(), levels.len());
        if let Some(every) = flush_every {
            // A flushed checkpoint costs its write and protection, then its
            // synchronous flush.
            let costs = self.need.flush_costs.iter().filter_map(|&(ckpt, flush)| {
                let c = self.need.costs.iter().find(|&&(k, _)| k == ckpt)?;
                Some(c.1 + flush)
            });
            levels.push(every);
            measured.push(costs.collect());
        }
        let state = &mut self.need.adaptive;
        let history = state.history.get_or_insert_with(|| read_history(job));
        let decision = decide(&Inputs {
            level_intervals: &levels,
            measured_s: &measured,
            history: history.as_ref(),
            mtbf: mtbf.as_ref(),
            run_elapsed_s: self.clock.elapsed(self.init_at).as_secs_f64(),
            flush_every,
        });
        if decision.differs_from(state.logged.as_ref()) {
            let mut e = Entry::event(EventType::CheckpointInterval).note(decision.note());
            if let Some(t) = decision.interval_s() {
                e = e.secs(t);
            }
            job.log(e);
            state.logged = Some(decision.clone());
        }
        Ok(Some(decision.need(since_s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::parse_line;

    #[test]
    fn this_runs_records_are_not_history() {
        let lines = [
            "100: host=n0, jobid=7, event=START",
            "150: host=n0, jobid=7, xfer=WRITE, dset=1, secs=2",
            "200: host=n0, jobid=8, event=START",
            "300: host=n0, jobid=7, event=START",
            "310: host=n0, jobid=8, xfer=WRITE, dset=1, secs=3",
            "320: host=n0, jobid=7, xfer=WRITE, dset=1, secs=4",
        ];
        let mut recs: Vec<Record> = lines.iter().map(|l| parse_line(l).unwrap()).collect();
        drop_this_run(&mut recs, "7");
        let left: Vec<f64> = recs.iter().map(|r| r.time_s).collect();
        assert_eq!(left, vec![100.0, 150.0, 200.0, 310.0]);
        let mut none: Vec<Record> = recs.clone();
        drop_this_run(&mut none, "9");
        assert_eq!(none, recs);
    }
}
