//! The health checks of real nodes: the resource manager's view (SLURM
//! nodes that are DOWN, DRAINED or not responding) and `scr check-node`
//! run on every other node through the launcher, in parallel, each bounded:
//! a node that does not answer in time is down ("the ping").

use std::ffi::OsString;
use std::time::Duration;

use super::health::DownReason;
use super::NodeCheck;
use crate::launch::{run_argv, LaunchError, Launcher};

/// The word `scr check-node` prints before the reason of a node that fails.
pub const DOWN_MARK: &str = "DOWN:";

/// Node checks through a launcher.
#[derive(Debug)]
pub struct ProbeCheck<'a> {
    /// How a command reaches one node.
    pub launcher: &'a dyn Launcher,
    /// The check run on each node (`scr check-node ...`); empty: reachability
    /// is the resource manager's word alone.
    pub cmd: Vec<OsString>,
    /// Bound on each node's check.
    pub timeout: Duration,
    /// Ask SLURM (`sinfo`) which nodes it has found down first.
    pub slurm: bool,
}

/// SLURM node states that mean the node cannot run a job.
fn slurm_bad_state(state: &str) -> bool {
    let s = state.to_ascii_lowercase();
    s.ends_with('*')
        || [
            "down", "drain", "fail", "maint", "reboot", "unknown", "future", "power",
        ]
        .iter()
        .any(|w| s.starts_with(w))
}

/// The nodes SLURM reports unusable, with state and reason (`sinfo`,
/// bounded: 20 s). Nothing when sinfo cannot be asked: the probes decide.
fn slurm_down(nodes: &[String]) -> Vec<(String, DownReason)> {
    let argv: Vec<OsString> = [
        "sinfo",
        "--noheader",
        "--Node",
        "--format=%N|%T|%E",
        "--nodes",
        &nodes.join(","),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let Ok(out) = run_argv(&argv, Duration::from_secs(20)) else {
        return Vec::new();
    };
    let mut v: Vec<(String, DownReason)> = Vec::new();
    for line in out.stdout.lines() {
        let mut f = line.splitn(3, '|');
        let (Some(n), Some(state)) = (f.next(), f.next()) else {
            continue;
        };
        let reason = f.next().unwrap_or("none").trim();
        if nodes.iter().any(|x| x == n) && slurm_bad_state(state) && !v.iter().any(|(d, _)| d == n)
        {
            v.push((
                n.to_string(),
                DownReason::Unreachable {
                    detail: format!("SLURM reports it {state} (reason: {reason})"),
                },
            ));
        }
    }
    v
}

impl ProbeCheck<'_> {
    /// One node's check: `None` when healthy.
    fn probe(&self, node: &str) -> Option<DownReason> {
        let argv = match self.launcher.node_argv(node, &self.cmd) {
            Ok(a) => a,
            Err(e) => {
                return Some(DownReason::Reported {
                    detail: e.to_string(),
                })
            }
        };
        match self
            .launcher
            .run(&argv, self.timeout, &mut |_| crate::launch::Watch::Continue)
        {
            Ok(out) if out.success() => None,
            Ok(out) => {
                let said = out
                    .stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(DOWN_MARK))
                    .map(str::trim)
                    .map(String::from);
                Some(match said {
                    Some(detail) => DownReason::Reported { detail },
                    None => DownReason::Unreachable {
                        detail: format!(
                            "check through {} exited {}: {}",
                            self.launcher.name(),
                            out.code(),
                            out.stderr.lines().last().unwrap_or("").trim()
                        ),
                    },
                })
            }
            Err(LaunchError::Timeout { after, .. }) => Some(DownReason::Unreachable {
                detail: format!("no answer within {:.0} s", after.as_secs_f64()),
            }),
            Err(e) => Some(DownReason::Unreachable {
                detail: e.to_string(),
            }),
        }
    }
}

impl NodeCheck for ProbeCheck<'_> {
    fn check(&mut self, nodes: &[String]) -> Vec<(String, DownReason)> {
        let mut down = if self.slurm {
            slurm_down(nodes)
        } else {
            Vec::new()
        };
        if self.cmd.is_empty() {
            return down;
        }
        let left: Vec<&String> = nodes
            .iter()
            .filter(|n| !down.iter().any(|(d, _)| d == *n))
            .collect();
        let this = &*self;
        let found: Vec<(String, Option<DownReason>)> = std::thread::scope(|s| {
            let handles: Vec<_> = left
                .iter()
                .map(|n| (n.to_string(), s.spawn(move || this.probe(n))))
                .collect();
            handles
                .into_iter()
                .map(|(n, h)| {
                    let r = h.join().unwrap_or_else(|_| {
                        Some(DownReason::Reported {
                            detail: "its check panicked".into(),
                        })
                    });
                    (n, r)
                })
                .collect()
        });
        down.extend(found.into_iter().filter_map(|(n, r)| r.map(|r| (n, r))));
        down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_states_that_cannot_run_a_job() {
        for s in [
            "down*", "down", "drained", "draining", "idle*", "fail", "unknown",
        ] {
            assert!(slurm_bad_state(s), "{s}");
        }
        for s in ["idle", "allocated", "mixed", "completing"] {
            assert!(!slurm_bad_state(s), "{s}");
        }
    }
}
