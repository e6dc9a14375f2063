//! The adaptive `SCR_Need_checkpoint` policy (`SCR_CHECKPOINT_ADAPTIVE=1`,
//! beyond SCR): checkpoint at Daly's interval for this job's measured
//! checkpoint cost and the MTBF known so far, or, with several checkpoint
//! levels and a failure rate per level, at the level-1 interval that the
//! SC10 multi-level model finds best for the configured pattern.
//!
//! This module is the decision alone, from figures (so tests inject them and
//! the simulator in `faultsim` runs the very same code); `scr::api` feeds it
//! the job's measurements, its configuration and what earlier runs' logs say.
//!
//! MTBF ([`mtbf_estimate_s`]). Exposure `T` is the time at risk: the earlier
//! runs' durations in the logs of this prefix (runs ended by finishing, a
//! halt or the allocation's end are censored, as in `scr interval`) plus
//! this run's time so far; `r` is the failures among those runs. With
//! `SCR_MTBF = M₀` configured, `M₀` is a prior worth one failure:
//! `M = (T + M₀)/(r + 1)` — exactly `M₀` with no history, the censored
//! maximum-likelihood estimate `T/r` once failures dominate. Without it,
//! `M = T / max(r, 1)`: with no failure seen, one is assumed at the end of
//! the exposure (conservative: a new job on an unknown machine checkpoints
//! often at first and less as it survives).
//!
//! Cost. The mean cost of this run's completed checkpoints (start to
//! complete, as `SCR_CHECKPOINT_OVERHEAD` measures it); before the first,
//! the mean cache checkpoint cost in the earlier runs' logs; with neither,
//! the policy asks for a checkpoint now to measure one ([`Decision::Measure`],
//! as SCR's overhead policy does on its first call).
//!
//! Multi-level. The levels are the distinct `INTERVAL`s of the enabled CKPT
//! descriptors (SCR applies to checkpoint `n` the descriptor with the largest
//! `INTERVAL` dividing `n`, so `INTERVAL=1` and `INTERVAL=8` make a pattern of
//! 8 checkpoints, the last of level 2). The model needs each level's failure
//! rate: `SCR_MTBF` then lists one MTBF per level, cheapest first (the MTBF
//! of failures that need that level: survived by it and higher ones, by no
//! lower one; the form `scr interval --level COST:MTBF` takes). Their mix is
//! kept and their total scaled to the estimate `M` above. When the levels are
//! not nested (an `INTERVAL` that does not divide the next), when
//! `SCR_MTBF` does not give one value per level, or before every level's
//! cost has been measured in this run, the policy stays single-level (Daly
//! for the mean cost of all checkpoints) and says why in its note.

use super::model::{daly_s, Level, MultiLevelModel, Pattern};

/// How many failures the configured `SCR_MTBF` is worth as a prior.
pub const PRIOR_WEIGHT_FAILURES: f64 = 1.0;

/// A new interval is logged when it differs from the last logged one by
/// more than this fraction (or the decision changes kind).
pub const LOG_CHANGE_FRACTION: f64 = 0.2;

pub use crate::config::MtbfConfig;

/// What the logs of earlier runs say.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct History {
    /// Where it came from (for the note).
    pub source: String,
    /// Runs found.
    pub runs: usize,
    /// Runs ended by a failure.
    pub failures: u64,
    /// Their total duration.
    pub exposure_s: f64,
    /// Mean cache checkpoint cost and the number of checkpoints behind it.
    pub checkpoint_cost_s: Option<(f64, usize)>,
}

impl History {
    /// From log records (text log or database), with `scr interval`'s
    /// estimator.
    pub fn from_records(source: impl Into<String>, records: &[crate::log::Record]) -> History {
        let est = super::estimate::estimate(records, 0.95);
        History {
            source: source.into(),
            runs: est.runs,
            failures: est.mtbf.as_ref().map_or(0, |m| m.failures),
            exposure_s: est.mtbf.as_ref().map_or(0.0, |m| m.exposure_s),
            checkpoint_cost_s: est.cache_checkpoint.as_ref().map(|c| (c.mean_s, c.samples)),
        }
    }
}

/// The MTBF estimate: `(T + M₀)/(r + 1)` with a prior `M₀`, else
/// `T / max(r, 1)`; `None` with neither a prior nor any exposure.
pub fn mtbf_estimate_s(prior_s: Option<f64>, failures: u64, exposure_s: f64) -> Option<f64> {
    let t = exposure_s.max(0.0);
    match prior_s {
        Some(m0) => {
            Some((t + PRIOR_WEIGHT_FAILURES * m0) / (failures as f64 + PRIOR_WEIGHT_FAILURES))
        }
        None if t > 0.0 => Some(t / (failures.max(1) as f64)),
        None => None,
    }
}

/// Everything the policy decides from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// INTERVAL of each level: the distinct INTERVALs of the enabled CKPT
    /// descriptors, ascending (`[1]` for one level).
    pub level_intervals: &'a [u64],
    /// Costs of this run's completed checkpoints, per level.
    pub measured_s: &'a [Vec<f64>],
    /// Earlier runs' logs.
    pub history: Option<&'a History>,
    /// `SCR_MTBF`.
    pub mtbf: Option<&'a MtbfConfig>,
    /// This run's time so far (exposure without a failure).
    pub run_elapsed_s: f64,
    /// The last level is the flush to the prefix every this many
    /// checkpoints (SCR_FLUSH), above the CKPT descriptors' levels.
    pub flush_every: Option<u64>,
}

/// The chosen interval with what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    /// Compute time between checkpoints.
    pub interval_s: f64,
    /// The cost it was computed for (level 1's when multi-level).
    pub cost_s: f64,
    /// The MTBF (all failures).
    pub mtbf_s: f64,
    /// The configured pattern, when the multi-level model chose.
    pub pattern: Option<Pattern>,
    /// Expected efficiency at this interval (the model's).
    pub efficiency: f64,
    /// Why: inputs and their sources, for the log.
    pub note: String,
}

/// The policy's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No checkpoint cost known: checkpoint now to measure one.
    Measure {
        /// Why.
        note: String,
    },
    /// No MTBF (no `SCR_MTBF`, no exposure yet): no interval; the policy
    /// answers yes, as SCR does when no policy is set.
    NoMtbf {
        /// Why.
        note: String,
    },
    /// An interval.
    Interval(Chosen),
}

impl Decision {
    /// Whether to checkpoint `since_s` seconds after the last checkpoint
    /// ended (or the run began).
    pub fn need(&self, since_s: f64) -> bool {
        match self {
            Decision::Measure { .. } | Decision::NoMtbf { .. } => true,
            Decision::Interval(c) => since_s >= c.interval_s,
        }
    }

    /// The note to log.
    pub fn note(&self) -> &str {
        match self {
            Decision::Measure { note } | Decision::NoMtbf { note } => note,
            Decision::Interval(c) => &c.note,
        }
    }

    /// The interval, when there is one.
    pub fn interval_s(&self) -> Option<f64> {
        match self {
            Decision::Interval(c) => Some(c.interval_s),
            _ => None,
        }
    }

    /// Whether this decision is worth a new log entry after `previous`.
    pub fn differs_from(&self, previous: Option<&Decision>) -> bool {
        match (previous, self) {
            (Some(Decision::Interval(a)), Decision::Interval(b)) => {
                (b.interval_s / a.interval_s - 1.0).abs() > LOG_CHANGE_FRACTION
                    || a.pattern.is_some() != b.pattern.is_some()
            }
            (Some(a), b) => std::mem::discriminant(a) != std::mem::discriminant(b),
            (None, _) => true,
        }
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Why the multi-level model cannot be used for the configured levels, so
/// the adaptive interval falls back to one level (said in its log note).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MultiLevelError {
    /// A level's INTERVAL is not a multiple of the one below it.
    #[error("INTERVAL {interval} is not a multiple of {below}")]
    NotNested {
        /// The level's INTERVAL.
        interval: u64,
        /// The INTERVAL of the level below.
        below: u64,
    },
    /// Two INTERVALs are so far apart that the pattern count overflows.
    #[error("INTERVAL {interval} too large")]
    TooLarge {
        /// The level's INTERVAL.
        interval: u64,
    },
    /// SCR_MTBF gives a number of values other than one per level.
    #[error("SCR_MTBF gives {given} values for {levels} levels")]
    MtbfCount {
        /// Values given.
        given: usize,
        /// Levels configured.
        levels: usize,
    },
    /// SCR_MTBF gives one total, not one value per level.
    #[error("SCR_MTBF gives no MTBF per level for the {levels} levels")]
    NoMtbfPerLevel {
        /// Levels configured.
        levels: usize,
    },
    /// A level has not been measured in this run yet.
    #[error("level {level} (INTERVAL {interval}) has no measured cost yet")]
    NotMeasured {
        /// The level, from 1.
        level: usize,
        /// Its INTERVAL.
        interval: u64,
    },
    /// Fewer measured levels than configured ones.
    #[error("not every level has a measured cost yet")]
    FewerMeasured,
    /// The model refused the figures.
    #[error(transparent)]
    Model(#[from] super::model::ModelError),
}

/// Counts of the SC10 pattern for nested INTERVALs (`[1, 4, 16]` → `[4, 4]`),
/// or why they are not nested.
pub fn pattern_counts(level_intervals: &[u64]) -> Result<Vec<u32>, MultiLevelError> {
    level_intervals
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0].max(1), w[1]);
            if b > a && b.is_multiple_of(a) {
                u32::try_from(b / a).map_err(|_| MultiLevelError::TooLarge { interval: b })
            } else {
                Err(MultiLevelError::NotNested {
                    interval: b,
                    below: a,
                })
            }
        })
        .collect()
}

/// Decide from `inp`.
pub fn decide(inp: &Inputs<'_>) -> Decision {
    let hist = inp.history;
    let all: Vec<f64> = inp.measured_s.iter().flatten().copied().collect();
    let (cost, cost_why) = match (mean(&all), hist.and_then(|h| h.checkpoint_cost_s)) {
        (Some(c), _) => (
            c,
            format!("cost {c:.3} s (mean of {} checkpoints this run)", all.len()),
        ),
        (None, Some((c, n))) => (
            c,
            format!(
                "cost {c:.3} s (mean of {n} checkpoints in {})",
                hist.map_or("", |h| h.source.as_str())
            ),
        ),
        (None, None) => {
            return Decision::Measure {
                note: "adaptive: checkpoint now to measure its cost (none measured in this run or logged before)".into(),
            }
        }
    };
    let (failures, past_s) = hist.map_or((0, 0.0), |h| (h.failures, h.exposure_s));
    let exposure = past_s + inp.run_elapsed_s.max(0.0);
    let prior = inp.mtbf.map(MtbfConfig::total_s);
    let Some(mtbf) = mtbf_estimate_s(prior, failures, exposure) else {
        return Decision::NoMtbf {
            note: "adaptive: no MTBF yet (set SCR_MTBF, or let runs be logged): checkpoint now"
                .into(),
        };
    };
    let mut mtbf_why = match prior {
        Some(m0) => match inp.mtbf {
            Some(MtbfConfig::PerLevel(v)) => {
                let each: Vec<String> = v.iter().map(|m| format!("{m:.0}")).collect();
                format!(
                    "SCR_MTBF {} s per level, {m0:.0} s in all, as a prior worth one failure",
                    each.join(",")
                )
            }
            _ => format!("SCR_MTBF {m0:.0} s as a prior worth one failure"),
        },
        None if failures == 0 => "no failure seen: one assumed".to_string(),
        None => "censored maximum likelihood".to_string(),
    };
    match hist {
        Some(h) if h.runs > 0 => mtbf_why.push_str(&format!(
            ", {failures} failures in {past_s:.0} s of {} earlier runs in {}",
            h.runs, h.source
        )),
        _ => mtbf_why.push_str(", no earlier runs logged"),
    }
    mtbf_why.push_str(&format!(
        ", {:.0} s of this run",
        inp.run_elapsed_s.max(0.0)
    ));

    let multi = multi_level(inp, mtbf);
    match multi {
        Ok(Some(c)) => Decision::Interval(Chosen {
            note: format!(
                "adaptive: multi-level (SC10 model): level 1 every {:.0} s, pattern of {} checkpoints (INTERVALs {:?}{}), expected efficiency {:.2} %, for {} and MTBF {mtbf:.0} s ({mtbf_why})",
                c.interval_s,
                c.pattern.as_ref().map_or(1, Pattern::len),
                inp.level_intervals,
                inp.flush_every.map_or(String::new(), |n| format!(
                    "; the last, the flush to the prefix every {n} checkpoints"
                )),
                100.0 * c.efficiency,
                c.note,
            ),
            ..c
        }),
        other => {
            let single_why = match other {
                Err(why) => format!("; single level because {why}"),
                _ => String::new(),
            };
            let t = daly_s(cost, mtbf).max(1e-3);
            let eff = super::model::single_level_efficiency(t, cost, cost, mtbf);
            Decision::Interval(Chosen {
                interval_s: t,
                cost_s: cost,
                mtbf_s: mtbf,
                pattern: None,
                efficiency: eff,
                note: format!(
                    "adaptive: Daly interval {t:.0} s (expected efficiency {:.2} %) for {cost_why} and MTBF {mtbf:.0} s ({mtbf_why}){single_why}",
                    100.0 * eff
                ),
            })
        }
    }
}

/// The multi-level choice, `Ok(None)` with one level, `Err(why not)` when
/// several levels are configured but the model cannot be used.
fn multi_level(inp: &Inputs<'_>, mtbf: f64) -> Result<Option<Chosen>, MultiLevelError> {
    let n = inp.level_intervals.len();
    if n < 2 {
        return Ok(None);
    }
    let counts = pattern_counts(inp.level_intervals)?;
    let per_level = match inp.mtbf {
        Some(MtbfConfig::PerLevel(v)) if v.len() == n => v,
        Some(MtbfConfig::PerLevel(v)) => {
            return Err(MultiLevelError::MtbfCount {
                given: v.len(),
                levels: n,
            })
        }
        _ => return Err(MultiLevelError::NoMtbfPerLevel { levels: n }),
    };
    let mut costs = Vec::with_capacity(n);
    for (k, m) in inp.measured_s.iter().enumerate().take(n) {
        match mean(m) {
            Some(c) => costs.push(c),
            None => {
                return Err(MultiLevelError::NotMeasured {
                    level: k + 1,
                    interval: inp.level_intervals[k],
                })
            }
        }
    }
    if costs.len() < n {
        return Err(MultiLevelError::FewerMeasured);
    }
    // The configured mix of severities, scaled to the estimated total.
    let share: Vec<f64> = per_level.iter().map(|m| 1.0 / m).collect();
    let total: f64 = share.iter().sum();
    // A restart is taken to cost its level's checkpoint (a fetch, for the
    // flush level, is not measured here): the model's best interval does
    // not depend on restart costs, only its predicted efficiency does
    // (`model::tests::a_restart_cost_other_than_the_checkpoint_s_moves_the_efficiency_not_the_interval`).
    let levels: Vec<Level> = costs
        .iter()
        .zip(&share)
        .map(|(&c, &s)| Level {
            checkpoint_cost_s: c,
            restart_cost_s: c,
            failure_rate_per_s: s / total / mtbf,
        })
        .collect();
    let model = MultiLevelModel::new(levels)?;
    let (t, eff) = model.best_interval(&counts)?;
    let costs_text: Vec<String> = costs.iter().map(|c| format!("{c:.3}")).collect();
    Ok(Some(Chosen {
        interval_s: t,
        cost_s: costs[0],
        mtbf_s: mtbf,
        pattern: Some(Pattern {
            interval_s: t,
            counts,
        }),
        efficiency: eff,
        note: format!(
            "costs [{}] s per level (means this run), failure mix from SCR_MTBF",
            costs_text.join(", ")
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(failures: u64, exposure_s: f64, cost: Option<f64>) -> History {
        History {
            source: "/p/.scr/log".into(),
            runs: failures as usize + 1,
            failures,
            exposure_s,
            checkpoint_cost_s: cost.map(|c| (c, 4)),
        }
    }

    fn inputs<'a>(
        levels: &'a [u64],
        measured: &'a [Vec<f64>],
        history: Option<&'a History>,
        mtbf: Option<&'a MtbfConfig>,
        elapsed: f64,
    ) -> Inputs<'a> {
        Inputs {
            level_intervals: levels,
            measured_s: measured,
            history,
            mtbf,
            run_elapsed_s: elapsed,
            flush_every: None,
        }
    }

    #[test]
    fn mtbf_parsing() {
        assert_eq!(MtbfConfig::parse("86400"), Some(MtbfConfig::Total(86400.0)));
        assert_eq!(
            MtbfConfig::parse(" 1000, 4000 "),
            Some(MtbfConfig::PerLevel(vec![1000.0, 4000.0]))
        );
        assert_eq!(MtbfConfig::parse("1000 4000").unwrap().total_s(), 800.0);
        for bad in ["", "0", "-5", "abc", "1e400", "100,x", "nan"] {
            assert_eq!(MtbfConfig::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn mtbf_estimate_uses_the_prior_and_censored_exposure() {
        // No history: the prior itself.
        assert_eq!(mtbf_estimate_s(Some(86_400.0), 0, 0.0), Some(86_400.0));
        // Prior worth one failure, 4 failures in 100 000 s: (1e5 + 86400)/5.
        assert_eq!(
            mtbf_estimate_s(Some(86_400.0), 4, 100_000.0),
            Some(37_280.0)
        );
        // No prior: maximum likelihood, one failure assumed when none seen.
        assert_eq!(mtbf_estimate_s(None, 4, 100_000.0), Some(25_000.0));
        assert_eq!(mtbf_estimate_s(None, 0, 3_600.0), Some(3_600.0));
        assert_eq!(mtbf_estimate_s(None, 0, 0.0), None);
    }

    #[test]
    fn the_first_call_without_any_cost_measures() {
        let cfg = MtbfConfig::Total(86_400.0);
        let d = decide(&inputs(&[1], &[vec![]], None, Some(&cfg), 10.0));
        assert!(matches!(d, Decision::Measure { .. }), "{d:?}");
        assert!(d.need(0.0));
        assert!(d.note().contains("measure"));
    }

    #[test]
    fn daly_from_the_measured_cost_and_the_configured_mtbf() {
        let cfg = MtbfConfig::Total(86_400.0);
        let measured = [vec![10.0, 30.0]];
        let d = decide(&inputs(&[1], &measured, None, Some(&cfg), 0.0));
        let want = daly_s(20.0, 86_400.0);
        assert_eq!(d.interval_s(), Some(want));
        assert!(!d.need(want - 1.0) && d.need(want));
        let note = d.note();
        for part in [
            &format!("Daly interval {want:.0} s"),
            "cost 20.000 s (mean of 2 checkpoints this run)",
            "MTBF 86400 s",
            "SCR_MTBF 86400 s as a prior worth one failure",
            "no earlier runs logged",
        ] {
            assert!(note.contains(part), "{part:?} not in {note:?}");
        }
    }

    #[test]
    fn history_supplies_cost_and_failures() {
        // Before any checkpoint this run, the logged mean cost is used; the
        // MTBF is learned: 3 failures in 30 000 s plus 600 s of this run.
        let h = hist(3, 30_000.0, Some(12.0));
        let d = decide(&inputs(&[1], &[vec![]], Some(&h), None, 600.0));
        let m = 30_600.0 / 3.0;
        assert_eq!(d.interval_s(), Some(daly_s(12.0, m)));
        let note = d.note();
        assert!(
            note.contains("mean of 4 checkpoints in /p/.scr/log"),
            "{note}"
        );
        assert!(note.contains("censored maximum likelihood"), "{note}");
        assert!(
            note.contains("3 failures in 30000 s of 4 earlier runs"),
            "{note}"
        );
        // A measurement this run takes over from the log's cost.
        let measured = [vec![50.0]];
        let d2 = decide(&inputs(&[1], &measured, Some(&h), None, 600.0));
        assert_eq!(d2.interval_s(), Some(daly_s(50.0, m)));
        // More failures on record: a shorter interval.
        let worse = hist(30, 30_000.0, Some(12.0));
        let d3 = decide(&inputs(&[1], &[vec![]], Some(&worse), None, 600.0));
        assert!(d3.interval_s().unwrap() < d.interval_s().unwrap());
    }

    #[test]
    fn without_prior_or_exposure_there_is_no_mtbf() {
        let measured = [vec![5.0]];
        let d = decide(&inputs(&[1], &measured, None, None, 0.0));
        assert!(matches!(d, Decision::NoMtbf { .. }), "{d:?}");
        assert!(d.need(0.0));
        // A surviving run grows its own interval.
        let a = decide(&inputs(&[1], &measured, None, None, 600.0));
        let b = decide(&inputs(&[1], &measured, None, None, 6_000.0));
        assert!(b.interval_s().unwrap() > a.interval_s().unwrap());
        assert!(
            a.note().contains("no failure seen: one assumed"),
            "{}",
            a.note()
        );
    }

    #[test]
    fn multi_level_uses_the_sc10_model_for_the_configured_pattern() {
        // Coastal: 15 s and 1835 s; failures needing each level at
        // 8.54e-7/s and 2.01e-7/s; INTERVAL 1 and 23 (22 level-1 per level-2).
        let cfg = MtbfConfig::PerLevel(vec![1.0 / 8.54e-7, 1.0 / 2.01e-7]);
        let measured = [vec![15.0], vec![1835.0]];
        let d = decide(&inputs(&[1, 23], &measured, None, Some(&cfg), 0.0));
        let Decision::Interval(c) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(c.pattern.as_ref().unwrap().counts, vec![23]);
        // The published optimum: about 5,800 s and 96.8 %.
        assert!((c.interval_s / 5_800.0 - 1.0).abs() < 0.02, "{c:?}");
        assert!((c.efficiency - 0.968).abs() < 0.002, "{c:?}");
        assert!(c.note.contains("multi-level"), "{}", c.note);
        // The single-level choice on the same figures is worse.
        let single = decide(&inputs(&[1], &[vec![1835.0]], None, Some(&cfg), 0.0));
        let Decision::Interval(s) = single else {
            panic!()
        };
        assert!(c.efficiency > s.efficiency + 0.02, "{c:?} vs {s:?}");
    }

    #[test]
    fn multi_level_falls_back_to_one_level_and_says_why() {
        let per = MtbfConfig::PerLevel(vec![20_000.0, 200_000.0]);
        let total = MtbfConfig::Total(20_000.0);
        let both = [vec![10.0], vec![100.0]];
        let first_only = [vec![10.0], vec![]];
        type Case<'a> = (&'a [u64], &'a [Vec<f64>], &'a MtbfConfig, &'a str);
        let cases: [Case; 4] = [
            (
                &[1, 3],
                &first_only,
                &per,
                "level 2 (INTERVAL 3) has no measured cost yet",
            ),
            (&[1, 3], &both, &total, "SCR_MTBF gives no MTBF per level"),
            (&[2, 3], &both, &per, "INTERVAL 3 is not a multiple of 2"),
            (
                &[1, 4, 8],
                &both,
                &per,
                "SCR_MTBF gives 2 values for 3 levels",
            ),
        ];
        for (levels, measured, cfg, why) in cases {
            let d = decide(&inputs(levels, measured, None, Some(cfg), 0.0));
            let Decision::Interval(c) = &d else {
                panic!("{d:?}")
            };
            assert!(c.pattern.is_none());
            assert!(c.note.contains(why), "{why:?} not in {:?}", c.note);
            let all: Vec<f64> = measured.iter().flatten().copied().collect();
            let cost = all.iter().sum::<f64>() / all.len() as f64;
            assert_eq!(c.interval_s, daly_s(cost, cfg.total_s()));
        }
        assert_eq!(pattern_counts(&[1, 4, 16]), Ok(vec![4, 4]));
        assert_eq!(pattern_counts(&[1]), Ok(vec![]));
    }

    #[test]
    fn only_real_changes_are_logged_again() {
        let cfg = MtbfConfig::Total(10_000.0);
        let m1 = [vec![10.0]];
        let a = decide(&inputs(&[1], &m1, None, Some(&cfg), 0.0));
        assert!(a.differs_from(None));
        let m2 = [vec![10.0, 11.0]];
        let b = decide(&inputs(&[1], &m2, None, Some(&cfg), 0.0));
        assert!(!b.differs_from(Some(&a)), "a 2.5 % change is not news");
        let m3 = [vec![10.0, 50.0]];
        let c = decide(&inputs(&[1], &m3, None, Some(&cfg), 0.0));
        assert!(c.differs_from(Some(&a)));
        let measure = decide(&inputs(&[1], &[vec![]], None, Some(&cfg), 0.0));
        assert!(a.differs_from(Some(&measure)));
    }
}
