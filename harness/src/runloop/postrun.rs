//! Step 5 of the run loop: `scr postrun` after the last launch, as an
//! allocation's epilogue runs it, and the parts of its `--json` report the
//! harness judges.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Instant;

use faultsim::inject::Record;
use faultsim::runtime::FaultPlan;
use serde::Serialize;

use super::faults::{fired_since, undo_all, Due, Firing};
use super::halt::has_postrun;
use super::RunLoop;
use crate::health::DownList;
use crate::launch::{JobOutput, LaunchError};
use crate::outcome::Scavenged;

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

/// What a run of `scr postrun` came to: exit code (`None`: killed at its
/// bound), output, one result per dataset, the parsed report.
type PostrunEnd = (
    Option<i32>,
    String,
    String,
    Vec<Scavenged>,
    Option<PostrunJson>,
);

impl RunLoop {
    /// `scr postrun` after the loop, as an allocation's epilogue runs it:
    /// see the module documentation of [`super`], step 5. `None` without
    /// the command.
    pub(super) fn postrun(
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
        let argv = self.postrun_argv(scr, plan_text.as_deref(), &down_now);
        let command = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let log_start = super::faults::read_fault_log(&self.alloc.fault_log()).len();
        let start = Instant::now();
        // Each node's copy has the launch bound; the whole scavenge twice
        // that (two rounds), then it is a hang.
        let bound = self.timeout.saturating_mul(2);
        let ran = crate::launch::run_argv(&argv, bound);
        let elapsed_s = start.elapsed().as_secs_f64();
        let fired = fired_since(&self.alloc.fault_log(), log_start);
        let unfired = postrun_unfired(&plan, &fired);
        self.postrun_node_deaths(&fired, &mut external, errors);
        undo_all(&mut transient, errors);
        let (exit_code, stdout, stderr, results, report) = judge(ran, errors);
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

    /// `env VAR=VALUE ... scr postrun ... --launch env --launch-arg
    /// SCR_NODE_NAME={node} --launch-arg SCR_NODE_ROOT=<tree>`: the
    /// variables reach the command without touching the harness's own
    /// environment, and each node's `scr copy` runs in its own process
    /// with its node's identity, as `srun -w {node}` would run it.
    fn postrun_argv(
        &self,
        scr: &Path,
        plan_text: Option<&str>,
        down_now: &[(String, String)],
    ) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["env".into()];
        let mut vars: BTreeMap<String, String> = self.env.clone();
        vars.insert(
            faultsim::runtime::ENV_LOG.into(),
            self.alloc.fault_log().to_string_lossy().into_owned(),
        );
        vars.insert(
            faultsim::runtime::ENV_JOB.into(),
            format!("{}-postrun", self.alloc.root.display()),
        );
        // A power loss during postrun takes the driver too (an epilogue
        // runs it on a node of the job), and reverts what every process of
        // the scavenge wrote since it began, not only since the firing
        // copy started.
        vars.insert(
            faultsim::runtime::durable::ENV_SHARES_POWER.into(),
            "1".into(),
        );
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        vars.insert(
            faultsim::runtime::durable::ENV_DURABLE_SINCE.into(),
            now_ns.to_string(),
        );
        if let Some(p) = plan_text {
            vars.insert(faultsim::runtime::ENV_PLAN.into(), p.to_string());
        }
        argv.extend(vars.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
        argv.extend([scr.into(), "postrun".into(), "--prefix".into()]);
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
        argv.push(scr.into());
        argv.push("--launch-timeout".into());
        argv.push(self.timeout.as_secs().max(1).to_string().into());
        argv.push("--json".into());
        argv
    }

    /// A node killed inside the scavenge: its storage follows.
    fn postrun_node_deaths(
        &self,
        fired: &[Firing],
        external: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) {
        let killed = self
            .plan
            .faults
            .iter()
            .filter(|f| f.when.is_postrun() && f.when.as_postrun_point().is_some());
        self.node_deaths(killed, fired, external, errors);
    }
}

/// Postrun faults that never fired (compact form).
fn postrun_unfired(plan: &FaultPlan, fired: &[Firing]) -> Vec<String> {
    plan.faults
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
        .collect()
}

/// Judge a run of `scr postrun --json`: 0, all saved, and 3, something
/// incomplete, both print the report; anything else failed before
/// reporting; a kill at the bound is a hang.
fn judge(ran: Result<JobOutput, LaunchError>, errors: &mut Vec<String>) -> PostrunEnd {
    match ran {
        Ok(out) => {
            let code = out.code();
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
    }
}
