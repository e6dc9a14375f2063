//! Why an `scr` subcommand ended without success, and the code of the
//! table in [`scr::exit`] each reason exits with.

use std::io;
use std::path::PathBuf;

use scr::config::ConfigError;
use scr::exit::{Code, HasExitCode};
use scr::interval::model::ModelError;
use scr::interval::InputError;
use scr::kvtree::file::KvFileError;
use scr::log::db::DbError;
use scr::log::LogError;
use scr::records::RecordError;
use scr::scavenge::ScavengeError;

/// The reason an `scr` subcommand ends without success.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Options that parse but do not go together (clap catches the rest).
    #[error("{0}")]
    Usage(String),
    /// `scr run` ended without the job finishing.
    #[error("scr run: {why}")]
    RunLoop {
        /// Why it stopped.
        why: String,
    },
    /// `scr prerun` could not prepare the prefix.
    #[error("prerun: {0}")]
    Prerun(#[from] scr::runloop::prerun::PrerunError),
    /// A question's answer is no: nothing on stderr.
    #[error("")]
    No,
    /// `scr flush-file` without a flush file.
    #[error("{}: no flush file: nothing was recorded", path.display())]
    NoFlushFile {
        /// The flush file looked for.
        path: PathBuf,
    },
    /// `scr config KEY` when KEY has no value.
    #[error("{key} is not set")]
    NotSet {
        /// The key asked about.
        key: String,
    },
    /// `scr config NAME` for a name that is no SCR parameter and is not set
    /// either (a typo: "not set" would hide it).
    #[error("{key}: no such SCR parameter{}", nearest.as_ref().map_or(String::new(), |n| format!(" (did you mean {n}?)")))]
    UnknownParam {
        /// The name asked about.
        key: String,
        /// The known parameter nearest to it, when one is close.
        nearest: Option<String>,
    },
    /// The prefix directory given does not exist.
    #[error("prefix directory {} does not exist (give the job's SCR_PREFIX)", path.display())]
    NoPrefix {
        /// The directory.
        path: PathBuf,
    },
    /// `scr copy` left files behind.
    #[error("dataset {dataset}: {files} file(s) not copied from node {node}")]
    CopyIncomplete {
        /// The dataset id.
        dataset: i64,
        /// Files not copied.
        files: usize,
        /// The node.
        node: String,
    },
    /// `scr index --add` indexed an incomplete dataset.
    #[error("{dir} is indexed as incomplete")]
    IndexedIncomplete {
        /// The dataset directory.
        dir: String,
    },
    /// `scr index --rebuild` found incomplete or unindexable directories.
    #[error("some dataset directories are incomplete or could not be indexed")]
    RebuiltIncomplete,
    /// `scr postrun` could not save every dataset whole.
    #[error("some dataset could not be scavenged whole (see above)")]
    ScavengedIncomplete,
    /// A file operation of the tool itself failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A bad `--level` of `scr interval`.
    #[error(transparent)]
    Level(#[from] LevelError),
    /// A log line that `--strict` refuses.
    #[error("{0} (run without --strict to skip bad lines)")]
    StrictLog(LogError),
    /// A scavenge command failed.
    #[error(transparent)]
    Scavenge(#[from] ScavengeError),
    /// A path below the prefix passes through a symbolic link.
    #[error(transparent)]
    Beneath(#[from] scr::beneath::BeneathError),
    /// A metadata file could not be read or written.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A kvtree file could not be read.
    #[error(transparent)]
    KvFile(#[from] KvFileError),
    /// The configuration is invalid (boxed: it is the largest error).
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// A log file could not be read.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A log database could not be read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// `scr interval` lacks or refuses an input.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The interval model refuses the figures.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// JSON output could not be produced.
    #[error("JSON output: {0}")]
    Json(#[from] serde_json::Error),
    /// `scr generate` could not write a man page or completion file.
    #[error(transparent)]
    CliDocs(#[from] scr::cli_docs::CliDocsError),
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::Config(Box::new(e))
    }
}

impl CliError {
    /// The exit code of the table for this reason.
    pub fn code(&self) -> Code {
        match self {
            CliError::Usage(_)
            | CliError::NoPrefix { .. }
            | CliError::UnknownParam { .. }
            | CliError::Level(_)
            | CliError::Input(_)
            | CliError::Model(_) => Code::Usage,
            CliError::No | CliError::NotSet { .. } => Code::No,
            CliError::NoFlushFile { .. } => Code::Absent,
            CliError::CopyIncomplete { .. }
            | CliError::IndexedIncomplete { .. }
            | CliError::RebuiltIncomplete
            | CliError::ScavengedIncomplete => Code::Incomplete,
            CliError::StrictLog(_) => Code::Damaged,
            CliError::Io { .. }
            | CliError::Json(_)
            | CliError::RunLoop { .. }
            | CliError::Prerun(_)
            | CliError::Beneath(_)
            | CliError::CliDocs(_) => Code::Failed,
            CliError::Scavenge(e) => e.exit_code(),
            CliError::Record(e) => e.exit_code(),
            CliError::KvFile(e) => e.exit_code(),
            CliError::Config(e) => e.exit_code(),
            CliError::Log(e) => e.exit_code(),
            CliError::Db(e) => e.exit_code(),
        }
    }
}

/// Why a `--level` of `scr interval` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LevelError {
    /// Not two or three fields.
    #[error("--level {text:?}: expected COST:MTBF[:RESTART] or COST:rate=R[:RESTART]")]
    Form {
        /// The level as given.
        text: String,
    },
    /// A cost, MTBF or restart that is not a positive number of seconds.
    #[error("{what} {value:?} is not a positive number of seconds")]
    NotPositive {
        /// Which field.
        what: &'static str,
        /// Its text.
        value: String,
    },
    /// A rate that is not a non-negative number.
    #[error("--level {text:?}: rate {rate:?} is not a non-negative number")]
    Rate {
        /// The level as given.
        text: String,
        /// The rate's text.
        rate: String,
    },
    /// `--level` together with `--cost`/`--mtbf`.
    #[error("give either --level (repeated) or --cost/--mtbf, not both")]
    Both,
}
