//! Protect a dataset at complete: record the CRC32 of every application
//! file and apply the dataset's redundancy scheme through its
//! [`RedundancySet`] (collective over the world: every rank calls it when
//! every rank's files are valid).

use std::path::Path;

use super::{logical_in, Books, RedundancySet, PARTNER_NODE_TAG};
use crate::cache::Job;
use crate::error::EncodeError;
use crate::error::{ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::records::meta::Meta;
use crate::records::reddesc::{CopyType, RedDesc};
use crate::redundancy::apply::{self, ApplyError, FileEntry, MemberFiles, SetInfo};
use crate::storage::node::{DirPair, LogicalPath};
use crate::storage::verify::crc_of_file;

/// The descriptor's SET_FAILURES as the set operations take it (read for
/// RS only; a descriptor without one tolerates 2, at least 1).
pub(crate) fn set_failures_of(rd: &RedDesc) -> usize {
    rd.set_failures.unwrap_or(2).max(1) as usize
}

/// This rank's application files of `dset` as the set operations want them.
pub(crate) fn member_files(job: &Job, dset: DatasetId) -> MemberFiles {
    MemberFiles {
        files: job
            .app_files(dset)
            .into_iter()
            .map(|(f, meta)| FileEntry {
                path: job.real(&LogicalPath::new(&f)).into_path_buf(),
                meta,
            })
            .collect(),
    }
}

/// The node of the rank whose copies a PARTNER member holds (its left
/// neighbour in the set), for the filemap's `PARTNER` tag.
pub(crate) fn partner_node(job: &Job, rd: &RedDesc) -> Option<String> {
    let n = rd.members.len() as u64;
    if rd.copy_type != CopyType::Partner || n < 2 {
        return None;
    }
    let owner = rd.members[((rd.group_rank + n - 1) % n) as usize];
    usize::try_from(owner)
        .ok()
        .and_then(|o| job.node_names.get(o))
        .cloned()
}

/// Record the node whose copies this rank holds (PARTNER only), in memory;
/// the caller writes the filemap. Returns whether a tag was set.
pub(crate) fn tag_partner_node(job: &mut Job, dset: DatasetId, rd: &RedDesc) -> bool {
    let Some(node) = partner_node(job, rd) else {
        return false;
    };
    let me = job.rank();
    // The tag name is not one of the filemap's own keys, so this cannot fail.
    job.filemap
        .set_tag(dset, me, PARTNER_NODE_TAG, &node)
        .is_ok()
}

/// Record the CRC32 of every application file of `dset` and apply the
/// dataset's redundancy scheme. Each file is read once: SINGLE only
/// computes the CRCs; the other schemes compute them from the same read
/// that feeds the encode ([`apply::encode`]); a CRC the filemap already
/// records (a fetched file's) is checked instead. The final metas are left
/// in memory for the caller to write with the outcome of its vote
/// (redundancy files were recorded on disk before they were created).
/// Collective over the world.
pub fn encode(job: &mut Job, dset: DatasetId) -> ScrResult<()> {
    let fail = |source: EncodeError| ScrError::Encode { dset, source };
    let me = job.rank();
    let rd = job
        .filemap
        .desc(dset, me)?
        .ok_or_else(|| fail(EncodeError::NoDescriptor))?;
    if rd.copy_type == CopyType::Single {
        return crc_single(job, dset).map_err(fail);
    }
    let di = job
        .sets
        .iter()
        .position(|d| d.descriptor.index == rd.index)
        .ok_or_else(|| fail(EncodeError::NotInRun { index: rd.index }))?;
    let dataset = job
        .dataset(dset)
        .ok_or_else(|| fail(EncodeError::NoDatasetRecord))?;
    let app = job.app_files(dset);
    let mine = member_files(job, dset);
    let dir = DirPair::of(
        &job.node,
        job.dataset_dir(&LogicalPath::new(&rd.directory), dset),
    );
    let (world_size, piece_bytes) = (job.world.size() as u64, job.piece_bytes);
    let RedundancySet {
        descriptor, comm, ..
    } = &job.sets[di];
    let comm = comm.as_deref().ok_or_else(|| {
        fail(EncodeError::NoSetComm {
            scheme: rd.copy_type,
        })
    })?;
    let set = SetInfo {
        comm,
        group_id: rd.group_id,
        world_ranks: descriptor.members.clone(),
        world_size,
        dataset,
        scheme: rd.copy_type,
        set_failures: set_failures_of(&rd),
        piece_bytes,
        survivors_verified: false,
    };
    let mut books = Books {
        filemap: &mut job.filemap,
        path: &job.filemap_file,
        rank: me,
    };
    let mut reg = |_owner: i64, real: &Path, meta: &Meta| books.register(dset, &dir, real, meta);
    let written = apply::encode(&set, &mine, &dir.real, &mut reg).map_err(|e| fail(e.into()))?;
    tag_partner_node(job, dset, &rd);
    if written.app_crcs.len() != app.len() {
        return Err(fail(EncodeError::CrcCount {
            returned: written.app_crcs.len(),
            files: app.len(),
        }));
    }
    for ((f, mut meta), crc) in app.into_iter().zip(written.app_crcs) {
        meta.crc32 = Some(crc);
        job.filemap.set_meta(dset, me, &f, &meta);
    }
    // Final meta (size, CRC) of every redundancy file.
    for fe in written.redundancy {
        let logical = logical_in(&dir, &fe.path).to_record();
        let mut m = fe.meta.clone();
        m.file = Some(logical.clone());
        job.filemap.set_meta(dset, me, &logical, &m);
    }
    Ok(())
}

/// SINGLE: no set to talk to. A CRC already recorded was checked by
/// whoever recorded it (a fetch verifies every file as it copies it), so
/// only missing ones are computed. Updates the filemap in memory.
fn crc_single(job: &mut Job, dset: DatasetId) -> Result<(), EncodeError> {
    let me = job.rank();
    for (f, mut meta) in job.app_files(dset) {
        if meta.crc32.is_some() {
            continue;
        }
        let real = job.real(&LogicalPath::new(&f)).into_path_buf();
        let (crc, len) = crc_of_file(&real).map_err(|source| {
            EncodeError::Apply(ApplyError::Io {
                world_rank: me.as_i64(),
                path: real.clone(),
                offset: None,
                source,
            })
        })?;
        if !meta.size_matches(len) {
            return Err(EncodeError::SizeChanged {
                path: real,
                len,
                recorded: meta.size_bytes,
            });
        }
        meta.crc32 = Some(crc);
        job.filemap.set_meta(dset, me, &f, &meta);
    }
    Ok(())
}
