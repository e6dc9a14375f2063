//! One conformance suite for every [`Comm`] implementation.
//!
//! [`run_all`] runs each named check on every rank of a communicator; the
//! thread communicator runs it in `cargo test` at 1–256 ranks and the MPI
//! communicator under `mpirun` (`testing/src/bin/comm_conformance.rs`). Checks
//! are deterministic: all data derives from one seed, printed in every
//! failure, and every rank can compute what every other rank sent.
//!
//! After each check the ranks agree on its outcome with [`Comm::all_true`], so
//! every rank reports the same pass/fail count. A check that fails with a
//! [`CommError`] leaves the ranks at different points of the collective
//! sequence, so the suite stops there instead of running further collectives
//! that could not match. A rank that sees wrong data leaves its check early
//! too, so its peers may be out of step at the next collective: the thread
//! communicator then reports a mismatch, MPI may hang until the launcher's
//! timeout. [`run_with_observer`] reports each local failure the moment it
//! happens, so the cause is printed even then.

use std::collections::BTreeMap;
use std::fmt;

use super::{bcast_kvtree, Comm, CommError, ReduceOp};
use crate::kvtree::KvTree;

/// Seed used by [`run_all`].
pub const DEFAULT_SEED: u64 = 0x5C12_C0DE_2026;

/// Size of the large messages (several MiB, odd so no size is a power of two).
pub const LARGE_BYTES: usize = 5 * 1024 * 1024 + 3;

/// Why one check failed on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Name of the check.
    pub check: &'static str,
    /// Rank (in the communicator under test) that saw the failure.
    pub rank: usize,
    /// Seed of the run.
    pub seed: u64,
    /// What was compared, with expected and actual values.
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "check {} failed on rank {} (seed {:#x}): {}",
            self.check, self.rank, self.seed, self.detail
        )
    }
}

/// Outcome of one check as seen by this rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Name of the check.
    pub check: &'static str,
    /// The check passed on every rank (agreed with `all_true`).
    pub passed_everywhere: bool,
    /// This rank's own failure, if any.
    pub local_failure: Option<Failure>,
}

/// Result of a conformance run on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Seed of the run.
    pub seed: u64,
    /// This rank.
    pub rank: usize,
    /// Communicator size.
    pub size: usize,
    /// One entry per check that ran, in order.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// Checks that passed on every rank.
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.passed_everywhere).count()
    }

    /// Checks that failed on at least one rank.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }
}

/// A conformance run that did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceFailure {
    /// What ran before the failure (and the agreed outcomes).
    pub report: Report,
    /// Set when a communication error stopped the suite early: the check and
    /// the error. Later checks did not run.
    pub aborted: Option<Failure>,
}

impl ConformanceFailure {
    /// This rank's failures, including the one that aborted the run.
    pub fn local_failures(&self) -> Vec<&Failure> {
        self.report
            .outcomes
            .iter()
            .filter_map(|o| o.local_failure.as_ref())
            .chain(self.aborted.as_ref())
            .collect()
    }
}

impl fmt::Display for ConformanceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conformance failed on rank {} of {} (seed {:#x}): {} passed, {} failed",
            self.report.rank,
            self.report.size,
            self.report.seed,
            self.report.passed(),
            self.report.failed()
        )?;
        if let Some(a) = &self.aborted {
            write!(f, "; stopped early: {a}")?;
        }
        for o in &self.report.outcomes {
            match &o.local_failure {
                Some(l) => write!(f, "; {l}")?,
                None if !o.passed_everywhere => {
                    write!(f, "; check {} failed on another rank", o.check)?
                }
                None => {}
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConformanceFailure {}

/// Why a check failed locally.
#[derive(Debug)]
enum CheckError {
    /// The communicator returned an error: the collective sequence may be broken.
    Comm(CommError),
    /// The communicator worked but returned wrong data.
    Value(String),
}

impl From<CommError> for CheckError {
    fn from(e: CommError) -> Self {
        CheckError::Comm(e)
    }
}

type CheckResult = Result<(), CheckError>;

type CheckFn = fn(&dyn Comm, u64) -> CheckResult;

/// The checks, in the order they run.
const CHECKS: &[(&str, CheckFn)] = &[
    ("rank_size", check_rank_size),
    ("barrier_repeated", check_barrier),
    ("bcast_roots", check_bcast_roots),
    ("bad_root_and_rank", check_bad_root_and_rank),
    ("allreduce_i64", check_allreduce_i64),
    ("allreduce_f64", check_allreduce_f64),
    ("all_true_any_true", check_all_any),
    ("gather_bytes", check_gather),
    ("allgather_bytes", check_allgather),
    ("sendrecv_ring", check_sendrecv_ring),
    ("sendrecv_one_sided", check_sendrecv_one_sided),
    ("sendrecv_large", check_sendrecv_large),
    ("split_modulo", check_split_modulo),
    ("split_none_reversed", check_split_none_reversed),
    ("split_collectives", check_split_collectives),
    ("split_nested", check_split_nested),
    ("split_contexts_distinct", check_split_contexts),
    ("bcast_large_on_split", check_bcast_large),
    ("exchange_sparse_empty", check_exchange_empty),
    ("exchange_sparse_self", check_exchange_self),
    ("exchange_sparse_seeded", check_exchange_seeded),
    ("exchange_sparse_dense", check_exchange_dense),
    ("exchange_sparse_bad_rank", check_exchange_bad_rank),
    ("bcast_kvtree", check_bcast_kvtree),
];

/// Names of all checks, in the order they run.
pub fn check_names() -> Vec<&'static str> {
    CHECKS.iter().map(|(n, _)| *n).collect()
}

/// Run every check with [`DEFAULT_SEED`]. Collective: call on every rank.
pub fn run_all(comm: &dyn Comm) -> Result<Report, ConformanceFailure> {
    run_with_seed(comm, DEFAULT_SEED)
}

/// Run every check with the given seed. Collective: call on every rank.
pub fn run_with_seed(comm: &dyn Comm, seed: u64) -> Result<Report, ConformanceFailure> {
    run_with_observer(comm, seed, &mut |_| {})
}

/// Like [`run_with_seed`], calling `observer` with each of this rank's
/// failures as soon as it happens (before the ranks agree on the outcome,
/// which may not complete if the failure left the ranks out of step).
pub fn run_with_observer(
    comm: &dyn Comm,
    seed: u64,
    observer: &mut dyn FnMut(&Failure),
) -> Result<Report, ConformanceFailure> {
    let mut report = Report {
        seed,
        rank: comm.rank(),
        size: comm.size(),
        outcomes: Vec::with_capacity(CHECKS.len()),
    };
    for (i, (name, check)) in CHECKS.iter().enumerate() {
        let check_seed = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let failure = |detail: String| Failure {
            check: name,
            rank: comm.rank(),
            seed,
            detail,
        };
        let local_failure = match check(comm, check_seed) {
            Ok(()) => None,
            Err(CheckError::Value(d)) => Some(failure(d)),
            Err(CheckError::Comm(e)) => {
                let f = failure(format!("communication error: {e}"));
                observer(&f);
                return Err(ConformanceFailure {
                    report,
                    aborted: Some(f),
                });
            }
        };
        if let Some(f) = &local_failure {
            observer(f);
        }
        let passed_everywhere = match comm.all_true(local_failure.is_none()) {
            Ok(v) => v,
            Err(e) => {
                let f = failure(format!("agreeing on the outcome: {e}"));
                observer(&f);
                report.outcomes.push(Outcome {
                    check: name,
                    passed_everywhere: false,
                    local_failure,
                });
                return Err(ConformanceFailure {
                    report,
                    aborted: Some(f),
                });
            }
        };
        report.outcomes.push(Outcome {
            check: name,
            passed_everywhere,
            local_failure,
        });
    }
    if report.failed() == 0 {
        Ok(report)
    } else {
        Err(ConformanceFailure {
            report,
            aborted: None,
        })
    }
}

// ---------------------------------------------------------------- helpers

/// SplitMix64: tiny, seedable, identical on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Deterministic bytes for message `(a, b)` of a check.
fn pattern(seed: u64, a: u64, b: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ a.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ b.rotate_left(29));
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

fn fail(what: impl fmt::Display, expected: impl fmt::Debug, got: impl fmt::Debug) -> CheckError {
    CheckError::Value(format!("{what}: expected {expected:?}, got {got:?}"))
}

fn expect_eq<T: PartialEq + fmt::Debug>(
    what: impl fmt::Display,
    expected: T,
    got: T,
) -> CheckResult {
    if expected == got {
        Ok(())
    } else {
        Err(fail(what, expected, got))
    }
}

/// Compare byte strings, describing a difference by length and first index
/// instead of printing megabytes.
fn expect_bytes(what: impl fmt::Display, expected: &[u8], got: &[u8]) -> CheckResult {
    if expected == got {
        return Ok(());
    }
    let first = expected
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    Err(CheckError::Value(format!(
        "{what}: expected {} bytes, got {} bytes, first difference at byte {first}",
        expected.len(),
        got.len()
    )))
}

fn u64_bytes(v: usize) -> Vec<u8> {
    (v as u64).to_le_bytes().to_vec()
}

/// The distinct ranks among `cands`, in order.
fn distinct_roots(size: usize, cands: &[usize]) -> Vec<usize> {
    let mut roots: Vec<usize> = Vec::new();
    for &c in cands {
        let r = c % size;
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    roots
}

/// Length of rank `r`'s contribution in the gather checks: zero on even ranks.
fn gather_len(r: usize) -> usize {
    if r.is_multiple_of(2) {
        0
    } else {
        r * 13 + 1
    }
}

fn must_split(sub: Option<Box<dyn Comm>>, what: &str) -> Result<Box<dyn Comm>, CheckError> {
    sub.ok_or_else(|| CheckError::Value(format!("{what}: expected a communicator, got None")))
}

/// Every rank's world rank, gathered on `sub`.
fn world_ranks_in(sub: &dyn Comm, world_rank: usize) -> Result<Vec<usize>, CheckError> {
    let all = sub.allgather_bytes(&u64_bytes(world_rank))?;
    all.iter()
        .map(|b| {
            <[u8; 8]>::try_from(b.as_slice())
                .map(|a| u64::from_le_bytes(a) as usize)
                .map_err(|_| fail("allgathered rank", 8, b.len()))
        })
        .collect()
}

// ---------------------------------------------------------------- checks

fn check_rank_size(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    if n == 0 || r >= n {
        return Err(fail("rank < size", format!("rank < {n}"), r));
    }
    expect_eq(
        "world ranks",
        (0..n).collect::<Vec<_>>(),
        world_ranks_in(comm, r)?,
    )?;
    let mut one = [1i64];
    comm.allreduce_i64(&mut one, ReduceOp::Sum)?;
    expect_eq("sum of 1 over ranks", n as i64, one[0])
}

fn check_barrier(comm: &dyn Comm, _seed: u64) -> CheckResult {
    for i in 0..5 {
        comm.barrier()?;
        let mut v = [i as i64 + comm.rank() as i64];
        comm.allreduce_i64(&mut v, ReduceOp::Min)?;
        expect_eq(format!("min after barrier {i}"), i as i64, v[0])?;
    }
    Ok(())
}

fn check_bcast_roots(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    for root in distinct_roots(n, &[0, n - 1, n / 2, 1]) {
        for len in [0, 1, 1000 + root] {
            let expected = pattern(seed, root as u64, len as u64, len);
            // Non-roots start with garbage of another length: it must be replaced.
            let mut buf = if r == root {
                expected.clone()
            } else {
                vec![0xEE; 17]
            };
            comm.bcast_bytes(root, &mut buf)?;
            expect_bytes(
                format!("bcast from root {root}, {len} bytes"),
                &expected,
                &buf,
            )?;
        }
    }
    Ok(())
}

fn check_bad_root_and_rank(comm: &dyn Comm, _seed: u64) -> CheckResult {
    // Every rank passes the same bad root, so every rank must reject it
    // locally without communicating.
    let n = comm.size();
    let mut buf = vec![1, 2, 3];
    match comm.bcast_bytes(n, &mut buf) {
        Err(CommError::BadRank { rank, .. }) if rank == n => {}
        other => return Err(fail("bcast with root = size", "BadRank", other)),
    }
    match comm.gather_bytes(n + 5, b"x") {
        Err(CommError::BadRank { .. }) => {}
        other => return Err(fail("gather with root = size + 5", "BadRank", other)),
    }
    let mut recv = Vec::new();
    match comm.sendrecv_bytes(Some((n, b"x")), None, &mut recv) {
        Err(CommError::BadRank { .. }) => {}
        other => return Err(fail("sendrecv to rank = size", "BadRank", other)),
    }
    match comm.sendrecv_bytes(None, Some(n + 1), &mut recv) {
        Err(CommError::BadRank { .. }) => Ok(()),
        other => Err(fail("sendrecv from rank = size + 1", "BadRank", other)),
    }
}

fn check_allreduce_i64(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank() as i64, comm.size() as i64);
    let mine = [r, -r, r * r, 7, i64::MIN + r, i64::MAX - r];
    let sq: i64 = (0..n).map(|x| x * x).sum();
    let cases = [
        (
            ReduceOp::Sum,
            [n * (n - 1) / 2, -(n * (n - 1) / 2), sq, 7 * n],
        ),
        (ReduceOp::Max, [n - 1, 0, (n - 1) * (n - 1), 7]),
        (ReduceOp::Min, [0, -(n - 1), 0, 7]),
    ];
    for (op, expected) in cases {
        let mut v = mine;
        comm.allreduce_i64(&mut v, op)?;
        expect_eq(format!("allreduce_i64 {op:?}"), &expected[..], &v[..4])?;
        match op {
            ReduceOp::Max => expect_eq("max near i64::MIN", i64::MIN + n - 1, v[4])?,
            ReduceOp::Min => expect_eq("min near i64::MAX", i64::MAX - (n - 1), v[5])?,
            ReduceOp::Sum => {}
        }
    }
    let mut empty: [i64; 0] = [];
    comm.allreduce_i64(&mut empty, ReduceOp::Sum)?;
    Ok(())
}

fn check_allreduce_f64(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank() as f64, comm.size() as f64);
    // Halves and small integers are exact, so any summation order agrees.
    let mine = [r * 0.5, -r, 1.0e300, -0.25];
    let cases = [
        (
            ReduceOp::Sum,
            [0.25 * n * (n - 1.0), -(n * (n - 1.0) / 2.0)],
        ),
        (ReduceOp::Max, [(n - 1.0) * 0.5, 0.0]),
        (ReduceOp::Min, [0.0, -(n - 1.0)]),
    ];
    for (op, expected) in cases {
        let mut v = mine;
        comm.allreduce_f64(&mut v, op)?;
        expect_eq(format!("allreduce_f64 {op:?}"), &expected[..], &v[..2])?;
        if op != ReduceOp::Sum {
            expect_eq(
                format!("allreduce_f64 {op:?} of constants"),
                [1.0e300, -0.25],
                [v[2], v[3]],
            )?;
        }
    }
    let mut empty: [f64; 0] = [];
    comm.allreduce_f64(&mut empty, ReduceOp::Max)?;
    Ok(())
}

fn check_all_any(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    expect_eq("all_true(true)", true, comm.all_true(true)?)?;
    expect_eq("all_true(rank != last)", false, comm.all_true(r != n - 1)?)?;
    expect_eq("all_true(rank even)", n == 1, comm.all_true(r % 2 == 0)?)?;
    expect_eq("any_true(false)", false, comm.any_true(false)?)?;
    expect_eq("any_true(rank == last)", true, comm.any_true(r == n - 1)?)
}

fn check_gather(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let expected: Vec<Vec<u8>> = (0..n)
        .map(|s| pattern(seed, s as u64, 0, gather_len(s)))
        .collect();
    for root in distinct_roots(n, &[0, n - 1]) {
        let got = comm.gather_bytes(root, &expected[r])?;
        match got {
            Some(all) if r == root => {
                expect_eq(format!("gather at root {root}: count"), n, all.len())?;
                for (s, (e, g)) in expected.iter().zip(&all).enumerate() {
                    expect_bytes(format!("gather at root {root}: from rank {s}"), e, g)?;
                }
            }
            None if r != root => {}
            other => {
                return Err(fail(
                    format!("gather at root {root}"),
                    if r == root { "Some" } else { "None" },
                    other.map(|v| v.len()),
                ))
            }
        }
    }
    Ok(())
}

fn check_allgather(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let expected: Vec<Vec<u8>> = (0..n)
        .map(|s| pattern(seed, s as u64, 1, gather_len(s) + s % 3))
        .collect();
    let got = comm.allgather_bytes(&expected[r])?;
    expect_eq("allgather count", n, got.len())?;
    for (s, (e, g)) in expected.iter().zip(&got).enumerate() {
        expect_bytes(format!("allgather from rank {s}"), e, g)?;
    }
    let empty = comm.allgather_bytes(&[])?;
    expect_eq("allgather of empty", vec![Vec::<u8>::new(); n], empty)
}

fn check_sendrecv_ring(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    // The receive buffer starts big and dirty: its capacity is reused and
    // its old contents must not leak into shorter messages.
    let mut buf = vec![0xAB; 1 << 16];
    for shift in distinct_roots(n, &[1, n - 1, 0, 2]) {
        let dest = (r + shift) % n;
        let src = (r + n - shift) % n;
        let len_of = |sender: usize| {
            if sender.is_multiple_of(3) {
                0
            } else {
                100 + sender
            }
        };
        let msg = pattern(seed, r as u64, shift as u64, len_of(r));
        let got = comm.sendrecv_bytes(Some((dest, &msg)), Some(src), &mut buf)?;
        let expected = pattern(seed, src as u64, shift as u64, len_of(src));
        expect_eq(
            format!("ring shift {shift}: returned length"),
            expected.len(),
            got,
        )?;
        expect_bytes(
            format!("ring shift {shift}: from rank {src}"),
            &expected,
            &buf,
        )?;
    }
    Ok(())
}

fn check_sendrecv_one_sided(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let mut buf = Vec::new();
    for direction in 0..2 {
        // Pairs (2k, 2k+1); direction 0: even sends, odd receives.
        let partner = r ^ 1;
        let sender = (r % 2 == 0) == (direction == 0);
        let msg = pattern(seed, r as u64, direction, 100);
        if partner >= n {
            let got = comm.sendrecv_bytes(None, None, &mut buf)?;
            expect_eq("sendrecv with neither side", 0, got)?;
        } else if sender {
            let got = comm.sendrecv_bytes(Some((partner, &msg)), None, &mut buf)?;
            expect_eq("send-only sendrecv returns", 0, got)?;
        } else {
            let got = comm.sendrecv_bytes(None, Some(partner), &mut buf)?;
            let expected = pattern(seed, partner as u64, direction, 100);
            expect_eq("receive-only length", 100, got)?;
            expect_bytes(format!("receive-only from {partner}"), &expected, &buf)?;
        }
    }
    Ok(())
}

fn check_sendrecv_large(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    // Ranks 0 and 1 swap several MiB (rank 0 sends to itself when alone);
    // the others only check that they are not disturbed.
    let partner = match (r, n) {
        (0, 1) => Some(0),
        (0, _) => Some(1),
        (1, _) => Some(0),
        _ => None,
    };
    let mut buf = Vec::new();
    if let Some(p) = partner {
        let msg = pattern(seed, r as u64, 7, LARGE_BYTES);
        let got = comm.sendrecv_bytes(Some((p, &msg)), Some(p), &mut buf)?;
        expect_eq("large sendrecv length", LARGE_BYTES, got)?;
        expect_bytes(
            format!("large sendrecv from {p}"),
            &pattern(seed, p as u64, 7, LARGE_BYTES),
            &buf,
        )?;
        // A power of two: an exact multiple of any power-of-two chunk size,
        // the case where a chunked transport must mark the end specially.
        let exact = 2 * 1024 * 1024;
        let msg = pattern(seed, r as u64, 8, exact);
        let got = comm.sendrecv_bytes(Some((p, &msg)), Some(p), &mut buf)?;
        expect_eq("power-of-two sendrecv length", exact, got)?;
        expect_bytes(
            format!("power-of-two sendrecv from {p}"),
            &pattern(seed, p as u64, 8, exact),
            &buf,
        )?;
    }
    comm.barrier()?;
    Ok(())
}

fn check_split_modulo(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let sub = must_split(
        comm.split(Some((r % 3) as u32), r as i64)?,
        "split by rank % 3",
    )?;
    let members: Vec<usize> = (0..n).filter(|x| x % 3 == r % 3).collect();
    expect_eq("sub size", members.len(), sub.size())?;
    expect_eq("sub rank", r / 3, sub.rank())?;
    expect_eq("sub members", members, world_ranks_in(sub.as_ref(), r)?)
}

fn check_split_none_reversed(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let color_of = |x: usize| (x % 4 != 3).then_some((x % 2) as u32);
    let sub = comm.split(color_of(r), -(r as i64))?;
    match (color_of(r), sub) {
        (None, None) => Ok(()),
        (None, Some(s)) => Err(fail("split with color None", "None", s.size())),
        (Some(_), None) => Err(fail("split with a color", "Some", "None")),
        (Some(c), Some(sub)) => {
            // Keys are -rank: the new order is the old one reversed.
            let members: Vec<usize> = (0..n).rev().filter(|&x| color_of(x) == Some(c)).collect();
            let pos = members.iter().position(|&x| x == r);
            expect_eq("reversed sub rank", pos, Some(sub.rank()))?;
            expect_eq(
                "reversed sub members",
                members,
                world_ranks_in(sub.as_ref(), r)?,
            )
        }
    }?;
    // Nobody gets a communicator when every color is None.
    let none = comm.split(None, 0)?;
    expect_eq("split with all colors None", true, none.is_none())
}

fn check_split_collectives(comm: &dyn Comm, seed: u64) -> CheckResult {
    let r = comm.rank();
    let sub = must_split(
        comm.split(Some((r % 2) as u32), r as i64)?,
        "split by parity",
    )?;
    let (sr, sn) = (sub.rank(), sub.size());
    let members: Vec<usize> = (0..comm.size()).filter(|x| x % 2 == r % 2).collect();
    sub.barrier()?;
    let root = sn - 1;
    let expected = pattern(seed, members[root] as u64, 1, 333);
    let mut buf = if sr == root {
        expected.clone()
    } else {
        Vec::new()
    };
    sub.bcast_bytes(root, &mut buf)?;
    expect_bytes("bcast on split from last rank", &expected, &buf)?;
    let mut sum = [r as i64];
    sub.allreduce_i64(&mut sum, ReduceOp::Sum)?;
    expect_eq(
        "sum of world ranks on split",
        members.iter().sum::<usize>() as i64,
        sum[0],
    )?;
    let gathered = sub.gather_bytes(root, &u64_bytes(r))?;
    if sr == root {
        let expected: Vec<Vec<u8>> = members.iter().map(|&m| u64_bytes(m)).collect();
        expect_eq("gather on split at last rank", Some(expected), gathered)?;
    }
    let next = (sr + 1) % sn;
    let prev = (sr + sn - 1) % sn;
    let mut ring = Vec::new();
    sub.sendrecv_bytes(Some((next, &u64_bytes(r))), Some(prev), &mut ring)?;
    expect_eq("ring on split", u64_bytes(members[prev]), ring)?;
    let sends = BTreeMap::from([(next, u64_bytes(r))]);
    let got = sub.exchange_sparse(&sends)?;
    expect_eq(
        "exchange_sparse on split",
        BTreeMap::from([(prev, u64_bytes(members[prev]))]),
        got,
    )
}

fn check_split_nested(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let r = comm.rank();
    let a = must_split(comm.split(Some((r % 2) as u32), r as i64)?, "outer split")?;
    let ar = a.rank();
    let b = must_split(a.split(Some((ar % 2) as u32), -(ar as i64))?, "inner split")?;
    // World ranks of the same parity, then of the same parity of their index
    // within that group, in reverse order.
    let outer: Vec<usize> = (0..comm.size()).filter(|x| x % 2 == r % 2).collect();
    let inner: Vec<usize> = outer
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, _)| i % 2 == ar % 2)
        .map(|(_, &w)| w)
        .collect();
    expect_eq(
        "inner members",
        inner.clone(),
        world_ranks_in(b.as_ref(), r)?,
    )?;
    let mut sum = [r as i64, 1];
    b.allreduce_i64(&mut sum, ReduceOp::Sum)?;
    expect_eq(
        "inner sum",
        [inner.iter().sum::<usize>() as i64, inner.len() as i64],
        sum,
    )?;
    // The outer communicator still works after the inner one was made.
    let mut count = [1i64];
    a.allreduce_i64(&mut count, ReduceOp::Sum)?;
    expect_eq("outer size by sum", outer.len() as i64, count[0])
}

fn check_split_contexts(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    // Same members, same ranks: only the message context differs.
    let sub = must_split(comm.split(Some(0), r as i64)?, "split into a copy")?;
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let mut buf = Vec::new();
    // Small messages (eager under MPI), sent on the parent first and received
    // on the copy first: a shared context would swap them.
    comm.sendrecv_bytes(Some((next, b"parent")), None, &mut buf)?;
    sub.sendrecv_bytes(Some((next, b"copy")), None, &mut buf)?;
    sub.sendrecv_bytes(None, Some(prev), &mut buf)?;
    expect_bytes("message on the copy", b"copy", &buf)?;
    comm.sendrecv_bytes(None, Some(prev), &mut buf)?;
    expect_bytes("message on the parent", b"parent", &buf)?;
    Ok(())
}

fn check_bcast_large(comm: &dyn Comm, seed: u64) -> CheckResult {
    let r = comm.rank();
    // Only the first 4 ranks take part, so 256 thread ranks do not hold a
    // copy each; the rest pass None.
    let sub = comm.split((r < 4).then_some(0), r as i64)?;
    let Some(sub) = sub else { return Ok(()) };
    let root = sub.size() - 1;
    let expected = pattern(seed, 3, 3, LARGE_BYTES);
    let mut buf = if sub.rank() == root {
        expected.clone()
    } else {
        vec![1; 10]
    };
    sub.bcast_bytes(root, &mut buf)?;
    expect_bytes("large bcast", &expected, &buf)
}

fn check_exchange_empty(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let got = comm.exchange_sparse(&BTreeMap::new())?;
    expect_eq("exchange of nothing", BTreeMap::new(), got)
}

fn check_exchange_self(comm: &dyn Comm, seed: u64) -> CheckResult {
    let r = comm.rank();
    let msg = pattern(seed, r as u64, 0, r % 5);
    let got = comm.exchange_sparse(&BTreeMap::from([(r, msg.clone())]))?;
    expect_eq("exchange to self", BTreeMap::from([(r, msg)]), got)
}

/// Rank `src`'s destinations and message lengths in seeded round `seed`.
fn seeded_sends(seed: u64, src: usize, n: usize) -> BTreeMap<usize, usize> {
    let mut rng = Rng::new(seed ^ (src as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let k = rng.below(n.min(5) as u64 + 1);
    let mut out = BTreeMap::new();
    for _ in 0..k {
        let dest = rng.below(n as u64) as usize;
        // Mostly small, some empty, some of several KiB (so a transport
        // that splits messages into pieces interleaves them).
        let len = match rng.below(5) {
            0 => 0,
            1 => rng.below(20_000) as usize,
            _ => rng.below(300) as usize,
        };
        out.insert(dest, len);
    }
    out
}

fn check_exchange_seeded(comm: &dyn Comm, seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    // Consecutive exchanges with no barrier between them: messages of one
    // round must never be received in another.
    for round in 0..6u64 {
        let s = seed ^ round.wrapping_mul(0x1000_0000_01B3);
        let msg = |src: usize, dst: usize, len: usize| pattern(s, src as u64, dst as u64, len);
        let sends: BTreeMap<usize, Vec<u8>> = seeded_sends(s, r, n)
            .into_iter()
            .map(|(d, len)| (d, msg(r, d, len)))
            .collect();
        let got = comm.exchange_sparse(&sends)?;
        let expected: BTreeMap<usize, Vec<u8>> = (0..n)
            .filter_map(|src| {
                seeded_sends(s, src, n)
                    .get(&r)
                    .map(|&len| (src, msg(src, r, len)))
            })
            .collect();
        if got != expected {
            return Err(fail(
                format!("seeded exchange round {round} (round seed {s:#x}): sources and lengths"),
                expected
                    .iter()
                    .map(|(k, v)| (*k, v.len()))
                    .collect::<Vec<_>>(),
                got.iter().map(|(k, v)| (*k, v.len())).collect::<Vec<_>>(),
            ));
        }
    }
    Ok(())
}

fn check_exchange_dense(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let tag = |src: usize, dst: usize| u64_bytes(src * n + dst);
    let sends: BTreeMap<usize, Vec<u8>> = (0..n).map(|d| (d, tag(r, d))).collect();
    let got = comm.exchange_sparse(&sends)?;
    let expected: BTreeMap<usize, Vec<u8>> = (0..n).map(|s| (s, tag(s, r))).collect();
    expect_eq("dense exchange", expected, got)
}

fn check_exchange_bad_rank(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    // Rank 0 names a rank that does not exist: it alone gets BadRank, and
    // its valid message (to the last rank) is still delivered.
    let mut sends = BTreeMap::from([((r + 1) % n, u64_bytes(r))]);
    if r == 0 {
        sends.insert(n + 3, b"nowhere".to_vec());
    }
    let got = comm.exchange_sparse(&sends);
    if r == 0 {
        match got {
            Err(CommError::BadRank { rank, .. }) if rank == n + 3 => Ok(()),
            other => Err(fail("exchange naming rank size + 3", "BadRank", other)),
        }
    } else {
        let prev = (r + n - 1) % n;
        expect_eq(
            "exchange beside a bad destination",
            BTreeMap::from([(prev, u64_bytes(prev))]),
            got?,
        )
    }
}

fn check_bcast_kvtree(comm: &dyn Comm, _seed: u64) -> CheckResult {
    let (r, n) = (comm.rank(), comm.size());
    let root = n - 1;
    let mut expected = KvTree::new();
    expected.set_kv("RANK", root).set_int("FILES", 3);
    expected.set_kv("DSET", 7).set_val("NAME", "ckpt.7");
    let mut tree = if r == root {
        expected.clone()
    } else {
        KvTree::new()
    };
    bcast_kvtree(comm, root, &mut tree).map_err(|e| match e {
        super::BcastKvError::Comm(c) => CheckError::Comm(c),
        other => CheckError::Value(format!("bcast_kvtree: {other}")),
    })?;
    if tree == expected {
        Ok(())
    } else {
        Err(CheckError::Value(
            "bcast_kvtree: received tree differs from the root's".into(),
        ))
    }
}
