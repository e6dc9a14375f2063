//! Flush: copy a cached dataset to the prefix directory and record it in
//! the index (developer guide "Flush program flow", scr_flush_sync and
//! scr_flush_async). Every rank copies its own files, admitted through a
//! sliding window of SCR_FLUSH_WIDTH writers, computing CRC32 on the way
//! (SCR_CRC_ON_FLUSH) and comparing it with the CRC recorded in cache.
//! Rank 0 then writes the rank2file map and the summary into the
//! dataset's metadata directory (`.scr/scr.dataset.<id>`, or `<D>/.scr` in
//! a prefix still in the old layout), and only after both are on disk
//! marks the dataset COMPLETE in the index: a flush that fails anywhere fails on every rank, leaves
//! the index without a COMPLETE entry for it, and keeps the cached copy.

use std::thread::JoinHandle;

use super::container;
use super::layout::{common_dir, Layout, Placement};
use super::watchdog::{self, Bound, Progress};
use super::{
    copy_all, on_rank0, pack_rank_files, unpack_rank_files, update_flush_file, update_index,
    windowed, Copied, CopyChecks, CopyError, CopyItem, FlushError, PrefixError, Throttle,
};
use crate::cache::Job;
use crate::config::settings::FlushType;
use crate::error::ScrResult;
use crate::ids::DatasetId;
use crate::log::writer::{Entry, EventType, XferType};
use crate::records::dataset::Dataset;
use crate::records::index::{index_path, timestamp};
use crate::records::rank2file::{SplitStyle, FILEMETA_BASE, MAX_RANK2FILE_BYTES, RANK2FILE_BASE};
use crate::records::summary::{Summary, SUMMARY_FILE};
use crate::records::{Location, Rank2File, Rank2FileEntry, RankFiles, Record};
use crate::storage::node::LogicalPath;

/// A flush that has been set up on every rank.
#[derive(Debug)]
pub struct FlushPlan {
    /// The dataset id.
    pub dset: DatasetId,
    /// Where it goes.
    pub placement: Placement,
    /// Its descriptor (this rank's copy).
    pub dataset: Dataset,
    pub(crate) items: Vec<CopyItem>,
    /// How this rank copies: the dataset's flush type and the threads
    /// its copies run on.
    copy: (FlushType, usize),
    started: crate::clock::Tick,
}

impl FlushPlan {
    fn name(&self) -> String {
        self.dataset
            .name
            .clone()
            .unwrap_or_else(|| Dataset::default_name(self.dset.get()))
    }
}

/// Encode a directory (components) for the placement vote.
fn encode_dir(c: &Option<Vec<String>>) -> Vec<u8> {
    match c {
        None => Vec::new(),
        Some(c) => {
            let mut v = vec![1u8];
            v.extend_from_slice(c.join("\0").as_bytes());
            v
        }
    }
}

fn decode_dir(b: &[u8]) -> Option<Vec<String>> {
    let (&first, rest) = b.split_first()?;
    if first != 1 {
        return None;
    }
    let s = String::from_utf8_lossy(rest);
    Some(if s.is_empty() {
        Vec::new()
    } else {
        s.split('\0').map(str::to_owned).collect()
    })
}

/// The layout of the job's prefix as rank 0 finds it: the old one only
/// while its index is version 1 (until `scr index --upgrade`), SCR 3.1's
/// otherwise. Collective.
pub fn prefix_layout(job: &Job) -> ScrResult<Layout> {
    let mut b = Vec::new();
    if job.rank().is_root() {
        let legacy = crate::records::Index::read_file_in(&job.prefix, index_path(&job.prefix))
            .is_ok_and(|i| i.layout() == Layout::Legacy);
        b.push(u8::from(legacy));
    }
    job.world.bcast_bytes(0, &mut b)?;
    Ok(if b.first() == Some(&1) {
        Layout::Legacy
    } else {
        Layout::Scr31
    })
}

/// Where `dset` goes: SCR 3.1's layout (files where they were routed), or
/// in an old-layout prefix the dataset directory as every rank's routed
/// files decide it (docs/formats.md). Collective.
pub fn placement(job: &Job, dset: DatasetId) -> ScrResult<Placement> {
    if prefix_layout(job)? == Layout::Scr31 {
        return Ok(Placement::scr31(dset.get()));
    }
    let files = job.app_files(dset);
    let dirs: Vec<std::path::PathBuf> = files
        .iter()
        .filter_map(|(_, m)| m.orig_path.as_deref().map(std::path::PathBuf::from))
        .collect();
    let mine = common_dir(&job.prefix, dirs.iter().map(|p| p.as_path()));
    let all = job.world.allgather_bytes(&encode_dir(&mine))?;
    let mut acc: Option<Vec<String>> = None;
    for b in &all {
        if let Some(c) = decode_dir(b) {
            acc = Some(match acc {
                None => c,
                Some(a) => a
                    .iter()
                    .zip(&c)
                    .take_while(|(x, y)| x == y)
                    .map(|(x, _)| x.clone())
                    .collect(),
            });
        }
    }
    Ok(Placement::choose(dset.get(), acc.as_deref()))
}

/// A flush set up on every rank, or why it cannot start (the same answer
/// on every rank).
#[derive(Debug)]
pub enum Prepared {
    /// Ready to copy.
    Ready(Box<FlushPlan>),
    /// The flush cannot start; the cached copy stays.
    Refused(FlushError),
}

/// This rank's copy list for the flush of `dset`.
fn copy_items(
    job: &Job,
    dset: DatasetId,
    placement: &Placement,
) -> Result<Vec<CopyItem>, FlushError> {
    let rank = job.rank();
    if job.dataset(dset).is_none() {
        return Err(FlushError::NotInCache {
            rank: rank.as_i64(),
            dset,
        });
    }
    let mut items = Vec::new();
    for (logical, meta) in job.app_files(dset) {
        let Some(rel) = placement.rel_of(&job.prefix, &meta) else {
            return Err(FlushError::OutsideDir {
                rank: rank.as_i64(),
                file: logical,
                routed: meta.orig.clone(),
                dir: placement.routed_dir(&job.prefix),
            });
        };
        if !meta.is_complete() {
            return Err(FlushError::Incomplete {
                rank: rank.as_i64(),
                file: logical,
            });
        }
        items.push(CopyItem {
            src: job.real(&LogicalPath::new(&logical)).into_path_buf(),
            dst: placement.stored_path(&job.prefix, &rel),
            rel,
            size: meta.size_bytes,
            crc: meta.crc32,
            attrs: None,
            packing: None,
            within: Some(job.prefix.clone()),
        });
    }
    Ok(items)
}

/// Set up the flush of `dset` on every rank: placement, copy list, and
/// rank 0's bookkeeping (SYNC_FLUSHING or FLUSHING in the flush file; index entries of
/// whatever the copy is about to overwrite removed first, so the index
/// never points at bytes that changed under it). Collective.
pub fn prepare(job: &Job, dset: DatasetId, event: EventType) -> ScrResult<Prepared> {
    // A bypass dataset's files are in the prefix: a copy would truncate
    // each file onto itself.
    if job.world.any_true(job.is_bypass(dset))? {
        return Ok(Prepared::Refused(FlushError::InPrefix { dset }));
    }
    let placement = placement(job, dset)?;
    let local = copy_items(job, dset, &placement);
    let ok = job.world.all_true(local.is_ok())?;
    let items = match local {
        Ok(items) if ok => items,
        Ok(_) => return Ok(Prepared::Refused(FlushError::OtherRank)),
        Err(e) => return Ok(Prepared::Refused(e)),
    };
    let dataset = job.dataset(dset).expect("checked by copy_items");
    let name = dataset
        .name
        .clone()
        .unwrap_or_else(|| Dataset::default_name(dset.get()));
    job.log(Entry::event(event).dset(dset).name(name.as_str()));
    // As SCR marks them: SYNC_FLUSHING while a synchronous flush runs,
    // FLUSHING while an asynchronous one does (a job script's watchdog
    // gives a synchronous flush SCR_WATCHDOG_TIMEOUT_PFS).
    let marker = if event == EventType::AsyncFlushStart {
        Location::Flushing
    } else {
        Location::SyncFlushing
    };
    if let Err(e) = book_flush_start(job, dset, &placement, &dataset, marker) {
        return Ok(Prepared::Refused(FlushError::Bookkeeping(e.to_string())));
    }
    let mut items = items;
    if job.settings.flush.use_containers {
        if let Err(e) = pack_items(job, &placement, &mut items)? {
            let _ = on_rank0(job.world.as_ref(), "record the failed flush", || {
                update_flush_file(&job.prefix, |ff| unset_flushing(ff, dset))
            });
            return Ok(Prepared::Refused(e));
        }
    }
    let kind = job.flush_type(dset);
    let copy = (kind, kind.copy_threads(items.len()));
    Ok(Prepared::Ready(Box::new(FlushPlan {
        dset,
        placement,
        dataset,
        items,
        copy,
        started: job.clock.now(),
    })))
}

/// SCR_USE_CONTAINERS=1: plan where every rank's files go in the
/// containers (`scr_flush_identify_containers`), remove containers an
/// earlier flush left in the directory (rank 0), and create the new ones
/// (each by the rank that writes its first byte). `Ok(Err)` (the same on
/// every rank) when they could not be created. Collective.
fn pack_items(
    job: &Job,
    pl: &Placement,
    items: &mut [CopyItem],
) -> ScrResult<Result<(), FlushError>> {
    let sizes: Vec<u64> = items.iter().map(|i| i.size.unwrap_or(0)).collect();
    let dir = pl.meta_rel();
    let plan = container::plan(
        job.world.as_ref(),
        job.node_comm.as_ref(),
        &sizes,
        job.settings.flush.container_bytes,
        &dir,
    )?;
    let base = pl.key_base(&job.prefix);
    let mut local = Ok(());
    if job.rank().is_root() {
        let d = base.join(&dir);
        local = container::remove_containers(&job.prefix, &d)
            .map_err(|e| super::io_fail("remove old containers", &d, e));
    }
    // Every old container is gone before any new one is made.
    job.world.barrier()?;
    if local.is_ok() {
        local = container::create_containers(&job.prefix, &base, &plan.create);
    }
    if !job.world.all_true(local.is_ok())? {
        return Ok(Err(match local {
            Err(e) => FlushError::Containers {
                rank: job.rank().as_i64(),
                source: e,
            },
            Ok(()) => FlushError::OtherRank,
        }));
    }
    for (item, segs) in items.iter_mut().zip(&plan.files) {
        item.packing = Some(container::Packing::Into(container::resolve(&base, segs)));
    }
    Ok(Ok(()))
}

/// A flush of `dset` is over (done or failed): neither marker stays.
fn unset_flushing(ff: &mut crate::records::FlushFile, dset: DatasetId) {
    ff.location_unset(dset.get(), Location::Flushing);
    ff.location_unset(dset.get(), Location::SyncFlushing);
}

/// Rank 0 records the start of a flush in the index and the flush file,
/// `marker` (FLUSHING or SYNC_FLUSHING) saying a flush is under way.
/// Collective.
fn book_flush_start(
    job: &Job,
    dset: DatasetId,
    pl: &Placement,
    ds: &Dataset,
    marker: Location,
) -> ScrResult<()> {
    let prefix = job.prefix.clone();
    let name = index_key(pl, ds);
    on_rank0(job.world.as_ref(), "record the flush start", || {
        update_index(&prefix, |idx| match pl.layout() {
            // Whatever the index says is in this directory is about to be
            // overwritten: forget it before the first byte is written.
            Layout::Legacy => while idx.remove_dir(&pl.dir) {},
            // The metadata directory of this id, and the name, are about
            // to be rewritten (an old copy of another dataset whose files
            // this flush overwrites fails its CRC check on fetch).
            Layout::Scr31 => {
                idx.remove_id(dset.get());
                while let Some(other) = idx.dataset_id_by_dir(&name) {
                    idx.remove_id(other);
                }
            }
        })?;
        if pl.layout() == Layout::Scr31 {
            let meta = pl.meta_dir(&prefix);
            crate::beneath::check(&prefix, &meta)?;
            crate::beneath::remove_dir_all_if_present_in(&prefix, &meta)
                .map_err(crate::error::io_err(&meta, "remove directory"))?;
        }
        update_flush_file(&prefix, |ff| {
            ff.location_set(dset.get(), Location::Cache);
            ff.location_set(dset.get(), marker);
            ff.location_unset(dset.get(), Location::Pfs);
            let e = ff.datasets.entry(dset.get()).or_default();
            if pl.layout() == Layout::Legacy {
                e.dir = Some(pl.dir.clone());
                e.orig_dir = pl.orig_dir.clone();
                e.output = Some(ds.flag_output.unwrap_or(false));
            } else {
                // LLNL SCR 3.1 writes OUTPUT only for output datasets.
                e.output = ds.flag_output.filter(|o| *o);
            }
            e.name = ds.name.clone();
            e.checkpoint = Some(ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some()));
            e.dataset = Some(ds.clone());
        })
    })?;
    Ok(())
}

/// The key of a dataset's index entry: its directory in the old layout,
/// its name in SCR 3.1's.
fn index_key(pl: &Placement, ds: &Dataset) -> String {
    match pl.layout() {
        Layout::Legacy => pl.dir.clone(),
        Layout::Scr31 => ds
            .name
            .clone()
            .unwrap_or_else(|| Dataset::default_name(ds.id)),
    }
}

/// Write the map and the summary of a dataset into its metadata directory
/// (rank 0 of a flush; `scr index --add`). SCR 3.1's layout: our per-file
/// metadata first, then LLNL's rank2file (names only), then the summary,
/// each complete on disk before the next. Returns the summary written.
pub fn write_dataset_metadata(
    prefix: &std::path::Path,
    pl: &Placement,
    map: &Rank2File,
    ds: &Dataset,
    complete: bool,
) -> Result<Summary, crate::records::RecordError> {
    let meta_dir = pl.meta_dir(prefix);
    crate::beneath::create_dir_all_in(prefix, &meta_dir).map_err(|source| {
        crate::kvtree::file::KvFileError::Io {
            path: meta_dir.clone(),
            op: "create directory",
            source,
        }
    })?;
    let mut summary = Summary::new(ds.clone(), complete);
    write_map(prefix, &meta_dir, pl, map)?;
    if pl.layout() == Layout::Legacy {
        summary.orig_dir = pl.orig_dir.clone();
    }
    summary.write_file_in(prefix, meta_dir.join(SUMMARY_FILE))?;
    Ok(summary)
}

/// Write a dataset's map into its metadata directory `meta_dir`: SCR 3.1's
/// layout our per-file metadata first, then LLNL's rank2file; the old
/// layout's `rank2file.scr` tree; never through a link below `prefix`.
pub fn write_map(
    prefix: &std::path::Path,
    meta_dir: &std::path::Path,
    pl: &Placement,
    map: &Rank2File,
) -> Result<(), crate::records::RecordError> {
    let within = Some(prefix);
    match pl.layout() {
        Layout::Legacy => {
            map.write_split_in(within, meta_dir, SplitStyle::Legacy, MAX_RANK2FILE_BYTES)?;
        }
        Layout::Scr31 => {
            for (base, names_only) in [(FILEMETA_BASE, false), (RANK2FILE_BASE, true)] {
                let style = SplitStyle::Scr31 { base, names_only };
                map.write_split_in(within, meta_dir, style, MAX_RANK2FILE_BYTES)?;
            }
        }
    }
    Ok(())
}

/// Gather every rank's copy result and, when all succeeded, write the
/// rank2file map, the summary and the index entry (rank 0). Returns
/// whether the dataset is now in the prefix. Collective.
pub(crate) fn finish(
    job: &Job,
    plan: &FlushPlan,
    local: Result<Vec<Copied>, CopyError>,
    xfer: XferType,
) -> ScrResult<bool> {
    let (ok_event, fail_event) = match xfer {
        XferType::FlushAsync => (EventType::AsyncFlushSuccess, EventType::AsyncFlushFail),
        _ => (EventType::FlushSuccess, EventType::FlushFail),
    };
    let dset = plan.dset;
    let ok = job.world.all_true(local.is_ok())?;
    // Rank 0 learns every rank's reason for the log.
    let why = match &local {
        Err(e) => format!("rank {}: {e}", job.rank()),
        Ok(_) => String::new(),
    };
    if let Err(e) = &local {
        if matches!(e, CopyError::Stalled { .. }) {
            job.msg.err(format_args!("flush of dataset {dset}: {e}"));
        } else {
            eprintln!("SCR: flush of dataset {dset}: rank {}: {e}", job.rank());
        }
        if matches!(e, CopyError::Crc { .. } | CopyError::ReadBack { .. }) {
            // Every rank that saw one logs it (the log is rank 0's; others
            // report on stderr above).
            job.log(
                Entry::event(EventType::Crc32Mismatch)
                    .dset(dset)
                    .note(e.to_string()),
            );
        }
    }
    let reasons = job.world.gather_bytes(0, why.as_bytes())?;
    let prefix = job.prefix.clone();
    if !ok {
        let note = reasons
            .map(|r| {
                r.iter()
                    .filter(|b| !b.is_empty())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        let _ = on_rank0(job.world.as_ref(), "record the failed flush", || {
            update_flush_file(&prefix, |ff| unset_flushing(ff, dset))
        });
        job.log(
            Entry::event(fail_event)
                .dset(dset)
                .name(plan.name())
                .note(note)
                .secs(job.clock.elapsed(plan.started).as_secs_f64()),
        );
        return Ok(false);
    }
    let copied = local.expect("all ranks succeeded");
    let mut mine = RankFiles {
        expected_files: Some(copied.len() as u64),
        ..RankFiles::default()
    };
    for c in &copied {
        mine.files.insert(
            c.rel.clone(),
            Rank2FileEntry {
                size_bytes: Some(c.size),
                crc32: Some(c.crc),
                attrs: c.attrs,
                segments: c.segments.clone(),
                ..Rank2FileEntry::default()
            },
        );
    }
    let bytes: u64 = copied.iter().map(|c| c.size).sum();
    let total_bytes = job.sum(bytes as i64)?.max(0) as u64;
    let total_files = job.sum(copied.len() as i64)?.max(0) as u64;
    let packed = pack_rank_files(job.rank().as_i64(), &mine);
    let gathered = job.world.gather_bytes(0, &packed)?;
    let ranks = job.world.size() as u64;
    let pl = plan.placement.clone();
    let mut ds = plan.dataset.clone();
    let now_s = job.clock.unix_secs();
    let recorded = on_rank0(job.world.as_ref(), "write the flush metadata", || {
        let mut map = Rank2File {
            ranks,
            ..Rank2File::default()
        };
        for b in gathered.unwrap_or_default() {
            let part = unpack_rank_files(&b).map_err(PrefixError::RankFiles)?;
            map.rank.extend(part);
        }
        ds.complete = Some(true);
        ds.size_bytes = Some(total_bytes);
        ds.files = Some(total_files);
        write_dataset_metadata(&prefix, &pl, &map, &ds, true)?;
        let is_ckpt = ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some());
        let key = index_key(&pl, &ds);
        update_index(&prefix, |idx| {
            idx.set_dataset(dset.get(), &key, ds.clone(), true);
            idx.mark_flushed(dset.get(), &key, timestamp(now_s));
            if is_ckpt {
                idx.set_current(&key);
            }
        })?;
        update_flush_file(&prefix, |ff| {
            ff.location_set(dset.get(), Location::Pfs);
            unset_flushing(ff, dset);
        })
    });
    let secs = job.clock.elapsed(plan.started).as_secs_f64();
    if let Err(e) = recorded {
        let _ = on_rank0(job.world.as_ref(), "record the failed flush", || {
            update_flush_file(&prefix, |ff| unset_flushing(ff, dset))
        });
        job.log(
            Entry::event(fail_event)
                .dset(dset)
                .name(plan.name())
                .note(e.to_string())
                .secs(secs),
        );
        if job.rank().is_root() {
            eprintln!("SCR: flush of dataset {dset}: {e}");
        }
        return Ok(false);
    }
    job.log(
        Entry::xfer(xfer)
            .from(
                job.sets
                    .first()
                    .map(|d| d.descriptor.directory.clone())
                    .unwrap_or_default(),
            )
            .to(plan
                .placement
                .dataset_dir(&job.prefix)
                .display()
                .to_string())
            .dset(dset)
            .name(plan.name())
            .secs(secs)
            .bytes(total_bytes)
            .files(total_files),
    );
    let mut done = Entry::event(ok_event)
        .dset(dset)
        .name(plan.name())
        .secs(secs);
    if let (FlushType::Pthread, threads) = plan.copy {
        // The log is rank 0's: its own share.
        done = done.note(format!(
            "PTHREAD: rank 0 copied {} files on {threads} threads",
            plan.items.len()
        ));
    }
    job.log(done);
    if job.rank().is_root() {
        let mb_s = total_bytes as f64 / (1 << 20) as f64 / secs.max(1e-9);
        job.msg.dbg(
            1,
            format_args!(
                "flush of dataset {dset} ({}) done: {total_bytes} bytes, {total_files} files in {secs:.3} s ({mb_s:.1} MB/s)",
                plan.name()
            ),
        );
    }
    Ok(true)
}

/// Flush `dset` now (scr_flush_sync). `Ok(true)` when it is in the prefix
/// directory and the index; `Ok(false)` when the flush failed (on every
/// rank; the cached copy stays). Collective.
pub fn flush_sync(job: &Job, dset: DatasetId) -> ScrResult<bool> {
    let plan = match prepare(job, dset, EventType::FlushStart)? {
        Prepared::Ready(p) => *p,
        Prepared::Refused(why) => {
            if job.rank().is_root() {
                eprintln!("SCR: flush of dataset {dset} not started: {why}");
            }
            job.log(
                Entry::event(EventType::FlushFail)
                    .dset(dset)
                    .note(why.to_string()),
            );
            return Ok(false);
        }
    };
    let checks = CopyChecks::of(&job.settings, job.settings.flush.crc);
    let width = job.settings.flush.width as usize;
    let me = job.rank().0;
    announce(job, &plan);
    let threads = plan.copy.1;
    let bound = Bound::of(&job.settings);
    let local = windowed(job.world.as_ref(), width, || {
        // The copy runs on a thread of its own so the watchdog can give
        // up on it; without a bound this is a plain wait.
        let progress = Progress::shared();
        let (p, items) = (progress.clone(), plan.items.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("scr-flush-{dset}"))
            .spawn(move || {
                copy_all(&items, checks, None, Some(&p), threads, || {
                    crate::fault_point!("flush.file.copied", rank = me)
                        .map_err(|e| CopyError::Injected(e.into()))
                })
            });
        match spawned {
            Ok(h) => watchdog::wait(h, &progress, bound),
            Err(e) => Err(CopyError::Io {
                path: "scr-flush".into(),
                op: "spawn thread",
                source: e,
            }),
        }
    })?;
    finish(job, &plan, local, XferType::FlushSync)
}

/// SCR_DEBUG messages at the start of a flush: rank 0's at level 1, each
/// rank's own share at level 2.
fn announce(job: &Job, plan: &FlushPlan) {
    let (kind, threads) = plan.copy;
    if job.rank().is_root() {
        job.msg.dbg(
            1,
            format_args!(
                "Initiating flush of dataset {} ({}) to {}",
                plan.dset,
                plan.name(),
                plan.placement.dataset_dir(&job.prefix).display()
            ),
        );
    }
    let bytes: u64 = plan.items.iter().filter_map(|i| i.size).sum();
    job.msg.dbg(
        2,
        format_args!(
            "flush of dataset {}: {} files, {bytes} bytes, {} on {threads} thread{}",
            plan.dset,
            plan.items.len(),
            kind.as_str(),
            if threads == 1 { "" } else { "s" }
        ),
    );
}

/// A flush running in the background (SCR_FLUSH_ASYNC=1).
#[derive(Debug)]
pub struct AsyncFlush {
    plan: FlushPlan,
    handle: Option<JoinHandle<Result<Vec<Copied>, CopyError>>>,
    /// Why this rank's copy thread could not start: the flush is failed at
    /// its test like a copy that failed (voted there), never left pending
    /// on this rank alone.
    not_started: Option<CopyError>,
    progress: std::sync::Arc<Progress>,
}

impl AsyncFlush {
    /// The dataset being flushed.
    pub fn dset(&self) -> DatasetId {
        self.plan.dset
    }
}

/// Start flushing `dset` in the background: the collective set-up happens
/// now, each rank's copy runs in a thread paced by SCR_FLUSH_ASYNC_BW
/// (shared by the ranks of a node) and SCR_FLUSH_ASYNC_PERCENT. `None`
/// when it could not start. Collective.
pub fn flush_async_start(job: &Job, dset: DatasetId) -> ScrResult<Option<AsyncFlush>> {
    let plan = match prepare(job, dset, EventType::AsyncFlushStart)? {
        Prepared::Ready(p) => *p,
        Prepared::Refused(why) => {
            job.log(
                Entry::event(EventType::AsyncFlushFail)
                    .dset(dset)
                    .note(why.to_string()),
            );
            return Ok(None);
        }
    };
    let checks = CopyChecks::of(&job.settings, job.settings.flush.crc);
    announce(job, &plan);
    let threads = plan.copy.1;
    let bw = job.settings.flush.async_bw_bytes_per_s as f64;
    let percent = job.settings.flush.async_percent;
    let per_rank = bw / job.node_comm.size().max(1) as f64;
    let throttle = Throttle {
        bw: (per_rank > 0.0).then_some(per_rank),
        percent,
        clock: job.clock.clone(),
    };
    let items = plan.items.clone();
    let me = job.rank().0;
    let progress = Progress::shared();
    let p = progress.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("scr-flush-{dset}"))
        .spawn(move || {
            copy_all(&items, checks, Some(throttle), Some(&p), threads, || {
                crate::fault_point!("flush.async.file.copied", rank = me)
                    .map_err(|e| CopyError::Injected(e.into()))
            })
        });
    let (handle, not_started) = match spawned {
        Ok(h) => (Some(h), None),
        Err(source) => (
            None,
            Some(CopyError::Io {
                path: "scr-flush".into(),
                op: "spawn the flush thread",
                source,
            }),
        ),
    };
    Ok(Some(AsyncFlush {
        plan,
        handle,
        not_started,
        progress,
    }))
}

/// Check (or with `wait`, wait for) a background flush. `None` while some
/// rank is still copying; `Some(in_prefix)` once it ended, with the index
/// and flush file completed. Collective.
pub fn flush_async_test(job: &Job, af: &mut AsyncFlush, wait: bool) -> ScrResult<Option<bool>> {
    let done_here = wait || af.handle.as_ref().is_none_or(|h| h.is_finished());
    if !job.world.all_true(done_here)? {
        return Ok(None);
    }
    // Waiting for a background copy is where its watchdog applies.
    let local = match (af.handle.take(), af.not_started.take()) {
        (Some(h), _) => watchdog::wait(h, &af.progress, Bound::of(&job.settings)),
        (None, Some(e)) => Err(e),
        (None, None) => Err(CopyError::AlreadyCompleted),
    };
    finish(job, &af.plan, local, XferType::FlushAsync).map(Some)
}
