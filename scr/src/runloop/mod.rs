//! The run loop of SCR's `scr_run`/`scr_srun` scripts, in the product
//! (`scr run`, `scr srun`) and under the testbed's fault hooks.
//!
//! Inside an allocation [`RunLoop::run`] launches the job until it
//! finishes, a halt condition holds, `SCR_RUNS` launches were made or too
//! few healthy nodes remain (`SCR_MIN_NODES`). Before each launch it runs
//! the node health checks (a [`NodeCheck`]; `SCR_EXCLUDE_NODES`; a node
//! once down stays down) and logs `NODE_FAIL` for each node newly found
//! down, checks the halt condition (from the second launch on: the first
//! launch's application reads the halt file itself), keeps every healthy
//! node of the previous launch in its place and fills lost places with
//! spares ([`choose_nodes`]), and logs `RUN_START`. Every launch is bounded
//! by the watchdog: a hung launch is killed, counted as a failed launch,
//! and the loop goes on (the health checks then find the node that hung).
//! After each launch `RUN_END` says how it ended. What comes after the
//! loop (scavenge, `scr postrun`) is the caller's: it gets the down nodes.
//!
//! The testbed (`harness::runloop`) runs this very loop and adds its faults
//! through [`Hooks`]: before the health checks of each launch (a node it
//! kills there is found down), before the launch, on the job the launcher
//! gets (per-launch arguments, per-node variables, its fault plan), while
//! the launch runs (every ~20 ms, with the launcher's pid), after it (the
//! `RUN_END` note and whether the loop stops) and when the loop stops.

pub mod health;
pub mod nodes;
pub mod prerun;
pub mod probe;
pub mod runlog;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::launch::{JobSpec, LaunchError, Launcher, NodeSpec, Watch};
use health::{DownList, DownReason};
pub use nodes::choose_nodes;
use runlog::RunLog;

/// Health checks of the allocation's nodes before a launch.
pub trait NodeCheck {
    /// Why each of `nodes` that is not healthy is down (healthy ones are
    /// left out).
    fn check(&mut self, nodes: &[String]) -> Vec<(String, DownReason)>;
}

/// What the testbed adds to the loop. Every method has a default that
/// leaves the loop as it is: the product's loop uses [`NoHooks`].
pub trait Hooks {
    /// Before the health checks of launch `launch`; `previous` holds the
    /// nodes of the launch before (empty before the first). What is done
    /// to a node here is seen by the checks (a node killed is found down).
    fn before_checks(&mut self, _launch: u32, _previous: &[String]) {}
    /// Before launch `launch` on `nodes` (after the health checks).
    fn before_launch(&mut self, _launch: u32, _nodes: &[String]) {}
    /// The job of launch `launch` before the launcher turns it into a
    /// command line: the loop's ([`LoopSpec`]'s program, arguments and
    /// variables, `ranks_per_node` ranks on each node), which the hooks may
    /// change (arguments of this launch, variables of a node).
    fn job(&mut self, _launch: u32, _job: &mut JobSpec) {}
    /// While a launch runs, about every 20 ms, with the launcher's pid.
    fn watch(&mut self, _pid: u32) -> Watch {
        Watch::Continue
    }
    /// After a launch, also one whose launcher could not start: the
    /// `RUN_END` note and whether the loop stops (by default the loop's
    /// own, [`AfterLaunch`]).
    fn after_launch(&mut self, _launched: &Launched) -> AfterLaunch {
        AfterLaunch::default()
    }
    /// The loop stopped, after a launch or before one (halted, too few
    /// nodes): what [`Hooks::before_checks`] did for a launch that never
    /// came can be undone here.
    fn stopped(&mut self, _stop: &Stop) {}
    /// A warning of the loop (a run log that cannot be opened).
    fn warn(&mut self, msg: &str) {
        eprintln!("scr run: warning: {msg}");
    }
}

/// What comes after a launch, as [`Hooks::after_launch`] says it; `None`
/// leaves each to the loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfterLaunch {
    /// The `RUN_END` note. The loop's own says how the launcher ended
    /// (`finished`, `failed: ...`) and logs no `RUN_END` for a launcher
    /// that could not start.
    pub note: Option<String>,
    /// Stop the loop, with why. The loop's own rule: stop when the launch
    /// exited 0 ([`Stop::Finished`]) or its launcher could not start
    /// ([`Stop::LaunchFailed`]), relaunch otherwise.
    pub stop: Option<Stop>,
}

/// The product's hooks: none.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl Hooks for NoHooks {}

/// The application and the allocation the loop runs it in.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    /// The program every rank runs.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables every rank sees (besides the launcher's environment).
    pub env: BTreeMap<String, String>,
    /// Every node of the allocation, in order (spares after the job's).
    pub nodes: Vec<String>,
    /// Nodes a launch runs on.
    pub job_nodes: usize,
    /// Ranks on each node.
    pub ranks_per_node: usize,
    /// Fewest nodes to launch on (`SCR_MIN_NODES`; default: `job_nodes`).
    pub min_nodes: usize,
    /// Most launches (`SCR_RUNS`; 0: no limit but the nodes).
    pub runs: u32,
    /// Nodes never used (`SCR_EXCLUDE_NODES`).
    pub excluded: Vec<String>,
    /// Bound on each launch (the watchdog).
    pub watchdog: Duration,
    /// SCR 3.1's progress watchdog (`SCR_WATCHDOG=1`), when asked for.
    pub progress: Option<ProgressWatchdog>,
    /// The prefix directory (halt file, log).
    pub prefix: PathBuf,
}

/// SCR 3.1's job-script watchdog (`SCR_WATCHDOG=1`): a launch is killed
/// when the prefix's flush file shows no progress, its newest dataset and
/// that dataset's locations the same, for `timeout` (SCR_WATCHDOG_TIMEOUT)
/// or, while that dataset is being flushed synchronously (SYNC_FLUSHING),
/// for `timeout_pfs` (SCR_WATCHDOG_TIMEOUT_PFS). As in 3.1, the first look
/// comes `timeout` after the launch: a launch that has written no
/// checkpoint by then, where the flush file shows none either, is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressWatchdog {
    /// Longest a launch may go without a new dataset or location.
    pub timeout: Duration,
    /// The same while the newest dataset is being flushed to the prefix.
    pub timeout_pfs: Duration,
}

/// What the progress watchdog compares: the flush file's newest dataset
/// and its locations (nothing: no flush file, or one that cannot be read).
type FlushState = Option<(i64, Vec<&'static str>)>;

fn flush_state(prefix: &Path) -> FlushState {
    use crate::records::{FlushFile, Location, Record as _};
    let ff = FlushFile::read_file(crate::prefix::flush_file_path(prefix)).ok()?;
    let id = ff.latest()?;
    let locs = [
        Location::Cache,
        Location::Pfs,
        Location::Flushing,
        Location::SyncFlushing,
    ]
    .into_iter()
    .filter(|l| ff.location_test(id, *l))
    .map(Location::as_str)
    .collect();
    Some((id, locs))
}

/// The progress watchdog of one launch.
struct Progress<'p> {
    wd: ProgressWatchdog,
    prefix: &'p Path,
    /// The state at the last look (at the launch: none seen).
    last: FlushState,
    /// When the last look was, and how long until the next.
    since: crate::clock::Tick,
    wait: Duration,
}

impl<'p> Progress<'p> {
    fn new(wd: ProgressWatchdog, prefix: &'p Path) -> Progress<'p> {
        Progress {
            wd,
            prefix,
            last: None,
            since: crate::clock::Clock::now(&crate::clock::SystemClock),
            wait: wd.timeout,
        }
    }

    /// How long the launch went without progress, once it is too long.
    fn stalled(&mut self) -> Option<Duration> {
        use crate::clock::Clock as _;
        let clock = crate::clock::SystemClock;
        if clock.elapsed(self.since) < self.wait {
            return None;
        }
        let now = flush_state(self.prefix);
        if now == self.last {
            return Some(self.wait);
        }
        let flushing = now
            .as_ref()
            .is_some_and(|(_, l)| l.contains(&"SYNC_FLUSHING"));
        self.wait = if flushing {
            self.wd.timeout_pfs
        } else {
            self.wd.timeout
        };
        self.last = now;
        self.since = clock.now();
        None
    }
}

/// How one launch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchEnd {
    /// The launcher exited with this code (`128 + signal` when killed).
    Exited(i32),
    /// The watchdog killed it after this long.
    Killed(Duration),
    /// It outlived its ranks and was killed.
    Stuck,
    /// The progress watchdog killed it after this long without progress.
    NoProgress(Duration),
    /// The launcher could not start (not a failure of the job), with why.
    NotStarted(String),
}

/// How a launch ended, in words (`scr run`'s progress lines).
impl std::fmt::Display for LaunchEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchEnd::Exited(code) if *code > 128 => {
                write!(f, "exit code {code} (killed by signal {})", code - 128)
            }
            LaunchEnd::Exited(code) => write!(f, "exit code {code}"),
            LaunchEnd::Killed(after) => write!(
                f,
                "killed after {:.0} s, the bound on a launch (--watchdog, else the allocation's end)",
                after.as_secs_f64()
            ),
            LaunchEnd::Stuck => f.write_str("killed: the launcher outlived its ranks"),
            LaunchEnd::NoProgress(quiet) => write!(
                f,
                "killed by the watchdog: no new checkpoint or flush for {:.0} s (SCR_WATCHDOG=1)",
                quiet.as_secs_f64()
            ),
            LaunchEnd::NotStarted(why) => write!(f, "not started: {why}"),
        }
    }
}

/// One launch as the loop saw it.
#[derive(Debug, Clone)]
pub struct Launched {
    /// 1-based.
    pub launch: u32,
    /// Its nodes, in rank order.
    pub nodes: Vec<String>,
    /// Nodes found down just before it, with why.
    pub newly_down: Vec<(String, String)>,
    /// How it ended.
    pub end: LaunchEnd,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A launch exited 0.
    Finished,
    /// A halt condition held before a relaunch.
    Halted(String),
    /// `SCR_RUNS` launches were made.
    RunsExhausted,
    /// Fewer healthy nodes than `SCR_MIN_NODES`.
    TooFewNodes {
        /// Healthy nodes left.
        healthy: usize,
        /// Nodes needed.
        need: usize,
    },
    /// The launcher could not run at all (not a failure of the job).
    LaunchFailed(String),
    /// A launch outlived the watchdog and the hooks stop there (the loop's
    /// own rule relaunches after a hang).
    Hung,
}

/// The loop's result.
#[derive(Debug, Clone)]
pub struct LoopResult {
    /// Every launch whose launcher started.
    pub launches: Vec<Launched>,
    /// Why it stopped.
    pub stop: Stop,
    /// Down nodes at the end, with the first reason each was found down.
    pub down: DownList,
}

impl LoopResult {
    /// The nodes still up at the end (for the scavenge).
    pub fn up_nodes(&self, all: &[String]) -> Vec<String> {
        all.iter()
            .filter(|n| !self.down.is_down(n))
            .cloned()
            .collect()
    }
}

/// The run loop: a launcher, a node check and hooks over a [`LoopSpec`].
pub struct RunLoop<'a> {
    /// What runs where.
    pub spec: LoopSpec,
    /// How the job reaches its nodes.
    pub launcher: &'a dyn Launcher,
    /// The health checks.
    pub check: &'a mut dyn NodeCheck,
    /// The testbed's additions.
    pub hooks: &'a mut dyn Hooks,
}

/// Seconds past the allocation's end a launch is given before the loop
/// kills it: the resource manager ends it first.
pub const END_GRACE_S: u64 = 300;

/// The bound on each launch, in seconds: `explicit` (`--watchdog`,
/// SCR_WATCHDOG_TIMEOUT) when given; else the time left in the allocation
/// (`end_time_s`, SCR_END_TIME or Slurm's end) and [`END_GRACE_S`], so a
/// launch that runs as long as the allocation is never cut short (SCR 3.1
/// has no bound unless its watchdog is asked for); else a day, outside an
/// allocation that says when it ends.
pub fn launch_bound_s(explicit: Option<u64>, end_time_s: Option<i64>, now_s: i64) -> u64 {
    match (explicit, end_time_s) {
        (Some(s), _) => s,
        (None, Some(end)) => u64::try_from(end.saturating_sub(now_s))
            .unwrap_or(0)
            .saturating_add(END_GRACE_S),
        (None, None) => 86_400,
    }
}

/// The halt condition in the prefix's halt file as a relaunch sees it,
/// ignoring the reason a normal `SCR_Finalize` leaves (the next `SCR_Init`
/// clears it). `None` without a halt file or condition.
pub fn halt_condition(prefix: &Path) -> Option<String> {
    use crate::clock::Clock;
    use crate::records::Record as _;
    let path = crate::halt::halt_path(prefix);
    let mut halt = crate::records::Halt::read_file_in(prefix, &path).ok()?;
    if halt.exit_reason.as_deref() == Some(crate::records::halt::REASON_FINALIZE_CALLED) {
        halt.exit_reason = None;
    }
    halt.halt_reason(crate::clock::SystemClock.unix_secs())
}

/// The halt condition as SCR 3.1's `scr_retries_halt` reads it, for job
/// scripts that relaunch until it says halt: any exit reason counts,
/// `SCR_FINALIZE_CALLED` too (the job finished: do not run it again), and
/// a halt file that cannot be read is a reason to halt, to be safe. `None`
/// without a halt file or condition.
pub fn halt_condition_scr31(prefix: &Path) -> Option<String> {
    use crate::clock::Clock;
    use crate::records::Record as _;
    let path = crate::halt::halt_path(prefix);
    match crate::records::Halt::read_file_in(prefix, &path) {
        Ok(halt) => halt.halt_reason(crate::clock::SystemClock.unix_secs()),
        Err(e) if e.is_not_found() => None,
        Err(e) => Some(format!("the halt file cannot be read: {e}")),
    }
}

/// The `RUN_END` note of a launch (words `scr interval` reads: `failed`,
/// `killed` count as failures); none for a launcher that could not start.
fn end_note(end: &LaunchEnd) -> Option<String> {
    Some(match end {
        LaunchEnd::Exited(0) => "finished".into(),
        LaunchEnd::Exited(c) => format!("failed: launcher exit code {c}"),
        LaunchEnd::Killed(d) => format!("failed: hang, killed after {:.0} s", d.as_secs_f64()),
        LaunchEnd::Stuck => "failed: launcher stuck after its ranks exited, killed".into(),
        LaunchEnd::NoProgress(d) => format!(
            "failed: hang, killed after {:.0} s without progress",
            d.as_secs_f64()
        ),
        LaunchEnd::NotStarted(_) => return None,
    })
}

/// The loop's own rule after a launch: stop when it exited 0 or its
/// launcher could not start, relaunch otherwise.
fn stop_after(end: &LaunchEnd) -> Option<Stop> {
    match end {
        LaunchEnd::Exited(0) => Some(Stop::Finished),
        LaunchEnd::NotStarted(why) => Some(Stop::LaunchFailed(why.clone())),
        _ => None,
    }
}

/// Nodes newly found down before a launch, with why.
type NewlyDown = Vec<(String, String)>;

/// What the loop carries from launch to launch.
struct State {
    log: RunLog,
    down: DownList,
    /// The nodes of the latest launch.
    previous: Vec<String>,
    launches: Vec<Launched>,
}

impl RunLoop<'_> {
    /// Run the loop to its end.
    pub fn run(&mut self) -> LoopResult {
        let (log, warning) = RunLog::open(&self.spec.prefix, &self.spec.env);
        if let Some(w) = warning {
            self.hooks.warn(&w);
        }
        let mut st = State {
            log,
            down: DownList::new(),
            previous: Vec::new(),
            launches: Vec::new(),
        };
        let mut launch = 0u32;
        let stop = loop {
            if self.spec.runs > 0 && launch >= self.spec.runs {
                break Stop::RunsExhausted;
            }
            launch += 1;
            let (nodes, newly_down) = match self.before(launch, &mut st) {
                Ok(ready) => ready,
                Err(stop) => break stop,
            };
            if let Some(stop) = self.launch_and_log(launch, nodes, newly_down, &mut st) {
                break stop;
            }
        };
        self.hooks.stopped(&stop);
        LoopResult {
            launches: st.launches,
            stop,
            down: st.down,
        }
    }

    /// Before launch `launch`: the hooks' turn, the health checks, the halt
    /// condition (from the second launch on) and the nodes, with those
    /// newly found down. `Err` with why the loop stops here.
    fn before(&mut self, launch: u32, st: &mut State) -> Result<(Vec<String>, NewlyDown), Stop> {
        self.hooks.before_checks(launch, &st.previous);
        let newly_down = self.health(&mut st.down, &st.log);
        if launch > 1 {
            if let Some(why) = halt_condition(&self.spec.prefix) {
                return Err(Stop::Halted(why));
            }
        }
        let need = self.spec.min_nodes.min(self.spec.job_nodes);
        let Some(nodes) = choose_nodes(
            &self.spec.nodes,
            &st.previous,
            &st.down,
            self.spec.job_nodes,
            need,
        ) else {
            let healthy = self
                .spec
                .nodes
                .iter()
                .filter(|n| !st.down.is_down(n))
                .count();
            return Err(Stop::TooFewNodes { healthy, need });
        };
        Ok((nodes, newly_down))
    }

    /// Launch `launch` on `nodes` between its `RUN_START` and `RUN_END`;
    /// `Some` with why the loop stops after it.
    fn launch_and_log(
        &mut self,
        launch: u32,
        nodes: Vec<String>,
        newly_down: Vec<(String, String)>,
        st: &mut State,
    ) -> Option<Stop> {
        self.hooks.before_launch(launch, &nodes);
        let procs = (nodes.len() * self.spec.ranks_per_node) as u64;
        st.log.run_start(launch, self.spec.runs, procs, &nodes);
        let rec = self.launch_one(launch, &nodes, newly_down);
        let after = self.hooks.after_launch(&rec);
        if let Some(note) = after.note.or_else(|| end_note(&rec.end)) {
            st.log.run_end(launch, &note, rec.elapsed_s);
        }
        let stop = after.stop.or_else(|| stop_after(&rec.end));
        if !matches!(rec.end, LaunchEnd::NotStarted(_)) {
            st.launches.push(rec);
        }
        st.previous = nodes;
        stop
    }

    /// The health checks before a launch: nodes newly found down, with why,
    /// each logged as `NODE_FAIL`.
    fn health(&mut self, down: &mut DownList, log: &RunLog) -> Vec<(String, String)> {
        let mut newly = Vec::new();
        let mut mark = |down: &mut DownList, n: &str, r: DownReason| {
            let text = r.to_string();
            if down.mark(n, r) {
                log.node_fail(n, &text);
                newly.push((n.to_string(), text));
            }
        };
        for n in &self.spec.nodes {
            if self.spec.excluded.contains(n) {
                mark(down, n, DownReason::Excluded);
            }
        }
        let to_check: Vec<String> = self
            .spec
            .nodes
            .iter()
            .filter(|n| !down.is_down(n))
            .cloned()
            .collect();
        for (n, r) in self.check.check(&to_check) {
            mark(down, &n, r);
        }
        newly
    }

    /// One launch on `nodes`, bounded by the watchdog, with the hooks' job
    /// ([`Hooks::job`]) and watch; outside the loop too (the testbed's
    /// launch in a new allocation). A launcher that cannot start ends as
    /// [`LaunchEnd::NotStarted`].
    pub fn launch_one(
        &mut self,
        launch: u32,
        nodes: &[String],
        newly_down: Vec<(String, String)>,
    ) -> Launched {
        let mut job = JobSpec {
            program: self.spec.program.clone(),
            args: self.spec.args.clone(),
            nodes: nodes
                .iter()
                .map(|n| NodeSpec {
                    name: n.clone(),
                    ranks: self.spec.ranks_per_node,
                    env: BTreeMap::new(),
                })
                .collect(),
            env: self.spec.env.clone(),
        };
        self.hooks.job(launch, &mut job);
        let start = std::time::Instant::now();
        let (end, stdout, stderr) = self.run_job(&job);
        Launched {
            launch,
            nodes: nodes.to_vec(),
            newly_down,
            end,
            elapsed_s: start.elapsed().as_secs_f64(),
            stdout,
            stderr,
        }
    }

    /// Run `job` through the launcher under the watchdog, the hooks
    /// watching: how it ended and its output.
    fn run_job(&mut self, job: &JobSpec) -> (LaunchEnd, String, String) {
        let argv = match self.launcher.job_argv(job) {
            Ok(argv) => argv,
            Err(e) => {
                return (
                    LaunchEnd::NotStarted(e.to_string()),
                    String::new(),
                    String::new(),
                )
            }
        };
        let hooks = &mut *self.hooks;
        let mut progress = self
            .spec
            .progress
            .map(|wd| Progress::new(wd, &self.spec.prefix));
        let mut quiet = Duration::ZERO;
        let ran = self.launcher.run(&argv, self.spec.watchdog, &mut |pid| {
            if let Some(q) = progress.as_mut().and_then(Progress::stalled) {
                quiet = q;
                return Watch::NoProgress;
            }
            hooks.watch(pid)
        });
        match ran {
            Err(LaunchError::NoProgress { stdout, stderr }) => {
                (LaunchEnd::NoProgress(quiet), stdout, stderr)
            }
            Ok(out) => (LaunchEnd::Exited(out.code()), out.stdout, out.stderr),
            Err(LaunchError::Timeout {
                after,
                stdout,
                stderr,
            }) => (LaunchEnd::Killed(after), stdout, stderr),
            Err(LaunchError::LauncherStuck { stdout, stderr }) => {
                (LaunchEnd::Stuck, stdout, stderr)
            }
            Err(e) => (
                LaunchEnd::NotStarted(e.to_string()),
                String::new(),
                String::new(),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
