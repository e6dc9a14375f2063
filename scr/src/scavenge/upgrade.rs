//! `scr index --upgrade`: move a prefix from this project's earlier layout
//! (index version 1, metadata in `<dir>/.scr/`) to LLNL SCR 3.1's (index
//! version 2, metadata in `.scr/scr.dataset.<id>/`), in place. Files stay
//! where they are: each dataset's keys become `<dir>/<key>` (relative to
//! the prefix, as LLNL's rank2file has them) and its summary records `DIR`
//! and `ORIGDIR` so a fetch gives files back their routed paths
//! (docs/formats.md).
//!
//! The steps keep the prefix readable if the upgrade stops anywhere:
//! 1. every dataset's new metadata is written into a temporary directory,
//!    fsynced, and renamed to `.scr/scr.dataset.<id>` (the version-1 index
//!    does not look there, so these are unreferenced until step 2);
//! 2. the version-2 index is written atomically (temporary file, fsync,
//!    rename): the one moment the prefix changes layout;
//! 3. flush file entries lose `DIR`/`ORIGDIR` and the old `<dir>/.scr`
//!    metadata is removed.
//!
//! Run again on a version-2 index, it only redoes step 3, so an upgrade
//! stopped after step 2 is finished by running it again.

use std::path::Path;

use serde::Serialize;

use super::{io_err, ScavengeResult};
use crate::beneath;
use crate::prefix::flush::write_dataset_metadata;
use crate::prefix::layout::{dataset_meta_dir, Layout, Placement, META_DIR};
use crate::records::dataset::Dataset;
use crate::records::flush::{FlushFile, FLUSH_FILE};
use crate::records::index::{index_path, IndexEntry};
use crate::records::summary::{Summary, SUMMARY_FILE};
use crate::records::{Index, Rank2File, Record};

/// What `scr index --upgrade` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// The index was already version 2: only the clean-up ran.
    pub already: bool,
    /// Datasets moved: id, old directory, name (the new index key).
    pub moved: Vec<(i64, String, String)>,
    /// Index entries left out, with why (their metadata was unreadable).
    pub skipped: Vec<(i64, String, String)>,
}

/// Upgrade the prefix in place (see the module documentation).
pub fn upgrade(prefix: &Path) -> ScavengeResult<UpgradeReport> {
    let path = index_path(prefix);
    // No index reads as an empty version-2 one: nothing to move.
    let old = super::index::read_index(prefix)?;
    let mut report = UpgradeReport::default();
    if old.layout() == Layout::Scr31 {
        report.already = true;
        clean_up(prefix, &old)?;
        return Ok(report);
    }
    let mut new = Index::new(Layout::Scr31);
    for (id, dirs) in &old.datasets {
        // One copy per dataset in version 2: the one a restart would use.
        let Some((dir, entry)) = dirs
            .iter()
            .find(|(_, e)| e.complete == Some(true) && e.failed.is_empty())
            .or_else(|| dirs.iter().next())
        else {
            continue;
        };
        match move_metadata(prefix, *id, dir) {
            Ok(name) => {
                let e: &mut IndexEntry = new
                    .datasets
                    .entry(*id)
                    .or_default()
                    .entry(name.clone())
                    .or_default();
                *e = entry.clone();
                if old.current.as_deref() == Some(dir.as_str()) {
                    new.current = Some(name.clone());
                }
                report.moved.push((*id, dir.clone(), name));
            }
            Err(e) => report.skipped.push((*id, dir.clone(), e.to_string())),
        }
    }
    // Step 2: the layout changes here, atomically.
    new.write_file_in(prefix, &path)?;
    clean_up(prefix, &new)?;
    Ok(report)
}

/// Step 1 for one dataset: write its metadata, SCR 3.1's way, into
/// `.scr/scr.dataset.<id>` through a temporary directory. Returns its name.
fn move_metadata(prefix: &Path, id: i64, dir: &str) -> ScavengeResult<String> {
    let old_meta = prefix.join(dir).join(META_DIR);
    let summary = Summary::read_file_in(prefix, old_meta.join(SUMMARY_FILE))?;
    let map =
        Rank2File::read_split_in(prefix, &old_meta, crate::records::rank2file::RANK2FILE_ROOT)?;
    let mut moved = Rank2File {
        ranks: map.ranks,
        ..Rank2File::default()
    };
    for (r, files) in map.rank {
        let mut f = files.clone();
        f.files = files
            .files
            .into_iter()
            .map(|(k, e)| (format!("{dir}/{k}"), e))
            .collect();
        moved.rank.insert(r, f);
    }
    // Staged in `.scr/scr.dataset.<id>.upgrade/` (a prefix of its own to
    // write_dataset_metadata), then renamed into place whole.
    let final_dir = dataset_meta_dir(prefix, id);
    let staged_prefix = prefix
        .join(META_DIR)
        .join(format!("{}.upgrade", Dataset::default_name(id)));
    remove_tree(prefix, &staged_prefix)?;
    crate::beneath::create_dir_all_in(prefix, &staged_prefix)
        .map_err(io_err(&staged_prefix, "create directory"))?;
    let staged = Placement {
        dir: dir.to_owned(),
        orig_dir: summary.orig_dir.clone(),
        meta_of: Some(id),
    };
    let staging = staged.meta_dir(&staged_prefix);
    let mut written = write_dataset_metadata(
        &staged_prefix,
        &staged,
        &moved,
        &summary.dataset,
        summary.complete,
    )?;
    written.dir = Some(dir.to_owned());
    written.orig_dir = summary.orig_dir.clone();
    written.write_file_in(prefix, staging.join(SUMMARY_FILE))?;
    sync_dir_in(prefix, &staging)?;
    if beneath::exists_in(prefix, &final_dir).map_err(io_err(&final_dir, "examine"))? {
        // Left by an upgrade that stopped before its index was written:
        // nothing refers to it.
        remove_tree(prefix, &final_dir)?;
    }
    beneath::rename_in(prefix, &staging, &final_dir)
        .map_err(io_err(&final_dir, "rename metadata into place"))?;
    sync_dir_in(prefix, &prefix.join(META_DIR))?;
    remove_tree(prefix, &staged_prefix)?;
    Ok(summary
        .dataset
        .name
        .clone()
        .unwrap_or_else(|| Dataset::default_name(id)))
}

/// fsync directory `dir` below `prefix`, opened through handles, never
/// through a link.
fn sync_dir_in(prefix: &Path, dir: &Path) -> ScavengeResult<()> {
    let d = beneath::open_dir_in(prefix, dir).map_err(io_err(dir, "open directory"))?;
    beneath::sync_dir_handle(&d, dir).map_err(io_err(dir, "fsync directory"))
}

/// Remove directory `dir` below `prefix` with its contents, never through
/// a link; a missing one is not an error.
fn remove_tree(prefix: &Path, dir: &Path) -> ScavengeResult<()> {
    crate::beneath::remove_dir_all_if_present_in(prefix, dir)
        .map_err(io_err(dir, "remove directory"))
}

/// Step 3: flush file entries in SCR 3.1 form, old metadata removed.
fn clean_up(prefix: &Path, idx: &Index) -> ScavengeResult<()> {
    let ff = prefix.join(META_DIR).join(FLUSH_FILE);
    if beneath::exists_in(prefix, &ff).map_err(io_err(&ff, "examine"))? {
        FlushFile::update_file_in(prefix, &ff, |f| {
            for e in f.datasets.values_mut() {
                e.dir = None;
                e.orig_dir = None;
            }
        })?;
    }
    for (id, _, _) in idx.entries() {
        let meta = dataset_meta_dir(prefix, id);
        let Ok(s) = Summary::read_file_in(prefix, meta.join(SUMMARY_FILE)) else {
            continue;
        };
        if let Some(dir) = s.dir {
            let old = prefix.join(&dir).join(META_DIR);
            remove_tree(prefix, &old)?;
        }
    }
    Ok(())
}
