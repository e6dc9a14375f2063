//! `scr index --upgrade`: a prefix in the earlier layout (index version 1)
//! moves to SCR 3.1's in place, its files untouched, and restarts; an
//! upgrade stopped in the middle leaves a prefix that restarts, and running
//! it again finishes it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{copy_tree, data, restart_and_verify, run, write_ckpts, Cluster};
use scr::records::index::{index_path, Layout};
use scr::records::{FlushFile, Index, Rank2File, Record};
use scr::{Flags, Scr};

const EXTRA: [(&str, &str); 4] = [
    ("SCR_COPY_TYPE", "XOR"),
    ("SCR_SET_SIZE", "4"),
    ("SCR_CACHE_SIZE", "2"),
    ("SCR_FLUSH", "1"),
];

fn legacy_prefix(cl: &Cluster) {
    std::fs::create_dir_all(cl.prefix.join(".scr")).unwrap();
    Index::new(Layout::Legacy)
        .write_file(index_path(&cl.prefix))
        .unwrap();
}

fn wipe_caches(cl: &Cluster, nodes: usize) {
    for n in 0..nodes {
        let _ = std::fs::remove_dir_all(cl.root.join(format!("n{n}")));
    }
}

fn upgrade(prefix: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(["index", "--upgrade", "--prefix", prefix.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn index(prefix: &Path) -> Index {
    Index::read_file(index_path(prefix)).unwrap()
}

#[test]
fn an_old_prefix_is_upgraded_in_place_and_restarts() {
    let cl = Cluster::new();
    legacy_prefix(&cl);
    run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 3);
            None
        },
    );
    assert!(cl.prefix.join("ckpt.3/.scr/summary.scr").is_file());
    let out = upgrade(&cl.prefix);
    assert!(out.contains("dataset 3: ckpt.3/.scr"), "{out}");
    let idx = index(&cl.prefix);
    assert_eq!(idx.layout(), Layout::Scr31);
    assert_eq!(idx.current.as_deref(), Some("ckpt.3"));
    assert_eq!(idx.dataset_id_by_dir("ckpt.2"), Some(2));
    // LLNL's rank2file, keys relative to the prefix; old metadata gone;
    // the flush file has no directories left.
    let meta = cl.prefix.join(".scr/scr.dataset.3");
    let map = Rank2File::read_split_named(&meta, "rank2file").unwrap();
    assert!(
        map.rank[&0].files.contains_key("ckpt.3/rank0.f0"),
        "{map:?}"
    );
    assert!(!cl.prefix.join("ckpt.3/.scr").exists());
    let ff = FlushFile::read_file(cl.prefix.join(".scr/flush.scr")).unwrap();
    assert!(ff.datasets.values().all(|e| e.dir.is_none()), "{ff:?}");
    // Running it again changes nothing.
    assert!(upgrade(&cl.prefix).contains("already version 2"));
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 5),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
}

/// Checkpoints "one" and "two", each rank's file routed straight into the
/// prefix: the old layout put them in scr.dataset.<id> with ORIGDIR ".".
fn write_routed_into_prefix(cl: &Cluster) {
    run(
        cl,
        4,
        |r| r / 2,
        &EXTRA,
        |scr: &mut Scr, c| {
            let rank = c.rank();
            for (i, name) in ["one", "two"].iter().enumerate() {
                let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("r{rank}.dat")))
                    .unwrap();
                std::fs::write(&p, data(9, rank, i + 1, 0)).unwrap();
                assert!(out.complete(true).unwrap());
            }
            None
        },
    );
}

/// A new allocation restarts from "two" and reads its bytes back at the
/// path the application routed them to.
fn restarts_from_two(cl: &Cluster) {
    wipe_caches(cl, 2);
    let got = run(
        cl,
        4,
        |r| r / 2,
        &EXTRA,
        |scr, c| {
            let rank = c.rank();
            let name = scr.have_restart().unwrap();
            let mut r = scr.start_restart().unwrap();
            let p = r
                .route_file(cl.prefix.join(format!("r{rank}.dat")))
                .unwrap();
            let ok = std::fs::read(&p).unwrap() == data(9, rank, 2, 0);
            assert!(ok, "rank {rank}: bytes of two");
            assert!(r.complete(ok).unwrap());
            name
        },
    );
    assert!(got.iter().all(|g| g.as_deref() == Some("two")), "{got:?}");
}

#[test]
fn an_interrupted_upgrade_leaves_a_prefix_that_restarts_and_a_rerun_finishes_it() {
    let old = Cluster::new();
    legacy_prefix(&old);
    write_routed_into_prefix(&old);
    assert!(old.prefix.join("scr.dataset.2/r0.dat").is_file());
    // The finished upgrade of a copy, to take the stopped states from.
    let done = Cluster::new();
    copy_tree(&old.prefix, &done.prefix);
    upgrade(&done.prefix);

    // Stopped in step 1: new metadata directories written (one of them
    // still staged), the version-1 index not yet replaced.
    let a = Cluster::new();
    copy_tree(&old.prefix, &a.prefix);
    copy_tree(
        &done.prefix.join(".scr/scr.dataset.2"),
        &a.prefix.join(".scr/scr.dataset.2"),
    );
    copy_tree(
        &done.prefix.join(".scr/scr.dataset.1"),
        &a.prefix
            .join(".scr/scr.dataset.1.upgrade/.scr/scr.dataset.1"),
    );
    assert_eq!(index(&a.prefix).layout(), Layout::Legacy);
    restarts_from_two(&a);
    upgrade(&a.prefix);
    assert_eq!(index(&a.prefix).layout(), Layout::Scr31);
    assert!(!a.prefix.join(".scr/scr.dataset.1.upgrade").exists());
    restarts_from_two(&a);

    // Stopped in step 3: the version-2 index is in place, the old
    // metadata and the flush file's directories are not cleaned up yet.
    let b = Cluster::new();
    copy_tree(&done.prefix, &b.prefix);
    copy_tree(
        &old.prefix.join("scr.dataset.2/.scr"),
        &b.prefix.join("scr.dataset.2/.scr"),
    );
    std::fs::copy(
        old.prefix.join(".scr/flush.scr"),
        b.prefix.join(".scr/flush.scr"),
    )
    .unwrap();
    restarts_from_two(&b);
    assert!(upgrade(&b.prefix).contains("already version 2"));
    assert!(!b.prefix.join("scr.dataset.2/.scr").exists());
    let ff = FlushFile::read_file(b.prefix.join(".scr/flush.scr")).unwrap();
    assert!(ff.datasets.values().all(|e| e.dir.is_none()), "{ff:?}");
    restarts_from_two(&b);
}
