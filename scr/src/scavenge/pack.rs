//! Containers in a scavenge (SCR_USE_CONTAINERS=1): `scr copy` runs on
//! each node on its own and cannot know where another node's bytes end, so
//! it copies plain files as without containers; once `scr postrun` has
//! indexed the dataset, [`pack_dataset`] packs its application files into
//! `ctr.<id>.scr` as a flush lays them out (one stream, a node's ranks
//! contiguous, a file spilling over into the next container when one is
//! full), rewrites the map with each file's `SEG` list, and only then
//! removes the plain files. A kill at any point leaves a map whose every
//! entry names bytes that are there: before the map is rewritten it names
//! the plain files, after it the containers (fsynced first). Redundancy
//! files (NOFETCH) stay plain.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{io_err, ScavengeError, ScavengeResult};
use crate::prefix::container::{self, Packing};
use crate::prefix::layout::Placement;
use crate::records::Segment;

/// What [`pack_dataset`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PackReport {
    /// Containers written.
    pub containers: u64,
    /// Files packed.
    pub files: u64,
    /// Bytes packed.
    pub bytes: u64,
    /// The map was already in containers: nothing done.
    pub already_packed: bool,
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
        return Ok(report);
    }
    let base = pl.key_base(prefix);
    let dir = pl.meta_rel();
    let ctr_dir = base.join(&dir);
    container::remove_containers(&ctr_dir).map_err(io_err(&ctr_dir, "remove old containers"))?;
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
    container::create_containers(&base, &create).map_err(pack_err("the containers"))?;
    let mut buf = Vec::new();
    let mut plain: Vec<PathBuf> = Vec::new();
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
        plain.push(src);
    }
    report.containers = create.len() as u64;
    crate::prefix::flush::write_map(&pl.meta_dir(prefix), pl, &map)?;
    // The map names the containers now: the plain copies can go.
    for p in &plain {
        fs::remove_file(p).map_err(io_err(p, "remove the packed file"))?;
        if let Some(parent) = p.parent() {
            crate::prefix::remove_empty_dirs_up_to(parent, prefix);
        }
    }
    Ok(report)
}
