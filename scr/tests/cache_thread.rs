//! The cache tier end to end with the thread communicator: ranks as threads,
//! simulated nodes as directory trees. Checkpoint, "kill" nodes by removing
//! their trees, restart with a new rank→node mapping, and check every byte.

mod common;

use common::{restart_and_verify, run, write_ckpts, Cluster};
use scr::comm::thread::ThreadComm;
use scr::ids::DatasetId;
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
                vec![DatasetId(1)],
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

// ------------------------------------------------------------ PARTNER damage
// 8 ranks on 4 nodes (rank r on node r/2): PARTNER makes two rings of four,
// one rank per node, and each rank holds the copies of its left
// neighbour's files.

const PARTNER: [(&str, &str); 3] = [
    ("SCR_COPY_TYPE", "PARTNER"),
    ("SCR_CACHE_SIZE", "2"),
    ("SCR_MPI_BUF_SIZE", "4096"),
];

fn node_of(r: usize) -> usize {
    r / 2
}

/// Files rank `r` writes per checkpoint (see `common::write_ckpts`).
fn files_of(r: usize) -> usize {
    if r % 3 == 2 {
        0
    } else {
        1 + r % 2
    }
}

/// A rank with files whose holder (the rank storing its copies) has files
/// too, and that holder.
fn neighbours_with_files() -> (usize, usize) {
    let nodes: Vec<usize> = (0..8).map(node_of).collect();
    let plan = scr::redundancy::sets::partner_plan(&nodes, 1).unwrap();
    (0..8)
        .map(|a| (a, plan.rhs[a]))
        .find(|&(a, b)| files_of(a) > 0 && files_of(b) > 0 && node_of(a) != node_of(b))
        .expect("two neighbours with files")
}

/// The one file called `name` of dataset `dset` in node `node`'s tree.
fn cache_file(cl: &common::Cluster, node: usize, dset: i64, name: &str) -> std::path::PathBuf {
    let all = common::files_below(&cl.root.join(format!("n{node}")));
    let want = format!("scr.dataset.{dset}/");
    let found: Vec<_> = all
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|f| f == name) && p.to_string_lossy().contains(&want))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name} of dataset {dset} on n{node}: {found:?}"
    );
    found.into_iter().next().unwrap()
}

/// Init kept checkpoint 1 and deleted checkpoint 2 (damaged beyond what
/// its scheme rebuilds).
fn assert_only_ckpt_1_left(scr: &Scr) {
    let report = scr.init_report();
    assert_eq!(report.available, vec![DatasetId(1)], "{report:?}");
    assert_eq!(
        report.lost.iter().map(|l| l.0).collect::<Vec<_>>(),
        vec![DatasetId(2)],
        "{report:?}"
    );
}

/// Where rank `r` runs once node `dead` is gone: on the spare n4.
fn on_spare(dead: usize) -> impl Fn(usize) -> usize + Sync {
    move |r| {
        if node_of(r) == dead {
            4
        } else {
            node_of(r)
        }
    }
}

fn flip_bit(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    assert!(!bytes.is_empty(), "{} has bytes to flip", path.display());
    let at = bytes.len() / 2;
    bytes[at] ^= 0x04;
    std::fs::write(path, bytes).unwrap();
}

/// The name of the PARTNER copy of file `f` of rank `owner`
/// (`<basename>.partner.<owner>.<index>`; its files are listed by name, so
/// `f` is also the index).
fn copy_name(owner: usize, f: usize) -> String {
    format!("rank{owner}.f{f}.partner.{owner}.{f}")
}

#[test]
fn partner_rebuilds_damaged_own_files_of_two_ring_neighbours_bit_exact() {
    let cl = Cluster::new();
    let (a, b) = neighbours_with_files();
    run(&cl, 8, node_of, &PARTNER, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, 31, 1);
        None
    });
    // One own file of each: a's copy is intact on b's node, b's copy on
    // the node of b's right neighbour.
    flip_bit(&cache_file(&cl, node_of(a), 1, &format!("rank{a}.f0")));
    flip_bit(&cache_file(&cl, node_of(b), 1, &format!("rank{b}.f0")));
    let got = run(&cl, 8, node_of, &PARTNER, |scr, c| {
        let report = scr.init_report().clone();
        assert_eq!(report.rebuilt, vec![DatasetId(1)], "{report:?}");
        assert!(report.lost.is_empty(), "{report:?}");
        restart_and_verify(scr, c, &cl.prefix, 31)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "ranks {a} and {b}: {got:?}"
    );
}

#[test]
fn partner_never_restores_from_a_damaged_held_copy() {
    let cl = Cluster::new();
    let (a, b) = neighbours_with_files();
    run(&cl, 8, node_of, &PARTNER, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, 32, 2);
        None
    });
    // In ckpt.2 (dataset 2): a's own file and the copy b holds of it.
    flip_bit(&cache_file(&cl, node_of(a), 2, &format!("rank{a}.f0")));
    flip_bit(&cache_file(&cl, node_of(b), 2, &copy_name(a, 0)));
    let got = run(&cl, 8, node_of, &PARTNER, |scr, c| {
        assert_only_ckpt_1_left(scr);
        restart_and_verify(scr, c, &cl.prefix, 32)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "the older checkpoint, never wrong bytes: {got:?}"
    );
}

#[test]
fn partner_recreates_a_damaged_held_copy_and_a_later_loss_still_recovers() {
    let cl = Cluster::new();
    let (a, b) = neighbours_with_files();
    run(&cl, 8, node_of, &PARTNER, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, 33, 1);
        None
    });
    let copy = cache_file(&cl, node_of(b), 1, &copy_name(a, 0));
    flip_bit(&copy);
    let got = run(&cl, 8, node_of, &PARTNER, |scr, c| {
        let report = scr.init_report().clone();
        assert_eq!(
            report.rebuilt,
            vec![DatasetId(1)],
            "the copy was re-created: {report:?}"
        );
        restart_and_verify(scr, c, &cl.prefix, 33)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        common::data(33, a, 1, 0),
        "the held copy is whole again"
    );
    // Now a's node goes: its files come back from the re-created copy.
    cl.kill_node(node_of(a));
    let spare = on_spare(node_of(a));
    let got = run(&cl, 8, spare, &PARTNER, |scr, c| {
        let report = scr.init_report().clone();
        assert_eq!(report.rebuilt, vec![DatasetId(1)], "{report:?}");
        restart_and_verify(scr, c, &cl.prefix, 33)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

/// Kill node 1 (ranks 2 and 3; the spare n4 takes them) after rank 0's
/// file in checkpoint 2 got a flipped bit: the restart checks sizes first,
/// so rank 0 looks intact until the rebuild's read of its bytes.
fn lost_node_and_a_damaged_survivor(e: &[(&str, &str)], seed: u64) -> Vec<Option<String>> {
    let cl = Cluster::new();
    run(&cl, 8, node_of, e, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, seed, 2);
        None
    });
    flip_bit(&cache_file(&cl, 0, 2, "rank0.f0"));
    cl.kill_node(1);
    let spare = on_spare(1);
    run(&cl, 8, spare, e, |scr, c| {
        let report = scr.init_report().clone();
        let got = restart_and_verify(scr, c, &cl.prefix, seed);
        Some(format!("{got:?} {:?}", report.lost))
    })
}

#[test]
fn rs_rebuilds_a_lost_node_and_a_survivor_damaged_since_the_size_check() {
    // The set of rank 0 lost rank 2 with node 1, and rank 0's CRC fails in
    // the rebuild's pass: a whole check then finds it, and RS with two
    // parity chunks rebuilds both, bit-exact.
    let e = [
        ("SCR_COPY_TYPE", "RS"),
        ("SCR_SET_SIZE", "4"),
        ("SCR_SET_FAILURES", "2"),
        ("SCR_CACHE_SIZE", "2"),
        ("SCR_MPI_BUF_SIZE", "4096"),
    ];
    let got = lost_node_and_a_damaged_survivor(&e, 41);
    assert!(
        got.iter()
            .all(|g| g.as_deref() == Some("Some(\"ckpt.2\") []")),
        "{got:?}"
    );
}

#[test]
fn xor_never_rebuilds_from_a_survivor_damaged_since_the_size_check() {
    // XOR cannot rebuild a lost member and a damaged one of the same set:
    // checkpoint 2 is deleted everywhere, and the restart is checkpoint 1,
    // rebuilt from intact bytes — never wrong ones.
    let e = [
        ("SCR_COPY_TYPE", "XOR"),
        ("SCR_SET_SIZE", "4"),
        ("SCR_CACHE_SIZE", "2"),
        ("SCR_MPI_BUF_SIZE", "4096"),
    ];
    let got = lost_node_and_a_damaged_survivor(&e, 42);
    assert!(
        got.iter().all(|g| g
            .as_deref()
            .is_some_and(|s| s.starts_with("Some(\"ckpt.1\") [(DatasetId(2)"))),
        "{got:?}"
    );
}

#[test]
fn partner_never_rebuilds_from_a_damaged_copy_it_lends_after_a_node_loss() {
    // b holds the copies of a's files and lends them when a's node is lost
    // without reading them first: the receiver checks every byte, finds the
    // flipped bit, and checkpoint 2 is deleted; checkpoint 1 comes back.
    let cl = Cluster::new();
    let (a, b) = neighbours_with_files();
    run(&cl, 8, node_of, &PARTNER, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, 43, 2);
        None
    });
    flip_bit(&cache_file(&cl, node_of(b), 2, &copy_name(a, 0)));
    cl.kill_node(node_of(a));
    let spare = on_spare(node_of(a));
    let got = run(&cl, 8, spare, &PARTNER, |scr, c| {
        assert_only_ckpt_1_left(scr);
        restart_and_verify(scr, c, &cl.prefix, 43)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "ranks {a} and {b}: {got:?}"
    );
}

#[test]
fn partner_rebuilds_a_lost_node_and_a_damaged_file_its_check_finds_beside_the_transfers() {
    // Node 1 is lost; rank c elsewhere has a flipped bit in its own file,
    // which it does not lend: its check runs beside the transfers of the
    // first round, finds it, and a second round brings c's file back from
    // the copy its holder keeps. Checkpoint 2 restarts bit-exact.
    let nodes: Vec<usize> = (0..8).map(node_of).collect();
    let plan = scr::redundancy::sets::partner_plan(&nodes, 1).unwrap();
    let c = (0..8)
        .find(|&c| files_of(c) > 0 && node_of(c) != 1 && node_of(plan.rhs[c]) != 1)
        .expect("a rank with files away from node 1, its holder too");
    let cl = Cluster::new();
    run(&cl, 8, node_of, &PARTNER, |scr, comm| {
        write_ckpts(scr, comm, &cl.prefix, 44, 2);
        None
    });
    flip_bit(&cache_file(&cl, node_of(c), 2, &format!("rank{c}.f0")));
    cl.kill_node(1);
    let got = run(&cl, 8, on_spare(1), &PARTNER, |scr, comm| {
        let report = scr.init_report().clone();
        assert!(report.lost.is_empty(), "{report:?}");
        assert_eq!(
            report.rebuilt,
            vec![DatasetId(1), DatasetId(2)],
            "{report:?}"
        );
        restart_and_verify(scr, comm, &cl.prefix, 44)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "rank {c}: {got:?}"
    );
}

#[test]
fn a_filemap_one_rank_cannot_write_at_init_fails_init_on_every_rank_then_the_rebuild_works() {
    // After a node loss, rank 4's filemap path (node 2, local rank 0) is a
    // non-empty directory, so the filemap SCR_Init scatters to it cannot
    // be renamed into place. Every rank's SCR_Init must fail (none left
    // waiting in a collective the failing one skipped, which before
    // `Job::agree` timed out after 60 s); once the path is writable again,
    // the restart rebuilds the lost node and restores checkpoint 3.
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")];
    let node_of = |r: usize| r / 2;
    run(&cl, 8, node_of, &extra, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, 7, 3);
        None
    });
    cl.kill_node(1);
    let fm = common::files_below(&cl.root.join("n2"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "filemap_0.scrinfo"))
        .expect("node 2 has local rank 0's filemap");
    // A failed write leaves the old file in place (temporary file, then
    // rename): the test keeps its bytes to put back.
    let old = std::fs::read(&fm).unwrap();
    std::fs::remove_file(&fm).unwrap();
    std::fs::create_dir(&fm).unwrap();
    std::fs::write(fm.join("in-the-way"), b"x").unwrap();
    let inits: Vec<Result<(), String>> = ThreadComm::run(8, |comm| {
        let opts = cl.opts(cl.node(node_of(comm.rank())), &extra);
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let init = match Scr::init_with(world, opts) {
            Ok(scr) => {
                drop(scr);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        // An MPI application goes on after a failed SCR_Init (a barrier
        // stands for what it does next): a rank that returned alone would
        // meet the others still inside SCR_Init here, not in the barrier.
        comm.barrier().unwrap();
        init
    })
    .unwrap();
    assert!(inits.iter().all(Result::is_err), "{inits:?}");
    assert!(
        inits[4].as_ref().unwrap_err().contains("filemap"),
        "rank 4 names its own failure: {inits:?}"
    );
    std::fs::remove_dir_all(&fm).unwrap();
    std::fs::write(&fm, old).unwrap();
    let got = run(&cl, 8, node_of, &extra, |scr, c| {
        restart_and_verify(scr, c, &cl.prefix, 7)
    });
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
}

/// Files held for a rank that now runs on another node move to it in
/// pieces of SCR_MPI_BUF_SIZE (here its least, 4 KiB): files of several
/// pieces, of exactly one, and empty ones arrive whole, every byte checked.
#[test]
fn files_move_to_their_rank_s_new_node_in_pieces_of_the_mpi_buffer() {
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "SINGLE"), ("SCR_MPI_BUF_SIZE", "4096")];
    let bytes = |rank: usize, f: usize| -> Vec<u8> {
        let len = [4096 * 3 + 17 * rank, 4096, 0][f];
        (0..len).map(|i| (i * 31 + rank * 7 + f) as u8).collect()
    };
    run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            let mut out = scr.start_output(Some("ckpt.1"), Flags::CHECKPOINT).unwrap();
            for f in 0..3 {
                let p = out
                    .route_file(cl.prefix.join(format!("ckpt.1/r{}.f{f}", c.rank())))
                    .unwrap();
                std::fs::write(&p, bytes(c.rank(), f)).unwrap();
            }
            assert!(out.complete(true).unwrap());
            None
        },
    );
    // The two nodes swap their ranks.
    let got = run(
        &cl,
        4,
        |r| 1 - r / 2,
        &extra,
        |scr, c| {
            let name = scr.have_restart().unwrap()?;
            let mut r = scr.start_restart().unwrap();
            let mut ok = true;
            for f in 0..3 {
                let p = r
                    .route_file(cl.prefix.join(format!("ckpt.1/r{}.f{f}", c.rank())))
                    .unwrap();
                ok &= std::fs::read(&p).ok() == Some(bytes(c.rank(), f));
            }
            assert!(r.complete(ok).unwrap());
            Some(format!("{name} {ok}"))
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1 true")),
        "{got:?}"
    );
}
