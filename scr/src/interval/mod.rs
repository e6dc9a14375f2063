//! Checkpoint interval selection: the models (Young, Daly, the multi-level
//! model of Moody et al. SC10) and the estimators of their inputs from SCR
//! logs. Used by `scr interval` and by the adaptive `Need_checkpoint` policy.

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
