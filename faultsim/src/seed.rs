//! Every random choice of the testbed derives from one u64 seed.
//!
//! A [`Seeded`] hands out named sub-streams: the stream for a name is a
//! ChaCha8 generator keyed by the seed whose stream number is a hash of the
//! name. Choices drawn from one stream never shift another, so adding a new
//! random choice under a new name leaves every old choice of every seed
//! unchanged and old failures stay replayable.
//!
//! A failed run prints its seed and the command that replays it
//! ([`replay_hint`]); `FAULTSIM_SEED` ([`ENV_SEED`]) fixes the seed.

use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::plan::{
    Area, Corruption, Fault, NodeAftermath, OutageMethod, Plan, Role, Selector, Target, Topology,
    What, When, KNOWN_POINTS,
};
use crate::runtime::ErrorKind;

/// Environment variable that fixes the seed of a test or campaign.
pub const ENV_SEED: &str = "FAULTSIM_SEED";

/// FNV-1a, 64 bit: a stable hash of stream names (std's hashers are not
/// guaranteed stable across releases).
fn stream_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The seed from `FAULTSIM_SEED` when set and valid, else a fresh random one.
pub fn seed_from_env() -> u64 {
    std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(rand::random)
}

/// The line to print when a seeded run fails: the seed and the command
/// that replays it (`command` is the run's command without the seed).
pub fn replay_hint(seed: u64, command: &str) -> String {
    format!("seed {seed}; replay: {ENV_SEED}={seed} {command}")
}

/// A source of named, independent random streams derived from one seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeded {
    seed: u64,
}

/// The space random plans are drawn from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSpace {
    /// The job.
    pub topology: Topology,
    /// Injection points to aim at.
    pub points: Vec<String>,
    /// Most faults in one plan (at least one is drawn).
    pub max_faults: u32,
    /// Outputs the application writes per run.
    pub checkpoints: u64,
    /// Launches of the run loop.
    pub runs: u32,
}

impl Default for PlanSpace {
    /// 4 simulated nodes of 2 ranks, the known points, up to 3 faults,
    /// 5 outputs, 2 launches.
    fn default() -> PlanSpace {
        PlanSpace {
            topology: Topology::simulated(4, 2),
            points: KNOWN_POINTS.iter().map(|p| p.to_string()).collect(),
            max_faults: 3,
            checkpoints: 5,
            runs: 2,
        }
    }
}

impl Seeded {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Seeded {
        Seeded { seed }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The stream called `name`: the same generator for the same seed and name, always.
    pub fn stream(&self, name: &str) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(stream_id(name));
        rng
    }

    /// A derived seed (e.g. the data seed of an application), from stream `name`.
    pub fn derive(&self, name: &str) -> u64 {
        self.stream(name).gen()
    }

    /// `count` distinct bit offsets below `len_bytes * 8`, sorted (fewer
    /// when the file has fewer bits; none for an empty file).
    pub fn bit_offsets(&self, name: &str, len_bytes: u64, count: u32) -> Vec<u64> {
        let bits = len_bytes.saturating_mul(8);
        let mut rng = self.stream(name);
        let mut out: Vec<u64> = if let Ok(bits_usize) = usize::try_from(bits) {
            let k = usize::try_from(count).unwrap_or(usize::MAX).min(bits_usize);
            sample(&mut rng, bits_usize, k)
                .into_iter()
                .map(|b| b as u64)
                .collect()
        } else {
            // Beyond the address space: draws, duplicates removed (bounded).
            (0..count).map(|_| rng.gen_range(0..bits)).collect()
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `k` distinct indices below `n` (all when `k >= n`), sorted.
    pub fn pick_indices(&self, name: &str, n: usize, k: usize) -> Vec<usize> {
        let mut out = sample(&mut self.stream(name), n, k.min(n)).into_vec();
        out.sort_unstable();
        out
    }

    /// One item of `items`, or `None` when it is empty.
    pub fn pick<'a, T>(&self, name: &str, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.stream(name).gen_range(0..items.len()))
    }

    /// A random plan in `space` that passes [`Plan::validate`] (faults that
    /// would contradict earlier ones are dropped). Fault `i` is drawn from
    /// its own stream `plan.fault.<i>`.
    pub fn plan(&self, space: &PlanSpace) -> Plan {
        let max = space.max_faults.max(1);
        let count = self.stream("plan.count").gen_range(1..=max);
        let mut plan = Plan {
            name: Some(format!("random plan of seed {}", self.seed)),
            seed: Some(self.seed),
            faults: Vec::new(),
        };
        for i in 0..count {
            let mut rng = self.stream(&format!("plan.fault.{i}"));
            plan.faults.push(random_fault(&mut rng, space));
            if plan.validate(&space.topology).is_err() {
                plan.faults.pop();
            }
        }
        plan
    }
}

fn random_fault(rng: &mut ChaCha8Rng, space: &PlanSpace) -> Fault {
    let topo = &space.topology;
    let ranks = topo.ranks().max(1);
    let nodes = &topo.nodes;
    let node = |rng: &mut ChaCha8Rng| -> Option<String> {
        (!nodes.is_empty()).then(|| nodes[rng.gen_range(0..nodes.len())].clone())
    };
    let runs = space.runs.max(1);
    let outputs = space.checkpoints.max(1);
    let run = rng.gen_range(1..=runs);
    let point = |rng: &mut ChaCha8Rng, rank: Option<u32>| When::Point {
        point: if space.points.is_empty() {
            KNOWN_POINTS[0].to_string()
        } else {
            space.points[rng.gen_range(0..space.points.len())].clone()
        },
        hit: rng.gen_range(1..=4),
        repeat: false,
        rank,
    };
    let in_run = |rng: &mut ChaCha8Rng| match rng.gen_range(0..4) {
        0 => point(rng, None),
        1 => When::BetweenCheckpoints {
            after: rng.gen_range(1..=outputs),
        },
        2 => When::DuringStart {
            checkpoint: rng.gen_range(1..=outputs),
        },
        _ => When::DuringComplete {
            checkpoint: rng.gen_range(1..=outputs),
        },
    };
    let outside = |rng: &mut ChaCha8Rng| match rng.gen_range(0..3) {
        0 => When::BetweenCheckpoints {
            after: rng.gen_range(1..=outputs),
        },
        1 => When::BeforeRun {
            run: rng.gen_range(1..=runs),
        },
        _ => When::AfterRun {
            run: rng.gen_range(1..=runs),
        },
    };
    let (what, when) = match (rng.gen_range(0..8), node(rng)) {
        (1, Some(n)) => {
            let then = [
                NodeAftermath::RemoveDirs,
                NodeAftermath::MakeUnreadable,
                NodeAftermath::Keep,
            ][rng.gen_range(0..3)];
            (What::KillNode { node: n, then }, in_run(rng))
        }
        (2, _) => (
            What::ExitRank {
                rank: rng.gen_range(0..ranks),
                code: rng.gen_range(1..=3),
            },
            in_run(rng),
        ),
        (3, n) => {
            let roles = Role::ALL;
            let area = [Area::Cache, Area::Control, Area::Prefix][rng.gen_range(0..3)];
            let how = match rng.gen_range(0..4) {
                0 => Corruption::BitFlips {
                    count: Some(rng.gen_range(1..=8)),
                    offsets: None,
                },
                1 => Corruption::Truncate {
                    to_bytes: None,
                    fraction: Some(f64::from(rng.gen_range(0..100u32)) / 100.0),
                },
                2 => Corruption::Delete,
                _ => Corruption::ZeroKvtreeHeader,
            };
            let target = Target {
                area,
                node: if area == Area::Prefix { None } else { n },
                dataset: rng.gen_bool(0.5).then(|| rng.gen_range(1..=outputs)),
                select: Selector::Role(roles[rng.gen_range(0..roles.len())]),
                files: rng.gen_bool(0.5).then(|| rng.gen_range(1..=2)),
            };
            (What::Corrupt { target, how }, outside(rng))
        }
        (4, _) => (
            What::PfsOutage {
                method: OutageMethod::Auto,
            },
            outside(rng),
        ),
        (5, n) => (
            What::CacheFull {
                node: n,
                leave_free_bytes: rng.gen_range(0..4096),
            },
            outside(rng),
        ),
        (6, _) => {
            let when = match point(rng, None) {
                When::Point {
                    point, hit, rank, ..
                } => When::Point {
                    point,
                    hit,
                    repeat: true,
                    rank,
                },
                other => other,
            };
            (
                What::SlowIo {
                    delay_ms: rng.gen_range(1..=50),
                },
                when,
            )
        }
        (7, _) => {
            let kinds = [
                ErrorKind::Eio,
                ErrorKind::Enospc,
                ErrorKind::Erofs,
                ErrorKind::Eacces,
            ];
            (
                What::IoError {
                    error: kinds[rng.gen_range(0..kinds.len())],
                },
                in_run(rng),
            )
        }
        _ => (
            What::KillRank {
                rank: rng.gen_range(0..ranks),
            },
            in_run(rng),
        ),
    };
    let run = match when {
        When::BeforeRun { run } | When::AfterRun { run } => run,
        _ => run,
    };
    Fault { what, when, run }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

    /// Arbitrary plans are seeded plans: quickcheck draws the seed, which
    /// the plan records, so a failure report shows the seed to replay.
    impl Arbitrary for Plan {
        fn arbitrary(g: &mut Gen) -> Plan {
            Seeded::new(u64::arbitrary(g)).plan(&PlanSpace::default())
        }

        fn shrink(&self) -> Box<dyn Iterator<Item = Plan>> {
            let plan = self.clone();
            Box::new((0..plan.faults.len()).map(move |i| {
                let mut smaller = plan.clone();
                smaller.faults.remove(i);
                smaller
            }))
        }
    }

    /// `Seeded::new(42).derive("data")`, computed once and pinned.
    const PINNED_42_DATA: u64 = 4_962_736_511_424_723_951;

    fn seed() -> u64 {
        let s = seed_from_env();
        eprintln!(
            "{}",
            replay_hint(s, "cargo test -p faultsim --lib seed::tests")
        );
        s
    }

    #[test]
    fn same_seed_same_plan_json_twice() {
        let s = seed();
        let space = PlanSpace::default();
        let a = Seeded::new(s).plan(&space).to_json();
        let b = Seeded::new(s).plan(&space).to_json();
        assert_eq!(
            a,
            b,
            "{}",
            replay_hint(s, "cargo test -p faultsim --lib seed")
        );
        let plan = Plan::from_json(&a, "json").expect("reparse");
        assert_eq!(plan.seed, Some(s), "the plan records its seed");
    }

    #[test]
    fn named_streams_are_independent_and_stable() {
        let s = seed();
        let g = Seeded::new(s);
        let before = g.bit_offsets("corrupt.file.0", 4096, 5);
        // Drawing from other streams does not shift this one.
        let _ = g.pick_indices("nodes", 16, 3);
        let _ = g.derive("data");
        assert_eq!(g.bit_offsets("corrupt.file.0", 4096, 5), before, "seed {s}");
        assert_eq!(before.len(), 5, "seed {s}");
        assert!(before.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
        assert!(before.iter().all(|&b| b < 4096 * 8));
        assert_ne!(g.derive("a"), g.derive("b"), "seed {s}");
        // A pinned value: the derivation itself must not change between
        // releases, or committed campaign seeds would replay differently.
        assert_eq!(Seeded::new(42).derive("data"), PINNED_42_DATA);
        assert_eq!(stream_id(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stream_id("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn small_inputs_do_not_panic() {
        let g = Seeded::new(7);
        assert!(g.bit_offsets("x", 0, 3).is_empty());
        assert_eq!(g.bit_offsets("x", 1, 100).len(), 8);
        assert_eq!(g.pick_indices("x", 3, 10), [0, 1, 2]);
        assert_eq!(g.pick::<u8>("x", &[]), None);
        let space = PlanSpace {
            topology: Topology {
                nodes: vec![],
                ranks_per_node: 0,
            },
            points: vec![],
            max_faults: 0,
            checkpoints: 0,
            runs: 0,
        };
        for s in 0..50 {
            let plan = Seeded::new(s).plan(&space);
            assert!(plan.validate(&space.topology).is_ok(), "seed {s}: {plan:?}");
        }
    }

    #[test]
    fn arbitrary_plans_validate_round_trip_and_reach_scr() {
        fn prop(plan: Plan) -> TestResult {
            let space = PlanSpace::default();
            if let Err(e) = plan.validate(&space.topology) {
                return TestResult::error(format!("invalid: {e}"));
            }
            let json = Plan::from_json(&plan.to_json(), "json");
            let toml = plan.to_toml().and_then(|t| Plan::from_toml(&t, "toml"));
            if json.as_ref() != Ok(&plan) || toml.as_ref() != Ok(&plan) {
                return TestResult::error(format!("round trip: {json:?} {toml:?}"));
            }
            for run in 1..=space.runs {
                if let Some(env) = plan.to_env(run) {
                    match crate::runtime::parse_plan(&env) {
                        Ok(p) if p == plan.fault_plan(run) => {}
                        other => return TestResult::error(format!("{env}: {other:?}")),
                    }
                }
            }
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(300)
            .quickcheck(prop as fn(Plan) -> TestResult);
    }

    #[test]
    fn random_plans_cover_every_kind() {
        let s = seed();
        let space = PlanSpace::default();
        let mut kinds = std::collections::BTreeSet::new();
        for i in 0..400 {
            for f in Seeded::new(s.wrapping_add(i)).plan(&space).faults {
                let v = serde_json::to_value(&f.what).expect("serialize");
                kinds.insert(v["kind"].as_str().unwrap_or_default().to_string());
            }
        }
        assert_eq!(kinds.len(), 8, "seed {s}: {kinds:?}");
    }
}
