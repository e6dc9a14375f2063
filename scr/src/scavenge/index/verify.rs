//! What `scr index --rebuild` checks before it indexes a dataset as
//! complete: a summary that says COMPLETE is a claim, not proof. Every file
//! its rank-to-file map lists must be there with the recorded size (and
//! CRC32, when one is recorded); a map that cannot be read or lists no rank
//! makes the dataset incomplete. And when the rebuild drops or demotes an
//! entry of a readable old index, the old index is kept aside first.

use std::path::{Path, PathBuf};

use super::Target;
use crate::beneath;
use crate::prefix::container;
use crate::prefix::layout::{Layout, Placement};
use crate::records::index::index_path;
use crate::records::rank2file::safe_relative;
use crate::records::{Index, Rank2File, Summary};
use crate::storage::verify::crc_of_open;

/// Problems a report lists at most (then a count).
const SHOWN: usize = 10;

/// Why the files of the dataset whose complete summary is `summary`, found
/// at `t`, do not back that summary; empty when they do.
pub(super) fn check_files(prefix: &Path, t: &Target, summary: &Summary) -> Vec<String> {
    let pl = match t {
        Target::Id(id) => Placement::of_entry(Layout::Scr31, *id, "", Some(summary)),
        Target::Dir(_) => t.placement(&summary.orig_dir),
    };
    let map: Rank2File = match &summary.rank2file {
        Some(m) => m.clone(),
        None => match pl.read_map(prefix) {
            Ok(m) => m,
            Err(e) => {
                return vec![format!(
                    "the summary says complete, but its rank2file map cannot be read: {e}"
                )]
            }
        },
    };
    if map.ranks == 0 {
        return vec!["the summary says complete, but its rank2file map lists no ranks".into()];
    }
    let mut problems = Vec::new();
    let mut more = 0usize;
    let mut note = |p: String| {
        if problems.len() < SHOWN {
            problems.push(p);
        } else {
            more += 1;
        }
    };
    for (rank, files) in &map.rank {
        if let Some(e) = files
            .expected_files
            .filter(|&e| e != files.files.len() as u64)
        {
            note(format!(
                "rank {rank}: the map lists {} files of the {e} it expects",
                files.files.len()
            ));
        }
        for (rel, e) in &files.files {
            if !safe_relative(rel) {
                note(format!("rank {rank}: {rel}: leaves the dataset directory"));
                continue;
            }
            if e.segments.is_empty() {
                let path = pl.stored_path(prefix, rel);
                if let Some(why) = problem_of(prefix, &path, e.size_bytes, e.crc32) {
                    note(format!("rank {rank}: {why}"));
                }
                continue;
            }
            let size = e
                .size_bytes
                .unwrap_or_else(|| e.segments.iter().map(|s| s.length_bytes).sum());
            if let Some(why) = container::segments_problem(&pl.key_base(prefix), &e.segments, size)
            {
                note(format!("rank {rank}: {rel}: {why}"));
            }
        }
    }
    if more > 0 {
        problems.push(format!("… and {more} more problems"));
    }
    problems
}

/// What is wrong with `path` against the map: not a file of `size` bytes
/// whose CRC32 is `crc` (each when recorded); `None` when nothing is. The
/// file is opened below `prefix` through handles: a link on the way (or
/// at the file) is a problem, never a way to vouch for a file elsewhere.
pub(super) fn problem_of(
    prefix: &Path,
    path: &Path,
    size: Option<u64>,
    crc: Option<u32>,
) -> Option<String> {
    let shown = path.display();
    let opened = beneath::open_in(prefix, path, beneath::How::Read);
    let (mut f, md) = match opened.and_then(|f| f.metadata().map(|md| (f, md))) {
        Ok(both) => both,
        Err(e) => return Some(format!("{shown}: {e}")),
    };
    if !md.is_file() {
        return Some(format!("{shown}: not a file"));
    }
    if let Some(s) = size.filter(|&s| s != md.len()) {
        return Some(format!("{shown}: {} bytes, the map records {s}", md.len()));
    }
    let want = crc?;
    match crc_of_open(&mut f) {
        Err(e) => Some(format!("{shown}: {e}")),
        Ok((got, _)) if got != want => Some(format!(
            "{shown}: CRC32 {got:#010x}, the map records {want:#010x}"
        )),
        Ok(_) => None,
    }
}

/// What the new index drops or demotes of the old one: entries gone,
/// entries no longer complete, another CURRENT.
pub(super) fn changes(old: &Index, new: &Index) -> Vec<String> {
    let mut out = Vec::new();
    for (id, key, e) in old.entries() {
        let now = new.datasets.get(&id).and_then(|d| d.get(key));
        match now {
            None => out.push(format!("dataset {id} ({key}) is no longer indexed")),
            Some(n) if e.complete == Some(true) && n.complete != Some(true) => {
                out.push(format!("dataset {id} ({key}) is no longer complete"))
            }
            Some(_) => {}
        }
    }
    if old.current.is_some() && old.current != new.current {
        out.push(format!(
            "CURRENT was {}, is now {}",
            old.current.as_deref().unwrap_or("(none)"),
            new.current.as_deref().unwrap_or("(none)")
        ));
    }
    out
}

/// Copy the index of `prefix` to `index.scr.bak.<secs>` (a new name, never
/// over an earlier copy) before a rebuild replaces it: read and created
/// through handles below the prefix, the copy `O_EXCL` (never an existing
/// file or a link) and fsynced.
pub(super) fn keep_aside(prefix: &Path, secs: i64) -> std::io::Result<PathBuf> {
    let path = index_path(prefix);
    let mut src = beneath::open_in(prefix, &path, beneath::How::Read)?;
    let dir_path = path.parent().unwrap_or(prefix);
    let dir = beneath::open_dir_in(prefix, dir_path)?;
    let mut n = 0u32;
    loop {
        let name = match n {
            0 => format!("index.scr.bak.{secs}"),
            n => format!("index.scr.bak.{secs}.{n}"),
        };
        match beneath::create_new_at(&dir, &name) {
            Ok(mut dst) => {
                std::io::copy(&mut src, &mut dst)?;
                dst.sync_all()?;
                beneath::sync_dir_handle(&dir, dir_path)?;
                return Ok(path.with_file_name(name));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}
