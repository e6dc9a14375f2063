//! Issue 15's parameters under real `mpirun`: `scr_app` on 2 simulated
//! nodes (4 ranks), each parameter's effect asserted from outside — the
//! prefix, the caches, the index and rank 0's stderr — with the comparison
//! run where one is cheap. Faults that must strike mid-run (a copy damaged
//! on its way to the prefix, a cached file damaged between checkpoints, a
//! stalled flush) use injection points with a delay: the test waits for the
//! fault log to show the point fired, acts, and the job goes on.
//!
//! Run with `ci/tests.d/params.sh` (builds `scr_app` with injection points
//! into target/fault-injection), or: `cargo build -p testing --bin scr_app
//! --features scr/fault-injection --target-dir target/fault-injection &&
//! SCR_APP_BIN=target/fault-injection/debug/scr_app cargo test -p harness
//! --test params -- --ignored`. Without `mpirun` each test says so and
//! returns.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::app::{flip_bit, mpirun_missing, workspace_binary, AppRun, SimCluster};
use scr::records::index::index_path;
use scr::records::{Index, Record};
use scr::storage::attrs;
use testing::data::file_plan;

const NODES: [&str; 2] = ["n0", "n1"];
const RANKS: u32 = 4;
const MEAN_BYTES: u64 = 32 * 1024;
const SEED: u64 = 15;

struct Setup {
    _tmp: tempfile::TempDir,
    cl: SimCluster,
    fault_log: PathBuf,
}

fn setup(name: &str, params: &[(&str, &str)]) -> Option<Setup> {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {name}: {why}");
        return None;
    }
    let app = workspace_binary("SCR_APP_BIN", "scr_app");
    assert!(
        app.is_file(),
        "{} is missing: build it with injection points (ci/tests.d/params.sh) or set SCR_APP_BIN",
        app.display()
    );
    let tmp = tempfile::Builder::new()
        .prefix(&format!("params-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut cl = SimCluster::new(tmp.path(), &app).expect("cluster dirs");
    cl.timeout = Duration::from_secs(90);
    let fault_log = tmp.path().join("faults.jsonl");
    cl.set("SCR_FAULT_LOG", &fault_log.to_string_lossy());
    cl.set("SCR_CACHE_SIZE", "2");
    for (k, v) in params {
        cl.set(k, v);
    }
    eprintln!("seed {SEED}");
    Some(Setup {
        _tmp: tmp,
        cl,
        fault_log,
    })
}

fn args(checkpoints: u64, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--seed",
        &SEED.to_string(),
        "--mean-bytes",
        &MEAN_BYTES.to_string(),
        "--checkpoints",
        &checkpoints.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

impl Setup {
    fn run(&self, a: &[String]) -> AppRun {
        let r = self
            .cl
            .run(&NODES, a)
            .expect("the job launches and ends in time");
        assert!(
            r.mismatch_lines().is_empty(),
            "wrong bytes:\n{}",
            r.transcript()
        );
        r
    }

    /// Run with `plan` in SCR_FAULT_PLAN; once the fault log shows a
    /// firing (bounded wait), call `act`, while the fault's delay holds
    /// the job.
    fn run_with_pause(&self, plan: &str, a: &[String], act: impl FnOnce()) -> AppRun {
        let mut cl = self.cl.clone();
        cl.set("SCR_FAULT_PLAN", plan);
        let a = a.to_vec();
        let job = std::thread::spawn(move || cl.run(&NODES, &a));
        let t0 = Instant::now();
        while !fired(&self.fault_log) {
            assert!(
                t0.elapsed() < Duration::from_secs(60) && !job.is_finished(),
                "the fault {plan} never fired"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        act();
        let r = job
            .join()
            .expect("job thread")
            .expect("the job launches and ends in time");
        assert!(
            r.mismatch_lines().is_empty(),
            "wrong bytes:\n{}",
            r.transcript()
        );
        r
    }

    fn prefix(&self) -> PathBuf {
        self.cl.root.join("prefix")
    }

    fn index(&self) -> Option<Index> {
        Index::read_file(index_path(&self.prefix())).ok()
    }

    fn complete_in_index(&self, id: i64) -> bool {
        self.index()
            .and_then(|i| i.datasets.get(&id).cloned())
            .is_some_and(|d| d.values().any(|e| e.complete == Some(true)))
    }
}

fn fired(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|t| !t.trim().is_empty())
}

/// A rank writing at least one non-empty file in checkpoint 1, and that file.
fn writer_of_ckpt1() -> (u32, String, u64) {
    (0..RANKS)
        .find_map(|r| {
            let f = file_plan(SEED, r, 1, MEAN_BYTES).into_iter().next()?;
            (f.size_bytes > 0).then_some((r, f.name, f.size_bytes))
        })
        .expect("some rank writes bytes in checkpoint 1")
}

fn summary_of(r: &AppRun) -> (String, String) {
    let s = r
        .summary
        .clone()
        .unwrap_or_else(|| panic!("no summary line:\n{}", r.transcript()));
    assert_eq!(s.status, "ok", "{}", r.transcript());
    (s.restart.unwrap_or_default(), s.source)
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn crc_on_copy_catches_a_copy_damaged_on_its_way_to_the_prefix() {
    let (rank, file, size) = writer_of_ckpt1();
    let plan = format!("copy.file.written#1@rank:{rank}=delay:3000");
    for on in ["0", "1"] {
        let Some(s) = setup(
            &format!("crc-copy-{on}"),
            &[
                ("SCR_FLUSH", "1"),
                ("SCR_CRC_ON_COPY", on),
                ("SCR_COPY_TYPE", "XOR"),
            ],
        ) else {
            return;
        };
        let dst = s.prefix().join("ckpt.1").join(&file);
        // Crash right after checkpoint 1: nothing flushes it again.
        let r = s.run_with_pause(&plan, &args(1, &["--fail-after", "1"]), || {
            flip_bit(&dst, size / 2, 5).expect("damage the copy in the prefix");
        });
        let t = r.transcript();
        assert_eq!(r.crashed_after, Some(1), "{t}");
        if on == "1" {
            assert!(
                t.contains("SCR_CRC_ON_COPY"),
                "the read-back reports it\n{t}"
            );
            assert!(
                !s.complete_in_index(1),
                "the damaged flush is not in the index\n{t}"
            );
            // The cached copy was kept: the next run restarts from it.
            let r2 = s.run(&args(0, &["--expect-restart", "ckpt.1"]));
            assert_eq!(summary_of(&r2), ("ckpt.1".into(), "cache".into()));
        } else {
            // Without the read-back the damaged copy is recorded as flushed.
            assert!(s.complete_in_index(1), "{t}");
        }
    }
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn crc_on_delete_reports_a_cached_file_damaged_before_it_is_deleted() {
    let (rank, file, size) = writer_of_ckpt1();
    let node = NODES[(rank / 2) as usize];
    let Some(s) = setup(
        "crc-delete",
        &[
            ("SCR_FLUSH", "0"),
            ("SCR_COPY_TYPE", "SINGLE"),
            ("SCR_CACHE_SIZE", "1"),
            ("SCR_CRC_ON_DELETE", "1"),
        ],
    ) else {
        return;
    };
    // Between checkpoints 1 and 2 the cached file is damaged; starting
    // checkpoint 2 deletes checkpoint 1 (one dataset per cache).
    let plan = format!("app.compute#1@rank:{rank}=delay:3000");
    let r = s.run_with_pause(&plan, &args(2, &[]), || {
        let cached = s.cl.cached_files(node, &file);
        assert_eq!(cached.len(), 1, "{cached:?}");
        flip_bit(&cached[0], size / 3, 1).expect("damage the cached file");
    });
    let t = r.transcript();
    assert_eq!(summary_of(&r).0, "", "{t}");
    let line = t
        .lines()
        .find(|l| l.contains("CRC32 mismatch detected when deleting"))
        .unwrap_or_else(|| panic!("no report of the damage\n{t}"));
    assert!(
        line.contains(&format!("ERROR: rank {rank} on {node}:")) && line.contains(&file),
        "{line}"
    );
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn copy_metadata_restores_mode_and_times_at_fetch() {
    let Some(s) = setup(
        "metadata",
        &[
            ("SCR_FLUSH", "0"),
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_COPY_METADATA", "1"),
        ],
    ) else {
        return;
    };
    let r = s.run(&args(1, &["--fail-after", "1"]));
    assert_eq!(r.crashed_after, Some(1), "{}", r.transcript());
    // The application's files in cache get a mode and a time of their own.
    let mtime = (1_300_000_000i64, 0i64);
    let mut files = Vec::new();
    for r in 0..RANKS {
        for f in file_plan(SEED, r, 1, MEAN_BYTES) {
            let node = NODES[(r / 2) as usize];
            for p in s.cl.cached_files(node, &f.name) {
                let mut a = attrs::read(&p).unwrap();
                a.mode = (a.mode & !0o7777) | 0o600;
                a.mtime = mtime;
                attrs::apply(&p, &a).unwrap();
            }
            files.push((node, f.name));
        }
    }
    // Flushed at the next init (restart from cache), recorded in rank2file.
    let mut cl = s.cl.clone();
    cl.set("SCR_FLUSH_ON_RESTART", "1");
    let r = cl
        .run(&NODES, &args(0, &["--expect-restart", "ckpt.1"]))
        .unwrap();
    assert_eq!(summary_of(&r), ("ckpt.1".into(), "cache".into()));
    for (_, f) in &files {
        let a = attrs::read(&s.prefix().join("ckpt.1").join(f)).unwrap();
        assert_eq!(
            (a.mode & 0o7777, a.mtime),
            (0o600, mtime),
            "{f} in the prefix"
        );
    }
    // A new allocation: fetched back with them.
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    let r = s.run(&args(0, &["--expect-restart", "ckpt.1"]));
    assert_eq!(summary_of(&r), ("ckpt.1".into(), "fetched".into()));
    for (node, f) in &files {
        let cached = s.cl.cached_files(node, f);
        assert_eq!(cached.len(), 1, "{f}: {cached:?}");
        let a = attrs::read(&cached[0]).unwrap();
        let mode = std::fs::metadata(&cached[0]).unwrap().permissions().mode();
        assert_eq!((mode & 0o7777, a.mtime), (0o600, mtime), "{f} fetched");
    }
}

/// While a flush runs, the flush file says so as SCR marks it:
/// SYNC_FLUSHING for a synchronous flush, FLUSHING for an asynchronous one
/// (a 3.1 job script's watchdog gives the first SCR_WATCHDOG_TIMEOUT_PFS
/// to show progress), and neither once the flush is done. The flush is
/// held by a delay at its first copied file while the file is read.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn a_flush_under_way_is_marked_in_the_flush_file_as_scr_marks_it() {
    use scr::records::{FlushFile, Location};
    let (rank, _, _) = writer_of_ckpt1();
    let cases = [
        ("0", "flush.file.copied", Location::SyncFlushing),
        ("1", "flush.async.file.copied", Location::Flushing),
    ];
    for (asynchronous, point, want) in cases {
        let Some(s) = setup(
            &format!("marker-{asynchronous}"),
            &[("SCR_FLUSH", "1"), ("SCR_FLUSH_ASYNC", asynchronous)],
        ) else {
            return;
        };
        let path = s.prefix().join(".scr/flush.scr");
        let plan = format!("{point}#1@rank:{rank}=delay:3000");
        let mut during = None;
        let r = s.run_with_pause(&plan, &args(1, &[]), || {
            during = Some(FlushFile::read_file(&path));
        });
        let t = r.transcript();
        let ff = during
            .expect("read during the flush")
            .unwrap_or_else(|e| panic!("flush file during the flush: {e}\n{t}"));
        let locs: Vec<&str> = [
            Location::Cache,
            Location::Pfs,
            Location::Flushing,
            Location::SyncFlushing,
        ]
        .into_iter()
        .filter(|l| ff.location_test(1, *l))
        .map(Location::as_str)
        .collect();
        assert_eq!(
            locs,
            ["CACHE", want.as_str()],
            "SCR_FLUSH_ASYNC={asynchronous}\n{t}"
        );
        let after = FlushFile::read_file(&path).unwrap();
        assert!(after.location_test(1, Location::Pfs), "{t}");
        for l in [Location::Flushing, Location::SyncFlushing] {
            assert!(
                !after.location_test(1, l),
                "{} left after the flush\n{t}",
                l.as_str()
            );
        }
    }
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn watchdog_abandons_a_stalled_flush_and_keeps_the_cached_copy() {
    let (rank, _, _) = writer_of_ckpt1();
    // SCR_WATCHDOG_TIMEOUT alone, then _PFS winning over a long one.
    let cases = [
        (
            "plain",
            [
                ("SCR_WATCHDOG_TIMEOUT", "2"),
                ("SCR_WATCHDOG_TIMEOUT_PFS", ""),
            ],
            "(SCR_WATCHDOG_TIMEOUT)",
        ),
        (
            "pfs",
            [
                ("SCR_WATCHDOG_TIMEOUT", "3600"),
                ("SCR_WATCHDOG_TIMEOUT_PFS", "2"),
            ],
            "(SCR_WATCHDOG_TIMEOUT_PFS)",
        ),
    ];
    for (name, params, names) in cases {
        let Some(mut s) = setup(
            &format!("watchdog-{name}"),
            &[("SCR_FLUSH", "1"), ("SCR_COPY_TYPE", "XOR")],
        ) else {
            return;
        };
        for (k, v) in params {
            if !v.is_empty() {
                s.cl.set(k, v);
            }
        }
        // Rank `rank`'s flush stalls for far longer than the bound.
        let plan = format!("flush.file.copied#1@rank:{rank}=delay:30000");
        let r = s.run_with_pause(&plan, &args(1, &["--fail-after", "1"]), || {});
        let t = r.transcript();
        assert_eq!(r.crashed_after, Some(1), "{t}");
        let line = t
            .lines()
            .find(|l| l.contains("abandoned by the watchdog"))
            .unwrap_or_else(|| panic!("no watchdog report\n{t}"));
        assert!(
            line.contains(names) && line.contains(&format!("rank {rank} on")),
            "{line}"
        );
        assert!(!s.complete_in_index(1), "{t}");
        let r2 = s.run(&args(0, &["--expect-restart", "ckpt.1"]));
        assert_eq!(summary_of(&r2), ("ckpt.1".into(), "cache".into()));
    }
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn debug_levels_print_scr_messages_on_stderr() {
    let mut seen = Vec::new();
    for level in ["0", "1", "2"] {
        let Some(s) = setup(
            &format!("debug-{level}"),
            &[
                ("SCR_FLUSH", "1"),
                ("SCR_DEBUG", level),
                ("SCR_FLUSH_TYPE", "BBAPI"),
            ],
        ) else {
            return;
        };
        let r = s.run(&args(1, &[]));
        let err = &r.output.stderr;
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("SCR v3.1.0"))
            .collect();
        // The refusal is a warning: printed once, by rank 0, at any level.
        let refused: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains("not supported: SCR_FLUSH_TYPE=BBAPI"))
            .collect();
        assert_eq!(refused.len(), 1, "{}", r.transcript());
        assert!(
            refused[0].contains(" WARNING: rank 0 on n0: "),
            "{}",
            refused[0]
        );
        let flush0 = lines
            .iter()
            .any(|l| l.contains(": rank 0 on n0: Initiating flush of dataset 1"));
        let others = lines
            .iter()
            .filter(|l| !l.contains("WARNING") && !l.contains(": rank 0 on "))
            .count();
        // Every rank's share (level 2) says how it copies: the refused
        // type runs as SYNC.
        for l in lines
            .iter()
            .filter(|l| l.contains(": flush of dataset 1: "))
        {
            assert!(l.ends_with("SYNC on 1 thread"), "{l}");
        }
        seen.push((level, flush0, others > 0));
    }
    assert_eq!(
        seen,
        [("0", false, false), ("1", true, false), ("2", true, true)],
        "level 1: rank 0's progress only; level 2: every rank's"
    );
}

/// SCR_FLUSH_TYPE=PTHREAD under mpirun, blocking and in the background:
/// every rank says (SCR_DEBUG=2) that it copies its files on one thread
/// per file up to the node's cores, and after every cache is lost the
/// next run fetches those copies the same way and verifies every byte.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn pthread_flushes_copy_on_parallel_threads_and_fetch_back_whole() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for asynchronous in ["0", "1"] {
        let Some(s) = setup(
            &format!("pthread-{asynchronous}"),
            &[
                ("SCR_FLUSH", "1"),
                ("SCR_FLUSH_ASYNC", asynchronous),
                ("SCR_FLUSH_TYPE", "PTHREAD"),
                ("SCR_COPY_TYPE", "XOR"),
                ("SCR_DEBUG", "2"),
            ],
        ) else {
            return;
        };
        let r = s.run(&args(2, &[]));
        let t = r.transcript();
        assert!(!t.contains("not supported"), "{t}");
        // `flush of dataset <d>: <n> files, <b> bytes, PTHREAD on <k> threads`
        let mut most = 0;
        for (d, c) in [(1, 1), (2, 2)] {
            let shares: Vec<&str> = r
                .output
                .stderr
                .lines()
                .filter(|l| l.contains(&format!(": flush of dataset {d}: ")))
                .collect();
            assert_eq!(shares.len(), RANKS as usize, "dataset {d}\n{t}");
            for l in shares {
                let rank = rank_of_line(l);
                let files = file_plan(SEED, rank, c, MEAN_BYTES).len();
                let k = files.min(cores).max(1);
                let want = format!(
                    ": {files} files, {} bytes, PTHREAD on {k} thread{}",
                    ckpt_bytes_of_rank(rank, c),
                    if k == 1 { "" } else { "s" }
                );
                assert!(l.ends_with(&want), "{l}\nwant …{want}");
                most = most.max(k);
            }
        }
        // Seed 15 gives some rank three files: on a node with two cores
        // or more, copies ran on parallel threads.
        let widest = (0..RANKS)
            .flat_map(|r| [1, 2].map(|c| file_plan(SEED, r, c, MEAN_BYTES).len()))
            .max()
            .unwrap_or(0);
        assert_eq!(widest, 3);
        assert_eq!(most, cores.min(widest), "{t}");
        assert!(s.complete_in_index(2), "{t}");
        for n in NODES {
            s.cl.remove_node(n).unwrap();
        }
        let r2 = s.run(&args(0, &["--expect-restart", "ckpt.2"]));
        assert_eq!(summary_of(&r2), ("ckpt.2".into(), "fetched".into()));
        // `fetch of dataset 2: <n> files from <dir>, PTHREAD on <k> threads`
        let t2 = r2.transcript();
        let fetches: Vec<&str> = r2
            .output
            .stderr
            .lines()
            .filter(|l| l.contains(": fetch of dataset 2: "))
            .collect();
        assert_eq!(fetches.len(), RANKS as usize, "{t2}");
        for l in fetches {
            let files = file_plan(SEED, rank_of_line(l), 2, MEAN_BYTES).len();
            let k = files.min(cores).max(1);
            let want = format!(", PTHREAD on {k} thread{}", if k == 1 { "" } else { "s" });
            assert!(l.contains(&format!(": {files} files from ")), "{l}");
            assert!(l.ends_with(&want), "{l}\nwant …{want}");
        }
    }
}

/// The rank a debug line of the library names (`…: rank <r> …`).
fn rank_of_line(l: &str) -> u32 {
    l.split(": rank ")
        .nth(1)
        .and_then(|x| x.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no rank in {l}"))
}

/// Bytes rank `rank` writes in checkpoint `ckpt`.
fn ckpt_bytes_of_rank(rank: u32, ckpt: u64) -> u64 {
    file_plan(SEED, rank, ckpt, MEAN_BYTES)
        .iter()
        .map(|f| f.size_bytes)
        .sum()
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn prefix_size_keeps_the_newest_and_purge_empties_the_prefix() {
    let Some(mut s) = setup(
        "prefix-size",
        &[
            ("SCR_FLUSH", "1"),
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_PREFIX_SIZE", "2"),
        ],
    ) else {
        return;
    };
    let r = s.run(&args(4, &[]));
    summary_of(&r);
    let idx = s.index().expect("index");
    assert_eq!(idx.datasets.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
    assert!(!s.prefix().join("ckpt.1").exists() && !s.prefix().join("ckpt.2").exists());
    assert!(s.prefix().join("ckpt.3").is_dir());
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    s.cl.set("SCR_PREFIX_PURGE", "1");
    let r = s.run(&args(0, &["--expect-restart", "none"]));
    assert_eq!(summary_of(&r).0, "");
    assert!(s.index().is_none_or(|i| i.datasets.is_empty()));
    assert!(!s.prefix().join("ckpt.3").exists() && !s.prefix().join("ckpt.4").exists());
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn need_checkpoint_without_a_policy_says_no() {
    let mut written = Vec::new();
    for interval in ["0", "2"] {
        let Some(s) = setup(
            &format!("need-{interval}"),
            &[("SCR_FLUSH", "0"), ("SCR_CHECKPOINT_INTERVAL", interval)],
        ) else {
            return;
        };
        let r = s.run(&args(4, &["--until-exit", "--ask-need"]));
        summary_of(&r);
        written.push(r.summary.map(|x| x.checkpoints_written));
    }
    assert_eq!(written, [Some(0), Some(2)]);
}

/// Bytes of checkpoint `ckpt` over every rank (what a restart verifies).
fn ckpt_bytes(ckpt: u64) -> u64 {
    (0..RANKS).map(|r| ckpt_bytes_of_rank(r, ckpt)).sum()
}

/// Every file of checkpoint `ckpt` is in the prefix; `cached` says
/// whether each is in its rank's cache too.
fn assert_placed(s: &Setup, ckpt: u64, cached: bool, t: &str) {
    for r in 0..RANKS {
        let node = NODES[(r / 2) as usize];
        for f in file_plan(SEED, r, ckpt, MEAN_BYTES) {
            let p = s.prefix().join(format!("ckpt.{ckpt}")).join(&f.name);
            assert!(p.is_file(), "{} is in the prefix\n{t}", p.display());
            let in_cache = s.cl.cached_files(node, &f.name);
            assert_eq!(
                !in_cache.is_empty(),
                cached,
                "{}: {in_cache:?}\n{t}",
                f.name
            );
        }
    }
}

#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn cache_bypass_writes_to_the_prefix_and_fetch_bypass_reads_in_place() {
    let Some(mut s) = setup(
        "bypass",
        &[
            ("SCR_FLUSH", "0"),
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_CACHE_BYPASS", "1"),
        ],
    ) else {
        return;
    };
    // Written straight to the prefix and recorded there at complete,
    // although SCR_FLUSH=0 flushes nothing; no file in any cache.
    let r = s.run(&args(2, &[]));
    let t = r.transcript();
    summary_of(&r);
    assert!(s.complete_in_index(1) && s.complete_in_index(2), "{t}");
    assert_placed(&s, 2, false, &t);
    // A new allocation reading in place: every byte verified by the
    // application, nothing copied into cache.
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    s.cl.set("SCR_FETCH_BYPASS", "1");
    let r = s.run(&args(0, &["--expect-restart", "ckpt.2"]));
    let t = r.transcript();
    assert_eq!(summary_of(&r), ("ckpt.2".into(), "fetched".into()), "{t}");
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(2))
    );
    assert_placed(&s, 2, false, &t);
    // And with both off: the normal fetch copies into cache.
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    s.cl.set("SCR_FETCH_BYPASS", "0");
    s.cl.set("SCR_CACHE_BYPASS", "0");
    let r = s.run(&args(0, &["--expect-restart", "ckpt.2"]));
    let t = r.transcript();
    assert_eq!(summary_of(&r), ("ckpt.2".into(), "fetched".into()), "{t}");
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(2))
    );
    assert_placed(&s, 2, true, &t);
}

/// Bytes of checkpoint `ckpt` written by `writers` ranks.
fn ckpt_bytes_of(writers: u32, ckpt: u64) -> u64 {
    (0..writers)
        .flat_map(|r| file_plan(SEED, r, ckpt, MEAN_BYTES))
        .map(|f| f.size_bytes)
        .sum()
}

/// SCR_GLOBAL_RESTART under mpirun, in cache mode and in bypass mode: 8
/// ranks (4 per node) write 3 checkpoints and crash, ckpt.3 only in cache
/// (SCR_FLUSH=2; in bypass mode it is in the prefix already). The next
/// init on 8 ranks flushes it and restarts through the prefix; then 4 and
/// 6 ranks restart from the same 8-rank checkpoint, each rank reading the
/// files of the writers `q mod size = rank` by path (`scr_app
/// --written-by 8`), every byte verified. Without SCR_GLOBAL_RESTART, 4
/// ranks have nothing to restart from.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn global_restart_reads_an_8_rank_checkpoint_on_4_and_6_ranks() {
    for bypass in ["0", "1"] {
        let Some(mut s) = setup(
            &format!("global-restart-{bypass}"),
            &[
                ("SCR_FLUSH", "2"),
                ("SCR_COPY_TYPE", "XOR"),
                ("SCR_SET_SIZE", "4"),
                ("SCR_CACHE_BYPASS", bypass),
            ],
        ) else {
            return;
        };
        s.cl.ranks_per_node = 4;
        let r = s.run(&args(3, &["--fail-after", "3"]));
        let t = r.transcript();
        assert_eq!(r.crashed_after, Some(3), "{t}");
        assert!(s.complete_in_index(2), "{t}");
        assert_eq!(s.complete_in_index(3), bypass == "1", "{t}");
        s.cl.set("SCR_GLOBAL_RESTART", "1");
        let want_bytes = Some(ckpt_bytes_of(8, 3));
        let r = s.run(&args(0, &["--expect-restart", "ckpt.3"]));
        let t = r.transcript();
        assert_eq!(summary_of(&r), ("ckpt.3".into(), "fetched".into()), "{t}");
        assert_eq!(r.summary.as_ref().map(|x| x.verified_bytes), want_bytes);
        assert!(s.complete_in_index(3), "ckpt.3 flushed at init\n{t}");
        for per_node in [2, 3] {
            s.cl.ranks_per_node = per_node;
            let r = s.run(&args(
                0,
                &["--expect-restart", "ckpt.3", "--written-by", "8"],
            ));
            let t = r.transcript();
            assert_eq!(
                summary_of(&r),
                ("ckpt.3".into(), "fetched".into()),
                "{} ranks\n{t}",
                2 * per_node
            );
            assert_eq!(
                r.summary.as_ref().map(|x| x.verified_bytes),
                want_bytes,
                "{} ranks read every byte\n{t}",
                2 * per_node
            );
        }
        s.cl.ranks_per_node = 2;
        s.cl.set("SCR_GLOBAL_RESTART", "0");
        let r = s.run(&args(0, &["--expect-restart", "none"]));
        let t = r.transcript();
        assert_eq!(summary_of(&r), (String::new(), "none".into()), "{t}");
    }
}

/// A file shared by every rank (`scr_app --shared-bytes`: rank r writes
/// its region of `ckpt.<c>/shared.dat`) under mpirun. Bypass mode: it is
/// written in place by all, recorded once, and a new allocation reading in
/// place checks every rank's region. Cache mode: Complete_output fails on
/// every rank naming the file and the ranks (LLNL aborts the same way), the
/// job ends (no hang) and nothing of that checkpoint reaches the index.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn a_shared_file_works_in_bypass_mode_and_is_an_error_in_cache_mode() {
    const REGION: u64 = 5000;
    let shared = ["--shared-bytes", "5000"];
    let Some(mut s) = setup(
        "shared-bypass",
        &[("SCR_FLUSH", "0"), ("SCR_CACHE_BYPASS", "1")],
    ) else {
        return;
    };
    let r = s.run(&args(2, &shared));
    let t = r.transcript();
    summary_of(&r);
    assert!(s.complete_in_index(2), "{t}");
    let f = s.prefix().join("ckpt.2/shared.dat");
    assert_eq!(
        std::fs::metadata(&f).map(|m| m.len()).ok(),
        Some(u64::from(RANKS) * REGION),
        "every rank's region is in the one file\n{t}"
    );
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    s.cl.set("SCR_FETCH_BYPASS", "1");
    let mut a = args(0, &shared);
    a.extend(["--expect-restart".to_string(), "ckpt.2".to_string()]);
    let r = s.run(&a);
    let t = r.transcript();
    assert_eq!(summary_of(&r), ("ckpt.2".into(), "fetched".into()), "{t}");
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(2) + u64::from(RANKS) * REGION),
        "{t}"
    );

    let Some(s) = setup("shared-cache", &[("SCR_FLUSH", "1")]) else {
        return;
    };
    let r =
        s.cl.run(&NODES, &args(1, &shared))
            .expect("the job ends in time");
    let t = r.transcript();
    assert_ne!(r.output.code(), 0, "the job fails\n{t}");
    assert!(
        t.contains("shared file access detected while not in bypass mode")
            && t.contains("shared.dat routed by ranks 0, 1, 2, 3"),
        "the error names the file and its ranks\n{t}"
    );
    assert!(!s.complete_in_index(1), "{t}");
}

/// The container files of dataset `id` in the prefix.
fn containers(s: &Setup, id: u64) -> Vec<PathBuf> {
    let dir = s.prefix().join(format!(".scr/scr.dataset.{id}"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(scr::prefix::container::is_container_name)
    });
    v.sort();
    v
}

/// SCR_USE_CONTAINERS=1 with SCR_CONTAINER_SIZE=40000 (checkpoints of
/// about 128 KiB spill over several containers): the flush writes
/// `ctr.<n>.scr` and no plain file; a new allocation fetches every byte
/// back from the containers; a truncated container fails the fetch of its
/// dataset, which falls back to the older one, never to wrong bytes.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn containers_round_trip_and_a_short_container_falls_back() {
    let Some(s) = setup(
        "containers",
        &[
            ("SCR_FLUSH", "1"),
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_USE_CONTAINERS", "1"),
            ("SCR_CONTAINER_SIZE", "40000"),
        ],
    ) else {
        return;
    };
    let r = s.run(&args(2, &[]));
    let t = r.transcript();
    summary_of(&r);
    assert!(s.complete_in_index(1) && s.complete_in_index(2), "{t}");
    for ckpt in [1, 2] {
        let ctrs = containers(&s, ckpt);
        let bytes: u64 = ctrs
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert!(ctrs.len() >= 2, "ckpt.{ckpt} spills over: {ctrs:?}\n{t}");
        assert_eq!(bytes, ckpt_bytes(ckpt), "{ctrs:?}\n{t}");
        assert!(ctrs
            .iter()
            .all(|p| std::fs::metadata(p).unwrap().len() <= 40000));
        assert!(
            !s.prefix().join(format!("ckpt.{ckpt}")).exists(),
            "no plain per-rank files\n{t}"
        );
    }
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    let r = s.run(&args(0, &["--expect-restart", "ckpt.2"]));
    let t = r.transcript();
    assert_eq!(summary_of(&r), ("ckpt.2".into(), "fetched".into()), "{t}");
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(2)),
        "{t}"
    );
    // Damage: the last container of ckpt.2 loses its second half.
    let last = containers(&s, 2).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    let r = s.run(&args(0, &["--expect-restart", "ckpt.1"]));
    let t = r.transcript();
    assert_eq!(summary_of(&r), ("ckpt.1".into(), "fetched".into()), "{t}");
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(1)),
        "{t}"
    );
    let name = last.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        r.output.stderr.contains(&format!("{name} at offset")),
        "the failed fetch names the container and offset\n{t}"
    );
    let idx = s.index().expect("index");
    assert!(!idx.datasets[&2]["ckpt.2"].failed.is_empty(), "{t}");
}

/// A run killed with its newest checkpoint only in cache (SCR_FLUSH=2,
/// killed after checkpoint 3), then `scr postrun` with
/// SCR_USE_CONTAINERS=1: the scavenged dataset is packed into containers
/// like a flush, and a fresh allocation fetches it bit-exact.
#[test]
#[ignore = "MPI: run by ci/tests.d/params.sh"]
fn containers_scavenge_packs_the_dataset_and_the_next_allocation_fetches_it() {
    let Some(s) = setup(
        "containers-scavenge",
        &[
            ("SCR_FLUSH", "2"),
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_USE_CONTAINERS", "1"),
            ("SCR_CONTAINER_SIZE", "40000"),
        ],
    ) else {
        return;
    };
    let r = s.run(&args(3, &["--fail-after", "3"]));
    let t = r.transcript();
    assert_eq!(r.crashed_after, Some(3), "{t}");
    assert!(s.complete_in_index(2) && !s.complete_in_index(3), "{t}");
    let scr_bin = workspace_binary("SCR_BIN", "scr");
    assert!(
        scr_bin.is_file(),
        "{} is missing: build it (ci/tests.d/params.sh) or set SCR_BIN",
        scr_bin.display()
    );
    let out = std::process::Command::new(&scr_bin)
        .args(["postrun", "--prefix"])
        .arg(s.prefix())
        .args(["--nodes", &NODES.join(",")])
        .arg("--node-root")
        .arg(&s.cl.root)
        .arg("--json")
        .envs(s.cl.env.iter())
        .output()
        .expect("scr postrun runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ctx = format!(
        "postrun exit {:?}\n{stdout}\n{}\n--- job\n{t}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let d = &v["datasets"][0];
    assert_eq!(d["id"], 3, "{ctx}");
    assert!(d["complete"] == true && d["current"] == true, "{ctx}");
    assert!(d["containers"]["files"].as_u64().unwrap_or(0) > 0, "{ctx}");
    let ctrs = containers(&s, 3);
    assert!(ctrs.len() >= 2, "{ctrs:?}\n{ctx}");
    assert!(
        !s.prefix().join("ckpt.3").exists(),
        "plain files removed\n{ctx}"
    );
    for n in NODES {
        s.cl.remove_node(n).unwrap();
    }
    let r = s.run(&args(0, &["--expect-restart", "ckpt.3"]));
    let t = r.transcript();
    assert_eq!(
        summary_of(&r),
        ("ckpt.3".into(), "fetched".into()),
        "{t}\n{ctx}"
    );
    assert_eq!(
        r.summary.as_ref().map(|x| x.verified_bytes),
        Some(ckpt_bytes(3)),
        "{t}"
    );
}
