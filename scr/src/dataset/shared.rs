//! Shared files: one path routed by several ranks in one dataset (SCR 3.1's
//! `scr_assign_ownership`). In bypass mode every rank writes its part of
//! the one file in the prefix directory and the file is recorded once,
//! under the lowest of those ranks (its owner), as LLNL SCR 3.1 does. In
//! cache mode each rank would get a private copy in its own cache, and the
//! flushes of those copies would overwrite one another in the prefix: the
//! dataset fails on every rank with [`ScrError::SharedFile`] naming the
//! files and ranks.
//!
//! Detection is distributed, as LLNL's sort of the paths is: each rank
//! sends each routed path to the rank its CRC32 picks (one sparse
//! exchange), that rank finds the paths several ranks sent, and one
//! allreduce says whether any rank found one. Without shared files (the
//! common case) no rank handles more than its own paths and its share of
//! the others', whatever the job's size. When some exist, each collector
//! tells every rank that routed one of its shared paths who owns it (a
//! second sparse exchange): in bypass mode, where shared files are legal,
//! a rank learns only the owners of its own paths, so an N-1 file written
//! by every rank costs each rank one path and one rank number, not the
//! list of all P ranks. Only the cache-mode error, which names the files
//! and their ranks on every rank, gathers the found files everywhere
//! ([`Found::gather`]). The collector of an N-1 file still receives its
//! path from every rank (P copies of one path), as the rank holding that
//! key does in LLNL's sort.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::cache::Job;
use crate::comm::{Comm, CommResult};
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

/// The paths routed by more than one rank, from the lists ranks sent,
/// each with its sender (in increasing rank order).
fn shared_of<'a>(lists: impl IntoIterator<Item = (Rank, &'a [u8])>) -> Vec<SharedFile> {
    let mut by_path: BTreeMap<PathBuf, Vec<Rank>> = BTreeMap::new();
    for (rank, list) in lists {
        for p in unpack_paths(list) {
            let ranks = by_path.entry(p).or_default();
            if ranks.last() != Some(&rank) {
                ranks.push(rank);
            }
        }
    }
    by_path
        .into_iter()
        .filter(|(_, r)| r.len() > 1)
        .map(|(path, ranks)| SharedFile { path, ranks })
        .collect()
}

/// The rank that collects `path` from every rank routing it: the same on
/// every rank, spread evenly over the communicator.
fn collector_of(path: &Path, size: usize) -> usize {
    crc32fast::hash(path.as_os_str().as_bytes()) as usize % size.max(1)
}

/// Encode shared files for the gather: per file, its path, NUL,
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

/// What a rank learns of the files more than one rank routed
/// ([`find`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Some rank routed a path another rank routed too (the same on every
    /// rank).
    pub any: bool,
    /// Of this rank's routed paths, those another rank routed too, each
    /// with its owner (the lowest rank that routed it).
    pub owners: BTreeMap<PathBuf, Rank>,
    /// The shared paths this rank collected, with every rank that routed
    /// each; the lists of the ranks are disjoint.
    collected: Vec<SharedFile>,
}

impl Found {
    /// Every shared file with its ranks, sorted by path; the same list on
    /// every rank. Collective (an allgather, whose bytes per rank grow
    /// with the ranks that share a file): for the cache-mode error only.
    pub fn gather(&self, world: &dyn Comm) -> CommResult<Vec<SharedFile>> {
        if !self.any {
            return Ok(Vec::new());
        }
        let mut all: Vec<SharedFile> = world
            .allgather_bytes(&encode(&self.collected))?
            .iter()
            .flat_map(|bytes| decode(bytes))
            .collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(all)
    }
}

/// The files of `dset` that more than one rank routed, as this rank
/// learns them. Collective.
pub fn find(job: &Job, dset: DatasetId) -> ScrResult<Found> {
    let mine = routed_files(job, dset);
    let paths: Vec<&Path> = mine.iter().map(|(_, p)| p.as_path()).collect();
    Ok(find_in(job.world.as_ref(), &paths)?)
}

/// Which of `paths` other ranks of `world` passed too, with their owners.
/// Collective: a sparse exchange and an allreduce; a second sparse
/// exchange, from each collector to the ranks of its shared paths, only
/// when some path is shared.
fn find_in(world: &dyn Comm, paths: &[&Path]) -> CommResult<Found> {
    let mut by_collector: BTreeMap<usize, Vec<&Path>> = BTreeMap::new();
    for &p in paths {
        by_collector
            .entry(collector_of(p, world.size()))
            .or_default()
            .push(p);
    }
    let sends: BTreeMap<usize, Vec<u8>> = by_collector
        .into_iter()
        .map(|(to, ps)| (to, pack_paths(&ps)))
        .collect();
    let received = world.exchange_sparse(&sends)?;
    let collected = shared_of(
        received
            .iter()
            .map(|(&from, list)| (Rank::of_index(from), list.as_slice())),
    );
    drop(received);
    if !world.any_true(!collected.is_empty())? {
        return Ok(Found::default());
    }
    // Each rank of a shared path learns the path's owner: per rank, the
    // pairs (path, owner) of its shared paths this rank collected.
    let mut replies: BTreeMap<usize, Vec<SharedFile>> = BTreeMap::new();
    for f in &collected {
        let owner = f.ranks[0];
        for r in &f.ranks {
            replies.entry(r.index()).or_default().push(SharedFile {
                path: f.path.clone(),
                ranks: vec![owner],
            });
        }
    }
    let replies: BTreeMap<usize, Vec<u8>> = replies
        .into_iter()
        .map(|(to, files)| (to, encode(&files)))
        .collect();
    let owners = world
        .exchange_sparse(&replies)?
        .values()
        .flat_map(|bytes| decode(bytes))
        .filter_map(|f| Some((f.path, *f.ranks.first()?)))
        .collect();
    Ok(Found {
        any: true,
        owners,
        collected,
    })
}

/// Bypass mode: keep each shared file only in its owner's entries (the
/// lowest rank that routed it); the other ranks forget it (their parts
/// are in the one file). Writes the filemap when it changed. Not
/// collective.
pub fn keep_owner_only(job: &mut Job, dset: DatasetId, found: &Found) -> ScrResult<()> {
    let me = job.rank();
    let mut dropped = false;
    for (key, path) in routed_files(job, dset) {
        if found.owners.get(&path).is_some_and(|&o| o != me) {
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
    fn paths_routed_by_two_ranks_are_shared_and_survive_their_encoding() {
        let lists = [
            pack_paths(&[Path::new("/p/a"), Path::new("/p/shared")]),
            pack_paths(&[Path::new("/p/b")]),
            pack_paths(&[Path::new("/p/shared"), Path::new("/p/c")]),
            pack_paths(&[Path::new("/p/shared")]),
        ];
        let shared = shared_of(
            lists
                .iter()
                .enumerate()
                .map(|(i, l)| (Rank::of_index(i), l.as_slice())),
        );
        assert_eq!(
            shared,
            vec![SharedFile {
                path: PathBuf::from("/p/shared"),
                ranks: vec![Rank(0), Rank(2), Rank(3)],
            }]
        );
        assert_eq!(decode(&encode(&shared)), shared);
        assert!(decode(&encode(&[])).is_empty());
        let one = pack_paths(&[Path::new("/p/x")]);
        assert!(shared_of([(Rank(0), one.as_slice())]).is_empty());
    }

    #[test]
    fn each_rank_learns_the_owners_of_its_shared_paths_and_the_error_gathers_them_all() {
        use crate::comm::thread::ThreadComm;
        // Rank r routes its own file, "/p/all" (every rank), "/p/even"
        // (even ranks) and "/p/pair-<r / 2>" (two ranks each); rank 3
        // names its own file twice.
        let n = 9;
        let got = ThreadComm::run(n, |world| {
            let r = world.rank();
            let mut paths = vec![
                PathBuf::from(format!("/p/own-{r}")),
                PathBuf::from("/p/all"),
                PathBuf::from(format!("/p/pair-{}", r / 2)),
            ];
            if r % 2 == 0 {
                paths.push(PathBuf::from("/p/even"));
            }
            if r == 3 {
                paths.push(PathBuf::from("/p/own-3"));
            }
            let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
            let found = find_in(world, &refs).unwrap();
            let all = found.gather(world).unwrap();
            (found, all)
        })
        .unwrap();
        let ranks = |rs: &[usize]| rs.iter().map(|&r| Rank::of_index(r)).collect::<Vec<_>>();
        let mut want = vec![
            SharedFile {
                path: PathBuf::from("/p/all"),
                ranks: ranks(&(0..n).collect::<Vec<_>>()),
            },
            SharedFile {
                path: PathBuf::from("/p/even"),
                ranks: ranks(&[0, 2, 4, 6, 8]),
            },
        ];
        // Rank 8 is alone in its pair.
        for k in 0..4 {
            want.push(SharedFile {
                path: PathBuf::from(format!("/p/pair-{k}")),
                ranks: ranks(&[2 * k, 2 * k + 1]),
            });
        }
        want.sort_by(|a, b| a.path.cmp(&b.path));
        // The paths really are collected on more than one rank.
        let collectors: std::collections::BTreeSet<usize> =
            want.iter().map(|f| collector_of(&f.path, n)).collect();
        assert!(collectors.len() > 1, "{collectors:?}");
        for (rank, (found, all)) in got.iter().enumerate() {
            assert!(found.any, "rank {rank}");
            assert_eq!(all, &want, "rank {rank}");
            // A rank learns the owner of each of its shared paths, and of
            // no other path.
            let mine: BTreeMap<PathBuf, Rank> = want
                .iter()
                .filter(|f| f.ranks.contains(&Rank::of_index(rank)))
                .map(|f| (f.path.clone(), f.ranks[0]))
                .collect();
            assert_eq!(found.owners, mine, "rank {rank}");
        }
        let none = ThreadComm::run(4, |world| {
            let own = PathBuf::from(format!("/p/own-{}", world.rank()));
            let found = find_in(world, &[own.as_path()]).unwrap();
            let all = found.gather(world).unwrap();
            (found, all)
        })
        .unwrap();
        assert!(
            none.iter()
                .all(|(f, all)| *f == Found::default() && all.is_empty()),
            "{none:?}"
        );
    }

    #[test]
    fn an_n_to_1_file_costs_a_rank_one_owner_whatever_the_job_s_size() {
        use crate::comm::thread::{CommStats, ThreadComm, ThreadConfig};
        // Every rank routes the one file; in bypass mode each needs to
        // learn its owner, not the list of every rank that wrote it. What
        // a rank other than the path's collector receives must not grow
        // with the job.
        let n1 = Path::new("/prefix/ckpt.1/n1.h5");
        let received = |p: usize| {
            let stats = CommStats::new(p);
            let found = ThreadComm::run_counted(&ThreadConfig::default(), &stats, p, |world| {
                find_in(world, &[n1]).unwrap()
            })
            .unwrap();
            for (rank, f) in found.iter().enumerate() {
                assert!(f.any, "P = {p}, rank {rank}");
                assert_eq!(
                    f.owners,
                    BTreeMap::from([(n1.to_path_buf(), Rank(0))]),
                    "P = {p}, rank {rank}"
                );
            }
            let collector = collector_of(n1, p);
            let others = (0..p)
                .filter(|&r| r != collector)
                .map(|r| stats.get(r).bytes_received);
            (others.max().unwrap(), stats.get(collector).bytes_received)
        };
        let (small, small_collector) = received(8);
        let (large, large_collector) = received(128);
        assert_eq!(large, small, "a rank's bytes grew from 8 to 128 ranks");
        // The collector receives the path from every rank.
        assert!(
            large_collector >= 128 * n1.as_os_str().len() as u64
                && small_collector < large_collector,
            "{small_collector} {large_collector}"
        );
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
