//! Rebuild what a dataset's scheme allows after some rank lost files at
//! restart (scr_reddesc_recover; collective over the world).

use std::fs;
use std::path::Path;

use super::check::{self, check_files, Depth};
use super::encode::{member_files, set_failures_of, tag_partner_node};
use super::{logical_in, Books};
use crate::cache::Job;
use crate::comm::{Comm, CommError};
use crate::error::RebuildError;
use crate::ids::DatasetId;
use crate::records::dataset::Dataset as DatasetDesc;
use crate::records::meta::Meta;
use crate::records::reddesc::RedDesc;
use crate::redundancy::apply::{self, FailureKind, FileEntry, MemberLoss, SetInfo};
use crate::scheme::CopyType;
use crate::storage::dirs::{self};
use crate::storage::node::{DirPair, LogicalPath};

/// What the members of the set lost, as every member reported it.
fn gather_losses(set_comm: &dyn Comm, loss: MemberLoss) -> Result<Vec<MemberLoss>, CommError> {
    let flags = set_comm.allgather_bytes(&[u8::from(loss.own) | u8::from(loss.held) << 1])?;
    Ok(flags
        .iter()
        .map(|f| {
            let b = f.first().copied().unwrap_or(0);
            MemberLoss {
                own: b & 1 != 0,
                held: b & 2 != 0,
            }
        })
        .collect())
}

/// `local` on this member, agreed over the set: when it failed on any
/// member every member fails here, before the set's exchanges, which a
/// member that returned early would never join.
fn agreed(
    set: &dyn Comm,
    op: &'static str,
    local: Result<(), RebuildError>,
) -> Result<(), RebuildError> {
    let all = set.all_true(local.is_ok())?;
    local?;
    if !all {
        return Err(RebuildError::Elsewhere { op });
    }
    Ok(())
}

/// [`drop_lost_entries`] when this member lost anything, agreed over the
/// set ([`agreed`]).
fn drop_lost_agreed(
    job: &mut Job,
    set: &dyn Comm,
    dset: DatasetId,
    loss: MemberLoss,
) -> Result<(), RebuildError> {
    let dropped = if loss.any() {
        drop_lost_entries(job, dset, loss)
    } else {
        Ok(())
    };
    agreed(set, "drop the lost entries", dropped)
}

/// What was lost starts from a clean slate: whatever partial entries and
/// files it has are unusable. A whole loss drops every entry (also one
/// without meta); otherwise only the lost kind goes.
fn drop_lost_entries(job: &mut Job, dset: DatasetId, loss: MemberLoss) -> Result<(), RebuildError> {
    let me = job.rank();
    let app: Vec<String> = job.app_files(dset).into_iter().map(|(f, _)| f).collect();
    for f in job.filemap.list_files(dset, me) {
        let is_app = app.contains(&f);
        if loss.is_whole() || (loss.own && is_app) || (loss.held && !is_app) {
            let _ = fs::remove_file(job.real(&LogicalPath::new(&f)));
            job.filemap.remove_file(dset, me, &f);
        }
    }
    Ok(job.write_filemap()?)
}

/// How far a restart checked the files before the rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Sizes only ([`Depth::SIZE`]): the rebuild reads each CRC32 once — a
    /// set that lost nothing checks its files whole; in a set that lost
    /// something, XOR/RS survivors check theirs in the rebuild's own read,
    /// and a PARTNER member checks what it does not lend in a thread beside
    /// the transfers (what it lends, the receiver checks byte by byte).
    Sizes,
    /// Sizes and CRC32s of every file ([`Depth::FULL`]; XOR/RS survivors
    /// still check theirs in the rebuild's read, a second read taken only
    /// when the whole check found damage).
    All,
}

/// Rebuild what the scheme allows after some rank lost files of `dset`
/// (collective over the world). `loss`: what this rank found missing or
/// damaged — its own application files, the redundancy files it holds, or
/// both — as far as `checked` says it looked. PARTNER rebuilds each from
/// where an intact copy is; XOR and RS rebuild a member that lost anything
/// whole. A rank of a SINGLE dataset that lost nothing succeeds: the ranks
/// that lost files fail, and the caller's vote deletes the dataset
/// everywhere.
pub fn rebuild_dataset(
    job: &mut Job,
    dset: DatasetId,
    ds: &DatasetDesc,
    rd: &RedDesc,
    loss: MemberLoss,
    checked: Checked,
) -> Result<(), RebuildError> {
    let scheme = rd.copy_type;
    let mut loss = loss.as_seen_by(scheme);
    let mut checked = checked;
    // Every rank splits the world the same way: color = set id.
    let set_comm: Box<dyn Comm> = job
        .world
        .split(Some(rd.group_id as u32), rd.group_rank as i64)?
        .ok_or(RebuildError::NoSetComm)?;
    let set = set_comm.as_ref();
    let mut lost = gather_losses(set, loss)?;
    let quiet = !lost.iter().any(|l| l.any());
    if checked == Checked::Sizes && (quiet || scheme == CopyType::Single) {
        // A set that lost nothing (and SINGLE, which rebuilds nothing)
        // reads every CRC32 now, then agrees on the losses again.
        if !loss.is_whole() {
            let found = check_files(job, dset, Depth::FULL).loss(true);
            loss = loss.union(found.as_seen_by(scheme));
        }
        lost = gather_losses(set, loss)?;
        checked = Checked::All;
    }
    if !lost.iter().any(|l| l.any()) {
        return Ok(());
    }
    if scheme == CopyType::Single {
        return if loss.any() {
            Err(RebuildError::SingleLost)
        } else {
            Ok(())
        };
    }
    let dir = DirPair::of(
        &job.node,
        job.dataset_dir(&LogicalPath::new(&rd.directory), dset),
    );
    let cache_real = job.real(&LogicalPath::new(&rd.directory));
    let prepared = fs::create_dir_all(&cache_real)
        .map_err(|source| RebuildError::Io {
            path: cache_real.to_path_buf(),
            op: "create cache directory",
            source,
        })
        .and_then(|()| Ok(dirs::create_private_dirs_below(&cache_real, &dir.real)?));
    agreed(set, "prepare the dataset directory", prepared)?;
    let round = Round {
        dset,
        ds,
        rd,
        set,
        dir: &dir,
        // The number of application files this rank recorded, if it kept
        // a record: what comes back must match it.
        recorded_count: job.filemap.expected_files(dset, job.rank()),
    };
    if checked == Checked::Sizes && scheme == CopyType::Partner {
        return partner_rounds(job, &round, &lost, loss);
    }
    drop_lost_agreed(job, set, dset, loss)?;
    let rebuilt = match run_set_rebuild(job, dset, ds, rd, set, &lost, loss) {
        // A survivor's bytes did not match their CRC32 in the pass, or the
        // rebuilt bytes came out inconsistent (every member of the set gets
        // the same kind): look for damage with a whole check, and when it
        // finds some, rebuild once more from what it proves intact (RS may
        // still rebuild around it).
        Err(RebuildError::Apply(e))
            if checked == Checked::Sizes
                && matches!(e.kind(), FailureKind::Crc | FailureKind::Inconsistent)
                && matches!(scheme, CopyType::Xor | CopyType::Rs) =>
        {
            let before = lost.clone();
            if !loss.any() {
                loss = check_files(job, dset, Depth::FULL)
                    .loss(true)
                    .as_seen_by(scheme);
            }
            lost = gather_losses(set, loss)?;
            if lost == before {
                return Err(RebuildError::Apply(e));
            }
            drop_lost_agreed(job, set, dset, loss)?;
            run_set_rebuild(job, dset, ds, rd, set, &lost, loss)?
        }
        r => r?,
    };
    finish_round(job, &round, rebuilt, loss)
}

/// What every round of one set's rebuild shares.
struct Round<'a> {
    dset: DatasetId,
    ds: &'a DatasetDesc,
    rd: &'a RedDesc,
    set: &'a dyn Comm,
    dir: &'a DirPair,
    recorded_count: Option<u64>,
}

/// PARTNER after a size check: the set rebuilds what was lost while a
/// thread of each member checks the CRC32s of what it does not lend (the
/// receiver checks every lent byte), so the check and the transfers
/// overlap; damage the check finds is rebuilt in a second round. A member
/// whose first round failed on its own (not in the set's agreement) says
/// so in the agreement after the check: nobody starts a second round, and
/// the caller's vote deletes the dataset.
fn partner_rounds(
    job: &mut Job,
    round: &Round,
    lost: &[MemberLoss],
    loss: MemberLoss,
) -> Result<(), RebuildError> {
    let lends = apply::partner_lends(lost, round.set.rank());
    let depth = Depth {
        own_crc: !lends.own && !loss.own,
        held_crc: !lends.copies && !loss.held,
    };
    let items = check::crc_items(job, round.dset, depth);
    let (first, found) = std::thread::scope(|s| {
        let checker = s.spawn(|| check::verify_items(&items));
        let first = partner_round(job, round, lost, loss);
        // A checker that died proves nothing intact.
        (first, checker.join().unwrap_or(MemberLoss::ALL))
    });
    let (again, failed) = gather_round(round.set, found, first.is_err())?;
    first?;
    if failed || !again.iter().any(|l| l.any()) {
        return Ok(());
    }
    partner_round(job, round, &again, found)
}

/// One PARTNER round: drop what was lost, rebuild it, record it.
fn partner_round(
    job: &mut Job,
    round: &Round,
    lost: &[MemberLoss],
    loss: MemberLoss,
) -> Result<(), RebuildError> {
    drop_lost_agreed(job, round.set, round.dset, loss)?;
    let rebuilt = run_set_rebuild(job, round.dset, round.ds, round.rd, round.set, lost, loss)?;
    finish_round(job, round, rebuilt, loss)
}

/// The losses the members' checks found after a round, and whether any
/// member's round failed.
fn gather_round(
    set: &dyn Comm,
    loss: MemberLoss,
    failed: bool,
) -> Result<(Vec<MemberLoss>, bool), CommError> {
    let mine = u8::from(loss.own) | u8::from(loss.held) << 1 | u8::from(failed) << 2;
    let flags = set.allgather_bytes(&[mine])?;
    let bits: Vec<u8> = flags
        .iter()
        .map(|f| f.first().copied().unwrap_or(4))
        .collect();
    let losses = bits
        .iter()
        .map(|b| MemberLoss {
            own: b & 1 != 0,
            held: b & 2 != 0,
        })
        .collect();
    Ok((losses, bits.iter().any(|b| b & 4 != 0)))
}

/// After a round: the partner tag, the rebuilt application files moved
/// where their records say, the rebuilt redundancy files recorded.
fn finish_round(
    job: &mut Job,
    round: &Round,
    rebuilt: apply::Rebuilt,
    loss: MemberLoss,
) -> Result<(), RebuildError> {
    let dset = round.dset;
    // The owner of this rank's copies may now run on another node.
    let tagged = tag_partner_node(job, dset, round.rd);
    if !loss.any() {
        if tagged {
            job.write_filemap()?;
        }
        return Ok(());
    }
    if loss.own {
        place_rebuilt_files(
            job,
            dset,
            round.dir,
            rebuilt.app_files,
            round.recorded_count,
        )?;
    }
    let me = job.rank();
    for fe in rebuilt.redundancy_files {
        let logical = logical_in(round.dir, &fe.path).to_record();
        let mut m = fe.meta.clone();
        m.file = Some(logical.clone());
        job.filemap.set_meta(dset, me, &logical, &m);
    }
    Ok(job.write_filemap()?)
}

/// Run the set's rebuild with what this rank still has.
fn run_set_rebuild(
    job: &mut Job,
    dset: DatasetId,
    ds: &DatasetDesc,
    rd: &RedDesc,
    set_comm: &dyn Comm,
    lost: &[MemberLoss],
    loss: MemberLoss,
) -> Result<apply::Rebuilt, RebuildError> {
    let scheme = rd.copy_type;
    let me = job.rank();
    let dir = DirPair::of(
        &job.node,
        job.dataset_dir(&LogicalPath::new(&rd.directory), dset),
    );
    // The CRCs go with the files: an XOR/RS survivor checks them in the
    // rebuild's read of the same bytes (so a bit flipped since the check
    // still fails the set instead of reaching a rebuilt member); PARTNER's
    // receiver checks each arriving byte against them.
    let mine = (!loss.own).then(|| member_files(job, dset));
    let red = (!loss.held).then(|| {
        job.redundancy_files(dset)
            .into_iter()
            .map(|(f, meta)| FileEntry {
                path: job.real(&LogicalPath::new(&f)).into_path_buf(),
                meta,
            })
            .collect::<Vec<_>>()
    });
    let set = SetInfo {
        comm: set_comm,
        group_id: rd.group_id,
        world_ranks: rd.members.clone(),
        world_size: job.world.size() as u64,
        dataset: ds.clone(),
        scheme,
        set_failures: set_failures_of(rd),
        piece_bytes: job.piece_bytes,
    };
    let mut books = Books {
        filemap: &mut job.filemap,
        path: &job.filemap_file,
        rank: me,
    };
    let mut reg = |_owner: i64, real: &Path, meta: &Meta| books.register(dset, &dir, real, meta);
    Ok(apply::rebuild(
        &set,
        lost,
        mine.as_ref(),
        red.as_deref(),
        &dir.real,
        &mut reg,
    )?)
}

/// Rebuilt application files are written at `dir/<basename>`; move each to
/// where its recorded logical path says it lives (entry first, then the
/// file).
fn place_rebuilt_files(
    job: &mut Job,
    dset: DatasetId,
    dir: &DirPair,
    files: Vec<FileEntry>,
    recorded_count: Option<u64>,
) -> Result<(), RebuildError> {
    let me = job.rank();
    let count = files.len() as u64;
    if let Some(n) = recorded_count.filter(|&n| n != count) {
        return Err(RebuildError::CountMismatch {
            dset,
            came: count,
            recorded: n,
        });
    }
    for fe in files {
        let logical = fe
            .meta
            .file
            .clone()
            .ok_or_else(|| RebuildError::NoRecordedName {
                path: fe.path.clone(),
            })?;
        let target = job.real(&LogicalPath::new(&logical));
        let stray = logical_in(dir, &fe.path).to_record();
        job.filemap.remove_file(dset, me, &stray);
        job.filemap.add_file(dset, me, &logical);
        job.filemap.set_meta(dset, me, &logical, &fe.meta);
        job.write_filemap()?;
        if *target != *fe.path {
            if let Some(parent) = target.parent() {
                dirs::create_private_dirs_below(&dir.real, parent)?;
            }
            fs::rename(&fe.path, &target).map_err(|source| RebuildError::Io {
                path: target.to_path_buf(),
                op: "rename",
                source,
            })?;
        }
    }
    job.filemap.set_expected_files(dset, me, count);
    Ok(())
}
