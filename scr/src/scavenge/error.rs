//! The errors of the scavenge commands. Each names the file, dataset, rank
//! or set it is about; the reports of `scr index`/`scr postrun` keep their
//! messages as text (they are JSON the harness reads), but every function
//! returns one of these types.

use std::io;
use std::path::PathBuf;

use crate::comm::thread::RunError;
use crate::records::RecordError;
use crate::redundancy::apply::ApplyError;

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
    /// A file could not be packed into the dataset's containers
    /// (SCR_USE_CONTAINERS=1); the plain files are kept.
    #[error("packing {file} into containers: {source}")]
    Pack {
        /// The file (its key in the map).
        file: String,
        /// Why.
        source: crate::error::CopyError,
    },
    /// A metadata file could not be read or written.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A path below the prefix passes through a symbolic link: refused,
    /// never followed out of the prefix.
    #[error(transparent)]
    Beneath(#[from] crate::beneath::BeneathError),
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
    /// The node's cache holds the dataset, but its output phase never
    /// completed there, or (SCR_ENCODE_ASYNC=1) its background protection
    /// was never settled.
    #[error("dataset {id} is marked incomplete in the cache of node {node} (its output phase never completed, or its background protection never settled); nothing copied")]
    IncompleteInCache {
        /// The dataset id.
        id: i64,
        /// The node.
        node: String,
    },
    /// The dataset's files are in the prefix already (written in bypass
    /// mode, or read in place): copying them would copy each file onto
    /// itself.
    #[error("dataset {id} is in the prefix already (bypass mode; filemap tag BYPASS on node {node}): nothing to copy")]
    InPrefix {
        /// The dataset id.
        id: i64,
        /// The node.
        node: String,
    },
    /// Where the dataset goes in the prefix is not known.
    #[error("dataset {id}: {source}")]
    NoPlacement {
        /// The dataset id.
        id: i64,
        /// Why.
        source: PlacementError,
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
    /// The dataset is of the other layout than the prefix's index.
    #[error(
        "{what}: the index is version {index}, a prefix of the other layout; \
         `scr index --upgrade` moves an old prefix to SCR 3.1's layout"
    )]
    LayoutMismatch {
        /// The dataset directory or `.scr/scr.dataset.<id>`.
        what: String,
        /// The index version.
        index: i64,
    },
    /// The dataset directory given does not exist.
    #[error("{dir}: no such directory")]
    NoSuchDir {
        /// The directory.
        dir: PathBuf,
    },
    /// An absolute dataset directory outside the prefix.
    #[error("{dir} is not inside the prefix {prefix}")]
    OutsidePrefix {
        /// The directory given.
        dir: String,
        /// The prefix.
        prefix: PathBuf,
    },
    /// A dataset directory name that leaves the prefix or names `.scr`.
    #[error("{dir:?} is not a dataset directory below the prefix (give it relative to the prefix, without `..`)")]
    NotBelowPrefix {
        /// The name given.
        dir: String,
    },
    /// Rank filemaps exist but none could be read.
    #[error("{}: no rank filemap could be read: {}", dir.display(), problems.join("; "))]
    NoReadableFilemap {
        /// The dataset directory.
        dir: PathBuf,
        /// What is wrong with each.
        problems: Vec<String>,
    },
    /// The walk for dataset directories passed its bound.
    #[error("{}: more than {limit} directories below the prefix; index dataset directories one by one with --add", prefix.display())]
    TooManyDirs {
        /// The prefix.
        prefix: PathBuf,
        /// The bound.
        limit: usize,
    },
    /// Datasets need a scavenge but every node is down.
    #[error("datasets {ids:?} need a scavenge but no node is up")]
    NoNodeUp {
        /// The datasets.
        ids: Vec<i64>,
    },
}

/// Why a dataset directory (`DIR`/`ORIGDIR`) cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// `DIR` leaves the prefix or names `.scr`.
    #[error("dataset directory {dir:?} is not a directory below the prefix")]
    DirOutside {
        /// The directory.
        dir: String,
    },
    /// `ORIGDIR` leaves the prefix.
    #[error("ORIGDIR {orig_dir:?} is not a directory below the prefix")]
    OrigDirOutside {
        /// The directory.
        orig_dir: String,
    },
    /// No flush file to read `DIR` from.
    #[error("{} does not exist, so the dataset directory is unknown; give it (--dir)", path.display())]
    NoFlushFile {
        /// The flush file.
        path: PathBuf,
    },
    /// The flush file has no `DIR` for the dataset.
    #[error("{} records no DIR for it; give the dataset directory (--dir)", path.display())]
    NoDir {
        /// The flush file.
        path: PathBuf,
    },
    /// The flush file's `DIR`/`ORIGDIR` is unusable.
    #[error("{}: {source}", path.display())]
    InFlushFile {
        /// The flush file.
        path: PathBuf,
        /// What is wrong.
        source: Box<PlacementError>,
    },
}

/// Why a file in a node's cache has no place in the prefix (reported as a
/// file not copied).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnplacedFile {
    /// The file's routed path is outside the dataset's routed directory.
    #[error("its routed path ({orig_path}/{orig_name}) is not inside {}", routed_dir.display())]
    RoutedOutside {
        /// ORIG_PATH of its meta data.
        orig_path: String,
        /// ORIG_NAME of its meta data.
        orig_name: String,
        /// The directory it should be in.
        routed_dir: PathBuf,
    },
    /// The cache path has no file name.
    #[error("no file name")]
    NoName,
    /// A PARTNER copy whose name does not say whose copy it is.
    #[error("a PARTNER copy whose name does not say whose it is")]
    UnknownPartnerCopy,
}

/// Why `scr postrun` has nothing to scavenge (reported, not an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NothingToScavenge {
    /// The newest checkpoint is already in the prefix.
    #[error(
        "the newest checkpoint (dataset {id}) is already in the prefix and no output is pending"
    )]
    AlreadyFlushed {
        /// The newest checkpoint.
        id: i64,
    },
    /// The newest checkpoint is not in cache.
    #[error("the newest checkpoint (dataset {id}) is not in cache and no output is pending")]
    NotCached {
        /// The newest checkpoint.
        id: i64,
    },
    /// The flush file lists nothing to do.
    #[error("the flush file lists no checkpoint and no pending output")]
    Empty,
}

/// Why `scr copy` on a node through the launcher gave no report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchCopyError {
    /// The launcher could not run the copy on the node.
    #[error("scr copy on {node} through {launcher}: {source}")]
    Launch {
        /// The node.
        node: String,
        /// The launcher's name.
        launcher: String,
        /// Why.
        source: crate::launch::LaunchError,
    },
    /// The copy outlasted its bound and was killed.
    #[error("scr copy on {node} did not finish within {timeout_s} s; killed")]
    Timeout {
        /// The node.
        node: String,
        /// The bound.
        timeout_s: u64,
    },
    /// `scr copy --json` printed something that is not a report.
    #[error("scr copy on {node}: unreadable report ({source}): {stdout}")]
    Report {
        /// The node.
        node: String,
        /// The parse error.
        source: serde_json::Error,
        /// What it printed.
        stdout: String,
    },
    /// `scr copy` failed (an exit code other than the table's done,
    /// incomplete or not cached), or was killed by a signal.
    #[error("scr copy on {node} failed ({}): {stderr_tail}", code.map_or("killed by a signal".to_string(), |c| format!("exit code {c}")))]
    Failed {
        /// The node.
        node: String,
        /// Its exit code.
        code: Option<i32>,
        /// The last lines of its standard error.
        stderr_tail: String,
    },
}

/// Why a set in a dataset directory cannot rebuild its lost members
/// (`scr index` reports each, prefixed "cannot rebuild").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildProblem {
    /// A member's parity header could not be read.
    #[error("set {set}: {source}")]
    Header {
        /// The set id.
        set: i64,
        /// Why.
        source: RecordError,
    },
    /// The header and the file names disagree on the set size.
    #[error("set {set}: its header lists {in_header} members, its file names {in_names}")]
    SizeMismatch {
        /// The set id.
        set: i64,
        /// Members in the header.
        in_header: usize,
        /// Members in the file names.
        in_names: u64,
    },
    /// More members lost than the scheme can rebuild.
    #[error(
        "set {set} ({scheme}): {lost} of its {members} members are lost, more than it can rebuild"
    )]
    TooManyLost {
        /// The set id.
        set: i64,
        /// "XOR" or "RS".
        scheme: &'static str,
        /// Members lost.
        lost: usize,
        /// Members.
        members: usize,
    },
    /// A survivor's file was routed outside the dataset's routed directory.
    #[error("set {set}: a file of rank {rank} was routed outside {} (was the prefix moved? give the prefix the job used)", routed_dir.display())]
    RoutedOutside {
        /// The set id.
        set: i64,
        /// The survivor's world rank.
        rank: i64,
        /// The directory it should be in.
        routed_dir: PathBuf,
    },
    /// A missing rank belongs to no XOR/RS set in the directory.
    #[error("rank {rank}: no XOR/RS set in the directory holds parity for it")]
    NoParity {
        /// The world rank.
        rank: i64,
    },
}

/// Why rebuilding a set in a dataset directory failed (`scr index`
/// reports it, prefixed "rebuild failed").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildError {
    /// A file operation failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A rebuilt file's place passes through a symbolic link: refused,
    /// never followed out of the prefix.
    #[error(transparent)]
    Beneath(#[from] crate::beneath::BeneathError),
    /// A rebuilt file could not be moved to its place.
    #[error("{} -> {}: {source}", from.display(), to.display())]
    Move {
        /// Where it was rebuilt.
        from: PathBuf,
        /// Its place.
        to: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The set's member threads could not run.
    #[error("set {set}: {source}")]
    Threads {
        /// The set id.
        set: i64,
        /// Why.
        source: RunError,
    },
    /// A member's rebuild failed.
    #[error("set {set}: {source}")]
    Member {
        /// The set id.
        set: i64,
        /// Why.
        source: ApplyError,
    },
    /// A survivor's file packed in containers could not be read out of
    /// them whole, with its recorded size and CRC32.
    #[error("set {set}: rank {rank}: {file} in its containers: {source}")]
    Unpack {
        /// The set id.
        set: i64,
        /// The survivor's world rank.
        rank: i64,
        /// The file (its key in the rank filemap).
        file: String,
        /// Why.
        source: crate::error::CopyError,
    },
    /// A rebuilt file maps outside the dataset's routed directory.
    #[error("rank {rank}: rebuilt file {} was routed outside {}", file.display(), routed_dir.display())]
    RoutedOutside {
        /// The rebuilt rank.
        rank: i64,
        /// The rebuilt file.
        file: PathBuf,
        /// The directory it should be in.
        routed_dir: PathBuf,
    },
    /// A rebuilt parity file has no name.
    #[error("rank {rank}: rebuilt parity file has no name")]
    NoName {
        /// The rebuilt rank.
        rank: i64,
    },
    /// Two rebuilt files map to one place.
    #[error("rank {rank}: two rebuilt files map to the same place")]
    Collision {
        /// The rebuilt rank.
        rank: i64,
    },
    /// The rebuilt rank's filemap could not be written.
    #[error(transparent)]
    Filemap(#[from] RecordError),
}

/// The exit code of a scavenge command that failed this way (the table of
/// [`crate::exit`]).
impl crate::exit::HasExitCode for ScavengeError {
    fn exit_code(&self) -> crate::exit::Code {
        use super::PlacementError;
        match self {
            ScavengeError::NotInCache { .. } => crate::exit::Code::NotCached,
            ScavengeError::DamagedIndex { .. } | ScavengeError::NoReadableFilemap { .. } => {
                crate::exit::Code::Damaged
            }
            ScavengeError::NoPlacement {
                source: PlacementError::InFlushFile { .. },
                ..
            } => crate::exit::Code::Damaged,
            ScavengeError::Record(e) => match e.exit_code() {
                // A metadata file the command needs is missing: it could
                // not do its job (ABSENT is for the file a question is about).
                crate::exit::Code::Absent => crate::exit::Code::Failed,
                c => c,
            },
            // What was named on the command line (or must be) is wrong.
            ScavengeError::NoPlacement { .. }
            | ScavengeError::InPrefix { .. }
            | ScavengeError::UnknownName { .. }
            | ScavengeError::NotADataset { .. }
            | ScavengeError::LayoutMismatch { .. }
            | ScavengeError::NoSuchDir { .. }
            | ScavengeError::OutsidePrefix { .. }
            | ScavengeError::NotBelowPrefix { .. } => crate::exit::Code::Usage,
            _ => crate::exit::Code::Failed,
        }
    }
}
