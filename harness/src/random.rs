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
//!   checkpoint c first evicts the oldest, so a crash inside checkpoint c
//!   leaves only c − 1;
//! - a rank's files of a dataset are lost when its node is lost or one of
//!   its files there is damaged; a lost node also loses the redundancy data
//!   it held;
//! - SINGLE recovers nothing; PARTNER recovers rank r when the node holding
//!   its copy (the next node in its ring) is not lost; XOR recovers a set
//!   with at most one lost member, RS with at most SET_FAILURES;
//! - the relaunch restarts from the newest recoverable checkpoint (rebuilt
//!   when some rank needed it, from cache otherwise); when none is, it is a
//!   loss if the surviving nodes still held a dataset (a complete one, or
//!   the one a crash inside Write or Complete interrupted), scratch
//!   otherwise.
//!
//! Set membership comes from `scr::redundancy::sets` (the layout is a
//! deterministic function of the nodes, tested in that crate); the
//! tolerance rules above are the oracle's own.

use std::collections::{BTreeMap, BTreeSet};

use faultsim::plan::{Area, Corruption, Fault, NodeAftermath, Selector, Target, What, When};
use faultsim::seed::Seeded;
use rand::Rng;

use crate::outcome::{Class, End, Outcome, Token};
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
}

/// Draw random scenario `index` of a campaign seeded `seed`.
pub fn draw(seed: u64, index: u32) -> Draw {
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
}

/// The expected outcome of a draw.
pub fn expect(d: &Draw) -> Outcome {
    let (c, phase, crash) = &d.crash;
    let newest = match phase {
        Phase::Compute => *c,
        _ => c - 1,
    };
    // Cached candidates, newest first.
    let candidates: Vec<u64> = match phase {
        Phase::Compute => (newest.saturating_sub(1).max(1)..=newest).rev().collect(),
        _ if newest == 0 => Vec::new(),
        _ => vec![newest],
    };
    let mut lost_nodes: BTreeSet<usize> = d.lost_after.iter().copied().collect();
    if let Some(n) = crash.node() {
        lost_nodes.insert(n);
    }
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
    let mut second = None;
    for &ds in &candidates {
        let mut lost: BTreeSet<usize> = (0..ranks)
            .filter(|&r| lost_nodes.contains(&node_of(r)))
            .collect();
        for &(r, dd) in &d.damaged {
            if dd == ds {
                lost.insert(r as usize);
            }
        }
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
    let second = second.unwrap_or_else(|| {
        // What the surviving nodes still hold is found and reported lost:
        // complete candidates, or the dataset a crash inside Write or
        // Complete left incomplete (Start is interrupted before the new
        // dataset exists).
        let interrupted = matches!(phase, Phase::Write | Phase::Complete);
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

/// The scenario of a draw: faults as a plan, the oracle's expectation.
pub fn scenario(seed: u64, index: u32) -> Scenario {
    let d = draw(seed, index);
    let (c, phase, crash) = d.crash.clone();
    let node = |n: usize| format!("n{n}");
    let when = match phase {
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
    let mut faults = vec![Fault { what, when, run: 1 }];
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
    let mut env = BTreeMap::new();
    env.insert("SCR_SET_SIZE".to_string(), d.set_size.to_string());
    env.insert("SCR_SET_FAILURES".to_string(), d.failures.to_string());
    let expect = expect(&d);
    let about = format!(
        "{} nodes × {} ranks + {} spares, {} (set {}, failures {}), {} checkpoints; crash {:?} at {:?} of checkpoint {c}; nodes lost after: {:?}; damaged (rank, dataset): {:?}",
        d.nodes, d.ranks_per_node, d.spares, d.scheme, d.set_size, d.failures, d.checkpoints,
        crash, phase, d.lost_after, d.damaged
    );
    Scenario {
        name: format!("random-{index}"),
        about,
        quick: false,
        tags: vec!["random".into()],
        nodes: d.nodes,
        ranks_per_node: d.ranks_per_node,
        spares: d.spares,
        checkpoints: d.checkpoints,
        relaunch_checkpoints: 1,
        launches: 2,
        mean_bytes: 32768,
        app_args: Vec::new(),
        env,
        schemes: Some(vec![d.scheme]),
        faults,
        halts: Vec::new(),
        timeout_s: 60,
        needs: Vec::new(),
        cache_tmpfs_bytes: None,
        next_allocation: false,
        expect: [(d.scheme.as_str().to_string(), expect)]
            .into_iter()
            .collect(),
    }
}

/// `n` random scenarios of a campaign seeded `seed`.
pub fn scenarios(seed: u64, n: u32) -> Vec<Scenario> {
    (0..n).map(|i| scenario(seed, i)).collect()
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
        }
    }

    fn o(s: &str) -> Outcome {
        s.parse().unwrap()
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
    fn random_scenarios_are_valid_and_replayable() {
        for i in 0..200 {
            let a = scenario(7, i);
            a.check()
                .unwrap_or_else(|e| panic!("random-{i}: {e}\n{a:?}"));
            let b = scenario(7, i);
            assert_eq!(a, b, "random-{i} is not a function of its seed");
        }
        assert_ne!(scenario(7, 0), scenario(8, 0));
    }
}
