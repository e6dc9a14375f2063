//! Containers (SCR_USE_CONTAINERS=1, SCR_CONTAINER_SIZE) with the thread
//! communicator: the container plan (offsets, spill-over into the next
//! container, files of 0 bytes, ranks with no files, files of one node
//! contiguous), and a flush into containers fetched back byte for byte
//! after every cache is lost; a short container fails the fetch of its
//! dataset, which falls back to the older one.

mod common;

use std::collections::BTreeMap;

use common::{restart_and_verify, run, write_ckpts, Cluster};
use proptest::prelude::*;
use scr::comm::thread::ThreadComm;
use scr::prefix::container::{plan, ContainerPlan};
use scr::records::Record;

/// Run the plan on `sizes.len()` thread ranks, rank `r` on node
/// `node_of[r]`, and return each rank's plan.
fn plans(sizes: &[Vec<u64>], node_of: &[usize], cb: u64) -> Vec<ContainerPlan> {
    ThreadComm::run(sizes.len(), |world| {
        let r = world.rank();
        let node = world
            .split(Some(node_of[r] as u32), r as i64)
            .unwrap()
            .unwrap();
        plan(world, node.as_ref(), &sizes[r], cb, ".scr").unwrap()
    })
    .unwrap()
}

fn ctr_id(file: &str) -> u64 {
    file.trim_start_matches(".scr/ctr.")
        .trim_end_matches(".scr")
        .parse()
        .unwrap()
}

/// Every property a plan must have.
fn check(sizes: &[Vec<u64>], node_of: &[usize], cb: u64) {
    let p = plans(sizes, node_of, cb);
    let total: u64 = sizes.iter().flatten().sum();
    // (stream position, length, rank) of every byte range.
    let mut ranges = Vec::new();
    let mut created: BTreeMap<u64, usize> = BTreeMap::new();
    for (r, pr) in p.iter().enumerate() {
        assert_eq!(pr.total_bytes, total);
        assert_eq!(pr.files.len(), sizes[r].len());
        for f in &pr.create {
            *created.entry(ctr_id(f)).or_default() += 1;
        }
        let mut off = pr.offset_bytes;
        for (segs, &size) in pr.files.iter().zip(&sizes[r]) {
            // A file's pieces add up to it, in order, each inside one
            // container; a full container spills into the next.
            assert!(!segs.is_empty());
            assert_eq!(segs.iter().map(|s| s.length_bytes).sum::<u64>(), size);
            let mut pos = off;
            for s in segs {
                assert_eq!(ctr_id(&s.file) * cb + s.offset_bytes, pos, "{segs:?}");
                assert!(s.offset_bytes + s.length_bytes <= cb);
                pos += s.length_bytes;
            }
            if size > 0 {
                ranges.push((off, size, r));
            }
            off += size;
        }
    }
    // The ranges tile [0, total) exactly.
    ranges.sort();
    let mut pos = 0;
    for (o, l, _) in &ranges {
        assert_eq!(*o, pos, "{ranges:?}");
        pos += l;
    }
    assert_eq!(pos, total);
    // Files of one node are contiguous.
    let mut seen = Vec::new();
    for (_, _, r) in &ranges {
        let n = node_of[*r];
        if seen.last() != Some(&n) {
            assert!(!seen.contains(&n), "node {n} split: {ranges:?}");
            seen.push(n);
        }
    }
    // Each container holding bytes is created once, by its first writer.
    let want: Vec<u64> = (0..total.div_ceil(cb)).collect();
    assert_eq!(created.keys().copied().collect::<Vec<_>>(), want);
    assert!(created.values().all(|c| *c == 1), "{created:?}");
}

#[test]
fn the_guides_example_spills_over_three_containers() {
    // Container size 300000; rank 2's file starts at 524295 bytes.
    let sizes = vec![vec![300_000], vec![224_295], vec![524_296], vec![]];
    let p = plans(&sizes, &[0, 0, 1, 1], 300_000);
    let segs: Vec<(String, u64, u64)> = p[2].files[0]
        .iter()
        .map(|s| (s.file.clone(), s.offset_bytes, s.length_bytes))
        .collect();
    assert_eq!(
        segs,
        vec![
            (".scr/ctr.1.scr".into(), 224_295, 75_705),
            (".scr/ctr.2.scr".into(), 0, 300_000),
            (".scr/ctr.3.scr".into(), 0, 148_591),
        ]
    );
    check(&sizes, &[0, 0, 1, 1], 300_000);
}

#[test]
fn nodes_are_contiguous_when_their_ranks_interleave() {
    // Ranks 0 and 2 on node 0, 1 and 3 on node 1: node 0's bytes first.
    let sizes = vec![vec![10], vec![20], vec![30, 0], vec![]];
    let p = plans(&sizes, &[0, 1, 0, 1], 25);
    let offs: Vec<u64> = p.iter().map(|x| x.offset_bytes).collect();
    assert_eq!(offs, vec![0, 40, 10, 60]);
    check(&sizes, &[0, 1, 0, 1], 25);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_plan_tiles_the_dataset(
        sizes in prop::collection::vec(prop::collection::vec(
            prop_oneof![Just(0u64), 1u64..200, 1u64..5000], 0..4), 1..9),
        nodes in 1usize..4,
        cb in prop_oneof![Just(1u64), 1u64..64, 64u64..10_000],
    ) {
        let node_of: Vec<usize> = (0..sizes.len()).map(|r| (r * 7 + 3) % nodes).collect();
        check(&sizes, &node_of, cb);
    }
}

const EXTRA: [(&str, &str); 6] = [
    ("SCR_COPY_TYPE", "XOR"),
    ("SCR_SET_SIZE", "4"),
    ("SCR_CACHE_SIZE", "2"),
    ("SCR_FLUSH", "1"),
    ("SCR_USE_CONTAINERS", "1"),
    ("SCR_CONTAINER_SIZE", "3000"),
];

fn wipe_caches(cl: &Cluster, nodes: usize) {
    for n in 0..nodes {
        let _ = std::fs::remove_dir_all(cl.root.join(format!("n{n}")));
    }
}

fn containers_of(cl: &Cluster, id: u64) -> Vec<std::path::PathBuf> {
    let dir = cl.prefix.join(format!(".scr/scr.dataset.{id}"));
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("ctr.") && n.ends_with(".scr")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_flush_into_containers_is_fetched_back_after_losing_every_cache() {
    let cl = Cluster::new();
    run(
        &cl,
        8,
        |r| r / 2,
        &EXTRA,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 5, 2);
            None
        },
    );
    // No plain file in the application's directory; containers in the
    // dataset's metadata directory, with SEG lists in both maps.
    assert!(!cl.prefix.join("ckpt.2").exists());
    let ctrs = containers_of(&cl, 2);
    assert!(ctrs.len() >= 2, "{ctrs:?}");
    let pl = scr::prefix::layout::Placement::scr31(2);
    let map = pl.read_map(&cl.prefix).unwrap();
    let e = &map.rank[&0].files["ckpt.2/rank0.f0"];
    assert!(!e.segments.is_empty());
    assert!(e.segments[0].file.starts_with(".scr/scr.dataset.2/ctr."));
    assert!(e.size_bytes.is_some() && e.crc32.is_some());
    let llnl = scr::records::Rank2File::read_split_named(
        &pl.meta_dir(&cl.prefix),
        scr::records::rank2file::RANK2FILE_BASE,
    )
    .unwrap();
    assert_eq!(llnl.rank[&0].files["ckpt.2/rank0.f0"].segments, e.segments);
    let bytes: u64 = ctrs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let summary =
        scr::records::Summary::read_file(pl.meta_dir(&cl.prefix).join("summary.scr")).unwrap();
    assert_eq!(Some(bytes), summary.dataset.size_bytes);

    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        8,
        |r| r / 2,
        &EXTRA,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(2));
            restart_and_verify(scr, c, &cl.prefix, 5)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
}

#[test]
fn a_short_container_fails_its_fetch_and_the_older_copy_is_used() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 9, 2);
            None
        },
    );
    let ctrs = containers_of(&cl, 2);
    let last = ctrs.last().unwrap();
    let len = std::fs::metadata(last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| {
            let report = scr.init_report();
            assert_eq!(report.fetched, Some(1), "{report:?}");
            assert_eq!(report.fetch_failed.len(), 1, "{report:?}");
            if c.rank() == 0 {
                // Rank 0 gathers every rank's reason: the container and
                // the offset of the segment that is short.
                let why = &report.fetch_failed[0].1;
                assert!(
                    why.contains("container ") && why.contains("at offset"),
                    "{why}"
                );
                let name = last.file_name().unwrap().to_string_lossy();
                assert!(why.contains(&*name), "{why}");
            }
            restart_and_verify(scr, c, &cl.prefix, 9)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

#[test]
fn an_old_layout_prefix_keeps_its_containers_in_the_dataset_directory() {
    use scr::records::index::{index_path, Layout};
    let cl = Cluster::new();
    std::fs::create_dir_all(cl.prefix.join(".scr")).unwrap();
    scr::records::Index::new(Layout::Legacy)
        .write_file(index_path(&cl.prefix))
        .unwrap();
    run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 4, 2);
            None
        },
    );
    // The guide's own form: `.scr/ctr.<n>.scr` relative to the dataset
    // directory, which holds no plain file.
    let d = cl.prefix.join("ckpt.2");
    assert!(d.join(".scr/ctr.0.scr").is_file());
    assert!(!d.join("rank0.f0").exists());
    let map = scr::records::Rank2File::read_split(&d.join(".scr")).unwrap();
    let e = &map.rank[&0].files["rank0.f0"];
    assert!(e.segments[0].file.starts_with(".scr/ctr."), "{e:?}");
    wipe_caches(&cl, 4);
    let got = run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 4),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
}

#[test]
fn fetch_bypass_copies_a_dataset_in_containers_into_cache() {
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r,
        &EXTRA,
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 6, 1);
            None
        },
    );
    wipe_caches(&cl, 4);
    let mut extra = EXTRA.to_vec();
    extra.push(("SCR_FETCH_BYPASS", "1"));
    let got = run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            assert_eq!(scr.init_report().fetched, Some(1));
            restart_and_verify(scr, c, &cl.prefix, 6)
        },
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.1")),
        "{got:?}"
    );
}

/// Background flushes (SCR_FLUSH_ASYNC=1) and the read-back of
/// SCR_CRC_ON_COPY=1 pack and check the same containers.
#[test]
fn async_flush_and_crc_on_copy_pack_the_same_containers() {
    for extra_param in [("SCR_FLUSH_ASYNC", "1"), ("SCR_CRC_ON_COPY", "1")] {
        let cl = Cluster::new();
        let mut extra = EXTRA.to_vec();
        extra.push(extra_param);
        run(
            &cl,
            4,
            |r| r / 2,
            &extra,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 7, 2);
                None
            },
        );
        assert!(!containers_of(&cl, 2).is_empty(), "{extra_param:?}");
        assert!(!cl.prefix.join("ckpt.2").exists(), "{extra_param:?}");
        wipe_caches(&cl, 2);
        let got = run(
            &cl,
            4,
            |r| r / 2,
            &extra,
            |scr, c| restart_and_verify(scr, c, &cl.prefix, 7),
        );
        assert!(
            got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
            "{extra_param:?}: {got:?}"
        );
    }
}
