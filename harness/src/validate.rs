//! `scr-harness validate`: the developer guide's checklist for a new system
//! ("Testing SCR on a New System"), automated.
//!
//! 1. **allocation survives a node kill** — a job runs, a node of it is
//!    killed, and the job script (this process) still runs its next
//!    command;
//! 2. **launcher returns after a rank dies** — an MPI job whose rank 1 is
//!    SIGKILLed must end, not hang (bounded wait);
//! 3. **down nodes are detected, and why** — after the kill, the health
//!    checks report exactly the killed node, with a reason;
//! 4. **the next launch avoids them** — a second job runs in the broken
//!    allocation, on the healthy nodes only (each rank prints its node);
//! 5. **full cycle** — checkpoint (XOR), a node dies, relaunch on the rest
//!    plus a spare, rebuild, restart from the newest checkpoint, verified
//!    byte for byte;
//! 6. **node health checks** — on every node: storage reachable, listed as
//!    writable, capacity as configured, a file can be created and removed;
//!    in simulated mode each check is also shown to catch the failure it is
//!    for (a missing directory, a file system smaller than configured, a
//!    full file system that refuses a new file).
//!
//! Simulated nodes (the default) need nothing but `mpirun`. On a real
//! cluster give the launcher (`--launcher srun`, or `--launcher mpirun`
//! with `--hostfile`), the nodes (`--nodes a,b,c,d,e`, the last one a
//! spare) and, for checks 1, 3 and 5, a command that kills a node
//! (`--kill-command 'ssh {node} sudo systemctl poweroff'`); without it those
//! checks are reported as not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use scr::exit::Code;
use serde::Serialize;

use crate::health::{self, DownList, StorageCheck};
use crate::launch::{run_argv, JobSpec, LaunchError, Launcher, MpirunLauncher, NodeSpec};
use scr::runloop::{probe::ProbeCheck, NodeCheck};

/// Options of `scr-harness validate`.
#[derive(Args, Debug, Clone)]
pub struct ValidateArgs {
    /// `simulated` (default), `mpirun` (with --hostfile) or `srun`.
    #[arg(long, default_value = "simulated")]
    pub launcher: String,
    /// The allocation's nodes, comma separated or as a host list
    /// (`node[1-5]`); the last is kept as a spare. Simulated: 5 nodes.
    #[arg(long)]
    pub nodes: Option<String>,
    /// OpenMPI hostfile (with `--launcher mpirun` outside a resource
    /// manager's allocation; inside one, mpirun takes the allocation's
    /// nodes and a hostfile naming a killed node stalls the next job).
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Command that kills a node on a real cluster; `{node}` is replaced.
    /// Run as an argument vector, never through a shell: words are split
    /// at blanks (single or double quotes keep blanks in a word), and the
    /// node must be one of `--nodes` with a plain host name.
    #[arg(long)]
    pub kill_command: Option<String>,
    /// Node-local directories to check, `PATH[:MIN_BYTES]` (repeatable;
    /// default /dev/shm); MIN_BYTES takes units (1GB, 512MB, 1G).
    #[arg(long = "storage", value_name = "PATH[:MIN_BYTES]")]
    pub storage: Vec<String>,
    /// The test application for the full cycle (scr_app).
    #[arg(long)]
    pub app: Option<PathBuf>,
    /// Work directory (simulated nodes live here).
    #[arg(long, default_value = "target/scr-harness/validate")]
    pub work: PathBuf,
    /// Bound on every job, seconds or with units (90, 5m).
    #[arg(long, default_value_t = 60, value_parser = scr::units::seconds_u64)]
    pub timeout_s: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One checklist item's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Short name.
    pub name: String,
    /// `pass`, `FAIL` or `not run`.
    pub status: String,
    /// What was seen, and for a failure why and what to look at.
    pub detail: String,
    /// Wall time.
    pub time_s: f64,
}

fn check(name: &str, start: Instant, r: Result<String, String>) -> Check {
    let (status, detail) = match r {
        Ok(d) => ("pass", d),
        Err(d) if d.starts_with("not run:") => ("not run", d),
        Err(d) => ("FAIL", d),
    };
    Check {
        name: name.into(),
        status: status.into(),
        detail,
        time_s: start.elapsed().as_secs_f64(),
    }
}

fn parse_storage(specs: &[String]) -> Result<Vec<StorageCheck>, String> {
    if specs.is_empty() {
        return Ok(vec![StorageCheck {
            role: "cache".into(),
            path: PathBuf::from("/dev/shm"),
            min_capacity_bytes: 0,
        }]);
    }
    specs
        .iter()
        .map(|s| {
            let (path, bytes) = match s.rsplit_once(':') {
                Some((p, b)) => (
                    p,
                    scr::units::bytes(b).map_err(|e| format!("--storage {s:?}: {e}"))?,
                ),
                None => (s.as_str(), 0),
            };
            Ok(StorageCheck {
                role: "storage".into(),
                path: PathBuf::from(path),
                min_capacity_bytes: bytes,
            })
        })
        .collect()
}

/// The rank variable any of the common launchers sets.
const RANK_SH: &str = "${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMI_RANK:-0}}}";

/// How jobs are started: a launcher, and for simulated nodes the directory
/// holding one tree per node.
#[derive(Debug)]
struct Launching {
    launcher: Box<dyn Launcher>,
    root: Option<PathBuf>,
}

impl Launching {
    /// argv running `cmd` once on each of `nodes` (empty when the launcher
    /// cannot: running it then fails with the launcher's "empty command").
    fn argv(&self, nodes: &[String], cmd: &[&str]) -> Vec<std::ffi::OsString> {
        let Some((program, args)) = cmd.split_first() else {
            return Vec::new();
        };
        let spec = JobSpec {
            program: PathBuf::from(program),
            args: args.iter().map(std::ffi::OsString::from).collect(),
            nodes: nodes
                .iter()
                .map(|n| NodeSpec {
                    name: n.clone(),
                    ranks: 1,
                    env: self
                        .root
                        .iter()
                        .map(|r| {
                            let tree = r.join(n).to_string_lossy().into_owned();
                            (crate::app::NODE_ROOT_VAR.to_string(), tree)
                        })
                        .collect(),
                })
                .collect(),
            env: BTreeMap::new(),
        };
        self.launcher.job_argv(&spec).unwrap_or_default()
    }

    fn simulated_root(&self) -> Option<&Path> {
        self.root.as_deref()
    }
}

struct Ctx {
    launcher: Launching,
    nodes: Vec<String>,
    storage: Vec<StorageCheck>,
    kill_command: Option<String>,
    timeout: Duration,
    app: Option<PathBuf>,
    work: PathBuf,
    down: DownList,
}

impl Ctx {
    /// Kill `node`: simulated — SIGKILL its processes (below `within`) and
    /// remove its tree; real — the given kill command.
    fn kill_node(&self, node: &str, within: Option<u32>) -> Result<String, String> {
        match (self.launcher.simulated_root(), &self.kill_command) {
            (Some(root), _) => {
                let r = faultsim::inject::kill_node(node, within).map_err(|e| e.to_string())?;
                let gone = faultsim::inject::remove_dir_tree(&root.join(node))
                    .map_err(|e| e.to_string())?;
                Ok(format!("{r}; {gone}"))
            }
            (_, Some(cmd)) => {
                let argv = kill_argv(cmd, node, &self.nodes)?;
                let line = argv.join(" ");
                let os: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
                let out = run_argv(&os, self.timeout).map_err(|e| format!("{line}: {e}"))?;
                Ok(format!("`{line}` exited {}", out.code()))
            }
            (_, None) => Err("not run: give --kill-command to kill a real node".into()),
        }
    }

    /// Health checks of every node; simulated nodes directly, real ones
    /// through the launcher (`scr-harness check-node` on each).
    fn update_down(&mut self) -> Vec<String> {
        if let Some(root) = self.launcher.simulated_root().map(Path::to_path_buf) {
            let root_of = |n: &str| Some(root.join(n));
            let storage = self.storage.clone();
            let nodes = self.nodes.clone();
            return self.down.update(&nodes, &[], &root_of, &storage);
        }
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("scr-harness"));
        let mut cmd: Vec<std::ffi::OsString> = vec![exe.into(), "check-node".into()];
        for s in &self.storage {
            cmd.push("--storage".into());
            cmd.push(format!("{}:{}", s.path.display(), s.min_capacity_bytes).into());
        }
        // The library's checks, as `scr run` makes them: inside a SLURM
        // allocation SLURM's view first, then each node's check through
        // `srun --overlap` (beside any step a killed node left behind,
        // whatever launcher runs the jobs); elsewhere through the launcher.
        let slurm = std::env::var_os("SLURM_JOB_ID").is_some();
        let srun = scr::launch::rm::SrunLauncher::new(vec!["--overlap".into()]);
        let probe_launcher: &dyn Launcher = if slurm {
            &srun
        } else {
            self.launcher.launcher.as_ref()
        };
        let mut probe = ProbeCheck {
            launcher: probe_launcher,
            cmd,
            timeout: self.timeout,
            slurm,
        };
        let up: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| !self.down.is_down(n))
            .cloned()
            .collect();
        let mut newly = Vec::new();
        for (n, reason) in probe.check(&up) {
            if self.down.mark(&n, reason) {
                newly.push(n);
            }
        }
        newly
    }
}

fn simulated_nodes(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i}")).collect()
}

/// The launcher `--launcher` names (simulated nodes below `--work`).
fn launching_of(a: &ValidateArgs) -> Result<Launching, String> {
    Ok(match a.launcher.as_str() {
        "simulated" => {
            let root = std::path::absolute(&a.work)
                .map_err(|e| e.to_string())?
                .join("nodes");
            let _ = std::fs::remove_dir_all(&root);
            Launching {
                launcher: Box::new(MpirunLauncher::simulated()),
                root: Some(root),
            }
        }
        // Inside a SLURM allocation its daemons overlap the steps a killed
        // node left behind (MpirunLauncher::on_hosts).
        "mpirun" => Launching {
            launcher: Box::new(MpirunLauncher::on_hosts(
                "mpirun",
                Vec::new(),
                a.hostfile.clone(),
            )),
            root: None,
        },
        // The library's srun (scr srun's); inside an allocation its steps
        // overlap any a killed node left behind.
        "srun" => Launching {
            launcher: Box::new(scr::launch::rm::SrunLauncher::new(
                if std::env::var_os("SLURM_JOB_ID").is_some() {
                    vec!["--overlap".into()]
                } else {
                    Vec::new()
                },
            )),
            root: None,
        },
        other => return Err(format!("--launcher {other:?}: simulated, mpirun or srun")),
    })
}

/// Run the checklist; the report and whether everything that ran passed.
pub fn run(a: &ValidateArgs) -> Result<Vec<Check>, String> {
    let storage = parse_storage(&a.storage)?;
    if a.hostfile.is_some() && std::env::var_os("SLURM_JOB_ID").is_some() {
        eprintln!(
            "scr-harness validate: warning: --hostfile inside a SLURM allocation: mpirun takes the \
             allocation's nodes by itself, and a hostfile that names a killed node makes the next \
             job wait for it until its bound (measured on ci/slurm-cluster); omit it"
        );
    }
    let launcher = launching_of(a)?;
    let nodes = match &a.nodes {
        Some(list) => health::expand_hostlist(list).map_err(|e| e.to_string())?,
        None if launcher.simulated_root().is_some() => simulated_nodes(5),
        None => return Err("--nodes is required with a real launcher".into()),
    };
    if nodes.len() < 3 {
        return Err(format!(
            "{} nodes: the checklist needs at least 3 (2 to run on, 1 spare)",
            nodes.len()
        ));
    }
    if let Some(root) = launcher.simulated_root() {
        for n in &nodes {
            for s in &storage {
                let p = health::node_path(Some(&root.join(n)), &s.path);
                std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
    }
    let mut ctx = Ctx {
        launcher,
        nodes,
        storage,
        kill_command: a.kill_command.clone(),
        timeout: Duration::from_secs(a.timeout_s),
        app: a.app.clone(),
        work: a.work.clone(),
        down: DownList::new(),
    };
    let mut checks = Vec::new();
    checks.push(health_checks(&mut ctx));
    let job_nodes: Vec<String> = ctx.nodes[..ctx.nodes.len() - 1].to_vec();
    let victim = job_nodes[1].clone();
    checks.push(launcher_returns(&ctx, &job_nodes));
    checks.push(survives_node_kill(&ctx, &job_nodes, &victim));
    checks.push(detects_down(&mut ctx, &victim));
    checks.push(steers_away(&ctx, &job_nodes));
    checks.push(full_cycle(&ctx));
    if ctx.launcher.simulated_root().is_some() {
        checks.extend(health_check_catches(&ctx));
    }
    Ok(checks)
}

fn health_checks(ctx: &mut Ctx) -> Check {
    let start = Instant::now();
    let newly = ctx.update_down();
    let r = if newly.is_empty() {
        Ok(format!(
            "{} nodes healthy: storage {} reachable, writable, capacity as configured, touch+rm works",
            ctx.nodes.len(),
            ctx.storage
                .iter()
                .map(|s| s.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(ctx
            .down
            .entries()
            .map(|(n, r)| format!("{n}: {r}"))
            .collect::<Vec<_>>()
            .join("; "))
    };
    check("node health checks", start, r)
}

fn launcher_returns(ctx: &Ctx, nodes: &[String]) -> Check {
    let start = Instant::now();
    // Rank 1 kills itself after 2 s; everyone else would sleep far longer.
    let script = format!("r={RANK_SH}; if [ \"$r\" = 1 ]; then sleep 2; kill -9 $$; fi; sleep 600");
    let argv = ctx.launcher.argv(nodes, &["sh", "-c", &script]);
    let r = match run_argv(&argv, ctx.timeout) {
        Ok(out) if out.success() => Err(format!(
            "the job exited 0 although rank 1 was killed; stderr: {}",
            out.stderr.trim()
        )),
        Ok(out) => Ok(format!(
            "rank 1 SIGKILLed: the launcher tore the job down and returned (exit {}) after {:.1} s",
            out.code(),
            out.elapsed.as_secs_f64()
        )),
        Err(LaunchError::Timeout { after, .. }) => Err(format!(
            "the launcher did not return within {after:?} after a rank died: control never comes back to the job script (check the launcher's kill-on-bad-exit setting)"
        )),
        Err(e) => Err(format!("the launcher could not run: {e}")),
    };
    check("launcher returns after a rank dies", start, r)
}

fn survives_node_kill(ctx: &Ctx, nodes: &[String], victim: &str) -> Check {
    let start = Instant::now();
    let argv = ctx.launcher.argv(nodes, &["sleep", "600"]);
    let (tx, rx) = std::sync::mpsc::channel();
    let launcher_pid = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let pid_slot = launcher_pid.clone();
    let timeout = ctx.timeout;
    let job = std::thread::spawn(move || {
        let r = crate::launch::run_argv_watched(&argv, timeout, &mut |pid| {
            pid_slot.store(pid, std::sync::atomic::Ordering::Relaxed);
            crate::launch::Watch::Continue
        });
        let _ = tx.send(());
        r
    });
    // Let the job start, then kill the node under it (only processes of
    // this job: the scan is limited to the launcher's descendants).
    std::thread::sleep(Duration::from_secs(2));
    let pid = launcher_pid.load(std::sync::atomic::Ordering::Relaxed);
    let killed = if pid == 0 {
        Err("the job did not start within 2 s".to_string())
    } else {
        ctx.kill_node(victim, Some(pid))
    };
    let r = match killed {
        Err(e) => {
            let _ = rx.recv_timeout(ctx.timeout + Duration::from_secs(10));
            Err(e)
        }
        Ok(how) => match rx.recv_timeout(ctx.timeout + Duration::from_secs(10)) {
            Err(_) => Err(format!("killed {victim} ({how}) but the job never ended")),
            Ok(()) => match job.join() {
                Ok(Ok(out)) => {
                    // The job script's next command still runs.
                    let next = run_argv(&["echo".into(), "still here".into()], ctx.timeout);
                    match next {
                        Ok(n) if n.stdout.trim() == "still here" => Ok(format!(
                            "killed {victim} ({how}); the job ended (exit {}) and the job script ran its next command",
                            out.code()
                        )),
                        Ok(n) => Err(format!("the job script cannot run commands after the kill: `echo` printed {:?} (exit {})", n.stdout.trim(), n.code())),
                        Err(e) => Err(format!("the job script cannot run commands after the kill: {e}")),
                    }
                }
                Ok(Err(LaunchError::Timeout { .. })) => Err(format!(
                    "killed {victim} ({how}) and the job hung until its time bound"
                )),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the job thread panicked".into()),
            },
        },
    };
    check("allocation survives a node kill", start, r)
}

fn detects_down(ctx: &mut Ctx, victim: &str) -> Check {
    let start = Instant::now();
    let before: Vec<String> = ctx.down.entries().map(|(n, _)| n.to_string()).collect();
    let newly = ctx.update_down();
    let r = if before.iter().any(|n| n == victim) || newly.iter().any(|n| n == victim) {
        let why = ctx
            .down
            .entries()
            .map(|(n, r)| format!("{n}: {r}"))
            .collect::<Vec<_>>()
            .join("; ");
        if newly.iter().any(|n| n != victim) {
            Err(format!("more nodes than {victim} reported down: {why}"))
        } else {
            Ok(format!("down: {why}"))
        }
    } else if ctx.launcher.simulated_root().is_none() && ctx.kill_command.is_none() {
        Err("not run: no node was killed (give --kill-command)".into())
    } else {
        Err(format!(
            "{victim} was killed but the health checks find it healthy: add a check that would notice"
        ))
    };
    check("down nodes are detected, and why", start, r)
}

fn steers_away(ctx: &Ctx, previous: &[String]) -> Check {
    let start = Instant::now();
    let Some(nodes) = crate::runloop::choose_nodes(&ctx.nodes, previous, &ctx.down, previous.len())
    else {
        return check(
            "next launch avoids down nodes",
            start,
            Err("too few healthy nodes for a second job".into()),
        );
    };
    let script = "echo \"node=${SCR_NODE_NAME:-$(hostname)}\"";
    let argv = ctx.launcher.argv(&nodes, &["sh", "-c", script]);
    let r = match run_argv(&argv, ctx.timeout) {
        Ok(out) if out.success() => {
            let mut seen: Vec<String> = out
                .stdout
                .lines()
                .filter_map(|l| l.trim().strip_prefix("node=").map(str::to_string))
                .collect();
            seen.sort();
            let mut want = nodes.clone();
            want.sort();
            let bad: Vec<&String> = seen.iter().filter(|n| ctx.down.is_down(n)).collect();
            if !bad.is_empty() {
                Err(format!(
                    "ranks ran on down nodes {}",
                    bad.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(",")
                ))
            } else if seen != want {
                Err(format!(
                    "ranks ran on {}, expected {}",
                    seen.join(","),
                    want.join(",")
                ))
            } else {
                Ok(format!(
                    "a second job ran in the broken allocation on {}",
                    nodes.join(",")
                ))
            }
        }
        Ok(out) => Err(format!(
            "the second job failed (exit {}): {}",
            out.code(),
            out.stderr.trim()
        )),
        Err(e) => Err(format!("the second job did not run: {e}")),
    };
    check("next launch avoids down nodes", start, r)
}

fn full_cycle(ctx: &Ctx) -> Check {
    let start = Instant::now();
    let r = (|| {
        if ctx.launcher.simulated_root().is_none() {
            return Err("not run: the full cycle runs on simulated nodes (use `scr-harness run` with your launcher's nodes)".to_string());
        }
        let app = ctx
            .app
            .clone()
            .or_else(|| std::env::var_os("SCR_APP_BIN").map(PathBuf::from))
            .ok_or_else(|| {
                "not run: give --app (scr_app built with --features scr/fault-injection)"
                    .to_string()
            })?;
        let sc: crate::scenario::Scenario =
            toml::from_str(FULL_CYCLE).map_err(|e| format!("built-in scenario: {e}"))?;
        let settings = crate::campaign::Settings {
            app,
            scr_command: None,
            mpirun: vec!["mpirun".into(), "--oversubscribe".into()],
            work: ctx.work.join("cycle"),
            keep: false,
            seed: crate::campaign::DEFAULT_SEED,
            replay: "scr-harness validate".into(),
        };
        let (cell, result) = crate::campaign::run_cell(&sc, scr::CopyType::Xor, &settings);
        let detail = result
            .map(|r| {
                r.launches
                    .iter()
                    .map(|l| format!("launch {} on {} → {}", l.launch, l.nodes.join(","), l.token))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        if cell.ok() {
            Ok(format!("{detail} (every restored byte verified)"))
        } else {
            Err(format!("{detail}: {} ({})", cell.outcome, cell.why))
        }
    })();
    check(
        "full cycle: checkpoint, node lost, rebuild, restart",
        start,
        r,
    )
}

/// The full cycle as a scenario: 4 nodes and a spare, XOR, node n1 dies
/// after checkpoint 2.
const FULL_CYCLE: &str = r#"
name = "validate-full-cycle"
about = "checkpoint with XOR, node n1 dies, relaunch on the rest and a spare, rebuild, restart"
spares = 1
schemes = ["XOR"]
faults = [
  { what = { kind = "kill-node", node = "n1" }, when = { at = "between-checkpoints", after = 2 } },
]
[expect]
XOR = "scratch, rebuilt:2"
"#;

/// In simulated mode, show each health check catching its failure.
fn health_check_catches(ctx: &Ctx) -> Vec<Check> {
    let Some(root) = ctx.launcher.simulated_root() else {
        return Vec::new();
    };
    let probe = root.join("probe");
    let dir = PathBuf::from("/dev/shm");
    let sc = |min: u64| {
        vec![StorageCheck {
            role: "cache".into(),
            path: dir.clone(),
            min_capacity_bytes: min,
        }]
    };
    let mut out = Vec::new();
    // Missing storage.
    let start = Instant::now();
    let _ = std::fs::create_dir_all(&probe);
    let r = match health::check_node(Some(&probe), &sc(0)) {
        Err(why @ health::DownReason::StorageInaccessible { .. }) => Ok(format!("caught: {why}")),
        other => Err(format!(
            "a missing storage directory gave {}",
            verdict(&other)
        )),
    };
    out.push(check("health check: missing storage", start, r));
    let _ = std::fs::create_dir_all(probe.join("dev/shm"));
    // Capacity.
    let start = Instant::now();
    // 1 PiB: more than any test machine has, and a number a person can read.
    let r = match health::check_node(Some(&probe), &sc(1 << 50)) {
        Err(why @ health::DownReason::Capacity { .. }) => Ok(format!("caught: {why}")),
        other => Err(format!(
            "a file system smaller than configured gave {}",
            verdict(&other)
        )),
    };
    out.push(check("health check: capacity", start, r));
    // touch + rm on a full file system (needs a mount: root).
    let start = Instant::now();
    let at = probe.join("dev/shm");
    let r = match faultsim::inject::mount_tmpfs(&at, 64 * 1024) {
        Err(e) => Err(format!("not run: cannot mount a small tmpfs ({e})")),
        Ok(mounted) => {
            let fill = faultsim::inject::fill_dir(&at, 0, 1 << 20);
            let res = match (fill, health::check_node(Some(&probe), &sc(0))) {
                (Ok(_), Err(why @ health::DownReason::TouchFailed { .. })) => {
                    Ok(format!("caught: {why}"))
                }
                (Ok(_), other) => Err(format!("a full file system gave {}", verdict(&other))),
                (Err(e), _) => Err(format!("could not fill the tmpfs: {e}")),
            };
            let _ = mounted.undo();
            res
        }
    };
    out.push(check("health check: touch and remove", start, r));
    let _ = std::fs::remove_dir_all(&probe);
    out
}

/// `scr-harness validate`: print the report; exit SUCCESS when every check
/// that ran passed, UNEXPECTED when one failed, FAILED when the checklist
/// could not run (codes of [`scr::exit::Code`]).
pub fn main(a: ValidateArgs) -> ExitCode {
    let checks = match run(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scr-harness validate: {e}");
            return Code::Failed.into();
        }
    };
    let failed = checks.iter().filter(|c| c.status == "FAIL").count();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&checks).unwrap_or_default()
        );
    } else {
        for c in &checks {
            println!(
                "[{:^7}] {} ({:.1} s)\n          {}",
                c.status, c.name, c.time_s, c.detail
            );
        }
        println!(
            "validate: {} checks, {} passed, {} failed, {} not run",
            checks.len(),
            checks.iter().filter(|c| c.status == "pass").count(),
            failed,
            checks.iter().filter(|c| c.status == "not run").count()
        );
    }
    if failed > 0 {
        Code::Unexpected.into()
    } else {
        Code::Success.into()
    }
}

/// A health check's answer in words: "healthy" or why the node is down.
fn verdict(r: &Result<(), health::DownReason>) -> String {
    match r {
        Ok(()) => "healthy".to_string(),
        Err(why) => format!("down: {why}"),
    }
}

/// `scr-harness check-node --storage PATH[:MIN_BYTES]...`: `scr_check_node`
/// on this node. Exit SUCCESS when healthy, UNEXPECTED with the reason
/// otherwise, USAGE for a bad `--storage`; `--json` prints one object
/// (`healthy`, `why`, `storage`) instead of the text line.
pub fn check_node_main(storage: &[String], json: bool) -> ExitCode {
    let s = match parse_storage(storage) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scr-harness check-node: {e}");
            return Code::Usage.into();
        }
    };
    let checked = health::check_node(None, &s);
    if json {
        // One JSON document: what was checked, and the verdict with its reason.
        let storage: Vec<_> = s
            .iter()
            .map(|c| {
                serde_json::json!({
                    "path": c.path.to_string_lossy(),
                    "min_bytes": c.min_capacity_bytes,
                })
            })
            .collect();
        let why = checked.as_ref().err().map(ToString::to_string);
        println!(
            "{}",
            serde_json::json!({ "healthy": checked.is_ok(), "why": why, "storage": storage })
        );
    }
    match checked {
        Ok(()) => {
            if !json {
                println!("healthy");
            }
            Code::Success.into()
        }
        Err(why) => {
            if !json {
                println!("{} {why}", scr::runloop::probe::DOWN_MARK);
            }
            Code::Unexpected.into()
        }
    }
}

/// The argument vector of `--kill-command` for `node`: the template split
/// into words (blanks separate them; single or double quotes group, with
/// no other shell syntax), `{node}` replaced inside each word. No shell
/// ever sees it, and `node` must be one of the allocation's `nodes` and a
/// plain host name (letters, digits, `.`, `-`, `_`), so a node name cannot
/// smuggle in a command.
pub fn kill_argv(template: &str, node: &str, nodes: &[String]) -> Result<Vec<String>, String> {
    let plain = !node.is_empty()
        && !node.starts_with('-')
        && node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !plain {
        return Err(format!(
            "--kill-command: node name {node:?} is not a plain host name; refusing to run it"
        ));
    }
    if !nodes.iter().any(|n| n == node) {
        return Err(format!(
            "--kill-command: {node:?} is not one of the allocation's nodes ({}); refusing to run it",
            nodes.join(",")
        ));
    }
    let words = split_words(template)?;
    if words.is_empty() {
        return Err("--kill-command is empty".into());
    }
    Ok(words.iter().map(|w| w.replace("{node}", node)).collect())
}

/// Split `text` into words at blanks; `'...'` and `"..."` keep blanks
/// (no escapes, variables or other shell syntax).
fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            (None, c) => cur.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(q) = quote {
        return Err(format!(
            "--kill-command: unterminated {q} quote in {text:?}"
        ));
    }
    words.extend(cur);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<String> {
        ["n1", "n2", "node-3.cluster"].map(String::from).to_vec()
    }

    #[test]
    fn storage_sizes_take_units_as_scrconf_does() {
        let specs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got = parse_storage(&specs(&["/x:1G", "/y:512MB", "/z:4096", "/w"])).unwrap();
        let sizes: Vec<u64> = got.iter().map(|c| c.min_capacity_bytes).collect();
        assert_eq!(
            sizes,
            [
                scr::config::params::parse_bytes("1GB").unwrap(),
                512 << 20,
                4096,
                0
            ]
        );
        assert_eq!(got[0].path, PathBuf::from("/x"));
        let e = parse_storage(&specs(&["/x:lots"])).unwrap_err();
        assert!(
            e.contains("/x:lots") && e.contains("not a byte count"),
            "{e}"
        );
    }

    #[test]
    fn kill_command_is_an_argv_with_the_node_substituted() {
        assert_eq!(
            kill_argv("ssh {node} sudo systemctl poweroff", "n2", &nodes()).unwrap(),
            ["ssh", "n2", "sudo", "systemctl", "poweroff"]
        );
        assert_eq!(
            kill_argv(
                "ipmi --host={node}-bmc 'power off'",
                "node-3.cluster",
                &nodes()
            )
            .unwrap(),
            ["ipmi", "--host=node-3.cluster-bmc", "power off"]
        );
        // Shell syntax in the template stays literal words: no shell runs.
        assert_eq!(
            kill_argv("echo {node}; rm -rf /tmp/x", "n1", &nodes()).unwrap(),
            ["echo", "n1;", "rm", "-rf", "/tmp/x"]
        );
    }

    /// Hardening issue: `{node}` was substituted unquoted into `sh -c`, so
    /// a node name such as `n1;touch /tmp/pwned` ran a second command.
    #[test]
    fn a_node_name_cannot_inject_a_command() {
        let mut list = nodes();
        for bad in [
            "n1;touch /tmp/pwned",
            "$(reboot)",
            "n1 n2",
            "`id`",
            "-oProxyCommand=x",
            "",
        ] {
            list.push(bad.to_string());
            let e = kill_argv("ssh {node} poweroff", bad, &list).unwrap_err();
            assert!(e.contains("not a plain host name"), "{bad:?}: {e}");
        }
        let e = kill_argv("ssh {node} poweroff", "n9", &nodes()).unwrap_err();
        assert!(e.contains("not one of the allocation's nodes"), "{e}");
        assert!(kill_argv("ssh '{node}", "n1", &nodes())
            .unwrap_err()
            .contains("unterminated"));
        assert!(kill_argv("   ", "n1", &nodes()).is_err());
    }

    /// The command really runs without a shell: a `;` in the template is
    /// an argument of `echo`, not a second command.
    #[test]
    fn kill_command_runs_without_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pwned");
        let template = format!("echo {{node}} ; touch {}", marker.display());
        let argv = kill_argv(&template, "n1", &nodes()).unwrap();
        let os: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
        let out = run_argv(&os, Duration::from_secs(10)).unwrap();
        assert_eq!(out.code(), 0);
        assert!(!marker.exists(), "no shell ran the second command");
    }
}
