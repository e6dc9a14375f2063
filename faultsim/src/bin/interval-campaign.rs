//! Simulated campaigns: does the adaptive policy (Daly's interval for the
//! MTBF estimated from the failures seen so far) beat fixed intervals?
//!
//! Each system draws its MTBF (log-uniform over `--mtbf-range`) and its
//! checkpoint cost (log-uniform over `--cost-range`) from the seed, then runs
//! a campaign of `--jobs` jobs of `--work` seconds each under every policy,
//! with the same failure streams (common random numbers):
//! - `fixed 1 h`: SCR_CHECKPOINT_SECONDS=3600, a site-wide fixed setting
//!   (SCR itself sets no interval by default: SCR_Need_checkpoint then
//!   answers yes at every call and the application's own fixed cadence rules);
//! - `fixed nominal`: Daly's interval for a nominal MTBF (`--prior`), what a
//!   site would set once without data;
//! - `adaptive`: the library's policy (`SCR_CHECKPOINT_ADAPTIVE=1` with
//!   `SCR_MTBF` set to that nominal MTBF, a prior worth one failure), the
//!   same code (`scr::interval::adaptive::decide`) deciding every
//!   checkpoint from the failures and time at risk so far, carried across
//!   the campaign's jobs as the logs in a prefix carry them;
//! - `adaptive, no SCR_MTBF`: the same policy learning from the logs alone;
//! - `oracle`: Daly's interval for the true MTBF (an upper reference).
//!
//! With `--multi-level`, two levels (a cache level and a costlier one, as
//! two CKPT descriptors with `INTERVAL` 1 and `count`): each system also
//! draws the share of its failures that need level 2, level 2's cost as a
//! multiple of level 1's, and the pattern's count, and the policies are
//! - `fixed 1 h`: SCR_CHECKPOINT_SECONDS=3600 with the same pattern;
//! - `fixed nominal`: the SC10 model's best interval for the true costs
//!   and the nominal failure figures (`--prior` in all, a fifth needing
//!   level 2);
//! - `adaptive, SCR_MTBF per level`: the library's policy with those
//!   nominal figures as `SCR_MTBF` (`m1,m2`): the SC10 model once both
//!   levels' costs are measured in the run;
//! - `adaptive, one SCR_MTBF`: the same with `SCR_MTBF` = the nominal total
//!   alone, where the library stays single-level (Daly for the mean cost);
//! - `oracle`: the SC10 model's best interval for the true figures.
//!
//! Restarts cost what checkpoints of their level cost, as the library's
//! model assumes, unless `--level2-restart-factor-range` draws level 2's
//! restart cost as a multiple of its checkpoint cost: a flush to the
//! prefix as the top level, whose restart is a fetch (SCR_FLUSH with one
//! `SCR_MTBF` figure more than the CKPT levels). The oracle then knows
//! the true restart cost, and one more policy, `SC10, restart = checkpoint`,
//! is the model's interval for the true figures but that assumption: what
//! the assumption alone costs.
//!
//! `cargo run --release -p faultsim --bin interval-campaign [-- --multi-level]`

use std::process::ExitCode;

use clap::Parser;
use faultsim::sim::{campaign, sample_seed, FailureDist, Job, MeanCi, Policy, SimLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scr::interval::model::{daly_s, Level, MultiLevelModel};

/// Compare checkpoint policies over simulated campaigns.
#[derive(Parser)]
struct Args {
    /// Seed of every random choice (systems and failures).
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Number of systems.
    #[arg(long, default_value_t = 200)]
    systems: usize,
    /// Jobs per campaign.
    #[arg(long, default_value_t = 20)]
    jobs: usize,
    /// Work per job, seconds.
    #[arg(long, default_value_t = 86_400.0)]
    work: f64,
    /// MTBF range, seconds (log-uniform).
    #[arg(long, num_args = 2, default_values_t = [3_600.0, 360_000.0])]
    mtbf_range: Vec<f64>,
    /// Checkpoint cost range, seconds (log-uniform); restart costs the same.
    #[arg(long, num_args = 2, default_values_t = [30.0, 600.0])]
    cost_range: Vec<f64>,
    /// Nominal MTBF the fixed-nominal and adaptive policies start from.
    #[arg(long, default_value_t = 86_400.0)]
    prior: f64,
    /// Weibull shape of failures (1: exponential).
    #[arg(long, default_value_t = 1.0)]
    shape: f64,
    /// Two checkpoint levels instead of one (see the module's text).
    #[arg(long)]
    multi_level: bool,
    /// With `--multi-level`: level 1's checkpoint cost range, seconds
    /// (log-uniform; `--cost-range` is for one level).
    #[arg(long, num_args = 2, default_values_t = [10.0, 120.0])]
    level1_cost_range: Vec<f64>,
    /// With `--multi-level`: level 2's cost as a multiple of level 1's
    /// (log-uniform).
    #[arg(long, num_args = 2, default_values_t = [5.0, 20.0])]
    level2_factor_range: Vec<f64>,
    /// With `--multi-level`: the share of failures that need level 2
    /// (log-uniform).
    #[arg(long, num_args = 2, default_values_t = [0.05, 0.5])]
    level2_share_range: Vec<f64>,
    /// With `--multi-level`: level 2's restart cost as a multiple of its
    /// checkpoint cost (log-uniform); without it restarts cost what
    /// checkpoints do.
    #[arg(long, num_args = 2)]
    level2_restart_factor_range: Option<Vec<f64>>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("interval-campaign: {e} (seed {})", args.seed);
            ExitCode::from(1)
        }
    }
}

fn log_uniform(rng: &mut ChaCha8Rng, range: &[f64]) -> f64 {
    let (a, b) = (range[0].ln(), range[1].ln());
    (a + (b - a) * rng.gen::<f64>()).exp()
}

fn run(args: &Args) -> Result<(), String> {
    let mut ranges = vec![
        &args.mtbf_range,
        &args.cost_range,
        &args.level1_cost_range,
        &args.level2_factor_range,
        &args.level2_share_range,
    ];
    ranges.extend(args.level2_restart_factor_range.as_ref());
    if ranges
        .iter()
        .any(|r| r.len() != 2 || r.iter().any(|v| !(v.is_finite() && *v > 0.0)))
        || args.level2_share_range.iter().any(|&f| f >= 1.0)
    {
        return Err("ranges take two positive numbers (shares below 1)".into());
    }
    if args.multi_level {
        return run_multi_level(args);
    }
    let names = [
        "fixed 1 h",
        "fixed nominal",
        "adaptive",
        "adaptive, no SCR_MTBF",
        "oracle",
    ];
    let mut eff: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    for i in 0..args.systems {
        let mtbf = log_uniform(&mut rng, &args.mtbf_range);
        let cost = log_uniform(&mut rng, &args.cost_range);
        let dist = failures(args, mtbf);
        let job = Job {
            work_s: args.work,
            levels: vec![SimLevel {
                checkpoint_cost_s: cost,
                restart_cost_s: cost,
                failures: Some(dist),
            }],
            checkpoint_at_end: false,
        };
        let policies = [
            Policy::Fixed {
                interval_s: 3600.0,
                counts: vec![],
            },
            Policy::Fixed {
                interval_s: daly_s(cost, args.prior),
                counts: vec![],
            },
            Policy::Adaptive {
                prior_mtbf_s: Some(args.prior),
            },
            Policy::Adaptive { prior_mtbf_s: None },
            Policy::Fixed {
                interval_s: daly_s(cost, mtbf),
                counts: vec![],
            },
        ];
        run_system(args, i, &job, &policies, &mut eff)?;
    }
    println!(
        "{} systems, MTBF log-uniform {:.0}..{:.0} s, checkpoint cost {:.0}..{:.0} s, Weibull shape {}, {} jobs of {:.0} s each, seed {}",
        args.systems, args.mtbf_range[0], args.mtbf_range[1], args.cost_range[0], args.cost_range[1], args.shape, args.jobs, args.work, args.seed
    );
    print_table(&names, &eff, 2, args.systems);
    Ok(())
}

/// System `i`'s campaign under each policy, with the same failure streams;
/// each one's efficiency is pushed to its column of `eff`.
fn run_system(
    args: &Args,
    i: usize,
    job: &Job,
    policies: &[Policy],
    eff: &mut [Vec<f64>],
) -> Result<(), String> {
    let seed = sample_seed(args.seed, i as u64);
    for (k, p) in policies.iter().enumerate() {
        let (e, _) = campaign(job, p, args.jobs, seed).map_err(|e| format!("system {i}: {e}"))?;
        eff[k].push(e);
    }
    Ok(())
}

/// The efficiency table: each policy's mean, and policy `ours`'s gain over
/// it per system.
fn print_table(names: &[&str], eff: &[Vec<f64>], ours: usize, systems: usize) {
    println!();
    println!("| policy | mean efficiency (95 % CI) | adaptive gain over it, per system (95 % CI) | systems where adaptive wins |");
    println!("| --- | ---: | ---: | ---: |");
    for (k, name) in names.iter().enumerate() {
        let m = MeanCi::of(&eff[k]);
        let gains: Vec<f64> = eff[ours]
            .iter()
            .zip(&eff[k])
            .map(|(a, b)| 100.0 * (a / b - 1.0))
            .collect();
        let g = MeanCi::of(&gains);
        let wins = eff[ours].iter().zip(&eff[k]).filter(|(a, b)| a > b).count();
        println!(
            "| {name} | {:.2} % [{:.2}, {:.2}] | {:+.2} % [{:+.2}, {:+.2}] | {wins} / {systems} |",
            100.0 * m.mean,
            100.0 * m.lo,
            100.0 * m.hi,
            g.mean,
            g.lo,
            g.hi,
        );
    }
}

/// A failure distribution of mean `mtbf` and the campaign's shape.
fn failures(args: &Args, mtbf: f64) -> FailureDist {
    if args.shape == 1.0 {
        FailureDist::Exponential { mtbf_s: mtbf }
    } else {
        FailureDist::Weibull {
            shape: args.shape,
            scale_s: mtbf / statrs::function::gamma::gamma(1.0 + 1.0 / args.shape),
        }
    }
}

/// The SC10 model's best level-1 interval for checkpoint costs `costs`,
/// restart costs `restarts` and per-level MTBFs `mtbfs`, with pattern
/// `counts`.
fn sc10_interval(
    costs: &[f64],
    restarts: &[f64],
    mtbfs: &[f64],
    counts: &[u32],
) -> Result<f64, String> {
    let levels = costs
        .iter()
        .zip(restarts)
        .zip(mtbfs)
        .map(|((&c, &r), &m)| Level {
            checkpoint_cost_s: c,
            restart_cost_s: r,
            failure_rate_per_s: 1.0 / m,
        })
        .collect();
    let model = MultiLevelModel::new(levels).map_err(|e| e.to_string())?;
    model
        .best_interval(counts)
        .map(|(t, _)| t)
        .map_err(|e| e.to_string())
}

/// `--multi-level`: two levels per system.
fn run_multi_level(args: &Args) -> Result<(), String> {
    let mut names = vec![
        "fixed 1 h",
        "fixed nominal",
        "adaptive, SCR_MTBF per level",
        "adaptive, one SCR_MTBF",
        "oracle",
    ];
    let restart_range = args.level2_restart_factor_range.as_deref();
    if restart_range.is_some() {
        names.push("SC10, restart = checkpoint");
    }
    // The nominal figures: `--prior` in all, a fifth needing level 2.
    let nominal = [args.prior / 0.8, args.prior / 0.2];
    let mut eff: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    for i in 0..args.systems {
        let mtbf = log_uniform(&mut rng, &args.mtbf_range);
        let share2 = log_uniform(&mut rng, &args.level2_share_range);
        let c1 = log_uniform(&mut rng, &args.level1_cost_range);
        let c2 = c1 * log_uniform(&mut rng, &args.level2_factor_range);
        let count = [2u32, 4, 8][rng.gen_range(0..3)];
        // Drawn only when asked for, so the systems of a campaign without
        // it stay those of earlier runs of the same seed.
        let r2 = restart_range.map_or(c2, |r| c2 * log_uniform(&mut rng, r));
        let mtbfs = [mtbf / (1.0 - share2), mtbf / share2];
        let costs = [c1, c2];
        let restarts = [c1, r2];
        let job = Job {
            work_s: args.work,
            levels: costs
                .iter()
                .zip(&restarts)
                .zip(&mtbfs)
                .map(|((&c, &r), &m)| SimLevel {
                    checkpoint_cost_s: c,
                    restart_cost_s: r,
                    failures: Some(failures(args, m)),
                })
                .collect(),
            checkpoint_at_end: false,
        };
        let counts = vec![count];
        let fixed = |interval_s: f64| Policy::Fixed {
            interval_s,
            counts: counts.clone(),
        };
        let mut policies = vec![
            fixed(3600.0),
            fixed(sc10_interval(&costs, &restarts, &nominal, &counts)?),
            Policy::AdaptiveLevels {
                counts: counts.clone(),
                prior_mtbf_s: nominal.to_vec(),
            },
            Policy::AdaptiveLevels {
                counts: counts.clone(),
                prior_mtbf_s: vec![args.prior],
            },
            fixed(sc10_interval(&costs, &restarts, &mtbfs, &counts)?),
        ];
        if restart_range.is_some() {
            policies.push(fixed(sc10_interval(&costs, &costs, &mtbfs, &counts)?));
        }
        run_system(args, i, &job, &policies, &mut eff)?;
    }
    println!(
        "{} systems, two levels: MTBF log-uniform {:.0}..{:.0} s in all, {:.2}..{:.2} of failures needing level 2, level-1 cost {:.0}..{:.0} s, level 2 {:.0}..{:.0} times that, pattern of 2, 4 or 8, Weibull shape {}, {} jobs of {:.0} s each, nominal SCR_MTBF {:.0},{:.0} s, seed {}",
        args.systems,
        args.mtbf_range[0],
        args.mtbf_range[1],
        args.level2_share_range[0],
        args.level2_share_range[1],
        args.level1_cost_range[0],
        args.level1_cost_range[1],
        args.level2_factor_range[0],
        args.level2_factor_range[1],
        args.shape,
        args.jobs,
        args.work,
        nominal[0],
        nominal[1],
        args.seed
    );
    if let Some(r) = restart_range {
        println!(
            "level 2's restart cost {:.2}..{:.2} times its checkpoint cost (log-uniform)",
            r[0], r[1]
        );
    }
    print_table(&names, &eff, 2, args.systems);
    Ok(())
}
