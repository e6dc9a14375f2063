//! Checkpoint interval selection: the models (Young, Daly, the multi-level
//! model of Moody et al. SC10) and the estimators of their inputs from SCR
//! logs. Used by `scr interval` and by the adaptive `Need_checkpoint` policy.

pub mod adaptive;
pub mod estimate;
pub mod model;

use serde::Serialize;

use model::{
    daly_s, single_level_efficiency, young_s, Level, ModelError, MultiLevelModel, Pattern,
};

/// The multi-level optimum and its first-order comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultiLevelAdvice {
    /// The levels the model used.
    pub levels: Vec<Level>,
    /// Optimal pattern of the SC10 model.
    pub pattern: Pattern,
    /// Compute time between checkpoints of each level at the optimum.
    pub level_intervals_s: Vec<f64>,
    /// Level-1 checkpoints per level-2 one at the optimum.
    pub level1_per_level2: Option<u32>,
    /// Expected efficiency at the optimum.
    pub efficiency: f64,
    /// First-order pattern of Benoit et al. 2017.
    pub first_order_pattern: Pattern,
    /// Expected efficiency (SC10 model) of the first-order pattern.
    pub first_order_efficiency: f64,
}

/// What `scr interval` prints: the inputs, the single-level intervals with
/// their expected efficiency, the multi-level optimum, and values for SCR's
/// configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// Cost of a checkpoint that survives every failure (single level).
    pub checkpoint_cost_s: f64,
    /// Restart cost from it.
    pub restart_cost_s: f64,
    /// Mean time between failures (all severities).
    pub mtbf_s: f64,
    /// Young's interval `√(2δM)`.
    pub young_s: f64,
    /// Expected efficiency at Young's interval.
    pub young_efficiency: f64,
    /// Daly's higher-order interval.
    pub daly_s: f64,
    /// Expected efficiency at Daly's interval.
    pub daly_efficiency: f64,
    /// The exact single-level optimum of the model.
    pub optimum_s: f64,
    /// Expected efficiency at the exact optimum.
    pub optimum_efficiency: f64,
    /// Interval range within 1 % of the optimum efficiency.
    pub flat_region_s: (f64, f64),
    /// Multi-level optimum, when more than one level was given.
    pub multi_level: Option<MultiLevelAdvice>,
    /// Value for `SCR_CHECKPOINT_SECONDS` (the level-1 interval when
    /// multi-level, else Daly's), whole seconds.
    pub scr_checkpoint_seconds: u64,
    /// Value for `SCR_CHECKPOINT_OVERHEAD` (percent of run time spent
    /// checkpointing at that interval).
    pub scr_checkpoint_overhead_percent: f64,
}

/// Compute the advice for `levels` (cheapest first; one level for the
/// single-level case). The single-level figures use the top level's costs
/// and the total failure rate.
pub fn advise(levels: &[Level]) -> Result<Advice, ModelError> {
    let model = MultiLevelModel::new(levels.to_vec())?;
    let top = *levels.last().ok_or(ModelError::NoLevels)?;
    let rate = model.total_failure_rate_per_s();
    if rate <= 0.0 {
        return Err(ModelError::BadParameter {
            what: "total failure rate",
            value: rate,
        });
    }
    let mtbf = 1.0 / rate;
    let (cost, restart) = (top.checkpoint_cost_s, top.restart_cost_s);
    let single = MultiLevelModel::new(vec![Level {
        checkpoint_cost_s: cost,
        restart_cost_s: restart,
        failure_rate_per_s: rate,
    }])?;
    let (opt, opt_eff) = single.optimum()?;
    let flat = single.flat_region_s(&opt, 0.01)?;
    let young = young_s(cost, mtbf);
    let daly = daly_s(cost, mtbf);
    let multi = if levels.len() > 1 {
        let (pattern, efficiency) = model.optimum()?;
        let (first_order_pattern, first_order_efficiency) = model.benoit_first_order()?;
        Some(MultiLevelAdvice {
            levels: levels.to_vec(),
            level_intervals_s: pattern.level_intervals_s(),
            level1_per_level2: pattern.level1_per_level2(),
            pattern,
            efficiency,
            first_order_pattern,
            first_order_efficiency,
        })
    } else {
        None
    };
    let (interval, ckpt_cost) = match &multi {
        Some(m) => (m.pattern.interval_s, levels[0].checkpoint_cost_s),
        None => (daly, cost),
    };
    Ok(Advice {
        checkpoint_cost_s: cost,
        restart_cost_s: restart,
        mtbf_s: mtbf,
        young_s: young,
        young_efficiency: single_level_efficiency(young, cost, restart, mtbf),
        daly_s: daly,
        daly_efficiency: single_level_efficiency(daly, cost, restart, mtbf),
        optimum_s: opt.interval_s,
        optimum_efficiency: opt_eff,
        flat_region_s: flat,
        multi_level: multi,
        scr_checkpoint_seconds: interval.round().max(1.0) as u64,
        scr_checkpoint_overhead_percent: 100.0 * ckpt_cost / (interval + ckpt_cost),
    })
}

/// Figures given directly (`--cost`, `--mtbf`, `--restart`), overriding the
/// logs' estimates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    /// Checkpoint cost: makes the model single-level.
    pub checkpoint_cost_s: Option<f64>,
    /// Mean time between failures (all severities).
    pub mtbf_s: Option<f64>,
    /// Restart cost.
    pub restart_cost_s: Option<f64>,
}

/// Why the model's inputs could not be formed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Neither figures nor usable logs.
    #[error("give --cost and --mtbf, --level, or --log files (or --db databases) with checkpoint costs and runs")]
    Missing,
    /// A given figure is not a positive finite number.
    #[error("--{what} must be a positive number of seconds, got {value}")]
    NotPositive {
        /// Which figure.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// The logs show no failure, so only a lower bound on the MTBF.
    #[error("no failure in {exposure_s:.0} s of runs: the MTBF is above {lower_s:.0} s (95 %); give --mtbf to ask what if")]
    NoFailures {
        /// Time observed.
        exposure_s: f64,
        /// Lower confidence bound of the MTBF.
        lower_s: f64,
    },
    /// The logs hold no checkpoint or flush costs.
    #[error("the logs hold no checkpoint or flush costs: give --cost")]
    NoCosts,
}

fn positive(what: &'static str, value: Option<f64>) -> Result<Option<f64>, InputError> {
    match value {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(InputError::NotPositive { what, value: v }),
        other => Ok(other),
    }
}

/// The model's levels from log estimates and figures given directly.
///
/// With `--cost`: one level, the given cost. Otherwise from the logs: when
/// they show cache checkpoints, synchronous flushes and relaunches after
/// failures, two levels — level 1 the cache checkpoint (write + encode),
/// level 2 the cache checkpoint plus the flush — with the failure rate split
/// by the fraction of relaunches that fetched from the prefix; else one level
/// whose cost is the cache checkpoint plus the flush, whichever are logged.
/// Restart costs default to the logged restart time, else the checkpoint
/// cost (at least the level's cost for level 2).
pub fn levels_from(
    est: Option<&estimate::LogEstimates>,
    given: &Overrides,
) -> Result<Vec<Level>, InputError> {
    let cost = positive("cost", given.checkpoint_cost_s)?;
    let restart = positive("restart", given.restart_cost_s)?;
    let mtbf_s = match (
        positive("mtbf", given.mtbf_s)?,
        est.and_then(|e| e.mtbf.as_ref()),
    ) {
        (Some(m), _) => m,
        (None, Some(m)) => m.mtbf_s.ok_or(InputError::NoFailures {
            exposure_s: m.exposure_s,
            lower_s: m.mtbf_ci_s.0,
        })?,
        (None, None) => return Err(InputError::Missing),
    };
    let rate = 1.0 / mtbf_s;
    let restart = restart.or_else(|| est.and_then(|e| e.restart.as_ref()).map(|r| r.mean_s));
    if let Some(c) = cost {
        return Ok(vec![Level {
            checkpoint_cost_s: c,
            restart_cost_s: restart.unwrap_or(c),
            failure_rate_per_s: rate,
        }]);
    }
    let e = est.ok_or(InputError::Missing)?;
    let cache = e.cache_checkpoint.as_ref().map(|c| c.mean_s);
    let flush = e.sync_flush.as_ref().map(|c| c.mean_s);
    match (cache, flush, e.prefix_restart_fraction) {
        (Some(c), Some(f), Some(frac)) => {
            let r = restart.unwrap_or(c);
            Ok(vec![
                Level {
                    checkpoint_cost_s: c,
                    restart_cost_s: r,
                    failure_rate_per_s: rate * (1.0 - frac),
                },
                Level {
                    checkpoint_cost_s: c + f,
                    restart_cost_s: r.max(c + f),
                    failure_rate_per_s: rate * frac,
                },
            ])
        }
        (c, f, _) => {
            let cost = c.unwrap_or(0.0) + f.unwrap_or(0.0);
            if cost <= 0.0 {
                return Err(InputError::NoCosts);
            }
            Ok(vec![Level {
                checkpoint_cost_s: cost,
                restart_cost_s: restart.unwrap_or(cost),
                failure_rate_per_s: rate,
            }])
        }
    }
}

/// The single-level model curve: `(interval_s, expected efficiency)` at
/// `points` intervals spaced logarithmically over `[lo_s, hi_s]`.
pub fn efficiency_curve(
    checkpoint_cost_s: f64,
    restart_cost_s: f64,
    mtbf_s: f64,
    lo_s: f64,
    hi_s: f64,
    points: usize,
) -> Vec<(f64, f64)> {
    let n = points.max(2);
    (0..n)
        .map(|i| {
            let t = lo_s * (hi_s / lo_s).powf(i as f64 / (n - 1) as f64);
            (
                t,
                single_level_efficiency(t, checkpoint_cost_s, restart_cost_s, mtbf_s),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_for_coastal_two_level() {
        let levels = [
            Level {
                checkpoint_cost_s: 15.0,
                restart_cost_s: 15.0,
                failure_rate_per_s: 8.54e-7,
            },
            Level {
                checkpoint_cost_s: 1835.0,
                restart_cost_s: 1835.0,
                failure_rate_per_s: 2.01e-7,
            },
        ];
        let a = advise(&levels).unwrap();
        assert!((a.daly_s / 57_763.0 - 1.0).abs() < 0.02, "{a:?}");
        assert!(a.daly_efficiency <= a.optimum_efficiency + 1e-12);
        assert!(a.young_efficiency <= a.optimum_efficiency + 1e-12);
        assert!(
            a.flat_region_s.0 < a.daly_s && a.daly_s < a.flat_region_s.1,
            "Daly's interval is in the flat region"
        );
        let m = a.multi_level.as_ref().unwrap();
        assert!(m.efficiency > a.optimum_efficiency, "two levels beat one");
        assert_eq!(
            a.scr_checkpoint_seconds,
            m.pattern.interval_s.round() as u64
        );
        let json = serde_json::to_value(&a).unwrap();
        for key in ["checkpoint_cost_s", "mtbf_s", "young_s", "daly_s"] {
            assert!(
                json.get(key).is_some_and(|v| v.is_number()),
                "{key} in {json}"
            );
        }
        assert!(advise(&[Level {
            checkpoint_cost_s: 1.0,
            restart_cost_s: 1.0,
            failure_rate_per_s: 0.0
        }])
        .is_err());
    }
}
