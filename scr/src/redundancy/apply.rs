//! The collective half of the redundancy schemes: applying SINGLE, PARTNER,
//! XOR and RS to one set of members at `SCR_Complete_output`
//! (`scr_reddesc_apply()`: `scr_reddesc_apply_partner()`,
//! `scr_reddesc_apply_xor()`, redset's `redset_apply_rs()`) and rebuilding
//! lost members at restart (`scr_reddesc_recover()`:
//! `scr_reddesc_recover_partner()`, `scr_reddesc_recover_xor()`,
//! `redset_recover_rs()`), over a set communicator and real files.
//!
//! # Files this module writes
//! - PARTNER: the copy of file `i` of the left neighbour (world rank `w`) is
//!   `<dir>/<basename of its FILE>.partner.<w>.<i>`, TYPE PARTNER, its meta
//!   the owner's meta (FILE = the owner's logical path, SIZE, CRC) with only
//!   TYPE changed. The index keeps two files of one owner with the same
//!   basename apart; the owner's rank keeps copies apart from the holder's
//!   own files and from other owners' copies.
//! - XOR: `<grank+1>_of_<gsize>_in_<gid>.xor` = the [`XorHeader`] kvtree
//!   file (DSET, RANKS, GROUP, CHUNK, CURRENT = this member, PARTNER = left
//!   neighbour) followed by the CHUNK bytes of XOR data (xor-scheme.txt).
//! - RS: `<grank+1>_of_<gsize>_in_<gid>.rs` = the same header layout plus
//!   `FAILURES/<k>` and `PARTNERS/<i>/{RANK,FILES,FILE/<j>/<meta>}` for the
//!   k members to the left (i = 1 is the left neighbour, also kept under
//!   PARTNER so XOR tools can read it), followed by k parity chunks of CHUNK
//!   bytes each, parity row 0 first ([`super::rs`] set layout).
//!
//! Every redundancy file's CRC32 is computed while it is written (the
//! header's, then each row's, joined with `crc32fast`'s combine), so no file
//! is read back.
//!
//! # Encode and rebuild share one pipelined ring
//! XOR is RS with k = 1 (the RS layout with k = 1 is the XOR layout), so both
//! run the same schedule. For each piece (SCR_MPI_BUF_SIZE bytes at the same
//! offset of every chunk), a bundle of partial sums for each stripe travels
//! once around the set: at step t member m adds its share of stripe
//! `ring_slot(m, t)` = (m − 1 − t) mod N (the schedule of
//! `scr_reddesc_apply_xor()`) to what it received from its left neighbour
//! and passes it right. After N steps member m holds the finished bundle of
//! stripe m and delivers each output to the member that stores it: for XOR
//! that is m itself (no extra message), for RS parity row j goes to m + j;
//! at rebuild the outputs are the lost members' contents of the stripe and go
//! to them (the pipelined reduction to the root of `scr_reddesc_recover_xor()`,
//! generalised to k roots with the decoding coefficients of
//! [`super::rs::ReedSolomon::decode_plan`]). Every input byte is read once,
//! every output byte written once, and the only buffers are a few pieces,
//! reused across steps.
//!
//! # Failure handling
//! Nothing here waits outside [`Comm`] operations. Local failures (a file
//! that will not open, a CRC that does not match, a `register` callback that
//! refuses) are latched while the member keeps its place in the schedule, and
//! every phase ends with an agreement (one allgather) after which every member
//! returns an error of the same [`FailureKind`]: the failing member its own
//! typed error, the others [`ApplyError::Peer`] naming it. A loss pattern the
//! scheme cannot rebuild is detected from the `lost` vector alone, so every
//! member returns [`ApplyError::Unrecoverable`] without communicating.
//!
//! # What a member lost
//! A [`MemberLoss`] tells its own files from the redundancy data it holds.
//! PARTNER restores each from its own source: a member's own files from the
//! copies its right neighbour holds, the copies a member held from their
//! owner, its left neighbour. So damage to two neighbours' own files is
//! rebuilt (each one's copies are intact on the other side), while a member
//! that lost its own files and whose holder lost the copies is not. XOR and
//! RS rebuild a member whole.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::comm::{Comm, CommError};
use crate::kvtree::file::{self as kvfile, HEADER_LEN};
use crate::kvtree::KvTree;
use crate::records::xor_header::xor_file_name;
use crate::records::{Dataset, FileType, Meta, Node, Record, RecordError, XorHeader, XorMember};
use crate::storage::mapped::MAP_MIN_BYTES;

use super::gf256;
use super::logical::LogicalFile;
use super::rs::{RsSet, Slot};
use super::xor;
use super::RedundancyError;

#[cfg(test)]
mod tests;

/// A redundancy scheme (`SCR_COPY_TYPE`, the TYPE of a redundancy
/// descriptor; `SET_FAILURES` for RS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// SINGLE: no redundancy; any lost member loses the dataset.
    Single,
    /// PARTNER: a full copy of each member's files on its right neighbour.
    Partner,
    /// XOR: one XOR chunk per member; survives one lost member per set.
    Xor,
    /// RS: k parity chunks per member; survives any k lost members per set.
    Rs {
        /// Parity chunks per member (SET_FAILURES).
        k: usize,
    },
}

/// One file of a member: where it is and what was recorded about it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    /// Real path to open.
    pub path: PathBuf,
    /// Its meta: `file` is the logical path recorded in filemaps;
    /// `size_bytes` and `crc32` are set.
    pub meta: Meta,
}

/// A member's application files, in logical-concatenation order (the order
/// `scr_read_pad_n()` concatenates them in).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberFiles {
    /// The files.
    pub files: Vec<FileEntry>,
}

/// One redundancy set as seen by one member (the set part of SCR's
/// redundancy descriptor: its communicator, group id and group map).
pub struct SetInfo<'a> {
    /// The set communicator: rank in it = group rank.
    pub comm: &'a dyn Comm,
    /// Set id, the minimum world rank of the set (for file names).
    pub group_id: i64,
    /// World rank of each member, by group rank.
    pub world_ranks: Vec<i64>,
    /// Size of `scr_comm_world` (RANKS in the headers).
    pub world_size: u64,
    /// The dataset being protected (DSET in the headers).
    pub dataset: Dataset,
    /// The scheme to apply.
    pub scheme: Scheme,
    /// Bytes per pipelined piece (SCR_MPI_BUF_SIZE, default 1 MiB).
    pub piece_bytes: usize,
}

/// Called before any file is created so the caller can record it in its
/// filemap first (an entry may outlive its file, never the reverse).
/// Arguments: the world rank the file belongs to, its real path, its meta.
pub type Register<'r> = dyn FnMut(i64, &Path, &Meta) -> Result<(), ApplyError> + 'r;

/// What a rebuild re-created on a member: what it lost (empty on members
/// that lost nothing).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rebuilt {
    /// The member's application files, meta as recorded at encode time
    /// (when it lost them).
    pub app_files: Vec<FileEntry>,
    /// The member's redundancy files, re-created (when it lost them).
    pub redundancy_files: Vec<FileEntry>,
}

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

    fn code(self) -> u8 {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as u8
    }

    fn from_code(code: u8) -> FailureKind {
        Self::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(FailureKind::Inconsistent)
    }
}

fn at(offset: &Option<u64>) -> String {
    offset.map_or(String::new(), |o| format!(" at offset {o}"))
}

/// Why applying or rebuilding redundancy failed. Every variant names the
/// world rank where it happened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The arguments do not describe a usable set.
    #[error("rank {world_rank}: {detail}")]
    Input {
        /// Where.
        world_rank: i64,
        /// What is wrong.
        detail: String,
    },
    /// Members of the set lost more than its scheme can rebuild.
    #[error(
        "set {group_id}: members {lost:?} lost files and {scheme:?} cannot rebuild those of \
         members {cannot:?}; the dataset must come from another cache level or the prefix"
    )]
    Unrecoverable {
        /// The set id.
        group_id: i64,
        /// The set's scheme.
        scheme: Scheme,
        /// Group ranks of the members that lost anything.
        lost: Vec<usize>,
        /// Group ranks of the members whose data cannot be rebuilt
        /// ([`unrecoverable_members`]).
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
    #[error("rank {world_rank}: {detail}")]
    Inconsistent {
        /// Where.
        world_rank: i64,
        /// What disagrees.
        detail: String,
    },
    /// A redundancy file's header could not be read.
    #[error("rank {world_rank}: {source}")]
    Header {
        /// Where.
        world_rank: i64,
        /// The record error (names the file).
        source: RecordError,
    },
    /// The register callback refused a file (returned by callers' callbacks).
    #[error("rank {world_rank}: could not record {} in the filemap: {detail}", path.display())]
    Register {
        /// Where.
        world_rank: i64,
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
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
    /// Another member of the set failed; this member stopped with it.
    #[error("member {member} (rank {world_rank}) of the set failed: {detail}")]
    Peer {
        /// Group rank of the failed member.
        member: usize,
        /// Its world rank.
        world_rank: i64,
        /// The kind of its error.
        kind: FailureKind,
        /// Its error message.
        detail: String,
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
}

/// What one member of a set lost, as found at restart (a file missing, of
/// the wrong size, or failing its CRC32): its own application files, the
/// redundancy data it holds for others, or both.
///
/// PARTNER keeps the two apart: a member holds copies of its left
/// neighbour's files, so a damaged own file does not cost the copies it
/// holds, and a damaged copy does not cost its own files. XOR and RS compute
/// a member's parity from everything, so for them any loss is a whole loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct MemberLoss {
    /// Some of the member's own application files are missing or damaged.
    pub own: bool,
    /// Some of the redundancy data it holds is missing or damaged (PARTNER:
    /// the copies of its left neighbour's files; XOR/RS: its parity file).
    pub held: bool,
}

impl MemberLoss {
    /// Nothing lost.
    pub const NONE: MemberLoss = MemberLoss {
        own: false,
        held: false,
    };
    /// Only its own application files.
    pub const OWN: MemberLoss = MemberLoss {
        own: true,
        held: false,
    };
    /// Only the redundancy data it holds.
    pub const HELD: MemberLoss = MemberLoss {
        own: false,
        held: true,
    };
    /// Everything: a lost node, a missing rank, a rank with no record.
    pub const ALL: MemberLoss = MemberLoss {
        own: true,
        held: true,
    };

    /// [`MemberLoss::ALL`] when `lost`, else [`MemberLoss::NONE`] (a member
    /// that is there or not at all).
    pub const fn whole(lost: bool) -> MemberLoss {
        if lost {
            MemberLoss::ALL
        } else {
            MemberLoss::NONE
        }
    }

    /// Whether anything was lost.
    pub const fn any(self) -> bool {
        self.own || self.held
    }

    /// Whether both its own files and what it holds were lost.
    pub const fn is_whole(self) -> bool {
        self.own && self.held
    }

    /// How `scheme` sees this loss: PARTNER as it is; the others rebuild a
    /// member whole, so any loss is [`MemberLoss::ALL`].
    pub const fn as_seen_by(self, scheme: &Scheme) -> MemberLoss {
        match scheme {
            Scheme::Partner => self,
            _ => MemberLoss::whole(self.any()),
        }
    }
}

/// The group rank holding the PARTNER copies of `member`'s files in a set
/// of `n` (its right neighbour; `n` ≥ 1).
pub const fn partner_holder(member: usize, n: usize) -> usize {
    (member + 1) % n
}

/// The members of a set whose lost data `scheme` cannot rebuild, ascending
/// (empty: the set is recoverable; the check at the start of
/// `scr_reddesc_recover()`). SINGLE rebuilds nothing; PARTNER restores a
/// member's own files iff the member holding their copies
/// ([`partner_holder`]) did not lose what it holds, and re-creates copies a
/// member lost from their owner (whose own files are then intact, or the
/// owner itself is listed); XOR rebuilds one lost member, RS any k — for
/// them a member that lost anything is lost whole.
pub fn unrecoverable_members(scheme: &Scheme, lost: &[MemberLoss]) -> Vec<usize> {
    let n = lost.len();
    let any: Vec<usize> = (0..n).filter(|&i| lost[i].any()).collect();
    if any.is_empty() {
        return any;
    }
    let tolerated = match *scheme {
        Scheme::Single => false,
        Scheme::Partner => {
            if n < 2 {
                false
            } else {
                return (0..n)
                    .filter(|&i| lost[i].own && lost[partner_holder(i, n)].held)
                    .collect();
            }
        }
        Scheme::Xor => n >= 2 && any.len() <= 1,
        Scheme::Rs { k } => n > k && n <= 256 && any.len() <= k,
    };
    if tolerated {
        Vec::new()
    } else {
        any
    }
}

/// Whether a set whose members lost `lost[i]` can be rebuilt: no member is
/// in [`unrecoverable_members`].
pub fn recoverable(scheme: &Scheme, lost: &[MemberLoss]) -> bool {
    unrecoverable_members(scheme, lost).is_empty()
}

/// The name of a PARTNER copy of file `index` (FILE = `logical`) of world
/// rank `owner`: `<basename>.partner.<owner>.<index>`.
pub fn partner_copy_name(logical: &str, owner: i64, index: usize) -> String {
    format!("{}.partner.{owner}.{index}", basename(logical))
}

/// The name of an RS redundancy file: `<grank+1>_of_<gsize>_in_<gid>.rs`.
pub fn rs_file_name(group_rank: u64, group_size: u64, group_id: i64) -> String {
    format!("{}_of_{group_size}_in_{group_id}.rs", group_rank + 1)
}

/// The world rank owning the PARTNER copies this member holds: its left
/// neighbour's.
pub fn partner_owner(set: &SetInfo) -> Option<i64> {
    let n = set.comm.size();
    (n > 0)
        .then(|| set.world_ranks.get((set.comm.rank() + n - 1) % n).copied())
        .flatten()
}

fn basename(logical: &str) -> String {
    Path::new(logical)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string())
}

/// What [`encode`] produced for this member.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Encoded {
    /// CRC32 of each of this member's application files, in order: computed
    /// by the encode from the same read that feeds the scheme, so the caller
    /// records them instead of reading the files again.
    pub app_crcs: Vec<u32>,
    /// This member's redundancy files with TYPE, SIZE, CRC32 and
    /// COMPLETE = 1 (PARTNER: the copies of the left neighbour's files,
    /// owner [`partner_owner`], in its file order; SINGLE: none).
    pub redundancy: Vec<FileEntry>,
}

/// Apply the set's scheme at `SCR_Complete_output` (collective over
/// `set.comm` except for SINGLE, which only computes the CRCs;
/// `scr_reddesc_apply()`): compute the CRC32 of this member's files (a file
/// whose meta already records one must match it), then write this
/// member's redundancy files into `dir`. Each application file is read
/// once: it is mapped, its CRC computed from the mapping (the redundancy
/// headers, written before the parity, record it), and the scheme reads the
/// same pages.
pub fn encode(
    set: &SetInfo,
    mine: &MemberFiles,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Encoded, ApplyError> {
    let ctx = Ctx::new(set)?;
    // Fault injection: a crash while redundancy is applied. An injected
    // error joins the schemes' first agreement, so the set fails together.
    if let Err(e) = crate::fault_point!("redundancy.encode", rank = ctx.world_rank as u32) {
        let e = ctx.io_err(dir, None)(e.into());
        return match set.scheme {
            Scheme::Single => Err(e),
            _ => ctx.agree(Err::<(), _>(e), |_| Vec::new()).map(|_| Encoded {
                app_crcs: Vec::new(),
                redundancy: Vec::new(),
            }),
        };
    }
    match set.scheme {
        Scheme::Single => {
            let (_, _, metas) = open_checked(&ctx, &mine.files)?;
            Ok(Encoded {
                app_crcs: crcs_of(&metas),
                redundancy: Vec::new(),
            })
        }
        Scheme::Partner => encode_partner(&ctx, mine, dir, register),
        Scheme::Xor => encode_coded(&ctx, 1, mine, dir, register),
        Scheme::Rs { k } => encode_coded(&ctx, k, mine, dir, register),
    }
}

/// Rebuild what the set's members lost at restart (collective over
/// `set.comm`; `scr_reddesc_recover()`). Every member passes the same
/// `lost`. A member passes its application files (`mine`) unless it lost
/// them and its redundancy files (`my_redundancy`) unless it lost them; for
/// XOR and RS a member that lost anything is lost whole
/// ([`MemberLoss::as_seen_by`]) and passes neither. It gets back what it
/// lost: its application files (in `dir`, named after the basename of their
/// recorded FILE) and its redundancy files, each checked against the CRC32
/// recorded at encode as its bytes arrive (a mismatch fails the rebuild with
/// [`ApplyError::Crc`] and the file is removed, never kept with wrong
/// bytes). A loss the scheme cannot rebuild returns
/// [`ApplyError::Unrecoverable`] on every member without communicating.
pub fn rebuild(
    set: &SetInfo,
    lost: &[MemberLoss],
    mine: Option<&MemberFiles>,
    my_redundancy: Option<&[FileEntry]>,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Rebuilt, ApplyError> {
    let ctx = Ctx::new(set)?;
    if lost.len() != ctx.n {
        return Err(ctx.input(format!(
            "the lost vector has {} entries but the set has {} members",
            lost.len(),
            ctx.n
        )));
    }
    let lost: Vec<MemberLoss> = lost.iter().map(|l| l.as_seen_by(&set.scheme)).collect();
    let cannot = unrecoverable_members(&set.scheme, &lost);
    if !cannot.is_empty() {
        return Err(ApplyError::Unrecoverable {
            group_id: set.group_id,
            scheme: set.scheme,
            lost: (0..ctx.n).filter(|&i| lost[i].any()).collect(),
            cannot,
        });
    }
    if !lost.iter().any(|l| l.any()) {
        return Ok(Rebuilt::default());
    }
    match set.scheme {
        Scheme::Single => Ok(Rebuilt::default()),
        Scheme::Partner => rebuild_partner(&ctx, &lost, mine, my_redundancy, dir, register),
        Scheme::Xor | Scheme::Rs { .. } => {
            let k = match set.scheme {
                Scheme::Rs { k } => k,
                _ => 1,
            };
            let whole: Vec<bool> = lost.iter().map(|l| l.any()).collect();
            let survivor = if whole[ctx.me] {
                None
            } else {
                match (mine, my_redundancy) {
                    (Some(m), Some(r)) => Some((m, r)),
                    _ => {
                        // Still take part in the agreement so nobody waits for us.
                        let e = ctx.input(
                            "a survivor must pass its application and redundancy files".to_string(),
                        );
                        return ctx
                            .agree(Err::<(), _>(e), |_| Vec::new())
                            .map(|_| Rebuilt::default());
                    }
                }
            };
            rebuild_coded(&ctx, k, &whole, survivor, dir, register)
        }
    }
}

/// The set as this member sees it, checked once.
struct Ctx<'a> {
    set: &'a SetInfo<'a>,
    n: usize,
    me: usize,
    world_rank: i64,
}

impl<'a> Ctx<'a> {
    fn new(set: &'a SetInfo<'a>) -> Result<Self, ApplyError> {
        let n = set.comm.size();
        let me = set.comm.rank();
        let world_rank = set.world_ranks.get(me).copied().unwrap_or(-1);
        let ctx = Ctx {
            set,
            n,
            me,
            world_rank,
        };
        if set.world_ranks.len() != n {
            return Err(ctx.input(format!(
                "world_ranks lists {} members but the set communicator has {n}",
                set.world_ranks.len()
            )));
        }
        if set.piece_bytes == 0 {
            return Err(ctx.input("the piece size (SCR_MPI_BUF_SIZE) must be at least 1".into()));
        }
        let ok = match set.scheme {
            Scheme::Single => true,
            Scheme::Partner | Scheme::Xor => n >= 2,
            Scheme::Rs { k } => k >= 1 && n > k && n <= 256,
        };
        if !ok {
            return Err(ctx.input(format!(
                "a set of {n} members cannot use {:?}: PARTNER and XOR need 2 members, \
                 RS k needs k+1..=256",
                set.scheme
            )));
        }
        assert!(me < n, "a communicator rank is below its size");
        Ok(ctx)
    }

    fn left(&self, d: usize) -> usize {
        (self.me + self.n - d % self.n) % self.n
    }

    fn right(&self, d: usize) -> usize {
        (self.me + d) % self.n
    }

    fn input(&self, detail: String) -> ApplyError {
        ApplyError::Input {
            world_rank: self.world_rank,
            detail,
        }
    }

    fn inconsistent(&self, detail: String) -> ApplyError {
        ApplyError::Inconsistent {
            world_rank: self.world_rank,
            detail,
        }
    }

    fn comm_err(&self) -> impl Fn(CommError) -> ApplyError + '_ {
        move |source| ApplyError::Comm {
            world_rank: self.world_rank,
            source,
        }
    }

    fn io_err<'p>(
        &self,
        path: &'p Path,
        offset: Option<u64>,
    ) -> impl FnOnce(io::Error) -> ApplyError + 'p {
        let world_rank = self.world_rank;
        move |source| ApplyError::Io {
            world_rank,
            path: path.to_path_buf(),
            offset,
            source,
        }
    }

    fn red_err(&self, offset: Option<u64>) -> impl Fn(RedundancyError) -> ApplyError + '_ {
        move |e| match e {
            RedundancyError::Io { path, source } => ApplyError::Io {
                world_rank: self.world_rank,
                path,
                offset,
                source,
            },
            source => ApplyError::Redundancy {
                world_rank: self.world_rank,
                source,
            },
        }
    }

    /// One allgather that both shares each member's `payload` and agrees on
    /// success: if any member failed, every member returns an error of the
    /// kind of the lowest failed member's (its own error there, `Peer`
    /// elsewhere).
    fn agree<T>(
        &self,
        local: Result<T, ApplyError>,
        payload: impl FnOnce(&T) -> Vec<u8>,
    ) -> Result<(T, Vec<Vec<u8>>), ApplyError> {
        let msg = match &local {
            Ok(v) => {
                let mut m = vec![0u8];
                m.extend_from_slice(&payload(v));
                m
            }
            Err(e) => {
                let mut m = vec![1u8, e.kind().code()];
                m.extend_from_slice(e.to_string().as_bytes());
                m
            }
        };
        let all = self
            .set
            .comm
            .allgather_bytes(&msg)
            .map_err(self.comm_err())?;
        if all.len() != self.n {
            return Err(self.inconsistent(format!(
                "allgather returned {} contributions for {} members",
                all.len(),
                self.n
            )));
        }
        let failed = all.iter().position(|m| m.first() != Some(&0));
        match (failed, local) {
            (Some(f), Err(e)) if f == self.me => Err(e),
            (Some(f), _) => {
                let m = &all[f];
                Err(ApplyError::Peer {
                    member: f,
                    world_rank: self.set.world_ranks[f],
                    kind: FailureKind::from_code(m.get(1).copied().unwrap_or(255)),
                    detail: String::from_utf8_lossy(m.get(2..).unwrap_or(&[])).into_owned(),
                })
            }
            (None, Ok(v)) => Ok((v, all.into_iter().map(|m| m[1..].to_vec()).collect())),
            (None, Err(e)) => Err(e),
        }
    }

    /// Register `path` (owned by `owner`) before it is created; the first
    /// refusal is latched.
    fn register(
        &self,
        register: &mut Register<'_>,
        owner: i64,
        path: &Path,
        meta: &Meta,
        latched: &mut Option<ApplyError>,
    ) {
        if latched.is_none() {
            if let Err(e) = register(owner, path, meta) {
                *latched = Some(e);
            }
        }
    }
}

fn latch<T>(latched: &mut Option<ApplyError>, r: Result<T, ApplyError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            if latched.is_none() {
                *latched = Some(e);
            }
            None
        }
    }
}

/// Sizes of a member's files, from their meta (SIZE must be recorded).
fn sizes(ctx: &Ctx, files: &[FileEntry]) -> Result<Vec<u64>, ApplyError> {
    files
        .iter()
        .map(|f| {
            if f.meta.file.is_none() {
                return Err(ctx.input(format!("{}: its meta records no FILE", f.path.display())));
            }
            f.meta
                .size_bytes
                .ok_or_else(|| ctx.input(format!("{}: its meta records no SIZE", f.path.display())))
        })
        .collect()
}

fn open_logical(ctx: &Ctx, files: &[FileEntry]) -> Result<LogicalFile, ApplyError> {
    let sizes = sizes(ctx, files)?;
    let list: Vec<(&Path, u64)> = files.iter().map(|f| f.path.as_path()).zip(sizes).collect();
    LogicalFile::open(&list).map_err(ctx.red_err(None))
}

/// Opens a member's files mapped and computes each one's CRC32, checked
/// against the recorded one where there is one. Returns the sizes, the
/// logical file and the metas with CRC set.
fn open_checked(
    ctx: &Ctx,
    files: &[FileEntry],
) -> Result<(Vec<u64>, LogicalFile, Vec<Meta>), ApplyError> {
    let sizes = sizes(ctx, files)?;
    let list: Vec<(&Path, u64)> = files
        .iter()
        .map(|f| f.path.as_path())
        .zip(sizes.iter().copied())
        .collect();
    let lf = LogicalFile::open_mapped(&list, MAP_MIN_BYTES).map_err(ctx.red_err(None))?;
    let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let computed = lf.crcs(ctx.set.piece_bytes).map_err(ctx.red_err(None))?;
    let crcs = check_crcs(ctx, &paths, &metas(files), Some(computed))?;
    let metas = files
        .iter()
        .zip(crcs)
        .map(|(f, crc)| Meta {
            crc32: Some(crc),
            ..f.meta.clone()
        })
        .collect();
    Ok((sizes, lf, metas))
}

fn crcs_of(metas: &[Meta]) -> Vec<u32> {
    metas.iter().map(|m| m.crc32.unwrap_or(0)).collect()
}

fn member_tree(rank: i64, files: &[Meta]) -> KvTree {
    XorMember {
        rank,
        files: files.to_vec(),
    }
    .to_tree()
}

fn member_from_tree(tree: &KvTree) -> Result<XorMember, RecordError> {
    XorMember::from_node(&Node::root("member meta", tree))
}

fn unpack_member(ctx: &Ctx, bytes: &[u8], member: usize) -> Result<XorMember, ApplyError> {
    let tree = KvTree::unpack_exact(bytes).map_err(|e| {
        ctx.inconsistent(format!("member {member} sent an unreadable file list: {e}"))
    })?;
    member_from_tree(&tree).map_err(|source| ApplyError::Header {
        world_rank: ctx.world_rank,
        source,
    })
}

/// [`unpack_member`], also checking it names the member's world rank.
fn checked_member(ctx: &Ctx, bytes: &[u8], member: usize) -> Result<XorMember, ApplyError> {
    let m = unpack_member(ctx, bytes, member)?;
    let want = ctx.set.world_ranks[member];
    if m.rank != want {
        return Err(ctx.inconsistent(format!(
            "member {member} lists the files of rank {} but the set map says rank {want}",
            m.rank
        )));
    }
    Ok(m)
}

fn metas(files: &[FileEntry]) -> Vec<Meta> {
    files.iter().map(|f| f.meta.clone()).collect()
}

fn logical_len(files: &[Meta]) -> u64 {
    files
        .iter()
        .map(|m| m.size_bytes.unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}

/// CRC32 of each file of a logical file, computed from pieces that arrive
/// in order within each chunk but chunk by chunk in any order: one hasher
/// per (file ∩ chunk) segment, joined per file with `crc32fast`'s combine.
struct SegmentCrc {
    /// (start, end, file) of each segment, ascending and contiguous.
    segs: Vec<(u64, u64, usize)>,
    filled: Vec<u64>,
    hashers: Vec<crc32fast::Hasher>,
    files: usize,
    len: u64,
}

impl SegmentCrc {
    fn new(sizes: &[u64], chunk: u64) -> Self {
        let mut segs = Vec::new();
        let mut start = 0u64;
        for (file, &size) in sizes.iter().enumerate() {
            let end = start + size;
            let mut pos = start;
            while pos < end {
                let cut = pos
                    .checked_div(chunk)
                    .map_or(end, |c| ((c + 1) * chunk).min(end));
                segs.push((pos, cut, file));
                pos = cut;
            }
            start = end;
        }
        let count = segs.len();
        SegmentCrc {
            segs,
            filled: vec![0; count],
            hashers: vec![crc32fast::Hasher::new(); count],
            files: sizes.len(),
            len: start,
        }
    }

    /// Adds logical bytes `[offset, offset + bytes.len())` (padding ignored).
    fn update(&mut self, offset: u64, bytes: &[u8]) {
        let end = (offset + bytes.len() as u64).min(self.len);
        let mut pos = offset;
        let mut i = self.segs.partition_point(|s| s.1 <= offset);
        while pos < end {
            let (s, e, _) = self.segs[i];
            // Pieces of one chunk arrive in order, so each segment fills
            // front to back; anything else is a scheduling bug.
            assert_eq!(s + self.filled[i], pos, "segment CRC fed out of order");
            let take = e.min(end) - pos;
            let from = (pos - offset) as usize;
            self.hashers[i].update(&bytes[from..from + take as usize]);
            self.filled[i] += take;
            pos += take;
            i += 1;
        }
    }

    /// The CRC32 of each file, or `None` if some byte was never fed.
    fn finish(self) -> Option<Vec<u32>> {
        let complete = self
            .segs
            .iter()
            .zip(&self.filled)
            .all(|((s, e, _), f)| s + f == *e);
        if !complete {
            return None;
        }
        let mut out = vec![crc32fast::Hasher::new(); self.files];
        for ((_, _, file), h) in self.segs.iter().zip(&self.hashers) {
            out[*file].combine(h);
        }
        Some(out.into_iter().map(|h| h.finalize()).collect())
    }
}

/// Compares computed CRCs with the recorded ones (files without a recorded
/// CRC are taken as they are).
fn check_crcs(
    ctx: &Ctx,
    paths: &[PathBuf],
    recorded: &[Meta],
    crcs: Option<Vec<u32>>,
) -> Result<Vec<u32>, ApplyError> {
    let crcs = crcs.ok_or_else(|| {
        ctx.inconsistent("internal: not every byte of the files was checksummed".into())
    })?;
    assert_eq!(crcs.len(), recorded.len());
    for ((path, meta), &actual) in paths.iter().zip(recorded).zip(&crcs) {
        if let Some(expected) = meta.crc32 {
            if expected != actual {
                return Err(ApplyError::Crc {
                    world_rank: ctx.world_rank,
                    path: path.clone(),
                    expected,
                    actual,
                });
            }
        }
    }
    Ok(crcs)
}

/// Reads every file whole and checks size and CRC32 against its meta
/// (a survivor's check before it lends its data to a rebuild).
fn verify_files(ctx: &Ctx, files: &[FileEntry], buf: &mut Vec<u8>) -> Result<(), ApplyError> {
    buf.resize(ctx.set.piece_bytes.max(1), 0);
    for f in files {
        let file = File::open(&f.path).map_err(ctx.io_err(&f.path, None))?;
        let len = file.metadata().map_err(ctx.io_err(&f.path, None))?.len();
        if let Some(size) = f.meta.size_bytes {
            if size != len {
                return Err(ctx.inconsistent(format!(
                    "{}: file is {len} bytes but its meta records {size}",
                    f.path.display()
                )));
            }
        }
        let Some(expected) = f.meta.crc32 else {
            continue;
        };
        let mut h = crc32fast::Hasher::new();
        let mut off = 0u64;
        while off < len {
            let take = (len - off).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..take], off)
                .map_err(ctx.io_err(&f.path, Some(off)))?;
            h.update(&buf[..take]);
            off += take as u64;
        }
        let actual = h.finalize();
        if actual != expected {
            return Err(ApplyError::Crc {
                world_rank: ctx.world_rank,
                path: f.path.clone(),
                expected,
                actual,
            });
        }
    }
    Ok(())
}

fn sync_logical(ctx: &Ctx, lf: &LogicalFile) -> Result<(), ApplyError> {
    lf.sync_all().map_err(ctx.red_err(None))
}

// ---------------------------------------------------------------- PARTNER

/// Streams one logical file to `dest` while receiving another from `src`,
/// piece by piece (`scr_reddesc_apply_partner()`'s `MPI_Sendrecv` loop).
/// Both sides know both lengths, so the numbers of messages match. After a
/// local failure the member keeps sending (zeros) and receiving so its
/// neighbours finish; the failure is reported at the next agreement.
/// Pieces are sent straight from the sender's mapping when it has one.
#[allow(clippy::too_many_arguments)]
fn stream(
    ctx: &Ctx,
    send: Option<(usize, Option<&LogicalFile>, u64)>,
    recv: Option<(usize, Option<&LogicalFile>, u64)>,
    mut recv_crc: Option<&mut SegmentCrc>,
    latched: &mut Option<ApplyError>,
    out: &mut Vec<u8>,
    inc: &mut Vec<u8>,
) -> Result<(), ApplyError> {
    let piece = ctx.set.piece_bytes as u64;
    let send_len = send.map_or(0, |s| s.2);
    let recv_len = recv.map_or(0, |r| r.2);
    let steps = send_len.div_ceil(piece).max(recv_len.div_ceil(piece));
    let mut zeros = Vec::new();
    for step in 0..steps {
        let off = step * piece;
        let mut to = None;
        if let Some((dest, lf, len)) = send {
            if off < len {
                let take = (len - off).min(piece) as usize;
                let mut bytes = None;
                if let (Some(lf), true) = (lf, latched.is_none()) {
                    let r = lf.bytes(off, take, out).map_err(ctx.red_err(Some(off)));
                    bytes = latch(latched, r);
                }
                let bytes = bytes.unwrap_or_else(|| {
                    zeros.resize(take, 0);
                    &zeros[..]
                });
                to = Some((dest, bytes));
            }
        }
        let from = recv.and_then(|(src, _, len)| (off < len).then_some(src));
        ctx.set
            .comm
            .sendrecv_bytes(to, from, inc)
            .map_err(ctx.comm_err())?;
        if let Some((_, lf, len)) = recv {
            if off < len {
                let want = (len - off).min(piece) as usize;
                if inc.len() != want {
                    return Err(ctx.inconsistent(format!(
                        "expected a piece of {want} bytes at offset {off}, received {}",
                        inc.len()
                    )));
                }
                if let (Some(lf), true) = (lf, latched.is_none()) {
                    let r = lf.write_at(off, inc).map_err(ctx.red_err(Some(off)));
                    if latch(latched, r).is_some() {
                        if let Some(c) = recv_crc.as_deref_mut() {
                            c.update(off, inc);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Receives `owner`'s files (metas `files`) from `src` into `paths`,
/// registering each first and checking each CRC; used by both PARTNER encode
/// (copies) and rebuild (own files and copies).
#[allow(clippy::too_many_arguments)]
fn receive_files(
    ctx: &Ctx,
    owner: i64,
    files: &[Meta],
    paths: &[PathBuf],
    src: usize,
    send: Option<(usize, Option<&LogicalFile>, u64)>,
    register: &mut Register<'_>,
    latched: &mut Option<ApplyError>,
    bufs: (&mut Vec<u8>, &mut Vec<u8>),
) -> Result<Vec<FileEntry>, ApplyError> {
    assert_eq!(files.len(), paths.len());
    let sizes: Vec<u64> = files.iter().map(|m| m.size_bytes.unwrap_or(0)).collect();
    for (path, meta) in paths.iter().zip(files) {
        let mut reg = meta.clone();
        reg.complete = Some(false);
        ctx.register(register, owner, path, &reg, latched);
    }
    let lf = if latched.is_none() {
        let list: Vec<(&Path, u64)> = paths
            .iter()
            .map(PathBuf::as_path)
            .zip(sizes.clone())
            .collect();
        latch(
            latched,
            LogicalFile::create(&list).map_err(ctx.red_err(None)),
        )
    } else {
        None
    };
    let total: u64 = sizes.iter().sum();
    let mut crc = SegmentCrc::new(&sizes, total);
    stream(
        ctx,
        send,
        Some((src, lf.as_ref(), total)),
        Some(&mut crc),
        latched,
        bufs.0,
        bufs.1,
    )?;
    if latched.is_some() {
        return Ok(Vec::new());
    }
    let done = check_crcs(ctx, paths, files, crc.finish()).and_then(|crcs| {
        if let Some(lf) = &lf {
            sync_logical(ctx, lf)?;
        }
        Ok(crcs)
    });
    if done.is_err() {
        // Never leave bytes behind that failed their check: the entries
        // (registered incomplete) may outlive the files, not the reverse.
        drop(lf);
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    }
    let crcs = latch(latched, done).unwrap_or_default();
    Ok(paths
        .iter()
        .zip(files)
        .zip(crcs)
        .map(|((path, meta), crc)| FileEntry {
            path: path.clone(),
            meta: Meta {
                crc32: Some(crc),
                complete: Some(true),
                ..meta.clone()
            },
        })
        .collect())
}

fn copy_metas(owner_files: &[Meta]) -> Vec<Meta> {
    owner_files
        .iter()
        .map(|m| Meta {
            file_type: Some(FileType::Partner),
            ..m.clone()
        })
        .collect()
}

fn copy_paths(dir: &Path, owner: i64, files: &[Meta]) -> Vec<PathBuf> {
    files
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let logical = m.file.clone().unwrap_or_else(|| format!("file.{i}"));
            dir.join(partner_copy_name(&logical, owner, i))
        })
        .collect()
}

/// `scr_reddesc_apply_partner()`: send a copy of every file to the right
/// neighbour while storing the left neighbour's.
fn encode_partner(
    ctx: &Ctx,
    mine: &MemberFiles,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Encoded, ApplyError> {
    let prep = open_checked(ctx, &mine.files);
    let ((my_sizes, lf, my_metas), all) =
        ctx.agree(prep, |(_, _, m)| member_tree(ctx.world_rank, m).pack())?;
    let (left, right) = (ctx.left(1), ctx.right(1));
    // Every member checks every list, so a bad one stops all alike.
    let mut members = all
        .iter()
        .enumerate()
        .map(|(m, b)| checked_member(ctx, b, m))
        .collect::<Result<Vec<_>, _>>()?;
    let left_member = std::mem::replace(
        &mut members[left],
        XorMember {
            rank: 0,
            files: Vec::new(),
        },
    );
    let owner = ctx.set.world_ranks[left];
    let copies = copy_metas(&left_member.files);
    let paths = copy_paths(dir, owner, &copies);
    let mut latched = None;
    let my_len: u64 = my_sizes.iter().sum();
    let (mut out, mut inc) = (Vec::new(), Vec::new());
    let entries = receive_files(
        ctx,
        owner,
        &copies,
        &paths,
        left,
        Some((right, Some(&lf), my_len)),
        register,
        &mut latched,
        (&mut out, &mut inc),
    )?;
    ctx.agree(latched.map_or(Ok(()), Err), |_| Vec::new())?;
    assert_eq!(entries.len(), left_member.files.len());
    Ok(Encoded {
        app_crcs: crcs_of(&my_metas),
        redundancy: entries,
    })
}

/// `scr_reddesc_recover_partner()`, per kind of loss: a member that lost
/// its own files gets them back from the copies its right neighbour holds
/// (phase A, right to left); a member that lost the copies it held gets
/// them again from their owner, its left neighbour (phase B, left to right).
/// [`unrecoverable_members`] has ruled out a holder without its copies, so
/// the owner sending in phase B always has its own files intact. Arriving
/// bytes are checked against the CRC32 each list records.
fn rebuild_partner(
    ctx: &Ctx,
    lost: &[MemberLoss],
    mine: Option<&MemberFiles>,
    red: Option<&[FileEntry]>,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Rebuilt, ApplyError> {
    let n = ctx.n;
    let (left, right) = (ctx.left(1), ctx.right(1));
    let me = lost[ctx.me];
    // What this member lends: the copies it holds when their owner (its
    // left neighbour) lost its own files, its own files when its right
    // neighbour lost the copies of them.
    let (send_copies, send_own) = (lost[left].own, lost[right].held);
    let copies_in = |red: &[FileEntry]| -> Vec<FileEntry> {
        red.iter()
            .filter(|f| f.meta.file_type == Some(FileType::Partner))
            .cloned()
            .collect()
    };
    let own = if me.own { None } else { mine };
    let held = if me.held { None } else { red.map(copies_in) };
    let prep = (|| {
        if !me.own && own.is_none() {
            return Err(ctx.input("a member that kept its own files must pass them".into()));
        }
        if !me.held && held.is_none() {
            return Err(ctx.input(
                "a member that kept the copies it holds must pass its redundancy files".into(),
            ));
        }
        if (send_own && me.own) || (send_copies && me.held) {
            // unrecoverable_members excludes both; a typed error, not a panic.
            return Err(ctx.inconsistent(format!(
                "member {} would lend files it lost ({me:?})",
                ctx.me
            )));
        }
        let own_lf = match own {
            Some(m) if send_own => Some(open_logical(ctx, &m.files)?),
            _ => None,
        };
        let copy_lf = match &held {
            Some(c) if send_copies => Some(open_logical(ctx, c)?),
            _ => None,
        };
        Ok((own_lf, copy_lf))
    })();
    // Each member lists what it still has: SELF (its own files) and COPY
    // (the copies it holds, under their owner's rank).
    let mut payload = KvTree::new();
    if let Some(m) = own {
        payload.set("SELF", member_tree(ctx.world_rank, &metas(&m.files)));
    }
    if let Some(c) = &held {
        payload.set("COPY", member_tree(ctx.set.world_ranks[left], &metas(c)));
    }
    let ((own_lf, copy_lf), all) = ctx.agree(prep, |_| payload.pack())?;
    let listed = |member: usize, key: &str, want: i64| -> Result<Vec<Meta>, ApplyError> {
        let tree = KvTree::unpack_exact(&all[member])
            .map_err(|e| ctx.inconsistent(format!("member {member} sent unreadable lists: {e}")))?;
        let sub = tree
            .get(key)
            .ok_or_else(|| ctx.inconsistent(format!("member {member} sent no {key} list")))?;
        let m = member_from_tree(sub).map_err(|source| ApplyError::Header {
            world_rank: ctx.world_rank,
            source,
        })?;
        if m.rank != want {
            return Err(ctx.inconsistent(format!(
                "member {member}'s {key} list names rank {} (expected {want})",
                m.rank
            )));
        }
        Ok(m.files)
    };
    // Every member checks the lists every rebuild needs the same way before
    // any data moves, so a bad list stops the whole set alike.
    let mut own_lists = vec![Vec::new(); n];
    let mut left_lists = vec![Vec::new(); n];
    for l in 0..n {
        let w = ctx.set.world_ranks[l];
        if lost[l].own {
            own_lists[l] = listed(partner_holder(l, n), "COPY", w)?;
        }
        if lost[l].held {
            let owner = (l + n - 1) % n;
            left_lists[l] = listed(owner, "SELF", ctx.set.world_ranks[owner])?;
        }
    }
    let mut latched = None;
    let mut rebuilt = Rebuilt::default();
    let (mut out, mut inc) = (Vec::new(), Vec::new());
    // Phase A, right to left: own files come back from the holder's copies.
    let send = send_copies.then(|| (left, copy_lf.as_ref(), logical_len(&own_lists[left])));
    if me.own {
        let files: Vec<Meta> = own_lists[ctx.me]
            .iter()
            .map(|m| Meta {
                file_type: Some(FileType::Full),
                ..m.clone()
            })
            .collect();
        let paths = app_paths(dir, &files);
        rebuilt.app_files = receive_files(
            ctx,
            ctx.world_rank,
            &files,
            &paths,
            right,
            send,
            register,
            &mut latched,
            (&mut out, &mut inc),
        )?;
    } else if send.is_some() {
        stream(ctx, send, None, None, &mut latched, &mut out, &mut inc)?;
    }
    // Phase B, left to right: lost copies come again from their owner.
    let send = send_own.then(|| (right, own_lf.as_ref(), logical_len(&left_lists[right])));
    if me.held {
        let owner = ctx.set.world_ranks[left];
        let copies = copy_metas(&left_lists[ctx.me]);
        let paths = copy_paths(dir, owner, &copies);
        rebuilt.redundancy_files = receive_files(
            ctx,
            owner,
            &copies,
            &paths,
            left,
            send,
            register,
            &mut latched,
            (&mut out, &mut inc),
        )?;
    } else if send.is_some() {
        stream(ctx, send, None, None, &mut latched, &mut out, &mut inc)?;
    }
    ctx.agree(latched.map_or(Ok(()), Err), |_| Vec::new())?;
    Ok(rebuilt)
}

/// Where a lost member's application files are rebuilt: `dir` joined with
/// the basename of each recorded FILE.
fn app_paths(dir: &Path, files: &[Meta]) -> Vec<PathBuf> {
    // encode refuses files without FILE, so the fallback only names files
    // whose headers were written by something else.
    files
        .iter()
        .enumerate()
        .map(|(i, m)| dir.join(m.file.as_deref().map_or(format!("file.{i}"), basename)))
        .collect()
}

// ---------------------------------------------------------------- XOR / RS

/// The header of an XOR or RS redundancy file.
struct CodedHeader {
    xor: XorHeader,
    /// Meta of the k members to the left, nearest first (RS only; for XOR
    /// it is `[xor.partner]` and not written separately).
    partners: Vec<XorMember>,
    k: usize,
}

impl CodedHeader {
    fn to_tree(&self) -> KvTree {
        let mut t = self.xor.to_tree();
        if self.k > 1 {
            t.set_val("FAILURES", self.k);
            let p = t.entry("PARTNERS");
            for (i, m) in self.partners.iter().enumerate() {
                p.set((i + 1).to_string(), m.to_tree());
            }
        }
        t
    }

    fn from_tree(tree: &KvTree, k: usize) -> Result<Self, RecordError> {
        let xor = XorHeader::from_tree(tree)?;
        let partners = if k > 1 {
            let root = Node::root("RS header", tree);
            let entries = root.int_keyed_under("PARTNERS")?;
            if entries.len() != k
                || entries
                    .iter()
                    .enumerate()
                    .any(|(i, (d, _))| *d != i as i64 + 1)
            {
                return Err(root.inconsistent("PARTNERS", format!("expected entries 1..={k}")));
            }
            entries
                .iter()
                .map(|(_, n)| XorMember::from_node(n))
                .collect::<Result<_, _>>()?
        } else {
            vec![xor.partner.clone()]
        };
        Ok(CodedHeader { xor, partners, k })
    }

    fn read_from(path: &Path, k: usize) -> Result<(Self, u64), RecordError> {
        let io = |op: &'static str| {
            move |source| kvfile::KvFileError::Io {
                path: path.to_path_buf(),
                op,
                source,
            }
        };
        let f = File::open(path).map_err(io("open"))?;
        let mut head = [0u8; HEADER_LEN];
        f.read_exact_at(&mut head, 0).map_err(io("read header"))?;
        let len = crate::records::embedded_len(&head, path)?;
        let mut bytes = head.to_vec();
        bytes.resize(len, 0);
        f.read_exact_at(&mut bytes[HEADER_LEN..], HEADER_LEN as u64)
            .map_err(io("read header"))?;
        let tree = kvfile::decode(&bytes, path)?;
        let h = Self::from_tree(&tree, k).map_err(|e| e.in_file(path))?;
        Ok((h, len as u64))
    }
}

/// A redundancy file being written: header first, then k rows of `chunk`
/// bytes, each row's CRC kept as it is filled (in order) and joined at the end.
struct RedWriter {
    file: File,
    path: PathBuf,
    header_len: u64,
    chunk: u64,
    header_crc: crc32fast::Hasher,
    rows: Vec<crc32fast::Hasher>,
    filled: Vec<u64>,
}

impl RedWriter {
    fn create(
        ctx: &Ctx,
        path: &Path,
        header: &[u8],
        k: usize,
        chunk: u64,
    ) -> Result<Self, ApplyError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(ctx.io_err(path, None))?;
        file.write_all_at(header, 0)
            .map_err(ctx.io_err(path, Some(0)))?;
        let total = header.len() as u64 + k as u64 * chunk;
        file.set_len(total).map_err(ctx.io_err(path, None))?;
        let mut header_crc = crc32fast::Hasher::new();
        header_crc.update(header);
        Ok(RedWriter {
            file,
            path: path.to_path_buf(),
            header_len: header.len() as u64,
            chunk,
            header_crc,
            rows: vec![crc32fast::Hasher::new(); k],
            filled: vec![0; k],
        })
    }

    fn write_row(
        &mut self,
        ctx: &Ctx,
        row: usize,
        off: u64,
        bytes: &[u8],
    ) -> Result<(), ApplyError> {
        assert_eq!(self.filled[row], off, "parity row written out of order");
        let pos = self.header_len + row as u64 * self.chunk + off;
        self.file
            .write_all_at(bytes, pos)
            .map_err(ctx.io_err(&self.path, Some(pos)))?;
        self.rows[row].update(bytes);
        self.filled[row] += bytes.len() as u64;
        Ok(())
    }

    /// fsync, and the file's (size, CRC32).
    fn finish(mut self, ctx: &Ctx) -> Result<(u64, u32), ApplyError> {
        if self.filled.iter().any(|&f| f != self.chunk) {
            return Err(ctx.inconsistent(format!(
                "internal: {} was not completely written",
                self.path.display()
            )));
        }
        self.file.sync_all().map_err(ctx.io_err(&self.path, None))?;
        for h in &self.rows {
            self.header_crc.combine(h);
        }
        let size = self.header_len + self.rows.len() as u64 * self.chunk;
        Ok((size, self.header_crc.finalize()))
    }
}

/// What a member reads for, or writes from, one stripe.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// A chunk of its logical file.
    Data { chunk: usize },
    /// A parity row of its redundancy file.
    Parity { row: usize },
}

impl From<Slot> for Src {
    fn from(s: Slot) -> Self {
        match s {
            Slot::Data { chunk, .. } => Src::Data { chunk },
            Slot::Parity { row } => Src::Parity { row },
        }
    }
}

/// The ring's plan, identical on every member except `mine`.
struct Tables {
    /// Outputs per stripe (k at encode, lost members at rebuild).
    width: usize,
    /// dests[stripe][q]: the member that stores output q of the stripe.
    dests: Vec<Vec<usize>>,
    /// mine[stripe]: what this member reads and its coefficient per output.
    mine: Vec<Option<(Src, Vec<u8>)>>,
    /// sinks[stripe]: where this member stores an output of the stripe.
    sinks: Vec<Src>,
    /// At step t member m adds its share of stripe (m − start − t) mod N.
    start: usize,
    /// Ring steps (1..=N): N − k at encode, where only data members need to
    /// see a stripe's bundle; N at rebuild, where any survivor may.
    steps: usize,
    /// Delivery distances d: the member finishing a stripe's bundle sends
    /// some output of it to the member d places to its right.
    rounds: Vec<usize>,
}

impl Tables {
    fn new(
        n: usize,
        start: usize,
        steps: usize,
        width: usize,
        dests: Vec<Vec<usize>>,
        mine: Vec<Option<(Src, Vec<u8>)>>,
        sinks: Vec<Src>,
    ) -> Self {
        assert!(start <= n && (1..=n).contains(&steps));
        let mut t = Tables {
            width,
            dests,
            mine,
            sinks,
            start,
            steps,
            rounds: Vec::new(),
        };
        let mut used = vec![false; n];
        for (s, ds) in t.dests.iter().enumerate() {
            for &d in ds {
                used[(d + n - t.finisher(s, n)) % n] = true;
            }
        }
        t.rounds = (0..n).filter(|&d| used[d]).collect();
        t
    }

    /// The stripe member `m` works on at ring step `step`.
    fn stripe(&self, m: usize, step: usize, n: usize) -> usize {
        (m + 2 * n - self.start - step) % n
    }

    /// The stripe whose bundle member `m` holds after the last step.
    fn finished(&self, m: usize, n: usize) -> usize {
        self.stripe(m, self.steps - 1, n)
    }

    /// The member holding stripe `s`'s bundle after the last step.
    fn finisher(&self, s: usize, n: usize) -> usize {
        (s + self.start + self.steps - 1) % n
    }
}

/// The member I/O behind the ring: reads data chunks from the logical file
/// and parity rows from the redundancy file; writes outputs to them.
struct MemberIo<'f> {
    chunk: u64,
    logical: Option<&'f LogicalFile>,
    logical_len: u64,
    data_crc: Option<SegmentCrc>,
    red_read: Option<(File, PathBuf, u64)>,
    red_write: Option<RedWriter>,
}

impl MemberIo<'_> {
    fn read(&mut self, ctx: &Ctx, src: Src, off: u64, buf: &mut [u8]) -> Result<(), ApplyError> {
        match src {
            Src::Data { chunk } => {
                let pos = chunk as u64 * self.chunk + off;
                let lf = self
                    .logical
                    .ok_or_else(|| ctx.inconsistent("internal: no logical file to read".into()))?;
                lf.read_at(pos, buf).map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, buf);
                }
            }
            Src::Parity { row } => {
                let (f, path, hlen) = self.red_read.as_ref().ok_or_else(|| {
                    ctx.inconsistent("internal: no redundancy file to read".into())
                })?;
                let pos = hlen + row as u64 * self.chunk + off;
                f.read_exact_at(buf, pos)
                    .map_err(ctx.io_err(path, Some(pos)))?;
            }
        }
        Ok(())
    }

    /// This member's bytes of `src` at `off`: lent from the mapping of
    /// the data when there is one, else read into `scratch`.
    fn share<'s>(
        &'s mut self,
        ctx: &Ctx,
        src: Src,
        off: u64,
        scratch: &'s mut Vec<u8>,
    ) -> Result<&'s [u8], ApplyError> {
        let len = scratch.len();
        match (src, self.logical) {
            (Src::Data { chunk }, Some(lf)) => {
                let pos = chunk as u64 * self.chunk + off;
                let bytes = lf
                    .bytes(pos, len, scratch)
                    .map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, bytes);
                }
                Ok(bytes)
            }
            _ => {
                self.read(ctx, src, off, scratch)?;
                Ok(scratch)
            }
        }
    }

    fn write(&mut self, ctx: &Ctx, sink: Src, off: u64, bytes: &[u8]) -> Result<(), ApplyError> {
        match sink {
            Src::Data { chunk } => {
                let pos = chunk as u64 * self.chunk + off;
                // Past the member's data the rebuilt bytes must be the zero
                // padding; anything else means the survivors disagree.
                let data = self.logical_len.saturating_sub(pos).min(bytes.len() as u64) as usize;
                if bytes[data..].iter().any(|&b| b != 0) {
                    return Err(ctx.inconsistent(format!(
                        "rebuilt padding at logical offset {} is not zero: the surviving files \
                         do not belong together",
                        pos + data as u64
                    )));
                }
                let lf = self
                    .logical
                    .ok_or_else(|| ctx.inconsistent("internal: no logical file to write".into()))?;
                lf.write_at(pos, bytes).map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, bytes);
                }
            }
            Src::Parity { row } => {
                let w = self.red_write.as_mut().ok_or_else(|| {
                    ctx.inconsistent("internal: no redundancy file to write".into())
                })?;
                w.write_row(ctx, row, off, bytes)?;
            }
        }
        Ok(())
    }
}

/// The pipelined ring (see the module documentation). Local I/O failures
/// are latched and the member keeps its place; only communicator failures
/// end it early.
fn ring(
    ctx: &Ctx,
    chunk: u64,
    t: &Tables,
    io: &mut MemberIo<'_>,
    latched: &mut Option<ApplyError>,
) -> Result<(), ApplyError> {
    let (n, me) = (ctx.n, ctx.me);
    let w = t.width;
    assert!(t.dests.len() == n && t.mine.len() == n && t.sinks.len() == n);
    let (mut acc, mut inc, mut read, mut out) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Who sends what to whom in each delivery round is the same for every
    // piece: work it out once, so the piece loop allocates nothing.
    let mine_fin = t.finished(me, n);
    assert_eq!(t.finisher(mine_fin, n), me);
    let rounds: Vec<(usize, Vec<usize>, usize, Vec<usize>)> = t
        .rounds
        .iter()
        .map(|&d| {
            let (to, from) = (ctx.right(d), ctx.left(d));
            let from_fin = t.finished(from, n);
            let sends = (0..w).filter(|&q| t.dests[mine_fin][q] == to).collect();
            let recvs = (0..w).filter(|&q| t.dests[from_fin][q] == me).collect();
            (d, sends, from_fin, recvs)
        })
        .collect();
    let pieces = xor::pieces(chunk, ctx.set.piece_bytes).map_err(ctx.red_err(None))?;
    for (off, len) in pieces {
        // Only the length is set here: step 0 overwrites every byte.
        acc.resize(w * len, 0);
        read.resize(len, 0);
        for step in 0..t.steps {
            if step > 0 {
                ctx.set
                    .comm
                    .sendrecv_bytes(Some((ctx.right(1), &acc)), Some(ctx.left(1)), &mut inc)
                    .map_err(ctx.comm_err())?;
                if inc.len() != w * len {
                    return Err(ctx.inconsistent(format!(
                        "ring step {step}: expected {} bytes from the left neighbour, got {}",
                        w * len,
                        inc.len()
                    )));
                }
                std::mem::swap(&mut acc, &mut inc);
            }
            let stripe = t.stripe(me, step, n);
            // XOR encode is exactly scr_reddesc_apply_xor()'s schedule.
            debug_assert!(t.start != 1 || xor::ring_slot(me, step, n).ok() == Some(stripe));
            let share = t.mine[stripe].as_ref().filter(|_| latched.is_none());
            let Some((src, coefs)) = share else {
                if step == 0 {
                    acc.fill(0);
                }
                continue;
            };
            if step == 0 && coefs.as_slice() == [1] {
                // The XOR case: the first share is the bundle itself, so it
                // is read straight into it (no zeroing, no copy, no XOR).
                if latch(latched, io.read(ctx, *src, off, &mut acc)).is_none() {
                    acc.fill(0);
                }
                continue;
            }
            let Some(bytes) = latch(latched, io.share(ctx, *src, off, &mut read)) else {
                if step == 0 {
                    acc.fill(0);
                }
                continue;
            };
            for (q, &c) in coefs.iter().enumerate() {
                let row = &mut acc[q * len..(q + 1) * len];
                match (step, c) {
                    (0, 1) => row.copy_from_slice(bytes),
                    (0, _) => {
                        row.fill(0);
                        gf256::mul_add_into(row, bytes, c);
                    }
                    _ => gf256::mul_add_into(row, bytes, c),
                }
            }
        }
        // acc now holds the finished outputs of stripe `mine_fin`; deliver them.
        for (d, sends, from_fin, recvs) in &rounds {
            let (to, from) = (ctx.right(*d), ctx.left(*d));
            if *d == 0 {
                for &q in sends {
                    if latched.is_none() {
                        let r = io.write(ctx, t.sinks[mine_fin], off, &acc[q * len..(q + 1) * len]);
                        latch(latched, r);
                    }
                }
                continue;
            }
            let payload: &[u8] = match sends.as_slice() {
                [] => &[],
                [q] => &acc[q * len..(q + 1) * len],
                qs => {
                    out.clear();
                    for q in qs {
                        out.extend_from_slice(&acc[q * len..(q + 1) * len]);
                    }
                    &out
                }
            };
            let send = (!sends.is_empty()).then_some((to, payload));
            let recv = (!recvs.is_empty()).then_some(from);
            if send.is_none() && recv.is_none() {
                continue;
            }
            ctx.set
                .comm
                .sendrecv_bytes(send, recv, &mut inc)
                .map_err(ctx.comm_err())?;
            if recvs.is_empty() {
                continue;
            }
            if inc.len() != recvs.len() * len {
                return Err(ctx.inconsistent(format!(
                    "delivery from member {from}: expected {} bytes, got {}",
                    recvs.len() * len,
                    inc.len()
                )));
            }
            for (i, _) in recvs.iter().enumerate() {
                if latched.is_none() {
                    let r = io.write(ctx, t.sinks[*from_fin], off, &inc[i * len..(i + 1) * len]);
                    latch(latched, r);
                }
            }
        }
    }
    Ok(())
}

/// The member holding codeword position `p` of `stripe` in an RS set.
fn holder(n: usize, k: usize, stripe: usize, p: usize) -> usize {
    if p < n - k {
        (stripe + k + p) % n
    } else {
        (stripe + p - (n - k)) % n
    }
}

fn position(slot: Slot, n: usize, k: usize) -> usize {
    match slot {
        Slot::Data { position, .. } => position,
        Slot::Parity { row } => n - k + row,
    }
}

fn coded_name(ctx: &Ctx) -> String {
    let (r, n, g) = (ctx.me as u64, ctx.n as u64, ctx.set.group_id);
    match ctx.set.scheme {
        Scheme::Xor => xor_file_name(r, n, g),
        _ => rs_file_name(r, n, g),
    }
}

fn coded_type(ctx: &Ctx) -> FileType {
    match ctx.set.scheme {
        Scheme::Xor => FileType::Xor,
        _ => FileType::Rs,
    }
}

/// Builds and creates (after registering) this member's redundancy file.
fn start_red_file(
    ctx: &Ctx,
    k: usize,
    chunk: u64,
    members: &[XorMember],
    dir: &Path,
    register: &mut Register<'_>,
    latched: &mut Option<ApplyError>,
) -> (Option<RedWriter>, PathBuf, Meta) {
    let header = CodedHeader {
        xor: XorHeader {
            dataset: ctx.set.dataset.clone(),
            ranks: ctx.set.world_size,
            group_world_ranks: ctx.set.world_ranks.clone(),
            chunk_bytes: chunk,
            current: members[ctx.me].clone(),
            partner: members[ctx.left(1)].clone(),
        },
        partners: (1..=k).map(|d| members[ctx.left(d)].clone()).collect(),
        k,
    };
    let bytes = kvfile::encode(&header.to_tree(), true);
    let path = dir.join(coded_name(ctx));
    let meta = Meta {
        file: Some(path.to_string_lossy().into_owned()),
        file_type: Some(coded_type(ctx)),
        complete: Some(false),
        size_bytes: Some(bytes.len() as u64 + k as u64 * chunk),
        ranks: Some(ctx.set.world_size),
        ckpt: ctx.set.dataset.ckpt,
        ..Meta::default()
    };
    ctx.register(register, ctx.world_rank, &path, &meta, latched);
    let writer = if latched.is_none() {
        latch(latched, RedWriter::create(ctx, &path, &bytes, k, chunk))
    } else {
        None
    };
    (writer, path, meta)
}

fn finish_red_file(
    ctx: &Ctx,
    writer: Option<RedWriter>,
    path: PathBuf,
    meta: Meta,
    latched: &mut Option<ApplyError>,
) -> Option<FileEntry> {
    let writer = writer?;
    if latched.is_some() {
        return None;
    }
    let (size, crc) = latch(latched, writer.finish(ctx))?;
    assert_eq!(Some(size), meta.size_bytes);
    Some(FileEntry {
        path,
        meta: Meta {
            crc32: Some(crc),
            complete: Some(true),
            ..meta
        },
    })
}

/// `scr_reddesc_apply_xor()` (k = 1) and redset's `redset_apply_rs()`.
fn encode_coded(
    ctx: &Ctx,
    k: usize,
    mine: &MemberFiles,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Encoded, ApplyError> {
    let (n, me) = (ctx.n, ctx.me);
    let layout = RsSet::new(n, k).map_err(ctx.red_err(None))?;
    let prep = open_checked(ctx, &mine.files);
    let ((my_sizes, lf, my_metas), all) =
        ctx.agree(prep, |(_, _, m)| member_tree(ctx.world_rank, m).pack())?;
    let members: Vec<XorMember> = all
        .iter()
        .enumerate()
        .map(|(m, b)| unpack_member(ctx, b, m))
        .collect::<Result<_, _>>()?;
    let max = members
        .iter()
        .map(|m| logical_len(&m.files))
        .max()
        .unwrap_or(0);
    let chunk = layout.chunk_bytes(max);
    let mut latched = None;
    let (writer, path, meta) = start_red_file(ctx, k, chunk, &members, dir, register, &mut latched);
    let codec = layout.codec();
    let mut mine_t = Vec::with_capacity(n);
    for s in 0..n {
        mine_t.push(match layout.slot(me, s).map_err(ctx.red_err(None))? {
            Slot::Data { chunk, position } => {
                let coefs = (0..k)
                    .map(|q| codec.coefficient(q, position).unwrap_or(0))
                    .collect();
                Some((Src::Data { chunk }, coefs))
            }
            Slot::Parity { .. } => None,
        });
    }
    let dests: Vec<Vec<usize>> = (0..n)
        .map(|s| (0..k).map(|q| (s + q) % n).collect())
        .collect();
    let sinks = (0..n)
        .map(|s| layout.slot(me, s).map(Src::from))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ctx.red_err(None))?;
    // A stripe's bundle starts at its first data member (s + k) and only
    // passes the N − k data members; the last one hands row j to s + j.
    let tables = Tables::new(n, k, n - k, k, dests, mine_t, sinks);
    let my_len: u64 = my_sizes.iter().sum();
    // The CRCs are already known (open_checked), so the ring only reads.
    let mut io = MemberIo {
        chunk,
        logical: Some(&lf),
        logical_len: my_len,
        data_crc: None,
        red_read: None,
        red_write: writer,
    };
    ring(ctx, chunk, &tables, &mut io, &mut latched)?;
    let entry = finish_red_file(ctx, io.red_write.take(), path, meta, &mut latched);
    ctx.agree(latched.map_or(Ok(()), Err), |_| Vec::new())?;
    let entry = entry.ok_or_else(|| ctx.inconsistent("internal: no redundancy file".into()))?;
    Ok(Encoded {
        app_crcs: crcs_of(&my_metas),
        redundancy: vec![entry],
    })
}

/// `scr_reddesc_recover_xor()` (k = 1) and redset's `redset_recover_rs()`.
fn rebuild_coded(
    ctx: &Ctx,
    k: usize,
    lost: &[bool],
    survivor: Option<(&MemberFiles, &[FileEntry])>,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Rebuilt, ApplyError> {
    let (n, me) = (ctx.n, ctx.me);
    let layout = RsSet::new(n, k).map_err(ctx.red_err(None))?;
    let want = coded_type(ctx);
    // A survivor checks its files and header before lending them.
    let prep = survivor.map_or(Ok(None), |(mine, red)| {
        let reds: Vec<&FileEntry> = red
            .iter()
            .filter(|f| f.meta.file_type == Some(want))
            .collect();
        let [red] = reds.as_slice() else {
            return Err(ctx.input(format!(
                "a survivor must pass exactly one {want} file, got {}",
                reds.len()
            )));
        };
        let (header, hlen) =
            CodedHeader::read_from(&red.path, k).map_err(|source| ApplyError::Header {
                world_rank: ctx.world_rank,
                source,
            })?;
        check_own_header(ctx, &header, mine)?;
        let mut buf = Vec::new();
        verify_files(ctx, &mine.files, &mut buf)?;
        verify_files(ctx, std::slice::from_ref(*red), &mut buf)?;
        let lf = open_logical(ctx, &mine.files)?;
        let f = File::open(&red.path).map_err(ctx.io_err(&red.path, None))?;
        Ok(Some((header, lf, Some((f, red.path.clone(), hlen)))))
    });
    let (mut prep, all) = ctx.agree(prep, |p| {
        p.as_ref()
            .map_or_else(Vec::new, |(h, _, _)| h.to_tree().pack())
    })?;
    // Every member decodes every survivor's header, so all reach the same
    // verdict on the set's consistency.
    let mut headers: Vec<Option<CodedHeader>> = Vec::with_capacity(n);
    for (m, b) in all.iter().enumerate() {
        if lost[m] {
            headers.push(None);
            continue;
        }
        let tree = KvTree::unpack_exact(b)
            .map_err(|e| ctx.inconsistent(format!("member {m} sent an unreadable header: {e}")))?;
        let h = CodedHeader::from_tree(&tree, k).map_err(|source| ApplyError::Header {
            world_rank: ctx.world_rank,
            source,
        })?;
        headers.push(Some(h));
    }
    let (members, chunk) = set_metas(ctx, k, lost, &headers)?;
    let max = members
        .iter()
        .map(|m| logical_len(&m.files))
        .max()
        .unwrap_or(0);
    if layout.chunk_bytes(max) != chunk {
        return Err(ctx.inconsistent(format!(
            "the headers record CHUNK {chunk} but the files need {}",
            layout.chunk_bytes(max)
        )));
    }
    let mut latched = None;
    let mut rebuilt = Rebuilt::default();
    // Lost members register and create their files before any data moves.
    let mut created = None;
    if lost[me] {
        let files: Vec<Meta> = members[me].files.clone();
        let paths = app_paths(dir, &files);
        for (p, m) in paths.iter().zip(&files) {
            let reg = Meta {
                complete: Some(false),
                ..m.clone()
            };
            ctx.register(register, ctx.world_rank, p, &reg, &mut latched);
        }
        let lf = if latched.is_none() {
            let list: Vec<(&Path, u64)> = paths
                .iter()
                .map(PathBuf::as_path)
                .zip(files.iter().map(|m| m.size_bytes.unwrap_or(0)))
                .collect();
            latch(
                &mut latched,
                LogicalFile::create(&list).map_err(ctx.red_err(None)),
            )
        } else {
            None
        };
        let red = start_red_file(ctx, k, chunk, &members, dir, register, &mut latched);
        created = Some((files, paths, lf, red));
    }
    // The decoding plan of every stripe: which positions are missing and
    // how each is computed from the first N − k surviving positions.
    let codec = layout.codec();
    let (mut dests, mut mine_t, mut sinks) = (Vec::new(), Vec::new(), Vec::new());
    for s in 0..n {
        let present: Vec<bool> = (0..n).map(|p| !lost[holder(n, k, s, p)]).collect();
        let plan = codec.decode_plan(&present).map_err(ctx.red_err(None))?;
        let slot = layout.slot(me, s).map_err(ctx.red_err(None))?;
        assert_eq!(holder(n, k, s, position(slot, n, k)), me);
        dests.push(
            plan.missing
                .iter()
                .map(|&p| holder(n, k, s, p))
                .collect::<Vec<_>>(),
        );
        let mine_s = if lost[me] {
            None
        } else {
            let p = position(slot, n, k);
            plan.survivors.iter().position(|&x| x == p).map(|i| {
                let coefs = (0..plan.missing.len())
                    .map(|q| plan.coefs[q * (n - k) + i])
                    .collect();
                (Src::from(slot), coefs)
            })
        };
        mine_t.push(mine_s);
        sinks.push(Src::from(slot));
    }
    let width = lost.iter().filter(|l| **l).count();
    assert!(dests.iter().all(|d| d.len() == width));
    // The survivors a stripe is decoded from can sit anywhere in the set,
    // so its bundle goes all the way round and ends at member s.
    let tables = Tables::new(n, 1, n, width, dests, mine_t, sinks);
    let mut io = match (&mut prep, &mut created) {
        (Some((_, lf, red)), _) => MemberIo {
            chunk,
            logical: Some(lf),
            logical_len: lf.len(),
            data_crc: None,
            red_read: red.take(),
            red_write: None,
        },
        (None, Some((files, _, lf, red))) => {
            let sizes: Vec<u64> = files.iter().map(|m| m.size_bytes.unwrap_or(0)).collect();
            MemberIo {
                chunk,
                logical: lf.as_ref(),
                logical_len: sizes.iter().sum(),
                data_crc: Some(SegmentCrc::new(&sizes, chunk)),
                red_read: None,
                red_write: red.0.take(),
            }
        }
        (None, None) => return Err(ctx.inconsistent("internal: neither survivor nor lost".into())),
    };
    ring(ctx, chunk, &tables, &mut io, &mut latched)?;
    let (data_crc, red_write) = (io.data_crc.take(), io.red_write.take());
    drop(io);
    if let Some((files, paths, lf, (_, red_path, red_meta))) = created {
        if latched.is_none() {
            // Never hand back bytes that differ from what was recorded.
            let crcs = data_crc.and_then(SegmentCrc::finish);
            let checked = check_crcs(ctx, &paths, &files, crcs).and_then(|crcs| {
                if let Some(lf) = &lf {
                    sync_logical(ctx, lf)?;
                }
                Ok(crcs)
            });
            if let Some(crcs) = latch(&mut latched, checked) {
                rebuilt.app_files = paths
                    .into_iter()
                    .zip(files)
                    .zip(crcs)
                    .map(|((path, meta), crc)| FileEntry {
                        path,
                        meta: Meta {
                            crc32: Some(crc),
                            complete: Some(true),
                            ..meta
                        },
                    })
                    .collect();
            }
        }
        let entry = finish_red_file(ctx, red_write, red_path, red_meta, &mut latched);
        rebuilt.redundancy_files = entry.into_iter().collect();
    }
    ctx.agree(latched.map_or(Ok(()), Err), |_| Vec::new())?;
    Ok(rebuilt)
}

/// A survivor's header must describe this set and this member's files.
fn check_own_header(ctx: &Ctx, h: &CodedHeader, mine: &MemberFiles) -> Result<(), ApplyError> {
    let x = &h.xor;
    if x.group_world_ranks != ctx.set.world_ranks || x.current.rank != ctx.world_rank {
        return Err(ctx.inconsistent(format!(
            "the redundancy header describes rank {} in set {:?}, not rank {} in set {:?}",
            x.current.rank, x.group_world_ranks, ctx.world_rank, ctx.set.world_ranks
        )));
    }
    if x.dataset.id != ctx.set.dataset.id {
        return Err(ctx.inconsistent(format!(
            "the redundancy header belongs to dataset {}, not {}",
            x.dataset.id, ctx.set.dataset.id
        )));
    }
    let recorded: Vec<Option<u64>> = x.current.files.iter().map(|m| m.size_bytes).collect();
    let given: Vec<Option<u64>> = mine.files.iter().map(|f| f.meta.size_bytes).collect();
    if recorded != given {
        return Err(ctx.inconsistent(format!(
            "the redundancy header records file sizes {recorded:?} but the files passed have {given:?}"
        )));
    }
    Ok(())
}

/// Every member's file list and the set's chunk size, from the survivors'
/// headers: a survivor's own list from CURRENT, a lost member's from the
/// nearest survivor to its right (which lists it among its k PARTNERS).
fn set_metas(
    ctx: &Ctx,
    k: usize,
    lost: &[bool],
    headers: &[Option<CodedHeader>],
) -> Result<(Vec<XorMember>, u64), ApplyError> {
    let n = ctx.n;
    let mut chunk = None;
    for h in headers.iter().flatten() {
        match chunk {
            None => chunk = Some(h.xor.chunk_bytes),
            Some(c) if c != h.xor.chunk_bytes => {
                return Err(ctx.inconsistent(format!(
                    "survivors' headers disagree on CHUNK ({c} vs {})",
                    h.xor.chunk_bytes
                )))
            }
            Some(_) => {}
        }
    }
    let chunk = chunk.ok_or_else(|| ctx.inconsistent("no surviving header".into()))?;
    let mut out = Vec::with_capacity(n);
    for m in 0..n {
        let want = ctx.set.world_ranks[m];
        let found = if lost[m] {
            (1..=k).find_map(|d| {
                let h = headers[(m + d) % n].as_ref()?;
                h.partners.get(d - 1).cloned()
            })
        } else {
            headers[m].as_ref().map(|h| h.xor.current.clone())
        };
        let member = found.ok_or_else(|| {
            ctx.inconsistent(format!("no surviving header lists the files of member {m}"))
        })?;
        if member.rank != want {
            return Err(ctx.inconsistent(format!(
                "a header lists rank {} where member {m} (rank {want}) belongs",
                member.rank
            )));
        }
        out.push(member);
    }
    Ok((out, chunk))
}
