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
//! is read back for it.
//!
//! # One pass over the application files
//! Encode reads each application file once, piece by piece (SCR_MPI_BUF_SIZE
//! bytes) into a few reused buffers, and that read feeds both the file's
//! CRC32 and the scheme: PARTNER sends the piece to the right neighbour,
//! XOR/RS add it into the ring. So the memory an encode adds is a few
//! pieces per member, whatever the checkpoint's size; nothing is mapped.
//! The CRCs are known only when the pass ends, so they travel in an
//! agreement after it (each member's own, 4 bytes a file):
//! - PARTNER: the holder compares the owner's CRCs with the ones of the
//!   bytes it received and wrote (a mismatch is [`ApplyError::Crc`]) before
//!   it syncs the copies and hands their entries back;
//! - XOR/RS: the header records the CRCs of the member and of its k left
//!   neighbours, and it comes first in the file. Its length depends on them
//!   (a CRC is written `0x%x`, 3 to 10 characters), so the parity is
//!   written from the longest the header can be (every CRC `0xffffffff`,
//!   the lists otherwise as sent before the pass) and, once the CRCs are
//!   known, moved down to the end of the real header (only when a CRC has
//!   fewer than eight hex digits: 1 in 16 per CRC) before the header is
//!   written in front of it. The file is byte for byte what a header-first
//!   writer makes; its CRC32 is the header's combined with the rows' as they
//!   were written (moving bytes does not change them).
//!
//! A file's recorded CRC (a fetched file) is checked against the computed
//! one at the end of the pass; a mismatch fails the set like any local
//! failure, with [`ApplyError::Crc`] on the member and `Peer` elsewhere.
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
//! An RS encode with k ≥ 2 and at least two data members per stripe sends
//! less at step 0: a bundle after one contribution is that member's share
//! times its k coefficients, so the share alone (one piece, not k) goes
//! right, and the second contributor computes the k rows from both shares in
//! one pass each (`gf256::Kernel::mul2_into`). With 4 members and k = 2 that
//! is 3 pieces per stripe and piece instead of 4 (1.5 × SIZE sent per member
//! instead of 2 ×), the fewest a chain of contributors can send; the rows,
//! and so the files, are the same bytes.
//!
//! A rebuild's bundles go only as far as their decode needs: each stripe's
//! bundle passes the fewest consecutive members that hold N − k survivors
//! of every stripe (`coded::decode_steps`; all N for XOR, 3 of 4 for RS
//! k = 2 after one loss), and the decode uses survivors inside that window.
//! A bundle nobody added to yet (its first members lost their files or are
//! not needed) goes as an empty message, and the first member with a share
//! starts it from that share in one pass (`gf256::Kernel::mul_into`). An
//! XOR set that lost one member runs SCR's pipelined reduction to it
//! instead (`ring::reduce`): each stripe's bundle starts at the survivor
//! right of it and passes the others to it, so it receives only its
//! outputs and nobody passes on a bundle without adding to it.
//!
//! A member's file I/O runs beside its exchanges: for the length of the
//! ring a scoped I/O thread owns the member's files, reads its shares ahead
//! in schedule order (two piece buffers circulate) and stores delivered
//! outputs from a spare bundle, while the member's own thread exchanges and
//! adds. All reads and writes stay on that one thread in the ring's order,
//! so CRCs see each chunk front to back and a failure is latched as before;
//! the I/O thread never communicates and is joined before the ring returns,
//! also when the communicator fails.
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
//!
//! # Where the code is
//! - this file: the entry points ([`encode`], [`rebuild`]) and the types
//!   they take and return;
//! - `loss`: what members lost and which losses a scheme rebuilds;
//! - `member`: the set as one member sees it, the agreement that ends every
//!   phase (with the set digest every member checks), a member's files;
//! - `crc`: CRC32 checks at both ends of every transfer;
//! - `partner`: PARTNER encode and rebuild;
//! - `coded`: XOR/RS redundancy files, encode and rebuild;
//! - `ring`: the pipelined ring XOR and RS share (`ring::pipe`: its I/O
//!   thread);
//! - `error`: [`ApplyError`] and the typed problems it carries.

use std::path::{Path, PathBuf};

use crate::comm::Comm;
use crate::records::{Dataset, Meta};
use crate::scheme::CopyType;

mod coded;
mod crc;
mod error;
mod loss;
mod member;
mod partner;
mod ring;

#[cfg(test)]
mod pass_tests;
#[cfg(test)]
mod ring_tests;
#[cfg(test)]
mod tests;

pub use coded::rs_file_name;
pub use error::{ApplyError, FailureKind, Inconsistency, InputProblem};
pub use loss::{parity_count, partner_holder, recoverable, unrecoverable_members, MemberLoss};
pub use partner::{partner_copy_name, partner_lends, partner_owner, PartnerLends};

use member::Ctx;

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
/// redundancy descriptor: its communicator, group id and group map). Every
/// member must be given the same set (all but `comm`'s rank): the first
/// agreement of every operation compares a digest of it.
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
    /// The scheme to apply (the descriptor's TYPE).
    pub scheme: CopyType,
    /// The descriptor's SET_FAILURES: parity chunks per member for RS
    /// (read for RS only; XOR always has one, the others none).
    pub set_failures: usize,
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
/// once, in pieces of `piece_bytes` into a few reused buffers (nothing is
/// mapped, so the extra memory does not grow with the checkpoint): the
/// same read feeds its CRC32 and the scheme (see "One pass" in the module
/// documentation).
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
            CopyType::Single => Err(e),
            _ => ctx.agree(Err::<(), _>(e), |_| Vec::new()).map(|_| Encoded {
                app_crcs: Vec::new(),
                redundancy: Vec::new(),
            }),
        };
    }
    match set.scheme {
        CopyType::Single => {
            let metas = member::read_checked(&ctx, &mine.files)?;
            Ok(Encoded {
                app_crcs: member::crcs_of(&metas),
                redundancy: Vec::new(),
            })
        }
        CopyType::Partner => partner::encode_partner(&ctx, mine, dir, register),
        CopyType::Xor | CopyType::Rs => coded::encode_coded(&ctx, mine, dir, register),
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
/// bytes). An XOR/RS survivor checks its files' sizes before it lends them
/// and their CRC32s (where its metas record them) by the same read that
/// lends them, reading once more only what the decode did not need: each
/// surviving byte is read once, and a mismatch fails the set with
/// [`ApplyError::Crc`] on the survivor (`Peer` elsewhere). PARTNER's
/// sender does not check what it lends: the receiver checks every byte.
/// A loss the scheme cannot rebuild returns
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
        return Err(ctx.input(InputProblem::LostCount {
            listed: lost.len(),
            members: ctx.n,
        }));
    }
    let lost: Vec<MemberLoss> = lost.iter().map(|l| l.as_seen_by(set.scheme)).collect();
    let cannot = unrecoverable_members(set.scheme, set.set_failures, &lost);
    if !cannot.is_empty() {
        return Err(ApplyError::Unrecoverable {
            group_id: set.group_id,
            scheme: set.scheme,
            set_failures: set.set_failures,
            lost: (0..ctx.n).filter(|&i| lost[i].any()).collect(),
            cannot,
        });
    }
    if !lost.iter().any(|l| l.any()) {
        return Ok(Rebuilt::default());
    }
    match set.scheme {
        CopyType::Single => Ok(Rebuilt::default()),
        CopyType::Partner => {
            partner::rebuild_partner(&ctx, &lost, mine, my_redundancy, dir, register)
        }
        CopyType::Xor | CopyType::Rs => {
            let whole: Vec<bool> = lost.iter().map(|l| l.any()).collect();
            let survivor = match (whole[ctx.me], mine, my_redundancy) {
                (true, _, _) => None,
                (false, Some(m), Some(r)) => Some((m, r)),
                (false, _, _) => {
                    // Still take part in the agreement so nobody waits for us.
                    let e = ctx.input(InputProblem::SurvivorFiles);
                    return ctx.agree_done(Some(e)).map(|_| Rebuilt::default());
                }
            };
            coded::rebuild_coded(&ctx, &whole, survivor, dir, register)
        }
    }
}
