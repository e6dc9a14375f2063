//! Scavenge: the serial commands that save a dataset from node-local cache
//! to the prefix directory after the last run of an allocation, when the
//! library could not flush it (developer guide "Scavenge" and "Program
//! Flow > Scavenge"; scavenge-and-index.txt). No MPI: each piece runs on
//! one node or on the machine that sees the prefix directory.
//!
//! - [`copy`] (`scr copy`, SCR's `scr_copy`): on one node, copy every file a
//!   dataset has in that node's cache to the prefix dataset directory,
//!   checking CRC32s, and write a rank filemap per rank; report the PARTNER
//!   copies held there so a second round can fetch a lost node's files from
//!   its partner.
//! - [`index`] (`scr index`, SCR's `scr_index`): scan a dataset directory's
//!   rank filemaps, find missing ranks, rebuild them from XOR/RS parity in
//!   the directory (in-process, the set's members as threads), write the
//!   summary and rank2file map and add the dataset to the index; list and
//!   edit the index; rebuild a damaged index from the dataset directories.
//! - [`postrun`] (`scr postrun`, SCR's `scr_postrun` + `scr_scavenge`):
//!   after the last run, find the newest checkpoint (and pending output)
//!   the flush file says is in cache but not in the prefix, copy it from
//!   every node that is up (second round from partners), index it and mark
//!   it current.
//!
//! The prefix layout is docs/formats.md, "The prefix directory"
//! ([`crate::prefix::layout`], shared with flush and fetch).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::records::RecordError;

pub mod copy;
pub mod index;
pub mod postrun;

/// Why a scavenge command failed. Messages name the file and say what to
/// do next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScavengeError {
    /// A file operation failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A metadata file could not be read or written.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The index file exists but cannot be read; nothing was written to it.
    #[error("{path}: the index is damaged ({source}); run `scr index --rebuild` to rebuild it from the dataset directories (the damaged file is kept beside it)")]
    DamagedIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong with it.
        source: Box<RecordError>,
    },
    /// The node's cache holds nothing of the dataset.
    #[error("dataset {id} is not in the cache of node {node} (control directory {cntl})")]
    NotInCache {
        /// The dataset id.
        id: i64,
        /// The node.
        node: String,
        /// The control directory read (real path).
        cntl: PathBuf,
    },
    /// Where the dataset goes in the prefix is not known.
    #[error("dataset {id}: {why}")]
    NoPlacement {
        /// The dataset id.
        id: i64,
        /// Why (names the flush file).
        why: String,
    },
    /// A name given on the command line matches nothing in the index.
    #[error("{what} {name:?} is not in the index {index}")]
    UnknownName {
        /// What was looked up ("dataset").
        what: &'static str,
        /// The name.
        name: String,
        /// The index file.
        index: PathBuf,
    },
    /// The directory holds neither a summary nor rank filemaps.
    #[error("{dir}: not a dataset directory (no .scr/summary.scr and no .scr/<rank>.scrfilemap)")]
    NotADataset {
        /// The directory.
        dir: PathBuf,
    },
    /// A request that cannot be served as given (bad directory name, …).
    #[error("{0}")]
    Invalid(String),
}

/// Result of the scavenge commands.
pub type ScavengeResult<T> = Result<T, ScavengeError>;

pub(crate) fn io_err<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(io::Error) -> ScavengeError + 'a {
    move |source| ScavengeError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Progress of a long copy, for a progress bar. The library reports bytes;
/// the command-line tool draws (only when stderr is a terminal).
pub trait Progress {
    /// A copy of `total_bytes` begins; `label` says what (a node, a dataset).
    fn start(&self, label: &str, total_bytes: u64);
    /// `bytes` more were copied.
    fn advance(&self, bytes: u64);
    /// The copy ended.
    fn finish(&self);
}

/// No progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// Create `dir` and its parents.
pub(crate) fn create_dirs(dir: &Path) -> ScavengeResult<()> {
    fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))
}
