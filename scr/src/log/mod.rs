//! SCR's event log: one entry type, written by a set of sinks (the text
//! log `<prefix>/.scr/log`, syslog, a SQLite file, a PostgreSQL or a
//! MySQL/MariaDB server)
//! and read back by the text log parser and the database readers.
//!
//! Layers, each importing only from layers below it (the test
//! `no_module_imports_a_layer_above_it` checks it):
//!
//! ```text
//! 5  writer          Logger: a set of Box<dyn LogSink>; LogSettings
//! 4  db, server,     the SQLite, PostgreSQL and MySQL/MariaDB stores and
//!    mysql           their readers
//! 3  database        the database sink over any Store (runs, inserts, reads)
//!    scr31           SCR 3.1's own MySQL tables (scr.mysql): sink and reader
//!    text, syslog    the text-file and syslog sinks
//! 2  sink            the LogSink trait, its Target and error
//!    migrate         the migrations (defined once) and their one runner
//!    row             the one entry <-> row mapping
//! 1  store           Store, the small trait over the three; DbError
//!    format, parse   the text line written and read back
//! 0  event           Entry (the one event type), Record, Stamp, EventType, XferType
//!    time            clock, zoned stamps (over `civil`)
//!    msg             SCR's stderr messages (SCR_DEBUG levels, WARNING, ERROR)
//! ```

pub mod database;
#[cfg(feature = "logdb-sqlite")]
pub mod db;
pub mod event;
pub mod format;
pub mod migrate;
pub mod msg;
#[cfg(feature = "logdb-mysql")]
pub mod mysql;
pub mod parse;
pub mod row;
#[cfg(feature = "logdb-mysql")]
pub mod scr31;
#[cfg(feature = "logdb-postgres")]
pub mod server;
pub mod sink;
pub mod store;
pub mod syslog;
pub mod text;
pub mod time;
pub mod writer;

pub use event::{Entry, EntryKind, EventType, Record, Stamp, XferType};
pub use parse::{parse_line, read_log, read_log_each, LineError, LogError, Parsed};
pub use sink::{LogSink, LogWriteError, Target};
pub use writer::{LogSettings, Logger, OnError};

#[cfg(test)]
mod tests {
    /// Each module of `log/`, its layer, and its source up to its tests.
    fn modules() -> Vec<(&'static str, u8, &'static str)> {
        let code = |src: &'static str| src.split("#[cfg(test)]").next().unwrap_or(src);
        vec![
            ("event", 0, code(include_str!("event.rs"))),
            ("time", 0, code(include_str!("time.rs"))),
            ("msg", 0, code(include_str!("msg.rs"))),
            ("format", 1, code(include_str!("format.rs"))),
            ("parse", 1, code(include_str!("parse.rs"))),
            ("store", 1, code(include_str!("store.rs"))),
            ("sink", 2, code(include_str!("sink.rs"))),
            ("migrate", 2, code(include_str!("migrate.rs"))),
            ("row", 2, code(include_str!("row.rs"))),
            ("database", 3, code(include_str!("database.rs"))),
            ("text", 3, code(include_str!("text.rs"))),
            ("syslog", 3, code(include_str!("syslog.rs"))),
            ("scr31", 3, code(include_str!("scr31.rs"))),
            ("db", 4, code(include_str!("db.rs"))),
            ("server", 4, code(include_str!("server.rs"))),
            ("mysql", 4, code(include_str!("mysql.rs"))),
            ("writer", 5, code(include_str!("writer.rs"))),
        ]
    }

    /// The layering of the module doc holds: outside its tests, a module
    /// names (`super::x` or `crate::log::x`) only modules of lower layers —
    /// so no two modules import each other. Doc links (`[`…`]`) are not
    /// imports and are skipped.
    #[test]
    fn no_module_imports_a_layer_above_it() {
        let all = modules();
        let layer = |name: &str| all.iter().find(|m| m.0 == name).map(|m| m.1);
        for (name, own, src) in &all {
            for line in src.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for prefix in ["super::", "crate::log::"] {
                    for (at, _) in line.match_indices(prefix) {
                        let rest = &line[at + prefix.len()..];
                        // `super::x::…`, or each of `super::{x, y::…}`.
                        let names = match rest.strip_prefix('{') {
                            Some(group) => group.split('}').next().unwrap_or("").to_string(),
                            None => rest.to_string(),
                        };
                        for used in names.split(',').map(|n| {
                            n.trim()
                                .chars()
                                .take_while(|c| c.is_alphanumeric() || *c == '_')
                                .collect::<String>()
                        }) {
                            let Some(theirs) = layer(&used) else {
                                continue;
                            };
                            assert!(
                                theirs < *own,
                                "log/{name}.rs (layer {own}) uses {used} (layer {theirs}): {line}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_module_is_placed_in_a_layer() {
        let listed: Vec<&str> = modules().iter().map(|m| m.0).collect();
        let declared = include_str!("mod.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod "))
            .map(|l| l.trim_end_matches(';'))
            .collect::<Vec<_>>();
        for d in &declared {
            assert!(listed.contains(d), "log/{d}.rs has no layer in the test");
        }
        assert_eq!(listed.len(), declared.len());
    }
}
