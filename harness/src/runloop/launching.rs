//! Steps 3 and 4 of the run loop, the testbed's part of one launch of the
//! library's loop: the job of each launch (its arguments, each node's tree
//! as `SCR_NODE_ROOT`, the in-process faults in `SCR_FAULT_PLAN`), the
//! launcher (`mpirun` in a private OpenMPI session directory), faults
//! applied "between checkpoints" while every rank sleeps, and the launch
//! judged after it ([`crate::outcome`]). [`super::hooks`] calls these from
//! the library's [`scr::runloop::Hooks`].

use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;

use faultsim::inject::Record;
use faultsim::plan::{When, POINT_COMPUTE};
use faultsim::runtime::FaultPlan;
use scr::runloop::{LaunchEnd, Launched};

use super::faults::{fired_since, is_watch, read_fault_log, run_of, Due, Firing};
use super::{LaunchRecord, RunLoop, LAUNCHER_GRACE, WATCH_DELAY_MS};
use crate::launch::{JobSpec, LaunchError, Launcher, MpirunLauncher};
use crate::outcome::{classify, AppReport, LaunchFacts};

/// The exit code recorded for a launcher that outlived its ranks.
pub const LAUNCHER_STUCK_CODE: i32 = -2;

/// Marks a launch whose launcher could not start.
pub(super) const LAUNCH_FAILED_MARK: &str = "scr-harness: the launcher could not start: ";

/// The moments of a launch at which the harness acts from outside: each
/// checkpoint after which every rank sleeps, with what is due then.
pub(super) type Watches<'a> = Vec<(u64, Vec<Due<'a>>)>;

/// A running launch, as its watcher sees it.
#[derive(Debug)]
pub(super) struct Running<'a> {
    pub(super) launch: u32,
    pub(super) nodes: Vec<String>,
    /// Lines of the fault log before the launch.
    pub(super) log_start: usize,
    pub(super) ranks: usize,
    /// Moments still to come.
    pub(super) watch: Watches<'a>,
    /// The `SCR_FAULT_PLAN` given.
    pub(super) plan_text: Option<String>,
}

/// What the harness did from outside around a launch, and what it must
/// undo after it.
#[derive(Debug, Default)]
pub(super) struct Outside {
    /// What was done, in order.
    pub(super) external: Vec<String>,
    /// Transient faults to undo.
    pub(super) transient: Vec<Record>,
    /// Faults that could not be applied.
    pub(super) errors: Vec<String>,
}

/// How a launch ended.
#[derive(Debug)]
struct Ended {
    /// `None` after a timeout; [`LAUNCHER_STUCK_CODE`] for a stuck launcher.
    exit_code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    launcher_stuck: bool,
}

/// `env OMPI_MCA_orte_tmpdir_base=<allocation>/ompi argv...`: each
/// allocation gets its own OpenMPI session directory. Launchers started at
/// the same moment (parallel campaign cells, other jobs of the machine)
/// otherwise race to create the shared `/tmp/ompi.<host>.<uid>` and one of
/// them can fail in orte_init ("mkdir: File exists", seen in a campaign)
/// before any rank starts. `env` execs the launcher, so its pid is the
/// launcher's. Left alone when the variable is set.
#[derive(Debug, Clone)]
pub(super) struct PrivateSession {
    /// `mpirun` and its leading arguments, nodes simulated.
    pub(super) inner: MpirunLauncher,
    /// The session directory.
    pub(super) dir: PathBuf,
}

impl Launcher for PrivateSession {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn node_argv(&self, node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        self.inner.node_argv(node, cmd)
    }

    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        const VAR: &str = "OMPI_MCA_orte_tmpdir_base";
        let argv = self.inner.job_argv(job)?;
        if std::env::var_os(VAR).is_some() || fs::create_dir_all(&self.dir).is_err() {
            return Ok(argv);
        }
        let mut v: Vec<OsString> =
            vec!["env".into(), format!("{VAR}={}", self.dir.display()).into()];
        v.extend(argv);
        Ok(v)
    }
}

impl RunLoop {
    /// The launcher of every launch: `mpirun` and its leading arguments
    /// (default `mpirun --oversubscribe`) on simulated nodes, in the
    /// allocation's own OpenMPI session directory.
    pub(super) fn launcher(&self) -> PrivateSession {
        PrivateSession {
            inner: MpirunLauncher::from_argv(&self.mpirun)
                .unwrap_or_else(|_| MpirunLauncher::simulated()),
            dir: self.alloc.root.join("ompi"),
        }
    }

    /// The job of launch `launch` (the library's: the application on the
    /// launch's nodes with the job's variables), made this launch's: its
    /// arguments, each node's tree as its `SCR_NODE_ROOT`, the prefix, the
    /// fault log, the in-process faults in `SCR_FAULT_PLAN` and a sleep for
    /// every moment the harness acts from outside. Returns the launch as
    /// its watcher follows it.
    pub(super) fn shape_job(&self, launch: u32, job: &mut JobSpec) -> Running<'_> {
        job.args = self
            .app
            .args_for(launch)
            .into_iter()
            .map(OsString::from)
            .collect();
        for node in &mut job.nodes {
            node.env.insert(
                crate::app::NODE_ROOT_VAR.to_string(),
                self.alloc
                    .node_root(&node.name)
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        let mut set = |k: &str, v: String| job.env.insert(k.to_string(), v);
        set(
            "SCR_PREFIX",
            self.alloc.prefix().to_string_lossy().into_owned(),
        );
        set(
            faultsim::runtime::ENV_LOG,
            self.alloc.fault_log().to_string_lossy().into_owned(),
        );
        set(
            faultsim::runtime::ENV_JOB,
            format!("{}-{launch}", self.alloc.root.display()),
        );
        let (plan, watch) = self.plan_for(launch);
        let plan_text = (!plan.faults.is_empty()).then(|| plan.to_string());
        if let Some(p) = &plan_text {
            set(faultsim::runtime::ENV_PLAN, p.clone());
        }
        Running {
            launch,
            nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
            log_start: read_fault_log(&self.alloc.fault_log()).len(),
            ranks: job.total_ranks(),
            watch,
            plan_text,
        }
    }

    /// In-process faults of this launch first (the library fires the first
    /// matching entry), then a sleep for every moment at which the harness
    /// acts from outside.
    fn plan_for(&self, launch: u32) -> (FaultPlan, Watches<'_>) {
        let mut plan = self.plan.fault_plan(launch);
        let during = self.due_at(launch, |w| matches!(w, When::BetweenCheckpoints { .. }));
        let mut watch: Watches<'_> = Vec::new();
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
                    plan.faults.push(faultsim::runtime::FaultSpec {
                        point: POINT_COMPUTE.to_string(),
                        hit: *after,
                        repeat: false,
                        rank: None,
                        node: None,
                        action: faultsim::runtime::Action::Delay { ms: WATCH_DELAY_MS },
                    });
                    watch.push((*after, vec![d]));
                }
            }
        }
        (plan, watch)
    }

    /// Apply the faults of every watched moment that has come: every rank
    /// logged its sleep there. Moments that came leave `run.watch`.
    pub(super) fn apply_watched(&self, run: &mut Running<'_>, out: &mut Outside) {
        if run.watch.is_empty() {
            return;
        }
        let fired = read_fault_log(&self.alloc.fault_log());
        let fired = &fired[run.log_start.min(fired.len())..];
        let (launch, ranks, nodes) = (run.launch, run.ranks, &run.nodes);
        run.watch.retain(|(after, due)| {
            let arrived = fired
                .iter()
                .filter(|f| {
                    f.point == POINT_COMPUTE && f.hit == *after && f.action.starts_with("delay")
                })
                .count();
            if arrived < ranks {
                return true;
            }
            out.external.push(format!(
                "while every rank sleeps after checkpoint {after} of launch {launch}:"
            ));
            self.do_due(
                due,
                nodes,
                &mut out.transient,
                &mut out.external,
                &mut out.errors,
            );
            false
        });
    }

    /// Step 4 of the run loop (module documentation): after launch `run`,
    /// which the library's loop made and `launched` says how it ended: a
    /// killed node's aftermath, the faults due after it, and its record,
    /// judged against the checkpoints completed before it.
    pub(super) fn record(
        &self,
        run: Running<'_>,
        launched: &Launched,
        out: &mut Outside,
        completed_before: &[u64],
    ) -> LaunchRecord {
        let launch = run.launch;
        for (after, _) in &run.watch {
            out.errors.push(format!(
                "launch {launch}: the moment after checkpoint {after} never came (or not on every rank): its faults were not applied"
            ));
        }
        let (fired, unfired) = self.firings(launch, run.log_start);
        // A node killed inside the library: its storage follows.
        let killed = self
            .plan
            .faults
            .iter()
            .filter(|f| run_of(f) == launch && f.when.as_point().is_some());
        self.node_deaths(killed, &fired, &mut out.external, &mut out.errors);
        let after = self.due_at(
            launch,
            |w| matches!(w, When::AfterRun { run } if *run == launch),
        );
        let Outside {
            external,
            transient,
            errors,
        } = out;
        self.do_due(&after, &run.nodes, transient, external, errors);
        let ended = ended(launched, external);
        let report = AppReport::parse(&ended.stdout);
        let (token, why) = self.judge(&report, run.nodes.len(), ended.timed_out, completed_before);
        LaunchRecord {
            launcher_stuck: ended.launcher_stuck,
            completed: self.completed_in(&report, run.log_start),
            launch,
            nodes: run.nodes,
            newly_down: launched.newly_down.clone(),
            exit_code: ended.exit_code,
            elapsed_s: launched.elapsed_s,
            fault_plan: run.plan_text,
            fired,
            unfired,
            external: std::mem::take(external),
            report,
            token: token.to_string(),
            why,
            stdout: ended.stdout,
            stderr: ended.stderr,
        }
    }

    /// The plan's faults that fired in launch `launch` (the harness's own
    /// sleeps left out), and its in-process faults that never did.
    fn firings(&self, launch: u32, log_start: usize) -> (Vec<Firing>, Vec<String>) {
        let fired: Vec<Firing> = fired_since(&self.alloc.fault_log(), log_start)
            .into_iter()
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
        (fired, unfired)
    }

    /// Classify a launch of `node_count` nodes from its report
    /// ([`crate::outcome::classify`]), checking restored bytes against the
    /// data plan when the application is `scr_app`.
    fn judge(
        &self,
        report: &AppReport,
        node_count: usize,
        timed_out: bool,
        completed_before: &[u64],
    ) -> (crate::outcome::Token, Option<String>) {
        let plan_bytes = self.app.data.map(|(seed, mean)| {
            let ranks = (node_count * self.alloc.ranks_per_node) as u32;
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
        classify(report, &facts)
    }

    /// Checkpoints a launch completed: those the application reported, and
    /// those after which its `app.compute` point fired (a crash there comes
    /// after the checkpoint, before rank 0 printed it).
    fn completed_in(&self, report: &AppReport, log_start: usize) -> Vec<u64> {
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
        completed
    }
}

/// How the launch reads: exit code, output, a timeout, a stuck launcher
/// (noted in `external`), or a launcher that could not start (marked in
/// stderr with [`LAUNCH_FAILED_MARK`]).
fn ended(launched: &Launched, external: &mut Vec<String>) -> Ended {
    let plain = |exit_code, timed_out| Ended {
        exit_code,
        stdout: launched.stdout.clone(),
        stderr: launched.stderr.clone(),
        timed_out,
        launcher_stuck: false,
    };
    match &launched.end {
        LaunchEnd::Exited(code) => plain(Some(*code), false),
        LaunchEnd::Killed(_) | LaunchEnd::NoProgress(_) => plain(None, true),
        LaunchEnd::Stuck => {
            external.push(format!(
                "every rank had exited but the launcher had not after {LAUNCHER_GRACE:?}: killed it (a launcher bug, not a hang of the application)"
            ));
            Ended {
                launcher_stuck: true,
                ..plain(Some(LAUNCHER_STUCK_CODE), false)
            }
        }
        LaunchEnd::NotStarted(why) => Ended {
            stdout: String::new(),
            stderr: format!("{LAUNCH_FAILED_MARK}{why}"),
            ..plain(Some(-1), false)
        },
    }
}

/// Bytes all `ranks` ranks write in checkpoint `ckpt` (the data plan).
pub fn plan_bytes(seed: u64, ranks: u32, ckpt: u64, mean_bytes: u64) -> u64 {
    (0..ranks)
        .flat_map(|r| testing::data::file_plan(seed, r, ckpt, mean_bytes))
        .map(|f| f.size_bytes)
        .sum()
}
