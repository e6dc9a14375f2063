//! Rebuild what a dataset's scheme allows after some rank lost files at
//! restart (scr_reddesc_recover; collective over the world).

use std::fs;
use std::path::Path;

use super::encode::{member_files, set_failures_of, tag_partner_node};
use super::{logical_in, Books};
use crate::cache::Job;
use crate::comm::{Comm, CommError};
use crate::error::RebuildError;
use crate::ids::DatasetId;
use crate::records::dataset::Dataset as DatasetDesc;
use crate::records::meta::Meta;
use crate::records::reddesc::{CopyType, RedDesc};
use crate::redundancy::apply::{self, FileEntry, MemberFiles, MemberLoss, SetInfo};
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

/// Rebuild what the scheme allows after some rank lost files of `dset`
/// (collective over the world). `loss`: what this rank found missing or
/// damaged — its own application files, the redundancy files it holds, or
/// both. PARTNER rebuilds each from where an intact copy is; XOR and RS
/// rebuild a member that lost anything whole. A rank of a SINGLE dataset
/// that lost nothing succeeds: the ranks that lost files fail, and the
/// caller's vote deletes the dataset everywhere.
pub fn rebuild_dataset(
    job: &mut Job,
    dset: DatasetId,
    ds: &DatasetDesc,
    rd: &RedDesc,
    loss: MemberLoss,
) -> Result<(), RebuildError> {
    let scheme = rd.copy_type;
    let loss = loss.as_seen_by(scheme);
    // Every rank splits the world the same way: color = set id.
    let set_comm: Box<dyn Comm> = job
        .world
        .split(Some(rd.group_id as u32), rd.group_rank as i64)?
        .ok_or(RebuildError::NoSetComm)?;
    let lost = gather_losses(set_comm.as_ref(), loss)?;
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
    fs::create_dir_all(&cache_real).map_err(|source| RebuildError::Io {
        path: cache_real.to_path_buf(),
        op: "create cache directory",
        source,
    })?;
    dirs::create_private_dirs_below(&cache_real, &dir.real)?;
    // The number of application files this rank recorded, if it kept a
    // record: what comes back must match it.
    let recorded_count = job.filemap.expected_files(dset, job.rank());
    if loss.any() {
        drop_lost_entries(job, dset, loss)?;
    }
    let rebuilt = run_set_rebuild(job, dset, ds, rd, set_comm.as_ref(), &lost, loss)?;
    // The owner of this rank's copies may now run on another node.
    let tagged = tag_partner_node(job, dset, rd);
    if !loss.any() {
        if tagged {
            job.write_filemap()?;
        }
        return Ok(());
    }
    if loss.own {
        place_rebuilt_files(job, dset, &dir, rebuilt.app_files, recorded_count)?;
    }
    let me = job.rank();
    for fe in rebuilt.redundancy_files {
        let logical = logical_in(&dir, &fe.path).to_record();
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
    // XOR/RS survivors' files were verified (size and CRC32) just before
    // this call, so their CRCs are left out: the set operations then skip a
    // second full read (rebuilt files are still checked against the CRCs in
    // the redundancy headers). PARTNER keeps them: the sender does not read
    // them, the receiver checks each arriving byte against them.
    let unverified = |mut v: Vec<FileEntry>| {
        if scheme != CopyType::Partner {
            for fe in &mut v {
                fe.meta.crc32 = None;
            }
        }
        v
    };
    let mine = (!loss.own).then(|| MemberFiles {
        files: unverified(member_files(job, dset).files),
    });
    let red = (!loss.held).then(|| {
        unverified(
            job.redundancy_files(dset)
                .into_iter()
                .map(|(f, meta)| FileEntry {
                    path: job.real(&LogicalPath::new(&f)).into_path_buf(),
                    meta,
                })
                .collect(),
        )
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
        survivors_verified: true,
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
