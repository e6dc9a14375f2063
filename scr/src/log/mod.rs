//! SCR's text log (`<prefix>/.scr/log`): its record types, the parser and
//! the writer, so both ends share one definition of the format.

pub mod db;
pub mod parse;
pub mod server;
pub mod writer;

pub use parse::{parse_line, read_log, LineError, LogError, Parsed, Record, RecordKind};
pub use writer::{Entry, EventType, LogSettings, LogWriteError, Logger, XferType};
