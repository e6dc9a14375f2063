//! Errors of a dataset's life in cache ([`crate::dataset`]): applying the
//! redundancy scheme at complete, rebuilding at restart, and the messages
//! ranks exchange at restart.

use std::path::PathBuf;

use super::ScrError;
use crate::comm::CommError;
use crate::ids::DatasetId;
use crate::kvtree::UnpackError;
use crate::records::reddesc::CopyType;
use crate::redundancy::apply::ApplyError;
use crate::storage::dirs::DirError;

/// Why a dataset's redundancy could not be applied at complete (or after a
/// fetch).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The filemap records no redundancy descriptor for the dataset.
    #[error("the filemap records no redundancy descriptor")]
    NoDescriptor,
    /// The filemap records no dataset descriptor for the dataset.
    #[error("the filemap records no dataset descriptor")]
    NoDatasetRecord,
    /// The dataset's descriptor is not one of this run's.
    #[error("redundancy descriptor {index} is not configured in this run")]
    NotInRun {
        /// The descriptor's INDEX.
        index: i64,
    },
    /// A set scheme without a set communicator (a bug in set-up).
    #[error("the {scheme} set has no communicator")]
    NoSetComm {
        /// The scheme.
        scheme: CopyType,
    },
    /// A file changed size between complete and the CRC.
    #[error("{}: {len} bytes, but {recorded:?} were recorded at complete", path.display())]
    SizeChanged {
        /// The file (real path).
        path: PathBuf,
        /// Its length now.
        len: u64,
        /// The length recorded.
        recorded: Option<u64>,
    },
    /// The set operation failed (names the rank, file or set).
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The background encode could not run or ended abnormally
    /// (SCR_ENCODE_ASYNC): the thread could not start, or it panicked.
    #[error("the background encode thread {what}")]
    Background {
        /// What went wrong.
        what: String,
    },
    /// The encode returned a CRC count that does not match the files.
    #[error("the encode returned {returned} CRCs for {files} files")]
    CrcCount {
        /// CRCs returned.
        returned: usize,
        /// Application files.
        files: usize,
    },
}

/// Why this rank could not rebuild its part of a dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildError {
    /// SINGLE keeps no redundancy: lost files are gone.
    #[error("SINGLE keeps no redundancy: this rank's files are gone")]
    SingleLost,
    /// The set communicator could not be made.
    #[error("no set communicator")]
    NoSetComm,
    /// A communication failed.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The dataset directory could not be prepared.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// A file operation failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The set operation failed (names the rank, file or set).
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The filemap could not be written.
    #[error("filemap: {0}")]
    Filemap(Box<ScrError>),
    /// A different number of files came back than this rank recorded.
    #[error("{came} files of dataset {dset} came back but {recorded} were recorded")]
    CountMismatch {
        /// The dataset.
        dset: DatasetId,
        /// Files rebuilt.
        came: u64,
        /// Files recorded at complete.
        recorded: u64,
    },
    /// A rebuilt file has no recorded name to move it to.
    #[error("rebuilt file {} has no recorded name", path.display())]
    NoRecordedName {
        /// Where it was rebuilt.
        path: PathBuf,
    },
    /// A step before the set's exchanges failed on another member (that
    /// member reports the cause); every member stops there together.
    #[error("{op} failed on another member of the set")]
    Elsewhere {
        /// The step.
        op: &'static str,
    },
}

impl From<ScrError> for RebuildError {
    fn from(e: ScrError) -> Self {
        RebuildError::Filemap(Box::new(e))
    }
}

/// A message between ranks at restart (a scattered filemap, a file on its
/// way to its owner) that does not decode: a bug or memory corruption,
/// never trusted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// The message is shorter than its header says.
    #[error("{what}: message of {len} bytes is too short")]
    Short {
        /// What the message carries.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// The packed hash in the message does not decode.
    #[error("{what}: {source}")]
    Unpack {
        /// What the message carries.
        what: &'static str,
        /// Why.
        source: UnpackError,
    },
    /// The file header names no file.
    #[error("file header without FILE")]
    NoFile,
}

/// A path several ranks routed in one dataset (SCR 3.1's
/// `scr_assign_ownership`), with those ranks, ascending: the first is the
/// file's owner in bypass mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFile {
    /// The routed path (absolute, inside the prefix directory).
    pub path: PathBuf,
    /// The world ranks that routed it, ascending.
    pub ranks: Vec<crate::ids::Rank>,
}

/// At most this many ranks are named per shared file in a message.
const RANKS_NAMED: usize = 8;
/// At most this many shared files are named in a message.
const FILES_NAMED: usize = 4;

impl std::fmt::Display for SharedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named: Vec<String> = self
            .ranks
            .iter()
            .take(RANKS_NAMED)
            .map(ToString::to_string)
            .collect();
        write!(
            f,
            "{} routed by ranks {}",
            self.path.display(),
            named.join(", ")
        )?;
        if self.ranks.len() > RANKS_NAMED {
            write!(f, " and {} more", self.ranks.len() - RANKS_NAMED)?;
        }
        Ok(())
    }
}

/// The shared files of a message: the first few, and how many more.
pub(crate) fn describe_shared(files: &[SharedFile]) -> String {
    let mut parts: Vec<String> = files
        .iter()
        .take(FILES_NAMED)
        .map(ToString::to_string)
        .collect();
    if files.len() > FILES_NAMED {
        parts.push(format!("{} more shared files", files.len() - FILES_NAMED));
    }
    parts.join("; ")
}
