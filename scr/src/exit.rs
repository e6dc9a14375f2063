//! The exit codes of the `scr` and `scr-harness` commands: one table, so a
//! script that calls either reads a code the same way, and each code means
//! one condition (docs/exit-codes.md is this table; both commands print it
//! in `--help`).
//!
//! Libraries return typed errors; [`HasExitCode`] maps each of this crate's
//! error types to its code, so a binary never picks a number by hand.

use std::fmt::Write as _;

use crate::config::ConfigError;
use crate::kvtree::file::KvFileError;
use crate::log::store::DbError;
use crate::log::LogError;
use crate::records::RecordError;

/// An exit code of `scr` or `scr-harness`. The numbers are part of the
/// command-line interface: scripts test them, so a code never changes
/// meaning and a condition never changes code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Code {
    /// Done; for a question, the answer is yes.
    Success = 0,
    /// A question's answer is no, or what it asks about is not recorded
    /// (`scr flush-file`, `scr config KEY`). Kept at 1 because SCR's
    /// scripts test `scr_flush_file --needflush` this way.
    No = 1,
    /// Bad usage (clap's code, kept so every clap error and every check
    /// of the options agree).
    Usage = 2,
    /// The command ran but left something incomplete (`scr copy`,
    /// `scr index`, `scr postrun`; the report lists what).
    Incomplete = 3,
    /// `scr copy`: the dataset is not in this node's cache (`scr postrun`
    /// relies on this to skip the node).
    NotCached = 4,
    /// The file the command is about does not exist (`scr print FILE`;
    /// `scr flush-file`: no flush file, nothing was recorded).
    Absent = 5,
    /// A metadata file exists but is damaged (the message names the file
    /// and what is wrong).
    Damaged = 6,
    /// A configuration or input file is invalid (the message names the
    /// file and line).
    Config = 7,
    /// The command could not do its job: an I/O error, a missing program,
    /// a failed launch (the message names what and why).
    Failed = 8,
    /// `scr-harness`: an outcome differed from its expectation, or a check
    /// of `validate`/`check-node` failed.
    Unexpected = 9,
    /// `scr-harness`: SILENT CORRUPTION or HANG happened, the two outcomes
    /// that are never acceptable.
    Never = 10,
}

/// Which command uses a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// The `scr` command-line tool.
    Scr,
    /// The `scr-harness` test harness.
    Harness,
}

impl Code {
    /// Every code, in numeric order.
    pub const ALL: [Code; 11] = [
        Code::Success,
        Code::No,
        Code::Usage,
        Code::Incomplete,
        Code::NotCached,
        Code::Absent,
        Code::Damaged,
        Code::Config,
        Code::Failed,
        Code::Unexpected,
        Code::Never,
    ];

    /// The number the process exits with.
    pub fn value(self) -> u8 {
        self as u8
    }

    /// Its name in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Code::Success => "SUCCESS",
            Code::No => "NO",
            Code::Usage => "USAGE",
            Code::Incomplete => "INCOMPLETE",
            Code::NotCached => "NOT_CACHED",
            Code::Absent => "ABSENT",
            Code::Damaged => "DAMAGED",
            Code::Config => "CONFIG",
            Code::Failed => "FAILED",
            Code::Unexpected => "UNEXPECTED",
            Code::Never => "NEVER",
        }
    }

    /// What it means, in one line.
    pub fn meaning(self) -> &'static str {
        match self {
            Code::Success => "done; for a question (scr flush-file), yes",
            Code::No => "a question's answer is no, or what it asks about is not recorded (scr flush-file, scr config KEY)",
            Code::Usage => "bad usage: unknown option, bad value, options that conflict, a name or directory that is not there",
            Code::Incomplete => "ran, but left something incomplete (scr copy/index/postrun: the report lists what)",
            Code::NotCached => "scr copy: the dataset is not in this node's cache",
            Code::Absent => "the file the command is about does not exist (scr print FILE; scr flush-file: no flush file)",
            Code::Damaged => "a metadata file is damaged (the message names the file and what is wrong; scr index --rebuild repairs an index)",
            Code::Config => "a configuration or input file is invalid: SCR config, fault plan, scenario catalogue (the message names file and line)",
            Code::Failed => "could not do the job: I/O error, missing program, failed launch (the message says what and why)",
            Code::Unexpected => "scr-harness: an outcome differed from its expectation, or a check failed",
            Code::Never => "scr-harness: SILENT CORRUPTION or HANG happened (never acceptable)",
        }
    }

    /// The commands that exit with it.
    pub fn tools(self) -> &'static [Tool] {
        match self {
            Code::Success | Code::Usage | Code::Config | Code::Failed => {
                &[Tool::Scr, Tool::Harness]
            }
            Code::No | Code::Incomplete | Code::NotCached | Code::Absent | Code::Damaged => {
                &[Tool::Scr]
            }
            Code::Unexpected | Code::Never => &[Tool::Harness],
        }
    }

    /// The code for a process exit status, if it is one of the table's.
    pub fn from_value(v: i32) -> Option<Code> {
        Code::ALL.into_iter().find(|c| i32::from(c.value()) == v)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.value(), self.name())
    }
}

impl From<Code> for std::process::ExitCode {
    fn from(c: Code) -> Self {
        std::process::ExitCode::from(c.value())
    }
}

fn tool_names(c: Code) -> String {
    c.tools()
        .iter()
        .map(|t| match t {
            Tool::Scr => "scr",
            Tool::Harness => "scr-harness",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table as the `--help` of both commands prints it (after_help).
pub fn help_text() -> String {
    let mut s =
        String::from("Exit codes (one table for scr and scr-harness; docs/exit-codes.md):\n");
    for c in Code::ALL {
        let _ = writeln!(s, "  {:>2}  {:<10}  {}", c.value(), c.name(), c.meaning());
    }
    s.push_str(
        "A reader that closes standard output early (`| head`) ends the command quietly by SIGPIPE (shell status 141).",
    );
    s
}

/// The codes a subcommand exits with, one line each, for its own
/// `--help`: the table's meaning, after `intro`.
pub fn help_for(intro: &str, codes: &[Code]) -> String {
    let mut s = format!("{intro}\n\nExit codes:\n");
    for c in codes {
        let _ = writeln!(s, "  {:>2}  {:<10}  {}", c.value(), c.name(), c.meaning());
    }
    s.trim_end().to_string()
}

/// The table in Markdown, as docs/exit-codes.md holds it (a test checks
/// that the file has exactly this table).
pub fn markdown_table() -> String {
    let mut s = String::from("| code | name | used by | meaning |\n| --- | --- | --- | --- |\n");
    for c in Code::ALL {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} |",
            c.value(),
            c.name(),
            tool_names(c),
            c.meaning()
        );
    }
    s
}

/// Restore the default action of SIGPIPE, so a command whose reader went
/// away (`scr-harness campaign --list | head -1`) ends quietly, as any
/// Unix filter, instead of panicking in `println!` on EPIPE. Call it first
/// in `main`, before any thread exists. Children started later get the
/// default action anyway (the standard library resets it for them).
pub fn default_sigpipe() {
    // SAFETY: called at the start of main, before other threads exist;
    // signal() with SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The lines a command prints on standard error for `err`: its Display as
/// `TOOL: error: ...`, then each cause in its chain as `TOOL: caused by:
/// ...` — never a Debug form. A cause whose text the lines above already
/// hold (a message that quotes its source) is not repeated.
pub fn error_report(tool: &str, err: &dyn std::error::Error) -> String {
    let first = err.to_string();
    let mut out = format!("{tool}: error: {first}");
    let mut said = first;
    let mut cause = err.source();
    // Bounded: error chains are short, and a cycle would be a bug; stop at 16.
    let mut left = 16;
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !said.contains(&text) {
            let _ = write!(out, "\n{tool}: caused by: {text}");
            said.push('\n');
            said.push_str(&text);
        }
        left -= 1;
        if left == 0 {
            break;
        }
        cause = c.source();
    }
    out
}

/// An error that says which exit code a command ends with.
pub trait HasExitCode {
    /// The code of the table for this error.
    fn exit_code(&self) -> Code;
}

impl HasExitCode for KvFileError {
    fn exit_code(&self) -> Code {
        match self {
            e if e.is_not_found() => Code::Absent,
            KvFileError::Io { .. } => Code::Failed,
            _ => Code::Damaged,
        }
    }
}

impl HasExitCode for RecordError {
    fn exit_code(&self) -> Code {
        match self {
            RecordError::File(e) => e.exit_code(),
            RecordError::InFile { source, .. } => source.exit_code(),
            // The file was read but its fields are wrong: damage.
            _ => Code::Damaged,
        }
    }
}

impl HasExitCode for ConfigError {
    fn exit_code(&self) -> Code {
        Code::Config
    }
}

impl HasExitCode for LogError {
    fn exit_code(&self) -> Code {
        match self {
            LogError::Line { .. } => Code::Damaged,
            LogError::NotAFile { .. } => Code::Usage,
            _ => Code::Failed,
        }
    }
}

impl HasExitCode for DbError {
    fn exit_code(&self) -> Code {
        Code::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}")]
    struct Outer {
        path: String,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}: {source}")]
    struct Quoting {
        path: String,
        #[source]
        source: std::io::Error,
    }

    fn denied() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied")
    }

    #[test]
    fn error_report_prints_the_chain_with_display_once() {
        let e = Outer {
            path: "/etc/scr.conf".into(),
            source: denied(),
        };
        assert_eq!(
            error_report("scr", &e),
            "scr: error: reading /etc/scr.conf\nscr: caused by: permission denied"
        );
        // A message that quotes its cause is not followed by the cause again.
        let q = Quoting {
            path: "/etc/scr.conf".into(),
            source: denied(),
        };
        let text = error_report("scr-harness", &q);
        assert_eq!(
            text,
            "scr-harness: error: reading /etc/scr.conf: permission denied"
        );
        assert!(
            !text.contains("Custom {") && !text.contains("kind:"),
            "{text}"
        );
    }

    #[test]
    fn codes_are_distinct_and_in_order() {
        for (i, c) in Code::ALL.iter().enumerate() {
            assert_eq!(usize::from(c.value()), i, "{c}");
            assert_eq!(Code::from_value(i as i32), Some(*c));
        }
        let names: std::collections::BTreeSet<_> = Code::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Code::ALL.len());
    }

    #[test]
    fn help_lists_every_code() {
        let h = help_text();
        for c in Code::ALL {
            let line = format!("{:>2}  {:<10}  {}", c.value(), c.name(), c.meaning());
            assert!(h.contains(&line), "missing {c} in:\n{h}");
        }
    }

    #[test]
    fn docs_hold_the_table() {
        let doc = include_str!("../../docs/exit-codes.md");
        assert!(
            doc.contains(&markdown_table()),
            "docs/exit-codes.md does not hold the table of scr::exit; paste:\n{}",
            markdown_table()
        );
    }

    #[test]
    fn missing_file_and_damage_have_their_codes() {
        let dir = tempfile::tempdir().unwrap();
        let gone = crate::kvtree::file::read(dir.path().join("none")).unwrap_err();
        assert_eq!(gone.exit_code(), Code::Absent);
        let bad = dir.path().join("bad");
        std::fs::write(&bad, b"not a kvtree file at all, no magic").unwrap();
        let damaged = crate::kvtree::file::read(&bad).unwrap_err();
        assert_eq!(damaged.exit_code(), Code::Damaged);
        assert_eq!(RecordError::File(damaged).exit_code(), Code::Damaged);
    }
}
