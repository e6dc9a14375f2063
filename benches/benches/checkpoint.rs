//! Checkpoint to cache, per redundancy scheme, as a ratio to a raw
//! write+fsync of the same bytes measured in the same run.
//!
//! 4 ranks (threads, the in-process communicator) on 4 simulated nodes whose
//! node-local storage is /dev/shm; each rank writes one file of SIZE bytes.
//! Timed for SCR: Start_output → route_file → write+fsync → Complete_output
//! (which computes each file's CRC32 and applies the scheme). Timed raw: the
//! same write+fsync into the same file system. The slowest rank sets each
//! time (a checkpoint is done when every rank is). Ratio = raw / SCR, so 1.0
//! means SCR costs nothing beyond the write itself.
//!
//! Run: `cargo bench -p benches --bench checkpoint` (env `BENCH_SIZES_MIB`,
//! default "64,256"; `BENCH_REPS`, default 3; `BENCH_SCHEMES`, default
//! "SINGLE,PARTNER,XOR,RS").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use scr::comm::thread::ThreadComm;
use scr::comm::Comm;
use scr::config::MapEnv;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

const RANKS: usize = 4;

fn write_fsync(path: &Path, data: &[u8]) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(data).expect("write");
    f.sync_all().expect("fsync");
}

/// Slowest rank's seconds for `f`, started together at a barrier.
fn timed(comm: &dyn Comm, f: impl FnOnce()) -> f64 {
    comm.barrier().expect("barrier");
    let t = Instant::now();
    f();
    let mut s = [t.elapsed().as_secs_f64()];
    comm.allreduce_f64(&mut s, scr::comm::ReduceOp::Max)
        .expect("allreduce");
    s[0]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run_scheme(root: &Path, scheme: &str, size: usize, reps: usize) -> (f64, f64) {
    let prefix = root.join(format!("prefix-{scheme}"));
    std::fs::create_dir_all(&prefix).expect("prefix");
    let times = ThreadComm::run(RANKS, |comm| {
        let rank = comm.rank();
        let data: Vec<u8> = (0..size)
            .map(|i| ((i as u64 * 2654435761) ^ rank as u64) as u8)
            .collect();
        let node_root = root.join(format!("n{rank}"));
        let raw_dir = node_root.join("dev/shm/raw");
        std::fs::create_dir_all(&raw_dir).expect("raw dir");
        let vars = [
            ("SCR_PREFIX", prefix.to_string_lossy().into_owned()),
            ("SCR_JOB_ID", format!("bench-{scheme}")),
            ("USER", "bench".into()),
            ("SCR_COPY_TYPE", scheme.into()),
            ("SCR_SET_FAILURES", "2".into()),
            ("SCR_CACHE_SIZE", (reps + 1).to_string()),
        ];
        let opts = InitOptions {
            env: Some(Box::new(MapEnv::new(vars).with_cwd(&prefix))),
            node: Some(NodeIdentity {
                name: format!("n{rank}"),
                root: Some(node_root.clone()),
            }),
            ..InitOptions::default()
        };
        let world = comm
            .split(Some(0), rank as i64)
            .expect("split")
            .expect("world");
        let mut scr = Scr::init_with(world, opts).expect("init");
        let mut raw = Vec::new();
        let mut ours = Vec::new();
        for rep in 0..reps {
            let raw_path = raw_dir.join(format!("rank{rank}.{rep}"));
            raw.push(timed(comm, || write_fsync(&raw_path, &data)));
            std::fs::remove_file(&raw_path).expect("remove raw");
            let name = format!("bench.{rep}");
            let file = prefix.join(format!("rank{rank}.ckpt"));
            let scr = &mut scr;
            ours.push(timed(comm, || {
                let t0 = Instant::now();
                let mut out = scr
                    .start_output(Some(&name), Flags::CHECKPOINT)
                    .expect("start");
                let t1 = Instant::now();
                let p = out.route_file(&file).expect("route");
                write_fsync(&p, &data);
                let t2 = Instant::now();
                assert!(out.complete(true).expect("complete"), "checkpoint valid");
                if std::env::var_os("BENCH_PHASES").is_some() && rank == 0 {
                    eprintln!(
                        "rank 0 phases: start {:.1} ms, route+write {:.1} ms, complete {:.1} ms",
                        (t1 - t0).as_secs_f64() * 1e3,
                        (t2 - t1).as_secs_f64() * 1e3,
                        t2.elapsed().as_secs_f64() * 1e3
                    );
                }
            }));
        }
        scr.finalize().expect("finalize");
        (median(raw), median(ours))
    })
    .expect("bench ranks");
    times[0]
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
    let schemes = std::env::var("BENCH_SCHEMES").unwrap_or_else(|_| "SINGLE,PARTNER,XOR,RS".into());
    let base = PathBuf::from("/dev/shm");
    let root = tempfile::Builder::new()
        .prefix("scr-bench-")
        .tempdir_in(&base)
        .expect("tempdir in /dev/shm");
    println!(
        "| size per rank | scheme | raw write+fsync (s) | SCR checkpoint (s) | ratio raw/SCR |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for size_mib in sizes {
        for scheme in schemes.split(',').map(str::trim) {
            let dir = root.path().join(format!("{scheme}-{size_mib}"));
            let (raw, ours) = run_scheme(&dir, scheme, size_mib << 20, reps);
            println!(
                "| {size_mib} MiB | {scheme} | {raw:.3} | {ours:.3} | {:.2} |",
                raw / ours
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
