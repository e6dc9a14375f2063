//! Launchers of resource managers: SLURM's `srun`, Flux's `flux run` and
//! LSF's `jsrun`. Each places every rank on the node the job names for it
//! (ranks keep their node across relaunches, so they find their cached
//! files) and leaves the allocation's other nodes alone.

use std::ffi::OsString;

use super::{JobSpec, LaunchError, Launcher, NodeSpec};

/// The nodes with ranks, checked to run the same environment (a resource
/// manager passes one environment to every task).
fn uniform<'a>(job: &'a JobSpec, launcher: &str) -> Result<Vec<&'a NodeSpec>, LaunchError> {
    let nodes: Vec<&NodeSpec> = job.nodes.iter().filter(|n| n.ranks > 0).collect();
    if nodes.is_empty() {
        return Err(LaunchError::NoRanks);
    }
    if nodes.iter().any(|n| !n.env.is_empty()) {
        return Err(LaunchError::Unsupported {
            launcher: launcher.to_string(),
            why: "every node of a resource manager's job gets the same environment".into(),
        });
    }
    Ok(nodes)
}

/// `srun`: inside a SLURM allocation. A job runs with `--distribution=
/// arbitrary` and a node list naming each rank's node in rank order, so
/// rank r lands where the job puts it, whatever SLURM's own order; nodes
/// not listed (down ones, unused spares) get nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrunLauncher {
    /// The `srun` program.
    pub program: String,
    /// The user's own arguments (placement arguments are added after them).
    pub args: Vec<String>,
}

impl SrunLauncher {
    /// `srun` with the user's arguments.
    pub fn new(args: Vec<String>) -> SrunLauncher {
        SrunLauncher {
            program: "srun".into(),
            args,
        }
    }
}

impl Launcher for SrunLauncher {
    fn name(&self) -> String {
        "srun".into()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        if cmd.is_empty() {
            return Err(LaunchError::EmptyArgv);
        }
        let mut v: Vec<OsString> = vec![self.program.clone().into()];
        v.extend(self.args.iter().map(OsString::from));
        v.extend(["-N1", "-n1", "--nodelist"].map(OsString::from));
        v.push(node.into());
        v.extend(cmd.iter().cloned());
        Ok(v)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        let nodes = uniform(job, "srun")?;
        let per_rank: Vec<&str> = nodes
            .iter()
            .flat_map(|n| std::iter::repeat_n(n.name.as_str(), n.ranks))
            .collect();
        let mut v: Vec<OsString> = vec![self.program.clone().into()];
        v.extend(self.args.iter().map(OsString::from));
        v.push(format!("--nodes={}", nodes.len()).into());
        v.push(format!("--ntasks={}", job.total_ranks()).into());
        v.push("--distribution=arbitrary".into());
        v.push(format!("--nodelist={}", per_rank.join(",")).into());
        v.extend(job.command_of(nodes[0])?);
        Ok(v)
    }
}

/// `flux run`: `-N`, `-n`, and a host constraint naming the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxLauncher {
    /// The user's own arguments of `flux run`.
    pub args: Vec<String>,
}

impl Launcher for FluxLauncher {
    fn name(&self) -> String {
        "flux".into()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        self.job_argv(&JobSpec::once_on(node, cmd)?)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        let nodes = uniform(job, "flux")?;
        let per_node = nodes[0].ranks;
        if nodes.iter().any(|n| n.ranks != per_node) {
            return Err(LaunchError::Unsupported {
                launcher: "flux".into(),
                why: "flux run places the same number of tasks on every node".into(),
            });
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let mut v: Vec<OsString> = vec!["flux".into(), "run".into()];
        v.extend(self.args.iter().map(OsString::from));
        v.push(format!("--nodes={}", nodes.len()).into());
        v.push(format!("--ntasks={}", job.total_ranks()).into());
        v.push(format!("--requires=host:{}", names.join(",")).into());
        v.extend(job.command_of(nodes[0])?);
        Ok(v)
    }
}

/// LSF's `jsrun`: one resource set per node with that node's ranks, and
/// every allocation node not in the job excluded (`--exclude_hosts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsrunLauncher {
    /// The user's own arguments of `jsrun`.
    pub args: Vec<String>,
    /// Every node of the allocation (those left out of a job are excluded).
    pub allocation: Vec<String>,
}

impl Launcher for JsrunLauncher {
    fn name(&self) -> String {
        "jsrun".into()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        self.job_argv(&JobSpec::once_on(node, cmd)?)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        let nodes = uniform(job, "jsrun")?;
        let per_node = nodes[0].ranks;
        if nodes.iter().any(|n| n.ranks != per_node) {
            return Err(LaunchError::Unsupported {
                launcher: "jsrun".into(),
                why: "jsrun resource sets hold the same number of tasks".into(),
            });
        }
        let excluded: Vec<&str> = self
            .allocation
            .iter()
            .filter(|a| !nodes.iter().any(|n| &n.name == *a))
            .map(String::as_str)
            .collect();
        let mut v: Vec<OsString> = vec!["jsrun".into()];
        v.extend(self.args.iter().map(OsString::from));
        v.push(format!("--nrs={}", nodes.len()).into());
        v.push("--rs_per_host=1".into());
        v.push(format!("--tasks_per_rs={per_node}").into());
        v.push(format!("--np={}", job.total_ranks()).into());
        if !excluded.is_empty() {
            v.push(format!("--exclude_hosts={}", excluded.join(",")).into());
        }
        v.extend(job.command_of(nodes[0])?);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn job(nodes: &[(&str, usize)]) -> JobSpec {
        JobSpec {
            program: PathBuf::from("/bin/app"),
            args: vec!["--x".into()],
            nodes: nodes
                .iter()
                .map(|(n, r)| NodeSpec {
                    name: n.to_string(),
                    ranks: *r,
                    env: BTreeMap::new(),
                })
                .collect(),
            env: BTreeMap::from([("SCR_RUNS".to_string(), "3".to_string())]),
        }
    }

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    #[test]
    fn srun_places_each_rank_on_its_node() {
        let l = SrunLauncher::new(vec!["--mpi=pmix".into()]);
        let v = strs(l.job_argv(&job(&[("node3", 2), ("node5", 2)])).unwrap());
        assert_eq!(
            v,
            [
                "srun",
                "--mpi=pmix",
                "--nodes=2",
                "--ntasks=4",
                "--distribution=arbitrary",
                "--nodelist=node3,node3,node5,node5",
                "env",
                "SCR_RUNS=3",
                "/bin/app",
                "--x"
            ]
        );
        let once = strs(
            l.node_argv("node2", &["scr".into(), "check-node".into()])
                .unwrap(),
        );
        assert_eq!(
            once,
            [
                "srun",
                "--mpi=pmix",
                "-N1",
                "-n1",
                "--nodelist",
                "node2",
                "scr",
                "check-node"
            ]
        );
    }

    #[test]
    fn flux_and_jsrun_name_the_nodes() {
        let f = FluxLauncher { args: vec![] };
        let v = strs(f.job_argv(&job(&[("a", 2), ("b", 2)])).unwrap());
        assert_eq!(
            v[..5],
            [
                "flux",
                "run",
                "--nodes=2",
                "--ntasks=4",
                "--requires=host:a,b"
            ]
        );
        let j = JsrunLauncher {
            args: vec![],
            allocation: ["a", "b", "c", "d"].map(String::from).to_vec(),
        };
        let v = strs(j.job_argv(&job(&[("a", 2), ("c", 2)])).unwrap());
        assert_eq!(
            v[..6],
            [
                "jsrun",
                "--nrs=2",
                "--rs_per_host=1",
                "--tasks_per_rs=2",
                "--np=4",
                "--exclude_hosts=b,d"
            ]
        );
        let uneven = job(&[("a", 2), ("c", 1)]);
        assert!(matches!(
            f.job_argv(&uneven),
            Err(LaunchError::Unsupported { .. })
        ));
        assert!(matches!(
            j.job_argv(&uneven),
            Err(LaunchError::Unsupported { .. })
        ));
    }
}
