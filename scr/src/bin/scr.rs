//! `scr`: the command-line tool for SCR's files and directories.
//!
//! Exit codes: the table of [`scr::exit`] (docs/exit-codes.md), printed by
//! `scr --help`; each subcommand's `--help` lists the codes it uses.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use scr::exit::Code;
use scr::interval::estimate;
use scr::interval::model::Level;

use error::{CliError, LevelError};

#[path = "scr/error.rs"]
mod error;
#[path = "scr/flush_file.rs"]
mod flush_file_cmd;
#[path = "scr/halt.rs"]
mod halt_cmd;
#[path = "scr/have_restart.rs"]
mod have_restart_cmd;
#[path = "scr/launch_cmds.rs"]
mod launch_cmds;
#[path = "scr/run.rs"]
mod run_cmd;
#[path = "scr/scavenge.rs"]
mod scavenge;

/// Inspect and manage SCR checkpoint metadata.
#[derive(Parser)]
#[command(name = "scr", version, about, after_help = scr::exit::help_text())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a kvtree file (filemap, index, summary, halt, ...) in the
    /// developer guide's indented form, like scr_print_hash_file. A file
    /// that goes on past its header (XOR/RS/redundancy files: header, then
    /// parity) prints its header, then how many payload bytes follow.
    #[command(after_help = scr::exit::help_for(
        "A file that does not exist is ABSENT; one that is not a kvtree file, DAMAGED.",
        &[Code::Success, Code::Usage, Code::Absent, Code::Damaged, Code::Failed],
    ))]
    Print {
        /// The file to print.
        file: PathBuf,
        /// Print as JSON (keys map to objects) instead of the indented form.
        #[arg(long)]
        json: bool,
    },
    /// Print the effective SCR configuration: every parameter, its value and
    /// where it came from (environment, user file:line, SCR_Config via
    /// <prefix>/.scr/app.conf, system file:line, default), then the group,
    /// store and redundancy descriptors. Reads the same sources as a job
    /// started from this environment. Warnings go to stderr.
    #[command(after_help = scr::exit::help_for(
        "KEY without a value exits NO; a bad configuration, CONFIG (the message names the file and line).",
        &[Code::Success, Code::No, Code::Usage, Code::Config],
    ))]
    Config {
        /// Print only this parameter's value, or a descriptor sub-value in
        /// SCR_Config query form ("CKPT=0 TYPE").
        key: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Compute checkpoint intervals (Young, Daly, the SC10 multi-level
    /// optimum) from SCR logs or from figures given directly.
    ///
    /// Inputs: one or more `--log` files (SCR text logs, `<prefix>/.scr/log`,
    /// LLNL's or ours; any jobs) or `--db` log databases
    /// (`<prefix>/.scr/log.db`), and/or figures that override them:
    /// `--cost`/`--mtbf`/`--restart` for one level, or `--level` repeated for
    /// several, cheapest first. A level is `COST:MTBF[:RESTART]`, each in seconds or with units (`15s:2h`),
    /// where MTBF is the mean time between failures that need this level
    /// (survived by it and higher levels, by no lower one); write
    /// `COST:rate=R[:RESTART]` to give the rate per second instead. RESTART
    /// defaults to COST. Example (the SC10 Coastal system):
    /// `scr interval --level 15:rate=8.54e-7 --level 1835:rate=2.01e-7`.
    ///
    /// From logs: level 1 is the cache checkpoint (write + encode), level 2
    /// adds the synchronous flush; the failure rate is split between them by
    /// how many relaunches fetched from the prefix. MTBF is the censored
    /// maximum-likelihood estimate: runs that finished or whose allocation
    /// ended are not failures.
    #[command(verbatim_doc_comment, after_help = scr::exit::help_for(
        "Missing or contradictory figures are USAGE; a malformed log line under --strict, DAMAGED.",
        &[Code::Success, Code::Usage, Code::Damaged, Code::Failed],
    ))]
    Interval {
        /// SCR text log files.
        #[arg(long = "log", value_name = "FILE", num_args = 1..)]
        logs: Vec<PathBuf>,
        /// SCR log databases (SCR_LOG_DB_ENABLE): SQLite files, or a server
        /// as postgresql://USER[:PASS]@HOST[:PORT]/DBNAME or (MySQL/MariaDB)
        /// mysql://USER[:PASS]@HOST[:PORT]/DBNAME.
        #[arg(long = "db", value_name = "FILE|URL", num_args = 1..)]
        dbs: Vec<PathBuf>,
        /// Checkpoint cost, seconds or with units (90, 90s, 2m; single
        /// level; overrides the logs).
        #[arg(long, value_name = "DURATION", value_parser = scr::units::seconds_f64)]
        cost: Option<f64>,
        /// Mean time between failures, seconds or with units (86400, 1h,
        /// 2h30m, 1d; overrides the logs).
        #[arg(long, value_name = "DURATION", value_parser = scr::units::seconds_f64)]
        mtbf: Option<f64>,
        /// Restart cost, seconds or with units (default: the logs' or the
        /// checkpoint cost).
        #[arg(long, value_name = "DURATION", value_parser = scr::units::seconds_f64)]
        restart: Option<f64>,
        /// A level COST:MTBF[:RESTART] or COST:rate=R[:RESTART]; repeat,
        /// cheapest first.
        #[arg(long = "level", value_name = "COST:MTBF[:RESTART]")]
        levels: Vec<String>,
        /// Stop at the first malformed log line instead of skipping it.
        #[arg(long)]
        strict: bool,
        /// Also print the single-level model curve (efficiency against interval).
        #[arg(long)]
        table: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Copy a dataset from this node's cache to the prefix directory
    /// (SCR's scr_copy; one node, no MPI), writing <D>/.scr/<rank>.scrfilemap
    /// per rank and comparing CRC32s on the way. Reports the PARTNER copies
    /// held here; `--partner` restores them for ranks not yet saved.
    #[command(after_help = scr::exit::help_for(
        "SUCCESS: every file copied. INCOMPLETE: some file not copied (listed; its rank will be rebuilt or marked missing by `scr index`).",
        &[Code::Success, Code::Usage, Code::Incomplete, Code::NotCached, Code::Damaged, Code::Failed],
    ))]
    Copy(scavenge::CopyArgs),
    /// Check, repair and index dataset directories in the prefix (SCR's
    /// scr_index): --list, --current NAME, --drop NAME, --drop-after NAME,
    /// --add DIR (scan rank filemaps, rebuild missing ranks from XOR/RS
    /// parity in the directory, write summary and rank2file, index it),
    /// --rebuild (a damaged index is moved aside and rebuilt).
    #[command(after_help = scr::exit::help_for(
        "INCOMPLETE: --add/--rebuild indexed something as incomplete. DAMAGED: the index is damaged; it is reported, not touched, except by --rebuild.",
        &[Code::Success, Code::Usage, Code::Incomplete, Code::Damaged, Code::Failed],
    ))]
    Index(scavenge::IndexArgs),
    /// After the last run of an allocation: scavenge the newest checkpoint
    /// (and pending output) that the flush file says is only in cache, from
    /// every node that is up, rebuild what lost nodes held, index it and
    /// make it current (SCR's scr_postrun). Nodes: --node-root for simulated
    /// nodes, --launch for real ones, or this machine alone.
    #[command(after_help = scr::exit::help_for(
        "SUCCESS: nothing to do, or every dataset saved whole. INCOMPLETE: some dataset incomplete or failed (see the report).",
        &[Code::Success, Code::Usage, Code::Incomplete, Code::Damaged, Code::Config, Code::Failed],
    ))]
    Postrun(scavenge::PostrunArgs),
    /// Set, unset or list the halt conditions of a job (scr_halt): halt
    /// after N checkpoints, before or after a time, now; edits
    /// `<prefix>/.scr/halt.scr` under its lock while the job runs.
    Halt(halt_cmd::HaltArgs),
    /// Ask the flush file (`<prefix>/.scr/flush.scr`) about datasets
    /// (scr_flush_file): the newest, whether one needs a flush, where it is,
    /// its directory.
    FlushFile(flush_file_cmd::FlushFileArgs),
    /// Run a job in its allocation until it finishes (SCR's scr_run): health
    /// checks before each launch, relaunch on the healthy nodes (spares take
    /// the places of lost ones), SCR_RUNS, SCR_MIN_NODES, halt conditions,
    /// every launch bounded, then `scr postrun`. Usage:
    /// `scr run [OPTIONS] -- LAUNCHER [LAUNCHER-ARGS] APP [ARGS]`.
    #[command(after_help = scr::exit::help_for(
        "The job finished or halted: SUCCESS; SCR_RUNS spent, too few nodes or no launcher: FAILED.",
        &[Code::Success, Code::Usage, Code::Config, Code::Failed],
    ))]
    Run(run_cmd::RunArgs),
    /// `scr run -- srun ...` (SCR's scr_srun): `scr srun [OPTIONS] -- [SRUN-ARGS] APP [ARGS]`.
    #[command(after_help = scr::exit::help_for(
        "As scr run.",
        &[Code::Success, Code::Usage, Code::Config, Code::Failed],
    ))]
    Srun(run_cmd::RunArgs),
    /// `scr run -- jsrun ...` on LSF (SCR's scr_jsrun): `scr jsrun [OPTIONS] [JSRUN-ARGS] APP [ARGS]`.
    #[command(after_help = scr::exit::help_for(
        "As scr run.",
        &[Code::Success, Code::Usage, Code::Config, Code::Failed],
    ))]
    Jsrun(run_cmd::RunArgs),
    /// `scr run -- mpirun ...` (SCR's scr_mpirun): `scr mpirun [OPTIONS] [MPIRUN-ARGS] APP [ARGS]`.
    #[command(after_help = scr::exit::help_for(
        "As scr run.",
        &[Code::Success, Code::Usage, Code::Config, Code::Failed],
    ))]
    Mpirun(run_cmd::RunArgs),
    /// Check this node's control and cache bases (SCR's scr_check_node):
    /// prints `ok`, or `DOWN: reason` and exits NO.
    #[command(after_help = scr::exit::help_for(
        "A failing check exits NO.",
        &[Code::Success, Code::No, Code::Usage, Code::Config],
    ))]
    CheckNode(run_cmd::CheckNodeArgs),
    /// List the allocation's down nodes (SCR's scr_list_down_nodes):
    /// SCR_EXCLUDE_NODES, nodes SLURM reports down, nodes failing
    /// `scr check-node`. Exits NO when none is down.
    #[command(after_help = scr::exit::help_for(
        "No node down exits NO.",
        &[Code::Success, Code::No, Code::Usage, Code::Config],
    ))]
    ListDownNodes(run_cmd::ListDownArgs),
    /// Whether the job should stop instead of being relaunched (SCR's
    /// scr_retries_halt / scr_should_exit): prints the halt condition and
    /// exits SUCCESS, or exits NO.
    #[command(after_help = scr::exit::help_for(
        "No halt condition exits NO.",
        &[Code::Success, Code::No, Code::Usage, Code::Config],
    ))]
    ShouldExit(run_cmd::ShouldExitArgs),
    /// Prepare the prefix for a new allocation before its first launch
    /// (SCR's scr_prerun): the prefix must exist, its `.scr` directory is
    /// made, and the flush and nodes files an earlier allocation left are
    /// removed (they describe caches this allocation does not have). The
    /// index, the halt file and the datasets stay. `scr run` does this itself.
    #[command(after_help = scr::exit::help_for(
        "A prefix that is not a directory, or a file that cannot be removed: FAILED.",
        &[Code::Success, Code::Usage, Code::Config, Code::Failed],
    ))]
    Prerun(run_cmd::PrerunArgs),
    /// Count, index, subtract, intersect or compress host lists (SCR's
    /// scr_glob_hosts): `--count`, `--nth N` (-1 the last), `--minus
    /// S1:S2`, `--intersection S1:S2` of the list `--hosts` (or the
    /// argument) names; `--compress` turns `h1,h2,h3` into `h[1-3]`.
    #[command(after_help = scr::exit::help_for(
        "A list that is not a host list, or an index out of its range: USAGE.",
        &[Code::Success, Code::Usage],
    ))]
    GlobHosts(run_cmd::GlobHostsArgs),
    /// Print the name of the checkpoint a restart would load (SCR's
    /// scr_have_restart): an MPI program, run under the job's launcher on
    /// its nodes. SCR_Init restarts in place as the application's would
    /// (rebuild, fetch); rank 0 prints the name, or nothing when there is
    /// none. No flush, no exit reason: the job goes on. `scr run` runs it
    /// before a launch given `--restart-cmd`.
    #[command(after_help = scr::exit::help_for(
        "Printed a name or nothing: SUCCESS; an SCR or MPI error ends the job with FAILED.",
        &[Code::Success, Code::Failed],
    ))]
    HaveRestart {
        /// Print `SCR_RESTART_NAME=NAME`, or `SCR_RESTART_NAME=` when there
        /// is none (what `scr run` reads: no other line looks like it).
        #[arg(long)]
        tagged: bool,
    },
}

/// The arguments as the `scr` parser takes them: invoked by one of SCR 3.1's
/// names ([`scr::cli_docs::SCR31_COMMANDS`]), that name's subcommand goes first.
fn with_subcommand(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match scr::cli_docs::SCR31_COMMANDS
        .iter()
        .find(|(old, _)| *old == name)
    {
        Some((_, sub)) => {
            let mut out = vec![std::ffi::OsString::from("scr"), (*sub).into()];
            // SCR 3.1's scr_list_down_nodes exits 1 when a node is down;
            // its scr_retries_halt halts a job that finished.
            if matches!(*sub, "list-down-nodes" | "should-exit") {
                out.push("--scr31".into());
            }
            // Its scr_should_exit also stops a job left with too few nodes.
            if name == "scr_should_exit" {
                out.push("--check-nodes".into());
            }
            out.extend(args.into_iter().skip(1));
            out
        }
        None => args,
    }
}

fn main() -> ExitCode {
    // Output piped into `head` must end the tool quietly, as for any Unix
    // filter, instead of panicking in println! on EPIPE.
    scr::exit::default_sigpipe();
    // `scr generate SHARE` (ci/install): the man pages and completions,
    // written under SHARE (scr::cli_docs); one path per line.
    let args: Vec<_> = std::env::args_os().collect();
    let outcome = match scr::cli_docs::asked("scr", &args) {
        Some(share) => generate(&share.unwrap_or_else(|e| e.exit())),
        None => run(Cli::parse_from(with_subcommand(args))),
    };
    match outcome {
        Ok(()) => Code::Success.into(),
        Err(e) => {
            // A plain "no" (scr flush-file --needflush) says nothing.
            if !matches!(e, CliError::No) {
                eprintln!("{}", scr::exit::error_report("scr", &e));
            }
            e.code().into()
        }
    }
}

fn generate(share: &std::path::Path) -> Result<(), CliError> {
    for path in scr::cli_docs::generate(Cli::command(), share)? {
        println!("{}", path.display());
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Print { file, json } => {
            let got = scr::kvtree::file::read_with_payload(&file)?;
            let tree = &got.tree;
            if json {
                println!("{}", scr::kvtree::print::to_json(tree));
                if got.payload_bytes > 0 {
                    // Standard output stays one JSON document.
                    eprintln!("{} payload bytes follow the header", got.payload_bytes);
                }
            } else {
                print!("{}", scr::kvtree::print::to_indented(tree, 2));
                if got.payload_bytes > 0 {
                    println!(
                        "-- {} payload bytes follow the {}-byte header",
                        got.payload_bytes, got.header_bytes
                    );
                }
            }
            Ok(())
        }
        Command::Config { key, json } => config(key.as_deref(), json),
        Command::Copy(a) => scavenge::copy(a),
        Command::Index(a) => scavenge::index(a),
        Command::Postrun(a) => scavenge::postrun(a),
        Command::Interval {
            logs,
            dbs,
            cost,
            mtbf,
            restart,
            levels,
            strict,
            table,
            json,
        } => interval(IntervalArgs {
            logs,
            dbs,
            cost,
            mtbf,
            restart,
            levels,
            strict,
            table,
            json,
        }),
        Command::Halt(args) => halt_cmd::run(args),
        Command::FlushFile(args) => flush_file_cmd::run(args),
        Command::Run(args) => run_cmd::run(args, None),
        Command::Srun(args) => run_cmd::run(args, Some("srun")),
        Command::Jsrun(args) => run_cmd::run(args, Some("jsrun")),
        Command::Mpirun(args) => run_cmd::run(args, Some("mpirun")),
        Command::CheckNode(args) => run_cmd::check_node_cmd(args),
        Command::ListDownNodes(args) => run_cmd::list_down_nodes(args),
        Command::ShouldExit(args) => run_cmd::should_exit(args),
        Command::Prerun(args) => run_cmd::prerun_cmd(args),
        Command::GlobHosts(args) => run_cmd::glob_hosts(args),
        Command::HaveRestart { tagged } => have_restart_cmd::have_restart(tagged),
    }
}

fn config(key: Option<&str>, json: bool) -> Result<(), CliError> {
    use scr::config::{report::Report, Config, LoadOptions, ProcessEnv};
    if let Some(k) = key {
        // Only queries: the last item must be a bare name ("SCR_FLUSH", "CKPT=0 TYPE").
        if k.split_whitespace()
            .last()
            .is_none_or(|item| item.contains('='))
        {
            return Err(CliError::Usage(format!(
                "scr config only queries: give a name like SCR_FLUSH or \"CKPT=0 TYPE\", not {k:?}"
            )));
        }
    }
    let opts = LoadOptions {
        system_file: None,
        read_app_conf: true,
    };
    let mut cfg = Config::load(&ProcessEnv, &opts)?;
    for w in cfg.all_warnings() {
        eprintln!("scr: warning: {w}");
    }
    match key {
        Some(k) => match cfg.apply_scr_config(k)? {
            Some(v) => {
                // A secret (SCR_LOG_DB_PASS, a password in a URL) is never
                // printed: the query says it is set, as `***`.
                let name = k.split_whitespace().last().unwrap_or(k);
                let v = scr::config::secret::shown_value(name, &v);
                if json {
                    println!("{}", serde_json::json!({ "name": k, "value": v }));
                } else {
                    println!("{v}");
                }
            }
            None => {
                let name = k.split_whitespace().last().unwrap_or(k);
                let known = scr::config::params::info(name).is_some()
                    || scr::config::params::DESCRIPTOR_KEYS.contains(&name)
                    || scr::config::params::STORE_KEYS.contains(&name)
                    || scr::config::params::CKPT_KEYS.contains(&name);
                // A name of no parameter that nobody set is a typo, not "not
                // set"; a name of the user's own that is set was printed above.
                if !known && !k.contains(char::is_whitespace) {
                    return Err(CliError::UnknownParam {
                        key: k.to_string(),
                        nearest: nearest_param(k),
                    });
                }
                return Err(CliError::NotSet { key: k.to_string() });
            }
        },
        None => {
            let report = Report::new(&cfg)?;
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
        }
    }
    Ok(())
}

/// The SCR parameter whose name is nearest to `name` (edit distance,
/// case-insensitive), when it is near enough to be a typo of it.
fn nearest_param(name: &str) -> Option<String> {
    let want = name.to_ascii_uppercase();
    scr::config::params::PARAMS
        .iter()
        .map(|p| (edit_distance(&want, p.name), p.name))
        .min()
        .filter(|(d, known)| *d <= (known.len() / 3).max(2))
        .map(|(_, known)| known.to_string())
}

/// Levenshtein distance of two ASCII-ish names (one row of the table).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (up + 1).min(row[j] + 1).min(diag + usize::from(ca != *cb));
            diag = up;
        }
    }
    row[b.len()]
}

struct IntervalArgs {
    logs: Vec<PathBuf>,
    dbs: Vec<PathBuf>,
    cost: Option<f64>,
    mtbf: Option<f64>,
    restart: Option<f64>,
    levels: Vec<String>,
    strict: bool,
    table: bool,
    json: bool,
}

fn positive(what: &'static str, text: &str) -> Result<f64, LevelError> {
    match scr::units::seconds_f64(text) {
        Ok(v) if v > 0.0 => Ok(v),
        _ => Err(LevelError::NotPositive {
            what,
            value: text.to_string(),
        }),
    }
}

fn parse_level(text: &str) -> Result<Level, LevelError> {
    let parts: Vec<&str> = text.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(LevelError::Form {
            text: text.to_string(),
        });
    }
    let cost = positive("level cost", parts[0])?;
    let rate = match parts[1].trim().strip_prefix("rate=") {
        Some(r) => match r.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => v,
            _ => {
                return Err(LevelError::Rate {
                    text: text.to_string(),
                    rate: r.to_string(),
                })
            }
        },
        None => 1.0 / positive("level MTBF", parts[1])?,
    };
    let restart = match parts.get(2) {
        Some(r) => positive("level restart", r)?,
        None => cost,
    };
    Ok(Level {
        checkpoint_cost_s: cost,
        restart_cost_s: restart,
        failure_rate_per_s: rate,
    })
}

fn interval(args: IntervalArgs) -> Result<(), CliError> {
    // Each log streams through the digest: memory holds what the
    // estimators need of each record, not the records.
    let mut digest = estimate::Digest::default();
    let mut skipped = 0;
    for path in &args.logs {
        let parsed = scr::log::read_log_each(path, args.strict, |r| digest.add(&r)).map_err(
            |e| match e {
                scr::log::LogError::Line { .. } => CliError::StrictLog(e),
                _ => CliError::Log(e),
            },
        )?;
        for e in &parsed.first_errors {
            eprintln!("scr interval: skipped: {e}");
        }
        // Warnings are bounded: the first few, then a count.
        if parsed.skipped > parsed.first_errors.len() {
            eprintln!(
                "scr interval: {}: {} more malformed lines skipped ({} in all; the first {} shown)",
                path.display(),
                parsed.skipped - parsed.first_errors.len(),
                parsed.skipped,
                parsed.first_errors.len()
            );
        }
        skipped += parsed.skipped;
    }
    for path in &args.dbs {
        let shown = path.to_string_lossy();
        let mut add = |r: scr::log::Record| digest.add(&r);
        if scr::log::store::is_mysql_url(&shown) {
            let user = std::env::var("USER").ok();
            scr::log::mysql::MySettings::parse(&shown, None, None, None, user.as_deref())
                .and_then(|s| scr::log::mysql::each_record(&s, &mut add))
        } else if scr::log::server::is_server(&shown) {
            let user = std::env::var("USER").ok();
            scr::log::server::ServerSettings::parse(&shown, None, None, None, user.as_deref())
                .and_then(|s| scr::log::server::each_record(&s, &mut add))
        } else {
            scr::log::db::each_record(path, &mut add)
        }?;
    }
    let est = (!args.logs.is_empty() || !args.dbs.is_empty()).then(|| digest.estimate(0.95));
    let levels = if !args.levels.is_empty() {
        if args.cost.is_some() || args.mtbf.is_some() {
            return Err(LevelError::Both.into());
        }
        args.levels
            .iter()
            .map(|l| parse_level(l))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        {
            let overrides = scr::interval::Overrides {
                checkpoint_cost_s: args.cost,
                mtbf_s: args.mtbf,
                restart_cost_s: args.restart,
            };
            scr::interval::levels_from(est.as_ref(), &overrides)?
        }
    };
    let advice = scr::interval::advise(&levels)?;
    if args.json {
        // Written as it is serialized: with a log of many jobs the per-job
        // estimates are most of it (152 MB for 649,072 jobs), and a
        // `serde_json::Value` of them took 2.6 times the peak memory of the
        // estimate itself (results/hardening.md).
        #[derive(serde::Serialize)]
        struct Out<'a> {
            advice: &'a scr::interval::Advice,
            checkpoint_cost_s: f64,
            daly_s: f64,
            log_estimates: &'a Option<estimate::LogEstimates>,
            log_lines_skipped: usize,
            mtbf_s: f64,
            young_s: f64,
        }
        let out = Out {
            advice: &advice,
            checkpoint_cost_s: advice.checkpoint_cost_s,
            daly_s: advice.daly_s,
            log_estimates: &est,
            log_lines_skipped: skipped,
            mtbf_s: advice.mtbf_s,
            young_s: advice.young_s,
        };
        use std::io::Write as _;
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut w, &out)?;
        writeln!(w).map_err(serde_json::Error::io)?;
        w.flush().map_err(serde_json::Error::io)?;
        return Ok(());
    }
    if let Some(e) = &est {
        print_estimates(e, skipped);
    }
    print_advice(&advice);
    if args.table {
        let lo = advice.optimum_s / 10.0;
        println!("\nmodel curve (single level): interval_s  efficiency");
        for (t, e) in scr::interval::efficiency_curve(
            advice.checkpoint_cost_s,
            advice.restart_cost_s,
            advice.mtbf_s,
            lo,
            lo * 100.0,
            21,
        ) {
            println!("  {t:>12.0}  {:>6.2} %", 100.0 * e);
        }
    }
    Ok(())
}

/// Jobs whose own MTBF the text output lists (a log of a million runs has
/// hundreds of thousands of jobs).
const JOBS_SHOWN: usize = 20;

fn print_estimates(e: &estimate::LogEstimates, skipped: usize) {
    println!(
        "from the logs ({} runs, {skipped} malformed lines skipped):",
        e.runs
    );
    let cost = |name: &str, c: &Option<estimate::CostStats>| {
        match c {
        Some(c) => println!(
            "  {name:<22} mean {:>9.2} s  sd {:>8.2} s  95 % CI of mean [{:.2}, {:.2}]  ({} samples)",
            c.mean_s, c.sd_s, c.mean_ci_s.0, c.mean_ci_s.1, c.samples
        ),
        None => println!("  {name:<22} not logged"),
    }
    };
    cost("checkpoint (cache)", &e.cache_checkpoint);
    cost("flush (sync)", &e.sync_flush);
    cost("flush (async)", &e.async_flush);
    cost("restart", &e.restart);
    match &e.mtbf {
        Some(m) => println!(
            "  MTBF                   {}  95 % CI [{:.0}, {:.0}] s  ({} failures, {} censored runs, {:.0} s exposure)",
            m.mtbf_s.map_or("none observed".to_string(), |v| format!("{v:.0} s")),
            m.mtbf_ci_s.0,
            m.mtbf_ci_s.1,
            m.failures,
            m.censored,
            m.exposure_s
        ),
        None => println!("  MTBF                   no runs"),
    }
    if e.per_job.len() > 1 {
        for (job, m) in e.per_job.iter().take(JOBS_SHOWN) {
            println!(
                "    job {job:<18} {} failures in {:.0} s, MTBF {}",
                m.failures,
                m.exposure_s,
                m.mtbf_s
                    .map_or(format!("> {:.0} s (95 %)", m.mtbf_ci_s.0), |v| format!(
                        "{v:.0} s"
                    ))
            );
        }
        if e.per_job.len() > JOBS_SHOWN {
            println!(
                "    … and {} more jobs (--json lists every one)",
                e.per_job.len() - JOBS_SHOWN
            );
        }
    }
    if let Some(w) = &e.weibull {
        println!("  Weibull                shape {:.2} scale {:.0} s ({} failures; shape < 1: failures cluster early in runs)", w.shape, w.scale_s, w.failures);
    }
    if let Some(f) = e.prefix_restart_fraction {
        println!(
            "  restarts from prefix   {:.0} % of relaunches after a failure",
            100.0 * f
        );
    }
    println!();
}

fn print_advice(a: &scr::interval::Advice) {
    println!(
        "single level: checkpoint {:.1} s, restart {:.1} s, MTBF {:.0} s",
        a.checkpoint_cost_s, a.restart_cost_s, a.mtbf_s
    );
    println!(
        "  Young   sqrt(2 d M)     {:>12.0} s  efficiency {:>6.2} %",
        a.young_s,
        100.0 * a.young_efficiency
    );
    println!(
        "  Daly    higher order    {:>12.0} s  efficiency {:>6.2} %",
        a.daly_s,
        100.0 * a.daly_efficiency
    );
    println!(
        "  model   exact optimum   {:>12.0} s  efficiency {:>6.2} %  (within 1 %: {:.0}..{:.0} s)",
        a.optimum_s,
        100.0 * a.optimum_efficiency,
        a.flat_region_s.0,
        a.flat_region_s.1
    );
    if let Some(m) = &a.multi_level {
        println!(
            "multi-level (Moody et al. SC10 model), {} levels:",
            m.levels.len()
        );
        for (i, (l, t)) in m.levels.iter().zip(&m.level_intervals_s).enumerate() {
            println!(
                "  level {}: cost {:.1} s, restart {:.1} s, failure rate {:.3e}/s, checkpoint every {:.0} s of compute",
                i + 1,
                l.checkpoint_cost_s,
                l.restart_cost_s,
                l.failure_rate_per_s,
                t
            );
        }
        if let Some(n) = m.level1_per_level2 {
            println!("  {n} level-1 checkpoints per level-2 one");
        }
        println!("  expected efficiency {:.2} %", 100.0 * m.efficiency);
        println!(
            "  first order (Benoit et al. 2017): every {:.0} s, counts {} (level 1 first), efficiency {:.2} %",
            m.first_order_pattern.interval_s,
            m.first_order_pattern
                .counts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            100.0 * m.first_order_efficiency
        );
    }
    println!("SCR_CHECKPOINT_SECONDS={}", a.scr_checkpoint_seconds);
    println!(
        "SCR_CHECKPOINT_OVERHEAD={:.2}",
        a.scr_checkpoint_overhead_percent
    );
    if let Some(m) = &a.multi_level {
        if let Some(&c) = m.pattern.counts.first() {
            println!(
                "# one checkpoint in every {c} at level 2 (checkpoint descriptor INTERVAL={c})"
            );
        }
    }
}
