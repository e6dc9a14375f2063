//! Launchers: how a command reaches a node, and how a job's ranks reach
//! their nodes (the launching half of SCR's `scr_run`/`scr_srun` scripts and
//! of `scr_postrun`'s per-node copies).
//!
//! A [`Launcher`] builds argument vectors — never shell strings, so no value
//! is ever re-parsed by a shell — for two things: running one command on one
//! node ([`Launcher::node_argv`], what `scr postrun` does with `scr copy`)
//! and running a job of ranks over a set of nodes ([`Launcher::job_argv`],
//! what a run loop does with the application). [`Launcher::run`] runs such a
//! vector in its own process group with a bounded wait: on expiry the whole
//! job is killed and the result is [`LaunchError::Timeout`].
//!
//! Implementations here: [`TemplateLauncher`] (`ssh {node}`, `srun -N1 -w
//! {node}`, `env SCR_NODE_NAME={node}`: a prefix with `{node}` replaced),
//! [`LocalLauncher`] (this machine is the only node) and [`MpirunLauncher`]
//! (OpenMPI's `mpirun`, with nodes simulated on one host or real hosts).
//! Resource-manager launchers (`srun`, `flux run`, `jsrun`) implement the
//! same trait.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

/// The placeholder replaced by a node's name in launcher templates.
pub const NODE_PLACEHOLDER: &str = "{node}";

/// Environment variable naming a rank's node (read by the library when
/// every rank reports the same hostname: simulated nodes).
pub const NODE_NAME_VAR: &str = crate::storage::dirs::ENV_NODE_NAME;

/// How often a running job is polled (and its watcher called).
const POLL: Duration = Duration::from_millis(20);

/// How long a job that overran is given to tear itself down after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// One node of a job: its name, how many ranks run on it, and variables
/// only its ranks see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Ranks on this node (a node with 0 ranks is left out of the job).
    pub ranks: usize,
    /// Variables only this node's ranks see (e.g. its node-local root).
    pub env: BTreeMap<String, String>,
}

/// A job as data: the program every rank runs, on which nodes, with which
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The program every rank runs.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Nodes, in rank order: node `i`'s ranks follow node `i - 1`'s.
    pub nodes: Vec<NodeSpec>,
    /// Variables every rank sees (a node's own entries win).
    pub env: BTreeMap<String, String>,
}

impl JobSpec {
    /// `cmd` (program first) once on `node`: a one-rank job.
    pub fn once_on(node: &str, cmd: &[OsString]) -> Result<JobSpec, LaunchError> {
        let (program, args) = cmd.split_first().ok_or(LaunchError::EmptyArgv)?;
        Ok(JobSpec {
            program: PathBuf::from(program),
            args: args.to_vec(),
            nodes: vec![NodeSpec {
                name: node.to_string(),
                ranks: 1,
                env: BTreeMap::new(),
            }],
            env: BTreeMap::new(),
        })
    }

    /// Total ranks.
    pub fn total_ranks(&self) -> usize {
        self.nodes.iter().map(|n| n.ranks).sum()
    }

    /// The variables of node `node`'s ranks, checked for names that
    /// `NAME=VALUE` cannot carry: the job's, then the node's own.
    fn vars_of(&self, node: &NodeSpec) -> Result<BTreeMap<String, String>, LaunchError> {
        let mut vars = self.env.clone();
        vars.extend(node.env.clone());
        if let Some(bad) = vars
            .keys()
            .find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
        {
            return Err(LaunchError::BadEnvName(bad.clone()));
        }
        Ok(vars)
    }

    /// The only node with ranks of a one-rank job; `Unsupported` otherwise.
    fn single_rank(&self, launcher: &str) -> Result<&NodeSpec, LaunchError> {
        let mut with_ranks = self.nodes.iter().filter(|n| n.ranks > 0);
        match (with_ranks.next(), with_ranks.next()) {
            (Some(n), None) if n.ranks == 1 => Ok(n),
            (None, _) => Err(LaunchError::NoRanks),
            _ => Err(LaunchError::Unsupported {
                launcher: launcher.to_string(),
                why: format!(
                    "it starts one process, the job has {} ranks (use an MPI launcher)",
                    self.total_ranks()
                ),
            }),
        }
    }

    /// `[env NAME=VALUE…] program args` for the ranks of `node`.
    fn command_of(&self, node: &NodeSpec) -> Result<Vec<OsString>, LaunchError> {
        let vars = self.vars_of(node)?;
        let mut v: Vec<OsString> = Vec::new();
        if !vars.is_empty() {
            v.push("env".into());
            v.extend(vars.iter().map(|(k, x)| OsString::from(format!("{k}={x}"))));
        }
        v.push(self.program.clone().into());
        v.extend(self.args.iter().cloned());
        Ok(v)
    }
}

/// What a finished job produced.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// The launcher's exit status.
    pub status: ExitStatus,
    /// Captured standard output of all ranks (as merged by the launcher).
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// Wall time of the job.
    pub elapsed: Duration,
}

impl JobOutput {
    /// Exit code, or `128 + signal` when the launcher was killed by a signal
    /// (the shell convention, so both fit one number).
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .or_else(|| self.status.signal().map(|s| 128 + s))
            .unwrap_or(-1)
    }

    /// The job exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// Why a job could not be launched or did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The job has no ranks at all.
    #[error("the job has no ranks: give at least one node with ranks > 0")]
    NoRanks,
    /// A variable name that `NAME=VALUE` cannot carry.
    #[error("environment variable name {0:?} is empty or contains '=' or NUL")]
    BadEnvName(String),
    /// The argument vector (or the launcher's template) is empty.
    #[error("empty command line")]
    EmptyArgv,
    /// This launcher cannot run that job.
    #[error("the {launcher} launcher cannot run this job: {why}")]
    Unsupported {
        /// The launcher.
        launcher: String,
        /// Why, and what to use instead.
        why: String,
    },
    /// The launcher could not be started.
    #[error("could not start {program:?}: {source}")]
    Spawn {
        /// What was started.
        program: OsString,
        /// The OS error.
        source: std::io::Error,
    },
    /// Waiting for the launcher failed.
    #[error("waiting for the job: {0}")]
    Wait(std::io::Error),
    /// The watcher said every process the launcher started has exited but
    /// the launcher has not (seen with OpenMPI 4.1 after MPI_Abort while the
    /// other ranks were in MPI_Finalize: all ranks zombies, mpirun waiting on
    /// a futex). The launcher was killed; the output is what the ranks printed.
    #[error("the launcher did not return after every rank had exited: killed it")]
    LauncherStuck {
        /// Output captured.
        stdout: String,
        /// Error output captured.
        stderr: String,
    },
    /// The watcher saw no progress ([`Watch::NoProgress`]); the job was
    /// ended as for [`LaunchError::Timeout`].
    #[error("the job showed no progress: killed its process group")]
    NoProgress {
        /// Output captured before the kill.
        stdout: String,
        /// Error output captured before the kill.
        stderr: String,
    },
    /// The job exceeded its time bound; its whole process group was killed.
    #[error("job still running after {after:?}: killed its process group")]
    Timeout {
        /// The bound that expired.
        after: Duration,
        /// Output captured before the kill.
        stdout: String,
        /// Error output captured before the kill.
        stderr: String,
    },
}

/// What a watcher wants after looking at a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Keep waiting.
    Continue,
    /// The launcher is stuck (its ranks are gone): end it now.
    LauncherStuck,
    /// The job shows no progress (a run loop's progress watchdog): end it now.
    NoProgress,
}

/// A way to start commands on nodes. See the module documentation.
pub trait Launcher: fmt::Debug + Send + Sync {
    /// A short name for messages (`mpirun`, `local`, `ssh`).
    fn name(&self) -> String;

    /// The argument vector running `cmd` (program first) once on `node`.
    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError>;

    /// The argument vector running `job`: each node's ranks on that node,
    /// ranks numbered in node order.
    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError>;

    /// Run `argv` (built by this launcher) for at most `timeout`, calling
    /// `watch` with the launcher's pid about every 20 ms; see [`run_argv_watched`].
    fn run(
        &self,
        argv: &[OsString],
        timeout: Duration,
        watch: &mut dyn FnMut(u32) -> Watch,
    ) -> Result<JobOutput, LaunchError> {
        run_argv_watched(argv, timeout, watch)
    }

    /// Run `cmd` once on `node` for at most `timeout`.
    fn run_on_node(
        &self,
        node: &str,
        cmd: &[OsString],
        timeout: Duration,
    ) -> Result<JobOutput, LaunchError> {
        let argv = self.node_argv(node, cmd)?;
        self.run(&argv, timeout, &mut |_| Watch::Continue)
    }
}

/// A launcher given as an argument prefix in which `{node}` names the node:
/// `ssh {node}`, `srun -N1 -n1 -w {node}`, `pdsh -w {node}`, or `env
/// SCR_NODE_NAME={node} SCR_NODE_ROOT=/sim/{node}` for simulated nodes.
/// One process per command: a job of more than one rank is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateLauncher {
    /// The program and its arguments before the command.
    pub argv: Vec<String>,
}

impl TemplateLauncher {
    /// A launcher from its argument prefix; `EmptyArgv` when there is none.
    pub fn new(argv: Vec<String>) -> Result<TemplateLauncher, LaunchError> {
        if argv.is_empty() {
            return Err(LaunchError::EmptyArgv);
        }
        Ok(TemplateLauncher { argv })
    }
}

impl Launcher for TemplateLauncher {
    fn name(&self) -> String {
        self.argv.first().cloned().unwrap_or_default()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        if self.argv.is_empty() || cmd.is_empty() {
            return Err(LaunchError::EmptyArgv);
        }
        let mut v: Vec<OsString> = self
            .argv
            .iter()
            .map(|a| OsString::from(a.replace(NODE_PLACEHOLDER, node)))
            .collect();
        v.extend(cmd.iter().cloned());
        Ok(v)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        let node = job.single_rank(&self.name())?;
        self.node_argv(&node.name, &job.command_of(node)?)
    }
}

/// This machine is the only node: commands run here as they are, and a job
/// is one process (an MPI program initialises as a singleton).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalLauncher;

impl Launcher for LocalLauncher {
    fn name(&self) -> String {
        "local".into()
    }

    fn node_argv(&self, _node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        if cmd.is_empty() {
            return Err(LaunchError::EmptyArgv);
        }
        Ok(cmd.to_vec())
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        let node = job.single_rank(&self.name())?;
        job.command_of(node)
    }
}

/// Where `mpirun` puts a job's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Nodes simulated on this host (RUNTIME.md, "Simulated nodes"): one
    /// application context per node, each exporting [`NODE_NAME_VAR`] and
    /// the node's own variables, so node identity comes from the environment.
    Simulated,
    /// Real hosts: `--host`, every node running the same number of ranks.
    Hosts {
        /// `--hostfile`, when the site needs one.
        hostfile: Option<PathBuf>,
    },
}

/// OpenMPI's `mpirun` (MPICH's `mpiexec` takes `-env` instead of `-x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpirunLauncher {
    /// The `mpirun` program.
    pub program: PathBuf,
    /// Arguments before the first application context (e.g. `--oversubscribe`).
    pub args: Vec<String>,
    /// Where the nodes are.
    pub placement: Placement,
}

impl MpirunLauncher {
    /// `mpirun --oversubscribe` on simulated nodes.
    pub fn simulated() -> MpirunLauncher {
        MpirunLauncher {
            program: PathBuf::from("mpirun"),
            args: vec!["--oversubscribe".to_string()],
            placement: Placement::Simulated,
        }
    }

    /// `program args…` on real hosts (an OpenMPI hostfile, or the
    /// resource manager's nodes). Inside a SLURM allocation mpirun starts
    /// its daemons with srun; with `SLURM_OVERLAP=1` they start beside the
    /// step a failed launch left holding the survivors until SLURM declares
    /// a lost node down (measured on ci/slurm-cluster: without it the next
    /// launch, and every health check through mpirun, waited on that step
    /// until its bound).
    pub fn on_hosts(program: &str, args: Vec<String>, hostfile: Option<PathBuf>) -> MpirunLauncher {
        let placement = Placement::Hosts { hostfile };
        if std::env::var_os("SLURM_JOB_ID").is_none() {
            return MpirunLauncher {
                program: PathBuf::from(program),
                args,
                placement,
            };
        }
        MpirunLauncher {
            program: PathBuf::from("env"),
            args: ["SLURM_OVERLAP=1".to_string(), program.to_string()]
                .into_iter()
                .chain(args)
                .collect(),
            placement,
        }
    }

    /// A launcher from its command line (program first, then its leading
    /// arguments) on simulated nodes; `EmptyArgv` when empty.
    pub fn from_argv(argv: &[String]) -> Result<MpirunLauncher, LaunchError> {
        let (program, args) = argv.split_first().ok_or(LaunchError::EmptyArgv)?;
        Ok(MpirunLauncher {
            program: PathBuf::from(program),
            args: args.to_vec(),
            placement: Placement::Simulated,
        })
    }

    /// `-np k -x VAR=… -x SCR_NODE_NAME=node prog args : …`, one context per
    /// node with ranks.
    fn simulated_contexts(
        &self,
        job: &JobSpec,
        argv: &mut Vec<OsString>,
    ) -> Result<(), LaunchError> {
        let mut first = true;
        for node in job.nodes.iter().filter(|n| n.ranks > 0) {
            if !first {
                argv.push(":".into());
            }
            first = false;
            argv.push("-np".into());
            argv.push(node.ranks.to_string().into());
            let mut vars = job.vars_of(node)?;
            vars.insert(NODE_NAME_VAR.to_string(), node.name.clone());
            for (k, v) in &vars {
                argv.push("-x".into());
                argv.push(format!("{k}={v}").into());
            }
            argv.push(job.program.clone().into());
            argv.extend(job.args.iter().cloned());
        }
        Ok(())
    }

    /// `[--hostfile f] --host a,b --map-by node -np N -x VAR=… prog args`
    /// (`--host a:k,b:k` with k ranks a node).
    fn host_context(
        &self,
        job: &JobSpec,
        hostfile: Option<&PathBuf>,
        argv: &mut Vec<OsString>,
    ) -> Result<(), LaunchError> {
        let nodes: Vec<&NodeSpec> = job.nodes.iter().filter(|n| n.ranks > 0).collect();
        let per_node = nodes.first().map_or(0, |n| n.ranks);
        if nodes
            .iter()
            .any(|n| n.ranks != per_node || !n.env.is_empty())
        {
            return Err(LaunchError::Unsupported {
                launcher: self.name(),
                why: "on real hosts every node runs the same number of ranks with the same environment".into(),
            });
        }
        if let Some(h) = hostfile {
            argv.extend(["--hostfile".into(), h.into()]);
        }
        let hosts: Vec<String> = nodes
            .iter()
            .map(|n| match per_node {
                1 => n.name.clone(),
                k => format!("{}:{k}", n.name),
            })
            .collect();
        argv.extend(["--host".into(), hosts.join(",").into()]);
        if per_node == 1 {
            argv.extend(["--map-by".into(), "node".into()]);
        }
        argv.extend(["-np".into(), job.total_ranks().to_string().into()]);
        for (k, v) in &job.vars_of(&NodeSpec {
            name: String::new(),
            ranks: 0,
            env: BTreeMap::new(),
        })? {
            argv.push("-x".into());
            argv.push(format!("{k}={v}").into());
        }
        argv.push(job.program.clone().into());
        argv.extend(job.args.iter().cloned());
        Ok(())
    }
}

impl Launcher for MpirunLauncher {
    fn name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        self.job_argv(&JobSpec::once_on(node, cmd)?)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        if job.total_ranks() == 0 {
            return Err(LaunchError::NoRanks);
        }
        let mut argv: Vec<OsString> = vec![self.program.clone().into()];
        argv.extend(self.args.iter().map(OsString::from));
        match &self.placement {
            Placement::Simulated => self.simulated_contexts(job, &mut argv)?,
            Placement::Hosts { hostfile } => {
                self.host_context(job, hostfile.as_ref(), &mut argv)?
            }
        }
        Ok(argv)
    }
}

/// Run `argv` in a new process group, capturing its output, for at most
/// `timeout`. On expiry the whole job is killed (see [`run_argv_watched`])
/// and the result is [`LaunchError::Timeout`].
pub fn run_argv(argv: &[OsString], timeout: Duration) -> Result<JobOutput, LaunchError> {
    run_argv_watched(argv, timeout, &mut |_| Watch::Continue)
}

/// Drain a pipe on a thread: a job that fills one pipe while we wait on the
/// other would otherwise block forever.
fn drain(pipe: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            // A read error just ends the capture; the exit status still tells.
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// [`run_argv`], calling `watch` with the launcher's pid about every 20 ms
/// while the job runs: a run loop applies faults from outside at moments of
/// the running job and notices a launcher that outlives its ranks
/// ([`Watch::LauncherStuck`] ends it). Every exit path kills what is left of
/// the job's process group; the wait is bounded by `timeout`.
pub fn run_argv_watched(
    argv: &[OsString],
    timeout: Duration,
    watch: &mut dyn FnMut(u32) -> Watch,
) -> Result<JobOutput, LaunchError> {
    let (program, rest) = argv.split_first().ok_or(LaunchError::EmptyArgv)?;
    // A pure bound on another process, not a policy: the system clock.
    let clock = SystemClock;
    let start = clock.now();
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| LaunchError::Spawn {
            program: program.clone(),
            source,
        })?;
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let pgid = child.id() as libc::pid_t;
    // Bounded: every pass sleeps POLL, and the loop ends at `timeout`.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            // Err(None): the bound expired; Err(Some): the watcher ended it.
            Ok(None) if clock.elapsed(start) >= timeout => break Err(None),
            Ok(None) => match watch(child.id()) {
                Watch::Continue => clock.sleep(POLL),
                ended => break Err(Some(ended)),
            },
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(LaunchError::Wait(e));
            }
        }
    };
    let (stdout, stderr) = match status {
        Ok(_) => {
            // Even after a normal exit, processes left behind in the group
            // would keep the pipes open: kill what remains.
            kill_group(pgid);
            (
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            )
        }
        Err(_) => {
            terminate_job(&mut child, pgid);
            (
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            )
        }
    };
    match status {
        Ok(status) => Ok(JobOutput {
            status,
            stdout,
            stderr,
            elapsed: clock.elapsed(start),
        }),
        Err(Some(Watch::NoProgress)) => Err(LaunchError::NoProgress { stdout, stderr }),
        Err(Some(_)) => Err(LaunchError::LauncherStuck { stdout, stderr }),
        Err(None) => Err(LaunchError::Timeout {
            after: timeout,
            stdout,
            stderr,
        }),
    }
}

/// End a job that overran. OpenMPI puts every rank in its own process
/// group, so killing mpirun's group alone orphans the ranks (measured: they
/// kept running). Hence: note all descendants first, ask the launcher to
/// tear the job down (SIGTERM, up to 2 s), then SIGKILL the group and every
/// noted descendant that is still there.
fn terminate_job(child: &mut std::process::Child, pgid: libc::pid_t) {
    let descendants = descendants_of(pgid);
    // SAFETY: signalling our own child's process group.
    unsafe {
        libc::kill(pgid, libc::SIGTERM);
    }
    let clock = SystemClock;
    let start = clock.now();
    while clock.elapsed(start) < TERM_GRACE {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        clock.sleep(POLL);
    }
    kill_group(pgid);
    for pid in descendants {
        // SAFETY: a process that descended from our child a moment ago.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let _ = child.wait();
}

/// (pid, state, parent pid) of every process in `/proc` (empty without it).
fn processes() -> Vec<(u32, String, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let mut rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace())
            .into_iter()
            .flatten();
        let state = rest.next().unwrap_or_default().to_string();
        if let Some(ppid) = rest.next().and_then(|p| p.parse::<u32>().ok()) {
            v.push((pid, state, ppid));
        }
    }
    v
}

/// The launcher's direct children: how many there are and how many have
/// not exited (zombies count as exited). From `/proc`; `(0, 0)` without it.
pub fn children_alive(launcher: u32) -> (usize, usize) {
    let (mut total, mut alive) = (0, 0);
    for (pid, state, ppid) in processes() {
        if pid != launcher && ppid == launcher {
            total += 1;
            if state != "Z" && state != "X" {
                alive += 1;
            }
        }
    }
    (total, alive)
}

/// Every process descending from `root`, from the parent links in `/proc`
/// (empty where `/proc` is unavailable).
fn descendants_of(root: libc::pid_t) -> Vec<libc::pid_t> {
    let parent_of: Vec<(u32, u32)> = processes().into_iter().map(|(p, _, pp)| (p, pp)).collect();
    let mut found = vec![root as u32];
    // Bounded: each pass visits one found process, and a process is found
    // at most once per parent link.
    let mut i = 0;
    while i < found.len() && found.len() <= parent_of.len() + 1 {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(c, pp)| pp == p && c != p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    found.remove(0);
    found.into_iter().map(|p| p as libc::pid_t).collect()
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals that process group; the
    // group was created for this child, so no unrelated process is hit.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

pub mod rm;

#[cfg(test)]
mod tests;
