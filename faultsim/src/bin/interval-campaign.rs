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
//! `cargo run --release -p faultsim --bin interval-campaign`

use std::process::ExitCode;

use clap::Parser;
use faultsim::sim::{campaign, sample_seed, FailureDist, Job, MeanCi, Policy, SimLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scr::interval::model::daly_s;

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
    if args.mtbf_range.len() != 2
        || args.cost_range.len() != 2
        || args
            .mtbf_range
            .iter()
            .chain(&args.cost_range)
            .any(|v| !(v.is_finite() && *v > 0.0))
    {
        return Err("ranges take two positive numbers".into());
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
        let scale = mtbf / statrs::function::gamma::gamma(1.0 + 1.0 / args.shape);
        let dist = if args.shape == 1.0 {
            FailureDist::Exponential { mtbf_s: mtbf }
        } else {
            FailureDist::Weibull {
                shape: args.shape,
                scale_s: scale,
            }
        };
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
        let seed = sample_seed(args.seed, i as u64);
        for (k, p) in policies.iter().enumerate() {
            let (e, _) =
                campaign(&job, p, args.jobs, seed).map_err(|e| format!("system {i}: {e}"))?;
            eff[k].push(e);
        }
    }
    println!(
        "{} systems, MTBF log-uniform {:.0}..{:.0} s, checkpoint cost {:.0}..{:.0} s, Weibull shape {}, {} jobs of {:.0} s each, seed {}",
        args.systems, args.mtbf_range[0], args.mtbf_range[1], args.cost_range[0], args.cost_range[1], args.shape, args.jobs, args.work, args.seed
    );
    println!();
    println!("| policy | mean efficiency (95 % CI) | adaptive gain over it, per system (95 % CI) | systems where adaptive wins |");
    println!("| --- | ---: | ---: | ---: |");
    for (k, name) in names.iter().enumerate() {
        let m = MeanCi::of(&eff[k]);
        let gains: Vec<f64> = eff[2]
            .iter()
            .zip(&eff[k])
            .map(|(a, b)| 100.0 * (a / b - 1.0))
            .collect();
        let g = MeanCi::of(&gains);
        let wins = eff[2].iter().zip(&eff[k]).filter(|(a, b)| a > b).count();
        println!(
            "| {name} | {:.2} % [{:.2}, {:.2}] | {:+.2} % [{:+.2}, {:+.2}] | {wins} / {} |",
            100.0 * m.mean,
            100.0 * m.lo,
            100.0 * m.hi,
            g.mean,
            g.lo,
            g.hi,
            args.systems
        );
    }
    Ok(())
}
