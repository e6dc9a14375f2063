//! Plot expected efficiency against checkpoint interval: Daly's model curve
//! and the simulator's points (exponential failures, and Weibull failures of
//! the same mean where the model no longer holds), with 95 % intervals.
//!
//! `cargo run --release -p faultsim --bin interval-plot -- --out results/interval-efficiency.png`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use faultsim::sim::{simulate, FailureDist, Job, Policy, SimLevel, Summary};
use plotters::prelude::*;
use scr::interval::model::{daly_s, single_level_efficiency, young_s};

/// DejaVu Sans (Debian fonts-dejavu-core; licence in assets/): plotters
/// without system libraries needs a font registered at run time.
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Model curve and simulated points of efficiency against interval.
#[derive(Parser)]
struct Args {
    /// Output PNG.
    #[arg(long, default_value = "results/interval-efficiency.png")]
    out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Simulated jobs per point.
    #[arg(long, default_value_t = 2000)]
    samples: usize,
    /// Checkpoint (and restart) cost, seconds.
    #[arg(long, default_value_t = 200.0)]
    cost: f64,
    /// Mean time between failures, seconds.
    #[arg(long, default_value_t = 10_000.0)]
    mtbf: f64,
    /// Weibull shape for the second set of points.
    #[arg(long, default_value_t = 0.7)]
    shape: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("interval-plot: {e} (seed {})", args.seed);
            ExitCode::from(1)
        }
    }
}

fn sweep(args: &Args, dist: FailureDist, intervals: &[f64]) -> Result<Vec<(f64, Summary)>, String> {
    intervals
        .iter()
        .map(|&t| {
            let job = Job {
                work_s: (100.0 * args.mtbf / t).ceil() * t,
                levels: vec![SimLevel {
                    checkpoint_cost_s: args.cost,
                    restart_cost_s: args.cost,
                    failures: Some(dist),
                }],
                checkpoint_at_end: true,
            };
            let s = simulate(
                &job,
                &Policy::Fixed {
                    interval_s: t,
                    counts: vec![],
                },
                args.samples,
                args.seed,
            )
            .map_err(|e| e.to_string())?;
            Ok((t, s))
        })
        .collect()
}

fn run(args: &Args) -> Result<(), String> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the bundled font does not load".to_string())?;
    let (c, m) = (args.cost, args.mtbf);
    let daly = daly_s(c, m);
    let young = young_s(c, m);
    let (lo, hi) = (daly / 5.0, daly * 5.0);
    let intervals: Vec<f64> = (0..11)
        .map(|i| lo * (hi / lo).powf(i as f64 / 10.0))
        .collect();
    let exp = sweep(args, FailureDist::Exponential { mtbf_s: m }, &intervals)?;
    let scale = m / statrs::function::gamma::gamma(1.0 + 1.0 / args.shape);
    let wei = sweep(
        args,
        FailureDist::Weibull {
            shape: args.shape,
            scale_s: scale,
        },
        &intervals,
    )?;

    println!("| interval (s) | model | simulated, exponential (95 % CI) | simulated, Weibull k={} (95 % CI) |", args.shape);
    println!("| ---: | ---: | ---: | ---: |");
    for ((t, e), (_, w)) in exp.iter().zip(&wei) {
        println!(
            "| {t:.0} | {:.2} % | {:.2} % [{:.2}, {:.2}] | {:.2} % [{:.2}, {:.2}] |",
            100.0 * single_level_efficiency(*t, c, c, m),
            100.0 * e.efficiency_of_means,
            100.0 * args_ci(e).0,
            100.0 * args_ci(e).1,
            100.0 * w.efficiency_of_means,
            100.0 * args_ci(w).0,
            100.0 * args_ci(w).1
        );
    }
    println!("Young {young:.0} s, Daly {daly:.0} s");

    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let root = BitMapBackend::new(&args.out, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ymin = wei
        .iter()
        .chain(&exp)
        .map(|(_, s)| args_ci(s).0)
        .fold(1.0, f64::min)
        .min(single_level_efficiency(lo, c, c, m))
        .min(single_level_efficiency(hi, c, c, m));
    let ymax = exp
        .iter()
        .chain(&wei)
        .map(|(_, s)| args_ci(s).1)
        .fold(0.0, f64::max)
        .max(single_level_efficiency(daly, c, c, m));
    let pad = 0.05 * (ymax - ymin);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Expected efficiency vs checkpoint interval (cost {c:.0} s, MTBF {m:.0} s)"),
            ("sans-serif", 24),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo * 0.9..hi * 1.1).log_scale(), (ymin - pad)..(ymax + pad))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("checkpoint interval (s, log scale)")
        .y_desc("efficiency (useful work / wall time)")
        .x_labels(8)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|e| e.to_string())?;
    let curve: Vec<(f64, f64)> = (0..=200)
        .map(|i| lo * 0.9 * (hi * 1.1 / (lo * 0.9)).powf(i as f64 / 200.0))
        .map(|t| (t, single_level_efficiency(t, c, c, m)))
        .collect();
    chart
        .draw_series(LineSeries::new(curve, BLUE.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label("model (Daly, exponential)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    for (x, name, color) in [(young, "Young", GREEN), (daly, "Daly", MAGENTA)] {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, ymin - pad), (x, ymax + pad)],
                color.stroke_width(1),
            )))
            .map_err(|e| e.to_string())?
            .label(format!("{name} {x:.0} s"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(1))
            });
    }
    for (points, name, color) in [
        (&exp, "simulated, exponential".to_string(), BLACK),
        (&wei, format!("simulated, Weibull k = {}", args.shape), RED),
    ] {
        chart
            .draw_series(points.iter().map(|(t, s)| {
                PathElement::new(
                    vec![(*t, args_ci(s).0), (*t, args_ci(s).1)],
                    color.stroke_width(2),
                )
            }))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|(t, s)| Circle::new((*t, s.efficiency_of_means), 4, color.filled())),
            )
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerMiddle)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present()
        .map_err(|e| format!("{}: {e}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}

/// 95 % interval of the long-run efficiency work / E[wall], from the wall
/// time's interval.
fn args_ci(s: &Summary) -> (f64, f64) {
    let w = s.efficiency_of_means * s.wall_s.mean;
    (w / s.wall_s.hi, w / s.wall_s.lo)
}
