//! The prefix tier end to end with the thread communicator: flush to the
//! prefix directory, lose every cache (a new allocation), fetch back and
//! check every byte; fall back past a damaged copy; survive an unwritable
//! prefix; flush output before it leaves the cache; delete; async flush.

mod common;

use std::path::Path;

use common::{data, restart_and_verify, run, write_ckpts, Cluster};
use scr::records::index::{index_path, Layout};
use scr::records::{FlushFile, Index, Location, Record};
use scr::{Flags, Scr};

const XOR: [(&str, &str); 3] = [
    ("SCR_COPY_TYPE", "XOR"),
    ("SCR_SET_SIZE", "4"),
    ("SCR_CACHE_SIZE", "2"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = XOR.to_vec();
    v.extend_from_slice(extra);
    v
}

fn index(cl: &Cluster) -> Index {
    Index::read_file(index_path(&cl.prefix)).expect("index readable")
}

fn wipe_caches(cl: &Cluster, nodes: usize) {
    for n in 0..nodes {
        let _ = std::fs::remove_dir_all(cl.root.join(format!("n{n}")));
    }
}

#[test]
fn flush_every_checkpoint_then_fetch_after_losing_every_cache() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 11, 3);
            None
        },
    );
    let idx = index(&cl);
    assert_eq!(
        idx.datasets.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(idx.current.as_deref(), Some("ckpt.3"));
    for (id, dirs) in &idx.datasets {
        let e = &dirs[&format!("ckpt.{id}")];
        assert_eq!(e.complete, Some(true));
        assert!(e.flushed.is_some());
    }
    // SCR 3.1's layout: metadata in .scr/scr.dataset.<id>, nothing in
    // the application's directory but its files.
    assert_eq!(idx.layout(), Layout::Scr31);
    let meta = cl.prefix.join(".scr/scr.dataset.3");
    for f in ["summary.scr", "rank2file", "rank2file.0.0", "filemeta"] {
        assert!(meta.join(f).is_file(), "{f}");
    }
    assert!(!cl.prefix.join("ckpt.3/.scr").exists());
    // Every init records the run's node count (8 ranks, 2 a node).
    let nodes = scr::records::Nodes::read_file(cl.prefix.join(".scr/nodes.scr")).unwrap();
    assert_eq!(nodes.nodes, 4);
    let ff = FlushFile::read_file(cl.prefix.join(".scr/flush.scr")).unwrap();
    assert!(ff.location_test(3, Location::Pfs));
    assert!(!ff.location_test(3, Location::Flushing));
    // The files are where the application routed them.
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.3/rank0.f0")).unwrap(),
        data(11, 0, 3, 0)
    );

    // A new allocation: every node's cache is gone.
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(3));
            restart_and_verify(scr, c, &cl.prefix, 11)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
    let idx = index(&cl);
    assert_eq!(idx.datasets[&3]["ckpt.3"].fetched.len(), 1);
}

#[test]
fn a_damaged_copy_is_marked_failed_and_the_older_one_is_fetched() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 3, 2);
            None
        },
    );
    // Flip one bit of a flushed file of ckpt.2.
    let f = cl.prefix.join("ckpt.2/rank0.f0");
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&f, bytes).unwrap();
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            let report = scr.init_report();
            assert_eq!(report.fetched, Some(1));
            // Every rank is told which copy failed and why.
            assert_eq!(report.fetch_failed.len(), 1, "{report:?}");
            assert_eq!(report.fetch_failed[0].0, 2);
            assert!(
                report.fetch_failed[0].1.starts_with("ckpt.2: "),
                "{report:?}"
            );
            assert_eq!(report.fetch_error, None);
            restart_and_verify(scr, c, &cl.prefix, 3)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
    let idx = index(&cl);
    assert_eq!(idx.datasets[&2]["ckpt.2"].failed.len(), 1);
    assert_eq!(idx.current.as_deref(), Some("ckpt.1"));
}

#[test]
fn an_unreadable_index_is_reported_to_every_rank() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 1);
            None
        },
    );
    // Zero the index's kvtree header: it can no longer be read.
    let p = index_path(&cl.prefix);
    let mut bytes = std::fs::read(&p).unwrap();
    for b in bytes.iter_mut().take(16) {
        *b = 0;
    }
    std::fs::write(&p, bytes).unwrap();
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, _c| {
            let report = scr.init_report();
            assert_eq!(report.fetched, None);
            assert!(report.fetch_failed.is_empty(), "{report:?}");
            let why = report
                .fetch_error
                .clone()
                .expect("the index error is reported");
            assert!(why.contains("index"), "{why}");
            scr.have_restart().unwrap()
        },
    );
    assert!(got.iter().all(Option::is_none), "{got:?}");
}

#[test]
fn a_damaged_summary_or_rank2file_falls_back_too() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 4, 3);
            None
        },
    );
    // ckpt.3: truncated map (our per-file metadata, the map a fetch
    // reads); ckpt.2: summary with a flipped byte.
    let r2f = cl.prefix.join(".scr/scr.dataset.3/filemeta");
    let len = std::fs::metadata(&r2f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&r2f)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let sum = cl.prefix.join(".scr/scr.dataset.2/summary.scr");
    let mut b = std::fs::read(&sum).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0xff;
    std::fs::write(&sum, b).unwrap();
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 4),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

/// A prefix whose index is version 1 stays in the old layout.
fn legacy_prefix(cl: &Cluster) {
    std::fs::create_dir_all(cl.prefix.join(".scr")).unwrap();
    Index::new(Layout::Legacy)
        .write_file(index_path(&cl.prefix))
        .unwrap();
}

#[test]
fn an_old_layout_prefix_keeps_its_layout_and_restarts() {
    let cl = Cluster::new();
    legacy_prefix(&cl);
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 4, 3);
            None
        },
    );
    let idx = index(&cl);
    assert_eq!(idx.layout(), Layout::Legacy);
    assert!(idx.datasets[&3].contains_key("ckpt.3"));
    assert!(cl.prefix.join("ckpt.3/.scr/summary.scr").is_file());
    assert!(cl.prefix.join("ckpt.3/.scr/rank2file.scr").is_file());
    assert!(!cl.prefix.join(".scr/scr.dataset.3").exists());
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 4),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
}

#[test]
fn files_routed_into_an_old_layout_prefix_go_to_a_dataset_directory() {
    let cl = Cluster::new();
    legacy_prefix(&cl);
    let extra = with(&[("SCR_FLUSH", "1")]);
    let body = |scr: &mut Scr, c: &dyn scr::comm::Comm, restart: bool| {
        let rank = c.rank();
        if restart {
            let name = scr.have_restart().unwrap();
            assert_eq!(name.as_deref(), Some("two"));
            let mut r = scr.start_restart().unwrap();
            let p = r
                .route_file(cl.prefix.join(format!("r{rank}.dat")))
                .unwrap();
            let ok = std::fs::read(&p).unwrap() == data(9, rank, 2, 0);
            assert!(ok);
            assert!(r.complete(ok).unwrap());
            return None;
        }
        for (i, name) in ["one", "two"].iter().enumerate() {
            let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
            let p = out
                .route_file(cl.prefix.join(format!("r{rank}.dat")))
                .unwrap();
            std::fs::write(&p, data(9, rank, i + 1, 0)).unwrap();
            assert!(out.complete(true).unwrap());
        }
        None
    };
    run(&cl, 4, |r| r / 2, &extra, |scr, c| body(scr, c, false));
    // Both checkpoints named the same files: each has its own directory.
    assert_eq!(
        std::fs::read(cl.prefix.join("scr.dataset.1/r0.dat")).unwrap(),
        data(9, 0, 1, 0)
    );
    assert_eq!(
        std::fs::read(cl.prefix.join("scr.dataset.2/r0.dat")).unwrap(),
        data(9, 0, 2, 0)
    );
    assert!(!cl.prefix.join("r0.dat").exists());
    wipe_caches(&cl, 2);
    run(&cl, 4, |r| r / 2, &extra, |scr, c| body(scr, c, true));
}

#[test]
fn files_routed_into_the_prefix_stay_there_and_an_overwritten_copy_is_never_fetched() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    let write = |scr: &mut Scr, c: &dyn scr::comm::Comm| {
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
    };
    run(&cl, 4, |r| r / 2, &extra, write);
    // SCR 3.1 keeps files where they were routed: "two" overwrote "one".
    assert_eq!(
        std::fs::read(cl.prefix.join("r0.dat")).unwrap(),
        data(9, 0, 2, 0)
    );
    let idx = index(&cl);
    assert_eq!(idx.current.as_deref(), Some("two"));
    assert_eq!(idx.dataset_id_by_dir("one"), Some(1));
    // Without "two"'s metadata a restart tries "one", whose bytes are
    // gone: its CRCs do not match, it is marked FAILED, nothing is fetched.
    std::fs::remove_file(cl.prefix.join(".scr/scr.dataset.2/summary.scr")).unwrap();
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, _| {
            assert_eq!(scr.init_report().fetched, None);
            scr.have_restart().unwrap()
        },
    );
    assert!(got.iter().all(Option::is_none), "{got:?}");
    let idx = index(&cl);
    for id in [1, 2] {
        let (_, e) = idx.datasets[&id].iter().next().unwrap();
        assert!(!e.failed.is_empty(), "dataset {id} marked FAILED");
    }
}

#[test]
fn an_unwritable_prefix_fails_the_flush_everywhere_and_keeps_the_cache() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    // A file where ckpt.2's directory must go: every rank's copy fails.
    std::fs::write(cl.prefix.join("ckpt.2"), b"in the way").unwrap();
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 6, 2);
            None
        },
    );
    let idx = index(&cl);
    assert!(idx.datasets.contains_key(&1));
    assert!(
        !idx.datasets.contains_key(&2),
        "no COMPLETE entry for a failed flush"
    );
    let ff = FlushFile::read_file(cl.prefix.join(".scr/flush.scr")).unwrap();
    assert!(ff.need_flush(2));
    assert!(!ff.location_test(2, Location::Flushing));
    // The cached copy stayed: a restart in place gets ckpt.2; its flush at
    // finalize is retried and succeeds once the obstacle is gone.
    std::fs::remove_file(cl.prefix.join("ckpt.2")).unwrap();
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, None);
            restart_and_verify(scr, c, &cl.prefix, 6)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
    assert_eq!(index(&cl).datasets[&2]["ckpt.2"].complete, Some(true));
}

#[test]
fn output_reaches_the_prefix_before_it_leaves_the_cache() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "0"), ("SCR_CACHE_SIZE", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            let rank = c.rank();
            for i in 1..=3usize {
                let mut out = scr
                    .start_output(Some(&format!("out.{i}")), Flags::OUTPUT)
                    .unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("out.{i}/r{rank}")))
                    .unwrap();
                std::fs::write(&p, data(2, rank, i, 0)).unwrap();
                assert!(out.complete(true).unwrap());
            }
            None
        },
    );
    for i in 1..=3usize {
        assert_eq!(
            std::fs::read(cl.prefix.join(format!("out.{i}/r1"))).unwrap(),
            data(2, 1, i, 0)
        );
    }
    let idx = index(&cl);
    assert_eq!(idx.datasets.len(), 3);
    // Output is not a checkpoint: CURRENT is never set by it.
    assert_eq!(idx.current, None);
}

#[test]
fn delete_removes_the_copy_in_the_prefix() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 8, 2);
            scr.delete("ckpt.1").unwrap();
            None
        },
    );
    assert!(!cl.prefix.join("ckpt.1").exists());
    assert!(cl.prefix.join("ckpt.2/rank0.f0").exists());
    let idx = index(&cl);
    assert!(!idx.datasets.contains_key(&1));
    assert!(idx.datasets.contains_key(&2));
}

#[test]
fn current_names_the_copy_a_fetch_starts_from() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 3);
            None
        },
    );
    wipe_caches(&cl, 4);
    let mut extra2 = extra.clone();
    extra2.push(("SCR_CURRENT", "ckpt.2"));
    let got = run(
        &cl,
        4,
        |r| r,
        &extra2,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 5),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
}

/// SCR_DROP_AFTER_CURRENT=1 with SCR_CURRENT: the index entries of newer
/// datasets go (their files stay), so nothing newer than the named one is
/// left to restart from; without it they stay in the index. Either way
/// CURRENT names the restarted one, so a later run starts there too.
#[test]
fn drop_after_current_drops_newer_index_entries_and_keeps_their_files() {
    for drop in ["0", "1"] {
        let cl = Cluster::new();
        let extra = with(&[("SCR_FLUSH", "1")]);
        run(
            &cl,
            4,
            |r| r,
            &extra,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 5, 3);
                None
            },
        );
        wipe_caches(&cl, 4);
        let mut named = extra.clone();
        named.push(("SCR_CURRENT", "ckpt.1"));
        named.push(("SCR_DROP_AFTER_CURRENT", drop));
        let got = run(
            &cl,
            4,
            |r| r,
            &named,
            |scr, c| restart_and_verify(scr, c, &cl.prefix, 5),
        );
        assert_eq!(got[0].as_deref(), Some("ckpt.1"));
        let ids: Vec<i64> = index(&cl).datasets.keys().copied().collect();
        if drop == "1" {
            assert_eq!(ids, vec![1], "newer entries dropped");
        } else {
            assert_eq!(ids, vec![1, 2, 3], "kept without the parameter");
        }
        assert!(
            cl.prefix.join("ckpt.3/rank0.f0").exists(),
            "dropping leaves the files"
        );
        // A later run, no SCR_CURRENT, empty caches.
        wipe_caches(&cl, 4);
        let got = run(
            &cl,
            4,
            |r| r,
            &extra,
            |scr, c| restart_and_verify(scr, c, &cl.prefix, 5),
        );
        assert_eq!(got[0].as_deref(), Some("ckpt.1"), "drop={drop}");
    }
}

/// The restart loop reaches into the prefix: when the application rejects
/// the newest checkpoint (SCR_Complete_restart(0)) and the cache holds no
/// older one, SCR_Have_restart offers the next older from the prefix
/// (fetched into cache, or read in place in bypass mode), as user-api.txt
/// says ("SCR loads the next most recent checkpoint").
#[test]
fn a_rejected_restart_falls_back_to_the_next_older_checkpoint_in_the_prefix() {
    for bypass in ["0", "1"] {
        let cl = Cluster::new();
        let extra = with(&[
            ("SCR_FLUSH", "1"),
            ("SCR_CACHE_SIZE", "1"),
            ("SCR_CACHE_BYPASS", bypass),
        ]);
        run(
            &cl,
            4,
            |r| r / 2,
            &extra,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 6, 3);
                None
            },
        );
        let got = run(
            &cl,
            4,
            |r| r / 2,
            &extra,
            |scr, c| {
                let first = scr.have_restart().unwrap();
                assert_eq!(first.as_deref(), Some("ckpt.3"));
                let r = scr.start_restart().unwrap();
                // Rank 1 rejects it: every rank sees the failure.
                assert!(!r.complete(c.rank() != 1).unwrap());
                let second = restart_and_verify(scr, c, &cl.prefix, 6);
                assert_eq!(scr.have_restart().unwrap(), None, "restarted: no more");
                second
            },
        );
        assert_eq!(got[0].as_deref(), Some("ckpt.2"), "bypass={bypass}");
    }
}

#[test]
fn async_flush_completes_by_finalize() {
    let cl = Cluster::new();
    let extra = with(&[
        ("SCR_FLUSH", "1"),
        ("SCR_FLUSH_ASYNC", "1"),
        ("SCR_FLUSH_ASYNC_BW", "100000000"),
    ]);
    run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 12, 3);
            None
        },
    );
    let idx = index(&cl);
    assert_eq!(
        idx.datasets.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(idx.current.as_deref(), Some("ckpt.3"));
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 12),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.3")),
        "{got:?}"
    );
}

#[test]
fn finalize_flushes_the_newest_checkpoint() {
    let cl = Cluster::new();
    // Every 10th checkpoint only: none of the 3 is due, finalize flushes 3.
    let extra = with(&[("SCR_FLUSH", "10")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 1, 3);
            None
        },
    );
    let idx = index(&cl);
    assert_eq!(idx.datasets.keys().copied().collect::<Vec<_>>(), vec![3]);
    assert!(!Path::new(&cl.prefix.join("ckpt.2")).exists());
}

#[test]
fn a_rank2file_map_over_1_mb_is_split_and_read_by_many_ranks() {
    // 40 ranks x 120 files with long names: about 1.3 MB of map, so the
    // flush writes several leaves and the fetch reads them on several ranks.
    let cl = Cluster::in_dir(Path::new("/dev/shm"));
    let extra = [
        ("SCR_COPY_TYPE", "SINGLE"),
        ("SCR_FLUSH", "1"),
        ("SCR_CACHE_SIZE", "1"),
    ];
    const FILES: usize = 120;
    let name = |rank: usize, f: usize| {
        format!(
            "big/rank{rank:03}/{}-{f:05}.dat",
            "a-rather-long-file-name-to-fill-the-rank2file-map".repeat(4)
        )
    };
    let body = |scr: &mut Scr, c: &dyn scr::comm::Comm, restart: bool| {
        let rank = c.rank();
        if restart {
            assert_eq!(scr.init_report().fetched, Some(1));
            let mut r = scr.start_restart().unwrap();
            let mut ok = true;
            for f in 0..FILES {
                let p = r.route_file(cl.prefix.join(name(rank, f))).unwrap();
                ok &= std::fs::read(&p).unwrap() == format!("{rank}:{f}").into_bytes();
            }
            assert!(ok, "rank {rank}: every file fetched bit-exact");
            assert!(r.complete(ok).unwrap());
            return None;
        }
        let mut out = scr.start_output(Some("big"), Flags::CHECKPOINT).unwrap();
        for f in 0..FILES {
            let p = out.route_file(cl.prefix.join(name(rank, f))).unwrap();
            std::fs::write(&p, format!("{rank}:{f}")).unwrap();
        }
        assert!(out.complete(true).unwrap());
        None
    };
    run(&cl, 40, |r| r / 4, &extra, |scr, c| body(scr, c, false));
    let parts: Vec<_> = std::fs::read_dir(cl.prefix.join(".scr/scr.dataset.1"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("filemeta."))
        .collect();
    assert!(parts.len() >= 2, "map split into {} parts", parts.len());
    for p in &parts {
        assert!(p.metadata().unwrap().len() <= 1 << 20);
    }
    wipe_caches(&cl, 10);
    run(&cl, 40, |r| r / 4, &extra, |scr, c| body(scr, c, true));
}

/// The dataset directories of dataset `dset` in node `node`'s cache.
fn cached_dataset_dirs(cl: &Cluster, node: usize, dset: i64) -> Vec<std::path::PathBuf> {
    let want = format!("scr.dataset.{dset}");
    let mut dirs: Vec<std::path::PathBuf> = common::files_below(&cl.root.join(format!("n{node}")))
        .into_iter()
        .filter_map(|f| {
            f.ancestors()
                .find(|a| a.file_name().is_some_and(|n| n == want.as_str()))
                .map(Path::to_path_buf)
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The cache's newest checkpoint is lost beyond what its scheme rebuilds,
/// but it was flushed, and an older one survives in cache: the restart
/// fetches the newer one from the prefix (SCR 3.1 would restart from the
/// older one and lose the work in between), and the older one in cache is
/// still offered when the application rejects the newer.
#[test]
fn a_newer_checkpoint_in_the_prefix_wins_over_an_older_one_in_cache() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    let first = |cl: &Cluster| {
        run(
            cl,
            8,
            |r| r / 2,
            &extra,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 5, 2);
                None
            },
        );
        // ckpt.2's cache copies on n0 and n1 (ranks 0-3): every XOR set of
        // 4 (one rank a node) loses two members; ckpt.1 stays whole.
        for n in [0, 1] {
            let dirs = cached_dataset_dirs(cl, n, 2);
            assert!(!dirs.is_empty(), "ckpt.2 is in n{n}'s cache");
            for d in dirs {
                std::fs::remove_dir_all(d).unwrap();
            }
        }
    };
    first(&cl);
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            let report = scr.init_report();
            assert_eq!(
                report.lost.iter().map(|l| l.0.get()).collect::<Vec<_>>(),
                vec![2],
                "{report:?}"
            );
            assert_eq!(report.fetched, Some(2), "{report:?}");
            assert_eq!(report.fetched_dir.as_deref(), Some("ckpt.2"));
            let ids: Vec<i64> = report.available.iter().map(|d| d.get()).collect();
            assert_eq!(ids, vec![1, 2], "{report:?}");
            restart_and_verify(scr, c, &cl.prefix, 5)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
    assert_eq!(index(&cl).datasets[&2]["ckpt.2"].fetched.len(), 1);

    // Rejected, the fetched one gives way to the older one in cache.
    let cl = Cluster::new();
    first(&cl);
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.2"));
            let r = scr.start_restart().unwrap();
            assert!(!r.complete(c.rank() != 3).unwrap());
            restart_and_verify(scr, c, &cl.prefix, 5)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
    // The index's CURRENT stepped back past the rejected copy (without
    // that, the next run fetched ckpt.2 again over the cache's ckpt.1);
    // the copy is not marked FAILED.
    let idx = index(&cl);
    assert_eq!(idx.current.as_deref(), Some("ckpt.1"));
    assert!(idx.datasets[&2]["ckpt.2"].failed.is_empty());
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &extra,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, None, "{:?}", scr.init_report());
            restart_and_verify(scr, c, &cl.prefix, 5)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );

    // SCR_FETCH=0: no fetch, the older one in cache (as SCR 3.1).
    let cl = Cluster::new();
    first(&cl);
    let no_fetch = with(&[("SCR_FLUSH", "1"), ("SCR_FETCH", "0")]);
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &no_fetch,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, None);
            restart_and_verify(scr, c, &cl.prefix, 5)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

/// A fetch that fails in cache (here a directory where rank 0's copy must
/// go; in life a full cache) does not mark the copy in the prefix FAILED:
/// the copy is not to blame. The fetch goes on to the older one. A copy
/// whose bytes are wrong is still marked FAILED
/// (`a_damaged_copy_is_marked_failed_and_the_older_one_is_fetched`).
#[test]
fn a_fetch_failing_in_cache_does_not_mark_the_copy_failed() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_FLUSH", "1")]);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 8, 2);
            None
        },
    );
    let dirs = cached_dataset_dirs(&cl, 0, 2);
    let [dir] = dirs.as_slice() else {
        panic!("one ckpt.2 directory in n0's cache: {dirs:?}")
    };
    let in_cache = dir.join("ckpt.2/rank0.f0");
    assert!(in_cache.is_file(), "{}", in_cache.display());
    wipe_caches(&cl, 4);
    std::fs::create_dir_all(&in_cache).unwrap();
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            let report = scr.init_report();
            assert_eq!(report.fetched, Some(1), "{report:?}");
            assert!(report.fetch_failed.is_empty(), "{report:?}");
            restart_and_verify(scr, c, &cl.prefix, 8)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
    let idx = index(&cl);
    assert!(idx.datasets[&2]["ckpt.2"].failed.is_empty(), "{idx:?}");
    assert_eq!(idx.datasets[&1]["ckpt.1"].fetched.len(), 1);
}

/// Bytes of file `f` of rank `rank` in checkpoint `c` of the PTHREAD test.
fn many(rank: usize, c: usize, f: usize) -> Vec<u8> {
    (0..150_000 + 977 * f)
        .map(|i| (i ^ rank << 3 ^ c << 9 ^ f << 12) as u8)
        .collect()
}

/// Write `n` checkpoints of four files per rank, or restart and check
/// every byte (returns the name restarted from).
fn four_files_per_rank(
    scr: &mut Scr,
    c: &dyn scr::comm::Comm,
    prefix: &Path,
    n: usize,
) -> Option<String> {
    let rank = c.rank();
    if n == 0 {
        let name = scr.have_restart().unwrap()?;
        let id: usize = name.trim_start_matches("ckpt.").parse().unwrap();
        let mut r = scr.start_restart().unwrap();
        let mut ok = true;
        for f in 0..4 {
            let p = r
                .route_file(prefix.join(format!("{name}/r{rank}.{f}")))
                .unwrap();
            ok &= std::fs::read(&p).unwrap() == many(rank, id, f);
        }
        assert!(r.complete(ok).unwrap(), "rank {rank}: bytes of {name}");
        return Some(name);
    }
    for id in 1..=n {
        let mut out = scr
            .start_output(Some(&format!("ckpt.{id}")), Flags::CHECKPOINT)
            .unwrap();
        for f in 0..4 {
            let p = out
                .route_file(prefix.join(format!("ckpt.{id}/r{rank}.{f}")))
                .unwrap();
            std::fs::write(&p, many(rank, id, f)).unwrap();
        }
        assert!(out.complete(true).unwrap());
    }
    None
}

/// The notes of the log's `event` records (FLUSH_SUCCESS, FETCH_SUCCESS).
fn notes(cl: &Cluster, event: &str) -> Vec<Option<String>> {
    let recs = scr::log::read_log(&cl.prefix.join(".scr/log"), true)
        .unwrap()
        .records;
    recs.iter()
        .filter(|r| r.is_event(event))
        .map(|r| r.entry.note.clone())
        .collect()
}

/// SCR_FLUSH_TYPE=PTHREAD: each rank's files are flushed on parallel
/// threads (one per file, at most one per core: the log says how many
/// rank 0 used), and fetched back on parallel threads after every cache
/// is lost, every byte checked; a STORE line's FLUSH= decides for the
/// datasets cached in that store, whatever SCR_FLUSH_TYPE says; a vendor
/// type is warned about and has no effect.
#[test]
fn pthread_flushes_copy_each_ranks_files_on_parallel_threads() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(4);
    let want = format!("PTHREAD: rank 0 copied 4 files on {threads} threads");
    let sys = tempfile::tempdir().unwrap();
    let plain = sys.path().join("plain.conf");
    std::fs::write(&plain, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
    for (system, flush_type, pthread, warned) in [
        ("", "PTHREAD", true, 0),
        ("", "pthread", true, 0),
        ("", "SYNC", false, 0),
        ("", "BBAPI", false, 1),
        ("STORE=/dev/shm COUNT=2 FLUSH=PTHREAD\n", "SYNC", true, 0),
        ("STORE=/dev/shm COUNT=2 TYPE=sync\n", "PTHREAD", false, 0),
        // A refused store type leaves the store to SCR_FLUSH_TYPE.
        ("STORE=/dev/shm COUNT=2 FLUSH=bbapi\n", "PTHREAD", true, 1),
    ] {
        let cl = Cluster::new();
        let conf = sys.path().join("scr.conf");
        std::fs::write(&conf, format!("SCR_LOG_SYSLOG_ENABLE=0\n{system}")).unwrap();
        let extra = with(&[
            ("SCR_FLUSH", "1"),
            ("SCR_LOG_ENABLE", "1"),
            ("SCR_FLUSH_TYPE", flush_type),
        ]);
        common::run_with_system(
            &cl,
            4,
            |r| r / 2,
            Some(&conf),
            &extra,
            |scr, c| {
                // Only the refused vendor type is warned about.
                let w = scr.config_warnings();
                assert_eq!(w.len(), warned, "{w:?}");
                assert!(
                    w.iter()
                        .all(|w| w.to_string().to_ascii_uppercase().contains("BBAPI")),
                    "{w:?}"
                );
                four_files_per_rank(scr, c, &cl.prefix, 2)
            },
        );
        let flushed = notes(&cl, "FLUSH_SUCCESS");
        assert_eq!(flushed.len(), 2, "{system} {flush_type}: {flushed:?}");
        for n in &flushed {
            match pthread {
                true => assert_eq!(n.as_deref(), Some(want.as_str()), "{system} {flush_type}"),
                false => assert_eq!(n.as_deref(), None, "{system} {flush_type}"),
            }
        }
        wipe_caches(&cl, 2);
        let got = common::run_with_system(
            &cl,
            4,
            |r| r / 2,
            Some(&plain),
            &extra,
            |scr, c| four_files_per_rank(scr, c, &cl.prefix, 0),
        );
        assert!(
            got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
            "{got:?}"
        );
        // The fetch runs without the STORE line: SCR_FLUSH_TYPE decides.
        let fetched = notes(&cl, "FETCH_SUCCESS");
        let fetch_pthread = flush_type.eq_ignore_ascii_case("PTHREAD");
        let want_fetch = fetch_pthread.then_some(want.as_str());
        assert_eq!(
            fetched.iter().map(|n| n.as_deref()).collect::<Vec<_>>(),
            [want_fetch],
            "{system} {flush_type}"
        );
    }
}
