//! SCR's text log (`<prefix>/.scr/log`): its record types and the parser.
//! The writer will live here too, so both ends share one definition.

pub mod parse;

pub use parse::{parse_line, read_log, LineError, LogError, Parsed, Record, RecordKind};
