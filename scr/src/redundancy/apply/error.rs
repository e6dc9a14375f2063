//! Why applying or rebuilding redundancy failed, typed all the way: every
//! error names the world rank where it happened and, where there is one,
//! the file, the set member or the set.

use std::io;
use std::path::{Path, PathBuf};

use crate::comm::CommError;
use crate::kvtree::UnpackError;
use crate::records::{FileType, RecordError};
use crate::scheme::CopyType;

use super::super::RedundancyError;

/// The kind of an [`ApplyError`]; after a failed collective call every
/// member of the set returns an error of the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// Bad arguments (set geometry, missing sizes, wrong redundancy files).
    Input,
    /// More members lost than the scheme tolerates.
    Unrecoverable,
    /// A file operation failed.
    Io,
    /// A file's CRC32 differs from its recorded one.
    Crc,
    /// Files or headers of the set do not belong together.
    Inconsistent,
    /// A redundancy file header could not be read.
    Header,
    /// The caller's register callback refused a file.
    Register,
    /// The communicator failed.
    Comm,
    /// The redundancy arithmetic rejected its input.
    Redundancy,
}

impl FailureKind {
    const ALL: [FailureKind; 9] = [
        FailureKind::Input,
        FailureKind::Unrecoverable,
        FailureKind::Io,
        FailureKind::Crc,
        FailureKind::Inconsistent,
        FailureKind::Header,
        FailureKind::Register,
        FailureKind::Comm,
        FailureKind::Redundancy,
    ];

    /// The byte that carries this kind in an agreement message.
    pub(super) fn code(self) -> u8 {
        let code = Self::ALL.iter().position(|k| *k == self);
        code.expect("every FailureKind is listed in ALL") as u8
    }

    /// The kind a peer's byte names; a byte no kind has (a peer of another
    /// version, a damaged message) reads as [`FailureKind::Inconsistent`].
    pub(super) fn from_code(code: u8) -> FailureKind {
        Self::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(FailureKind::Inconsistent)
    }
}

fn at(offset: &Option<u64>) -> String {
    offset.map_or(String::new(), |o| format!(" at offset {o}"))
}

fn scheme_text(scheme: &CopyType, set_failures: &usize) -> String {
    match scheme {
        CopyType::Rs => format!("RS with SET_FAILURES={set_failures}"),
        other => other.to_string(),
    }
}

fn file_note(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map_or(String::new(), |p| format!(" ({})", p.display()))
}

/// Arguments that do not describe a usable set or member (the caller's
/// mistake, or records that lack what the scheme needs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputProblem {
    /// The member list and the set communicator differ in size.
    #[error("world_ranks lists {listed} members but the set communicator has {comm_size}")]
    WorldRanks {
        /// Members in `world_ranks`.
        listed: usize,
        /// Ranks in the set communicator.
        comm_size: usize,
    },
    /// `piece_bytes` is zero.
    #[error("the piece size (SCR_MPI_BUF_SIZE) must be at least 1")]
    ZeroPieceSize,
    /// The set is too small (or too large) for its scheme.
    #[error(
        "a set of {members} members cannot use {}: PARTNER and XOR need 2 members, \
         RS with SET_FAILURES=k needs k+1..=256 and k >= 1",
        scheme_text(scheme, set_failures)
    )]
    Geometry {
        /// Members in the set.
        members: usize,
        /// The scheme.
        scheme: CopyType,
        /// SET_FAILURES given (read for RS only).
        set_failures: usize,
    },
    /// The `lost` vector does not have one entry per member.
    #[error("the lost vector has {listed} entries but the set has {members} members")]
    LostCount {
        /// Entries given.
        listed: usize,
        /// Members in the set.
        members: usize,
    },
    /// An XOR/RS survivor did not pass its files.
    #[error("a survivor must pass its application and redundancy files")]
    SurvivorFiles,
    /// A PARTNER member that kept its own files did not pass them.
    #[error("a member that kept its own files must pass them")]
    OwnFiles,
    /// A PARTNER member that kept the copies it holds did not pass them.
    #[error("a member that kept the copies it holds must pass its redundancy files")]
    HeldFiles,
    /// An XOR/RS survivor passed no or several redundancy files of its
    /// scheme's type.
    #[error("a survivor must pass exactly one {file_type} file, got {count}")]
    RedundancyFiles {
        /// The type wanted.
        file_type: FileType,
        /// How many it passed.
        count: usize,
    },
    /// A file's meta records no FILE.
    #[error("{}: its meta records no FILE", path.display())]
    NoFileName {
        /// The file.
        path: PathBuf,
    },
    /// A file's meta records no SIZE.
    #[error("{}: its meta records no SIZE", path.display())]
    NoSize {
        /// The file.
        path: PathBuf,
    },
}

/// Files, headers or messages of a set that do not belong together
/// (damage, files of another dataset, members that disagree).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Inconsistency {
    /// The members were not all given the same set (member list, scheme,
    /// dataset, piece size): their set digests differ.
    #[error(
        "member {member} of the set was given another set than member 0 (member list, scheme, \
         SET_FAILURES, dataset or SCR_MPI_BUF_SIZE differ): its set digest is {digest:#018x}, \
         member 0's {first:#018x}"
    )]
    SetDigest {
        /// The lowest member whose digest differs from member 0's.
        member: usize,
        /// Its digest.
        digest: u64,
        /// Member 0's digest.
        first: u64,
    },
    /// An allgather returned the wrong number of contributions.
    #[error("allgather returned {got} contributions for {members} members")]
    Contributions {
        /// Contributions received.
        got: usize,
        /// Members in the set.
        members: usize,
    },
    /// A member's contribution to an agreement is too short to read.
    #[error("member {member} sent a truncated agreement message")]
    Truncated {
        /// The member.
        member: usize,
    },
    /// A member's file list (or lists) could not be unpacked.
    #[error("member {member} sent unreadable file lists: {source}")]
    UnreadableList {
        /// The member.
        member: usize,
        /// The kvtree error.
        source: UnpackError,
    },
    /// A member's CRC32s at the end of an encode pass are not 4 bytes for
    /// each file of the list it sent before the pass.
    #[error("member {member} sent {bytes} bytes of CRC32s for its {files} files (4 each)")]
    CrcList {
        /// The member (group rank).
        member: usize,
        /// Files in its list.
        files: usize,
        /// Bytes it sent.
        bytes: usize,
    },
    /// The header of a redundancy file came out longer than the room kept
    /// for it before the pass (the lists changed between the agreements).
    #[error("{}: header of {header} bytes does not fit the {reserved} reserved for it", path.display())]
    HeaderReserve {
        /// The redundancy file.
        path: PathBuf,
        /// Bytes reserved (the longest header of the lists before the pass).
        reserved: u64,
        /// Bytes of the header.
        header: u64,
    },
    /// A PARTNER member sent no list under `key` (`SELF` or `COPY`).
    #[error("member {member} sent no {key} list")]
    MissingList {
        /// The member.
        member: usize,
        /// The list wanted.
        key: &'static str,
    },
    /// A member's file list names another world rank than the set map.
    #[error(
        "member {member}'s {key} list names rank {listed} but the set map says rank {expected}"
    )]
    ListRank {
        /// The member that sent the list.
        member: usize,
        /// Which list (`FILES`, `SELF`, `COPY`).
        key: &'static str,
        /// The rank it names.
        listed: i64,
        /// The rank it should name.
        expected: i64,
    },
    /// A file differs in size from its meta.
    #[error("{}: file is {actual} bytes but its meta records {recorded}", path.display())]
    FileSize {
        /// The file.
        path: PathBuf,
        /// Size on disk.
        actual: u64,
        /// Size recorded.
        recorded: u64,
    },
    /// A PARTNER piece arrived with the wrong length.
    #[error("expected a piece of {expected} bytes at offset {offset}, received {received}")]
    PieceLength {
        /// Logical offset of the piece.
        offset: u64,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        received: usize,
    },
    /// A ring step brought the wrong number of bytes.
    #[error("ring step {step}: expected {expected} bytes from the left neighbour, got {received}")]
    RingStep {
        /// The step.
        step: usize,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        received: usize,
    },
    /// A delivery of finished outputs brought the wrong number of bytes.
    #[error("delivery from member {from}: expected {expected} bytes, got {received}")]
    Delivery {
        /// The sending member.
        from: usize,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        received: usize,
    },
    /// A rebuilt member's zero padding came out non-zero.
    #[error(
        "rebuilt padding at logical offset {offset} is not zero: the surviving files \
         do not belong together"
    )]
    Padding {
        /// Logical offset of the first non-zero byte's piece.
        offset: u64,
    },
    /// A survivor's redundancy header could not be unpacked.
    #[error("member {member} sent an unreadable header: {source}")]
    UnreadableHeader {
        /// The member.
        member: usize,
        /// The kvtree error.
        source: UnpackError,
    },
    /// The survivors' headers record a chunk size the files do not need.
    #[error("the headers record CHUNK {recorded} but the files need {needed}")]
    ChunkSize {
        /// CHUNK in the headers.
        recorded: u64,
        /// Chunk size the recorded file sizes need.
        needed: u64,
    },
    /// Survivors' headers disagree on CHUNK.
    #[error("survivors' headers disagree on CHUNK ({first} vs {other})")]
    ChunkDisagree {
        /// The first CHUNK seen.
        first: u64,
        /// A different one.
        other: u64,
    },
    /// A survivor's header describes another member or set.
    #[error(
        "the redundancy header describes rank {header_rank} in set {header_set:?}, \
         not rank {rank} in set {set:?}"
    )]
    HeaderSet {
        /// CURRENT's rank in the header.
        header_rank: i64,
        /// GROUP's ranks in the header.
        header_set: Vec<i64>,
        /// This member's rank.
        rank: i64,
        /// This set's ranks.
        set: Vec<i64>,
    },
    /// A survivor's header belongs to another dataset.
    #[error("the redundancy header belongs to dataset {header} not {dataset}")]
    HeaderDataset {
        /// DSET in the header.
        header: i64,
        /// The dataset being rebuilt.
        dataset: i64,
    },
    /// A survivor's header records other file sizes than the files passed.
    #[error(
        "the redundancy header records file sizes {recorded:?} but the files passed have {given:?}"
    )]
    HeaderSizes {
        /// Sizes in the header.
        recorded: Vec<Option<u64>>,
        /// Sizes in the metas passed.
        given: Vec<Option<u64>>,
    },
    /// No survivor's header lists a member's files.
    #[error("no surviving header lists the files of member {member}")]
    Unlisted {
        /// The member.
        member: usize,
    },
    /// A header lists another rank where a member belongs.
    #[error("a header lists rank {listed} where member {member} (rank {expected}) belongs")]
    HeaderRank {
        /// The member.
        member: usize,
        /// The rank listed.
        listed: i64,
        /// The member's rank.
        expected: i64,
    },
}

/// Why applying or rebuilding redundancy failed. Every variant names the
/// world rank where it happened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The arguments do not describe a usable set.
    #[error("rank {world_rank}: {problem}")]
    Input {
        /// Where.
        world_rank: i64,
        /// What is wrong.
        problem: InputProblem,
    },
    /// Members of the set lost more than its scheme can rebuild.
    #[error(
        "set {group_id}: members {lost:?} lost files and {} cannot rebuild those of \
         members {cannot:?}; the dataset must come from another cache level or the prefix",
        scheme_text(scheme, set_failures)
    )]
    Unrecoverable {
        /// The set id.
        group_id: i64,
        /// The set's scheme.
        scheme: CopyType,
        /// Its SET_FAILURES (read for RS only).
        set_failures: usize,
        /// Group ranks of the members that lost anything.
        lost: Vec<usize>,
        /// Group ranks of the members whose data cannot be rebuilt
        /// ([`super::unrecoverable_members`]).
        cannot: Vec<usize>,
    },
    /// A file operation failed.
    #[error("rank {world_rank}: {}{}: {source}", path.display(), at(offset))]
    Io {
        /// Where.
        world_rank: i64,
        /// The file.
        path: PathBuf,
        /// Byte offset in the file, when known.
        offset: Option<u64>,
        /// The operating system's error.
        source: io::Error,
    },
    /// A file's contents do not match its recorded CRC32: it (or the data it
    /// was rebuilt from) is corrupt; do not restart from it.
    #[error(
        "rank {world_rank}: {}: CRC32 is {actual:#010x} but the metadata records {expected:#010x}; \
         the file is corrupt",
        path.display()
    )]
    Crc {
        /// Where.
        world_rank: i64,
        /// The file.
        path: PathBuf,
        /// Recorded CRC32.
        expected: u32,
        /// CRC32 of the bytes found (or rebuilt).
        actual: u32,
    },
    /// The files or headers of the set do not belong together.
    #[error("rank {world_rank}: {problem}")]
    Inconsistent {
        /// Where.
        world_rank: i64,
        /// What disagrees.
        problem: Inconsistency,
    },
    /// A redundancy file's header could not be read.
    #[error("rank {world_rank}: {source}")]
    Header {
        /// Where.
        world_rank: i64,
        /// The record error (names the file).
        source: RecordError,
    },
    /// The register callback refused a file (returned by callers'
    /// callbacks, whose error type is theirs: it stays the source).
    #[error("rank {world_rank}: could not record {} in the filemap: {source}", path.display())]
    Register {
        /// Where.
        world_rank: i64,
        /// The file.
        path: PathBuf,
        /// The caller's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The communicator failed (a peer died or timed out).
    #[error("rank {world_rank}: {source}")]
    Comm {
        /// Where.
        world_rank: i64,
        /// The communicator's error.
        source: CommError,
    },
    /// The redundancy arithmetic rejected its input.
    #[error("rank {world_rank}: {source}")]
    Redundancy {
        /// Where.
        world_rank: i64,
        /// The error.
        source: RedundancyError,
    },
    /// Another member of the set failed; this member stopped with it. The
    /// failed member returns (and reports) its own error in full; what
    /// travels is its kind and the file it names.
    #[error(
        "member {member} (rank {world_rank}) of the set failed ({kind:?}){}; \
         that rank reports the cause",
        file_note(path)
    )]
    Peer {
        /// Group rank of the failed member.
        member: usize,
        /// Its world rank.
        world_rank: i64,
        /// The kind of its error.
        kind: FailureKind,
        /// The file its error names, if any.
        path: Option<PathBuf>,
    },
}

impl ApplyError {
    /// The kind of this error; for [`ApplyError::Peer`] the kind of the
    /// failed member's error.
    pub fn kind(&self) -> FailureKind {
        match self {
            ApplyError::Input { .. } => FailureKind::Input,
            ApplyError::Unrecoverable { .. } => FailureKind::Unrecoverable,
            ApplyError::Io { .. } => FailureKind::Io,
            ApplyError::Crc { .. } => FailureKind::Crc,
            ApplyError::Inconsistent { .. } => FailureKind::Inconsistent,
            ApplyError::Header { .. } => FailureKind::Header,
            ApplyError::Register { .. } => FailureKind::Register,
            ApplyError::Comm { .. } => FailureKind::Comm,
            ApplyError::Redundancy { .. } => FailureKind::Redundancy,
            ApplyError::Peer { kind, .. } => *kind,
        }
    }

    /// The file this error names, if it names one (what a failed member
    /// tells the rest of its set).
    pub fn path(&self) -> Option<&Path> {
        match self {
            ApplyError::Io { path, .. }
            | ApplyError::Crc { path, .. }
            | ApplyError::Register { path, .. } => Some(path),
            ApplyError::Input {
                problem: InputProblem::NoFileName { path } | InputProblem::NoSize { path },
                ..
            } => Some(path),
            ApplyError::Inconsistent {
                problem: Inconsistency::FileSize { path, .. },
                ..
            } => Some(path),
            ApplyError::Redundancy {
                source: RedundancyError::FileSize { path, .. } | RedundancyError::Io { path, .. },
                ..
            } => Some(path),
            ApplyError::Peer { path, .. } => path.as_deref(),
            _ => None,
        }
    }
}
