//! Messages on stderr in SCR's form (`scr_dbg`, `scr_warn`, `scr_err`):
//! `SCR v<version>: rank <r> on <host>: <message>`, with `WARNING` or
//! `ERROR` after the version for the other two. SCR_DEBUG sets which debug
//! messages appear: level 0 prints none, level N prints those of level
//! 1..=N (SCR's rule `level == 0 || debug >= level`, where level-0 messages
//! are warnings and errors, always printed).
//!
//! LLNL SCR prints these on stdout; this library prints them on stderr,
//! where every other message of the library goes (docs/decisions.md), so an
//! application's stdout stays its own.

use std::fmt;
use std::io::Write as _;

/// Who is speaking, and how much they may say (SCR_DEBUG).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Messages {
    /// `SCR_DEBUG`: the highest debug level printed (0: none).
    pub level: u64,
    /// This process's world rank.
    pub rank: i64,
    /// This process's host (node) name.
    pub host: String,
    /// The library version shown after `SCR` (`SCR_Get_version`).
    pub version: &'static str,
}

/// The version string SCR_Get_version returns and messages show.
pub const VERSION: &str = concat!("v3.1.0-rs", env!("CARGO_PKG_VERSION"));

/// How a message is marked after the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// A debug message of this level (1 and above).
    Debug(u64),
    /// `WARNING`: always printed.
    Warning,
    /// `ERROR`: always printed.
    Error,
}

impl Messages {
    /// Messages of `rank` on `host` at verbosity `level`.
    pub fn new(level: u64, rank: i64, host: &str) -> Messages {
        Messages {
            level,
            rank,
            host: host.to_owned(),
            version: VERSION,
        }
    }

    /// Whether a message of `severity` is printed.
    pub fn shows(&self, severity: Severity) -> bool {
        match severity {
            Severity::Debug(l) => self.level > 0 && self.level >= l,
            Severity::Warning | Severity::Error => true,
        }
    }

    /// The line as printed, without the newline.
    pub fn line(&self, severity: Severity, msg: &dyn fmt::Display) -> String {
        let mark = match severity {
            Severity::Debug(_) => "",
            Severity::Warning => " WARNING",
            Severity::Error => " ERROR",
        };
        format!(
            "SCR {}{mark}: rank {} on {}: {msg}",
            self.version, self.rank, self.host
        )
    }

    /// Print `msg` at `severity` if SCR_DEBUG lets it through. One write
    /// per line, so lines of different ranks do not interleave mid-line.
    pub fn say(&self, severity: Severity, msg: &dyn fmt::Display) {
        if self.shows(severity) {
            let text = format!("{}\n", self.line(severity, msg));
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }

    /// `scr_dbg(level, …)`.
    pub fn dbg(&self, level: u64, msg: impl fmt::Display) {
        self.say(Severity::Debug(level.max(1)), &msg);
    }

    /// `scr_warn(…)`.
    pub fn warn(&self, msg: impl fmt::Display) {
        self.say(Severity::Warning, &msg);
    }

    /// `scr_err(…)`.
    pub fn err(&self, msg: impl fmt::Display) {
        self.say(Severity::Error, &msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_scrs_form_and_levels_filter_debug_only() {
        let m = Messages {
            version: "v3.1.0",
            ..Messages::new(0, 3, "n1")
        };
        assert_eq!(
            m.line(Severity::Debug(1), &"flushing"),
            "SCR v3.1.0: rank 3 on n1: flushing"
        );
        assert_eq!(
            m.line(Severity::Warning, &"x"),
            "SCR v3.1.0 WARNING: rank 3 on n1: x"
        );
        assert_eq!(
            m.line(Severity::Error, &"y"),
            "SCR v3.1.0 ERROR: rank 3 on n1: y"
        );
        assert!(!m.shows(Severity::Debug(1)));
        assert!(m.shows(Severity::Warning) && m.shows(Severity::Error));
        let m2 = Messages::new(2, 0, "n0");
        assert!(m2.shows(Severity::Debug(1)) && m2.shows(Severity::Debug(2)));
        assert!(!m2.shows(Severity::Debug(3)));
    }
}
