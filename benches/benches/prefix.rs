//! Flush and fetch bandwidth as ratios to a raw copy of the same bytes,
//! and the slowdown of a compute loop beside an asynchronous flush.
//!
//! 4 ranks (threads, the in-process communicator) on 4 simulated nodes
//! whose node-local storage is under /dev/shm; the prefix directory is on
//! `BENCH_PREFIX_BASE` (default /tmp: this machine's disk, standing in for
//! a parallel file system). Each rank writes one file of SIZE bytes.
//!
//! - Flush: the time the library itself records for it (the `FLUSH_SYNC`
//!   transfer in its log: set-up, every rank's copy, rank2file, summary and
//!   index), with SCR_CRC_ON_FLUSH=1 and =0, against a raw copy of the same
//!   files from cache to the prefix's file system (read, write, fsync),
//!   slowest rank, started together. Ratio = raw / flush.
//! - Fetch: every cache wiped, SCR_Init fetches; the `FETCH` transfer's
//!   time against a raw copy of the same files from the prefix into cache.
//! - Async: a fixed compute loop on 2 ranks, timed alone and while a
//!   background flush of the previous checkpoint runs (SCR_FLUSH_ASYNC=1,
//!   no bandwidth limit and at SCR_FLUSH_ASYNC_BW=64 MiB/s).
//!
//! Run: `cargo bench -p benches --bench prefix` (env `BENCH_SIZES_MIB`,
//! default "64,256"; `BENCH_REPS`, default 3; `BENCH_PREFIX_BASE`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use scr::comm::thread::ThreadComm;
use scr::comm::{Comm, ReduceOp};
use scr::config::MapEnv;
use scr::log::parse::read_log;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

const RANKS: usize = 4;

fn timed(comm: &dyn Comm, f: impl FnOnce()) -> f64 {
    comm.barrier().expect("barrier");
    let t = Instant::now();
    f();
    let mut s = [t.elapsed().as_secs_f64()];
    comm.allreduce_f64(&mut s, ReduceOp::Max)
        .expect("allreduce");
    s[0]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Read `src`, write `dst`, fsync: what a flush must at least do.
fn raw_copy(src: &Path, dst: &Path) {
    let mut i = std::fs::File::open(src).expect("open");
    let mut o = std::fs::File::create(dst).expect("create");
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = i.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        o.write_all(&buf[..n]).expect("write");
    }
    o.sync_all().expect("fsync");
}

struct Bench {
    root: PathBuf,
    prefix: PathBuf,
}

impl Bench {
    fn opts(&self, node: usize, vars: &[(&str, String)]) -> InitOptions {
        let mut v: Vec<(String, String)> = vec![
            (
                "SCR_PREFIX".into(),
                self.prefix.to_string_lossy().into_owned(),
            ),
            ("SCR_JOB_ID".into(), "bench-prefix".into()),
            ("USER".into(), "bench".into()),
            ("SCR_COPY_TYPE".into(), "SINGLE".into()),
            ("SCR_LOG_ENABLE".into(), "1".into()),
        ];
        v.extend(vars.iter().map(|(k, x)| (k.to_string(), x.clone())));
        InitOptions {
            env: Some(Box::new(MapEnv::new(v).with_cwd(&self.prefix))),
            node: Some(NodeIdentity {
                name: format!("n{node}"),
                root: Some(self.root.join(format!("n{node}"))),
            }),
            ..InitOptions::default()
        }
    }

    fn init(&self, comm: &dyn Comm, vars: &[(&str, String)]) -> Scr {
        let world = comm
            .split(Some(0), comm.rank() as i64)
            .expect("split")
            .expect("world");
        Scr::init_with(world, self.opts(comm.rank(), vars)).expect("init")
    }

    /// Seconds the log records for the last transfer of type `xfer`.
    fn logged_secs(&self, xfer: &str) -> f64 {
        let log = read_log(&self.prefix.join(".scr/log"), false).expect("log");
        log.records
            .iter()
            .rev()
            .find(|r| r.is_transfer(xfer))
            .and_then(|r| r.entry.secs)
            .unwrap_or_else(|| panic!("no {xfer} in the log"))
    }
}

fn data(size: usize, rank: usize, rep: usize) -> Vec<u8> {
    (0..size)
        .map(|i| ((i as u64).wrapping_mul(2654435761) ^ (rank * 7 + rep) as u64) as u8)
        .collect()
}

/// One checkpoint per rep flushed at complete; returns (raw, flush) medians.
fn flush(b: &Bench, size: usize, reps: usize, crc: bool) -> (f64, f64) {
    let vars = [
        ("SCR_FLUSH", "1".to_string()),
        ("SCR_CRC_ON_FLUSH", u8::from(crc).to_string()),
        ("SCR_CACHE_SIZE", "1".to_string()),
    ];
    let raw_dir = b.prefix.join("raw");
    std::fs::create_dir_all(&raw_dir).expect("raw dir");
    let mut raw = Vec::new();
    let mut ours = Vec::new();
    for rep in 0..reps {
        let src = ThreadComm::run(RANKS, |comm| {
            let rank = comm.rank();
            let mut scr = b.init(comm, &vars);
            let name = format!("flush.{rep}.{crc}");
            let mut out = scr
                .start_output(Some(&name), Flags::CHECKPOINT)
                .expect("start");
            let p = out
                .route_file(b.prefix.join(format!("{name}/rank{rank}")))
                .expect("route");
            std::fs::write(&p, data(size, rank, rep)).expect("write");
            assert!(out.complete(true).expect("complete"));
            scr.finalize().expect("finalize");
            p
        })
        .expect("ranks");
        ours.push(b.logged_secs("FLUSH_SYNC"));
        // The same bytes, raw, from the same cache files (still cached: the
        // store keeps one checkpoint), into a new directory as the flush
        // does. Nothing is deleted until every repetition is done: on this
        // ext4 (mounted with `discard`) a delete makes the next fsync wait
        // for the discard of the freed blocks, which the flush never pays.
        let dir = raw_dir.join(format!("{rep}.{crc}"));
        std::fs::create_dir_all(&dir).expect("raw dir");
        let t = ThreadComm::run(RANKS, |comm| {
            let dst = dir.join(format!("rank{}", comm.rank()));
            timed(comm, || raw_copy(&src[comm.rank()], &dst))
        })
        .expect("raw ranks")[0];
        raw.push(t);
    }
    (median(raw), median(ours))
}

/// Fetch after every cache is wiped; returns (raw, fetch) medians.
fn fetch(b: &Bench, size: usize, reps: usize) -> (f64, f64) {
    let vars = [("SCR_FLUSH", "1".to_string())];
    ThreadComm::run(RANKS, |comm| {
        let rank = comm.rank();
        let mut scr = b.init(comm, &vars);
        let mut out = scr
            .start_output(Some("fetchme"), Flags::CHECKPOINT)
            .expect("start");
        let p = out
            .route_file(b.prefix.join(format!("fetchme/rank{rank}")))
            .expect("route");
        std::fs::write(&p, data(size, rank, 99)).expect("write");
        assert!(out.complete(true).expect("complete"));
        scr.finalize().expect("finalize");
    })
    .expect("write ranks");
    let mut raw = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..reps {
        for n in 0..RANKS {
            let _ = std::fs::remove_dir_all(b.root.join(format!("n{n}")));
        }
        ThreadComm::run(RANKS, |comm| {
            let scr = b.init(comm, &vars);
            assert!(scr.init_report().fetched.is_some(), "fetched");
            // Finalize would flush it again only if it were not in the
            // prefix; it is.
            scr.finalize().expect("finalize");
        })
        .expect("fetch ranks");
        ours.push(b.logged_secs("FETCH"));
        let t = ThreadComm::run(RANKS, |comm| {
            let rank = comm.rank();
            let src = b.prefix.join(format!("fetchme/rank{rank}"));
            let dst_dir = b.root.join(format!("n{rank}/dev/shm/raw"));
            std::fs::create_dir_all(&dst_dir).expect("raw dir");
            let dst = dst_dir.join("f");
            timed(comm, || raw_copy(&src, &dst))
        })
        .expect("raw ranks")[0];
        raw.push(t);
    }
    (median(raw), median(ours))
}

/// A fixed amount of CPU work.
fn compute(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x = x.rotate_left(7) ^ i.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    x
}

/// Compute-loop slowdown beside a background flush (2 ranks).
fn async_slowdown(b: &Bench, size: usize, bw: Option<u64>) -> (f64, f64) {
    let mut vars = vec![
        ("SCR_FLUSH", "1".to_string()),
        ("SCR_FLUSH_ASYNC", "1".to_string()),
        ("SCR_CACHE_SIZE", "2".to_string()),
    ];
    vars.push(("SCR_FLUSH_ASYNC_BW", bw.unwrap_or(1 << 40).to_string()));
    let iters = 400_000_000u64;
    let r = ThreadComm::run(2, |comm| {
        let rank = comm.rank();
        let alone = timed(comm, || {
            std::hint::black_box(compute(iters));
        });
        let mut scr = b.init(comm, &vars);
        let mut out = scr
            .start_output(Some("async"), Flags::CHECKPOINT)
            .expect("start");
        let p = out
            .route_file(b.prefix.join(format!("async/rank{rank}")))
            .expect("route");
        std::fs::write(&p, data(size, rank, 7)).expect("write");
        assert!(out.complete(true).expect("complete"));
        // The flush runs in the background now.
        let beside = timed(comm, || {
            std::hint::black_box(compute(iters));
        });
        scr.finalize().expect("finalize");
        (alone, beside)
    })
    .expect("async ranks");
    r[0]
}

fn main() {
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES_MIB")
        .unwrap_or_else(|_| "64,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let reps: usize = std::env::var("BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let base = std::env::var("BENCH_PREFIX_BASE").unwrap_or_else(|_| "/tmp".into());
    println!("| size/rank | op | raw s | scr s | ratio raw/scr | scr MiB/s |");
    println!("|---|---|---|---|---|---|");
    for mib in sizes {
        let size = mib << 20;
        let total_mib = (mib * RANKS) as f64;
        let cache = tempfile::Builder::new()
            .prefix("bench-prefix-nodes-")
            .tempdir_in("/dev/shm")
            .expect("nodes in /dev/shm");
        let pfs = tempfile::Builder::new()
            .prefix("bench-prefix-pfs-")
            .tempdir_in(&base)
            .expect("prefix dir");
        let b = Bench {
            root: cache.path().to_path_buf(),
            prefix: pfs.path().to_path_buf(),
        };
        for crc in [true, false] {
            let (raw, ours) = flush(&b, size, reps, crc);
            let op = if crc { "flush (CRC)" } else { "flush (no CRC)" };
            println!(
                "| {mib} MiB | {op} | {raw:.3} | {ours:.3} | {:.2} | {:.0} |",
                raw / ours,
                total_mib / ours
            );
        }
        let (raw, ours) = fetch(&b, size, reps);
        println!(
            "| {mib} MiB | fetch (CRC) | {raw:.3} | {ours:.3} | {:.2} | {:.0} |",
            raw / ours,
            total_mib / ours
        );
        for bw in [None, Some(64u64 << 20)] {
            // Its own prefix: the 4-rank datasets above are not this 2-rank
            // job's to fetch.
            let prefix = b.prefix.join(format!("async-{}", bw.unwrap_or(0)));
            std::fs::create_dir_all(&prefix).expect("async prefix");
            let ab = Bench {
                root: b.root.join(format!("async-{}", bw.unwrap_or(0))),
                prefix,
            };
            let (alone, beside) = async_slowdown(&ab, size, bw);
            let what = match bw {
                None => "unlimited".to_string(),
                Some(x) => format!("{} MiB/s", x >> 20),
            };
            println!(
                "| {mib} MiB | compute beside async flush ({what}), 2 ranks | {alone:.3} | {beside:.3} | slowdown {:.2} | |",
                beside / alone
            );
        }
    }
}
