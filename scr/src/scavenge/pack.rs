//! Containers in a scavenge (SCR_USE_CONTAINERS=1): `scr copy` runs on
//! each node on its own and cannot know where another node's bytes end, so
//! it copies plain files as without containers; once `scr postrun` has
//! indexed the dataset, [`pack_dataset`] packs its application files into
//! `ctr.<id>.scr` as a flush lays them out (one stream, a node's ranks
//! contiguous, a file spilling over into the next container when one is
//! full), rewrites the map with each file's `SEG` list, records the same
//! lists in the rank filemaps `scr copy` wrote (so a summary `scr index`
//! rebuilds from them finds the bytes), and only then removes the plain
//! files. A kill at any point leaves a map and rank filemaps whose every
//! entry names bytes that are there: before they are rewritten they name
//! the plain files, after it the containers (fsynced first); a pack run
//! again on a dataset whose map already names containers finishes the
//! rank filemaps and the removal. Redundancy files (NOFETCH) stay plain.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{io_err, ScavengeError, ScavengeResult};
use crate::prefix::container::{self, Packing};
use crate::prefix::layout::Placement;
use crate::records::rank_filemap::rank_filemap_file_name;
use crate::records::{Rank2File, Rank2FileEntry, RankFilemap, Record, Segment};

/// What [`pack_dataset`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PackReport {
    /// Containers written.
    pub containers: u64,
    /// Files packed.
    pub files: u64,
    /// Bytes packed.
    pub bytes: u64,
    /// The map was already in containers: only what a pack stopped
    /// before finishing was done (rank filemaps, plain files removed).
    pub already_packed: bool,
    /// Rank filemaps rewritten with their files' segments.
    pub rank_filemaps: u64,
}

/// Pack the application files of the dataset at `pl` into containers of
/// `container_bytes` (see the module documentation). Ranks are packed in
/// the order of `order` (the ranks each node copied, node after node, so
/// a node's files are contiguous as in a flush), then every other rank of
/// the map in rank order (ranks rebuilt from parity have no node).
pub fn pack_dataset(
    prefix: &Path,
    pl: &Placement,
    container_bytes: u64,
    order: &[i64],
) -> ScavengeResult<PackReport> {
    let mut map = pl.read_map(prefix)?;
    let mut report = PackReport::default();
    if map
        .rank
        .values()
        .flat_map(|r| r.files.values())
        .any(|e| !e.segments.is_empty())
    {
        report.already_packed = true;
        report.rank_filemaps = finish(prefix, pl, &map)?;
        return Ok(report);
    }
    let base = pl.key_base(prefix);
    let dir = pl.meta_rel();
    let ctr_dir = base.join(&dir);
    container::remove_containers(prefix, &ctr_dir)
        .map_err(io_err(&ctr_dir, "remove old containers"))?;
    // The stream: ranks node by node, each rank's files in key order.
    let mut ranks: Vec<i64> = Vec::with_capacity(map.rank.len());
    for r in order.iter().chain(map.rank.keys()) {
        if map.rank.contains_key(r) && !ranks.contains(r) {
            ranks.push(*r);
        }
    }
    let mut offset = 0u64;
    let mut plan: Vec<(i64, String, Vec<Segment>)> = Vec::new();
    let mut create = Vec::new();
    for r in &ranks {
        let Some(files) = map.rank.get(r) else {
            continue;
        };
        for (key, e) in files.files.iter().filter(|(_, e)| !e.nofetch) {
            let size = match e.size_bytes {
                Some(s) => s,
                None => {
                    let p = pl.stored_path(prefix, key);
                    fs::metadata(&p).map_err(io_err(&p, "stat"))?.len()
                }
            };
            let segs = container::segments_of(offset, size, container_bytes, &dir);
            create.extend(
                segs.iter()
                    .filter(|s| s.offset_bytes == 0 && s.length_bytes > 0)
                    .map(|s| s.file.clone()),
            );
            offset += size;
            plan.push((*r, key.clone(), segs));
        }
    }
    let pack_err = |file: &str| {
        let file = file.to_owned();
        move |source| ScavengeError::Pack { file, source }
    };
    container::create_containers(prefix, &base, &create).map_err(pack_err("the containers"))?;
    let mut buf = Vec::new();
    for (r, key, segs) in &plan {
        let Some(e) = map.rank.get_mut(r).and_then(|f| f.files.get_mut(key)) else {
            continue;
        };
        let src = pl.stored_path(prefix, key);
        let item = crate::prefix::CopyItem {
            src: src.clone(),
            dst: PathBuf::new(),
            rel: key.clone(),
            size: e.size_bytes,
            crc: e.crc32,
            attrs: None,
            packing: Some(Packing::Into(container::resolve(&base, segs))),
            within: Some(prefix.to_path_buf()),
        };
        let checks = crate::prefix::CopyChecks {
            crc: true,
            ..Default::default()
        };
        let c =
            crate::prefix::copy_file(&item, checks, None, None, &mut buf).map_err(pack_err(key))?;
        e.size_bytes = Some(c.size);
        e.crc32 = Some(c.crc);
        e.segments = c.segments;
        report.files += 1;
        report.bytes += c.size;
    }
    report.containers = create.len() as u64;
    crate::prefix::flush::write_map(prefix, &pl.meta_dir(prefix), pl, &map)?;
    report.rank_filemaps = finish(prefix, pl, &map)?;
    Ok(report)
}

/// Once the map names the containers: give the rank filemaps the same
/// segment lists, then remove the plain copies still there. Returns the
/// rank filemaps rewritten.
fn finish(prefix: &Path, pl: &Placement, map: &Rank2File) -> ScavengeResult<u64> {
    let meta_dir = pl.meta_dir(prefix);
    let mut rewritten = 0;
    for (r, files) in &map.rank {
        let packed: Vec<(&String, &Rank2FileEntry)> = files
            .files
            .iter()
            .filter(|(_, e)| !e.segments.is_empty())
            .collect();
        if packed.is_empty() {
            continue;
        }
        let path = meta_dir.join(rank_filemap_file_name(*r));
        // A rank with no readable rank filemap (rebuilt before the copies
        // were indexed, or damaged) has nothing to correct; `scr index`
        // reports a damaged one when it rescans.
        let Ok(mut rfm) = RankFilemap::read_file_in(prefix, &path) else {
            continue;
        };
        let mut changed = false;
        for (key, e) in &packed {
            let Some(meta) = rfm.files.get(*key) else {
                continue;
            };
            // The map was built from this rank filemap: the same file, or
            // the rank filemap is of another copy and is left as it is.
            let same =
                meta.size_bytes == e.size_bytes && (meta.crc32.is_none() || meta.crc32 == e.crc32);
            if same && rfm.segments.get(*key) != Some(&e.segments) {
                rfm.segments.insert((*key).clone(), e.segments.clone());
                changed = true;
            }
        }
        if changed {
            rfm.write_file_in(prefix, &path)?;
            rewritten += 1;
        }
    }
    // Map and rank filemaps name the containers now: the plain copies go.
    for (key, _) in map
        .rank
        .values()
        .flat_map(|f| f.files.iter())
        .filter(|(_, e)| !e.segments.is_empty())
    {
        let p = pl.stored_path(prefix, key);
        match crate::beneath::remove_file_in(prefix, &p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(&p, "remove the packed file")(e)),
        }
        if let Some(parent) = p.parent() {
            crate::prefix::remove_empty_dirs_up_to(parent, prefix);
        }
    }
    Ok(rewritten)
}
