//! PARTNER: a full copy of each member's files on its right neighbour
//! (`scr_reddesc_apply_partner()`, `scr_reddesc_recover_partner()`).

use std::path::{Path, PathBuf};

use crate::kvtree::KvTree;
use crate::records::{FileType, Meta, XorMember};

use super::super::logical::LogicalFile;
use super::crc::{check_crcs, SegmentCrc};
use super::error::{ApplyError, Inconsistency, InputProblem};
use super::loss::{partner_holder, MemberLoss};
use super::member::{
    app_paths, basename, checked_member, checked_metas, complete_entries, crcs_of, latch,
    logical_len, member_from_tree, member_tree, metas, open_logical, open_sized, pack_crcs,
    sync_logical, unpack_crcs, Ctx,
};
use super::{Encoded, FileEntry, MemberFiles, Rebuilt, Register, SetInfo};

/// The name of a PARTNER copy of file `index` (FILE = `logical`) of world
/// rank `owner`: `<basename>.partner.<owner>.<index>`.
pub fn partner_copy_name(logical: &str, owner: i64, index: usize) -> String {
    format!("{}.partner.{owner}.{index}", basename(logical))
}

/// The world rank owning the PARTNER copies this member holds: its left
/// neighbour's.
pub fn partner_owner(set: &SetInfo) -> Option<i64> {
    let n = set.comm.size();
    (n > 0)
        .then(|| set.world_ranks.get((set.comm.rank() + n - 1) % n).copied())
        .flatten()
}

/// One side of a [`stream`]: the peer, this member's logical file (absent
/// after a local failure) and the bytes that travel.
type Side<'f> = (usize, Option<&'f LogicalFile>, u64);

/// The two reusable piece buffers of a [`stream`]: outgoing, incoming.
type Bufs<'b> = (&'b mut Vec<u8>, &'b mut Vec<u8>);

/// The CRC32s a [`stream`] feeds: of the bytes sent, of the bytes received.
type Crcs<'c> = (Option<&'c mut SegmentCrc>, Option<&'c mut SegmentCrc>);

/// Streams one logical file to `dest` while receiving another from `src`,
/// piece by piece (`scr_reddesc_apply_partner()`'s `MPI_Sendrecv` loop).
/// Both sides know both lengths, so the numbers of messages match. After a
/// local failure the member keeps sending (zeros) and receiving so its
/// neighbours finish; the failure is reported at the next agreement.
/// Each piece is read once into `out`; `crcs` = (sent, received) are fed
/// the bytes read and the bytes written (each only until a local failure).
fn stream(
    ctx: &Ctx,
    send: Option<Side<'_>>,
    recv: Option<Side<'_>>,
    (mut send_crc, mut recv_crc): Crcs<'_>,
    latched: &mut Option<ApplyError>,
    (out, inc): Bufs<'_>,
) -> Result<(), ApplyError> {
    let piece = ctx.set.piece_bytes as u64;
    assert!(piece > 0, "Ctx::new refuses a zero piece size");
    let send_len = send.map_or(0, |s| s.2);
    let recv_len = recv.map_or(0, |r| r.2);
    let steps = send_len.div_ceil(piece).max(recv_len.div_ceil(piece));
    let mut zeros = Vec::new();
    for step in 0..steps {
        let off = step * piece;
        let to = match send {
            Some((dest, lf, len)) if off < len => {
                let take = (len - off).min(piece) as usize;
                let mut bytes = None;
                if let (Some(lf), true) = (lf, latched.is_none()) {
                    let r = lf.bytes(off, take, out).map_err(ctx.red_err(Some(off)));
                    bytes = latch(latched, r);
                    if let (Some(b), Some(c)) = (bytes, send_crc.as_deref_mut()) {
                        c.update(off, b);
                    }
                }
                let bytes = bytes.unwrap_or_else(|| {
                    zeros.resize(take, 0);
                    &zeros[..]
                });
                Some((dest, bytes))
            }
            _ => None,
        };
        let from = recv.and_then(|(src, _, len)| (off < len).then_some(src));
        ctx.set
            .comm
            .sendrecv_bytes(to, from, inc)
            .map_err(ctx.comm_err())?;
        if let Some((_, lf, len)) = recv.filter(|r| off < r.2) {
            let expected = (len - off).min(piece) as usize;
            if inc.len() != expected {
                return Err(ctx.inconsistent(Inconsistency::PieceLength {
                    offset: off,
                    expected,
                    received: inc.len(),
                }));
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
    Ok(())
}

/// What [`receive_files`] receives: `owner`'s files (metas `files`) into
/// `paths`, from member `src`.
struct Incoming<'a> {
    owner: i64,
    files: &'a [Meta],
    paths: &'a [PathBuf],
    src: usize,
}

/// Receives files from a neighbour, registering each first and checking
/// each CRC as recorded by the sender before handing them back; used by
/// PARTNER rebuild (own files and copies). Returns no entries after a local
/// failure (latched).
fn receive_files(
    ctx: &Ctx,
    incoming: Incoming<'_>,
    send: Option<Side<'_>>,
    register: &mut Register<'_>,
    latched: &mut Option<ApplyError>,
    bufs: Bufs<'_>,
) -> Result<Vec<FileEntry>, ApplyError> {
    let Incoming {
        owner,
        files,
        paths,
        src,
    } = incoming;
    let lf = ctx.register_and_create(register, owner, files, paths, latched);
    let mut crc = segments(files);
    let recv = (src, lf.as_ref(), logical_len(files));
    stream(ctx, send, Some(recv), (None, Some(&mut crc)), latched, bufs)?;
    if latched.is_some() {
        return Ok(Vec::new());
    }
    Ok(keep_checked(ctx, paths, files, lf, crc.finish(), latched))
}

/// One CRC32 per file of `files` fed in order (one logical stream).
fn segments(files: &[Meta]) -> SegmentCrc {
    let sizes: Vec<u64> = files.iter().map(|m| m.size_bytes.unwrap_or(0)).collect();
    let total: u64 = sizes.iter().sum();
    SegmentCrc::new(&sizes, total)
}

/// Files received into `paths` whose bytes had CRC32s `received`: checked
/// against the CRCs `files` record, synced, and their complete entries;
/// on a mismatch they are removed (never kept with wrong bytes: the
/// entries, registered incomplete, may outlive the files, not the reverse)
/// and the failure latched.
fn keep_checked(
    ctx: &Ctx,
    paths: &[PathBuf],
    files: &[Meta],
    lf: Option<LogicalFile>,
    received: Vec<u32>,
    latched: &mut Option<ApplyError>,
) -> Vec<FileEntry> {
    let done = check_crcs(ctx, paths, files, received).and_then(|crcs| {
        if let Some(lf) = &lf {
            sync_logical(ctx, lf)?;
        }
        Ok(crcs)
    });
    if done.is_err() {
        drop(lf);
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    }
    latch(latched, done).map_or_else(Vec::new, |crcs| complete_entries(paths, files, &crcs))
}

/// The metas of the copies of `owner_files`: the owner's, TYPE PARTNER.
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
/// neighbour while storing the left neighbour's, in one pass (module
/// documentation, "One pass"): each piece is read once, and that read feeds
/// the file's CRC32 and the message. The owner's CRCs travel in the
/// agreement after the pass; the holder checks the copies against them.
pub(super) fn encode_partner(
    ctx: &Ctx,
    mine: &MemberFiles,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Encoded, ApplyError> {
    let prep = open_sized(ctx, &mine.files);
    let ((my_sizes, lf), all) = ctx.agree(prep, |_| {
        member_tree(ctx.world_rank, &metas(&mine.files)).pack()
    })?;
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
    // Registered with what the owner's list records (its CRC only if one
    // was recorded before the pass); completed with the computed ones.
    let mut copies = copy_metas(&left_member.files);
    let paths = copy_paths(dir, owner, &copies);
    let mut latched = None;
    let copy_lf = ctx.register_and_create(register, owner, &copies, &paths, &mut latched);
    let (mut sent, mut received) = (SegmentCrc::new(&my_sizes, 0), segments(&copies));
    let send = Some((right, Some(&lf), my_sizes.iter().sum()));
    let recv = Some((left, copy_lf.as_ref(), logical_len(&copies)));
    let (mut out, mut inc) = (Vec::new(), Vec::new());
    let crcs = (Some(&mut sent), Some(&mut received));
    stream(ctx, send, recv, crcs, &mut latched, (&mut out, &mut inc))?;
    drop(lf);
    let local = match latched.take() {
        Some(e) => Err(e),
        None => checked_metas(ctx, &mine.files, sent.finish()),
    };
    let (my_metas, all) = ctx.agree(local, |m| pack_crcs(&crcs_of(m)))?;
    let owner_crcs = unpack_crcs(ctx, &all[left], left, copies.len())?;
    for (c, crc) in copies.iter_mut().zip(owner_crcs) {
        c.crc32 = Some(crc);
    }
    let entries = keep_checked(
        ctx,
        &paths,
        &copies,
        copy_lf,
        received.finish(),
        &mut latched,
    );
    ctx.agree_done(latched)?;
    assert_eq!(
        entries.len(),
        left_member.files.len(),
        "one stored copy per file of the left neighbour"
    );
    Ok(Encoded {
        app_crcs: crcs_of(&my_metas),
        redundancy: entries,
    })
}

/// What one member holds and lends in a PARTNER rebuild.
/// What a PARTNER member lends in a rebuild, from the set's losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartnerLends {
    /// Its own files: its right neighbour lost the copies of them.
    pub own: bool,
    /// The copies it holds: their owner (its left neighbour) lost its files.
    pub copies: bool,
}

/// What member `me` of a PARTNER set lends when the members lost `lost`
/// (the receiver checks every byte it gets against the recorded CRC32, so
/// a restart need not read what is lent beforehand).
pub fn partner_lends(lost: &[MemberLoss], me: usize) -> PartnerLends {
    let n = lost.len();
    PartnerLends {
        own: lost[(me + 1) % n].held,
        copies: lost[(me + n - 1) % n].own,
    }
}

struct PartnerPlan<'a> {
    /// This member's loss.
    me: MemberLoss,
    /// Its own files, when it kept them.
    own: Option<&'a MemberFiles>,
    /// The copies it holds (of its left neighbour's files), when it kept them.
    held: Option<Vec<FileEntry>>,
    /// It lends its copies: their owner (its left neighbour) lost its own files.
    send_copies: bool,
    /// It lends its own files: its right neighbour lost the copies of them.
    send_own: bool,
}

impl<'a> PartnerPlan<'a> {
    fn new(
        ctx: &Ctx,
        lost: &[MemberLoss],
        mine: Option<&'a MemberFiles>,
        red: Option<&[FileEntry]>,
    ) -> Self {
        let me = lost[ctx.me];
        let lends = partner_lends(lost, ctx.me);
        let copies_in = |red: &[FileEntry]| -> Vec<FileEntry> {
            red.iter()
                .filter(|f| f.meta.file_type == Some(FileType::Partner))
                .cloned()
                .collect()
        };
        let plan = PartnerPlan {
            me,
            own: if me.own { None } else { mine },
            held: if me.held { None } else { red.map(copies_in) },
            send_copies: lends.copies,
            send_own: lends.own,
        };
        // unrecoverable_members refused every pattern where a member would
        // lend what it lost, before any of this.
        assert!(
            !((plan.send_own && me.own) || (plan.send_copies && me.held)),
            "member {} would lend files it lost ({me:?})",
            ctx.me
        );
        plan
    }

    /// Checks the arguments and opens what this member lends: (own files,
    /// copies).
    fn open(&self, ctx: &Ctx) -> Result<(Option<LogicalFile>, Option<LogicalFile>), ApplyError> {
        if !self.me.own && self.own.is_none() {
            return Err(ctx.input(InputProblem::OwnFiles));
        }
        if !self.me.held && self.held.is_none() {
            return Err(ctx.input(InputProblem::HeldFiles));
        }
        let own_lf = match self.own {
            Some(m) if self.send_own => Some(open_logical(ctx, &m.files)?),
            _ => None,
        };
        let copy_lf = match &self.held {
            Some(c) if self.send_copies => Some(open_logical(ctx, c)?),
            _ => None,
        };
        Ok((own_lf, copy_lf))
    }

    /// What this member still has, for the others: SELF (its own files)
    /// and COPY (the copies it holds, under their owner's rank).
    fn lists(&self, ctx: &Ctx) -> KvTree {
        let mut payload = KvTree::new();
        if let Some(m) = self.own {
            payload.set("SELF", member_tree(ctx.world_rank, &metas(&m.files)));
        }
        if let Some(c) = &self.held {
            let owner = ctx.set.world_ranks[ctx.left(1)];
            payload.set("COPY", member_tree(owner, &metas(c)));
        }
        payload
    }
}

/// Member `member`'s `key` list (SELF or COPY) from its agreement payload,
/// checked to name world rank `expected`.
fn listed(
    ctx: &Ctx,
    payload: &[u8],
    member: usize,
    key: &'static str,
    expected: i64,
) -> Result<Vec<Meta>, ApplyError> {
    let tree = KvTree::unpack_exact(payload)
        .map_err(|source| ctx.inconsistent(Inconsistency::UnreadableList { member, source }))?;
    let sub = tree
        .get(key)
        .ok_or_else(|| ctx.inconsistent(Inconsistency::MissingList { member, key }))?;
    let m = member_from_tree(sub).map_err(ctx.header_err())?;
    if m.rank != expected {
        return Err(ctx.inconsistent(Inconsistency::ListRank {
            member,
            key,
            listed: m.rank,
            expected,
        }));
    }
    Ok(m.files)
}

/// Per member: the file lists a rebuild re-creates ([`lost_lists`]).
type LostLists = (Vec<Vec<Meta>>, Vec<Vec<Meta>>);

/// Every lost list a rebuild needs: (own files of each member that lost
/// them, from its holder's COPY list; the files of the left neighbour of
/// each member that lost its copies, from that owner's SELF list). Every
/// member checks all of them the same way before any data moves, so a bad
/// list stops the whole set alike.
fn lost_lists(ctx: &Ctx, lost: &[MemberLoss], all: &[Vec<u8>]) -> Result<LostLists, ApplyError> {
    let n = ctx.n;
    let mut own_lists = vec![Vec::new(); n];
    let mut left_lists = vec![Vec::new(); n];
    for l in 0..n {
        if lost[l].own {
            let holder = partner_holder(l, n);
            own_lists[l] = listed(ctx, &all[holder], holder, "COPY", ctx.set.world_ranks[l])?;
        }
        if lost[l].held {
            let owner = (l + n - 1) % n;
            let w = ctx.set.world_ranks[owner];
            left_lists[l] = listed(ctx, &all[owner], owner, "SELF", w)?;
        }
    }
    Ok((own_lists, left_lists))
}

/// `scr_reddesc_recover_partner()`, per kind of loss: a member that lost
/// its own files gets them back from the copies its right neighbour holds
/// (phase A, right to left); a member that lost the copies it held gets
/// them again from their owner, its left neighbour (phase B, left to right).
/// [`super::unrecoverable_members`] has ruled out a holder without its
/// copies, so the owner sending in phase B always has its own files intact.
/// Arriving bytes are checked against the CRC32 each list records.
pub(super) fn rebuild_partner(
    ctx: &Ctx,
    lost: &[MemberLoss],
    mine: Option<&MemberFiles>,
    red: Option<&[FileEntry]>,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Rebuilt, ApplyError> {
    let (left, right) = (ctx.left(1), ctx.right(1));
    let plan = PartnerPlan::new(ctx, lost, mine, red);
    let payload = plan.lists(ctx);
    let ((own_lf, copy_lf), all) = ctx.agree(plan.open(ctx), |_| payload.pack())?;
    let (own_lists, left_lists) = lost_lists(ctx, lost, &all)?;
    let mut latched = None;
    let mut rebuilt = Rebuilt::default();
    let (mut out, mut inc) = (Vec::new(), Vec::new());
    // Phase A, right to left: own files come back from the holder's copies.
    let send = plan
        .send_copies
        .then(|| (left, copy_lf.as_ref(), logical_len(&own_lists[left])));
    if plan.me.own {
        let files: Vec<Meta> = own_lists[ctx.me]
            .iter()
            .map(|m| Meta {
                file_type: Some(FileType::Full),
                ..m.clone()
            })
            .collect();
        let paths = app_paths(dir, &files);
        let incoming = Incoming {
            owner: ctx.world_rank,
            files: &files,
            paths: &paths,
            src: right,
        };
        let bufs = (&mut out, &mut inc);
        rebuilt.app_files = receive_files(ctx, incoming, send, register, &mut latched, bufs)?;
    } else if send.is_some() {
        stream(
            ctx,
            send,
            None,
            (None, None),
            &mut latched,
            (&mut out, &mut inc),
        )?;
    }
    // Phase B, left to right: lost copies come again from their owner.
    let send = plan
        .send_own
        .then(|| (right, own_lf.as_ref(), logical_len(&left_lists[right])));
    if plan.me.held {
        let owner = ctx.set.world_ranks[left];
        let copies = copy_metas(&left_lists[ctx.me]);
        let paths = copy_paths(dir, owner, &copies);
        let incoming = Incoming {
            owner,
            files: &copies,
            paths: &paths,
            src: left,
        };
        let bufs = (&mut out, &mut inc);
        rebuilt.redundancy_files =
            receive_files(ctx, incoming, send, register, &mut latched, bufs)?;
    } else if send.is_some() {
        stream(
            ctx,
            send,
            None,
            (None, None),
            &mut latched,
            (&mut out, &mut inc),
        )?;
    }
    ctx.agree_done(latched)?;
    Ok(rebuilt)
}
