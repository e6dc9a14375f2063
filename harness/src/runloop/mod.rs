//! The SCR run loop (`scr_run`, developer guide "Launch a run") on
//! simulated nodes, with fault injection and verification.
//!
//! An [`Allocation`] is a directory: one tree per node (job nodes and
//! spares, each given to its ranks as `SCR_NODE_ROOT`), a shared prefix
//! directory and a fault log. [`RunLoop::run`] then does what `scr_run` does:
//!
//! 1. before each launch: apply the plan's faults due "before run k", run
//!    the node health checks ([`crate::health`]; `SCR_EXCLUDE_NODES`; a node
//!    once down stays down), and stop on a halt condition in
//!    `<prefix>/.scr/halt.scr` (from launch 2 on);
//! 2. pick the nodes: every node of the previous launch that is still
//!    healthy keeps its place (its ranks find their cached files), lost
//!    ones are replaced by spares in allocation order; too few → stop;
//! 3. launch with `mpirun` under a time bound, the plan's in-process faults
//!    for this launch in `SCR_FAULT_PLAN`, firings logged to `SCR_FAULT_LOG`;
//!    faults the harness applies from outside "between checkpoints" are
//!    timed by making every rank sleep at that injection point while the
//!    harness, watching the fault log, damages files;
//! 4. after it: apply a killed node's aftermath (its directories removed or
//!    made unreachable), the faults due "after run k", undo transient
//!    faults (PFS outage, cache full), classify the launch
//!    ([`crate::outcome`]); stop when it exited 0, hung, or the budget is
//!    spent;
//! 5. after the loop: `scr postrun` when the `scr` command has it, as a
//!    real allocation's epilogue runs it: faults due "at postrun" applied
//!    first, the health checks tell it which nodes are down, and it reaches
//!    every node through a launcher (`env SCR_NODE_NAME=<node>
//!    SCR_NODE_ROOT=<tree>`), so `scr copy` runs once per node in its own
//!    process, with the plan's postrun faults in `SCR_FAULT_PLAN`; its
//!    `--json` report says what it saved ([`Scavenged`]);
//! 6. with `next_allocation`: every node tree is set aside (a new
//!    allocation: fresh nodes, empty caches, the same prefix) and the
//!    application runs once more; it must fetch the newest checkpoint the
//!    prefix index lists as COMPLETE and verify every byte of it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use faultsim::inject::{self, Record};
use faultsim::plan::{Area, Fault, NodeAftermath, Plan, What, When, POINT_COMPUTE};
use faultsim::seed::Seeded;
use scr::records::halt::{Halt, HALT_FILE, REASON_FINALIZE_CALLED};
use scr::records::Record as _;
use serde::Serialize;

use crate::health::{expand_hostlist, DownList, StorageCheck};
use crate::launch::{run_argv_watched, LaunchError, MpiJob, Tick};
use crate::outcome::{classify, AppReport, Class, End, LaunchFacts, Outcome, Scavenged, Token};

/// How long a launcher may outlive the last of its ranks before it is
/// declared stuck and killed (mpirun needs well under a second here).
pub const LAUNCHER_GRACE: Duration = Duration::from_secs(5);

/// How long every rank sleeps at an injection point while the harness
/// applies a fault from outside ("between checkpoints").
pub const WATCH_DELAY_MS: u64 = 1500;

/// The test application and how each launch calls it.
#[derive(Debug, Clone, Serialize)]
pub struct AppSpec {
    /// The program every rank runs.
    pub program: PathBuf,
    /// Arguments of every launch.
    pub args: Vec<String>,
    /// Extra arguments of the first launch only.
    pub first_args: Vec<String>,
    /// Extra arguments of every later launch.
    pub later_args: Vec<String>,
    /// For `scr_app`: (data seed, mean bytes), to check the bytes restored
    /// against the data plan. `None` for another application.
    pub data: Option<(u64, u64)>,
}

impl AppSpec {
    /// `scr_app --seed S --mean-bytes M --until-exit`, writing `first`
    /// checkpoints in the first launch and `later` in each relaunch, and
    /// asking SCR_Should_exit after each (a halt ends the run cleanly).
    pub fn scr_app(
        program: PathBuf,
        seed: u64,
        mean_bytes: u64,
        first: u64,
        later: u64,
    ) -> AppSpec {
        AppSpec {
            program,
            args: vec![
                "--seed".into(),
                seed.to_string(),
                "--mean-bytes".into(),
                mean_bytes.to_string(),
                "--until-exit".into(),
            ],
            first_args: vec!["--checkpoints".into(), first.to_string()],
            later_args: vec!["--checkpoints".into(), later.to_string()],
            data: Some((seed, mean_bytes)),
        }
    }

    fn args_for(&self, launch: u32) -> Vec<String> {
        let mut a = self.args.clone();
        a.extend(if launch == 1 {
            self.first_args.iter().cloned()
        } else {
            self.later_args.iter().cloned()
        });
        a
    }
}

/// A halt request the harness makes, as `scr halt` would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HaltEvent {
    /// When (between checkpoints of a launch, or before/after a launch).
    pub when: When,
    /// The launch, for `between-checkpoints` (default 1).
    #[serde(default = "one_u32")]
    pub run: u32,
    /// What is set in the halt file.
    pub set: HaltSet,
}

fn one_u32() -> u32 {
    1
}

/// The halt condition set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HaltSet {
    /// `scr halt`: an exit reason.
    Reason {
        /// The reason.
        #[serde(default = "halt_reason")]
        reason: String,
    },
    /// `scr halt --before`: ExitBefore now + `in_s`, with `HaltSeconds`
    /// margin `margin_s`.
    ExitBefore {
        /// Seconds from now.
        in_s: i64,
        /// Margin.
        margin_s: i64,
    },
    /// `scr halt --checkpoints N`.
    CheckpointsLeft {
        /// Checkpoints still allowed.
        left: i64,
    },
}

fn halt_reason() -> String {
    "SCR_HALT".into()
}

/// A simulated allocation: node trees, spares, a prefix, a fault log.
#[derive(Debug, Clone, Serialize)]
pub struct Allocation {
    /// The directory holding everything.
    pub root: PathBuf,
    /// Every node of the allocation, in order (job nodes first, spares after).
    pub nodes: Vec<String>,
    /// Nodes a launch needs (`SCR_MIN_NODES`).
    pub job_nodes: usize,
    /// Ranks on each node.
    pub ranks_per_node: usize,
}

impl Allocation {
    /// `job_nodes + spares` nodes `n0`, `n1`, … under `root` (created, with
    /// each node's storage bases, the prefix directory and an empty log).
    pub fn create(
        root: &Path,
        job_nodes: usize,
        spares: usize,
        ranks_per_node: usize,
        storage: &[StorageCheck],
    ) -> io::Result<Allocation> {
        // Absolute: every rank and the launcher see the same paths.
        let root = std::path::absolute(root)?;
        let a = Allocation {
            root,
            nodes: (0..job_nodes + spares).map(|i| format!("n{i}")).collect(),
            job_nodes,
            ranks_per_node,
        };
        fs::create_dir_all(a.prefix())?;
        for n in &a.nodes {
            for s in storage {
                fs::create_dir_all(crate::health::node_path(Some(&a.node_root(n)), &s.path))?;
            }
        }
        fs::write(a.fault_log(), b"")?;
        Ok(a)
    }

    /// A node's tree (its `SCR_NODE_ROOT`).
    pub fn node_root(&self, node: &str) -> PathBuf {
        self.root.join("nodes").join(node)
    }

    /// The prefix directory.
    pub fn prefix(&self) -> PathBuf {
        self.root.join("prefix")
    }

    /// The fault log every rank appends to.
    pub fn fault_log(&self) -> PathBuf {
        self.root.join("faults.jsonl")
    }
}

/// One fired fault, as the library logged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Firing {
    /// Injection point.
    pub point: String,
    /// Hit.
    pub hit: u64,
    /// Rank.
    pub rank: Option<u32>,
    /// Node.
    pub node: Option<String>,
    /// Action (compact form).
    pub action: String,
}

/// Read the fault log (lines that do not parse are skipped: a line being
/// appended right now may be partial).
pub fn read_fault_log(path: &Path) -> Vec<Firing> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What one launch did.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchRecord {
    /// 1-based.
    pub launch: u32,
    /// Nodes in rank order.
    pub nodes: Vec<String>,
    /// Nodes found down before it, with why (newly found ones only).
    pub newly_down: Vec<(String, String)>,
    /// The launcher's exit code (`None` after a timeout;
    /// [`LAUNCHER_STUCK_CODE`] when it outlived its ranks and was killed).
    pub exit_code: Option<i32>,
    /// The launcher outlived every rank and was killed.
    pub launcher_stuck: bool,
    /// Wall time.
    pub elapsed_s: f64,
    /// The `SCR_FAULT_PLAN` given.
    pub fault_plan: Option<String>,
    /// Faults that fired in it.
    pub fired: Vec<Firing>,
    /// In-process faults of this launch that never fired (compact form): the
    /// scenario did not test what it says.
    pub unfired: Vec<String>,
    /// What the harness did from outside, in order.
    pub external: Vec<String>,
    /// The application's report.
    pub report: AppReport,
    /// Checkpoints this launch completed: those the application reported,
    /// and those after which the application's `app.compute` point fired (a
    /// crash there comes after the checkpoint, before rank 0 printed it).
    pub completed: Vec<u64>,
    /// The classification.
    pub token: String,
    /// Why it is SILENT CORRUPTION, when it is.
    pub why: Option<String>,
    /// Standard output of the launch.
    pub stdout: String,
    /// Standard error of the launch.
    pub stderr: String,
}

/// The whole loop's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Every launch.
    pub launches: Vec<LaunchRecord>,
    /// The outcome.
    pub outcome: Outcome,
    /// Down nodes at the end, with the first reason each was found down.
    pub down: Vec<(String, String)>,
    /// What `scr postrun` did, when it ran.
    pub postrun: Option<PostrunRecord>,
    /// The next allocation's launch (`next_allocation`).
    pub next: Option<LaunchRecord>,
    /// Problems of the harness itself (a fault that could not be applied).
    pub harness_errors: Vec<String>,
}

/// What `scr postrun` did after the loop.
#[derive(Debug, Clone, Serialize)]
pub struct PostrunRecord {
    /// The command line (variables first, as `env` takes them).
    pub command: String,
    /// Its exit code (`None`: it outlived its bound and was killed).
    pub exit_code: Option<i32>,
    /// Wall time.
    pub elapsed_s: f64,
    /// Nodes found down before it (given as `--down`), with why.
    pub down: Vec<(String, String)>,
    /// The `SCR_FAULT_PLAN` its processes got.
    pub fault_plan: Option<String>,
    /// Faults that fired in it.
    pub fired: Vec<Firing>,
    /// Postrun faults that never fired (compact form).
    pub unfired: Vec<String>,
    /// What the harness did from outside, in order.
    pub external: Vec<String>,
    /// Its `--json` report, parsed.
    pub report: Option<PostrunJson>,
    /// One result per dataset handled (or why nothing was done).
    pub results: Vec<Scavenged>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The parts of `scr postrun --json` the harness judges
/// (`scr::scavenge::postrun::PostrunReport`; other fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PostrunJson {
    /// Nodes copied from.
    #[serde(default)]
    pub up_nodes: Vec<String>,
    /// Nodes skipped.
    #[serde(default)]
    pub down_nodes: Vec<String>,
    /// Datasets handled.
    #[serde(default)]
    pub datasets: Vec<PostrunDataset>,
    /// Why there was nothing to do.
    #[serde(default)]
    pub nothing_to_do: Option<String>,
}

/// One dataset of `scr postrun --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PostrunDataset {
    /// Dataset id.
    pub id: i64,
    /// Its name (`ckpt.<N>` for `scr_app`).
    #[serde(default)]
    pub name: Option<String>,
    /// `checkpoint` or `output`.
    #[serde(default)]
    pub kind: String,
    /// Complete in the prefix.
    #[serde(default)]
    pub complete: bool,
    /// Made CURRENT.
    #[serde(default)]
    pub current: bool,
    /// Why it could not be scavenged.
    #[serde(default)]
    pub error: Option<String>,
    /// The copies, one per node and round.
    #[serde(default)]
    pub copies: Vec<PostrunCopy>,
}

/// One node's `scr copy` in `scr postrun --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PostrunCopy {
    /// The node.
    pub node: String,
    /// `originals` or `partner`.
    #[serde(default)]
    pub round: String,
    /// Nothing of the dataset was cached there.
    #[serde(default)]
    pub not_cached: bool,
    /// Why the copy failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// Why `scr postrun`'s output says nothing the harness can judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PostrunParseError {
    /// Standard output is not the JSON report.
    #[error(
        "scr postrun --json exited {code} but its output is not a report ({reason}): {head:?}"
    )]
    NotJson {
        /// The exit code.
        code: i32,
        /// The parser's message.
        reason: String,
        /// The start of the output.
        head: String,
    },
}

impl PostrunJson {
    /// Parse `scr postrun --json`'s standard output.
    pub fn parse(stdout: &str, code: i32) -> Result<PostrunJson, PostrunParseError> {
        serde_json::from_str(stdout.trim()).map_err(|e| PostrunParseError::NotJson {
            code,
            reason: e.to_string(),
            head: stdout.chars().take(200).collect(),
        })
    }

    /// One result per dataset handled: `saved:N` when complete in the
    /// prefix, `lost:N` when not (N the checkpoint id from the name
    /// `ckpt.N`, else the dataset id); `nothing` when nothing needed it.
    pub fn results(&self) -> Vec<Scavenged> {
        if self.nothing_to_do.is_some() || self.datasets.is_empty() {
            return vec![Scavenged::Nothing];
        }
        self.datasets
            .iter()
            .map(|d| {
                let n = d
                    .name
                    .as_deref()
                    .and_then(|n| n.strip_prefix("ckpt."))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(d.id.max(0) as u64);
                if d.complete && d.error.is_none() {
                    Scavenged::Saved(n)
                } else {
                    Scavenged::Lost(n)
                }
            })
            .collect()
    }
}

/// The run loop's settings.
#[derive(Debug, Clone)]
pub struct RunLoop {
    /// The allocation.
    pub alloc: Allocation,
    /// The application.
    pub app: AppSpec,
    /// SCR parameters and other variables for every rank.
    pub env: BTreeMap<String, String>,
    /// Faults.
    pub plan: Plan,
    /// Halt requests.
    pub halts: Vec<HaltEvent>,
    /// Seed of every random choice of the faults.
    pub seed: u64,
    /// Most launches (`SCR_RUNS`).
    pub max_launches: u32,
    /// Bound on each launch.
    pub timeout: Duration,
    /// Storage checked on every node.
    pub storage: Vec<StorageCheck>,
    /// The launcher and its leading arguments.
    pub mpirun: Vec<String>,
    /// The `scr` command, for `scr postrun` (skipped when absent or when
    /// it has no `postrun`).
    pub scr_command: Option<PathBuf>,
    /// After postrun, run the application once more on a new allocation
    /// (fresh node trees, the same prefix) and judge both.
    pub next_allocation: bool,
}

/// The storage every node is checked for: the control and cache bases
/// named in `env` (default `/dev/shm`), with no capacity requirement.
pub fn default_storage(env: &BTreeMap<String, String>) -> Vec<StorageCheck> {
    let base = |k: &str| {
        env.get(k)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/dev/shm"))
    };
    let mut v = vec![StorageCheck {
        role: "control".into(),
        path: base("SCR_CNTL_BASE"),
        min_capacity_bytes: 0,
    }];
    let cache = base("SCR_CACHE_BASE");
    if cache != v[0].path {
        v.push(StorageCheck {
            role: "cache".into(),
            path: cache,
            min_capacity_bytes: 0,
        });
    }
    v
}

/// The nodes of the next launch: every healthy node of `previous` keeps its
/// place, lost ones are replaced by the first healthy unused nodes of the
/// allocation. `None` when fewer than `need` healthy nodes remain.
pub fn choose_nodes(
    all: &[String],
    previous: &[String],
    down: &DownList,
    need: usize,
) -> Option<Vec<String>> {
    let mut spares = all
        .iter()
        .filter(|n| !down.is_down(n) && !previous.contains(n));
    let mut chosen = Vec::with_capacity(need);
    for i in 0..need {
        match previous.get(i) {
            Some(p) if !down.is_down(p) => chosen.push(p.clone()),
            _ => chosen.push(spares.next()?.clone()),
        }
    }
    Some(chosen)
}

/// The halt reason in the prefix's halt file, ignoring the one a normal
/// `SCR_Finalize` leaves (the next `SCR_Init` clears it).
pub fn halt_condition(prefix: &Path) -> Option<String> {
    let path = prefix.join(".scr").join(HALT_FILE);
    let halt = Halt::read_file(&path).ok()?;
    if halt.exit_reason.as_deref() == Some(REASON_FINALIZE_CALLED) {
        let mut h = halt.clone();
        h.exit_reason = None;
        return h.halt_reason(now_s());
    }
    halt.halt_reason(now_s())
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Set a halt condition in the prefix's halt file: with `scr halt` when
/// the `scr` command has it (what an administrator or a user would run),
/// else by writing the halt file directly.
pub fn set_halt(prefix: &Path, set: &HaltSet, scr: Option<&Path>) -> Result<String, String> {
    if let Some(scr) = scr.filter(|s| has_subcommand(s, "halt")) {
        let mut argv: Vec<OsString> = vec![scr.into(), "halt".into()];
        match set {
            HaltSet::Reason { reason } => {
                argv.extend(["--reason".into(), reason.into()]);
            }
            HaltSet::ExitBefore { in_s, margin_s } => {
                argv.extend([
                    "--before".into(),
                    format!("+{in_s}s").into(),
                    "--seconds".into(),
                    margin_s.to_string().into(),
                ]);
            }
            HaltSet::CheckpointsLeft { left } => {
                argv.extend(["--checkpoints".into(), left.to_string().into()]);
            }
        }
        argv.push(prefix.into());
        let shown = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let out = crate::launch::run_argv(&argv, Duration::from_secs(30))
            .map_err(|e| format!("{shown}: {e}"))?;
        if !out.success() {
            return Err(format!(
                "{shown}: exit {}: {}",
                out.code(),
                out.stderr.trim()
            ));
        }
        return Ok(format!("ran `{shown}`"));
    }
    let dir = prefix.join(".scr");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(HALT_FILE);
    let now = now_s();
    Halt::update_file(&path, |h: &mut Halt| match set {
        HaltSet::Reason { reason } => h.exit_reason = Some(reason.clone()),
        HaltSet::ExitBefore { in_s, margin_s } => {
            h.exit_before_s = Some(now + in_s);
            h.halt_seconds_s = Some(*margin_s);
        }
        HaltSet::CheckpointsLeft { left } => h.checkpoints_left = Some(*left),
    })
    .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!("halt file: {set:?}"))
}

/// True when `scr` has the subcommand `name` (`scr NAME --help` succeeds).
pub fn has_subcommand(scr: &Path, name: &str) -> bool {
    std::process::Command::new(scr)
        .args([name, "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `scr` has a `postrun` subcommand.
pub fn has_postrun(scr: &Path) -> bool {
    has_subcommand(scr, "postrun")
}

/// A moment at which the harness acts from outside during a launch.
#[derive(Debug, Clone)]
enum Due<'a> {
    Fault(usize, &'a Fault),
    Halt(&'a HaltEvent),
}

impl RunLoop {
    fn seeded(&self) -> Seeded {
        Seeded::new(self.seed)
    }

    fn excluded(&self) -> Vec<String> {
        self.env
            .get("SCR_EXCLUDE_NODES")
            .and_then(|l| expand_hostlist(l).ok())
            .unwrap_or_default()
    }

    /// Apply one external fault; returns what was done.
    fn apply_external(
        &self,
        index: usize,
        fault: &Fault,
        nodes: &[String],
        transient: &mut Vec<Record>,
    ) -> Result<Vec<String>, String> {
        let seeded = self.seeded();
        let stream = format!("fault.{index}");
        let err = |e: inject::InjectError| e.to_string();
        let node_area = |node: &str, area: Area| {
            let base = match area {
                Area::Control => self.env.get("SCR_CNTL_BASE"),
                _ => self.env.get("SCR_CACHE_BASE"),
            }
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/dev/shm"));
            crate::health::node_path(Some(&self.alloc.node_root(node)), &base)
        };
        let mut done = Vec::new();
        match &fault.what {
            What::Corrupt { target, how } => {
                let roots: Vec<PathBuf> = match (target.area, &target.node) {
                    (Area::Prefix, _) => vec![self.alloc.prefix()],
                    (area, Some(n)) => vec![node_area(n, area)],
                    (area, None) => nodes.iter().map(|n| node_area(n, area)).collect(),
                };
                for (i, root) in roots.iter().enumerate() {
                    if !root.is_dir() {
                        continue;
                    }
                    let recs = inject::corrupt_target(
                        root,
                        target,
                        how,
                        &seeded,
                        &format!("{stream}.{i}"),
                    )
                    .map_err(err)?;
                    done.extend(recs.iter().map(|r| format!("{r:?}")));
                }
                if done.is_empty() {
                    done.push(format!("fault {index}: no file matched {target:?}"));
                }
            }
            What::PfsOutage { method } => {
                let r = inject::pfs_outage(&self.alloc.prefix(), *method).map_err(err)?;
                done.push(format!("{r:?}"));
                transient.push(r);
            }
            What::CacheFull {
                node,
                leave_free_bytes,
            } => {
                let targets: Vec<String> = match node {
                    Some(n) => vec![n.clone()],
                    None => nodes.to_vec(),
                };
                for n in targets {
                    let dir = node_area(&n, Area::Cache);
                    let r = inject::fill_dir(&dir, *leave_free_bytes, 1 << 30).map_err(err)?;
                    done.push(format!("{r:?}"));
                    transient.push(r);
                }
            }
            What::KillNode { node, then } => {
                // Between launches no process of the job runs: the node's
                // death is its storage's fate. (During a launch the library
                // kills the node's ranks itself, scoped to the job.)
                done.push(format!("node {node} dies between launches"));
                done.extend(self.aftermath(node, *then)?);
            }
            other => {
                return Err(format!(
                    "fault {index}: {other:?} happens inside the library, not from outside"
                ))
            }
        }
        Ok(done)
    }

    /// What happens to a dead node's directories.
    fn aftermath(&self, node: &str, then: NodeAftermath) -> Result<Vec<String>, String> {
        let root = self.alloc.node_root(node);
        if !root.is_dir() {
            return Ok(Vec::new());
        }
        let r = match then {
            NodeAftermath::Keep => return Ok(Vec::new()),
            NodeAftermath::RemoveDirs => inject::remove_dir_tree(&root),
            NodeAftermath::MakeUnreadable => {
                inject::make_node_unreadable(&root, faultsim::plan::OutageMethod::Auto)
            }
        }
        .map_err(|e| e.to_string())?;
        Ok(vec![format!("{r:?}")])
    }

    fn due_at(&self, launch: u32, pick: impl Fn(&When) -> bool) -> Vec<Due<'_>> {
        let mut v: Vec<Due<'_>> = self
            .plan
            .external()
            .filter(|(_, f)| !f.what.in_process() || f.when.as_point().is_none())
            .filter(|(_, f)| pick(&f.when) && (run_of(f) == launch))
            .map(|(i, f)| Due::Fault(i, f))
            .collect();
        v.extend(
            self.halts
                .iter()
                .filter(|h| pick(&h.when) && halt_run(h) == launch)
                .map(Due::Halt),
        );
        v
    }

    fn do_due(
        &self,
        due: &[Due<'_>],
        nodes: &[String],
        transient: &mut Vec<Record>,
        log: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) {
        for d in due {
            match d {
                Due::Fault(i, f) => match self.apply_external(*i, f, nodes, transient) {
                    Ok(done) => log.extend(done),
                    Err(e) => errors.push(e),
                },
                Due::Halt(h) => {
                    match set_halt(&self.alloc.prefix(), &h.set, self.scr_command.as_deref()) {
                        Ok(done) => log.push(done),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }

    /// Run the loop to its end.
    pub fn run(&self) -> RunResult {
        let mut down = DownList::new();
        let mut previous: Vec<String> = Vec::new();
        let mut launches: Vec<LaunchRecord> = Vec::new();
        let mut tokens: Vec<Token> = Vec::new();
        let mut completed: Vec<u64> = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        let excluded = self.excluded();
        let mut end = End::Retries;
        let root_of = |n: &str| Some(self.alloc.node_root(n));
        // The log is the job's, not the harness's: a log that cannot be
        // opened is a warning, never a harness error of the cell.
        let (runlog, warning) = crate::runlog::RunLog::open(&self.alloc.prefix(), &self.env);
        if let Some(w) = warning {
            eprintln!("scr-harness: warning: {w}");
        }
        for launch in 1..=self.max_launches.max(1) {
            let mut external = Vec::new();
            let mut transient: Vec<Record> = Vec::new();
            let before = self.due_at(
                launch,
                |w| matches!(w, When::BeforeRun { run } if *run == launch),
            );
            let prev_or_first = if previous.is_empty() {
                self.alloc.nodes[..self.alloc.job_nodes.min(self.alloc.nodes.len())].to_vec()
            } else {
                previous.clone()
            };
            self.do_due(
                &before,
                &prev_or_first,
                &mut transient,
                &mut external,
                &mut errors,
            );
            let newly = down.update(&self.alloc.nodes, &excluded, &root_of, &self.storage);
            let newly_down: Vec<(String, String)> = newly
                .iter()
                .filter_map(|n| {
                    down.entries()
                        .find(|(d, _)| d == n)
                        .map(|(d, r)| (d.to_string(), r.to_string()))
                })
                .collect();
            for (node, reason) in &newly_down {
                runlog.node_fail(node, reason);
            }
            if launch > 1 {
                if let Some(reason) = halt_condition(&self.alloc.prefix()) {
                    external.push(format!("halt condition before launch {launch}: {reason}"));
                    end = End::Halted;
                    undo_all(&mut transient, &mut errors);
                    break;
                }
            }
            let Some(nodes) =
                choose_nodes(&self.alloc.nodes, &previous, &down, self.alloc.job_nodes)
            else {
                end = End::Nodes;
                undo_all(&mut transient, &mut errors);
                break;
            };
            let procs = (nodes.len() * self.alloc.ranks_per_node) as u64;
            runlog.run_start(launch, self.max_launches.max(1), procs, &nodes);
            let rec = self.launch(
                launch,
                &nodes,
                newly_down,
                external,
                &mut transient,
                &completed,
                &mut errors,
            );
            undo_all(&mut transient, &mut errors);
            completed.extend(rec.completed.iter().copied());
            let timed_out = rec.exit_code.is_none();
            let exited_ok = rec.exit_code == Some(0);
            let halted = rec.report.halted;
            runlog.run_end(
                launch,
                &crate::runlog::run_end_note(rec.exit_code, halted, self.timeout.as_secs_f64()),
                rec.elapsed_s,
            );
            tokens.push(
                rec.token
                    .parse()
                    .unwrap_or(Token::of(crate::outcome::Class::Died)),
            );
            launches.push(rec);
            previous = nodes;
            if timed_out {
                end = End::Hang;
                break;
            }
            if exited_ok {
                end = if halted { End::Halted } else { End::Completed };
                break;
            }
            if launches
                .last()
                .is_some_and(|l| l.stderr.contains(LAUNCH_FAILED_MARK))
            {
                end = End::Launch;
                break;
            }
        }
        let postrun = self.postrun(&mut down, &previous, &mut errors);
        if self.next_allocation && postrun.is_none() {
            errors.push(
                "next_allocation: no `scr` command with `postrun` (give --scr): nothing was scavenged"
                    .into(),
            );
        }
        let mut outcome = Outcome::of(tokens, end);
        let mut next = None;
        if self.next_allocation {
            outcome.postrun = Some(
                postrun
                    .as_ref()
                    .map_or_else(|| vec![Scavenged::Failed], |p| p.results.clone()),
            );
            let rec = self.next_launch(&completed, &mut errors);
            outcome.next = Some(rec.token.parse().unwrap_or(Token::of(Class::Died)));
            next = Some(rec);
        }
        RunResult {
            launches,
            outcome,
            down: down
                .entries()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect(),
            postrun,
            next,
            harness_errors: errors,
        }
    }

    /// `scr postrun` after the loop, as an allocation's epilogue runs it:
    /// see the module documentation, step 5. `None` without the command.
    fn postrun(
        &self,
        down: &mut DownList,
        last_nodes: &[String],
        errors: &mut Vec<String>,
    ) -> Option<PostrunRecord> {
        let scr = self.scr_command.as_ref()?;
        if !has_postrun(scr) {
            return None;
        }
        // Absolute: the launcher runs it as each node sees it.
        let scr = &std::path::absolute(scr).unwrap_or_else(|_| scr.clone());
        let mut external = Vec::new();
        let mut transient: Vec<Record> = Vec::new();
        // Faults at the start of postrun, from outside.
        let due: Vec<Due<'_>> = self
            .plan
            .external()
            .filter(|(_, f)| f.when.is_postrun() && f.when.as_postrun_point().is_none())
            .map(|(i, f)| Due::Fault(i, f))
            .collect();
        if !due.is_empty() {
            external.push("before scr postrun:".into());
        }
        self.do_due(&due, last_nodes, &mut transient, &mut external, errors);
        // What scr_postrun learns from the resource manager: nodes down.
        let root_of = |n: &str| Some(self.alloc.node_root(n));
        down.update(&self.alloc.nodes, &self.excluded(), &root_of, &self.storage);
        let down_now: Vec<(String, String)> = down
            .entries()
            .map(|(n, r)| (n.to_string(), r.to_string()))
            .collect();
        let plan = self.plan.postrun_fault_plan();
        let plan_text = (!plan.faults.is_empty()).then(|| plan.to_string());
        // `env VAR=VALUE ... scr postrun ... --launch env --launch-arg
        // SCR_NODE_NAME={node} --launch-arg SCR_NODE_ROOT=<tree>`: the
        // variables reach the command without touching the harness's own
        // environment, and each node's `scr copy` runs in its own process
        // with its node's identity, as `srun -w {node}` would run it.
        let mut argv: Vec<OsString> = vec!["env".into()];
        let mut vars: BTreeMap<String, String> = self.env.clone();
        vars.insert(
            scr::fault::ENV_LOG.into(),
            self.alloc.fault_log().to_string_lossy().into_owned(),
        );
        vars.insert(
            scr::fault::ENV_JOB.into(),
            format!("{}-postrun", self.alloc.root.display()),
        );
        if let Some(p) = &plan_text {
            vars.insert(scr::fault::ENV_PLAN.into(), p.clone());
        }
        argv.extend(vars.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
        argv.push(scr.clone().into());
        argv.push("postrun".into());
        argv.push("--prefix".into());
        argv.push(self.alloc.prefix().into());
        argv.push("--nodes".into());
        argv.push(self.alloc.nodes.join(",").into());
        let down_nodes: Vec<&str> = down_now.iter().map(|(n, _)| n.as_str()).collect();
        if !down_nodes.is_empty() {
            argv.push("--down".into());
            argv.push(down_nodes.join(",").into());
        }
        let launch_args = [
            format!("{}={{node}}", crate::launch::NODE_NAME_VAR),
            format!(
                "{}={}/{{node}}",
                crate::app::NODE_ROOT_VAR,
                self.alloc.root.join("nodes").display()
            ),
        ];
        argv.push("--launch".into());
        argv.push("env".into());
        for a in launch_args {
            argv.push("--launch-arg".into());
            argv.push(a.into());
        }
        argv.push("--scr-bin".into());
        argv.push(scr.clone().into());
        argv.push("--launch-timeout".into());
        argv.push(self.timeout.as_secs().max(1).to_string().into());
        argv.push("--json".into());
        let command = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let log_start = read_fault_log(&self.alloc.fault_log()).len();
        let start = Instant::now();
        // Each node's copy has the launch bound; the whole scavenge twice
        // that (two rounds), then it is a hang.
        let bound = self.timeout.saturating_mul(2);
        let ran = crate::launch::run_argv(&argv, bound);
        let elapsed_s = start.elapsed().as_secs_f64();
        let fired: Vec<Firing> = read_fault_log(&self.alloc.fault_log())
            .into_iter()
            .skip(log_start)
            .collect();
        let unfired: Vec<String> = plan
            .faults
            .iter()
            .filter(|spec| {
                !fired.iter().any(|f| {
                    f.point == spec.point
                        && spec.fires_on(f.hit)
                        && spec
                            .node
                            .as_ref()
                            .is_none_or(|n| f.node.as_ref() == Some(n))
                })
            })
            .map(|spec| spec.to_string())
            .collect();
        // A node killed inside the scavenge: its storage follows.
        for f in self.plan.faults.iter().filter(|f| f.when.is_postrun()) {
            if let What::KillNode { node, then } = &f.what {
                if f.when.as_postrun_point().is_some()
                    && fired
                        .iter()
                        .any(|x| x.action == "kill-node" && x.node.as_deref() == Some(node))
                {
                    match self.aftermath(node, *then) {
                        Ok(done) => external.extend(done),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
        undo_all(&mut transient, errors);
        let (exit_code, stdout, stderr, results, report) = match ran {
            Ok(out) => {
                let code = out.code();
                // 0: all saved; 3: something incomplete (both print the
                // report); anything else failed before reporting.
                let (report, results) = if code == 0 || code == 3 {
                    match PostrunJson::parse(&out.stdout, code) {
                        Ok(r) => {
                            let res = r.results();
                            (Some(r), res)
                        }
                        Err(e) => {
                            errors.push(e.to_string());
                            (None, vec![Scavenged::Failed])
                        }
                    }
                } else {
                    (None, vec![Scavenged::Failed])
                };
                (Some(code), out.stdout, out.stderr, results, report)
            }
            Err(LaunchError::Timeout { stdout, stderr, .. }) => {
                (None, stdout, stderr, vec![Scavenged::Hang], None)
            }
            Err(e) => {
                errors.push(format!("scr postrun: {e}"));
                (
                    Some(-1),
                    String::new(),
                    e.to_string(),
                    vec![Scavenged::Failed],
                    None,
                )
            }
        };
        Some(PostrunRecord {
            command,
            exit_code,
            elapsed_s,
            down: down_now,
            fault_plan: plan_text,
            fired,
            unfired,
            external,
            report,
            results,
            stdout,
            stderr,
        })
    }

    /// `env OMPI_MCA_orte_tmpdir_base=<allocation>/ompi argv...`: each
    /// allocation gets its own OpenMPI session directory. Launchers started
    /// at the same moment (parallel campaign cells, other jobs of the
    /// machine) otherwise race to create the shared `/tmp/ompi.<host>.<uid>`
    /// and one of them can fail in orte_init ("mkdir: File exists", seen
    /// in a campaign) before any rank starts. `env` execs the launcher, so
    /// its pid is the launcher's. Left alone when the variable is set.
    fn private_session_dir(&self, argv: Vec<OsString>) -> Vec<OsString> {
        const VAR: &str = "OMPI_MCA_orte_tmpdir_base";
        if std::env::var_os(VAR).is_some() {
            return argv;
        }
        let dir = self.alloc.root.join("ompi");
        if fs::create_dir_all(&dir).is_err() {
            return argv;
        }
        let mut v: Vec<OsString> = vec!["env".into(), format!("{VAR}={}", dir.display()).into()];
        v.extend(argv);
        v
    }

    /// The next allocation (module documentation, step 6): every node tree
    /// set aside, fresh ones made, the application launched once with no
    /// faults; judged against the newest checkpoint the prefix index lists
    /// as COMPLETE.
    fn next_launch(&self, completed: &[u64], errors: &mut Vec<String>) -> LaunchRecord {
        let mut external = Vec::new();
        let nodes_dir = self.alloc.root.join("nodes");
        let old = self.alloc.root.join("nodes.first-allocation");
        if nodes_dir.exists() {
            let _ = fs::remove_dir_all(&old);
            match fs::rename(&nodes_dir, &old) {
                Ok(()) => external.push(format!(
                    "new allocation: the first allocation's node trees moved to {}",
                    old.display()
                )),
                Err(e) => errors.push(format!(
                    "next allocation: moving {} aside: {e}",
                    nodes_dir.display()
                )),
            }
        }
        for n in &self.alloc.nodes {
            for st in &self.storage {
                let dir = crate::health::node_path(Some(&self.alloc.node_root(n)), &st.path);
                if let Err(e) = fs::create_dir_all(&dir) {
                    errors.push(format!("next allocation: {}: {e}", dir.display()));
                }
            }
        }
        let newest = newest_complete_checkpoint(&self.alloc.prefix());
        external.push(match newest {
            Some(n) => format!("the prefix index lists ckpt.{n} as the newest COMPLETE checkpoint"),
            None => "the prefix index lists no COMPLETE checkpoint".into(),
        });
        let mut next = self.clone();
        next.plan = Plan {
            name: None,
            seed: None,
            faults: Vec::new(),
        };
        next.halts.clear();
        next.next_allocation = false;
        next.app.first_args = next.app.later_args.clone();
        // A new allocation is a new job.
        let job = self.env.get("SCR_JOB_ID").cloned().unwrap_or_default();
        let next_job = job
            .parse::<u64>()
            .map_or_else(|_| format!("{job}next"), |j| (j + 1).to_string());
        next.env.insert("SCR_JOB_ID".into(), next_job);
        let nodes: Vec<String> =
            self.alloc.nodes[..self.alloc.job_nodes.min(self.alloc.nodes.len())].to_vec();
        let mut transient = Vec::new();
        let mut rec = next.launch(
            1,
            &nodes,
            Vec::new(),
            external,
            &mut transient,
            completed,
            errors,
        );
        undo_all(&mut transient, errors);
        if let Some(why) = next_rollback(&rec, newest) {
            rec.token = Class::SilentCorruption.name().to_string();
            rec.why = Some(why);
        }
        rec
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        launch: u32,
        nodes: &[String],
        newly_down: Vec<(String, String)>,
        mut external: Vec<String>,
        transient: &mut Vec<Record>,
        completed_before: &[u64],
        errors: &mut Vec<String>,
    ) -> LaunchRecord {
        let mut job = MpiJob::simulated(&self.app.program, nodes.len(), self.alloc.ranks_per_node)
            .args(self.app.args_for(launch))
            .timeout(self.timeout);
        if let Some((first, rest)) = self.mpirun.split_first() {
            job.mpirun = PathBuf::from(first);
            job.mpirun_args = rest.to_vec();
        }
        for (spec, name) in job.nodes.iter_mut().zip(nodes) {
            spec.name = name.clone();
            spec.env.insert(
                crate::app::NODE_ROOT_VAR.to_string(),
                self.alloc.node_root(name).to_string_lossy().into_owned(),
            );
        }
        for (k, v) in &self.env {
            job = job.env(k.clone(), v.clone());
        }
        job = job.env("SCR_PREFIX", self.alloc.prefix().to_string_lossy());
        job = job.env(
            scr::fault::ENV_LOG,
            self.alloc.fault_log().to_string_lossy(),
        );
        job = job.env(
            scr::fault::ENV_JOB,
            format!("{}-{launch}", self.alloc.root.display()),
        );
        // In-process faults of this launch first (the library fires the
        // first matching entry), then a sleep for every moment at which the
        // harness acts from outside.
        let mut plan = self.plan.fault_plan(launch);
        let during = self.due_at(launch, |w| matches!(w, When::BetweenCheckpoints { .. }));
        let mut watch: Vec<(u64, Vec<Due<'_>>)> = Vec::new();
        for d in during {
            let after = match &d {
                Due::Fault(_, f) => &f.when,
                Due::Halt(h) => &h.when,
            };
            let When::BetweenCheckpoints { after } = after else {
                continue;
            };
            match watch.iter_mut().find(|(a, _)| a == after) {
                Some((_, v)) => v.push(d),
                None => {
                    plan.faults.push(scr::fault::FaultSpec {
                        point: POINT_COMPUTE.to_string(),
                        hit: *after,
                        repeat: false,
                        rank: None,
                        node: None,
                        action: scr::fault::Action::Delay { ms: WATCH_DELAY_MS },
                    });
                    watch.push((*after, vec![d]));
                }
            }
        }
        let plan_text = (!plan.faults.is_empty()).then(|| plan.to_string());
        if let Some(p) = &plan_text {
            job = job.env(scr::fault::ENV_PLAN, p.clone());
        }
        let log_start = read_fault_log(&self.alloc.fault_log()).len();
        let ranks = job.total_ranks();
        let start = Instant::now();
        let result = match job.argv().map(|a| self.private_session_dir(a)) {
            Ok(argv) => {
                let mut all_gone_since: Option<Instant> = None;
                let mut tick = |pid: u32| {
                    // A launcher whose ranks have all exited must follow
                    // within LAUNCHER_GRACE; otherwise it is stuck.
                    let (total, alive) = crate::launch::children_alive(pid);
                    if total >= ranks && alive == 0 {
                        let since = *all_gone_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= LAUNCHER_GRACE {
                            return Tick::LauncherStuck;
                        }
                    } else {
                        all_gone_since = None;
                    }
                    if watch.is_empty() {
                        return Tick::Continue;
                    }
                    let fired = read_fault_log(&self.alloc.fault_log());
                    let fired = &fired[log_start.min(fired.len())..];
                    watch.retain(|(after, due)| {
                        let arrived = fired
                            .iter()
                            .filter(|f| {
                                f.point == POINT_COMPUTE
                                    && f.hit == *after
                                    && f.action.starts_with("delay")
                            })
                            .count();
                        if arrived < ranks {
                            return true;
                        }
                        external.push(format!(
                            "while every rank sleeps after checkpoint {after} of launch {launch}:"
                        ));
                        self.do_due(due, nodes, transient, &mut external, errors);
                        false
                    });
                    Tick::Continue
                };
                run_argv_watched(&argv, self.timeout, &mut tick)
            }
            Err(e) => Err(e),
        };
        for (after, _) in &watch {
            errors.push(format!(
                "launch {launch}: the moment after checkpoint {after} never came (or not on every rank): its faults were not applied"
            ));
        }
        let fired: Vec<Firing> = read_fault_log(&self.alloc.fault_log())
            .into_iter()
            .skip(log_start)
            .filter(|f| !is_watch(f))
            .collect();
        let unfired: Vec<String> = self
            .plan
            .fault_plan(launch)
            .faults
            .iter()
            .filter(|spec| {
                !fired.iter().any(|f| {
                    f.point == spec.point
                        && spec.fires_on(f.hit)
                        && spec.rank.is_none_or(|r| f.rank == Some(r))
                        && spec
                            .node
                            .as_ref()
                            .is_none_or(|n| f.node.as_ref() == Some(n))
                })
            })
            .map(|spec| spec.to_string())
            .collect();
        // A node killed inside the library: its storage follows.
        for f in self.plan.faults.iter().filter(|f| run_of(f) == launch) {
            if let What::KillNode { node, then } = &f.what {
                if f.when.as_point().is_some()
                    && fired
                        .iter()
                        .any(|x| x.action == "kill-node" && x.node.as_deref() == Some(node))
                {
                    match self.aftermath(node, *then) {
                        Ok(done) => external.extend(done),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
        let after = self.due_at(
            launch,
            |w| matches!(w, When::AfterRun { run } if *run == launch),
        );
        self.do_due(&after, nodes, transient, &mut external, errors);
        let mut launcher_stuck = false;
        let (exit_code, stdout, stderr, timed_out) = match result {
            Ok(out) => (Some(out.code()), out.stdout, out.stderr, false),
            Err(LaunchError::Timeout { stdout, stderr, .. }) => (None, stdout, stderr, true),
            Err(LaunchError::LauncherStuck { stdout, stderr }) => {
                launcher_stuck = true;
                external.push(format!(
                    "every rank had exited but the launcher had not after {LAUNCHER_GRACE:?}: killed it (a launcher bug, not a hang of the application)"
                ));
                (Some(LAUNCHER_STUCK_CODE), stdout, stderr, false)
            }
            Err(e) => (
                Some(-1),
                String::new(),
                format!("{LAUNCH_FAILED_MARK}{e}"),
                false,
            ),
        };
        let report = AppReport::parse(&stdout);
        let plan_bytes = self.app.data.map(|(seed, mean)| {
            let ranks = (nodes.len() * self.alloc.ranks_per_node) as u32;
            report
                .attempts
                .iter()
                .filter_map(|a| a.ckpt)
                .map(|c| (c, plan_bytes(seed, ranks, c, mean)))
                .collect()
        });
        let facts = LaunchFacts {
            timed_out,
            completed_before: completed_before.to_vec(),
            plan_bytes,
        };
        let (token, why) = classify(&report, &facts);
        let first_id = report.restarted().and_then(|a| a.ckpt).map_or(1, |c| c + 1);
        let mut completed = report.completed.clone();
        let all_fired = read_fault_log(&self.alloc.fault_log());
        for f in all_fired.iter().skip(log_start) {
            if f.point == POINT_COMPUTE {
                let id = first_id + f.hit - 1;
                if !completed.contains(&id) {
                    completed.push(id);
                }
            }
        }
        completed.sort_unstable();
        LaunchRecord {
            launcher_stuck,
            completed,
            launch,
            nodes: nodes.to_vec(),
            newly_down,
            exit_code,
            elapsed_s: start.elapsed().as_secs_f64(),
            fault_plan: plan_text,
            fired,
            unfired,
            external,
            report,
            token: token.to_string(),
            why,
            stdout,
            stderr,
        }
    }
}

/// The checkpoint id of the newest dataset the prefix index lists as
/// COMPLETE (from its directory or name, `ckpt.<N>`, else the dataset id).
pub fn newest_complete_checkpoint(prefix: &Path) -> Option<u64> {
    let idx = scr::records::Index::read_file(scr::records::index::index_path(prefix)).ok()?;
    let (id, dir) = idx.most_recent_complete(None)?;
    let from_name = |s: &str| s.strip_prefix("ckpt.")?.parse::<u64>().ok();
    let name = idx
        .datasets
        .get(&id)
        .and_then(|m| m.get(dir))
        .and_then(|e| e.dataset.as_ref())
        .and_then(|d| d.name.clone());
    Path::new(dir)
        .file_name()
        .and_then(|f| from_name(&f.to_string_lossy()))
        .or_else(|| name.as_deref().and_then(from_name))
        .or_else(|| u64::try_from(id).ok())
}

/// Why the next allocation's restart is a silent roll-back: the prefix
/// index lists `newest` as COMPLETE (nothing else is there to excuse an
/// older restart: no fault happens in the next allocation), yet it
/// restarted older, or not at all although init finished.
fn next_rollback(rec: &LaunchRecord, newest: Option<u64>) -> Option<String> {
    let want = newest?;
    let token: Token = rec.token.parse().ok()?;
    if token.class.never() {
        return None;
    }
    match (token.class.restarted(), token.ckpt) {
        (true, Some(got)) if got < want => Some(format!(
            "the prefix index lists ckpt.{want} as COMPLETE but the next allocation restarted from ckpt.{got}"
        )),
        (false, _) if matches!(token.class, Class::Scratch | Class::Loss) => Some(format!(
            "the prefix index lists ckpt.{want} as COMPLETE but the next allocation restarted from nothing"
        )),
        _ => None,
    }
}

/// The exit code recorded for a launcher that outlived its ranks.
pub const LAUNCHER_STUCK_CODE: i32 = -2;

/// Marks a launch whose launcher could not start.
const LAUNCH_FAILED_MARK: &str = "scr-harness: the launcher could not start: ";

/// A firing of the harness's own sleep (not a fault of the plan).
fn is_watch(f: &Firing) -> bool {
    f.point == POINT_COMPUTE && f.action == format!("delay:{WATCH_DELAY_MS}")
}

fn run_of(f: &Fault) -> u32 {
    match f.when {
        When::BeforeRun { run } | When::AfterRun { run } => run,
        _ => f.run,
    }
}

fn halt_run(h: &HaltEvent) -> u32 {
    match h.when {
        When::BeforeRun { run } | When::AfterRun { run } => run,
        _ => h.run,
    }
}

fn undo_all(transient: &mut Vec<Record>, errors: &mut Vec<String>) {
    while let Some(r) = transient.pop() {
        if let Err(e) = r.undo() {
            errors.push(format!("undo {r:?}: {e}"));
        }
    }
}

/// Bytes all `ranks` ranks write in checkpoint `ckpt` (the data plan).
pub fn plan_bytes(seed: u64, ranks: u32, ckpt: u64, mean_bytes: u64) -> u64 {
    (0..ranks)
        .flat_map(|r| testing::data::file_plan(seed, r, ckpt, mean_bytes))
        .map(|f| f.size_bytes)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::DownReason;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn relaunches_keep_healthy_nodes_in_place_and_fill_with_spares() {
        let all = names(&["n0", "n1", "n2", "n3", "n4", "n5"]);
        let mut down = DownList::new();
        assert_eq!(
            choose_nodes(&all, &[], &down, 4).unwrap(),
            names(&["n0", "n1", "n2", "n3"])
        );
        down.mark("n1", DownReason::Excluded);
        let prev = names(&["n0", "n1", "n2", "n3"]);
        assert_eq!(
            choose_nodes(&all, &prev, &down, 4).unwrap(),
            names(&["n0", "n4", "n2", "n3"])
        );
        down.mark("n2", DownReason::Excluded);
        let prev = names(&["n0", "n4", "n2", "n3"]);
        assert_eq!(
            choose_nodes(&all, &prev, &down, 4).unwrap(),
            names(&["n0", "n4", "n5", "n3"])
        );
        down.mark("n5", DownReason::Excluded);
        let prev = names(&["n0", "n4", "n5", "n3"]);
        assert_eq!(choose_nodes(&all, &prev, &down, 4), None);
    }

    #[test]
    fn postrun_json_gives_one_result_per_dataset() {
        let json = r#"{"up_nodes":["n0"],"down_nodes":["n1"],"datasets":[
            {"id":2,"name":"ckpt.2","kind":"output","complete":true,"current":false,"error":null,"copies":[],"index":null},
            {"id":3,"name":"ckpt.3","kind":"checkpoint","complete":false,"current":false,"error":null,
             "copies":[{"node":"n1","round":"originals","report":null,"not_cached":false,"error":"gone"}]}],
            "nothing_to_do":null,"index_rebuilt":null}"#;
        let r = PostrunJson::parse(json, 3).unwrap();
        assert_eq!(r.results(), [Scavenged::Saved(2), Scavenged::Lost(3)]);
        assert_eq!(r.datasets[1].copies[0].error.as_deref(), Some("gone"));
        let nothing =
            PostrunJson::parse(r#"{"datasets":[],"nothing_to_do":"already"}"#, 0).unwrap();
        assert_eq!(nothing.results(), [Scavenged::Nothing]);
        let e = PostrunJson::parse("scr postrun: nothing", 0).unwrap_err();
        assert!(e.to_string().contains("not a report"), "{e}");
    }

    #[test]
    fn newest_complete_checkpoint_comes_from_the_index() {
        use scr::records::{Dataset, Index, Record};
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(newest_complete_checkpoint(tmp.path()), None);
        let mut idx = Index::default();
        idx.set_dataset(2, "ckpt.2", Dataset::new(2), true);
        idx.set_dataset(3, "ckpt.3", Dataset::new(3), false);
        let path = scr::records::index::index_path(tmp.path());
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        idx.write_file(&path).unwrap();
        assert_eq!(newest_complete_checkpoint(tmp.path()), Some(2));
    }

    #[test]
    fn halt_file_conditions_are_seen_and_finalize_is_not_a_halt() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(halt_condition(tmp.path()), None);
        set_halt(
            tmp.path(),
            &HaltSet::Reason {
                reason: REASON_FINALIZE_CALLED.into(),
            },
            None,
        )
        .unwrap();
        assert_eq!(halt_condition(tmp.path()), None);
        set_halt(tmp.path(), &HaltSet::CheckpointsLeft { left: 0 }, None).unwrap();
        assert!(halt_condition(tmp.path()).is_some());
        let tmp2 = tempfile::tempdir().unwrap();
        set_halt(
            tmp2.path(),
            &HaltSet::ExitBefore {
                in_s: 10,
                margin_s: 60,
            },
            None,
        )
        .unwrap();
        assert!(halt_condition(tmp2.path()).unwrap().contains("exit before"));
    }
}
