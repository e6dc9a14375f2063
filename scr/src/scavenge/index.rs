//! `scr index` (SCR's `scr_index`): check a dataset directory in the prefix,
//! rebuild what is missing from its redundancy files, write its summary and
//! rank2file map, and keep the index (`<prefix>/.scr/index.scr`).
//!
//! Adding a directory (scavenge-and-index.txt, "Scanning files" …
//! "Scan hash"):
//! 1. *Scan*: read every `<D>/.scr/<rank>.scrfilemap`; a file listed there
//!    counts when it exists with the recorded size and is marked complete
//!    (CRCs are not read here, as in SCR: `scr copy` compared them on the
//!    way in, a fetch compares them on the way out). XOR/RS files are
//!    grouped into their sets by name (`<g+1>_of_<n>_in_<id>.xor|.rs`).
//! 2. *Inspect*: every rank `0..RANKS` must be present with all its
//!    expected files; the others are missing.
//! 3. *Rebuild*: when every missing rank lies in a set that lost no more
//!    members than its scheme tolerates (XOR 1, RS k), each such set is
//!    rebuilt in-process: its members run as threads over the thread
//!    communicator and the same code that rebuilds a cache at restart
//!    ([`crate::redundancy::apply::rebuild`]) reads the survivors' files in
//!    the prefix and writes the lost members' files, every byte checked
//!    against the CRCs in the parity headers. Nothing is run through a
//!    shell. Then the directory is scanned and inspected again.
//! 4. Write `<D>/.scr/rank2file.scr` (tree of ≤ 1 MiB files, XOR/RS files
//!    marked NOFETCH) and `<D>/.scr/summary.scr` (COMPLETE only if whole),
//!    and add `D` to the index with a FLUSHED time.
//!
//! A damaged index is never overwritten by these operations; they fail
//! with [`ScavengeError::DamagedIndex`], and [`rebuild_index`] moves the
//! damaged file aside and builds a new index from the dataset directories.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{create_dirs, io_err, ScavengeError, ScavengeResult};
use crate::clock::{Clock, SystemClock};
use crate::comm::thread::{ThreadComm, ThreadConfig};
use crate::kvtree::file as kvfile;
use crate::prefix::layout::{Placement, META_DIR};
use crate::records::dataset::Dataset;
use crate::records::index::{index_path, timestamp};
use crate::records::meta::{FileType, Meta};
use crate::records::rank2file::safe_relative;
use crate::records::rank2file::MAX_RANK2FILE_BYTES;
use crate::records::rank_filemap::rank_filemap_file_name;
use crate::records::summary::SUMMARY_FILE;
use crate::records::xor_header::parse_xor_file_name;
use crate::records::{
    Index, Rank2File, Rank2FileEntry, RankFilemap, RankFiles, Record, RecordError, Summary,
    XorHeader,
};
use crate::redundancy::apply::{self, FileEntry, MemberFiles, MemberLoss, Scheme, SetInfo};

/// Bytes per pipelined piece of an in-process rebuild.
const REBUILD_PIECE_BYTES: usize = 1 << 20;
/// Bound on any one wait between the threads of an in-process rebuild.
const REBUILD_WAIT_BOUND: std::time::Duration = std::time::Duration::from_secs(1800);
/// Directories visited at most when looking for dataset directories.
const MAX_WALK_DIRS: usize = 100_000;
/// Deepest dataset directory looked for below the prefix.
const MAX_WALK_DEPTH: usize = 16;

/// The kind of a redundancy set found in a dataset directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum SetKind {
    Xor,
    Rs,
}

/// One member's redundancy file of a set.
#[derive(Debug, Clone)]
struct SetMember {
    world_rank: i64,
    /// Key relative to the dataset directory (`.scr/<name>`).
    key: String,
    meta: Meta,
}

/// A redundancy set as seen in the directory.
#[derive(Debug, Clone)]
struct SetScan {
    size: u64,
    /// Present members by group rank.
    members: BTreeMap<u64, SetMember>,
}

/// What the scan found of one rank.
#[derive(Debug, Clone, Default)]
struct RankScan {
    expected: u64,
    /// Files present and intact, by key.
    files: BTreeMap<String, (Meta, Rank2FileEntry)>,
    /// Some listed file is absent, short, or marked incomplete.
    damaged: Vec<String>,
}

/// The scan hash of one dataset directory.
#[derive(Debug, Clone, Default)]
struct Scan {
    id: Option<i64>,
    dataset: Option<Dataset>,
    orig_dir: Option<String>,
    ranks: Option<u64>,
    rank: BTreeMap<i64, RankScan>,
    sets: BTreeMap<(SetKind, i64), SetScan>,
    /// Problems that make some rank missing (damaged rank filemaps, …).
    problems: Vec<String>,
    /// Problems that make the directory unusable as one dataset.
    invalid: Vec<String>,
}

/// What `scr index --add` (or a rebuild of the index) did with one directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddReport {
    /// The dataset directory, relative to the prefix.
    pub dir: String,
    /// The dataset id.
    pub dataset: Option<i64>,
    /// The dataset's name.
    pub name: Option<String>,
    /// Whether the index now calls it COMPLETE.
    pub complete: bool,
    /// It was already indexed as complete: nothing was done.
    pub already_indexed: bool,
    /// The rank filemaps were scanned (else an existing summary was used).
    pub scanned: bool,
    /// Ranks of the dataset.
    pub ranks: u64,
    /// Ranks missing before any rebuild.
    pub missing_before: Vec<i64>,
    /// Ranks rebuilt from parity.
    pub rebuilt: Vec<i64>,
    /// Ranks still missing.
    pub missing: Vec<i64>,
    /// What went wrong or was skipped, for the user.
    pub problems: Vec<String>,
}

/// Map a record error on the index to [`ScavengeError::DamagedIndex`]
/// (anything but a missing file or an I/O failure).
fn index_error(path: &Path, e: RecordError) -> ScavengeError {
    match &e {
        RecordError::File(kvfile::KvFileError::Io { .. }) => e.into(),
        _ => ScavengeError::DamagedIndex {
            path: path.to_path_buf(),
            source: Box::new(e),
        },
    }
}

/// Read the index of `prefix` (an empty one when there is none).
pub fn read_index(prefix: &Path) -> ScavengeResult<Index> {
    let path = index_path(prefix);
    match Index::read_file(&path) {
        Ok(i) => Ok(i),
        Err(e) if e.is_not_found() => Ok(Index::default()),
        Err(e) => Err(index_error(&path, e)),
    }
}

/// Read–modify–write the index under its lock; a damaged index is
/// reported, never replaced.
fn update_index<R>(prefix: &Path, f: impl FnOnce(&mut Index) -> R) -> ScavengeResult<R> {
    let path = index_path(prefix);
    create_dirs(&prefix.join(META_DIR))?;
    Index::update_file(&path, f).map_err(|e| index_error(&path, e))
}

/// `dir` as a dataset directory name relative to `prefix` (an absolute
/// path inside the prefix is accepted).
pub fn relative_dir(prefix: &Path, dir: &str) -> ScavengeResult<String> {
    let p = Path::new(dir);
    let rel = if p.is_absolute() {
        p.strip_prefix(prefix)
            .map_err(|_| {
                ScavengeError::Invalid(format!(
                    "{dir} is not inside the prefix {}",
                    prefix.display()
                ))
            })?
            .to_string_lossy()
            .into_owned()
    } else {
        dir.trim_end_matches('/').to_string()
    };
    if !safe_relative(&rel) || rel.split('/').next() == Some(META_DIR) {
        return Err(ScavengeError::Invalid(format!(
            "{dir:?} is not a dataset directory below the prefix (give it relative to the prefix, without `..`)"
        )));
    }
    Ok(rel)
}

fn list_rank_filemaps(meta_dir: &Path) -> ScavengeResult<Vec<(i64, PathBuf)>> {
    let rd = match fs::read_dir(meta_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(meta_dir, "list directory")(e)),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(io_err(meta_dir, "list directory"))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(r) = name
            .strip_suffix(".scrfilemap")
            .and_then(|s| s.parse::<i64>().ok())
        {
            out.push((r, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Parse `<g+1>_of_<n>_in_<id>.xor` or `.rs`.
fn parse_set_file(name: &str) -> Option<(SetKind, u64, u64, i64)> {
    if let Some((g, n, id)) = parse_xor_file_name(name) {
        return Some((SetKind::Xor, g, n, id));
    }
    let stem = name.strip_suffix(".rs")?;
    let (g, n, id) = parse_xor_file_name(&format!("{stem}.xor"))?;
    Some((SetKind::Rs, g, n, id))
}

/// Step 1: the scan hash of the dataset directory `dset_dir`.
fn scan(dset_dir: &Path) -> ScavengeResult<Scan> {
    let meta_dir = dset_dir.join(META_DIR);
    let mut s = Scan::default();
    for (r, path) in list_rank_filemaps(&meta_dir)? {
        let rfm = match RankFilemap::read_file(&path) {
            Ok(m) => m,
            Err(e) => {
                s.problems
                    .push(format!("rank {r}: damaged rank filemap: {e}"));
                continue;
            }
        };
        if rfm.rank != r {
            s.problems.push(format!(
                "{}: describes rank {}, not {r}; ignored",
                path.display(),
                rfm.rank
            ));
            continue;
        }
        match s.id {
            None => s.id = Some(rfm.dataset.id),
            Some(id) if id != rfm.dataset.id => s.invalid.push(format!(
                "{}: belongs to dataset {}, others to dataset {id}",
                path.display(),
                rfm.dataset.id
            )),
            Some(_) => {}
        }
        if s.dataset.is_none() {
            s.dataset = Some(rfm.dataset.clone());
            s.orig_dir = rfm.orig_dir.clone();
        } else if s.orig_dir != rfm.orig_dir {
            s.invalid.push(format!(
                "{}: ORIGDIR {:?} differs from the other ranks' {:?}",
                path.display(),
                rfm.orig_dir,
                s.orig_dir
            ));
        }
        let mut rs = RankScan {
            expected: rfm.expected_files,
            ..RankScan::default()
        };
        for (key, meta) in &rfm.files {
            if !safe_relative(key) {
                rs.damaged
                    .push(format!("{key:?}: not a path inside the directory"));
                continue;
            }
            if let Some(n) = meta.ranks {
                match s.ranks {
                    None => s.ranks = Some(n),
                    Some(m) if m != n => s.invalid.push(format!(
                        "rank {r}: {key} says the job had {n} ranks, other files say {m}"
                    )),
                    Some(_) => {}
                }
            }
            let found = fs::metadata(dset_dir.join(key));
            let why = match (&found, meta.size_bytes) {
                (Err(e), _) => Some(format!("{key}: {e}")),
                (Ok(md), Some(sz)) if md.len() != sz => {
                    Some(format!("{key}: {} bytes, expected {sz}", md.len()))
                }
                (Ok(_), None) => Some(format!("{key}: no size recorded")),
                _ if !meta.is_complete() => Some(format!("{key}: marked incomplete")),
                _ => None,
            };
            if let Some(w) = why {
                rs.damaged.push(w);
                continue;
            }
            let ftype = meta.file_type.unwrap_or(FileType::Full);
            let entry = Rank2FileEntry {
                size_bytes: meta.size_bytes,
                crc32: meta.crc32,
                nofetch: ftype != FileType::Full,
                segments: Vec::new(),
            };
            if matches!(ftype, FileType::Xor | FileType::Rs) {
                let name = key.rsplit('/').next().unwrap_or(key);
                match parse_set_file(name) {
                    Some((kind, g, n, gid)) => {
                        let set = s.sets.entry((kind, gid)).or_insert(SetScan {
                            size: n,
                            members: BTreeMap::new(),
                        });
                        if set.size != n {
                            s.invalid.push(format!(
                                "{key}: set {gid} has {n} members, other files say {}",
                                set.size
                            ));
                        }
                        set.members.insert(
                            g,
                            SetMember {
                                world_rank: r,
                                key: key.clone(),
                                meta: meta.clone(),
                            },
                        );
                    }
                    None => s
                        .problems
                        .push(format!("rank {r}: {key}: not a redundancy file name")),
                }
            }
            rs.files.insert(key.clone(), (meta.clone(), entry));
        }
        s.rank.insert(r, rs);
    }
    Ok(s)
}

/// Step 2: ranks missing files, given the job's rank count.
fn inspect(s: &mut Scan) -> Vec<i64> {
    let n = s.ranks.unwrap_or_else(|| {
        let guess = s.rank.keys().next_back().map_or(0, |r| r + 1) as u64;
        s.problems.push(format!(
            "no file records the job's rank count; assuming {guess}"
        ));
        guess
    });
    s.ranks = Some(n);
    let mut missing = Vec::new();
    for r in 0..n as i64 {
        match s.rank.get(&r) {
            None => missing.push(r),
            Some(rs) => {
                let have = rs.files.len() as u64;
                if have > rs.expected {
                    s.invalid.push(format!(
                        "rank {r}: {have} files listed, more than the {} expected",
                        rs.expected
                    ));
                } else if have < rs.expected || !rs.damaged.is_empty() {
                    missing.push(r);
                }
            }
        }
    }
    for r in s.rank.keys().filter(|r| **r < 0 || **r >= n as i64) {
        s.invalid
            .push(format!("rank {r} is outside the job's {n} ranks"));
    }
    missing
}

/// A redundancy file's header and its parity count (FAILURES for RS, 1 for XOR).
fn read_parity_header(path: &Path) -> Result<(XorHeader, usize), RecordError> {
    let (h, len) = XorHeader::read_from(path)?;
    let bytes = fs::read(path).map_err(|source| kvfile::KvFileError::Io {
        path: path.to_path_buf(),
        op: "read header",
        source,
    })?;
    let tree = kvfile::decode(&bytes[..len.min(bytes.len())], path)?;
    let k = tree
        .get_int("FAILURES")
        .ok()
        .flatten()
        .map_or(1, |k| k.max(1) as usize);
    Ok((h, k))
}

/// One set to rebuild: everything the threads need.
struct SetJob {
    kind: SetKind,
    group_id: i64,
    k: usize,
    header: XorHeader,
    /// A missing rank is lost whole (its files and its parity).
    lost: Vec<MemberLoss>,
    /// Survivors' files (None for lost members).
    inputs: Vec<Option<(MemberFiles, Vec<FileEntry>)>>,
}

/// Step 3: plan the rebuild of every set with lost members; `Err` lists
/// why the dataset cannot be made whole.
fn plan_rebuild(
    s: &Scan,
    missing: &[i64],
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
) -> Result<Vec<SetJob>, Vec<String>> {
    let missing_set: BTreeSet<i64> = missing.iter().copied().collect();
    let mut covered = BTreeSet::new();
    let mut jobs = Vec::new();
    let mut why = Vec::new();
    for (&(kind, gid), set) in &s.sets {
        // Any present member's header gives the whole membership.
        let mut header = None;
        let mut unreadable = Vec::new();
        for m in set.members.values() {
            match read_parity_header(&dset_dir.join(&m.key)) {
                Ok(h) => {
                    header = Some(h);
                    break;
                }
                Err(e) => unreadable.push(format!("set {gid}: {e}")),
            }
        }
        let Some((header, k)) = header else {
            why.extend(unreadable);
            continue;
        };
        let n = header.group_world_ranks.len();
        if n as u64 != set.size {
            why.push(format!(
                "set {gid}: its header lists {n} members, its file names {}",
                set.size
            ));
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
        let scheme = match kind {
            SetKind::Xor => Scheme::Xor,
            SetKind::Rs => Scheme::Rs { k },
        };
        if !apply::recoverable(&scheme, &lost) {
            why.push(format!(
                "set {gid} ({}): {nlost} of its {n} members are lost, more than it can rebuild",
                if kind == SetKind::Xor { "XOR" } else { "RS" }
            ));
            continue;
        }
        let mut inputs = Vec::with_capacity(n);
        let mut bad = None;
        for (g, gone) in lost.iter().enumerate() {
            if gone.any() {
                inputs.push(None);
                continue;
            }
            let m = &set.members[&(g as u64)];
            let path = dset_dir.join(&m.key);
            let (h, _) = match read_parity_header(&path) {
                Ok(h) => h,
                Err(e) => {
                    bad = Some(format!("set {gid}: {e}"));
                    break;
                }
            };
            let mut files = Vec::new();
            for meta in &h.current.files {
                match pl.rel_of(prefix, meta) {
                    Some(rel) => files.push(FileEntry {
                        path: dset_dir.join(rel),
                        meta: meta.clone(),
                    }),
                    None => {
                        bad = Some(format!(
                            "set {gid}: a file of rank {} was routed outside {} (was the prefix moved? give the prefix the job used)",
                            m.world_rank,
                            pl.routed_dir(prefix).display()
                        ));
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
        });
    }
    for r in missing {
        if !covered.contains(r) {
            why.push(format!(
                "rank {r}: no XOR/RS set in the directory holds parity for it"
            ));
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
fn run_set(
    job: &SetJob,
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
    dataset: &Dataset,
) -> Result<Vec<i64>, String> {
    let n = job.lost.len();
    let meta_dir = dset_dir.join(META_DIR);
    let scheme = match job.kind {
        SetKind::Xor => Scheme::Xor,
        SetKind::Rs => Scheme::Rs { k: job.k },
    };
    let tmp = |g: usize| meta_dir.join(format!("rebuild.{}", job.header.group_world_ranks[g]));
    for g in (0..n).filter(|&g| job.lost[g].any()) {
        let t = tmp(g);
        let _ = fs::remove_dir_all(&t);
        fs::create_dir_all(&t).map_err(|e| format!("{}: {e}", t.display()))?;
    }
    // The members are threads of this process: a wait can only outlast the
    // bound when the file system stalls, and a survivor verifies all its
    // files (a full read) before the first exchange.
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
            scheme,
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
    .map_err(|e| format!("set {}: {e}", job.group_id))?;
    let mut rebuilt = Vec::new();
    let mut first_err = None;
    for (g, r) in results.into_iter().enumerate() {
        match r {
            Ok(out) if job.lost[g].any() => {
                let w = job.header.group_world_ranks[g];
                place_rebuilt(w, out, dset_dir, prefix, pl, dataset)?;
                let _ = fs::remove_dir_all(tmp(g));
                rebuilt.push(w);
            }
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert_with(|| format!("set {}: {e}", job.group_id));
            }
        }
    }
    if let Some(e) = first_err {
        for g in (0..n).filter(|&g| job.lost[g].any()) {
            let _ = fs::remove_dir_all(tmp(g));
        }
        return Err(e);
    }
    Ok(rebuilt)
}

/// Move a rebuilt member's files to their places and write its rank filemap.
fn place_rebuilt(
    rank: i64,
    out: apply::Rebuilt,
    dset_dir: &Path,
    prefix: &Path,
    pl: &Placement,
    dataset: &Dataset,
) -> Result<(), String> {
    let mut files = BTreeMap::new();
    let mut moves = Vec::new();
    for fe in out.app_files {
        let rel = pl.rel_of(prefix, &fe.meta).ok_or_else(|| {
            format!(
                "rank {rank}: rebuilt file {} was routed outside {}",
                fe.path.display(),
                pl.routed_dir(prefix).display()
            )
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
            .ok_or_else(|| format!("rank {rank}: rebuilt parity file has no name"))?;
        let key = format!("{META_DIR}/{name}");
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
        return Err(format!(
            "rank {rank}: two rebuilt files map to the same place"
        ));
    }
    for (from, to) in &moves {
        if let Some(p) = to.parent() {
            fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        fs::rename(from, to).map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
    }
    let rfm = RankFilemap {
        rank,
        dataset: dataset.clone(),
        expected_files: files.len() as u64,
        files,
        orig_dir: pl.orig_dir.clone(),
    };
    rfm.write_file(dset_dir.join(META_DIR).join(rank_filemap_file_name(rank)))
        .map_err(|e| e.to_string())
}

/// The summary of a dataset directory built from its rank filemaps.
struct Built {
    summary: Summary,
    report: AddReport,
}

fn placement_of(dir: &str, orig_dir: &Option<String>) -> Placement {
    Placement {
        dir: dir.to_string(),
        orig_dir: orig_dir.clone(),
    }
}

/// Steps 1–4 without the index: scan, inspect, rebuild, rescan, write the
/// rank2file map and summary of `<prefix>/<dir>`.
fn build_summary(prefix: &Path, dir: &str) -> ScavengeResult<Built> {
    let dset_dir = prefix.join(dir);
    let mut s = scan(&dset_dir)?;
    let Some(ds) = s.dataset.clone() else {
        let mut why = s.problems.join("; ");
        if why.is_empty() {
            return Err(ScavengeError::NotADataset { dir: dset_dir });
        }
        why.insert_str(0, "no rank filemap could be read: ");
        return Err(ScavengeError::Invalid(format!(
            "{}: {why}",
            dset_dir.display()
        )));
    };
    let mut report = AddReport {
        dir: dir.to_string(),
        dataset: Some(ds.id),
        name: ds.name.clone(),
        complete: false,
        already_indexed: false,
        scanned: true,
        ranks: 0,
        missing_before: Vec::new(),
        rebuilt: Vec::new(),
        missing: Vec::new(),
        problems: Vec::new(),
    };
    let mut missing = inspect(&mut s);
    report.missing_before = missing.clone();
    let pl = placement_of(dir, &s.orig_dir);
    if !missing.is_empty() && s.invalid.is_empty() {
        match plan_rebuild(&s, &missing, &dset_dir, prefix, &pl) {
            Ok(jobs) => {
                for j in &jobs {
                    // The survivors' descriptor (the one the job recorded
                    // at complete), not the parity header's earlier one.
                    match run_set(j, &dset_dir, prefix, &pl, &ds) {
                        Ok(r) => report.rebuilt.extend(r),
                        Err(e) => report.problems.push(format!("rebuild failed: {e}")),
                    }
                }
            }
            Err(why) => report
                .problems
                .extend(why.into_iter().map(|w| format!("cannot rebuild: {w}"))),
        }
        // Rescan what is there now (SCR's scr_summary_build does the same).
        let mut again = scan(&dset_dir)?;
        missing = inspect(&mut again);
        s = again;
    }
    report.problems.extend(s.problems.iter().cloned());
    report.problems.extend(s.invalid.iter().cloned());
    report.rebuilt.sort_unstable();
    let n = s.ranks.unwrap_or(0);
    let complete = missing.is_empty() && s.invalid.is_empty();
    let mut map = Rank2File {
        ranks: n,
        ..Rank2File::default()
    };
    for (r, rs) in &s.rank {
        if *r >= 0 && (*r as u64) < n {
            map.rank.insert(
                *r,
                RankFiles {
                    expected_files: Some(rs.expected),
                    files: rs
                        .files
                        .iter()
                        .map(|(k, (_, e))| (k.clone(), e.clone()))
                        .collect(),
                },
            );
        }
    }
    let meta_dir = dset_dir.join(META_DIR);
    map.write_split(&meta_dir, MAX_RANK2FILE_BYTES)?;
    let mut dataset = s.dataset.clone().unwrap_or(ds);
    dataset.complete = Some(complete);
    let mut summary = Summary::new(dataset, complete);
    summary.orig_dir = s.orig_dir.clone();
    summary.write_file(meta_dir.join(SUMMARY_FILE))?;
    report.ranks = n;
    report.missing = missing;
    report.complete = complete;
    Ok(Built { summary, report })
}

/// The summary of `<prefix>/<dir>`: an existing complete one as it is,
/// else one built from the rank filemaps; an existing incomplete summary
/// without rank filemaps is taken as it is.
fn summarize(prefix: &Path, dir: &str) -> ScavengeResult<Built> {
    let dset_dir = prefix.join(dir);
    if !dset_dir.is_dir() {
        return Err(ScavengeError::Invalid(format!(
            "{}: no such directory",
            dset_dir.display()
        )));
    }
    let meta_dir = dset_dir.join(META_DIR);
    let existing = Summary::read_file(meta_dir.join(SUMMARY_FILE));
    let have_maps = !list_rank_filemaps(&meta_dir)?.is_empty();
    let from_summary = |s: Summary, problems: Vec<String>| Built {
        report: AddReport {
            dir: dir.to_string(),
            dataset: Some(s.dataset.id),
            name: s.dataset.name.clone(),
            complete: s.complete,
            already_indexed: false,
            scanned: false,
            ranks: s.rank2file.as_ref().map_or(0, |m| m.ranks),
            missing_before: Vec::new(),
            rebuilt: Vec::new(),
            missing: Vec::new(),
            problems,
        },
        summary: s,
    };
    // A complete summary stands unless rank filemaps of another dataset
    // say the directory was scavenged again since.
    let maps_agree = |s: &Summary| {
        list_rank_filemaps(&meta_dir).is_ok_and(|maps| {
            maps.iter()
                .filter_map(|(_, p)| RankFilemap::read_file(p).ok())
                .all(|m| m.dataset.id == s.dataset.id)
        })
    };
    match existing {
        Ok(s) if s.complete && maps_agree(&s) => Ok(from_summary(s, Vec::new())),
        _ if have_maps => {
            let mut b = build_summary(prefix, dir)?;
            if let Err(e) = &existing {
                if !e.is_not_found() {
                    b.report
                        .problems
                        .insert(0, format!("damaged summary replaced: {e}"));
                }
            }
            Ok(b)
        }
        Ok(s) => Ok(from_summary(
            s,
            vec!["the summary says incomplete and there are no rank filemaps to rescan".into()],
        )),
        Err(e) if e.is_not_found() => Err(ScavengeError::NotADataset { dir: dset_dir }),
        Err(e) => Err(e.into()),
    }
}

/// `scr index --add DIR` (`index_add_dir`): index the dataset in
/// `<prefix>/<dir>`, building its summary (with rebuilds) when needed.
/// A directory already indexed as complete is left alone.
pub fn add_dir(prefix: &Path, dir: &str) -> ScavengeResult<AddReport> {
    let dir = relative_dir(prefix, dir)?;
    let idx = read_index(prefix)?;
    if let Some(id) = idx.dataset_id_by_dir(&dir) {
        let e = &idx.datasets[&id][&dir];
        if e.complete == Some(true) {
            return Ok(AddReport {
                dir,
                dataset: Some(id),
                name: e.dataset.as_ref().and_then(|d| d.name.clone()),
                complete: true,
                already_indexed: true,
                scanned: false,
                ranks: 0,
                missing_before: Vec::new(),
                rebuilt: Vec::new(),
                missing: Vec::new(),
                problems: Vec::new(),
            });
        }
    }
    let b = summarize(prefix, &dir)?;
    let ds = b.summary.dataset.clone();
    let complete = b.summary.complete;
    let when = timestamp(SystemClock.unix_secs());
    update_index(prefix, |idx| {
        // The directory may have held another dataset before.
        while idx.dataset_id_by_dir(&dir).is_some_and(|id| id != ds.id) {
            idx.remove_dir(&dir);
        }
        idx.set_dataset(ds.id, &dir, ds.clone(), complete);
        idx.mark_flushed(ds.id, &dir, when);
    })?;
    Ok(b.report)
}

/// Forget what the index says directory `dir` holds unless it is dataset
/// `id`: the directory is about to be overwritten with `id`'s files (the
/// flush does the same before its first byte).
pub fn forget_other_datasets_in(prefix: &Path, dir: &str, id: i64) -> ScavengeResult<()> {
    let dir = relative_dir(prefix, dir)?;
    update_index(prefix, |idx| {
        while idx.dataset_id_by_dir(&dir).is_some_and(|d| d != id) {
            idx.remove_dir(&dir);
        }
    })
}

/// One row of `scr index --list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListRow {
    /// Dataset id.
    pub id: i64,
    /// Dataset name.
    pub name: Option<String>,
    /// Directory, relative to the prefix.
    pub dir: String,
    /// COMPLETE.
    pub complete: Option<bool>,
    /// Whether it is a checkpoint (from the dataset descriptor).
    pub checkpoint: Option<bool>,
    /// FLUSHED time.
    pub flushed: Option<String>,
    /// FETCHED times.
    pub fetched: Vec<String>,
    /// FAILED times.
    pub failed: Vec<String>,
    /// CURRENT names this directory.
    pub current: bool,
}

/// The index as rows, newest dataset first.
pub fn list(prefix: &Path) -> ScavengeResult<(Option<String>, Vec<ListRow>)> {
    let idx = read_index(prefix)?;
    let mut rows = Vec::new();
    for (id, dirs) in idx.datasets.iter().rev() {
        for (dir, e) in dirs {
            let ds = e.dataset.as_ref();
            rows.push(ListRow {
                id: *id,
                name: ds.and_then(|d| d.name.clone()),
                dir: dir.clone(),
                complete: e.complete,
                checkpoint: ds.map(|d| d.flag_checkpoint.unwrap_or(d.ckpt.is_some())),
                flushed: e.flushed.clone(),
                fetched: e.fetched.clone(),
                failed: e.failed.clone(),
                current: idx.current.as_deref() == Some(dir.as_str()),
            });
        }
    }
    Ok((idx.current, rows))
}

/// The copies (id, dir) a name refers to: dataset NAME first, then a
/// directory, then a numeric dataset id.
fn resolve(idx: &Index, name: &str) -> Vec<(i64, String)> {
    let all = || {
        idx.datasets
            .iter()
            .flat_map(|(id, dirs)| dirs.iter().map(move |(d, e)| (*id, d, e)))
    };
    let by_name: Vec<(i64, String)> = all()
        .filter(|(_, _, e)| e.dataset.as_ref().and_then(|d| d.name.as_deref()) == Some(name))
        .map(|(id, d, _)| (id, d.clone()))
        .collect();
    if !by_name.is_empty() {
        return by_name;
    }
    let by_dir: Vec<(i64, String)> = all()
        .filter(|(_, d, _)| d.as_str() == name.trim_end_matches('/'))
        .map(|(id, d, _)| (id, d.clone()))
        .collect();
    if !by_dir.is_empty() {
        return by_dir;
    }
    match name.parse::<i64>() {
        Ok(id) => idx
            .datasets
            .get(&id)
            .map(|dirs| dirs.keys().map(|d| (id, d.clone())).collect())
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

fn unknown(prefix: &Path, name: &str) -> ScavengeError {
    ScavengeError::UnknownName {
        what: "dataset",
        name: name.to_string(),
        index: index_path(prefix),
    }
}

/// Which copy `--current` picks among `matches`: the newest complete one
/// that never failed a fetch, else the newest.
fn pick_current(idx: &Index, matches: &[(i64, String)]) -> Option<(i64, String)> {
    let good = |(id, d): &&(i64, String)| {
        idx.datasets
            .get(id)
            .and_then(|dirs| dirs.get(d))
            .is_some_and(|e| e.complete == Some(true) && e.failed.is_empty())
    };
    let newest = |v: Vec<&(i64, String)>| v.into_iter().max_by_key(|(id, _)| *id).cloned();
    newest(matches.iter().filter(good).collect()).or_else(|| newest(matches.iter().collect()))
}

/// What `--current` set, with a warning when the copy is not a good
/// restart point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CurrentReport {
    /// Dataset id.
    pub id: i64,
    /// Directory now CURRENT.
    pub dir: String,
    /// Why a restart may skip it anyway (incomplete, failed a fetch).
    pub warning: Option<String>,
}

/// `scr index --current NAME` (`index_current_dir`, SCR_Current).
pub fn set_current(prefix: &Path, name: &str) -> ScavengeResult<CurrentReport> {
    update_index(prefix, |idx| {
        let m = resolve(idx, name);
        let (id, dir) = pick_current(idx, &m)?;
        let e = &idx.datasets[&id][&dir];
        let warning = if e.complete != Some(true) {
            Some("it is not complete: a restart will skip it and take an older one".into())
        } else if !e.failed.is_empty() {
            Some("a fetch of it failed before: a restart will skip it".into())
        } else {
            None
        };
        idx.set_current(&dir);
        Some(CurrentReport { id, dir, warning })
    })?
    .ok_or_else(|| unknown(prefix, name))
}

/// `scr index --drop NAME`: remove the index entries NAME names (the files
/// stay). Returns what was removed.
pub fn drop_name(prefix: &Path, name: &str) -> ScavengeResult<Vec<(i64, String)>> {
    let removed = update_index(prefix, |idx| {
        let m = resolve(idx, name);
        for (_, d) in &m {
            idx.remove_dir(d);
        }
        m
    })?;
    if removed.is_empty() {
        return Err(unknown(prefix, name));
    }
    Ok(removed)
}

/// `scr index --drop-after NAME`: remove every dataset newer than NAME
/// (to restart from NAME; the files stay). Returns what was removed.
pub fn drop_after(prefix: &Path, name: &str) -> ScavengeResult<Vec<(i64, String)>> {
    let removed = update_index(prefix, |idx| {
        let m = resolve(idx, name);
        let newest = m.iter().map(|(id, _)| *id).max()?;
        let doomed: Vec<(i64, String)> = idx
            .datasets
            .range(newest + 1..)
            .flat_map(|(id, dirs)| dirs.keys().map(move |d| (*id, d.clone())))
            .collect();
        for (_, d) in &doomed {
            idx.remove_dir(d);
        }
        Some(doomed)
    })?;
    removed.ok_or_else(|| unknown(prefix, name))
}

/// What `scr index --rebuild` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildIndexReport {
    /// Where the damaged index was moved (it is never deleted).
    pub damaged_kept_as: Option<PathBuf>,
    /// Why it was damaged.
    pub damage: Option<String>,
    /// Each dataset directory found and how it was indexed.
    pub datasets: Vec<AddReport>,
    /// Directories that looked like datasets but could not be indexed.
    pub skipped: Vec<(String, String)>,
    /// CURRENT in the new index.
    pub current: Option<String>,
}

/// Dataset directories below `prefix` (relative): directories holding
/// `.scr/summary.scr` or a rank filemap. A bounded walk that follows no
/// symbolic links.
pub fn find_dataset_dirs(prefix: &Path) -> ScavengeResult<Vec<String>> {
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(prefix.to_path_buf(), 0)];
    let mut visited = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        visited += 1;
        if visited > MAX_WALK_DIRS {
            return Err(ScavengeError::Invalid(format!(
                "{}: more than {MAX_WALK_DIRS} directories below the prefix; index dataset directories one by one with --add",
                prefix.display()
            )));
        }
        if depth > 0 {
            let meta = dir.join(META_DIR);
            if meta.join(SUMMARY_FILE).is_file() || !list_rank_filemaps(&meta)?.is_empty() {
                if let Ok(rel) = dir.strip_prefix(prefix) {
                    found.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        if depth >= MAX_WALK_DEPTH {
            continue;
        }
        let Ok(rd) = fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && e.file_name() != META_DIR {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `scr index --rebuild`: build the index again from the dataset
/// directories. A damaged index is moved aside (never deleted); what a
/// readable old index knew (CURRENT, FLUSHED/FETCHED/FAILED times) is kept
/// for the directories still found. CURRENT otherwise becomes the newest
/// complete checkpoint.
pub fn rebuild_index(prefix: &Path) -> ScavengeResult<RebuildIndexReport> {
    let path = index_path(prefix);
    let mut report = RebuildIndexReport {
        damaged_kept_as: None,
        damage: None,
        datasets: Vec::new(),
        skipped: Vec::new(),
        current: None,
    };
    let old = match Index::read_file(&path) {
        Ok(i) => Some(i),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            let aside =
                path.with_file_name(format!("index.scr.damaged.{}", SystemClock.unix_secs()));
            fs::rename(&path, &aside).map_err(io_err(&path, "move the damaged index aside"))?;
            report.damage = Some(e.to_string());
            report.damaged_kept_as = Some(aside);
            None
        }
    };
    let mut new = Index::default();
    let when = timestamp(SystemClock.unix_secs());
    for dir in find_dataset_dirs(prefix)? {
        match summarize(prefix, &dir) {
            Ok(b) => {
                let ds = b.summary.dataset.clone();
                new.set_dataset(ds.id, &dir, ds.clone(), b.summary.complete);
                let prev = old
                    .as_ref()
                    .and_then(|o| o.datasets.get(&ds.id))
                    .and_then(|d| d.get(&dir));
                let e = new
                    .datasets
                    .get_mut(&ds.id)
                    .and_then(|d| d.get_mut(&dir))
                    .expect("just set");
                e.flushed = Some(prev.and_then(|p| p.flushed.clone()).unwrap_or(when.clone()));
                if let Some(p) = prev {
                    e.fetched = p.fetched.clone();
                    e.failed = p.failed.clone();
                }
                report.datasets.push(b.report);
            }
            Err(e) => report.skipped.push((dir, e.to_string())),
        }
    }
    new.current = old
        .and_then(|o| o.current)
        .filter(|c| new.dataset_id_by_dir(c).is_some())
        .or_else(|| {
            new.datasets.iter().rev().find_map(|(_, dirs)| {
                dirs.iter()
                    .find(|(_, e)| {
                        e.complete == Some(true)
                            && e.failed.is_empty()
                            && e.dataset
                                .as_ref()
                                .is_some_and(|d| d.flag_checkpoint.unwrap_or(d.ckpt.is_some()))
                    })
                    .map(|(d, _)| d.clone())
            })
        });
    report.current = new.current.clone();
    update_index(prefix, |idx| *idx = new)?;
    Ok(report)
}

#[cfg(test)]
mod tests;
