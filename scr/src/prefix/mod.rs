//! The prefix tier: flush datasets from cache to the prefix directory on
//! the parallel file system (synchronously or in the background), fetch a
//! checkpoint back into cache when the cache holds nothing usable, and keep
//! the index and flush file that record where every dataset is (developer
//! guide: "Fetch, flush, and scavenge", "Index file", "Summary file",
//! "Rank2file map", "Flush file"; program flow of scr_flush_sync and
//! scr_fetch_sync). The layout is in docs/formats.md, "The prefix
//! directory", and [`layout`].

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::beneath::{self, How};
use crate::cache::Job;
use crate::clock::{SharedClock, Tick};
use crate::comm::Comm;
use crate::durable;
use crate::error::io_err;
use crate::error::ScrResult;
use crate::records::attrs::FileAttrs;
use crate::records::flush::{FlushFile, FLUSH_FILE};
use crate::records::index::index_path;
use crate::records::{Index, Record};
use crate::storage::attrs as storage_attrs;

pub mod bypass;
pub mod container;
pub mod fetch;
pub mod flush;
pub mod layout;
pub(crate) mod watchdog;

pub use crate::error::{CopyError, FetchError, FlushError, PrefixError, RankFilesError};

/// `<prefix>/.scr/flush.scr`.
pub fn flush_file_path(prefix: &Path) -> PathBuf {
    prefix.join(layout::META_DIR).join(FLUSH_FILE)
}

/// Whether SCR's metadata file `path` below `prefix` exists, asked
/// without following a link below the prefix ([`crate::beneath::exists_in`]).
pub(crate) fn meta_exists(prefix: &Path, path: &Path) -> crate::error::ScrResult<bool> {
    crate::beneath::exists_in(prefix, path).map_err(crate::error::io_err(path, "look up"))
}

/// Run `f` on rank 0 and make its success everyone's answer: `Ok` on every
/// rank only if rank 0's `f` succeeded. Other ranks learn the failure as a
/// [`PrefixError::Rank0`] naming `what`.
pub(crate) fn on_rank0<T>(
    world: &dyn Comm,
    what: &'static str,
    f: impl FnOnce() -> ScrResult<T>,
) -> ScrResult<Option<T>> {
    let r = if world.rank() == 0 { Some(f()) } else { None };
    let ok = !matches!(&r, Some(Err(_)));
    let all = world.all_true(ok)?;
    match r {
        Some(Err(e)) => Err(e),
        Some(Ok(v)) => Ok(Some(v)),
        None if all => Ok(None),
        None => Err(PrefixError::Rank0(what).into()),
    }
}

/// Read–modify–write the flush file (rank 0 only; callers make it
/// collective with [`on_rank0`]).
pub(crate) fn update_flush_file<R>(
    prefix: &Path,
    f: impl FnOnce(&mut FlushFile) -> R,
) -> ScrResult<R> {
    let path = flush_file_path(prefix);
    ensure_meta_dir(prefix)?;
    Ok(FlushFile::update_file_in(prefix, &path, f)?)
}

/// Read–modify–write the index (rank 0 only).
pub(crate) fn update_index<R>(prefix: &Path, f: impl FnOnce(&mut Index) -> R) -> ScrResult<R> {
    ensure_meta_dir(prefix)?;
    Ok(Index::update_file_in(prefix, index_path(prefix), f)?)
}

/// Write `<prefix>/.scr/nodes.scr` with `NODES = nodes` (rank 0, at every
/// SCR_Init, as LLNL SCR 3.1 does).
pub(crate) fn write_nodes_file(prefix: &Path, nodes: u64) -> ScrResult<()> {
    ensure_meta_dir(prefix)?;
    let path = prefix
        .join(layout::META_DIR)
        .join(crate::records::nodes::NODES_FILE);
    crate::records::Nodes { nodes }.write_file_in(prefix, &path)?;
    Ok(())
}

fn ensure_meta_dir(prefix: &Path) -> ScrResult<()> {
    let d = prefix.join(layout::META_DIR);
    beneath::create_dir_all_in(prefix, &d).map_err(io_err(&d, "create directory"))
}

/// One file to copy between cache and prefix.
#[derive(Debug, Clone)]
pub(crate) struct CopyItem {
    /// Real source path.
    pub src: PathBuf,
    /// Real destination path.
    pub dst: PathBuf,
    /// The rank2file key.
    pub rel: String,
    /// Size recorded for the file, checked after the copy.
    pub size: Option<u64>,
    /// CRC32 recorded for the file, compared with the copy's when both are
    /// known.
    pub crc: Option<u32>,
    /// Attributes recorded for the file (a fetch with SCR_COPY_METADATA),
    /// given to the copy.
    pub attrs: Option<FileAttrs>,
    /// SCR_USE_CONTAINERS: the prefix side of the copy is these container
    /// segments instead of `dst` (flush) or `src` (fetch).
    pub packing: Option<container::Packing>,
    /// The prefix directory: the prefix side of the copy (`dst` of a
    /// flush, `src` of a fetch, container files) must stay inside it
    /// without passing through a symbolic link ([`beneath`]). `None` only
    /// for copies with no prefix side (tests).
    pub within: Option<PathBuf>,
}

/// What a copy checks and carries besides the bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CopyChecks {
    /// CRC32 of the bytes read, compared with the item's recorded CRC.
    pub crc: bool,
    /// SCR_CRC_ON_COPY: read the copy back after its fsync and compare its
    /// CRC32 with the source's (implies `crc`).
    pub read_back: bool,
    /// SCR_COPY_METADATA: record the source's attributes (when the item
    /// has none) and give them to the copy.
    pub attrs: bool,
    /// SCR_FILE_BUF_SIZE: bytes read and written at a time; 0 for
    /// [`CHUNK`].
    pub buf_bytes: usize,
}

impl CopyChecks {
    /// The checks of a copy between cache and prefix under `settings`
    /// (`crc`: whether this direction computes CRC32 at all).
    pub(crate) fn of(settings: &crate::config::Settings, crc: bool) -> CopyChecks {
        let read_back = settings.redundancy.crc_on_copy;
        CopyChecks {
            crc: crc || read_back,
            read_back,
            attrs: settings.flush.copy_metadata,
            buf_bytes: buf_bytes(settings.cache.file_buf_bytes),
        }
    }

    /// The copy buffer's length: [`CopyChecks::buf_bytes`], else [`CHUNK`].
    pub(crate) fn buf_len(&self) -> usize {
        if self.buf_bytes == 0 {
            CHUNK
        } else {
            self.buf_bytes
        }
    }
}

/// A copy buffer of SCR_FILE_BUF_SIZE bytes, at least one (a value
/// beyond the address space is the largest there is).
pub fn buf_bytes(setting: u64) -> usize {
    usize::try_from(setting.max(1)).unwrap_or(usize::MAX)
}

/// Pacing of a background copy: at most `bw` bytes a second and a CPU
/// share of `percent` (SCR_FLUSH_ASYNC_BW, SCR_FLUSH_ASYNC_PERCENT; 0 or
/// 100 means no CPU limit).
#[derive(Debug, Clone)]
pub(crate) struct Throttle {
    /// Bytes per second; `None` for no limit.
    pub bw: Option<f64>,
    /// CPU share in percent.
    pub percent: f64,
    /// The clock the pace is measured and slept on (the job's).
    pub clock: SharedClock,
}

/// What happened to one copied file.
#[derive(Debug, Clone)]
pub(crate) struct Copied {
    pub rel: String,
    pub size: u64,
    pub crc: u32,
    /// The attributes given to the copy (SCR_COPY_METADATA).
    pub attrs: Option<FileAttrs>,
    /// The container segments written (flush with containers).
    pub segments: Vec<crate::records::Segment>,
}

/// Chunk size of prefix copies when SCR_FILE_BUF_SIZE does not say
/// (its table default is the same).
pub(crate) const CHUNK: usize = 4 << 20;

pub(crate) fn io_fail(op: &'static str, p: &Path, source: std::io::Error) -> CopyError {
    match beneath::into_refusal(source) {
        Ok(refused) => CopyError::Beneath(refused),
        Err(source) => CopyError::Io {
            path: p.to_path_buf(),
            op,
            source,
        },
    }
}

/// Copy one file, computing its CRC32 on the way when the checks ask, and
/// fsync it; then, as the checks ask, read the copy back and give it the
/// source's attributes. The parent directory of `dst` is created. With
/// containers ([`CopyItem::packing`]) the prefix side is the file's
/// segments.
pub(crate) fn copy_file(
    item: &CopyItem,
    checks: CopyChecks,
    throttle: Option<(&Throttle, &mut Pace)>,
    watch: Option<&watchdog::Progress>,
    buf: &mut Vec<u8>,
) -> Result<Copied, CopyError> {
    if let Some(base) = &item.within {
        let segs = match &item.packing {
            Some(container::Packing::Into(s) | container::Packing::From(s)) => s.as_slice(),
            None => &[],
        };
        let paths = [&item.src, &item.dst]
            .into_iter()
            .chain(segs.iter().map(|s| &s.path));
        for p in paths.filter(|p| p.starts_with(base)) {
            beneath::check(base, p)?;
        }
    }
    // Every read and write of this copy goes through `buf` whole.
    buf.resize(checks.buf_len(), 0);
    // Before the first read: reading moves the source's atime.
    let attrs = match (checks.attrs, item.attrs, &item.packing) {
        // A fetch from containers has no source file to stat.
        (true, None, Some(container::Packing::From(_))) => None,
        // From the source opened as the copy opens it (through handles
        // below the prefix, never through a link): a name swapped for a
        // link meanwhile cannot lend the copy another file's attributes.
        (true, None, _) => {
            let f = item
                .open(&item.src, How::Read)
                .map_err(|e| io_fail("open to read attributes", &item.src, e))?;
            Some(storage_attrs::of_file(&f).map_err(|e| io_fail("stat", &item.src, e))?)
        }
        (true, a, _) => a,
        (false, _, _) => None,
    };
    let crc = checks.crc || checks.read_back;
    let mut pace = throttle;
    let (total, got) = match &item.packing {
        Some(container::Packing::Into(segs)) => {
            let mut src = item
                .open(&item.src, How::Read)
                .map_err(|e| io_fail("open", &item.src, e))?;
            let within = item.within.as_deref();
            container::write_segments(within, &item.src, &mut src, segs, buf, watch, |n, busy| {
                if let Some((th, p)) = pace.as_mut() {
                    p.after(th, n, busy);
                }
            })?
        }
        Some(container::Packing::From(segs)) => {
            let mut dst = item
                .open(&item.dst, How::Create)
                .map_err(|e| io_fail("create", &item.dst, e))?;
            let mut h = crc32fast::Hasher::new();
            let total = container::read_segments(item.within.as_deref(), segs, buf, watch, |b| {
                h.update(b);
                dst.write_all(b).map_err(|e| io_fail("write", &item.dst, e))
            })?;
            dst.sync_all().map_err(|e| io_fail("fsync", &item.dst, e))?;
            crate::fault::synced(&item.dst);
            (total, h.finalize())
        }
        None => plain_copy(item, crc, &mut pace, watch, buf)?,
    };
    check_recorded(item, total, crc.then_some(got))?;
    // The copy is on disk: a fault here stands for damage on the way to
    // the device (or after), which only the read-back can see.
    crate::fault_point!("copy.file.written").map_err(|e| CopyError::Injected(e.into()))?;
    let written: Vec<crate::records::Segment> = match &item.packing {
        Some(container::Packing::Into(segs)) => {
            if checks.read_back {
                let mut h = crc32fast::Hasher::new();
                container::read_segments(item.within.as_deref(), segs, buf, watch, |b| {
                    h.update(b);
                    Ok(())
                })?;
                let back = h.finalize();
                if back != got {
                    let path = segs.first().map(|s| s.path.clone()).unwrap_or_default();
                    return Err(CopyError::ReadBack {
                        path,
                        got: back,
                        want: got,
                    });
                }
            }
            segs.iter().map(|s| s.seg.clone()).collect()
        }
        _ => {
            if checks.read_back {
                read_back(item, got, buf, watch)?;
            }
            if let Some(a) = &attrs {
                // On the open file: a name swapped meanwhile for a link
                // cannot pass the attributes on to another file.
                let f = item
                    .open(&item.dst, How::Read)
                    .map_err(|e| io_fail("open to set attributes", &item.dst, e))?;
                storage_attrs::apply_file(&f, a)
                    .map_err(|e| io_fail("set attributes", &item.dst, e))?;
            }
            Vec::new()
        }
    };
    Ok(Copied {
        rel: item.rel.clone(),
        size: total,
        crc: if crc { got } else { item.crc.unwrap_or(got) },
        attrs,
        segments: written,
    })
}

impl CopyItem {
    /// Open `path`, this copy's source or destination, as `how` says
    /// (`How::Create` makes its parent directories too). On the prefix side
    /// ([`CopyItem::within`]) every component is opened relative to the one
    /// before and never through a link (`beneath::open_in`); on the cache
    /// side only the last component is checked (`O_NOFOLLOW`).
    fn open(&self, path: &Path, how: How) -> std::io::Result<fs::File> {
        if let Some(base) = self.within.as_deref().filter(|b| path.starts_with(b)) {
            return beneath::open_in(base, path, how);
        }
        match how {
            How::Read => beneath::open_nofollow(path),
            How::Write => fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path),
            How::Lock => fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path),
            How::Create => {
                if let Some(parent) = path.parent() {
                    durable::create_dir_all(parent)?;
                }
                beneath::create_nofollow(path)
            }
        }
    }
}

/// Copy `item.src` to `item.dst` and fsync it. Returns the bytes copied
/// and their CRC32 (when `crc`).
fn plain_copy(
    item: &CopyItem,
    crc: bool,
    pace: &mut Option<(&Throttle, &mut Pace)>,
    watch: Option<&watchdog::Progress>,
    buf: &mut Vec<u8>,
) -> Result<(u64, u32), CopyError> {
    let mut src = item
        .open(&item.src, How::Read)
        .map_err(|e| io_fail("open", &item.src, e))?;
    let mut dst = item
        .open(&item.dst, How::Create)
        .map_err(|e| io_fail("create", &item.dst, e))?;
    if buf.is_empty() {
        buf.resize(CHUNK, 0);
    }
    let mut h = crc32fast::Hasher::new();
    let mut total = 0u64;
    loop {
        if let Some(w) = watch {
            w.check_cancelled()?;
        }
        let t = pace.as_ref().map(|(_, p)| p.clock.now());
        let n = src.read(buf).map_err(|e| io_fail("read", &item.src, e))?;
        if n == 0 {
            break;
        }
        if crc {
            h.update(&buf[..n]);
        }
        dst.write_all(&buf[..n])
            .map_err(|e| io_fail("write", &item.dst, e))?;
        total += n as u64;
        if let Some(w) = watch {
            w.advance();
        }
        if let (Some((th, p)), Some(t)) = (pace.as_mut(), t) {
            let busy = p.clock.elapsed(t);
            p.after(th, n as u64, busy);
        }
    }
    dst.sync_all().map_err(|e| io_fail("fsync", &item.dst, e))?;
    crate::fault::synced(&item.dst);
    Ok((total, h.finalize()))
}

/// The bytes copied must have the size recorded for `item`, and the CRC32
/// (when one was computed, `crc`) recorded for it.
fn check_recorded(item: &CopyItem, total: u64, crc: Option<u32>) -> Result<(), CopyError> {
    if let Some(s) = item.size.filter(|s| *s != total) {
        return Err(CopyError::Size {
            path: item.src.clone(),
            copied: total,
            recorded: s,
        });
    }
    if let (Some(got), Some(want)) = (crc, item.crc) {
        if got != want {
            return Err(CopyError::Crc {
                path: item.src.clone(),
                got,
                want,
            });
        }
    }
    Ok(())
}

/// SCR_CRC_ON_COPY: the CRC32 of what `dst` holds now must be `want`.
fn read_back(
    item: &CopyItem,
    want: u32,
    buf: &mut [u8],
    watch: Option<&watchdog::Progress>,
) -> Result<(), CopyError> {
    let dst = &item.dst;
    let mut f = item
        .open(dst, How::Read)
        .map_err(|e| io_fail("open to read back", dst, e))?;
    let mut h = crc32fast::Hasher::new();
    loop {
        let n = f.read(buf).map_err(|e| io_fail("read back", dst, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        if let Some(w) = watch {
            w.advance();
        }
    }
    let got = h.finalize();
    if got != want {
        return Err(CopyError::ReadBack {
            path: dst.to_path_buf(),
            got,
            want,
        });
    }
    Ok(())
}

/// Running totals of a paced copy.
#[derive(Debug)]
pub(crate) struct Pace {
    clock: SharedClock,
    start: Tick,
    bytes: u64,
}

impl Pace {
    /// A pace starting now on `clock`.
    fn new(clock: &SharedClock) -> Pace {
        Pace {
            clock: clock.clone(),
            start: clock.now(),
            bytes: 0,
        }
    }

    /// Account `n` bytes that took `busy`, then sleep as the throttle asks.
    fn after(&mut self, th: &Throttle, n: u64, busy: Duration) {
        self.bytes += n;
        let mut sleep = Duration::ZERO;
        if th.percent > 0.0 && th.percent < 100.0 {
            sleep = busy.mul_f64(100.0 / th.percent - 1.0);
        }
        if let Some(bw) = th.bw.filter(|b| *b > 0.0) {
            let due = Duration::from_secs_f64(self.bytes as f64 / bw);
            let el = self.clock.elapsed(self.start) + sleep;
            if due > el {
                sleep += due - el;
            }
        }
        if !sleep.is_zero() {
            self.clock.sleep(sleep);
        }
    }
}

/// Copy `items`, calling `after_file` (an injection point) after each;
/// stops at the first failure. `threads` copies run at once
/// (SCR_FLUSH_TYPE=PTHREAD; 1 copies in order), each with its own buffer
/// and an equal share of the throttle's bandwidth; the results are in
/// item order, and the error returned is that of the first item that
/// failed. `watch` (the flush watchdog) sees every chunk and may cancel
/// between them.
pub(crate) fn copy_all(
    items: &[CopyItem],
    checks: CopyChecks,
    throttle: Option<Throttle>,
    watch: Option<&watchdog::Progress>,
    threads: usize,
    after_file: impl Fn() -> Result<(), CopyError> + Sync,
) -> Result<Vec<Copied>, CopyError> {
    let threads = threads.clamp(1, items.len().max(1));
    let out = if threads == 1 {
        let mut buf = Vec::new();
        let mut pace = throttle.as_ref().map(|t| Pace::new(&t.clock));
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let th = throttle.as_ref().zip(pace.as_mut());
            out.push(copy_file(it, checks, th, watch, &mut buf)?);
            after_file()?;
            if let Some(w) = watch {
                w.advance();
            }
        }
        out
    } else {
        copy_parallel(items, checks, throttle, watch, threads, &after_file)?
    };
    // The copies' names, durable before anything records them (a packed
    // copy has no file of its own: its containers' directory was synced
    // when they were created).
    let plain = items
        .iter()
        .filter(|i| !matches!(i.packing, Some(container::Packing::Into(_))))
        .map(|i| i.dst.as_path());
    durable::sync_parents(plain).map_err(|(d, e)| io_fail("fsync directory", &d, e))?;
    Ok(out)
}

/// [`copy_all`]'s copies on `threads` threads (this one and
/// `threads - 1` helpers), each taking the next item not yet started; no
/// item starts once one failed. A helper that cannot be spawned leaves
/// its share to the others.
fn copy_parallel(
    items: &[CopyItem],
    checks: CopyChecks,
    throttle: Option<Throttle>,
    watch: Option<&watchdog::Progress>,
    threads: usize,
    after_file: &(impl Fn() -> Result<(), CopyError> + Sync),
) -> Result<Vec<Copied>, CopyError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<Copied, CopyError>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    let share = throttle.map(|t| Throttle {
        bw: t.bw.map(|b| b / threads as f64),
        ..t
    });
    let work = || {
        let mut buf = Vec::new();
        let mut pace = share.as_ref().map(|t| Pace::new(&t.clock));
        while !failed.load(Ordering::Relaxed) {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(it) = items.get(k) else { break };
            let th = share.as_ref().zip(pace.as_mut());
            let r = copy_file(it, checks, th, watch, &mut buf).and_then(|c| {
                after_file()?;
                Ok(c)
            });
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            if let Some(w) = watch {
                w.advance();
            }
            *slots[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        }
    };
    std::thread::scope(|s| {
        for i in 1..threads {
            // Not spawned: the threads that are take its share.
            let _ = std::thread::Builder::new()
                .name(format!("scr-copy-{i}"))
                .spawn_scoped(s, work);
        }
        work();
    });
    let mut out = Vec::with_capacity(items.len());
    for slot in slots {
        match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(r) => out.push(r?),
            // Items are taken in order and none after a failure, so an
            // item never taken follows a failed one, returned above: this
            // stays an error, never a short success.
            None => return Err(CopyError::Cancelled),
        }
    }
    Ok(out)
}

/// Admit at most `width` ranks at a time into `f` (SCR_FLUSH_WIDTH,
/// SCR_FETCH_WIDTH): rank `r` starts after rank `r - width` finished and
/// passes the turn to rank `r + width`, so the window slides instead of
/// advancing in waves. Every rank passes the turn on, whatever `f` did.
pub(crate) fn windowed<T>(world: &dyn Comm, width: usize, f: impl FnOnce() -> T) -> ScrResult<T> {
    let (r, n) = (world.rank(), world.size());
    let w = width.max(1);
    let mut token = Vec::new();
    if r >= w {
        world.sendrecv_bytes(None, Some(r - w), &mut token)?;
    }
    let out = f();
    if r + w < n {
        world.sendrecv_bytes(Some((r + w, &[1u8][..])), None, &mut token)?;
    }
    Ok(out)
}

/// Remove `dir` and its now-empty parents up to (not including) `stop`,
/// never through a link below `stop`.
pub(crate) fn remove_empty_dirs_up_to(dir: &Path, stop: &Path) {
    let mut d = dir.to_path_buf();
    while d.starts_with(stop) && d != stop {
        if beneath::remove_dir_in(stop, &d).is_err() {
            break;
        }
        if !d.pop() {
            break;
        }
    }
}

/// Which datasets are in the prefix directory (`PFS` in the flush file),
/// as rank 0 read it at init, for every rank.
pub(crate) fn datasets_on_pfs(job: &Job) -> ScrResult<Vec<i64>> {
    let mut buf = Vec::new();
    if job.rank().is_root() {
        let ids: Vec<i64> = match FlushFile::read_file_in(&job.prefix, flush_file_path(&job.prefix))
        {
            Ok(ff) => ff
                .datasets
                .iter()
                .filter(|(_, e)| e.locations.contains(&crate::records::Location::Pfs))
                .map(|(id, _)| *id)
                .collect(),
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => {
                eprintln!("SCR: warning: flush file: {e}");
                Vec::new()
            }
        };
        buf = ids.iter().flat_map(|i| i.to_be_bytes()).collect();
    }
    job.world.bcast_bytes(0, &mut buf)?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// The flush file after init (`scr_flush_file_rebuild`): a dataset is in
/// `CACHE` exactly when it is usable in cache now; a `FLUSHING` left by a
/// run that died during a flush is cleared (that flush never completed);
/// entries with no location left are dropped. Collective.
pub(crate) fn rebuild_flush_file(job: &Job, in_cache: &[i64]) -> ScrResult<()> {
    use crate::records::Location;
    let prefix = job.prefix.clone();
    let cached: Vec<i64> = in_cache.to_vec();
    let r = on_rank0(job.world.as_ref(), "update the flush file", || {
        let path = flush_file_path(&prefix);
        if cached.is_empty() && !meta_exists(&prefix, &path)? {
            return Ok(());
        }
        update_flush_file(&prefix, |ff| {
            let ids: Vec<i64> = ff.datasets.keys().copied().collect();
            for id in ids {
                ff.location_unset(id, Location::Flushing);
                ff.location_unset(id, Location::SyncFlushing);
                if cached.contains(&id) {
                    ff.location_set(id, Location::Cache);
                } else {
                    ff.location_unset(id, Location::Cache);
                }
                if ff.datasets.get(&id).is_some_and(|e| e.locations.is_empty()) {
                    ff.remove(id);
                }
            }
        })
    });
    if let Err(e) = r {
        // The flush file is advisory for the library (the index decides
        // restarts); a damaged one must not stop the run.
        eprintln!("SCR: warning: {e}");
    }
    Ok(())
}

/// Pack a rank's files for a gather.
pub(crate) fn pack_rank_files(rank: i64, files: &crate::records::RankFiles) -> Vec<u8> {
    pack_ranks_files(&BTreeMap::from([(rank, files.clone())]))
}

/// Pack several ranks' files (by rank) for a gather or an exchange.
pub(crate) fn pack_ranks_files(files: &BTreeMap<i64, crate::records::RankFiles>) -> Vec<u8> {
    let m = crate::records::Rank2File {
        ranks: files.keys().next_back().map_or(0, |r| (r + 1) as u64),
        rank: files.clone(),
    };
    m.to_tree().pack()
}

/// Unpack what [`pack_rank_files`] packed.
pub(crate) fn unpack_rank_files(
    bytes: &[u8],
) -> Result<BTreeMap<i64, crate::records::RankFiles>, RankFilesError> {
    let t = crate::kvtree::KvTree::unpack_exact(bytes)?;
    let m = crate::records::Rank2File::from_tree(&t)?;
    Ok(m.rank)
}

#[cfg(test)]
mod copy_tests;
#[cfg(test)]
mod throttle_tests;
