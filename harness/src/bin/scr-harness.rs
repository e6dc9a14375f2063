//! `scr-harness`: SCR's run loop with fault injection, scenario campaigns,
//! and the new-system checklist.
//!
//! ```text
//! scr-harness run [--scheme XOR] [--plan faults.toml] [--nodes 4 --spares 2] [-- PROGRAM ARGS...]
//! scr-harness campaign --list | --quick | [--only NAME] [--scheme S] | --random N [--seed S]
//! scr-harness validate [--launcher mpirun|srun] [--nodes n1,n2,...]
//! scr-harness check-node [--storage /dev/shm:BYTES]
//! ```
//!
//! Exit codes: the table of [`scr::exit`] shared with `scr`
//! (docs/exit-codes.md), printed by `scr-harness --help`. SUCCESS: `run`
//! completed (or met `--expect`), `campaign` met every expectation,
//! `validate` passed every check; UNEXPECTED: an outcome differed or a
//! check failed; NEVER: SILENT CORRUPTION or HANG; CONFIG: a bad catalogue
//! or plan; FAILED: the harness could not do its job (missing application
//! or launcher, I/O error); USAGE: bad usage.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory, Parser, Subcommand};
use faultsim::plan::Plan;
use harness::campaign::{self, Report, Settings};
use harness::outcome::{Outcome, Verdict};
use harness::runloop::{default_storage, Allocation, AppSpec, LaunchRecord, RunLoop, RunResult};
use harness::scenario::{self, Catalogue, Scenario};
use harness::tools::{find_app, find_scr, has_fault_injection};
use scr::exit::Code;
use scr::CopyType;

#[derive(Parser)]
#[command(
    name = "scr-harness",
    version,
    about = "SCR run loop with fault injection, scenario campaigns, new-system validation",
    after_help = scr::exit::help_text()
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Launch an application with the SCR run loop on simulated nodes and spares.
    Run(RunArgs),
    /// Run scenarios of the catalogue (or random ones) across redundancy schemes.
    Campaign(CampaignArgs),
    /// Crash-point sweep: kill a rank at each injection point a job passes
    /// (checkpoint, flush, index, fetch, scavenge, rebuild; cache and bypass datasets), one run
    /// each, and check every restart.
    Sweep(SweepArgs),
    /// The developer guide's checklist for a new system (node kill, launcher,
    /// down-node detection, steering, full cycle, health checks).
    Validate(harness::validate::ValidateArgs),
    /// Draw a campaign's matrix again from its JSON (`results/campaign-X.json`
    /// gives `results/campaign-X.png`, and `-p2.png`, ... for a large one).
    Plot {
        /// The campaign's JSON report.
        #[arg(long = "from", value_name = "JSON")]
        from: PathBuf,
        /// The first PNG page (default: the JSON's path with `.png`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// scr_check_node on this node: storage reachable, writable, capacity, touch+rm.
    CheckNode {
        /// PATH[:MIN_BYTES] (repeatable; default /dev/shm); MIN_BYTES takes
        /// units as .scrconf does (1GB, 512MB, 1G).
        #[arg(long = "storage", value_name = "PATH[:MIN_BYTES]")]
        storage: Vec<String>,
        /// Print one JSON object (healthy, why, storage checked) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Clone)]
struct Common {
    /// The test application (scr_app built with --features scr/fault-injection;
    /// default: $SCR_APP_BIN, else target/fault-injection/debug/scr_app).
    #[arg(long)]
    app: Option<PathBuf>,
    /// The `scr` command, for `scr postrun` after the last launch.
    #[arg(long)]
    scr: Option<PathBuf>,
    /// Launcher and its leading arguments, space separated.
    #[arg(long, default_value = "mpirun --oversubscribe")]
    mpirun: String,
    /// Work directory (one subdirectory per run).
    #[arg(long, default_value = "target/scr-harness")]
    work: PathBuf,
    /// Keep the work directories of passing runs too.
    #[arg(long)]
    keep: bool,
    /// Print JSON on standard output instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Run a scenario of the catalogue with its settings, faults and expectation.
    #[arg(long)]
    scenario: Option<String>,
    /// The catalogue directory.
    #[arg(long)]
    catalogue: Option<PathBuf>,
    /// Redundancy scheme.
    #[arg(long, default_value = "XOR")]
    scheme: CopyType,
    /// Fault plan file (JSON or TOML, see docs/fault-injection.md).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Seed of the data and of every random fault choice.
    #[arg(long, default_value_t = campaign::DEFAULT_SEED)]
    seed: u64,
    /// Nodes a launch needs.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Ranks per node.
    #[arg(long, default_value_t = 2)]
    ranks_per_node: usize,
    /// Spare nodes.
    #[arg(long, default_value_t = 2)]
    spares: usize,
    /// Checkpoints of the first launch.
    #[arg(long, default_value_t = 3)]
    checkpoints: u64,
    /// Checkpoints of each relaunch.
    #[arg(long, default_value_t = 1)]
    relaunch_checkpoints: u64,
    /// Mean file size in bytes (units accepted: 64KB, 1MB).
    #[arg(long, default_value_t = 65536, value_parser = scr::units::bytes)]
    mean_bytes: u64,
    /// Most launches (SCR_RUNS).
    #[arg(long, default_value_t = 3)]
    launches: u32,
    /// Bound on each launch, seconds or with units (90, 5m).
    #[arg(long, default_value_t = 60, value_parser = scr::units::seconds_u64)]
    timeout_s: u64,
    /// A variable for every rank, VAR=VALUE (repeatable; SCR parameters).
    #[arg(long = "env", value_name = "VAR=VALUE")]
    env: Vec<String>,
    /// Expected outcome, e.g. "scratch, rebuilt:3" (exit 1 when different).
    #[arg(long)]
    expect: Option<Outcome>,
    /// Another application and its arguments instead of scr_app (its bytes
    /// are not verified).
    #[arg(last = true)]
    program: Vec<String>,
}

#[derive(Args)]
struct CampaignArgs {
    #[command(flatten)]
    common: Common,
    /// The catalogue directory.
    #[arg(long)]
    catalogue: Option<PathBuf>,
    /// Print one line per scenario and exit.
    #[arg(long)]
    list: bool,
    /// Only the CI subset.
    #[arg(long)]
    quick: bool,
    /// Only these scenarios (repeatable; adds to --tag).
    #[arg(long)]
    only: Vec<String>,
    /// Only scenarios with this tag (repeatable; adds to --only).
    #[arg(long)]
    tag: Vec<String>,
    /// Only these schemes (repeatable).
    #[arg(long)]
    scheme: Vec<CopyType>,
    /// Random mode: this many seeds, each choosing scheme, nodes, set size,
    /// faults and their times.
    #[arg(long)]
    random: Option<u32>,
    /// With --random: every checkpoint protected in the background
    /// (SCR_ENCODE_ASYNC=1), the same draws named random-async-N.
    #[arg(long = "async", requires = "random")]
    encode_async: bool,
    /// With --random: each draw also flushes every 1, 2 or 3 checkpoints
    /// to the prefix (SCR_FLUSH), named random-flush-N.
    #[arg(long, requires = "random")]
    flush: bool,
    /// The campaign seed.
    #[arg(long, default_value_t = campaign::DEFAULT_SEED)]
    seed: u64,
    /// Where the tables and the plot go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Do not write results.
    #[arg(long)]
    no_results: bool,
    /// The campaign's name in result files (default: quick, full, random, or custom).
    #[arg(long)]
    name: Option<String>,
    /// Cells run at once (each is one MPI job at a time, mostly waiting).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    common: Common,
    /// Redundancy scheme of the cache datasets.
    #[arg(long, default_value = "XOR")]
    scheme: CopyType,
    /// Only this mode (repeatable; default cache and bypass; async: in
    /// cache with SCR_ENCODE_ASYNC=1).
    #[arg(long, value_parser = ["cache", "async", "bypass"])]
    mode: Vec<String>,
    /// Only this phase (repeatable; default checkpoint, fetch, scavenge and
    /// rebuild).
    #[arg(long, value_parser = ["checkpoint", "fetch", "scavenge", "rebuild"])]
    phase: Vec<String>,
    /// Every hit of every point (default: one hit of each point).
    #[arg(long)]
    full: bool,
    /// One hit of each point and N more drawn from the other hits with
    /// --sample-seed (a failing cell replays with --full --only NAME).
    #[arg(long, value_name = "N", conflicts_with = "full")]
    sample: Option<usize>,
    /// The seed of --sample's draw.
    #[arg(long, default_value_t = 1, requires = "sample")]
    sample_seed: u64,
    /// Power loss of every node instead of a rank's kill: files lose what
    /// was written after their last fsync (in the scavenge phase, during
    /// `scr postrun`).
    #[arg(long)]
    power_loss: bool,
    /// One ENOSPC on the rank's I/O at the point instead of a kill: the job
    /// must end completed with no hang (every phase but scavenge).
    #[arg(long, conflicts_with = "power_loss")]
    io_error: bool,
    /// Only these cells, by name (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Seed of the data.
    #[arg(long, default_value_t = campaign::DEFAULT_SEED)]
    seed: u64,
    /// Where the tables go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Do not write results.
    #[arg(long)]
    no_results: bool,
    /// Cells run at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
}

fn main() -> ExitCode {
    // `scr-harness campaign --list | head -1` must end quietly, not panic
    // in println! on EPIPE.
    scr::exit::default_sigpipe();
    // `scr-harness generate SHARE` (ci/install): the man pages and
    // completions, written under SHARE (scr::cli_docs).
    let args: Vec<_> = std::env::args_os().collect();
    if let Some(share) = scr::cli_docs::asked("scr-harness", &args) {
        let share = share.unwrap_or_else(|e| e.exit());
        return match name_written(
            scr::cli_docs::generate(Cli::command(), &share),
            Named::Stdout,
        ) {
            Ok(()) => Code::Success.into(),
            Err(code) => code,
        };
    }
    // clap exits USAGE (2) on bad usage, SUCCESS on --help/--version.
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => run_cmd(a),
        Cmd::Campaign(a) => campaign_cmd(a),
        Cmd::Sweep(a) => sweep_cmd(a),
        Cmd::Validate(a) => harness::validate::main(a),
        Cmd::Plot { from, out } => plot_cmd(&from, out),
        Cmd::CheckNode { storage, json } => harness::validate::check_node_main(&storage, json),
    }
}

/// `scr-harness plot --from X.json`: the campaign's PNG pages again.
fn plot_cmd(from: &Path, out: Option<PathBuf>) -> ExitCode {
    let text = match std::fs::read_to_string(from) {
        Ok(t) => t,
        Err(e) => return harness_error(format!("{}: {e}", from.display())),
    };
    let report: Report = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => {
            return config_message(format!(
                "{}: line {}, column {}: not a campaign report: {e}",
                from.display(),
                e.line(),
                e.column()
            ))
        }
    };
    let png = out.unwrap_or_else(|| from.with_extension("png"));
    match name_written(harness::plot::matrix(&report, &png), Named::Stdout) {
        Ok(()) => Code::Success.into(),
        Err(code) => code,
    }
}

/// Where [`name_written`] names the files: on stdout when they are the
/// command's output (`generate`, `plot`), on stderr beside a campaign's or
/// a sweep's own report.
enum Named {
    Stdout,
    Stderr,
}

/// Name each file a command wrote, one per line, or give the exit code of
/// a harness that could not write them (FAILED, with the error).
fn name_written<E: std::fmt::Display>(
    written: Result<Vec<PathBuf>, E>,
    to: Named,
) -> Result<(), ExitCode> {
    let files = written.map_err(harness_error)?;
    for f in files {
        match to {
            Named::Stdout => println!("{}", f.display()),
            Named::Stderr => eprintln!("scr-harness: wrote {}", f.display()),
        }
    }
    Ok(())
}

/// The harness could not do its job: exit FAILED.
fn harness_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("scr-harness: error: {msg}");
    Code::Failed.into()
}

/// A catalogue or fault plan is invalid: exit CONFIG, with the error's
/// chain of causes (Display, never Debug).
fn config_error(e: &dyn std::error::Error) -> ExitCode {
    eprintln!("{}", scr::exit::error_report("scr-harness", e));
    Code::Config.into()
}

/// An input is unusable, said in one message: exit CONFIG.
fn config_message(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("scr-harness: error: {msg}");
    Code::Config.into()
}

/// `scr` for a run: the one with injection points when there is one, else
/// (with a warning) the plain one beside this binary: a single run without
/// faults planned inside `scr postrun` does not need them.
fn scr_for_run(given: Option<&PathBuf>, app: Option<&Path>) -> Result<Option<PathBuf>, String> {
    match find_scr(given, app) {
        Ok(p) => Ok(Some(p)),
        Err(e) if given.is_some() => Err(e),
        Err(e) => {
            let plain = std::env::current_exe()
                .ok()
                .and_then(|x| x.parent().map(|d| d.join("scr")))
                .filter(|p| p.is_file());
            if plain.is_some() {
                eprintln!("scr-harness: warning: {e}; `scr postrun` runs without injection points");
            }
            Ok(plain)
        }
    }
}

fn mpirun_argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn print_launch(l: &LaunchRecord, what: &str) {
    {
        println!(
            "{what} {} on {}: exit {} after {:.1} s → {}",
            l.launch,
            l.nodes.join(","),
            l.exit_code.map_or_else(
                || "none (killed at the time bound)".to_string(),
                |c| c.to_string()
            ),
            l.elapsed_s,
            l.token
        );
        for (n, why) in &l.newly_down {
            println!("  down before it: {n}: {why}");
        }
        if let Some(p) = &l.fault_plan {
            println!("  SCR_FAULT_PLAN={p}");
        }
        for f in &l.fired {
            println!(
                "  fired: {} hit {} on rank {} ({}): {}",
                f.point,
                f.hit,
                f.rank.map_or("-".into(), |r| r.to_string()),
                f.node.as_deref().unwrap_or("-"),
                f.action
            );
        }
        for x in &l.external {
            println!("  harness: {x}");
        }
        let mut app_lines = l
            .stdout
            .lines()
            .filter(|x| x.starts_with("SCR_APP "))
            .peekable();
        if app_lines.peek().is_none() {
            // Nothing from the application: show why the launch ended (its
            // last words, without the launcher's blank and rule lines).
            let tail: Vec<&str> = l
                .stderr
                .lines()
                .filter(|x| !x.trim().trim_matches('-').is_empty())
                .rev()
                .take(8)
                .collect();
            for line in tail.into_iter().rev() {
                println!("  stderr: {line}");
            }
        }
        for line in app_lines {
            println!("  {line}");
        }
        if let Some(w) = &l.why {
            println!("  SILENT CORRUPTION: {w}");
        } else if let Some(a) = l.report.restarted() {
            println!(
                "  verified: every byte of {} read back matched the data plan ({} bytes, the plan's size of it)",
                a.name, a.verified_bytes
            );
        }
    }
}

fn print_result(r: &RunResult) {
    for l in &r.launches {
        print_launch(l, "launch");
    }
    if let Some(p) = &r.postrun {
        println!(
            "scr postrun: exit {} after {:.1} s → {}",
            p.exit_code.map_or_else(
                || "none (killed at the time bound)".to_string(),
                |c| c.to_string()
            ),
            p.elapsed_s,
            p.results
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("  {}", p.command);
        for (n, why) in &p.down {
            println!("  down: {n}: {why}");
        }
        if let Some(plan) = &p.fault_plan {
            println!("  SCR_FAULT_PLAN={plan}");
        }
        for f in &p.fired {
            println!(
                "  fired: {} hit {} on node {}: {}",
                f.point,
                f.hit,
                f.node.as_deref().unwrap_or("-"),
                f.action
            );
        }
        for u in &p.unfired {
            println!("  never fired: {u}");
        }
        for x in &p.external {
            println!("  harness: {x}");
        }
        match &p.report {
            Some(rep) => {
                if let Some(why) = &rep.nothing_to_do {
                    println!("  nothing to do: {why}");
                }
                for d in &rep.datasets {
                    println!(
                        "  dataset {} ({}, {}): {}{}{}",
                        d.id,
                        d.name.as_deref().unwrap_or("?"),
                        d.kind,
                        if d.complete { "COMPLETE" } else { "INCOMPLETE" },
                        if d.current { ", CURRENT" } else { "" },
                        d.error
                            .as_ref()
                            .map_or(String::new(), |e| format!("; error: {e}"))
                    );
                    for c in d.copies.iter().filter(|c| c.error.is_some()) {
                        println!(
                            "    {} ({}): FAILED: {}",
                            c.node,
                            c.round,
                            c.error.as_deref().unwrap_or("")
                        );
                    }
                }
            }
            None => {
                for line in p
                    .stderr
                    .lines()
                    .rev()
                    .take(4)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                {
                    println!("  stderr: {line}");
                }
            }
        }
    }
    if let Some(n) = &r.next {
        print_launch(n, "next allocation: launch");
    }
    for e in &r.harness_errors {
        println!("harness error: {e}");
    }
    println!("outcome: {}", r.outcome);
}

fn run_cmd(a: RunArgs) -> ExitCode {
    let catalogue_dir = a.catalogue.clone().unwrap_or_else(scenario::default_dir);
    let work = a.common.work.join("run");
    let (rl, expect) = if let Some(name) = &a.scenario {
        let cat = match Catalogue::load(&catalogue_dir) {
            Ok(c) => c,
            Err(e) => return config_error(&e),
        };
        let Some(sc) = cat.get(name) else {
            eprintln!(
                "scr-harness: no scenario {name:?} in {}",
                catalogue_dir.display()
            );
            return Code::Usage.into();
        };
        let app = match find_app(a.common.app.as_ref()) {
            Ok(p) => p,
            Err(e) => return harness_error(e),
        };
        let scr_command = match scr_for_run(a.common.scr.as_ref(), Some(&app)) {
            Ok(p) => p,
            Err(e) => return harness_error(e),
        };
        let settings = Settings {
            app,
            scr_command,
            mpirun: mpirun_argv(&a.common.mpirun),
            work: work.clone(),
            keep: true,
            seed: a.seed,
            replay: String::new(),
        };
        let seed = campaign::cell_seed(a.seed, &sc.name, a.scheme);
        let dir = work.join(format!("{}-{}", sc.name, a.scheme.as_str().to_lowercase()));
        match campaign::cell_loop(sc, a.scheme, seed, &settings, &dir) {
            Ok(rl) => (
                rl,
                a.expect.clone().or_else(|| sc.expected(a.scheme).cloned()),
            ),
            Err(e) => return harness_error(e),
        }
    } else {
        let plan = match &a.plan {
            Some(p) => match Plan::read(p) {
                Ok(p) => p,
                Err(e) => return config_error(&e),
            },
            None => Plan::default(),
        };
        let mut env = campaign::base_env();
        for (k, v) in scenario::scheme_env(a.scheme) {
            env.insert(k.into(), v.into());
        }
        for kv in &a.env {
            let Some((k, v)) = kv.split_once('=') else {
                eprintln!("scr-harness: --env {kv:?}: expected VAR=VALUE");
                return Code::Usage.into();
            };
            env.insert(k.into(), v.into());
        }
        let storage = default_storage(&env);
        let dir = work.join(format!("seed-{}", a.seed));
        let _ = std::fs::remove_dir_all(&dir);
        let alloc = match Allocation::create(&dir, a.nodes, a.spares, a.ranks_per_node, &storage) {
            Ok(x) => x,
            Err(e) => return harness_error(format!("{}: {e}", dir.display())),
        };
        let topo = faultsim::plan::Topology {
            nodes: alloc.nodes.clone(),
            ranks_per_node: a.ranks_per_node as u32,
        };
        match plan.validate(&topo) {
            Ok(warnings) => {
                for w in warnings {
                    eprintln!("scr-harness: warning: {w}");
                }
            }
            Err(e) => return config_error(&e),
        }
        let app = if let Some((prog, args)) = a.program.split_first() {
            if plan.faults.iter().any(|f| f.what.in_process())
                && !has_fault_injection(Path::new(prog))
            {
                return harness_error(format!(
                    "{prog} was built without injection points; the plan's in-process faults would never fire"
                ));
            }
            AppSpec::other_in_prefix(prog, args)
        } else {
            let app = match find_app(a.common.app.as_ref()) {
                Ok(p) => p,
                Err(e) => return harness_error(e),
            };
            let ranks = (a.nodes * a.ranks_per_node) as u32;
            let data = campaign::data_seed(
                a.seed,
                ranks,
                a.checkpoints + a.relaunch_checkpoints * u64::from(a.launches),
                a.mean_bytes,
            );
            AppSpec::scr_app(
                app,
                data,
                a.mean_bytes,
                a.checkpoints,
                a.relaunch_checkpoints,
            )
        };
        if app.data.is_some()
            && plan.faults.iter().any(|f| f.what.in_process())
            && !has_fault_injection(&app.program)
        {
            return harness_error(format!(
                "{} was built without injection points; the plan's in-process faults would never fire",
                app.program.display()
            ));
        }
        let scr_command = match scr_for_run(a.common.scr.as_ref(), Some(&app.program)) {
            Ok(p) => p,
            Err(e) => return harness_error(e),
        };
        let mut plan = plan;
        plan.seed = Some(a.seed);
        (
            RunLoop {
                alloc,
                app,
                env,
                plan,
                halts: Vec::new(),
                seed: a.seed,
                max_launches: a.launches,
                timeout: Duration::from_secs(a.timeout_s),
                storage,
                mpirun: mpirun_argv(&a.common.mpirun),
                scr_command,
                next_allocation: false,
            },
            a.expect.clone(),
        )
    };
    let result = rl.run();
    if a.common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).unwrap_or_default()
        );
    } else {
        print_result(&result);
    }
    let reports: Vec<_> = result.launches.iter().map(|l| l.report.clone()).collect();
    if result.outcome.never() {
        // The exact command line, with the seed made explicit.
        let mut replay: Vec<String> = std::env::args().collect();
        if !replay
            .iter()
            .any(|x| x == "--seed" || x.starts_with("--seed="))
        {
            replay.insert(2.min(replay.len()), format!("--seed={}", a.seed));
        }
        eprintln!(
            "scr-harness: {}; seed {}; replay: {}",
            result.outcome.headline().name(),
            a.seed,
            replay.join(" ")
        );
        return Code::Never.into();
    }
    let ok = match &expect {
        Some(e) => {
            let next_report = result.next.as_ref().map(|l| &l.report);
            let (v, why) = harness::outcome::judge(&result.outcome, e, &reports, next_report);
            if v != Verdict::Expected {
                eprintln!("scr-harness: {why}");
            }
            match v {
                Verdict::Never => return Code::Never.into(),
                v => v == Verdict::Expected,
            }
        }
        None => result.outcome.end == harness::outcome::End::Completed,
    };
    if ok && !a.common.keep {
        let _ = std::fs::remove_dir_all(&rl.alloc.root);
    }
    if ok {
        Code::Success.into()
    } else {
        Code::Unexpected.into()
    }
}

fn selected<'a>(cat: &'a Catalogue, a: &CampaignArgs) -> Vec<&'a Scenario> {
    cat.scenarios
        .iter()
        .map(|(_, s)| s)
        .filter(|s| !a.quick || s.quick)
        // --only and --tag add up: a scenario named or tagged is selected.
        .filter(|s| {
            (a.only.is_empty() && a.tag.is_empty())
                || a.only.contains(&s.name)
                || s.tags.iter().any(|t| a.tag.contains(t))
        })
        .collect()
}

/// A scenario's expected outcome per scheme, for `campaign --list`
/// (`XOR=rebuilt:1; RS=...`). Printed with `println!`: a reader that closes
/// the pipe ends the process by SIGPIPE (see `main`), not by a panic.
fn expectations(s: &Scenario) -> String {
    s.schemes()
        .iter()
        .map(|x| {
            format!(
                "{x}={}",
                s.expected(*x).map(|o| o.to_string()).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn campaign_cmd(a: CampaignArgs) -> ExitCode {
    let dir = a.catalogue.clone().unwrap_or_else(scenario::default_dir);
    let (scenarios_owned, name): (Vec<Scenario>, String) = if let Some(n) = a.random {
        // --only picks single random scenarios (their replay commands).
        let mode = harness::random::Mode {
            encode_async: a.encode_async,
            flush: a.flush,
        };
        let all = harness::random::scenarios(a.seed, n, mode);
        let chosen: Vec<Scenario> = all
            .into_iter()
            .filter(|s| a.only.is_empty() || a.only.contains(&s.name))
            .collect();
        let default = mode.prefix().trim_end_matches('-').to_string();
        (chosen, a.name.clone().unwrap_or(default))
    } else {
        let cat = match Catalogue::load(&dir) {
            Ok(c) => c,
            Err(e) => return config_error(&e),
        };
        if a.list {
            for (_, s) in &cat.scenarios {
                println!(
                    "{:<44} {:<5} {:<28} {} [{}]",
                    s.name,
                    if s.quick { "quick" } else { "" },
                    s.tags.join(","),
                    s.about,
                    expectations(s)
                );
            }
            return Code::Success.into();
        }
        let chosen: Vec<Scenario> = selected(&cat, &a).into_iter().cloned().collect();
        for o in &a.only {
            if cat.get(o).is_none() {
                eprintln!("scr-harness: no scenario {o:?} in {}", dir.display());
                return Code::Usage.into();
            }
        }
        let name = a.name.clone().unwrap_or_else(|| {
            if a.quick && a.only.is_empty() && a.tag.is_empty() && a.scheme.is_empty() {
                "quick".into()
            } else if !a.quick && a.only.is_empty() && a.tag.is_empty() && a.scheme.is_empty() {
                "full".into()
            } else {
                "custom".into()
            }
        });
        (chosen, name)
    };
    if a.list {
        // Random mode: the drawn scenarios, without running them.
        for s in &scenarios_owned {
            println!("{:<12} {} [{}]", s.name, s.about, expectations(s));
        }
        return Code::Success.into();
    }
    let app = match find_app(a.common.app.as_ref()) {
        Ok(p) => p,
        Err(e) => return harness_error(e),
    };
    if !has_fault_injection(&app) {
        return harness_error(format!(
            "{} was built without injection points: build it with `{}`",
            app.display(),
            harness::tools::BUILD_BOTH
        ));
    }
    // Its `scr postrun` must fire the planned scavenge faults too.
    let scr_command = match find_scr(a.common.scr.as_ref(), Some(&app)) {
        Ok(p) => p,
        Err(e) => return harness_error(e),
    };
    let cells: Vec<(&Scenario, CopyType)> = scenarios_owned
        .iter()
        .flat_map(|s| {
            s.schemes()
                .into_iter()
                .filter(|x| a.scheme.is_empty() || a.scheme.contains(x))
                .map(move |x| (s, x))
        })
        .collect();
    let replay = if let Some(n) = a.random {
        format!(
            "scr-harness campaign --random {n}{}{}",
            if a.encode_async { " --async" } else { "" },
            if a.flush { " --flush" } else { "" }
        )
    } else {
        "scr-harness campaign".to_string()
    };
    let settings = Settings {
        app,
        scr_command: Some(scr_command),
        mpirun: mpirun_argv(&a.common.mpirun),
        work: a.common.work.join(format!("campaign-{name}")),
        keep: a.common.keep,
        seed: a.seed,
        replay,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let start = Instant::now();
    let bar = indicatif::ProgressBar::new(cells.len() as u64);
    let tty = std::io::stderr().is_terminal();
    if tty {
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Cells are independent (own directories, fault logs and job keys), so
    // up to --jobs run at once; the report keeps the catalogue's order.
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<campaign::Cell> = campaign::in_parallel(cells.len(), a.jobs, |i| {
        let (sc, scheme) = cells[i];
        bar.set_message(format!("{} {scheme}", sc.name));
        let (cell, _) = campaign::run_cell(sc, scheme, &settings);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let line = format!(
            "[{n}/{}] {} {}: {} ({}{}) {:.1} s",
            cells.len(),
            cell.scenario,
            cell.scheme,
            cell.outcome,
            cell.verdict,
            if cell.ok() {
                String::new()
            } else {
                format!(": {}; replay: {}", cell.why, cell.replay)
            },
            cell.time_s
        );
        if tty {
            bar.println(line);
        } else {
            eprintln!("{line}");
        }
        bar.inc(1);
        cell
    });
    bar.finish_and_clear();
    let report = Report {
        campaign: name,
        seed: a.seed,
        command,
        cells: results,
        time_s: start.elapsed().as_secs_f64(),
    };
    if !a.no_results {
        if let Err(code) = name_written(report.write(&a.out), Named::Stderr) {
            return code;
        }
    }
    if a.common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        for c in report.cells.iter().filter(|c| !c.ok()) {
            println!(
                "NOT AS EXPECTED: {} {}: expected `{}`, got `{}`{}; replay: {}",
                c.scenario,
                c.scheme,
                c.expected,
                c.outcome,
                if c.why.is_empty() || c.why.starts_with("expected `") {
                    String::new()
                } else {
                    format!(" ({})", c.why)
                },
                c.replay
            );
        }
    }
    let counts = report.counts();
    println!("{}", report.summary_line());
    if counts.silent + counts.hang > 0 {
        Code::Never.into()
    } else if counts.unexpected > 0 {
        Code::Unexpected.into()
    } else {
        Code::Success.into()
    }
}

fn sweep_cmd(a: SweepArgs) -> ExitCode {
    use harness::sweep::{self, Mode, Phase};
    let app = match find_app(a.common.app.as_ref()) {
        Ok(p) => p,
        Err(e) => return config_message(e),
    };
    if !has_fault_injection(&app) {
        return config_message(format!(
            "{} was built without injection points: build it with `{}`",
            app.display(),
            harness::tools::BUILD_BOTH
        ));
    }
    let scr_command = match find_scr(a.common.scr.as_ref(), Some(&app)) {
        Ok(p) => p,
        Err(e) => return harness_error(e),
    };
    let modes: Vec<Mode> = if a.mode.is_empty() {
        Mode::ALL.to_vec()
    } else {
        Mode::EVERY
            .into_iter()
            .filter(|m| a.mode.iter().any(|x| x == m.name()))
            .collect()
    };
    let phases: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|p| {
            a.phase.is_empty()
                || a.phase
                    .iter()
                    .any(|x| *x == format!("{p:?}").to_lowercase())
        })
        .collect();
    let how = if a.power_loss {
        sweep::Kill::Power
    } else if a.io_error {
        sweep::Kill::IoError
    } else {
        sweep::Kill::Rank
    };
    // An I/O error hits a rank; the scavenge has none. A power loss takes
    // every process, postrun's too.
    let phases: Vec<Phase> = phases
        .into_iter()
        .filter(|p| how != sweep::Kill::IoError || *p != Phase::Scavenge)
        .collect();
    let select = match (a.full, a.sample) {
        (true, _) => sweep::Select::Full,
        (false, None) => sweep::Select::Quick,
        (false, Some(extra)) => sweep::Select::Sample {
            extra,
            seed: a.sample_seed,
        },
    };
    let hits = match select {
        sweep::Select::Full => "full",
        sweep::Select::Quick => "quick",
        sweep::Select::Sample { .. } => "sample",
    };
    let name = match how {
        sweep::Kill::Rank => hits.to_string(),
        sweep::Kill::Power => format!("power-{hits}"),
        sweep::Kill::IoError => format!("io-error-{hits}"),
    };
    // A sampled cell is one of the full sweep's: its replay names it there.
    let mut replay = format!(
        "scr-harness sweep --scheme {} --seed {}{}",
        a.scheme,
        a.seed,
        if select == sweep::Select::Quick {
            ""
        } else {
            " --full"
        }
    );
    if a.power_loss {
        replay.push_str(" --power-loss");
    }
    if a.io_error {
        replay.push_str(" --io-error");
    }
    for m in &a.mode {
        replay.push_str(&format!(" --mode {m}"));
    }
    for p in &a.phase {
        replay.push_str(&format!(" --phase {p}"));
    }
    let settings = Settings {
        app,
        scr_command: Some(scr_command),
        mpirun: mpirun_argv(&a.common.mpirun),
        work: a.common.work.join(format!("sweep-{name}")),
        keep: a.common.keep,
        seed: a.seed,
        replay,
    };
    let start = Instant::now();
    let planned = match sweep::plan(&modes, &phases, a.scheme, select, how, &settings) {
        Ok(p) => p,
        Err(e) => return harness_error(e),
    };
    let planned: Vec<sweep::Planned> = planned
        .into_iter()
        .filter(|p| {
            a.only.is_empty()
                || a.only
                    .contains(&sweep::cell_name(p.mode, p.phase, &p.target, p.how))
        })
        .collect();
    eprintln!(
        "sweep: {} kills ({} mode(s), {} phase(s), {})",
        planned.len(),
        modes.len(),
        phases.len(),
        match select {
            sweep::Select::Full => "every hit".to_string(),
            sweep::Select::Quick => "one hit per point".to_string(),
            sweep::Select::Sample { extra, seed } =>
                format!("one hit per point and {extra} more drawn with --sample-seed {seed}"),
        }
    );
    let done = std::sync::atomic::AtomicUsize::new(0);
    let run: Vec<campaign::Cell> = campaign::in_parallel(planned.len(), a.jobs, |i| {
        let p = &planned[i];
        let cell = sweep::run_cell(p.mode, p.phase, &p.target, p.how, a.scheme, &settings);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        eprintln!(
            "[{n}/{}] {}: {} ({}{}) {:.1} s",
            planned.len(),
            cell.scenario,
            cell.outcome,
            cell.verdict,
            if cell.ok() {
                String::new()
            } else {
                format!(
                    ": {}; expected {}; replay: {}",
                    cell.why, cell.expected, cell.replay
                )
            },
            cell.time_s
        );
        cell
    });
    let cells: Vec<(sweep::Planned, campaign::Cell)> = planned.into_iter().zip(run).collect();
    let time_s = start.elapsed().as_secs_f64();
    let ok = cells.iter().filter(|(_, c)| c.ok()).count();
    let never = cells.iter().filter(|(_, c)| c.verdict == "NEVER").count();
    print!("{}", sweep::counts_table(&cells));
    if !a.no_results {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let written = sweep::write_results(&a.out, &name, &command, a.scheme, &cells, time_s);
        if let Err(code) = name_written(written, Named::Stderr) {
            return code;
        }
    }
    println!(
        "sweep {name}: {ok} of {} kills as expected, {never} NEVER, in {time_s:.0} s",
        cells.len()
    );
    if ok == cells.len() && !cells.is_empty() {
        ExitCode::SUCCESS
    } else {
        Code::Failed.into()
    }
}
