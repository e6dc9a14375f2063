//! Fetch: bring a checkpoint back from the prefix directory into cache
//! when the cache holds nothing usable (program flow "scr_fetch_sync").
//! Rank 0 reads the index and walks the checkpoints from CURRENT (or the
//! newest) to older ones, skipping copies marked incomplete or FAILED; for
//! each, rank 0 reads the summary, the rank2file tree is read by several
//! ranks (no file over 1 MB), every rank copies its files into its cache
//! through a window of SCR_FETCH_WIDTH readers verifying size and CRC32,
//! and the redundancy scheme is applied. A copy that fails anywhere is
//! marked FAILED in the index and the next older one is tried.

use std::collections::BTreeMap;
use std::path::Path;

use super::layout::{Layout, Placement};
use super::{
    copy_all, on_rank0, pack_ranks_files, unpack_rank_files, update_flush_file, update_index,
    windowed, CopyChecks, CopyError, CopyItem, FetchError, PrefixError,
};
use crate::cache::Job;
use crate::config::settings::FlushType;
use crate::error::{ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::kvtree::KvTree;
use crate::log::writer::{Entry, EventType, XferType};
use crate::records::dataset::Dataset;
use crate::records::index::{index_path, timestamp};
use crate::records::meta::{FileType, Meta};
use crate::records::rank2file::{safe_relative, Rank2FilePart};
use crate::records::summary::{Summary, SUMMARY_FILE};
use crate::records::{Index, Location, Rank2File, RankFiles, Record};
use crate::storage::dirs;
use crate::storage::node::LogicalPath;

/// A checkpoint fetched into cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Its dataset id.
    pub id: i64,
    /// Its dataset directory in the prefix.
    pub dir: String,
}

/// What a fetch did: the checkpoint it brought into cache, if any, and
/// the copies in the prefix it could not use. The same on every rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// The checkpoint now in cache.
    pub fetched: Option<Fetched>,
    /// Copies tried and found bad (marked FAILED in the index): dataset id
    /// and `<dir>: <why>`, in the order tried (newest first).
    pub failed: Vec<(i64, String)>,
    /// The index exists but could not be read, so nothing was tried.
    pub index_error: Option<String>,
}

/// Why a copy in the prefix could not be used.
enum Attempt {
    /// In cache now (or recorded to be read in place); the summary's
    /// ORIGDIR.
    Done {
        /// The summary's ORIGDIR.
        orig_dir: Option<String>,
        /// Read in place (SCR_FETCH_BYPASS=1): nothing is in cache.
        in_place: bool,
        /// SCR_FLUSH_TYPE=PTHREAD (or the store's FLUSH=): this rank's
        /// files and the threads that copied them, for the log.
        threads: Option<(usize, usize)>,
    },
    /// The copy is bad: mark it FAILED.
    Failed(FetchError),
    /// Not usable by this run, but not bad (a different rank count, or the
    /// fetch failed in cache: [`FetchError::InCache`]).
    Skipped(FetchError),
}

/// A collective step's result: the outer `ScrResult` is a failure of the
/// run (communication), the inner one says this copy cannot be used (the
/// same on every rank).
type Usable<T> = Result<T, FetchError>;

/// The checkpoints worth trying, best first, from rank 0's index.
fn candidates(idx: &Index) -> Vec<(i64, String)> {
    let current = idx
        .current
        .as_deref()
        .and_then(|c| idx.dataset_id_by_dir(c));
    let mut out = Vec::new();
    for (id, dirs) in idx.datasets.iter().rev() {
        if current.is_some_and(|c| *id > c) {
            continue;
        }
        for (dir, e) in dirs {
            let is_ckpt = e
                .dataset
                .as_ref()
                .is_some_and(|d| d.flag_checkpoint.unwrap_or(d.ckpt.is_some()));
            if e.complete == Some(true) && e.failed.is_empty() && is_ckpt {
                out.push((*id, dir.clone()));
            }
        }
    }
    out
}

fn encode_list(layout: Layout, list: &[(i64, String)]) -> Vec<u8> {
    let mut t = KvTree::new();
    t.set_int("VERSION", layout.index_version());
    for (i, (id, dir)) in list.iter().enumerate() {
        let e = t.entry(i.to_string());
        e.set_int("ID", *id);
        e.set_str("DIR", dir);
    }
    t.pack()
}

fn decode_list(b: &[u8]) -> (Layout, Vec<(i64, String)>) {
    let Ok(t) = KvTree::unpack_exact(b) else {
        return (Layout::Scr31, Vec::new());
    };
    let layout = match t.val("VERSION") {
        Some("1") => Layout::Legacy,
        _ => Layout::Scr31,
    };
    let mut v: Vec<(usize, i64, String)> = t
        .iter()
        .filter_map(|(k, e)| {
            Some((
                k.parse().ok()?,
                e.val("ID")?.parse().ok()?,
                e.val("DIR")?.to_owned(),
            ))
        })
        .collect();
    v.sort();
    (layout, v.into_iter().map(|(_, id, d)| (id, d)).collect())
}

fn encode_parts(parts: &[Rank2FilePart]) -> Vec<u8> {
    let mut t = KvTree::new();
    for (i, p) in parts.iter().enumerate() {
        let e = t.entry(i.to_string());
        e.set_str("FILE", &p.file);
        e.set_val("OFFSET", p.offset);
        e.set_int("LEVEL", p.parent_level);
    }
    t.pack()
}

fn decode_parts(b: &[u8]) -> Result<Vec<Rank2FilePart>, FetchError> {
    let t = KvTree::unpack_exact(b).map_err(|source| FetchError::Unpack {
        what: "rank2file parts",
        source,
    })?;
    let mut v: Vec<(usize, Rank2FilePart)> = Vec::new();
    for (k, e) in t.iter() {
        let bad = |why: &'static str| FetchError::BadPart {
            part: k.clone(),
            why,
        };
        let get = |key: &'static str| e.val(key).ok_or_else(|| bad(key));
        v.push((
            k.parse().map_err(|_| bad("key is not a number"))?,
            Rank2FilePart {
                file: get("FILE")?.to_owned(),
                offset: get("OFFSET")?.parse().map_err(|_| bad("bad OFFSET"))?,
                parent_level: get("LEVEL")?.parse().map_err(|_| bad("bad LEVEL"))?,
            },
        ));
    }
    v.sort_by_key(|(i, _)| *i);
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// Read the rank2file tree in `meta_dir` with every rank taking a share of
/// its files, and hand each rank its own entry (SCR's distributed read).
/// With `spread` (a global restart, which may run on another rank count)
/// the entry of writer `q` goes to rank `q mod size` instead, and a
/// different rank count is no error. Returns the writers' rank count and
/// the entries this rank got, by writer. `Ok(Err(why))` (the same on every
/// rank) when the map is unreadable. Collective.
fn read_rank2file(
    job: &Job,
    meta_dir: &Path,
    root: &str,
    spread: bool,
) -> ScrResult<Usable<(u64, BTreeMap<i64, RankFiles>)>> {
    let world = job.world.as_ref();
    let (me, n) = (world.rank(), world.size());
    let mut found = Rank2File::default();
    let mut err: Option<FetchError> = None;
    let mut head = Vec::new();
    if me == 0 {
        match Rank2File::read_part_in(&job.prefix, meta_dir, root, None, &mut found) {
            Ok((ranks, children)) => {
                head = encode_parts(&children);
                found.ranks = ranks;
            }
            Err(e) => err = Some(e.into()),
        }
    }
    let ok = world.all_true(err.is_none())?;
    if !ok {
        return Ok(Err(
            err.unwrap_or(FetchError::OtherRank("reading the rank2file map"))
        ));
    }
    let mut ranks_buf = if me == 0 {
        found.ranks.to_be_bytes().to_vec()
    } else {
        Vec::new()
    };
    world.bcast_bytes(0, &mut ranks_buf)?;
    let ranks = u64::from_be_bytes(ranks_buf.as_slice().try_into().unwrap_or([0; 8]));
    world.bcast_bytes(0, &mut head)?;
    let mut parts = decode_parts(&head).unwrap_or_default();
    // Level by level: part i is read by rank i mod n.
    let mut rounds = 0;
    while !parts.is_empty() {
        rounds += 1;
        let mut next = Vec::new();
        let mut local_err = None;
        if rounds > 64 {
            local_err = Some(FetchError::TooDeep(64));
        } else {
            for (i, p) in parts.iter().enumerate() {
                if i % n != me {
                    continue;
                }
                match Rank2File::read_part_in(&job.prefix, meta_dir, root, Some(p), &mut found) {
                    Ok((_, children)) => next.extend(children),
                    Err(e) => {
                        local_err = Some(e.into());
                        break;
                    }
                }
            }
        }
        if !world.all_true(local_err.is_none())? {
            let why = local_err.unwrap_or(FetchError::OtherRank("reading a rank2file part"));
            return Ok(Err(why));
        }
        let all = world.allgather_bytes(&encode_parts(&next))?;
        parts = Vec::new();
        for b in all {
            parts.extend(decode_parts(&b).unwrap_or_default());
        }
    }
    // Hand every entry to its rank.
    let mut bad = None;
    let mut per_dest: BTreeMap<usize, BTreeMap<i64, RankFiles>> = BTreeMap::new();
    for (r, files) in &found.rank {
        let dest = match usize::try_from(*r) {
            Ok(q) if spread && (q as u64) < ranks => Some(q % n),
            Ok(q) if !spread && q < n => Some(q),
            _ => None,
        };
        match dest {
            Some(dest) => {
                per_dest.entry(dest).or_default().insert(*r, files.clone());
            }
            None => {
                bad = Some(FetchError::NoSuchRank {
                    rank: *r,
                    running: n,
                })
            }
        }
    }
    let sends: BTreeMap<usize, Vec<u8>> = per_dest
        .iter()
        .map(|(d, m)| (*d, pack_ranks_files(m)))
        .collect();
    let rank_count = || FetchError::RankCount {
        written: ranks,
        running: n as u64,
    };
    if ranks != n as u64 && !spread {
        bad = Some(rank_count());
    }
    if !world.all_true(bad.is_none())? {
        return Ok(Err(bad.unwrap_or_else(rank_count)));
    }
    let got = world.exchange_sparse(&sends)?;
    let mut mine: BTreeMap<i64, RankFiles> = BTreeMap::new();
    let mut problem = None;
    for (_, b) in got {
        match unpack_rank_files(&b) {
            Ok(m) => {
                for (r, f) in m {
                    let owner = if spread { r.rem_euclid(n as i64) } else { r };
                    if owner != me as i64 || mine.insert(r, f).is_some() {
                        problem = Some(FetchError::ListedTwice(me));
                    }
                }
            }
            Err(e) => problem = Some(e.into()),
        }
    }
    if !world.all_true(problem.is_none())? {
        return Ok(Err(
            problem.unwrap_or(FetchError::OtherRank("reading its rank2file entry"))
        ));
    }
    if !spread {
        mine.entry(me as i64).or_default();
    }
    Ok(Ok((ranks, mine)))
}

/// Try to fetch the copy of `id` under index key `dir` (its directory in
/// the old layout, its name in SCR 3.1's). Collective.
fn attempt(job: &mut Job, layout: Layout, id: i64, dir: &str) -> ScrResult<Attempt> {
    let dset = DatasetId(id);
    let prefix = job.prefix.clone();
    // Rank 0 reads the summary and broadcasts it, with the map to read.
    let mut buf = Vec::new();
    let mut root = Vec::new();
    let mut why: Option<FetchError> = None;
    if job.rank().is_root() {
        let path = Placement::entry_meta_dir(&prefix, layout, id, dir).join(SUMMARY_FILE);
        match Summary::read_file_in(&prefix, &path) {
            Ok(s) if !s.complete => why = Some(FetchError::Incomplete { path }),
            Ok(s) if s.dataset.id != id => {
                why = Some(FetchError::WrongSummary {
                    path,
                    found: s.dataset.id,
                    expected: id,
                })
            }
            Ok(s) => {
                let pl = Placement::of_entry(layout, id, dir, Some(&s));
                root = pl.map_root(&prefix).as_bytes().to_vec();
                buf = s.to_tree().pack();
            }
            Err(e) => why = Some(e.into()),
        }
    }
    job.world.bcast_bytes(0, &mut buf)?;
    job.world.bcast_bytes(0, &mut root)?;
    if buf.is_empty() {
        let mut w = why.map(|e| e.to_string()).unwrap_or_default().into_bytes();
        job.world.bcast_bytes(0, &mut w)?;
        let text = String::from_utf8_lossy(&w).into_owned();
        return Ok(Attempt::Failed(FetchError::Reported(text)));
    }
    let tree = KvTree::unpack_exact(&buf).map_err(|source| {
        PrefixError::Fetch(FetchError::Unpack {
            what: "summary",
            source,
        })
    })?;
    let summary = Summary::from_tree(&tree)?;
    let placement = Placement::of_entry(layout, id, dir, Some(&summary));
    let meta_dir = placement.meta_dir(&prefix);
    let root = String::from_utf8_lossy(&root).into_owned();
    // A global restart reads in place whatever the rank count: each rank
    // checks a share of the writers' files, and any rank may read any.
    let global = job.settings.fetch.global_restart;
    let mut got = match read_rank2file(job, &meta_dir, &root, global)? {
        Ok((_, files)) => files,
        Err(e @ FetchError::RankCount { .. }) => return Ok(Attempt::Skipped(e)),
        Err(e) => return Ok(Attempt::Failed(e)),
    };
    // Files in containers cannot be read in place: a fetch with
    // SCR_FETCH_BYPASS=1 copies such a dataset into cache (docs/decisions.md);
    // a global restart, which reads by path, cannot use it.
    let packed = got
        .values()
        .any(|m| m.files.values().any(|e| !e.segments.is_empty()));
    let packed = job.world.any_true(packed)?;
    if global {
        if packed {
            return Ok(Attempt::Skipped(FetchError::GlobalInContainers(id)));
        }
        return read_in_place(job, &summary, &placement, &got);
    }
    if job.settings.fetch.bypass {
        if !packed {
            return read_in_place(job, &summary, &placement, &got);
        }
        if job.rank().is_root() {
            job.msg.warn(format_args!(
                "SCR_FETCH_BYPASS=1: dataset {id} is stored in containers, which cannot be read in place: copying it into cache"
            ));
        }
    }
    let me = job.rank();
    let mine = got.remove(&me.as_i64()).unwrap_or_default();
    let mut ds: Dataset = summary.dataset.clone();
    let ckpt = ds.ckpt.unwrap_or(id);
    let di = job.desc_for(ckpt);
    let store = job.sets[di].store;
    let directory = LogicalPath::new(&job.sets[di].descriptor.directory);
    let dset_dir = job.dataset_dir(&directory, dset);
    // Filemap first (an entry may outlive its file, never the reverse).
    let mut local: Usable<Vec<CopyItem>> = Ok(Vec::new());
    if mine
        .expected_files
        .is_some_and(|e| e != mine.files.len() as u64)
    {
        local = Err(FetchError::FileCount {
            rank: me.as_i64(),
            listed: mine.files.len(),
            expected: mine.expected_files,
        });
    }
    let made =
        dirs::create_private_dirs_below(&job.real(&job.cache_dir(store)), &job.real(&dset_dir));
    if let Err(e) = made {
        local = Err(e.into());
    }
    let mut in_progress = ds.clone();
    in_progress.complete = Some(false);
    job.filemap.set_dataset(dset, me, &in_progress);
    let record = job.sets[di].descriptor.clone();
    job.filemap.set_desc(dset, me, &record);
    let mut metas = Vec::new();
    if let Ok(items) = &mut local {
        for (rel, e) in &mine.files {
            if e.nofetch {
                continue;
            }
            let routed = placement.routed_path(&prefix, rel);
            let Ok(rel_prefix) = routed.strip_prefix(&prefix) else {
                local = Err(FetchError::LeavesPrefix(rel.clone()));
                break;
            };
            let logical = dset_dir.join(rel_prefix);
            let logical_s = logical.to_record();
            let meta = Meta {
                file: Some(logical_s.clone()),
                file_type: Some(FileType::Full),
                complete: Some(false),
                size_bytes: e.size_bytes,
                crc32: e.crc32,
                ckpt: Some(ckpt),
                ranks: Some(job.world.size() as u64),
                orig: Some(routed.to_string_lossy().into_owned()),
                orig_path: routed.parent().map(|p| p.to_string_lossy().into_owned()),
                orig_name: routed.file_name().map(|p| p.to_string_lossy().into_owned()),
                ..Meta::default()
            };
            job.filemap.add_file(dset, me, &logical_s);
            job.filemap.set_meta(dset, me, &logical_s, &meta);
            let item = match fetch_item(&prefix, &placement, rel, e) {
                Ok(item) => item,
                Err(why) => {
                    local = Err(why);
                    break;
                }
            };
            items.push(CopyItem {
                dst: job.real(&logical).into_path_buf(),
                attrs: e.attrs.filter(|_| job.settings.flush.copy_metadata),
                ..item
            });
            metas.push((logical_s, meta));
        }
    }
    job.filemap.set_expected_files(dset, me, metas.len() as u64);
    let written = job.write_filemap();
    if let Err(e) = written {
        local = Err(FetchError::Filemap(e.to_string()));
    }
    let width = job.settings.fetch.width as usize;
    let me32 = me.0;
    // A fetch always checks CRC32 against the rank2file map; SCR_CRC_ON_COPY
    // adds the read-back of the cached copy, SCR_COPY_METADATA the
    // recorded attributes.
    let checks = CopyChecks::of(&job.settings, true);
    // The cache's store decides how its datasets travel, both ways: a
    // PTHREAD store fetches a rank's files on parallel threads too.
    let kind = job.stores[store].flush;
    let threads = kind.copy_threads(metas.len());
    job.msg.dbg(
        2,
        format_args!(
            "fetch of dataset {id}: {} files from {dir}, {} on {threads} thread{}",
            metas.len(),
            kind.as_str(),
            if threads == 1 { "" } else { "s" }
        ),
    );
    let copied = match local {
        Ok(items) => windowed(job.world.as_ref(), width, || {
            copy_all(&items, checks, None, None, threads, || {
                crate::fault_point!("fetch.file", rank = me32)
                    .map_err(|e| CopyError::Injected(e.into()))
            })
            .map_err(FetchError::from)
        })?,
        Err(e) => windowed(job.world.as_ref(), width, || Err(e))?,
    };
    let ok = job.world.all_true(copied.is_ok())?;
    if !ok {
        let bad_copy = copied.as_ref().err().is_some_and(|e| !e.in_cache(&prefix));
        let bad_copy = job.world.any_true(bad_copy)?;
        let mine_why = copied.err().map(|e| e.to_string()).unwrap_or_default();
        return failed_everywhere(job, dset, &mine_why, bad_copy);
    }
    // A map written by LLNL SCR lists names only: the size and CRC32 the
    // copy measured become the cached file's (it was checked against the
    // map's own when the map had them).
    let copied = copied.unwrap_or_default();
    let files = metas.len();
    for (i, (logical, mut meta)) in metas.into_iter().enumerate() {
        meta.complete = Some(true);
        if let Some(c) = copied.get(i) {
            meta.size_bytes = Some(c.size);
            meta.crc32 = Some(c.crc);
        }
        job.filemap.set_meta(dset, me, &logical, &meta);
    }
    ds.complete = Some(true);
    job.filemap.set_dataset(dset, me, &ds);
    // Every rank's record is on disk before the set's encode, which a rank
    // that returned here would never join.
    if let Err(e) = job.write_filemap_agreed() {
        return unrecorded(job, dset, e);
    }
    // Protect the fetched copy in cache as a new checkpoint would be.
    let applied = crate::dataset::encode::encode(job, dset);
    let protected = job.world.all_true(applied.is_ok())?;
    if let Err(e) = &applied {
        eprintln!("SCR: fetch of dataset {id}: rank {me}: redundancy not applied: {e}");
    }
    if !protected {
        job.delete_dataset(dset)?;
        return Ok(Attempt::Skipped(FetchError::InCache(Box::new(
            FetchError::NotProtected,
        ))));
    }
    if let Err(e) = job.write_filemaps_agreed() {
        return unrecorded(job, dset, e);
    }
    job.dataset_id = job.dataset_id.max(id);
    job.checkpoint_id = job.checkpoint_id.max(ckpt);
    Ok(Attempt::Done {
        orig_dir: summary.orig_dir,
        in_place: false,
        threads: (kind == FlushType::Pthread).then_some((files, threads)),
    })
}

/// A fetched dataset some rank could not record in cache (its filemap or
/// the node's master filemap; every rank has an error, [`Job::agree`]):
/// deleted from cache everywhere, and the fetch ends with the error on
/// every rank. The copy in the prefix is not to blame: it is not marked
/// failed, and an older one would meet the same cache.
fn unrecorded(job: &mut Job, dset: DatasetId, e: ScrError) -> ScrResult<Attempt> {
    eprintln!("SCR: rank {}: fetch of dataset {dset}: {e}", job.rank());
    job.delete_dataset(dset)?;
    Err(e)
}

/// The prefix side of the fetch of the file `rel` (map entry `e`): its
/// stored path, or with containers its segments (the first container
/// stands for the source in errors). A map entry whose segments leave the
/// prefix, or whose lengths do not add up to its size, is refused.
fn fetch_item(
    prefix: &Path,
    placement: &Placement,
    rel: &str,
    e: &crate::records::Rank2FileEntry,
) -> Result<CopyItem, FetchError> {
    let mut item = CopyItem {
        src: placement.stored_path(prefix, rel),
        dst: std::path::PathBuf::new(),
        rel: rel.to_owned(),
        size: e.size_bytes,
        crc: e.crc32,
        attrs: None,
        packing: None,
        within: Some(prefix.to_path_buf()),
    };
    if e.segments.is_empty() {
        return Ok(item);
    }
    if let Some(s) = e.segments.iter().find(|s| !safe_relative(&s.file)) {
        return Err(FetchError::LeavesPrefix(format!(
            "{rel}: segment {}",
            s.file
        )));
    }
    let length: u64 = e.segments.iter().map(|s| s.length_bytes).sum();
    if e.size_bytes.is_some_and(|s| s != length) {
        return Err(FetchError::Segments {
            file: rel.to_owned(),
            length,
            size: e.size_bytes.unwrap_or(0),
        });
    }
    let base = placement.key_base(prefix);
    let segs = super::container::resolve(&base, &e.segments);
    item.src = segs.first().map(|s| s.path.clone()).unwrap_or_default();
    item.size = Some(length);
    item.packing = Some(super::container::Packing::From(segs));
    Ok(item)
}

/// A fetch that failed on some rank (`mine_why` is this rank's reason,
/// empty when it had none): every rank's reason goes to rank 0, the
/// dataset is deleted from cache on every rank. Collective.
fn failed_everywhere(
    job: &mut Job,
    dset: DatasetId,
    mine_why: &str,
    bad_copy: bool,
) -> ScrResult<Attempt> {
    if !mine_why.is_empty() {
        eprintln!(
            "SCR: fetch of dataset {dset}: rank {}: {mine_why}",
            job.rank()
        );
    }
    let reasons = job.world.gather_bytes(0, mine_why.as_bytes())?;
    job.delete_dataset(dset)?;
    let why = reasons
        .map(|r| {
            r.iter()
                .enumerate()
                .filter(|(_, b)| !b.is_empty())
                .map(|(i, b)| (i, String::from_utf8_lossy(b).into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let why = FetchError::Ranks(why);
    Ok(if bad_copy {
        Attempt::Failed(why)
    } else {
        // Every failure was the cache's: the copy is not to blame.
        Attempt::Skipped(FetchError::InCache(Box::new(why)))
    })
}

/// Whether a file to read in place is there with the size and the CRC32
/// the map records (when it records one: a flush or a bypass complete
/// with SCR_CRC_ON_FLUSH=1). The CRC costs a read of the file; without it
/// a file rewritten in place since (bypass mode reusing a name, a crash in
/// the middle of the next checkpoint's write) would be restarted from.
fn check_in_place(path: &Path, size: Option<u64>, crc: Option<u32>) -> Result<(), FetchError> {
    let bad = |why: String| FetchError::InPlace {
        path: path.to_path_buf(),
        why,
    };
    let md = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if !md.is_file() {
        return Err(bad("not a file".into()));
    }
    if let Some(s) = size.filter(|&s| s != md.len()) {
        return Err(bad(format!("{} bytes, the map records {s}", md.len())));
    }
    if let Some(want) = crc {
        let (got, _) = crate::storage::verify::crc_of_file(path).map_err(|e| bad(e.to_string()))?;
        if got != want {
            return Err(bad(format!(
                "CRC32 {got:#x}, the map records {want:#x} (changed since it was written)"
            )));
        }
    }
    Ok(())
}

/// Record this rank's files of `dset` in the prefix (`mine`, placed by
/// `placement`) in its filemap with their prefix paths as keys, checking
/// each is there with the size the map records. Not collective.
fn record_in_place(
    job: &mut Job,
    dset: DatasetId,
    ckpt: i64,
    placement: &Placement,
    mine: &BTreeMap<i64, RankFiles>,
) -> Usable<()> {
    let me = job.rank();
    let prefix = job.prefix.clone();
    let mut local: Usable<()> = Ok(());
    for (writer, files) in mine {
        if let Some(e) = files
            .expected_files
            .filter(|&e| e != files.files.len() as u64)
        {
            local = Err(FetchError::FileCount {
                rank: *writer,
                listed: files.files.len(),
                expected: Some(e),
            });
        }
    }
    let mut n = 0u64;
    let all = mine.values().flat_map(|f| f.files.iter());
    for (rel, e) in all.filter(|(_, e)| !e.nofetch) {
        let routed = placement.routed_path(&prefix, rel);
        let stored = placement.stored_path(&prefix, rel);
        if routed.strip_prefix(&prefix).is_err() || stored.strip_prefix(&prefix).is_err() {
            local = Err(FetchError::LeavesPrefix(rel.clone()));
            break;
        }
        if let Err(why) = check_in_place(&stored, e.size_bytes, e.crc32) {
            local = local.and(Err(why));
        }
        let key = stored.to_string_lossy().into_owned();
        let meta = Meta {
            file: Some(key.clone()),
            file_type: Some(FileType::Full),
            complete: Some(true),
            size_bytes: e.size_bytes,
            crc32: e.crc32,
            ckpt: Some(ckpt),
            ranks: Some(job.world.size() as u64),
            orig: Some(routed.to_string_lossy().into_owned()),
            orig_path: routed.parent().map(|p| p.to_string_lossy().into_owned()),
            orig_name: routed.file_name().map(|p| p.to_string_lossy().into_owned()),
            ..Meta::default()
        };
        job.filemap.add_file(dset, me, &key);
        job.filemap.set_meta(dset, me, &key, &meta);
        n += 1;
    }
    job.filemap.set_expected_files(dset, me, n);
    local
}

/// SCR_FETCH_BYPASS=1 (and SCR_GLOBAL_RESTART=1): record the files of the
/// copy in the prefix this rank got (its own; in a global restart those of
/// the writers `q mod size = rank`) to be read where they are (keys are
/// their paths in the prefix, the dataset tagged BYPASS); each file must
/// exist with the size the map records. Nothing is copied into cache and
/// no scheme is applied. Collective.
fn read_in_place(
    job: &mut Job,
    summary: &Summary,
    placement: &Placement,
    mine: &BTreeMap<i64, RankFiles>,
) -> ScrResult<Attempt> {
    let id = summary.dataset.id;
    let dset = DatasetId(id);
    let me = job.rank();
    let mut ds: Dataset = summary.dataset.clone();
    let ckpt = ds.ckpt.unwrap_or(id);
    let record = job.sets[job.desc_for(ckpt)].descriptor.clone();
    let mut in_progress = ds.clone();
    in_progress.complete = Some(false);
    job.filemap.set_dataset(dset, me, &in_progress);
    job.filemap.set_desc(dset, me, &record);
    job.filemap
        .set_tag(dset, me, crate::cache::BYPASS_TAG, "1")?;
    let mut local = record_in_place(job, dset, ckpt, placement, mine);
    if let Err(e) = job.write_filemap() {
        local = Err(FetchError::Filemap(e.to_string()));
    }
    if !job.world.all_true(local.is_ok())? {
        let bad_copy = local
            .as_ref()
            .err()
            .is_some_and(|e| !e.in_cache(&job.prefix));
        let bad_copy = job.world.any_true(bad_copy)?;
        let mine_why = local.err().map(|e| e.to_string()).unwrap_or_default();
        return failed_everywhere(job, dset, &mine_why, bad_copy);
    }
    ds.complete = Some(true);
    job.filemap.set_dataset(dset, me, &ds);
    if let Err(e) = job.write_filemaps_agreed() {
        return unrecorded(job, dset, e);
    }
    job.dataset_id = job.dataset_id.max(id);
    job.checkpoint_id = job.checkpoint_id.max(ckpt);
    Ok(Attempt::Done {
        orig_dir: summary.orig_dir.clone(),
        in_place: true,
        threads: None,
    })
}

/// Fetch the newest usable checkpoint from the prefix directory into cache
/// (scr_fetch_sync). `None` when there is none. Collective.
pub fn fetch_sync(job: &mut Job) -> ScrResult<FetchReport> {
    fetch_sync_in(job, |_| true)
}

/// [`fetch_sync`] among the checkpoints older than `below` only (after the
/// application rejected a restart from `below`, SCR loads "the next most
/// recent checkpoint"). Collective.
pub fn fetch_sync_below(job: &mut Job, below: Option<DatasetId>) -> ScrResult<FetchReport> {
    fetch_sync_in(job, |id| below.is_none_or(|b| id < b.get()))
}

/// The application rejected the restart from `rejected`, a checkpoint this
/// run fetched, and the restart goes on from an older one in cache: the
/// index's CURRENT steps back to the newest copy in the prefix older than
/// `rejected` (as after the fetch of an older one), so the next run does
/// not fetch the rejected copy again over the cache's. Nothing changes when
/// the prefix holds none; the rejected copy is not marked FAILED (a later
/// `scr index --current` may pick it again). Collective; an index that
/// cannot be written is reported, not an error of the restart.
pub fn step_current_below(job: &mut Job, rejected: DatasetId) -> ScrResult<()> {
    let prefix = job.prefix.clone();
    let stepped = on_rank0(job.world.as_ref(), "step the index's CURRENT back", || {
        if !super::meta_exists(&prefix, &index_path(&prefix))? {
            return Ok(None);
        }
        let mut to = None;
        update_index(&prefix, |idx| {
            to = candidates(idx)
                .into_iter()
                .find(|(id, _)| *id < rejected.get())
                .map(|(_, dir)| dir);
            if let Some(d) = &to {
                idx.set_current(d);
            }
        })?;
        Ok(to)
    });
    match stepped {
        Ok(Some(Some(dir))) => job.msg.dbg(
            1,
            format_args!(
                "restart from dataset {rejected} rejected: the index's CURRENT is now {dir}"
            ),
        ),
        Ok(_) => {}
        Err(e @ ScrError::Comm(_)) => return Err(e),
        Err(e) => eprintln!("SCR: warning: restart from dataset {rejected} rejected: {e}"),
    }
    Ok(())
}

/// [`fetch_sync`] among the checkpoints newer than `than` only: the cache's
/// newest checkpoint is `than`, and the prefix may hold a newer one whose
/// cache copy was lost. Nothing is read but the index when there is none.
/// Collective.
pub fn fetch_sync_newer(job: &mut Job, than: DatasetId) -> ScrResult<FetchReport> {
    fetch_sync_in(job, |id| id > than.get())
}

/// [`fetch_sync`] among the index's candidates whose dataset id `keep`
/// accepts (evaluated on rank 0). Collective.
fn fetch_sync_in(job: &mut Job, keep: impl Fn(i64) -> bool) -> ScrResult<FetchReport> {
    let started = job.clock.now();
    let prefix = job.prefix.clone();
    let mut report = FetchReport::default();
    let mut list = Vec::new();
    let mut index_error = Vec::new();
    if job.rank().is_root() {
        match Index::read_file_in(&prefix, index_path(&prefix)) {
            Ok(idx) => {
                let mut c = candidates(&idx);
                c.retain(|(id, _)| keep(*id));
                list = encode_list(idx.layout(), &c);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                eprintln!(
                    "SCR: cannot fetch: the index is damaged ({e}); \
                     rebuild it from the dataset directories with `scr index --rebuild`"
                );
                index_error = format!("the index is damaged: {e}").into_bytes();
            }
        }
    }
    job.world.bcast_bytes(0, &mut list)?;
    job.world.bcast_bytes(0, &mut index_error)?;
    if !index_error.is_empty() {
        report.index_error = Some(String::from_utf8_lossy(&index_error).into_owned());
    }
    let (layout, list) = decode_list(&list);
    if list.is_empty() {
        return Ok(report);
    }
    job.log(Entry::event(EventType::FetchStart));
    for (id, dir) in list {
        let t = job.clock.now();
        let outcome = attempt(job, layout, id, &dir)?;
        let when = timestamp(job.clock.unix_secs());
        match outcome {
            Attempt::Done {
                orig_dir,
                in_place,
                threads,
            } => {
                let ds = job.dataset(DatasetId(id));
                let name = ds
                    .as_ref()
                    .and_then(|d| d.name.clone())
                    .unwrap_or_else(|| Dataset::default_name(id));
                let d = dir.clone();
                let dsc = ds.clone();
                let recorded = on_rank0(job.world.as_ref(), "record the fetch", || {
                    update_index(&prefix, |idx| {
                        idx.mark_fetched(id, &d, when.clone());
                        idx.set_current(&d);
                    })?;
                    update_flush_file(&prefix, |ff| {
                        // Read in place: the dataset is in the prefix only.
                        if in_place {
                            ff.location_unset(id, Location::Cache);
                        } else {
                            ff.location_set(id, Location::Cache);
                        }
                        ff.location_set(id, Location::Pfs);
                        let e = ff.datasets.entry(id).or_default();
                        // SCR 3.1's flush file has no directory: the
                        // dataset's metadata directory follows from its id.
                        if layout == Layout::Legacy {
                            e.dir = Some(d.clone());
                            e.orig_dir = orig_dir.clone();
                        }
                        e.name = dsc.as_ref().and_then(|x| x.name.clone());
                        e.checkpoint = Some(true);
                        e.output = dsc.as_ref().and_then(|x| x.flag_output);
                        e.dataset = dsc.clone();
                    })
                });
                if let Err(e) = recorded {
                    eprintln!("SCR: warning: fetch of dataset {id}: {e}");
                }
                let bytes = ds.as_ref().and_then(|d| d.size_bytes).unwrap_or(0);
                let files = ds.as_ref().and_then(|d| d.files).unwrap_or(0);
                job.log(
                    Entry::xfer(XferType::Fetch)
                        .from(prefix.join(&dir).display().to_string())
                        .dset(id)
                        .name(name.as_str())
                        .secs(job.clock.elapsed(t).as_secs_f64())
                        .bytes(bytes)
                        .files(files),
                );
                let mut done = Entry::event(EventType::FetchSuccess)
                    .dset(id)
                    .name(name)
                    .secs(job.clock.elapsed(started).as_secs_f64());
                if let Some((files, threads)) = threads {
                    // The log is rank 0's: its own share, as a flush says.
                    done = done.note(format!(
                        "PTHREAD: rank 0 copied {files} files on {threads} threads"
                    ));
                }
                job.log(done);
                report.fetched = Some(Fetched { id, dir });
                return Ok(report);
            }
            Attempt::Failed(why) => {
                if job.rank().is_root() {
                    eprintln!("SCR: fetch of dataset {id} from {dir} failed: {why}");
                }
                let d = dir.clone();
                let marked = on_rank0(job.world.as_ref(), "mark the copy failed", || {
                    update_index(&prefix, |idx| {
                        idx.mark_failed(id, &d, when.clone());
                        if idx.current.as_deref() == Some(d.as_str()) {
                            idx.current = None;
                        }
                    })
                });
                if let Err(e) = marked {
                    eprintln!("SCR: warning: {e}");
                }
                job.log(
                    Entry::event(EventType::FetchFail)
                        .dset(id)
                        .note(format!("{dir}: {why}"))
                        .secs(job.clock.elapsed(t).as_secs_f64()),
                );
                report.failed.push((id, format!("{dir}: {why}")));
            }
            Attempt::Skipped(why) => {
                if job.rank().is_root() {
                    eprintln!("SCR: not fetching dataset {id} from {dir}: {why}");
                }
                job.log(
                    Entry::event(EventType::FetchFail)
                        .dset(id)
                        .note(format!("{dir}: skipped: {why}")),
                );
            }
        }
    }
    Ok(report)
}
