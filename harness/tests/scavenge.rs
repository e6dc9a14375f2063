//! Scavenge under real `mpirun`: 8 ranks of `scr_app` on 4 simulated
//! nodes (`n0`..`n3`, 2 ranks each) write two checkpoints and are killed
//! before any flush (SCR_FLUSH=0); one node is lost; `scr postrun` copies
//! the newest checkpoint from the survivors, rebuilds the lost node's
//! files in the prefix (XOR parity, or PARTNER copies in a second round),
//! indexes it COMPLETE and makes it CURRENT; every byte in the prefix is
//! checked against the data plan (`testing::data`); then the next
//! allocation (four new nodes, empty caches) fetches it and `scr_app`
//! verifies every byte it restarts from.
//!
//! Run with `ci/tests.d/scavenge.sh` (builds `scr_app` and `scr` first), or
//! `cargo build -p testing --bin scr_app && cargo build -p scr --bin scr --features cli &&
//! cargo test -p harness --test scavenge -- --ignored`. `SCR_APP_BIN` and
//! `SCR_BIN` override where the binaries are looked for. Without `mpirun`
//! each test says so and returns.

use std::fs;
use std::process::Command;

use harness::app::{mpirun_missing, workspace_binary, SimCluster};
use scr::records::flush::{FlushFile, FLUSH_FILE};
use scr::records::index::index_path;
use scr::records::{Index, Record};
use testing::data::{file_plan, first_mismatch};

const RANKS: usize = 8;
const NODES: usize = 4;
const PER_NODE: usize = 2;
const MEAN_BYTES: u64 = 48 * 1024;
/// The node lost in every scenario.
const LOST: usize = 2;

/// A seed under which both ranks of the lost node write bytes in ckpt.2,
/// so losing it really loses data.
fn pick_seed() -> u64 {
    (1..10_000u64)
        .find(|&s| {
            (LOST * PER_NODE..(LOST + 1) * PER_NODE).all(|r| {
                file_plan(s, r as u32, 2, MEAN_BYTES)
                    .iter()
                    .any(|f| f.size_bytes > 0)
            })
        })
        .expect("a seed with the wanted shape exists below 10000")
}

/// Every file of checkpoint `ckpt` in `<prefix>/ckpt.<ckpt>` has exactly
/// the planned bytes; returns the bytes checked.
fn verify_prefix_copy(prefix: &std::path::Path, seed: u64, ckpt: u64) -> u64 {
    let mut total = 0;
    for r in 0..RANKS {
        for spec in file_plan(seed, r as u32, ckpt, MEAN_BYTES) {
            let p = prefix.join(format!("ckpt.{ckpt}")).join(&spec.name);
            let data = fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(
                data.len() as u64,
                spec.size_bytes,
                "{}: size (seed {seed})",
                p.display()
            );
            assert_eq!(
                first_mismatch(spec.key, 0, &data),
                None,
                "{}: WRONG BYTES (seed {seed})",
                p.display()
            );
            total += spec.size_bytes;
        }
    }
    total
}

fn scenario(name: &str, scheme: &[(&str, &str)]) {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {name}: {why}");
        return;
    }
    let app = workspace_binary("SCR_APP_BIN", "scr_app");
    let scr_bin = workspace_binary("SCR_BIN", "scr");
    for b in [&app, &scr_bin] {
        assert!(
            b.is_file(),
            "{} is missing: build it first (ci/tests.d/scavenge.sh)",
            b.display()
        );
    }
    let tmp = tempfile::Builder::new()
        .prefix(&format!("scavenge-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut cl = SimCluster::new(tmp.path(), &app).expect("cluster dirs");
    cl.set("SCR_FLUSH", "0");
    for (k, v) in scheme {
        cl.set(k, v);
    }
    let seed = pick_seed();
    let nodes: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let args: Vec<String> = [
        "--seed",
        &seed.to_string(),
        "--mean-bytes",
        &MEAN_BYTES.to_string(),
        "--checkpoints",
        "2",
        "--fail-after",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = cl
        .run(&names, &args)
        .expect("the job runs and ends in time");
    assert!(
        run.crashed_after == Some(2) && run.mismatch_lines().is_empty(),
        "the job should write 2 checkpoints and die\n{}",
        run.transcript()
    );
    let prefix = cl.root.join("prefix");
    let ff = FlushFile::read_file(prefix.join(".scr").join(FLUSH_FILE)).expect("flush file");
    assert!(
        ff.need_flush(2)
            && ff.datasets[&2].name.as_deref() == Some("ckpt.2")
            && ff.datasets[&2].dir.is_none(),
        "complete recorded ckpt.2 as in cache only, SCR 3.1's way (no DIR): {ff:?}"
    );
    cl.remove_node(&nodes[LOST]).expect("lose a node");

    let out = Command::new(&scr_bin)
        .args(["postrun", "--prefix"])
        .arg(&prefix)
        .args(["--nodes", &nodes.join(","), "--down", &nodes[LOST]])
        .arg("--node-root")
        .arg(&cl.root)
        .arg("--json")
        .envs(cl.env.iter())
        .output()
        .expect("scr postrun runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let context = format!(
        "seed {seed}; scr postrun exit {:?}\n{stdout}\n{}\n--- job\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        run.transcript()
    );
    assert_eq!(out.status.code(), Some(0), "{context}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let d = &v["datasets"][0];
    assert_eq!(d["id"], 2, "the newest checkpoint: {context}");
    assert!(d["complete"] == true && d["current"] == true, "{context}");
    let idx = Index::read_file(index_path(&prefix)).expect("index");
    assert_eq!(idx.current.as_deref(), Some("ckpt.2"), "{context}");
    assert_eq!(idx.datasets[&2]["ckpt.2"].complete, Some(true));
    let bytes = verify_prefix_copy(&prefix, seed, 2);
    eprintln!("{name}: seed {seed}: ckpt.2 scavenged without {}, {bytes} bytes bit-exact; report:\n{stdout}", nodes[LOST]);
    let lost_ranks: Vec<i64> = (LOST * PER_NODE..(LOST + 1) * PER_NODE)
        .map(|r| r as i64)
        .collect();
    if scheme.contains(&("SCR_COPY_TYPE", "PARTNER")) {
        let restored: Vec<i64> = d["copies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["round"] == "partner")
            .flat_map(|c| c["report"]["ranks"].as_array().cloned().unwrap_or_default())
            .filter_map(|k| k["rank"].as_i64())
            .collect();
        assert_eq!(restored, lost_ranks, "{context}");
    } else {
        assert_eq!(
            d["index"]["rebuilt"],
            serde_json::json!(lost_ranks),
            "{context}"
        );
    }

    // The next allocation: new nodes, nothing in cache; scr_app restarts
    // from ckpt.2 fetched from the prefix and checks every byte.
    for n in &nodes {
        let _ = fs::remove_dir_all(cl.node_root(n));
    }
    let next: Vec<String> = (NODES..2 * NODES).map(|i| format!("n{i}")).collect();
    let next_names: Vec<&str> = next.iter().map(String::as_str).collect();
    let args2: Vec<String> = [
        "--seed",
        &seed.to_string(),
        "--mean-bytes",
        &MEAN_BYTES.to_string(),
        "--checkpoints",
        "1",
        "--expect-restart",
        "ckpt.2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run2 = cl.run(&next_names, &args2).expect("the relaunch runs");
    let s2 = run2.summary.clone();
    assert!(
        run2.output.success()
            && s2
                .as_ref()
                .is_some_and(|s| s.restart.as_deref() == Some("ckpt.2")
                    && s.source == "fetched"
                    && s.status == "ok"
                    && s.verified_bytes == bytes),
        "the next allocation should fetch ckpt.2 and verify {bytes} bytes\n{}\n{context}",
        run2.transcript()
    );
}

#[test]
#[ignore = "launches MPI jobs; run by ci/tests.d/scavenge.sh"]
fn xor_killed_before_flush_node_lost_postrun_rebuilds_bit_exact() {
    scenario("xor", &[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")]);
}

#[test]
#[ignore = "launches MPI jobs; run by ci/tests.d/scavenge.sh"]
fn partner_killed_before_flush_node_lost_postrun_restores_copies() {
    scenario("partner", &[("SCR_COPY_TYPE", "PARTNER")]);
}
