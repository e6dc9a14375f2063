//! The crate's error: why an SCR call failed. Each layer has its own typed
//! error (records, communicator, configuration, redundancy, the dataset
//! lifecycle, the prefix tier); this enum carries them to the API with their
//! sources, so a message always names the file, rank or dataset involved.
//!
//! The errors of the layers above this module (the dataset lifecycle, the
//! prefix tier) are defined here, in submodules, and re-exported by those
//! layers: this module depends only on the layers below it, so no module
//! and the crate error import each other.

use std::io;
use std::path::PathBuf;

use crate::beneath::BeneathError;
use crate::comm::CommError;
use crate::config::ConfigError;
use crate::ids::DatasetId;
use crate::records::RecordError;
use crate::redundancy::RedundancyError;
use crate::storage::dirs::DirError;

mod dataset;
mod prefix;

pub use dataset::{EncodeError, RebuildError, SharedFile, TransferError};
pub use prefix::{CopyError, FetchError, FlushError, PrefixError, RankFilesError};

/// Why the redundancy descriptors of a run could not be set up at init.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The configuration enables no CKPT descriptor.
    #[error("no enabled CKPT descriptor: enable one (CKPT=0 TYPE=...) or unset the CKPT lines")]
    NoEnabledCkpt,
    /// The communicator of this node's processes could not be made.
    #[error("the node communicator could not be created")]
    NodeComm,
    /// The sets of a descriptor cannot be formed from the failure groups.
    #[error("CKPT={index}: {source}")]
    Sets {
        /// The descriptor's index.
        index: u32,
        /// Why.
        source: RedundancyError,
    },
}

/// Why an SCR call failed. Misuse of the API is a typed error here (or
/// impossible by the types of the phase objects).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScrError {
    /// The configuration could not be loaded or is invalid.
    #[error("configuration: {0}")]
    Config(Box<ConfigError>),
    /// A communication failed.
    #[error("communication: {0}")]
    Comm(#[from] CommError),
    /// A control or cache directory could not be prepared.
    #[error("directory: {0}")]
    Dir(#[from] DirError),
    /// A metadata file could not be read or written.
    #[error("metadata: {0}")]
    Record(#[from] RecordError),
    /// A file operation failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The redundancy scheme could not be applied to a dataset.
    #[error("dataset {dset}: redundancy not applied: {source}")]
    Encode {
        /// The dataset.
        dset: DatasetId,
        /// Why.
        source: EncodeError,
    },
    /// A file or filemap entry sent between ranks at restart was malformed.
    #[error("{}transfer between ranks: {source}", dset.map(|d| format!("dataset {d}: ")).unwrap_or_default())]
    Transfer {
        /// The dataset, when the message belongs to one.
        dset: Option<DatasetId>,
        /// What was wrong with the message.
        source: TransferError,
    },
    /// A collective step failed on another rank, which reports its own
    /// error; this rank's part succeeded and it stops with the others.
    #[error("{op} failed on {who}{} (see that rank's error)", dset.map(|d| format!(" for dataset {d}")).unwrap_or_default())]
    FailedElsewhere {
        /// The step, e.g. `create the dataset directory`.
        op: &'static str,
        /// Which rank: `rank 0` or `another rank`.
        who: &'static str,
        /// The dataset, when the step belongs to one.
        dset: Option<DatasetId>,
    },
    /// A flush, fetch or index update in the prefix directory failed.
    #[error("prefix directory: {0}")]
    Prefix(#[from] PrefixError),
    /// A dataset name of SCR_MAX_FILENAME (1024) bytes or more.
    #[error("name of {len} bytes is too long: SCR_MAX_FILENAME is 1024 (names must be shorter)")]
    NameTooLong {
        /// Its length.
        len: usize,
    },
    /// A name that contains a NUL byte, a slash or is otherwise unusable.
    #[error("name {name:?} is not allowed: {why}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        why: &'static str,
    },
    /// Ranks passed different values to a collective call.
    #[error("{call}: ranks passed different values (rank 0 passed {rank0:?}); every rank must pass the same")]
    NotCollective {
        /// The call.
        call: &'static str,
        /// Rank 0's value.
        rank0: String,
    },
    /// A routed path resolves outside the prefix directory.
    #[error(
        "{path}: resolves outside the prefix directory {prefix}; route files under SCR_PREFIX"
    )]
    OutsidePrefix {
        /// The path as resolved.
        path: PathBuf,
        /// The prefix.
        prefix: PathBuf,
    },
    /// A routed path inside SCR's own metadata directory (`<prefix>/.scr`):
    /// writing there would overwrite the index, summaries and maps.
    #[error("{path}: is inside SCR's metadata directory {meta}; route application files elsewhere under the prefix")]
    RoutesMetadata {
        /// The path as resolved.
        path: PathBuf,
        /// The metadata directory.
        meta: PathBuf,
    },
    /// A path below the prefix directory passes through a symbolic link:
    /// refused rather than followed out of the prefix.
    #[error("{0}")]
    Beneath(#[from] BeneathError),
    /// During a restart, a routed file does not exist or is not readable.
    #[error("{name}: not part of the loaded checkpoint, or not readable in cache ({why})")]
    NoSuchRestartFile {
        /// The name asked for.
        name: String,
        /// Why.
        why: String,
    },
    /// `start_restart` without a checkpoint to restart from.
    #[error("no checkpoint to restart from: call have_restart first")]
    NoRestart,
    /// SCR_Config tried to set a parameter after init.
    #[error("SCR_Config: parameters can only be set before init (query is allowed)")]
    ConfigAfterInit,
    /// The filemap was about to be written while the background encode of
    /// a dataset holds its copy (SCR_ENCODE_ASYNC): a call that changes
    /// the filemap must wait for that encode first. A bug, reported
    /// rather than losing the encode's records.
    #[error("dataset {dset}: the filemap is held by its background encode; the call must wait for it first")]
    FilemapLent {
        /// The dataset being protected.
        dset: DatasetId,
    },
    /// A call after finalize.
    #[error("{call}: SCR was already finalized")]
    Finalized {
        /// The call.
        call: &'static str,
    },
    /// A dataset was written by a different number of ranks.
    #[error("dataset {id} was written by {written} ranks but this run has {running}; restart it with {written} ranks")]
    RankCountMismatch {
        /// Dataset id.
        id: DatasetId,
        /// Ranks that wrote it.
        written: u64,
        /// Ranks in this run.
        running: u64,
    },
    /// No dataset of that name is known.
    #[error("no dataset named {0:?}")]
    UnknownDataset(String),
    /// The configured redundancy descriptors cannot be used.
    #[error("redundancy descriptor: {0}")]
    Descriptor(#[from] DescriptorError),
    /// A call out of order in the dynamic (C API) phase state: e.g.
    /// SCR_Complete_output with no output phase, or SCR_Start_output inside one.
    #[error("{call}: {why}")]
    PhaseMisuse {
        /// The call.
        call: &'static str,
        /// What was wrong.
        why: &'static str,
    },
    /// Several ranks routed the same file while the dataset is not in
    /// bypass mode (LLNL SCR 3.1 aborts: "Shared file access detected
    /// while not in bypass mode"). Every rank gets this error, and the
    /// dataset is deleted from cache on every rank: per-rank copies of one
    /// file in cache would each flush over the others.
    #[error(
        "dataset {dset}: shared file access detected while not in bypass mode: {}; \
         write shared files with SCR_CACHE_BYPASS=1 (or BYPASS=1 on the CKPT descriptor)",
        dataset::describe_shared(files)
    )]
    SharedFile {
        /// The dataset.
        dset: DatasetId,
        /// The files routed by more than one rank, with those ranks.
        files: Vec<SharedFile>,
    },
    /// A halt condition ended the job inside SCR (SCR_HALT_EXIT=1) where
    /// no process can be ended (the thread communicator); under MPI every
    /// process exits with status 0 instead.
    #[error("the job halted ({reason}) and SCR_HALT_EXIT=1: stop the run")]
    Halted {
        /// The halt condition, e.g. `NO_CHECKPOINTS_LEFT: CheckpointsLeft is 0`.
        reason: String,
    },
}

impl From<ConfigError> for ScrError {
    fn from(e: ConfigError) -> ScrError {
        ScrError::Config(Box::new(e))
    }
}

impl ScrError {
    /// `op` failed on another rank (not rank 0 in particular).
    pub(crate) fn elsewhere(op: &'static str, dset: Option<DatasetId>) -> ScrError {
        ScrError::FailedElsewhere {
            op,
            who: "another rank",
            dset,
        }
    }

    /// An injected fault (testbed builds only) as the I/O error it stands for.
    pub(crate) fn injected(point: &'static str, e: crate::fault::Injected) -> ScrError {
        ScrError::Io {
            path: PathBuf::from(point),
            op: "injected fault",
            source: e.into(),
        }
    }
}

/// Result of an SCR call.
pub type ScrResult<T> = Result<T, ScrError>;

pub(crate) fn io_err(
    path: impl Into<PathBuf>,
    op: &'static str,
) -> impl FnOnce(io::Error) -> ScrError {
    let path = path.into();
    // A path the `beneath::*_in` functions refused is a link
    // error, not an I/O one.
    move |source| match crate::beneath::into_refusal(source) {
        Ok(refused) => ScrError::Beneath(refused),
        Err(source) => ScrError::Io { path, op, source },
    }
}
