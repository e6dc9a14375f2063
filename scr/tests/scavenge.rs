//! Scavenge end to end with the thread communicator: a job of ranks as
//! threads on simulated nodes (directory trees) writes checkpoints and
//! "crashes" (no finalize, nothing flushed); nodes are lost; then `scr
//! postrun`'s library half copies from the survivors, rebuilds what the
//! scheme allows in the prefix, indexes it, and every byte is checked.
//!
//! The flush file entries postrun starts from (LOCATION CACHE, DIR,
//! ORIGDIR, NAME, CKPT) are the ones the library wrote at complete. The
//! XOR scenario ends as the issue asks: a new allocation fetches the
//! scavenged checkpoint from the prefix and reads it back bit-exact.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use scr::comm::thread::ThreadComm;
use scr::prefix::layout::Placement;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::index::{index_path, Layout};
use scr::records::{Index, Record};
use scr::scavenge::copy::{copy_dataset, CopyOptions};
use scr::scavenge::index;
use scr::scavenge::postrun::{postrun, NodeAccess, PostrunOptions, PostrunReport};
use scr::scavenge::{NoProgress, ScavengeError};
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

const CNTL: &str = "/dev/shm/tester/scr.77";
const RANKS: usize = 8;
const PER_NODE: usize = 2;
const NODES: usize = RANKS / PER_NODE;

/// Where the files of a checkpoint are routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `<prefix>/ckpt.<c>/…`: the user's directory is the dataset directory.
    UserDir,
    /// `<prefix>/…` directly: the dataset goes to `scr.dataset.<c>`.
    Prefix,
    /// `<prefix>/ckpt/…` for every checkpoint: one directory reused.
    SameDir,
}

mod common;

struct Cluster {
    nodes: common::Cluster,
    root: PathBuf,
    prefix: PathBuf,
    seed: u64,
    route: Route,
    /// The prefix is in the old layout (a version-1 index written first).
    legacy: bool,
}

impl Cluster {
    fn new(seed: u64, route: Route) -> Cluster {
        let nodes = common::Cluster::new();
        Cluster {
            root: nodes.root.clone(),
            prefix: nodes.prefix.clone(),
            nodes,
            seed,
            route,
            legacy: false,
        }
    }

    /// A cluster whose prefix is in the old layout (index version 1):
    /// dataset directories with `.scr` inside, DIR in the flush file.
    fn legacy(seed: u64, route: Route) -> Cluster {
        let mut c = Cluster::new(seed, route);
        fs::create_dir_all(c.prefix.join(".scr")).unwrap();
        Index::new(Layout::Legacy)
            .write_file(index_path(&c.prefix))
            .unwrap();
        c.legacy = true;
        c
    }

    fn node(&self, n: usize) -> NodeIdentity {
        self.nodes.node(n)
    }

    fn kill_node(&self, n: usize) {
        self.nodes.kill_node(n)
    }

    fn opts(&self, node: NodeIdentity, extra: &[(&str, &str)]) -> InitOptions {
        let mut e = vec![("SCR_MPI_BUF_SIZE", "4096")];
        e.extend_from_slice(extra);
        self.nodes.opts(node, &e)
    }

    /// The files rank `rank` writes in checkpoint `ckpt`, relative to the
    /// directory they are routed to: sizes differ, rank 2 mod 3 writes
    /// nothing, odd ranks put one file in a subdirectory.
    fn files(&self, rank: usize, ckpt: u64) -> Vec<(String, Vec<u8>)> {
        let n = if rank % 3 == 2 { 0 } else { 1 + rank % 2 };
        (0..n)
            .map(|f| {
                let name = if f == 1 {
                    format!("sub/rank{rank}.c{ckpt}.f{f}")
                } else {
                    format!("rank{rank}.c{ckpt}.f{f}")
                };
                let len = (self.seed as usize * 131 + rank * 1013 + ckpt as usize * 37 + f * 11)
                    % 9000
                    + 1;
                let data = (0..len)
                    .map(|i| {
                        (i as u64 ^ self.seed ^ (rank as u64) << 8 ^ ckpt << 16 ^ (i as u64 >> 8))
                            as u8
                    })
                    .collect();
                (name, data)
            })
            .collect()
    }

    fn routed_dir(&self, ckpt: u64) -> PathBuf {
        match self.route {
            Route::UserDir => self.prefix.join(format!("ckpt.{ckpt}")),
            Route::Prefix => self.prefix.clone(),
            Route::SameDir => self.prefix.join("ckpt"),
        }
    }

    /// The index key of checkpoint `ckpt`: its directory in the old
    /// layout, its name in SCR 3.1's.
    fn index_key(&self, ckpt: u64) -> String {
        if self.legacy {
            self.dataset_dir_name(ckpt)
        } else {
            format!("ckpt.{ckpt}")
        }
    }

    /// How `scr index --add` names checkpoint `ckpt`, and how its report
    /// labels it: the directory, or in SCR 3.1's layout the id and
    /// `.scr/scr.dataset.<id>`.
    fn add_arg(&self, ckpt: u64) -> (String, String) {
        if self.legacy {
            (self.dataset_dir_name(ckpt), self.dataset_dir_name(ckpt))
        } else {
            (ckpt.to_string(), format!(".scr/scr.dataset.{ckpt}"))
        }
    }

    fn dataset_dir_name(&self, ckpt: u64) -> String {
        match self.route {
            Route::UserDir => format!("ckpt.{ckpt}"),
            Route::Prefix => format!("scr.dataset.{ckpt}"),
            Route::SameDir => "ckpt".into(),
        }
    }

    /// Run a job writing checkpoints 1..=n that ends without finalize,
    /// like a killed job, then fill in the flush file entries.
    fn write_and_crash(&self, extra: &[(&str, &str)], n: u64) {
        ThreadComm::run(RANKS, |comm| {
            let rank = comm.rank();
            let opts = self.opts(self.node(rank / PER_NODE), extra);
            let world = comm.split(Some(0), rank as i64).unwrap().unwrap();
            let mut scr = Scr::init_with(world, opts).unwrap();
            for c in 1..=n {
                let mut out = scr
                    .start_output(Some(&format!("ckpt.{c}")), Flags::CHECKPOINT)
                    .unwrap();
                for (name, data) in self.files(rank, c) {
                    let p = out.route_file(self.routed_dir(c).join(name)).unwrap();
                    fs::write(&p, data).unwrap();
                }
                assert!(out.complete(true).unwrap(), "checkpoint {c} complete");
            }
            // A crash: no SCR_Finalize (which could flush), nothing dropped.
            std::mem::forget(scr);
        })
        .unwrap();
        // Complete recorded every checkpoint in the flush file: in cache,
        // not in the prefix (SCR_FLUSH=0), with its directory.
        let ff = FlushFile::read_file(self.prefix.join(".scr").join(FLUSH_FILE)).unwrap();
        let e = &ff.datasets[&(n as i64)];
        assert!(ff.need_flush(n as i64), "{ff:?}");
        // SCR 3.1's flush file records no directory.
        let dir = self.legacy.then(|| self.dataset_dir_name(n));
        assert_eq!(e.dir, dir);
        assert_eq!(e.checkpoint, Some(true));
    }

    /// A new allocation (every node tree gone) restarts from the prefix:
    /// returns the checkpoint each rank restarted from, after checking
    /// every byte it read.
    fn restart_in_new_allocation(&self, extra: &[(&str, &str)]) -> Vec<Option<String>> {
        for n in 0..NODES + 2 {
            let _ = fs::remove_dir_all(self.root.join(format!("n{n}")));
        }
        ThreadComm::run(RANKS, |comm| {
            let rank = comm.rank();
            // New nodes: the ranks land on n4.. and n5.. this time.
            let opts = self.opts(self.node(NODES + rank % 2), extra);
            let world = comm.split(Some(0), rank as i64).unwrap().unwrap();
            let mut scr = Scr::init_with(world, opts).unwrap();
            let name = scr.have_restart().unwrap();
            if let Some(name) = &name {
                let c: u64 = name.trim_start_matches("ckpt.").parse().unwrap();
                let mut r = scr.start_restart().unwrap();
                let mut ok = true;
                for (f, data) in self.files(rank, c) {
                    let p = r.route_file(self.routed_dir(c).join(&f)).unwrap();
                    ok &= fs::read(&p).is_ok_and(|got| got == data);
                }
                assert!(ok, "rank {rank}: the bytes fetched for {name} match");
                assert!(r.complete(ok).unwrap());
            }
            scr.finalize().unwrap();
            name
        })
        .unwrap()
    }

    fn postrun(&self, down: &[usize]) -> PostrunReport {
        self.postrun_logged(down, None)
    }

    fn postrun_logged(
        &self,
        down: &[usize],
        log: Option<&scr::log::writer::Logger>,
    ) -> PostrunReport {
        self.postrun_with(down, log, None)
    }

    fn postrun_with(
        &self,
        down: &[usize],
        log: Option<&scr::log::writer::Logger>,
        containers: Option<u64>,
    ) -> PostrunReport {
        let opts = PostrunOptions {
            prefix: self.prefix.clone(),
            nodes: (0..NODES).map(|n| format!("n{n}")).collect(),
            down: down.iter().map(|n| format!("n{n}")).collect(),
            access: NodeAccess::Roots(self.root.to_string_lossy().into_owned()),
            cntl_dir: PathBuf::from(CNTL),
            crc: true,
            buf_bytes: 0,
            containers,
        };
        postrun(&opts, &NoProgress, log).unwrap()
    }

    /// Every file of checkpoint `ckpt` in the prefix equals what was
    /// written; returns the number of bytes checked.
    fn verify(&self, ckpt: u64) -> u64 {
        let dir = self.prefix.join(self.dataset_dir_name(ckpt));
        let mut bytes = 0;
        for rank in 0..RANKS {
            for (name, data) in self.files(rank, ckpt) {
                let p = dir.join(&name);
                let got = fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(
                    got == data,
                    "{}: bytes differ from what rank {rank} wrote",
                    p.display()
                );
                bytes += data.len() as u64;
            }
        }
        bytes
    }

    fn index(&self) -> Index {
        Index::read_file(index_path(&self.prefix)).unwrap()
    }
}

/// The next allocation restarts from the scavenged checkpoint, fetched
/// from the prefix, on every rank.
fn assert_fetched(cl: &Cluster, ckpt: u64) {
    let got = cl.restart_in_new_allocation(&[("SCR_COPY_TYPE", "SINGLE")]);
    let want = format!("ckpt.{ckpt}");
    assert!(
        got.iter().all(|g| g.as_deref() == Some(want.as_str())),
        "{got:?}"
    );
}

/// Cut the last byte off `path`; returns its length before.
fn cut_one_byte(path: &std::path::Path) -> u64 {
    let len = fs::metadata(path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    len
}

/// `scr index --rebuild`, which must index the one dataset incomplete.
fn rebuilt_incomplete(cl: &Cluster) -> index::RebuildIndexReport {
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    assert!(
        rb.datasets.len() == 1 && !rb.datasets[0].complete,
        "{rb:#?}"
    );
    rb
}

fn assert_complete_and_current(cl: &Cluster, r: &PostrunReport, ckpt: u64) {
    let d = &r.datasets[0];
    assert!(d.complete && d.current && d.error.is_none(), "{r:#?}");
    let dir = cl.index_key(ckpt);
    let idx = cl.index();
    assert_eq!(idx.layout() == Layout::Legacy, cl.legacy);
    assert_eq!(idx.current.as_deref(), Some(dir.as_str()));
    assert_eq!(idx.datasets[&(ckpt as i64)][&dir].complete, Some(true));
    let ff = FlushFile::read_file(cl.prefix.join(".scr").join(FLUSH_FILE)).unwrap();
    assert!(ff.location_test(ckpt as i64, Location::Pfs));
    assert!(cl.verify(ckpt) > 0);
}

#[test]
fn xor_postrun_rebuilds_a_lost_node_bit_exact() {
    let cl = Cluster::new(3, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 2);
    cl.kill_node(2);
    let settings = scr::log::writer::LogSettings {
        txt: true,
        syslog: false,
        db: None,
    };
    let log = scr::log::writer::Logger::open(&cl.prefix, "login1", "77", settings).unwrap();
    let r = cl.postrun_logged(&[2], Some(&log));
    let text = fs::read_to_string(scr::log::writer::log_path(&cl.prefix)).unwrap();
    assert!(
        text.contains("event=SCAVENGE_START") && text.contains("event=SCAVENGE_END"),
        "{text}"
    );
    assert!(
        text.contains("complete, ") && text.contains("dset=2"),
        "{text}"
    );
    assert_eq!(r.datasets.len(), 1, "only the newest checkpoint: {r:#?}");
    assert_eq!(r.datasets[0].id, 2);
    let ix = r.datasets[0].index.as_ref().unwrap();
    assert_eq!(ix.missing_before, vec![4, 5]);
    assert_eq!(ix.rebuilt, vec![4, 5]);
    assert_complete_and_current(&cl, &r, 2);
    // A second postrun has nothing to do: the flush file says PFS.
    let again = cl.postrun(&[2]);
    assert!(again.nothing_to_do.is_some(), "{again:#?}");
    assert_fetched(&cl, 2);
}

/// SCR_USE_CONTAINERS=1: postrun packs the saved dataset (rebuilt ranks
/// too) into containers, removes the plain files, and the next allocation
/// fetches it from the containers.
#[test]
fn postrun_packs_the_saved_dataset_into_containers() {
    let cl = Cluster::new(3, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 2);
    cl.kill_node(2);
    let r = cl.postrun_with(&[2], None, Some(5000));
    let d = &r.datasets[0];
    assert!(d.complete && d.current && d.error.is_none(), "{r:#?}");
    let packed = d.containers.as_ref().expect("packed");
    assert!(packed.containers >= 2 && packed.files > 0, "{packed:?}");
    let dir = cl.prefix.join(cl.dataset_dir_name(2));
    for rank in 0..RANKS {
        for (name, _) in cl.files(rank, 2) {
            assert!(!dir.join(&name).exists(), "{name} was packed");
        }
    }
    assert_fetched(&cl, 2);
}

/// After packing, the rank filemaps name the containers too: a summary
/// `scr index` rebuilds from them (here the summary is damaged) finds
/// every byte, and a pack stopped between the map and the rank filemaps
/// is finished when run again.
#[test]
fn a_summary_rebuilt_after_packing_finds_the_containers() {
    let cl = Cluster::new(23, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 2);
    cl.kill_node(2);
    let r = cl.postrun_with(&[2], None, Some(5000));
    let d = &r.datasets[0];
    assert!(d.complete && d.error.is_none(), "{r:#?}");
    let pl = d.placement.clone().unwrap();
    let packed = d.containers.as_ref().unwrap();
    let meta_dir = pl.meta_dir(&cl.prefix);
    let map_path = |rank: usize| meta_dir.join(format!("{rank}.scrfilemap"));
    let with_files: Vec<usize> = (0..RANKS).filter(|&r| !cl.files(r, 2).is_empty()).collect();
    assert_eq!(packed.rank_filemaps, with_files.len() as u64, "{packed:?}");
    for &rank in &with_files {
        let rfm = scr::records::RankFilemap::read_file(map_path(rank)).unwrap();
        let app: Vec<&String> = rfm.files.keys().filter(|k| !k.contains(".scr/")).collect();
        assert!(!app.is_empty(), "rank {rank}: {rfm:?}");
        for k in app {
            let segs = rfm.segments.get(k);
            assert!(
                segs.is_some_and(|s| !s.is_empty()),
                "rank {rank} {k}: {rfm:?}"
            );
            assert!(!cl.prefix.join(k).exists(), "{k} is still plain");
        }
    }

    // The summary is damaged and the index forgets the dataset: `scr
    // index` rebuilds both from the rank filemaps.
    let summary = meta_dir.join("summary.scr");
    fs::write(&summary, b"not a kvtree").unwrap();
    index::drop_name(&cl.prefix, "ckpt.2").unwrap();
    let a = index::add_dir(&cl.prefix, "2").unwrap();
    assert!(a.complete && a.missing.is_empty() && a.scanned, "{a:#?}");
    assert!(
        a.problems.iter().any(|p| p.contains("damaged summary")),
        "{a:#?}"
    );
    index::set_current(&cl.prefix, "ckpt.2").unwrap();

    // A pack killed after the map was rewritten: one rank filemap still
    // names the plain file, which is still there.
    let rank = with_files[0];
    let mut rfm = scr::records::RankFilemap::read_file(map_path(rank)).unwrap();
    rfm.segments.clear();
    rfm.write_file(map_path(rank)).unwrap();
    let (name, data) = cl.files(rank, 2).remove(0);
    let plain = cl.prefix.join(cl.dataset_dir_name(2)).join(&name);
    fs::create_dir_all(plain.parent().unwrap()).unwrap();
    fs::write(&plain, &data).unwrap();
    let again = scr::scavenge::pack::pack_dataset(&cl.prefix, &pl, 5000, &[]).unwrap();
    assert!(
        again.already_packed && again.rank_filemaps == 1,
        "{again:?}"
    );
    assert!(!plain.exists());
    let rfm = scr::records::RankFilemap::read_file(map_path(rank)).unwrap();
    assert!(rfm.segments.values().all(|s| !s.is_empty()) && !rfm.segments.is_empty());
    assert_fetched(&cl, 2);

    // `scr index --rebuild` checks the containers the map names: whole,
    // the dataset stays complete; one cut short, it is not.
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    assert!(rb.datasets.iter().all(|d| d.complete), "{rb:#?}");
    let ctr = meta_dir.join("ctr.0.scr");
    let len = cut_one_byte(&ctr);
    let rb = rebuilt_incomplete(&cl);
    let d = &rb.datasets[0];
    assert!(
        d.problems
            .iter()
            .any(|p| p.contains("ctr.0.scr") && p.contains(&format!("{} bytes", len - 1))),
        "{d:#?}"
    );
}

/// A packed XOR dataset in the prefix that lost a member's rank filemap;
/// returns the cluster and the dataset's metadata directory.
fn packed_xor_losing_rank_1(seed: u64) -> (Cluster, PathBuf) {
    let cl = Cluster::new(seed, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 2);
    let r = cl.postrun_with(&[], None, Some(5000));
    let d = &r.datasets[0];
    assert!(d.complete && d.containers.is_some(), "{r:#?}");
    let meta_dir = d.placement.as_ref().unwrap().meta_dir(&cl.prefix);
    fs::remove_file(meta_dir.join("summary.scr")).unwrap();
    fs::remove_file(meta_dir.join("1.scrfilemap")).unwrap();
    index::drop_name(&cl.prefix, "ckpt.2").unwrap();
    (cl, meta_dir)
}

/// No directory of survivors' files read out of their containers is left.
fn assert_nothing_unpacked_left(meta_dir: &std::path::Path) {
    let left: Vec<_> = fs::read_dir(meta_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("unpacked.") || n.starts_with("rebuild."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `scr index` rebuilds a lost member of a packed dataset: its survivors'
/// files are read out of the containers (checked on the way), the lost
/// rank's files are written plain, and a restart fetches every byte.
#[test]
fn a_packed_dataset_that_loses_a_rank_is_rebuilt_from_the_containers() {
    let (cl, meta_dir) = packed_xor_losing_rank_1(29);
    let a = index::add_dir(&cl.prefix, "2").unwrap();
    assert!(
        a.complete && a.missing_before == vec![1] && a.rebuilt == vec![1],
        "{a:#?}"
    );
    assert_nothing_unpacked_left(&meta_dir);
    // The survivors stay packed; the rebuilt rank names no segments.
    let rfm = |r: i64| {
        scr::records::RankFilemap::read_file(meta_dir.join(format!("{r}.scrfilemap"))).unwrap()
    };
    assert!(rfm(1).segments.is_empty(), "{:?}", rfm(1));
    for r in (0..RANKS as i64).filter(|&r| r != 1) {
        let m = rfm(r);
        let app = m.files.keys().filter(|k| !k.starts_with(".scr/")).count();
        assert_eq!(m.segments.len(), app, "rank {r}: {m:?}");
    }
    index::set_current(&cl.prefix, "ckpt.2").unwrap();
    assert_fetched(&cl, 2);
}

/// A survivor whose bytes in a container were damaged fails the rebuild
/// with the file named, rather than giving the lost rank wrong bytes.
#[test]
fn a_packed_survivor_damaged_in_its_container_fails_the_rebuild() {
    let (cl, meta_dir) = packed_xor_losing_rank_1(31);
    // Flip one byte of every survivor's first packed file, inside its
    // container (whichever of them share rank 1's set).
    let mut damaged = Vec::new();
    for r in (0..RANKS).filter(|&r| r != 1) {
        let rfm =
            scr::records::RankFilemap::read_file(meta_dir.join(format!("{r}.scrfilemap"))).unwrap();
        let Some((key, segs)) = rfm.segments.iter().next() else {
            continue;
        };
        let seg = segs.iter().find(|s| s.length_bytes > 0).unwrap();
        let ctr = meta_dir.join(std::path::Path::new(&seg.file).file_name().unwrap());
        let mut bytes = fs::read(&ctr).unwrap();
        bytes[seg.offset_bytes as usize] ^= 0x40;
        fs::write(&ctr, &bytes).unwrap();
        damaged.push((r, key.clone()));
    }
    let a = index::add_dir(&cl.prefix, "2").unwrap();
    assert!(
        !a.complete && a.rebuilt.is_empty() && a.missing == vec![1],
        "{a:#?}"
    );
    assert!(
        a.problems.iter().any(|p| p.contains("CRC")
            && damaged
                .iter()
                .any(|(r, k)| p.contains(&format!("rank {r}: {k}")))),
        "{a:#?}"
    );
    assert_nothing_unpacked_left(&meta_dir);
    assert!(!meta_dir.join("1.scrfilemap").exists());
}

#[test]
fn files_routed_into_the_prefix_go_to_a_dataset_directory() {
    let cl = Cluster::legacy(5, Route::Prefix);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    cl.kill_node(1);
    let r = cl.postrun(&[1]);
    assert_eq!(r.datasets[0].index.as_ref().unwrap().rebuilt, vec![2, 3]);
    assert_complete_and_current(&cl, &r, 1);
    // The routed directory itself holds none of the dataset's files.
    assert!(!cl.prefix.join("rank0.c1.f0").exists());
    assert_fetched(&cl, 1);
}

#[test]
fn rs_rebuilds_two_lost_nodes() {
    let cl = Cluster::new(7, Route::UserDir);
    cl.write_and_crash(
        &[
            ("SCR_COPY_TYPE", "RS"),
            ("SCR_SET_SIZE", "4"),
            ("SCR_SET_FAILURES", "2"),
        ],
        1,
    );
    cl.kill_node(1);
    cl.kill_node(3);
    let r = cl.postrun(&[1]);
    let ix = r.datasets[0].index.as_ref().unwrap();
    assert_eq!(ix.rebuilt, vec![2, 3, 6, 7], "{r:#?}");
    assert_complete_and_current(&cl, &r, 1);
    // n3 was not declared down: its copy failed and is reported.
    let n3 = r.datasets[0]
        .copies
        .iter()
        .find(|c| c.node == "n3")
        .unwrap();
    assert!(
        n3.error.as_deref().is_some_and(|e| e.contains("gone")),
        "{n3:?}"
    );
}

#[test]
fn partner_copies_are_restored_in_a_second_round() {
    let cl = Cluster::new(11, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "PARTNER")], 1);
    cl.kill_node(1);
    let r = cl.postrun(&[1]);
    let d = &r.datasets[0];
    let round2: Vec<_> = d.copies.iter().filter(|c| c.round == "partner").collect();
    assert_eq!(round2.len(), 1, "{r:#?}");
    let rep = round2[0].report.as_ref().unwrap();
    let restored: BTreeSet<i64> = rep.ranks.iter().map(|k| k.rank).collect();
    assert_eq!(restored, [2, 3].into(), "{rep:#?}");
    assert!(rep
        .ranks
        .iter()
        .all(|k| k.complete && k.from_partner_of.is_some()));
    // Round 1 named the lost node as the owner of the copies.
    let named = d
        .copies
        .iter()
        .filter(|c| c.round == "originals")
        .flat_map(|c| c.report.iter().flat_map(|r| r.partners.iter()))
        .any(|p| p.owner_rank == 2 && p.owner_node.as_deref() == Some("n1"));
    assert!(named, "{r:#?}");
    assert!(d.index.as_ref().unwrap().rebuilt.is_empty());
    assert_complete_and_current(&cl, &r, 1);
    assert_fetched(&cl, 1);
}

#[test]
fn single_loses_a_node_and_the_index_says_incomplete() {
    let cl = Cluster::new(13, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "SINGLE")], 1);
    cl.kill_node(1);
    let r = cl.postrun(&[1]);
    let d = &r.datasets[0];
    assert!(!d.complete && !d.current, "{r:#?}");
    let ix = d.index.as_ref().unwrap();
    assert_eq!(ix.missing, vec![2, 3]);
    assert!(
        ix.problems.iter().any(|p| p.contains("no XOR/RS set")),
        "{ix:#?}"
    );
    let idx = cl.index();
    assert_eq!(idx.datasets[&1]["ckpt.1"].complete, Some(false));
    assert_eq!(idx.current, None);
    // Not recorded as in the prefix: a later attempt may still succeed.
    let ff = FlushFile::read_file(cl.prefix.join(".scr").join(FLUSH_FILE)).unwrap();
    assert!(!ff.location_test(1, Location::Pfs));
}

#[test]
fn xor_cannot_rebuild_two_members_of_one_set() {
    let cl = Cluster::new(17, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    cl.kill_node(0);
    cl.kill_node(3);
    let r = cl.postrun(&[0, 3]);
    let ix = r.datasets[0].index.as_ref().unwrap();
    assert!(!ix.complete && ix.rebuilt.is_empty(), "{ix:#?}");
    assert!(
        ix.problems
            .iter()
            .any(|p| p.contains("more than it can rebuild")),
        "{ix:#?}"
    );
}

#[test]
fn a_corrupt_cached_file_is_not_copied_and_is_rebuilt() {
    let cl = Cluster::new(19, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    // Rank 3 writes rank3.c1.f0 on n1: flip one bit of the cached copy.
    let cached = cl
        .root
        .join("n1/dev/shm/tester/scr.77/scr.dataset.1/ckpt.1/rank3.c1.f0");
    let mut b = fs::read(&cached).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x10;
    fs::write(&cached, b).unwrap();
    let r = cl.postrun(&[]);
    let d = &r.datasets[0];
    let failures: Vec<_> = d
        .copies
        .iter()
        .flat_map(|c| c.report.iter().flat_map(|r| r.failures.iter()))
        .collect();
    assert_eq!(failures.len(), 1, "{r:#?}");
    assert!(failures[0].why.contains("CRC32 mismatch") && failures[0].rank == 3);
    assert_eq!(d.index.as_ref().unwrap().rebuilt, vec![3]);
    assert_complete_and_current(&cl, &r, 1);
}

#[test]
fn scr_copy_on_one_node_reports_and_refuses_what_it_should() {
    let cl = Cluster::new(23, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    let opts = |id: i64, node: usize| CopyOptions {
        cntl_dir: PathBuf::from(CNTL),
        node: cl.node(node),
        dataset: id,
        prefix: cl.prefix.clone(),
        placement: None,
        partner: false,
        ranks: None,
        crc: true,
        buf_bytes: 0,
    };
    let r = copy_dataset(&opts(1, 0), &NoProgress).unwrap();
    assert!(r.is_complete(), "{r:#?}");
    if cl.legacy {
        assert_eq!(r.placement.dir, "ckpt.1");
    } else {
        assert_eq!(r.placement, Placement::scr31(1));
        assert!(cl.prefix.join(".scr/scr.dataset.1/0.scrfilemap").is_file());
    }
    assert_eq!(r.ranks.iter().map(|k| k.rank).collect::<Vec<_>>(), [0, 1]);
    // Rank 0 wrote 1 file + its XOR file; rank 1 wrote 2 + its XOR file.
    assert_eq!(
        r.ranks.iter().map(|k| k.expected).collect::<Vec<_>>(),
        [2, 3]
    );
    match copy_dataset(&opts(9, 0), &NoProgress) {
        Err(ScavengeError::NotInCache { id: 9, node, .. }) => assert_eq!(node, "n0"),
        other => panic!("{other:?}"),
    }
    // Without a flush file entry the dataset directory must be given.
    fs::remove_file(cl.prefix.join(".scr").join(FLUSH_FILE)).unwrap();
    match copy_dataset(&opts(1, 1), &NoProgress) {
        Err(e @ ScavengeError::NoPlacement { .. }) => {
            assert!(e.to_string().contains("--dir"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let mut given = opts(1, 1);
    given.placement = Some(Placement {
        dir: "../escape".into(),
        orig_dir: None,
        meta_of: None,
    });
    assert!(matches!(
        copy_dataset(&given, &NoProgress),
        Err(ScavengeError::NoPlacement { .. })
    ));
}

#[test]
fn a_damaged_index_is_reported_then_rebuilt_never_emptied() {
    let cl = Cluster::new(29, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    let r = cl.postrun(&[]);
    assert!(r.datasets[0].complete, "{r:#?}");
    let path = index_path(&cl.prefix);
    let mut b = fs::read(&path).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0xff;
    fs::write(&path, &b).unwrap();
    for e in [
        index::list(&cl.prefix).unwrap_err(),
        index::add_dir(&cl.prefix, "ckpt.1").unwrap_err(),
        index::set_current(&cl.prefix, "ckpt.1").unwrap_err(),
    ] {
        assert!(matches!(e, ScavengeError::DamagedIndex { .. }), "{e}");
        assert!(e.to_string().contains("--rebuild"), "{e}");
    }
    assert_eq!(
        fs::read(&path).unwrap(),
        b,
        "a damaged index is left as it is"
    );
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    let kept = rb.damaged_kept_as.clone().unwrap();
    assert_eq!(fs::read(&kept).unwrap(), b, "the damaged bytes are kept");
    assert_eq!(rb.current.as_deref(), Some("ckpt.1"));
    let idx = cl.index();
    assert_eq!(idx.datasets[&1]["ckpt.1"].complete, Some(true));
    assert_eq!(idx.current.as_deref(), Some("ckpt.1"));
}

#[test]
fn an_index_rebuild_finds_every_dataset_directory() {
    let cl = Cluster::new(31, Route::UserDir);
    cl.write_and_crash(
        &[
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_SET_SIZE", "4"),
            ("SCR_CACHE_SIZE", "2"),
        ],
        2,
    );
    // Scavenge both checkpoints by hand: copy on every node, no index.
    for id in 1..=2 {
        for n in 0..NODES {
            let o = CopyOptions {
                cntl_dir: PathBuf::from(CNTL),
                node: cl.node(n),
                dataset: id,
                prefix: cl.prefix.clone(),
                placement: None,
                partner: false,
                ranks: None,
                crc: true,
                buf_bytes: 0,
            };
            assert!(copy_dataset(&o, &NoProgress).unwrap().is_complete());
        }
    }
    // Lose rank 4's file of ckpt.1 in the prefix: the rebuild repairs it.
    fs::remove_file(cl.prefix.join("ckpt.1/rank4.c1.f0")).unwrap();
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    assert_eq!(rb.damaged_kept_as, None);
    let dirs: Vec<&str> = rb.datasets.iter().map(|d| d.dir.as_str()).collect();
    assert_eq!(dirs, [cl.add_arg(1).1, cl.add_arg(2).1]);
    assert_eq!(rb.datasets[0].rebuilt, vec![4]);
    assert_eq!(rb.current.as_deref(), Some("ckpt.2"));
    cl.verify(1);
    cl.verify(2);
}

#[test]
fn a_reused_directory_is_indexed_with_the_new_dataset_only() {
    let cl = Cluster::legacy(37, Route::SameDir);
    cl.write_and_crash(
        &[
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_SET_SIZE", "4"),
            ("SCR_CACHE_SIZE", "2"),
        ],
        2,
    );
    // Dataset 1 was saved in `ckpt` earlier (by hand here).
    for n in 0..NODES {
        let o = CopyOptions {
            cntl_dir: PathBuf::from(CNTL),
            node: cl.node(n),
            dataset: 1,
            prefix: cl.prefix.clone(),
            placement: None,
            partner: false,
            ranks: None,
            crc: true,
            buf_bytes: 0,
        };
        assert!(copy_dataset(&o, &NoProgress).unwrap().is_complete());
    }
    assert!(index::add_dir(&cl.prefix, "ckpt").unwrap().complete);
    // Postrun saves dataset 2 into the same directory with a node lost.
    cl.kill_node(3);
    let r = cl.postrun(&[3]);
    let d = &r.datasets[0];
    assert_eq!(d.id, 2);
    let stale = d
        .copies
        .iter()
        .flat_map(|c| c.report.iter().flat_map(|r| r.warnings.iter()))
        .filter(|w| w.contains("of dataset 1"))
        .count();
    assert!(
        stale >= RANKS / 2,
        "old rank filemaps and summary removed: {r:#?}"
    );
    assert_eq!(d.index.as_ref().unwrap().rebuilt, vec![6, 7]);
    assert_complete_and_current(&cl, &r, 2);
    let idx = cl.index();
    assert_eq!(idx.dataset_id_by_dir("ckpt"), Some(2));
    assert!(!idx.datasets.contains_key(&1), "{idx:?}");
}

// ---------------------------------------------------------------- the CLI

/// Run the `scr` binary; (exit code, stdout, stderr).
fn scr_cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .env_remove("SCR_PREFIX")
        .env_remove("SCR_NODELIST")
        .output()
        .expect("the scr binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_postrun_through_a_launcher_reads_each_nodes_json_report() {
    let cl = Cluster::new(41, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    cl.kill_node(1);
    let prefix = cl.prefix.to_string_lossy().into_owned();
    let root_arg = format!("SCR_NODE_ROOT={}/{{node}}", cl.root.display());
    // `env` stands in for ssh/srun: it runs `scr copy` "on" the node with
    // that node's identity, as a remote shell would.
    let (code, out, err) = scr_cli(&[
        "postrun",
        "--prefix",
        &prefix,
        "--nodes",
        "n0,n1,n2,n3",
        "--down",
        "n1",
        "--cntldir",
        CNTL,
        "--launch",
        "env",
        "--launch-arg",
        "SCR_NODE_NAME={node}",
        "--launch-arg",
        &root_arg,
        "--json",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
    assert_saved_without_n1(&v, &out);
    cl.verify(1);
}

/// The postrun JSON report `v` (printed as `out`) of dataset 1 with node
/// n1 down: copied from n0, n2 and n3, n1's ranks 2 and 3 rebuilt, the
/// dataset complete and current.
fn assert_saved_without_n1(v: &serde_json::Value, out: &str) {
    let d = &v["datasets"][0];
    assert_eq!(d["complete"], true, "{out}");
    assert_eq!(d["current"], true, "{out}");
    assert_eq!(d["index"]["rebuilt"], serde_json::json!([2, 3]));
    let nodes: Vec<&str> = d["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["report"]["node"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(nodes, ["n0", "n2", "n3"]);
}

/// `scr postrun -p DIR -j srun`, as SCR 3.1's job scripts end: the nodes
/// are the allocation's (SCR_NODELIST here), each is checked through the
/// launcher first and the one that fails its check is skipped, `scr copy`
/// runs on the others through it, and what the lost node held is rebuilt.
/// `srun` is a stand-in on PATH that runs the command "on" the node it
/// names (that node's identity and node-local tree), and fails on n1 as a
/// dead node's srun does.
#[test]
fn cli_postrun_dash_j_checks_the_nodes_and_copies_through_the_launcher() {
    use std::os::unix::fs::PermissionsExt;
    let cl = Cluster::new(47, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    cl.kill_node(1);
    let bin = tempfile::tempdir().unwrap();
    let srun = bin.path().join("srun");
    fs::write(
        &srun,
        format!(
            "#!/bin/sh\nnode=\n\
             while [ $# -gt 0 ]; do case \"$1\" in --nodelist) node=$2; shift 2 ;; -*) shift ;; *) break ;; esac; done\n\
             [ \"$node\" = n1 ] && {{ echo 'srun: error: Nodes n1 are down' >&2; exit 1; }}\n\
             exec env SCR_NODE_NAME=\"$node\" SCR_NODE_ROOT='{}'/\"$node\" \"$@\"\n",
            cl.root.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&srun, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let prefix = cl.prefix.to_string_lossy().into_owned();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scr"))
        .args([
            "postrun",
            "-p",
            &prefix,
            "-j",
            "srun",
            "--cntldir",
            CNTL,
            "--json",
            "-v",
        ])
        .env("PATH", path)
        .env("SCR_NODELIST", "n0,n1,n2,n3")
        .env_remove("SCR_PREFIX")
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_JOBID")
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        e.contains("node n1 down"),
        "-v says which node is down: {e}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&o).expect("stdout holds the JSON report alone");
    assert_saved_without_n1(&v, &o);
    cl.verify(1);
}

#[test]
fn cli_copy_and_index_exit_codes_say_what_happened() {
    let cl = Cluster::new(43, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "SINGLE")], 1);
    cl.kill_node(1);
    let prefix = cl.prefix.to_string_lossy().into_owned();
    for n in [0, 2, 3] {
        let root = cl.root.join(format!("n{n}")).to_string_lossy().into_owned();
        let (code, out, err) = scr_cli(&[
            "copy",
            "--cntldir",
            CNTL,
            "--id",
            "1",
            "--prefix",
            &prefix,
            "--node-root",
            &root,
        ]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("copied"), "{out}");
    }
    // The lost node's cache is gone: nothing of the dataset there.
    let gone = cl.root.join("n1").to_string_lossy().into_owned();
    let (code, _, err) = scr_cli(&[
        "copy",
        "--cntldir",
        CNTL,
        "--id",
        "1",
        "--prefix",
        &prefix,
        "--node-root",
        &gone,
    ]);
    assert_eq!(code, 4, "{err}");
    // SINGLE cannot rebuild ranks 2 and 3: indexed, but incomplete (3).
    let (code, out, err) = scr_cli(&["index", "--prefix", &prefix, "--add", &cl.add_arg(1).0]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        out.contains("INCOMPLETE") && out.contains("ranks missing after the copy: 2, 3"),
        "{out}"
    );
    let (code, out, _) = scr_cli(&["index", "--prefix", &prefix, "--list", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["datasets"][0]["complete"], false);
    assert_eq!(v["datasets"][0]["dir"], "ckpt.1");
    // A damaged index: reported (DAMAGED, pointing at --rebuild), then rebuilt.
    let idx = index_path(&cl.prefix);
    let mut b = fs::read(&idx).unwrap();
    let at = b.len() - 6;
    b[at] ^= 1;
    fs::write(&idx, &b).unwrap();
    let (code, _, err) = scr_cli(&["index", "--prefix", &prefix, "--list"]);
    assert_eq!(code, 6, "DAMAGED");
    assert!(
        err.contains("--rebuild") && err.contains("index.scr"),
        "{err}"
    );
    let (code, out, _) = scr_cli(&["index", "--prefix", &prefix, "--rebuild"]);
    assert_eq!(code, 3, "the one dataset is incomplete: {out}");
    assert!(out.contains("kept as"), "{out}");
}

#[test]
fn cli_usage_errors_exit_2() {
    // A bare `scr index` lists, as SCR 3.1's scr_index does
    // (cli_scr31_names.rs).
    let cases: &[&[&str]] = &[
        &["index", "--list", "--add", "x"],
        &["copy", "--id", "1"],
        &[
            "copy",
            "--cntldir",
            "/c",
            "--id",
            "1",
            "--prefix",
            "/p",
            "--origdir",
            ".",
        ],
        &[
            "postrun",
            "--nodes",
            "a,b",
            "--cntldir",
            "/c",
            "--prefix",
            "/p",
        ],
        &[
            "postrun",
            "--nodes",
            "a",
            "--down",
            "b",
            "--cntldir",
            "/c",
            "--prefix",
            "/p",
        ],
        &["postrun", "--launch-arg", "x", "--nodes", "a"],
    ];
    for args in cases {
        let (code, out, err) = scr_cli(args);
        assert_eq!(code, 2, "{args:?}: {out}\n{err}");
        assert!(!err.is_empty(), "{args:?} says why");
    }
}

#[test]
fn a_damaged_summary_is_rebuilt_from_the_rank_filemaps() {
    let cl = Cluster::legacy(47, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    assert!(cl.postrun(&[]).datasets[0].complete);
    let summary = cl.prefix.join("ckpt.1/.scr/summary.scr");
    let len = fs::metadata(&summary).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&summary)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    // The root of the rank2file map is truncated too.
    let root = cl.prefix.join("ckpt.1/.scr/rank2file.scr");
    fs::write(&root, b"").unwrap();
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    let d = &rb.datasets[0];
    assert!(d.complete && d.scanned, "{rb:#?}");
    assert!(
        d.problems
            .iter()
            .any(|p| p.contains("damaged summary replaced")),
        "{d:#?}"
    );
    assert!(scr::records::Summary::read_file(&summary).unwrap().complete);
    assert_fetched(&cl, 1);
}

/// Hardening issue: with `<prefix>/ckpt.1` a link to a directory outside
/// the prefix, `scr copy` (and so postrun) wrote the scavenged files
/// through it. The copy is refused, naming the link; nothing lands outside.
#[test]
fn scavenge_refuses_to_copy_through_a_symlink_in_the_prefix() {
    let cl = Cluster::new(31, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "SINGLE")], 1);
    let out = cl.root.join("OUT");
    fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&out, cl.prefix.join("ckpt.1")).unwrap();
    let opts = CopyOptions {
        cntl_dir: PathBuf::from(CNTL),
        node: cl.node(0),
        dataset: 1,
        prefix: cl.prefix.clone(),
        placement: None,
        partner: false,
        ranks: None,
        crc: true,
        buf_bytes: 0,
    };
    let shown = match copy_dataset(&opts, &NoProgress) {
        Ok(r) => {
            assert!(!r.is_complete(), "{r:#?}");
            format!("{r:?}")
        }
        Err(e) => e.to_string(),
    };
    assert!(shown.contains("symbolic link"), "{shown}");
    assert!(
        fs::read_dir(&out).unwrap().next().is_none(),
        "nothing written outside the prefix"
    );
}

/// `scr index` never reads or writes the index, a summary or a map
/// through a symbolic link out of the prefix: a link at `<prefix>/.scr`
/// or at a dataset directory is refused, naming it, and nothing is
/// written where it points.
#[test]
fn index_refuses_to_go_through_a_symlink_in_the_prefix() {
    let cl = Cluster::new(37, Route::UserDir);
    let out = cl.root.join("OUT");
    fs::create_dir(&out).unwrap();
    fs::create_dir_all(&cl.prefix).unwrap();
    // A dataset directory that is a link.
    std::os::unix::fs::symlink(&out, cl.prefix.join("ckpt.1")).unwrap();
    let e = index::add_dir(&cl.prefix, "ckpt.1").unwrap_err();
    assert!(matches!(e, ScavengeError::Beneath(_)), "{e}");
    assert!(e.to_string().contains("ckpt.1"), "{e}");
    // The metadata directory that is a link.
    let _ = fs::remove_dir_all(cl.prefix.join(".scr"));
    std::os::unix::fs::symlink(&out, cl.prefix.join(".scr")).unwrap();
    for e in [
        index::list(&cl.prefix).map(drop).unwrap_err(),
        index::rebuild_index(&cl.prefix).map(drop).unwrap_err(),
        index::set_current(&cl.prefix, "ckpt.1")
            .map(drop)
            .unwrap_err(),
    ] {
        assert!(matches!(e, ScavengeError::Beneath(_)), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
    assert!(
        fs::read_dir(&out).unwrap().next().is_none(),
        "nothing written outside"
    );
}

// ------------------------------------------- the rebuild checks what it indexes

/// Files of dataset `ckpt` in the prefix: its data under the routed
/// directory and, in SCR 3.1's layout, its metadata directory.
fn meta_dir_of(cl: &Cluster, ckpt: u64) -> PathBuf {
    cl.prefix.join(format!(".scr/scr.dataset.{ckpt}"))
}

#[test]
fn an_index_rebuild_does_not_call_a_dataset_without_files_complete() {
    let cl = Cluster::new(53, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    assert!(cl.postrun(&[]).datasets[0].complete);
    let old_index = fs::read(index_path(&cl.prefix)).unwrap();
    // Every rank's file and the whole map gone; the summary left saying COMPLETE.
    fs::remove_dir_all(cl.prefix.join("ckpt.1")).unwrap();
    for e in fs::read_dir(meta_dir_of(&cl, 1)).unwrap().flatten() {
        if e.file_name() != "summary.scr" {
            let p = e.path();
            if p.is_dir() {
                fs::remove_dir_all(&p).unwrap();
            } else {
                fs::remove_file(&p).unwrap();
            }
        }
    }
    let prefix = cl.prefix.to_string_lossy().into_owned();
    let (code, out, err) = scr_cli(&["index", "--prefix", &prefix, "--rebuild"]);
    assert_eq!(code, 3, "INCOMPLETE, not success: {out}\n{err}");
    assert!(
        out.contains("INCOMPLETE") && !out.contains(": COMPLETE"),
        "{out}"
    );
    assert!(out.contains("rank2file map cannot be read"), "{out}");
    let idx = cl.index();
    assert_eq!(idx.datasets[&1]["ckpt.1"].complete, Some(false));
    assert_eq!(idx.current, None, "no data: not CURRENT");
    // The old index (complete, CURRENT) was kept aside, and the output says where.
    let line = out
        .lines()
        .find(|l| l.contains("the old index said otherwise"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("no longer complete"), "{line}");
    let kept = line.rsplit("kept as ").next().unwrap();
    assert_eq!(fs::read(kept).unwrap(), old_index);
}

#[test]
fn an_index_rebuild_checks_sizes_and_crcs_of_the_listed_files() {
    let cl = Cluster::new(59, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    assert!(cl.postrun(&[]).datasets[0].complete);
    // Same size, one byte changed: only the CRC32 can tell.
    let victim = cl.prefix.join("ckpt.1/rank0.c1.f0");
    let mut b = fs::read(&victim).unwrap();
    b[0] ^= 0x5a;
    fs::write(&victim, &b).unwrap();
    // And another rank's file cut short.
    let short = cl.prefix.join("ckpt.1/rank1.c1.f0");
    let len = cut_one_byte(&short);
    let rb = rebuilt_incomplete(&cl);
    let d = &rb.datasets[0];
    assert!(
        d.problems
            .iter()
            .any(|p| p.contains("rank0.c1.f0") && p.contains("CRC32")),
        "{d:#?}"
    );
    assert!(
        d.problems
            .iter()
            .any(|p| p.contains("rank1.c1.f0") && p.contains(&format!("{} bytes", len - 1))),
        "{d:#?}"
    );
    assert_eq!(cl.index().datasets[&1]["ckpt.1"].complete, Some(false));
    assert!(rb.old_kept_as.is_some(), "{rb:#?}");
}

#[test]
fn an_index_rebuild_that_drops_an_entry_keeps_the_old_index_aside() {
    let cl = Cluster::new(61, Route::UserDir);
    cl.write_and_crash(&[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")], 1);
    assert!(cl.postrun(&[]).datasets[0].complete);
    let old_index = fs::read(index_path(&cl.prefix)).unwrap();
    // A damaged summary and no rank filemaps to rebuild it from.
    let meta = meta_dir_of(&cl, 1);
    let summary = meta.join("summary.scr");
    let len = fs::metadata(&summary).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&summary)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    for e in fs::read_dir(&meta).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with(".scrfilemap") {
            fs::remove_file(e.path()).unwrap();
        }
    }
    let rb = index::rebuild_index(&cl.prefix).unwrap();
    assert!(rb.datasets.is_empty() && rb.skipped.len() == 1, "{rb:#?}");
    assert!(
        rb.changes.iter().any(|c| c.contains("no longer indexed")),
        "{rb:#?}"
    );
    let kept = rb.old_kept_as.clone().expect("the old index kept aside");
    assert_eq!(
        fs::read(&kept).unwrap(),
        old_index,
        "the old bytes, as they were"
    );
    assert!(kept
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("index.scr.bak."));
    // A second rebuild that changes nothing keeps nothing more.
    let again = index::rebuild_index(&cl.prefix).unwrap();
    assert_eq!((again.old_kept_as, again.changes.len()), (None, 0));
}
