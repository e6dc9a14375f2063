//! Restart in place (program flow of SCR_Init: scr_scatter_filemaps,
//! scr_cache_rebuild, scr_distribute_datasets, scr_distribute_reddescs,
//! scr_distribute_files, scr_reddesc_recover).
//!
//! 1. Each node's master reads every filemap in its control directory (the
//!    master filemap's list, and a scan of the directory so a deleted master
//!    filemap loses nothing) and hands each rank's entries to that rank when
//!    it runs on this node, or to some local process otherwise.
//! 2. For each dataset, oldest first: the dataset and redundancy descriptors
//!    reach every rank (a lost rank learns its set from any surviving member,
//!    since each descriptor records the whole set); files move to the node of
//!    their owner rank; every rank verifies its files (size and CRC32 against
//!    the meta data recorded at complete), its own files and the redundancy
//!    files it holds apart — sizes first, then each byte read once
//!    (`super::check`: a whole check when nothing is missing, else inside
//!    the set's rebuild pass); each redundancy set rebuilds what its scheme
//!    can (PARTNER restores own files and held copies each from where an
//!    intact copy is); a dataset that cannot be made whole on every rank is
//!    deleted everywhere — never offered for restart with wrong bytes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::check::{check_files, Depth};
use super::rebuild::{rebuild_dataset, Checked};
use crate::cache::Job;
use crate::error::RebuildError;
use crate::error::TransferError;
use crate::error::{io_err, ScrError, ScrResult};
use crate::ids::{DatasetId, Rank};
use crate::kvtree::KvTree;
use crate::log::writer::{Entry, EventType};
use crate::records::dataset::Dataset;
use crate::records::filemap::{Filemap, MasterFilemap, MASTER_FILEMAP_FILE};
use crate::records::meta::Meta;
use crate::records::reddesc::RedDesc;
use crate::records::Record;
use crate::storage::dirs;
use crate::storage::node::{LogicalPath, RealPath};

/// What SCR_Init found and did with the cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitReport {
    /// Dataset ids found in cache on any node.
    pub found: Vec<DatasetId>,
    /// Datasets usable after init (whole on every rank), ascending.
    pub available: Vec<DatasetId>,
    /// Of those, the ones that needed a rebuild (some rank lost files).
    pub rebuilt: Vec<DatasetId>,
    /// Datasets deleted because they could not be made whole, and why.
    pub lost: Vec<(DatasetId, String)>,
    /// Datasets written by a different number of ranks (kept, not used).
    pub skipped: Vec<(DatasetId, String)>,
    /// Files moved between nodes to reach their owner rank.
    pub moved_files: u64,
    /// The checkpoint fetched from the prefix directory, when the cache
    /// had none, or only older ones (its dataset id and directory).
    pub fetched: Option<i64>,
    /// The prefix directory the fetched checkpoint came from.
    pub fetched_dir: Option<String>,
    /// Checkpoints in the prefix a fetch tried and could not use (now
    /// FAILED in the index): dataset id and `<dir>: <why>`, newest first.
    pub fetch_failed: Vec<(i64, String)>,
    /// Why no fetch was tried although the prefix has an index (it could
    /// not be read).
    pub fetch_error: Option<String>,
    /// Datasets the filemaps knew in the prefix directory (bypass mode, or
    /// read in place), ascending: forgotten at init, never deleted; a fetch
    /// finds them in the prefix.
    pub in_prefix: Vec<DatasetId>,
}

/// Read every filemap of this node (master only) into one filemap; names
/// the files read so they can be replaced afterwards.
fn read_node_filemaps(job: &Job) -> (Filemap, Vec<PathBuf>) {
    let (merged, paths, warnings) = read_filemaps_in(&job.real(&job.cntl));
    for w in warnings {
        eprintln!("SCR: warning: {w}");
    }
    (merged, paths)
}

/// Every filemap of a node's control directory `cntl` (a real path) merged
/// into one: the files the master filemap lists and every
/// `filemap_*.scrinfo` in the directory, so a deleted or damaged master
/// filemap loses nothing. Returns the merged map, the files read, and a
/// warning for each file that could not be used (also read by `scr copy`).
pub(crate) fn read_filemaps_in(cntl: &Path) -> (Filemap, Vec<PathBuf>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut paths: Vec<PathBuf> = Vec::new();
    match MasterFilemap::read_file(cntl.join(MASTER_FILEMAP_FILE)) {
        Ok(m) => paths.extend(m.files.iter().map(PathBuf::from)),
        Err(e) if e.is_not_found() => {}
        Err(e) => warnings.push(format!(
            "master filemap unreadable, scanning the control directory: {e}"
        )),
    }
    if let Ok(rd) = fs::read_dir(cntl) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("filemap_") && name.ends_with(".scrinfo") {
                paths.push(e.path());
            }
        }
    }
    paths.sort();
    paths.dedup();
    let mut merged = Filemap::new();
    for p in &paths {
        match Filemap::read_file(p) {
            Ok(fm) => merged.merge(&fm),
            Err(e) if e.is_not_found() => {}
            Err(e) => warnings.push(format!("skipping damaged filemap: {e}")),
        }
    }
    (merged, paths, warnings)
}

/// Step 1: node masters hand out their node's filemap entries.
fn scatter_filemaps(job: &mut Job) -> ScrResult<()> {
    let local_world: Vec<i64> = job
        .node_comm
        .allgather_bytes(&job.rank().as_i64().to_be_bytes())?
        .iter()
        .map(|b| i64::from_be_bytes(b.as_slice().try_into().unwrap_or([0xff; 8])))
        .collect();
    let mut sends: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    if job.node_comm.rank() == 0 {
        let (mut merged, _) = read_node_filemaps(job);
        let mut per_dest: BTreeMap<usize, Filemap> = BTreeMap::new();
        let mut rr = 0usize;
        for r in merged.list_ranks() {
            let part = merged.extract_rank(r);
            let dest = match local_world.iter().position(|&w| w == r.as_i64()) {
                Some(i) => i,
                None => {
                    rr = (rr + 1) % local_world.len();
                    rr
                }
            };
            per_dest.entry(dest).or_default().merge(&part);
        }
        for (dest, fm) in per_dest {
            sends.insert(dest, fm.to_tree().pack());
        }
    }
    let received = job.node_comm.exchange_sparse(&sends)?;
    let mut mine = Filemap::new();
    for bytes in received.values() {
        let tree = KvTree::unpack_exact(bytes).map_err(|source| ScrError::Transfer {
            dset: None,
            source: TransferError::Unpack {
                what: "scattered filemap",
                source,
            },
        })?;
        mine.merge(&Filemap::from_tree(&tree)?);
    }
    job.filemap = mine;
    job.write_filemaps_agreed()?;
    // Filemap files of processes that no longer exist on this node would
    // be read again next time: drop any the master filemap does not list.
    if job.node_comm.rank() == 0 {
        let cntl = job.real(&job.cntl);
        let listed = MasterFilemap::read_file(cntl.join(MASTER_FILEMAP_FILE))
            .map(|m| m.files)
            .unwrap_or_default();
        if let Ok(rd) = fs::read_dir(&cntl) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path().to_string_lossy().into_owned();
                if name.starts_with("filemap_")
                    && name.ends_with(".scrinfo")
                    && !listed.contains(&p)
                {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }
    job.node_comm.barrier()?;
    Ok(())
}

/// A rank's descriptors for one dataset: dataset, redundancy, and the
/// number of files it wrote when a holder of its own entries knew it.
type Descs = (Dataset, RedDesc, Option<u64>);

/// Step 2a: every rank obtains its dataset and redundancy descriptors for
/// `dset`. Returns them, or `None` when no surviving process knew them.
fn distribute_descriptors(job: &mut Job, dset: DatasetId) -> ScrResult<Option<Descs>> {
    let size = job.world.size();
    let mut out: BTreeMap<usize, KvTree> = BTreeMap::new();
    for r in job.filemap.list_ranks_by_dataset(dset) {
        let (Ok(Some(ds)), Ok(Some(rd))) =
            (job.filemap.dataset(dset, r), job.filemap.desc(dset, r))
        else {
            continue;
        };
        let members = rd.members.clone();
        let mut targets: Vec<(i64, u64)> = vec![(r.as_i64(), rd.group_rank)];
        for (g, &m) in members.iter().enumerate() {
            if m != r.as_i64() {
                targets.push((m, g as u64));
            }
        }
        for (target, grank) in targets {
            if target < 0 || target as usize >= size {
                continue;
            }
            let mut d = rd.clone();
            d.group_rank = grank;
            let entry = out.entry(target as usize).or_default();
            // Own entries (target == r) are preferred by the receiver.
            let own = target == r.as_i64();
            let slot = entry.entry(if own { "OWN" } else { "PEER" });
            if slot.is_empty() {
                slot.set("DATADESC", ds.to_tree());
                slot.set("REDDESC", d.to_tree());
                if own {
                    if let Some(n) = job.filemap.expected_files(dset, r) {
                        slot.set_bytecount("FILES", n);
                    }
                }
            }
        }
    }
    let sends: BTreeMap<usize, Vec<u8>> = out.into_iter().map(|(k, t)| (k, t.pack())).collect();
    let received = job.world.exchange_sparse(&sends)?;
    let mut own = None;
    let mut peer = None;
    for bytes in received.values() {
        let Ok(tree) = KvTree::unpack_exact(bytes) else {
            continue;
        };
        for (kind, slot) in [("OWN", &mut own), ("PEER", &mut peer)] {
            if slot.is_some() {
                continue;
            }
            if let Some(t) = tree.get(kind) {
                let ds = t.get("DATADESC").map(Dataset::from_tree);
                let rd = t.get("REDDESC").map(RedDesc::from_tree);
                if let (Some(Ok(ds)), Some(Ok(rd))) = (ds, rd) {
                    let files = t.get_bytecount("FILES").ok().flatten();
                    *slot = Some((ds, rd, files));
                }
            }
        }
    }
    Ok(own.or(peer))
}

/// Step 2b: move files of `dset` held for other ranks to those ranks, each
/// in pieces of SCR_MPI_BUF_SIZE (`Job::piece_bytes`), one piece per
/// process per round, so a move holds one piece in memory whatever the
/// file's size (until 2026-11-28 each file went whole, read into memory and
/// copied into its message). Returns the number of files this process sent.
fn distribute_files(job: &mut Job, dset: DatasetId, dir_logical: &LogicalPath) -> ScrResult<u64> {
    let me = job.rank();
    let piece = job.piece_bytes.max(1);
    let mut pending: Vec<Outgoing> = Vec::new();
    for r in job.filemap.list_ranks_by_dataset(dset) {
        if r != me {
            for f in job.filemap.list_files(dset, r) {
                let real = job.real(&LogicalPath::new(&f));
                // The length fixes the file's pieces (at least one, which
                // tells the owner whether it existed).
                let len = fs::metadata(&real).ok().map(|m| m.len());
                let pieces = len.map_or(1, |l| l.div_ceil(piece as u64).max(1));
                pending.push(Outgoing {
                    rank: r,
                    file: f,
                    real,
                    len,
                    pieces,
                    next: 0,
                    src: None,
                });
            }
        }
    }
    let total: u64 = pending.iter().map(|o| o.pieces).sum();
    let max_rounds = job.max(i64::try_from(total).unwrap_or(i64::MAX))?;
    pending.reverse();
    let mut sent = 0u64;
    let mut incoming: BTreeMap<usize, Incoming> = BTreeMap::new();
    // No longer than the longest file to send (a piece whenever some file
    // takes several, so `next_piece`'s pieces are the ones counted above),
    // and nothing on a process that sends nothing.
    let longest = pending.iter().filter_map(|o| o.len).max().unwrap_or(0);
    let mut buf = vec![0u8; piece.min(usize::try_from(longest).unwrap_or(usize::MAX))];
    for _ in 0..max_rounds.max(0) {
        let mut sends = BTreeMap::new();
        let mut finished = None;
        if let Some(o) = pending.last_mut() {
            let filemap = &job.filemap;
            let msg = o.next_piece(|o| Ok(filemap.meta(dset, o.rank, &o.file)?), &mut buf)?;
            if o.rank.index() < job.world.size() {
                sends.insert(o.rank.index(), msg);
            }
            if o.next == o.pieces {
                finished = pending.pop();
            }
        }
        let received = job.world.exchange_sparse(&sends)?;
        if let Some(o) = finished {
            // The owner has it now; this node's copy and entry go.
            let _ = fs::remove_file(&o.real);
            job.filemap.remove_file(dset, o.rank, &o.file);
            sent += 1;
        }
        for (&from, msg) in &received {
            // A file this rank cannot take (its cache full, a damaged
            // message) is recorded and missing: the size check that follows
            // counts it lost and the set's redundancy rebuilds it. The rank
            // keeps taking part in every round: returning here would leave
            // the others in the next exchange.
            if let Err(e) = receive_piece(job, dset, dir_logical, from, msg, &mut incoming) {
                eprintln!("SCR: rank {me}: dataset {dset}: a file moved to this rank is lost: {e}");
            }
        }
    }
    // Entries for other ranks without files (descriptors only) go too.
    for r in job.filemap.list_ranks_by_dataset(dset) {
        if r != me {
            job.filemap.remove_rank_by_dataset(dset, r);
        }
    }
    job.write_filemap_agreed()?;
    Ok(sent)
}

/// A file on its way to its owner rank ([`distribute_files`]).
struct Outgoing {
    rank: Rank,
    file: String,
    real: RealPath,
    /// Its length when the move began; `None` when it is missing.
    len: Option<u64>,
    /// Messages it takes (at least one).
    pieces: u64,
    /// The next piece to send.
    next: u64,
    /// The file, open from its first piece on.
    src: Option<fs::File>,
}

impl Outgoing {
    /// The message of the next piece: a packed header (RANK, FILE, PIECE,
    /// LAST; with the first piece META and PRESENT), then up to a piece of
    /// the file's bytes. A file that cannot be read (or is shorter than
    /// when the move began) sends its remaining pieces empty: the owner's
    /// copy is short, and the size check after the move counts it lost.
    /// `meta` gives the file's meta data (asked for the first piece only).
    fn next_piece(
        &mut self,
        meta: impl FnOnce(&Self) -> ScrResult<Option<Meta>>,
        buf: &mut [u8],
    ) -> ScrResult<Vec<u8>> {
        let first = self.next == 0;
        let mut header = KvTree::new();
        header.set_int("RANK", self.rank.as_i64());
        header.set_str("FILE", &self.file);
        header.set_int("PIECE", self.next as i64);
        header.set_int("LAST", i64::from(self.next + 1 == self.pieces));
        if first {
            header.set("META", meta(self)?.unwrap_or_default().to_tree());
            // A missing file still travels as an entry: the owner then
            // knows it existed and counts it as lost.
            self.src = self.len.and_then(|_| fs::File::open(&self.real).ok());
            header.set_int("PRESENT", i64::from(self.src.is_some()));
        }
        let want = self.len.map_or(0, |l| {
            let done = self.next * buf.len() as u64;
            l.saturating_sub(done).min(buf.len() as u64) as usize
        });
        let got = match self.src.as_mut() {
            Some(f) => match read_up_to(f, &mut buf[..want]) {
                Ok(n) => n,
                Err(_) => {
                    self.src = None;
                    0
                }
            },
            None => 0,
        };
        self.next += 1;
        let h = header.pack();
        let mut msg = Vec::with_capacity(4 + h.len() + got);
        msg.extend_from_slice(&(h.len() as u32).to_be_bytes());
        msg.extend_from_slice(&h);
        msg.extend_from_slice(&buf[..got]);
        Ok(msg)
    }
}

/// Read until `buf` is full or the file ends; the bytes read.
fn read_up_to(f: &mut fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A file arriving from another process, piece by piece.
struct Incoming {
    file: String,
    real: RealPath,
    /// The file being written; `None` once writing it failed (its later
    /// pieces are dropped).
    out: Option<fs::File>,
}

/// Take one piece sent by process `from`: the first records the file in
/// this rank's filemap (entry first, then the file: the filemap rule) and
/// creates it; every piece appends its bytes; the last fsyncs it.
fn receive_piece(
    job: &mut Job,
    dset: DatasetId,
    dir_logical: &LogicalPath,
    from: usize,
    msg: &[u8],
    incoming: &mut BTreeMap<usize, Incoming>,
) -> ScrResult<()> {
    let bad = |source: TransferError| ScrError::Transfer {
        dset: Some(dset),
        source,
    };
    let short = || {
        bad(TransferError::Short {
            what: "file",
            len: msg.len(),
        })
    };
    let hlen = msg
        .get(..4)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(short)?;
    let hbytes = msg.get(4..4 + hlen).ok_or_else(short)?;
    let header = KvTree::unpack_exact(hbytes).map_err(|source| {
        bad(TransferError::Unpack {
            what: "file header",
            source,
        })
    })?;
    let file = header
        .val("FILE")
        .ok_or_else(|| bad(TransferError::NoFile))?;
    let data = &msg[4 + hlen..];
    let last = header.get_int("LAST").ok().flatten() == Some(1);
    if header.get_int("PIECE").ok().flatten() == Some(0) {
        incoming.remove(&from);
        let meta = header
            .get("META")
            .map(Meta::from_tree)
            .transpose()?
            .unwrap_or_default();
        let me = job.rank();
        job.filemap.add_file(dset, me, file);
        job.filemap.set_meta(dset, me, file, &meta);
        job.write_filemap()?;
        if header.get_int("PRESENT").ok().flatten() != Some(1) {
            return Ok(());
        }
        let real = job.real(&LogicalPath::new(file));
        let cache_real = job.real(&dir_logical.parent().unwrap_or_else(|| dir_logical.clone()));
        if let Some(parent) = real.parent() {
            dirs::create_private_dirs_below(&cache_real, parent)?;
        }
        assert!(
            job.filemap.list_files(dset, me).iter().any(|f| f == file),
            "restart: {file} is recorded before it is written"
        );
        let out = fs::File::create(&real).map_err(io_err(&real, "create"))?;
        incoming.insert(
            from,
            Incoming {
                file: file.to_owned(),
                real,
                out: Some(out),
            },
        );
    }
    let Some(inc) = incoming.get_mut(&from).filter(|i| i.file == file) else {
        // A piece of a file whose first piece did not arrive or was not
        // present: nothing to write it to.
        return Ok(());
    };
    let written = match inc.out.as_mut() {
        Some(out) => {
            use std::io::Write;
            out.write_all(data)
                .and_then(|()| if last { out.sync_all() } else { Ok(()) })
        }
        None => Ok(()),
    };
    if let Err(e) = written {
        let e = io_err(&inc.real, "write")(e);
        inc.out = None;
        return Err(e);
    }
    if last {
        if inc.out.is_some() {
            crate::fault::synced(&inc.real);
        }
        incoming.remove(&from);
    }
    Ok(())
}

/// Restart in place: scatter filemaps, then distribute, verify and rebuild
/// every cached dataset. Collective.
pub fn rebuild_cache(job: &mut Job) -> ScrResult<InitReport> {
    let mut report = InitReport::default();
    scatter_filemaps(job)?;
    let (in_prefix, mut max_ckpt) = forget_bypass(job)?;
    let mut max_dset = in_prefix.last().map_or(0, |d| d.get());
    report.in_prefix = in_prefix;
    let ids = job.datasets_everywhere()?;
    report.found = ids.clone();
    for dset in ids {
        max_dset = max_dset.max(dset.get());
        if let Some(ckpt) = restart_dataset(job, dset, &mut report)? {
            max_ckpt = max_ckpt.max(ckpt);
        }
    }
    job.dataset_id = job.max(max_dset)?;
    job.checkpoint_id = job.max(max_ckpt)?;
    // Every cached dataset is restored or dropped, and every rank's filemap
    // says so; the node's master filemap comes next. An injected error
    // fails it here (after this rank took its part in the write).
    let injected = crate::fault_point!("rebuild.recorded", rank = job.world.rank() as u32)
        .map_err(|e| ScrError::injected("rebuild.recorded", e));
    let master = job.write_master_filemap();
    job.agree("write the master filemap", injected.and(master))?;
    Ok(report)
}

/// Forget every dataset some rank's filemap tags as in the prefix
/// (bypass): its entries go, its files stay where they are. Returns those
/// datasets, ascending, and the newest checkpoint id among them (ids keep
/// counting past them). Collective.
fn forget_bypass(job: &mut Job) -> ScrResult<(Vec<DatasetId>, i64)> {
    let mut mine: Vec<u8> = Vec::new();
    let mut max_ckpt = 0i64;
    for d in job.filemap.list_datasets() {
        let ranks = job.filemap.list_ranks_by_dataset(d);
        if ranks.iter().any(|&r| job.is_bypass_of(d, r)) {
            mine.extend_from_slice(&d.get().to_be_bytes());
            for r in ranks {
                if let Ok(Some(ds)) = job.filemap.dataset(d, r) {
                    max_ckpt = max_ckpt.max(ds.ckpt.unwrap_or(0));
                }
            }
        }
    }
    let mut ids: Vec<DatasetId> = job
        .world
        .allgather_bytes(&mine)?
        .iter()
        .flat_map(|b| {
            b.chunks_exact(8)
                .map(|c| DatasetId(i64::from_be_bytes(c.try_into().unwrap_or([0; 8]))))
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for &d in &ids {
        job.filemap.remove_dataset(d);
    }
    // `ids` is the same on every rank.
    if !ids.is_empty() {
        job.write_filemap_agreed()?;
    }
    Ok((ids, job.max(max_ckpt)?))
}

/// Distribute, verify and rebuild one cached dataset, recording the outcome
/// in `report`. Returns its checkpoint id when its descriptors survived.
/// Collective.
fn restart_dataset(
    job: &mut Job,
    dset: DatasetId,
    report: &mut InitReport,
) -> ScrResult<Option<i64>> {
    let started = job.clock.now();
    // Kill and delay faults act here (a crash during rebuild at init);
    // an injected error is reported and counts as this rank's files lost.
    let injected_loss = match crate::fault_point!("rebuild.init", rank = job.world.rank() as u32) {
        Ok(()) => false,
        Err(e) => {
            eprintln!("SCR: {}", ScrError::injected("rebuild.init", e));
            true
        }
    };
    let descs = distribute_descriptors(job, dset)?;
    let have = job.world.all_true(descs.is_some())?;
    let Some((ds, rd, files)) = descs.filter(|_| have) else {
        let why = "some rank's descriptors were lost with every copy";
        job.log(Entry::event(EventType::RebuildStart).dset(dset));
        job.log(
            Entry::event(EventType::RebuildFail)
                .dset(dset)
                .secs(job.clock.elapsed(started).as_secs_f64())
                .note(why),
        );
        report.lost.push((dset, why.into()));
        job.delete_dataset(dset)?;
        return Ok(None);
    };
    let name = ds.name.clone().unwrap_or_else(|| dset.default_name());
    let event = |t: EventType| Entry::event(t).dset(dset).name(name.as_str());
    job.log(event(EventType::RebuildStart));
    // COMPLETE=1 is written only once every rank's encode succeeded (at
    // complete, or at settle for a background encode, `super::protect`), so
    // one rank's record saying so is enough; a dataset no rank records as
    // complete was never protected, and a restart never uses it, even when
    // its files look whole (their CRC32s may never have been computed).
    if !job.world.any_true(ds.complete != Some(false))? {
        let why = "not protected: its redundancy encode never finished";
        job.log(
            event(EventType::RebuildFail)
                .secs(job.clock.elapsed(started).as_secs_f64())
                .note(why),
        );
        report.lost.push((dset, why.into()));
        job.delete_dataset(dset)?;
        return Ok(ds.ckpt);
    }
    let ckpt = ds.ckpt.unwrap_or(0);
    if let Some(e) = written_by_other_rank_count(job, dset, &rd)? {
        job.log(
            event(EventType::RebuildFail)
                .secs(job.clock.elapsed(started).as_secs_f64())
                .note(format!("kept, not used: {e}")),
        );
        report.skipped.push((dset, e.to_string()));
        return Ok(Some(ckpt));
    }
    let me = job.rank();
    job.filemap.set_dataset(dset, me, &ds);
    job.filemap.set_desc(dset, me, &rd);
    if let Some(n) = files {
        job.filemap.set_expected_files(dset, me, n);
    }
    let dir_logical = job.dataset_dir(&LogicalPath::new(&rd.directory), dset);
    report.moved_files += distribute_files(job, dset, &dir_logical)?;
    // Each surviving byte is read once: sizes first; when nothing is
    // missing anywhere a whole check reads every file (and rebuilds what it
    // finds damaged); otherwise each set's rebuild reads its survivors'
    // CRC32s in its own pass (`Checked::Sizes`).
    let has_record = files.is_some() && !injected_loss;
    let mut check = check_files(job, dset, Depth::SIZE);
    let mut loss = check.loss(has_record);
    let mut any_lost = job.world.any_true(loss.any())?;
    let mut checked = Checked::Sizes;
    if !any_lost {
        check = check_files(job, dset, Depth::FULL);
        loss = check.loss(has_record);
        any_lost = job.world.any_true(loss.any())?;
        checked = Checked::All;
    }
    let mut outcome: Result<(), RebuildError> = Ok(());
    if any_lost {
        outcome = rebuild_dataset(job, dset, &ds, &rd, loss, checked);
    }
    let secs = job.clock.elapsed(started).as_secs_f64();
    if job.world.all_true(outcome.is_ok())? {
        let note = if any_lost { "rebuilt" } else { "intact" };
        job.log(event(EventType::RebuildSuccess).secs(secs).note(note));
        if any_lost {
            report.rebuilt.push(dset);
        }
        report.available.push(dset);
        job.write_filemap_agreed()?;
        return Ok(Some(ckpt));
    }
    let mine = match (&outcome, check.problem()) {
        (Err(e), _) => e.to_string(),
        (Ok(()), Some(p)) => p.to_string(),
        _ => String::new(),
    };
    let why = first_reason(job, &mine)?;
    job.log(event(EventType::RebuildFail).secs(secs).note(why.as_str()));
    report.lost.push((dset, why));
    job.delete_dataset(dset)?;
    Ok(Some(ckpt))
}

/// The error when dataset `dset` was written by a different number of ranks
/// than this run has (printed once, on rank 0); such a dataset is kept but
/// not used. Collective.
fn written_by_other_rank_count(
    job: &Job,
    dset: DatasetId,
    rd: &RedDesc,
) -> ScrResult<Option<ScrError>> {
    let written = rd.world_ranks.map_or(-1, |w| w as i64);
    let running = job.world.size() as i64;
    if job.world.all_true(written == running)? {
        return Ok(None);
    }
    let e = ScrError::RankCountMismatch {
        id: dset,
        written: written.max(0) as u64,
        running: running as u64,
    };
    if job.rank().is_root() {
        eprintln!("SCR: {e}");
    }
    Ok(Some(e))
}

/// The first rank's reason a dataset could not be restored, as every rank
/// sees it (`mine` is empty on a rank with nothing to say). Collective.
fn first_reason(job: &Job, mine: &str) -> ScrResult<String> {
    let reasons = job.world.allgather_bytes(mine.as_bytes())?;
    Ok(reasons
        .iter()
        .enumerate()
        .find(|(_, r)| !r.is_empty())
        .map(|(i, r)| format!("rank {i}: {}", String::from_utf8_lossy(r)))
        .unwrap_or_else(|| "rebuild failed".into()))
}

/// Remove everything this job has in cache on this node (SCR_DISTRIBUTE=0
/// or SCR_CACHE_PURGE): every dataset listed in this node's filemaps.
/// Collective; an error on any rank is an error on every rank.
pub fn purge_cache(job: &mut Job) -> ScrResult<()> {
    scatter_filemaps(job)?;
    let mut local = Ok(());
    for d in job.filemap.list_datasets() {
        local = job.delete_dataset_local(d);
        if local.is_err() {
            break;
        }
    }
    let master = job.write_master_filemap();
    job.agree("purge the cache", local.and(master))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(real: &Path, pieces_of: usize) -> Outgoing {
        let len = fs::metadata(real).ok().map(|m| m.len());
        Outgoing {
            rank: Rank(3),
            file: "/cache/ckpt.1/r3".into(),
            real: RealPath::new(real.to_path_buf()),
            len,
            pieces: len.map_or(1, |l| l.div_ceil(pieces_of as u64).max(1)),
            next: 0,
            src: None,
        }
    }

    /// Each message of a move carries at most one piece of the file, the
    /// pieces in order make the file, and only the last says so; a missing
    /// file is one message that says it is not present.
    #[test]
    fn a_file_moves_in_messages_of_at_most_one_piece() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("r3");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        fs::write(&real, &bytes).unwrap();
        let mut o = outgoing(&real, 4096);
        assert_eq!(o.pieces, 3);
        let mut buf = vec![0u8; 4096];
        let (mut got, mut lasts) = (Vec::new(), Vec::new());
        while o.next < o.pieces {
            let msg = o
                .next_piece(|_| Ok(Some(Meta::default())), &mut buf)
                .unwrap();
            let hlen = u32::from_be_bytes(msg[..4].try_into().unwrap()) as usize;
            let h = KvTree::unpack_exact(&msg[4..4 + hlen]).unwrap();
            let data = &msg[4 + hlen..];
            assert!(data.len() <= 4096, "{} bytes in one message", data.len());
            lasts.push(h.get_int("LAST").unwrap() == Some(1));
            assert_eq!(h.get("META").is_some(), got.is_empty());
            got.extend_from_slice(data);
        }
        assert_eq!(got, bytes);
        assert_eq!(lasts, [false, false, true]);
        let mut gone = outgoing(&t.path().join("missing"), 4096);
        assert_eq!(gone.pieces, 1);
        let msg = gone.next_piece(|_| Ok(None), &mut buf).unwrap();
        let hlen = u32::from_be_bytes(msg[..4].try_into().unwrap()) as usize;
        let h = KvTree::unpack_exact(&msg[4..4 + hlen]).unwrap();
        assert_eq!(h.get_int("PRESENT").unwrap(), Some(0));
        assert_eq!(msg.len(), 4 + hlen);
    }
}
