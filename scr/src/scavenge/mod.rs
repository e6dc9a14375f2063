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

use std::io;
use std::path::Path;

pub mod copy;
mod error;
pub mod index;
pub mod pack;
pub mod postrun;
pub mod upgrade;

pub use error::{
    LaunchCopyError, NothingToScavenge, PlacementError, RebuildError, RebuildProblem,
    ScavengeError, UnplacedFile,
};

/// Result of the scavenge commands.
pub type ScavengeResult<T> = Result<T, ScavengeError>;

pub(crate) fn io_err<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(io::Error) -> ScavengeError + 'a {
    move |source| match crate::beneath::into_refusal(source) {
        Ok(refused) => ScavengeError::Beneath(refused),
        Err(source) => ScavengeError::Io {
            path: path.to_path_buf(),
            op,
            source,
        },
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

/// Create `dir` and its parents below `prefix`, never through a link.
pub(crate) fn create_dirs(prefix: &Path, dir: &Path) -> ScavengeResult<()> {
    crate::beneath::create_dir_all_in(prefix, dir).map_err(io_err(dir, "create directory"))
}
