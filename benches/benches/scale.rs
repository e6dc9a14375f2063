//! Metadata at scale (issue 17, item 4): SCR_Init, one checkpoint and a
//! restart that rebuilds a lost node, with P thread ranks in one process.
//!
//! P ranks (threads, the in-process communicator) on P/4 simulated nodes
//! whose cache and control directories are under /dev/shm; SCR_COPY_TYPE=XOR,
//! SCR_SET_SIZE=8, SCR_FLUSH=0, one file of 4 KiB per rank.
//!
//! - **init**: SCR_Init of a fresh job (world split + `Scr::init_with`).
//! - **complete**: Start_output, Route_file, the write and Complete (the
//!   XOR encode) of one checkpoint.
//! - **restart**: node 1's directories removed, its four ranks moved to a
//!   spare node; SCR_Init of the new job (it rebuilds the lost node from
//!   XOR parity), then Start_restart, Route_file, a byte check and Complete.
//!
//! Wall time of a phase = last rank's end − first rank's start (all ranks
//! run it at once; the machine's cores are shared by all of them, so
//! wall / P is the CPU cost per rank and the number that should stay flat).
//! Communicator calls and payload bytes per rank come from the thread
//! communicator's counters (`ThreadComm::run_counted`); peak RSS is the
//! process's VmHWM, reset before each job through /proc/self/clear_refs.
//!
//! Output: the table on stdout and, when the run is over, the same table
//! with the 4,096/256 per-rank ratios in `scale-table.md` and the figure
//! (time and bytes per rank against P, log scales, one line per phase;
//! `benches::scale_plot`) in `scale.png`, both in `BENCH_OUT_DIR`
//! (default: the repository's `results/`).
//!
//! Run: `cargo bench -p benches --bench scale` (env `BENCH_RANKS`, default
//! "64,256,1024,4096"; `BENCH_STACK_KIB`, default 256).
//!
//! With `BENCH_SHARED=1` the job writes an N-1 file in bypass mode
//! (SCR_CACHE_BYPASS=1): besides its own file, every rank writes its 4 KiB
//! region of one `shared.dat`, which the complete finds routed by all P
//! ranks (`dataset::shared`). A bypass dataset has no redundancy in cache,
//! so the restart rebuilds nothing: it fetches the checkpoint from the
//! prefix (its "restart init" row is that fetch, the N-1 file going to its
//! owner's cache). Its table and figure are `scale-shared-table.md` and
//! `scale-shared.png`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use benches::checkpoint::{peak_kib, reset_peak};
use benches::scale_plot::{self, Point};
use scr::comm::thread::{CommCounts, CommStats, ThreadComm, ThreadConfig};
use scr::comm::Comm;
use scr::config::MapEnv;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

const RANKS_PER_NODE: usize = 4;
const BYTES_PER_RANK: usize = 4096;

struct Cluster {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    prefix: PathBuf,
    /// `BENCH_SHARED=1`: bypass mode and an N-1 file.
    shared: bool,
}

impl Cluster {
    fn new(shared: bool) -> Cluster {
        let tmp = tempfile::tempdir_in("/dev/shm").expect("tempdir in /dev/shm");
        let root = tmp.path().to_path_buf();
        let prefix = root.join("prefix");
        std::fs::create_dir_all(&prefix).expect("prefix");
        Cluster {
            _tmp: tmp,
            root,
            prefix,
            shared,
        }
    }

    fn opts(&self, node: usize) -> InitOptions {
        let vars: Vec<(String, String)> = [
            ("SCR_PREFIX", self.prefix.to_string_lossy().into_owned()),
            ("SCR_JOB_ID", "scale".into()),
            ("USER", "bench".into()),
            ("SCR_CACHE_BASE", "/dev/shm".into()),
            ("SCR_CNTL_BASE", "/dev/shm".into()),
            ("SCR_FLUSH", "0".into()),
            ("SCR_COPY_TYPE", "XOR".into()),
            ("SCR_SET_SIZE", "8".into()),
            ("SCR_CACHE_BYPASS", u8::from(self.shared).to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        InitOptions {
            env: Some(Box::new(MapEnv::new(vars).with_cwd(&self.prefix))),
            node: Some(NodeIdentity {
                name: format!("n{node}"),
                root: Some(self.root.join(format!("n{node}"))),
            }),
            ..InitOptions::default()
        }
    }
}

fn data(rank: usize) -> Vec<u8> {
    (0..BYTES_PER_RANK)
        .map(|i| (i as u64 ^ (rank as u64).wrapping_mul(2654435761)) as u8)
        .collect()
}

/// What one rank saw: phase boundaries and the counts of its two phases.
struct RankRun {
    start: Instant,
    mid: Instant,
    end: Instant,
    first: CommCounts,
    second: CommCounts,
}

fn init(cl: &Cluster, comm: &dyn Comm, node: usize) -> Scr {
    let world = comm
        .split(Some(0), comm.rank() as i64)
        .expect("split")
        .expect("world");
    Scr::init_with(world, cl.opts(node)).expect("init")
}

/// Init, then one checkpoint; finalize outside the timed phases.
fn checkpoint_job(cl: &Cluster, stats: &CommStats, comm: &dyn Comm) -> RankRun {
    let rank = comm.rank();
    comm.barrier().expect("barrier");
    let c0 = stats.get(rank);
    let start = Instant::now();
    let mut scr = init(cl, comm, rank / RANKS_PER_NODE);
    let mid = Instant::now();
    let c1 = stats.get(rank);
    let mut out = scr
        .start_output(Some("ckpt.1"), Flags::CHECKPOINT)
        .expect("start_output");
    let p = out
        .route_file(cl.prefix.join(format!("ckpt.1/rank{rank}")))
        .expect("route");
    std::fs::write(&p, data(rank)).expect("write");
    if cl.shared {
        use std::os::unix::fs::FileExt;
        let p = out
            .route_file(cl.prefix.join("ckpt.1/shared.dat"))
            .expect("route the shared file");
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .and_then(|f| f.write_all_at(&data(rank), (rank * BYTES_PER_RANK) as u64))
            .expect("write the shared file");
    }
    assert!(out.complete(true).expect("complete"), "checkpoint valid");
    let end = Instant::now();
    let c2 = stats.get(rank);
    scr.finalize().expect("finalize");
    RankRun {
        start,
        mid,
        end,
        first: c1.since(&c0),
        second: c2.since(&c1),
    }
}

/// Init on a job that lost node 1 (rebuild), then read the checkpoint back.
fn restart_job(cl: &Cluster, stats: &CommStats, comm: &dyn Comm, spare: usize) -> RankRun {
    let rank = comm.rank();
    let node = match rank / RANKS_PER_NODE {
        1 => spare,
        n => n,
    };
    comm.barrier().expect("barrier");
    let c0 = stats.get(rank);
    let start = Instant::now();
    let mut scr = init(cl, comm, node);
    let mid = Instant::now();
    let c1 = stats.get(rank);
    // A bypass checkpoint has no redundancy in cache: it is fetched from
    // the prefix, not rebuilt.
    let rebuilt = usize::from(!cl.shared);
    assert_eq!(
        scr.init_report().rebuilt.len(),
        rebuilt,
        "the checkpoint rebuilt"
    );
    assert_eq!(scr.have_restart().expect("have").as_deref(), Some("ckpt.1"));
    let mut r = scr.start_restart().expect("start_restart");
    let p = r
        .route_file(cl.prefix.join(format!("ckpt.1/rank{rank}")))
        .expect("route");
    let ok = std::fs::read(&p).expect("read") == data(rank);
    assert!(ok, "rank {rank}: bytes match");
    assert!(r.complete(ok).expect("complete"));
    let end = Instant::now();
    let c2 = stats.get(rank);
    scr.finalize().expect("finalize");
    RankRun {
        start,
        mid,
        end,
        first: c1.since(&c0),
        second: c2.since(&c1),
    }
}

struct Phase {
    wall: Duration,
    max_calls: u64,
    mean_calls: f64,
    mean_sent: f64,
    mean_received: f64,
    max_received: u64,
}

fn phase(runs: &[RankRun], second: bool) -> Phase {
    let (from, to): (Vec<Instant>, Vec<Instant>) = runs
        .iter()
        .map(|r| {
            if second {
                (r.mid, r.end)
            } else {
                (r.start, r.mid)
            }
        })
        .unzip();
    let wall = to
        .iter()
        .max()
        .expect("ranks")
        .duration_since(*from.iter().min().expect("ranks"));
    let counts: Vec<CommCounts> = runs
        .iter()
        .map(|r| if second { r.second } else { r.first })
        .collect();
    let n = counts.len() as f64;
    Phase {
        wall,
        max_calls: counts.iter().map(|c| c.calls).max().unwrap_or(0),
        mean_calls: counts.iter().map(|c| c.calls as f64).sum::<f64>() / n,
        mean_sent: counts.iter().map(|c| c.bytes_sent as f64).sum::<f64>() / n,
        mean_received: counts.iter().map(|c| c.bytes_received as f64).sum::<f64>() / n,
        max_received: counts.iter().map(|c| c.bytes_received).max().unwrap_or(0),
    }
}

/// The table's header (Markdown).
const HEADER: &str = "| P | phase | wall s | wall/P µs | calls/rank mean (max) | bytes sent/rank | bytes received/rank mean (max) | peak RSS MiB | RSS/rank KiB |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";

/// Print one table row, add it to `table`, and return the figure's point.
fn row(table: &mut String, p: usize, name: &str, ph: &Phase, peak_mib: f64) -> Point {
    let wall_s = ph.wall.as_secs_f64();
    let us_per_rank = wall_s / p as f64 * 1e6;
    let line = format!(
        "| {p} | {name} | {wall_s:.3} | {us_per_rank:.1} | {:.1} (max {}) | {:.0} | {:.0} (max {}) | {peak_mib:.0} | {:.0} |",
        ph.mean_calls,
        ph.max_calls,
        ph.mean_sent,
        ph.mean_received,
        ph.max_received,
        peak_mib * 1024.0 / p as f64,
    );
    println!("{line}");
    table.push_str(&line);
    table.push('\n');
    Point {
        ranks: p,
        phase: name.to_string(),
        us_per_rank,
        bytes_per_rank: ph.mean_sent + ph.mean_received,
    }
}

fn run(p: usize, config: &ThreadConfig, shared: bool, table: &mut String) -> Vec<Point> {
    let cl = Cluster::new(shared);
    let stats = CommStats::new(p);
    reset_peak();
    let t = Instant::now();
    let first = ThreadComm::run_counted(config, &stats, p, |c| checkpoint_job(&cl, &stats, c))
        .expect("checkpoint job");
    let peak1 = peak_kib() as f64 / 1024.0;
    let job1_s = t.elapsed().as_secs_f64();

    std::fs::remove_dir_all(cl.root.join("n1")).expect("kill node 1");
    let stats = CommStats::new(p);
    reset_peak();
    let t = Instant::now();
    let spare = p / RANKS_PER_NODE;
    let second = ThreadComm::run_counted(config, &stats, p, |c| restart_job(&cl, &stats, c, spare))
        .expect("restart job");
    let peak2 = peak_kib() as f64 / 1024.0;
    let job2_s = t.elapsed().as_secs_f64();

    let points = vec![
        row(table, p, "init", &phase(&first, false), peak1),
        row(table, p, "complete", &phase(&first, true), peak1),
        row(
            table,
            p,
            "restart init (rebuild)",
            &phase(&second, false),
            peak2,
        ),
        row(table, p, "restart read", &phase(&second, true), peak2),
    ];
    eprintln!("P={p}: checkpoint job {job1_s:.1} s, restart job {job2_s:.1} s (threads included)");
    points
}

/// The per-rank cost at 4,096 ranks over that at 256, per phase (the
/// issue's target: within 2×), as Markdown; empty unless both were run.
fn ratios(points: &[Point]) -> String {
    let mut out = String::new();
    for name in ["init", "complete", "restart init (rebuild)", "restart read"] {
        if let Some(r) = scale_plot::ratio(points, name, 256, 4096) {
            let _ = writeln!(
                out,
                "| {name} | {r:.2}× | {} |",
                if r <= 2.0 { "yes" } else { "no" }
            );
        }
    }
    if out.is_empty() {
        return out;
    }
    format!("| phase | µs/rank at 4,096 over 256 | within 2× |\n| --- | --- | --- |\n{out}")
}

/// Where the table and the figure go: `BENCH_OUT_DIR`, or `results/` at
/// the repository's root.
fn out_dir() -> PathBuf {
    std::env::var_os("BENCH_OUT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../results"))
}

fn main() {
    let ranks: Vec<usize> = std::env::var("BENCH_RANKS")
        .unwrap_or_else(|_| "64,256,1024,4096".into())
        .split(',')
        .map(|s| s.trim().parse().expect("BENCH_RANKS: numbers"))
        .collect();
    let stack_kib: usize = std::env::var("BENCH_STACK_KIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let shared = std::env::var("BENCH_SHARED").is_ok_and(|v| v == "1");
    let config = ThreadConfig {
        // A bound, not a budget: a wait this long is a hang.
        timeout: Duration::from_secs(600),
        stack_bytes: stack_kib * 1024,
    };
    assert!(
        Path::new("/dev/shm").is_dir(),
        "the simulated nodes live in /dev/shm"
    );
    print!("{HEADER}");
    let mut table = HEADER.to_string();
    let mut points = Vec::new();
    for p in ranks {
        assert!(
            p >= 2 * RANKS_PER_NODE && p % RANKS_PER_NODE == 0,
            "P={p}: at least two nodes of {RANKS_PER_NODE} ranks"
        );
        points.extend(run(p, &config, shared, &mut table));
    }
    let ratios = ratios(&points);
    if !ratios.is_empty() {
        println!("\n{ratios}");
        table.push('\n');
        table.push_str(&ratios);
    }
    let dir = out_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let (md, png, title) = if shared {
        (
            "scale-shared-table.md",
            "scale-shared.png",
            "SCR metadata at scale: P thread ranks, bypass mode, one N-1 file",
        )
    } else {
        (
            "scale-table.md",
            "scale.png",
            "SCR metadata at scale: P thread ranks, XOR sets of 8, 4 ranks per node",
        )
    };
    let md = dir.join(md);
    std::fs::write(&md, &table).unwrap_or_else(|e| panic!("{}: {e}", md.display()));
    let png = dir.join(png);
    scale_plot::draw(&points, title, &png).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("wrote {} and {}", md.display(), png.display());
}
