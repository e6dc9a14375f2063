//! Launching real MPI jobs on simulated nodes (the launcher half of SCR's
//! `scr_run`/`scr_srun` scripts).
//!
//! MPI reports one hostname for every rank on one machine, so a node's
//! identity and its node-local directories come from the environment
//! (RUNTIME.md, "Simulated nodes"). [`MpiJob`] describes the job as data —
//! nodes, ranks per node, program, per-node environment — and the library's
//! [`MpirunLauncher`] (a [`scr::launch::Launcher`]) turns it into an OpenMPI
//! MPMD command line, one application context per node:
//!
//! ```text
//! mpirun --oversubscribe -np 2 -x SCR_NODE_NAME=node0 prog args : -np 2 -x SCR_NODE_NAME=node1 prog args
//! ```
//!
//! always as an argument vector, never a shell string. Running it (own
//! process group, bounded wait, the whole job killed on expiry) is the
//! library's too: [`run_argv`], [`run_argv_watched`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use scr::launch::{
    children_alive, run_argv, run_argv_watched, JobOutput, JobSpec, LaunchError, Launcher,
    MpirunLauncher, NodeSpec, Placement, Watch, NODE_NAME_VAR,
};

/// Default bound on a whole job.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

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

    /// The launcher: `mpirun` and its leading arguments, nodes simulated.
    pub fn launcher(&self) -> MpirunLauncher {
        MpirunLauncher {
            program: self.mpirun.clone(),
            args: self.mpirun_args.clone(),
            placement: Placement::Simulated,
        }
    }

    /// The job as the launcher takes it.
    pub fn spec(&self) -> JobSpec {
        JobSpec {
            program: self.program.clone(),
            args: self.args.iter().map(OsString::from).collect(),
            nodes: self.nodes.clone(),
            env: self.env.clone(),
        }
    }

    /// The MPMD argument vector: `mpirun <mpirun_args> -np k -x VAR=… prog
    /// args : -np k …`, one context per node with ranks.
    pub fn argv(&self) -> Result<Vec<OsString>, LaunchError> {
        self.launcher().job_argv(&self.spec())
    }

    /// Build the argument vector and run it with [`run_argv`].
    pub fn run(&self) -> Result<JobOutput, LaunchError> {
        run_argv(&self.argv()?, self.timeout)
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
}
