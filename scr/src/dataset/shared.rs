//! Shared files: one path routed by several ranks in one dataset (SCR 3.1's
//! `scr_assign_ownership`). In bypass mode every rank writes its part of
//! the one file in the prefix directory and the file is recorded once,
//! under the lowest of those ranks (its owner), as LLNL SCR 3.1 does. In
//! cache mode each rank would get a private copy in its own cache, and the
//! flushes of those copies would overwrite one another in the prefix: the
//! dataset fails on every rank with [`ScrError::SharedFile`] naming the
//! files and ranks.
//!
//! Detection gathers every rank's routed paths on rank 0 (one gather and
//! one broadcast per Complete_output): a dataset's file list, not its
//! data, so this stays small next to the files themselves.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::cache::Job;
use crate::error::ScrResult;
use crate::ids::{DatasetId, Rank};
use crate::records::meta::{FileType, Meta};

pub use crate::error::SharedFile;

/// The absolute path a file was routed as, from its meta (`ORIGPATH` and
/// `ORIGNAME`).
fn routed_path(meta: &Meta) -> Option<PathBuf> {
    Some(Path::new(meta.orig_path.as_deref()?).join(meta.orig_name.as_deref()?))
}

/// This rank's application files of `dset`: filemap key and routed path.
fn routed_files(job: &Job, dset: DatasetId) -> Vec<(String, PathBuf)> {
    let me = job.rank();
    job.filemap
        .list_files(dset, me)
        .into_iter()
        .filter_map(|key| {
            let meta = job.filemap.meta(dset, me, &key).ok().flatten()?;
            if meta.file_type.unwrap_or(FileType::Full) != FileType::Full {
                return None;
            }
            Some((key, routed_path(&meta)?))
        })
        .collect()
}

/// Paths joined by NUL (no path holds one).
fn pack_paths(paths: &[&Path]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p.as_os_str().as_bytes());
        out.push(0);
    }
    out
}

fn unpack_paths(bytes: &[u8]) -> impl Iterator<Item = PathBuf> + '_ {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| PathBuf::from(OsStr::from_bytes(s)))
}

/// Rank 0: the paths routed by more than one rank, from every rank's list.
fn shared_of(lists: &[Vec<u8>]) -> Vec<SharedFile> {
    let mut by_path: BTreeMap<PathBuf, Vec<Rank>> = BTreeMap::new();
    for (i, list) in lists.iter().enumerate() {
        for p in unpack_paths(list) {
            let ranks = by_path.entry(p).or_default();
            if ranks.last() != Some(&Rank::of_index(i)) {
                ranks.push(Rank::of_index(i));
            }
        }
    }
    by_path
        .into_iter()
        .filter(|(_, r)| r.len() > 1)
        .map(|(path, ranks)| SharedFile { path, ranks })
        .collect()
}

/// Encode the shared files for the broadcast: per file, its path, NUL,
/// its ranks in decimal separated by commas, NUL.
fn encode(files: &[SharedFile]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in files {
        out.extend_from_slice(f.path.as_os_str().as_bytes());
        out.push(0);
        let ranks: Vec<String> = f.ranks.iter().map(ToString::to_string).collect();
        out.extend_from_slice(ranks.join(",").as_bytes());
        out.push(0);
    }
    out
}

fn decode(bytes: &[u8]) -> Vec<SharedFile> {
    let fields: Vec<&[u8]> = bytes.split(|&b| b == 0).collect();
    fields
        .chunks_exact(2)
        .map(|pair| SharedFile {
            path: PathBuf::from(OsStr::from_bytes(pair[0])),
            ranks: String::from_utf8_lossy(pair[1])
                .split(',')
                .filter_map(|r| r.parse().ok().map(Rank))
                .collect(),
        })
        .collect()
}

/// The files of `dset` that more than one rank routed, with their ranks;
/// the same list on every rank. Collective.
pub fn find(job: &Job, dset: DatasetId) -> ScrResult<Vec<SharedFile>> {
    let mine = routed_files(job, dset);
    let paths: Vec<&Path> = mine.iter().map(|(_, p)| p.as_path()).collect();
    let gathered = job.world.gather_bytes(0, &pack_paths(&paths))?;
    let mut found = gathered
        .map(|lists| encode(&shared_of(&lists)))
        .unwrap_or_default();
    job.world.bcast_bytes(0, &mut found)?;
    Ok(decode(&found))
}

/// Bypass mode: keep each shared file only in its owner's entries (the
/// lowest rank that routed it); the other ranks forget it (their parts
/// are in the one file). Writes the filemap when it changed. Not
/// collective.
pub fn keep_owner_only(job: &mut Job, dset: DatasetId, shared: &[SharedFile]) -> ScrResult<()> {
    let me = job.rank();
    let mut dropped = false;
    for (key, path) in routed_files(job, dset) {
        let owner = shared
            .iter()
            .find(|f| f.path == path)
            .and_then(|f| f.ranks.first().copied());
        if owner.is_some_and(|o| o != me) {
            job.filemap.remove_file(dset, me, &key);
            dropped = true;
        }
    }
    if dropped {
        let n = job.app_files(dset).len() as u64;
        job.filemap.set_expected_files(dset, me, n);
        job.write_filemap()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_routed_by_two_ranks_are_shared_and_survive_the_broadcast() {
        let lists = vec![
            pack_paths(&[Path::new("/p/a"), Path::new("/p/shared")]),
            pack_paths(&[Path::new("/p/b")]),
            pack_paths(&[Path::new("/p/shared"), Path::new("/p/c")]),
            pack_paths(&[Path::new("/p/shared")]),
        ];
        let shared = shared_of(&lists);
        assert_eq!(
            shared,
            vec![SharedFile {
                path: PathBuf::from("/p/shared"),
                ranks: vec![Rank(0), Rank(2), Rank(3)],
            }]
        );
        assert_eq!(decode(&encode(&shared)), shared);
        assert!(decode(&encode(&[])).is_empty());
        assert!(shared_of(&[pack_paths(&[Path::new("/p/x")])]).is_empty());
    }

    #[test]
    fn a_message_names_the_file_and_its_ranks_and_stays_bounded() {
        let f = SharedFile {
            path: PathBuf::from("/p/shared.dat"),
            ranks: (0..20).map(Rank).collect(),
        };
        let text = f.to_string();
        assert!(
            text.starts_with("/p/shared.dat routed by ranks 0, 1, 2"),
            "{text}"
        );
        assert!(text.ends_with("and 12 more"), "{text}");
    }
}
