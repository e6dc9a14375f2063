//! Step 3 of the run loop: one launch of the application under `mpirun`
//! (through the library's [`scr::launch::Launcher`]), watched while it runs
//! — a launcher that outlives its ranks is ended, faults due "between
//! checkpoints" are applied while every rank sleeps — and judged after it.

use std::ffi::OsString;
use std::fs;
use std::time::Instant;

use faultsim::inject::Record;
use faultsim::plan::{When, POINT_COMPUTE};
use faultsim::runtime::FaultPlan;

use super::faults::{fired_since, is_watch, read_fault_log, run_of, Due, Firing};
use super::{LaunchRecord, RunLoop, LAUNCHER_GRACE, WATCH_DELAY_MS};
use crate::launch::{JobOutput, LaunchError, Launcher, MpiJob, Watch};
use crate::outcome::{classify, AppReport, LaunchFacts};

/// The exit code recorded for a launcher that outlived its ranks.
pub const LAUNCHER_STUCK_CODE: i32 = -2;

/// Marks a launch whose launcher could not start.
pub(super) const LAUNCH_FAILED_MARK: &str = "scr-harness: the launcher could not start: ";

/// The moments of a launch at which the harness acts from outside: each
/// checkpoint after which every rank sleeps, with what is due then.
type Watches<'a> = Vec<(u64, Vec<Due<'a>>)>;

/// A running launch, as its watcher sees it.
#[derive(Debug, Clone, Copy)]
struct Running<'a> {
    launch: u32,
    nodes: &'a [String],
    /// Lines of the fault log before the launch.
    log_start: usize,
    ranks: usize,
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

impl RunLoop {
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

    /// The job of launch `launch` on `nodes`: the application, each node's
    /// tree as its `SCR_NODE_ROOT`, the job's variables.
    fn job_for(&self, launch: u32, nodes: &[String]) -> MpiJob {
        let mut job = MpiJob::simulated(&self.app.program, nodes.len(), self.alloc.ranks_per_node)
            .args(self.app.args_for(launch))
            .timeout(self.timeout);
        if let Some((first, rest)) = self.mpirun.split_first() {
            job.mpirun = first.into();
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
            faultsim::runtime::ENV_LOG,
            self.alloc.fault_log().to_string_lossy(),
        );
        job.env(
            faultsim::runtime::ENV_JOB,
            format!("{}-{launch}", self.alloc.root.display()),
        )
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
    /// logged its sleep there. Moments that came leave `watch`.
    fn apply_watched(
        &self,
        run: Running<'_>,
        watch: &mut Watches<'_>,
        external: &mut Vec<String>,
        transient: &mut Vec<Record>,
        errors: &mut Vec<String>,
    ) {
        if watch.is_empty() {
            return;
        }
        let fired = read_fault_log(&self.alloc.fault_log());
        let fired = &fired[run.log_start.min(fired.len())..];
        watch.retain(|(after, due)| {
            let arrived = fired
                .iter()
                .filter(|f| {
                    f.point == POINT_COMPUTE && f.hit == *after && f.action.starts_with("delay")
                })
                .count();
            if arrived < run.ranks {
                return true;
            }
            external.push(format!(
                "while every rank sleeps after checkpoint {after} of launch {}:",
                run.launch
            ));
            self.do_due(due, run.nodes, transient, external, errors);
            false
        });
    }

    /// Run `job` through its launcher, bounded by the run loop's timeout,
    /// watching it about every 20 ms: a launcher whose ranks have all
    /// exited must follow within [`LAUNCHER_GRACE`] (otherwise it is stuck
    /// and ended), and the faults of watched moments are applied as they come.
    fn run_watched(
        &self,
        job: &MpiJob,
        run: Running<'_>,
        watch: &mut Watches<'_>,
        external: &mut Vec<String>,
        transient: &mut Vec<Record>,
        errors: &mut Vec<String>,
    ) -> Result<JobOutput, LaunchError> {
        let launcher = job.launcher();
        let argv = self.private_session_dir(launcher.job_argv(&job.spec())?);
        let mut all_gone_since: Option<Instant> = None;
        let mut tick = |pid: u32| {
            let (total, alive) = crate::launch::children_alive(pid);
            if total >= run.ranks && alive == 0 {
                let since = *all_gone_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= LAUNCHER_GRACE {
                    return Watch::LauncherStuck;
                }
            } else {
                all_gone_since = None;
            }
            self.apply_watched(run, watch, external, transient, errors);
            Watch::Continue
        };
        launcher.run(&argv, self.timeout, &mut tick)
    }

    /// Step 3 of the run loop (module documentation): launch `launch` on
    /// `nodes`, with what the harness did before it in `external`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch(
        &self,
        launch: u32,
        nodes: &[String],
        newly_down: Vec<(String, String)>,
        mut external: Vec<String>,
        transient: &mut Vec<Record>,
        completed_before: &[u64],
        errors: &mut Vec<String>,
    ) -> LaunchRecord {
        let mut job = self.job_for(launch, nodes);
        let (plan, mut watch) = self.plan_for(launch);
        let plan_text = (!plan.faults.is_empty()).then(|| plan.to_string());
        if let Some(p) = &plan_text {
            job = job.env(faultsim::runtime::ENV_PLAN, p.clone());
        }
        let run = Running {
            launch,
            nodes,
            log_start: read_fault_log(&self.alloc.fault_log()).len(),
            ranks: job.total_ranks(),
        };
        let start = Instant::now();
        let result = self.run_watched(&job, run, &mut watch, &mut external, transient, errors);
        for (after, _) in &watch {
            errors.push(format!(
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
        self.node_deaths(killed, &fired, &mut external, errors);
        let after = self.due_at(
            launch,
            |w| matches!(w, When::AfterRun { run } if *run == launch),
        );
        self.do_due(&after, nodes, transient, &mut external, errors);
        let ended = ended(result, &mut external);
        let report = AppReport::parse(&ended.stdout);
        let (token, why) = self.judge(&report, nodes.len(), ended.timed_out, completed_before);
        LaunchRecord {
            launcher_stuck: ended.launcher_stuck,
            completed: self.completed_in(&report, run.log_start),
            launch,
            nodes: nodes.to_vec(),
            newly_down,
            exit_code: ended.exit_code,
            elapsed_s: start.elapsed().as_secs_f64(),
            fault_plan: plan_text,
            fired,
            unfired,
            external,
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

/// How the launcher's result reads: exit code, output, a timeout, a stuck
/// launcher (noted in `external`), or a launcher that could not start
/// (marked in stderr with [`LAUNCH_FAILED_MARK`]).
fn ended(result: Result<JobOutput, LaunchError>, external: &mut Vec<String>) -> Ended {
    let plain = |exit_code, stdout, stderr, timed_out| Ended {
        exit_code,
        stdout,
        stderr,
        timed_out,
        launcher_stuck: false,
    };
    match result {
        Ok(out) => plain(Some(out.code()), out.stdout, out.stderr, false),
        Err(LaunchError::Timeout { stdout, stderr, .. }) => plain(None, stdout, stderr, true),
        Err(LaunchError::LauncherStuck { stdout, stderr }) => {
            external.push(format!(
                "every rank had exited but the launcher had not after {LAUNCHER_GRACE:?}: killed it (a launcher bug, not a hang of the application)"
            ));
            Ended {
                launcher_stuck: true,
                ..plain(Some(LAUNCHER_STUCK_CODE), stdout, stderr, false)
            }
        }
        Err(e) => plain(
            Some(-1),
            String::new(),
            format!("{LAUNCH_FAILED_MARK}{e}"),
            false,
        ),
    }
}

/// Bytes all `ranks` ranks write in checkpoint `ckpt` (the data plan).
pub fn plan_bytes(seed: u64, ranks: u32, ckpt: u64, mean_bytes: u64) -> u64 {
    (0..ranks)
        .flat_map(|r| testing::data::file_plan(seed, r, ckpt, mean_bytes))
        .map(|f| f.size_bytes)
        .sum()
}
