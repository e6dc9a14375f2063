//! SCR_GLOBAL_RESTART with the thread communicator: a checkpoint written by
//! 8 ranks, its newest copy only in cache (a node of it lost), is rebuilt
//! and flushed at the next init, then every restart goes through the
//! prefix and reads in place — with 8 ranks, and with 4 and 6 ranks, each
//! rank reading the files it needs by path (writer `q` read by rank
//! `q mod size`), every byte checked. Without SCR_GLOBAL_RESTART a run on
//! another rank count restarts from nothing. The same with bypass mode
//! (SCR_CACHE_BYPASS=1), where the checkpoints are in the prefix already.
//! Under real mpirun: harness/tests/params.rs (`global_restart_*`).

mod common;

use std::path::{Path, PathBuf};

use common::{data, run, write_ckpts, Cluster};
use scr::comm::Comm;
use scr::records::index::index_path;
use scr::records::{Index, Record};
use scr::Scr;

const SEED: u64 = 31;

fn files_of(rank: usize) -> usize {
    if rank % 3 == 2 {
        0
    } else {
        1 + rank % 2
    }
}

/// Restart reading the files of every writer `q` of `writers` with
/// `q mod size = rank`, by their paths in the prefix; every byte checked.
/// Returns `<name> in_place=<all ranks read in place> files=<read in all>`.
fn restart_global(scr: &mut Scr, c: &dyn Comm, prefix: &Path, writers: usize) -> Option<String> {
    let (rank, size) = (c.rank(), c.size());
    let name = scr.have_restart().unwrap()?;
    let n: usize = name.trim_start_matches("ckpt.").parse().unwrap();
    let mut r = scr.start_restart().unwrap();
    let mut in_place = true;
    let mut ok = true;
    let mut files = 0;
    for q in (rank..writers).step_by(size) {
        for f in 0..files_of(q) {
            let asked = prefix.join(format!("ckpt.{n}/rank{q}.f{f}"));
            let p = r.route_file(&asked).unwrap();
            in_place &= p == asked;
            let good = std::fs::read(&p).unwrap() == data(SEED, q, n, f);
            assert!(
                good,
                "rank {rank} of {size}: bytes of writer {q}'s {asked:?}"
            );
            ok &= good;
            files += 1;
        }
    }
    // A file of no writer is not offered.
    assert!(r
        .route_file(prefix.join(format!("ckpt.{n}/rank{writers}.f0")))
        .is_err());
    assert!(r.complete(ok).unwrap());
    let all = c.allgather_bytes(&(files as u64).to_be_bytes()).unwrap();
    let total: u64 = all
        .iter()
        .map(|b| u64::from_be_bytes(b.as_slice().try_into().unwrap()))
        .sum();
    let all_in_place = c.all_true(in_place).unwrap();
    // What every rank saw, for rank 0 to report: the restart name,
    // whether every routed path was the one asked for in the prefix (read
    // in place), and how many files were read in all.
    Some(format!("{name} in_place={all_in_place} files={total}"))
}

fn total_files(writers: usize) -> usize {
    (0..writers).map(files_of).sum()
}

/// Every file below the simulated nodes' trees named like an application
/// file of checkpoint `c`.
fn cached_files_of(cl: &Cluster, c: usize) -> Vec<PathBuf> {
    let mut all = common::node_tree_files(cl);
    all.retain(|p| {
        p.parent().is_some_and(|d| d.ends_with(format!("ckpt.{c}")))
            && p.file_name().unwrap().to_string_lossy().starts_with("rank")
    });
    all
}

fn index_names(cl: &Cluster) -> Vec<String> {
    let idx = Index::read_file(index_path(&cl.prefix)).expect("index readable");
    let mut names: Vec<String> = idx
        .datasets
        .values()
        .flat_map(|copies| copies.values())
        .filter_map(|e| e.dataset.as_ref().and_then(|ds| ds.name.clone()))
        .collect();
    names.sort();
    names
}

const GLOBAL: (&str, &str) = ("SCR_GLOBAL_RESTART", "1");

#[test]
fn global_restart_flushes_the_cached_checkpoint_and_restarts_on_8_4_and_6_ranks() {
    let cl = Cluster::new();
    let xor = [("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")];
    // 8 ranks on 4 nodes write 3 checkpoints; nothing is flushed.
    run(
        &cl,
        8,
        |r| r / 2,
        &xor,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, SEED, 3);
            None
        },
    );
    assert!(!index_path(&cl.prefix).exists(), "nothing flushed yet");
    // A node is lost: the next init rebuilds ckpt.3, flushes it, and the
    // restart reads its copy in the prefix.
    cl.kill_node(1);
    let global: Vec<(&str, &str)> = xor.iter().copied().chain([GLOBAL]).collect();
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &global,
        |scr, c| {
            let rebuilt = scr
                .init_report()
                .rebuilt
                .iter()
                .map(|d| d.get())
                .collect::<Vec<_>>();
            assert!(rebuilt.contains(&3), "ckpt.3 rebuilt in cache: {rebuilt:?}");
            restart_global(scr, c, &cl.prefix, 8)
        },
    );
    let want = format!("ckpt.3 in_place=true files={}", total_files(8));
    assert_eq!(got[0].as_deref(), Some(want.as_str()));
    assert!(index_names(&cl).contains(&"ckpt.3".to_string()));
    assert!(
        cached_files_of(&cl, 3).is_empty(),
        "the flushed checkpoint left the cache: {:?}",
        cached_files_of(&cl, 3)
    );
    // Another rank count reads the prefix copy in place, any rank any file.
    for ranks in [4, 6] {
        let got = run(
            &cl,
            ranks,
            |r| r / 2,
            &global,
            |scr, c| restart_global(scr, c, &cl.prefix, 8),
        );
        assert_eq!(got[0].as_deref(), Some(want.as_str()), "{ranks} ranks");
    }
    // Without SCR_GLOBAL_RESTART, 4 ranks cannot use an 8-rank checkpoint.
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &xor,
        |scr, _| scr.have_restart().unwrap(),
    );
    assert_eq!(got[0], None, "a plain restart on 4 ranks has nothing");
}

#[test]
fn global_restart_reads_bypass_checkpoints_on_another_rank_count() {
    let cl = Cluster::new();
    let bypass = [("SCR_CACHE_BYPASS", "1"), ("SCR_COPY_TYPE", "XOR")];
    run(
        &cl,
        8,
        |r| r / 2,
        &bypass,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, SEED, 2);
            None
        },
    );
    let global: Vec<(&str, &str)> = bypass.iter().copied().chain([GLOBAL]).collect();
    let want = format!("ckpt.2 in_place=true files={}", total_files(8));
    for ranks in [4, 6, 8] {
        let got = run(
            &cl,
            ranks,
            |r| r / 2,
            &global,
            |scr, c| restart_global(scr, c, &cl.prefix, 8),
        );
        assert_eq!(got[0].as_deref(), Some(want.as_str()), "{ranks} ranks");
    }
    // A checkpoint written by 6 ranks after a global restart on 6 is read
    // back by 4.
    run(
        &cl,
        6,
        |r| r / 2,
        &global,
        |scr, c| {
            let got = restart_global(scr, c, &cl.prefix, 8);
            assert!(got.is_some());
            let rank = c.rank();
            let mut out = scr
                .start_output(Some("ckpt.3"), scr::Flags::CHECKPOINT)
                .unwrap();
            for f in 0..files_of(rank) {
                let p = out
                    .route_file(cl.prefix.join(format!("ckpt.3/rank{rank}.f{f}")))
                    .unwrap();
                std::fs::write(&p, data(SEED, rank, 3, f)).unwrap();
            }
            assert!(out.complete(true).unwrap());
            None
        },
    );
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &global,
        |scr, c| restart_global(scr, c, &cl.prefix, 6),
    );
    let want = format!("ckpt.3 in_place=true files={}", total_files(6));
    assert_eq!(got[0].as_deref(), Some(want.as_str()));
}
