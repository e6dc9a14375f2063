//! The cache tier under real `mpirun`: 8 ranks of `scr_app` on 4 simulated
//! nodes (`n0`..`n3`, 2 ranks each), for every redundancy scheme.
//!
//! Each scenario: run 1 writes `ckpt.1`..`ckpt.3` (SCR_CACHE_SIZE=2, so
//! `ckpt.2` and `ckpt.3` stay cached) and crashes; then nodes are lost
//! (their trees removed) or a cached byte is damaged; run 2 relaunches with
//! the same 8 ranks, a lost node's ranks on a spare (`n4`, `n5`, …), verifies
//! every byte of what it restarts from and writes one more checkpoint. In
//! the one-node scenarios a third run then loses another node, so the
//! checkpoint written after the rebuild (on the new layout) is tested too.
//! The expected outcome follows from the scheme's tolerance; wrong bytes are
//! a failure in every scenario.
//!
//! Run with `ci/tests.d/cache-tier.sh` (builds `scr_app` first), or:
//! `cargo build -p testing --bin scr_app && cargo test -p harness --test
//! cache_tier -- --ignored`. The tests are `#[ignore]`d so that
//! `cargo test --workspace` does not launch MPI jobs twice in `ci/test`;
//! `SCR_APP_BIN` overrides where the binary is looked for. Without
//! `mpirun` on the PATH every test says so and returns.

use std::path::PathBuf;

use harness::app::{flip_bit, mpirun_missing, AppRun, SimCluster};
use scr::redundancy::sets::{build_sets, partner_plan};
use testing::data::file_plan;

const RANKS: usize = 8;
const NODES: usize = 4;
const PER_NODE: usize = 2;
const MEAN_BYTES: u64 = 64 * 1024;

/// `scr_app`: `SCR_APP_BIN`, else beside the test's own target directory.
fn app_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SCR_APP_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/cache_tier-<hash> → target/<profile>/scr_app
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps");
    profile_dir.join("scr_app")
}

fn node_of(rank: usize) -> usize {
    rank / PER_NODE
}

/// A seed whose plans make every expectation sharp: every rank that can
/// be lost (on n1..n3) writes bytes in ckpt.2 and ckpt.3, so losing its
/// node really loses data; and some rank on n0 writes nothing in ckpt.3,
/// the shape that breaks redundancy layouts.
fn pick_seed() -> u64 {
    let writes = |seed: u64, rank: usize, ckpt: u64| {
        file_plan(seed, rank as u32, ckpt, MEAN_BYTES)
            .iter()
            .any(|f| f.size_bytes > 0)
    };
    (1..10_000u64)
        .find(|&s| {
            (PER_NODE..RANKS).all(|r| writes(s, r, 2) && writes(s, r, 3))
                && (0..PER_NODE).any(|r| file_plan(s, r as u32, 3, MEAN_BYTES).is_empty())
        })
        .expect("a seed with the wanted shape exists below 10000")
}

/// Bytes all ranks wrote in checkpoint `ckpt`.
fn ckpt_bytes(seed: u64, ckpt: u64) -> u64 {
    (0..RANKS)
        .flat_map(|r| file_plan(seed, r as u32, ckpt, MEAN_BYTES))
        .map(|f| f.size_bytes)
        .sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Restart from this checkpoint, rebuilt.
    Rebuilt(u64),
    /// Restart from this checkpoint as found in cache.
    Cache(u64),
    /// Nothing left to restart from.
    NoRestart,
}

struct Scenario {
    scheme: &'static [(&'static str, &'static str)],
    lose: Vec<usize>,
    flip_bit: bool,
    expect: Expect,
    /// After run 2: lose node at this index of its layout, expect this.
    then_lose: Option<(usize, Expect)>,
}

const SINGLE: &[(&str, &str)] = &[("SCR_COPY_TYPE", "SINGLE")];
const PARTNER: &[(&str, &str)] = &[("SCR_COPY_TYPE", "PARTNER")];
const XOR: &[(&str, &str)] = &[("SCR_COPY_TYPE", "XOR")];
/// XOR sets of 2: pairs of nodes, so two lost nodes may or may not share one.
const XOR_PAIRS: &[(&str, &str)] = &[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "2")];
const RS2: &[(&str, &str)] = &[
    ("SCR_COPY_TYPE", "RS"),
    ("SCR_SET_SIZE", "4"),
    ("SCR_SET_FAILURES", "2"),
];

fn fmt_run(label: &str, run: &AppRun) -> String {
    format!("== {label}\n{}", run.transcript())
}

fn run_scenario(name: &str, sc: Scenario) {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {name}: {why}");
        return;
    }
    let app = app_bin();
    assert!(
        app.is_file(),
        "{} is missing: build it first (cargo build -p testing --bin scr_app) or set SCR_APP_BIN",
        app.display()
    );
    let tmp = tempfile::Builder::new()
        .prefix(&format!("cache-tier-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut cl = SimCluster::new(tmp.path(), &app).expect("cluster dirs");
    cl.set("SCR_CACHE_SIZE", "2");
    // The cache tier alone: nothing reaches the prefix to fetch from.
    cl.set("SCR_FLUSH", "0");
    for (k, v) in sc.scheme {
        cl.set(k, v);
    }
    let seed = pick_seed();
    let common = |n: u64| {
        vec![
            "--seed".to_string(),
            seed.to_string(),
            "--mean-bytes".to_string(),
            MEAN_BYTES.to_string(),
            "--checkpoints".to_string(),
            n.to_string(),
        ]
    };
    let nodes: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();

    let mut args1 = common(3);
    args1.extend(["--fail-after".to_string(), "3".to_string()]);
    let run1 = cl
        .run(&names, &args1)
        .expect("run 1 launches and ends in time");
    assert!(
        run1.crashed_after == Some(3) && !run1.output.success(),
        "run 1 should write 3 checkpoints and crash\n{}",
        fmt_run("run 1", &run1)
    );
    assert!(
        run1.mismatch_lines().is_empty(),
        "{}",
        fmt_run("run 1", &run1)
    );

    let mut damage = Vec::new();
    for &n in &sc.lose {
        cl.remove_node(&nodes[n]).expect("remove node tree");
        damage.push(format!("lost {}", nodes[n]));
    }
    if sc.flip_bit {
        // A byte in the middle of rank 2's first non-empty file of ckpt.3.
        let spec = file_plan(seed, 2, 3, MEAN_BYTES)
            .into_iter()
            .find(|f| f.size_bytes > 0)
            .expect("seed gives rank 2 bytes in ckpt.3");
        let cached = cl.cached_files(&nodes[node_of(2)], &spec.name);
        assert!(
            !cached.is_empty(),
            "no cached copy of {} on {}",
            spec.name,
            nodes[node_of(2)]
        );
        flip_bit(&cached[0], spec.size_bytes / 2, 5).expect("flip a bit");
        damage.push(format!(
            "flipped bit 5 of byte {} of {}",
            spec.size_bytes / 2,
            cached[0].display()
        ));
    }

    // Same ranks; each lost node's ranks on a spare.
    let mut spare = NODES;
    let nodes2 = replace_lost(&nodes, &sc.lose, &mut spare);
    let run2 = run_and_check(&cl, &nodes2, &common(1), seed, sc.expect, &damage, &run1);
    report(name, &damage, &run1, &run2);

    // A second loss after the restart: what run 2 wrote (on the new
    // layout, with redundancy reapplied) must survive it too.
    if let Some((n, expect)) = sc.then_lose {
        cl.remove_node(&nodes2[n]).expect("remove node tree");
        let damage3 = vec![format!("then lost {}", nodes2[n])];
        let nodes3 = replace_lost(&nodes2, &[n], &mut spare);
        let run3 = run_and_check(&cl, &nodes3, &common(1), seed, expect, &damage3, &run2);
        report(name, &damage3, &run2, &run3);
    }
}

/// `nodes` with the lost ones replaced by the next spares (`n<spare>`, …).
fn replace_lost(nodes: &[String], lost: &[usize], spare: &mut usize) -> Vec<String> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if lost.contains(&i) {
                *spare += 1;
                format!("n{}", *spare - 1)
            } else {
                n.clone()
            }
        })
        .collect()
}

/// Run `scr_app` (writing one checkpoint) on `nodes` and check its restart
/// against `expect`; wrong bytes always fail.
fn run_and_check(
    cl: &SimCluster,
    nodes: &[String],
    args: &[String],
    seed: u64,
    expect: Expect,
    damage: &[String],
    before: &AppRun,
) -> AppRun {
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let run = cl
        .run(&names, args)
        .expect("relaunch starts and ends in time");
    let context = format!(
        "seed {seed}, {} then relaunch on {:?}\n{}\n{}",
        damage.join(", "),
        names,
        fmt_run("previous run", before),
        fmt_run("relaunch", &run)
    );
    assert!(
        run.mismatch_lines().is_empty(),
        "WRONG BYTES after restart:\n{context}"
    );
    let s = run
        .summary
        .clone()
        .unwrap_or_else(|| panic!("the relaunch printed no summary line\n{context}"));
    assert_eq!(s.status, "ok", "{context}");
    assert!(run.output.success(), "{context}");
    assert_eq!(s.checkpoints_written, 1, "{context}");
    match expect {
        Expect::Rebuilt(c) | Expect::Cache(c) => {
            let want = format!("ckpt.{c}");
            let source = if matches!(expect, Expect::Rebuilt(_)) {
                "rebuilt"
            } else {
                "cache"
            };
            assert_eq!(
                (s.restart.as_deref(), s.source.as_str()),
                (Some(want.as_str()), source),
                "{context}"
            );
            assert_eq!(s.verified_bytes, ckpt_bytes(seed, c), "{context}");
        }
        Expect::NoRestart => {
            assert_eq!(
                (s.restart.as_deref(), s.source.as_str()),
                (None, "none"),
                "{context}"
            );
        }
    }
    run
}

fn report(name: &str, damage: &[String], before: &AppRun, run: &AppRun) {
    let init = run
        .app_lines()
        .into_iter()
        .find(|l| l.starts_with("SCR_APP init"))
        .unwrap_or("");
    eprintln!(
        "{name}: {} → {init} → {} (before {:.1} s, relaunch {:.1} s)",
        damage.join(", "),
        run.app_lines().last().copied().unwrap_or(""),
        before.output.elapsed.as_secs_f64(),
        run.output.elapsed.as_secs_f64()
    );
}

fn lose(nodes: &[usize]) -> Vec<usize> {
    nodes.to_vec()
}

/// Node index of every rank, as failure groups.
fn groups() -> Vec<usize> {
    (0..RANKS).map(node_of).collect()
}

/// With XOR sets of 2: (a node sharing a set with n1, a node sharing none).
fn xor_pair_nodes() -> (usize, usize) {
    let plan = build_sets(&groups(), 2, 2).expect("sets");
    let shares = |a: usize, b: usize| {
        plan.sets
            .iter()
            .any(|s| s.iter().any(|&r| node_of(r) == a) && s.iter().any(|&r| node_of(r) == b))
    };
    let same = (0..NODES)
        .find(|&n| n != 1 && n != 0 && shares(1, n))
        .or_else(|| (0..NODES).find(|&n| n != 1 && shares(1, n)))
        .expect("n1 shares an XOR set with some node");
    let different = (2..NODES)
        .find(|&n| n != 1 && !shares(1, n))
        .expect("n1 shares no XOR set with some node among n2, n3");
    (same, different)
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn single_loses_the_checkpoints_of_a_lost_node_then_of_another() {
    run_scenario(
        "single-lose-n1",
        Scenario {
            scheme: SINGLE,
            lose: lose(&[1]),
            flip_bit: false,
            then_lose: Some((2, Expect::NoRestart)),
            expect: Expect::NoRestart,
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn partner_rebuilds_a_lost_node_on_a_spare_then_another() {
    run_scenario(
        "partner-lose-n1",
        Scenario {
            scheme: PARTNER,
            lose: lose(&[1]),
            flip_bit: false,
            then_lose: Some((2, Expect::Rebuilt(4))),
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn xor_rebuilds_a_lost_node_on_a_spare_then_another() {
    run_scenario(
        "xor-lose-n1",
        Scenario {
            scheme: XOR,
            lose: lose(&[1]),
            flip_bit: false,
            then_lose: Some((2, Expect::Rebuilt(4))),
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn rs2_rebuilds_a_lost_node_on_a_spare_then_another() {
    run_scenario(
        "rs2-lose-n1",
        Scenario {
            scheme: RS2,
            lose: lose(&[1]),
            flip_bit: false,
            then_lose: Some((2, Expect::Rebuilt(4))),
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn xor_rebuilds_two_lost_nodes_in_different_sets() {
    let (_, different) = xor_pair_nodes();
    run_scenario(
        "xor-lose-two-different-sets",
        Scenario {
            scheme: XOR_PAIRS,
            lose: lose(&[1, different]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn xor_loses_the_checkpoint_when_two_nodes_of_one_set_are_lost() {
    let (same, _) = xor_pair_nodes();
    run_scenario(
        "xor-lose-two-same-set",
        Scenario {
            scheme: XOR_PAIRS,
            lose: lose(&[1, same]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::NoRestart,
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn rs2_rebuilds_two_lost_nodes() {
    let plan = build_sets(&groups(), 4, 3).expect("sets");
    assert!(
        plan.sets
            .iter()
            .all(|s| s.iter().filter(|&&r| matches!(node_of(r), 1 | 2)).count() <= 2),
        "RS sets of 4 hold at most two ranks of n1 and n2: {:?}",
        plan.sets
    );
    run_scenario(
        "rs2-lose-two",
        Scenario {
            scheme: RS2,
            lose: lose(&[1, 2]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn rs2_loses_the_checkpoint_when_three_nodes_are_lost() {
    run_scenario(
        "rs2-lose-three",
        Scenario {
            scheme: RS2,
            lose: lose(&[1, 2, 3]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::NoRestart,
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn partner_loses_the_checkpoint_when_a_node_and_its_partner_are_lost() {
    let plan = partner_plan(&groups(), 1).expect("partners");
    let partner_node = node_of(plan.rhs[2]);
    assert_ne!(partner_node, 1, "rank 2's copy is on another node");
    run_scenario(
        "partner-lose-node-and-partner",
        Scenario {
            scheme: PARTNER,
            lose: lose(&[1, partner_node]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::NoRestart,
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn xor_rebuilds_a_file_with_a_flipped_bit() {
    run_scenario(
        "xor-bit-flip",
        Scenario {
            scheme: XOR,
            lose: Vec::new(),
            flip_bit: true,
            then_lose: None,
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn single_drops_a_checkpoint_with_a_flipped_bit_and_uses_the_older() {
    run_scenario(
        "single-bit-flip",
        Scenario {
            scheme: SINGLE,
            lose: Vec::new(),
            flip_bit: true,
            then_lose: None,
            expect: Expect::Cache(2),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn partner_rebuilds_two_lost_nodes_that_hold_no_copy_of_each_other() {
    let plan = partner_plan(&groups(), 1).expect("partners");
    let pair = |a: usize, b: usize| {
        (0..RANKS).any(|r| {
            let (from, to) = (node_of(r), node_of(plan.rhs[r]));
            (from == a && to == b) || (from == b && to == a)
        })
    };
    let other = (2..NODES)
        .find(|&n| !pair(1, n))
        .expect("some node among n2, n3 holds no copy of n1's ranks and n1 none of its");
    run_scenario(
        "partner-lose-two-unrelated",
        Scenario {
            scheme: PARTNER,
            lose: lose(&[1, other]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::Rebuilt(3),
        },
    );
}

#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn rs2_rebuilds_when_rank_0s_node_is_one_of_two_lost() {
    run_scenario(
        "rs2-lose-n0-n3",
        Scenario {
            scheme: RS2,
            lose: lose(&[0, 3]),
            flip_bit: false,
            then_lose: None,
            expect: Expect::Rebuilt(3),
        },
    );
}

/// A relaunch with 6 ranks (3 nodes) cannot use 8-rank checkpoints: SCR
/// must say so (skipped) and offer no restart, never hand out files.
#[test]
#[ignore = "MPI jobs: run by ci/tests.d/cache-tier.sh"]
fn xor_restart_with_fewer_ranks_is_skipped_not_misassigned() {
    let name = "xor-fewer-ranks";
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {name}: {why}");
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix(&format!("cache-tier-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut cl = SimCluster::new(tmp.path(), app_bin()).expect("cluster dirs");
    cl.set("SCR_CACHE_SIZE", "2");
    // The cache tier alone: nothing reaches the prefix to fetch from.
    cl.set("SCR_FLUSH", "0");
    for (k, v) in XOR {
        cl.set(k, v);
    }
    let seed = pick_seed();
    let args = |n: u64| -> Vec<String> {
        [
            "--seed".to_string(),
            seed.to_string(),
            "--mean-bytes".to_string(),
            MEAN_BYTES.to_string(),
            "--checkpoints".to_string(),
            n.to_string(),
        ]
        .into()
    };
    let mut a1 = args(3);
    a1.extend(["--fail-after".to_string(), "3".to_string()]);
    let run1 = cl.run(&["n0", "n1", "n2", "n3"], &a1).expect("run 1");
    assert_eq!(run1.crashed_after, Some(3), "{}", fmt_run("run 1", &run1));
    let run2 = cl.run(&["n0", "n1", "n2"], &args(1)).expect("run 2");
    let context = format!(
        "{}\n{}",
        fmt_run("run 1", &run1),
        fmt_run("run 2 (6 ranks)", &run2)
    );
    assert!(run2.mismatch_lines().is_empty(), "WRONG BYTES:\n{context}");
    let s = run2.summary.clone().expect(&context);
    assert_eq!(
        (s.restart.as_deref(), s.status.as_str()),
        (None, "ok"),
        "{context}"
    );
    let init = run2
        .app_lines()
        .into_iter()
        .find(|l| l.starts_with("SCR_APP init"))
        .unwrap_or("")
        .to_string();
    assert!(
        !init.contains("skipped_ids=-"),
        "the 8-rank checkpoints are reported as skipped: {init}\n{context}"
    );
    report(name, &["relaunch with 6 ranks".to_string()], &run1, &run2);
}
