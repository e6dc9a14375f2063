//! SCR 3.1's own log tables on a MySQL/MariaDB server: the database a site
//! made from SCR's `scr.mysql` (tables `types`, `usernames`, `jobnames`,
//! `jobs`, `events` and `transfers`, no `schema_version`). When
//! `SCR_LOG_DB_HOST=mysql://…` names such a database, the library writes its
//! entries into those tables as SCR 3.1 lays them out instead of refusing a
//! database that is not its own, and `scr interval --db` and the adaptive
//! policy read them back ([`each_record`]).
//!
//! SCR 3.1's layout, which this module follows:
//! - a job is a user and a job name (`SCR_USER_NAME`, else `$USER`, and
//!   `SCR_JOB_NAME`), one `jobs` row across every allocation and run of
//!   that name; SCR 3.1 logs nothing to the database without
//!   `SCR_JOB_NAME`, and neither do we ([`DbError::Scr31NoJobName`]);
//! - event and transfer types are rows of `types`, found or added by name;
//! - times are `DATETIME`s in whole seconds of the writing process's local
//!   time (no zone); a transfer has its `start` (the entry's time less its
//!   seconds) and `end` (the entry's time), its bandwidth `bw`, and every
//!   column the schema declares `NOT NULL` filled (0 or empty when the
//!   entry has no value).
//!
//! SCR 3.1's own library inserts into a column `time` that its `scr.mysql`
//! does not have (it names it `secs`), so its inserts fail against that
//! schema; we write the schema's columns. The tables have no host and no
//! process or node counts: an entry read back has no host, `procs` or
//! `nodes`, its time in whole seconds and its seconds and bytes as the
//! schema's single-precision `FLOAT`.
//!
//! Layer 3 of `log/`: over any [`Store`] (the MySQL one, [`super::mysql`],
//! opens it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::event::{Entry, EntryKind, Record, Stamp};
use super::sink::{LogSink, LogWriteError, Target};
use super::store::{Col, DbError, DbSettings, Store, Value};
use crate::civil::{local_sql_datetime_s, sql_datetime};

/// SCR 3.1's tables, as its `scr.mysql` creates them (without that file's
/// database, grants and `DROP TABLE`s): what a site that followed SCR's
/// instructions has (`scr31.sql` beside this file, which
/// ci/tests.d/logdb-mysql.sh loads with the `mariadb` client). Statements
/// end with `;`.
pub const SCHEMA: &str = include_str!("scr31.sql");

/// The tables that make a database SCR 3.1's (with no `schema_version`).
const TABLES: [&str; 6] = [
    "types",
    "usernames",
    "jobnames",
    "jobs",
    "events",
    "transfers",
];

/// Whether the database `s` is connected to is SCR 3.1's: all six of its
/// tables and no `schema_version` (MySQL's catalogue).
pub fn is_scr31(s: &mut dyn Store) -> Result<bool, DbError> {
    let names: Vec<String> = TABLES.iter().map(|t| format!("'{t}'")).collect();
    let rows = s.query(
        &format!(
            "SELECT COUNT(DISTINCT table_name), \
             SUM(table_name = 'schema_version') FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name IN ({}, 'schema_version')",
            names.join(", ")
        ),
        &[],
        &[Col::Int, Col::Int],
        "reading the schema",
    )?;
    let (found, ours) = rows.first().map_or((0, 0), |r| {
        (r[0].int().unwrap_or(0), r[1].int().unwrap_or(0))
    });
    Ok(ours == 0 && found == TABLES.len() as i64)
}

/// The job key a record read from SCR 3.1's tables carries as its job id:
/// `user/jobname` (a job there is a user and a job name).
pub fn job_key(username: &str, jobname: &str) -> String {
    format!("{username}/{jobname}")
}

/// This job's user (`SCR_USER_NAME`, else `$USER`) and `SCR_JOB_NAME`:
/// what names it in SCR 3.1's tables; `None` without both.
pub fn user_and_job_name(settings: &DbSettings) -> Option<(String, String)> {
    let user = settings
        .username
        .clone()
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))?;
    Some((user, settings.jobname.clone()?))
}

/// The `id` of `name` in the lookup table `table` (`types`, `usernames`,
/// `jobnames`), added when missing. Not `INSERT IGNORE`, which would cut a
/// name too long for the column into another's row.
fn name_id(s: &mut dyn Store, table: &'static str, name: &str) -> Result<i64, DbError> {
    let find = format!("SELECT id FROM `{table}` WHERE name = ?1");
    let v = [Value::Text(Some(name.to_string()))];
    let found = |s: &mut dyn Store| -> Result<Option<i64>, DbError> {
        Ok(s.query(&find, &v, &[Col::Int], "finding a name")?
            .first()
            .and_then(|r| r[0].int()))
    };
    if let Some(id) = found(s)? {
        return Ok(id);
    }
    s.execute(
        &format!("INSERT INTO `{table}` (name) VALUES (?1) ON DUPLICATE KEY UPDATE id = id"),
        &v,
        "adding a name",
    )?;
    found(s)?.ok_or_else(|| DbError::NoRow {
        path: s.location().to_path_buf(),
        what: "adding a name",
    })
}

/// An open log of one job in SCR 3.1's tables, on one process.
#[derive(Debug)]
pub struct Scr31Log<S> {
    store: S,
    /// This job's `jobs.id`.
    job: i64,
    /// `types` ids found so far, by name.
    types: HashMap<String, i64>,
    debug: bool,
}

impl<S: Store> Scr31Log<S> {
    /// Find or add the job of this user and `SCR_JOB_NAME` in the SCR 3.1
    /// database `store` is connected to ([`is_scr31`]).
    pub fn open_on(mut store: S, settings: &DbSettings) -> Result<Scr31Log<S>, DbError> {
        let server = store.location().to_path_buf();
        let Some((username, jobname)) = user_and_job_name(settings) else {
            return Err(DbError::Scr31NoJobName { server });
        };
        if settings.debug {
            eprintln!(
                "SCR: log db {} (SCR 3.1 tables): job {username:?} {jobname:?}",
                server.display()
            );
        }
        let user_id = name_id(&mut store, "usernames", &username)?;
        let name_id_ = name_id(&mut store, "jobnames", &jobname)?;
        let key = [Value::Int(Some(user_id)), Value::Int(Some(name_id_))];
        let find = "SELECT id FROM jobs WHERE username_id = ?1 AND jobname_id = ?2";
        let mut job = store
            .query(find, &key, &[Col::Int], "finding the job")?
            .first()
            .and_then(|r| r[0].int());
        if job.is_none() {
            let now = super::time::now_s();
            let mut values = key.to_vec();
            values.push(Value::Text(Some(sql_datetime(
                now,
                crate::civil::local_offset_s(now as i64),
            ))));
            store.execute(
                "INSERT INTO jobs (username_id, jobname_id, start) VALUES (?1, ?2, ?3) \
                 ON DUPLICATE KEY UPDATE id = id",
                &values,
                "adding the job",
            )?;
            job = store
                .query(find, &key, &[Col::Int], "finding the job")?
                .first()
                .and_then(|r| r[0].int());
        }
        let job = job.ok_or_else(|| DbError::NoRow {
            path: server.clone(),
            what: "adding the job",
        })?;
        Ok(Scr31Log {
            store,
            job,
            types: HashMap::new(),
            debug: settings.debug,
        })
    }

    /// The server, as shown in messages.
    pub fn path(&self) -> &Path {
        self.store.location()
    }

    /// This job's row of `jobs`.
    pub fn job_row(&self) -> i64 {
        self.job
    }

    fn type_id(&mut self, name: &str) -> Result<i64, DbError> {
        if let Some(&id) = self.types.get(name) {
            return Ok(id);
        }
        let id = name_id(&mut self.store, "types", name)?;
        self.types.insert(name.to_string(), id);
        Ok(id)
    }

    /// Record `e` under `stamp`: one row of `events` or `transfers`.
    pub fn insert(&mut self, stamp: &Stamp<'_>, e: &Entry) -> Result<(), DbError> {
        let (sql, values) = insert(self.job, self.type_id(e.kind.name())?, stamp, e);
        if self.debug {
            eprintln!(
                "SCR: log db {}: insert {} {}",
                self.path().display(),
                sql_datetime(stamp.time_s, stamp.offset_s),
                e.kind.name()
            );
        }
        self.store.execute(sql, &values, "adding the entry")
    }
}

/// A count as SCR 3.1's `INT UNSIGNED` columns take it (a larger one is
/// refused by the server's strict mode, never cut).
fn count(v: Option<u64>) -> Value {
    Value::Int(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

/// The INSERT of `e` for job row `job` and type `type_id`, and its values.
fn insert(job: i64, type_id: i64, stamp: &Stamp<'_>, e: &Entry) -> (&'static str, Vec<Value>) {
    let at = |t: f64| Value::Text(Some(sql_datetime(t, stamp.offset_s)));
    let text = |v: &Option<String>| Value::Text(v.clone());
    let (job, type_id) = (Value::Int(Some(job)), Value::Int(Some(type_id)));
    if !e.kind.is_transfer() {
        return (
            "INSERT INTO events (job_id, type_id, dset_id, dset_name, start, secs, note) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            vec![
                job,
                type_id,
                count(e.dset),
                text(&e.name),
                at(stamp.time_s),
                // A FLOAT column holds no NaN or infinity.
                Value::Real(e.secs.filter(|s| s.is_finite())),
                text(&e.note),
            ],
        );
    }
    // Every column of `transfers` is NOT NULL: 0 or empty stands for none.
    let secs = e.secs.filter(|s| s.is_finite() && *s >= 0.0);
    let bytes = e
        .bytes
        .filter(|b| b.is_finite() && *b >= 0.0)
        .unwrap_or(0.0);
    let bw = match secs {
        Some(s) if s > 0.0 => bytes / s,
        _ => 0.0,
    };
    let or_empty = |v: &Option<String>| Value::Text(Some(v.clone().unwrap_or_default()));
    (
        "INSERT INTO transfers (job_id, type_id, dset_id, dset_name, start, `end`, secs, \
         bytes, files, bw, `from`, `to`) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        vec![
            job,
            type_id,
            count(Some(e.dset.unwrap_or(0))),
            or_empty(&e.name),
            at(stamp.time_s - secs.unwrap_or(0.0)),
            at(stamp.time_s),
            Value::Real(Some(secs.unwrap_or(0.0))),
            Value::Real(Some(bytes)),
            count(Some(e.files.unwrap_or(0))),
            Value::Real(Some(bw)),
            or_empty(&e.from),
            or_empty(&e.to),
        ],
    )
}

impl<S: Store> LogSink for Scr31Log<S> {
    fn target(&self) -> Target {
        Target::Database(self.path().to_path_buf())
    }

    fn write(&mut self, stamp: &Stamp<'_>, entry: &Entry) -> Result<(), LogWriteError> {
        self.insert(stamp, entry)
            .map_err(|e| LogWriteError::Db(Box::new(e)))
    }
}

/// Every row of `events` and `transfers` in time order (an event at its
/// `start`, a transfer at its `end`; events first at equal times, then by
/// id), with its job's user and name and its type's name (NULL when the
/// `types` row is missing: [`record`] refuses it, never skips it).
const SELECT_ALL: &str = "\
SELECT 0 AS t, e.id, DATE_FORMAT(e.start, '%Y-%m-%d %H:%i:%s') AS at, u.name, n.name, y.name, \
  e.dset_id, e.dset_name, e.secs, e.note, NULL, NULL, NULL, NULL, e.job_id \
  FROM events e LEFT JOIN types y ON y.id = e.type_id LEFT JOIN jobs j ON j.id = e.job_id \
  LEFT JOIN usernames u ON u.id = j.username_id LEFT JOIN jobnames n ON n.id = j.jobname_id \
UNION ALL \
SELECT 1, x.id, DATE_FORMAT(x.`end`, '%Y-%m-%d %H:%i:%s'), u.name, n.name, y.name, \
  x.dset_id, x.dset_name, x.secs, NULL, x.`from`, x.`to`, x.bytes, x.files, x.job_id \
  FROM transfers x LEFT JOIN types y ON y.id = x.type_id LEFT JOIN jobs j ON j.id = x.job_id \
  LEFT JOIN usernames u ON u.id = j.username_id LEFT JOIN jobnames n ON n.id = j.jobname_id \
ORDER BY at, t, 2";

/// How [`SELECT_ALL`]'s columns are read.
const COLUMNS: [Col; 15] = [
    Col::Int,
    Col::Int,
    Col::Text,
    Col::Text,
    Col::Text,
    Col::Text,
    Col::Int,
    Col::Text,
    Col::Real,
    Col::Text,
    Col::Text,
    Col::Text,
    Col::Real,
    Col::Int,
    Col::Int,
];

/// One row of [`SELECT_ALL`] as a record; `path` names the server.
fn record(r: &[Value], path: &Path) -> Result<Record, DbError> {
    let transfer = r[0].int() == Some(1);
    let table = if transfer { "transfers" } else { "events" };
    let id = r[1].int().unwrap_or(0);
    let bad = |what: String| DbError::BadRow {
        path: path.to_path_buf(),
        table,
        id,
        what,
    };
    let time_s = match r[2].text() {
        Some(t) => local_sql_datetime_s(t).ok_or_else(|| bad(format!("time {t:?}")))?,
        None => return Err(bad("no time".into())),
    };
    // A type id with no row in `types` is no entry anyone can read.
    let Some(kind_name) = r[5].text() else {
        return Err(bad("its type_id has no row in types".into()));
    };
    let kind = if transfer {
        EntryKind::xfer(kind_name)
    } else {
        EntryKind::event(kind_name)
    };
    let mut e = Entry::of_kind(kind);
    let nonempty = |v: &Value| v.text().filter(|t| !t.is_empty()).map(str::to_owned);
    let unsigned = |v: &Value, column: &str| -> Result<Option<u64>, DbError> {
        v.int()
            .map(|n| u64::try_from(n).map_err(|_| bad(format!("{column}={n} is negative"))))
            .transpose()
    };
    e.dset = unsigned(&r[6], "dset_id")?;
    e.name = nonempty(&r[7]);
    e.secs = match r[8].real() {
        Some(s) if !(s.is_finite() && s >= 0.0) => {
            return Err(bad(format!("secs={s} is not a non-negative number")))
        }
        s => s,
    };
    e.note = r[9].text().map(str::to_owned);
    if transfer {
        e.from = nonempty(&r[10]);
        e.to = nonempty(&r[11]);
        e.bytes = r[12].real();
        e.files = unsigned(&r[13], "files")?;
    }
    let jobid = match (r[3].text(), r[4].text()) {
        (Some(u), Some(n)) => job_key(u, n),
        _ => format!("job {}", r[14].int().unwrap_or(0)),
    };
    Ok(Record {
        time_s,
        host: None,
        jobid: Some(jobid),
        entry: e,
        other: Default::default(),
    })
}

/// Every entry of SCR 3.1's tables as log records, in time order, each
/// handed to `each` as its row arrives; a bad row ends the reading with
/// its error (table and id) after the records before it.
pub fn each_record(s: &mut dyn Store, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    let path: PathBuf = s.location().to_path_buf();
    s.query_each(SELECT_ALL, &[], &COLUMNS, "reading entries", &mut |r| {
        each(record(&r, &path)?);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::{EventType, XferType};

    fn stamp(t: f64) -> Stamp<'static> {
        Stamp {
            time_s: t,
            offset_s: 3600,
            host: "n0",
            jobid: "7",
        }
    }

    #[test]
    fn an_event_is_a_row_of_events_at_its_local_second() {
        let e = Entry::event(EventType::CheckpointEnd)
            .dset(3)
            .name("ckpt.3")
            .secs(1.5);
        let (sql, v) = insert(4, 9, &stamp(1_795_349_472.7), &e);
        assert!(sql.starts_with("INSERT INTO events"), "{sql}");
        assert_eq!(v[0], Value::Int(Some(4)));
        assert_eq!(v[1], Value::Int(Some(9)));
        assert_eq!(v[2], Value::Int(Some(3)));
        assert_eq!(v[3], Value::Text(Some("ckpt.3".into())));
        assert_eq!(v[4], Value::Text(Some("2026-11-22 13:11:12".into())));
        assert_eq!(v[5], Value::Real(Some(1.5)));
        assert_eq!(v[6], Value::Text(None));
    }

    #[test]
    fn a_transfer_fills_every_not_null_column_and_its_bandwidth() {
        let e = Entry::xfer(XferType::FlushSync)
            .from("/dev/shm/c")
            .to("/p/ckpt.2")
            .dset(2)
            .secs(2.0)
            .bytes(1000)
            .files(4);
        let (sql, v) = insert(1, 2, &stamp(1_795_349_472.0), &e);
        assert!(sql.starts_with("INSERT INTO transfers"), "{sql}");
        assert_eq!(v.len(), 12);
        assert_eq!(v[4], Value::Text(Some("2026-11-22 13:11:10".into())));
        assert_eq!(v[5], Value::Text(Some("2026-11-22 13:11:12".into())));
        assert_eq!(v[9], Value::Real(Some(500.0)));
        // A transfer without values: zeros and empty strings, never NULL.
        let (_, v) = insert(1, 2, &stamp(1_795_349_472.0), &Entry::xfer(XferType::Fetch));
        assert!(v
            .iter()
            .all(|v| *v != Value::Int(None) && *v != Value::Real(None) && *v != Value::Text(None)));
        assert_eq!(v[9], Value::Real(Some(0.0)));
    }

    #[test]
    fn rows_read_back_as_records_and_bad_ones_are_named() {
        let path = Path::new("mysql://u@h:3306/scr");
        let t = crate::civil::sql_datetime(
            1_795_349_472.0,
            crate::civil::local_offset_s(1_795_349_472),
        );
        let row = |kind: i64, time: Option<&str>, secs: f64| {
            vec![
                Value::Int(Some(kind)),
                Value::Int(Some(11)),
                Value::Text(time.map(str::to_owned)),
                Value::Text(Some("alice".into())),
                Value::Text(Some("heat".into())),
                Value::Text(Some(if kind == 1 { "FLUSH_SYNC" } else { "HALT" }.into())),
                Value::Int(Some(5)),
                Value::Text(Some(String::new())),
                Value::Real(Some(secs)),
                Value::Text(None),
                Value::Text(Some("/a".into())),
                Value::Text(Some("/b".into())),
                Value::Real(Some(64.0)),
                Value::Int(Some(2)),
                Value::Int(Some(1)),
            ]
        };
        let r = record(&row(1, Some(&t), 0.5), path).unwrap();
        assert_eq!(r.time_s, 1_795_349_472.0);
        assert_eq!(r.jobid.as_deref(), Some("alice/heat"));
        assert!(r.is_transfer("FLUSH_SYNC"));
        assert_eq!(r.entry.from.as_deref(), Some("/a"));
        assert_eq!(
            (r.entry.files, r.entry.bytes, r.entry.name.clone()),
            (Some(2), Some(64.0), None)
        );
        let r = record(&row(0, Some(&t), 0.5), path).unwrap();
        assert!(r.is_event("HALT"));
        assert_eq!(r.entry.from, None);
        for (bad, want) in [
            (row(0, None, 0.5), "table events, row id 11: no time"),
            (
                row(1, Some("yesterday"), 0.5),
                "table transfers, row id 11: time \"yesterday\"",
            ),
            (
                row(0, Some(&t), -1.0),
                "secs=-1 is not a non-negative number",
            ),
            (
                {
                    let mut r = row(1, Some(&t), 0.5);
                    r[5] = Value::Text(None);
                    r
                },
                "table transfers, row id 11: its type_id has no row in types",
            ),
        ] {
            let e = record(&bad, path).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
