//! The cache tier end to end with the thread communicator: ranks as threads,
//! simulated nodes as directory trees. Checkpoint, "kill" nodes by removing
//! their trees, restart with a new rank→node mapping, and check every byte.

mod common;

use common::{restart_and_verify, run, write_ckpts, Cluster};
use scr::comm::thread::ThreadComm;
use scr::{Flags, Scr};
use std::path::Path;

#[test]
fn single_restart_in_place_same_nodes() {
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "SINGLE"), ("SCR_CACHE_SIZE", "2")];
    run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 3);
            None
        },
    );
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 5),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
}

#[test]
fn single_moves_files_to_the_new_node_of_each_rank() {
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "SINGLE")];
    run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 9, 1);
            None
        },
    );
    // Same nodes, shuffled placement: rank r now runs on node (r+1)%4.
    let got = run(
        &cl,
        8,
        |r| (r / 2 + 1) % 4,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 9),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

#[test]
fn single_loses_the_checkpoint_with_a_node() {
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "SINGLE")];
    run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 3, 1);
            None
        },
    );
    cl.kill_node(1);
    let got = run(
        &cl,
        8,
        |r| if r / 2 == 1 { 4 } else { r / 2 },
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 3),
    );
    assert!(
        got.iter().all(Option::is_none),
        "nothing to restart from: {got:?}"
    );
}

#[test]
fn misuse_is_a_typed_error() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    run(
        &cl,
        2,
        |r| r,
        &[("SCR_COPY_TYPE", "SINGLE")],
        |scr, _c| {
            let long = "x".repeat(1024);
            assert!(matches!(
                scr.start_output(Some(&long), Flags::CHECKPOINT),
                Err(scr::ScrError::NameTooLong { .. })
            ));
            let mut out = scr.start_output(Some("a"), Flags::CHECKPOINT).unwrap();
            let outside = Path::new("/etc/passwd");
            assert!(matches!(
                out.route_file(outside),
                Err(scr::ScrError::OutsidePrefix { .. })
            ));
            assert!(matches!(
                out.route_file(prefix.join("../escape")),
                Err(scr::ScrError::OutsidePrefix { .. })
            ));
            drop(out);
            assert!(matches!(scr.start_restart(), Err(scr::ScrError::NoRestart)));
            None
        },
    );
    // Names that differ across ranks.
    let res = ThreadComm::run(2, |comm| {
        let opts = cl.opts(cl.node(comm.rank()), &[("SCR_COPY_TYPE", "SINGLE")]);
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let mut scr = Scr::init_with(world, opts).unwrap();
        let r = scr
            .start_output(Some(&format!("n{}", comm.rank())), Flags::CHECKPOINT)
            .err()
            .map(|e| e.to_string());
        r
    })
    .unwrap();
    assert!(
        res.iter()
            .all(|r| r.as_deref().is_some_and(|m| m.contains("different values"))),
        "{res:?}"
    );
}

fn scheme_survives_one_node(scheme: &str, extra: &[(&str, &str)]) {
    let cl = Cluster::new();
    let mut e: Vec<(&str, &str)> = vec![
        ("SCR_COPY_TYPE", scheme),
        ("SCR_CACHE_SIZE", "2"),
        ("SCR_MPI_BUF_SIZE", "4096"),
    ];
    e.extend_from_slice(extra);
    run(
        &cl,
        8,
        |r| r / 2,
        &e,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 21, 2);
            None
        },
    );
    cl.kill_node(1);
    let got = run(
        &cl,
        8,
        |r| if r / 2 == 1 { 4 } else { r / 2 },
        &e,
        |scr, c| {
            assert_eq!(
                scr.init_report().rebuilt.len(),
                2,
                "both cached checkpoints rebuilt"
            );
            restart_and_verify(scr, c, &cl.prefix, 21)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{scheme}: {got:?}"
    );
}

#[test]
fn partner_rebuilds_a_lost_node_on_a_spare() {
    scheme_survives_one_node("PARTNER", &[]);
}

#[test]
fn xor_rebuilds_a_lost_node_on_a_spare() {
    scheme_survives_one_node("XOR", &[("SCR_SET_SIZE", "4")]);
}

#[test]
fn rs_rebuilds_a_lost_node_on_a_spare() {
    scheme_survives_one_node("RS", &[("SCR_SET_SIZE", "4"), ("SCR_SET_FAILURES", "2")]);
}

#[test]
fn xor_detects_a_flipped_bit_and_rebuilds() {
    let cl = Cluster::new();
    let e = [("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")];
    run(
        &cl,
        8,
        |r| r / 2,
        &e,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 4, 1);
            None
        },
    );
    // Flip one bit in rank 0's first file (it writes 1 + 0 % 2 = 1 file).
    let f = cl
        .root
        .join("n0/dev/shm/tester/scr.77/scr.dataset.1/ckpt.1/rank0.f0");
    let mut bytes = std::fs::read(&f).unwrap();
    assert!(!bytes.is_empty());
    bytes[0] ^= 0x10;
    std::fs::write(&f, bytes).unwrap();
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &e,
        |scr, c| {
            assert_eq!(
                scr.init_report().rebuilt,
                vec![1],
                "the damaged file was rebuilt"
            );
            restart_and_verify(scr, c, &cl.prefix, 4)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

#[test]
fn a_different_rank_count_is_reported_not_misassigned() {
    let cl = Cluster::new();
    let e = [("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")];
    run(
        &cl,
        8,
        |r| r / 2,
        &e,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 8, 1);
            None
        },
    );
    let got = ThreadComm::run(4, |comm| {
        let opts = cl.opts(cl.node(comm.rank()), &e);
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let mut scr = Scr::init_with(world, opts).unwrap();
        let skipped = scr.init_report().skipped.clone();
        let have = scr.have_restart().unwrap();
        scr.finalize().unwrap();
        (skipped, have)
    })
    .unwrap();
    for (skipped, have) in got {
        assert_eq!(
            have, None,
            "never restart 4 ranks from an 8-rank checkpoint"
        );
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0]
                .1
                .contains("written by 8 ranks but this run has 4"),
            "{skipped:?}"
        );
    }
}
