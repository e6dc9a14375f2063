//! Step 3 of `scr index --add`: plan and run the in-process rebuild of
//! every XOR/RS set of a dataset directory that lost members (see the
//! parent module), writing the lost members' files and rank filemaps.
//!
//! A survivor whose files `scr postrun` packed into containers
//! (SCR_USE_CONTAINERS) has them read out of their segments first, into
//! `.scr/unpacked.<rank>/` beside the rebuild, each checked against its
//! recorded size and CRC32 on the way; the rebuild reads those, and they
//! are removed when the set is done, rebuilt or not. A rebuilt member's
//! files are written plain (its rank filemap names no segments), beside
//! the containers that still hold the survivors'.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Scan;
use crate::beneath;
use crate::comm::thread::{ThreadComm, ThreadConfig};
use crate::kvtree::file as kvfile;
use crate::prefix::container::{self, Packing, SegPath};
use crate::prefix::layout::Placement;
use crate::records::dataset::Dataset;
use crate::records::meta::Meta;
use crate::records::rank_filemap::rank_filemap_file_name;
use crate::records::{RankFilemap, Record, RecordError, XorHeader};
use crate::redundancy::apply::{self, FileEntry, MemberFiles, MemberLoss, SetInfo};
use crate::scavenge::{RebuildError, RebuildProblem};
use crate::scheme::CopyType;

/// Bytes per pipelined piece of an in-process rebuild.
const REBUILD_PIECE_BYTES: usize = 1 << 20;
/// Bound on any one wait between the threads of an in-process rebuild.
const REBUILD_WAIT_BOUND: std::time::Duration = std::time::Duration::from_secs(1800);

/// A redundancy file's header and its parity count (FAILURES for RS, 1 for
/// XOR): only the header's bytes are read, from the file opened below the
/// prefix through handles (never through a link).
fn read_parity_header(prefix: &Path, path: &Path) -> Result<(XorHeader, usize), RecordError> {
    let mut f = beneath::open_in(prefix, path, beneath::How::Read).map_err(|source| {
        kvfile::KvFileError::Io {
            path: path.to_path_buf(),
            op: "open",
            source,
        }
    })?;
    let bytes = XorHeader::read_bytes_of(&mut f, path)?;
    let (h, _) = XorHeader::decode_prefix(&bytes, path)?;
    let tree = kvfile::decode(&bytes, path)?;
    let k = tree
        .get_int("FAILURES")
        .ok()
        .flatten()
        .map_or(1, |k| k.max(1) as usize);
    Ok((h, k))
}

/// One set to rebuild: everything the threads need.
pub(super) struct SetJob {
    kind: CopyType,
    group_id: i64,
    k: usize,
    header: XorHeader,
    /// A missing rank is lost whole (its files and its parity).
    lost: Vec<MemberLoss>,
    /// Survivors' files (None for lost members).
    inputs: Vec<Option<(MemberFiles, Vec<FileEntry>)>>,
    /// Survivors' files packed in containers, read out before the rebuild
    /// to the paths its inputs name.
    unpack: Vec<Unpack>,
}

/// A survivor's file to read out of its containers.
struct Unpack {
    /// The survivor's world rank.
    rank: i64,
    /// Its key in the rank filemap.
    key: String,
    /// Its segments, resolved below the dataset's base.
    segments: Vec<SegPath>,
    /// Where the rebuild reads it.
    to: PathBuf,
    size: Option<u64>,
    crc: Option<u32>,
}

/// The directory a survivor's packed files are read out to.
fn unpacked_dir(meta_dir: &Path, rank: i64) -> PathBuf {
    meta_dir.join(format!("unpacked.{rank}"))
}

/// Step 3: plan the rebuild of every set with lost members; `Err` lists
/// why the dataset cannot be made whole.
pub(super) fn plan_rebuild(
    s: &Scan,
    missing: &[i64],
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
) -> Result<Vec<SetJob>, Vec<RebuildProblem>> {
    let missing_set: BTreeSet<i64> = missing.iter().copied().collect();
    let mut covered = BTreeSet::new();
    let mut jobs = Vec::new();
    let mut why = Vec::new();
    for (&(kind, gid), set) in &s.sets {
        // Any present member's header gives the whole membership.
        let mut header = None;
        let mut unreadable = Vec::new();
        for m in set.members.values() {
            match read_parity_header(prefix, &dset_dir.join(&m.key)) {
                Ok(h) => {
                    header = Some(h);
                    break;
                }
                Err(source) => unreadable.push(RebuildProblem::Header { set: gid, source }),
            }
        }
        let Some((header, k)) = header else {
            why.extend(unreadable);
            continue;
        };
        let n = header.group_world_ranks.len();
        if n as u64 != set.size {
            why.push(RebuildProblem::SizeMismatch {
                set: gid,
                in_header: n,
                in_names: set.size,
            });
            continue;
        }
        let lost: Vec<MemberLoss> = (0..n)
            .map(|g| {
                let w = header.group_world_ranks[g];
                MemberLoss::whole(
                    !set.members.contains_key(&(g as u64)) || missing_set.contains(&w),
                )
            })
            .collect();
        let nlost = lost.iter().filter(|l| l.any()).count();
        for (g, &w) in header.group_world_ranks.iter().enumerate() {
            if lost[g].any() {
                covered.insert(w);
            }
        }
        if nlost == 0 {
            continue;
        }
        if !apply::recoverable(kind, k, &lost) {
            why.push(RebuildProblem::TooManyLost {
                set: gid,
                scheme: kind.as_str(),
                lost: nlost,
                members: n,
            });
            continue;
        }
        let mut inputs = Vec::with_capacity(n);
        let mut unpack = Vec::new();
        let mut bad = None;
        for (g, gone) in lost.iter().enumerate() {
            if gone.any() {
                inputs.push(None);
                continue;
            }
            let m = &set.members[&(g as u64)];
            let path = dset_dir.join(&m.key);
            let (h, _) = match read_parity_header(prefix, &path) {
                Ok(h) => h,
                Err(source) => {
                    bad = Some(RebuildProblem::Header { set: gid, source });
                    break;
                }
            };
            let mut files = Vec::new();
            for meta in &h.current.files {
                match pl.rel_of(prefix, meta) {
                    Some(rel) => {
                        let segments = s
                            .rank
                            .get(&m.world_rank)
                            .and_then(|rs| rs.files.get(&rel))
                            .map(|(_, e)| e.segments.as_slice())
                            .filter(|segs| !segs.is_empty());
                        let path = match segments {
                            Some(segs) => {
                                let to = unpacked_dir(&dset_dir.join(pl.meta_rel()), m.world_rank)
                                    .join(&rel);
                                unpack.push(Unpack {
                                    rank: m.world_rank,
                                    key: rel,
                                    segments: container::resolve(&pl.key_base(prefix), segs),
                                    to: to.clone(),
                                    size: meta.size_bytes,
                                    crc: meta.crc32,
                                });
                                to
                            }
                            None => dset_dir.join(rel),
                        };
                        files.push(FileEntry {
                            path,
                            meta: meta.clone(),
                        });
                    }
                    None => {
                        bad = Some(RebuildProblem::RoutedOutside {
                            set: gid,
                            rank: m.world_rank,
                            routed_dir: pl.routed_dir(prefix),
                        });
                        break;
                    }
                }
            }
            let red = FileEntry {
                path,
                meta: m.meta.clone(),
            };
            inputs.push(Some((MemberFiles { files }, vec![red])));
        }
        if let Some(b) = bad {
            why.push(b);
            continue;
        }
        jobs.push(SetJob {
            kind,
            group_id: gid,
            k,
            header,
            lost,
            inputs,
            unpack,
        });
    }
    for r in missing {
        if !covered.contains(r) {
            why.push(RebuildProblem::NoParity { rank: *r });
        }
    }
    if why.is_empty() {
        Ok(jobs)
    } else {
        Err(why)
    }
}

/// Rebuild one set in-process; returns the world ranks rebuilt, after
/// writing their files and rank filemaps.
pub(super) fn run_set(
    job: &SetJob,
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
    dataset: &Dataset,
) -> Result<Vec<i64>, RebuildError> {
    let n = job.lost.len();
    let meta_dir = dset_dir.join(pl.meta_rel());
    // Removed when the set is done, whatever the outcome.
    let _unpacked = Unpacked::read_out(job, &meta_dir, prefix)?;
    let tmp = |g: usize| meta_dir.join(format!("rebuild.{}", job.header.group_world_ranks[g]));
    for g in (0..n).filter(|&g| job.lost[g].any()) {
        let t = tmp(g);
        let _ = beneath::remove_dir_all_in(prefix, &t);
        beneath::create_dir_all_in(prefix, &t).map_err(|source| RebuildError::Io {
            path: t.clone(),
            op: "create directory",
            source,
        })?;
    }
    // The members are threads of this process: a wait can only outlast the
    // bound when the file system stalls; a survivor reads its files once,
    // in the ring's pieces (and, for RS, the bytes the decode did not need
    // at the end, before the last agreement).
    let config = ThreadConfig {
        timeout: REBUILD_WAIT_BOUND,
        ..ThreadConfig::default()
    };
    let results = ThreadComm::run_with(&config, n, |comm| {
        let g = comm.rank();
        let set = SetInfo {
            comm,
            group_id: job.group_id,
            world_ranks: job.header.group_world_ranks.clone(),
            world_size: job.header.ranks,
            dataset: job.header.dataset.clone(),
            scheme: job.kind,
            set_failures: job.k,
            piece_bytes: REBUILD_PIECE_BYTES,
        };
        let mut accept = |_: i64, _: &Path, _: &Meta| Ok(());
        match &job.inputs[g] {
            Some((mine, red)) => apply::rebuild(
                &set,
                &job.lost,
                Some(mine),
                Some(red),
                &meta_dir,
                &mut accept,
            ),
            None => apply::rebuild(&set, &job.lost, None, None, &tmp(g), &mut accept),
        }
    })
    .map_err(|source| RebuildError::Threads {
        set: job.group_id,
        source,
    })?;
    let mut rebuilt = Vec::new();
    let mut first_err = None;
    for (g, r) in results.into_iter().enumerate() {
        match r {
            Ok(out) if job.lost[g].any() => {
                let w = job.header.group_world_ranks[g];
                place_rebuilt(w, out, dset_dir, prefix, pl, dataset)?;
                let _ = beneath::remove_dir_all_in(prefix, &tmp(g));
                rebuilt.push(w);
            }
            Ok(_) => {}
            Err(source) => {
                first_err.get_or_insert(RebuildError::Member {
                    set: job.group_id,
                    source,
                });
            }
        }
    }
    if let Some(e) = first_err {
        for g in (0..n).filter(|&g| job.lost[g].any()) {
            let _ = beneath::remove_dir_all_in(prefix, &tmp(g));
        }
        return Err(e);
    }
    Ok(rebuilt)
}

/// The survivors' packed files of a set, read out of their containers;
/// their directories go when this is dropped.
struct Unpacked {
    /// The prefix directory the dirs are below.
    prefix: PathBuf,
    dirs: BTreeSet<PathBuf>,
}

impl Unpacked {
    /// Read out every packed survivor file of `job`, checked against its
    /// recorded size and CRC32.
    fn read_out(job: &SetJob, meta_dir: &Path, prefix: &Path) -> Result<Unpacked, RebuildError> {
        let out = Unpacked {
            prefix: prefix.to_path_buf(),
            dirs: job
                .unpack
                .iter()
                .map(|u| unpacked_dir(meta_dir, u.rank))
                .collect(),
        };
        for d in &out.dirs {
            let _ = beneath::remove_dir_all_in(prefix, d);
        }
        let mut buf = Vec::new();
        for u in &job.unpack {
            let item = crate::prefix::CopyItem {
                src: u
                    .segments
                    .first()
                    .map(|s| s.path.clone())
                    .unwrap_or_default(),
                dst: u.to.clone(),
                rel: u.key.clone(),
                size: u.size,
                crc: u.crc,
                attrs: None,
                packing: Some(Packing::From(u.segments.clone())),
                within: Some(prefix.to_path_buf()),
            };
            let checks = crate::prefix::CopyChecks {
                crc: true,
                ..Default::default()
            };
            if let Err(source) = crate::prefix::copy_file(&item, checks, None, None, &mut buf) {
                return Err(RebuildError::Unpack {
                    set: job.group_id,
                    rank: u.rank,
                    file: u.key.clone(),
                    source,
                });
            }
        }
        Ok(out)
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = beneath::remove_dir_all_in(&self.prefix, d);
        }
    }
}

/// Move a rebuilt member's files to their places and write its rank filemap.
fn place_rebuilt(
    rank: i64,
    out: apply::Rebuilt,
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
    dataset: &Dataset,
) -> Result<(), RebuildError> {
    let mut files = BTreeMap::new();
    let mut moves = Vec::new();
    for fe in out.app_files {
        let rel = pl
            .rel_of(prefix, &fe.meta)
            .ok_or_else(|| RebuildError::RoutedOutside {
                rank,
                file: fe.path.clone(),
                routed_dir: pl.routed_dir(prefix),
            })?;
        moves.push((fe.path.clone(), dset_dir.join(&rel)));
        files.insert(
            rel.clone(),
            Meta {
                file: Some(rel),
                complete: Some(true),
                ..fe.meta
            },
        );
    }
    for fe in out.redundancy_files {
        let name = fe
            .path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .ok_or(RebuildError::NoName { rank })?;
        let key = format!("{}/{name}", pl.meta_rel());
        moves.push((fe.path.clone(), dset_dir.join(&key)));
        files.insert(
            key.clone(),
            Meta {
                file: Some(key),
                complete: Some(true),
                ..fe.meta
            },
        );
    }
    if moves
        .iter()
        .map(|(_, to)| to)
        .collect::<BTreeSet<_>>()
        .len()
        != moves.len()
    {
        return Err(RebuildError::Collision { rank });
    }
    for (from, to) in &moves {
        beneath::check(prefix, to)?;
        if let Some(p) = to.parent() {
            beneath::create_dir_all_in(prefix, p).map_err(|source| RebuildError::Io {
                path: p.to_path_buf(),
                op: "create directory",
                source,
            })?;
        }
        beneath::rename_in(prefix, from, to).map_err(|source| RebuildError::Move {
            from: from.clone(),
            to: to.clone(),
            source,
        })?;
    }
    // The files' names are durable before the rank filemap names them.
    crate::durable::sync_parents(moves.iter().map(|(_, to)| to.as_path())).map_err(
        |(path, source)| RebuildError::Io {
            path,
            op: "fsync directory",
            source,
        },
    )?;
    let rfm = RankFilemap {
        rank,
        dataset: dataset.clone(),
        expected_files: files.len() as u64,
        files,
        orig_dir: pl.orig_dir.clone(),
        segments: BTreeMap::new(),
    };
    rfm.write_file_in(
        prefix,
        dset_dir
            .join(pl.meta_rel())
            .join(rank_filemap_file_name(rank)),
    )?;
    Ok(())
}
