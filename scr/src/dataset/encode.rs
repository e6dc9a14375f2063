//! Protect a dataset at complete: record the CRC32 of every application
//! file and apply the dataset's redundancy scheme through its
//! [`RedundancySet`] (collective over the world: every rank calls it when
//! every rank's files are valid).

use std::path::Path;

use super::{logical_in, Books, PARTNER_NODE_TAG};
use crate::cache::Job;
use crate::error::EncodeError;
use crate::error::{ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::records::filemap::Filemap;
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
    let (task, comm) = EncodeTask::prepare(job, dset)?;
    let me = job.rank();
    let result = task.run(comm.as_deref(), &mut job.filemap);
    if let Some(PartnerTag(node)) = result.as_ref().ok().and_then(|t| t.clone()) {
        // The tag name is not one of the filemap's own keys: cannot fail.
        let _ = job.filemap.set_tag(dset, me, PARTNER_NODE_TAG, &node);
    }
    task.give_back(job, comm);
    result.map(|_| ())
}

/// The PARTNER tag a finished encode asks the caller to record.
#[derive(Debug, Clone)]
pub(crate) struct PartnerTag(pub String);

/// Everything the encode of one rank's part of a dataset needs, owned, so
/// it can run on another thread (SCR_ENCODE_ASYNC, [`super::protect`])
/// with a copy of the filemap and the set communicator lent to it.
#[derive(Debug, Clone)]
pub(crate) struct EncodeTask {
    dset: DatasetId,
    rank: crate::ids::Rank,
    scheme: CopyType,
    /// Index of the descriptor in [`Job::sets`] (its communicator goes back
    /// there).
    set: Option<usize>,
    /// SINGLE: the files with their meta and real path.
    single: Vec<(String, Meta, std::path::PathBuf)>,
    /// The set schemes' inputs.
    group_id: i64,
    world_ranks: Vec<i64>,
    world_size: u64,
    dataset: Option<crate::records::Dataset>,
    set_failures: usize,
    piece_bytes: usize,
    app: Vec<(String, Meta)>,
    mine: MemberFiles,
    dir: Option<DirPair>,
    partner_node: Option<String>,
    filemap_file: crate::storage::node::RealPath,
}

impl EncodeTask {
    /// Gather what the encode of `dset` needs and take the set
    /// communicator out of the job (SINGLE has none). Give it back with
    /// [`EncodeTask::give_back`].
    pub(crate) fn prepare(
        job: &mut Job,
        dset: DatasetId,
    ) -> ScrResult<(EncodeTask, Option<Box<dyn crate::comm::Comm>>)> {
        let fail = |source: EncodeError| ScrError::Encode { dset, source };
        let me = job.rank();
        let rd = job
            .filemap
            .desc(dset, me)?
            .ok_or_else(|| fail(EncodeError::NoDescriptor))?;
        let mut task = EncodeTask {
            dset,
            rank: me,
            scheme: rd.copy_type,
            set: None,
            single: Vec::new(),
            group_id: rd.group_id,
            world_ranks: Vec::new(),
            world_size: job.world.size() as u64,
            dataset: None,
            set_failures: set_failures_of(&rd),
            piece_bytes: job.piece_bytes,
            app: Vec::new(),
            mine: MemberFiles::default(),
            dir: None,
            partner_node: None,
            filemap_file: job.filemap_file.clone(),
        };
        if rd.copy_type == CopyType::Single {
            task.single = job
                .app_files(dset)
                .into_iter()
                .map(|(f, m)| {
                    let real = job.real(&LogicalPath::new(&f)).into_path_buf();
                    (f, m, real)
                })
                .collect();
            return Ok((task, None));
        }
        let di = job
            .sets
            .iter()
            .position(|d| d.descriptor.index == rd.index)
            .ok_or_else(|| fail(EncodeError::NotInRun { index: rd.index }))?;
        task.dataset = Some(
            job.dataset(dset)
                .ok_or_else(|| fail(EncodeError::NoDatasetRecord))?,
        );
        task.app = job.app_files(dset);
        task.mine = member_files(job, dset);
        task.dir = Some(DirPair::of(
            &job.node,
            job.dataset_dir(&LogicalPath::new(&rd.directory), dset),
        ));
        task.partner_node = partner_node(job, &rd);
        task.world_ranks = job.sets[di].descriptor.members.clone();
        let comm = job.sets[di].comm.take().ok_or_else(|| {
            fail(EncodeError::NoSetComm {
                scheme: rd.copy_type,
            })
        })?;
        task.set = Some(di);
        Ok((task, Some(comm)))
    }

    /// Put the set communicator back into the job.
    pub(crate) fn give_back(&self, job: &mut Job, comm: Option<Box<dyn crate::comm::Comm>>) {
        if let (Some(di), Some(c)) = (self.set, comm) {
            job.sets[di].comm = Some(c);
        }
    }

    /// Compute the CRCs and apply the scheme (collective over `comm` for
    /// the set schemes), recording every meta in `filemap` (redundancy
    /// files on disk before they are created). Returns the PARTNER tag to
    /// record, if any.
    pub(crate) fn run(
        &self,
        comm: Option<&dyn crate::comm::Comm>,
        filemap: &mut Filemap,
    ) -> ScrResult<Option<PartnerTag>> {
        let dset = self.dset;
        let fail = |source: EncodeError| ScrError::Encode { dset, source };
        let me = self.rank;
        if self.scheme == CopyType::Single {
            return self.crc_single(filemap).map(|_| None).map_err(fail);
        }
        let comm = comm.ok_or_else(|| {
            fail(EncodeError::NoSetComm {
                scheme: self.scheme,
            })
        })?;
        let dataset = self
            .dataset
            .clone()
            .ok_or_else(|| fail(EncodeError::NoDatasetRecord))?;
        let dir = self.dir.as_ref().ok_or_else(|| {
            fail(EncodeError::NoSetComm {
                scheme: self.scheme,
            })
        })?;
        let set = SetInfo {
            comm,
            group_id: self.group_id,
            world_ranks: self.world_ranks.clone(),
            world_size: self.world_size,
            dataset,
            scheme: self.scheme,
            set_failures: self.set_failures,
            piece_bytes: self.piece_bytes,
        };
        let mut books = Books {
            filemap,
            path: &self.filemap_file,
            rank: me,
        };
        let mut reg = |_owner: i64, real: &Path, meta: &Meta| books.register(dset, dir, real, meta);
        let written =
            apply::encode(&set, &self.mine, &dir.real, &mut reg).map_err(|e| fail(e.into()))?;
        if written.app_crcs.len() != self.app.len() {
            return Err(fail(EncodeError::CrcCount {
                returned: written.app_crcs.len(),
                files: self.app.len(),
            }));
        }
        for ((f, meta), crc) in self.app.iter().zip(written.app_crcs) {
            let mut meta = meta.clone();
            meta.crc32 = Some(crc);
            filemap.set_meta(dset, me, f, &meta);
        }
        // Final meta (size, CRC) of every redundancy file.
        for fe in written.redundancy {
            let logical = logical_in(dir, &fe.path).to_record();
            let mut m = fe.meta.clone();
            m.file = Some(logical.clone());
            filemap.set_meta(dset, me, &logical, &m);
        }
        Ok(self.partner_node.clone().map(PartnerTag))
    }

    /// SINGLE: no set to talk to. A CRC already recorded was checked by
    /// whoever recorded it (a fetch verifies every file as it copies it), so
    /// only missing ones are computed. Updates `filemap` in memory.
    fn crc_single(&self, filemap: &mut Filemap) -> Result<(), EncodeError> {
        let me = self.rank;
        for (f, meta, real) in &self.single {
            if meta.crc32.is_some() {
                continue;
            }
            let (crc, len) = crc_of_file(real).map_err(|source| {
                EncodeError::Apply(ApplyError::Io {
                    world_rank: me.as_i64(),
                    path: real.clone(),
                    offset: None,
                    source,
                })
            })?;
            if !meta.size_matches(len) {
                return Err(EncodeError::SizeChanged {
                    path: real.clone(),
                    len,
                    recorded: meta.size_bytes,
                });
            }
            let mut meta = meta.clone();
            meta.crc32 = Some(crc);
            filemap.set_meta(self.dset, me, f, &meta);
        }
        Ok(())
    }
}
