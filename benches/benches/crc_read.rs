//! What SINGLE's CRC32 costs next to the write on this machine: the floor
//! under issue 17's SINGLE targets.
//!
//! [`THREADS`] threads (as the checkpoint benchmark's ranks) each write and
//! fsync one file of SIZE bytes under `BENCH_DIR` (default /dev/shm), then
//! compute its CRC32 three ways: scr's own `crc_of_file` (reads through one
//! 256 KiB buffer), populated 16 MiB mapped windows (what `crc_of_file` did
//! until 2026-11-25), and — for the CRC alone — `crc32fast` over the same
//! bytes already in memory. The time of the
//! slowest thread counts; each figure is the median of `BENCH_REPS` (5).
//! "SINGLE's floor" = write / (write + CRC): the best ratio to a raw write
//! a checkpoint that CRCs every file after the application wrote it can
//! reach, whatever the implementation.
//!
//! `cargo bench -p benches --bench crc_read` (`BENCH_SIZES_MIB`, default
//! "64,256").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const THREADS: usize = 4;

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().parse().expect("a number"))
        .collect()
}

/// The slowest of `THREADS` threads running `f(thread)`, in seconds.
fn slowest(f: impl Fn(usize) + Sync) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for k in 0..THREADS {
            let f = &f;
            s.spawn(move || f(k));
        }
    });
    t0.elapsed().as_secs_f64()
}

fn write_fsync(path: &Path, data: &[u8]) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(data).expect("write");
    f.sync_all().expect("fsync");
}

/// Mapped windows of this many bytes.
const WINDOW: u64 = 16 << 20;

/// CRC32 of the file through populated mapped windows of [`WINDOW`] bytes,
/// each unmapped before the next.
fn crc_mapped(path: &Path) -> u32 {
    let f = std::fs::File::open(path).expect("open");
    let len = f.metadata().expect("stat").len();
    let mut h = crc32fast::Hasher::new();
    let mut off = 0;
    while off < len {
        let n = WINDOW.min(len - off);
        // SAFETY: the benchmark's own file; nothing truncates it while mapped.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(off)
                .len(n as usize)
                .populate()
                .map(&f)
        }
        .expect("map a window");
        h.update(&map);
        off += n;
    }
    h.finalize()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let base = PathBuf::from(std::env::var("BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into()));
    let dir = tempfile::Builder::new()
        .prefix("scr-crc-read")
        .tempdir_in(&base)
        .expect("a directory under BENCH_DIR");
    let reps = env_list("BENCH_REPS", "5")[0].max(1);
    println!(
        "{THREADS} threads, one file each under {}, median of {reps}:\n",
        base.display()
    );
    println!("| size per thread | write+fsync (s) | CRC, scr's crc_of_file: 256 KiB reads (s) | CRC, 16 MiB mapped windows (s) | CRC of the bytes in memory (s) | SINGLE's floor: write / (write + CRC) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for mib in env_list("BENCH_SIZES_MIB", "64,256") {
        let data: Vec<u8> = (0..mib << 20).map(|i| (i * 31 + 7) as u8).collect();
        let path = |k: usize| dir.path().join(format!("t{k}"));
        let (mut w, mut buffered, mut mapped, mut mem) = (vec![], vec![], vec![], vec![]);
        // Repetition 0 warms up and is not counted.
        for rep in 0..=reps {
            let times = [
                slowest(|k| write_fsync(&path(k), &data)),
                slowest(|k| {
                    std::hint::black_box(scr::storage::verify::crc_of_file(&path(k)).expect("crc"));
                }),
                slowest(|k| {
                    std::hint::black_box(crc_mapped(&path(k)));
                }),
                slowest(|_| {
                    std::hint::black_box(crc32fast::hash(&data));
                }),
            ];
            for k in 0..THREADS {
                std::fs::remove_file(path(k)).expect("remove");
            }
            if rep > 0 {
                for (v, t) in [&mut w, &mut buffered, &mut mapped, &mut mem]
                    .into_iter()
                    .zip(times)
                {
                    v.push(t);
                }
            }
        }
        let [w, buffered, mapped, mem] = [w, buffered, mapped, mem].map(median);
        let best = mapped.min(buffered);
        println!(
            "| {mib} MiB | {w:.3} | {buffered:.3} | {mapped:.3} | {mem:.3} | {:.2} |",
            w / (w + best)
        );
    }
}
