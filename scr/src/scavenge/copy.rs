//! `scr copy` (SCR's `scr_copy`): on one node, copy the files a dataset
//! has in that node's cache to its dataset directory in the prefix, and
//! write `<D>/.scr/<rank>.scrfilemap` for each rank copied.
//!
//! Two rounds, as SCR's `scr_scavenge` runs them:
//! - Round 1 (originals): every rank found in the node's filemaps with
//!   this dataset. Application files go to `<prefix>/<D>/<rel>` (their key
//!   from ORIGPATH/ORIGNAME, docs/formats.md), XOR/RS files to
//!   `<D>/.scr/<name>`. PARTNER copies are *not* copied (that would write
//!   every byte twice); they are reported with the node of the rank they
//!   belong to (the filemap's `PARTNER` tag), so the caller can target
//!   this node in round 2 if that node is lost.
//! - Round 2 (`partner`): the PARTNER copies held here for ranks that
//!   round 1 did not save (no rank filemap in `<D>/.scr` yet, or the ranks
//!   asked for) are restored to their owner's keys, with a rank filemap
//!   for the owner.
//!
//! Every byte passes through CRC32 on its way (unless disabled) and is
//! compared with the CRC the filemap recorded at complete: a mismatch, a
//! wrong size or an unreadable file removes the copy and lists the file in
//! the rank filemap with `COMPLETE 0`, so `scr index` treats the rank as
//! missing and rebuilds it from parity rather than keep wrong bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    create_dirs, io_err, PlacementError, Progress, ScavengeError, ScavengeResult, UnplacedFile,
};
use crate::dataset::restart::read_filemaps_in;
use crate::dataset::PARTNER_NODE_TAG;
use crate::ids::{DatasetId, Rank};
use crate::prefix::layout::{Placement, META_DIR};
use crate::prefix::{copy_file as prefix_copy_file, CopyChecks, CopyItem};
use crate::records::dataset::Dataset;
use crate::records::filemap::Filemap;
use crate::records::flush::{FlushFile, FLUSH_FILE};
use crate::records::meta::{FileType, Meta};
use crate::records::rank2file::safe_relative;
use crate::records::rank2file::{FILEMETA_BASE, RANK2FILE_BASE, RANK2FILE_ROOT};
use crate::records::rank_filemap::rank_filemap_file_name;
use crate::records::reddesc::CopyType;
use crate::records::summary::SUMMARY_FILE;
use crate::records::{RankFilemap, Record, Summary};
use crate::storage::dirs::NodeIdentity;
use crate::storage::node::{LogicalPath, NodeStorage};

/// What `scr copy` is asked to do.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// The job's control directory as the library records it (logical,
    /// `<cntl_base>/<user>/scr.<jobid>`); mapped through `node`.
    pub cntl_dir: PathBuf,
    /// The node this runs for: its name, and where its node-local paths
    /// really are (`root` for a simulated node).
    pub node: NodeIdentity,
    /// The dataset id.
    pub dataset: i64,
    /// The prefix directory (absolute, as the job saw it).
    pub prefix: PathBuf,
    /// Where the dataset goes; `None` reads `DIR`/`ORIGDIR` from the flush file.
    pub placement: Option<Placement>,
    /// Round 2: restore PARTNER copies of ranks not yet saved instead of
    /// copying originals.
    pub partner: bool,
    /// Only these ranks (round 1: ranks copied; round 2: owners restored).
    pub ranks: Option<BTreeSet<i64>>,
    /// Compute CRC32 while copying and compare with the filemap's
    /// (SCR_CRC_ON_FLUSH).
    pub crc: bool,
    /// Bytes each read and write of a copy takes (SCR_FILE_BUF_SIZE); 0
    /// for the default.
    pub buf_bytes: usize,
}

/// A rank whose rank filemap this copy wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankCopied {
    /// The rank.
    pub rank: i64,
    /// Files copied intact.
    pub files: u64,
    /// Files the rank has in the dataset (application + XOR/RS).
    pub expected: u64,
    /// Every expected file was copied intact.
    pub complete: bool,
    /// Restored from PARTNER copies held by `holder_rank` (round 2).
    pub from_partner_of: Option<i64>,
}

/// PARTNER copies this node holds for another rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartnerCopies {
    /// The rank the copies belong to.
    pub owner_rank: i64,
    /// That rank's node when the copies were made (filemap `PARTNER` tag).
    pub owner_node: Option<String>,
    /// The rank (on this node) holding them.
    pub holder_rank: i64,
    /// Number of copies.
    pub files: u64,
    /// Whether this run restored them (round 2).
    pub restored: bool,
}

/// A file that was not copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFailure {
    /// The rank it belongs to.
    pub rank: i64,
    /// The file (cache path as recorded).
    pub file: String,
    /// Why.
    pub why: String,
}

/// What `scr copy` did on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyReport {
    /// The node.
    pub node: String,
    /// The dataset id.
    pub dataset: i64,
    /// Where it went.
    pub placement: Placement,
    /// `originals` (round 1) or `partner` (round 2).
    pub round: String,
    /// Ranks whose rank filemap was written.
    pub ranks: Vec<RankCopied>,
    /// PARTNER copies held on this node.
    pub partners: Vec<PartnerCopies>,
    /// Files copied intact.
    pub files_copied: u64,
    /// Bytes copied intact.
    pub bytes_copied: u64,
    /// Files not copied, and why.
    pub failures: Vec<FileFailure>,
    /// Problems that did not stop the copy (damaged filemaps, …).
    pub warnings: Vec<String>,
}

impl CopyReport {
    /// Every rank copied was complete and no file failed.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty() && self.ranks.iter().all(|r| r.complete)
    }
}

/// Where dataset `id` goes, from `<prefix>/.scr/flush.scr`: `DIR` and
/// `ORIGDIR` in the old layout; an entry without `DIR` is SCR 3.1's
/// layout (metadata in `.scr/scr.dataset.<id>`).
pub fn placement_from_flush_file(prefix: &Path, id: i64) -> ScavengeResult<Placement> {
    let path = prefix.join(META_DIR).join(FLUSH_FILE);
    let ff = match FlushFile::read_file_in(prefix, &path) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => {
            return Err(ScavengeError::NoPlacement {
                id,
                source: PlacementError::NoFlushFile { path },
            })
        }
        Err(e) => return Err(e.into()),
    };
    let Some(entry) = ff.datasets.get(&id) else {
        return Err(ScavengeError::NoPlacement {
            id,
            source: PlacementError::NoDir { path },
        });
    };
    let Some(dir) = entry.dir.clone() else {
        return Ok(Placement::scr31(id));
    };
    let pl = Placement {
        dir,
        orig_dir: entry.orig_dir.clone(),
        meta_of: None,
    };
    check_placement(&pl).map_err(|e| ScavengeError::NoPlacement {
        id,
        source: PlacementError::InFlushFile {
            path,
            source: Box::new(e),
        },
    })?;
    Ok(pl)
}

/// `D` and `ORIGDIR` must be directories inside the prefix.
pub fn check_placement(pl: &Placement) -> Result<(), PlacementError> {
    if !safe_relative(&pl.dir) || pl.dir.split('/').next() == Some(META_DIR) {
        return Err(PlacementError::DirOutside {
            dir: pl.dir.clone(),
        });
    }
    match pl.orig_dir.as_deref() {
        None | Some(".") => Ok(()),
        Some(o) if safe_relative(o) => Ok(()),
        Some(o) => Err(PlacementError::OrigDirOutside {
            orig_dir: o.to_string(),
        }),
    }
}

/// Where a file of a dataset goes, and its key in the rank filemap.
enum Dest {
    /// An application file: key `rel`, at `<D>/<rel>`.
    App(String),
    /// An XOR/RS file: key `.scr/<name>`, at `<D>/.scr/<name>`.
    Redundancy(String),
    /// A PARTNER copy of file `index` of rank `owner`.
    Partner { owner: i64, index: u64 },
}

fn basename(path: &str) -> Option<String> {
    Path::new(path)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
}

/// The owner and index encoded in a PARTNER copy's name,
/// `<basename>.partner.<owner>.<index>` ([`crate::redundancy::apply::partner_copy_name`]).
pub fn parse_partner_copy_name(name: &str) -> Option<(i64, u64)> {
    let mut it = name.rsplitn(4, '.');
    let index = it.next()?.parse().ok()?;
    let owner = it.next()?.parse().ok()?;
    (it.next()? == "partner").then_some((owner, index))
}

fn classify(prefix: &Path, pl: &Placement, file: &str, meta: &Meta) -> Result<Dest, UnplacedFile> {
    match meta.file_type.unwrap_or(FileType::Full) {
        FileType::Full => {
            pl.rel_of(prefix, meta)
                .map(Dest::App)
                .ok_or_else(|| UnplacedFile::RoutedOutside {
                    orig_path: meta.orig_path.as_deref().unwrap_or("?").to_string(),
                    orig_name: meta.orig_name.as_deref().unwrap_or("?").to_string(),
                    routed_dir: pl.routed_dir(prefix),
                })
        }
        FileType::Xor | FileType::Rs => basename(file)
            .map(|b| Dest::Redundancy(format!("{}/{b}", pl.meta_rel())))
            .ok_or(UnplacedFile::NoName),
        FileType::Partner => basename(file)
            .and_then(|b| parse_partner_copy_name(&b))
            .map(|(owner, index)| Dest::Partner { owner, index })
            .ok_or(UnplacedFile::UnknownPartnerCopy),
    }
}

struct Copier<'a> {
    opts: &'a CopyOptions,
    pl: Placement,
    buf: Vec<u8>,
    progress: &'a dyn Progress,
    report: CopyReport,
}

impl Copier<'_> {
    /// Copy one cached file to `<D>/<key>`; on success the meta to record
    /// (FILE = key, CRC set, COMPLETE 1), else why not (the copy removed).
    fn copy(&mut self, rank: i64, file: &str, key: &str, meta: &Meta) -> Result<Meta, ()> {
        let mut fail = |why: String| {
            self.report.failures.push(FileFailure {
                rank,
                file: file.to_string(),
                why,
            });
        };
        if !meta.is_complete() {
            fail("marked incomplete in the filemap".into());
            return Err(());
        }
        if meta.size_bytes.is_none() {
            fail("no size recorded in the filemap".into());
            return Err(());
        }
        let item = CopyItem {
            src: self.opts.node.real(&LogicalPath::new(file)).into_path_buf(),
            dst: self.pl.key_base(&self.opts.prefix).join(key),
            rel: key.to_string(),
            size: meta.size_bytes,
            crc: meta.crc32,
            attrs: None,
            packing: None,
            within: Some(self.opts.prefix.clone()),
        };
        let checks = CopyChecks {
            crc: self.opts.crc,
            buf_bytes: self.opts.buf_bytes,
            ..CopyChecks::default()
        };
        // The flush's copy: CRC32 on the way, size and CRC compared, fsync.
        let copied = match prefix_copy_file(&item, checks, None, None, &mut self.buf) {
            Ok(c) => c,
            Err(why) => {
                let _ = crate::beneath::remove_file_in(&self.opts.prefix, &item.dst);
                fail(why.to_string());
                return Err(());
            }
        };
        // Injection point: a scavenge that dies (or fails) after each file
        // copied. An injected error counts as a failed copy of this file.
        if let Err(e) = crate::fault_point!("scavenge.file") {
            let _ = crate::beneath::remove_file_in(&self.opts.prefix, &item.dst);
            fail(format!("injected fault: {e}"));
            return Err(());
        }
        self.progress.advance(copied.size);
        let mut out = meta.clone();
        if self.opts.crc && meta.crc32.is_none() {
            out.crc32 = Some(copied.crc);
        }
        out.file = Some(key.to_string());
        out.complete = Some(true);
        self.report.files_copied += 1;
        self.report.bytes_copied += copied.size;
        Ok(out)
    }

    /// Report `files` PARTNER copies of `owner` held by `holder`, with the
    /// owner's node as the holder's filemap recorded it.
    fn report_held(&mut self, fm: &Filemap, owner: i64, holder: i64, files: usize, restored: bool) {
        self.report.partners.push(PartnerCopies {
            owner_rank: owner,
            owner_node: fm
                .tag(
                    DatasetId(self.opts.dataset),
                    rank_key(holder),
                    PARTNER_NODE_TAG,
                )
                .map(str::to_owned),
            holder_rank: holder,
            files: files as u64,
            restored,
        });
    }

    /// Write a rank's filemap once the names of the files it lists are
    /// durable (their directories fsynced: a power loss must not keep a
    /// rank filemap naming copies that are gone).
    fn write_rank_filemap(&mut self, rfm: &RankFilemap) -> ScavengeResult<()> {
        let base = self.pl.key_base(&self.opts.prefix);
        let copied: Vec<PathBuf> = rfm
            .files
            .iter()
            .filter(|(_, m)| m.is_complete())
            .map(|(k, _)| base.join(k))
            .collect();
        crate::durable::sync_parents(copied.iter().map(PathBuf::as_path))
            .map_err(|(d, e)| io_err(&d, "fsync directory")(e))?;
        let path = self
            .pl
            .meta_dir(&self.opts.prefix)
            .join(rank_filemap_file_name(rfm.rank));
        rfm.write_file_in(&self.opts.prefix, &path)?;
        Ok(())
    }

    fn rank_filemap(&self, rank: i64, dataset: Dataset, expected: u64) -> RankFilemap {
        RankFilemap {
            rank,
            dataset,
            expected_files: expected,
            files: BTreeMap::new(),
            orig_dir: self.pl.orig_dir.clone(),
            segments: BTreeMap::new(),
        }
    }
}

/// Meta recorded for a file that was expected but not copied: listed, so
/// `scr index` knows it exists, but incomplete.
fn failed_meta(key: &str, meta: &Meta) -> Meta {
    Meta {
        file: Some(key.to_string()),
        complete: Some(false),
        ..meta.clone()
    }
}

/// The rank whose PARTNER copies `holder` keeps (its left neighbour in its
/// set), from the redundancy descriptor; `None` for other schemes.
fn partner_owner_of(fm: &Filemap, id: i64, holder: i64) -> Option<i64> {
    let rd = fm.desc(DatasetId(id), rank_key(holder)).ok().flatten()?;
    if rd.copy_type != CopyType::Partner {
        return None;
    }
    let members = &rd.members;
    let n = members.len() as u64;
    (n >= 2 && rd.group_rank < n).then(|| members[((rd.group_rank + n - 1) % n) as usize])
}

/// Owner rank → (holder rank, copies by index) of every PARTNER copy on
/// this node. An owner whose copies are none at all (it wrote no files)
/// is listed too, from the holder's descriptor, so round 2 can still
/// write its (empty) rank filemap.
type HeldCopies<'p> = BTreeMap<i64, (i64, BTreeMap<u64, (&'p String, &'p Meta)>)>;

fn held_copies<'p>(
    fm: &Filemap,
    id: i64,
    plan: &'p BTreeMap<i64, Vec<(String, Meta, Dest)>>,
    ranks: &[i64],
) -> HeldCopies<'p> {
    let mut owners: HeldCopies<'p> = BTreeMap::new();
    for &holder in ranks {
        if let Some(owner) = partner_owner_of(fm, id, holder) {
            owners
                .entry(owner)
                .or_insert_with(|| (holder, BTreeMap::new()));
        }
    }
    for (&holder, files) in plan {
        for (f, meta, d) in files {
            if let Dest::Partner { owner, index } = d {
                owners
                    .entry(*owner)
                    .or_insert_with(|| (holder, BTreeMap::new()))
                    .1
                    .insert(*index, (f, meta));
            }
        }
    }
    owners
}

/// The dataset descriptor of `id` on this node: rank `rank`'s, else any.
fn dataset_of(fm: &Filemap, id: i64, rank: i64) -> Option<Dataset> {
    fm.dataset(DatasetId(id), rank_key(rank))
        .ok()
        .flatten()
        .or_else(|| {
            fm.list_ranks_by_dataset(DatasetId(id))
                .into_iter()
                .find_map(|r| fm.dataset(DatasetId(id), r).ok().flatten())
        })
}

/// Copy dataset `opts.dataset` from this node's cache (see the module
/// documentation). `Err` only when nothing could be attempted (no
/// filemaps, dataset not cached here, placement unknown, prefix not
/// writable); per-file problems are in the report.
pub fn copy_dataset(opts: &CopyOptions, progress: &dyn Progress) -> ScavengeResult<CopyReport> {
    let id = opts.dataset;
    let cntl_real = opts.node.real(&LogicalPath::new(&opts.cntl_dir));
    let (fm, _, warnings) = read_filemaps_in(&cntl_real);
    let ranks: Vec<i64> = fm
        .list_ranks_by_dataset(DatasetId(id))
        .into_iter()
        .map(Rank::as_i64)
        .collect();
    if ranks.is_empty() {
        return Err(ScavengeError::NotInCache {
            id,
            node: opts.node.name.clone(),
            cntl: cntl_real.into_path_buf(),
        });
    }
    let bypass = ranks
        .iter()
        .any(|&r| fm.tag(DatasetId(id), rank_key(r), crate::dataset::BYPASS_TAG) == Some("1"));
    if bypass {
        return Err(ScavengeError::InPrefix {
            id,
            node: opts.node.name.clone(),
        });
    }
    if let Some(ds) = dataset_of(&fm, id, ranks[0]) {
        if ds.complete == Some(false) {
            return Err(ScavengeError::IncompleteInCache {
                id,
                node: opts.node.name.clone(),
            });
        }
    }
    let pl = match &opts.placement {
        Some(p) => {
            check_placement(p).map_err(|source| ScavengeError::NoPlacement { id, source })?;
            p.clone()
        }
        None => placement_from_flush_file(&opts.prefix, id)?,
    };
    create_dirs(&opts.prefix, &pl.meta_dir(&opts.prefix))?;
    let stale = if opts.partner {
        Vec::new()
    } else {
        remove_stale_metadata(&opts.prefix, &pl.meta_dir(&opts.prefix), id)
    };
    let mut c = Copier {
        opts,
        pl: pl.clone(),
        buf: Vec::new(),
        progress,
        report: CopyReport {
            node: opts.node.name.clone(),
            dataset: id,
            placement: pl,
            round: if opts.partner { "partner" } else { "originals" }.into(),
            ranks: Vec::new(),
            partners: Vec::new(),
            files_copied: 0,
            bytes_copied: 0,
            failures: Vec::new(),
            warnings,
        },
    };
    c.report.warnings.extend(stale);
    // Classify every file first: the progress total, and the PARTNER
    // copies by owner.
    let mut plan: BTreeMap<i64, Vec<(String, Meta, Dest)>> = BTreeMap::new();
    for &r in &ranks {
        for f in fm.list_files(DatasetId(id), rank_key(r)) {
            let meta = match fm.meta(DatasetId(id), rank_key(r), &f) {
                Ok(Some(m)) => m,
                Ok(None) => Meta::default(),
                Err(e) => {
                    c.report.failures.push(FileFailure {
                        rank: r,
                        file: f.clone(),
                        why: format!("unreadable meta data: {e}"),
                    });
                    continue;
                }
            };
            match classify(&opts.prefix, &c.pl, &f, &meta) {
                Ok(d) => plan.entry(r).or_default().push((f, meta, d)),
                Err(why) => c.report.failures.push(FileFailure {
                    rank: r,
                    file: f,
                    why: why.to_string(),
                }),
            }
        }
    }
    let held = held_copies(&fm, id, &plan, &ranks);
    if opts.partner {
        copy_partner_round(&mut c, &fm, &held)?;
    } else {
        for (&owner, (holder, copies)) in &held {
            c.report_held(&fm, owner, *holder, copies.len(), false);
        }
        copy_originals(&mut c, &fm, &ranks, &plan)?;
    }
    progress.finish();
    Ok(c.report)
}

/// A user who routes every checkpoint to the same directory gets the same
/// `D` each time: metadata another dataset left in `<D>/.scr` (its rank
/// filemaps, summary, rank2file root) would be mixed with this one's, so
/// it goes. Files of this dataset (an earlier, partial scavenge) stay and
/// are overwritten rank by rank. Returns what was removed.
fn remove_stale_metadata(prefix: &Path, meta_dir: &Path, id: i64) -> Vec<String> {
    let mut removed = Vec::new();
    let mut remove = |p: PathBuf, why: String| {
        if crate::beneath::remove_file_in(prefix, &p).is_ok() {
            removed.push(format!("removed {} ({why})", p.display()));
        }
    };
    let summary = meta_dir.join(SUMMARY_FILE);
    match Summary::read_file_in(prefix, &summary) {
        Ok(s) if s.dataset.id == id => {}
        Ok(s) => remove(summary, format!("summary of dataset {}", s.dataset.id)),
        Err(e) if e.is_not_found() => {}
        Err(e) => remove(summary, format!("unreadable: {e}")),
    }
    let Ok(names) = crate::beneath::read_dir_in(prefix, meta_dir) else {
        return removed;
    };
    let mut other = false;
    for name in names {
        let name = name.to_string_lossy();
        if !name.ends_with(".scrfilemap") {
            continue;
        }
        let path = meta_dir.join(&*name);
        if let Ok(m) = RankFilemap::read_file_in(prefix, &path) {
            if m.dataset.id != id {
                other = true;
                remove(path, format!("rank filemap of dataset {}", m.dataset.id));
            }
        }
    }
    if other {
        for root in [RANK2FILE_ROOT, RANK2FILE_BASE, FILEMETA_BASE] {
            remove(
                meta_dir.join(root),
                "rank2file map of another dataset".into(),
            );
        }
    }
    removed
}

fn wanted(opts: &CopyOptions, rank: i64) -> bool {
    opts.ranks.as_ref().is_none_or(|s| s.contains(&rank))
}

fn copy_originals(
    c: &mut Copier<'_>,
    fm: &Filemap,
    ranks: &[i64],
    plan: &BTreeMap<i64, Vec<(String, Meta, Dest)>>,
) -> ScavengeResult<()> {
    let id = c.opts.dataset;
    let total: u64 = plan
        .iter()
        .filter(|(r, _)| wanted(c.opts, **r))
        .flat_map(|(_, v)| v)
        .filter(|(_, _, d)| !matches!(d, Dest::Partner { .. }))
        .filter_map(|(_, m, _)| m.size_bytes)
        .sum();
    c.progress
        .start(&format!("{} dataset {id}", c.opts.node.name), total);
    for &r in ranks {
        let files = plan.get(&r).map(Vec::as_slice).unwrap_or(&[]);
        if !wanted(c.opts, r) {
            continue;
        }
        let Some(ds) = dataset_of(fm, id, r) else {
            c.report.warnings.push(format!(
                "rank {r}: no dataset descriptor for dataset {id} on this node; rank not copied"
            ));
            continue;
        };
        let apps = files
            .iter()
            .filter(|(_, _, d)| matches!(d, Dest::App(_)))
            .count() as u64;
        let reds = files
            .iter()
            .filter(|(_, _, d)| matches!(d, Dest::Redundancy(_)))
            .count() as u64;
        // The filemap's FILES counts application files; files that could
        // not be classified still count, so the rank shows as incomplete.
        let expected = fm
            .expected_files(DatasetId(id), rank_key(r))
            .unwrap_or(apps)
            .max(apps)
            + reds;
        let mut rfm = c.rank_filemap(r, ds, expected);
        let mut ok = 0u64;
        for (f, meta, d) in files {
            let key = match d {
                Dest::App(k) | Dest::Redundancy(k) => k,
                Dest::Partner { .. } => continue,
            };
            let recorded = match c.copy(r, f, key, meta) {
                Ok(m) => {
                    ok += 1;
                    m
                }
                Err(()) => failed_meta(key, meta),
            };
            rfm.files.insert(key.clone(), recorded);
        }
        c.write_rank_filemap(&rfm)?;
        c.report.ranks.push(RankCopied {
            rank: r,
            files: ok,
            expected,
            complete: ok == expected,
            from_partner_of: None,
        });
    }
    Ok(())
}

/// Whether `<D>/.scr/<rank>.scrfilemap` exists and lists every expected
/// file as complete (round 1 saved the rank).
fn already_saved(c: &Copier<'_>, rank: i64) -> bool {
    let path =
        c.pl.meta_dir(&c.opts.prefix)
            .join(rank_filemap_file_name(rank));
    RankFilemap::read_file_in(&c.opts.prefix, path)
        .is_ok_and(|m| m.is_complete() && m.files.values().all(Meta::is_complete))
}

fn copy_partner_round(
    c: &mut Copier<'_>,
    fm: &Filemap,
    owners: &HeldCopies<'_>,
) -> ScavengeResult<()> {
    let id = c.opts.dataset;
    let todo: Vec<i64> = owners
        .keys()
        .copied()
        .filter(|&o| match &c.opts.ranks {
            Some(s) => s.contains(&o),
            None => !already_saved(c, o),
        })
        .collect();
    let total: u64 = todo
        .iter()
        .flat_map(|o| owners[o].1.values())
        .filter_map(|(_, m)| m.size_bytes)
        .sum();
    c.progress.start(
        &format!("{} dataset {id} (partner copies)", c.opts.node.name),
        total,
    );
    for (&owner, (holder, copies)) in owners {
        let restore = todo.contains(&owner);
        c.report_held(fm, owner, *holder, copies.len(), restore);
        if !restore {
            continue;
        }
        let Some(ds) = dataset_of(fm, id, *holder) else {
            c.report.warnings.push(format!(
                "rank {holder}: no dataset descriptor for dataset {id}; copies of rank {owner} not restored"
            ));
            continue;
        };
        // Copies are numbered 0..n by the owner's file order: a gap is a
        // copy that is missing here.
        let expected = copies.keys().next_back().map_or(0, |last| last + 1);
        let mut rfm = c.rank_filemap(owner, ds, expected);
        let mut ok = 0u64;
        for (f, meta) in copies.values() {
            let owner_meta = Meta {
                file_type: Some(FileType::Full),
                ..(*meta).clone()
            };
            let Some(key) = c.pl.rel_of(&c.opts.prefix, &owner_meta) else {
                c.report.failures.push(FileFailure {
                    rank: owner,
                    file: (*f).clone(),
                    why: "the copy's routed path is not inside the dataset's directory".into(),
                });
                continue;
            };
            let recorded = match c.copy(owner, f, &key, &owner_meta) {
                Ok(m) => {
                    ok += 1;
                    m
                }
                Err(()) => failed_meta(&key, &owner_meta),
            };
            rfm.files.insert(key, recorded);
        }
        c.write_rank_filemap(&rfm)?;
        c.report.ranks.push(RankCopied {
            rank: owner,
            files: ok,
            expected,
            complete: ok == expected,
            from_partner_of: Some(*holder),
        });
    }
    Ok(())
}

/// A rank as the filemap keys it. Ranks here come from the filemap or the
/// rank2file map; one that is no rank (negative) finds no entry.
fn rank_key(r: i64) -> Rank {
    Rank::from_i64(r).unwrap_or(Rank(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partner_copy_names_parse() {
        let name = crate::redundancy::apply::partner_copy_name("/c/d/rank_3.ckpt", 3, 1);
        assert_eq!(parse_partner_copy_name(&name), Some((3, 1)));
        assert_eq!(parse_partner_copy_name("a.partner.x.1"), None);
        assert_eq!(parse_partner_copy_name("a.copy.3.1"), None);
        assert_eq!(parse_partner_copy_name("3.1"), None);
    }

    #[test]
    fn placements_must_stay_inside_the_prefix() {
        let ok = Placement {
            dir: "ckpt.3".into(),
            orig_dir: None,
            meta_of: None,
        };
        assert!(check_placement(&ok).is_ok());
        for (dir, orig) in [
            ("../x", None),
            ("/abs", None),
            (".scr", None),
            ("", None),
            ("scr.dataset.1", Some("../y")),
        ] {
            let p = Placement {
                dir: dir.into(),
                orig_dir: orig.map(str::to_owned),
                meta_of: None,
            };
            assert!(check_placement(&p).is_err(), "{p:?}");
        }
    }
}
