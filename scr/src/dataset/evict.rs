//! Deleting a dataset from cache, on one rank or on every rank, and
//! listing what the job has in cache anywhere (scr_cache_delete,
//! scr_cache_purge).

use crate::comm::ReduceOp;
use crate::ids::DatasetId;
use crate::ids::Rank;
use crate::storage::node::{LogicalPath, RealPath};
use std::fs;

use crate::cache::Job;
use crate::error::{ScrError, ScrResult};

impl Job {
    /// Delete every file this process's filemap lists for `dset` (any
    /// rank key), then the entries, then rewrite the filemap; remove the
    /// dataset directory when empty. The entries of a bypass dataset name
    /// files in the prefix directory: those are forgotten, never deleted
    /// (SCR_Delete removes a dataset from the prefix). Not collective.
    pub fn delete_dataset_local(&mut self, dset: DatasetId) -> ScrResult<()> {
        let mut dirs_seen = Vec::new();
        for r in self.filemap.list_ranks_by_dataset(dset) {
            if self.is_bypass_of(dset, r) {
                continue;
            }
            for f in self.filemap.list_files(dset, r) {
                let real = self.real(&LogicalPath::new(&f));
                if self.settings.cache.crc_on_delete {
                    self.check_before_delete(dset, r, &f, &real);
                }
                let _ = fs::remove_file(&real);
                if let Some(p) = real.parent() {
                    dirs_seen.push(p.to_path_buf());
                }
            }
            if let Ok(Some(desc)) = self.filemap.desc(dset, r) {
                dirs_seen.push(
                    self.real(&self.dataset_dir(&LogicalPath::new(&desc.directory), dset))
                        .into_path_buf(),
                );
            }
        }
        self.filemap.remove_dataset(dset);
        self.write_filemap()?;
        dirs_seen.sort();
        dirs_seen.dedup();
        // Deepest first, so nested subdirectories go before their parents.
        dirs_seen.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs_seen {
            let _ = fs::remove_dir(&d);
        }
        Ok(())
    }

    /// SCR_CRC_ON_DELETE: compare a cached file with the size and CRC32
    /// recorded for it before it goes, and report a mismatch (stderr in
    /// SCR's form, CRC32_MISMATCH in the log). The file is deleted either
    /// way, as in SCR: the check tells of a bad device or of damage in
    /// cache, it cannot save the file.
    fn check_before_delete(&self, dset: DatasetId, owner: Rank, file: &str, real: &RealPath) {
        let Ok(Some(meta)) = self.filemap.meta(dset, owner, file) else {
            return;
        };
        if meta.crc32.is_none() || !meta.is_complete() || !real.exists() {
            return;
        }
        match crate::storage::verify::verify_file(real, &meta) {
            Ok(()) => self.msg.dbg(
                2,
                format_args!("CRC32 verified before deleting {}", real.display()),
            ),
            Err(e) => {
                self.msg.err(format_args!(
                    "CRC32 mismatch detected when deleting file of dataset {dset} (SCR_CRC_ON_DELETE): {e}"
                ));
                self.log(
                    crate::log::writer::Entry::event(crate::log::writer::EventType::Crc32Mismatch)
                        .dset(dset)
                        .note(format!("on delete: {e}")),
                );
            }
        }
    }

    /// Delete dataset `dset` on every rank (collective).
    pub fn delete_dataset(&mut self, dset: DatasetId) -> ScrResult<()> {
        let local = self.delete_dataset_local(dset);
        let ok = self.world.all_true(local.is_ok())?;
        local?;
        if !ok {
            return Err(ScrError::elsewhere("delete the dataset", Some(dset)));
        }
        Ok(())
    }

    /// Dataset ids in cache on any rank, ascending (collective). One
    /// allreduce per id, newest first, as SCR's cache rebuild walks them:
    /// O(datasets) per rank, where an allgather of every rank's ids cost
    /// O(P) (issue 17).
    pub fn datasets_everywhere(&self) -> ScrResult<Vec<DatasetId>> {
        let mine: Vec<i64> = self
            .filemap
            .list_datasets()
            .iter()
            .map(|d| d.get())
            .collect();
        let mut ids = Vec::new();
        let mut below = i64::MAX;
        // `below` falls strictly each round, so this ends after at most
        // (distinct ids + 1) rounds.
        loop {
            let next = mine
                .iter()
                .copied()
                .filter(|&id| id < below && id > i64::MIN)
                .max()
                .unwrap_or(i64::MIN);
            let mut v = [next];
            self.world.allreduce_i64(&mut v, ReduceOp::Max)?;
            if v[0] == i64::MIN || v[0] >= below {
                break;
            }
            ids.push(DatasetId(v[0]));
            below = v[0];
        }
        ids.reverse();
        Ok(ids)
    }
}
