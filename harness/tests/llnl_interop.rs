//! Restart from prefixes written by LLNL SCR 3.1.0 (its `test_api` example
//! on 4 ranks, one a node; `scr/tests/data/llnl-3.1/README.md` of the
//! shared fixtures says how each was made). Each fixture is copied to a
//! scratch prefix, 4 ranks of `scr_app --reference` start under `mpirun`
//! with every cache empty, and the newest complete checkpoint must be
//! fetched and match the fixture's files byte for byte. The halted prefix
//! (LLNL's `scr_halt --checkpoints 1`) must stop the job after one
//! checkpoint.
//!
//! Run with `ci/tests.d/llnl-interop.sh` (builds `scr_app` first), or:
//! `cargo build -p testing --bin scr_app && cargo test -p harness --test
//! llnl_interop -- --ignored`.

use std::path::{Path, PathBuf};

use harness::app::{mpirun_missing, workspace_binary, AppRun, SimCluster};
use scr::records::index::index_path;
use scr::records::{Index, Record};

const NODES: usize = 4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scr/tests/data/llnl-3.1")
        .join(name)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create directory");
    for e in std::fs::read_dir(from).expect("list fixture") {
        let e = e.expect("fixture entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy fixture file");
            let mut perm = std::fs::metadata(&dst).expect("stat").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dst, perm).expect("make writable");
        }
    }
}

/// A scratch cluster of 4 one-rank nodes whose prefix is a copy of the
/// fixture `name`; `None` (skipped) without `mpirun`.
fn cluster(name: &str) -> Option<(tempfile::TempDir, SimCluster)> {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {name}: {why}");
        return None;
    }
    let app = workspace_binary("SCR_APP_BIN", "scr_app");
    assert!(app.is_file(), "{} is missing: build scr_app", app.display());
    let tmp = tempfile::Builder::new()
        .prefix(&format!("llnl-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut cl = SimCluster::new(tmp.path(), &app).expect("cluster dirs");
    cl.ranks_per_node = 1;
    cl.set("SCR_CACHE_SIZE", "2");
    copy_tree(&fixture(name), &tmp.path().join("prefix"));
    Some((tmp, cl))
}

fn run(cl: &SimCluster, name: &str, extra: &[&str]) -> AppRun {
    let nodes: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let mut a: Vec<String> = vec!["--reference".into()];
    a.push(fixture(name).display().to_string());
    a.extend(extra.iter().map(|s| s.to_string()));
    let r = cl
        .run(&names, &a)
        .expect("the job launches and ends in time");
    assert!(
        r.mismatch_lines().is_empty(),
        "wrong bytes:\n{}",
        r.transcript()
    );
    r
}

/// Bytes of the fixture's checkpoint `ckpt`: what every rank together
/// must have verified.
fn fixture_bytes(name: &str, ckpt: &str) -> u64 {
    (0..NODES)
        .map(|r| {
            std::fs::metadata(fixture(name).join(ckpt).join(format!("rank_{r}.ckpt")))
                .expect("fixture file")
                .len()
        })
        .sum()
}

fn restarts_from(name: &str, ckpt: &str, extra: &[&str]) -> (AppRun, SimCluster) {
    let (r, cl, _tmp) = restarts_from_with(name, ckpt, extra, &[]);
    (r, cl)
}

/// [`restarts_from`] with parameters `env` set for the job; the scratch
/// directory is returned so the caller can look at the prefix and caches.
fn restarts_from_with(
    name: &str,
    ckpt: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (AppRun, SimCluster, tempfile::TempDir) {
    let (tmp, mut cl) = cluster(name).expect("mpirun present");
    for (k, v) in env {
        cl.set(k, v);
    }
    let r = run(&cl, name, extra);
    let sum = r
        .summary
        .clone()
        .unwrap_or_else(|| panic!("no summary line:\n{}", r.transcript()));
    assert_eq!(sum.status, "ok", "{}", r.transcript());
    assert_eq!(sum.restart.as_deref(), Some(ckpt), "{}", r.transcript());
    assert_eq!(sum.source, "fetched", "{}", r.transcript());
    assert_eq!(
        sum.verified_bytes,
        fixture_bytes(name, ckpt),
        "{}",
        r.transcript()
    );
    // The index stays LLNL's version 2 and records the fetch.
    let idx = Index::read_file(index_path(&cl.root.join("prefix"))).expect("index");
    assert_eq!(idx.version, 2);
    let id: i64 = ckpt.trim_start_matches("ckpt.").parse().expect("id");
    assert!(
        !idx.datasets[&id][ckpt].fetched.is_empty(),
        "FETCHED recorded"
    );
    (r, cl, tmp)
}

#[test]
#[ignore = "MPI: run by ci/tests.d/llnl-interop.sh"]
fn restart_from_llnl_xor_flushed_prefix() {
    if mpirun_missing().is_some() {
        return;
    }
    let (r, _) = restarts_from("xor-flushed", "ckpt.7", &["--checkpoints", "1"]);
    let sum = r.summary.expect("summary");
    assert_eq!(sum.checkpoints_written, 1, "{}", r.output.stdout);
}

#[test]
#[ignore = "MPI: run by ci/tests.d/llnl-interop.sh"]
fn restart_from_llnl_bypass_prefix() {
    if mpirun_missing().is_some() {
        return;
    }
    restarts_from("bypass", "ckpt.4", &["--checkpoints", "1"]);
}

#[test]
#[ignore = "MPI: run by ci/tests.d/llnl-interop.sh"]
fn restart_in_place_from_llnl_bypass_prefix() {
    if mpirun_missing().is_some() {
        return;
    }
    // SCR_FETCH_BYPASS=1: LLNL's files are read where LLNL wrote them
    // (its rank2file lists names only), none copied into any cache; the
    // next checkpoint is written in bypass mode as LLNL's default does.
    let (r, cl, _tmp) = restarts_from_with(
        "bypass",
        "ckpt.4",
        &["--checkpoints", "1"],
        &[("SCR_FETCH_BYPASS", "1"), ("SCR_CACHE_BYPASS", "1")],
    );
    for n in 0..NODES {
        let cached = cl.cached_files(&format!("n{n}"), &format!("rank_{n}.ckpt"));
        assert!(cached.is_empty(), "{cached:?}\n{}", r.transcript());
    }
    let idx = Index::read_file(index_path(&cl.root.join("prefix"))).expect("index");
    assert!(
        idx.datasets.keys().any(|&id| id > 4),
        "the new checkpoint is in the index\n{}",
        r.transcript()
    );
}

#[test]
#[ignore = "MPI: run by ci/tests.d/llnl-interop.sh"]
fn llnl_halted_prefix_stops_after_one_checkpoint() {
    if mpirun_missing().is_some() {
        return;
    }
    // Up to 5 steps; LLNL's `scr_halt --checkpoints 1` allows one.
    let (r, _) = restarts_from("halted", "ckpt.4", &["--until-exit", "--checkpoints", "5"]);
    let sum = r.summary.clone().expect("summary");
    assert_eq!(sum.checkpoints_written, 1, "{}", r.transcript());
    assert!(
        r.app_lines()
            .iter()
            .any(|l| l.starts_with("SCR_APP halted")),
        "{}",
        r.transcript()
    );
}
