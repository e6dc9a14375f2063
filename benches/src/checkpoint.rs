//! Checkpoint to cache, per redundancy scheme, as a ratio to a raw
//! write+fsync of the same bytes measured in the same run; and restart with
//! one node lost against reading the dataset once.
//!
//! [`RANKS`] ranks on as many simulated nodes (`n0`…, node-local storage
//! under one directory, /dev/shm in the benchmarks); each rank writes one
//! file of SIZE bytes. Timed for SCR: Start_output → route_file →
//! write+fsync → Complete_output (which computes each file's CRC32 and
//! applies the scheme). Timed raw: the same write+fsync into the same file
//! system. The slowest rank sets each time (a checkpoint is done when every
//! rank is). Ratio = raw / SCR, so 1.0 means SCR costs nothing beyond the
//! write itself.
//!
//! Beside it, the floor measured in the same repetition: what any
//! implementation that records a CRC32 of every file and stores the
//! scheme's redundancy bytes on the same storage must at least do — read
//! the file once (its CRC32 through scr's `crc_of_file`) and write+fsync the redundancy
//! bytes (PARTNER: SIZE; XOR: SIZE/(N−1); RS: k·SIZE/(N−k)). "best ratio"
//! = raw / (raw + floor) is the ratio such an implementation could reach if
//! reading, encoding and communicating cost nothing more.
//!
//! On simulated nodes of one machine the bytes that cross between nodes are
//! copied by the same cores (a real cluster's network adapter moves them
//! without the CPU), and the scheme's arithmetic runs on them too. So a
//! second floor adds, measured in the same repetition, what any
//! implementation of the scheme must also do there: move the fewest bytes
//! the scheme needs between members through the same communicator (ring
//! sendrecvs of SCR_MPI_BUF_SIZE pieces; [`transfer_bytes`]) and do its
//! fewest XOR / GF(2^8) multiply-adds on bytes in memory
//! ([`arithmetic_bytes`]). "best with transfer" = raw / (raw + read + write
//! + transfer + arithmetic).
//!
//! `<SCHEME>+async` sets SCR_ENCODE_ASYNC=1: "SCR checkpoint" is then the
//! time the application is blocked (Start_output to Complete_output's
//! return) and "until protected" the time until every rank's background
//! encode finished and the checkpoint is recorded complete
//! (`Scr::wait_protection`). For those rows a third table gives the cost to
//! the application: a compute loop's time while the background encode runs,
//! against the same loop alone.
//!
//! `SINGLE+writer` is SINGLE with the application writing through
//! `OutputPhase::route_writer`, which computes the CRC32 as the bytes go
//! out: Complete_output then does not read the file, so its floor (the
//! read) does not apply to it.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use scr::comm::{Comm, ReduceOp};
use scr::config::MapEnv;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

/// Ranks (and simulated nodes) of the benchmark.
pub const RANKS: usize = 4;

/// Parity members per RS set (SCR_SET_FAILURES).
pub const RS_K: usize = 2;

/// What to run, from the environment: `BENCH_SIZES_MIB` (default
/// "64,256"), `BENCH_REPS` (3), `BENCH_SCHEMES`
/// ("SINGLE,SINGLE+writer,PARTNER,XOR,RS"; `+writer` on any scheme writes
/// through `route_writer`),
/// `BENCH_RESTART_MIB` (64; 0 skips the restart table), `BENCH_PHASES` (set: print rank 0's phase
/// times to stderr); `BENCH_WARM=0` skips writing each repetition's
/// footprint first ([`crate::warm::footprint`]).
#[derive(Debug, Clone)]
pub struct Params {
    /// Bytes per rank of each checkpoint table row, in MiB.
    pub sizes_mib: Vec<usize>,
    /// Repetitions (after one warm-up); each time is the median.
    pub reps: usize,
    /// Schemes (SCR_COPY_TYPE values).
    pub schemes: Vec<String>,
    /// Bytes per rank of the restart table, in MiB.
    pub restart_mib: usize,
    /// Print rank 0's phase times.
    pub phases: bool,
    /// Ranks sharing one process (the thread communicator: all of them;
    /// MPI: 1), to turn the process's peak RSS into a per-rank figure.
    pub ranks_per_process: usize,
}

impl Params {
    /// From the process environment (see the type's documentation).
    pub fn from_env() -> Params {
        let var = |k: &str| std::env::var(k).ok();
        Params {
            sizes_mib: var("BENCH_SIZES_MIB")
                .unwrap_or_else(|| "64,256".into())
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect(),
            reps: var("BENCH_REPS")
                .and_then(|s| s.parse().ok())
                .unwrap_or(3)
                .max(1),
            schemes: var("BENCH_SCHEMES")
                .unwrap_or_else(|| "SINGLE,SINGLE+writer,PARTNER,XOR,RS".into())
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            restart_mib: var("BENCH_RESTART_MIB")
                .and_then(|s| s.parse().ok())
                .unwrap_or(64),
            phases: std::env::var_os("BENCH_PHASES").is_some(),
            ranks_per_process: 1,
        }
    }
}

/// The pieces the schemes move and compute in: SCR_MPI_BUF_SIZE from the
/// environment (which [`init`] passes on to SCR), else SCR's default.
pub fn piece_bytes() -> usize {
    std::env::var("SCR_MPI_BUF_SIZE")
        .ok()
        .and_then(|v| scr::units::parse_bytes(&v))
        .map_or(scr::redundancy::xor::DEFAULT_PIECE_BYTES, |b| b as usize)
        .max(1)
}

/// A fresh world communicator for each SCR_Init (the thread communicator
/// splits its world, MPI duplicates MPI_COMM_WORLD).
pub type WorldFn<'a> = &'a dyn Fn() -> Box<dyn Comm>;

/// Redundancy bytes a member of a set of [`RANKS`] stores for `size` bytes
/// of its own under `scheme` (headers aside).
pub fn redundancy_bytes(scheme: &str, size: usize) -> usize {
    let n = RANKS;
    match scheme {
        "PARTNER" => size,
        "XOR" => size.div_ceil(n - 1),
        "RS" => RS_K * size.div_ceil(n - RS_K),
        _ => 0,
    }
}

/// Bytes a member of a set of [`RANKS`] must send to other members to
/// encode `size` bytes of its own under `scheme`, at the least:
/// - PARTNER: its whole data (the copy);
/// - XOR: each parity chunk (SIZE/(N−1)) combines N−1 members' chunks, and
///   none of them is on the chunk's holder, so N−1 chunk transfers per
///   stripe (chained or not), N stripes over N members: SIZE each;
/// - RS with k parity rows: a chain of the N−k data members of a stripe
///   that forwards, after j contributions, min(j, k) pieces (the raw data
///   while there are fewer than k, then the k partial rows), and delivers k
///   rows to the k holders (none of them holds data of the stripe):
///   Σ_{j=1}^{N−k−1} min(j, k) + k chunks of SIZE/(N−k) per stripe.
pub fn transfer_bytes(scheme: &str, size: usize) -> usize {
    let n = RANKS;
    match scheme {
        "PARTNER" => size,
        "XOR" => size.div_ceil(n - 1) * (n - 1),
        "RS" => {
            let chunks: usize = (1..n - RS_K).map(|j| j.min(RS_K)).sum::<usize>() + RS_K;
            size.div_ceil(n - RS_K) * chunks
        }
        _ => 0,
    }
}

/// Bytes a member's share of `scheme`'s arithmetic runs over, at the
/// least: XOR combines N−1 chunks into each parity chunk (N−2 XORs of a
/// chunk per stripe: (N−2)·SIZE/(N−1) per member); RS computes k rows from
/// N−k data chunks per stripe (k·(N−k) multiply-adds of a chunk: k·SIZE per
/// member). [`arithmetic`] runs them.
pub fn arithmetic_bytes(scheme: &str, size: usize) -> usize {
    let n = RANKS;
    match scheme {
        "XOR" => size.div_ceil(n - 1) * (n - 2),
        "RS" => RS_K * size,
        _ => 0,
    }
}

/// The scheme's fewest arithmetic passes over `data` into a piece-sized
/// accumulator (XOR: [`scr::redundancy::gf256::xor_into`]; RS: the fastest
/// multiply-add kernel with a coefficient other than 0 and 1).
fn arithmetic(scheme: &str, data: &[u8], piece: usize, acc: &mut [u8]) {
    let mut left = arithmetic_bytes(scheme, data.len());
    let kernel = scr::redundancy::gf256::Kernel::best();
    let mut off = 0;
    while left > 0 {
        let len = left.min(piece).min(data.len() - off);
        let src = &data[off..off + len];
        match scheme {
            "XOR" => scr::redundancy::gf256::xor_into(&mut acc[..len], src),
            _ => kernel.mul_add_into(&mut acc[..len], src, 0x53),
        }
        left -= len;
        off = (off + len) % data.len();
    }
    std::hint::black_box(acc);
}

/// Sends `bytes` to the right neighbour while receiving as many from the
/// left, in `piece`-byte sendrecvs (every member at once, as in the
/// schemes' rings).
fn transfer(comm: &dyn Comm, data: &[u8], bytes: usize, piece: usize, inc: &mut Vec<u8>) {
    let (n, me) = (comm.size(), comm.rank());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let mut off = 0;
    while off < bytes {
        let len = (bytes - off).min(piece);
        let at = off % data.len();
        let len = len.min(data.len() - at);
        comm.sendrecv_bytes(Some((right, &data[at..at + len])), Some(left), inc)
            .expect("sendrecv");
        off += len;
    }
}

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
    comm.allreduce_f64(&mut s, ReduceOp::Max)
        .expect("allreduce");
    s[0]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn init(
    world: WorldFn,
    prefix: &Path,
    node_root: &Path,
    node: usize,
    vars: &[(&str, String)],
) -> Scr {
    let mut all: Vec<(String, String)> = vec![
        ("SCR_PREFIX".into(), prefix.to_string_lossy().into_owned()),
        ("USER".into(), "bench".into()),
        ("SCR_SET_FAILURES".into(), RS_K.to_string()),
    ];
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    // Other SCR parameters (e.g. SCR_MPI_BUF_SIZE) pass through from the
    // process environment, so a run can vary them.
    for (k, v) in std::env::vars() {
        if k.starts_with("SCR_") && !all.iter().any(|(a, _)| *a == k) {
            all.push((k, v));
        }
    }
    let opts = InitOptions {
        env: Some(Box::new(MapEnv::new(all).with_cwd(prefix))),
        node: Some(NodeIdentity {
            name: format!("n{node}"),
            root: Some(node_root.join(format!("n{node}"))),
        }),
        ..InitOptions::default()
    };
    Scr::init_with(world(), opts).expect("init")
}

/// Medians of one checkpoint table row (slowest rank of each repetition).
#[derive(Debug, Clone, Copy)]
pub struct CkptRow {
    /// Raw write+fsync of the file.
    pub raw_s: f64,
    /// SCR checkpoint of the same bytes.
    pub scr_s: f64,
    /// CRC32 of the written file through scr's `crc_of_file` (reading it once).
    pub read_s: f64,
    /// Raw write+fsync of the scheme's redundancy bytes.
    pub red_write_s: f64,
    /// Moving [`transfer_bytes`] through the communicator.
    pub transfer_s: f64,
    /// The scheme's [`arithmetic`] on bytes in memory.
    pub arith_s: f64,
    /// `+async` rows (SCR_ENCODE_ASYNC=1): from Start_output until the
    /// checkpoint is protected on every rank (`scr_s` is then the time the
    /// application was blocked: Start_output to Complete_output's return).
    pub protected_s: Option<f64>,
}

impl CkptRow {
    /// raw / SCR.
    pub fn ratio(&self) -> f64 {
        self.raw_s / self.scr_s
    }

    /// raw / (raw + read once + redundancy write).
    pub fn best_ratio(&self) -> f64 {
        self.raw_s / (self.raw_s + self.read_s + self.red_write_s)
    }

    /// raw / (raw + read once + redundancy write + transfer + arithmetic).
    pub fn best_ratio_moving(&self) -> f64 {
        self.raw_s / (self.raw_s + self.read_s + self.red_write_s + self.transfer_s + self.arith_s)
    }
}

/// One checkpoint row: `reps` checkpoints of `size` bytes per rank with
/// `scheme`, each beside a raw write and the floor's parts. Collective.
pub fn checkpoint_row(
    comm: &dyn Comm,
    world: WorldFn,
    root: &Path,
    scheme: &str,
    size: usize,
    p: &Params,
) -> CkptRow {
    let rank = comm.rank();
    // `<SCHEME>+writer`: the application writes through
    // `OutputPhase::route_writer`, which CRCs the bytes as they go out.
    // `<SCHEME>+async`: SCR_ENCODE_ASYNC=1, protected in the background.
    let (scheme_w, asynchronous) = match scheme.strip_suffix("+async") {
        Some(s) => (s, true),
        None => (scheme, false),
    };
    let (copy_type, writer) = match scheme_w.strip_suffix("+writer") {
        Some(s) => (s, true),
        None => (scheme_w, false),
    };
    let prefix = root.join(format!("prefix-{scheme}"));
    std::fs::create_dir_all(&prefix).expect("prefix");
    let data: Vec<u8> = (0..size)
        .map(|i| ((i as u64 * 2654435761) ^ rank as u64) as u8)
        .collect();
    let raw_dir = root.join(format!("n{rank}/dev/shm/raw"));
    std::fs::create_dir_all(&raw_dir).expect("raw dir");
    let vars = [
        ("SCR_JOB_ID", format!("bench-{copy_type}")),
        ("SCR_COPY_TYPE", copy_type.to_string()),
        ("SCR_CACHE_SIZE", (p.reps + 2).to_string()),
        ("SCR_ENCODE_ASYNC", u8::from(asynchronous).to_string()),
    ];
    let mut scr = init(world, &prefix, root, rank, &vars);
    let red = redundancy_bytes(copy_type, size).min(size);
    let moved = transfer_bytes(copy_type, size);
    let piece = piece_bytes();
    let (mut acc, mut inc) = (vec![0u8; piece], Vec::with_capacity(piece));
    let (mut raw, mut ours, mut read, mut red_write) = (vec![], vec![], vec![], vec![]);
    let (mut transferred, mut arith, mut protected) = (vec![], vec![], vec![]);
    // Repetition 0 warms up (first-touch page allocation, page tables of
    // fresh buffers, the dataset directories) and is not counted.
    for rep in 0..=p.reps {
        if rep == 1 {
            for v in [
                &mut raw,
                &mut ours,
                &mut read,
                &mut red_write,
                &mut transferred,
                &mut arith,
                &mut protected,
            ] {
                v.clear();
            }
        }
        // The raw write, the floor's redundancy write and SCR's files of
        // this repetition all take pages freed a moment ago (`warm`): the
        // raw files' pages otherwise went to SCR's dataset of the
        // repetition, and the next raw write took pages the host had taken
        // back, three times slower to write on a new machine.
        crate::warm::footprint(&raw_dir, 2 * (size + red) as u64);
        let raw_path = raw_dir.join(format!("rank{rank}.{rep}"));
        raw.push(timed(comm, || write_fsync(&raw_path, &data)));
        read.push(timed(comm, || {
            std::hint::black_box(scr::storage::verify::crc_of_file(&raw_path).expect("crc"));
        }));
        let red_path = raw_dir.join(format!("rank{rank}.{rep}.red"));
        red_write.push(if red > 0 {
            timed(comm, || write_fsync(&red_path, &data[..red]))
        } else {
            0.0
        });
        let _ = std::fs::remove_file(&red_path);
        std::fs::remove_file(&raw_path).expect("remove raw");
        transferred.push(if moved > 0 {
            timed(comm, || transfer(comm, &data, moved, piece, &mut inc))
        } else {
            0.0
        });
        arith.push(timed(comm, || {
            arithmetic(copy_type, &data, piece, &mut acc)
        }));
        let name = format!("bench.{rep}");
        let file = prefix.join(format!("rank{rank}.ckpt"));
        let scr = &mut scr;
        let mut blocked = 0.0;
        let to_protected = timed(comm, || {
            let t0 = Instant::now();
            let mut out = scr
                .start_output(Some(&name), Flags::CHECKPOINT)
                .expect("start");
            let t1 = Instant::now();
            if writer {
                let mut w = out.route_writer(&file).expect("route");
                w.write_all(&data).expect("write");
                w.sync_all().expect("fsync");
                out.close_writer(w).expect("close");
            } else {
                let path = out.route_file(&file).expect("route");
                write_fsync(&path, &data);
            }
            let t2 = Instant::now();
            assert!(out.complete(true).expect("complete"), "checkpoint valid");
            blocked = t0.elapsed().as_secs_f64();
            if asynchronous {
                assert!(scr.wait_protection().expect("wait"), "protected");
            }
            if p.phases && rank == 0 {
                eprintln!(
                    "rank 0 {scheme} {} MiB: start {:.1} ms, route+write {:.1} ms, complete {:.1} ms",
                    size >> 20,
                    (t1 - t0).as_secs_f64() * 1e3,
                    (t2 - t1).as_secs_f64() * 1e3,
                    t2.elapsed().as_secs_f64() * 1e3
                );
            }
        });
        let mut b = [blocked];
        comm.allreduce_f64(&mut b, ReduceOp::Max)
            .expect("allreduce");
        ours.push(b[0]);
        protected.push(to_protected);
    }
    scr.finalize().expect("finalize");
    CkptRow {
        raw_s: median(raw),
        scr_s: median(ours),
        read_s: median(read),
        red_write_s: median(red_write),
        transfer_s: median(transferred),
        arith_s: median(arith),
        protected_s: asynchronous.then(|| median(protected)),
    }
}

/// Restart with one node lost: write one checkpoint with `scheme` on nodes
/// n0…, remove node n1's tree, and time SCR_Init on the survivors plus a
/// spare n[`RANKS`] (the distribute and rebuild) against reading the whole
/// dataset once, and against reading every byte the nodes cache for it
/// once. Collective.
pub fn restart_one_node_lost(
    comm: &dyn Comm,
    world: WorldFn,
    root: &Path,
    scheme: &str,
    size: usize,
) -> RestartTimes {
    let rank = comm.rank();
    let prefix = root.join("prefix");
    std::fs::create_dir_all(&prefix).expect("prefix");
    let vars = [
        ("SCR_JOB_ID", "bench-restart".to_string()),
        ("SCR_COPY_TYPE", scheme.to_string()),
    ];
    let data: Vec<u8> = (0..size)
        .map(|i| ((i as u64 * 40503) ^ rank as u64) as u8)
        .collect();
    let mut scr = init(world, &prefix, root, rank, &vars);
    let mut out = scr
        .start_output(Some("c"), Flags::CHECKPOINT)
        .expect("start");
    let file = out
        .route_file(prefix.join(format!("rank{rank}.ckpt")))
        .expect("route");
    write_fsync(&file, &data);
    assert!(out.complete(true).expect("complete"));
    scr.finalize().expect("finalize");
    drop(data);
    // Reading the dataset once (every rank its own file, page cache warm as
    // it is for SCR too).
    let read_s = timed(comm, || {
        std::hint::black_box(std::fs::read(&file).expect("read"));
    });
    // Reading every byte the node caches for the dataset once: its files
    // and the redundancy data it holds (what a restart that checks every
    // surviving byte must read on each survivor).
    let cached_s = timed(comm, || {
        std::hint::black_box(read_tree(&root.join(format!("n{rank}"))));
    });
    // The floor of a rebuild: the spare writes every byte the lost node
    // held (its files and its redundancy data), nothing else.
    let lost_bytes = vec![
        7u8;
        if rank == 1 {
            size + redundancy_bytes(scheme, size)
        } else {
            0
        }
    ];
    let floor_file = root.join("floor.bin");
    let floor_s = timed(comm, || {
        if rank == 1 {
            write_fsync(&floor_file, &lost_bytes);
        }
    });
    drop(lost_bytes);
    comm.barrier().expect("barrier");
    if rank == 1 {
        std::fs::remove_file(&floor_file).expect("remove the floor's file");
    }
    if rank == 0 {
        std::fs::remove_dir_all(root.join("n1")).expect("kill n1");
    }
    comm.barrier().expect("barrier");
    let node = if rank == 1 { RANKS } else { rank };
    let mut scr = None;
    let rebuild_s = timed(comm, || scr = Some(init(world, &prefix, root, node, &vars)));
    let scr = scr.expect("initialised");
    assert_eq!(
        scr.init_report().rebuilt,
        vec![scr::ids::DatasetId(1)],
        "rebuilt the checkpoint"
    );
    scr.finalize().expect("finalize");
    RestartTimes {
        rebuild_s,
        read_s,
        cached_s,
        floor_s,
    }
}

/// The times of one restart with one node lost (the slowest rank's).
#[derive(Debug, Clone, Copy)]
pub struct RestartTimes {
    /// SCR_Init on the survivors and the spare (distribute and rebuild).
    pub rebuild_s: f64,
    /// Every rank reads its own file once.
    pub read_s: f64,
    /// Every rank reads every file its node caches (the dataset's files and
    /// redundancy data, SCR's metadata) once, through one 1 MiB buffer.
    pub cached_s: f64,
    /// The spare only writes every byte the lost node held.
    pub floor_s: f64,
}

/// Reads every regular file below `dir` once through one 1 MiB buffer;
/// returns the bytes read.
fn read_tree(dir: &Path) -> u64 {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read a cache directory") {
            let path = entry.expect("a directory entry").path();
            let kind = std::fs::symlink_metadata(&path).expect("stat").file_type();
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() {
                let mut f = std::fs::File::open(&path).expect("open a cached file");
                loop {
                    let n = f.read(&mut buf).expect("read a cached file");
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
            }
        }
    }
    total
}

/// Every table of the benchmark, run on `comm` (collective); rank 0 prints
/// them to stdout as Markdown. `root` is a directory every rank sees (the
/// simulated nodes' trees go below it) and `label` names the communicator.
pub fn run_all(comm: &dyn Comm, world: WorldFn, root: &Path, p: &Params, label: &str) {
    assert_eq!(comm.size(), RANKS, "the benchmark runs on {RANKS} ranks");
    let rank0 = comm.rank() == 0;
    let say = |line: String| {
        if rank0 {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
    };
    say(format!(
        "Checkpoint to cache, {RANKS} ranks on {RANKS} simulated nodes, {label}, median of {}:",
        p.reps
    ));
    say(String::new());
    say("| size per rank | scheme | raw write+fsync (s) | SCR checkpoint (s) | ratio raw/SCR | floor: read once + write redundancy (s) | best possible ratio | until protected (s) | raw / until protected | transfer + arithmetic (s) | best with transfer | SCR / best with transfer |".into());
    say("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |".into());
    for &mib in &p.sizes_mib {
        for scheme in &p.schemes {
            let dir = root.join(format!("{scheme}-{mib}"));
            let r = checkpoint_row(comm, world, &dir, scheme, mib << 20, p);
            let (until, until_ratio) = match r.protected_s {
                Some(t) => (format!("{t:.3}"), format!("{:.2}", r.raw_s / t)),
                None => ("=".into(), "=".into()),
            };
            say(format!(
                "| {mib} MiB | {scheme} | {:.3} | {:.3} | {:.2} | {:.3} + {:.3} | {:.2} | {until} | {until_ratio} | {:.3} + {:.3} | {:.2} | {:.2} |",
                r.raw_s,
                r.scr_s,
                r.ratio(),
                r.read_s,
                r.red_write_s,
                r.best_ratio(),
                r.transfer_s,
                r.arith_s,
                r.best_ratio_moving(),
                r.ratio() / r.best_ratio_moving()
            ));
            cleanup(comm, &dir);
        }
    }
    let asynchronous: Vec<&String> = p.schemes.iter().filter(|s| s.ends_with("+async")).collect();
    if !asynchronous.is_empty() {
        let mib = p.sizes_mib[0];
        say(String::new());
        say(format!("Cost to the application: a compute loop ({COMPUTE_ROUNDS} xorshift rounds per rank) right after Complete_output returned, {mib} MiB per rank, median of {}:", p.reps));
        say(String::new());
        say(
            "| scheme | compute alone (s) | compute during the background encode (s) | slowdown |"
                .into(),
        );
        say("| --- | --- | --- | --- |".into());
        for scheme in asynchronous {
            let dir = root.join(format!("cost-{scheme}"));
            let (alone, during) = compute_slowdown(comm, world, &dir, scheme, mib << 20, p);
            say(format!(
                "| {scheme} | {alone:.3} | {during:.3} | {:.2}× |",
                during / alone
            ));
            cleanup(comm, &dir);
        }
    }
    if p.restart_mib > 0 {
        restart_table(comm, world, root, p, &say);
    }
    let Some(&mib) = p.sizes_mib.iter().max() else {
        return;
    };
    let per = p.ranks_per_process.max(1) as f64 * 1024.0;
    say(String::new());
    say(format!(
        "Peak RSS (VmHWM) per rank, {mib} MiB per rank, {} rank(s) per process (process peak / ranks):",
        p.ranks_per_process.max(1)
    ));
    say(String::new());
    say("| scheme | app write+fsync only (MiB) | SCR checkpoint (MiB) | SCR / app | extra per rank (MiB) |".into());
    say("| --- | --- | --- | --- | --- |".into());
    for scheme in p.schemes.iter().filter(|s| !s.ends_with("+writer")) {
        let dir = root.join(format!("rss-{scheme}"));
        let (raw, ours) = peak_rss_row(comm, world, &dir, scheme, mib << 20);
        say(format!(
            "| {scheme} | {:.1} | {:.1} | {:.2} | {:.1} |",
            raw as f64 / per,
            ours as f64 / per,
            ours as f64 / raw.max(1) as f64,
            (ours as f64 - raw as f64) / per
        ));
        cleanup(comm, &dir);
    }
}

/// The restart table: one node lost, per scheme that can rebuild.
fn restart_table(comm: &dyn Comm, world: WorldFn, root: &Path, p: &Params, say: &dyn Fn(String)) {
    say(String::new());
    say(String::new());
    say(format!("Restart with one node lost, median of {} (each ratio is the median of each repetition's; \"read files once\": every rank reads its own file; \"read cache once\": every rank reads every byte its node caches for the dataset, files and redundancy data; floor: the spare only writes every byte the lost node held, files and redundancy data; \"rebuild / I/O floor\": against read cache once + that write, the bytes a rebuild that checks every surviving byte must read and write at least, before any transfer or arithmetic):", p.reps));
    say(String::new());
    say("| size per rank | scheme | SCR_Init with one node lost (s) | read files once (s) | rebuild / read files | read cache once (s) | rebuild / read cache | floor: write the lost bytes (s) | floor / read files | rebuild / I/O floor |".into());
    say("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |".into());
    let restartable = |s: &&String| !s.starts_with("SINGLE") && !s.contains('+');
    for scheme in p.schemes.iter().filter(restartable) {
        let dir = root.join(format!("restart-{scheme}"));
        let mut t: [Vec<f64>; 8] = Default::default();
        for _ in 0..p.reps {
            let r = restart_one_node_lost(comm, world, &dir, scheme, p.restart_mib << 20);
            cleanup(comm, &dir);
            let row = [
                r.rebuild_s,
                r.read_s,
                r.rebuild_s / r.read_s,
                r.cached_s,
                r.rebuild_s / r.cached_s,
                r.floor_s,
                r.floor_s / r.read_s,
                r.rebuild_s / (r.cached_s + r.floor_s),
            ];
            for (v, x) in t.iter_mut().zip(row) {
                v.push(x);
            }
        }
        let [rebuild, read, ratio, cached, cached_ratio, floor, floor_ratio, io_ratio] =
            t.map(median);
        say(format!(
            "| {} MiB | {scheme} | {rebuild:.3} | {read:.3} | {ratio:.2} | {cached:.3} | {cached_ratio:.2} | {floor:.3} | {floor_ratio:.2} | {io_ratio:.2} |",
            p.restart_mib,
        ));
    }
}

/// Resets the process's peak resident set (VmHWM) to its current RSS
/// (Linux: "5" into /proc/self/clear_refs). The scale benchmark uses it too.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident set (VmHWM) in KiB (0 where /proc has none).
pub fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Peak RSS of a process while its ranks write `size` bytes each and
/// fsync (the application alone), then while they take one SCR checkpoint
/// of the same bytes with `scheme`: (raw KiB, SCR KiB), each the largest
/// over the processes, reset to the current RSS right before. The
/// application's buffer is allocated and touched before either, so both
/// figures include it. Collective.
pub fn peak_rss_row(
    comm: &dyn Comm,
    world: WorldFn,
    root: &Path,
    scheme: &str,
    size: usize,
) -> (u64, u64) {
    let rank = comm.rank();
    let prefix = root.join(format!("prefix-{scheme}"));
    std::fs::create_dir_all(&prefix).expect("prefix");
    let raw_dir = root.join(format!("n{rank}/dev/shm/raw"));
    std::fs::create_dir_all(&raw_dir).expect("raw dir");
    let data: Vec<u8> = (0..size)
        .map(|i| ((i as u64 * 2654435761) ^ rank as u64) as u8)
        .collect();
    let (copy_type, asynchronous) = match scheme.strip_suffix("+async") {
        Some(s) => (s, true),
        None => (scheme, false),
    };
    let vars = [
        ("SCR_JOB_ID", format!("bench-rss-{scheme}")),
        ("SCR_COPY_TYPE", copy_type.to_string()),
        ("SCR_ENCODE_ASYNC", u8::from(asynchronous).to_string()),
    ];
    let mut scr = init(world, &prefix, root, rank, &vars);
    let peak_of = |comm: &dyn Comm, f: &mut dyn FnMut()| {
        comm.barrier().expect("barrier");
        if rank == 0 {
            reset_peak();
        }
        comm.barrier().expect("barrier");
        f();
        comm.barrier().expect("barrier");
        let mut v = [peak_kib() as f64];
        comm.allreduce_f64(&mut v, ReduceOp::Max)
            .expect("allreduce");
        v[0] as u64
    };
    let raw_path = raw_dir.join(format!("rank{rank}.rss"));
    let raw = peak_of(comm, &mut || write_fsync(&raw_path, &data));
    std::fs::remove_file(&raw_path).expect("remove raw");
    let file = prefix.join(format!("rank{rank}.ckpt"));
    let ours = peak_of(comm, &mut || {
        let mut out = scr
            .start_output(Some("rss"), Flags::CHECKPOINT)
            .expect("start");
        let path = out.route_file(&file).expect("route");
        write_fsync(&path, &data);
        assert!(out.complete(true).expect("complete"), "checkpoint valid");
        // The background encode's memory counts too.
        if asynchronous {
            assert!(scr.wait_protection().expect("wait"), "protected");
        }
    });
    scr.finalize().expect("finalize");
    (raw, ours)
}

/// A compute kernel that touches little memory: `n` rounds of xorshift.
fn compute(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Rounds of [`compute`] in one measurement (about 0.1–0.3 s per rank
/// here).
const COMPUTE_ROUNDS: u64 = 200_000_000;

/// The cost of a background encode to the application (`+async` schemes):
/// medians over `reps` of a compute loop on every rank right after
/// Complete_output returned (the encode running beside it) and of the same
/// loop with nothing in the background. Returns (alone s, during s), each
/// the slowest rank's. Collective.
pub fn compute_slowdown(
    comm: &dyn Comm,
    world: WorldFn,
    root: &Path,
    scheme: &str,
    size: usize,
    p: &Params,
) -> (f64, f64) {
    let rank = comm.rank();
    let copy_type = scheme.strip_suffix("+async").unwrap_or(scheme);
    let prefix = root.join(format!("prefix-{scheme}"));
    std::fs::create_dir_all(&prefix).expect("prefix");
    let data: Vec<u8> = (0..size).map(|i| (i as u64 ^ rank as u64) as u8).collect();
    let vars = [
        ("SCR_JOB_ID", format!("bench-cost-{copy_type}")),
        ("SCR_COPY_TYPE", copy_type.to_string()),
        ("SCR_CACHE_SIZE", "2".to_string()),
        ("SCR_ENCODE_ASYNC", "1".to_string()),
    ];
    let mut scr = init(world, &prefix, root, rank, &vars);
    let (mut alone, mut during) = (vec![], vec![]);
    for rep in 0..=p.reps {
        let a = timed(comm, || {
            std::hint::black_box(compute(COMPUTE_ROUNDS));
        });
        let mut out = scr
            .start_output(Some(&format!("cost.{rep}")), Flags::CHECKPOINT)
            .expect("start");
        let path = out
            .route_file(prefix.join(format!("rank{rank}.ckpt")))
            .expect("route");
        write_fsync(&path, &data);
        assert!(out.complete(true).expect("complete"));
        let d = timed(comm, || {
            std::hint::black_box(compute(COMPUTE_ROUNDS));
        });
        scr.wait_protection().expect("wait");
        if rep > 0 {
            alone.push(a);
            during.push(d);
        }
    }
    scr.finalize().expect("finalize");
    (median(alone), median(during))
}

/// Remove a row's directory once every rank is done with it.
fn cleanup(comm: &dyn Comm, dir: &Path) {
    comm.barrier().expect("barrier");
    if comm.rank() == 0 {
        let _ = std::fs::remove_dir_all(dir);
    }
    comm.barrier().expect("barrier");
}
