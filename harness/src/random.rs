//! Random campaigns: each seed chooses a scheme, the node count, ranks per
//! node, spares, set size and failures, when the job crashes and how
//! (a rank killed or exiting, or a whole node lost, at one of the
//! application's phases), which further nodes are lost before the relaunch,
//! and which cached files are damaged. The expected outcome comes from an
//! oracle of the schemes' tolerance ([`expect`]), so every random scenario
//! is judged like a catalogue one: a restart older than the newest one the
//! scheme could recover, without the library saying why, is SILENT
//! CORRUPTION.
//!
//! The oracle models what SCR promises, not how our library does it:
//! - checkpoints complete in launch 1: all before the one the crash
//!   interrupts (or up to the one after which it computes);
//! - the cache keeps the newest `SCR_CACHE_SIZE` = 2; Start_output of
//!   checkpoint c evicts the oldest after the point `api.start_output`, so
//!   a crash at that point still finds c − 2 and c − 1, and a crash while
//!   c is written or completed leaves only c − 1;
//! - a rank's files of a dataset are lost when its node is lost or one of
//!   its files there is damaged (a rank that wrote no file of it has none
//!   to damage); a lost node also loses the redundancy data it held;
//! - SINGLE recovers nothing; PARTNER recovers rank r when the node holding
//!   its copy (the next node in its ring) is not lost; XOR recovers a set
//!   with at most one lost member, RS with at most SET_FAILURES;
//! - the relaunch restarts from the newest recoverable checkpoint (rebuilt
//!   when some rank needed it, from cache otherwise); when none is, it is a
//!   loss if the surviving nodes still held a dataset (a complete one, or
//!   the one a crash inside Write or Complete interrupted), scratch
//!   otherwise.
//!
//! The facts come from what the faults really hit ([`Hit`]): before a
//! campaign runs, from the plan and the cell's data plan (which ranks
//! write files); after the first launch, from its record — the crash's
//! firing in the fault log gives the checkpoint in progress and the
//! phase, the harness's damage records the (rank, dataset) it damaged —
//! and the campaign judges the cell by that ([`observed_expectation`]).
//!
//! In async mode (`scr-harness campaign --random N --async`, scenarios
//! `random-async-<index>`, the draws of `random-<index>`) every
//! checkpoint is protected in the background (`SCR_ENCODE_ASYNC=1`):
//! Complete_output of c returns before its CRC32s and encode, and the next
//! Start_output settles it after the point `api.start_output`; a restart
//! never uses a checkpoint that was not settled. The cache keeps one more
//! (the previous protected checkpoint while c is protected), so:
//! - computing after c, or inside the write or Complete of c: c − 1 and
//!   c − 2 (c is unsettled or incomplete);
//! - inside Start_output of c: c − 2 and c − 3 (c − 1 is unsettled);
//! - the unsettled or incomplete checkpoint is always there on the
//!   surviving nodes, so a job with nothing recoverable is a loss.
//!
//! Half the async draws that crash after c completed crash inside c's
//! background protection instead (at `protect.background`, on the rank's
//! protection thread): c is unsettled there too, so the oracle is the same.
//!
//! With flushes (`--flush`, scenarios `random-flush-<index>` and
//! `random-async-flush-<index>`) each draw also picks SCR_FLUSH = F in
//! 1..=3: checkpoint k is copied to the prefix when F divides k, as it
//! completes (in async mode as the next Start_output settles it), so the
//! newest flushed checkpoint is the newest multiple of F among the settled
//! ones above. The prefix survives every fault of a draw, and the relaunch
//! fetches it when it is newer than the newest checkpoint recoverable in
//! cache (docs/decisions.md, "A newer checkpoint in the prefix wins over an
//! older one in cache"): `fetched:k`, never a loss.
//!
//! Half the flush-mode draws that crash after a flushed checkpoint c
//! completed (and not inside its background protection) crash inside its
//! flush instead ([`Phase::Flush`]: at `flush.file.copied`, after one of
//! the crashing rank's files of c, chosen by [`Draw::flush_file`]; a node
//! dies when its first rank gets there). c is complete in cache (in async
//! mode settled by the next Start_output, which has not evicted anything
//! yet: c, c − 1 and c − 2 are there), and the prefix holds the flushes
//! before c only: a partly flushed checkpoint must never be fetched.
//! A quarter of the other flush-mode draws lose the prefix after an earlier
//! checkpoint x until launch 1 ends ([`Draw::outage_after`], a PFS
//! outage): the flushes after x fail and the application goes on, so the
//! prefix holds nothing newer than x (in async mode x − 1: x is flushed
//! as the next Start_output settles it, after the outage began).
//! Half the flush-mode draws also crash the relaunch while it fetches
//! ([`Draw::fetch_crash`]): when the oracle expects `fetched:k`, a rank
//! with files of k is killed (or exits), or a third of the time its node
//! dies with its cache, after its first file fetched (`fetch.file`, run 2;
//! the node is the relaunch's, as the run loop chose it). That launch dies
//! before its restart is decided, the prefix is untouched, and a third
//! launch fetches k again: `scratch, died, fetched:k`; when a node died
//! and no spare is left, `scratch, died | nodes` ([`with_fetch_crash`]).
//! Every draw with a fetch crash has the budget of three launches, planted
//! or not (the cell's data seed counts the launches).
//! A third of the other draws, in every mode, crash the relaunch as it
//! starts to restart in place ([`Draw::rebuild_crash`]): a rank is killed
//! (or exits) at its first `rebuild.init` (run 2), which every rank
//! reaches for the first cached dataset whenever the relaunch runs on a
//! node that survived launch 1 (its control directory lists the cached
//! datasets). Nothing has changed in cache or prefix by then, so a third
//! launch does what the second would have: `…, died, <second>`
//! ([`with_rebuild_crash`]); it is planted only where the plan has a
//! relaunch with such a node. In a third of them the struck rank's node
//! dies there instead (fired by its first rank to reach the point): the
//! third launch needs one more spare (else `…, died | nodes`), and when
//! that node had kept its cache from launch 1 it is one more node lost to
//! the oracle. Half of these draws ([`RebuildCrash::mid`]) strike in the
//! middle of the rebuild instead, where the oracle has the relaunch
//! rebuild checkpoint k onto a spare: a rank of the spare with files of k
//! is killed (or exits, or the spare dies) once one of its rebuilt files
//! ([`RebuildCrash::mid_file`] among its files of k) is durable and before
//! its filemap records it (`redundancy.file.synced`, run 2). The others
//! may be anywhere in the rebuild by then, and the spare has rebuilt files
//! its filemap does not all trust yet: a third launch rebuilds again,
//! `…, died, rebuilt:k` (after the spare's death, onto another spare, or
//! `…, died | nodes`). Half of those ([`RebuildCrash::survivor`]) strike
//! the other side of the transfers where the rebuild of k has one: a rank
//! of a node that kept its cache, whose files of k are whole and which
//! reads pieces of cached files to send them (PARTNER: the holder of a
//! lost rank's copy; XOR and RS: a member of a set that lost as many
//! members as it tolerates, where the decode needs every survivor), is
//! killed or exits as it reads its first piece (`redundancy.piece.read`,
//! run 2): `…, died, rebuilt:k` again. When its node dies instead, the
//! third launch has lost that node's cache too (the oracle with it lost),
//! so this is planted only where k is the oldest checkpoint cached: an
//! older one would be rebuilt first, and kept, by the spare.
//! Half of the other draws that strike a rank (not its node) as the
//! restart in place begins strike it once that is over instead
//! ([`RebuildCrash::after`]): every cached dataset restored or dropped and
//! recorded in every rank's filemap, before the node's master filemap is
//! written (`rebuild.recorded`, run 2; every relaunch passes it, with or
//! without a cache to restore). The third launch finds in cache what the
//! relaunch rebuilt (`…, died, cache:k` where the relaunch had
//! `rebuilt:k`) and nothing of what it found unusable (`…, died, scratch`
//! where it had `loss`); any other restart it does again.
//!
//! Set membership comes from `scr::redundancy::sets` (the layout is a
//! deterministic function of the nodes, tested in that crate); the
//! tolerance rules above are the oracle's own.

use std::collections::{BTreeMap, BTreeSet};

use faultsim::plan::{
    Area, Corruption, Fault, NodeAftermath, OutageMethod, Selector, Target, What, When,
};
use faultsim::seed::Seeded;
use rand::Rng;

use crate::health::{DownList, DownReason};
use crate::outcome::{Class, End, Outcome, Token};
use crate::runloop::{Firing, LaunchRecord};
use crate::scenario::Scenario;
use scr::CopyType;

/// The application phase a crash interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Computing after checkpoint c completed.
    Compute,
    /// Inside Start_output of checkpoint c.
    Start,
    /// While the application writes checkpoint c.
    Write,
    /// Inside Complete_output of checkpoint c.
    Complete,
    /// Inside the flush of checkpoint c to the prefix (flush mode, c a
    /// multiple of SCR_FLUSH): after c completed (in async mode, after the
    /// next Start_output or finalize settled it), while the crashing
    /// rank's flush copies its files.
    Flush,
}

/// How the job crashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Crash {
    /// A rank is SIGKILLed.
    KillRank(u32),
    /// A rank exits without finalizing.
    ExitRank(u32),
    /// A node dies with its storage.
    KillNode(usize),
}

/// How a campaign's random scenarios protect and copy their checkpoints
/// (the draws are the same in every mode, but for the moments inside the
/// background protection in async mode, [`Draw::background`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mode {
    /// Every checkpoint protected in the background (`SCR_ENCODE_ASYNC=1`).
    pub encode_async: bool,
    /// SCR_FLUSH drawn in 1..=3 (0, no flush, otherwise).
    pub flush: bool,
}

impl Mode {
    /// Synchronous protection, no flush (`random-<index>`).
    pub const SYNC: Mode = Mode {
        encode_async: false,
        flush: false,
    };

    /// The scenarios' name prefix: `random-`, `random-async-`,
    /// `random-flush-`, `random-async-flush-`.
    pub fn prefix(self) -> String {
        format!(
            "random-{}{}",
            if self.encode_async { "async-" } else { "" },
            if self.flush { "flush-" } else { "" }
        )
    }
}

/// What a random scenario is made of (before it becomes a [`Scenario`]).
#[derive(Debug, Clone)]
pub struct Draw {
    /// Scheme.
    pub scheme: CopyType,
    /// Nodes of a launch.
    pub nodes: usize,
    /// Ranks per node.
    pub ranks_per_node: usize,
    /// Spares.
    pub spares: usize,
    /// XOR/RS set size.
    pub set_size: usize,
    /// RS failures per set.
    pub failures: usize,
    /// Checkpoints of launch 1.
    pub checkpoints: u64,
    /// The crash: checkpoint, phase, kind.
    pub crash: (u64, Phase, Crash),
    /// Nodes lost after launch 1 (besides a crashed node).
    pub lost_after: Vec<usize>,
    /// Damaged application files: (rank, dataset).
    pub damaged: Vec<(u32, u64)>,
    /// Checkpoints protected in the background (`SCR_ENCODE_ASYNC=1`).
    pub encode_async: bool,
    /// SCR_FLUSH: every how many checkpoints one is copied to the prefix
    /// (0: none).
    pub flush: u64,
    /// In async mode, a crash after checkpoint c completed strikes inside
    /// c's background protection (`protect.background`) instead of the
    /// application's compute.
    pub background: bool,
    /// With [`Phase::Flush`]: after which of the crashing rank's files of
    /// c the flush dies (taken modulo that rank's file count).
    pub flush_file: u32,
    /// Flush mode: the prefix becomes unreachable after this checkpoint
    /// completed, until launch 1 ends (a PFS outage), so the flushes of
    /// later checkpoints fail.
    pub outage_after: Option<u64>,
    /// Flush mode: the relaunch crashes inside its fetch, when it fetches.
    pub fetch_crash: Option<FetchCrash>,
    /// The relaunch crashes as it starts its restart in place (draws
    /// without a fetch crash).
    pub rebuild_crash: Option<RebuildCrash>,
}

/// A crash of the relaunch at the start of its restart in place
/// ([`Draw::rebuild_crash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildCrash {
    /// The rank exits (code 42) instead of being SIGKILLed.
    pub exit: bool,
    /// Which rank (taken modulo the job's ranks).
    pub pick: u32,
    /// The picked rank's node dies instead, with its cache (`exit` does
    /// not apply).
    pub node: bool,
    /// Where the relaunch rebuilds onto a spare, the crash strikes in the
    /// middle of that rebuild instead: at a rank of the spare (`pick`
    /// taken modulo those with files of the rebuilt checkpoint), once one
    /// of its rebuilt files is durable and before its filemap records it.
    pub mid: bool,
    /// With `mid`: after which of that rank's rebuilt files (taken modulo
    /// its files of the rebuilt checkpoint; its hit of
    /// `redundancy.file.synced` is one more).
    pub mid_file: u32,
    /// With `mid`: where the rebuild has them, a rank of a surviving node
    /// that reads its cached files for it (to send their pieces) is struck
    /// instead, as it reads its first piece (`redundancy.piece.read`; a
    /// node dies only where no older checkpoint is cached, which the
    /// relaunch would rebuild first; elsewhere the rank is killed or
    /// exits instead).
    pub survivor: bool,
    /// Without `mid` or `node`: the rank is struck once the restart in
    /// place is over — every cached dataset restored or dropped, and
    /// recorded in every rank's filemap — before the node's master
    /// filemap is written (`rebuild.recorded`), instead of as it begins.
    pub after: bool,
}

/// A crash of the relaunch inside its fetch ([`Draw::fetch_crash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchCrash {
    /// The rank exits (code 42) instead of being SIGKILLed.
    pub exit: bool,
    /// Which of the ranks with files of the fetched checkpoint crashes
    /// (taken modulo their count).
    pub pick: u32,
    /// The picked rank's node dies instead, with its cache (`exit` does
    /// not apply): the third launch needs one more spare.
    pub node: bool,
}

/// Draw random scenario `index` of a campaign seeded `seed` in `mode` (the
/// same shape and faults in every mode; in async mode half the crashes
/// after a checkpoint completed move into its background protection).
pub fn draw(seed: u64, index: u32, mode: Mode) -> Draw {
    let s = Seeded::new(Seeded::new(seed).derive(&format!("random.{index}")));
    let mut r = s.stream("shape");
    let scheme = CopyType::ALL[r.gen_range(0..4)];
    let nodes = r.gen_range(3..=6usize);
    let ranks_per_node = r.gen_range(1..=2usize);
    let spares = r.gen_range(0..=3usize);
    let set_size = r.gen_range(2..=nodes.min(5));
    let failures = r.gen_range(1..set_size.min(4));
    let checkpoints = r.gen_range(2..=4u64);
    let mut r = s.stream("crash");
    let phase = [Phase::Compute, Phase::Start, Phase::Write, Phase::Complete][r.gen_range(0..4)];
    let ckpt = match phase {
        Phase::Compute => r.gen_range(1..=checkpoints),
        _ => r.gen_range(2..=checkpoints),
    };
    let ranks = (nodes * ranks_per_node) as u32;
    let crash = match r.gen_range(0..3) {
        0 => Crash::KillRank(r.gen_range(0..ranks)),
        1 => Crash::ExitRank(r.gen_range(0..ranks)),
        _ => Crash::KillNode(r.gen_range(0..nodes)),
    };
    let mut r = s.stream("losses");
    let extra = [0usize, 0, 1, 1, 2, 3][r.gen_range(0..6)];
    let mut lost_after: Vec<usize> = Vec::new();
    for _ in 0..extra {
        let n = r.gen_range(0..nodes);
        if !lost_after.contains(&n) && crash.node() != Some(n) {
            lost_after.push(n);
        }
    }
    lost_after.sort_unstable();
    let mut r = s.stream("damage");
    let newest = match phase {
        Phase::Compute => ckpt,
        _ => ckpt - 1,
    };
    let mut damaged = Vec::new();
    for _ in 0..[0, 0, 1, 2][r.gen_range(0..4)] {
        let d = if newest > 1 && r.gen_bool(0.3) {
            newest - 1
        } else {
            newest
        };
        let rank = r.gen_range(0..ranks);
        if !damaged.contains(&(rank, d)) {
            damaged.push((rank, d));
        }
    }
    let flush = if mode.flush {
        s.stream("flush").gen_range(1..=3u64)
    } else {
        0
    };
    let background =
        mode.encode_async && phase == Phase::Compute && s.stream("moment").gen_bool(0.5);
    // Half the other crashes after a flushed checkpoint completed strike
    // inside its flush.
    let mut r = s.stream("flushmoment");
    let inside_flush =
        phase == Phase::Compute && !background && flush > 0 && ckpt % flush == 0 && r.gen_bool(0.5);
    let phase = if inside_flush { Phase::Flush } else { phase };
    let flush_file = r.gen_range(0..64u32);
    // A quarter of the other flush-mode draws lose the prefix after an
    // earlier checkpoint (a crash inside a flush needs the prefix there).
    let mut r = s.stream("outage");
    let outage_after = (flush > 0 && phase != Phase::Flush && ckpt >= 2 && r.gen_bool(0.25))
        .then(|| r.gen_range(1..ckpt));
    let mut r = s.stream("fetchcrash");
    let fetch_crash = (flush > 0 && r.gen_bool(0.5)).then(|| FetchCrash {
        exit: r.gen_bool(0.5),
        pick: r.gen_range(0..64),
        node: r.gen_bool(1.0 / 3.0),
    });
    // (A stream of its own for `mid`, so the rest of every draw is what
    // it was before the crash in the middle of a rebuild existed.)
    let mut r = s.stream("rebuildmid");
    let (mid, mid_file) = (r.gen_bool(0.5), r.gen_range(0..64));
    // (And one for `survivor`, which came later still.)
    let survivor = s.stream("rebuildsurvivor").gen_bool(0.5);
    // (And `after`, later again.)
    let after = s.stream("rebuildafter").gen_bool(0.5);
    let mut r = s.stream("rebuildcrash");
    let rebuild_crash = (fetch_crash.is_none() && r.gen_bool(1.0 / 3.0)).then(|| RebuildCrash {
        exit: r.gen_bool(0.5),
        pick: r.gen_range(0..64),
        node: r.gen_bool(1.0 / 3.0),
        mid,
        mid_file,
        survivor,
        after,
    });
    Draw {
        scheme,
        nodes,
        ranks_per_node,
        spares,
        set_size,
        failures,
        checkpoints,
        crash: (ckpt, phase, crash),
        lost_after,
        damaged,
        encode_async: mode.encode_async,
        flush,
        background,
        flush_file,
        outage_after,
        fetch_crash,
        rebuild_crash,
    }
}

impl Crash {
    /// The node a crash takes down with its storage.
    pub fn node(&self) -> Option<usize> {
        match self {
            Crash::KillNode(n) => Some(*n),
            _ => None,
        }
    }

    /// The rank whose hit of a point fires the crash: the killed or
    /// exiting rank, a lost node's first rank.
    pub fn trigger(&self, ranks_per_node: usize) -> u32 {
        match self {
            Crash::KillRank(r) | Crash::ExitRank(r) => *r,
            Crash::KillNode(n) => (n * ranks_per_node) as u32,
        }
    }
}

/// Files `rank` writes in checkpoint `ckpt` of data seed `data`, which its
/// flush copies one by one (`flush.file.copied` after each).
fn files_of(data: u64, rank: u32, ckpt: u64, mean_bytes: u64) -> u64 {
    testing::data::file_plan(data, rank, ckpt, mean_bytes).len() as u64
}

/// The flushes of launch 1 in order: the multiples of SCR_FLUSH.
fn flushed_checkpoints(d: &Draw) -> impl Iterator<Item = u64> {
    let f = d.flush;
    (1..=d.checkpoints).filter(move |k| f > 0 && k % f == 0)
}

/// The hit of `flush.file.copied` on `rank` at which a [`Phase::Flush`]
/// crash of checkpoint c fires: after its [`Draw::flush_file`]-th file of c
/// (modulo its count), counting the files of the flushes before. `None`
/// when the rank has no file of c to copy.
fn flush_hit(d: &Draw, data: u64, mean_bytes: u64, rank: u32) -> Option<u64> {
    let c = d.crash.0;
    let of_c = files_of(data, rank, c, mean_bytes);
    if of_c == 0 {
        return None;
    }
    let before: u64 = flushed_checkpoints(d)
        .take_while(|&k| k < c)
        .map(|k| files_of(data, rank, k, mean_bytes))
        .sum();
    Some(before + 1 + u64::from(d.flush_file) % of_c)
}

/// The checkpoint whose flush copied `rank`'s `hit`-th file of launch 1
/// (the inverse of [`flush_hit`]).
fn flush_of_hit(d: &Draw, data: u64, mean_bytes: u64, rank: u32, hit: u64) -> Option<u64> {
    let mut copied = 0;
    flushed_checkpoints(d).find(|&k| {
        copied += files_of(data, rank, k, mean_bytes);
        hit <= copied
    })
}

/// The rank a draw's [`FetchCrash`] strikes when the relaunch fetches
/// checkpoint `k`: its pick among the ranks with files of `k` (a rank
/// without one fetches nothing); `None` without a fetch crash or such a
/// rank.
fn fetch_crash_rank(d: &Draw, data: u64, mean_bytes: u64, k: u64) -> Option<u32> {
    let fc = d.fetch_crash?;
    let ranks = (d.nodes * d.ranks_per_node) as u32;
    let with: Vec<u32> = (0..ranks)
        .filter(|&r| files_of(data, r, k, mean_bytes) > 0)
        .collect();
    (!with.is_empty()).then(|| with[fc.pick as usize % with.len()])
}

/// Where a relaunch's fetch crash strikes ([`planted_fetch_crash`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchStrike {
    /// The ranks whose first fetched file fires it: the killed or exiting
    /// rank, or every rank of the node that dies.
    pub ranks: Vec<u32>,
    /// A third launch finds the nodes it needs (a rank's crash leaves its
    /// node; a node's needs a spare left after launch 1's losses).
    pub relaunch: bool,
}

/// The allocation of a random scenario: job nodes, then spares.
fn allocation(sc: &Scenario) -> Vec<String> {
    (0..sc.nodes + sc.spares).map(|i| format!("n{i}")).collect()
}

/// The nodes launch `run`'s `kill-node` faults take, marked down.
fn down_after(sc: &Scenario, run: u32, down: &mut DownList) {
    for f in sc.faults.iter().filter(|f| f.run == run) {
        if let What::KillNode { node, .. } = &f.what {
            down.mark(
                node,
                DownReason::Unreachable {
                    detail: format!("killed in launch {run}"),
                },
            );
        }
    }
}

/// The nodes of the relaunch as the run loop chooses them (the library's
/// [`scr::runloop::choose_nodes`]: survivors keep their places, spares
/// fill the lost ones in allocation order) and the nodes down by then;
/// `None` when too few are left.
fn relaunch_nodes(sc: &Scenario) -> Option<(Vec<String>, DownList)> {
    let all = allocation(sc);
    let mut down = DownList::new();
    down_after(sc, 1, &mut down);
    let first = &all[..sc.nodes];
    scr::runloop::choose_nodes(&all, first, &down, sc.nodes, sc.nodes).map(|n| (n, down))
}

/// The crash a scenario plants in its relaunch's fetch: its run-2 fault
/// at `fetch.file`.
fn planted_fetch_crash(sc: &Scenario) -> Option<FetchStrike> {
    let f = sc.faults.iter().find(|f| {
        f.run == 2 && matches!(&f.when, When::Point { point, .. } if point == "fetch.file")
    })?;
    match (&f.what, &f.when) {
        (What::KillNode { node, .. }, _) => {
            let (nodes, mut down) = relaunch_nodes(sc)?;
            let slot = nodes.iter().position(|n| n == node)?;
            let rpn = sc.ranks_per_node as u32;
            let first = slot as u32 * rpn;
            down_after(sc, 2, &mut down);
            let all = allocation(sc);
            let third = scr::runloop::choose_nodes(&all, &nodes, &down, sc.nodes, sc.nodes);
            Some(FetchStrike {
                ranks: (first..first + rpn).collect(),
                relaunch: third.is_some(),
            })
        }
        (_, When::Point { rank: Some(r), .. }) => Some(FetchStrike {
            ranks: vec![*r],
            relaunch: true,
        }),
        _ => None,
    }
}

/// An outcome with the relaunch's fetch crash (planted on `strike`, if
/// any): when the relaunch fetches k and a rank struck has files of k to
/// fetch, the launch dies, and a third launch fetches k again (or, when a
/// node died and no spare is left, the loop ends for want of nodes).
/// Otherwise the point is never reached and the outcome stands.
pub fn with_fetch_crash(
    o: Outcome,
    strike: Option<&FetchStrike>,
    data: u64,
    mean_bytes: u64,
) -> Outcome {
    let (Some(strike), [first, second]) = (strike, o.launches.as_slice()) else {
        return o;
    };
    match second.ckpt {
        Some(k)
            if second.class == Class::Fetched
                && strike
                    .ranks
                    .iter()
                    .any(|&r| files_of(data, r, k, mean_bytes) > 0) =>
        {
            if strike.relaunch {
                Outcome::of(
                    vec![first.clone(), Token::of(Class::Died), second.clone()],
                    o.end,
                )
            } else {
                Outcome::of(vec![first.clone(), Token::of(Class::Died)], End::Nodes)
            }
        }
        _ => o,
    }
}

/// Whether the relaunch of `sc` runs on a node of launch 1 that is still
/// up with its cache (so it finds cached datasets to restart).
fn relaunch_keeps_a_node(sc: &Scenario) -> bool {
    relaunch_nodes(sc).is_some_and(|(nodes, down)| {
        let first = &allocation(sc)[..sc.nodes];
        nodes.iter().any(|n| first.contains(n) && !down.is_down(n))
    })
}

/// Where a relaunch's crash as its restart in place begins strikes
/// ([`planted_rebuild_crash`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildStrike {
    /// A rank is killed or exits: its node stays.
    Rank,
    /// A rank is killed or exits once the restart in place is over and
    /// recorded ([`RECORDED_POINT`]): what it rebuilt is in cache, what it
    /// could not use is gone.
    Recorded,
    /// The node in job slot `slot` of the relaunch dies with its cache.
    Node {
        /// Its slot (job node index; ranks `slot × ranks per node` on).
        slot: usize,
        /// It was a node of launch 1 with its cache, not a spare.
        kept_cache: bool,
        /// It died in the middle of the rebuild, after every rank of the
        /// relaunch recorded the rebuilt dataset in its filemap (as the
        /// files moved to their owners, before any set's rebuild): the
        /// spares list it, so a third launch that cannot recover it finds
        /// it (a loss, never a start from scratch).
        recorded: bool,
        /// A third launch finds the nodes it needs.
        relaunch: bool,
    },
}

/// The point at which a relaunch's crash in the middle of its rebuild
/// fires ([`RebuildCrash::mid`]): a file written by redundancy is durable,
/// not yet in its filemap. In the relaunch, before its own checkpoint, only
/// a rebuild writes such files.
const MID_REBUILD_POINT: &str = "redundancy.file.synced";

/// The ranks of the relaunch that write rebuilt files when its restart is
/// `second`, a rebuild of checkpoint k: those in the job slots a spare
/// took (a spare holds nothing from launch 1, so each of its ranks
/// receives its own files of k) that have files of k. Empty for any other
/// restart, or when no spare joined.
fn rebuilding_ranks(sc: &Scenario, second: &Token, data: u64) -> Vec<u32> {
    let (Class::Rebuilt, Some(k)) = (second.class, second.ckpt) else {
        return Vec::new();
    };
    let Some((nodes, _)) = relaunch_nodes(sc) else {
        return Vec::new();
    };
    let first = &allocation(sc)[..sc.nodes];
    let rpn = sc.ranks_per_node as u32;
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !first.contains(n))
        .flat_map(|(slot, _)| slot as u32 * rpn..(slot as u32 + 1) * rpn)
        .filter(|&r| files_of(data, r, k, sc.mean_bytes) > 0)
        .collect()
}

/// The point at which a relaunch's crash in the middle of its rebuild
/// strikes a survivor ([`RebuildCrash::survivor`]): a piece of its cached
/// files is about to be read for redundancy. In the relaunch, before its
/// own checkpoint, only a rebuild reads such pieces.
const SURVIVOR_POINT: &str = "redundancy.piece.read";

/// The point at which a relaunch's crash strikes once its restart in place
/// is over ([`RebuildCrash::after`]): every cached dataset restored or
/// dropped and recorded in every rank's filemap, the master filemap next.
/// Every SCR_Init passes it once.
const RECORDED_POINT: &str = "rebuild.recorded";

/// Bytes `rank` writes in checkpoint `ckpt` of data seed `data`.
fn bytes_of(data: u64, rank: u32, ckpt: u64, mean_bytes: u64) -> u64 {
    testing::data::file_plan(data, rank, ckpt, mean_bytes)
        .iter()
        .map(|f| f.size_bytes)
        .sum()
}

/// The ranks of surviving nodes that read pieces of their cached files
/// when the relaunch's restart is `second`, a rebuild of checkpoint k: for
/// PARTNER the holder of each lost rank's copy, where that rank has bytes
/// of k (the holder streams them back); for XOR and RS each member with
/// bytes of k of a set that lost as many members as it tolerates (1 for
/// XOR, SET_FAILURES for RS): the decode then needs every survivor at
/// every stripe, so each reads its data for at least one (with fewer
/// losses RS decodes from a window of the survivors, which may leave one
/// out). A rank whose own files of k are lost is none of them. Empty for
/// any other restart.
fn reading_survivors(d: &Draw, hit: &Hit, second: &Token, data: u64, mean_bytes: u64) -> Vec<u32> {
    let (Class::Rebuilt, Some(k)) = (second.class, second.ckpt) else {
        return Vec::new();
    };
    let lost = lost_ranks(d, hit, k);
    let has_bytes = |r: usize| bytes_of(data, r as u32, k, mean_bytes) > 0;
    let groups: Vec<usize> = (0..d.nodes * d.ranks_per_node)
        .map(|r| r / d.ranks_per_node)
        .collect();
    let mut readers: Vec<usize> = match d.scheme {
        CopyType::Single => Vec::new(),
        CopyType::Partner => scr::redundancy::sets::partner_plan(&groups, 1)
            .map(|plan| {
                lost.iter()
                    .filter(|&&r| has_bytes(r))
                    .map(|&r| plan.rhs[r])
                    .filter(|h| !lost.contains(h))
                    .collect()
            })
            .unwrap_or_default(),
        CopyType::Xor | CopyType::Rs => {
            let tolerates = match d.scheme {
                CopyType::Xor => 1,
                _ => d.failures,
            };
            scr::redundancy::sets::build_sets(&groups, d.set_size, tolerates + 1)
                .map(|plan| {
                    plan.sets
                        .iter()
                        .filter(|set| set.iter().filter(|r| lost.contains(r)).count() == tolerates)
                        .flatten()
                        .copied()
                        .filter(|r| !lost.contains(r) && has_bytes(*r))
                        .collect()
                })
                .unwrap_or_default()
        }
    };
    readers.sort_unstable();
    readers.dedup();
    readers.into_iter().map(|r| r as u32).collect()
}

/// The hit of [`MID_REBUILD_POINT`] at which a crash in the middle of the
/// relaunch's rebuild of checkpoint k (`second`) fires on `rank`: after
/// its [`RebuildCrash::mid_file`]-th rebuilt file, modulo its files of k.
/// Each of them is synced (one hit each) whatever else the rebuild
/// writes on the rank, so the hit is reached.
fn mid_rebuild_hit(
    rc: &RebuildCrash,
    second: &Token,
    data: u64,
    mean_bytes: u64,
    rank: u32,
) -> u64 {
    let files = second
        .ckpt
        .map_or(1, |k| files_of(data, rank, k, mean_bytes).max(1));
    1 + u64::from(rc.mid_file) % files
}

/// The crash `sc` plants in its relaunch's restart in place (at
/// `rebuild.init`, or in the middle of a rebuild at
/// [`MID_REBUILD_POINT`]), if any.
fn planted_rebuild_crash(sc: &Scenario) -> Option<RebuildStrike> {
    let f = sc.faults.iter().find(|f| {
        f.run == 2
            && matches!(&f.when, When::Point { point, .. }
                if point == "rebuild.init"
                    || point == MID_REBUILD_POINT
                    || point == SURVIVOR_POINT
                    || point == RECORDED_POINT)
    })?;
    let What::KillNode { node, .. } = &f.what else {
        let recorded = matches!(&f.when, When::Point { point, .. } if point == RECORDED_POINT);
        return Some(if recorded {
            RebuildStrike::Recorded
        } else {
            RebuildStrike::Rank
        });
    };
    let recorded = matches!(&f.when, When::Point { point, .. } if point == SURVIVOR_POINT);
    let (nodes, mut down) = relaunch_nodes(sc)?;
    let slot = nodes.iter().position(|n| n == node)?;
    let all = allocation(sc);
    let kept_cache = all[..sc.nodes].contains(node);
    down_after(sc, 2, &mut down);
    let third = scr::runloop::choose_nodes(&all, &nodes, &down, sc.nodes, sc.nodes);
    Some(RebuildStrike::Node {
        slot,
        kept_cache,
        recorded,
        relaunch: third.is_some(),
    })
}

/// An outcome with the relaunch's crash at the start of its restart in
/// place or in the middle of its rebuild onto a spare
/// ([`Draw::rebuild_crash`], planted as `strike`): that launch dies before
/// it changed anything a later launch trusts (in the middle of a rebuild,
/// the spare has some rebuilt files its filemap does not record yet, so
/// the next restart must rebuild again), and a third one does what it
/// would have done — after a node's death, with that node's cache lost too
/// (`lost_too` gives the oracle's outcome with the slot's node lost after
/// launch 1; where the relaunch's ranks had recorded the dataset, a third
/// launch that cannot recover it reports it lost rather than starting
/// from scratch), or, with no spare left, the loop ends for want of nodes.
pub fn with_rebuild_crash(
    o: Outcome,
    strike: Option<&RebuildStrike>,
    lost_too: impl FnOnce(usize) -> Outcome,
) -> Outcome {
    let (Some(strike), [first, second]) = (strike, o.launches.as_slice()) else {
        return o;
    };
    let died = || vec![first.clone(), Token::of(Class::Died)];
    match *strike {
        RebuildStrike::Rank => {
            let mut l = died();
            l.push(second.clone());
            Outcome::of(l, o.end)
        }
        RebuildStrike::Recorded => {
            // The checkpoint the relaunch rebuilt is whole in cache now,
            // and what it found but could not use was deleted.
            let third = match (second.class, second.ckpt) {
                (Class::Rebuilt, Some(k)) => Token::restart(Class::Cache, k),
                (Class::Loss, _) => Token::of(Class::Scratch),
                _ => second.clone(),
            };
            let mut l = died();
            l.push(third);
            Outcome::of(l, o.end)
        }
        RebuildStrike::Node {
            relaunch: false, ..
        } => Outcome::of(died(), End::Nodes),
        RebuildStrike::Node {
            slot,
            kept_cache,
            recorded,
            ..
        } => {
            let third = if kept_cache {
                let t = lost_too(slot);
                match t.launches.as_slice() {
                    [_, third] if recorded && third.class == Class::Scratch => {
                        Token::of(Class::Loss)
                    }
                    [_, third] => third.clone(),
                    _ => return Outcome::of(died(), t.end),
                }
            } else {
                second.clone()
            };
            let mut l = died();
            l.push(third);
            Outcome::of(l, o.end)
        }
    }
}

/// The oracle's outcome of `d` with job slot `slot`'s node lost after
/// launch 1 as well.
fn oracle_losing(d: &Draw, hit: &Hit, slot: usize) -> Outcome {
    let mut d2 = d.clone();
    if !d2.lost_after.contains(&slot) {
        d2.lost_after.push(slot);
    }
    oracle(&d2, hit)
}

/// What the crash and the damage of launch 1 actually hit: the oracle's
/// facts besides the draw. [`Hit::planned`] is what the plan and the data
/// plan promise (the expectation a campaign lists before it runs);
/// [`Hit::observed`] reads the launch's record after it ran (the crash's
/// firing in the fault log, the files the harness damaged), and a campaign
/// judges a random cell by that ([`observed_expectation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The crash's moment, from its firing: the phase and the checkpoint
    /// whose Start, Write or Complete it interrupted (or after which it
    /// computed). `None` when it never fired: the draw's moment is kept
    /// (the cell fails as "never fired" anyway).
    pub crash: Option<(u64, Phase)>,
    /// (rank, dataset) of which a file was really damaged. A rank that
    /// wrote no file of that dataset has nothing to damage.
    pub damaged: Vec<(u32, u64)>,
}

impl Hit {
    /// The draw taken at its word: the crash at its planned moment, every
    /// planned damage hitting a file.
    pub fn of_draw(d: &Draw) -> Hit {
        Hit {
            crash: Some((d.crash.0, d.crash.1)),
            damaged: d.damaged.clone(),
        }
    }

    /// What the plan promises for data seed `data` (the cell's,
    /// [`crate::campaign::data_seed`]): the crash at its planned moment; a
    /// damage only where the rank writes a file of that dataset.
    pub fn planned(d: &Draw, data: u64, mean_bytes: u64) -> Hit {
        let damaged = d
            .damaged
            .iter()
            .copied()
            .filter(|&(r, ds)| !testing::data::file_plan(data, r, ds, mean_bytes).is_empty())
            .collect();
        Hit {
            crash: Some(planned_moment(d, data, mean_bytes)),
            damaged,
        }
    }

    /// What launch 1 really hit: the moment of the crash from its firing in
    /// the fault log (`fired`; `flush_of` names the checkpoint a rank's hit
    /// of `flush.file.copied` fell in, [`crash_moment`]), the damage from
    /// what the harness did (`external`: each damaged file names its rank
    /// and dataset).
    pub fn observed(fired: &[Firing], external: &[String], flush_of: &FlushOf<'_>) -> Hit {
        let crash = fired.iter().find_map(|f| crash_moment(f, flush_of));
        let mut damaged: Vec<(u32, u64)> =
            external.iter().filter_map(|e| damaged_file(e)).collect();
        damaged.sort_unstable();
        damaged.dedup();
        Hit { crash, damaged }
    }
}

/// The checkpoint whose flush made a rank's hit of `flush.file.copied`
/// (rank, hit), when launch 1 flushed one then.
pub type FlushOf<'a> = dyn Fn(u32, u64) -> Option<u64> + 'a;

/// The moment a draw's crash is planned at, for data seed `data`: its
/// drawn one, but a crash inside the flush of a checkpoint of which the
/// triggering rank has no file to copy waits for the compute after it
/// instead ([`scenario`] plans it there).
fn planned_moment(d: &Draw, data: u64, mean_bytes: u64) -> (u64, Phase) {
    let (c, phase, crash) = &d.crash;
    if *phase == Phase::Flush
        && flush_hit(d, data, mean_bytes, crash.trigger(d.ranks_per_node)).is_none()
    {
        return (*c, Phase::Compute);
    }
    (*c, *phase)
}

/// The phase and checkpoint of a crash firing (the points the random
/// scenarios' moments map to, docs/fault-injection.md); `None` for a
/// delay (the harness's own sleep) or another point. The hit of most
/// points is the checkpoint; that of `flush.file.copied` counts the
/// rank's files, which `flush_of` maps to the checkpoint flushed.
pub fn crash_moment(f: &Firing, flush_of: &FlushOf<'_>) -> Option<(u64, Phase)> {
    if f.action.starts_with("delay") || f.action.starts_with("error") {
        return None;
    }
    if f.point == "flush.file.copied" {
        return Some((flush_of(f.rank?, f.hit)?, Phase::Flush));
    }
    let phase = match f.point.as_str() {
        // Inside the background protection of checkpoint c (async mode):
        // c completed and is not settled, as while computing after it.
        "app.compute" | "protect.background" => Phase::Compute,
        "api.start_output" => Phase::Start,
        "app.file.write" => Phase::Write,
        "api.complete_output" => Phase::Complete,
        _ => return None,
    };
    Some((f.hit, phase))
}

/// The crash of a draw in words, for the scenario's description.
fn crash_words(c: &Crash) -> String {
    match c {
        Crash::KillRank(r) => format!("rank {r} killed"),
        Crash::ExitRank(r) => format!("rank {r} exits without finalizing"),
        Crash::KillNode(n) => format!("node n{n} dies"),
    }
}

/// When in a checkpoint the crash happens, in words.
fn phase_words(p: Phase) -> &'static str {
    match p {
        Phase::Compute => "while computing after the completion",
        Phase::Start => "inside Start_output",
        Phase::Write => "while the application writes the files",
        Phase::Complete => "inside Complete_output",
        Phase::Flush => "inside the flush",
    }
}

/// Items joined by commas, or "none".
fn listed(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// (rank, dataset) of a damaged application file, from the harness's
/// record of a bit flip, as [`faultsim::inject::Record`]'s Display words it
/// (`flipped N bit(s) of .../scr.dataset.D/.../rank_R.ckptC.partI (L bytes) at ...`).
pub fn damaged_file(record: &str) -> Option<(u32, u64)> {
    let rest = record
        .strip_prefix("flipped ")?
        .split_once(" bit(s) of ")?
        .1;
    let upto = &rest[..rest.rfind(" bytes) at bit offset")?];
    let path = std::path::Path::new(&upto[..upto.rfind(" (")?]);
    let rank = path
        .file_name()?
        .to_str()?
        .strip_prefix("rank_")?
        .split('.')
        .next()?
        .parse()
        .ok()?;
    let dataset = path
        .components()
        .filter_map(|c| {
            c.as_os_str()
                .to_str()?
                .strip_prefix("scr.dataset.")?
                .parse()
                .ok()
        })
        .next()?;
    Some((rank, dataset))
}

/// The expected outcome of a draw taken at its word ([`Hit::of_draw`]).
pub fn expect(d: &Draw) -> Outcome {
    oracle(d, &Hit::of_draw(d))
}

/// The complete checkpoints in cache when launch 1 ends, newest first,
/// and the newest checkpoint settled by then (the prefix's bound, too).
fn cached(d: &Draw, hit: &Hit) -> (u64, Vec<u64>) {
    let (c, phase) = hit.crash.unwrap_or((d.crash.0, d.crash.1));
    // Complete checkpoints in cache at the crash, newest first. The cache
    // keeps SCR_CACHE_SIZE = 2. Start_output of c evicts the oldest, but
    // after the point `api.start_output` (docs/fault-injection.md): a crash
    // there still finds c − 2 and c − 1. A crash while c is written or
    // completed comes after the eviction: only c − 1 is left (with c
    // incomplete). After c completed: c − 1 and c. In async mode the
    // newest checkpoint whose Complete_output returned is not settled
    // until the next Start_output (after its point), and the cache keeps
    // one more: the two protected ones before it (module docs). Inside
    // the flush of c, c completed (async: settled, before the Start_output
    // that settled it evicts anything: three in cache).
    let newest = match (phase, d.encode_async) {
        (Phase::Compute, false) | (Phase::Flush, _) => c,
        (Phase::Start, true) => c.saturating_sub(2),
        _ => c - 1,
    };
    let kept = match (phase, d.encode_async) {
        (Phase::Flush, true) => 3,
        (_, true) | (Phase::Compute | Phase::Start | Phase::Flush, false) => 2,
        (Phase::Write | Phase::Complete, false) => 1,
    };
    (newest, (1..=newest).rev().take(kept).collect())
}

/// The nodes of launch 1 lost by the relaunch: the crash's, and those lost
/// after launch 1.
fn lost_nodes(d: &Draw) -> BTreeSet<usize> {
    let mut lost: BTreeSet<usize> = d.lost_after.iter().copied().collect();
    lost.extend(d.crash.2.node());
    lost
}

/// The ranks whose files of checkpoint `ds` the relaunch finds lost: those
/// of a lost node, and those with a damaged file of it.
fn lost_ranks(d: &Draw, hit: &Hit, ds: u64) -> BTreeSet<usize> {
    let nodes = lost_nodes(d);
    let mut lost: BTreeSet<usize> = (0..d.nodes * d.ranks_per_node)
        .filter(|&r| nodes.contains(&(r / d.ranks_per_node)))
        .collect();
    for &(r, dd) in &hit.damaged {
        if dd == ds {
            lost.insert(r as usize);
        }
    }
    lost
}

/// The expected outcome of a draw, given what its faults hit.
pub fn oracle(d: &Draw, hit: &Hit) -> Outcome {
    let (c, phase) = hit.crash.unwrap_or((d.crash.0, d.crash.1));
    let (newest, candidates) = cached(d, hit);
    let lost_nodes = lost_nodes(d);
    if d.nodes + d.spares - lost_nodes.len() < d.nodes {
        return Outcome::of(vec![Token::of(Class::Scratch)], End::Nodes);
    }
    let node_of = |r: usize| r / d.ranks_per_node;
    let ranks = d.nodes * d.ranks_per_node;
    let groups: Vec<usize> = (0..ranks).map(node_of).collect();
    let recoverable = |lost: &BTreeSet<usize>| -> bool {
        if lost.is_empty() {
            return true;
        }
        match d.scheme {
            CopyType::Single => false,
            CopyType::Partner => {
                let Ok(plan) = scr::redundancy::sets::partner_plan(&groups, 1) else {
                    return false;
                };
                lost.iter()
                    .all(|&r| !lost_nodes.contains(&node_of(plan.rhs[r])) && plan.rhs[r] != r)
            }
            CopyType::Xor | CopyType::Rs => {
                let (k, min) = match d.scheme {
                    CopyType::Xor => (1, 2),
                    _ => (d.failures, d.failures + 1),
                };
                let Ok(plan) = scr::redundancy::sets::build_sets(&groups, d.set_size, min) else {
                    return false;
                };
                plan.sets
                    .iter()
                    .all(|set| set.iter().filter(|r| lost.contains(r)).count() <= k)
            }
        }
    };
    // The newest checkpoint in the prefix: flushed as it was settled (a
    // flush the crash interrupted is not there).
    // Nor is one the outage kept from it: after x in sync mode (x was
    // flushed inside its Complete_output, before the outage); after x − 1
    // in async mode (x is flushed as the next Start_output settles it,
    // after the outage began).
    let in_prefix = if phase == Phase::Flush { c - 1 } else { newest };
    let reached = |x: u64| if d.encode_async { x - 1 } else { x };
    let in_prefix = d
        .outage_after
        .map_or(in_prefix, |x| in_prefix.min(reached(x)));
    let flushed = (1..=in_prefix)
        .rev()
        .find(|&k| d.flush > 0 && k % d.flush == 0);
    let mut second = None;
    for &ds in &candidates {
        let lost = lost_ranks(d, hit, ds);
        if recoverable(&lost) {
            let class = if lost.is_empty() {
                Class::Cache
            } else {
                Class::Rebuilt
            };
            second = Some(Token::restart(class, ds));
            break;
        }
    }
    // A newer checkpoint in the prefix wins over the cache's.
    if let Some(f) = flushed {
        if second.as_ref().is_none_or(|t: &Token| t.ckpt < Some(f)) {
            second = Some(Token::restart(Class::Fetched, f));
        }
    }
    let second = second.unwrap_or_else(|| {
        // What the surviving nodes still hold is found and reported lost:
        // complete candidates, or the dataset a crash inside Write or
        // Complete left incomplete (Start is interrupted before the new
        // dataset exists), or in async mode the unsettled one.
        let interrupted = matches!(phase, Phase::Write | Phase::Complete) || d.encode_async;
        let survivors_held_data =
            (!candidates.is_empty() || interrupted) && lost_nodes.len() < d.nodes;
        Token::of(if survivors_held_data {
            Class::Loss
        } else {
            Class::Scratch
        })
    });
    Outcome::of(vec![Token::of(Class::Scratch), second], End::Completed)
}

/// A random scenario's name: [`Mode::prefix`] and the index.
pub fn name_of(index: u32, mode: Mode) -> String {
    format!("{}{index}", mode.prefix())
}

/// The index and mode of a random scenario's name ([`name_of`]).
pub fn index_of(name: &str) -> Option<(u32, Mode)> {
    fn strip<'a>(s: &'a str, p: &str) -> (bool, &'a str) {
        s.strip_prefix(p).map_or((false, s), |r| (true, r))
    }
    let (encode_async, rest) = strip(name.strip_prefix("random-")?, "async-");
    let (flush, rest) = strip(rest, "flush-");
    Some((
        rest.parse().ok()?,
        Mode {
            encode_async,
            flush,
        },
    ))
}

/// The expectation of a random scenario of campaign seed `seed` given what
/// its first launch really hit ([`Hit::observed`]); `None` when `sc` is not
/// that campaign's random scenario (a catalogue scenario keeps its own) or
/// its first launch did not run.
pub fn observed_expectation(
    seed: u64,
    sc: &Scenario,
    launch1: Option<&LaunchRecord>,
) -> Option<Outcome> {
    let (index, mode) = index_of(&sc.name)?;
    if !sc.tags.iter().any(|t| t == "random") || scenario(seed, index, mode) != *sc {
        return None;
    }
    let l = launch1?;
    let d = draw(seed, index, mode);
    let data = data_of(seed, sc, d.scheme);
    let flush_of = |rank, hit| flush_of_hit(&d, data, sc.mean_bytes, rank, hit);
    let hit = Hit::observed(&l.fired, &l.external, &flush_of);
    let o = oracle(&d, &hit);
    let o = with_fetch_crash(o, planted_fetch_crash(sc).as_ref(), data, sc.mean_bytes);
    Some(with_rebuild_crash(
        o,
        planted_rebuild_crash(sc).as_ref(),
        |slot| oracle_losing(&d, &hit, slot),
    ))
}

/// The data seed of random scenario `sc`'s cell (campaign seed `seed`),
/// which says how many files each rank writes.
fn data_of(seed: u64, sc: &Scenario, scheme: CopyType) -> u64 {
    crate::campaign::cell_data_seed(sc, crate::campaign::cell_seed(seed, &sc.name, scheme))
}

/// Mean file size of the random scenarios' checkpoints.
pub const MEAN_BYTES: u64 = 32768;

/// The scenario of a draw: faults as a plan, the oracle's expectation.
pub fn scenario(seed: u64, index: u32, mode: Mode) -> Scenario {
    let d = draw(seed, index, mode);
    let (c, _, crash) = d.crash.clone();
    let node = |n: usize| format!("n{n}");
    let mut sc = Scenario {
        name: name_of(index, mode),
        about: String::new(),
        quick: false,
        tags: std::iter::once("random")
            .chain(mode.encode_async.then_some("async"))
            .chain(mode.flush.then_some("flush"))
            .map(String::from)
            .collect(),
        nodes: d.nodes,
        ranks_per_node: d.ranks_per_node,
        spares: d.spares,
        checkpoints: d.checkpoints,
        relaunch_checkpoints: 1,
        launches: 2,
        mean_bytes: MEAN_BYTES,
        app_args: Vec::new(),
        env: BTreeMap::new(),
        schemes: Some(vec![d.scheme]),
        faults: Vec::new(),
        halts: Vec::new(),
        timeout_s: 60,
        needs: Vec::new(),
        cache_tmpfs_bytes: None,
        next_allocation: false,
        expect: BTreeMap::new(),
    };
    // A draw with a relaunch crash (in its fetch or as its restart in
    // place begins) gets a third launch before the data seed
    // is drawn (the seed counts every launch's checkpoints: a budget raised
    // later would give the cell other files than those planned here).
    if d.fetch_crash.is_some() || d.rebuild_crash.is_some() {
        sc.launches = 3;
    }
    // The cell's data plan says which ranks write files to damage, and
    // how many files a flush copies.
    let data = data_of(seed, &sc, d.scheme);
    let (_, phase) = planned_moment(&d, data, sc.mean_bytes);
    let when = match phase {
        Phase::Flush => {
            let rank = crash.trigger(d.ranks_per_node);
            When::Point {
                point: "flush.file.copied".into(),
                hit: flush_hit(&d, data, sc.mean_bytes, rank)
                    .expect("a flush moment is planned only where the rank has files"),
                repeat: false,
                rank: Some(rank),
            }
        }
        Phase::Compute if d.background => When::Point {
            point: "protect.background".into(),
            hit: c,
            repeat: false,
            rank: None,
        },
        Phase::Compute => When::BetweenCheckpoints { after: c },
        Phase::Start => When::DuringStart { checkpoint: c },
        Phase::Complete => When::DuringComplete { checkpoint: c },
        Phase::Write => When::Point {
            point: "app.file.write".into(),
            hit: c,
            repeat: false,
            rank: None,
        },
    };
    let what = match &crash {
        Crash::KillRank(r) => What::KillRank { rank: *r },
        Crash::ExitRank(r) => What::ExitRank { rank: *r, code: 42 },
        Crash::KillNode(n) => What::KillNode {
            node: node(*n),
            then: NodeAftermath::RemoveDirs,
        },
    };
    let faults = &mut sc.faults;
    faults.push(Fault { what, when, run: 1 });
    for &n in &d.lost_after {
        faults.push(Fault {
            what: What::KillNode {
                node: node(n),
                then: NodeAftermath::RemoveDirs,
            },
            when: When::AfterRun { run: 1 },
            run: 1,
        });
    }
    for &(r, ds) in &d.damaged {
        faults.push(Fault {
            what: What::Corrupt {
                target: Target {
                    area: Area::Cache,
                    node: Some(node(r as usize / d.ranks_per_node)),
                    dataset: Some(ds),
                    select: Selector::Glob(format!("**/rank_{r}.*")),
                    files: Some(1),
                },
                how: Corruption::BitFlips {
                    count: Some(2),
                    offsets: None,
                },
            },
            when: When::AfterRun { run: 1 },
            run: 1,
        });
    }
    if let Some(x) = d.outage_after {
        faults.push(Fault {
            what: What::PfsOutage {
                method: OutageMethod::Auto,
            },
            when: When::BetweenCheckpoints { after: x },
            run: 1,
        });
    }
    let env = &mut sc.env;
    env.insert("SCR_SET_SIZE".to_string(), d.set_size.to_string());
    env.insert("SCR_SET_FAILURES".to_string(), d.failures.to_string());
    if d.encode_async {
        env.insert("SCR_ENCODE_ASYNC".to_string(), "1".to_string());
    }
    if d.flush > 0 {
        env.insert("SCR_FLUSH".to_string(), d.flush.to_string());
    }
    sc.about = format!(
        "{} nodes × {} ranks + {} spares, {} (set {}, failures {}{}{}{}), {} checkpoints; {} {} of checkpoint {c}; nodes lost after: {}; damaged (rank, dataset): {}",
        d.nodes, d.ranks_per_node, d.spares, d.scheme, d.set_size, d.failures,
        if d.encode_async { ", protected in the background" } else { "" },
        if d.flush > 0 { format!(", flush every {}", d.flush) } else { String::new() },
        d.outage_after.map_or(String::new(), |x| format!(", prefix unreachable after checkpoint {x}")),
        d.checkpoints,
        crash_words(&crash),
        if d.background { "inside the background protection" } else { phase_words(phase) },
        listed(d.lost_after.iter().map(|n| node(*n))),
        listed(d.damaged.iter().map(|(r, ds)| format!("rank {r} of dataset {ds}")))
    );
    let hit = Hit::planned(&d, data, sc.mean_bytes);
    let expect = oracle(&d, &hit);
    // The relaunch's fetch crash, where the plan has it fetch.
    let fetched = expect
        .launches
        .get(1)
        .filter(|t| t.class == Class::Fetched)
        .and_then(|t| t.ckpt);
    if let Some(rank) = fetched.and_then(|k| fetch_crash_rank(&d, data, sc.mean_bytes, k)) {
        let fc = d
            .fetch_crash
            .expect("a fetch crash rank comes from the draw's crash");
        // The relaunch fetches, so it found its nodes.
        let relaunch = relaunch_nodes(&sc).map(|(nodes, _)| nodes);
        let (what, words) = match (fc.node, relaunch) {
            (true, Some(nodes)) => {
                let node = nodes[rank as usize / d.ranks_per_node].clone();
                let words = format!("node {node} (rank {rank}'s) dies");
                let then = NodeAftermath::RemoveDirs;
                (What::KillNode { node, then }, words)
            }
            (false, _) if fc.exit => (
                What::ExitRank { rank, code: 42 },
                format!("rank {rank} exits"),
            ),
            _ => (What::KillRank { rank }, format!("rank {rank} is killed")),
        };
        // A node's death fires on its first rank to fetch a file.
        let on = (!matches!(what, What::KillNode { .. })).then_some(rank);
        sc.faults.push(Fault {
            what,
            when: When::Point {
                point: "fetch.file".into(),
                hit: 1,
                repeat: false,
                rank: on,
            },
            run: 2,
        });
        sc.about
            .push_str(&format!("; in the relaunch {words} while fetching"));
    }
    let expect = with_fetch_crash(
        expect,
        planted_fetch_crash(&sc).as_ref(),
        data,
        sc.mean_bytes,
    );
    // The relaunch's crash in the middle of its rebuild onto a spare, or
    // (other draws, or where it rebuilds nothing onto a spare) as it starts
    // to restart in place, where it relaunches on a node that kept its
    // cache.
    if let Some(rc) = d.rebuild_crash.filter(|_| expect.launches.len() == 2) {
        let second = &expect.launches[1];
        let survivors = if rc.mid && rc.survivor {
            reading_survivors(&d, &hit, second, data, sc.mean_bytes)
        } else {
            Vec::new()
        };
        let rebuilding = if rc.mid && survivors.is_empty() {
            rebuilding_ranks(&sc, second, data)
        } else {
            Vec::new()
        };
        // (nodes, rank, point, hit, moment, whether its node may die)
        let strike = if let Some((nodes, _)) = relaunch_nodes(&sc).filter(|_| !survivors.is_empty())
        {
            let rank = survivors[rc.pick as usize % survivors.len()];
            let moment = "as it reads the first piece of its files for the rebuild".to_string();
            // A node dies only where the rebuilt checkpoint is the oldest
            // cached: an older one would be rebuilt first, onto a spare
            // that then keeps it, which the oracle of a lost node does not
            // know.
            let k = second.ckpt.unwrap_or(0);
            let oldest = cached(&d, &hit).1.iter().all(|&x| x >= k);
            Some((nodes, rank, SURVIVOR_POINT, 1, moment, oldest))
        } else if let Some((nodes, _)) = relaunch_nodes(&sc).filter(|_| !rebuilding.is_empty()) {
            let rank = rebuilding[rc.pick as usize % rebuilding.len()];
            let hit = mid_rebuild_hit(&rc, second, data, sc.mean_bytes, rank);
            let moment = format!("after its rebuilt file {hit} is durable");
            Some((nodes, rank, MID_REBUILD_POINT, hit, moment, true))
        } else if !rc.mid && !rc.node && rc.after {
            // Every relaunch passes it, with or without a cache to restore.
            relaunch_nodes(&sc).map(|(nodes, _)| {
                let rank = rc.pick % (d.nodes * d.ranks_per_node) as u32;
                let moment = "once its restart in place is recorded, before the master filemap";
                (nodes, rank, RECORDED_POINT, 1, moment.to_string(), false)
            })
        } else {
            relaunch_nodes(&sc)
                .filter(|_| relaunch_keeps_a_node(&sc))
                .map(|(nodes, _)| {
                    let rank = rc.pick % (d.nodes * d.ranks_per_node) as u32;
                    let moment = "as its restart in place begins".to_string();
                    (nodes, rank, "rebuild.init", 1, moment, true)
                })
        };
        if let Some((nodes, rank, point, hit, moment, node_may_die)) = strike {
            let (what, words) = if rc.node && node_may_die {
                let node = nodes[rank as usize / d.ranks_per_node].clone();
                let words = format!("node {node} (rank {rank}'s) dies");
                let then = NodeAftermath::RemoveDirs;
                (What::KillNode { node, then }, words)
            } else if rc.exit {
                (
                    What::ExitRank { rank, code: 42 },
                    format!("rank {rank} exits"),
                )
            } else {
                (What::KillRank { rank }, format!("rank {rank} is killed"))
            };
            // A node's death fires on its first rank to reach the point.
            let on = (!matches!(what, What::KillNode { .. })).then_some(rank);
            sc.faults.push(Fault {
                what,
                when: When::Point {
                    point: point.into(),
                    hit,
                    repeat: false,
                    rank: on,
                },
                run: 2,
            });
            sc.about
                .push_str(&format!("; in the relaunch {words} {moment}"));
        }
    }
    let expect = with_rebuild_crash(expect, planted_rebuild_crash(&sc).as_ref(), |slot| {
        oracle_losing(&d, &hit, slot)
    });
    sc.expect.insert(d.scheme.as_str().to_string(), expect);
    sc
}

/// `n` random scenarios of a campaign seeded `seed` in `mode`.
pub fn scenarios(seed: u64, n: u32, mode: Mode) -> Vec<Scenario> {
    (0..n).map(|i| scenario(seed, i, mode)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(scheme: CopyType, crash: (u64, Phase, Crash), lost_after: &[usize]) -> Draw {
        Draw {
            scheme,
            nodes: 4,
            ranks_per_node: 2,
            spares: 3,
            set_size: 4,
            failures: 2,
            checkpoints: 3,
            crash,
            lost_after: lost_after.to_vec(),
            damaged: Vec::new(),
            encode_async: false,
            flush: 0,
            background: false,
            flush_file: 0,
            outage_after: None,
            fetch_crash: None,
            rebuild_crash: None,
        }
    }

    fn o(s: &str) -> Outcome {
        s.parse().unwrap()
    }

    /// The PARTNER pairs of a draw's ranks (failure groups: nodes).
    fn partner_plan_of(d: &Draw) -> scr::redundancy::sets::PartnerPlan {
        let groups: Vec<usize> = (0..d.nodes * d.ranks_per_node)
            .map(|r| r / d.ranks_per_node)
            .collect();
        scr::redundancy::sets::partner_plan(&groups, 1).unwrap()
    }

    #[test]
    fn the_oracle_follows_each_schemes_tolerance() {
        let node1 = (3, Phase::Compute, Crash::KillNode(1));
        assert_eq!(
            expect(&d(CopyType::Single, node1.clone(), &[])),
            o("scratch, loss")
        );
        for s in [CopyType::Partner, CopyType::Xor, CopyType::Rs] {
            assert_eq!(
                expect(&d(s, node1.clone(), &[])),
                o("scratch, rebuilt:3"),
                "{s}"
            );
        }
        // Two neighbours: only RS (2 failures per set) survives.
        assert_eq!(
            expect(&d(CopyType::Rs, node1.clone(), &[2])),
            o("scratch, rebuilt:3")
        );
        assert_eq!(
            expect(&d(CopyType::Xor, node1.clone(), &[2])),
            o("scratch, loss")
        );
        assert_eq!(
            expect(&d(CopyType::Partner, node1.clone(), &[2])),
            o("scratch, loss")
        );
        // Two apart: PARTNER survives too.
        assert_eq!(
            expect(&d(CopyType::Partner, node1.clone(), &[3])),
            o("scratch, rebuilt:3")
        );
        // Three: nobody; more lost nodes than spares: no relaunch.
        assert_eq!(
            expect(&d(CopyType::Rs, node1.clone(), &[2, 3])),
            o("scratch, loss")
        );
        let mut few = d(CopyType::Rs, node1, &[2, 3]);
        few.spares = 2;
        assert_eq!(expect(&few), o("scratch | nodes"));
    }

    #[test]
    fn the_oracle_knows_eviction_and_interrupted_checkpoints() {
        let rank = |p| (3, p, Crash::KillRank(5));
        assert_eq!(
            expect(&d(CopyType::Single, rank(Phase::Compute), &[])),
            o("scratch, cache:3")
        );
        assert_eq!(
            expect(&d(CopyType::Single, rank(Phase::Start), &[])),
            o("scratch, cache:2")
        );
        // Damage to the newest: SINGLE falls back to the older one kept in
        // cache after a crash while computing, but not after one inside
        // checkpoint 3 (Start evicted ckpt.1 and ckpt.3 is incomplete).
        let mut dmg = d(CopyType::Single, rank(Phase::Compute), &[]);
        dmg.damaged = vec![(2, 3)];
        assert_eq!(expect(&dmg), o("scratch, cache:2"));
        dmg.crash = (4, Phase::Write, Crash::KillRank(5));
        assert_eq!(expect(&dmg), o("scratch, loss"));
        dmg.scheme = CopyType::Xor;
        assert_eq!(expect(&dmg), o("scratch, rebuilt:3"));
    }

    #[test]
    fn in_async_mode_the_oracle_never_expects_an_unsettled_checkpoint() {
        let rank = |c, p| {
            let mut x = d(CopyType::Single, (c, p, Crash::KillRank(5)), &[]);
            x.encode_async = true;
            x
        };
        // Computing after ckpt.3: it was never settled (the next
        // Start_output settles it): ckpt.2.
        assert_eq!(expect(&rank(3, Phase::Compute)), o("scratch, cache:2"));
        // Inside Start_output of 4 the point comes before the settle of
        // ckpt.3: ckpt.2 again (sync: ckpt.3).
        assert_eq!(expect(&rank(4, Phase::Start)), o("scratch, cache:2"));
        // Inside the write of 3, ckpt.2 is settled; the cache kept ckpt.1
        // too (one more while a checkpoint is protected), so damage to
        // ckpt.2 falls back to it where sync mode lost everything.
        let mut dmg = rank(3, Phase::Write);
        assert_eq!(expect(&dmg), o("scratch, cache:2"));
        dmg.damaged = vec![(2, 2)];
        assert_eq!(expect(&dmg), o("scratch, cache:1"));
        dmg.encode_async = false;
        assert_eq!(expect(&dmg), o("scratch, loss"));
        // Inside Start_output of 2 nothing is settled yet, but the
        // unsettled ckpt.1 is in cache: a loss, not a start from scratch.
        assert_eq!(expect(&rank(2, Phase::Start)), o("scratch, loss"));
        // A node lost while computing after ckpt.3: ckpt.2 rebuilt.
        let mut node = d(CopyType::Xor, (3, Phase::Compute, Crash::KillNode(1)), &[]);
        node.encode_async = true;
        assert_eq!(expect(&node), o("scratch, rebuilt:2"));
    }

    const ASYNC: Mode = Mode {
        encode_async: true,
        flush: false,
    };

    /// The faults of launch 1 of draw `i` in `mode` (`m`) are those of its
    /// synchronous draw, but for a crash after checkpoint c that strikes
    /// inside c's background protection (async) or inside its flush (flush
    /// mode), and a prefix outage (flush mode) after the others. (The
    /// relaunch's crash, at its fetch or its rebuild, depends on the mode
    /// and on what the relaunch does: other tests check it.)
    fn assert_same_faults(i: u32, mode: Mode, m: &Scenario, sync: &Scenario) {
        let d = draw(7, i, mode);
        let outage = d.outage_after.map(|x| Fault {
            what: What::PfsOutage {
                method: OutageMethod::Auto,
            },
            when: When::BetweenCheckpoints { after: x },
            run: 1,
        });
        let launch1 = |sc: &Scenario| -> Vec<Fault> {
            sc.faults[1..]
                .iter()
                .filter(|f| f.run == 1)
                .cloned()
                .collect()
        };
        let others: Vec<Fault> = launch1(sync).into_iter().chain(outage).collect();
        assert_eq!(launch1(m), others, "random-{i}");
        let (crash, was) = (&m.faults[0], &sync.faults[0]);
        assert_eq!(crash.what, was.what);
        let moved = d.background || crash.when != was.when;
        if !moved {
            return;
        }
        let When::BetweenCheckpoints { after } = was.when else {
            panic!("random-{i}: a crash moved from {:?}", was.when);
        };
        let When::Point {
            point, hit, rank, ..
        } = &crash.when
        else {
            panic!("random-{i}: a crash moved to {:?}", crash.when);
        };
        if d.background {
            assert_eq!(
                (point.as_str(), *hit, *rank),
                ("protect.background", after, None)
            );
        } else {
            // Inside the flush of `after`, on the rank that crashes.
            assert_eq!(d.crash.1, Phase::Flush, "random-{i}");
            assert_eq!(point, "flush.file.copied");
            assert_eq!(*rank, Some(d.crash.2.trigger(d.ranks_per_node)));
            let data = data_of(7, m, d.scheme);
            let c = flush_of_hit(&d, data, MEAN_BYTES, rank.unwrap(), *hit);
            assert_eq!(c, Some(after), "random-{i}: hit {hit}");
        }
    }

    /// Seed 7's scenario `i` in `mode` and in synchronous mode: valid,
    /// named by its mode, and with the synchronous draw's faults
    /// ([`assert_same_faults`]).
    fn checked_beside_sync(i: u32, mode: Mode) -> (Scenario, Scenario) {
        let sync = scenario(7, i, Mode::SYNC);
        let m = scenario(7, i, mode);
        let name = format!("{}{i}", mode.prefix());
        m.check().unwrap_or_else(|e| panic!("{name}: {e}\n{m:?}"));
        assert_eq!(m.name, name);
        assert_eq!(index_of(&m.name), Some((i, mode)));
        assert_same_faults(i, mode, &m, &sync);
        (m, sync)
    }

    #[test]
    fn some_async_crashes_strike_inside_the_background_protection() {
        let draws: Vec<Draw> = (0..200).map(|i| draw(7, i, ASYNC)).collect();
        let computing = draws.iter().filter(|d| d.crash.1 == Phase::Compute);
        let inside = computing.clone().filter(|d| d.background).count();
        assert!(inside > 0 && inside < computing.count());
        assert!(draws
            .iter()
            .all(|d| !d.background || d.crash.1 == Phase::Compute));
        assert!((0..200).all(|i| !draw(7, i, Mode::SYNC).background));
        // Its firing is read back as a crash after checkpoint c completed.
        let f = firing(
            r#"{"point":"protect.background","hit":3,"rank":1,"node":"n0","action":"kill","pid":7,"job":null}"#,
        );
        assert_eq!(crash_moment(&f, &no_flush), Some((3, Phase::Compute)));
    }

    #[test]
    fn async_random_scenarios_are_the_same_draws_protected_in_the_background() {
        for i in 0..50 {
            let (a, sync) = checked_beside_sync(i, ASYNC);
            assert_eq!(index_of(&sync.name), Some((i, Mode::SYNC)));
            assert_eq!(a.env.get("SCR_ENCODE_ASYNC").map(String::as_str), Some("1"));
            assert!(!sync.env.contains_key("SCR_ENCODE_ASYNC"));
            assert!(a.tags.iter().any(|t| t == "async"));
        }
        // The launch's record judges an async cell by the async oracle:
        // rank 5 killed computing after ckpt.3 restarts from ckpt.2.
        let i = (0..400)
            .find(|&i| {
                let d = draw(7, i, ASYNC);
                d.scheme == CopyType::Single
                    && d.crash.1 == Phase::Compute
                    && d.crash.0 >= 2
                    && d.lost_after.is_empty()
                    && d.damaged.is_empty()
                    && d.crash.2.node().is_none()
            })
            .expect("a SINGLE draw with a rank crash while computing");
        let d = draw(7, i, ASYNC);
        let sc = scenario(7, i, ASYNC);
        let line = format!(
            r#"{{"point":"app.compute","hit":{},"rank":0,"node":"n0","action":"kill","pid":9,"job":null}}"#,
            d.crash.0
        );
        let l = launch1(vec![firing(&line)], Vec::new());
        let want = o(&format!("scratch, cache:{}", d.crash.0 - 1));
        assert_eq!(observed_expectation(7, &sc, Some(&l)), Some(want));
        assert_eq!(
            observed_expectation(7, &scenario(7, i, Mode::SYNC), Some(&l)),
            Some(o(&format!("scratch, cache:{}", d.crash.0)))
        );
    }

    #[test]
    fn with_flushes_the_oracle_fetches_a_newer_checkpoint_from_the_prefix() {
        let flush = |scheme, crash, lost: &[usize], f, encode_async| {
            let mut x = d(scheme, crash, lost);
            x.flush = f;
            x.encode_async = encode_async;
            x
        };
        let node1 = (3, Phase::Compute, Crash::KillNode(1));
        // SINGLE loses ckpt.3 with its node; flushed, it is fetched.
        assert_eq!(
            expect(&flush(CopyType::Single, node1.clone(), &[], 1, false)),
            o("scratch, fetched:3")
        );
        // Every second one flushed: ckpt.2.
        assert_eq!(
            expect(&flush(CopyType::Single, node1.clone(), &[], 2, false)),
            o("scratch, fetched:2")
        );
        // Every third: ckpt.3; after ckpt.2 nothing is in the prefix yet,
        // a loss as without flush.
        assert_eq!(
            expect(&flush(CopyType::Single, node1.clone(), &[], 3, false)),
            o("scratch, fetched:3")
        );
        assert_eq!(
            expect(&flush(
                CopyType::Single,
                (2, Phase::Compute, Crash::KillNode(1)),
                &[],
                3,
                false
            )),
            o("scratch, loss")
        );
        // XOR rebuilds ckpt.3 in cache: the prefix's ckpt.3 is no newer.
        assert_eq!(
            expect(&flush(CopyType::Xor, node1.clone(), &[], 1, false)),
            o("scratch, rebuilt:3")
        );
        // Two neighbours lost: XOR's ckpt.3 is gone in cache, fetched.
        assert_eq!(
            expect(&flush(CopyType::Xor, node1.clone(), &[2], 1, false)),
            o("scratch, fetched:3")
        );
        // In async mode ckpt.3 was never settled, so never flushed: ckpt.2
        // is, and the cache rebuilds the same.
        assert_eq!(
            expect(&flush(CopyType::Xor, node1.clone(), &[2], 1, true)),
            o("scratch, fetched:2")
        );
        assert_eq!(
            expect(&flush(CopyType::Xor, node1, &[], 1, true)),
            o("scratch, rebuilt:2")
        );
        // Damage to the cache's ckpt.2 after a kill inside the write of
        // ckpt.3 (SINGLE): the flushed ckpt.2 is fetched; every third
        // one: nothing flushed, a loss.
        let mut dmg = flush(
            CopyType::Single,
            (3, Phase::Write, Crash::KillRank(5)),
            &[],
            2,
            false,
        );
        dmg.damaged = vec![(2, 2)];
        assert_eq!(expect(&dmg), o("scratch, fetched:2"));
        dmg.flush = 3;
        assert_eq!(expect(&dmg), o("scratch, loss"));
        // More nodes lost than spares: no relaunch, whatever the prefix.
        let mut few = flush(
            CopyType::Rs,
            (3, Phase::Compute, Crash::KillNode(1)),
            &[2, 3],
            1,
            false,
        );
        few.spares = 2;
        assert_eq!(expect(&few), o("scratch | nodes"));
    }

    #[test]
    fn a_crash_inside_a_flush_leaves_the_prefix_one_flush_behind() {
        let inside = |scheme, crash, lost: &[usize], f, encode_async| {
            let mut x = d(scheme, crash, lost);
            x.flush = f;
            x.encode_async = encode_async;
            x
        };
        // SINGLE, rank 5 killed inside the flush of ckpt.3: the cache
        // holds ckpt.3 complete, whatever the prefix lacks.
        let rank3 = (3, Phase::Flush, Crash::KillRank(5));
        assert_eq!(
            expect(&inside(CopyType::Single, rank3.clone(), &[], 1, false)),
            o("scratch, cache:3")
        );
        // Its node lost there: ckpt.3 and ckpt.2 are gone from cache and
        // the prefix has ckpt.2, not the ckpt.3 whose flush died (after a
        // crash while computing, ckpt.3).
        let node3 = (3, Phase::Flush, Crash::KillNode(1));
        assert_eq!(
            expect(&inside(CopyType::Single, node3.clone(), &[], 1, false)),
            o("scratch, fetched:2")
        );
        let computing = (3, Phase::Compute, Crash::KillNode(1));
        assert_eq!(
            expect(&inside(CopyType::Single, computing, &[], 1, false)),
            o("scratch, fetched:3")
        );
        // Flushing every third, nothing reached the prefix: a loss.
        assert_eq!(
            expect(&inside(CopyType::Single, node3.clone(), &[], 3, false)),
            o("scratch, loss")
        );
        // XOR rebuilds ckpt.3 in cache.
        assert_eq!(
            expect(&inside(CopyType::Xor, node3, &[], 1, false)),
            o("scratch, rebuilt:3")
        );
        // In async mode the flush of ckpt.3 follows its settle in the next
        // Start_output, before the eviction: ckpt.3, ckpt.2 and ckpt.1
        // are in cache (computing after ckpt.3: ckpt.2 and ckpt.1).
        let mut dmg = inside(CopyType::Single, rank3, &[], 3, true);
        assert_eq!(expect(&dmg), o("scratch, cache:3"));
        dmg.damaged = vec![(2, 3), (4, 2)];
        assert_eq!(expect(&dmg), o("scratch, cache:1"));
        dmg.encode_async = false;
        assert_eq!(expect(&dmg), o("scratch, loss"));
    }

    #[test]
    fn a_prefix_outage_keeps_the_later_flushes_out_of_the_prefix() {
        let mut x = d(
            CopyType::Single,
            (3, Phase::Compute, Crash::KillNode(1)),
            &[],
        );
        x.flush = 1;
        assert_eq!(expect(&x), o("scratch, fetched:3"));
        // The prefix gone after ckpt.1: the flushes of 2 and 3 failed.
        x.outage_after = Some(1);
        assert_eq!(expect(&x), o("scratch, fetched:1"));
        // Every second one flushed: none reached the prefix, a loss.
        x.flush = 2;
        assert_eq!(expect(&x), o("scratch, loss"));
        // A scheme that rebuilds in cache does not need the prefix.
        x.scheme = CopyType::Xor;
        assert_eq!(expect(&x), o("scratch, rebuilt:3"));
        // In async mode ckpt.2 is flushed when Start_output of 3 settles
        // it, after an outage that began once ckpt.2 completed: ckpt.1 is
        // the newest in the prefix (sync mode: ckpt.2).
        let mut a = d(CopyType::Single, (3, Phase::Write, Crash::KillNode(1)), &[]);
        a.flush = 1;
        a.outage_after = Some(2);
        assert_eq!(expect(&a), o("scratch, fetched:2"));
        a.encode_async = true;
        assert_eq!(expect(&a), o("scratch, fetched:1"));
        // Drawn only in flush mode, after a checkpoint before the crash's,
        // never with a crash inside a flush (which needs the prefix).
        let flush = Mode {
            encode_async: false,
            flush: true,
        };
        let draws: Vec<Draw> = (0..200).map(|i| draw(7, i, flush)).collect();
        let with: Vec<&Draw> = draws.iter().filter(|d| d.outage_after.is_some()).collect();
        assert!(!with.is_empty() && with.len() < draws.len() / 2);
        for d in with {
            assert!(d.crash.1 != Phase::Flush);
            assert!((1..d.crash.0).contains(&d.outage_after.unwrap()));
        }
        assert!((0..200).all(|i| draw(7, i, Mode::SYNC).outage_after.is_none()));
    }

    #[test]
    fn some_flush_mode_crashes_strike_inside_a_flush() {
        let flush = Mode {
            encode_async: false,
            flush: true,
        };
        let mut inside = 0;
        for i in 0..100 {
            let d = draw(7, i, flush);
            let sync = draw(7, i, Mode::SYNC);
            if d.crash.1 == Phase::Flush {
                inside += 1;
                // Only after a checkpoint the flush copies, in place of
                // the compute after it.
                assert_eq!(sync.crash.1, Phase::Compute, "random-flush-{i}");
                assert_eq!(d.crash.0 % d.flush, 0, "random-flush-{i}");
            } else {
                assert_eq!(d.crash.1, sync.crash.1, "random-flush-{i}");
            }
            // The point fires on the crashing rank at a hit of the flush
            // of c (checked_beside_sync maps it back).
            checked_beside_sync(i, flush);
        }
        assert!(inside > 0, "no crash inside a flush in 100 draws");
        // The campaign reads the crash's firing back as the flush of c and
        // judges the cell by the oracle's expectation for it.
        let i = (0..100)
            .find(|&i| draw(7, i, flush).crash.1 == Phase::Flush)
            .unwrap();
        let sc = scenario(7, i, flush);
        let When::Point { hit, rank, .. } = &sc.faults[0].when else {
            panic!("random-flush-{i}: {:?}", sc.faults[0].when);
        };
        let line = format!(
            r#"{{"point":"flush.file.copied","hit":{hit},"rank":{},"node":"n0","action":"kill","pid":9,"job":null}}"#,
            rank.unwrap()
        );
        let l = launch1(vec![firing(&line)], Vec::new());
        let scheme = draw(7, i, flush).scheme;
        let listed = sc.expected(scheme).cloned();
        assert_eq!(observed_expectation(7, &sc, Some(&l)), listed);
        // A firing there is read back through the rank's files.
        let f = firing(
            r#"{"point":"flush.file.copied","hit":5,"rank":2,"node":"n1","action":"kill","pid":7,"job":null}"#,
        );
        let by_hit = |rank: u32, hit: u64| (rank == 2).then_some(hit.div_ceil(3) * 2);
        assert_eq!(crash_moment(&f, &by_hit), Some((4, Phase::Flush)));
        assert_eq!(crash_moment(&f, &no_flush), None);
    }

    #[test]
    fn a_flush_hit_is_the_rank_s_files_counted_through_the_flushes() {
        let mut x = d(CopyType::Xor, (4, Phase::Flush, Crash::KillNode(1)), &[]);
        x.checkpoints = 4;
        x.flush = 2;
        x.ranks_per_node = 2;
        let data = 11;
        let rank = x.crash.2.trigger(x.ranks_per_node);
        assert_eq!(rank, 2, "a node's first rank");
        let files = |k| files_of(data, rank, k, MEAN_BYTES);
        for pick in 0..8 {
            x.flush_file = pick;
            let Some(hit) = flush_hit(&x, data, MEAN_BYTES, rank) else {
                assert_eq!(files(4), 0);
                continue;
            };
            // After the files of ckpt.2, inside those of ckpt.4.
            assert!(hit > files(2) && hit <= files(2) + files(4), "{hit}");
            assert_eq!(flush_of_hit(&x, data, MEAN_BYTES, rank, hit), Some(4));
        }
        assert_eq!(flush_of_hit(&x, data, MEAN_BYTES, rank, 1), Some(2));
        let all = files(2) + files(4);
        assert_eq!(flush_of_hit(&x, data, MEAN_BYTES, rank, all + 1), None);
        // A rank without a file of ckpt.4 is planned to crash while
        // computing after it instead.
        let none = (0u64..)
            .find(|&s| files_of(s, rank, 4, MEAN_BYTES) == 0)
            .unwrap();
        assert_eq!(planned_moment(&x, none, MEAN_BYTES), (4, Phase::Compute));
    }

    #[test]
    fn some_flush_mode_relaunches_crash_inside_their_fetch() {
        let flush = Mode {
            encode_async: false,
            flush: true,
        };
        let (mut ranks, mut nodes, mut short) = (0, 0, 0);
        for i in 0..700 {
            let (sc, _) = checked_beside_sync(i, flush);
            let d = draw(7, i, flush);
            // The budget comes with the draw, planted or not.
            let budget = 2 + u32::from(d.fetch_crash.is_some() || d.rebuild_crash.is_some());
            assert_eq!(sc.launches, budget, "random-flush-{i}");
            let Some(strike) = planted_fetch_crash(&sc) else {
                continue;
            };
            let fc = d.fetch_crash.expect("planted from the draw");
            let want = sc.expected(d.scheme).unwrap();
            let (first, died) = (&want.launches[0], &want.launches[1]);
            assert_eq!((first.class, died.class), (Class::Scratch, Class::Died));
            let f = sc.faults.last().unwrap();
            assert_eq!(f.run, 2);
            let data = data_of(7, &sc, d.scheme);
            // The fetched checkpoint, from the expectation without the crash.
            let k = oracle(&d, &Hit::planned(&d, data, sc.mean_bytes)).launches[1]
                .ckpt
                .unwrap();
            // Some rank struck has files of it: it reaches the point.
            assert!(strike
                .ranks
                .iter()
                .any(|&r| files_of(data, r, k, MEAN_BYTES) > 0));
            match (&f.what, &f.when) {
                (What::KillNode { node, .. }, When::Point { rank: None, .. }) => {
                    assert!(fc.node, "random-flush-{i}");
                    nodes += 1;
                    // The node is one of the relaunch's, holding the ranks struck.
                    let (relaunch, _) = relaunch_nodes(&sc).unwrap();
                    let slot = strike.ranks[0] as usize / d.ranks_per_node;
                    assert_eq!(&relaunch[slot], node, "random-flush-{i}");
                    if strike.relaunch {
                        assert_eq!(*want, o(&format!("scratch, died, fetched:{k}")));
                    } else {
                        short += 1;
                        assert_eq!(*want, o("scratch, died | nodes"), "random-flush-{i}");
                    }
                }
                (What::ExitRank { rank, code: 42 }, When::Point { rank: Some(on), .. })
                | (What::KillRank { rank }, When::Point { rank: Some(on), .. }) => {
                    assert!(!fc.node || relaunch_nodes(&sc).is_none());
                    assert_eq!(fc.exit, matches!(f.what, What::ExitRank { .. }));
                    assert_eq!((rank, &strike.ranks), (on, &vec![*on]));
                    assert!(strike.relaunch);
                    assert_eq!(*want, o(&format!("scratch, died, fetched:{k}")));
                    ranks += 1;
                }
                other => panic!("random-flush-{i}: {other:?}"),
            }
        }
        assert!(ranks > 0 && nodes > 0, "ranks {ranks}, nodes {nodes}");
        assert!(
            short > 0,
            "no node death in a fetch without a spare left: {ranks} {nodes}"
        );
        assert!((0..200).all(|i| draw(7, i, Mode::SYNC).fetch_crash.is_none()));
    }

    #[test]
    fn ci_s_mid_rebuild_cells_strike_a_spare_or_a_survivor_in_the_middle_of_its_rebuild() {
        // ci/tests.d/campaign.sh runs these four of the default seed: at a
        // spare as a rebuilt file is durable, at a survivor of launch 1 as
        // it reads its first piece for the rebuild.
        let seed = crate::campaign::DEFAULT_SEED;
        for (i, point, node_dies, spare_struck, want) in [
            (
                169,
                MID_REBUILD_POINT,
                false,
                true,
                "scratch, died, rebuilt:1 | completed",
            ),
            (
                237,
                MID_REBUILD_POINT,
                true,
                true,
                "scratch, died, rebuilt:1 | completed",
            ),
            (
                51,
                SURVIVOR_POINT,
                false,
                false,
                "scratch, died, rebuilt:2 | completed",
            ),
            (
                241,
                SURVIVOR_POINT,
                true,
                false,
                "scratch, died, loss | completed",
            ),
        ] {
            let sc = scenario(seed, i, Mode::SYNC);
            let d = draw(seed, i, Mode::SYNC);
            let f = sc.faults.last().expect("a relaunch crash");
            assert_eq!(f.run, 2, "{}", sc.name);
            assert!(
                matches!(&f.when, When::Point { point: p, .. } if p == point),
                "{}: {:?}",
                sc.name,
                f.when
            );
            let (nodes, _) = relaunch_nodes(&sc).unwrap();
            let spare = |n: &String| !allocation(&sc)[..d.nodes].contains(n);
            match &f.what {
                What::KillNode { node, .. } => {
                    assert!(node_dies, "{}", sc.name);
                    assert_eq!(spare(node), spare_struck, "{}", sc.name);
                }
                What::KillRank { rank } | What::ExitRank { rank, .. } => {
                    assert!(!node_dies, "{}", sc.name);
                    let node = &nodes[*rank as usize / d.ranks_per_node];
                    assert_eq!(spare(node), spare_struck, "{}", sc.name);
                }
                other => panic!("{}: {other:?}", sc.name),
            }
            assert_eq!(sc.expected(d.scheme).unwrap().to_string(), want);
        }
    }

    #[test]
    fn ci_s_recorded_cells_crash_once_the_restart_in_place_is_recorded() {
        // ci/tests.d/campaign.sh runs these two of the default seed: the
        // relaunch rebuilt ckpt.2, or found nothing it could use, then a
        // rank died at `rebuild.recorded`.
        let seed = crate::campaign::DEFAULT_SEED;
        for (i, without, want) in [
            (
                111,
                "scratch, rebuilt:2",
                "scratch, died, cache:2 | completed",
            ),
            (132, "scratch, loss", "scratch, died, scratch | completed"),
        ] {
            let sc = scenario(seed, i, Mode::SYNC);
            let d = draw(seed, i, Mode::SYNC);
            let data = data_of(seed, &sc, d.scheme);
            assert_eq!(
                oracle(&d, &Hit::planned(&d, data, sc.mean_bytes)),
                o(without)
            );
            let f = sc.faults.last().expect("a relaunch crash");
            assert!(
                matches!(&f.when, When::Point { point, hit: 1, rank: Some(_), .. }
                    if point == RECORDED_POINT),
                "{}: {:?}",
                sc.name,
                f.when
            );
            assert!(matches!(
                f.what,
                What::KillRank { .. } | What::ExitRank { .. }
            ));
            assert_eq!(planted_rebuild_crash(&sc), Some(RebuildStrike::Recorded));
            assert_eq!(sc.expected(d.scheme).unwrap().to_string(), want);
        }
    }

    #[test]
    fn a_survivors_node_dying_mid_rebuild_leaves_the_dataset_listed_by_the_spares() {
        // Seed 2026112909's random-347 (ci/tests.d/campaign.sh runs it): 3
        // nodes, RS with 2 failures per set of 3; n0 dies while checkpoint
        // 2 is written, n1 after launch 1, so the relaunch rebuilds ckpt.1
        // onto two spares from n2, whose node dies as rank 2 reads its
        // first piece. Every node of launch 1 is gone, but the spares had
        // recorded ckpt.1 (as its files moved to their owners): the third
        // launch finds it and reports it lost, where the oracle of three
        // lost nodes alone says scratch (the campaign of that seed caught
        // the oracle saying so).
        let (seed, i) = (2026112909, 347);
        let d = draw(seed, i, Mode::SYNC);
        let sc = scenario(seed, i, Mode::SYNC);
        let f = sc.faults.last().unwrap();
        assert!(
            matches!(&f.when, When::Point { point, hit: 1, rank: None, .. } if point == SURVIVOR_POINT),
            "{:?}",
            f.when
        );
        assert!(matches!(&f.what, What::KillNode { node, .. } if node == "n2"));
        let strike = planted_rebuild_crash(&sc);
        assert!(
            matches!(
                strike,
                Some(RebuildStrike::Node {
                    slot: 2,
                    kept_cache: true,
                    recorded: true,
                    relaunch: true
                })
            ),
            "{strike:?}"
        );
        let data = data_of(seed, &sc, d.scheme);
        let hit = Hit::planned(&d, data, sc.mean_bytes);
        assert_eq!(oracle_losing(&d, &hit, 2), o("scratch, scratch"));
        assert_eq!(
            sc.expected(d.scheme).unwrap().to_string(),
            "scratch, died, loss | completed"
        );
    }

    #[test]
    fn some_relaunches_crash_as_their_restart_in_place_begins() {
        for mode in [
            Mode::SYNC,
            ASYNC,
            Mode {
                encode_async: false,
                flush: true,
            },
        ] {
            let (mut planted, mut unplanted) = (0, 0);
            let (mut nodes_died, mut with_cache, mut no_spare, mut mids) = (0, 0, 0, 0);
            let (mut later, mut survivors_struck, mut survivor_nodes) = (0, 0, 0);
            let mut recorded_loss = 0;
            let (mut afters, mut rebuilt_then_cached) = (0, 0);
            for i in 0..300 {
                let d = draw(7, i, mode);
                let sc = scenario(7, i, mode);
                assert!(d.fetch_crash.is_none() || d.rebuild_crash.is_none());
                let budget = 2 + u32::from(d.fetch_crash.is_some() || d.rebuild_crash.is_some());
                assert_eq!(sc.launches, budget, "{}", sc.name);
                let Some(rc) = d.rebuild_crash else {
                    assert!(planted_rebuild_crash(&sc).is_none(), "{}", sc.name);
                    continue;
                };
                let data = data_of(7, &sc, d.scheme);
                let hit = Hit::planned(&d, data, sc.mean_bytes);
                let without = oracle(&d, &hit);
                let survivors = if rc.mid && rc.survivor && without.launches.len() == 2 {
                    reading_survivors(&d, &hit, &without.launches[1], data, sc.mean_bytes)
                } else {
                    Vec::new()
                };
                let rebuilding = if rc.mid && survivors.is_empty() && without.launches.len() == 2 {
                    rebuilding_ranks(&sc, &without.launches[1], data)
                } else {
                    Vec::new()
                };
                let survivor = !survivors.is_empty();
                let mid = !rebuilding.is_empty();
                // Every relaunch passes the point after its restart in place.
                let after = !rc.mid && !rc.node && rc.after && without.launches.len() == 2;
                let fires = survivor
                    || mid
                    || after
                    || (without.launches.len() == 2 && relaunch_keeps_a_node(&sc));
                let strike = planted_rebuild_crash(&sc);
                assert_eq!(strike.is_some(), fires, "{}", sc.name);
                let want = sc.expected(d.scheme).unwrap();
                if !fires {
                    unplanted += 1;
                    assert_eq!(*want, without, "{}", sc.name);
                    continue;
                }
                planted += 1;
                let f = sc.faults.last().unwrap();
                // Whether rank r runs on a node of launch 1 in the
                // relaunch (else on a spare); the checkpoint it rebuilds.
                let of_launch_1 = |r: u32| {
                    let (nodes, _) = relaunch_nodes(&sc).unwrap();
                    allocation(&sc)[..d.nodes].contains(&nodes[r as usize / d.ranks_per_node])
                };
                let rebuilt_k = || match without.launches[1] {
                    Token {
                        class: Class::Rebuilt,
                        ckpt: Some(k),
                    } => k,
                    _ => panic!("{}: {without}", sc.name),
                };
                // Whether the struck rank's node may die: not a survivor's
                // while an older checkpoint, rebuilt first, is cached.
                let mut node_may_die = true;
                let (rank, point, at) = if survivor {
                    survivors_struck += 1;
                    // A rank of a node of launch 1 that kept its cache,
                    // whose files of k are not lost, and which sends pieces
                    // of them for the rebuild of k.
                    let r = survivors[rc.pick as usize % survivors.len()];
                    assert!(of_launch_1(r), "{}", sc.name);
                    let k = rebuilt_k();
                    let lost = lost_ranks(&d, &hit, k);
                    assert!(!lost.contains(&(r as usize)), "{}", sc.name);
                    // It reads bytes: its own (XOR, RS) or a lost rank's
                    // copy (PARTNER).
                    let reads = match d.scheme {
                        CopyType::Partner => lost.iter().any(|&l| {
                            let rhs = partner_plan_of(&d).rhs[l];
                            rhs == r as usize && bytes_of(data, l as u32, k, sc.mean_bytes) > 0
                        }),
                        _ => bytes_of(data, r, k, sc.mean_bytes) > 0,
                    };
                    assert!(reads, "{}", sc.name);
                    node_may_die = cached(&d, &hit).1.iter().all(|&x| x >= k);
                    (r, SURVIVOR_POINT, 1)
                } else if mid {
                    mids += 1;
                    // A rank of a spare, which has files of the rebuilt
                    // checkpoint.
                    let r = rebuilding[rc.pick as usize % rebuilding.len()];
                    assert!(!of_launch_1(r), "{}", sc.name);
                    let k = rebuilt_k();
                    let files = files_of(data, r, k, sc.mean_bytes);
                    assert!(files > 0, "{}", sc.name);
                    let h = 1 + u64::from(rc.mid_file) % files;
                    later += u32::from(h > 1);
                    (r, MID_REBUILD_POINT, h)
                } else {
                    let point = if after {
                        afters += 1;
                        RECORDED_POINT
                    } else {
                        "rebuild.init"
                    };
                    (rc.pick % (d.nodes * d.ranks_per_node) as u32, point, 1)
                };
                let (first, second) = (&without.launches[0], &without.launches[1]);
                let died = [first.clone(), Token::of(Class::Died)];
                if rc.node && node_may_die {
                    nodes_died += 1;
                    survivor_nodes += u32::from(survivor);
                    // The relaunch's node of the rank, fired by its first
                    // rank to reach the point.
                    let (nodes, _) = relaunch_nodes(&sc).unwrap();
                    let slot = rank as usize / d.ranks_per_node;
                    assert!(
                        matches!(&f.what, What::KillNode { node, .. } if *node == nodes[slot]),
                        "{}: {:?}",
                        sc.name,
                        f.what
                    );
                    assert!(
                        matches!(&f.when, When::Point { point: p, hit: h, rank: None, .. }
                            if p == point && *h == at),
                        "{}: {:?}",
                        sc.name,
                        f.when
                    );
                    let Some(RebuildStrike::Node {
                        slot: s,
                        kept_cache,
                        recorded,
                        relaunch,
                    }) = strike
                    else {
                        panic!("{}: {strike:?}", sc.name)
                    };
                    assert_eq!(s, slot, "{}", sc.name);
                    assert_eq!(recorded, survivor, "{}", sc.name);
                    let lost_before =
                        d.lost_after.contains(&slot) || d.crash.2.node() == Some(slot);
                    assert_eq!(kept_cache, !lost_before, "{}", sc.name);
                    assert!(!(mid && kept_cache), "{}: a spare kept no cache", sc.name);
                    assert!(
                        !survivor || kept_cache,
                        "{}: a survivor kept its cache",
                        sc.name
                    );
                    if !relaunch {
                        no_spare += 1;
                        assert_eq!(want.launches, died, "{}", sc.name);
                        assert_eq!(want.end, End::Nodes, "{}", sc.name);
                        continue;
                    }
                    // A spare's death costs a launch; a launch-1 node's
                    // also its cache: the oracle with it lost too (in the
                    // middle of a rebuild the relaunch's spares list the
                    // dataset: found, and lost, where nothing else is).
                    let third = if kept_cache {
                        with_cache += 1;
                        match oracle_losing(&d, &hit, slot).launches[1].clone() {
                            t if survivor && t.class == Class::Scratch => {
                                recorded_loss += 1;
                                Token::of(Class::Loss)
                            }
                            t => t,
                        }
                    } else {
                        second.clone()
                    };
                    assert_eq!(want.launches, [died[0].clone(), died[1].clone(), third]);
                    assert_eq!(want.end, without.end);
                    continue;
                }
                let what = if rc.exit {
                    What::ExitRank { rank, code: 42 }
                } else {
                    What::KillRank { rank }
                };
                assert_eq!((f.run, &f.what), (2, &what), "{}", sc.name);
                // After the restart in place, what it rebuilt is in cache
                // and what it found but could not use is gone.
                let (kind, third) = match (after, second.class, second.ckpt) {
                    (true, Class::Rebuilt, Some(k)) => {
                        rebuilt_then_cached += 1;
                        (RebuildStrike::Recorded, Token::restart(Class::Cache, k))
                    }
                    (true, Class::Loss, _) => (RebuildStrike::Recorded, Token::of(Class::Scratch)),
                    (true, ..) => (RebuildStrike::Recorded, second.clone()),
                    (false, ..) => (RebuildStrike::Rank, second.clone()),
                };
                assert_eq!(strike, Some(kind), "{}", sc.name);
                assert!(
                    matches!(&f.when, When::Point { point: p, hit: h, rank: Some(r), .. }
                        if p == point && *r == rank && *h == at),
                    "{}: {:?}",
                    sc.name,
                    f.when
                );
                assert_eq!(
                    want.launches,
                    [died[0].clone(), died[1].clone(), third],
                    "{}",
                    sc.name
                );
                assert_eq!(want.end, without.end);
            }
            assert!(
                planted > 20
                    && unplanted > 0
                    && nodes_died > 5
                    && with_cache > 0
                    && mids > 2
                    && later > 0
                    && survivors_struck > 0
                    && afters > 5
                    && rebuilt_then_cached > 0,
                "{mode:?}: {planted} {unplanted} {nodes_died} {with_cache} {no_spare} {mids} {later} {survivors_struck} {afters} {rebuilt_then_cached}"
            );
            eprintln!(
                "{mode:?}: {planted} planted ({mids} at a spare in the middle of a rebuild, {later} after a later file than the first; {survivors_struck} at a survivor, {survivor_nodes} of them its node, {recorded_loss} leaving only the spares' record; {afters} once the restart was recorded, {rebuilt_then_cached} of them after a rebuild; {nodes_died} nodes died), {unplanted} not"
            );
        }
    }

    #[test]
    fn a_fetch_crash_costs_one_launch_only_where_the_relaunch_fetches() {
        let data = 11;
        let (with, without) = {
            let has = |r: u32| files_of(data, r, 3, MEAN_BYTES) > 0;
            let with = (0..64).find(|&r| has(r)).unwrap();
            let without = (0..64).filter(|&r| !has(r)).take(2).collect::<Vec<_>>();
            (with, without)
        };
        let strike = |ranks: Vec<u32>, relaunch| FetchStrike { ranks, relaunch };
        let crashed = |s: &str, st: Option<FetchStrike>| {
            with_fetch_crash(o(s), st.as_ref(), data, MEAN_BYTES)
        };
        assert_eq!(
            crashed("scratch, fetched:3", Some(strike(vec![with], true))),
            o("scratch, died, fetched:3")
        );
        // A rank with nothing of ckpt.3 to fetch never reaches the point,
        // nor does a node whose ranks have nothing.
        for none in [vec![without[0]], without.clone()] {
            assert_eq!(
                crashed("scratch, fetched:3", Some(strike(none, false))),
                o("scratch, fetched:3")
            );
        }
        // A node with one rank that fetches dies; without a spare left the
        // loop ends there.
        let node = vec![without[0], with];
        assert_eq!(
            crashed("scratch, fetched:3", Some(strike(node.clone(), true))),
            o("scratch, died, fetched:3")
        );
        assert_eq!(
            crashed("scratch, fetched:3", Some(strike(node, false))),
            o("scratch, died | nodes")
        );
        // No fetch in the relaunch, or no crash planted: as it was.
        for s in ["scratch, cache:3", "scratch, rebuilt:2", "scratch, loss"] {
            assert_eq!(crashed(s, Some(strike(vec![with], true))), o(s));
        }
        assert_eq!(crashed("scratch, fetched:3", None), o("scratch, fetched:3"));
    }

    #[test]
    fn flush_scenarios_set_scr_flush_and_keep_the_draws() {
        let both = Mode {
            encode_async: true,
            flush: true,
        };
        let mut every = std::collections::BTreeSet::new();
        for i in 0..50 {
            let (f, _) = checked_beside_sync(i, both);
            let n: u64 = f.env["SCR_FLUSH"].parse().unwrap();
            assert!((1..=3).contains(&n));
            every.insert(n);
            assert_eq!(draw(7, i, both).flush, n);
            assert_eq!(f.tags, ["random", "async", "flush"]);
        }
        assert_eq!(every.len(), 3, "every flush interval is drawn");
        assert_eq!(draw(7, 0, Mode::SYNC).flush, 0);
    }

    /// A fault log line as `faultrt` writes it.
    fn firing(line: &str) -> Firing {
        serde_json::from_str(line).unwrap()
    }

    /// A launch that flushed nothing.
    fn no_flush(_rank: u32, _hit: u64) -> Option<u64> {
        None
    }

    /// The harness's record of a bit flip, formatted as the run loop keeps
    /// it in `LaunchRecord::external`.
    fn flipped(node: &str, ds: u64, file: &str) -> String {
        faultsim::inject::Record::BitFlips {
            path: format!(
                "/w/nodes/{node}/dev/shm/uid0/scr.4242/scr.dataset.{ds}/ckpt.{ds}/{file}"
            )
            .into(),
            bit_offsets: vec![1, 2],
            len_bytes: 100,
        }
        .to_string()
    }

    #[test]
    fn damage_records_and_crash_firings_are_read_back() {
        assert_eq!(
            damaged_file(&flipped("n1", 3, "rank_13.ckpt3.part1")),
            Some((13, 3))
        );
        assert_eq!(damaged_file("fault 3: no file matched Target { .. }"), None);
        assert_eq!(damaged_file("node n4 dies between launches"), None);
        let f = |p: &str, a: &str| {
            firing(&format!(
                r#"{{"point":"{p}","hit":3,"rank":1,"node":"n0","action":"{a}","pid":7,"job":null}}"#
            ))
        };
        assert_eq!(
            crash_moment(&f("api.start_output", "kill"), &no_flush),
            Some((3, Phase::Start))
        );
        assert_eq!(
            crash_moment(&f("app.file.write", "exit:42"), &no_flush),
            Some((3, Phase::Write))
        );
        assert_eq!(
            crash_moment(&f("api.complete_output", "kill-node"), &no_flush),
            Some((3, Phase::Complete))
        );
        assert_eq!(
            crash_moment(&f("app.compute", "kill"), &no_flush),
            Some((3, Phase::Compute))
        );
        // The harness's own sleep at app.compute is not a crash.
        assert_eq!(
            crash_moment(&f("app.compute", "delay:1500"), &no_flush),
            None
        );
    }

    /// Seed 11, random-7 (RS): rank 0 killed at `api.start_output` of
    /// checkpoint 4, node n4 lost after, ranks 0 and 1 damaged in ckpt.3.
    /// Start_output had not evicted ckpt.2 when the point fired, so the
    /// library rebuilt ckpt.2; the oracle assumed it gone and expected a
    /// loss.
    #[test]
    fn oracle_start_output_point_precedes_eviction() {
        let d = Draw {
            scheme: CopyType::Rs,
            nodes: 6,
            ranks_per_node: 1,
            spares: 2,
            set_size: 4,
            failures: 1,
            checkpoints: 4,
            crash: (4, Phase::Start, Crash::KillRank(0)),
            lost_after: vec![4],
            damaged: vec![(0, 3), (1, 3)],
            encode_async: false,
            flush: 0,
            background: false,
            flush_file: 0,
            outage_after: None,
            fetch_crash: None,
            rebuild_crash: None,
        };
        let log = firing(
            r#"{"point":"api.start_output","hit":4,"rank":0,"node":"n0","action":"kill","pid":9,"job":"SCR_FAULT_JOB=a"}"#,
        );
        let external = vec![
            "node n4 dies between launches".to_string(),
            flipped("n0", 3, "rank_0.ckpt3.part0"),
            flipped("n1", 3, "rank_1.ckpt3.part1"),
        ];
        let hit = Hit::observed(&[log], &external, &no_flush);
        assert_eq!(hit.crash, Some((4, Phase::Start)));
        assert_eq!(hit.damaged, vec![(0, 3), (1, 3)]);
        assert_eq!(oracle(&d, &hit), o("scratch, rebuilt:2"));
        // Inside Write of checkpoint 4 the eviction has happened: ckpt.2
        // is gone and ckpt.3 cannot be rebuilt.
        let later = Hit {
            crash: Some((4, Phase::Write)),
            ..hit
        };
        assert_eq!(oracle(&d, &later), o("scratch, loss"));
    }

    /// Seed 11, random-258 (SINGLE): rank 6 exits after checkpoint 4,
    /// then one of rank 0's files of ckpt.4 is to be damaged, but rank 0
    /// wrote none in ckpt.4 (the cell's data plan): the damage found no
    /// file, the library restarted from ckpt.4 in cache; the oracle counted
    /// rank 0 as having lost its files and expected ckpt.3.
    #[test]
    fn oracle_damage_to_a_rank_that_wrote_no_files_loses_nothing() {
        let d = Draw {
            scheme: CopyType::Single,
            nodes: 5,
            ranks_per_node: 2,
            spares: 2,
            set_size: 4,
            failures: 2,
            checkpoints: 4,
            crash: (4, Phase::Compute, Crash::ExitRank(6)),
            lost_after: Vec::new(),
            damaged: vec![(0, 4)],
            encode_async: false,
            flush: 0,
            background: false,
            flush_file: 0,
            outage_after: None,
            fetch_crash: None,
            rebuild_crash: None,
        };
        let log = firing(
            r#"{"point":"app.compute","hit":4,"rank":6,"node":"n3","action":"exit:42","pid":9,"job":null}"#,
        );
        let external = vec![
            r#"fault 1: no file matched Target { area: Cache, node: Some("n0"), dataset: Some(4), select: Glob("**/rank_0.*"), files: Some(1) }"#
                .to_string(),
        ];
        let hit = Hit::observed(&[log], &external, &no_flush);
        assert_eq!(hit.damaged, Vec::new());
        assert_eq!(oracle(&d, &hit), o("scratch, cache:4"));
        // Had the damage hit a file, SINGLE would fall back to ckpt.3.
        let flipped = Hit::observed(&[], &[flipped("n0", 4, "rank_0.ckpt4.part0")], &no_flush);
        assert_eq!(oracle(&d, &flipped), o("scratch, cache:3"));
        // Before the run, the data plan tells the same: which data seeds
        // leave rank 0 without a file of ckpt.4.
        let no_files = (0u64..)
            .find(|&s| testing::data::file_plan(s, 0, 4, MEAN_BYTES).is_empty())
            .unwrap();
        let files = (0u64..)
            .find(|&s| !testing::data::file_plan(s, 0, 4, MEAN_BYTES).is_empty())
            .unwrap();
        assert_eq!(
            oracle(&d, &Hit::planned(&d, no_files, MEAN_BYTES)),
            o("scratch, cache:4")
        );
        assert_eq!(
            oracle(&d, &Hit::planned(&d, files, MEAN_BYTES)),
            o("scratch, cache:3")
        );
    }

    fn launch1(fired: Vec<Firing>, external: Vec<String>) -> LaunchRecord {
        LaunchRecord {
            launch: 1,
            nodes: Vec::new(),
            newly_down: Vec::new(),
            exit_code: Some(42),
            launcher_stuck: false,
            elapsed_s: 1.0,
            fault_plan: None,
            fired,
            unfired: Vec::new(),
            external,
            report: Default::default(),
            completed: Vec::new(),
            token: "scratch".into(),
            why: None,
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    #[test]
    fn a_campaign_judges_random_cells_by_what_their_faults_hit() {
        // Seed 11's random-7 and random-258 (the two cases above) as the
        // campaign generates them: the listed expectation already follows
        // the corrected model and the data plan.
        let sc7 = scenario(11, 7, Mode::SYNC);
        assert_eq!(sc7.expected(CopyType::Rs), Some(&o("scratch, rebuilt:2")));
        let sc258 = scenario(11, 258, Mode::SYNC);
        assert_eq!(
            sc258.expected(CopyType::Single),
            Some(&o("scratch, cache:4"))
        );
        // After the run, the launch's record decides: the crash fired at
        // api.start_output of checkpoint 4 and both damages hit a file.
        let l = launch1(
            vec![firing(
                r#"{"point":"api.start_output","hit":4,"rank":0,"node":"n0","action":"kill","pid":9,"job":null}"#,
            )],
            vec![
                flipped("n0", 3, "rank_0.ckpt3.part0"),
                flipped("n1", 3, "rank_1.ckpt3.part1"),
            ],
        );
        assert_eq!(
            observed_expectation(11, &sc7, Some(&l)),
            Some(o("scratch, rebuilt:2"))
        );
        // Had the crash come once Start_output evicted ckpt.2 (inside the
        // write of checkpoint 4), the same damage would be a loss.
        let l = launch1(
            vec![firing(
                r#"{"point":"app.file.write","hit":4,"rank":0,"node":"n0","action":"kill","pid":9,"job":null}"#,
            )],
            l.external.clone(),
        );
        assert_eq!(
            observed_expectation(11, &sc7, Some(&l)),
            Some(o("scratch, loss"))
        );
        // Not this campaign's random scenario (another seed, a catalogue
        // name), or no launch: the scenario keeps its own expectation.
        assert_eq!(observed_expectation(12, &sc7, Some(&l)), None);
        let mut named = sc7.clone();
        named.name = "kill-node-encode".into();
        assert_eq!(observed_expectation(11, &named, Some(&l)), None);
        assert_eq!(observed_expectation(11, &sc7, None), None);
    }

    #[test]
    fn random_scenarios_are_valid_and_replayable() {
        for i in 0..200 {
            let a = scenario(7, i, Mode::SYNC);
            a.check()
                .unwrap_or_else(|e| panic!("random-{i}: {e}\n{a:?}"));
            let b = scenario(7, i, Mode::SYNC);
            assert_eq!(a, b, "random-{i} is not a function of its seed");
        }
        assert_ne!(scenario(7, 0, Mode::SYNC), scenario(8, 0, Mode::SYNC));
    }
}
