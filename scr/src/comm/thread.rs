//! In-process ranks as threads: a [`Comm`] for unit and property tests at
//! hundreds of ranks, and for simulation.
//!
//! Design. Every communicator (the world and each split) owns one shared
//! [`Context`]: a table of collective *rounds* and one mailbox per rank. The
//! `Arc` of a context is its message context, so a split communicator can never
//! see its parent's messages (MPI gets the same from `MPI_Comm_split`).
//!
//! - Collectives: rank `r`'s `k`-th collective on a communicator deposits its
//!   contribution into round `k` (O(1) under the context's lock); the last
//!   rank to arrive checks that all ranks called the same operation with the
//!   same root/length (else every rank gets [`CommError::Mismatch`]), computes
//!   the result once (the reduction, the split's communicators and each rank's
//!   place in them, the sparse exchange's per-destination inboxes), publishes
//!   it in the round's slot and wakes each member once. No rank folds the P
//!   contributions itself, so a round costs O(P) in total, not O(P²) (issue
//!   17; results/scale.md). Only an allgather or a gather at the root copies
//!   P contributions, which its result is.
//! - Point to point: sends are buffered (pushed into the receiver's mailbox
//!   under the sender's rank), so `sendrecv` never deadlocks; a send wakes the
//!   receiver only.
//!
//! Wake-ups go to the ranks concerned: each world rank has a [`Parker`] (a
//! generation counter and a condition variable) where all its waits sleep;
//! nobody polls. Every wait is bounded: a rank that never arrives yields
//! [`CommError::Timeout`] naming the lowest missing rank, and a rank whose
//! closure ended (returned or panicked) yields [`CommError::PeerGone`] to
//! ranks still waiting for it: a rank that ends wakes the ranks waiting for
//! it at that moment (in a round it has not entered, or receiving from it),
//! found through the communicators it belongs to; a rank that ends after its
//! last collective wakes nobody. Before its ranks start, a job grows the
//! process's futex hash to about two slots per rank (`futex_hash.rs`): the
//! kernel sizes it by CPUs, and each wake-up walks its slot's waiters.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::{Comm, CommError, CommResult, ReduceOp};

/// Default bound on every wait when `SCR_THREAD_COMM_TIMEOUT_MS` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable overriding [`DEFAULT_TIMEOUT`] (milliseconds).
pub const TIMEOUT_ENV: &str = "SCR_THREAD_COMM_TIMEOUT_MS";

/// Default stack of a rank thread: small, so 256+ ranks cost little memory
/// (only touched pages are resident), yet enough for debug builds of the
/// library's algorithms, which keep big data on the heap.
pub const DEFAULT_STACK_BYTES: usize = 512 * 1024;

/// Settings of one [`ThreadComm::run_with`] job.
#[derive(Debug, Clone)]
pub struct ThreadConfig {
    /// Bound on every single wait (collective round or receive).
    pub timeout: Duration,
    /// Stack size of each rank thread in bytes.
    pub stack_bytes: usize,
}

impl Default for ThreadConfig {
    /// [`DEFAULT_TIMEOUT`] (or `SCR_THREAD_COMM_TIMEOUT_MS` when set to a
    /// number) and [`DEFAULT_STACK_BYTES`].
    fn default() -> Self {
        let timeout = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_TIMEOUT);
        ThreadConfig {
            timeout,
            stack_bytes: DEFAULT_STACK_BYTES,
        }
    }
}

/// Why a [`ThreadComm::run`] job failed as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// One or more rank closures panicked; `(rank, panic message)` in rank order.
    #[error("rank(s) panicked: {}", describe_panics(.0))]
    Panicked(Vec<(usize, String)>),
    /// The operating system refused to create a rank thread.
    #[error("could not spawn the thread of rank {rank}: {message}")]
    Spawn {
        /// The rank whose thread could not start.
        rank: usize,
        /// The OS error.
        message: String,
    },
}

/// What a rank's closure panicked with, kept apart from the closure's own
/// result type so a panic can never be mistaken for a value.
struct PanicMessage(String);

fn describe_panics(p: &[(usize, String)]) -> String {
    p.iter()
        .map(|(r, m)| format!("rank {r}: {m}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Per-rank communication counters of one [`ThreadComm::run_counted`] job,
/// indexed by world rank and summed over every communicator of that rank
/// (the world and its splits): what a benchmark reports as communicator
/// calls and bytes per rank. One relaxed atomic add per operation.
#[derive(Debug)]
pub struct CommStats {
    ranks: Vec<RankCounters>,
}

/// One rank's counters, on its own cache line so ranks do not contend.
#[derive(Debug, Default)]
#[repr(align(64))]
struct RankCounters {
    calls: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
}

/// A snapshot of one rank's [`CommStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommCounts {
    /// Communicator operations called (each [`Comm`] method call is one).
    pub calls: u64,
    /// Payload bytes this rank contributed (sent).
    pub bytes_sent: u64,
    /// Payload bytes this rank got back (received), e.g. every rank's
    /// contribution for an allgather.
    pub bytes_received: u64,
}

impl CommCounts {
    /// The counts accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &CommCounts) -> CommCounts {
        CommCounts {
            calls: self.calls.saturating_sub(earlier.calls),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
        }
    }
}

impl CommStats {
    /// Counters for a job of `n` ranks, all zero.
    pub fn new(n: usize) -> Arc<CommStats> {
        Arc::new(CommStats {
            ranks: (0..n).map(|_| RankCounters::default()).collect(),
        })
    }

    /// The counts of world rank `rank` so far (zero for a rank outside the job).
    pub fn get(&self, rank: usize) -> CommCounts {
        self.ranks
            .get(rank)
            .map(|c| CommCounts {
                calls: c.calls.load(Ordering::Relaxed),
                bytes_sent: c.bytes_sent.load(Ordering::Relaxed),
                bytes_received: c.bytes_received.load(Ordering::Relaxed),
            })
            .unwrap_or_default()
    }

    fn add(&self, rank: usize, sent: usize, received: usize) {
        if let Some(c) = self.ranks.get(rank) {
            c.calls.fetch_add(1, Ordering::Relaxed);
            c.bytes_sent.fetch_add(sent as u64, Ordering::Relaxed);
            c.bytes_received
                .fetch_add(received as u64, Ordering::Relaxed);
        }
    }
}

/// Runs a closure on `n` in-process ranks, each a thread holding a
/// [`Comm`] over the world of `n` ranks (SCR's `scr_comm_world`).
#[derive(Debug, Clone, Copy)]
pub struct ThreadComm;

impl ThreadComm {
    /// Run `f` on `n` ranks with [`ThreadConfig::default`]; results in rank
    /// order. Fails if any rank panicked (naming the ranks).
    pub fn run<R, F>(n: usize, f: F) -> Result<Vec<R>, RunError>
    where
        R: Send,
        F: Fn(&dyn Comm) -> R + Sync,
    {
        Self::run_with(&ThreadConfig::default(), n, f)
    }

    /// Run `f` on `n` ranks with explicit settings.
    pub fn run_with<R, F>(config: &ThreadConfig, n: usize, f: F) -> Result<Vec<R>, RunError>
    where
        R: Send,
        F: Fn(&dyn Comm) -> R + Sync,
    {
        Self::run_inner(config, None, n, f)
    }

    /// [`ThreadComm::run_with`], counting every rank's communicator calls
    /// and bytes in `stats` (made by [`CommStats::new`] for `n` ranks; the
    /// closure may read it while it runs, e.g. around a phase).
    pub fn run_counted<R, F>(
        config: &ThreadConfig,
        stats: &Arc<CommStats>,
        n: usize,
        f: F,
    ) -> Result<Vec<R>, RunError>
    where
        R: Send,
        F: Fn(&dyn Comm) -> R + Sync,
    {
        Self::run_inner(config, Some(stats.clone()), n, f)
    }

    fn run_inner<R, F>(
        config: &ThreadConfig,
        stats: Option<Arc<CommStats>>,
        n: usize,
        f: F,
    ) -> Result<Vec<R>, RunError>
    where
        R: Send,
        F: Fn(&dyn Comm) -> R + Sync,
    {
        super::futex_hash::grow(n);
        let world = Arc::new(World {
            gone: (0..n).map(|_| AtomicBool::new(false)).collect(),
            gone_count: AtomicUsize::new(0),
            parkers: (0..n).map(|_| Parker::default()).collect(),
            memberships: (0..n).map(|_| Mutex::default()).collect(),
            timeout: config.timeout,
            stats,
        });
        let ctx = Context::new(world.clone(), (0..n).collect());
        let mut results: Vec<Option<Result<R, PanicMessage>>> = (0..n).map(|_| None).collect();
        let mut spawn_error = None;
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(n);
            for rank in 0..n {
                let comm = ThreadRankComm::new(ctx.clone(), rank);
                let rank_world = world.clone();
                let f = &f;
                let spawned = std::thread::Builder::new()
                    .name(format!("rank{rank}"))
                    .stack_size(config.stack_bytes)
                    .spawn_scoped(scope, move || {
                        let out = catch_unwind(AssertUnwindSafe(|| f(&comm)));
                        // Mark the rank gone whether it returned or panicked:
                        // either way it will never take part again.
                        rank_world.mark_gone(rank);
                        out.map_err(|p| PanicMessage(panic_message(&*p)))
                    });
                match spawned {
                    Ok(h) => handles.push((rank, h)),
                    Err(e) => {
                        // Ranks that never start are gone, so the started
                        // ones fail fast with PeerGone instead of timing out.
                        for r in rank..n {
                            world.mark_gone(r);
                        }
                        spawn_error = Some(RunError::Spawn {
                            rank,
                            message: e.to_string(),
                        });
                        break;
                    }
                }
            }
            for (rank, h) in handles {
                // The closure's panic was caught inside the thread, so join
                // only fails if the catch itself failed; record it as a panic.
                results[rank] = Some(
                    h.join()
                        .unwrap_or_else(|p| Err(PanicMessage(panic_message(&*p)))),
                );
            }
        });
        if let Some(e) = spawn_error {
            return Err(e);
        }
        let mut out = Vec::with_capacity(n);
        let mut panics = Vec::new();
        for (rank, r) in results.into_iter().enumerate() {
            match r {
                Some(Ok(v)) => out.push(v),
                Some(Err(PanicMessage(m))) => panics.push((rank, m)),
                None => panics.push((rank, "rank did not run".to_string())),
            }
        }
        if panics.is_empty() {
            Ok(out)
        } else {
            Err(RunError::Panicked(panics))
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// A communicator a world rank belongs to, and its rank there.
type Membership = (Weak<Context>, usize);

/// State shared by all ranks of one job.
#[derive(Debug)]
struct World {
    /// Indexed by world rank: the rank's closure has ended.
    gone: Vec<AtomicBool>,
    /// How many ranks are gone: a waiting rank rescans the peers it waits
    /// for only when this changed.
    gone_count: AtomicUsize,
    /// Indexed by world rank: where that rank's waits sleep.
    parkers: Vec<Parker>,
    /// Indexed by world rank: the communicators it belongs to and its rank
    /// in each, so a rank that ends can find who waits for it.
    memberships: Vec<Mutex<Vec<Membership>>>,
    timeout: Duration,
    /// Counters of [`ThreadComm::run_counted`], by world rank.
    stats: Option<Arc<CommStats>>,
}

impl World {
    /// World rank `rank` will never take part again: mark it and wake the
    /// ranks waiting for it right now (in a round it has not entered, or
    /// receiving from it), so they end with PeerGone instead of a timeout.
    /// A rank that ends after its last collective wakes nobody.
    fn mark_gone(&self, rank: usize) {
        if let Some(g) = self.gone.get(rank) {
            g.store(true, Ordering::SeqCst);
        }
        self.gone_count.fetch_add(1, Ordering::SeqCst);
        let contexts: Vec<(Arc<Context>, usize)> = self
            .memberships
            .get(rank)
            .map(|m| {
                lock(m)
                    .iter()
                    .filter_map(|(ctx, local)| ctx.upgrade().map(|c| (c, *local)))
                    .collect()
            })
            .unwrap_or_default();
        for (ctx, local) in contexts {
            ctx.wake_waiters_of(local);
        }
    }
}

/// Where one world rank's waits sleep. A wake-up bumps the generation; a
/// waiter reads the generation before it checks its condition and sleeps
/// only while the generation is unchanged, so no wake-up is lost. Any
/// thread may wait here (a rank's communicator may move to another thread).
#[derive(Debug, Default)]
struct Parker {
    state: Mutex<ParkState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct ParkState {
    generation: u64,
    /// Threads inside `wait_timeout` now: a wake-up with none skips the
    /// notify, a system call even when nobody waits.
    sleepers: usize,
}

impl Parker {
    fn generation(&self) -> u64 {
        lock(&self.state).generation
    }

    fn wake(&self) {
        let sleepers = {
            let mut s = lock(&self.state);
            s.generation = s.generation.wrapping_add(1);
            s.sleepers
        };
        if sleepers > 0 {
            self.cv.notify_all();
        }
    }

    /// Sleep until a wake-up later than generation `seen`, or at most
    /// `limit`. Callers recheck their condition (spurious returns happen).
    fn sleep(&self, seen: u64, limit: Duration) {
        let mut s = lock(&self.state);
        if s.generation == seen {
            s.sleepers += 1;
            let mut s = self
                .cv
                .wait_timeout(s, limit)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            s.sleepers -= 1;
        }
    }
}

/// A receive in progress on a mailbox, visible to [`World::mark_gone`]:
/// the source it waits for (plus one; 0 = none) and a count per context.
struct RecvWait<'a> {
    ctx: &'a Context,
    mailbox: &'a Mailbox,
}

impl<'a> RecvWait<'a> {
    fn new(ctx: &'a Context, mailbox: &'a Mailbox, src: usize) -> RecvWait<'a> {
        mailbox.waiting_for.store(src + 1, Ordering::SeqCst);
        ctx.receivers_waiting.fetch_add(1, Ordering::SeqCst);
        RecvWait { ctx, mailbox }
    }
}

impl Drop for RecvWait<'_> {
    fn drop(&mut self) {
        self.mailbox.waiting_for.store(0, Ordering::SeqCst);
        self.ctx.receivers_waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a rank brings to a collective round.
#[derive(Debug)]
enum Payload {
    None,
    Bytes(Vec<u8>),
    I64(Vec<i64>, ReduceOp),
    F64(Vec<f64>, ReduceOp),
    Split(Option<u32>, i64),
    Sparse(BTreeMap<usize, Vec<u8>>),
}

/// One rank's contribution plus what must agree across ranks.
#[derive(Debug)]
struct Contribution {
    op: &'static str,
    /// Root rank, or a reduction operator and length: must match everywhere.
    signature: String,
    payload: Payload,
}

/// A completed round, computed once by the last rank to arrive.
#[derive(Debug, Default)]
struct RoundOutcome {
    /// Every rank's contribution (bcast, gather and allgather read them;
    /// the sparse exchange's maps are moved to `inboxes`).
    contribs: Vec<Contribution>,
    /// allreduce: the reduced values (`Payload::I64` or `Payload::F64`).
    reduced: Option<Payload>,
    /// exchange_sparse: what each rank receives, by source rank; each rank
    /// takes its own.
    inboxes: Vec<Mutex<BTreeMap<usize, Vec<u8>>>>,
    /// split: each rank's new communicator and its rank there.
    placements: Vec<Option<(Arc<Context>, usize)>>,
}

type RoundResult = Result<Arc<RoundOutcome>, CommError>;

/// A round still collecting contributions.
#[derive(Debug)]
struct Round {
    contribs: Vec<Option<Contribution>>,
    arrived: usize,
    /// Set once, by the last rank to arrive; every member holds it.
    slot: Arc<OnceLock<RoundResult>>,
}

#[derive(Debug, Default)]
struct Mailbox {
    /// Messages by source rank, FIFO per source as in MPI.
    queues: Mutex<BTreeMap<usize, VecDeque<Vec<u8>>>>,
    /// Emptied buffers the owner of this mailbox gave back after receiving
    /// (its previous `recv` buffer); senders to it fill one of these instead
    /// of allocating, so a hot sendrecv loop copies each message once and
    /// allocates nothing (an allocation per message costs 2–3×, RUNTIME.md).
    spare: Mutex<Vec<Vec<u8>>>,
    /// The source the owner is receiving from, plus one (0: none).
    waiting_for: AtomicUsize,
}

/// Most spare buffers a mailbox keeps (bounds the memory a burst leaves).
const SPARE_BUFFERS: usize = 4;

/// The message context of one communicator.
#[derive(Debug)]
struct Context {
    world: Arc<World>,
    /// Local rank -> world rank.
    members: Vec<usize>,
    /// Rounds in progress by sequence number; a round leaves the table when
    /// it completes.
    rounds: Mutex<BTreeMap<u64, Round>>,
    boxes: Vec<Mailbox>,
    /// Receives in progress on this context's mailboxes.
    receivers_waiting: AtomicUsize,
}

impl Context {
    fn new(world: Arc<World>, members: Vec<usize>) -> Arc<Context> {
        let boxes = members.iter().map(|_| Mailbox::default()).collect();
        let ctx = Arc::new(Context {
            world,
            members,
            rounds: Mutex::new(BTreeMap::new()),
            boxes,
            receivers_waiting: AtomicUsize::new(0),
        });
        for (local, &w) in ctx.members.iter().enumerate() {
            if let Some(m) = ctx.world.memberships.get(w) {
                lock(m).push((Arc::downgrade(&ctx), local));
            }
        }
        ctx
    }

    /// Wake the members waiting for `local`, which is gone: those that
    /// entered a round `local` has not, and those receiving from it. Under
    /// the rounds lock, after the gone flag is set: a member entering a
    /// round later sees the flag when it checks (World::gone_count).
    fn wake_waiters_of(&self, local: usize) {
        let waiting: Vec<usize> = {
            let rounds = lock(&self.rounds);
            rounds
                .values()
                .filter(|r| matches!(r.contribs.get(local), Some(None)))
                .flat_map(|r| {
                    r.contribs
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| c.is_some())
                        .map(|(i, _)| i)
                })
                .collect()
        };
        for i in waiting {
            self.parker(i).wake();
        }
        // SeqCst with RecvWait::new then the receiver's gone check: either
        // the receiver sees the flag, or this sees it waiting.
        if self.receivers_waiting.load(Ordering::SeqCst) > 0 {
            for (i, b) in self.boxes.iter().enumerate() {
                if b.waiting_for.load(Ordering::SeqCst) == local + 1 {
                    self.parker(i).wake();
                }
            }
        }
    }

    fn is_gone(&self, local: usize) -> bool {
        self.world.gone[self.members[local]].load(Ordering::SeqCst)
    }

    fn parker(&self, local: usize) -> &Parker {
        &self.world.parkers[self.members[local]]
    }
}

/// Lock, surviving poisoning: a panicking rank never holds these locks while
/// running user code, so the data is consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One rank's handle on one communicator.
struct ThreadRankComm {
    ctx: Arc<Context>,
    rank: usize,
    /// Number of collectives this rank has entered on this communicator.
    seq: std::cell::Cell<u64>,
}

impl ThreadRankComm {
    fn new(ctx: Arc<Context>, rank: usize) -> ThreadRankComm {
        ThreadRankComm {
            ctx,
            rank,
            seq: std::cell::Cell::new(0),
        }
    }

    /// Count one call of this rank moving `sent` and `received` bytes.
    fn count(&self, sent: usize, received: usize) {
        if let Some(stats) = &self.ctx.world.stats {
            stats.add(self.ctx.members[self.rank], sent, received);
        }
    }

    fn check_rank(&self, op: &'static str, rank: usize) -> CommResult<()> {
        if rank < self.size() {
            Ok(())
        } else {
            Err(CommError::BadRank {
                op,
                rank,
                size: self.size(),
            })
        }
    }

    /// Enter a collective round; returns its outcome once all ranks have
    /// arrived. The last to arrive computes the outcome and wakes the others.
    fn collective(
        &self,
        op: &'static str,
        signature: String,
        payload: Payload,
    ) -> CommResult<Arc<RoundOutcome>> {
        let n = self.size();
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        let ctx = &self.ctx;
        let slot = {
            let mut rounds = lock(&ctx.rounds);
            let round = rounds.entry(seq).or_insert_with(|| Round {
                contribs: (0..n).map(|_| None).collect(),
                arrived: 0,
                slot: Arc::default(),
            });
            if let Some(c) = round.contribs.get_mut(self.rank) {
                *c = Some(Contribution {
                    op,
                    signature,
                    payload,
                });
            }
            round.arrived += 1;
            let slot = round.slot.clone();
            if round.arrived == n {
                // Completed under the lock: a rank rescanning this round for
                // gone peers finds it either collecting or done.
                if let Some(mut done) = rounds.remove(&seq) {
                    let _ = slot.set(complete_round(ctx, &mut done.contribs));
                }
                drop(rounds);
                for local in (0..n).filter(|&r| r != self.rank) {
                    ctx.parker(local).wake();
                }
            }
            slot
        };
        self.wait_round(op, seq, &slot)
    }

    /// Wait until round `seq`'s slot is set, a missing rank is gone, or the
    /// timeout expires.
    fn wait_round(
        &self,
        op: &'static str,
        seq: u64,
        slot: &OnceLock<RoundResult>,
    ) -> CommResult<Arc<RoundOutcome>> {
        let world = &self.ctx.world;
        let parker = self.ctx.parker(self.rank);
        let start = Instant::now();
        let mut scanned_gone = 0;
        loop {
            let seen = parker.generation();
            if let Some(outcome) = slot.get() {
                return outcome.clone();
            }
            let gone = world.gone_count.load(Ordering::SeqCst);
            if gone != scanned_gone {
                scanned_gone = gone;
                if let Some(peer) = self.missing(seq, true) {
                    return Err(CommError::PeerGone { op, peer });
                }
            }
            let waited = start.elapsed();
            if waited >= world.timeout {
                if let Some(outcome) = slot.get() {
                    return outcome.clone();
                }
                return Err(CommError::Timeout {
                    op,
                    rank: self.rank,
                    peer: self.missing(seq, false).unwrap_or(self.rank),
                    waited_ms: waited.as_millis() as u64,
                });
            }
            parker.sleep(seen, world.timeout - waited);
        }
    }

    /// The lowest rank that has not arrived in round `seq` (only gone ones
    /// when `gone_only`); `None` once the round is complete.
    fn missing(&self, seq: u64, gone_only: bool) -> Option<usize> {
        let rounds = lock(&self.ctx.rounds);
        let round = rounds.get(&seq)?;
        round
            .contribs
            .iter()
            .enumerate()
            .find(|&(r, c)| c.is_none() && (!gone_only || self.ctx.is_gone(r)))
            .map(|(r, _)| r)
    }

    /// Receive the next message from `src` (bounded wait).
    fn recv_from(&self, op: &'static str, src: usize) -> CommResult<Vec<u8>> {
        let world = &self.ctx.world;
        let parker = self.ctx.parker(self.rank);
        let mailbox = &self.ctx.boxes[self.rank];
        let _waiting = RecvWait::new(&self.ctx, mailbox, src);
        let start = Instant::now();
        loop {
            let seen = parker.generation();
            // Liveness first: a rank that is gone sent all it ever will, so
            // an empty queue after that means nothing more comes.
            let gone = self.ctx.is_gone(src);
            if let Some(m) = lock(&mailbox.queues)
                .get_mut(&src)
                .and_then(VecDeque::pop_front)
            {
                return Ok(m);
            }
            if gone {
                return Err(CommError::PeerGone { op, peer: src });
            }
            let waited = start.elapsed();
            if waited >= world.timeout {
                return Err(CommError::Timeout {
                    op,
                    rank: self.rank,
                    peer: src,
                    waited_ms: waited.as_millis() as u64,
                });
            }
            parker.sleep(seen, world.timeout - waited);
        }
    }

    fn send_to(&self, dest: usize, data: &[u8]) {
        let mailbox = &self.ctx.boxes[dest];
        let spare = lock(&mailbox.spare).pop();
        let message = match spare {
            Some(mut buf) => {
                buf.clear();
                buf.extend_from_slice(data);
                buf
            }
            None => data.to_vec(),
        };
        lock(&mailbox.queues)
            .entry(self.rank)
            .or_default()
            .push_back(message);
        self.ctx.parker(dest).wake();
    }
}

/// Called by the last rank to arrive: check that the calls match and build
/// the shared outcome, computing each operation's result once.
fn complete_round(ctx: &Arc<Context>, contribs: &mut [Option<Contribution>]) -> RoundResult {
    let mut all: Vec<Contribution> = contribs.iter_mut().filter_map(Option::take).collect();
    let Some(first) = all.first() else {
        return Err(CommError::Mismatch {
            op: "collective",
            detail: "a round without contributions".to_string(),
        });
    };
    if all.len() != contribs.len() {
        return Err(CommError::Mismatch {
            op: "collective",
            detail: "a contribution is missing".to_string(),
        });
    }
    if let Some((r, c)) = all
        .iter()
        .enumerate()
        .find(|(_, c)| c.op != first.op || c.signature != first.signature)
    {
        return Err(CommError::Mismatch {
            op: first.op,
            detail: format!(
                "rank 0 called {}({}) but rank {r} called {}({})",
                first.op, first.signature, c.op, c.signature
            ),
        });
    }
    let mut outcome = RoundOutcome::default();
    match &first.payload {
        Payload::Split(..) => outcome.placements = place_splits(ctx, &all),
        Payload::I64(_, op) => outcome.reduced = Some(Payload::I64(reduce_i64(&all, *op), *op)),
        Payload::F64(_, op) => outcome.reduced = Some(Payload::F64(reduce_f64(&all, *op), *op)),
        Payload::Sparse(_) => outcome.inboxes = transpose(&mut all),
        Payload::None | Payload::Bytes(_) => {}
    }
    outcome.contribs = all;
    Ok(Arc::new(outcome))
}

/// Members of each color ordered by (key, old rank), as MPI_Comm_split: one
/// new context per color, and each old rank's place in its color's context.
fn place_splits(ctx: &Arc<Context>, all: &[Contribution]) -> Vec<Option<(Arc<Context>, usize)>> {
    let mut by_color: BTreeMap<u32, Vec<(i64, usize)>> = BTreeMap::new();
    for (r, c) in all.iter().enumerate() {
        if let Payload::Split(Some(color), key) = c.payload {
            by_color.entry(color).or_default().push((key, r));
        }
    }
    let mut placements: Vec<Option<(Arc<Context>, usize)>> = all.iter().map(|_| None).collect();
    for (_, mut members) in by_color {
        members.sort();
        let world_ranks = members.iter().map(|&(_, r)| ctx.members[r]).collect();
        let sub = Context::new(ctx.world.clone(), world_ranks);
        for (new_rank, &(_, r)) in members.iter().enumerate() {
            placements[r] = Some((sub.clone(), new_rank));
        }
    }
    placements
}

/// Element-wise reduction in rank order (identical on every rank since it
/// is computed once); sums wrap like MPI's two's-complement integer sum.
fn reduce_i64(all: &[Contribution], op: ReduceOp) -> Vec<i64> {
    let mut acc: Option<Vec<i64>> = None;
    for c in all {
        let Payload::I64(x, _) = &c.payload else {
            continue;
        };
        match &mut acc {
            None => acc = Some(x.clone()),
            Some(a) => {
                for (a, &v) in a.iter_mut().zip(x) {
                    *a = match op {
                        ReduceOp::Sum => a.wrapping_add(v),
                        ReduceOp::Max => (*a).max(v),
                        ReduceOp::Min => (*a).min(v),
                    };
                }
            }
        }
    }
    acc.unwrap_or_default()
}

/// Element-wise floating-point reduction, folded in rank order from the
/// operator's identity.
fn reduce_f64(all: &[Contribution], op: ReduceOp) -> Vec<f64> {
    let len = match all.first().map(|c| &c.payload) {
        Some(Payload::F64(x, _)) => x.len(),
        _ => 0,
    };
    let identity = match op {
        ReduceOp::Sum => std::iter::empty::<f64>().sum(),
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut acc = vec![identity; len];
    for c in all {
        let Payload::F64(x, _) = &c.payload else {
            continue;
        };
        for (a, &v) in acc.iter_mut().zip(x) {
            *a = match op {
                ReduceOp::Sum => *a + v,
                ReduceOp::Max => a.max(v),
                ReduceOp::Min => a.min(v),
            };
        }
    }
    acc
}

/// The sparse exchange's messages moved into one inbox per destination,
/// keyed by source rank.
fn transpose(all: &mut [Contribution]) -> Vec<Mutex<BTreeMap<usize, Vec<u8>>>> {
    let mut inboxes: Vec<BTreeMap<usize, Vec<u8>>> = all.iter().map(|_| BTreeMap::new()).collect();
    for (src, c) in all.iter_mut().enumerate() {
        if let Payload::Sparse(m) = &mut c.payload {
            for (dest, v) in std::mem::take(m) {
                if let Some(inbox) = inboxes.get_mut(dest) {
                    inbox.insert(src, v);
                }
            }
        }
    }
    inboxes.into_iter().map(Mutex::new).collect()
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}

/// A rank's communicator may move to another thread of its rank (the
/// background encode): every shared part is behind a mutex or an atomic,
/// and each wait sleeps on the rank's [`Parker`], which wakes every sleeper.
const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<ThreadRankComm>();
};

impl Comm for ThreadRankComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn thread_movable(&self) -> bool {
        true
    }

    fn size(&self) -> usize {
        self.ctx.members.len()
    }

    fn barrier(&self) -> CommResult<()> {
        self.count(0, 0);
        self.collective("barrier", String::new(), Payload::None)
            .map(|_| ())
    }

    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> CommResult<()> {
        self.check_rank("bcast", root)?;
        let sent = if self.rank == root { buf.len() } else { 0 };
        // The root copies rather than moves its buffer, so it keeps its
        // data when the broadcast fails (timeout, mismatch).
        let payload = if self.rank == root {
            Payload::Bytes(buf.clone())
        } else {
            Payload::None
        };
        let out = self.collective("bcast", format!("root {root}"), payload)?;
        if self.rank != root {
            if let Some(Payload::Bytes(b)) = out.contribs.get(root).map(|c| &c.payload) {
                buf.clear();
                buf.extend_from_slice(b);
            }
        }
        let received = if self.rank == root { 0 } else { buf.len() };
        self.count(sent, received);
        Ok(())
    }

    fn allreduce_i64(&self, vals: &mut [i64], op: ReduceOp) -> CommResult<()> {
        let sig = format!("{} of {}", reduce_name(op), vals.len());
        let out = self.collective("allreduce_i64", sig, Payload::I64(vals.to_vec(), op))?;
        self.count(8 * vals.len(), 8 * vals.len());
        if let Some(Payload::I64(r, _)) = &out.reduced {
            for (v, &x) in vals.iter_mut().zip(r) {
                *v = x;
            }
        }
        Ok(())
    }

    fn allreduce_f64(&self, vals: &mut [f64], op: ReduceOp) -> CommResult<()> {
        let sig = format!("{} of {}", reduce_name(op), vals.len());
        let out = self.collective("allreduce_f64", sig, Payload::F64(vals.to_vec(), op))?;
        self.count(8 * vals.len(), 8 * vals.len());
        if let Some(Payload::F64(r, _)) = &out.reduced {
            for (v, &x) in vals.iter_mut().zip(r) {
                *v = x;
            }
        }
        Ok(())
    }

    fn gather_bytes(&self, root: usize, data: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>> {
        self.check_rank("gather", root)?;
        let out = self.collective(
            "gather",
            format!("root {root}"),
            Payload::Bytes(data.to_vec()),
        )?;
        if self.rank != root {
            self.count(data.len(), 0);
            return Ok(None);
        }
        let all = collect_bytes(&out);
        self.count(data.len(), all.iter().map(Vec::len).sum());
        Ok(Some(all))
    }

    fn allgather_bytes(&self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        let out = self.collective("allgather", String::new(), Payload::Bytes(data.to_vec()))?;
        let all = collect_bytes(&out);
        self.count(data.len(), all.iter().map(Vec::len).sum());
        Ok(all)
    }

    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> CommResult<usize> {
        if let Some((dest, _)) = send {
            self.check_rank("sendrecv", dest)?;
        }
        if let Some(src) = recv_from {
            self.check_rank("sendrecv", src)?;
        }
        let sent = send.map_or(0, |(_, data)| data.len());
        if let Some((dest, data)) = send {
            self.send_to(dest, data);
        }
        match recv_from {
            Some(src) => {
                // The message becomes `recv`; the old buffer goes back to
                // this rank's mailbox for the next sender to fill.
                let mut m = self.recv_from("sendrecv", src)?;
                std::mem::swap(recv, &mut m);
                if m.capacity() > 0 {
                    let mut spare = lock(&self.ctx.boxes[self.rank].spare);
                    if spare.len() < SPARE_BUFFERS {
                        spare.push(m);
                    }
                }
                self.count(sent, recv.len());
                Ok(recv.len())
            }
            None => {
                self.count(sent, 0);
                Ok(0)
            }
        }
    }

    fn split(&self, color: Option<u32>, key: i64) -> CommResult<Option<Box<dyn Comm>>> {
        let out = self.collective("split", String::new(), Payload::Split(color, key))?;
        self.count(0, 0);
        let Some(color) = color else {
            return Ok(None);
        };
        let (ctx, new_rank) = out
            .placements
            .get(self.rank)
            .and_then(Option::as_ref)
            .ok_or(CommError::Mismatch {
                op: "split",
                detail: format!("no communicator was built for color {color}"),
            })?;
        Ok(Some(Box::new(ThreadRankComm::new(ctx.clone(), *new_rank))))
    }

    fn exchange_sparse(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>> {
        // A bad destination is reported to its sender only, after the round,
        // so the other ranks still complete instead of timing out.
        let bad = sends.keys().copied().find(|&d| d >= self.size());
        let valid: BTreeMap<usize, Vec<u8>> = sends
            .iter()
            .filter(|(&d, _)| d < self.size())
            .map(|(&d, v)| (d, v.clone()))
            .collect();
        let out = self.collective("exchange_sparse", String::new(), Payload::Sparse(valid))?;
        if let Some(rank) = bad {
            return Err(CommError::BadRank {
                op: "exchange_sparse",
                rank,
                size: self.size(),
            });
        }
        let received = out
            .inboxes
            .get(self.rank)
            .map(|inbox| std::mem::take(&mut *lock(inbox)))
            .unwrap_or_default();
        self.count(
            sends.values().map(Vec::len).sum(),
            received.values().map(Vec::len).sum(),
        );
        Ok(received)
    }
}

fn collect_bytes(out: &RoundOutcome) -> Vec<Vec<u8>> {
    out.contribs
        .iter()
        .map(|c| match &c.payload {
            Payload::Bytes(b) => b.clone(),
            _ => Vec::new(),
        })
        .collect()
}
