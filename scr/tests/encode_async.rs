//! Asynchronous protection (SCR_ENCODE_ASYNC=1) with the thread
//! communicator: SCR_Complete_output returns before the CRC32s and the
//! redundancy encode are done; the next Start_output (or finalize) waits
//! for them. Shown by its effect:
//! - right after Complete_output the dataset is recorded on disk as not
//!   complete (`SCR_ENCODE_ASYNC=0` records it complete), and the store
//!   keeps the previous protected checkpoint meanwhile;
//! - every scheme restarts bit-exact after a node loss from checkpoints
//!   protected in the background;
//! - a job that dies (its node trees copied at that moment and put back)
//!   before protection restarts from the newest protected checkpoint, never
//!   from the unprotected one, whatever the scheme, the moment and the
//!   loss: a seeded property test (replay: `ASYNC_SEED=<seed> cargo test -p
//!   scr --test encode_async`);
//! - the wait for a background encode counts in the checkpoint's cost, as
//!   Need_checkpoint's overhead and adaptive policies read it;
//! - a rank that cannot write its filemap at Complete_output fails the
//!   checkpoint on every rank (synchronous and asynchronous), with no rank
//!   left in a collective the others skipped.

mod common;

use std::path::Path;

use common::{data, restart_and_verify, run, Cluster};
use scr::comm::Comm;
use scr::{Flags, Scr};

const SEED: u64 = 23;
const RANKS: usize = 8;

fn node_of(r: usize) -> usize {
    r / 2
}

fn env(scheme: &str) -> Vec<(&'static str, String)> {
    let mut e = vec![
        ("SCR_COPY_TYPE", scheme.to_string()),
        ("SCR_SET_SIZE", "4".into()),
        ("SCR_ENCODE_ASYNC", "1".into()),
    ];
    if scheme == "RS" {
        e.push(("SCR_SET_FAILURES", "1".into()));
    }
    e
}

fn as_refs<'a>(e: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    e.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Start checkpoint `c` and write this rank's files; the phase is left
/// open when `complete` is false (a job that dies while writing).
fn write_ckpt(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, c: usize, complete: bool) {
    let rank = comm.rank();
    let mut out = scr
        .start_output(Some(&format!("ckpt.{c}")), Flags::CHECKPOINT)
        .unwrap();
    let files = if rank % 3 == 2 { 0 } else { 1 + rank % 2 };
    for f in 0..files {
        let p = out
            .route_file(prefix.join(format!("ckpt.{c}/rank{rank}.f{f}")))
            .unwrap();
        std::fs::write(&p, data(SEED, rank, c, f)).unwrap();
    }
    if complete {
        assert!(out.complete(true).unwrap(), "checkpoint {c} complete");
    } else {
        // Dropping the phase would complete it as invalid; a dead job
        // does nothing more.
        std::mem::forget(out);
    }
}

/// The COMPLETE flag every rank's filemap in `root`'s node trees records
/// for dataset `id` (the filemaps are kvtree files; read through the
/// library's own reader).
fn complete_flags(root: &Path, id: i64) -> Vec<Option<bool>> {
    let mut flags = Vec::new();
    for f in common::files_below(root) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("filemap_") && name.ends_with(".scrinfo")) {
            continue;
        }
        let fm = <scr::records::filemap::Filemap as scr::records::Record>::read_file(&f).unwrap();
        for r in fm.list_ranks_by_dataset(scr::ids::DatasetId(id)) {
            let ds = fm.dataset(scr::ids::DatasetId(id), r).unwrap();
            flags.push(ds.and_then(|d| d.complete));
        }
    }
    flags
}

fn dataset_dirs(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = common::files_below(root)
        .into_iter()
        .filter_map(|p| {
            p.ancestors()
                .filter_map(|a| a.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .find(|n| n.starts_with("scr.dataset."))
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_tree(&e.path(), &to);
        } else if ty.is_file() {
            // A file may be replaced (renamed over) while we copy: take
            // whichever version is there.
            let _ = std::fs::copy(e.path(), &to);
        }
    }
}

/// Copy every node tree of the cluster to `snap` (what a dead job leaves).
fn snapshot(cl: &Cluster, snap: &Path) {
    for n in 0..RANKS / 2 {
        let from = cl.root.join(format!("n{n}"));
        if from.exists() {
            copy_tree(&from, &snap.join(format!("n{n}")));
        }
    }
}

/// Put the snapshot back in place of every node tree.
fn restore(cl: &Cluster, snap: &Path) {
    for n in 0..RANKS / 2 {
        let to = cl.root.join(format!("n{n}"));
        if to.exists() {
            std::fs::remove_dir_all(&to).unwrap();
        }
        let from = snap.join(format!("n{n}"));
        if from.exists() {
            copy_tree(&from, &to);
        }
    }
}

#[test]
fn complete_returns_before_protection_and_the_store_keeps_the_previous_checkpoint() {
    for asynchronous in ["1", "0"] {
        let cl = Cluster::new();
        let snap = tempfile::tempdir().unwrap();
        let e = [
            ("SCR_COPY_TYPE", "XOR"),
            ("SCR_SET_SIZE", "4"),
            ("SCR_CACHE_SIZE", "1"),
            ("SCR_ENCODE_ASYNC", asynchronous),
        ];
        run(&cl, RANKS, node_of, &e, |scr, c| {
            write_ckpt(scr, c, &cl.prefix, 1, true);
            write_ckpt(scr, c, &cl.prefix, 2, true);
            assert_eq!(scr.protecting(), asynchronous == "1");
            c.barrier().unwrap();
            if c.rank() == 0 {
                snapshot(&cl, snap.path());
            }
            c.barrier().unwrap();
            None
        });
        let flags = complete_flags(snap.path(), 2);
        assert_eq!(flags.len(), RANKS, "every rank recorded dataset 2");
        let dirs = dataset_dirs(snap.path());
        if asynchronous == "1" {
            assert!(
                flags.iter().all(|f| *f == Some(false)),
                "not complete before protection: {flags:?}"
            );
            assert_eq!(
                dirs,
                ["scr.dataset.1", "scr.dataset.2"],
                "the protected one is kept"
            );
        } else {
            assert!(flags.iter().all(|f| *f == Some(true)), "{flags:?}");
            assert_eq!(dirs, ["scr.dataset.2"], "SCR_CACHE_SIZE=1 keeps one");
        }
        // Finalize settled the encode: complete on disk now.
        let flags = complete_flags(&cl.root, 2);
        assert!(flags.iter().all(|f| *f == Some(true)), "{flags:?}");
    }
}

#[test]
fn every_scheme_protected_in_the_background_restarts_bit_exact_after_a_node_loss() {
    for scheme in ["SINGLE", "PARTNER", "XOR", "RS"] {
        let cl = Cluster::new();
        let e = env(scheme);
        let e = as_refs(&e);
        run(&cl, RANKS, node_of, &e, |scr, c| {
            for n in 1..=3 {
                write_ckpt(scr, c, &cl.prefix, n, true);
            }
            None
        });
        let lose = scheme != "SINGLE";
        if lose {
            cl.kill_node(1);
        }
        let got = run(&cl, RANKS, node_of, &e, |scr, c| {
            if lose {
                let rebuilt: Vec<i64> = scr.init_report().rebuilt.iter().map(|d| d.get()).collect();
                assert!(rebuilt.contains(&3), "{scheme}: rebuilt {rebuilt:?}");
            }
            restart_and_verify(scr, c, &cl.prefix, SEED)
        });
        assert_eq!(got[0].as_deref(), Some("ckpt.3"), "{scheme}");
    }
}

/// When the job dies, relative to the background encode of checkpoint k.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// Right after Complete_output of k returned (encode under way or done,
    /// never settled).
    AfterComplete,
    /// After Start_output of k + 1 settled k (k is protected).
    AfterSettle,
    /// While k + 1's files are being written (k protected).
    DuringNextWrite,
}

/// A small deterministic generator (splitmix64) for the property test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn a_job_that_dies_before_protection_never_restarts_from_the_unprotected_checkpoint() {
    let seeds: Vec<u64> = match std::env::var("ASYNC_SEED") {
        Ok(s) => vec![s.parse().expect("ASYNC_SEED is a number")],
        Err(_) => (1..=12).collect(),
    };
    for seed in seeds {
        let mut rng = Rng(seed);
        let scheme = ["SINGLE", "PARTNER", "XOR", "RS"][rng.below(4) as usize];
        let k = 1 + rng.below(3) as usize;
        let moment = [
            Moment::AfterComplete,
            Moment::AfterSettle,
            Moment::DuringNextWrite,
        ][rng.below(3) as usize];
        let lost_node = (rng.below(2) == 1).then(|| rng.below(4) as usize);
        let case = format!(
            "seed {seed}: {scheme}, dies {moment:?} of checkpoint {k}, node lost {lost_node:?} \
             (replay: ASYNC_SEED={seed} cargo test -p scr --test encode_async)"
        );
        let cl = Cluster::new();
        let snap = tempfile::tempdir().unwrap();
        let e = env(scheme);
        let e = as_refs(&e);
        run(&cl, RANKS, node_of, &e, |scr, c| {
            for n in 1..=k {
                write_ckpt(scr, c, &cl.prefix, n, true);
            }
            match moment {
                Moment::AfterComplete => {}
                Moment::AfterSettle => {
                    let out = scr
                        .start_output(Some(&format!("ckpt.{}", k + 1)), Flags::CHECKPOINT)
                        .unwrap();
                    std::mem::forget(out);
                }
                Moment::DuringNextWrite => write_ckpt(scr, c, &cl.prefix, k + 1, false),
            }
            c.barrier().unwrap();
            if c.rank() == 0 {
                snapshot(&cl, snap.path());
            }
            c.barrier().unwrap();
            // The job is dead from here on: what it does next (finalize
            // settles the encode) happens after the snapshot.
            None
        });
        restore(&cl, snap.path());
        if let Some(n) = lost_node {
            cl.kill_node(n);
        }
        // The newest checkpoint the scheme can prove whole.
        let newest_protected = match moment {
            Moment::AfterComplete => k - 1,
            Moment::AfterSettle | Moment::DuringNextWrite => k,
        };
        let want = if newest_protected == 0 || (scheme == "SINGLE" && lost_node.is_some()) {
            None
        } else {
            Some(format!("ckpt.{newest_protected}"))
        };
        let got = run(&cl, RANKS, node_of, &e, |scr, c| {
            let report = scr.init_report().clone();
            if matches!(moment, Moment::AfterComplete) {
                let unprotected = scr::ids::DatasetId(k as i64);
                assert!(
                    !report.available.contains(&unprotected),
                    "{case}: the unprotected dataset is not offered: {report:?}"
                );
            }
            restart_and_verify(scr, c, &cl.prefix, SEED)
        });
        assert_eq!(got[0], want, "{case}");
    }
}

/// Run `body` on `RANKS` thread ranks with SCR_Config strings `configs`,
/// the world communicator wrapped by `wrap`.
fn run_configured(
    cl: &Cluster,
    configs: &[&str],
    wrap: fn(Box<dyn Comm>) -> Box<dyn Comm>,
    body: impl Fn(&mut Scr, &dyn Comm) + Sync,
) {
    scr::comm::thread::ThreadComm::run(RANKS, |comm| {
        let mut opts = cl.opts(cl.node(node_of(comm.rank())), &[]);
        opts.configs = configs.iter().map(|s| s.to_string()).collect();
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let mut scr = Scr::init_with(wrap(world), opts).unwrap();
        body(&mut scr, comm);
        scr.finalize().unwrap();
    })
    .unwrap();
}

#[test]
fn a_descriptor_s_encode_async_applies_to_its_own_checkpoints() {
    let cl = Cluster::new();
    let configs = [
        "CKPT=0 TYPE=XOR SET_SIZE=4",
        "CKPT=1 INTERVAL=2 TYPE=PARTNER ENCODE_ASYNC=1",
    ];
    run_configured(
        &cl,
        &configs,
        |w| w,
        |scr, c| {
            assert_eq!(
                scr.config("CKPT=1 ENCODE_ASYNC").unwrap().as_deref(),
                Some("1")
            );
            assert_eq!(
                scr.config("CKPT=0 ENCODE_ASYNC").unwrap().as_deref(),
                Some("0")
            );
            write_ckpt(scr, c, &cl.prefix, 1, true);
            assert!(
                !scr.protecting(),
                "checkpoint 1 takes CKPT=0: protected at complete"
            );
            write_ckpt(scr, c, &cl.prefix, 2, true);
            assert!(
                scr.protecting(),
                "checkpoint 2 takes CKPT=1: in the background"
            );
            write_ckpt(scr, c, &cl.prefix, 3, true);
            assert!(!scr.protecting(), "Start_output settled checkpoint 2");
        },
    );
    let got = run(&cl, RANKS, node_of, &[], |scr, c| {
        restart_and_verify(scr, c, &cl.prefix, SEED)
    });
    assert_eq!(got[0].as_deref(), Some("ckpt.3"));
}

/// A world communicator that does not say it may move to another thread
/// (as MPI without MPI_THREAD_MULTIPLE).
struct Pinned(Box<dyn Comm>);

impl Comm for Pinned {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn barrier(&self) -> scr::comm::CommResult<()> {
        self.0.barrier()
    }
    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> scr::comm::CommResult<()> {
        self.0.bcast_bytes(root, buf)
    }
    fn allreduce_i64(&self, v: &mut [i64], op: scr::comm::ReduceOp) -> scr::comm::CommResult<()> {
        self.0.allreduce_i64(v, op)
    }
    fn allreduce_f64(&self, v: &mut [f64], op: scr::comm::ReduceOp) -> scr::comm::CommResult<()> {
        self.0.allreduce_f64(v, op)
    }
    fn gather_bytes(&self, root: usize, d: &[u8]) -> scr::comm::CommResult<Option<Vec<Vec<u8>>>> {
        self.0.gather_bytes(root, d)
    }
    fn allgather_bytes(&self, d: &[u8]) -> scr::comm::CommResult<Vec<Vec<u8>>> {
        self.0.allgather_bytes(d)
    }
    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> scr::comm::CommResult<usize> {
        self.0.sendrecv_bytes(send, recv_from, recv)
    }
    fn split(&self, color: Option<u32>, key: i64) -> scr::comm::CommResult<Option<Box<dyn Comm>>> {
        self.0.split(color, key)
    }
    fn exchange_sparse(
        &self,
        sends: &std::collections::BTreeMap<usize, Vec<u8>>,
    ) -> scr::comm::CommResult<std::collections::BTreeMap<usize, Vec<u8>>> {
        self.0.exchange_sparse(sends)
    }
}

#[test]
fn without_threads_for_the_communicator_encode_async_is_refused_and_protection_is_synchronous() {
    let cl = Cluster::new();
    let configs = ["SCR_COPY_TYPE=XOR", "SCR_SET_SIZE=4", "SCR_ENCODE_ASYNC=1"];
    run_configured(
        &cl,
        &configs,
        |w| Box::new(Pinned(w)),
        |scr, c| {
            write_ckpt(scr, c, &cl.prefix, 1, true);
            assert!(
                !scr.protecting(),
                "refused: protected before complete returns"
            );
        },
    );
    let flags = complete_flags(&cl.root, 1);
    assert!(flags.iter().all(|f| *f == Some(true)), "{flags:?}");
}

#[test]
fn have_restart_counts_a_checkpoint_once_its_background_protection_is_settled() {
    let cl = Cluster::new();
    let e = env("XOR");
    let e = as_refs(&e);
    run(&cl, RANKS, node_of, &e, |scr, c| {
        write_ckpt(scr, c, &cl.prefix, 1, true);
        assert!(scr.protecting());
        assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.1"));
        assert!(!scr.protecting(), "Have_restart settled it");
        write_ckpt(scr, c, &cl.prefix, 2, true);
        assert!(
            scr.wait_protection().unwrap(),
            "checkpoint 2 ended protected"
        );
        assert!(!scr.wait_protection().unwrap(), "nothing left to wait for");
        None
    });
}

#[test]
fn the_wait_for_a_background_encode_counts_in_the_checkpoint_s_cost() {
    // Need_checkpoint's overhead and adaptive policies read what each
    // checkpoint cost the application: the time blocked in Start_output …
    // Complete_output, plus the time a later call waited for the
    // background encode. The wait is measured at settle and added to the
    // checkpoint's entry; nothing is added without a background encode.
    let cl = Cluster::new();
    let e = env("XOR");
    let e = as_refs(&e);
    run(&cl, RANKS, node_of, &e, |scr, c| {
        write_ckpt(scr, c, &cl.prefix, 1, true);
        assert!(scr.protecting());
        let blocked = scr.checkpoint_costs().to_vec();
        assert_eq!(blocked.len(), 1, "{blocked:?}");
        let t = std::time::Instant::now();
        assert!(scr.wait_protection().unwrap());
        let waited_here = t.elapsed().as_secs_f64();
        let after = scr.checkpoint_costs().to_vec();
        assert_eq!(after[0].0, blocked[0].0, "the same checkpoint");
        let added = after[0].1 - blocked[0].1;
        assert!(
            added > 0.0 && added <= waited_here + 1e-6,
            "added {added} s, the call took {waited_here} s"
        );
        // Nothing pending: settling again adds nothing.
        assert!(!scr.wait_protection().unwrap());
        assert_eq!(scr.checkpoint_costs(), &after[..]);
        None
    });
}

/// Rank `rank`'s filemap file (node trees below `root`, two ranks a node).
fn filemap_of(root: &Path, rank: usize) -> std::path::PathBuf {
    let want = format!("filemap_{}.scrinfo", rank % 2);
    common::files_below(&root.join(format!("n{}", node_of(rank))))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == want))
        .unwrap_or_else(|| panic!("rank {rank}: no {want} below {}", root.display()))
}

#[test]
fn a_filemap_one_rank_cannot_write_at_complete_fails_the_checkpoint_everywhere_without_a_hang() {
    // Rank 2's filemap path is made a non-empty directory between its
    // files' writes and Complete_output, so its record of checkpoint 2
    // cannot be renamed into place. Every rank must learn it (no rank left
    // waiting in a collective the failing one skipped), none may restart
    // from checkpoint 2, and the job goes on once the path is writable.
    for (scheme, asynchronous) in [("SINGLE", "0"), ("XOR", "0"), ("SINGLE", "1"), ("XOR", "1")] {
        let cl = Cluster::new();
        let e = [
            ("SCR_COPY_TYPE", scheme),
            ("SCR_SET_SIZE", "4"),
            ("SCR_ENCODE_ASYNC", asynchronous),
        ];
        run(&cl, RANKS, node_of, &e, |scr, c| {
            let rank = c.rank();
            write_ckpt(scr, c, &cl.prefix, 1, true);
            let mut out = scr.start_output(Some("ckpt.2"), Flags::CHECKPOINT).unwrap();
            let p = out
                .route_file(cl.prefix.join(format!("ckpt.2/rank{rank}.f0")))
                .unwrap();
            std::fs::write(&p, data(SEED, rank, 2, 0)).unwrap();
            let blocked = (rank == 2).then(|| {
                let fm = filemap_of(&cl.root, rank);
                std::fs::remove_file(&fm).unwrap();
                std::fs::create_dir(&fm).unwrap();
                std::fs::write(fm.join("in-the-way"), b"x").unwrap();
                fm
            });
            let got = out.complete(true);
            assert!(
                !matches!(got, Ok(true)),
                "{scheme} async={asynchronous} rank {rank}: checkpoint 2 must fail, got {got:?}"
            );
            if let Some(fm) = blocked {
                std::fs::remove_dir_all(fm).unwrap();
            }
            c.barrier().unwrap();
            write_ckpt(scr, c, &cl.prefix, 3, true);
            None
        });
        let got = run(&cl, RANKS, node_of, &e, |scr, c| {
            restart_and_verify(scr, c, &cl.prefix, SEED)
        });
        assert_eq!(
            got[0].as_deref(),
            Some("ckpt.3"),
            "{scheme} async={asynchronous}"
        );
        let flags = complete_flags(&cl.root, 2);
        assert!(
            flags.iter().all(|f| *f != Some(true)),
            "{scheme} async={asynchronous}: no rank records checkpoint 2 complete: {flags:?}"
        );
    }
}
