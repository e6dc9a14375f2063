//! Launching real MPI jobs on simulated nodes (the launcher half of SCR's
//! `scr_run`/`scr_srun` scripts).
//!
//! MPI reports one hostname for every rank on one machine, so a node's
//! identity and its node-local directories come from the environment
//! (RUNTIME.md, "Simulated nodes"). [`MpiJob`] describes the job as data —
//! nodes, ranks per node, program, per-node environment — and turns it into
//! an OpenMPI MPMD command line, one application context per node:
//!
//! ```text
//! mpirun --oversubscribe -np 2 -x SCR_NODE_NAME=node0 prog args : -np 2 -x SCR_NODE_NAME=node1 prog args
//! ```
//!
//! always as an argument vector, never a shell string, so no value is ever
//! re-parsed by a shell. [`run_argv`] runs any such vector in its own process
//! group with a bounded wait: on expiry the whole group (mpirun and every
//! rank) is killed and the result is [`LaunchError::Timeout`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Environment variable that names a rank's node (read by `scr` to decide
/// node identity when every rank reports the same hostname).
pub const NODE_NAME_VAR: &str = "SCR_NODE_NAME";

/// Default bound on a whole job.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// One simulated node: its name, how many ranks run on it, and extra
/// environment for those ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name, exported to its ranks as [`NODE_NAME_VAR`].
    pub name: String,
    /// Ranks on this node (a node with 0 ranks is left out of the job).
    pub ranks: usize,
    /// Variables only this node's ranks see (e.g. its cache base directory).
    pub env: BTreeMap<String, String>,
}

/// A typed description of an MPI job on simulated nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiJob {
    /// The launcher (`mpirun`).
    pub mpirun: PathBuf,
    /// Arguments placed before the first application context.
    pub mpirun_args: Vec<String>,
    /// The program every rank runs.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Nodes, in rank order: node `i`'s ranks follow node `i - 1`'s.
    pub nodes: Vec<NodeSpec>,
    /// Variables every rank sees.
    pub env: BTreeMap<String, String>,
    /// Bound on the whole job.
    pub timeout: Duration,
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
    /// A variable name that `-x NAME=VALUE` cannot carry.
    #[error("environment variable name {0:?} is empty or contains '=' or NUL")]
    BadEnvName(String),
    /// The argument vector is empty.
    #[error("empty command line")]
    EmptyArgv,
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
    /// Every process the launcher started has exited but the launcher has
    /// not (seen with OpenMPI 4.1 after MPI_Abort while the other ranks were
    /// in MPI_Finalize: all ranks zombies, mpirun waiting on a futex). The
    /// launcher was killed; the output is what the ranks printed.
    #[error("the launcher did not return after every rank had exited: killed it")]
    LauncherStuck {
        /// Output captured.
        stdout: String,
        /// Error output captured.
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

impl MpiJob {
    /// `nodes` simulated nodes named `node0`, `node1`, … with
    /// `ranks_per_node` ranks each, running `program` under `mpirun`.
    pub fn simulated(program: impl Into<PathBuf>, nodes: usize, ranks_per_node: usize) -> MpiJob {
        MpiJob {
            mpirun: PathBuf::from("mpirun"),
            mpirun_args: vec!["--oversubscribe".to_string()],
            program: program.into(),
            args: Vec::new(),
            nodes: (0..nodes)
                .map(|i| NodeSpec {
                    name: format!("node{i}"),
                    ranks: ranks_per_node,
                    env: BTreeMap::new(),
                })
                .collect(),
            env: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Append program arguments.
    pub fn args<I, S>(mut self, args: I) -> MpiJob
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set a variable for every rank.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> MpiJob {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Give each node its own directory under `base` in variable `name`
    /// (`<base>/<node name>`), e.g. a simulated node-local cache base.
    pub fn node_base(mut self, name: &str, base: &Path) -> MpiJob {
        for node in &mut self.nodes {
            let dir = base.join(&node.name);
            node.env
                .insert(name.to_string(), dir.to_string_lossy().into_owned());
        }
        self
    }

    /// Bound the whole job.
    pub fn timeout(mut self, timeout: Duration) -> MpiJob {
        self.timeout = timeout;
        self
    }

    /// Total ranks.
    pub fn total_ranks(&self) -> usize {
        self.nodes.iter().map(|n| n.ranks).sum()
    }

    /// The node of each rank, in rank order.
    pub fn rank_nodes(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .flat_map(|n| std::iter::repeat_n(n.name.as_str(), n.ranks))
            .collect()
    }

    /// The MPMD argument vector: `mpirun <mpirun_args> -np k -x VAR=… prog
    /// args : -np k …`, one context per node with ranks.
    pub fn argv(&self) -> Result<Vec<OsString>, LaunchError> {
        if self.total_ranks() == 0 {
            return Err(LaunchError::NoRanks);
        }
        let mut argv: Vec<OsString> = vec![self.mpirun.clone().into()];
        argv.extend(self.mpirun_args.iter().map(OsString::from));
        let mut first = true;
        for node in self.nodes.iter().filter(|n| n.ranks > 0) {
            if !first {
                argv.push(":".into());
            }
            first = false;
            argv.push("-np".into());
            argv.push(node.ranks.to_string().into());
            // Job-wide first, then the node's own, then its name: later
            // entries for the same name win, as in `env`.
            let mut vars = self.env.clone();
            vars.extend(node.env.clone());
            vars.insert(NODE_NAME_VAR.to_string(), node.name.clone());
            for (k, v) in &vars {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(LaunchError::BadEnvName(k.clone()));
                }
                argv.push("-x".into());
                argv.push(format!("{k}={v}").into());
            }
            argv.push(self.program.clone().into());
            argv.extend(self.args.iter().map(OsString::from));
        }
        Ok(argv)
    }

    /// Build the argument vector and run it with [`run_argv`].
    pub fn run(&self) -> Result<JobOutput, LaunchError> {
        run_argv(&self.argv()?, self.timeout)
    }
}

/// Run `argv` in a new process group, capturing its output, for at most
/// `timeout`. On expiry SIGKILL goes to the whole group (the launcher and
/// every process it started in that group) and the result is
/// [`LaunchError::Timeout`].
pub fn run_argv(argv: &[OsString], timeout: Duration) -> Result<JobOutput, LaunchError> {
    run_argv_watched(argv, timeout, &mut |_| Tick::Continue)
}

/// What a watcher wants after looking at a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Keep waiting.
    Continue,
    /// The launcher is stuck (its ranks are gone): end it now.
    LauncherStuck,
}

/// [`run_argv`], calling `tick` with the launcher's pid about every 20 ms
/// while the job runs: the run loop applies faults from outside at moments
/// of the running job (e.g. while every rank sleeps at an injection point)
/// and notices a launcher that outlives its ranks.
pub fn run_argv_watched(
    argv: &[OsString],
    timeout: Duration,
    tick: &mut dyn FnMut(u32) -> Tick,
) -> Result<JobOutput, LaunchError> {
    let (program, rest) = argv.split_first().ok_or(LaunchError::EmptyArgv)?;
    let start = Instant::now();
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
    // Drain both pipes in threads: a job that fills one pipe while we wait
    // on the other would otherwise block forever.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                // A read error just ends the capture; the exit status still tells.
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
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
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if start.elapsed() >= timeout => break Err(false),
            Ok(None) => {
                if tick(child.id()) == Tick::LauncherStuck {
                    break Err(true);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(LaunchError::Wait(e));
            }
        }
    };
    // Even after a normal exit, processes left behind in the group would
    // keep the pipes open: kill what remains.
    if status.is_ok() {
        kill_group(pgid);
    }
    let status = match status {
        Ok(s) => s,
        Err(true) => {
            terminate_job(&mut child, pgid);
            return Err(LaunchError::LauncherStuck {
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
            });
        }
        Err(false) => {
            terminate_job(&mut child, pgid);
            return Err(LaunchError::Timeout {
                after: timeout,
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
            });
        }
    };
    Ok(JobOutput {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    })
}

/// End a job that overran. OpenMPI puts every rank in its own process
/// group, so killing mpirun's group alone orphans the ranks (measured: they
/// kept running). Hence: note all descendants first, ask mpirun to tear the
/// job down (SIGTERM, up to 2 s), then SIGKILL the group and every noted
/// descendant that is still there.
fn terminate_job(child: &mut std::process::Child, pgid: libc::pid_t) {
    let descendants = descendants_of(pgid);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
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

/// The launcher's direct children: how many there are and how many have
/// not exited (zombies count as exited). From `/proc`; `(0, 0)` without it.
pub fn children_alive(launcher: u32) -> (usize, usize) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    let (mut total, mut alive) = (0, 0);
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == launcher {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let mut rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace())
            .into_iter()
            .flatten();
        let state = rest.next();
        let ppid = rest.next().and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(launcher) {
            total += 1;
            if state != Some("Z") && state != Some("X") {
                alive += 1;
            }
        }
    }
    (total, alive)
}

/// Every process descending from `root`, from the parent links in `/proc`
/// (empty where `/proc` is unavailable).
fn descendants_of(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command name: state, ppid, ...
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<libc::pid_t>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals that process group; the
    // group was created for this child, so no unrelated process is hit.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn two_nodes_of_two_give_two_contexts() {
        let job = MpiJob::simulated("/bin/app", 2, 2).args(["--seed", "7"]);
        assert_eq!(
            strings(&job.argv().expect("argv")),
            [
                "mpirun",
                "--oversubscribe",
                "-np",
                "2",
                "-x",
                "SCR_NODE_NAME=node0",
                "/bin/app",
                "--seed",
                "7",
                ":",
                "-np",
                "2",
                "-x",
                "SCR_NODE_NAME=node1",
                "/bin/app",
                "--seed",
                "7",
            ]
        );
        assert_eq!(job.total_ranks(), 4);
        assert_eq!(job.rank_nodes(), ["node0", "node0", "node1", "node1"]);
    }

    #[test]
    fn node_env_overrides_job_env_and_bases_are_per_node() {
        let job = MpiJob::simulated("app", 2, 1)
            .env("SCR_CACHE_BASE", "/shared")
            .env("A", "x y;$(no shell)")
            .node_base("SCR_CACHE_BASE", Path::new("/tmp/cache"));
        let argv = strings(&job.argv().expect("argv"));
        assert!(argv.contains(&"SCR_CACHE_BASE=/tmp/cache/node0".to_string()));
        assert!(argv.contains(&"SCR_CACHE_BASE=/tmp/cache/node1".to_string()));
        assert!(!argv.contains(&"SCR_CACHE_BASE=/shared".to_string()));
        // Values pass through verbatim: no shell ever sees them.
        assert_eq!(
            argv.iter()
                .filter(|a| a.as_str() == "A=x y;$(no shell)")
                .count(),
            2
        );
    }

    #[test]
    fn empty_nodes_are_skipped_and_no_ranks_is_an_error() {
        let mut job = MpiJob::simulated("app", 3, 1);
        job.nodes[1].ranks = 0;
        let argv = strings(&job.argv().expect("argv"));
        assert_eq!(argv.iter().filter(|a| a.as_str() == ":").count(), 1);
        assert!(!argv.iter().any(|a| a.ends_with("node1")));
        assert!(matches!(
            MpiJob::simulated("app", 2, 0).argv(),
            Err(LaunchError::NoRanks)
        ));
    }

    #[test]
    fn bad_env_names_are_rejected() {
        let job = MpiJob::simulated("app", 1, 1).env("A=B", "1");
        assert!(matches!(job.argv(), Err(LaunchError::BadEnvName(n)) if n == "A=B"));
    }

    #[test]
    fn run_argv_captures_output_and_exit_code() {
        let argv: Vec<OsString> = ["sh", "-c", "echo out; echo err >&2; exit 3"]
            .iter()
            .map(OsString::from)
            .collect();
        let out = run_argv(&argv, Duration::from_secs(30)).expect("runs");
        assert_eq!(
            (out.code(), out.stdout.as_str(), out.stderr.as_str()),
            (3, "out\n", "err\n")
        );
    }

    #[test]
    fn run_argv_kills_the_whole_group_on_timeout() {
        // A background grandchild holds the pipe open: only a group kill ends it.
        let argv: Vec<OsString> = ["sh", "-c", "echo started; sleep 30 & sleep 30"]
            .iter()
            .map(OsString::from)
            .collect();
        let start = Instant::now();
        match run_argv(&argv, Duration::from_millis(300)) {
            Err(LaunchError::Timeout { stdout, .. }) => assert_eq!(stdout, "started\n"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn missing_launcher_is_a_spawn_error() {
        let argv = vec![OsString::from("/nonexistent/mpirun")];
        assert!(matches!(
            run_argv(&argv, Duration::from_secs(1)),
            Err(LaunchError::Spawn { .. })
        ));
    }
}
