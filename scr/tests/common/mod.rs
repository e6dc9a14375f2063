//! Shared by the thread-communicator integration tests: a cluster of
//! simulated nodes as directory trees, deterministic per-rank data, and
//! checkpoint/restart loops that check every byte.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scr::comm::thread::ThreadComm;
use scr::comm::Comm;
use scr::config::MapEnv;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

pub struct Cluster {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub prefix: PathBuf,
}

impl Cluster {
    pub fn new() -> Cluster {
        Cluster::in_dir(&std::env::temp_dir())
    }

    /// A cluster whose node trees and prefix live below `dir` (e.g.
    /// /dev/shm, where fsync is free, for tests with thousands of files).
    pub fn in_dir(dir: &Path) -> Cluster {
        let tmp = tempfile::tempdir_in(dir).unwrap();
        let root = tmp.path().to_path_buf();
        let prefix = root.join("prefix");
        std::fs::create_dir_all(&prefix).unwrap();
        Cluster {
            _tmp: tmp,
            root,
            prefix,
        }
    }

    pub fn node(&self, n: usize) -> NodeIdentity {
        NodeIdentity {
            name: format!("n{n}"),
            root: Some(self.root.join(format!("n{n}"))),
        }
    }

    pub fn kill_node(&self, n: usize) {
        std::fs::remove_dir_all(self.root.join(format!("n{n}"))).unwrap();
    }

    pub fn opts(&self, node: NodeIdentity, extra: &[(&str, &str)]) -> InitOptions {
        let prefix = self.prefix.to_string_lossy().into_owned();
        let mut vars: BTreeMap<String, String> = [
            ("SCR_PREFIX", prefix.as_str()),
            ("SCR_JOB_ID", "77"),
            ("USER", "tester"),
            ("SCR_CACHE_BASE", "/dev/shm"),
            ("SCR_CNTL_BASE", "/dev/shm"),
            // The cache tier alone: nothing reaches the prefix to fetch from.
            ("SCR_FLUSH", "0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in extra {
            vars.insert(k.to_string(), v.to_string());
        }
        InitOptions {
            env: Some(Box::new(MapEnv::new(vars).with_cwd(&self.prefix))),
            node: Some(node),
            ..InitOptions::default()
        }
    }
}

/// Every file below `dir`, recursively.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

/// Every file in the simulated nodes' trees (caches and control
/// directories, `<root>/n*`).
pub fn node_tree_files(cl: &Cluster) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(&cl.root).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with('n') {
            all.extend(files_below(&e.path()));
        }
    }
    all
}

/// Write `bytes` to `p` with permission bits `mode` and both access and
/// modification times `time` (the attributes SCR_COPY_METADATA carries).
pub fn write_with_attrs(p: &Path, bytes: &[u8], mode: u32, time: (i64, i64)) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(p, bytes).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    let mut a = scr::storage::attrs::read(p).unwrap();
    a.mtime = time;
    a.atime = time;
    scr::storage::attrs::apply(p, &a).unwrap();
}

pub fn data(seed: u64, rank: usize, ckpt: usize, file: usize) -> Vec<u8> {
    // Sizes differ across ranks; some ranks write zero bytes.
    let len = (seed as usize * 7 + rank * 1013 + ckpt * 37 + file * 11) % 5000;
    (0..len)
        .map(|i| (i as u64 ^ seed ^ (rank as u64) << 8 ^ (ckpt as u64) << 16) as u8)
        .collect()
}

pub fn write_ckpts(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, seed: u64, n: usize) {
    let rank = comm.rank();
    for c in 1..=n {
        let mut out = scr
            .start_output(Some(&format!("ckpt.{c}")), Flags::CHECKPOINT)
            .unwrap();
        let files = if rank % 3 == 2 { 0 } else { 1 + rank % 2 };
        for f in 0..files {
            let p = out
                .route_file(prefix.join(format!("ckpt.{c}/rank{rank}.f{f}")))
                .unwrap();
            std::fs::write(&p, data(seed, rank, c, f)).unwrap();
        }
        assert!(out.complete(true).unwrap(), "checkpoint {c} complete");
    }
}

/// Restart and return (name restarted from, all bytes verified).
pub fn restart_and_verify(
    scr: &mut Scr,
    comm: &dyn Comm,
    prefix: &Path,
    seed: u64,
) -> Option<String> {
    let rank = comm.rank();
    let name = scr.have_restart().unwrap()?;
    let c: usize = name.trim_start_matches("ckpt.").parse().unwrap();
    let mut r = scr.start_restart().unwrap();
    let files = if rank % 3 == 2 { 0 } else { 1 + rank % 2 };
    let mut ok = true;
    for f in 0..files {
        let p = r
            .route_file(prefix.join(format!("ckpt.{c}/rank{rank}.f{f}")))
            .unwrap();
        ok &= std::fs::read(&p).unwrap() == data(seed, rank, c, f);
    }
    assert!(ok, "rank {rank}: bytes of {name} match");
    assert!(r.complete(ok).unwrap());
    Some(name)
}

pub fn run(
    cl: &Cluster,
    nranks: usize,
    node_of: impl Fn(usize) -> usize + Sync,
    extra: &[(&str, &str)],
    body: impl Fn(&mut Scr, &dyn Comm) -> Option<String> + Sync,
) -> Vec<Option<String>> {
    run_with_system(cl, nranks, node_of, None, extra, body)
}

/// [`run`] reading `system_file` as the system config file (the place for
/// site-owned settings such as SCR_LOG_DB_* and SCR_LOG_SYSLOG_ENABLE).
pub fn run_with_system(
    cl: &Cluster,
    nranks: usize,
    node_of: impl Fn(usize) -> usize + Sync,
    system_file: Option<&Path>,
    extra: &[(&str, &str)],
    body: impl Fn(&mut Scr, &dyn Comm) -> Option<String> + Sync,
) -> Vec<Option<String>> {
    ThreadComm::run(nranks, |comm| {
        let mut opts = cl.opts(cl.node(node_of(comm.rank())), extra);
        opts.load.system_file = system_file.map(Path::to_path_buf);
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let mut scr = Scr::init_with(world, opts).unwrap();
        let r = body(&mut scr, comm);
        scr.finalize().unwrap();
        r
    })
    .unwrap()
}

/// Remove every simulated node's tree (a new allocation: no cache left).
pub fn wipe_all_caches(cl: &Cluster) {
    for e in std::fs::read_dir(&cl.root).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with('n') && n[1..].chars().all(|c| c.is_ascii_digit()) {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
}

/// Run the `scr` command `bin` (a test's `env!("CARGO_BIN_EXE_scr")`) with
/// `args`: it must succeed, and what it prints is JSON.
pub fn scr_json<S: AsRef<std::ffi::OsStr>>(
    bin: &str,
    args: impl IntoIterator<Item = S>,
) -> serde_json::Value {
    let out = std::process::Command::new(bin).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What a log database gives back (`rows`) is what the text log holds
/// (`txt`), entry for entry: the whole entry, its time to the
/// millisecond, its host and job.
pub fn assert_same_records(txt: &[scr::log::Record], rows: &[scr::log::Record]) {
    assert_eq!(txt.len(), rows.len());
    for (a, b) in txt.iter().zip(rows) {
        assert_eq!(a.entry, b.entry, "{a:?} vs {b:?}");
        assert!((a.time_s - b.time_s).abs() < 1e-3, "{a:?} vs {b:?}");
        assert_eq!((&a.host, &a.jobid), (&b.host, &b.jobid));
    }
}

/// Copy `from` into `to`, directories and files.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}
