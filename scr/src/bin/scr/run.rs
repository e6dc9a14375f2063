//! `scr run`, `scr srun`: the run loop of SCR's `scr_run`/`scr_srun` inside
//! an allocation ([`scr::runloop`]), and the node commands it uses:
//! `scr check-node`, `scr list-down-nodes`, `scr should-exit`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use scr::config::{Config, LoadOptions, ProcessEnv, Settings};
use scr::launch::rm::{FluxLauncher, JsrunLauncher, SrunLauncher};
use scr::launch::{Launcher, MpirunLauncher};
use scr::runloop::health::{check_node, expand_hostlist, StorageCheck};
use scr::runloop::nodes::{allocation_nodes, hostfile_text};
use scr::runloop::probe::{ProbeCheck, DOWN_MARK};
use scr::runloop::{halt_condition, Hooks, LoopResult, LoopSpec, RunLoop, Stop};

use crate::error::CliError;

/// Options of `scr run` and `scr srun`.
#[derive(Args, Debug)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// The prefix directory (default: SCR_PREFIX, else the current directory).
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Nodes each launch runs on (default: the launcher's -N/--nodes, else
    /// every node of the allocation; the others are spares).
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Ranks on each node (default: the launcher's rank count / nodes, else 1).
    #[arg(long, value_name = "K")]
    ranks_per_node: Option<usize>,
    /// Most launches (default: SCR_RUNS; 0: until the nodes run out).
    #[arg(long, value_name = "N")]
    runs: Option<u32>,
    /// Fewest nodes to launch on (default: SCR_MIN_NODES, else --nodes).
    #[arg(long, value_name = "N")]
    min_nodes: Option<usize>,
    /// Bound on each launch in seconds: a launch still running is killed and
    /// counted as failed (default: until 300 s past the allocation's end,
    /// SCR_END_TIME, else 86400; units accepted: 2h, 1d). SCR_WATCHDOG=1
    /// adds SCR 3.1's watchdog: a launch without a new checkpoint or flush
    /// for SCR_WATCHDOG_TIMEOUT (SCR_WATCHDOG_TIMEOUT_PFS while flushing)
    /// is killed too.
    #[arg(long, value_name = "DURATION", value_parser = scr::units::seconds_u64)]
    watchdog: Option<u64>,
    /// Bound on each node's health check in seconds.
    #[arg(long, value_name = "DURATION", default_value_t = 15, value_parser = scr::units::seconds_u64)]
    check_timeout: u64,
    /// The allocation's nodes from this hostfile (mpirun outside a resource
    /// manager's allocation).
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// Do not run `scr postrun` after the loop.
    #[arg(long)]
    no_postrun: bool,
    /// The launcher and its arguments (`scr run` only: srun, mpirun,
    /// mpiexec, flux, jsrun; `scr srun`, `scr jsrun` and `scr mpirun` name
    /// theirs), then the application and its arguments. A
    /// second `--` may separate the launcher's arguments from the application.
    /// SCR 3.1's `-rc`/`--run-cmd CMD` (the command to run when there is no
    /// checkpoint to restart from, instead of an application) and
    /// `-rs`/`--restart-cmd CMD` (the command to run when there is one,
    /// `SCR_CKPT_NAME` in it replaced by its name, which `scr have-restart`
    /// finds on the launch's nodes first) may stand among the launcher's
    /// arguments; each command is split at blanks.
    #[arg(
        required = true,
        allow_hyphen_values = true,
        value_name = "LAUNCHER-ARGS... APP ARGS..."
    )]
    command: Vec<String>,
}

/// Options of `scr check-node`.
#[derive(Args, Debug)]
pub struct CheckNodeArgs {
    /// A storage base to check (repeat; default: SCR_CNTL_BASE and
    /// SCR_CACHE_BASE, else /dev/shm).
    #[arg(long = "path", value_name = "DIR")]
    paths: Vec<PathBuf>,
    /// Least total capacity each base must have, in bytes (units
    /// accepted: 512MB, 1GB, 1G).
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = scr::units::bytes)]
    capacity: u64,
}

/// Options of `scr list-down-nodes`.
#[derive(Args, Debug)]
pub struct ListDownArgs {
    /// Nodes to check (hostlist; default: the allocation's).
    #[arg(long, value_name = "LIST")]
    nodes: Option<String>,
    /// The nodes to check, given without --nodes (as SCR 3.1 takes them).
    #[arg(value_name = "NODESET", conflicts_with = "nodes")]
    nodeset: Option<String>,
    /// Nodes to count as down without checking them (hostlist).
    #[arg(short, long, value_name = "NODESET")]
    down: Option<String>,
    /// Print the reason of each down node.
    #[arg(short, long)]
    reason: bool,
    /// SCR 3.1's output and exit codes (how `scr_list_down_nodes` runs):
    /// the down nodes as one compressed host list, exit 1 when any is
    /// down and 0, printing nothing, when none is.
    #[arg(long)]
    scr31: bool,
    /// Bound on each node's check in seconds.
    #[arg(long, value_name = "DURATION", default_value_t = 15, value_parser = scr::units::seconds_u64)]
    check_timeout: u64,
    /// The launcher that runs `scr check-node` on each node (srun, mpirun,
    /// mpiexec, flux, jsrun; default: srun inside SLURM, else no check on
    /// the nodes, only SCR_EXCLUDE_NODES and --down). SCR 3.1's `-j`.
    #[arg(short = 'j', long, value_name = "LAUNCHER")]
    joblauncher: Option<String>,
    /// Log a NODE_FAIL event with its reason for each down node, as the
    /// job's ranks log (SCR_LOG_ENABLE and the sinks it names).
    #[arg(short, long)]
    log: bool,
    /// Seconds the job has been running, logged with each NODE_FAIL.
    #[arg(short, long, value_name = "SECONDS", requires = "log")]
    secs: Option<f64>,
    /// SCR 3.1's "test free space, not capacity": accepted so that 3.1's
    /// job scripts run, and refused with a warning (no capacity is
    /// checked here; 3.1's own check does not pass it on either).
    #[arg(short, long)]
    free: bool,
}

/// Options of `scr should-exit`.
#[derive(Args, Debug)]
pub struct ShouldExitArgs {
    /// The prefix directory (default: SCR_PREFIX, else the current
    /// directory; `--dir` as SCR 3.1's scr_retries_halt names it, `-p` as
    /// its scr_should_exit).
    #[arg(short, long, visible_alias = "dir", value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Read the halt file as SCR 3.1's scr_retries_halt does (how
    /// `scr_retries_halt` runs): `SCR_FINALIZE_CALLED` means halt (the job
    /// finished), and so does a halt file that cannot be read.
    #[arg(long)]
    scr31: bool,
    /// Also stop when too few healthy nodes are left for another launch
    /// (how `scr_should_exit` runs): the allocation's nodes less the down
    /// ones (--down, SCR_EXCLUDE_NODES, SLURM's word, `scr check-node` on
    /// each) against the nodes needed (SCR_MIN_NODES, else the last run's
    /// from the nodes file, else the whole allocation).
    #[arg(long)]
    check_nodes: bool,
    /// Nodes to count as down without checking them (hostlist).
    #[arg(long, value_name = "NODESET", requires = "check_nodes")]
    down: Option<String>,
    /// The launcher that runs the node checks (as for list-down-nodes).
    #[arg(short = 'j', long, value_name = "LAUNCHER", requires = "check_nodes")]
    joblauncher: Option<String>,
    /// Bound on each node's check in seconds.
    #[arg(long, value_name = "DURATION", default_value_t = 15, value_parser = scr::units::seconds_u64)]
    check_timeout: u64,
    /// Say why the job goes on, too (the nodes found down, healthy nodes
    /// against the nodes needed).
    #[arg(short, long)]
    verbose: bool,
}

/// Options of `scr prerun`.
#[derive(Args, Debug)]
pub struct PrerunArgs {
    /// The prefix directory (default: SCR_PREFIX, else the current
    /// directory; `-p` as in SCR 3.1).
    #[arg(short, long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Print what was done: the prefix, each file removed, the time taken.
    #[arg(short, long)]
    verbose: bool,
}

/// Options of `scr glob-hosts` (SCR 3.1's scr_glob_hosts): one host list
/// in, one answer out. `-h` is `--hosts` as in SCR; help is `--help`.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
#[command(group(clap::ArgGroup::new("set").required(true)
    .args(["hosts", "list", "minus", "intersection", "compress"])))]
pub struct GlobHostsArgs {
    /// Print the number of hosts.
    #[arg(short, long)]
    count: bool,
    /// Print the Nth host (1 the first, -1 the last).
    #[arg(short, long, value_name = "N", allow_negative_numbers = true)]
    nth: Option<i64>,
    /// The host list (`atlas[3,5-7,9-11]`).
    #[arg(short = 'h', long, value_name = "HOSTS")]
    hosts: Option<String>,
    /// The host list, given without --hosts.
    #[arg(value_name = "HOSTS")]
    list: Option<String>,
    /// The hosts of S1 that are not in S2.
    #[arg(short, long, value_name = "S1:S2")]
    minus: Option<String>,
    /// The hosts in both S1 and S2.
    #[arg(short, long, value_name = "S1:S2")]
    intersection: Option<String>,
    /// Print a comma-separated list of hosts compressed.
    #[arg(short = 'C', long, value_name = "HOST,HOST,...")]
    compress: Option<String>,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// `scr glob-hosts`: the set of hosts the options name, printed compressed,
/// counted, or its Nth host.
pub fn glob_hosts(a: GlobHostsArgs) -> Result<(), CliError> {
    use scr::runloop::health::compress_hostlist;
    let expand = |l: &str| expand_hostlist(l).map_err(|e| CliError::Usage(e.to_string()));
    let pair = |opt: &str, v: &str| -> Result<(Vec<String>, Vec<String>), CliError> {
        // The second list follows the last `:` (a host list has none).
        let (a, b) = v
            .rsplit_once(':')
            .ok_or_else(|| CliError::Usage(format!("--{opt} takes S1:S2, not {v:?}")))?;
        Ok((expand(a)?, expand(b)?))
    };
    let set = if let Some(csv) = &a.compress {
        println!("{}", compress_hostlist(&expand(csv)?));
        return Ok(());
    } else if let Some(v) = a.minus.as_ref().or(a.intersection.as_ref()) {
        // A set: its hosts once each, in the compressed list's order.
        let keep_common = a.minus.is_none();
        let (s1, s2) = pair(if keep_common { "intersection" } else { "minus" }, v)?;
        let kept: Vec<String> = s1
            .into_iter()
            .filter(|h| s2.contains(h) == keep_common)
            .collect();
        expand(&compress_hostlist(&kept))?
    } else {
        // The list as given: its order and any repeats.
        expand(a.hosts.as_deref().or(a.list.as_deref()).unwrap_or_default())?
    };
    if let Some(n) = a.nth {
        let len = set.len() as i64;
        let i = match n {
            1.. if n <= len => n - 1,
            ..=-1 if -n <= len => len + n,
            _ => {
                return Err(CliError::Usage(format!(
                    "host index {n} is out of range for a list of {len} hosts"
                )))
            }
        };
        println!("{}", set[i as usize]);
    } else if a.count {
        println!("{}", set.len());
    } else {
        println!("{}", compress_hostlist(&set));
    }
    Ok(())
}

fn config() -> Result<Config, CliError> {
    let opts = LoadOptions {
        system_file: None,
        read_app_conf: true,
    };
    Ok(Config::load(&ProcessEnv, &opts)?)
}

/// `SCR_EXCLUDE_NODES` of `settings`, expanded (hostlist syntax).
fn excluded_nodes(settings: &Settings) -> Result<Vec<String>, CliError> {
    match &settings.run.exclude_nodes {
        Some(l) => expand_hostlist(l).map_err(|e| CliError::Usage(e.to_string())),
        None => Ok(Vec::new()),
    }
}

fn prefix_of(given: Option<PathBuf>, cfg: &Config) -> PathBuf {
    given
        .or_else(|| cfg.get("SCR_PREFIX").map(|e| PathBuf::from(e.value)))
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

fn in_slurm() -> bool {
    std::env::var_os("SLURM_JOB_ID").is_some()
}

/// Options of a launcher that take a value in the next word (so that the
/// application is the first word that is neither an option nor a value).
const VALUE_OPTIONS: &[&str] = &[
    "-N",
    "-n",
    "-np",
    "-c",
    "-w",
    "-x",
    "-m",
    "-t",
    "-p",
    "-J",
    "-o",
    "-e",
    "-i",
    "-A",
    "-D",
    "-H",
    "-q",
    "--mpi",
    "--nodes",
    "--ntasks",
    "--nodelist",
    "--exclude",
    "--time",
    "--partition",
    "--job-name",
    "--output",
    "--error",
    "--cpus-per-task",
    "--distribution",
    "--export",
    "--host",
    "--hostfile",
    "--map-by",
    "--bind-to",
    "--rank-by",
    "--npernode",
    "--nrs",
    "--np",
    "--tasks_per_rs",
    "--rs_per_host",
    "--cpu_per_rs",
    "--env",
    "-E",
];

/// Placement options the loop sets itself (dropped from the user's, with
/// their value): node list, node and rank counts, distribution.
const PLACEMENT: &[&str] = &[
    "-N",
    "-n",
    "-np",
    "-w",
    "-x",
    "-m",
    "-H",
    "--nodes",
    "--ntasks",
    "--nodelist",
    "--exclude",
    "--distribution",
    "--host",
    "--hostfile",
    "--npernode",
    "--nrs",
    "--np",
    "--tasks_per_rs",
    "--rs_per_host",
];

/// The launcher's own words, what the loop reads from them, and the
/// application's words.
#[derive(Debug, Default, PartialEq, Eq)]
struct Split {
    launcher_args: Vec<String>,
    nodes: Option<usize>,
    total: Option<usize>,
    per_node: Option<usize>,
    app: Vec<String>,
}

/// Split `words` (after the launcher's name) into the launcher's arguments
/// and the application, reading and dropping the placement options.
fn split_launcher(launcher: &str, words: &[String]) -> Split {
    let mut s = Split::default();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            s.app = words[i + 1..].to_vec();
            return s;
        }
        if !w.starts_with('-') {
            break;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            // -N4, -n8: a short option with its value attached.
            _ if !w.starts_with("--")
                && w.len() > 2
                && !VALUE_OPTIONS.contains(&w.as_str())
                && VALUE_OPTIONS.contains(&&w[..2]) =>
            {
                (w[..2].to_string(), Some(w[2..].to_string()))
            }
            _ => (w.clone(), None),
        };
        // OpenMPI's --mca takes a name and a value.
        if name == "--mca" || name == "-mca" {
            s.launcher_args
                .extend(words[i..(i + 3).min(words.len())].iter().cloned());
            i += 3;
            continue;
        }
        let takes = inline.is_none() && VALUE_OPTIONS.contains(&name.as_str());
        let val = inline.or_else(|| takes.then(|| words.get(i + 1).cloned()).flatten());
        let num = val.as_deref().and_then(|v| v.parse::<usize>().ok());
        // srun's and flux run's -N is nodes; mpirun's is ranks per node.
        let mpirun = !matches!(launcher, "srun" | "flux");
        match name.as_str() {
            "-N" | "--nodes" if !mpirun => s.nodes = num,
            "-N" | "--npernode" if mpirun => s.per_node = num,
            "-n" | "--ntasks" | "-np" | "--np" => s.total = num,
            _ => {}
        }
        if PLACEMENT.contains(&name.as_str()) {
            // The loop places the ranks itself.
        } else {
            s.launcher_args.push(w.clone());
            if takes {
                if let Some(v) = words.get(i + 1) {
                    s.launcher_args.push(v.clone());
                }
            }
        }
        i += if takes { 2 } else { 1 };
    }
    s.app = words[i.min(words.len())..].to_vec();
    s
}

/// The launcher named by `name`, built from the user's arguments.
fn launcher_of(
    name: &str,
    args: Vec<String>,
    alloc: &[String],
    hostfile: Option<PathBuf>,
) -> Result<Box<dyn Launcher>, CliError> {
    let base = Path::new(name)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(name);
    Ok(match base {
        "srun" => Box::new(SrunLauncher {
            program: name.to_string(),
            args: with_overlap(args),
        }),
        // SLURM_OVERLAP inside an allocation: see MpirunLauncher::on_hosts.
        "mpirun" | "mpiexec" | "orterun" => {
            Box::new(MpirunLauncher::on_hosts(name, args, hostfile))
        }
        "flux" => {
            let rest = match args.split_first() {
                Some((run, rest)) if run == "run" => rest.to_vec(),
                _ => return Err(CliError::Usage("give `flux run ...`".into())),
            };
            Box::new(FluxLauncher { args: rest })
        }
        "jsrun" => Box::new(JsrunLauncher {
            args,
            allocation: alloc.to_vec(),
        }),
        other => {
            return Err(CliError::Usage(format!(
                "unknown launcher {other:?}: scr run knows srun, mpirun, mpiexec, flux, jsrun"
            )))
        }
    })
}

/// The user's srun arguments with `--overlap` (a relaunch's step starts
/// beside a step of a failed launch that SLURM has not cleaned up yet).
fn with_overlap(mut args: Vec<String>) -> Vec<String> {
    if in_slurm() && !args.iter().any(|a| a == "--overlap") {
        args.insert(0, "--overlap".into());
    }
    args
}

/// Writes the hostfile of each launch's nodes before it (mpirun), and
/// with SCR 3.1's `--restart-cmd` gives a launch that command when there
/// is a checkpoint to restart from.
struct LaunchHooks<'a> {
    path: Option<PathBuf>,
    slots: usize,
    restart: Option<crate::launch_cmds::RestartCommand<'a>>,
}

impl Hooks for LaunchHooks<'_> {
    fn job(&mut self, launch: u32, job: &mut scr::launch::JobSpec) {
        if let Some(r) = &self.restart {
            r.apply(launch, job);
        }
    }

    fn before_launch(&mut self, launch: u32, nodes: &[String]) {
        if let Some(p) = &self.path {
            if let Err(e) = std::fs::write(p, hostfile_text(nodes, self.slots)) {
                eprintln!("scr run: launch {launch}: hostfile {}: {e}", p.display());
            }
        }
        eprintln!("scr run: launch {launch} on {}", nodes.join(","));
    }
}

/// `scr run`, or with `launcher` (`scr srun`, `scr jsrun`, `scr mpirun`)
/// that launcher before the arguments given.
pub fn run(a: RunArgs, launcher: Option<&str>) -> Result<(), CliError> {
    let cfg = config()?;
    let mut words = a.command.clone();
    if let Some(l) = launcher {
        words.insert(0, l.into());
    }
    let (name, rest) = words
        .split_first()
        .ok_or_else(|| CliError::Usage("give the launcher and the application".into()))?;
    let base = Path::new(name)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(name);
    // SCR 3.1's scr_srun options naming the commands to launch
    // (crate::launch_cmds); the rest are the launcher's and the
    // application's words.
    let (rest, cmds) = crate::launch_cmds::take(rest)?;
    // `flux run ARGS APP`: the subcommand is the launcher's word, not the
    // application (it was taken for the application, and every `scr run
    // -- flux run ...` was refused).
    let flux_run = base == "flux" && rest.first().is_some_and(|w| w == "run");
    let mut split = split_launcher(base, &rest[usize::from(flux_run)..]);
    if flux_run {
        split.launcher_args.insert(0, "run".into());
    }
    if let Some(run_cmd) = &cmds.run {
        if let Some(app) = split.app.first() {
            return Err(CliError::Usage(format!(
                "--run-cmd names the application: {app:?} after the launcher's arguments is one too"
            )));
        }
        split.app = crate::launch_cmds::words_of(run_cmd, None);
    }
    if !Settings::from_config(&cfg)?.enable {
        // SCR_ENABLE=0: no loop, as SCR 3.1's scr_srun: the launch once,
        // as given (the run command, never the restart command: without
        // SCR there is no checkpoint), and its exit status.
        eprintln!("scr run: SCR_ENABLE=0: running {name} once, without the run loop");
        let mut once = rest.clone();
        if cmds.run.is_some() {
            once.extend(split.app.iter().cloned());
        }
        let status = std::process::Command::new(name)
            .args(&once)
            .status()
            .map_err(|e| CliError::RunLoop {
                why: format!("SCR_ENABLE=0: {name}: {e}"),
            })?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let (program, app_args) = split
        .app
        .split_first()
        .ok_or_else(|| CliError::Usage("no application after the launcher's arguments".into()))?;
    let var = |k: &str| std::env::var(k).ok();
    let (source, alloc) = allocation_nodes(&var, a.hostfile.as_deref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let prefix = prefix_of(a.prefix.clone(), &cfg);
    // scr_prerun: the prefix must be there; what an earlier allocation left
    // about its nodes' caches goes.
    let prepared = scr::runloop::prerun::prerun(&prefix).map_err(|e| CliError::RunLoop {
        why: format!("prerun: {e}"),
    })?;
    for f in &prepared.removed {
        eprintln!(
            "scr run: prerun: removed {} (an earlier allocation's)",
            f.display()
        );
    }
    let job_nodes = a
        .nodes
        .or(split.nodes)
        .or(match (split.total, split.per_node) {
            (Some(t), Some(k)) if k > 0 => Some(t.div_ceil(k)),
            _ => None,
        })
        .unwrap_or(alloc.len());
    let ranks_per_node = a
        .ranks_per_node
        .or(split.per_node)
        .or(split.total.map(|t| t.div_ceil(job_nodes.max(1))))
        .unwrap_or(1);
    let hostfile = (base != "srun" && base != "flux" && base != "jsrun")
        .then(|| prefix.join(".scr").join("run.hostfile"));
    if let Some(h) = &hostfile {
        scr::beneath::create_dir_all_in(&prefix, h.parent().unwrap_or(&prefix))
            .map_err(|e| CliError::Usage(format!("{}: {e}", prefix.display())))?;
    }
    let launcher = launcher_of(name, split.launcher_args.clone(), &alloc, hostfile.clone())?;
    // The run loop's parameters, parsed once as the library parses them.
    let settings = Settings::from_config(&cfg)?;
    let excluded = excluded_nodes(&settings)?;
    let progress = progress_watchdog(&settings)?;
    let now_s = {
        use scr::clock::Clock as _;
        scr::clock::SystemClock.unix_secs()
    };
    // SCR_HALT_SECONDS needs the allocation's end: asked of the resource
    // manager and given to the job when nothing set it (as 3.1's scr_run).
    let mut job_env = std::collections::BTreeMap::new();
    let end_time_s =
        settings.halt.end_time_s.or_else(|| {
            match scr::runloop::nodes::allocation_end_s(&var, now_s) {
                Ok(Some(end)) => {
                    eprintln!(
                        "scr run: the allocation ends at {end} (SCR_END_TIME, from the resource manager)"
                    );
                    job_env.insert("SCR_END_TIME".to_string(), end.to_string());
                    Some(end)
                }
                Ok(None) => None,
                Err(e) => {
                    eprintln!("scr run: the allocation's end is not known: {e}");
                    None
                }
            }
        });
    let spec = LoopSpec {
        program: PathBuf::from(program),
        args: app_args.iter().map(OsString::from).collect(),
        env: job_env,
        nodes: alloc.clone(),
        job_nodes,
        ranks_per_node,
        min_nodes: a
            .min_nodes
            .or(settings.run.min_nodes.map(|n| n as usize))
            .unwrap_or(job_nodes),
        runs: a
            .runs
            .unwrap_or(u32::try_from(settings.run.runs).unwrap_or(u32::MAX)),
        excluded,
        watchdog: Duration::from_secs(scr::runloop::launch_bound_s(a.watchdog, end_time_s, now_s)),
        progress,
        prefix: prefix.clone(),
    };
    if progress.is_none() && settings.run.watchdog_timeout_s.is_some() {
        // It bounded every launch here before 2026-11-29; say what it does now.
        eprintln!(
            "scr run: SCR_WATCHDOG_TIMEOUT bounds the job's flushes; it watches launches only with SCR_WATCHDOG=1 (as in SCR 3.1)"
        );
    }
    if let Some(p) = &progress {
        eprintln!(
            "scr run: SCR_WATCHDOG=1: a launch without a new checkpoint or flush for {} s ({} s while flushing) is killed",
            p.timeout.as_secs(),
            p.timeout_pfs.as_secs()
        );
    }
    eprintln!(
        "scr run: {} nodes from {source} ({}), {job_nodes} a launch with {ranks_per_node} ranks each, {} runs at most, each bounded to {} s",
        alloc.len(),
        alloc.join(","),
        spec.runs,
        spec.watchdog.as_secs()
    );
    let probe_launcher: Box<dyn Launcher> = if in_slurm() {
        // --overlap: a check or a copy runs beside a step that still holds
        // the node (mpirun's daemons linger until SLURM declares a lost
        // node down), instead of waiting for it.
        Box::new(SrunLauncher::new(vec!["--overlap".into()]))
    } else {
        // Flux's launcher needs its subcommand, as the job's had it.
        let sub = if flux_run {
            vec!["run".into()]
        } else {
            Vec::new()
        };
        launcher_of(name, sub, &alloc, None)?
    };
    let me = std::env::current_exe().map_err(|e| CliError::Usage(format!("this program: {e}")))?;
    let mut check = ProbeCheck {
        launcher: probe_launcher.as_ref(),
        cmd: vec![me.clone().into(), "check-node".into()],
        timeout: Duration::from_secs(a.check_timeout),
        slurm: in_slurm(),
    };
    let restart = cmds
        .restart
        .map(|template| crate::launch_cmds::RestartCommand {
            template,
            launcher: launcher.as_ref(),
            helper: me.clone(),
            timeout: spec.watchdog,
        });
    if let Some(r) = &restart {
        eprintln!(
            "scr run: --restart-cmd: before each launch scr have-restart asks for a checkpoint; with one the launch runs: {}",
            r.template
        );
    }
    let mut hooks = LaunchHooks {
        path: hostfile,
        slots: ranks_per_node,
        restart,
    };
    let result = RunLoop {
        spec,
        launcher: launcher.as_ref(),
        check: &mut check,
        hooks: &mut hooks,
    }
    .run();
    report(&result);
    if !a.no_postrun {
        postrun(&me, &prefix, &alloc, &result, probe_launcher.as_ref());
    }
    match result.stop {
        Stop::Finished | Stop::Halted(_) => Ok(()),
        other => Err(CliError::RunLoop {
            why: stop_text(&other),
        }),
    }
}

/// SCR 3.1's progress watchdog when SCR_WATCHDOG=1: SCR_WATCHDOG_TIMEOUT
/// is required (3.1 runs without its watchdog when it is missing, after
/// a message; here the job does not start, so that the watchdog asked
/// for is never silently off), SCR_WATCHDOG_TIMEOUT_PFS defaults to it.
fn progress_watchdog(
    settings: &Settings,
) -> Result<Option<scr::runloop::ProgressWatchdog>, CliError> {
    if !settings.run.watchdog {
        return Ok(None);
    }
    let timeout = settings.run.watchdog_timeout_s.ok_or_else(|| {
        CliError::Usage(
            "SCR_WATCHDOG=1 needs SCR_WATCHDOG_TIMEOUT: the seconds a launch may go \
             without a new checkpoint or flush (set it, or SCR_WATCHDOG=0)"
                .into(),
        )
    })?;
    let pfs = settings.run.watchdog_timeout_pfs_s.unwrap_or(timeout);
    Ok(Some(scr::runloop::ProgressWatchdog {
        timeout: Duration::from_secs(timeout),
        timeout_pfs: Duration::from_secs(pfs),
    }))
}

fn stop_text(s: &Stop) -> String {
    match s {
        Stop::Finished => "the job finished".into(),
        Stop::Halted(why) => format!("halted: {why}"),
        Stop::RunsExhausted => "SCR_RUNS launches made, the job did not finish".into(),
        Stop::TooFewNodes { healthy, need } => {
            format!("{healthy} healthy nodes, fewer than SCR_MIN_NODES={need}")
        }
        Stop::LaunchFailed(why) => format!("the launcher could not run: {why}"),
        Stop::Hung => "a launch hung".into(),
    }
}

fn report(r: &LoopResult) {
    for l in &r.launches {
        for (n, why) in &l.newly_down {
            eprintln!("scr run: node {n} down: {why}");
        }
        eprintln!(
            "scr run: launch {} on {} ended: {} after {:.1} s",
            l.launch,
            l.nodes.join(","),
            l.end,
            l.elapsed_s
        );
        print!("{}", l.stdout);
        eprint!("{}", l.stderr);
    }
    if r.launches.is_empty() {
        // Nothing ran: say why each node was found down (the checks before
        // the first launch are the only place the reasons show).
        for (n, why) in r.down.entries() {
            eprintln!("scr run: node {n} down: {why}");
        }
    }
    eprintln!("scr run: stop: {}", stop_text(&r.stop));
}

/// `scr postrun` over the nodes still up, each reached by `launcher`.
fn postrun(me: &Path, prefix: &Path, alloc: &[String], r: &LoopResult, launcher: &dyn Launcher) {
    let up = r.up_nodes(alloc);
    let Ok(mut template) = launcher.node_argv("{node}", &["-".into()]) else {
        eprintln!(
            "scr run: postrun skipped: {} cannot reach one node",
            launcher.name()
        );
        return;
    };
    template.pop();
    let mut argv: Vec<OsString> = vec![
        me.into(),
        "postrun".into(),
        "--prefix".into(),
        prefix.into(),
    ];
    argv.push("--nodes".into());
    argv.push(alloc.join(",").into());
    let down: Vec<&str> = alloc
        .iter()
        .filter(|n| !up.contains(n))
        .map(String::as_str)
        .collect();
    if !down.is_empty() {
        argv.push("--down".into());
        argv.push(down.join(",").into());
    }
    let mut t = template.into_iter();
    if let Some(p) = t.next() {
        argv.push("--launch".into());
        argv.push(p);
    }
    for w in t {
        argv.push("--launch-arg".into());
        argv.push(w);
    }
    match scr::launch::run_argv(&argv, Duration::from_secs(3600)) {
        Ok(out) => {
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            eprintln!("scr run: postrun exited {}", out.code());
        }
        Err(e) => eprintln!("scr run: postrun: {e}"),
    }
}

/// The storage checks of this node: the bases given, else the control and
/// cache bases of the configuration.
fn storage_checks(paths: Vec<PathBuf>, capacity: u64) -> Result<Vec<StorageCheck>, CliError> {
    let mut v: Vec<StorageCheck> = Vec::new();
    let mut add = |role: &str, path: PathBuf| {
        if !v.iter().any(|s| s.path == path) {
            v.push(StorageCheck {
                role: role.into(),
                path,
                min_capacity_bytes: capacity,
            });
        }
    };
    if paths.is_empty() {
        let cfg = config()?;
        for (role, key) in [("control", "SCR_CNTL_BASE"), ("cache", "SCR_CACHE_BASE")] {
            let p = cfg
                .get(key)
                .map_or_else(|| PathBuf::from("/dev/shm"), |e| PathBuf::from(e.value));
            add(role, p);
        }
    }
    for p in paths {
        add("storage", p);
    }
    Ok(v)
}

/// `scr check-node`: this node's storage bases (SCR's scr_check_node).
pub fn check_node_cmd(a: CheckNodeArgs) -> Result<(), CliError> {
    let storage = storage_checks(a.paths, a.capacity)?;
    match check_node(None, &storage) {
        Ok(()) => {
            println!("ok");
            Ok(())
        }
        Err(why) => {
            println!("{DOWN_MARK} {why}");
            Err(CliError::No)
        }
    }
}

/// The launcher that reaches one node for a check or a copy: srun
/// `--overlap` when `joblauncher` names srun, or inside SLURM when it names
/// none (a check runs beside a step that still holds the node: mpirun's
/// daemons linger until SLURM declares a lost node down); else the launcher
/// named; else none.
fn node_launcher(
    joblauncher: Option<&str>,
    alloc: &[String],
) -> Result<Option<Box<dyn Launcher>>, CliError> {
    let base = joblauncher.map(|j| {
        Path::new(j)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or(j)
    });
    match (joblauncher, base) {
        (Some(j), Some("srun")) => Ok(Some(Box::new(SrunLauncher {
            program: j.to_string(),
            args: vec!["--overlap".into()],
        }))),
        (None, _) if in_slurm() => Ok(Some(Box::new(SrunLauncher::new(vec!["--overlap".into()])))),
        (Some(j), Some("flux")) => Ok(Some(launcher_of(j, vec!["run".into()], alloc, None)?)),
        (Some(j), _) => Ok(Some(launcher_of(j, Vec::new(), alloc, None)?)),
        (None, _) => Ok(None),
    }
}

/// The nodes of `nodes` that are down, with why: those `given` (--down),
/// those SCR_EXCLUDE_NODES lists, those SLURM reports down, and those whose
/// `scr check-node`, run through `launcher`, fails or does not answer
/// within `timeout`.
fn find_down(
    nodes: &[String],
    given: &[String],
    excluded: &[String],
    launcher: Option<&dyn Launcher>,
    timeout: Duration,
) -> Result<Vec<(String, String)>, CliError> {
    let mut down: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            if given.contains(n) {
                Some((n.clone(), "given with --down".to_string()))
            } else if excluded.contains(n) {
                Some((n.clone(), "listed in SCR_EXCLUDE_NODES".to_string()))
            } else {
                None
            }
        })
        .collect();
    let rest: Vec<String> = nodes
        .iter()
        .filter(|n| !excluded.contains(n) && !given.contains(n))
        .cloned()
        .collect();
    let Some(launcher) = launcher else {
        return Ok(down);
    };
    let me = std::env::current_exe().map_err(|e| CliError::Usage(format!("this program: {e}")))?;
    let mut check = ProbeCheck {
        launcher,
        cmd: vec![me.into(), "check-node".into()],
        timeout,
        slurm: in_slurm(),
    };
    use scr::runloop::NodeCheck as _;
    down.extend(
        check
            .check(&rest)
            .into_iter()
            .map(|(n, r)| (n, r.to_string())),
    );
    Ok(down)
}

/// What `scr postrun -j LAUNCHER` needs: the allocation's nodes, those of
/// them found down (with why; none checked when `down` is given), and the
/// command that runs a program on node `{node}` through that launcher.
pub(crate) struct PostrunNodes {
    pub nodes: Vec<String>,
    pub down: Vec<(String, String)>,
    pub template: Vec<OsString>,
}

/// The nodes and launch template of `scr postrun -j` (SCR 3.1's scr_postrun
/// finds the down nodes itself, then scavenges from the others).
pub(crate) fn postrun_nodes(
    joblauncher: &str,
    nodes: Vec<String>,
    down: Option<Vec<String>>,
    check_timeout: Duration,
) -> Result<PostrunNodes, CliError> {
    let cfg = config()?;
    let nodes = if nodes.is_empty() {
        let var = |k: &str| std::env::var(k).ok();
        allocation_nodes(&var, None)
            .map_err(|e| CliError::Usage(format!("-j {joblauncher}: {e}")))?
            .1
    } else {
        nodes
    };
    let launcher = node_launcher(Some(joblauncher), &nodes)?
        .ok_or_else(|| CliError::Usage(format!("-j {joblauncher}: no launcher")))?;
    let mut template = launcher
        .node_argv("{node}", &["-".into()])
        .map_err(|e| CliError::Usage(format!("-j {joblauncher}: {e}")))?;
    template.pop();
    let down = match down {
        Some(given) => given
            .into_iter()
            .map(|n| (n, "given with --down".to_string()))
            .collect(),
        None => {
            let excluded = excluded_nodes(&Settings::from_config(&cfg)?)?;
            find_down(
                &nodes,
                &[],
                &excluded,
                Some(launcher.as_ref()),
                check_timeout,
            )?
        }
    };
    Ok(PostrunNodes {
        nodes,
        down,
        template,
    })
}

/// A host list given on the command line, expanded.
fn hostlist_arg(list: Option<&String>) -> Result<Vec<String>, CliError> {
    match list {
        Some(l) => expand_hostlist(l).map_err(|e| CliError::Usage(e.to_string())),
        None => Ok(Vec::new()),
    }
}

/// `scr list-down-nodes`: the allocation's nodes that are down (SCR's
/// scr_list_down_nodes): excluded, reported down by SLURM, or failing
/// `scr check-node` run on them.
pub fn list_down_nodes(a: ListDownArgs) -> Result<(), CliError> {
    let cfg = config()?;
    let var = |k: &str| std::env::var(k).ok();
    let nodes = match a.nodes.as_ref().or(a.nodeset.as_ref()) {
        Some(l) => expand_hostlist(l).map_err(|e| CliError::Usage(e.to_string()))?,
        None => {
            allocation_nodes(&var, None)
                .map_err(|e| CliError::Usage(e.to_string()))?
                .1
        }
    };
    if a.free {
        eprintln!(
            "scr list-down-nodes: warning: -f/--free has no effect: no node's free space or capacity is checked here"
        );
    }
    let excluded = excluded_nodes(&Settings::from_config(&cfg)?)?;
    let launcher = node_launcher(a.joblauncher.as_deref(), &nodes)?;
    let given = hostlist_arg(a.down.as_ref())?;
    let down = find_down(
        &nodes,
        &given,
        &excluded,
        launcher.as_deref(),
        Duration::from_secs(a.check_timeout),
    )?;
    if a.log {
        let (log, warning) =
            scr::runloop::runlog::RunLog::open(&prefix_of(None, &cfg), &Default::default());
        if let Some(w) = warning {
            eprintln!("scr list-down-nodes: {w}");
        } else if !log.enabled() {
            eprintln!(
                "scr list-down-nodes: --log: logging is off (SCR_LOG_ENABLE=0): nothing logged"
            );
        }
        for (n, why) in &down {
            log.node_fail_after(n, why, a.secs);
        }
    }
    if a.reason {
        for (n, why) in &down {
            println!("{n}: {why}");
        }
    } else if a.scr31 && !down.is_empty() {
        let names: Vec<String> = down.iter().map(|d| d.0.clone()).collect();
        println!("{}", scr::runloop::health::compress_hostlist(&names));
    } else {
        for (n, _) in &down {
            println!("{n}");
        }
    }
    // Ours answers "is any node down?" (yes 0, no 1); SCR 3.1's exits 1
    // when it found one.
    match (down.is_empty(), a.scr31) {
        (true, false) | (false, true) => Err(CliError::No),
        _ => Ok(()),
    }
}

/// The nodes a launch needs: SCR_MIN_NODES, else the last run's (the
/// prefix's nodes file), else every node of the allocation.
fn nodes_needed(settings: &Settings, prefix: &Path, alloc: usize) -> usize {
    use scr::records::{nodes::Nodes, Record as _};
    if let Some(n) = settings.run.min_nodes.filter(|n| *n > 0) {
        return usize::try_from(n).unwrap_or(usize::MAX);
    }
    let file = prefix.join(".scr").join(scr::records::nodes::NODES_FILE);
    match Nodes::read_file(&file) {
        Ok(n) if n.nodes > 0 => usize::try_from(n.nodes).unwrap_or(usize::MAX),
        _ => alloc,
    }
}

/// `scr should-exit` (SCR's scr_retries_halt, and with --check-nodes its
/// scr_should_exit): exit 0 and print why when the job should stop before
/// another launch, NO otherwise.
pub fn should_exit(a: ShouldExitArgs) -> Result<(), CliError> {
    let cfg = config()?;
    let prefix = prefix_of(a.prefix, &cfg);
    let why = if a.scr31 {
        scr::runloop::halt_condition_scr31(&prefix)
    } else {
        halt_condition(&prefix)
    };
    if let Some(why) = why {
        println!("{why}");
        return Ok(());
    }
    if a.check_nodes {
        let settings = Settings::from_config(&cfg)?;
        let var = |k: &str| std::env::var(k).ok();
        let alloc = allocation_nodes(&var, None)
            .map_err(|e| CliError::Usage(format!("--check-nodes: {e}")))?
            .1;
        let launcher = node_launcher(a.joblauncher.as_deref(), &alloc)?;
        let down = find_down(
            &alloc,
            &hostlist_arg(a.down.as_ref())?,
            &excluded_nodes(&settings)?,
            launcher.as_deref(),
            Duration::from_secs(a.check_timeout),
        )?;
        let need = nodes_needed(&settings, &prefix, alloc.len());
        let left = alloc.len().saturating_sub(down.len());
        if a.verbose {
            for (n, why) in &down {
                println!("down: {n}: {why}");
            }
        }
        if left < need {
            println!("{left} healthy nodes left, fewer than the {need} needed");
            return Ok(());
        }
        if a.verbose {
            println!("no halt condition; {left} healthy nodes left, {need} needed");
        }
    } else if a.verbose {
        println!("no halt condition");
    }
    Err(CliError::No)
}

/// `scr prerun` (SCR's scr_prerun): prepare the prefix for a new
/// allocation (see [`scr::runloop::prerun`]); nothing with SCR_ENABLE=0.
pub fn prerun_cmd(a: PrerunArgs) -> Result<(), CliError> {
    let cfg = config()?;
    if !Settings::from_config(&cfg)?.enable {
        if a.verbose {
            println!("scr prerun: SCR_ENABLE=0, nothing to do");
        }
        return Ok(());
    }
    let prefix = prefix_of(a.prefix, &cfg);
    let t0 = std::time::Instant::now();
    let prepared = scr::runloop::prerun::prerun(&prefix)?;
    if a.verbose {
        println!("scr prerun: prefix {}", prefix.display());
        for f in &prepared.removed {
            println!(
                "scr prerun: removed {} (an earlier allocation's)",
                f.display()
            );
        }
        println!("scr prerun: done in {:.3} s", t0.elapsed().as_secs_f64());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn launcher_words_are_split_from_the_application() {
        let s = split_launcher("srun", &w("--mpi=pmix -N 4 -n8 --time 5 ./app --x 1"));
        assert_eq!(s.launcher_args, w("--mpi=pmix --time 5"));
        assert_eq!((s.nodes, s.total), (Some(4), Some(8)));
        assert_eq!(s.app, w("./app --x 1"));
        let s = split_launcher("mpirun", &w("-np 8 --npernode 2 --mca btl tcp -- app -N 3"));
        assert_eq!((s.total, s.per_node), (Some(8), Some(2)));
        assert_eq!(s.app, w("app -N 3"));
        let s = split_launcher("srun", &w("-N4 -n 8 app"));
        assert_eq!(s.app, w("app"));
        // flux run's -N is nodes, as srun's (run() takes `run` off first).
        let s = split_launcher("flux", &w("-N2 -n 8 --exclusive ./app"));
        assert_eq!((s.nodes, s.total, s.per_node), (Some(2), Some(8), None));
        assert_eq!(s.launcher_args, w("--exclusive"));
        assert_eq!(s.app, w("./app"));
    }
}
