//! Applying and recovering redundancy for a dataset: the bridge between the
//! cache tier's bookkeeping (filemaps, logical paths) and the collective set
//! operations of [`crate::redundancy::apply`].

use std::fs;
use std::path::{Path, PathBuf};

use super::error::io_err;
use super::restart::world_ranks_of;
use super::{crc_of_file, Job, ScrError};
use crate::comm::Comm;
use crate::records::dataset::Dataset;
use crate::records::meta::Meta;
use crate::records::reddesc::{CopyType, RedDesc};
use crate::redundancy::apply::{self, ApplyError, FileEntry, MemberFiles, MemberLoss, SetInfo};
use crate::storage::dirs;

/// The descriptor's SET_FAILURES as the set operations take it (read for
/// RS only; a descriptor without one tolerates 2, at least 1).
fn set_failures_of(rd: &RedDesc) -> usize {
    rd.set_failures.unwrap_or(2).max(1) as usize
}

/// This rank's application files of `dset` as the set operations want them.
fn member_files(job: &Job, dset: i64) -> MemberFiles {
    MemberFiles {
        files: job
            .app_files(dset)
            .into_iter()
            .map(|(f, meta)| FileEntry {
                path: job.real(Path::new(&f)),
                meta,
            })
            .collect(),
    }
}

fn redundancy_entries(job: &Job, dset: i64) -> Vec<FileEntry> {
    job.redundancy_files(dset)
        .into_iter()
        .map(|(f, meta)| FileEntry {
            path: job.real(Path::new(&f)),
            meta,
        })
        .collect()
}

/// The logical path of a file the set operations created at `real` in the
/// dataset directory whose logical path is `dir_logical` and real path
/// `dir_real`.
fn logical_of(real: &Path, dir_real: &Path, dir_logical: &Path) -> String {
    match real.strip_prefix(dir_real) {
        Ok(rel) => dir_logical.join(rel).to_string_lossy().into_owned(),
        Err(_) => real.to_string_lossy().into_owned(),
    }
}

/// Record a redundancy file in this rank's filemap (under this rank: the
/// file stays with whoever plays this rank) before it is created.
fn register_into(
    job: &mut Job,
    dset: i64,
    dir_real: &Path,
    dir_logical: &Path,
    real: &Path,
    meta: &Meta,
) -> Result<(), ApplyError> {
    let me = job.rank();
    let logical = logical_of(real, dir_real, dir_logical);
    let mut m = meta.clone();
    m.file = Some(logical.clone());
    job.filemap.add_file(dset, me, &logical);
    job.filemap.set_meta(dset, me, &logical, &m);
    job.write_filemap().map_err(|e| ApplyError::Register {
        world_rank: me,
        path: PathBuf::from(&logical),
        source: Box::new(e),
    })
}

/// Tag name under which a PARTNER holder records the node of the rank
/// whose copies it holds (SCR's filemap `PARTNER` tag), so a scavenge that
/// cannot reach that node knows to ask this one (`scr copy --partner`).
pub const PARTNER_NODE_TAG: &str = "PARTNER";

/// Record, for the PARTNER scheme, the node of the rank whose copies this
/// rank holds (its left neighbour in the set). Written with the filemap
/// by the caller. Returns whether a tag was set.
fn record_partner_node(job: &mut Job, dset: i64, rd: &RedDesc) -> bool {
    if rd.copy_type != CopyType::Partner {
        return false;
    }
    let members = world_ranks_of(rd);
    let n = members.len() as u64;
    if n < 2 {
        return false;
    }
    let owner = members[((rd.group_rank + n - 1) % n) as usize];
    let Some(node) = usize::try_from(owner)
        .ok()
        .and_then(|o| job.node_names.get(o))
        .cloned()
    else {
        return false;
    };
    let me = job.rank();
    // The tag name is not one of the filemap's own keys, so this cannot fail.
    job.filemap
        .set_tag(dset, me, PARTNER_NODE_TAG, &node)
        .is_ok()
}

/// Record the CRC32 of every application file of `dset` and apply the
/// dataset's redundancy scheme at complete (collective over the world:
/// every rank calls it when every rank's files are valid). Each file is
/// read once: SINGLE only computes the CRCs; the other schemes compute them
/// from the same read that feeds the encode ([`apply::encode`]); a CRC the
/// filemap already records (a fetched file's) is checked instead. Writes
/// the filemap with the final metas.
pub fn encode(job: &mut Job, dset: i64) -> Result<(), ScrError> {
    let me = job.rank();
    let rd = job
        .filemap
        .desc(dset, me)?
        .ok_or_else(|| ScrError::Redundancy(format!("dataset {dset}: no redundancy descriptor")))?;
    let scheme = rd.copy_type;
    if scheme == CopyType::Single {
        // No set to talk to (SINGLE has no set communicator). A CRC already
        // recorded was checked by whoever recorded it (a fetch verifies
        // every file as it copies it), so only missing ones are computed.
        for (f, mut meta) in job.app_files(dset) {
            if meta.crc32.is_some() {
                continue;
            }
            let real = job.real(Path::new(&f));
            let (crc, len) = crc_of_file(&real).map_err(io_err(&real, "CRC32"))?;
            if !meta.size_matches(len) {
                return Err(ScrError::Redundancy(format!(
                    "{}: {len} bytes, but {:?} were recorded at complete",
                    real.display(),
                    meta.size_bytes
                )));
            }
            meta.crc32 = Some(crc);
            job.filemap.set_meta(dset, me, &f, &meta);
        }
        return job.write_filemap();
    }
    let di = job
        .descs
        .iter()
        .position(|d| d.record.index == rd.index)
        .ok_or_else(|| {
            ScrError::Redundancy(format!(
                "dataset {dset}: descriptor {} not in this run",
                rd.index
            ))
        })?;
    let dataset = job
        .dataset(dset)
        .ok_or_else(|| ScrError::Redundancy(format!("dataset {dset}: no dataset descriptor")))?;
    let app = job.app_files(dset);
    let mine = member_files(job, dset);
    let dir_logical = job.dataset_dir(Path::new(&rd.directory), dset);
    let dir_real = job.real(&dir_logical);
    let members = job.descs[di].members.clone();
    let comm = job.descs[di]
        .comm
        .take()
        .ok_or_else(|| ScrError::Redundancy("set communicator missing".into()))?;
    let result = {
        let set = SetInfo {
            comm: comm.as_ref(),
            group_id: rd.group_id,
            world_ranks: members,
            world_size: job.world.size() as u64,
            dataset,
            scheme,
            set_failures: set_failures_of(&rd),
            piece_bytes: job.piece_bytes,
        };
        let mut reg = |_owner: i64, real: &Path, meta: &Meta| {
            register_into(job, dset, &dir_real, &dir_logical, real, meta)
        };
        apply::encode(&set, &mine, &dir_real, &mut reg)
    };
    job.descs[di].comm = Some(comm);
    let written = result.map_err(|e| ScrError::Redundancy(e.to_string()))?;
    record_partner_node(job, dset, &rd);
    if written.app_crcs.len() != app.len() {
        return Err(ScrError::Redundancy(format!(
            "dataset {dset}: the encode returned {} CRCs for {} files",
            written.app_crcs.len(),
            app.len()
        )));
    }
    for ((f, mut meta), crc) in app.into_iter().zip(written.app_crcs) {
        meta.crc32 = Some(crc);
        job.filemap.set_meta(dset, me, &f, &meta);
    }
    // Final meta (size, CRC) of every redundancy file.
    for fe in written.redundancy {
        let logical = logical_of(&fe.path, &dir_real, &dir_logical);
        let mut m = fe.meta.clone();
        m.file = Some(logical.clone());
        job.filemap.set_meta(dset, me, &logical, &m);
    }
    job.write_filemap()
}

/// Rebuild what the scheme allows after some rank lost files of `dset`
/// (collective over the world). `loss`: what this rank found missing or
/// damaged — its own application files, the redundancy files it holds, or
/// both. PARTNER rebuilds each from where an intact copy is; XOR and RS
/// rebuild a member that lost anything whole.
pub fn rebuild_dataset(
    job: &mut Job,
    dset: i64,
    ds: &Dataset,
    rd: &RedDesc,
    loss: MemberLoss,
) -> Result<(), String> {
    let scheme = rd.copy_type;
    let loss = loss.as_seen_by(scheme);
    // Every rank splits the world the same way: color = set id.
    let set_comm: Box<dyn Comm> = match job
        .world
        .split(Some(rd.group_id as u32), rd.group_rank as i64)
    {
        Ok(Some(c)) => c,
        Ok(None) => return Err("no set communicator".into()),
        Err(e) => return Err(e.to_string()),
    };
    let flags = set_comm
        .allgather_bytes(&[u8::from(loss.own) | u8::from(loss.held) << 1])
        .map_err(|e| e.to_string())?;
    let lost: Vec<MemberLoss> = flags
        .iter()
        .map(|f| {
            let b = f.first().copied().unwrap_or(0);
            MemberLoss {
                own: b & 1 != 0,
                held: b & 2 != 0,
            }
        })
        .collect();
    if !lost.iter().any(|l| l.any()) {
        return Ok(());
    }
    if scheme == CopyType::Single {
        return Err(if loss.any() {
            "SINGLE keeps no redundancy: this rank's files are gone".into()
        } else {
            String::new()
        });
    }
    let me = job.rank();
    let dir_logical = job.dataset_dir(Path::new(&rd.directory), dset);
    let dir_real = job.real(&dir_logical);
    let cache_real = job.real(Path::new(&rd.directory));
    fs::create_dir_all(&cache_real)
        .map_err(|e| e.to_string())
        .and_then(|_| {
            dirs::create_private_dirs_below(&cache_real, &dir_real).map_err(|e| e.to_string())
        })?;
    // The number of application files this rank recorded, if it kept a
    // record: what comes back must match it.
    let recorded_count = job.filemap.expected_files(dset, me);
    if loss.any() {
        // What was lost starts from a clean slate: whatever partial entries
        // and files it has are unusable. A whole loss drops every entry
        // (also one without meta); otherwise only the lost kind goes.
        let app: Vec<String> = job.app_files(dset).into_iter().map(|(f, _)| f).collect();
        for f in job.filemap.list_files(dset, me) {
            let is_app = app.contains(&f);
            if loss.is_whole() || (loss.own && is_app) || (loss.held && !is_app) {
                let _ = fs::remove_file(job.real(Path::new(&f)));
                job.filemap.remove_file(dset, me, &f);
            }
        }
        if let Err(e) = job.write_filemap() {
            return Err(e.to_string());
        }
    }
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
    let red = (!loss.held).then(|| unverified(redundancy_entries(job, dset)));
    let set = SetInfo {
        comm: set_comm.as_ref(),
        group_id: rd.group_id,
        world_ranks: world_ranks_of(rd),
        world_size: job.world.size() as u64,
        dataset: ds.clone(),
        scheme,
        set_failures: set_failures_of(rd),
        piece_bytes: job.piece_bytes,
    };
    let result = {
        let mut reg = |_owner: i64, real: &Path, meta: &Meta| {
            register_into(job, dset, &dir_real, &dir_logical, real, meta)
        };
        apply::rebuild(
            &set,
            &lost,
            mine.as_ref(),
            red.as_deref(),
            &dir_real,
            &mut reg,
        )
    };
    let rebuilt = result.map_err(|e| e.to_string())?;
    // The owner of this rank's copies may now run on another node.
    let tagged = record_partner_node(job, dset, rd);
    if !loss.any() {
        return if tagged {
            job.write_filemap().map_err(|e| e.to_string())
        } else {
            Ok(())
        };
    }
    if loss.own {
        // Rebuilt application files are written at dir/<basename>; move
        // each to where its recorded logical path says it lives.
        let count = rebuilt.app_files.len() as u64;
        if let Some(n) = recorded_count.filter(|&n| n != count) {
            return Err(format!(
                "{count} files of dataset {dset} came back but {n} were recorded"
            ));
        }
        for fe in rebuilt.app_files {
            let logical = fe.meta.file.clone().ok_or_else(|| {
                format!("rebuilt file {} has no recorded name", fe.path.display())
            })?;
            let target = job.real(Path::new(&logical));
            // Entry first, then the file.
            let stray = logical_of(&fe.path, &dir_real, &dir_logical);
            job.filemap.remove_file(dset, me, &stray);
            job.filemap.add_file(dset, me, &logical);
            job.filemap.set_meta(dset, me, &logical, &fe.meta);
            job.write_filemap().map_err(|e| e.to_string())?;
            if target != fe.path {
                if let Some(parent) = target.parent() {
                    dirs::create_private_dirs_below(&dir_real, parent)
                        .map_err(|e| e.to_string())?;
                }
                fs::rename(&fe.path, &target).map_err(|e| format!("{}: {e}", target.display()))?;
            }
        }
        job.filemap.set_expected_files(dset, me, count);
    }
    for fe in rebuilt.redundancy_files {
        let logical = logical_of(&fe.path, &dir_real, &dir_logical);
        let mut m = fe.meta.clone();
        m.file = Some(logical.clone());
        job.filemap.set_meta(dset, me, &logical, &m);
    }
    job.write_filemap().map_err(|e| e.to_string())?;
    Ok(())
}
