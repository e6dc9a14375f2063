//! A dataset's life in cache, in one place (developer guide: "Datasets",
//! "Filemap", program flow of SCR_Start_output, SCR_Route_file,
//! SCR_Complete_output, scr_cache_rebuild).
//!
//! ```text
//!  start ──> route* ──> complete ──vote──> encode ──> Protected
//!    │          (entry before file)  │                   │
//!    │                               └── invalid ──> delete (every rank)
//!    └── make room: evict the oldest of the store (flushed output first)
//!
//!  next run:  restart ──> distribute descriptors ──> distribute files
//!                     ──> verify ──> rebuild (set) ──> Protected | delete
//! ```
//!
//! - [`output`]: start (make room, directory, first filemap entries),
//!   route, and complete (sizes, the validity vote, encode, the final
//!   record) — the filemap is written once per state change.
//! - [`protect`]: the same encode in a thread of the rank (SCR_ENCODE_ASYNC),
//!   settled at the next collective call; a dataset is COMPLETE only then.
//! - [`encode`] and [`rebuild`]: apply and recover the redundancy scheme of
//!   a dataset through its [`RedundancySet`]; the arithmetic and the set
//!   communication are in [`crate::redundancy::apply`].
//! - [`restart`]: restart in place — filemaps handed to their ranks,
//!   descriptors and files moved to where their owners run now, every file
//!   verified, sets rebuilt, unrecoverable datasets deleted everywhere.
//! - [`evict`]: delete a dataset on one rank or on every rank, list what is
//!   in cache anywhere.
//!
//! The invariant kept everywhere (the guide's filemap rule): a file is
//! added to the filemap, and the filemap file is written, *before* the file
//! is created in cache; an entry may outlive its file, never the reverse.
//! [`Books::record`] is the only way the lifecycle adds a file entry, and it
//! writes the filemap before returning.

use std::path::{Path, PathBuf};

use crate::storage::node::{DirPair, LogicalPath, RealPath};

use crate::error::ScrResult;
use crate::ids::{DatasetId, Rank};
use crate::records::dataset::Dataset as DatasetDesc;
use crate::records::filemap::Filemap;
use crate::records::meta::Meta;
use crate::records::Record;
use crate::redundancy::apply::ApplyError;

mod check;
pub mod encode;
pub mod evict;
pub mod output;
pub mod protect;
pub mod rebuild;
pub mod restart;
pub mod shared;

pub use crate::cache::{RedundancySet, BYPASS_TAG};
pub use crate::error::{EncodeError, RebuildError, TransferError};
pub use restart::InitReport;

/// Where a dataset is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Started: files may be routed; nothing is valid yet.
    Started,
    /// Every rank's files were valid; the scheme is being applied in the
    /// background ([`protect`]); a restart does not use it yet.
    Protecting,
    /// Every rank's files were valid and the scheme was applied: a restart
    /// may use it.
    Protected,
    /// Complete was called with an invalid file somewhere, or the scheme
    /// could not be applied; the dataset was deleted on every rank.
    Failed,
}

/// A dataset of this job in cache, as the process that writes it sees it.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Its id.
    pub id: DatasetId,
    /// Its descriptor (name, flags, sizes), as recorded in the filemap.
    pub desc: DatasetDesc,
    /// Index of its redundancy descriptor in [`crate::cache::Job::sets`].
    pub set: usize,
    /// Logical path of its cache directory.
    pub dir: LogicalPath,
    /// Where it is in its life.
    pub state: State,
    /// Bypass mode (SCR_CACHE_BYPASS=1 or the descriptor's BYPASS=1): its
    /// files are written straight to their paths in the prefix directory,
    /// never to the cache, and no redundancy scheme is applied.
    pub bypass: bool,
    /// Files this rank wrote through the crate's writer
    /// ([`crate::OutputPhase::route_writer`]), by filemap key: their CRC32
    /// was computed as they were written, so Complete_output records it
    /// without reading them again (when they are still what was written).
    pub streamed: std::collections::BTreeMap<String, crate::storage::crc_writer::Streamed>,
}

impl Dataset {
    /// The dataset's name (its default name when the application gave none).
    pub fn name(&self) -> String {
        self.desc
            .name
            .clone()
            .unwrap_or_else(|| self.id.default_name())
    }

    /// Whether it is a checkpoint (SCR_FLAG_CHECKPOINT).
    pub fn is_checkpoint(&self) -> bool {
        self.desc.flag_checkpoint == Some(true)
    }

    /// Whether it is output to keep in the prefix (SCR_FLAG_OUTPUT).
    pub fn is_output(&self) -> bool {
        self.desc.flag_output == Some(true)
    }
}

/// This process's filemap with where it is persisted: what the lifecycle
/// needs to record a file, borrowed apart from the rest of the job so a set
/// communicator can be in use at the same time.
pub(crate) struct Books<'a> {
    /// The filemap.
    pub filemap: &'a mut Filemap,
    /// Its file (real path).
    pub path: &'a RealPath,
    /// The world rank whose entries these are.
    pub rank: Rank,
}

impl Books<'_> {
    /// Add `logical` to dataset `dset` with `meta` and persist the filemap:
    /// the entry is on disk before the caller creates the file.
    pub fn record(&mut self, dset: DatasetId, logical: &str, meta: &Meta) -> ScrResult<()> {
        self.filemap.add_file(dset, self.rank, logical);
        self.filemap.set_meta(dset, self.rank, logical, meta);
        self.persist()
    }

    /// Write the filemap file.
    pub fn persist(&self) -> ScrResult<()> {
        Ok(self.filemap.write_file(self.path)?)
    }

    /// The set operations' register callback: record a file they are about
    /// to create at `real` inside the dataset directory `dir` under its
    /// logical path.
    pub fn register(
        &mut self,
        dset: DatasetId,
        dir: &DirPair,
        real: &Path,
        meta: &Meta,
    ) -> Result<(), ApplyError> {
        let logical = logical_in(dir, real).to_record();
        let mut m = meta.clone();
        m.file = Some(logical.clone());
        self.record(dset, &logical, &m)
            .map_err(|e| ApplyError::Register {
                world_rank: self.rank.as_i64(),
                path: PathBuf::from(&logical),
                source: Box::new(e),
            })
    }
}

/// The logical path of a file a set operation creates at `real` inside the
/// dataset directory `dir`. The set operations are given the directory's
/// real path and create files only below it; a file elsewhere would be
/// recorded under a name no restart finds, so it is a bug, not an error.
pub(crate) fn logical_in(dir: &DirPair, real: &Path) -> LogicalPath {
    dir.logical_of(real).unwrap_or_else(|| {
        panic!(
            "a set operation created {} outside its dataset directory {}",
            real.display(),
            dir.real.display()
        )
    })
}

/// Tag name under which a PARTNER holder records the node of the rank
/// whose copies it holds (SCR's filemap `PARTNER` tag), so a scavenge that
/// cannot reach that node knows to ask this one (`scr copy --partner`).
pub const PARTNER_NODE_TAG: &str = "PARTNER";
