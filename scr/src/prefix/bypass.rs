//! Bypass mode in the prefix directory (SCR 3.1's SCR_CACHE_BYPASS=1 and
//! CKPT `BYPASS=1`): the application writes its files straight to the
//! paths it routed, so at complete the dataset is flushed by writing its
//! metadata alone — rank2file (and our `filemeta`) and the summary in
//! `.scr/scr.dataset.<id>/`, then the index entry, then `PFS` in the flush
//! file — as [`super::flush`] does after a copy, without the copy.
//!
//! - [`start`] (Start_output): before the first byte is written, rank 0
//!   forgets the index entries this dataset is about to overwrite (its id,
//!   its name) and marks it FLUSHING, as a flush's start does.
//! - [`finish`] (Complete_output, after the validity vote): every rank's
//!   files with their sizes and CRC32s go to rank 0, which writes the
//!   metadata; an error fails on every rank.
//! - [`abandon`]: an invalid output leaves the flush file without FLUSHING.
//!
//! Bypass needs SCR 3.1's layout, where files stay where they were routed;
//! an old-layout prefix stores files in a dataset directory, so
//! [`check_layout`] refuses it until `scr index --upgrade`.

use super::layout::{Layout, Placement};
use super::{on_rank0, pack_rank_files, unpack_rank_files, update_flush_file, update_index};
use super::{FlushError, PrefixError};
use crate::cache::Job;
use crate::error::ScrResult;
use crate::ids::DatasetId;
use crate::records::dataset::Dataset;
use crate::records::index::timestamp;
use crate::records::{Location, Rank2File, Rank2FileEntry, RankFiles};

/// Refuse bypass mode in a prefix still in the old layout (the same
/// answer on every rank). Collective.
pub fn check_layout(job: &Job) -> ScrResult<()> {
    if super::flush::prefix_layout(job)? == Layout::Legacy {
        return Err(PrefixError::from(FlushError::BypassNeedsScr31Layout {
            prefix: job.prefix.clone(),
        })
        .into());
    }
    Ok(())
}

/// Rank 0 records the start of bypass dataset `dset` (descriptor `ds`):
/// index entries of its id and name removed, its old metadata directory
/// removed, FLUSHING (not CACHE) in the flush file. Collective.
pub fn start(job: &Job, dset: DatasetId, ds: &Dataset) -> ScrResult<()> {
    let prefix = job.prefix.clone();
    let pl = Placement::scr31(dset.get());
    let name = ds
        .name
        .clone()
        .unwrap_or_else(|| Dataset::default_name(dset.get()));
    on_rank0(
        job.world.as_ref(),
        "record the bypass dataset's start",
        || {
            update_index(&prefix, |idx| {
                idx.remove_id(dset.get());
                while let Some(other) = idx.dataset_id_by_dir(&name) {
                    idx.remove_id(other);
                }
            })?;
            let meta = pl.meta_dir(&prefix);
            crate::beneath::remove_dir_all_if_present_in(&prefix, &meta)
                .map_err(crate::error::io_err(&meta, "remove directory"))?;
            update_flush_file(&prefix, |ff| {
                ff.location_set(dset.get(), Location::Flushing);
                let e = ff.datasets.entry(dset.get()).or_default();
                e.output = ds.flag_output.filter(|o| *o);
                e.name = Some(name.clone());
                e.checkpoint = Some(ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some()));
                e.dataset = Some(ds.clone());
            })
        },
    )?;
    Ok(())
}

/// fsync `path` (a file, or a directory: a new file's name is durable once
/// its directory is synced). The application wrote the file straight to
/// the prefix and may not have synced it; the index is about to call it
/// complete, so its bytes must survive a power loss (the crash-point
/// sweep's `--power-loss` found committed bypass checkpoints lost without
/// this).
/// The file or directory is opened below the prefix through handles,
/// never through a link ([`crate::beneath`]); the synced handle is
/// returned.
fn sync_path(job: &Job, path: &std::path::Path, dir: bool) -> Result<std::fs::File, FlushError> {
    let open = if dir {
        crate::beneath::open_dir_in(&job.prefix, path)
    } else {
        crate::beneath::open_in(&job.prefix, path, crate::beneath::How::Read)
    };
    let f = open
        .and_then(|f| f.sync_all().map(|()| f))
        .map_err(|source| FlushError::Sync {
            rank: job.rank().as_i64(),
            path: path.to_path_buf(),
            source,
        })?;
    if dir {
        crate::fault::dir_synced(path);
    } else {
        crate::fault::synced(path);
    }
    Ok(f)
}

/// This rank's files of bypass dataset `dset` as rank2file entries (keys
/// relative to the prefix), from the sizes and CRC32s recorded at complete;
/// each file, and each directory holding one, is fsynced first.
fn my_files(job: &Job, dset: DatasetId) -> Result<RankFiles, FlushError> {
    let pl = Placement::scr31(dset.get());
    let mut mine = RankFiles::default();
    let mut dirs = std::collections::BTreeSet::new();
    for (key, meta) in job.app_files(dset) {
        let Some(rel) = pl.rel_of(&job.prefix, &meta) else {
            return Err(FlushError::OutsideDir {
                rank: job.rank().as_i64(),
                file: key,
                routed: meta.orig.clone(),
                dir: job.prefix.clone(),
            });
        };
        let path = std::path::Path::new(&key);
        let f = sync_path(job, path, false)?;
        // SCR_COPY_METADATA: from the handle just synced, opened below the
        // prefix without passing a link.
        let attrs = job
            .settings
            .flush
            .copy_metadata
            .then(|| crate::storage::attrs::of_file(&f))
            .transpose()
            .map_err(|source| FlushError::Sync {
                rank: job.rank().as_i64(),
                path: path.to_path_buf(),
                source,
            })?;
        if let Some(d) = path.parent() {
            dirs.insert(d.to_path_buf());
        }
        mine.files.insert(
            rel,
            Rank2FileEntry {
                size_bytes: meta.size_bytes,
                crc32: meta.crc32,
                attrs,
                ..Rank2FileEntry::default()
            },
        );
    }
    for d in &dirs {
        sync_path(job, d, true)?;
    }
    mine.expected_files = Some(mine.files.len() as u64);
    Ok(mine)
}

/// Complete bypass dataset `dset` in the prefix: rank2file, filemeta and
/// summary in `.scr/scr.dataset.<id>/`, then COMPLETE (and CURRENT for a
/// checkpoint) in the index, then PFS in the flush file. An error on any
/// rank is an error on every rank. Collective.
pub fn finish(job: &Job, dset: DatasetId) -> ScrResult<()> {
    let local = my_files(job, dset);
    let ok = job.world.all_true(local.is_ok())?;
    let mine = local.map_err(PrefixError::from)?;
    if !ok {
        return Err(PrefixError::from(FlushError::OtherRank).into());
    }
    let gathered = job
        .world
        .gather_bytes(0, &pack_rank_files(job.rank().as_i64(), &mine))?;
    let ranks = job.world.size() as u64;
    let prefix = job.prefix.clone();
    let pl = Placement::scr31(dset.get());
    let mut ds = job
        .dataset(dset)
        .unwrap_or_else(|| Dataset::new(dset.get()));
    let now_s = job.clock.unix_secs();
    on_rank0(
        job.world.as_ref(),
        "write the bypass dataset's metadata",
        || {
            let mut map = Rank2File {
                ranks,
                ..Rank2File::default()
            };
            for b in gathered.unwrap_or_default() {
                let part = unpack_rank_files(&b).map_err(PrefixError::RankFiles)?;
                map.rank.extend(part);
            }
            ds.complete = Some(true);
            super::flush::write_dataset_metadata(&prefix, &pl, &map, &ds, true)?;
            let key = ds
                .name
                .clone()
                .unwrap_or_else(|| Dataset::default_name(dset.get()));
            let is_ckpt = ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some());
            update_index(&prefix, |idx| {
                idx.set_dataset(dset.get(), &key, ds.clone(), true);
                idx.mark_flushed(dset.get(), &key, timestamp(now_s));
                if is_ckpt {
                    idx.set_current(&key);
                }
            })?;
            update_flush_file(&prefix, |ff| {
                ff.location_set(dset.get(), Location::Pfs);
                ff.location_unset(dset.get(), Location::Flushing);
                ff.location_unset(dset.get(), Location::Cache);
            })
        },
    )?;
    Ok(())
}

/// A bypass dataset that did not complete: rank 0 drops its FLUSHING mark
/// (and the entry, when nothing else is recorded). Collective; a failure
/// is a warning, the flush file being advisory.
pub fn abandon(job: &Job, dset: DatasetId) -> ScrResult<()> {
    let prefix = job.prefix.clone();
    let r = on_rank0(job.world.as_ref(), "update the flush file", || {
        update_flush_file(&prefix, |ff| {
            ff.location_unset(dset.get(), Location::Flushing);
            if ff
                .datasets
                .get(&dset.get())
                .is_some_and(|e| e.locations.is_empty())
            {
                ff.remove(dset.get());
            }
        })
    });
    if let Err(e) = r {
        eprintln!("SCR: warning: {e}");
    }
    Ok(())
}
