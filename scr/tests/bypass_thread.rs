//! Bypass mode end to end with the thread communicator (SCR 3.1's
//! SCR_CACHE_BYPASS=1, CKPT `BYPASS=1`, SCR_FETCH_BYPASS=1): checkpoints
//! written straight to the prefix and recorded there at complete (index,
//! summary, rank2file), nothing in cache; restart after losing every cache
//! with SCR_FETCH_BYPASS=1 (read in place, nothing copied into cache) and
//! with SCR_FETCH_BYPASS=0 (fetched into cache); a new run forgets bypass
//! datasets and never deletes their files; shared files work in bypass
//! mode and are an error on every rank in cache mode.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::{data, run, write_ckpts, Cluster};
use scr::comm::Comm;
use scr::prefix::layout::Placement;
use scr::records::index::{index_path, Layout};
use scr::records::summary::{Summary, SUMMARY_FILE};
use scr::records::{FlushFile, Index, Location, Record};
use scr::{Flags, Scr, ScrError};

const BYPASS: [(&str, &str); 2] = [("SCR_CACHE_BYPASS", "1"), ("SCR_COPY_TYPE", "XOR")];

fn index(cl: &Cluster) -> Index {
    Index::read_file(index_path(&cl.prefix)).expect("index readable")
}

fn flush_file(cl: &Cluster) -> FlushFile {
    FlushFile::read_file(cl.prefix.join(".scr/flush.scr")).expect("flush file readable")
}

fn wipe_caches(cl: &Cluster, nodes: usize) {
    for n in 0..nodes {
        let _ = std::fs::remove_dir_all(cl.root.join(format!("n{n}")));
    }
}

/// Every file below the simulated nodes' trees (caches and control
/// directories) whose name `is_data` accepts.
fn node_files(cl: &Cluster, is_data: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    common::node_tree_files(cl)
        .into_iter()
        .filter(|p| is_data(&p.file_name().unwrap().to_string_lossy()))
        .collect()
}

/// The application files of `write_ckpts` (`rank<r>.f<i>`).
fn is_ckpt_file(name: &str) -> bool {
    name.starts_with("rank") && name.contains(".f")
}

fn files_of(rank: usize) -> usize {
    if rank % 3 == 2 {
        0
    } else {
        1 + rank % 2
    }
}

/// Files of one checkpoint of `write_ckpts` on 4 ranks.
fn ckpt_files() -> usize {
    (0..4).map(files_of).sum()
}

/// Restart from `ckpt.<c>`, check every byte, and return whether every
/// routed path was inside the prefix (read in place).
fn restart_checking(scr: &mut Scr, c: &dyn Comm, prefix: &Path) -> Option<String> {
    let rank = c.rank();
    let name = scr.have_restart().unwrap()?;
    let n: usize = name.trim_start_matches("ckpt.").parse().unwrap();
    let mut r = scr.start_restart().unwrap();
    let mut in_prefix = true;
    let mut ok = true;
    for f in 0..files_of(rank) {
        let asked = prefix.join(format!("ckpt.{n}/rank{rank}.f{f}"));
        let p = r.route_file(&asked).unwrap();
        in_prefix &= p == asked;
        ok &= std::fs::read(&p).unwrap() == data(13, rank, n, f);
    }
    assert!(ok, "rank {rank}: bytes of {name} match");
    assert!(r.complete(ok).unwrap());
    Some(format!("{name} in_prefix={in_prefix}"))
}

#[test]
fn bypass_checkpoints_go_to_the_prefix_and_restart_in_place_or_fetched() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &BYPASS,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 13, 2);
            None
        },
    );
    // The files are where the application routed them, nothing in cache.
    for c in 1..=2 {
        for rank in 0..4 {
            for f in 0..files_of(rank) {
                let p = cl.prefix.join(format!("ckpt.{c}/rank{rank}.f{f}"));
                assert_eq!(std::fs::read(&p).unwrap(), data(13, rank, c, f), "{p:?}");
            }
        }
    }
    assert!(node_files(&cl, is_ckpt_file).is_empty());
    for n in 0..2 {
        let cache = cl.root.join(format!("n{n}/dev/shm/tester/scr.77"));
        assert!(!cache.join("scr.dataset.2").exists(), "no cache directory");
    }
    // Recorded as flushed at complete (SCR_FLUSH=0: no flush ran).
    let idx = index(&cl);
    assert_eq!(idx.layout(), Layout::Scr31);
    assert_eq!(idx.datasets.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(idx.current.as_deref(), Some("ckpt.2"));
    let e = &idx.datasets[&2]["ckpt.2"];
    assert_eq!(e.complete, Some(true));
    assert!(e.flushed.is_some());
    let meta = cl.prefix.join(".scr/scr.dataset.2");
    for f in [SUMMARY_FILE, "rank2file", "filemeta"] {
        assert!(meta.join(f).is_file(), "{f}");
    }
    let summary = Summary::read_file(meta.join(SUMMARY_FILE)).unwrap();
    assert!(summary.complete);
    assert_eq!(summary.dataset.files, Some(ckpt_files() as u64));
    let map = Placement::scr31(2).read_map(&cl.prefix).unwrap();
    assert_eq!(map.ranks, 4);
    let r1 = &map.rank[&1].files["ckpt.2/rank1.f1"];
    let want = data(13, 1, 2, 1);
    assert_eq!(r1.size_bytes, Some(want.len() as u64));
    assert_eq!(r1.crc32, Some(crc32fast::hash(&want)));
    let ff = flush_file(&cl);
    assert!(ff.location_test(2, Location::Pfs));
    assert!(!ff.location_test(2, Location::Cache));
    assert!(!ff.location_test(2, Location::Flushing));

    // A new allocation reading in place: nothing is copied into cache.
    wipe_caches(&cl, 2);
    let in_place = [("SCR_FETCH_BYPASS", "1")];
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &in_place,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(2));
            restart_checking(scr, c, &cl.prefix)
        },
    );
    assert!(
        got.iter()
            .all(|g| g.as_deref() == Some("ckpt.2 in_prefix=true")),
        "{got:?}"
    );
    assert!(node_files(&cl, is_ckpt_file).is_empty());
    let ff = flush_file(&cl);
    assert!(ff.location_test(2, Location::Pfs) && !ff.location_test(2, Location::Cache));
    assert_eq!(index(&cl).datasets[&2]["ckpt.2"].fetched.len(), 1);

    // Again with SCR_FETCH_BYPASS=0: the normal fetch copies into cache.
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &[],
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(2));
            restart_checking(scr, c, &cl.prefix)
        },
    );
    let ranks_with_files = (0..4).filter(|&r| files_of(r) > 0).count();
    assert_eq!(
        got.iter()
            .filter(|g| g.as_deref() == Some("ckpt.2 in_prefix=false"))
            .count(),
        ranks_with_files,
        "{got:?}"
    );
    assert_eq!(node_files(&cl, is_ckpt_file).len(), ckpt_files());
    // The prefix copy is untouched.
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.2/rank1.f1")).unwrap(),
        data(13, 1, 2, 1)
    );
}

#[test]
fn a_new_run_forgets_bypass_datasets_and_never_deletes_their_files() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &BYPASS,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 13, 2);
            None
        },
    );
    let intact = |cl: &Cluster| {
        for c in 1..=2 {
            for rank in [0, 1, 3] {
                let p = cl.prefix.join(format!("ckpt.{c}/rank{rank}.f0"));
                assert_eq!(std::fs::read(&p).unwrap(), data(13, rank, c, 0), "{p:?}");
            }
        }
    };
    // Caches kept: the filemaps still list bypass dataset 2 (1 was
    // evicted from the bookkeeping by 2, SCR_CACHE_SIZE=1). Purging the
    // cache forgets it; the restart reads it in place.
    let purge = [("SCR_CACHE_PURGE", "1"), ("SCR_FETCH_BYPASS", "1")];
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &purge,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(2));
            restart_checking(scr, c, &cl.prefix)
        },
    );
    assert!(
        got.iter()
            .all(|g| g.as_deref() == Some("ckpt.2 in_prefix=true")),
        "{got:?}"
    );
    intact(&cl);
    // The dataset read in place is in the filemaps now: the next init
    // forgets it (never deleting), and a cached checkpoint evicting it
    // from the bookkeeping (SCR_CACHE_SIZE=1) leaves its files alone.
    let extra = [("SCR_FETCH_BYPASS", "1"), ("SCR_CACHE_SIZE", "1")];
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            let report = scr.init_report().clone();
            assert_eq!(report.in_prefix, vec![scr::DatasetId(2)]);
            assert_eq!(report.fetched, Some(2));
            let r = restart_checking(scr, c, &cl.prefix);
            let mut out = scr.start_output(Some("next"), Flags::CHECKPOINT).unwrap();
            assert_eq!(out.dataset_id(), 3, "ids continue past the forgotten ones");
            let p = out
                .route_file(cl.prefix.join(format!("next/r{}", c.rank())))
                .unwrap();
            assert!(!p.starts_with(&cl.prefix), "cache mode: {p:?}");
            std::fs::write(&p, b"cached").unwrap();
            assert!(out.complete(true).unwrap());
            r
        },
    );
    assert!(
        got.iter()
            .all(|g| g.as_deref() == Some("ckpt.2 in_prefix=true")),
        "{got:?}"
    );
    intact(&cl);
}

#[test]
fn a_descriptor_with_bypass_writes_its_checkpoints_to_the_prefix() {
    let cl = Cluster::new();
    // Every second checkpoint takes CKPT=1, which bypasses the cache.
    std::fs::write(
        cl.prefix.join(".scrconf"),
        "CKPT=0 INTERVAL=1 TYPE=SINGLE\nCKPT=1 INTERVAL=2 TYPE=XOR BYPASS=1\n",
    )
    .unwrap();
    let extra = [("SCR_CACHE_SIZE", "2")];
    run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 13, 2);
            None
        },
    );
    let cached = node_files(&cl, is_ckpt_file);
    assert_eq!(cached.len(), ckpt_files(), "{cached:?}");
    assert!(cached
        .iter()
        .all(|p| p.to_string_lossy().contains("scr.dataset.1/ckpt.1/")));
    assert!(
        !cl.prefix.join("ckpt.1").exists(),
        "checkpoint 1 stays in cache"
    );
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.2/rank0.f0")).unwrap(),
        data(13, 0, 2, 0)
    );
    let idx = index(&cl);
    assert_eq!(idx.datasets.keys().copied().collect::<Vec<_>>(), vec![2]);
    assert_eq!(idx.datasets[&2]["ckpt.2"].complete, Some(true));
}

const BLOCK: usize = 4096;

fn part(rank: usize) -> Vec<u8> {
    (0..BLOCK).map(|i| (i * 7 + rank * 31) as u8).collect()
}

/// Every rank writes its block of `shared.dat` and a file of its own.
fn write_shared(scr: &mut Scr, c: &dyn Comm, prefix: &Path) -> Result<bool, ScrError> {
    let rank = c.rank();
    let mut out = scr
        .start_output(Some("shared.1"), Flags::CHECKPOINT)
        .unwrap();
    let shared = out.route_file(prefix.join("shared.1/shared.dat")).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&shared)
        .unwrap();
    f.write_all_at(&part(rank), (rank * BLOCK) as u64).unwrap();
    let own = out
        .route_file(prefix.join(format!("shared.1/own{rank}.dat")))
        .unwrap();
    std::fs::write(&own, part(rank + 100)).unwrap();
    out.complete(true)
}

#[test]
fn a_shared_file_in_bypass_mode_is_written_by_every_rank_and_recorded_once() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &BYPASS,
        |scr, c| {
            assert!(write_shared(scr, c, &cl.prefix).unwrap());
            None
        },
    );
    let bytes = std::fs::read(cl.prefix.join("shared.1/shared.dat")).unwrap();
    let want: Vec<u8> = (0..4).flat_map(part).collect();
    assert_eq!(bytes, want);
    // Recorded once, under its owner (the lowest rank), as LLNL SCR 3.1.
    let map = Placement::scr31(1).read_map(&cl.prefix).unwrap();
    let holders: Vec<i64> = map
        .rank
        .iter()
        .filter(|(_, f)| f.files.contains_key("shared.1/shared.dat"))
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(holders, vec![0]);
    assert_eq!(
        map.rank[&0].files["shared.1/shared.dat"].size_bytes,
        Some(4 * BLOCK as u64)
    );
    for r in 0..4i64 {
        assert!(map.rank[&r]
            .files
            .contains_key(&format!("shared.1/own{r}.dat")));
    }
    let summary =
        Summary::read_file(cl.prefix.join(".scr/scr.dataset.1").join(SUMMARY_FILE)).unwrap();
    assert_eq!(summary.dataset.files, Some(5));

    // Restart in place: every rank reads its block of the shared file.
    wipe_caches(&cl, 2);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &[("SCR_FETCH_BYPASS", "1")],
        |scr, c| {
            let rank = c.rank();
            assert_eq!(scr.have_restart().unwrap().as_deref(), Some("shared.1"));
            let mut r = scr.start_restart().unwrap();
            let p = r.route_file(cl.prefix.join("shared.1/shared.dat")).unwrap();
            let all = std::fs::read(&p).unwrap();
            let mut ok = all[rank * BLOCK..(rank + 1) * BLOCK] == part(rank)[..];
            let own = r
                .route_file(cl.prefix.join(format!("shared.1/own{rank}.dat")))
                .unwrap();
            ok &= std::fs::read(own).unwrap() == part(rank + 100);
            assert!(r.complete(ok).unwrap());
            Some(ok.to_string())
        },
    );
    assert!(got.iter().all(|g| g.as_deref() == Some("true")), "{got:?}");
}

#[test]
fn a_shared_file_in_cache_mode_fails_on_every_rank_naming_it_and_its_ranks() {
    let cl = Cluster::new();
    let extra = [("SCR_COPY_TYPE", "XOR")];
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            let err = write_shared(scr, c, &cl.prefix).expect_err("shared file in cache mode");
            let text = err.to_string();
            match &err {
                ScrError::SharedFile { dset, files } => {
                    assert_eq!(dset.get(), 1);
                    assert_eq!(files.len(), 1, "{text}");
                    assert_eq!(files[0].path, cl.prefix.join("shared.1/shared.dat"));
                    let ranks: Vec<u32> = files[0].ranks.iter().map(|r| r.0).collect();
                    assert_eq!(ranks, vec![0, 1, 2, 3]);
                }
                other => panic!("not a shared-file error: {other}"),
            }
            // Deleted on every rank: nothing to restart from, and the run goes on.
            assert_eq!(scr.have_restart().unwrap(), None);
            write_ckpts(scr, c, &cl.prefix, 13, 1);
            Some(text)
        },
    );
    for text in &got {
        let text = text.as_deref().unwrap();
        assert!(text.contains("shared file access detected while not in bypass mode"));
        assert!(
            text.contains("shared.1/shared.dat routed by ranks 0, 1, 2, 3"),
            "{text}"
        );
    }
    assert!(node_files(&cl, |n| n == "shared.dat" || n.starts_with("own")).is_empty());
}

#[test]
fn bypass_in_an_old_layout_prefix_is_refused_on_every_rank() {
    let cl = Cluster::new();
    std::fs::create_dir_all(cl.prefix.join(".scr")).unwrap();
    Index::new(Layout::Legacy)
        .write_file(index_path(&cl.prefix))
        .unwrap();
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &BYPASS,
        |scr, _c| {
            let e = scr
                .start_output(Some("ckpt.1"), Flags::CHECKPOINT)
                .err()
                .expect("refused");
            Some(e.to_string())
        },
    );
    for text in got {
        assert!(text.unwrap().contains("scr index --upgrade"));
    }
}

/// A bypass file changed in the prefix after its complete (one flipped
/// bit, the size unchanged — as a crash in the middle of rewriting a
/// reused file name leaves it) fails its CRC32 whether the restart copies
/// it into cache or reads it in place (SCR_FETCH_BYPASS=1): the restart
/// goes to the older checkpoint, never to the changed bytes.
#[test]
fn a_bypass_file_damaged_in_the_prefix_fails_its_crc_at_fetch_and_in_place() {
    for in_place in ["0", "1"] {
        let cl = Cluster::new();
        run(
            &cl,
            4,
            |r| r / 2,
            &BYPASS,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 13, 2);
                None
            },
        );
        // The CRC32 read back at complete (SCR_CRC_ON_FLUSH) is what the
        // fetch checks: a flipped bit in ckpt.2 sends the restart to 1.
        let f = cl.prefix.join("ckpt.2/rank0.f0");
        let mut bytes = std::fs::read(&f).unwrap();
        assert!(!bytes.is_empty());
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x04;
        std::fs::write(&f, bytes).unwrap();
        wipe_caches(&cl, 2);
        let got = run(
            &cl,
            4,
            |r| r / 2,
            &[("SCR_FETCH_BYPASS", in_place)],
            |scr, c| {
                let report = scr.init_report();
                assert_eq!(report.fetched, Some(1), "{report:?}");
                assert_eq!(report.fetch_failed.len(), 1, "{report:?}");
                assert_eq!(report.fetch_failed[0].0, 2);
                restart_checking(scr, c, &cl.prefix)
            },
        );
        // Ranks that read files read them where the mode says (a rank
        // with none reports true).
        for (rank, g) in got.iter().enumerate() {
            let in_prefix = in_place == "1" || files_of(rank) == 0;
            let want = format!("ckpt.1 in_prefix={in_prefix}");
            assert_eq!(g.as_deref(), Some(want.as_str()), "rank {rank}: {got:?}");
        }
        assert_eq!(index(&cl).datasets[&2]["ckpt.2"].failed.len(), 1);
    }
}

#[test]
fn prefix_size_prunes_bypass_checkpoints_and_output_is_kept() {
    let cl = Cluster::new();
    let extra = [
        ("SCR_CACHE_BYPASS", "1"),
        ("SCR_PREFIX_SIZE", "1"),
        ("SCR_CACHE_SIZE", "4"),
    ];
    run(
        &cl,
        4,
        |r| r / 2,
        &extra,
        |scr, c| {
            let rank = c.rank();
            let mut out = scr.start_output(Some("out.1"), Flags::OUTPUT).unwrap();
            let p = out
                .route_file(cl.prefix.join(format!("out.1/r{rank}.dat")))
                .unwrap();
            assert!(p.starts_with(&cl.prefix), "{p:?}");
            std::fs::write(&p, part(rank)).unwrap();
            assert!(out.complete(true).unwrap());
            write_ckpts(scr, c, &cl.prefix, 13, 3);
            None
        },
    );
    // SCR_PREFIX_SIZE=1: the newest checkpoint stays, older ones and their
    // files go; output is never pruned.
    let idx = index(&cl);
    let names: Vec<String> = idx
        .datasets
        .values()
        .flat_map(|m| m.keys().cloned())
        .collect();
    assert_eq!(names, vec!["out.1".to_string(), "ckpt.3".to_string()]);
    assert!(!cl.prefix.join("ckpt.1").exists() && !cl.prefix.join("ckpt.2").exists());
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.3/rank0.f0")).unwrap(),
        data(13, 0, 3, 0)
    );
    assert_eq!(
        std::fs::read(cl.prefix.join("out.1/r2.dat")).unwrap(),
        part(2)
    );
    assert!(node_files(&cl, |n| n.ends_with(".dat") || is_ckpt_file(n)).is_empty());
}

/// On a real node logical paths are real: a bypass entry (a prefix path)
/// deleted like a cached file would delete the checkpoint in the prefix.
/// One node without a simulated root, its cache and control directories
/// below the test's scratch directory.
#[test]
fn evicting_a_bypass_dataset_on_a_real_node_leaves_its_prefix_files() {
    let cl = Cluster::new();
    let cache = cl.root.join("cache").to_string_lossy().into_owned();
    let cntl = cl.root.join("cntl").to_string_lossy().into_owned();
    let extra = [
        ("SCR_CACHE_BYPASS", "1"),
        ("SCR_CACHE_SIZE", "1"),
        ("SCR_CACHE_BASE", cache.as_str()),
        ("SCR_CNTL_BASE", cntl.as_str()),
    ];
    let real_node = || scr::storage::dirs::NodeIdentity {
        name: "n0".into(),
        root: None,
    };
    let run_real = |extra: &[(&str, &str)], ckpts: usize| {
        scr::comm::thread::ThreadComm::run(4, |comm| {
            let opts = cl.opts(real_node(), extra);
            let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
            let mut scr = Scr::init_with(world, opts).unwrap();
            // ckpt.2 evicts ckpt.1 from the cache bookkeeping (SCR_CACHE_SIZE=1).
            write_ckpts(&mut scr, comm, &cl.prefix, 13, ckpts);
            scr.finalize().unwrap();
        })
        .unwrap();
    };
    run_real(&extra, 2);
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.1/rank0.f0")).unwrap(),
        data(13, 0, 1, 0)
    );
    // The next init forgets ckpt.2, a purge would delete whatever is left.
    let mut purge = extra.to_vec();
    purge.push(("SCR_CACHE_PURGE", "1"));
    run_real(&purge, 0);
    for c in 1..=2 {
        assert_eq!(
            std::fs::read(cl.prefix.join(format!("ckpt.{c}/rank1.f1"))).unwrap(),
            data(13, 1, c, 1)
        );
    }
}

#[test]
fn scr_copy_refuses_a_bypass_dataset_instead_of_copying_it_onto_itself() {
    use scr::scavenge::copy::{copy_dataset, CopyOptions};
    use scr::scavenge::{NoProgress, ScavengeError};
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &BYPASS,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 13, 1);
            None
        },
    );
    let opts = CopyOptions {
        cntl_dir: PathBuf::from("/dev/shm/tester/scr.77"),
        node: cl.node(0),
        dataset: 1,
        prefix: cl.prefix.clone(),
        placement: None,
        partner: false,
        ranks: None,
        crc: true,
        buf_bytes: 0,
    };
    match copy_dataset(&opts, &NoProgress) {
        Err(e @ ScavengeError::InPrefix { id: 1, .. }) => {
            assert!(e.to_string().contains("nothing to copy"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read(cl.prefix.join("ckpt.1/rank1.f1")).unwrap(),
        data(13, 1, 1, 1)
    );
}

/// Write `name` with `flags`: one file per rank, `<name>/r<rank>.dat`.
fn write_one(scr: &mut Scr, c: &dyn Comm, prefix: &Path, name: &str, flags: Flags) {
    let rank = c.rank();
    let mut out = scr.start_output(Some(name), flags).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/r{rank}.dat")))
        .unwrap();
    std::fs::write(&p, format!("{name} of rank {rank}")).unwrap();
    assert!(out.complete(true).unwrap(), "{name}");
}

/// CKPT `OUTPUT=1` (SCR 3.1): datasets flagged SCR_FLAG_OUTPUT take the
/// descriptor so marked, checkpoints or not; without one, output that is
/// not a checkpoint takes the INTERVAL=1 descriptor. The marked
/// descriptor here bypasses the cache, so where a dataset's files are
/// shows which descriptor took it.
#[test]
fn the_output_descriptor_takes_the_datasets_flagged_output() {
    for (output, cached_out) in [("OUTPUT=1", false), ("OUTPUT=0", true)] {
        let cl = Cluster::new();
        std::fs::write(
            cl.prefix.join(".scrconf"),
            format!(
                "CKPT=0 INTERVAL=1 TYPE=SINGLE\nCKPT=1 INTERVAL=7 TYPE=XOR BYPASS=1 {output}\n"
            ),
        )
        .unwrap();
        let extra = [("SCR_CACHE_SIZE", "4")];
        run(
            &cl,
            4,
            |r| r / 2,
            &extra,
            |scr, c| {
                write_one(scr, c, &cl.prefix, "ckpt.1", Flags::CHECKPOINT);
                write_one(scr, c, &cl.prefix, "out.2", Flags::OUTPUT);
                write_one(
                    scr,
                    c,
                    &cl.prefix,
                    "both.3",
                    Flags::CHECKPOINT | Flags::OUTPUT,
                );
                None
            },
        );
        let in_cache = |name: &str| {
            common::node_tree_files(&cl)
                .iter()
                .filter(|p| p.to_string_lossy().contains(&format!("/{name}/r")))
                .count()
        };
        assert_eq!(
            in_cache("ckpt.1"),
            4,
            "{output}: a plain checkpoint is cached"
        );
        assert_eq!(
            in_cache("out.2"),
            if cached_out { 4 } else { 0 },
            "{output}"
        );
        assert_eq!(
            in_cache("both.3"),
            if cached_out { 4 } else { 0 },
            "{output}"
        );
        // Output reaches the prefix either way, byte for byte.
        for name in ["out.2", "both.3"] {
            for r in 0..4 {
                assert_eq!(
                    std::fs::read_to_string(cl.prefix.join(format!("{name}/r{r}.dat"))).unwrap(),
                    format!("{name} of rank {r}")
                );
            }
        }
    }
}

/// SCR_COPY_METADATA in bypass mode: Complete_output records the mode and
/// times of each file the application wrote in the prefix, read from the
/// file it fsyncs, opened below the prefix through handles. A file whose
/// name is a link (here to a file outside the prefix with other times)
/// fails the complete on every rank, naming the path: neither that file's
/// attributes nor its durability are recorded for the checkpoint.
#[test]
fn bypass_with_copy_metadata_records_the_files_attributes_and_never_through_a_link() {
    use scr::records::Rank2File;
    use scr::storage::attrs;
    let cl = Cluster::new();
    let extra = [
        BYPASS[0],
        ("SCR_COPY_TYPE", "SINGLE"),
        ("SCR_COPY_METADATA", "1"),
    ];
    let mtime = (1_000_000_000i64, 7i64);
    let outside = cl.root.join("outside");
    std::fs::write(&outside, b"not a checkpoint").unwrap();
    let mut far = attrs::read(&outside).unwrap();
    far.mtime = (1_500_000_000, 0);
    attrs::apply(&outside, &far).unwrap();
    let got = run(
        &cl,
        2,
        |r| r,
        &extra,
        |scr, c| {
            let rank = c.rank();
            let mut results = Vec::new();
            for (n, link) in [(1, false), (2, true)] {
                let name = format!("ckpt.{n}");
                let mut out = scr.start_output(Some(&name), Flags::CHECKPOINT).unwrap();
                let p = out
                    .route_file(cl.prefix.join(format!("{name}/r{rank}")))
                    .unwrap();
                common::write_with_attrs(&p, &vec![rank as u8; 3000], 0o640, mtime);
                if link && rank == 1 {
                    std::fs::remove_file(&p).unwrap();
                    std::os::unix::fs::symlink(&outside, &p).unwrap();
                }
                results.push(match out.complete(true) {
                    Ok(ok) => format!("ok {ok}"),
                    Err(e) => format!("error {e}"),
                });
            }
            Some(results.join("; "))
        },
    );
    let r1 = cl.prefix.join("ckpt.2/r1");
    for (rank, g) in got.iter().enumerate() {
        let g = g.as_deref().unwrap();
        assert!(g.starts_with("ok true; error "), "rank {rank}: {g}");
        if rank == 1 {
            assert!(g.contains(&r1.display().to_string()), "rank {rank}: {g}");
        }
    }
    // Checkpoint 1: both files' mode and times in the dataset's filemeta.
    let meta = cl.prefix.join(".scr/scr.dataset.1");
    let map = Rank2File::read_split_named(&meta, "filemeta").unwrap();
    for rank in 0..2usize {
        let e = &map.rank[&(rank as i64)].files[&format!("ckpt.1/r{rank}")];
        let a = e.attrs.expect("attributes recorded");
        assert_eq!((a.mode & 0o7777, a.mtime), (0o640, mtime), "rank {rank}");
    }
    // Checkpoint 2 is not complete in the index.
    let idx = index(&cl);
    assert!(
        idx.datasets
            .get(&2)
            .is_none_or(|d| d.values().all(|e| e.complete != Some(true))),
        "{:?}",
        idx.datasets.get(&2)
    );
}
