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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{create_dirs, io_err, ScavengeError, ScavengeResult};
use crate::beneath;
use crate::clock::{Clock, SystemClock};
use crate::prefix::container;
use crate::prefix::flush::write_dataset_metadata;
use crate::prefix::layout::{dataset_meta_dir, Layout, Placement, META_DIR};
use crate::records::dataset::Dataset;
use crate::records::index::{index_path, timestamp};
use crate::records::meta::{FileType, Meta};
use crate::records::rank2file::safe_relative;
use crate::records::summary::SUMMARY_FILE;
use crate::records::xor_header::parse_xor_file_name;
use crate::records::{
    Index, Rank2File, Rank2FileEntry, RankFilemap, RankFiles, Record, RecordError, Summary,
};
use crate::scheme::CopyType;

mod rebuild;
mod verify;
use rebuild::{plan_rebuild, run_set};

/// Directories visited at most when looking for dataset directories.
const MAX_WALK_DIRS: usize = 100_000;
/// Deepest dataset directory looked for below the prefix.
const MAX_WALK_DEPTH: usize = 16;

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
    sets: BTreeMap<(CopyType, i64), SetScan>,
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
        RecordError::File(crate::kvtree::file::KvFileError::Io { .. }) => e.into(),
        _ => ScavengeError::DamagedIndex {
            path: path.to_path_buf(),
            source: Box::new(e),
        },
    }
}

/// Read the index of `prefix` (an empty one when there is none).
pub fn read_index(prefix: &Path) -> ScavengeResult<Index> {
    let path = index_path(prefix);
    beneath::check(prefix, &path)?;
    match Index::read_file_in(prefix, &path) {
        Ok(i) => Ok(i),
        Err(e) if e.is_not_found() => Ok(Index::default()),
        Err(e) => Err(index_error(&path, e)),
    }
}

/// Read–modify–write the index under its lock; a damaged index is
/// reported, never replaced.
fn update_index<R>(prefix: &Path, f: impl FnOnce(&mut Index) -> R) -> ScavengeResult<R> {
    let path = index_path(prefix);
    beneath::check(prefix, &path)?;
    create_dirs(prefix, &prefix.join(META_DIR))?;
    Index::update_file_in(prefix, &path, f).map_err(|e| index_error(&path, e))
}

/// A dataset directory's name relative to the prefix (`ckpt.1`, `a/b`):
/// what the index keys datasets by. [`relative_dir`] makes one only for a
/// name that stays below the prefix (no `..`, not `.scr`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DatasetDir(String);

impl DatasetDir {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for DatasetDir {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for DatasetDir {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Display for DatasetDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `dir` as a dataset directory name relative to `prefix` (an absolute
/// path inside the prefix is accepted).
pub fn relative_dir(prefix: &Path, dir: &str) -> ScavengeResult<DatasetDir> {
    let p = Path::new(dir);
    let rel = if p.is_absolute() {
        p.strip_prefix(prefix)
            .map_err(|_| ScavengeError::OutsidePrefix {
                dir: dir.to_string(),
                prefix: prefix.to_path_buf(),
            })?
            .to_string_lossy()
            .into_owned()
    } else {
        dir.trim_end_matches('/').to_string()
    };
    if !safe_relative(&rel) || rel.split('/').next() == Some(META_DIR) {
        return Err(ScavengeError::NotBelowPrefix {
            dir: dir.to_string(),
        });
    }
    Ok(DatasetDir(rel))
}

/// What `scr index --add` works on: a dataset directory of the old layout
/// (metadata in `<dir>/.scr`), or a dataset of SCR 3.1's layout by id
/// (metadata in `.scr/scr.dataset.<id>`, files where they were routed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// An old-layout dataset directory.
    Dir(DatasetDir),
    /// An SCR 3.1 dataset.
    Id(i64),
}

impl Target {
    /// The target of a placement.
    pub fn of(prefix: &Path, pl: &Placement) -> ScavengeResult<Target> {
        Ok(match pl.meta_of {
            Some(id) => Target::Id(id),
            None => Target::Dir(relative_dir(prefix, &pl.dir)?),
        })
    }

    /// `dir` as the user gave it: `N`, `scr.dataset.N` or
    /// `.scr/scr.dataset.N` name an SCR 3.1 dataset when its metadata
    /// directory exists and `dir` is not an old-layout dataset directory.
    pub fn parse(prefix: &Path, dir: &str) -> ScavengeResult<Target> {
        let d = dir.trim_end_matches('/');
        let last = d.rsplit('/').next().unwrap_or(d);
        let id = last
            .strip_prefix("scr.dataset.")
            .unwrap_or(last)
            .parse::<i64>()
            .ok();
        // Asked below the prefix without passing a link (a path that
        // leaves it, or a link on the way, is neither).
        let is_dir = |p: &Path| beneath::is_dir_in(prefix, p).unwrap_or(false);
        let legacy = is_dir(&prefix.join(d).join(META_DIR));
        match id {
            Some(id) if !legacy && is_dir(&dataset_meta_dir(prefix, id)) => Ok(Target::Id(id)),
            _ => Ok(Target::Dir(relative_dir(prefix, dir)?)),
        }
    }

    /// How reports name it: the directory, or `.scr/scr.dataset.<id>`.
    pub fn label(&self) -> String {
        match self {
            Target::Dir(d) => d.to_string(),
            Target::Id(id) => format!("{META_DIR}/{}", Dataset::default_name(*id)),
        }
    }

    /// The directory keys are relative to.
    fn base(&self, prefix: &Path) -> PathBuf {
        match self {
            Target::Dir(d) => prefix.join(d.as_str()),
            Target::Id(_) => prefix.to_path_buf(),
        }
    }

    /// The metadata directory relative to [`Target::base`].
    fn meta_rel(&self) -> String {
        match self {
            Target::Dir(_) => META_DIR.to_owned(),
            Target::Id(id) => format!("{META_DIR}/{}", Dataset::default_name(*id)),
        }
    }

    fn meta_dir(&self, prefix: &Path) -> PathBuf {
        self.base(prefix).join(self.meta_rel())
    }

    fn placement(&self, orig_dir: &Option<String>) -> Placement {
        match self {
            Target::Dir(d) => placement_of(d, orig_dir),
            Target::Id(id) => Placement::scr31(*id),
        }
    }

    /// The index key of dataset `ds` found here: the directory, or the
    /// dataset's name.
    fn index_key(&self, ds: &Dataset) -> String {
        match self {
            Target::Dir(d) => d.to_string(),
            Target::Id(id) => ds
                .name
                .clone()
                .unwrap_or_else(|| Dataset::default_name(*id)),
        }
    }

    fn layout(&self) -> Layout {
        match self {
            Target::Dir(_) => Layout::Legacy,
            Target::Id(_) => Layout::Scr31,
        }
    }
}

fn list_rank_filemaps(prefix: &Path, meta_dir: &Path) -> ScavengeResult<Vec<(i64, PathBuf)>> {
    let names = match beneath::read_dir_in(prefix, meta_dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(meta_dir, "list directory")(e)),
    };
    let mut out = Vec::new();
    for name in names {
        let name = name.to_string_lossy();
        if let Some(r) = name
            .strip_suffix(".scrfilemap")
            .and_then(|s| s.parse::<i64>().ok())
        {
            out.push((r, meta_dir.join(&*name)));
        }
    }
    out.sort();
    Ok(out)
}

/// Parse `<g+1>_of_<n>_in_<id>.xor` or `.rs`.
fn parse_set_file(name: &str) -> Option<(CopyType, u64, u64, i64)> {
    if let Some((g, n, id)) = parse_xor_file_name(name) {
        return Some((CopyType::Xor, g, n, id));
    }
    let stem = name.strip_suffix(".rs")?;
    let (g, n, id) = parse_xor_file_name(&format!("{stem}.xor"))?;
    Some((CopyType::Rs, g, n, id))
}

/// Step 1: the scan hash of a dataset whose keys are relative to
/// `dset_dir` and whose rank filemaps are in `dset_dir/meta_rel`.
fn scan(prefix: &Path, dset_dir: &Path, meta_rel: &str) -> ScavengeResult<Scan> {
    let meta_dir = dset_dir.join(meta_rel);
    let mut s = Scan::default();
    for (r, path) in list_rank_filemaps(prefix, &meta_dir)? {
        let rfm = match RankFilemap::read_file_in(prefix, &path) {
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
            // A file `scr postrun` packed is in its containers, not plain.
            let segments = rfm.segments.get(key).cloned().unwrap_or_default();
            let why = if segments.is_empty() {
                // Its size from the file opened below the prefix, never
                // through a link.
                let p = dset_dir.join(key);
                let md =
                    beneath::open_in(prefix, &p, beneath::How::Read).and_then(|f| f.metadata());
                match (md, meta.size_bytes) {
                    (Err(e), _) => Some(format!("{key}: {e}")),
                    (Ok(md), Some(sz)) if md.len() != sz => {
                        Some(format!("{key}: {} bytes, expected {sz}", md.len()))
                    }
                    (Ok(_), None) => Some(format!("{key}: no size recorded")),
                    _ if !meta.is_complete() => Some(format!("{key}: marked incomplete")),
                    _ => None,
                }
            } else {
                match meta.size_bytes {
                    None => Some(format!("{key}: no size recorded")),
                    Some(sz) => match container::segments_problem(dset_dir, &segments, sz) {
                        Some(w) => Some(format!("{key}: {w}")),
                        None if !meta.is_complete() => Some(format!("{key}: marked incomplete")),
                        None => None,
                    },
                }
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
                segments,
                ..Rank2FileEntry::default()
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

/// The summary of a dataset directory built from its rank filemaps.
struct Built {
    summary: Summary,
    report: AddReport,
}

fn placement_of(dir: &str, orig_dir: &Option<String>) -> Placement {
    Placement {
        dir: dir.to_string(),
        orig_dir: orig_dir.clone(),
        meta_of: None,
    }
}

/// Steps 1–4 without the index: scan, inspect, rebuild, rescan, write the
/// rank2file map and summary of the target.
fn build_summary(prefix: &Path, t: &Target) -> ScavengeResult<Built> {
    let dset_dir = t.base(prefix);
    let meta_rel = t.meta_rel();
    let mut s = scan(prefix, &dset_dir, &meta_rel)?;
    let Some(ds) = s.dataset.clone() else {
        if s.problems.is_empty() {
            return Err(ScavengeError::NotADataset {
                dir: t.meta_dir(prefix),
            });
        }
        return Err(ScavengeError::NoReadableFilemap {
            dir: t.meta_dir(prefix),
            problems: s.problems,
        });
    };
    let mut report = AddReport {
        dir: t.label(),
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
    let pl = t.placement(&s.orig_dir);
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
        let mut again = scan(prefix, &dset_dir, &meta_rel)?;
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
    let mut dataset = s.dataset.clone().unwrap_or(ds);
    dataset.complete = Some(complete);
    let summary = write_dataset_metadata(prefix, &pl, &map, &dataset, complete)?;
    report.ranks = n;
    report.missing = missing;
    report.complete = complete;
    Ok(Built { summary, report })
}

/// The summary of `<prefix>/<dir>`: an existing complete one as it is,
/// else one built from the rank filemaps; an existing incomplete summary
/// without rank filemaps is taken as it is.
fn summarize(prefix: &Path, t: &Target) -> ScavengeResult<Built> {
    let dset_dir = match t {
        Target::Dir(_) => t.base(prefix),
        Target::Id(_) => t.meta_dir(prefix),
    };
    // Its summary, map and rebuilt files are written there: never through
    // a link out of the prefix.
    let meta_dir = t.meta_dir(prefix);
    beneath::check(prefix, &meta_dir)?;
    if !beneath::is_dir_in(prefix, &dset_dir).map_err(io_err(&dset_dir, "examine"))? {
        return Err(ScavengeError::NoSuchDir { dir: dset_dir });
    }
    let existing = Summary::read_file_in(prefix, meta_dir.join(SUMMARY_FILE));
    let have_maps = !list_rank_filemaps(prefix, &meta_dir)?.is_empty();
    let from_summary = |s: Summary, problems: Vec<String>| Built {
        report: AddReport {
            dir: t.label(),
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
        list_rank_filemaps(prefix, &meta_dir).is_ok_and(|maps| {
            maps.iter()
                .filter_map(|(_, p)| RankFilemap::read_file_in(prefix, p).ok())
                .all(|m| m.dataset.id == s.dataset.id)
        })
    };
    match existing {
        Ok(s) if s.complete && maps_agree(&s) => Ok(from_summary(s, Vec::new())),
        _ if have_maps => {
            let mut b = build_summary(prefix, t)?;
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
    add_target(prefix, &Target::parse(prefix, dir)?)
}

/// [`add_dir`] of a parsed target.
pub fn add_target(prefix: &Path, t: &Target) -> ScavengeResult<AddReport> {
    add_target_as(prefix, t, false)
}

/// [`add_target`]; with `current`, a dataset that comes out complete is
/// also made CURRENT in the same index write (`scr postrun` for a
/// checkpoint: with two writes, a kill between them left the newer
/// checkpoint COMPLETE but not CURRENT, and the next allocation restarted
/// from the older one CURRENT still named). A directory already indexed
/// complete is left alone, CURRENT too (`AddReport::already_indexed`).
pub fn add_target_as(prefix: &Path, t: &Target, current: bool) -> ScavengeResult<AddReport> {
    let idx = read_index(prefix)?;
    if idx.layout() != t.layout() && idx.entries().next().is_some() {
        return Err(ScavengeError::LayoutMismatch {
            what: t.label(),
            index: idx.version,
        });
    }
    let indexed = match t {
        Target::Dir(d) => idx
            .dataset_id_by_dir(d)
            .map(|id| (id, &idx.datasets[&id][d.as_str()])),
        Target::Id(id) => idx
            .datasets
            .get(id)
            .and_then(|keys| keys.values().next())
            .map(|e| (*id, e)),
    };
    if let Some((id, e)) = indexed {
        if e.complete == Some(true) {
            return Ok(AddReport {
                dir: t.label(),
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
    let b = summarize(prefix, t)?;
    let ds = b.summary.dataset.clone();
    let complete = b.summary.complete;
    let when = timestamp(SystemClock.unix_secs());
    let key = t.index_key(&ds);
    let layout = t.layout();
    update_index(prefix, |idx| {
        if idx.entries().next().is_none() {
            idx.version = layout.index_version();
        }
        // The directory may have held another dataset before.
        while idx.dataset_id_by_dir(&key).is_some_and(|id| id != ds.id) {
            idx.remove_dir(&key);
        }
        idx.set_dataset(ds.id, &key, ds.clone(), complete);
        idx.mark_flushed(ds.id, &key, when);
        if current && complete {
            idx.set_current(&key);
        }
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

/// The index as `scr index --list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct IndexListing {
    /// The CURRENT dataset directory, if one is marked.
    pub current: Option<String>,
    /// One row per dataset directory, newest dataset first.
    #[serde(rename = "datasets")]
    pub rows: Vec<ListRow>,
}

/// The index as rows, newest dataset first.
pub fn list(prefix: &Path) -> ScavengeResult<IndexListing> {
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
    Ok(IndexListing {
        current: idx.current,
        rows,
    })
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
    /// What the new index drops or demotes of the old (readable) one.
    pub changes: Vec<String>,
    /// Where the old index was copied before it was replaced, when the
    /// rebuild changed its mind about some entry.
    pub old_kept_as: Option<PathBuf>,
}

/// Dataset directories below `prefix` (relative): directories holding
/// `.scr/summary.scr` or a rank filemap. A bounded walk that follows no
/// symbolic links: each directory is listed, and its entries and summary
/// examined, through handles opened below the prefix ([`beneath`]), so a
/// link swapped in while it runs is skipped, never walked.
pub fn find_dataset_dirs(prefix: &Path) -> ScavengeResult<Vec<DatasetDir>> {
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(prefix.to_path_buf(), 0)];
    let mut visited = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        visited += 1;
        if visited > MAX_WALK_DIRS {
            return Err(ScavengeError::TooManyDirs {
                prefix: prefix.to_path_buf(),
                limit: MAX_WALK_DIRS,
            });
        }
        if depth > 0 {
            let meta = dir.join(META_DIR);
            let summary = beneath::is_file_in(prefix, &meta.join(SUMMARY_FILE)).unwrap_or(false);
            if summary || !list_rank_filemaps(prefix, &meta)?.is_empty() {
                if let Ok(rel) = dir.strip_prefix(prefix) {
                    found.push(DatasetDir(rel.to_string_lossy().into_owned()));
                }
            }
        }
        if depth >= MAX_WALK_DEPTH {
            continue;
        }
        let Ok(names) = beneath::subdirs_in(prefix, &dir) else {
            continue;
        };
        for name in names.into_iter().filter(|n| n != META_DIR) {
            stack.push((dir.join(name), depth + 1));
        }
    }
    found.sort();
    Ok(found)
}

/// Every dataset of the prefix: SCR 3.1's `.scr/scr.dataset.<id>`
/// directories and old-layout dataset directories.
pub fn find_targets(prefix: &Path) -> ScavengeResult<Vec<Target>> {
    let mut out: Vec<Target> = find_dataset_dirs(prefix)?
        .into_iter()
        .map(Target::Dir)
        .collect();
    // Directories, not links to one (which `is_dir` took until
    // 2026-11-28).
    if let Ok(names) = beneath::subdirs_in(prefix, &prefix.join(META_DIR)) {
        for name in names {
            let name = name.to_string_lossy();
            if let Some(id) = name
                .strip_prefix("scr.dataset.")
                .and_then(|n| n.parse::<i64>().ok())
            {
                out.push(Target::Id(id));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `scr index --rebuild`: build the index again from the dataset
/// directories (SCR 3.1's metadata directories, or in an old-layout prefix
/// the dataset directories). A damaged index is moved aside (never deleted); what a
/// readable old index knew (CURRENT, FLUSHED/FETCHED/FAILED times) is kept
/// for the directories still found. CURRENT otherwise becomes the newest
/// complete checkpoint.
pub fn rebuild_index(prefix: &Path) -> ScavengeResult<RebuildIndexReport> {
    let path = index_path(prefix);
    beneath::check(prefix, &path)?;
    let mut report = RebuildIndexReport {
        damaged_kept_as: None,
        damage: None,
        datasets: Vec::new(),
        skipped: Vec::new(),
        current: None,
        changes: Vec::new(),
        old_kept_as: None,
    };
    let old = match Index::read_file_in(prefix, &path) {
        Ok(i) => Some(i),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            let aside =
                path.with_file_name(format!("index.scr.damaged.{}", SystemClock.unix_secs()));
            beneath::rename_in(prefix, &path, &aside)
                .map_err(io_err(&path, "move the damaged index aside"))?;
            report.damage = Some(e.to_string());
            report.damaged_kept_as = Some(aside);
            None
        }
    };
    let targets = find_targets(prefix)?;
    let layout = match &old {
        Some(o) => o.layout(),
        None if targets.iter().any(|t| matches!(t, Target::Id(_))) => Layout::Scr31,
        None if !targets.is_empty() => Layout::Legacy,
        None => Layout::Scr31,
    };
    let mut new = Index::new(layout);
    let when = timestamp(SystemClock.unix_secs());
    for t in targets {
        if t.layout() != layout {
            let why = ScavengeError::LayoutMismatch {
                what: t.label(),
                index: layout.index_version(),
            };
            report.skipped.push((t.label(), why.to_string()));
            continue;
        }
        match summarize(prefix, &t) {
            Ok(mut b) => {
                // A complete summary is checked against the files.
                if b.summary.complete {
                    let problems = verify::check_files(prefix, &t, &b.summary);
                    if !problems.is_empty() {
                        b.summary.complete = false;
                        b.report.complete = false;
                        b.report.problems.extend(problems);
                    }
                }
                let ds = b.summary.dataset.clone();
                let key = t.index_key(&ds);
                new.set_dataset(ds.id, &key, ds.clone(), b.summary.complete);
                let prev = old
                    .as_ref()
                    .and_then(|o| o.datasets.get(&ds.id))
                    .and_then(|d| d.get(key.as_str()));
                let e = new
                    .datasets
                    .get_mut(&ds.id)
                    .and_then(|d| d.get_mut(key.as_str()))
                    .expect("just set");
                e.flushed = Some(prev.and_then(|p| p.flushed.clone()).unwrap_or(when.clone()));
                if let Some(p) = prev {
                    e.fetched = p.fetched.clone();
                    e.failed = p.failed.clone();
                }
                report.datasets.push(b.report);
            }
            Err(e) => report.skipped.push((t.label(), e.to_string())),
        }
    }
    // The old CURRENT stays only while it is indexed as complete.
    new.current = old
        .as_ref()
        .and_then(|o| o.current.clone())
        .filter(|c| {
            new.entries()
                .any(|(_, k, e)| k == c.as_str() && e.complete == Some(true))
        })
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
    if let Some(o) = &old {
        report.changes = verify::changes(o, &new);
        if !report.changes.is_empty() {
            let aside = verify::keep_aside(prefix, SystemClock.unix_secs())
                .map_err(io_err(&path, "keep the old index aside"))?;
            report.old_kept_as = Some(aside);
        }
    }
    update_index(prefix, |idx| *idx = new)?;
    Ok(report)
}

#[cfg(test)]
mod tests;
