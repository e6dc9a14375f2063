//! Closed-form and Markov models of checkpointing under failures: Young's and
//! Daly's optimal intervals, Daly's expected wall time, and the multi-level
//! model of Moody et al. (SC10) with the first-order multi-level optimum of
//! Benoit et al. (IEEE TC 2017) for comparison.
//!
//! The multi-level model: levels `1..=L`, cheapest first. A failure of
//! severity `s` (rate `λ_s`) destroys every checkpoint below level `s`, so the
//! job rolls back to the most recent checkpoint of level `≥ s` and pays that
//! level's restart cost `r_s`. Failures may strike during compute, checkpoint
//! and restart alike; a failure during a restart of level `s` restarts it, or
//! escalates to a restart of a higher level if its severity is higher. The
//! job computes `t` seconds between checkpoints; every checkpoint is of level
//! 1 except that every `n_1`-th is of level 2, every `n_1·n_2`-th of level 3,
//! and so on (the pattern of the SC10 paper). The expected time of one whole
//! pattern is solved exactly (exponential failures) by one backward pass; for
//! one level it reduces to Daly's `M·e^{R/M}·(e^{(t+δ)/M} − 1)`.

use serde::Serialize;

/// Young's first-order optimum interval `√(2δM)` (Young 1974).
pub fn young_s(checkpoint_cost_s: f64, mtbf_s: f64) -> f64 {
    (2.0 * checkpoint_cost_s * mtbf_s).sqrt()
}

/// Daly's higher-order optimum (Daly 2006, eq. 37):
/// `√(2δM)·[1 + ⅓√(δ/2M) + ⅑(δ/2M)] − δ` for `δ < 2M`, else `M`.
pub fn daly_s(checkpoint_cost_s: f64, mtbf_s: f64) -> f64 {
    let d = checkpoint_cost_s;
    let m = mtbf_s;
    if d < 2.0 * m {
        let x = d / (2.0 * m);
        (2.0 * d * m).sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - d
    } else {
        m
    }
}

/// Daly's expected wall time to finish `work_s` of computation checkpointed
/// every `interval_s` (every segment, the last included, ends with a
/// checkpoint), exponential failures with mean `mtbf_s`, restart `restart_s`:
/// `M·e^{R/M}·(e^{(t+δ)/M} − 1)·W/t`.
pub fn daly_expected_wall_s(
    work_s: f64,
    interval_s: f64,
    checkpoint_cost_s: f64,
    restart_s: f64,
    mtbf_s: f64,
) -> f64 {
    let m = mtbf_s;
    m * (restart_s / m).exp() * ((interval_s + checkpoint_cost_s) / m).exp_m1() * work_s
        / interval_s
}

/// Expected efficiency (useful work / wall time) of a single-level scheme,
/// from [`daly_expected_wall_s`].
pub fn single_level_efficiency(
    interval_s: f64,
    checkpoint_cost_s: f64,
    restart_s: f64,
    mtbf_s: f64,
) -> f64 {
    interval_s / daly_expected_wall_s(interval_s, interval_s, checkpoint_cost_s, restart_s, mtbf_s)
}

/// One level of a multi-level checkpointing system.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    /// Time to write one checkpoint of this level (for level 1: write and
    /// encode to the cache; for the top level: also the flush).
    pub checkpoint_cost_s: f64,
    /// Time to restart from a checkpoint of this level.
    pub restart_cost_s: f64,
    /// Rate of failures that need this level to recover: they are survived by
    /// this level and every higher one, and by no lower one.
    pub failure_rate_per_s: f64,
}

/// Errors from the multi-level model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No levels were given.
    #[error("the model needs at least one level")]
    NoLevels,
    /// A cost, rate or interval is negative, NaN or infinite.
    #[error("{what} must be a finite non-negative number, got {value}")]
    BadParameter {
        /// Which parameter.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// The pattern's counts do not match the levels (one count per level
    /// above the first, each at least 1), or the pattern is too long.
    #[error(
        "pattern needs {levels_minus_one} counts, each >= 1, at most {max} checkpoints per pattern"
    )]
    BadPattern {
        /// Number of counts expected.
        levels_minus_one: usize,
        /// The longest pattern evaluated.
        max: u64,
    },
}

/// A checkpoint pattern: compute `interval_s` between checkpoints; `counts[k]`
/// checkpoints of level `≤ k+1` per checkpoint of level `k+2` (so for two
/// levels `counts[0]` is the SC10 paper's "level-1 checkpoints per level-2
/// one" plus the level-2 one itself: a pattern of `counts[0]` checkpoints).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pattern {
    /// Compute time between consecutive checkpoints.
    pub interval_s: f64,
    /// Checkpoints of lower level per checkpoint of the next level (one
    /// entry per level above the first).
    pub counts: Vec<u32>,
}

impl Pattern {
    /// Number of checkpoints (of any level) in one whole pattern.
    pub fn len(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).product()
    }

    /// Whether the pattern is empty (never: every pattern holds at least one
    /// checkpoint); present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Compute time between checkpoints of each level (level 1 first).
    pub fn level_intervals_s(&self) -> Vec<f64> {
        let mut out = vec![self.interval_s];
        let mut block = 1.0;
        for &c in &self.counts {
            block *= f64::from(c);
            out.push(self.interval_s * block);
        }
        out
    }

    /// Number of level-1 checkpoints between consecutive level-2 ones (the
    /// SC10 paper's figure), or `None` for a single-level pattern.
    pub fn level1_per_level2(&self) -> Option<u32> {
        self.counts.first().map(|&c| c - 1)
    }
}

/// Longest pattern (checkpoints of any level) the model evaluates.
pub const MAX_PATTERN_LEN: u64 = 1 << 20;

/// The multi-level model of Moody et al. (SC10).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultiLevelModel {
    levels: Vec<Level>,
}

/// Affine function `constant + Σ_s coef[s]·T(start of the level-s block)`.
#[derive(Clone)]
struct Affine {
    constant: f64,
    coef: Vec<f64>,
}

impl Affine {
    fn zero(levels: usize) -> Self {
        Affine {
            constant: 0.0,
            coef: vec![0.0; levels],
        }
    }
    fn add_scaled(&mut self, other: &Affine, k: f64) {
        self.constant += k * other.constant;
        for (a, b) in self.coef.iter_mut().zip(&other.coef) {
            *a += k * b;
        }
    }
    fn scale(&mut self, k: f64) {
        self.constant *= k;
        for a in &mut self.coef {
            *a *= k;
        }
    }
}

/// Probabilities of an attempt of duration `d`: completes, expected time
/// spent (until completion or the first failure), and per-severity failure.
fn attempt(d: f64, rates: &[f64], total_rate: f64) -> (f64, f64, Vec<f64>) {
    if total_rate <= 0.0 {
        return (1.0, d, vec![0.0; rates.len()]);
    }
    let p = (-total_rate * d).exp();
    let fail = -(-total_rate * d).exp_m1();
    let spent = fail / total_rate;
    let q = rates.iter().map(|r| fail * r / total_rate).collect();
    (p, spent, q)
}

impl MultiLevelModel {
    /// A model from its levels (cheapest and least resilient first).
    pub fn new(levels: Vec<Level>) -> Result<Self, ModelError> {
        if levels.is_empty() {
            return Err(ModelError::NoLevels);
        }
        for l in &levels {
            for (what, value) in [
                ("checkpoint cost", l.checkpoint_cost_s),
                ("restart cost", l.restart_cost_s),
                ("failure rate", l.failure_rate_per_s),
            ] {
                if !value.is_finite() || value < 0.0 {
                    return Err(ModelError::BadParameter { what, value });
                }
            }
        }
        Ok(MultiLevelModel { levels })
    }

    /// The levels.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Total failure rate (all severities).
    pub fn total_failure_rate_per_s(&self) -> f64 {
        self.levels.iter().map(|l| l.failure_rate_per_s).sum()
    }

    fn check_pattern(&self, pattern: &Pattern) -> Result<(), ModelError> {
        let bad = ModelError::BadPattern {
            levels_minus_one: self.levels.len() - 1,
            max: MAX_PATTERN_LEN,
        };
        if pattern.counts.len() + 1 != self.levels.len() || pattern.counts.contains(&0) {
            return Err(bad);
        }
        let mut len: u64 = 1;
        for &c in &pattern.counts {
            len = len.saturating_mul(u64::from(c));
        }
        if len > MAX_PATTERN_LEN {
            return Err(bad);
        }
        if !pattern.interval_s.is_finite() || pattern.interval_s <= 0.0 {
            return Err(ModelError::BadParameter {
                what: "interval",
                value: pattern.interval_s,
            });
        }
        Ok(())
    }

    /// Expected wall time of one whole pattern (its compute plus checkpoint
    /// costs plus expected losses and restarts).
    pub fn expected_pattern_time_s(&self, pattern: &Pattern) -> Result<f64, ModelError> {
        self.check_pattern(pattern)?;
        let nl = self.levels.len();
        let rates: Vec<f64> = self.levels.iter().map(|l| l.failure_rate_per_s).collect();
        let total: f64 = rates.iter().sum();
        // block[s]: checkpoints per level-(s+1) block (level 1: one).
        let mut block = vec![1u64; nl];
        for s in 1..nl {
            block[s] = block[s - 1] * u64::from(pattern.counts[s - 1]);
        }
        let n = block[nl - 1];
        // Restart attempts do not depend on the position: precompute them.
        let restart: Vec<(f64, f64, Vec<f64>)> = self
            .levels
            .iter()
            .map(|l| attempt(l.restart_cost_s, &rates, total))
            .collect();
        // next: T(j+1) as an affine function of T(block starts of segment j+1)
        // that differ from j+1 itself (which equal those of segment j).
        let mut next = Affine::zero(nl);
        for j in (1..=n).rev() {
            // Level of the checkpoint at the end of segment j.
            let level = (0..nl).rev().find(|&s| j % block[s] == 0).unwrap_or(0);
            let d = pattern.interval_s + self.levels[level].checkpoint_cost_s;
            let (p, spent, q) = attempt(d, &rates, total);
            // Restart states X_s (resuming at the level-s block start), top down.
            let mut x: Vec<Affine> = vec![Affine::zero(nl); nl];
            for s in (0..nl).rev() {
                let (pr, spent_r, qr) = &restart[s];
                let mut a = Affine::zero(nl);
                a.constant = *spent_r;
                a.coef[s] += pr;
                for (s2, xs2) in x.iter().enumerate().skip(s + 1) {
                    a.add_scaled(xs2, qr[s2]);
                }
                let retry: f64 = qr[..=s].iter().sum();
                a.scale(1.0 / (1.0 - retry));
                x[s] = a;
            }
            let mut t = Affine::zero(nl);
            t.constant = spent;
            t.add_scaled(&next, p);
            for (xs, qs) in x.iter().zip(&q) {
                t.add_scaled(xs, *qs);
            }
            // Eliminate references to T(j) itself: the blocks starting at j.
            let mut self_coef = 0.0;
            for (c, b) in t.coef.iter_mut().zip(&block) {
                if (j - 1) % b == 0 {
                    self_coef += *c;
                    *c = 0.0;
                }
            }
            t.scale(1.0 / (1.0 - self_coef));
            next = t;
        }
        let time = next.constant;
        assert!(
            next.coef.iter().all(|&c| c == 0.0),
            "every block starts at segment 1"
        );
        Ok(time)
    }

    /// Expected efficiency (useful compute / wall time) of a pattern.
    pub fn efficiency(&self, pattern: &Pattern) -> Result<f64, ModelError> {
        let time = self.expected_pattern_time_s(pattern)?;
        let eff = pattern.len() as f64 * pattern.interval_s / time;
        Ok(if eff.is_finite() { eff } else { 0.0 })
    }

    /// Best interval for fixed counts (golden-section search on log t),
    /// with its expected efficiency.
    pub fn best_interval(&self, counts: &[u32]) -> Result<(f64, f64), ModelError> {
        let total = self.total_failure_rate_per_s();
        let max_cost = self
            .levels
            .iter()
            .map(|l| l.checkpoint_cost_s)
            .fold(1.0, f64::max);
        let hi = if total > 0.0 { 100.0 / total } else { 1e12 }.max(max_cost * 10.0);
        let eval = |ln_t: f64| -> Result<f64, ModelError> {
            self.efficiency(&Pattern {
                interval_s: ln_t.exp(),
                counts: counts.to_vec(),
            })
        };
        let (mut a, mut b) = (1e-3f64.ln(), hi.ln());
        let g = 0.5 * (5f64.sqrt() - 1.0);
        let mut c = b - g * (b - a);
        let mut d = a + g * (b - a);
        let (mut fc, mut fd) = (eval(c)?, eval(d)?);
        for _ in 0..80 {
            if fc > fd {
                b = d;
                d = c;
                fd = fc;
                c = b - g * (b - a);
                fc = eval(c)?;
            } else {
                a = c;
                c = d;
                fc = fd;
                d = a + g * (b - a);
                fd = eval(d)?;
            }
        }
        let ln_t = 0.5 * (a + b);
        Ok((ln_t.exp(), eval(ln_t)?))
    }

    /// The optimal pattern: the interval and counts that maximise expected
    /// efficiency (coordinate search over the counts, golden-section over
    /// the interval), with that efficiency.
    pub fn optimum(&self) -> Result<(Pattern, f64), ModelError> {
        let nl = self.levels.len();
        let mut counts = vec![1u32; nl - 1];
        let (mut t, mut best) = self.best_interval(&counts)?;
        // Start the search from the first-order optimum when it is sane.
        if let Ok((p, _)) = self.benoit_first_order() {
            let (t2, e2) = self.best_interval(&p.counts)?;
            if e2 > best {
                counts = p.counts;
                t = t2;
                best = e2;
            }
        }
        for _round in 0..8 {
            let mut changed = false;
            for k in 0..nl.saturating_sub(1) {
                let mut worse_run = 0;
                let mut c = 1u32;
                while c <= 4096 && worse_run < 64 {
                    let mut trial = counts.clone();
                    trial[k] = c;
                    let len: u64 = trial.iter().map(|&v| u64::from(v)).product();
                    if len > MAX_PATTERN_LEN {
                        break;
                    }
                    let (t2, e2) = self.best_interval(&trial)?;
                    if e2 > best * (1.0 + 1e-12) {
                        best = e2;
                        t = t2;
                        counts = trial;
                        changed = true;
                        worse_run = 0;
                    } else if c > counts[k] {
                        worse_run += 1;
                    }
                    c += 1;
                }
            }
            if !changed {
                break;
            }
        }
        Ok((
            Pattern {
                interval_s: t,
                counts,
            },
            best,
        ))
    }

    /// The first-order optimum of Benoit et al. 2017: level-k checkpoints
    /// every `√(2(c_k − c_{k−1})/λ_k)` seconds, rounded to a whole number of
    /// level-(k−1) intervals. Levels without failures are given none of their
    /// own checkpoints beyond the top of the pattern.
    pub fn benoit_first_order(&self) -> Result<(Pattern, f64), ModelError> {
        let mut prev_cost = 0.0;
        let mut periods = Vec::with_capacity(self.levels.len());
        for l in &self.levels {
            let dc = (l.checkpoint_cost_s - prev_cost).max(0.0);
            prev_cost = l.checkpoint_cost_s.max(prev_cost);
            let p = if l.failure_rate_per_s > 0.0 {
                (2.0 * dc / l.failure_rate_per_s).sqrt()
            } else {
                f64::INFINITY
            };
            periods.push(p);
        }
        let t = periods[0];
        let t = if t.is_finite() && t > 0.0 {
            t
        } else {
            periods
                .iter()
                .copied()
                .find(|p| p.is_finite() && *p > 0.0)
                .unwrap_or(3600.0)
        };
        let mut counts = Vec::new();
        let mut block_s = t;
        let mut len = 1u64;
        for &p in &periods[1..] {
            // A level without failures of its own is worth taking only at
            // the end of the longest pattern evaluated.
            let cap = 4096u64.min(MAX_PATTERN_LEN / len).max(1) as f64;
            let c = if p.is_finite() {
                (p / block_s).round().clamp(1.0, cap)
            } else {
                cap
            };
            len *= c as u64;
            counts.push(c as u32);
            block_s *= c;
        }
        let pattern = Pattern {
            interval_s: t,
            counts,
        };
        let eff = self.efficiency(&pattern)?;
        Ok((pattern, eff))
    }

    /// The interval range around `pattern.interval_s` (counts fixed) where the
    /// expected efficiency is within `tolerance` (relative, e.g. 0.01) of the
    /// efficiency at `pattern`: the optimum's flat region.
    pub fn flat_region_s(
        &self,
        pattern: &Pattern,
        tolerance: f64,
    ) -> Result<(f64, f64), ModelError> {
        let target = self.efficiency(pattern)? * (1.0 - tolerance);
        let eff = |t: f64| {
            self.efficiency(&Pattern {
                interval_s: t,
                counts: pattern.counts.clone(),
            })
        };
        let mut edges = [0.0; 2];
        for (i, dir) in [-1.0f64, 1.0].into_iter().enumerate() {
            let (mut inside, mut outside) = (pattern.interval_s.ln(), pattern.interval_s.ln());
            let mut step = 0.05;
            let mut found = false;
            for _ in 0..200 {
                outside += dir * step;
                if eff(outside.exp())? < target {
                    found = true;
                    break;
                }
                inside = outside;
                step *= 1.5;
            }
            if found {
                for _ in 0..60 {
                    let mid = 0.5 * (inside + outside);
                    if eff(mid.exp())? >= target {
                        inside = mid;
                    } else {
                        outside = mid;
                    }
                }
            }
            edges[i] = inside.exp();
        }
        Ok((edges[0], edges[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coastal, from the SC10 paper: failures needing level 2 (PFS) and
    /// those level 1 (cache, XOR) survives; costs 15 s and 1835 s.
    const L1_RATE: f64 = 8.54e-7;
    const L2_RATE: f64 = 2.01e-7;

    fn within(actual: f64, expected: f64, rel: f64) -> bool {
        ((actual - expected) / expected).abs() <= rel
    }

    fn single(rate: f64, cost: f64) -> MultiLevelModel {
        MultiLevelModel::new(vec![Level {
            checkpoint_cost_s: cost,
            restart_cost_s: cost,
            failure_rate_per_s: rate,
        }])
        .unwrap()
    }

    fn two(scale_rate: f64, l2_cost: f64) -> MultiLevelModel {
        MultiLevelModel::new(vec![
            Level {
                checkpoint_cost_s: 15.0,
                restart_cost_s: 15.0,
                failure_rate_per_s: L1_RATE * scale_rate,
            },
            Level {
                checkpoint_cost_s: l2_cost,
                restart_cost_s: l2_cost,
                failure_rate_per_s: L2_RATE * scale_rate,
            },
        ])
        .unwrap()
    }

    #[test]
    fn golden_coastal_daly_formula() {
        let m = 1.0 / (L1_RATE + L2_RATE);
        let d = daly_s(1835.0, m);
        assert!(within(d, 57_763.0, 0.02), "daly {d}");
        assert!(
            young_s(1835.0, m) > d,
            "Young's first-order interval exceeds Daly's here"
        );
    }

    #[test]
    fn golden_coastal_single_level() {
        let (p, eff) = single(L1_RATE + L2_RATE, 1835.0).optimum().unwrap();
        assert!(within(eff, 0.937, 0.02), "efficiency {eff}");
        assert!(
            within(p.interval_s, 57_750.0, 0.02),
            "interval {}",
            p.interval_s
        );
        // Single level: the Markov model is Daly's closed form.
        let m = 1.0 / (L1_RATE + L2_RATE);
        let closed = single_level_efficiency(p.interval_s, 1835.0, 1835.0, m);
        assert!((closed - eff).abs() < 1e-9, "{closed} vs {eff}");
    }

    #[test]
    fn golden_coastal_two_level() {
        let (p, eff) = two(1.0, 1835.0).optimum().unwrap();
        assert!(within(eff, 0.968, 0.02), "efficiency {eff}");
        assert!(
            within(p.interval_s, 5_800.0, 0.02),
            "interval {}",
            p.interval_s
        );
        let per = p.level1_per_level2().unwrap();
        assert!((21..=23).contains(&per), "level-1 per level-2: {per}");
        let (b, beff) = two(1.0, 1835.0).benoit_first_order().unwrap();
        assert!(
            within(beff, eff, 0.01),
            "first-order pattern {b:?} efficiency {beff}"
        );
    }

    #[test]
    fn golden_coastal_ten_times_failures_and_level2_cost() {
        let (_, eff1) = single(10.0 * (L1_RATE + L2_RATE), 18_350.0)
            .optimum()
            .unwrap();
        assert!(within(eff1, 0.412, 0.02), "single-level efficiency {eff1}");
        let (p, eff2) = two(10.0, 18_350.0).optimum().unwrap();
        assert!(
            within(eff2, 0.696, 0.02),
            "two-level efficiency {eff2} at {p:?}"
        );
    }

    #[test]
    fn flat_region_contains_optimum_and_bad_input_is_an_error() {
        let model = single(1e-4, 60.0);
        let (p, _) = model.optimum().unwrap();
        let (lo, hi) = model.flat_region_s(&p, 0.01).unwrap();
        assert!(
            lo < p.interval_s && p.interval_s < hi,
            "{lo} {} {hi}",
            p.interval_s
        );
        assert!(matches!(
            MultiLevelModel::new(vec![]),
            Err(ModelError::NoLevels)
        ));
        let bad = Level {
            checkpoint_cost_s: f64::NAN,
            restart_cost_s: 1.0,
            failure_rate_per_s: 1.0,
        };
        assert!(matches!(
            MultiLevelModel::new(vec![bad]),
            Err(ModelError::BadParameter { .. })
        ));
        let p = Pattern {
            interval_s: 10.0,
            counts: vec![3],
        };
        assert!(matches!(
            model.efficiency(&p),
            Err(ModelError::BadPattern { .. })
        ));
        // No failures at all: efficiency is just compute / (compute + cost).
        let calm = single(0.0, 10.0);
        let e = calm
            .efficiency(&Pattern {
                interval_s: 90.0,
                counts: vec![],
            })
            .unwrap();
        assert!((e - 0.9).abs() < 1e-12, "{e}");
    }

    #[test]
    fn three_levels_reduce_to_two_when_the_middle_level_never_runs_alone() {
        // Counts [n, 1]: every level-2 position is a level-3 one, so the
        // middle level's cost never applies and its failures (none) never
        // happen: the model must equal the two-level model of levels 1, 3.
        let l1 = Level {
            checkpoint_cost_s: 10.0,
            restart_cost_s: 12.0,
            failure_rate_per_s: 2e-5,
        };
        let l2 = Level {
            checkpoint_cost_s: 99.0,
            restart_cost_s: 99.0,
            failure_rate_per_s: 0.0,
        };
        let l3 = Level {
            checkpoint_cost_s: 300.0,
            restart_cost_s: 350.0,
            failure_rate_per_s: 3e-6,
        };
        let three = MultiLevelModel::new(vec![l1, l2, l3]).unwrap();
        let two = MultiLevelModel::new(vec![l1, l3]).unwrap();
        for n in [1, 4, 9] {
            let a = three
                .expected_pattern_time_s(&Pattern {
                    interval_s: 900.0,
                    counts: vec![n, 1],
                })
                .unwrap();
            let b = two
                .expected_pattern_time_s(&Pattern {
                    interval_s: 900.0,
                    counts: vec![n],
                })
                .unwrap();
            assert!((a - b).abs() < 1e-9 * b, "n = {n}: {a} vs {b}");
        }
        // And a real three-level optimum beats the best two-level one.
        let l2 = Level {
            checkpoint_cost_s: 40.0,
            restart_cost_s: 40.0,
            failure_rate_per_s: 1e-5,
        };
        let (_, e3) = MultiLevelModel::new(vec![l1, l2, l3])
            .unwrap()
            .optimum()
            .unwrap();
        let l1_merged = Level {
            failure_rate_per_s: l1.failure_rate_per_s,
            ..l1
        };
        let l3_merged = Level {
            failure_rate_per_s: l2.failure_rate_per_s + l3.failure_rate_per_s,
            ..l3
        };
        let (_, e2) = MultiLevelModel::new(vec![l1_merged, l3_merged])
            .unwrap()
            .optimum()
            .unwrap();
        assert!(e3 > e2, "{e3} vs {e2}");
    }

    /// The adaptive policy takes each level's restart cost to be its
    /// checkpoint cost (`interval::adaptive`). With the flush to the prefix
    /// as the top level its restart is a fetch, which may cost a tenth to
    /// ten times the write and flush. That changes the efficiency the model
    /// predicts, never its interval: in Daly's formula a restart of cost R
    /// multiplies the expected wall time by e^(R/M) whatever the interval,
    /// and this model's best interval is likewise independent of R
    /// (results/interval.md, "The flush as the top level").
    #[test]
    fn a_restart_cost_other_than_the_checkpoint_s_moves_the_efficiency_not_the_interval() {
        for (mtbf, share2) in [(3_600.0, 0.5), (20_000.0, 0.2), (360_000.0, 0.05)] {
            for (c1, factor) in [(10.0, 5.0), (60.0, 10.0), (120.0, 20.0)] {
                for count in [2u32, 4, 8] {
                    let c2 = c1 * factor;
                    let model = |r2: f64| {
                        MultiLevelModel::new(vec![
                            Level {
                                checkpoint_cost_s: c1,
                                restart_cost_s: c1,
                                failure_rate_per_s: (1.0 - share2) / mtbf,
                            },
                            Level {
                                checkpoint_cost_s: c2,
                                restart_cost_s: r2,
                                failure_rate_per_s: share2 / mtbf,
                            },
                        ])
                        .unwrap()
                    };
                    let (assumed_t, assumed_eff) = model(c2).best_interval(&[count]).unwrap();
                    for restart_factor in [0.1, 0.25, 2.0, 10.0] {
                        let what = format!(
                            "MTBF {mtbf} s, share {share2}, costs {c1}/{c2} s, count {count}, \
                             restart factor {restart_factor}"
                        );
                        let (t, eff) = model(c2 * restart_factor).best_interval(&[count]).unwrap();
                        assert!(
                            within(t, assumed_t, 1e-6),
                            "{what}: {t} s against {assumed_t} s"
                        );
                        // A cheaper restart is a better efficiency, a dearer one worse.
                        assert!(
                            (eff > assumed_eff) == (restart_factor < 1.0),
                            "{what}: {eff} against {assumed_eff}"
                        );
                    }
                }
            }
        }
    }
}
