//! The conformance suite on the thread communicator at 1–256 ranks, plus the
//! failure modes only threads can show cheaply: a rank that never arrives, a
//! rank that panics, mismatched collectives.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use scr::comm::conformance;
use scr::comm::thread::{RunError, ThreadComm, ThreadConfig};
use scr::comm::{Comm, CommError, CommResult, ReduceOp};

/// A communicator that folds every byte it receives (and every reduced
/// value) into a running CRC32, in the order the rank sees them; its
/// sub-communicators fold into the same digest. Two runs that exchanged the
/// same data in the same order end with the same digest.
struct Digesting<'a> {
    inner: DigestInner<'a>,
    digest: Rc<RefCell<crc32fast::Hasher>>,
}

enum DigestInner<'a> {
    Borrowed(&'a dyn Comm),
    Owned(Box<dyn Comm>),
}

impl Digesting<'_> {
    fn comm(&self) -> &dyn Comm {
        match &self.inner {
            DigestInner::Borrowed(c) => *c,
            DigestInner::Owned(c) => c.as_ref(),
        }
    }

    fn fold(&self, tag: &str, bytes: &[u8]) {
        let mut h = self.digest.borrow_mut();
        h.update(tag.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
}

impl Comm for Digesting<'_> {
    fn rank(&self) -> usize {
        self.comm().rank()
    }
    fn size(&self) -> usize {
        self.comm().size()
    }
    fn barrier(&self) -> CommResult<()> {
        self.comm().barrier()
    }
    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> CommResult<()> {
        self.comm().bcast_bytes(root, buf)?;
        self.fold("bcast", buf);
        Ok(())
    }
    fn allreduce_i64(&self, vals: &mut [i64], op: ReduceOp) -> CommResult<()> {
        self.comm().allreduce_i64(vals, op)?;
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.fold("allreduce_i64", &bytes);
        Ok(())
    }
    fn allreduce_f64(&self, vals: &mut [f64], op: ReduceOp) -> CommResult<()> {
        self.comm().allreduce_f64(vals, op)?;
        let bytes: Vec<u8> = vals
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect();
        self.fold("allreduce_f64", &bytes);
        Ok(())
    }
    fn gather_bytes(&self, root: usize, data: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>> {
        let got = self.comm().gather_bytes(root, data)?;
        for b in got.iter().flatten() {
            self.fold("gather", b);
        }
        Ok(got)
    }
    fn allgather_bytes(&self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        let got = self.comm().allgather_bytes(data)?;
        for b in &got {
            self.fold("allgather", b);
        }
        Ok(got)
    }
    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> CommResult<usize> {
        let n = self.comm().sendrecv_bytes(send, recv_from, recv)?;
        self.fold("sendrecv", recv);
        Ok(n)
    }
    fn split(&self, color: Option<u32>, key: i64) -> CommResult<Option<Box<dyn Comm>>> {
        Ok(self.comm().split(color, key)?.map(|c| {
            Box::new(Digesting {
                inner: DigestInner::Owned(c),
                digest: Rc::clone(&self.digest),
            }) as Box<dyn Comm>
        }))
    }
    fn exchange_sparse(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>> {
        let got = self.comm().exchange_sparse(sends)?;
        for (src, b) in &got {
            self.fold("exchange", &(*src as u64).to_le_bytes());
            self.fold("exchange", b);
        }
        Ok(got)
    }
}

/// Run the conformance suite with `seed` on `n` thread ranks; each rank's
/// digest of everything it received.
fn digests_of_suite(n: usize, seed: u64) -> Vec<u32> {
    ThreadComm::run(n, |c: &dyn Comm| {
        let digest = Rc::new(RefCell::new(crc32fast::Hasher::new()));
        let comm = Digesting {
            inner: DigestInner::Borrowed(c),
            digest: Rc::clone(&digest),
        };
        conformance::run_with_seed(&comm, seed)
            .map(|_| digest.borrow().clone().finalize())
            .map_err(|f| f.to_string())
    })
    .expect("no panic")
    .into_iter()
    .enumerate()
    .map(|(rank, d)| d.unwrap_or_else(|e| panic!("seed {seed}, rank {rank}: {e}")))
    .collect()
}

fn suite_at(n: usize) {
    let reports = ThreadComm::run(n, |comm: &dyn Comm| conformance::run_all(comm))
        .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
    let checks = conformance::check_names().len();
    for (rank, report) in reports.into_iter().enumerate() {
        let report = report.unwrap_or_else(|f| panic!("{n} ranks: {f}"));
        assert_eq!(report.rank, rank);
        assert_eq!(report.size, n);
        assert_eq!((report.passed(), report.failed()), (checks, 0));
    }
}

#[test]
fn suite_1_rank() {
    suite_at(1);
}

#[test]
fn suite_2_ranks() {
    suite_at(2);
}

#[test]
fn suite_3_ranks() {
    suite_at(3);
}

#[test]
fn suite_4_ranks() {
    suite_at(4);
}

#[test]
fn suite_7_ranks() {
    suite_at(7);
}

#[test]
fn suite_16_ranks() {
    suite_at(16);
}

#[test]
fn suite_64_ranks() {
    suite_at(64);
}

#[test]
fn suite_256_ranks() {
    suite_at(256);
}

/// The same seed exchanges the same bytes in the same order on every rank;
/// another seed exchanges different ones (so the digest sees the data).
/// Replay a failure with `cargo test -p scr --test comm_thread suite_is_deterministic`.
#[test]
fn suite_is_deterministic_per_seed() {
    for seed in [42u64, 7] {
        let first = digests_of_suite(5, seed);
        let again = digests_of_suite(5, seed);
        assert_eq!(
            first, again,
            "seed {seed}: the data exchanged differs between two runs"
        );
    }
    assert_ne!(
        digests_of_suite(5, 42),
        digests_of_suite(5, 7),
        "seeds 42 and 7 exchanged the same data: the suite does not depend on its seed"
    );
}

fn short(ms: u64) -> ThreadConfig {
    ThreadConfig {
        timeout: Duration::from_millis(ms),
        ..ThreadConfig::default()
    }
}

#[test]
fn rank_that_never_arrives_times_out() {
    let out = ThreadComm::run_with(&short(200), 3, |c: &dyn Comm| {
        if c.rank() == 2 {
            // Stays alive but never enters the barrier.
            std::thread::sleep(Duration::from_millis(600));
            Ok(())
        } else {
            c.barrier()
        }
    })
    .expect("no panic");
    // The wait is bounded: the waiting ranks end with Timeout, not a hang.
    for (r, o) in out.iter().enumerate().take(2) {
        match o {
            Err(CommError::Timeout { rank, peer, .. }) => assert_eq!((*rank, *peer), (r, 2)),
            other => panic!("rank {r}: expected Timeout naming rank 2, got {other:?}"),
        }
    }
    assert_eq!(out[2], Ok(()));
}

#[test]
fn receive_from_silent_rank_times_out() {
    let out = ThreadComm::run_with(&short(100), 2, |c: &dyn Comm| {
        let mut buf = Vec::new();
        if c.rank() == 0 {
            c.sendrecv_bytes(None, Some(1), &mut buf)
        } else {
            // Outlive rank 0's wait, so its error is Timeout, not PeerGone.
            std::thread::sleep(Duration::from_millis(400));
            Ok(0)
        }
    })
    .expect("no panic");
    match &out[0] {
        Err(CommError::Timeout { op, peer: 1, .. }) => assert_eq!(*op, "sendrecv"),
        other => panic!("expected a sendrecv Timeout naming rank 1, got {other:?}"),
    }
}

#[test]
fn panicking_rank_is_reported_and_peers_do_not_hang() {
    let out = ThreadComm::run_with(&short(30_000), 4, |c: &dyn Comm| {
        if c.rank() == 1 {
            panic!("rank one fails on purpose");
        }
        let barrier = c.barrier();
        let mut buf = Vec::new();
        let recv = c.sendrecv_bytes(None, Some(1), &mut buf);
        (barrier, recv)
    });
    // Peers learn the rank is gone (PeerGone, see the next test) instead of
    // waiting out the 30 s timeout; the run reports the panic.
    match out {
        Err(RunError::Panicked(p)) => {
            assert_eq!(p.len(), 1);
            assert_eq!(p[0].0, 1);
            assert!(p[0].1.contains("on purpose"), "{}", p[0].1);
        }
        other => panic!("expected Panicked naming rank 1, got {other:?}"),
    }
}

#[test]
fn peers_of_a_panicking_rank_get_peer_gone() {
    let out = ThreadComm::run_with(&short(30_000), 3, |c: &dyn Comm| {
        if c.rank() == 0 {
            // Ends without the barrier: its peers must see PeerGone.
            return None;
        }
        Some(c.barrier())
    })
    .expect("no panic");
    for o in &out[1..] {
        assert_eq!(
            *o,
            Some(Err(CommError::PeerGone {
                op: "barrier",
                peer: 0
            }))
        );
    }
}

#[test]
fn mismatched_collectives_are_detected() {
    let out = ThreadComm::run_with(&short(5_000), 3, |c: &dyn Comm| {
        let mut buf = vec![1];
        match c.rank() {
            0 => c.barrier(),
            1 => c.bcast_bytes(0, &mut buf),
            _ => c.barrier(),
        }
    })
    .expect("no panic");
    for (r, o) in out.iter().enumerate() {
        assert!(
            matches!(o, Err(CommError::Mismatch { detail, .. }) if detail.contains("rank 1")),
            "rank {r}: {o:?}"
        );
    }
    // Different roots or lengths are mismatches too.
    let out = ThreadComm::run_with(&short(5_000), 2, |c: &dyn Comm| {
        let mut v = vec![0i64; 1 + c.rank()];
        c.allreduce_i64(&mut v, ReduceOp::Sum)
    })
    .expect("no panic");
    assert!(out
        .iter()
        .all(|o| matches!(o, Err(CommError::Mismatch { .. }))));
}

#[test]
fn timeout_comes_from_the_environment() {
    // Only the parsing is checked here: changing the process environment
    // would race with the other tests.
    let d = ThreadConfig::default();
    match std::env::var(scr::comm::thread::TIMEOUT_ENV) {
        Ok(v) => assert_eq!(Some(d.timeout.as_millis() as u64), v.trim().parse().ok()),
        Err(_) => assert_eq!(d.timeout, scr::comm::thread::DEFAULT_TIMEOUT),
    }
}

#[test]
fn sub_communicators_outlive_many_collectives() {
    // Hundreds of collectives on 256 ranks, alternating communicators.
    let start = Instant::now();
    let sums = ThreadComm::run(256, |c: &dyn Comm| -> Result<i64, CommError> {
        let node = c.split(Some((c.rank() / 8) as u32), c.rank() as i64)?;
        let node = node.ok_or(CommError::PeerGone {
            op: "split",
            peer: 0,
        })?;
        let mut total = 0;
        for i in 0..200 {
            let mut v = [i as i64];
            if i % 2 == 0 {
                c.allreduce_i64(&mut v, ReduceOp::Sum)?;
            } else {
                node.allreduce_i64(&mut v, ReduceOp::Sum)?;
            }
            total += v[0];
        }
        let sends = BTreeMap::from([((c.rank() + 1) % 256, vec![1u8])]);
        total += c.exchange_sparse(&sends)?.len() as i64;
        Ok(total)
    })
    .expect("no panic");
    let even: i64 = (0..200).filter(|i| i % 2 == 0).map(|i| i * 256).sum();
    let odd: i64 = (0..200).filter(|i| i % 2 == 1).map(|i| i * 8).sum();
    for s in sums {
        assert_eq!(s, Ok(even + odd + 1));
    }
    eprintln!("256 ranks x 200 collectives: {:?}", start.elapsed());
}
