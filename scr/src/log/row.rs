//! The one mapping between an [`Entry`] and a row of `events` or
//! `transfers`, both directions: [`FIELDS`] names each entry field's column
//! once, and the INSERT a sink runs, the SELECT a reader runs and the
//! checks a read row passes are all derived from it, for SQLite and
//! PostgreSQL alike.

use std::collections::BTreeMap;
use std::path::Path;

use super::event::{Entry, EntryKind, Record, Stamp};
use super::store::{Col, DbError, Value};
use super::time::format_timestamp;

/// A stored value the log format does not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum BadValue {
    /// A count below zero.
    #[error("{column}={value} is negative")]
    Negative {
        /// The column.
        column: &'static str,
        /// Its value.
        value: i64,
    },
    /// A duration that is negative or not a number.
    #[error("secs={0} is not a non-negative number")]
    Secs(f64),
}

/// An entry field stored in a column of `events`, `transfers` or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    From,
    To,
    Dset,
    Name,
    Secs,
    Note,
    Bytes,
    Files,
    Procs,
    Nodes,
}

/// Every entry field with a column, in column order. The tables' other
/// columns (`job_id`, `run_id`, `time_s`, `time`, `host`, `type`) come
/// from the stamp, the job and the run.
const FIELDS: [Field; 10] = [
    Field::From,
    Field::To,
    Field::Dset,
    Field::Name,
    Field::Secs,
    Field::Note,
    Field::Bytes,
    Field::Files,
    Field::Procs,
    Field::Nodes,
];

/// A stored count, `u64` in the entry: INTEGER columns are signed, so a
/// count beyond `i64::MAX` is stored as `i64::MAX`.
fn to_i64(v: Option<u64>) -> Value {
    Value::Int(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

impl Field {
    /// Its column and the column's type.
    fn column(self) -> (&'static str, Col) {
        match self {
            Field::From => ("from_path", Col::Text),
            Field::To => ("to_path", Col::Text),
            Field::Dset => ("dset", Col::Int),
            Field::Name => ("name", Col::Text),
            Field::Secs => ("secs", Col::Real),
            Field::Note => ("note", Col::Text),
            Field::Bytes => ("bytes", Col::Int),
            Field::Files => ("files", Col::Int),
            Field::Procs => ("procs", Col::Int),
            Field::Nodes => ("nodes", Col::Int),
        }
    }

    /// Whether the table of transfers (`true`) or events has the column.
    fn in_table(self, transfer: bool) -> bool {
        match self {
            Field::Dset | Field::Name | Field::Secs => true,
            Field::From | Field::To | Field::Bytes | Field::Files => transfer,
            Field::Note | Field::Procs | Field::Nodes => !transfer,
        }
    }

    /// The field's value for the row.
    fn get(self, e: &Entry) -> Value {
        match self {
            Field::From => Value::Text(e.from.clone()),
            Field::To => Value::Text(e.to.clone()),
            Field::Dset => to_i64(e.dset),
            Field::Name => Value::Text(e.name.clone()),
            Field::Secs => Value::Real(e.secs),
            Field::Note => Value::Text(e.note.clone()),
            // Whole bytes: the entry's double is a count (`as` saturates).
            Field::Bytes => Value::Int(e.bytes.map(|b| b as i64)),
            Field::Files => to_i64(e.files),
            Field::Procs => to_i64(e.procs),
            Field::Nodes => to_i64(e.nodes),
        }
    }

    /// Put a read value back, unless the log format does not allow it.
    fn set(self, e: &mut Entry, v: &Value) -> Result<(), BadValue> {
        let text = || v.text().map(str::to_owned);
        let count = || -> Result<Option<u64>, BadValue> {
            v.int()
                .map(|n| {
                    u64::try_from(n).map_err(|_| BadValue::Negative {
                        column: self.column().0,
                        value: n,
                    })
                })
                .transpose()
        };
        match self {
            Field::From => e.from = text(),
            Field::To => e.to = text(),
            Field::Dset => e.dset = count()?,
            Field::Name => e.name = text(),
            Field::Secs => match v.real() {
                Some(s) if !(s.is_finite() && s >= 0.0) => return Err(BadValue::Secs(s)),
                s => e.secs = s,
            },
            Field::Note => e.note = text(),
            Field::Bytes => e.bytes = count()?.map(|b| b as f64),
            Field::Files => e.files = count()?,
            Field::Procs => e.procs = count()?,
            Field::Nodes => e.nodes = count()?,
        }
        Ok(())
    }
}

fn table(transfer: bool) -> &'static str {
    if transfer {
        "transfers"
    } else {
        "events"
    }
}

/// The INSERT of `e`, written under `stamp` by the job with `jobs` row
/// `job` in run `run`, and its values (portable form).
pub(crate) fn insert(
    job: i64,
    run: Option<i64>,
    stamp: &Stamp<'_>,
    e: &Entry,
) -> (String, Vec<Value>) {
    let transfer = e.kind.is_transfer();
    let mut columns = vec!["job_id", "run_id", "time_s", "time", "host", "type"];
    let mut values = vec![
        Value::Int(Some(job)),
        Value::Int(run),
        Value::Real(Some(stamp.time_s)),
        Value::Text(Some(format_timestamp(stamp.time_s, stamp.offset_s))),
        Value::Text(Some(stamp.host.to_string())),
        Value::Text(Some(e.kind.name().to_string())),
    ];
    for f in FIELDS.into_iter().filter(|f| f.in_table(transfer)) {
        columns.push(f.column().0);
        values.push(f.get(e));
    }
    let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        table(transfer),
        columns.join(", "),
        marks.join(", ")
    );
    (sql, values)
}

/// The columns a read row starts with, before [`FIELDS`]: 1 for a
/// transfer, the row id, `time_s`, `host`, the job id, `type`.
const HEAD: [Col; 6] = [
    Col::Int,
    Col::Int,
    Col::Real,
    Col::Text,
    Col::Text,
    Col::Text,
];

/// Every entry of every job in time order (events before transfers at
/// equal times), one row per entry, each read as [`read_columns`] say.
/// A job id recorded under several prefixes reads as `jobid@prefix`.
pub(crate) fn select_all() -> String {
    let jobid = "CASE WHEN (SELECT COUNT(*) FROM jobs j2 WHERE j2.jobid = j.jobid) > 1 \
                 THEN j.jobid || '@' || j.prefix ELSE j.jobid END";
    let part = |transfer: bool, a: &str| {
        let fields: Vec<String> = FIELDS
            .iter()
            .map(|f| match (f.in_table(transfer), f.column()) {
                (true, (column, _)) => format!("{a}.{column}"),
                (false, (_, Col::Int)) => "CAST(NULL AS {CAST_INT})".into(),
                (false, (_, Col::Real)) => "CAST(NULL AS {CAST_REAL})".into(),
                (false, (_, Col::Text)) => "CAST(NULL AS {CAST_TEXT})".into(),
            })
            .collect();
        format!(
            "SELECT CAST({} AS {{CAST_INT}}) AS k, {a}.id, {a}.time_s, {a}.host, {jobid}, {a}.type, {} \
             FROM {} {a} JOIN jobs j ON j.id = {a}.job_id",
            u8::from(transfer),
            fields.join(", "),
            table(transfer)
        )
    };
    format!(
        "{} UNION ALL {} ORDER BY 3, 1, 2",
        part(false, "e"),
        part(true, "t")
    )
}

/// The types of [`select_all`]'s columns.
pub(crate) fn read_columns() -> Vec<Col> {
    HEAD.iter()
        .copied()
        .chain(FIELDS.iter().map(|f| f.column().1))
        .collect()
}

/// Check a row of [`select_all`] and turn it into a record; a value the log
/// format does not allow is [`DbError::BadRow`] naming the table and row id.
pub(crate) fn record(row: &[Value], path: &Path) -> Result<Record, DbError> {
    let transfer = row[0].int() == Some(1);
    let id = row[1].int().unwrap_or(0);
    let bad = |what: String| DbError::BadRow {
        path: path.to_path_buf(),
        table: table(transfer),
        id,
        what,
    };
    let time_s = row[2].real().unwrap_or(f64::NAN);
    if !time_s.is_finite() {
        return Err(bad(format!("time_s={time_s} is not a time")));
    }
    let ty = row[5].text().unwrap_or_default();
    let kind = if transfer {
        EntryKind::xfer(ty)
    } else {
        EntryKind::event(ty)
    };
    let mut entry = Entry::of_kind(kind);
    for (f, v) in FIELDS.iter().zip(&row[HEAD.len()..]) {
        f.set(&mut entry, v).map_err(|e| bad(e.to_string()))?;
    }
    Ok(Record {
        time_s,
        host: row[3].text().map(str::to_owned),
        jobid: row[4].text().map(str::to_owned),
        entry,
        other: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::event::{EventType, XferType};
    use super::*;

    fn stamp() -> Stamp<'static> {
        Stamp {
            time_s: 12.5,
            offset_s: 3600,
            host: "n1",
            jobid: "7",
        }
    }

    /// The row a reader selects for what `insert` stored.
    fn as_read(sql_values: &[Value], transfer: bool, columns: &[&str]) -> Vec<Value> {
        let mut row = vec![
            Value::Int(Some(i64::from(transfer))),
            Value::Int(Some(9)),
            sql_values[2].clone(),
            sql_values[4].clone(),
            Value::Text(Some("7".into())),
            sql_values[5].clone(),
        ];
        for f in FIELDS {
            let at = columns.iter().position(|c| *c == f.column().0);
            row.push(match (at, f.column().1) {
                (Some(i), _) => sql_values[i].clone(),
                (None, Col::Int) => Value::Int(None),
                (None, Col::Real) => Value::Real(None),
                (None, Col::Text) => Value::Text(None),
            });
        }
        row
    }

    fn columns_of(sql: &str) -> Vec<&str> {
        let open = sql.find('(').unwrap();
        let close = sql.find(')').unwrap();
        sql[open + 1..close].split(", ").collect()
    }

    #[test]
    fn entries_go_to_their_table_and_come_back() {
        let entries = [
            Entry::event(EventType::Start).procs_nodes(8, 2).name("x"),
            Entry::event(EventType::RunEnd)
                .note("failed: n1")
                .secs(3.5)
                .dset(4),
            Entry::xfer(XferType::FlushSync)
                .from("/c")
                .to("/p")
                .dset(2)
                .bytes(1000)
                .files(3)
                .secs(0.25),
        ];
        for e in entries {
            let (sql, values) = insert(5, Some(6), &stamp(), &e);
            let transfer = e.kind.is_transfer();
            assert!(
                sql.starts_with(&format!("INSERT INTO {} (", table(transfer))),
                "{sql}"
            );
            let columns = columns_of(&sql);
            assert_eq!(columns.len(), values.len(), "{sql}");
            assert_eq!(
                values[3],
                Value::Text(Some("1970-01-01T01:00:12.500+01:00".into()))
            );
            let row = as_read(&values, transfer, &columns);
            assert_eq!(row.len(), read_columns().len());
            let r = record(&row, Path::new("x.db")).unwrap();
            assert_eq!(r.entry, e);
            assert_eq!((r.time_s, r.host.as_deref()), (12.5, Some("n1")));
        }
        // The INSERTs name exactly the tables' columns of earlier releases.
        let (ev, _) = insert(1, None, &stamp(), &Entry::event(EventType::Halt));
        assert_eq!(
            columns_of(&ev).join(" "),
            "job_id run_id time_s time host type dset name secs note procs nodes"
        );
        let (xf, _) = insert(1, None, &stamp(), &Entry::xfer(XferType::Write));
        assert_eq!(
            columns_of(&xf).join(" "),
            "job_id run_id time_s time host type from_path to_path dset name secs bytes files"
        );
    }

    #[test]
    fn bad_values_name_the_row() {
        let (_, values) = insert(1, None, &stamp(), &Entry::xfer(XferType::Write).secs(1.0));
        let columns = ["job_id", "run_id", "time_s", "time", "host", "type", "secs"];
        let mut row = as_read(&values, true, &columns);
        let secs = HEAD.len() + FIELDS.iter().position(|f| *f == Field::Secs).unwrap();
        row[secs] = Value::Real(Some(-3.0));
        let e = record(&row, Path::new("x.db")).unwrap_err();
        assert!(
            matches!(
                &e,
                DbError::BadRow {
                    table: "transfers",
                    id: 9,
                    ..
                }
            ),
            "{e}"
        );
        let files = HEAD.len() + FIELDS.iter().position(|f| *f == Field::Files).unwrap();
        row[secs] = Value::Real(None);
        row[files] = Value::Int(Some(-1));
        let e = record(&row, Path::new("x.db")).unwrap_err().to_string();
        assert!(e.contains("files=-1 is negative"), "{e}");
    }
}
