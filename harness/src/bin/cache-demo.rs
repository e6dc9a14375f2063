//! `cache-demo`: the cache tier's demonstration (run by `ci/demo`).
//!
//! `cache-demo --app target/release/scr_app --work target/demo/cache
//! [--scheme XOR] [--checkpoints 3] [--mean-bytes 262144] [--seed 11]
//! [--lose n1] [--timeout-s 120]`
//!
//! 1. Runs `scr_app` with 8 ranks on 4 simulated nodes `n0`..`n3` (each a
//!    directory tree under the work directory): it writes `--checkpoints`
//!    checkpoints with the chosen redundancy scheme and then crashes.
//! 2. Loses node `--lose` by removing its whole tree (cache and control
//!    directories).
//! 3. Relaunches the same 8 ranks on the 3 surviving nodes plus a spare
//!    `n4`; `scr_app` restarts from what SCR offers, verifies every byte
//!    against the deterministic data plan, and writes one more checkpoint.
//!
//! The last line says what happened. Exit code 0 only when the newest
//! checkpoint was restored and every byte of it matched (the verified byte
//! count is also checked against the plan); 1 when the restart found wrong
//! bytes, 2 when the checkpoint was lost or a run failed, 3 on bad usage or
//! a job that could not be launched or timed out.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use harness::app::{AppRun, SimCluster};
use testing::data::file_plan;

const NODES: usize = 4;
const PER_NODE: usize = 2;

#[derive(Parser, Debug)]
#[command(
    about = "Checkpoint on 4 simulated nodes, lose one, restart on the survivors plus a spare"
)]
struct Args {
    /// The scr_app binary.
    #[arg(long)]
    app: PathBuf,
    /// Work directory (emptied first): node trees and the prefix.
    #[arg(long)]
    work: PathBuf,
    /// Redundancy scheme (SCR_COPY_TYPE).
    #[arg(long, default_value = "XOR")]
    scheme: String,
    /// Checkpoints before the crash.
    #[arg(long, default_value_t = 3)]
    checkpoints: u64,
    /// Mean file size in bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    mean_bytes: u64,
    /// Seed of the data.
    #[arg(long, default_value_t = 11)]
    seed: u64,
    /// The node to lose (n0..n3).
    #[arg(long, default_value = "n1")]
    lose: String,
    /// Bound on each job, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
}

fn show(label: &str, run: &AppRun) {
    println!(
        "-- {label}: exit code {}, {:.1} s",
        run.output.code(),
        run.output.elapsed.as_secs_f64()
    );
    for l in run.app_lines() {
        println!("   {l}");
    }
}

fn dump(run: &AppRun) {
    eprintln!("{}", run.transcript());
}

fn main() -> ExitCode {
    let a = Args::parse();
    let nodes: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
    let Some(lost_index) = nodes.iter().position(|n| *n == a.lose) else {
        eprintln!("cache-demo: --lose must be one of {nodes:?}");
        return ExitCode::from(3);
    };
    if a.work.exists() {
        if let Err(e) = std::fs::remove_dir_all(&a.work) {
            eprintln!("cache-demo: cannot empty {}: {e}", a.work.display());
            return ExitCode::from(3);
        }
    }
    let mut cl = match SimCluster::new(&a.work, &a.app) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cache-demo: {}: {e}", a.work.display());
            return ExitCode::from(3);
        }
    };
    cl.ranks_per_node = PER_NODE;
    cl.timeout = Duration::from_secs(a.timeout_s);
    cl.set("SCR_COPY_TYPE", &a.scheme)
        .set("SCR_CACHE_SIZE", "2");
    let ranks = NODES * PER_NODE;
    let common = |n: u64| -> Vec<String> {
        [
            "--seed",
            &a.seed.to_string(),
            "--mean-bytes",
            &a.mean_bytes.to_string(),
            "--checkpoints",
            &n.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    println!(
        "demo: {ranks} ranks of scr_app on {NODES} simulated nodes {} ({PER_NODE} per node; node trees under {}), SCR_COPY_TYPE={}, seed {}, mean file {} bytes",
        nodes.join(","),
        a.work.display(),
        a.scheme,
        a.seed,
        a.mean_bytes
    );

    // 1. Checkpoints, then a crash.
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let mut args1 = common(a.checkpoints);
    args1.extend(["--fail-after".to_string(), a.checkpoints.to_string()]);
    let run1 = match cl.run(&names, &args1) {
        Ok(r) => r,
        Err(e) => {
            println!("demo: FAILED: run 1 did not finish: {e}");
            return ExitCode::from(3);
        }
    };
    show("run 1 (write, then crash)", &run1);
    if run1.crashed_after != Some(a.checkpoints) {
        dump(&run1);
        println!(
            "demo: FAILED: run 1 did not complete {} checkpoints with {} (see its output above)",
            a.checkpoints, a.scheme
        );
        return ExitCode::from(2);
    }
    let newest = format!("ckpt.{}", a.checkpoints);

    // 2. Lose a node.
    if let Err(e) = cl.remove_node(&a.lose) {
        println!("demo: FAILED: removing {}: {e}", a.lose);
        return ExitCode::from(3);
    }
    println!(
        "-- node {} lost: removed {}",
        a.lose,
        cl.node_root(&a.lose).display()
    );

    // 3. Relaunch on the survivors plus a spare.
    let mut relaunch = nodes.clone();
    relaunch[lost_index] = format!("n{NODES}");
    let names2: Vec<&str> = relaunch.iter().map(String::as_str).collect();
    println!(
        "-- relaunch on {} (ranks of {} now on spare n{NODES})",
        relaunch.join(","),
        a.lose
    );
    let run2 = match cl.run(&names2, &common(1)) {
        Ok(r) => r,
        Err(e) => {
            println!("demo: FAILED: run 2 did not finish: {e}");
            return ExitCode::from(3);
        }
    };
    show("run 2 (restart, verify every byte, write one more)", &run2);

    let mismatches = run2.mismatch_lines();
    if !mismatches.is_empty() {
        dump(&run2);
        println!(
            "demo: FAILED: WRONG BYTES after restart ({} mismatch report(s), first: {})",
            mismatches.len(),
            mismatches[0]
        );
        return ExitCode::from(1);
    }
    let Some(s) = run2.summary.clone() else {
        dump(&run2);
        println!(
            "demo: FAILED: run 2 printed no summary (exit code {})",
            run2.output.code()
        );
        return ExitCode::from(2);
    };
    if s.status != "ok" || !run2.output.success() {
        dump(&run2);
        println!(
            "demo: FAILED: run 2 status={} exit code {}",
            s.status,
            run2.output.code()
        );
        return ExitCode::from(if s.status == "MISMATCH" { 1 } else { 2 });
    }
    let restored = s.restart.as_deref().unwrap_or("none");
    let expected_bytes: u64 = s
        .restart
        .as_deref()
        .and_then(|n| n.strip_prefix("ckpt."))
        .and_then(|c| c.parse::<u64>().ok())
        .map(|c| {
            (0..ranks as u32)
                .flat_map(|r| file_plan(a.seed, r, c, a.mean_bytes))
                .map(|f| f.size_bytes)
                .sum()
        })
        .unwrap_or(0);
    if s.verified_bytes != expected_bytes {
        println!(
            "demo: FAILED: verified {} bytes of {restored}, the plan has {expected_bytes}",
            s.verified_bytes
        );
        return ExitCode::from(1);
    }
    if restored != newest {
        println!(
            "demo: LOST {newest} after losing node {}: restart={restored} source={}, {} bytes verified bit-exact (no wrong bytes, but {} did not protect the newest checkpoint)",
            a.lose, s.source, s.verified_bytes, a.scheme
        );
        return ExitCode::from(2);
    }
    let how = if s.source == "rebuilt" {
        "rebuilt"
    } else {
        "restored from cache"
    };
    println!(
        "demo: {how} {newest} after losing node {}: {ranks} ranks, {} bytes verified bit-exact",
        a.lose, s.verified_bytes
    );
    ExitCode::SUCCESS
}
