//! Estimators from SCR logs: checkpoint, flush and restart costs, and the
//! mean time between failures by maximum likelihood with right-censoring.
//!
//! Runs. Our run loop logs `RUN_START` and `RUN_END` (with a note saying how
//! the run ended). A run ended by a failure counts as a failure; one that
//! finished, was halted, or whose allocation ended is right-censored: it
//! contributes its duration to the exposure but no failure (SCR's
//! `scr_ckpt_interval.py` counts every run start as a failure, which biases
//! the MTBF low). LLNL logs have only `START`: a run then lasts until the
//! next `START` of the same job or the job's last record; it counts as failed
//! when a later `START` of the same job follows without a `HALT` (the job
//! script relaunched it), and as censored otherwise.
//!
//! MTBF. With `r` failures in total exposure `T` (exponential failures), the
//! likelihood is `λ^r e^{−λT}`, the MLE `λ̂ = r/T`; the confidence interval
//! is the likelihood-ratio one, `{λ : 2(ℓ(λ̂) − ℓ(λ)) ≤ χ²₁(level)}`. With
//! enough failures a Weibull shape is fitted (censored MLE), to say whether
//! the failure rate rises or falls with run age.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};

use crate::log::Record;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RunEnd {
    /// A failure ended it (counts as a failure).
    Failed,
    /// It finished, halted, or its allocation ended (censored).
    Censored,
}

/// One run of a job: a launch of the application.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// Job id (`jobid=`), empty if absent.
    pub jobid: String,
    /// Start time, seconds since the epoch.
    pub start_s: f64,
    /// Duration.
    pub duration_s: f64,
    /// How it ended.
    pub end: RunEnd,
}

/// Whether a `RUN_END` note describes a failure. Notes containing `fail`,
/// `crash`, `killed` or `lost` are failures; `finished`, `halt`,
/// `allocation-ended`, `time-limit` and the rest are not.
pub fn note_is_failure(note: &str) -> bool {
    let n = note.to_ascii_lowercase();
    ["fail", "crash", "killed", "lost"]
        .iter()
        .any(|w| n.contains(w))
}

/// What the estimators need of one record, kept while a log streams past
/// ([`Digest`]): 24 bytes where a parsed [`Record`] with its strings takes
/// several hundred. Records of other kinds are not kept, and checkpoint
/// costs are summed as they come ([`CheckpointCost`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fact {
    time_s: f64,
    /// `secs=`, when `has_secs`.
    secs: f64,
    /// Index into [`Digest::jobs`].
    job: u32,
    kind: Kind,
    has_secs: bool,
}

impl Fact {
    fn secs(&self) -> Option<f64> {
        self.has_secs.then_some(self.secs)
    }
}

/// The records the estimators read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RunStart,
    /// `RUN_END`, and whether its note names a failure.
    RunEnd {
        failed: bool,
    },
    NodeFail,
    /// LLNL's `START`.
    Start,
    Halt,
    Checkpoint,
    /// `WRITE` or `ENCODE`: the pieces of a checkpoint's cost.
    CheckpointPart,
    RestartSuccess,
    /// `REBUILD_SUCCESS` or `REBUILD_END`.
    Rebuild,
    Fetch,
    FlushSync,
    FlushAsync,
}

impl Kind {
    fn of(r: &Record) -> Option<Kind> {
        let e = &r.entry;
        let name = e.kind.name();
        Some(if e.kind.is_transfer() {
            match name {
                "CHECKPOINT" => Kind::Checkpoint,
                "WRITE" | "ENCODE" => Kind::CheckpointPart,
                "FETCH" => Kind::Fetch,
                "FLUSH_SYNC" => Kind::FlushSync,
                "FLUSH_ASYNC" => Kind::FlushAsync,
                _ => return None,
            }
        } else {
            match name {
                "RUN_START" => Kind::RunStart,
                "RUN_END" => Kind::RunEnd {
                    failed: e.note.as_deref().is_some_and(note_is_failure),
                },
                "NODE_FAIL" => Kind::NodeFail,
                "START" => Kind::Start,
                "HALT" => Kind::Halt,
                "RESTART_SUCCESS" => Kind::RestartSuccess,
                "REBUILD_SUCCESS" | "REBUILD_END" => Kind::Rebuild,
                _ => return None,
            }
        })
    }
}

/// A checkpoint's cost records as they come in: for a run of consecutive
/// cost records of one job and dataset (a `WRITE` and its `ENCODE`), the
/// sums of their `CHECKPOINT` seconds and of their `WRITE`/`ENCODE`
/// seconds, in the order added (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
struct CheckpointCost {
    dset: u64,
    explicit: f64,
    parts: f64,
    job: u32,
    /// Whether any `CHECKPOINT` transfer is in `explicit`.
    has_explicit: bool,
}

/// A run as the estimators read it: its job's index, not its name
/// (24 bytes where a [`Run`] with its job's name takes about 90).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start_s: f64,
    duration_s: f64,
    job: u32,
    end: RunEnd,
}

impl Span {
    /// Its length and whether a failure ended it.
    fn life(&self) -> (f64, bool) {
        (self.duration_s, self.end == RunEnd::Failed)
    }
}

/// The estimators' view of any number of logs, fed one record at a time
/// ([`Digest::add`]; `scr interval` streams each log through it): per
/// record only a [`Fact`] of the kinds they read, except checkpoint costs,
/// summed per job and dataset as they come; per job its name (held once)
/// and the time of its last record of any kind (where a run without an
/// end ends).
#[derive(Debug, Default)]
pub struct Digest {
    /// Kept records, in the order added.
    facts: Vec<Fact>,
    /// Checkpoint costs, a run of records of one dataset in each.
    checkpoints: Vec<CheckpointCost>,
    /// Job ids (`jobid=`, empty when absent), in order of appearance.
    jobs: Vec<Arc<str>>,
    job_index: HashMap<Arc<str>, u32>,
    /// Per job: the latest time of any of its records.
    last_s: Vec<f64>,
    /// Per job: whether our run loop's `RUN_START` appears in it.
    ours: Vec<bool>,
}

impl Digest {
    /// The digest of `records`.
    pub fn of(records: &[Record]) -> Digest {
        let mut d = Digest::default();
        for r in records {
            d.add(r);
        }
        d
    }

    /// Take one record in.
    pub fn add(&mut self, r: &Record) {
        let name = r.jobid.as_deref().unwrap_or_default();
        let job = match self.job_index.get(name) {
            Some(&j) => j,
            None => {
                let j = u32::try_from(self.jobs.len()).expect("fewer than 2^32 jobs");
                let name: Arc<str> = name.into();
                self.jobs.push(name.clone());
                self.job_index.insert(name, j);
                self.last_s.push(r.time_s);
                self.ours.push(false);
                j
            }
        };
        let last = &mut self.last_s[job as usize];
        *last = last.max(r.time_s);
        let Some(kind) = Kind::of(r) else {
            return;
        };
        if kind == Kind::RunStart {
            self.ours[job as usize] = true;
        }
        let (secs, dset) = (r.entry.secs, r.entry.dset);
        if matches!(kind, Kind::Checkpoint | Kind::CheckpointPart) {
            // A cost needs both; summed in the order the records come.
            if let (Some(s), Some(d)) = (secs, dset) {
                let c = match self.checkpoints.last_mut() {
                    Some(c) if (c.job, c.dset) == (job, d) => c,
                    _ => {
                        self.checkpoints.push(CheckpointCost {
                            dset: d,
                            explicit: 0.0,
                            parts: 0.0,
                            job,
                            has_explicit: false,
                        });
                        self.checkpoints.last_mut().expect("just pushed")
                    }
                };
                if kind == Kind::Checkpoint {
                    c.explicit += s;
                    c.has_explicit = true;
                } else {
                    c.parts += s;
                }
            }
            return;
        }
        self.facts.push(Fact {
            time_s: r.time_s,
            secs: secs.unwrap_or_default(),
            job,
            kind,
            has_secs: secs.is_some(),
        });
    }

    /// Records kept (of the kinds the estimators read), besides the
    /// checkpoint costs summed per dataset.
    pub fn kept(&self) -> usize {
        self.facts.len()
    }

    /// Each job's rank in the order of its name.
    fn name_order(&self) -> Vec<u32> {
        let mut by_name: Vec<u32> = (0..self.jobs.len() as u32).collect();
        by_name.sort_by(|&a, &b| self.jobs[a as usize].cmp(&self.jobs[b as usize]));
        let mut rank = vec![0u32; self.jobs.len()];
        for (i, &j) in by_name.iter().enumerate() {
            rank[j as usize] = i as u32;
        }
        rank
    }

    /// The kept records' `secs` of the kinds `pred` accepts, in order.
    fn secs_of(&self, pred: impl Fn(Kind) -> bool) -> Vec<f64> {
        self.facts
            .iter()
            .filter(|f| pred(f.kind))
            .filter_map(Fact::secs)
            .collect()
    }

    /// The runs, per job in the order of the job's name (each job's
    /// records in time order, ties in the order added).
    pub fn runs(&self) -> Vec<Run> {
        self.spans()
            .into_iter()
            .map(|s| Run {
                jobid: self.jobs[s.job as usize].to_string(),
                start_s: s.start_s,
                duration_s: s.duration_s,
                end: s.end,
            })
            .collect()
    }

    /// [`Digest::runs`] with each run's job as its index.
    fn spans(&self) -> Vec<Span> {
        let rank = self.name_order();
        let mut order: Vec<u32> = (0..self.facts.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (fa, fb) = (&self.facts[a as usize], &self.facts[b as usize]);
            rank[fa.job as usize]
                .cmp(&rank[fb.job as usize])
                .then(fa.time_s.total_cmp(&fb.time_s))
        });
        let mut out = Vec::new();
        for group in
            order.chunk_by(|&a, &b| self.facts[a as usize].job == self.facts[b as usize].job)
        {
            let job = self.facts[group[0] as usize].job;
            let facts = group.iter().map(|&i| &self.facts[i as usize]);
            let j = job as usize;
            runs_of_job(job, self.ours[j], self.last_s[j], facts, &mut out);
        }
        out
    }
}

/// The runs of job `job` from its kept records in time order (`ours`: the
/// job has our run loop's `RUN_START`; `last_time`: its last record's time).
fn runs_of_job<'a>(
    job: u32,
    ours: bool,
    last_time: f64,
    facts: impl Iterator<Item = &'a Fact>,
    out: &mut Vec<Span>,
) {
    let mut push = |start: f64, end_s: f64, end: RunEnd| {
        out.push(Span {
            job,
            start_s: start,
            duration_s: end_s - start,
            end,
        });
    };
    let failed_if = |f: bool| if f { RunEnd::Failed } else { RunEnd::Censored };
    let mut open: Option<(f64, bool, bool)> = None; // start, node_fail seen, halt seen
    for f in facts {
        match (ours, f.kind) {
            (true, Kind::RunStart) => {
                if let Some((start, nf, _)) = open.take() {
                    // A run without RUN_END: the loop died with it.
                    push(start, f.time_s, failed_if(nf));
                }
                open = Some((f.time_s, false, false));
            }
            (true, Kind::RunEnd { failed }) => {
                if let Some((start, nf, _)) = open.take() {
                    push(start, f.time_s, failed_if(nf || failed));
                }
            }
            (false, Kind::Start) => {
                if let Some((start, nf, halted)) = open.take() {
                    push(start, f.time_s, failed_if(nf || !halted));
                }
                open = Some((f.time_s, false, false));
            }
            (_, Kind::NodeFail) => {
                if let Some(o) = open.as_mut() {
                    o.1 = true;
                }
            }
            (false, Kind::Halt) => {
                if let Some(o) = open.as_mut() {
                    o.2 = true;
                }
            }
            _ => {}
        }
    }
    if let Some((start, nf, _)) = open {
        push(start, last_time.max(start), failed_if(nf));
    }
}

/// Split records into runs, per job (records of a job in time order).
pub fn runs(records: &[Record]) -> Vec<Run> {
    Digest::of(records).runs()
}

/// Mean, spread and a confidence interval of a cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostStats {
    /// Number of samples.
    pub samples: usize,
    /// Sample mean.
    pub mean_s: f64,
    /// Sample standard deviation (0 for one sample).
    pub sd_s: f64,
    /// Student-t confidence interval of the mean (equal to the mean for one
    /// sample).
    pub mean_ci_s: (f64, f64),
}

impl CostStats {
    /// Statistics of `samples` (None when empty) with a `level` (e.g. 0.95)
    /// confidence interval of the mean.
    pub fn of(samples: &[f64], level: f64) -> Option<CostStats> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let half = match StudentsT::new(0.0, 1.0, (n.max(2) - 1) as f64) {
            Ok(t) if n > 1 => t.inverse_cdf(0.5 + level / 2.0) * sd / (n as f64).sqrt(),
            _ => 0.0,
        };
        Some(CostStats {
            samples: n,
            mean_s: mean,
            sd_s: sd,
            mean_ci_s: (mean - half, mean + half),
        })
    }
}

/// Exponential MTBF estimate with right-censoring.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MtbfEstimate {
    /// Failures observed.
    pub failures: u64,
    /// Runs that did not end in failure.
    pub censored: u64,
    /// Total time at risk.
    pub exposure_s: f64,
    /// Maximum-likelihood MTBF `T/r` (None with no failure: only the lower
    /// bound is known).
    pub mtbf_s: Option<f64>,
    /// Confidence interval of the MTBF (upper is infinite with no failure).
    pub mtbf_ci_s: (f64, f64),
    /// Confidence level of the interval.
    pub level: f64,
}

/// Likelihood-ratio interval for the rate of a Poisson process with `r`
/// events in exposure `t` (the censored exponential likelihood).
pub fn rate_interval_per_s(failures: u64, exposure_s: f64, level: f64) -> (f64, f64) {
    rate_interval_crit(failures, exposure_s, chi2_1(level))
}

/// The `level` quantile of χ²₁ (3.841 for 0.95): computed once per
/// estimate, not once per job (it is an iterative inversion).
fn chi2_1(level: f64) -> f64 {
    ChiSquared::new(1.0)
        .map(|c| c.inverse_cdf(level))
        .unwrap_or(3.841)
}

/// [`rate_interval_per_s`] with the χ²₁ quantile given.
fn rate_interval_crit(failures: u64, exposure_s: f64, crit: f64) -> (f64, f64) {
    let r = failures as f64;
    // Deviance D(λ) = 2(λT − r − r ln(λT/r)), with D = 2λT for r = 0.
    let dev = |lam: f64| {
        let m = lam * exposure_s;
        if failures == 0 {
            2.0 * m
        } else {
            2.0 * (m - r - r * (m / r).ln())
        }
    };
    let mle = r / exposure_s;
    let solve = |mut inside: f64, mut outside: f64| {
        for _ in 0..200 {
            let mid = 0.5 * (inside + outside);
            if mid == inside || mid == outside {
                // Adjacent floats: no later step changes either end.
                break;
            }
            if dev(mid) <= crit {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        0.5 * (inside + outside)
    };
    let lower = if failures == 0 { 0.0 } else { solve(mle, 0.0) };
    let mut hi = (r + 1.0) / exposure_s;
    for _ in 0..200 {
        if dev(hi) > crit {
            break;
        }
        hi *= 2.0;
    }
    (lower, solve(mle, hi))
}

/// MTBF from runs, with a `level` confidence interval.
pub fn mtbf(runs: &[Run], level: f64) -> Option<MtbfEstimate> {
    mtbf_crit(runs, level, chi2_1(level))
}

/// [`mtbf`] with the χ²₁ quantile of `level` given.
fn mtbf_crit(runs: &[Run], level: f64, crit: f64) -> Option<MtbfEstimate> {
    mtbf_of(
        runs.iter().map(|r| (r.duration_s, r.end == RunEnd::Failed)),
        level,
        crit,
    )
}

/// [`mtbf`] of runs given as their lengths and whether a failure ended
/// each, in order.
fn mtbf_of(
    lives: impl Iterator<Item = (f64, bool)>,
    level: f64,
    crit: f64,
) -> Option<MtbfEstimate> {
    let (mut runs, mut failures, mut exposure) = (0u64, 0u64, -0.0);
    for (d, failed) in lives {
        runs += 1;
        failures += u64::from(failed);
        exposure += d;
    }
    if runs == 0 || exposure <= 0.0 {
        return None;
    }
    let (lo, hi) = rate_interval_crit(failures, exposure, crit);
    Some(MtbfEstimate {
        failures,
        censored: runs - failures,
        exposure_s: exposure,
        mtbf_s: (failures > 0).then(|| exposure / failures as f64),
        mtbf_ci_s: (1.0 / hi, if lo > 0.0 { 1.0 / lo } else { f64::INFINITY }),
        level,
    })
}

/// Weibull fit (censored maximum likelihood) of run lifetimes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeibullFit {
    /// Shape `k` (1: exponential; < 1: failures come early in a run).
    pub shape: f64,
    /// Scale `η`.
    pub scale_s: f64,
    /// Failures it rests on.
    pub failures: u64,
}

/// Fewest failures for which [`weibull`] fits a shape.
pub const WEIBULL_MIN_FAILURES: u64 = 5;

/// Censored Weibull MLE of run lifetimes (each run starts a fresh life), or
/// None with fewer than [`WEIBULL_MIN_FAILURES`] failures.
pub fn weibull(runs: &[Run]) -> Option<WeibullFit> {
    weibull_of(runs.iter().map(|r| (r.duration_s, r.end == RunEnd::Failed)))
}

/// [`weibull`] of runs given as their lengths and whether a failure ended
/// each.
fn weibull_of(lives: impl Iterator<Item = (f64, bool)>) -> Option<WeibullFit> {
    let mut failures = 0u64;
    let times: Vec<(f64, bool)> = lives
        .inspect(|l| failures += u64::from(l.1))
        .filter(|l| l.0 > 0.0)
        .collect();
    if failures < WEIBULL_MIN_FAILURES {
        return None;
    }
    let r = times.iter().filter(|t| t.1).count() as f64;
    if r < WEIBULL_MIN_FAILURES as f64 {
        return None;
    }
    // Scale times for numerical range; the shape is scale-free.
    let tmax = times.iter().map(|t| t.0).fold(0.0, f64::max);
    let xs: Vec<(f64, bool)> = times.iter().map(|&(t, f)| (t / tmax, f)).collect();
    let mean_log_fail = xs.iter().filter(|x| x.1).map(|x| x.0.ln()).sum::<f64>() / r;
    // Profile score g(k) = Σ x^k ln x / Σ x^k − 1/k − mean ln x_fail: increasing in k.
    // ln x once per run, not once per step of the search.
    let logs: Vec<f64> = xs.iter().map(|x| x.0.ln()).collect();
    let g = |k: f64| {
        let (mut a, mut b) = (0.0, 0.0);
        for &lx in &logs {
            let p = (k * lx).exp();
            a += p * lx;
            b += p;
        }
        a / b - 1.0 / k - mean_log_fail
    };
    let (mut lo, mut hi) = (0.01, 100.0);
    if g(lo) > 0.0 || g(hi) < 0.0 {
        return None;
    }
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if mid == lo || mid == hi {
            break;
        }
        if g(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let k = (lo * hi).sqrt();
    let sum: f64 = xs.iter().map(|x| x.0.powf(k)).sum();
    let scale = (sum / r).powf(1.0 / k) * tmax;
    Some(WeibullFit {
        shape: k,
        scale_s: scale,
        failures,
    })
}

/// Everything the logs say about checkpointing costs and failures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogEstimates {
    /// Runs found.
    pub runs: usize,
    /// Write + encode of a checkpoint to the cache, per dataset (a
    /// `CHECKPOINT` transfer if logged, else the sum of `WRITE` and
    /// `ENCODE` transfers of that dataset).
    pub cache_checkpoint: Option<CostStats>,
    /// Synchronous flush to the prefix (`FLUSH_SYNC` transfers).
    pub sync_flush: Option<CostStats>,
    /// Asynchronous flush (`FLUSH_ASYNC` transfers).
    pub async_flush: Option<CostStats>,
    /// Restart (`RESTART_SUCCESS` secs if logged, else `FETCH` transfers
    /// plus the mean `REBUILD_SUCCESS` secs; `REBUILD_END` is read too).
    pub restart: Option<CostStats>,
    /// Exponential MTBF.
    pub mtbf: Option<MtbfEstimate>,
    /// Weibull fit, with enough failures.
    pub weibull: Option<WeibullFit>,
    /// Exponential MTBF per job id (across jobs is [`LogEstimates::mtbf`]).
    pub per_job: BTreeMap<String, MtbfEstimate>,
    /// Of the failed runs relaunched in the same job, the fraction whose
    /// relaunch fetched from the prefix (`FETCH` transfer): the share of
    /// failures the cache did not survive, by Laplace's rule
    /// `(fetched + 1) / (relaunched + 2)`. None without such relaunches.
    pub prefix_restart_fraction: Option<f64>,
}

/// Fraction of failed runs whose relaunch (same job) fetched from the prefix.
///
/// Linear in the records (plus a sort): the `FETCH` times of each job are
/// collected once and sorted, and each relaunch asks for one inside its run
/// with a binary search (scanning every record per relaunch made a log of
/// 40,000 runs take half a minute).
pub fn prefix_restart_fraction(records: &[Record], runs: &[Run]) -> Option<f64> {
    let d = Digest::of(records);
    // Each run's job as the digest numbers it (a job it never saw has none).
    let spans: Vec<Span> = runs
        .iter()
        .map(|r| Span {
            job: d
                .job_index
                .get(r.jobid.as_str())
                .copied()
                .unwrap_or(u32::MAX),
            start_s: r.start_s,
            duration_s: r.duration_s,
            end: r.end,
        })
        .collect();
    d.prefix_restart_fraction(&spans)
}

impl Digest {
    /// [`prefix_restart_fraction`] of the digested records.
    fn prefix_restart_fraction(&self, runs: &[Span]) -> Option<f64> {
        let mut fetches: HashMap<u32, Vec<f64>> = HashMap::new();
        for f in self.facts.iter().filter(|f| f.kind == Kind::Fetch) {
            fetches.entry(f.job).or_default().push(f.time_s);
        }
        for times in fetches.values_mut() {
            times.sort_by(f64::total_cmp);
        }
        let fetched_in = |job: u32, start: f64, end: f64| {
            fetches.get(&job).is_some_and(|times| {
                let i = times.partition_point(|&t| t < start);
                times.get(i).is_some_and(|&t| t <= end)
            })
        };
        let mut relaunched = 0usize;
        let mut fetched = 0usize;
        for pair in runs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.end != RunEnd::Failed || a.job != b.job {
                continue;
            }
            relaunched += 1;
            if fetched_in(b.job, b.start_s, b.start_s + b.duration_s) {
                fetched += 1;
            }
        }
        // Laplace's rule of succession: a handful of relaunches that all (or
        // none) fetched must not make the model declare a level useless.
        (relaunched > 0).then(|| (fetched as f64 + 1.0) / (relaunched as f64 + 2.0))
    }
}

/// Estimate costs and MTBF from records (one or more logs, any jobs).
pub fn estimate(records: &[Record], level: f64) -> LogEstimates {
    Digest::of(records).estimate(level)
}

impl Digest {
    /// Estimate costs and MTBF from the records digested so far.
    pub fn estimate(&self, level: f64) -> LogEstimates {
        // Cache checkpoint cost per (job, dataset), in the order of the
        // job's name, then the dataset.
        // A dataset's runs of records are added up in the order they came
        // (a stable sort keeps it): each sum as one running sum would be.
        let rank = self.name_order();
        let mut costs: Vec<(u32, &CheckpointCost)> = self
            .checkpoints
            .iter()
            .map(|c| (rank[c.job as usize], c))
            .collect();
        costs.sort_by_key(|&(r, c)| (r, c.dset));
        let ckpt: Vec<f64> = costs
            .chunk_by(|a, b| (a.0, a.1.dset) == (b.0, b.1.dset))
            .map(|runs| {
                let (mut explicit, mut parts, mut has) = (0.0, 0.0, false);
                for (_, c) in runs {
                    explicit += c.explicit;
                    parts += c.parts;
                    has |= c.has_explicit;
                }
                if has {
                    explicit
                } else {
                    parts
                }
            })
            .collect();
        let mut restart = self.secs_of(|k| k == Kind::RestartSuccess);
        if restart.is_empty() {
            let rebuild = self.secs_of(|k| k == Kind::Rebuild);
            let rebuild_mean = if rebuild.is_empty() {
                0.0
            } else {
                rebuild.iter().sum::<f64>() / rebuild.len() as f64
            };
            restart = self
                .secs_of(|k| k == Kind::Fetch)
                .into_iter()
                .map(|s| s + rebuild_mean)
                .collect();
        }
        let runs = self.spans();
        let crit = chi2_1(level);
        LogEstimates {
            runs: runs.len(),
            cache_checkpoint: CostStats::of(&ckpt, level),
            sync_flush: CostStats::of(&self.secs_of(|k| k == Kind::FlushSync), level),
            async_flush: CostStats::of(&self.secs_of(|k| k == Kind::FlushAsync), level),
            restart: CostStats::of(&restart, level),
            mtbf: mtbf_of(runs.iter().map(Span::life), level, crit),
            weibull: weibull_of(runs.iter().map(Span::life)),
            prefix_restart_fraction: self.prefix_restart_fraction(&runs),
            per_job: {
                // Runs come out of `spans` grouped by job: one slice per job.
                runs.chunk_by(|a, b| a.job == b.job)
                    .filter_map(|rs| {
                        mtbf_of(rs.iter().map(Span::life), level, crit)
                            .map(|m| (self.jobs[rs[0].job as usize].to_string(), m))
                    })
                    .collect()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::parse::parse_text;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::fmt::Write as _;
    use std::path::Path;

    fn stamp(t: f64) -> String {
        // Our style: Unix seconds are accepted as timestamps too, but write
        // ISO-8601 with a zone to exercise the full path.
        crate::civil::format_timestamp(t, 0)
    }

    /// A synthetic log of `n_runs` runs on a machine with exponential
    /// failures of mean `mtbf_s`, each run cut by an allocation limit.
    fn synthetic_log(seed: u64, n_runs: usize, mtbf_s: f64) -> String {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = String::new();
        let mut t = 1.7e9;
        for run in 0..n_runs {
            let limit = rng.gen_range(2.0..24.0) * 3600.0;
            let fail = -mtbf_s * (1.0 - rng.gen::<f64>()).ln();
            let job = run / 4;
            writeln!(out, "{}: host=n0, jobid={job}, event=RUN_START", stamp(t)).unwrap();
            writeln!(
                out,
                "{}: host=n0, jobid={job}, xfer=WRITE, dset={run}, secs={:.3}",
                stamp(t + 60.0),
                30.0 + rng.gen_range(-5.0..5.0)
            )
            .unwrap();
            writeln!(
                out,
                "{}: host=n0, jobid={job}, xfer=ENCODE, dset={run}, secs=2.5",
                stamp(t + 95.0)
            )
            .unwrap();
            let (dur, note) = if fail < limit {
                (fail, "failed: node lost")
            } else {
                (limit, "allocation-ended")
            };
            writeln!(
                out,
                "{}: host=n0, jobid={job}, event=RUN_END, note=\"{note}\"",
                stamp(t + dur)
            )
            .unwrap();
            t += dur + 600.0;
        }
        out
    }

    #[test]
    fn mtbf_interval_covers_truth_93_to_97_percent() {
        let truth_s = 10.0 * 3600.0;
        let trials = 1000u64;
        let mut covered = 0;
        for seed in 0..trials {
            let text = synthetic_log(seed, 30, truth_s);
            let parsed = parse_text(Path::new("synthetic"), &text, true)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let est = mtbf(&runs(&parsed.records), 0.95)
                .unwrap_or_else(|| panic!("seed {seed}: no estimate"));
            if est.mtbf_ci_s.0 <= truth_s && truth_s <= est.mtbf_ci_s.1 {
                covered += 1;
            }
        }
        let coverage = covered as f64 / trials as f64;
        eprintln!("MTBF 95% interval coverage: {coverage} over seeds 0..{trials}");
        assert!(
            (0.93..=0.97).contains(&coverage),
            "coverage {coverage} over seeds 0..{trials}"
        );
    }

    #[test]
    fn finished_and_allocation_ended_runs_are_censored_not_failures() {
        let text = synthetic_log(7, 200, 10.0 * 3600.0);
        let parsed = parse_text(Path::new("synthetic"), &text, true).unwrap();
        let rs = runs(&parsed.records);
        assert_eq!(rs.len(), 200);
        let est = mtbf(&rs, 0.95).unwrap();
        let naive = est.exposure_s / rs.len() as f64; // every start a failure
        assert_eq!(est.failures + est.censored, 200);
        assert!(est.censored > 0 && est.failures > 0);
        let m = est.mtbf_s.unwrap();
        assert!((m / 36_000.0 - 1.0).abs() < 0.2, "seed 7: MTBF {m}");
        assert!(
            naive < 0.8 * m,
            "counting every start as a failure biases low: {naive} vs {m}"
        );
        let e = estimate(&parsed.records, 0.95);
        let c = e.cache_checkpoint.unwrap();
        assert_eq!(c.samples, 200);
        assert!((c.mean_s - 32.5).abs() < 1.0, "write+encode {c:?}");
        assert!(c.mean_ci_s.0 < c.mean_s && c.mean_s < c.mean_ci_s.1);
    }

    #[test]
    fn restart_without_restart_events_is_fetch_plus_rebuild() {
        let text = "\
2026-11-22T00:00:00Z: jobid=1, event=REBUILD_SUCCESS, dset=3, secs=2
2026-11-22T00:00:01Z: jobid=1, xfer=FETCH, dset=3, secs=10
";
        let parsed = parse_text(Path::new("x"), text, true).unwrap();
        let est = estimate(&parsed.records, 0.95);
        assert_eq!(est.restart.map(|r| r.mean_s), Some(12.0));
    }

    #[test]
    fn llnl_start_only_logs() {
        let text = "\
2026-11-22T00:00:00: host=a, jobid=1, event=START, procs=8, nodes=2
2026-11-22T00:10:00: host=a, jobid=1, xfer=FLUSH_SYNC, dset=1, secs=40
2026-11-22T01:00:00: host=a, jobid=1, event=START, procs=8, nodes=2
2026-11-22T01:00:30: host=a, jobid=1, event=RESTART_SUCCESS, dset=1, secs=30
2026-11-22T03:00:00: host=a, jobid=1, event=HALT
2026-11-22T04:00:00: host=b, jobid=2, event=START, procs=8, nodes=2
2026-11-22T05:00:00: host=b, jobid=2, event=HALT
2026-11-22T05:00:01: host=b, jobid=2, event=START, procs=8, nodes=2
2026-11-22T06:00:00: host=b, jobid=2, xfer=FLUSH_ASYNC, dset=4, secs=100
";
        let parsed = parse_text(Path::new("llnl"), text, true).unwrap();
        let rs = runs(&parsed.records);
        let ends: Vec<RunEnd> = rs.iter().map(|r| r.end).collect();
        // Relaunched without HALT: failed; halted then relaunched: not; last runs: censored.
        assert_eq!(
            ends,
            vec![
                RunEnd::Failed,
                RunEnd::Censored,
                RunEnd::Censored,
                RunEnd::Censored
            ]
        );
        let e = estimate(&parsed.records, 0.95);
        let m = e.mtbf.unwrap();
        assert_eq!(m.failures, 1);
        assert_eq!(m.exposure_s, 3600.0 + 7200.0 + 3601.0 + 3599.0);
        assert_eq!(e.restart.unwrap().mean_s, 30.0);
        assert_eq!(e.sync_flush.unwrap().mean_s, 40.0);
        assert_eq!(e.async_flush.unwrap().mean_s, 100.0);
        assert!(e.weibull.is_none(), "too few failures for a shape");
        assert_eq!(
            e.prefix_restart_fraction,
            Some(1.0 / 3.0),
            "the one relaunch restarted from cache: (0 + 1) / (1 + 2)"
        );
    }

    #[test]
    fn weibull_shape_is_recovered_with_censoring() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (shape, scale) = (0.7, 20_000.0);
        let rs: Vec<Run> = (0..2000)
            .map(|_| {
                let u: f64 = rng.gen();
                let life = scale * (-(1.0 - u).ln()).powf(1.0 / shape);
                let limit = rng.gen_range(5_000.0..60_000.0);
                let (d, end) = if life < limit {
                    (life, RunEnd::Failed)
                } else {
                    (limit, RunEnd::Censored)
                };
                Run {
                    jobid: String::new(),
                    start_s: 0.0,
                    duration_s: d,
                    end,
                }
            })
            .collect();
        let w = weibull(&rs).expect("seed 11: fit");
        assert!((w.shape / shape - 1.0).abs() < 0.1, "seed 11: {w:?}");
        assert!((w.scale_s / scale - 1.0).abs() < 0.15, "seed 11: {w:?}");
    }

    #[test]
    fn a_fact_and_a_run_are_24_bytes_a_cost_32() {
        assert_eq!(std::mem::size_of::<Fact>(), 24);
        assert_eq!(std::mem::size_of::<Span>(), 24);
        assert_eq!(std::mem::size_of::<CheckpointCost>(), 32);
    }

    /// The digest keeps only the kinds the estimators read, but a run
    /// without an end still lasts to its job's last record of any kind;
    /// jobs come out in the order of their names, each job's records in
    /// time order whatever the order of the lines.
    #[test]
    fn a_digest_keeps_what_the_estimators_read_and_the_runs_of_every_record() {
        let text = "\
            500: host=a, jobid=9, event=START\n\
            100: host=a, jobid=10, event=RUN_START\n\
            150: host=a, jobid=10, xfer=WRITE, dset=1, secs=4\n\
            130: host=a, jobid=10, event=NODE_FAIL\n\
            200: host=a, jobid=10, event=RUN_END, note=finished\n\
            900: host=a, jobid=9, event=HALT\n\
            950: host=a, jobid=9, event=START\n\
            1200: host=a, jobid=9, event=COMPLETE_OUTPUT, dset=3\n\
            1300: host=a, jobid=9, xfer=DELETE, dset=3\n";
        let parsed = parse_text(Path::new("digest"), text, true).unwrap();
        let d = Digest::of(&parsed.records);
        // COMPLETE_OUTPUT and DELETE are not read by any estimator; the
        // WRITE is summed into its dataset's cost.
        assert_eq!((parsed.records.len(), d.kept()), (9, 6));
        let runs = d.runs();
        let got: Vec<(&str, f64, f64, RunEnd)> = runs
            .iter()
            .map(|r| (r.jobid.as_str(), r.start_s, r.duration_s, r.end))
            .collect();
        assert_eq!(
            got,
            vec![
                // Job "10" sorts before "9"; its NODE_FAIL line comes after
                // the WRITE but happened before the end: a failure.
                ("10", 100.0, 100.0, RunEnd::Failed),
                // LLNL's START, HALT, START: the first run halted.
                ("9", 500.0, 450.0, RunEnd::Censored),
                // The last run ends with the job's last record (a DELETE
                // the digest did not keep).
                ("9", 950.0, 350.0, RunEnd::Censored),
            ]
        );
        let e = d.estimate(0.95);
        assert_eq!(e.runs, 3);
        assert_eq!(e.cache_checkpoint.map(|c| c.mean_s), Some(4.0));
    }

    /// A dataset's cost records need not be adjacent: interleaved with
    /// another's they are still summed per dataset, and a `CHECKPOINT`
    /// transfer still wins over the parts wherever it comes.
    #[test]
    fn checkpoint_costs_are_summed_per_dataset_however_interleaved() {
        let text = "\
            10: jobid=1, xfer=WRITE, dset=1, secs=1.0\n\
            11: jobid=1, xfer=WRITE, dset=2, secs=2.0\n\
            12: jobid=2, xfer=WRITE, dset=1, secs=8.0\n\
            13: jobid=1, xfer=ENCODE, dset=1, secs=0.5\n\
            14: jobid=1, xfer=ENCODE, dset=2, secs=0.25\n\
            15: jobid=1, xfer=CHECKPOINT, dset=2, secs=5.0\n\
            16: jobid=1, xfer=WRITE, dset=1, secs=0.25\n";
        let parsed = parse_text(Path::new("costs"), text, true).unwrap();
        let c = estimate(&parsed.records, 0.95).cache_checkpoint.unwrap();
        // Job 1: dataset 1 is 1.75, dataset 2 its CHECKPOINT's 5; job 2: 8.
        assert_eq!(c.samples, 3);
        assert_eq!(c.mean_s, (1.75 + 5.0 + 8.0) / 3.0);
    }

    /// The sorted-search fraction equals a scan of every record per
    /// relaunch (the old quadratic form), fetches on run boundaries included.
    #[test]
    fn prefix_restart_fraction_matches_a_scan_of_every_record() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut text = String::new();
        let mut t = 1.0e9;
        for run in 0..400 {
            let job = run / 7 + usize::from(rng.gen_bool(0.1));
            writeln!(text, "{t}: jobid={job}, event=RUN_START").unwrap();
            let dur = rng.gen_range(100.0..1000.0_f64).round();
            match rng.gen_range(0..4) {
                0 => writeln!(text, "{t}: jobid={job}, xfer=FETCH, secs=1").unwrap(),
                1 => writeln!(text, "{}: jobid={job}, xfer=FETCH, secs=1", t + dur).unwrap(),
                2 => writeln!(text, "{}: jobid={}, xfer=FETCH, secs=1", t + 1.0, job + 1).unwrap(),
                _ => {}
            }
            let note = if rng.gen_bool(0.5) {
                "failed"
            } else {
                "finished"
            };
            writeln!(text, "{}: jobid={job}, event=RUN_END, note={note}", t + dur).unwrap();
            t += dur + 10.0;
        }
        let parsed = parse_text(Path::new("synthetic"), &text, true).unwrap();
        let records = &parsed.records;
        let rs = runs(records);
        let (mut relaunched, mut fetched) = (0usize, 0usize);
        for pair in rs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.end != RunEnd::Failed || a.jobid != b.jobid {
                continue;
            }
            relaunched += 1;
            let end = b.start_s + b.duration_s;
            fetched += usize::from(records.iter().any(|r| {
                r.is_transfer("FETCH")
                    && r.jobid.as_deref().unwrap_or_default() == b.jobid
                    && (b.start_s..=end).contains(&r.time_s)
            }));
        }
        assert!(
            relaunched > 50 && fetched > 10,
            "seed 5: {relaunched} {fetched}"
        );
        let want = (fetched as f64 + 1.0) / (relaunched as f64 + 2.0);
        assert_eq!(prefix_restart_fraction(records, &rs), Some(want));
    }

    #[test]
    fn no_failures_gives_lower_bound_only() {
        let rs = vec![Run {
            jobid: "j".into(),
            start_s: 0.0,
            duration_s: 1000.0,
            end: RunEnd::Censored,
        }];
        let m = mtbf(&rs, 0.95).unwrap();
        assert_eq!(m.mtbf_s, None);
        assert!(m.mtbf_ci_s.1.is_infinite());
        assert!(
            (m.mtbf_ci_s.0 - 1000.0 / 1.9207).abs() < 1.0,
            "{:?}",
            m.mtbf_ci_s
        );
        assert!(mtbf(&[], 0.95).is_none());
    }
}
