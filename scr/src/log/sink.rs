//! [`LogSink`]: where log entries go. Four implementations, all writing
//! the one [`Entry`] type under one [`Stamp`]: the text log
//! ([`super::text::TextSink`]), syslog ([`super::syslog::SyslogSink`]),
//! the SQLite, PostgreSQL and MySQL databases ([`super::database::DbLog`]
//! over [`super::db::SqliteStore`], [`super::server::PgStore`] or
//! [`super::mysql::MyStore`]), and SCR 3.1's own MySQL tables
//! ([`super::scr31::Scr31Log`]). [`super::writer::Logger`] holds a set of
//! them.

use std::path::PathBuf;

use super::event::{Entry, Stamp};
use super::store::DbError;
use crate::config::ConfigError;

/// Errors of the log writers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogWriteError {
    /// The text log could not be opened for appending.
    #[error("cannot open log {path} for appending: {source} (check that the prefix's .scr directory exists and is writable, or set SCR_LOG_TXT_ENABLE=0)")]
    Open {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line could not be written.
    #[error("cannot append to log {path}: {source}")]
    Write {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A logging parameter has a bad value.
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// The database log.
    #[error(transparent)]
    Db(Box<DbError>),
}

impl From<ConfigError> for LogWriteError {
    fn from(e: ConfigError) -> Self {
        LogWriteError::Config(Box::new(e))
    }
}

/// Where a sink writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A text log file.
    Text(PathBuf),
    /// The system log.
    Syslog,
    /// A log database: its file, or `postgresql://user@host:port/dbname`.
    Database(PathBuf),
}

impl Target {
    /// What kind of log this is, for messages (`database`).
    pub fn label(&self) -> &'static str {
        match self {
            Target::Text(_) => "text",
            Target::Syslog => "syslog",
            Target::Database(_) => "database",
        }
    }
}

/// A destination of log entries.
pub trait LogSink: Send + std::fmt::Debug {
    /// Where it writes; fixed for the sink's life.
    fn target(&self) -> Target;
    /// Write `entry` under `stamp`: whole, or not at all and an error.
    fn write(&mut self, stamp: &Stamp<'_>, entry: &Entry) -> Result<(), LogWriteError>;
}
