//! Monte Carlo simulator of a job running under failures, checkpointing at
//! one or more levels. It checks the closed-form models of
//! [`scr::interval::model`] and compares checkpoint policies where no closed
//! form exists (Weibull failures, intervals that adapt to observed failures).
//!
//! The job computes `work_s` seconds of useful work in segments of `t`
//! seconds, each followed by a checkpoint; checkpoints are of level 1 except
//! every `counts[0]`-th (level 2), and so on, as in the SC10 model. Failures
//! come from one process per severity: a failure of severity `s` is survived
//! by checkpoints of level `≥ s` only, so it rolls the job back to the last
//! one of those (or to the start) and costs level `s`'s restart time.
//! Failures may strike during computation, checkpoints and restarts; one of
//! higher severity during a restart escalates it. After a failure its
//! process is renewed (the failed node is replaced): the next failure of that
//! severity is drawn afresh from the failure time.
//!
//! Every random choice comes from one `u64` seed (ChaCha8); sample `i` of a
//! run uses its own stream derived from the seed, so results do not depend
//! on the order samples are computed in.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scr::interval::adaptive::{decide, Decision, History, Inputs, MtbfConfig};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A failure inter-arrival distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum FailureDist {
    /// Exponential with mean `mtbf_s`.
    Exponential {
        /// Mean time between failures.
        mtbf_s: f64,
    },
    /// Weibull with shape `k` and scale `η` (shape 1 is exponential).
    Weibull {
        /// Shape `k` (< 1: decreasing hazard, failures early after a renewal).
        shape: f64,
        /// Scale `η`.
        scale_s: f64,
    },
}

impl FailureDist {
    /// Mean of the distribution.
    pub fn mean_s(&self) -> f64 {
        match *self {
            FailureDist::Exponential { mtbf_s } => mtbf_s,
            FailureDist::Weibull { shape, scale_s } => {
                scale_s * statrs::function::gamma::gamma(1.0 + 1.0 / shape)
            }
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        // 1 - U lies in (0, 1], so its logarithm is finite.
        let e = -(1.0 - rng.gen::<f64>()).ln();
        match *self {
            FailureDist::Exponential { mtbf_s } => mtbf_s * e,
            FailureDist::Weibull { shape, scale_s } => scale_s * e.powf(1.0 / shape),
        }
    }

    fn check(&self) -> Result<(), SimError> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        match *self {
            FailureDist::Exponential { mtbf_s } if ok(mtbf_s) => Ok(()),
            FailureDist::Weibull { shape, scale_s } if ok(shape) && ok(scale_s) => Ok(()),
            _ => Err(SimError::BadParameter(
                "failure distribution parameters must be finite and positive",
            )),
        }
    }
}

/// One checkpoint level of the simulated system.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimLevel {
    /// Time to write a checkpoint of this level.
    pub checkpoint_cost_s: f64,
    /// Time to restart (or rebuild and restart) from this level.
    pub restart_cost_s: f64,
    /// Failures that need this level to recover (None: there are none).
    pub failures: Option<FailureDist>,
}

/// When to checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Policy {
    /// A fixed interval and pattern, like SCR_CHECKPOINT_SECONDS.
    Fixed {
        /// Compute between checkpoints.
        interval_s: f64,
        /// Level counts as in [`scr::interval::model::Pattern`].
        counts: Vec<u32>,
    },
    /// The library's adaptive policy (`SCR_CHECKPOINT_ADAPTIVE=1`), single
    /// level: every checkpoint decision is [`scr::interval::adaptive::decide`]
    /// given the failures and time at risk seen so far (the state carries
    /// across the jobs of a campaign, as the logs in a prefix do), the time
    /// since the last failure (this run's time), the checkpoint cost once one
    /// has been measured, and `prior_mtbf_s` as `SCR_MTBF`. The first job of
    /// a campaign checkpoints at once to measure the cost (the library does
    /// when neither this run nor the logs have one). Between checkpoints it
    /// computes for the segment `s` the library would end with its answer at
    /// `s`: the fixed point of `s = interval(exposure + s)`, because
    /// Need_checkpoint re-decides as the run's exposure grows.
    Adaptive {
        /// `SCR_MTBF`, if configured.
        prior_mtbf_s: Option<f64>,
    },
    /// The same policy with the job's levels as CKPT descriptors
    /// (`INTERVAL` 1, `counts[0]`, `counts[0] × counts[1]`, …: checkpoints
    /// take levels as [`Policy::Fixed`]'s pattern does), deciding as the
    /// library does with several levels: the SC10 multi-level model's
    /// level-1 interval for the pattern once every level's cost has been
    /// measured and `SCR_MTBF` gives one MTBF per level (their mix kept,
    /// their total scaled to the MTBF learned so far); Daly for the mean
    /// cost of the checkpoints so far before that, or always when
    /// `SCR_MTBF` gives one figure or none.
    AdaptiveLevels {
        /// Level counts as in [`scr::interval::model::Pattern`].
        counts: Vec<u32>,
        /// `SCR_MTBF`: none, one figure, or one per level cheapest first.
        prior_mtbf_s: Vec<f64>,
    },
}

/// Running state of a policy: what it has learned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyState {
    /// The policy.
    pub policy: Policy,
    /// Time observed at risk.
    pub exposure_s: f64,
    /// Failures observed.
    pub failures: u64,
    /// Whether a checkpoint has completed (its cost is known).
    pub cost_measured: bool,
    /// Per level (cheapest first): whether a checkpoint of that level has
    /// completed in the current run, a job or its relaunch after a
    /// failure (the library measures each CKPT level's cost in the run;
    /// empty until the first job starts).
    pub level_measured: Vec<bool>,
    /// Sum and number of the checkpoint costs so far, every level: the
    /// mean cache checkpoint cost the logs give a new run
    /// ([`Policy::AdaptiveLevels`]).
    pub logged_costs: (f64, usize),
}

impl PolicyState {
    /// A policy that has seen nothing yet.
    pub fn new(policy: Policy) -> Self {
        PolicyState {
            policy,
            exposure_s: 0.0,
            failures: 0,
            cost_measured: false,
            level_measured: Vec::new(),
            logged_costs: (0.0, 0),
        }
    }

    /// Current MTBF estimate (adaptive policy), or None.
    pub fn mtbf_estimate_s(&self) -> Option<f64> {
        let prior = match &self.policy {
            Policy::Adaptive { prior_mtbf_s } => *prior_mtbf_s,
            Policy::AdaptiveLevels { prior_mtbf_s, .. } => {
                mtbf_config(prior_mtbf_s).map(|m| m.total_s())
            }
            Policy::Fixed { .. } => return None,
        };
        scr::interval::adaptive::mtbf_estimate_s(prior, self.failures, self.exposure_s)
    }

    /// The library's decision with `run_s` seconds since the last failure,
    /// for levels costing `costs` (cheapest first).
    fn adaptive_decision(&self, costs: &[f64], run_s: f64) -> Decision {
        let (sum, n) = self.logged_costs;
        let history = History {
            source: "simulated campaign".into(),
            runs: self.failures as usize + 1,
            failures: self.failures,
            exposure_s: self.exposure_s,
            checkpoint_cost_s: match self.policy {
                Policy::AdaptiveLevels { .. } if n > 0 => Some((sum / n as f64, n)),
                _ => None,
            },
        };
        let (level_intervals, measured, mtbf) = match &self.policy {
            Policy::AdaptiveLevels {
                counts,
                prior_mtbf_s,
            } => {
                let mut intervals = vec![1u64];
                for &c in counts {
                    let last = *intervals.last().expect("level 1");
                    intervals.push(last.saturating_mul(u64::from(c)));
                }
                let measured: Vec<Vec<f64>> = costs
                    .iter()
                    .zip(&self.level_measured)
                    .map(|(&c, &m)| if m { vec![c] } else { Vec::new() })
                    .collect();
                (intervals, measured, mtbf_config(prior_mtbf_s))
            }
            Policy::Adaptive { prior_mtbf_s } => {
                let cost = *costs.last().expect("one level");
                let measured = vec![if self.cost_measured {
                    vec![cost]
                } else {
                    Vec::new()
                }];
                (vec![1], measured, prior_mtbf_s.map(MtbfConfig::Total))
            }
            Policy::Fixed { .. } => unreachable!("a fixed policy decides nothing"),
        };
        decide(&Inputs {
            level_intervals: &level_intervals,
            measured_s: &measured,
            history: Some(&history),
            mtbf: mtbf.as_ref(),
            run_elapsed_s: run_s,
            flush_every: None,
        })
    }

    /// Compute time until the next checkpoint, `run_s` seconds after the
    /// last failure (or the job's start), for levels costing `costs`.
    fn interval_s(&self, costs: &[f64], run_s: f64) -> f64 {
        if let Policy::Fixed { interval_s, .. } = &self.policy {
            return *interval_s;
        }
        let at = |s: f64| match self.adaptive_decision(costs, run_s + s) {
            Decision::Interval(c) => c.interval_s,
            Decision::Measure { .. } | Decision::NoMtbf { .. } => 0.0,
        };
        // Need_checkpoint says yes at the first s >= interval(s): the
        // interval grows slowly with s (a square root), so the iteration
        // from interval(0) converges from below.
        let mut s = at(0.0);
        for _ in 0..50 {
            let next = at(s);
            if (next - s).abs() <= 1e-9 * s.max(1.0) {
                break;
            }
            s = next;
        }
        // Once a cost is known, a decision that says "now" again (no MTBF
        // yet: no SCR_MTBF and no time at risk) is taken as the
        // application's next call, a second later.
        if self.cost_measured {
            s.max(1.0)
        } else {
            s
        }
    }
}

/// `SCR_MTBF` as the library parses it: none, one figure, or one per level.
fn mtbf_config(values: &[f64]) -> Option<MtbfConfig> {
    match values {
        [] => None,
        [one] => Some(MtbfConfig::Total(*one)),
        many => Some(MtbfConfig::PerLevel(many.to_vec())),
    }
}

/// Errors from the simulator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A parameter is out of range.
    #[error("bad simulation parameter: {0}")]
    BadParameter(&'static str),
    /// The job did not finish within the event bound: failures come faster
    /// than it can make progress.
    #[error("job made no progress within {0} events: failures outpace checkpoints (lengthen the MTBF or shorten costs)")]
    NoProgress(u64),
}

/// A job to simulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Useful computation to finish.
    pub work_s: f64,
    /// Levels, cheapest and least resilient first.
    pub levels: Vec<SimLevel>,
    /// Whether the last segment also ends with a checkpoint (Daly's model
    /// assumes it does).
    pub checkpoint_at_end: bool,
}

/// The outcome of one simulated job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JobOutcome {
    /// Wall-clock time to finish.
    pub wall_s: f64,
    /// Failures suffered.
    pub failures: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
}

/// Bound on simulated events per job.
pub const MAX_EVENTS: u64 = 50_000_000;

fn validate(job: &Job, state: &PolicyState) -> Result<(), SimError> {
    if job.levels.is_empty() {
        return Err(SimError::BadParameter("at least one level"));
    }
    if !(job.work_s.is_finite() && job.work_s > 0.0) {
        return Err(SimError::BadParameter("work must be finite and positive"));
    }
    for l in &job.levels {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(l.checkpoint_cost_s) || !ok(l.restart_cost_s) {
            return Err(SimError::BadParameter(
                "costs must be finite and non-negative",
            ));
        }
        if let Some(f) = &l.failures {
            f.check()?;
        }
    }
    match &state.policy {
        Policy::Fixed { interval_s, counts } => {
            if !(interval_s.is_finite() && *interval_s > 0.0) {
                return Err(SimError::BadParameter(
                    "interval must be finite and positive",
                ));
            }
            if counts.len() + 1 != job.levels.len() || counts.contains(&0) {
                return Err(SimError::BadParameter(
                    "one count >= 1 per level above the first",
                ));
            }
        }
        Policy::Adaptive { prior_mtbf_s } => {
            if prior_mtbf_s.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
                return Err(SimError::BadParameter(
                    "adaptive prior must be finite and positive",
                ));
            }
            if job.levels.len() != 1 {
                return Err(SimError::BadParameter(
                    "the adaptive policy is single-level",
                ));
            }
        }
        Policy::AdaptiveLevels {
            counts,
            prior_mtbf_s,
        } => {
            if counts.len() + 1 != job.levels.len() || counts.iter().any(|&c| c < 2) {
                return Err(SimError::BadParameter(
                    "one count >= 2 per level above the first (nested CKPT INTERVALs)",
                ));
            }
            if prior_mtbf_s.iter().any(|m| !(m.is_finite() && *m > 0.0)) {
                return Err(SimError::BadParameter(
                    "adaptive prior must be finite and positive",
                ));
            }
            if prior_mtbf_s.len() > 1 && prior_mtbf_s.len() != job.levels.len() {
                return Err(SimError::BadParameter(
                    "SCR_MTBF gives one figure or one per level",
                ));
            }
        }
    }
    Ok(())
}

/// Simulate one job; the policy state learns from its failures.
pub fn run_job(
    job: &Job,
    state: &mut PolicyState,
    rng: &mut ChaCha8Rng,
) -> Result<JobOutcome, SimError> {
    validate(job, state)?;
    let nl = job.levels.len();
    let counts: Vec<u32> = match &state.policy {
        Policy::Fixed { counts, .. } | Policy::AdaptiveLevels { counts, .. } => counts.clone(),
        Policy::Adaptive { .. } => Vec::new(),
    };
    // Each run measures its levels' costs afresh.
    state.level_measured = vec![false; nl];
    let mut block = vec![1u64; nl];
    for s in 1..nl {
        block[s] = block[s - 1].saturating_mul(u64::from(counts[s - 1]));
    }
    let costs: Vec<f64> = job.levels.iter().map(|l| l.checkpoint_cost_s).collect();
    let mut next_fail: Vec<f64> = job
        .levels
        .iter()
        .map(|l| l.failures.map_or(f64::INFINITY, |f| f.sample(rng)))
        .collect();
    let mut now = 0.0f64;
    let mut work = 0.0f64;
    let mut count = 0u64; // checkpoints since the start, rolled back with the work
    let mut saved_work = vec![0.0f64; nl];
    let mut saved_count = vec![0u64; nl];
    let mut out = JobOutcome {
        wall_s: 0.0,
        failures: 0,
        checkpoints: 0,
    };
    let mut since_failure_s = 0.0f64;
    // Returns the severity and time of the next failure.
    let earliest = |next_fail: &[f64]| {
        let mut s = 0;
        for k in 1..next_fail.len() {
            if next_fail[k] < next_fail[s] {
                s = k;
            }
        }
        (s, next_fail[s])
    };
    let mut events = 0u64;
    while work < job.work_s {
        events += 1;
        if events > MAX_EVENTS {
            return Err(SimError::NoProgress(MAX_EVENTS));
        }
        let seg = state
            .interval_s(&costs, since_failure_s)
            .min(job.work_s - work);
        let last = work + seg >= job.work_s;
        let ckpt_level = if last && !job.checkpoint_at_end {
            None
        } else {
            Some(
                (0..nl)
                    .rev()
                    .find(|&k| (count + 1).is_multiple_of(block[k]))
                    .unwrap_or(0),
            )
        };
        let d = seg + ckpt_level.map_or(0.0, |k| job.levels[k].checkpoint_cost_s);
        let (mut sev, t_fail) = earliest(&next_fail);
        debug_assert!(sev < nl);
        if t_fail >= now + d {
            now += d;
            since_failure_s += d;
            work += seg;
            if let Some(k) = ckpt_level {
                count += 1;
                out.checkpoints += 1;
                state.cost_measured = true;
                state.level_measured[k] = true;
                state.logged_costs.0 += costs[k];
                state.logged_costs.1 += 1;
                for j in 0..=k {
                    saved_work[j] = work;
                    saved_count[j] = count;
                }
            }
            continue;
        }
        // A failure, then restarts until one completes.
        since_failure_s += t_fail - now;
        now = t_fail;
        let mut restart_level = sev;
        loop {
            events += 1;
            if events > MAX_EVENTS {
                return Err(SimError::NoProgress(MAX_EVENTS));
            }
            out.failures += 1;
            state.failures += 1;
            // The relaunched run measures its levels' costs afresh.
            state.level_measured.fill(false);
            state.exposure_s += since_failure_s;
            since_failure_s = 0.0;
            let dist = job.levels[sev].failures.ok_or(SimError::BadParameter(
                "failure of a level without failures",
            ))?;
            next_fail[sev] = now + dist.sample(rng);
            // A failure during a restart escalates it if more severe, else
            // the same restart begins again.
            restart_level = restart_level.max(sev);
            work = saved_work[restart_level];
            count = saved_count[restart_level];
            for j in 0..restart_level {
                saved_work[j] = saved_work[restart_level];
                saved_count[j] = saved_count[restart_level];
            }
            let r = job.levels[restart_level].restart_cost_s;
            let (s2, t2) = earliest(&next_fail);
            if t2 >= now + r {
                now += r;
                since_failure_s += r;
                break;
            }
            since_failure_s += t2 - now;
            now = t2;
            sev = s2;
        }
    }
    state.exposure_s += since_failure_s;
    out.wall_s = now;
    assert!(out.wall_s >= job.work_s, "wall time covers the work");
    Ok(out)
}

/// A mean with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanCi {
    /// Sample mean.
    pub mean: f64,
    /// Lower end of the 95 % Student-t interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Samples.
    pub samples: usize,
}

impl MeanCi {
    /// Mean and 95 % interval of `xs` (at least one sample).
    pub fn of(xs: &[f64]) -> MeanCi {
        let n = xs.len().max(1);
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let q = StudentsT::new(0.0, 1.0, (n.max(2) - 1) as f64)
            .map(|t| t.inverse_cdf(0.975))
            .unwrap_or(1.96);
        let half = q * (var / n as f64).sqrt();
        MeanCi {
            mean,
            lo: mean - half,
            hi: mean + half,
            samples: xs.len(),
        }
    }
}

/// Result of many simulated jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Wall time per job.
    pub wall_s: MeanCi,
    /// Efficiency (work / wall time), mean of the per-job ratio.
    pub efficiency: MeanCi,
    /// Work / mean wall time: the long-run efficiency the models predict.
    pub efficiency_of_means: f64,
    /// Mean failures per job.
    pub failures_per_job: f64,
}

/// The seed of sample `i` of a run seeded `seed` (SplitMix64 step).
pub fn sample_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Simulate `samples` independent jobs (each with a fresh policy state).
pub fn simulate(
    job: &Job,
    policy: &Policy,
    samples: usize,
    seed: u64,
) -> Result<Summary, SimError> {
    if samples == 0 {
        return Err(SimError::BadParameter("at least one sample"));
    }
    let mut walls = Vec::with_capacity(samples);
    let mut fails = 0u64;
    for i in 0..samples {
        let mut rng = ChaCha8Rng::seed_from_u64(sample_seed(seed, i as u64));
        let mut state = PolicyState::new(policy.clone());
        let o = run_job(job, &mut state, &mut rng)?;
        walls.push(o.wall_s);
        fails += o.failures;
    }
    let effs: Vec<f64> = walls.iter().map(|w| job.work_s / w).collect();
    let wall = MeanCi::of(&walls);
    Ok(Summary {
        efficiency_of_means: job.work_s / wall.mean,
        wall_s: wall,
        efficiency: MeanCi::of(&effs),
        failures_per_job: fails as f64 / samples as f64,
    })
}

/// A campaign: `jobs` jobs run one after another on one system, the policy
/// state (what it learned) carried from job to job. Returns the overall
/// efficiency (total work / total wall time) and the final state.
pub fn campaign(
    job: &Job,
    policy: &Policy,
    jobs: usize,
    seed: u64,
) -> Result<(f64, PolicyState), SimError> {
    let mut state = PolicyState::new(policy.clone());
    let mut wall = 0.0;
    for i in 0..jobs {
        let mut rng = ChaCha8Rng::seed_from_u64(sample_seed(seed, i as u64));
        wall += run_job(job, &mut state, &mut rng)?.wall_s;
    }
    Ok((
        job.work_s * jobs as f64 / wall.max(f64::MIN_POSITIVE),
        state,
    ))
}
