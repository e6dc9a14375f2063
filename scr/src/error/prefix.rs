//! Why a flush or fetch failed. A failure of one rank's copy is reported by
//! that rank; the others learn "failed on rank N" with its message, which
//! travels between ranks as text (and is written to the index as the reason
//! a copy is FAILED).

use std::path::{Path, PathBuf};

use crate::beneath::BeneathError;
use crate::ids::DatasetId;
use crate::kvtree::UnpackError;
use crate::records::RecordError;
use crate::storage::dirs::DirError;

/// Why copying one file between cache and the prefix failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
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
    /// The copy has a different length than the filemap records.
    #[error("{}: copied {copied} bytes, the filemap says {recorded}", path.display())]
    Size {
        /// The source file.
        path: PathBuf,
        /// Bytes copied.
        copied: u64,
        /// Bytes recorded.
        recorded: u64,
    },
    /// The bytes read do not have the recorded CRC32.
    #[error("CRC32 mismatch: {} has {got:#x}, recorded {want:#x}", path.display())]
    Crc {
        /// The source file.
        path: PathBuf,
        /// CRC32 of the bytes read.
        got: u32,
        /// CRC32 recorded.
        want: u32,
    },
    /// SCR_CRC_ON_COPY: the copy read back does not have the source's CRC32.
    #[error("CRC32 mismatch on read-back (SCR_CRC_ON_COPY): the copy {} has {got:#x}, the source {want:#x}", path.display())]
    ReadBack {
        /// The copy.
        path: PathBuf,
        /// CRC32 of the copy.
        got: u32,
        /// CRC32 of the source.
        want: u32,
    },
    /// A container segment could not be read or written whole (missing
    /// or short container, I/O error): the file is not restored from it.
    #[error("container {} at offset {offset} ({length} bytes): {op}: {why}", path.display())]
    Container {
        /// The container file.
        path: PathBuf,
        /// Where the segment starts in it.
        offset: u64,
        /// Bytes in the segment.
        length: u64,
        /// `read` or `write`.
        op: &'static str,
        /// What went wrong.
        why: String,
    },
    /// The watchdog abandoned the copy: no progress for its timeout.
    #[error("abandoned by the watchdog: no progress for {secs} s (SCR_WATCHDOG_TIMEOUT{}); the cached copy is kept", if *pfs { "_PFS" } else { "" })]
    Stalled {
        /// The bound, seconds.
        secs: u64,
        /// Whether the bound is SCR_WATCHDOG_TIMEOUT_PFS.
        pfs: bool,
    },
    /// The copy was cancelled after the watchdog abandoned it.
    #[error("cancelled: the watchdog abandoned this flush")]
    Cancelled,
    /// The prefix side of the copy passes through a symbolic link inside
    /// the prefix directory: refused, not followed.
    #[error("{0}")]
    Beneath(#[from] BeneathError),
    /// An injected fault (testbed builds only).
    #[error("injected fault: {0}")]
    Injected(std::io::Error),
    /// The background copy's thread panicked.
    #[error("the flush thread panicked")]
    ThreadPanicked,
    /// The background copy was already collected.
    #[error("the flush was already completed")]
    AlreadyCompleted,
}

/// Why a flush could not start on this rank.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlushError {
    /// The dataset is not in this rank's cache.
    #[error("rank {rank}: dataset {dset} is not in cache")]
    NotInCache {
        /// This rank.
        rank: i64,
        /// The dataset.
        dset: DatasetId,
    },
    /// A file was routed outside the dataset's directory in the prefix.
    #[error("rank {rank}: {file}: routed path {routed:?} is not inside {}", dir.display())]
    OutsideDir {
        /// This rank.
        rank: i64,
        /// The cached file (logical path).
        file: String,
        /// The path it was routed as.
        routed: Option<String>,
        /// The dataset's directory in the prefix.
        dir: PathBuf,
    },
    /// A file was never completed.
    #[error("rank {rank}: {file} is incomplete")]
    Incomplete {
        /// This rank.
        rank: i64,
        /// The cached file (logical path).
        file: String,
    },
    /// Another rank cannot flush its files (it reports why).
    #[error("another rank cannot flush its files")]
    OtherRank,
    /// Rank 0 could not record the start of the flush.
    #[error("recording the flush start: {0}")]
    Bookkeeping(String),
    /// Bypass mode in a prefix in the old layout, which stores files in a
    /// dataset directory rather than where they were routed.
    #[error("bypass mode needs SCR 3.1's prefix layout, and {} is in the old one: run `scr index --upgrade {}` first, or set SCR_CACHE_BYPASS=0", prefix.display(), prefix.display())]
    BypassNeedsScr31Layout {
        /// The prefix directory.
        prefix: PathBuf,
    },
    /// The dataset's files are in the prefix already (bypass mode, or a
    /// fetch read in place): there is nothing to copy.
    #[error("dataset {dset} is in the prefix directory already (bypass)")]
    InPrefix {
        /// The dataset.
        dset: DatasetId,
    },
    /// Bypass mode: an application file in the prefix (or its directory)
    /// could not be opened (below the prefix, never through a link) and
    /// fsynced at Complete_output, so it cannot be recorded as durable; or,
    /// with SCR_COPY_METADATA=1, its attributes could not be read.
    #[error("rank {rank}: {}: fsync: {source}", path.display())]
    Sync {
        /// This rank.
        rank: i64,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// SCR_USE_CONTAINERS=1: the container files could not be made.
    #[error("rank {rank}: creating the containers: {source}")]
    Containers {
        /// This rank.
        rank: i64,
        /// Why.
        source: CopyError,
    },
}

/// Why a copy of a checkpoint in the prefix could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The summary says the copy is incomplete.
    #[error("{}: marked incomplete", path.display())]
    Incomplete {
        /// The summary file.
        path: PathBuf,
    },
    /// The summary is of another dataset than the index says.
    #[error("{}: summary is of dataset {found}, the index says {expected}", path.display())]
    WrongSummary {
        /// The summary file.
        path: PathBuf,
        /// The dataset it describes.
        found: i64,
        /// The dataset the index names.
        expected: i64,
    },
    /// A metadata file could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A packed message between ranks does not decode.
    #[error("{what}: {source}")]
    Unpack {
        /// What the message carries.
        what: &'static str,
        /// Why.
        source: UnpackError,
    },
    /// A part entry of the rank2file tree is malformed.
    #[error("rank2file part {part}: {why}")]
    BadPart {
        /// The part's key.
        part: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A rank2file entry sent between ranks does not decode.
    #[error("rank2file entry: {0}")]
    RankFiles(#[from] RankFilesError),
    /// The rank2file tree is deeper than any SCR writes.
    #[error("rank2file tree deeper than {0} levels")]
    TooDeep(usize),
    /// The checkpoint was written by a different number of ranks (not a
    /// bad copy: this run cannot use it).
    #[error("the checkpoint was written by {written} ranks, this run has {running}")]
    RankCount {
        /// Ranks that wrote it.
        written: u64,
        /// Ranks in this run.
        running: u64,
    },
    /// The map lists a rank this run does not have.
    #[error("the map lists rank {rank}, this run has {running} ranks")]
    NoSuchRank {
        /// The rank listed.
        rank: i64,
        /// Ranks in this run.
        running: usize,
    },
    /// A rank's entry appears twice.
    #[error("rank {0}: rank2file entry listed twice")]
    ListedTwice(usize),
    /// A rank's file count disagrees with its entries.
    #[error("rank {rank}: the map lists {listed} files, FILES says {expected:?}")]
    FileCount {
        /// This rank.
        rank: i64,
        /// Files listed.
        listed: usize,
        /// FILES.
        expected: Option<u64>,
    },
    /// A file's container segments do not add up to its recorded size.
    #[error("{file}: its container segments hold {length} bytes, the map records {size}")]
    Segments {
        /// The file (its key in the map).
        file: String,
        /// Bytes in its segments.
        length: u64,
        /// Its recorded size.
        size: u64,
    },
    /// A file would be fetched to outside the prefix.
    #[error("{0}: leaves the prefix")]
    LeavesPrefix(String),
    /// The cache directory could not be prepared.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The filemap could not be written.
    #[error("filemap: {0}")]
    Filemap(String),
    /// A file could not be copied.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// Ranks failed: each failing rank's message.
    #[error("{}", .0.iter().map(|(r, m)| format!("rank {r}: {m}")).collect::<Vec<_>>().join("; "))]
    Ranks(Vec<(usize, String)>),
    /// Rank 0's reason, as it broadcast it to every rank.
    #[error("{0}")]
    Reported(String),
    /// SCR_GLOBAL_RESTART reads a dataset in place by path, and this one is
    /// stored in containers (SCR_USE_CONTAINERS): it has no files to read.
    #[error(
        "dataset {0} is stored in containers, which a global restart (SCR_GLOBAL_RESTART=1) \
         cannot read in place; restart it on its rank count without SCR_GLOBAL_RESTART"
    )]
    GlobalInContainers(i64),
    /// Another rank failed at this step (it reports why).
    #[error("{0} failed on another rank")]
    OtherRank(&'static str),
    /// The fetched copy could not be protected in cache.
    #[error("the redundancy scheme could not be applied in cache")]
    NotProtected,
    /// The fetch failed in cache (writing or reading back the copy there,
    /// or recording it), not because of the copy in the prefix: that copy
    /// is not marked FAILED (the fetch goes on to the next older one).
    #[error("failed in cache, not in the prefix's copy: {0}")]
    InCache(Box<FetchError>),
    /// A file to be read in place (SCR_FETCH_BYPASS=1) is missing or not
    /// the size the map records.
    #[error("{} (read in place, SCR_FETCH_BYPASS=1): {why}", path.display())]
    InPlace {
        /// The file in the prefix.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

impl FetchError {
    /// Whether this rank's failure is the cache's (the cache directory,
    /// the filemap there, writing or reading back the copy in cache,
    /// protecting it there) rather than the copy in `prefix`'s.
    pub fn in_cache(&self, prefix: &Path) -> bool {
        match self {
            FetchError::Dir(_)
            | FetchError::Filemap(_)
            | FetchError::NotProtected
            | FetchError::InCache(_)
            | FetchError::Copy(CopyError::ReadBack { .. }) => true,
            FetchError::Copy(CopyError::Io { path, .. }) => !path.starts_with(prefix),
            _ => false,
        }
    }
}

/// A failure of the prefix tier that ends the SCR call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// A step run on rank 0 failed there; this rank learned it.
    #[error("rank 0 failed to {0}")]
    Rank0(&'static str),
    /// A fetched summary does not decode.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A gathered rank2file entry does not decode.
    #[error("rank2file entry: {0}")]
    RankFiles(#[source] RankFilesError),
    /// A dataset could not be flushed (bypass mode: its metadata).
    #[error(transparent)]
    Flush(#[from] FlushError),
}

/// A packed rank2file entry (sent between ranks) that does not decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RankFilesError {
    /// Not a packed hash.
    #[error(transparent)]
    Unpack(#[from] UnpackError),
    /// Not a rank2file map.
    #[error(transparent)]
    Record(#[from] RecordError),
}
