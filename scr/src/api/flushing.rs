//! The API's use of the prefix tier: when to flush (every SCR_FLUSH-th
//! checkpoint, every output dataset, at finalize, on a halt), the
//! background flush's life cycle, fetch at init, and what Current, Delete
//! and cache eviction do in the prefix directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Scr;
use crate::cache::Job;
use crate::error::{ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::prefix::flush::{flush_async_start, flush_async_test, flush_sync, AsyncFlush};
use crate::prefix::layout::{Layout, Placement};
use crate::prefix::{self, fetch, on_rank0, update_flush_file, update_index};
use crate::records::index::index_path;
use crate::records::{Index, Record};

/// What the library knows about the prefix directory during a run.
#[derive(Debug, Default)]
pub(super) struct PrefixState {
    /// Datasets known to be in the prefix directory.
    pub on_pfs: BTreeSet<DatasetId>,
    /// The background flush under way, if any.
    pub pending: Option<AsyncFlush>,
}

/// Whether dataset `d` is output (SCR_FLAG_OUTPUT) on any rank. Collective.
fn is_output(job: &Job, d: DatasetId) -> ScrResult<bool> {
    let here = job
        .dataset(d)
        .is_some_and(|ds| ds.flag_output == Some(true));
    Ok(job.world.any_true(here)?)
}

impl Scr {
    /// After restart in place at init: fetch when the cache has no
    /// checkpoint, bring the flush file in line with the cache, and learn
    /// what is in the prefix already. Collective.
    pub(super) fn prefix_init(
        &mut self,
        job: &mut Job,
        cands: &mut Vec<DatasetId>,
    ) -> ScrResult<()> {
        if job.settings.flush.prefix_purge {
            // SCR_PREFIX_PURGE: the run starts from an empty prefix.
            super::prune::prune(job, &super::prune::Prune::All)?;
        }
        // SCR_GLOBAL_RESTART, as SCR 3.1: flush on restart, no fetch into
        // cache; the restart reads through the prefix, so a run on another
        // rank count reads what it needs by path.
        let global = job.settings.fetch.global_restart;
        let held_back = if global {
            self.global_restart_flush(job, cands)?
        } else {
            Vec::new()
        };
        if cands.is_empty() && (job.settings.fetch.enabled || global) {
            if let Some(cur) = job.settings.fetch.current.clone() {
                // The user named the checkpoint to start from: the fetch
                // starts at its copy in the prefix.
                let p = job.prefix.clone();
                let drop_after = job.settings.fetch.drop_after_current;
                let set = on_rank0(job.world.as_ref(), "set the index's CURRENT", || {
                    if !prefix::meta_exists(&p, &index_path(&p))? {
                        return Ok(());
                    }
                    update_index(&p, |idx| {
                        set_current_named(idx, &cur, drop_after);
                    })
                });
                if let Err(e) = set {
                    eprintln!("SCR: warning: SCR_CURRENT={cur}: {e}");
                }
            }
            let fetch = fetch::fetch_sync(job)?;
            if let Some(f) = fetch.fetched {
                cands.push(DatasetId(f.id));
                self.report.available.push(DatasetId(f.id));
                self.report.fetched = Some(f.id);
                self.report.fetched_dir = Some(f.dir);
            }
            self.report.fetch_failed = fetch.failed;
            self.report.fetch_error = fetch.index_error;
        } else if let Some(&newest) = cands.first() {
            // The cache's newest checkpoint may be older than one the prefix
            // holds whole: the newer one was lost in cache (a node loss its
            // scheme could not cover, a failed rebuild) after its flush.
            // SCR 3.1 restarts from the older one in cache and loses the
            // work in between; this fetches the newer one, and the cache's
            // stay candidates behind it (docs/decisions.md, "A newer
            // checkpoint in the prefix wins over an older one in cache").
            // Not with SCR_CURRENT (the user named the start) nor a global
            // restart (which read the prefix above).
            if job.settings.fetch.enabled && !global && job.settings.fetch.current.is_none() {
                let fetch = match fetch::fetch_sync_newer(job, newest) {
                    Ok(f) => f,
                    Err(e @ ScrError::Comm(_)) => return Err(e),
                    // The fetch failed on every rank alike (the errors it
                    // returns are agreed), mostly because the cache could
                    // not record the newer copy (a filemap write failed;
                    // the copy is deleted again): the cache's own
                    // checkpoints are still whole, so the restart uses
                    // them, as SCR 3.1 would have, instead of failing
                    // SCR_Init (docs/decisions.md, "A newer checkpoint in
                    // the prefix wins over an older one in cache").
                    Err(e) => {
                        if job.rank().is_root() {
                            eprintln!(
                                "SCR: warning: the fetch of a checkpoint newer than \
                                 dataset {newest} failed ({e}); restarting from the cache's"
                            );
                        }
                        fetch::FetchReport::default()
                    }
                };
                if let Some(f) = fetch.fetched {
                    let id = DatasetId(f.id);
                    cands.insert(0, id);
                    // Ascending (an output dataset in cache may be newer).
                    let at = self.report.available.partition_point(|&d| d < id);
                    self.report.available.insert(at, id);
                    self.report.fetched = Some(f.id);
                    self.report.fetched_dir = Some(f.dir);
                }
                self.report.fetch_failed = fetch.failed;
                self.report.fetch_error = fetch.index_error;
            }
        }
        if cands.is_empty() && !held_back.is_empty() {
            // Nothing in the prefix could be read: the cache's checkpoints
            // (this rank count's) are what is left.
            if job.rank().is_root() {
                eprintln!(
                    "SCR: SCR_GLOBAL_RESTART: no checkpoint in the prefix could be read; \
                     restarting from cache"
                );
            }
            *cands = held_back;
        }
        self.rebuild_flush_file(job)?;
        self.prefix.on_pfs = prefix::datasets_on_pfs(job)?
            .into_iter()
            .map(DatasetId)
            .collect();
        if let Some(&newest) = cands.first() {
            if job.settings.flush.on_restart
                && !self.prefix.on_pfs.contains(&newest)
                && flush_sync(job, newest)?
            {
                self.prefix.on_pfs.insert(newest);
                for id in prune_after_init_flush(job, newest)? {
                    self.prefix.on_pfs.remove(&id);
                }
            }
        }
        Ok(())
    }

    /// CACHE in the flush file: the datasets whose files are in cache (not
    /// those read in place from the prefix). Collective.
    fn rebuild_flush_file(&self, job: &Job) -> ScrResult<()> {
        let available: Vec<i64> = self
            .report
            .available
            .iter()
            .filter(|&&d| !job.is_bypass(d))
            .map(|d| d.get())
            .collect();
        prefix::rebuild_flush_file(job, &available)
    }

    /// SCR_GLOBAL_RESTART at init: the newest checkpoint that restart in
    /// place found in cache is flushed (unless the prefix has it), then
    /// leaves the cache so the restart reads its copy in the prefix. Returns the
    /// older cache candidates, held back in case the prefix has nothing
    /// readable; `cands` is emptied. If the flush fails, `cands` stays and
    /// the restart is from cache (with a warning): its rank count matches.
    /// Collective.
    fn global_restart_flush(
        &mut self,
        job: &mut Job,
        cands: &mut Vec<DatasetId>,
    ) -> ScrResult<Vec<DatasetId>> {
        let Some(&newest) = cands.first() else {
            return Ok(Vec::new());
        };
        self.rebuild_flush_file(job)?;
        let on_pfs = prefix::datasets_on_pfs(job)?.contains(&newest.get());
        if !on_pfs && !flush_sync(job, newest)? {
            if job.rank().is_root() {
                eprintln!(
                    "SCR: SCR_GLOBAL_RESTART: the flush of dataset {newest} failed; \
                     restarting from cache"
                );
            }
            return Ok(Vec::new());
        }
        if !on_pfs {
            prune_after_init_flush(job, newest)?;
        }
        job.delete_dataset(newest)?;
        self.report.available.retain(|&d| d != newest);
        let held_back = cands.split_off(1);
        cands.clear();
        Ok(held_back)
    }

    /// Finish the background flush if every rank's copy is done (or, with
    /// `wait`, once it is). Collective.
    pub(super) fn poll_async_flush(&mut self, wait: bool) -> ScrResult<()> {
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        let Some(af) = self.prefix.pending.as_mut() else {
            return Ok(());
        };
        if let Some(done) = flush_async_test(job, af, wait)? {
            let d = af.dset();
            self.prefix.pending = None;
            if done {
                self.prefix.on_pfs.insert(d);
                self.prune_after_flush(d)?;
            }
        }
        Ok(())
    }

    /// SCR_PREFIX_SIZE after `flushed` reached the prefix: delete the
    /// checkpoints beyond the newest N (see [`super::prune`]). Collective.
    pub(super) fn prune_after_flush(&mut self, flushed: DatasetId) -> ScrResult<()> {
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        let keep = job.settings.flush.prefix_size;
        if keep == 0 {
            return Ok(());
        }
        let mut busy: BTreeSet<DatasetId> = [flushed].into();
        busy.extend(self.prefix.pending.as_ref().map(AsyncFlush::dset));
        let how = super::prune::Prune::Keep { keep, busy };
        for id in super::prune::prune(job, &how)? {
            self.prefix.on_pfs.remove(&id);
        }
        Ok(())
    }

    /// Flush `d` now, synchronously or in the background as configured.
    /// Collective.
    pub(super) fn flush_dataset(&mut self, d: DatasetId) -> ScrResult<bool> {
        let asynchronous = match self.job.as_ref() {
            Some(job) => job.settings.flush.asynchronous,
            None => return Ok(false),
        };
        if self.prefix.pending.as_ref().is_some_and(|a| a.dset() == d) {
            return Ok(true);
        }
        if asynchronous {
            // One background flush at a time: finish the previous one.
            self.poll_async_flush(true)?;
            let job = self.job.as_ref().expect("checked above");
            self.prefix.pending = flush_async_start(job, d)?;
            return Ok(self.prefix.pending.is_some());
        }
        let job = self.job.as_ref().expect("checked above");
        let ok = flush_sync(job, d)?;
        if ok {
            self.prefix.on_pfs.insert(d);
            self.prune_after_flush(d)?;
        }
        Ok(ok)
    }

    /// At complete: record the dataset in the flush file and flush it when
    /// it is due (every SCR_FLUSH-th checkpoint, every output dataset, or
    /// `force` for a halt when SCR_FLUSH > 0). Collective.
    pub(super) fn after_complete(
        &mut self,
        dset: DatasetId,
        is_ckpt: bool,
        output: bool,
        force: bool,
    ) -> ScrResult<()> {
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        if job.is_bypass(dset) {
            // Written straight to the prefix and recorded there at
            // complete: it counts as flushed (SCR_PREFIX_SIZE applies).
            self.prefix.on_pfs.insert(dset);
            self.prune_after_flush(dset)?;
            return self.poll_async_flush(false);
        }
        let pl = prefix::flush::placement(job, dset)?;
        let ds = job.dataset(dset);
        let p = job.prefix.clone();
        let booked = on_rank0(job.world.as_ref(), "update the flush file", || {
            update_flush_file(&p, |ff| {
                ff.location_set(dset.get(), crate::records::Location::Cache);
                let e = ff.datasets.entry(dset.get()).or_default();
                if pl.layout() == Layout::Legacy {
                    e.dir = Some(pl.dir.clone());
                    e.orig_dir = pl.orig_dir.clone();
                    e.output = Some(output);
                } else {
                    // SCR 3.1: no directory (the metadata directory follows
                    // from the id), OUTPUT only for output.
                    e.output = output.then_some(true);
                }
                e.name = ds.as_ref().and_then(|d| d.name.clone());
                e.checkpoint = Some(is_ckpt);
                e.dataset = ds.clone();
            })
        });
        if let Err(e) = booked {
            eprintln!("SCR: warning: {e}");
        }
        let every = job.settings.flush.every;
        let ckpt_id = job.checkpoint_id;
        // A halt flushes what it stops at, unless flushing is off (SCR:
        // scr_flush > 0).
        let by_every = is_ckpt && every > 0 && ckpt_id % every as i64 == 0;
        let due = output || (force && every > 0) || by_every;
        if due {
            // A synchronous flush of a checkpoint SCR_FLUSH made due is what
            // that checkpoint costs the application beyond its write: the
            // adaptive policy's top level (api/adaptive.rs).
            let timed = (by_every && !job.settings.flush.asynchronous).then(|| self.clock.now());
            let flushed = self.flush_dataset(dset)?;
            if let Some(t0) = timed.filter(|_| flushed) {
                let secs = self.clock.elapsed(t0).as_secs_f64();
                self.need.flush_costs.push((ckpt_id, secs));
            }
        } else {
            self.poll_async_flush(false)?;
        }
        Ok(())
    }

    /// Whether `d` may leave the cache: output must reach the prefix first
    /// (flushed now if it has not), and a dataset being flushed in the
    /// background is waited for. Collective.
    pub(super) fn may_evict(&mut self, d: DatasetId) -> ScrResult<bool> {
        if self.prefix.pending.as_ref().is_some_and(|a| a.dset() == d) {
            self.poll_async_flush(true)?;
        }
        let Some(job) = self.job.as_ref() else {
            return Ok(true);
        };
        if self.prefix.on_pfs.contains(&d) || !is_output(job, d)? {
            return Ok(true);
        }
        let ok = self.flush_dataset(d)?;
        if self.prefix.pending.as_ref().is_some_and(|a| a.dset() == d) {
            self.poll_async_flush(true)?;
        }
        Ok(ok && self.prefix.on_pfs.contains(&d))
    }

    /// At finalize: complete the background flush, then flush the newest
    /// checkpoint (when SCR_FLUSH > 0) and any output not yet in the prefix.
    /// Collective.
    pub(super) fn finalize_flush(&mut self) -> ScrResult<()> {
        self.settle_protection(false)?;
        self.poll_async_flush(true)?;
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        let every = job.settings.flush.every;
        let all = job.datasets_everywhere()?;
        let mut newest_ckpt = None;
        for &d in &all {
            let here = job
                .dataset(d)
                .is_some_and(|ds| ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some()));
            if job.world.any_true(here)? {
                newest_ckpt = Some(d);
            }
        }
        let mut todo = Vec::new();
        for d in all {
            if self.prefix.on_pfs.contains(&d) {
                continue;
            }
            if is_output(job, d)? || (every > 0 && Some(d) == newest_ckpt) {
                todo.push(d);
            }
        }
        for d in todo {
            let job = self.job.as_ref().expect("checked above");
            if flush_sync(job, d)? {
                self.prefix.on_pfs.insert(d);
                self.prune_after_flush(d)?;
            }
        }
        Ok(())
    }

    /// SCR_Current in the prefix: point the index's CURRENT at the copy of
    /// `name`. Returns whether the index has it. Collective.
    pub(super) fn prefix_current(&mut self, name: &str) -> ScrResult<bool> {
        let Some(job) = self.job.as_ref() else {
            return Ok(false);
        };
        let p = job.prefix.clone();
        let drop_after = job.settings.fetch.drop_after_current;
        let found = on_rank0(job.world.as_ref(), "update the index", || {
            if !prefix::meta_exists(&p, &index_path(&p))? {
                return Ok(false);
            }
            update_index(&p, |idx| set_current_named(idx, name, drop_after))
        })?;
        let mut b = vec![u8::from(found == Some(true))];
        job.world.bcast_bytes(0, &mut b)?;
        Ok(b[0] == 1)
    }

    /// SCR_Delete in the prefix: every copy of `name` (its files as the
    /// rank2file map lists them, its `.scr` metadata, directories left
    /// empty up to the prefix) and its index and flush file entries.
    /// Collective; rank 0 does the work.
    pub(super) fn prefix_delete(&mut self, name: &str) -> ScrResult<()> {
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        let p = job.prefix.clone();
        let removed = on_rank0(
            job.world.as_ref(),
            "delete the dataset in the prefix",
            || {
                if !prefix::meta_exists(&p, &index_path(&p))? {
                    return Ok(Vec::new());
                }
                let idx = Index::read_file_in(&p, index_path(&p))?;
                let mut ids = Vec::new();
                for dir in dirs_named(&idx, name) {
                    if let Some(id) = idx.dataset_id_by_dir(&dir) {
                        ids.push(id);
                        delete_copy(&p, idx.layout(), id, &dir)?;
                    }
                    update_index(&p, |idx| {
                        idx.remove_dir(&dir);
                    })?;
                }
                if !ids.is_empty() && prefix::meta_exists(&p, &prefix::flush_file_path(&p))? {
                    update_flush_file(&p, |ff| {
                        for id in &ids {
                            ff.location_unset(*id, crate::records::Location::Pfs);
                            if ff.datasets.get(id).is_some_and(|e| e.locations.is_empty()) {
                                ff.remove(*id);
                            }
                        }
                    })?;
                }
                Ok(ids)
            },
        )?;
        let mut b: Vec<u8> = removed
            .unwrap_or_default()
            .iter()
            .flat_map(|i| i.to_be_bytes())
            .collect();
        job.world.bcast_bytes(0, &mut b)?;
        for c in b.chunks_exact(8) {
            self.prefix.on_pfs.remove(&DatasetId(i64::from_be_bytes(
                c.try_into().expect("8 bytes"),
            )));
        }
        Ok(())
    }
}

/// Directories in the index holding a dataset named `name`, oldest first.
fn dirs_named(idx: &Index, name: &str) -> Vec<String> {
    idx.datasets
        .values()
        .flat_map(|m| m.iter())
        .filter(|(_, e)| e.dataset.as_ref().and_then(|d| d.name.as_deref()) == Some(name))
        .map(|(dir, _)| dir.clone())
        .collect()
}

/// SCR_PREFIX_SIZE after the flush at init of `flushed` (flush on restart,
/// global restart): the checkpoints pruned. Collective.
fn prune_after_init_flush(job: &Job, flushed: DatasetId) -> ScrResult<Vec<DatasetId>> {
    let keep = job.settings.flush.prefix_size;
    if keep == 0 {
        return Ok(Vec::new());
    }
    let how = super::prune::Prune::Keep {
        keep,
        busy: [flushed].into(),
    };
    super::prune::prune(job, &how)
}

/// Make the newest copy named `name` the index's CURRENT; with
/// SCR_DROP_AFTER_CURRENT, drop the entries of every newer dataset (their
/// files stay in the prefix: `scr index --add` can bring one back, as
/// after SCR_Drop). Returns whether `name` was found.
fn set_current_named(idx: &mut Index, name: &str, drop_after: bool) -> bool {
    let Some(dir) = dirs_named(idx, name).into_iter().next_back() else {
        return false;
    };
    idx.set_current(&dir);
    if drop_after {
        let id = idx
            .datasets
            .iter()
            .find(|(_, m)| m.contains_key(&dir))
            .map(|(id, _)| *id);
        if let Some(id) = id {
            let newer: Vec<i64> = idx.datasets.range(id + 1..).map(|(i, _)| *i).collect();
            for n in newer {
                idx.remove_id(n);
            }
        }
    }
    true
}

/// Remove one copy of a dataset (index entry `key` of dataset `id`) from
/// the prefix directory.
pub(super) fn delete_copy(prefix: &Path, layout: Layout, id: i64, key: &str) -> ScrResult<()> {
    let (placement, _) = Placement::read_entry(prefix, layout, id, key);
    let dset_dir = placement.dataset_dir(prefix);
    let meta_dir = placement.meta_dir(prefix);
    let mut dirs: Vec<PathBuf> = Vec::new();
    match placement.read_map(prefix) {
        Ok(map) => {
            for files in map.rank.values() {
                for rel in files.files.keys() {
                    let f = placement.stored_path(prefix, rel);
                    // Never remove a file outside the prefix through a link
                    // (or a `..` key in a hostile map).
                    crate::beneath::check(prefix, &f)?;
                    let _ = crate::beneath::remove_file_in(prefix, &f);
                    if let Some(parent) = f.parent() {
                        dirs.push(parent.to_path_buf());
                    }
                }
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(ScrError::from(e)),
    }
    crate::beneath::check(prefix, &meta_dir)?;
    crate::beneath::remove_dir_all_if_present_in(prefix, &meta_dir)
        .map_err(crate::error::io_err(&meta_dir, "remove directory"))?;
    if layout == Layout::Legacy {
        dirs.push(dset_dir);
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs.dedup();
    for d in dirs {
        prefix::remove_empty_dirs_up_to(&d, prefix);
    }
    Ok(())
}
