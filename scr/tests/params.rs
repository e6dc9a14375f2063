//! Parameters of issue 15 with the thread communicator (the same effects
//! under real `mpirun` are in harness/tests/params.rs): SCR_PREFIX_SIZE,
//! SCR_PREFIX_PURGE, SCR_CRC_ON_DELETE, SCR_COPY_METADATA, Need_checkpoint
//! without a policy, and refused parameters.

mod common;

use std::path::Path;

use common::{restart_and_verify, run, write_ckpts, Cluster};
use scr::config::ConfigWarning;
use scr::records::index::index_path;
use scr::records::{FlushFile, Index, Location, Rank2File, Record};
use scr::storage::attrs;

fn index(cl: &Cluster) -> Index {
    Index::read_file(index_path(&cl.prefix)).expect("index readable")
}

fn ids(idx: &Index) -> Vec<i64> {
    idx.datasets.keys().copied().collect()
}

fn wipe_caches(cl: &Cluster, nodes: usize) {
    for n in 0..nodes {
        let _ = std::fs::remove_dir_all(cl.root.join(format!("n{n}")));
    }
}

const FLUSH_EVERY: [(&str, &str); 3] = [
    ("SCR_COPY_TYPE", "PARTNER"),
    ("SCR_FLUSH", "1"),
    ("SCR_CACHE_SIZE", "2"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = FLUSH_EVERY.to_vec();
    v.extend_from_slice(extra);
    v
}

#[test]
fn prefix_size_keeps_the_newest_checkpoints_and_deletes_older_ones() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_PREFIX_SIZE", "2")]);
    run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 3, 5);
            None
        },
    );
    let idx = index(&cl);
    assert_eq!(ids(&idx), vec![4, 5], "the newest two stay");
    assert_eq!(idx.current.as_deref(), Some("ckpt.5"));
    for old in 1..=3 {
        assert!(
            !cl.prefix.join(format!("ckpt.{old}")).exists(),
            "ckpt.{old} deleted from the prefix"
        );
    }
    assert!(cl.prefix.join("ckpt.4/rank0.f0").is_file());
    let ff = FlushFile::read_file(cl.prefix.join(".scr/flush.scr")).unwrap();
    assert!(!ff.location_test(1, Location::Pfs));
    assert!(ff.location_test(5, Location::Pfs));

    // A later run continues from ckpt.5 and keeps pruning as it flushes.
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            let name = restart_and_verify(scr, c, &cl.prefix, 3);
            write_ckpts_from(scr, c, &cl.prefix, 6, 1);
            name
        },
    );
    assert!(
        got.iter().all(|n| n.as_deref() == Some("ckpt.5")),
        "{got:?}"
    );
    assert_eq!(ids(&index(&cl)), vec![5, 6]);
    assert!(!cl.prefix.join("ckpt.4").exists());
}

/// Checkpoints `first..first+n` named `ckpt.<id>` with the common data.
fn write_ckpts_from(
    scr: &mut scr::Scr,
    c: &dyn scr::comm::Comm,
    prefix: &Path,
    first: usize,
    n: usize,
) {
    let rank = c.rank();
    for id in first..first + n {
        let mut out = scr
            .start_output(Some(&format!("ckpt.{id}")), scr::Flags::CHECKPOINT)
            .unwrap();
        let p = out
            .route_file(prefix.join(format!("ckpt.{id}/rank{rank}.f0")))
            .unwrap();
        std::fs::write(&p, common::data(3, rank, id, 0)).unwrap();
        assert!(out.complete(true).unwrap());
    }
}

#[test]
fn prefix_purge_deletes_every_dataset_in_the_prefix_at_init() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &with(&[]),
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 2);
            None
        },
    );
    assert_eq!(ids(&index(&cl)), vec![1, 2]);
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &with(&[("SCR_PREFIX_PURGE", "1")]),
        |scr, _c| scr.have_restart().unwrap(),
    );
    assert!(
        got.iter().all(Option::is_none),
        "nothing left to fetch: {got:?}"
    );
    let idx = index(&cl);
    assert!(idx.datasets.is_empty() && idx.current.is_none());
    assert!(!cl.prefix.join("ckpt.1").exists() && !cl.prefix.join("ckpt.2").exists());
}

/// SCR_CRC_ON_FLUSH: a cached file damaged after complete (one bit, the
/// size unchanged) is caught by the flush at finalize when the flush
/// computes CRC32s (the copy fails, the index has no complete copy), and
/// copied as it is when it does not.
#[test]
fn crc_on_flush_catches_a_cached_file_damaged_before_the_flush() {
    for on in ["1", "0"] {
        let cl = Cluster::new();
        // SINGLE: no redundancy; SCR_FLUSH=10: only finalize flushes.
        let extra = [
            ("SCR_COPY_TYPE", "SINGLE"),
            ("SCR_FLUSH", "10"),
            ("SCR_CRC_ON_FLUSH", on),
        ];
        run(
            &cl,
            2,
            |r| r,
            &extra,
            |scr, c| {
                let rank = c.rank();
                let mut out = scr
                    .start_output(Some("ckpt.1"), scr::Flags::CHECKPOINT)
                    .unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("ckpt.1/r{rank}")))
                    .unwrap();
                std::fs::write(&p, vec![7u8; 3000]).unwrap();
                assert!(out.complete(true).unwrap());
                if rank == 0 {
                    let mut b = std::fs::read(&p).unwrap();
                    b[100] ^= 1;
                    std::fs::write(&p, b).unwrap();
                }
                c.barrier().unwrap();
                None
            },
        );
        let flushed = Index::read_file(index_path(&cl.prefix))
            .ok()
            .and_then(|i| i.datasets.get(&1).cloned())
            .is_some_and(|d| d.values().any(|e| e.complete == Some(true)));
        let copy = std::fs::read(cl.prefix.join("ckpt.1/r0")).ok();
        if on == "1" {
            assert!(!flushed, "the damaged checkpoint is not flushed");
        } else {
            assert!(flushed, "without CRCs the flush does not look");
            let copy = copy.expect("the copy is in the prefix");
            assert_eq!(copy[100], 7 ^ 1, "copied as it was in cache");
        }
    }
}

#[test]
fn crc_on_delete_reports_a_cached_file_damaged_before_its_deletion() {
    let cl = Cluster::new();
    let conf = cl.root.join("sys.conf");
    std::fs::write(&conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
    let body = |on: &'static str| {
        let extra = [
            ("SCR_COPY_TYPE", "SINGLE"),
            ("SCR_CACHE_SIZE", "1"),
            ("SCR_LOG_ENABLE", "1"),
            ("SCR_CRC_ON_DELETE", on),
        ];
        common::run_with_system(
            &cl,
            2,
            |r| r,
            Some(&conf),
            &extra,
            |scr, c| {
                let rank = c.rank();
                let mut out = scr.start_output(Some("a"), scr::Flags::CHECKPOINT).unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("a/r{rank}")))
                    .unwrap();
                std::fs::write(&p, vec![7u8; 3000]).unwrap();
                assert!(out.complete(true).unwrap());
                // Damage in cache after complete (same size, one bit).
                if rank == 0 {
                    let mut b = std::fs::read(&p).unwrap();
                    b[100] ^= 1;
                    std::fs::write(&p, b).unwrap();
                }
                // The next checkpoint evicts "a" (SCR_CACHE_SIZE=1).
                let mut out = scr.start_output(Some("b"), scr::Flags::CHECKPOINT).unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("b/r{rank}")))
                    .unwrap();
                std::fs::write(&p, [1u8; 10]).unwrap();
                assert!(out.complete(true).unwrap());
                None
            },
        );
        let log = std::fs::read_to_string(cl.prefix.join(".scr/log")).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains("CRC32_MISMATCH") && l.contains("on delete"))
            .count()
    };
    assert_eq!(body("0"), 0, "off: nothing checked");
    assert_eq!(body("1"), 1, "on: the damaged file is reported once");
}

#[test]
fn copy_metadata_records_mode_and_times_at_flush_and_restores_them_at_fetch() {
    let cl = Cluster::new();
    let extra = with(&[("SCR_COPY_METADATA", "1")]);
    let mtime = (1_000_000_000i64, 123i64);
    run(
        &cl,
        2,
        |r| r,
        &extra,
        |scr, c| {
            let rank = c.rank();
            let mut out = scr
                .start_output(Some("m.1"), scr::Flags::CHECKPOINT)
                .unwrap();
            let p = out
                .route_file(cl.prefix.join(format!("m.1/r{rank}")))
                .unwrap();
            common::write_with_attrs(&p, &vec![rank as u8; 5000], 0o640, mtime);
            assert!(out.complete(true).unwrap());
            None
        },
    );
    // Recorded in the rank2file map, applied to the copy in the prefix.
    // (SCR 3.1's layout: our per-file metadata is the `filemeta` map in
    // the dataset's metadata directory.)
    let meta_dir = cl.prefix.join(".scr/scr.dataset.1");
    let map = Rank2File::read_split_named(&meta_dir, "filemeta").unwrap();
    let files = &map.rank[&1].files;
    let e = files
        .get("m.1/r1")
        .unwrap_or_else(|| panic!("no entry for m.1/r1 in {:?}", files.keys()));
    let rec = e.attrs.expect("MODE and times recorded");
    assert_eq!((rec.mode & 0o7777, rec.mtime), (0o640, mtime));
    let flushed = attrs::read(&cl.prefix.join("m.1/r1")).unwrap();
    assert_eq!((flushed.mode & 0o7777, flushed.mtime), (0o640, mtime));

    // Fetched back into an empty cache with them.
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        2,
        |r| r,
        &extra,
        |scr, c| {
            let rank = c.rank();
            let mut r = scr.start_restart().unwrap();
            let p = r
                .route_file(cl.prefix.join(format!("m.1/r{rank}")))
                .unwrap();
            let a = attrs::read(&p).unwrap();
            let ok = std::fs::read(&p).unwrap() == vec![rank as u8; 5000];
            assert!(r.complete(ok).unwrap());
            Some(format!("{:o} {:?}", a.mode & 0o7777, a.mtime))
        },
    );
    let want = format!("640 {mtime:?}");
    assert!(
        got.iter().all(|g| g.as_deref() == Some(want.as_str())),
        "{got:?}"
    );
}

#[test]
fn need_checkpoint_without_a_policy_answers_no_and_a_policy_still_acts() {
    let cl = Cluster::new();
    let none = run(
        &cl,
        2,
        |r| r,
        &[],
        |scr, _c| {
            let a: String = (0..4)
                .map(|_| {
                    if scr.need_checkpoint().unwrap() {
                        'y'
                    } else {
                        'n'
                    }
                })
                .collect();
            Some(a)
        },
    );
    assert!(
        none.iter().all(|a| a.as_deref() == Some("nnnn")),
        "{none:?}"
    );
    let every2 = run(
        &cl,
        2,
        |r| r,
        &[("SCR_CHECKPOINT_INTERVAL", "2")],
        |scr, _c| {
            let a: String = (0..4)
                .map(|_| {
                    if scr.need_checkpoint().unwrap() {
                        'y'
                    } else {
                        'n'
                    }
                })
                .collect();
            Some(a)
        },
    );
    assert!(
        every2.iter().all(|a| a.as_deref() == Some("nyny")),
        "{every2:?}"
    );
}

#[test]
fn unsupported_parameters_are_refused_with_a_warning_naming_them() {
    let cl = Cluster::new();
    let names = |extra: &[(&'static str, &'static str)]| {
        let got = run(
            &cl,
            2,
            |r| r,
            extra,
            |scr, _c| {
                let w: Vec<String> = scr
                    .config_warnings()
                    .iter()
                    .filter_map(|w| match w {
                        ConfigWarning::NotSupported { name, .. } => Some(name.clone()),
                        _ => None,
                    })
                    .collect();
                Some(w.join(","))
            },
        );
        got[0].clone().unwrap_or_default()
    };
    // SCR_CACHE_BYPASS=0 is this library's default; bypass acts either
    // way (scr/tests/bypass_thread.rs): accepted silently.
    assert_eq!(
        names(&[
            ("SCR_CACHE_BYPASS", "0"),
            ("SCR_FETCH_BYPASS", "1"),
            ("SCR_FLUSH_TYPE", "sync")
        ]),
        ""
    );
    assert_eq!(names(&[("SCR_CACHE_BYPASS", "1")]), "");
    // Containers act (scr/tests/containers_thread.rs), and so do the
    // copy buffer (scr/src/prefix/copy_tests.rs) and the cluster name
    // (scr/tests/params_switches.rs): no warning.
    assert_eq!(
        names(&[
            ("SCR_FILE_BUF_SIZE", "1MB"),
            ("SCR_USE_CONTAINERS", "1"),
            ("SCR_CLUSTER_NAME", "x")
        ]),
        ""
    );
    // ... except in bypass mode, where nothing is flushed into them.
    assert_eq!(
        names(&[("SCR_USE_CONTAINERS", "1"), ("SCR_CACHE_BYPASS", "1")]),
        "SCR_USE_CONTAINERS"
    );
}
