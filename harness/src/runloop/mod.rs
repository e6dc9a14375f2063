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
//!
//! By concern: `nodes` (health checks, node choice: steps 1–2), `halt`
//! (halt requests and the halt condition), `launching` (one launch through
//! the library's [`scr::launch::Launcher`], watched and judged: steps 3–4),
//! `faults` (faults applied from outside, node aftermath, the fault log),
//! `postrun` (step 5) and `next` (step 6); this file holds the loop itself.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use faultsim::inject::Record;
use faultsim::plan::{Plan, When};
use faultsim::seed::Seeded;
use serde::Serialize;

use crate::health::{expand_hostlist, DownList, StorageCheck};
use crate::outcome::{AppReport, Class, End, Outcome, Scavenged, Token};
use crate::runlog::RunLog;

mod faults;
mod halt;
mod launching;
mod next;
mod nodes;
mod postrun;

pub use faults::{read_fault_log, Firing};
pub use halt::{has_postrun, has_subcommand, set_halt, HaltEvent, HaltSet};
pub use launching::{plan_bytes, LAUNCHER_STUCK_CODE};
pub use next::newest_complete_checkpoint;
pub use nodes::{choose_nodes, default_storage};
pub use postrun::{PostrunCopy, PostrunDataset, PostrunJson, PostrunParseError, PostrunRecord};
pub use scr::runloop::halt_condition;

use faults::undo_all;
use launching::LAUNCH_FAILED_MARK;

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

/// What the loop carries from launch to launch.
#[derive(Debug, Default)]
struct LoopState {
    down: DownList,
    /// The nodes of the latest launch.
    previous: Vec<String>,
    launches: Vec<LaunchRecord>,
    tokens: Vec<Token>,
    /// Checkpoints completed so far.
    completed: Vec<u64>,
    errors: Vec<String>,
}

/// A launch about to start: its nodes, nodes newly found down, what the
/// harness did before it and what it must undo after it.
#[derive(Debug)]
struct Ready {
    nodes: Vec<String>,
    newly_down: Vec<(String, String)>,
    external: Vec<String>,
    transient: Vec<Record>,
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

    /// Run the loop to its end.
    pub fn run(&self) -> RunResult {
        let mut st = LoopState::default();
        let excluded = self.excluded();
        // The log is the job's, not the harness's: a log that cannot be
        // opened is a warning, never a harness error of the cell.
        let (runlog, warning) = RunLog::open(&self.alloc.prefix(), &self.env);
        if let Some(w) = warning {
            eprintln!("scr-harness: warning: {w}");
        }
        let mut end = End::Retries;
        for launch in 1..=self.max_launches.max(1) {
            let step = self
                .before_launch(launch, &excluded, &runlog, &mut st)
                .and_then(|ready| self.launch_and_record(launch, ready, &runlog, &mut st));
            if let Err(e) = step {
                end = e;
                break;
            }
        }
        self.after_loop(st, end)
    }

    /// Steps 1 and 2 (module documentation): faults due before the launch,
    /// health checks, the halt condition (from launch 2 on), the nodes.
    /// `Err` with how the loop ends when it stops here.
    fn before_launch(
        &self,
        launch: u32,
        excluded: &[String],
        runlog: &RunLog,
        st: &mut LoopState,
    ) -> Result<Ready, End> {
        let mut external = Vec::new();
        let mut transient: Vec<Record> = Vec::new();
        let before = self.due_at(
            launch,
            |w| matches!(w, When::BeforeRun { run } if *run == launch),
        );
        let prev_or_first = if st.previous.is_empty() {
            self.first_nodes()
        } else {
            st.previous.clone()
        };
        self.do_due(
            &before,
            &prev_or_first,
            &mut transient,
            &mut external,
            &mut st.errors,
        );
        let newly_down = self.health_checks(&mut st.down, excluded, runlog);
        if launch > 1 && halt_condition(&self.alloc.prefix()).is_some() {
            undo_all(&mut transient, &mut st.errors);
            return Err(End::Halted);
        }
        let Some(nodes) = choose_nodes(
            &self.alloc.nodes,
            &st.previous,
            &st.down,
            self.alloc.job_nodes,
        ) else {
            undo_all(&mut transient, &mut st.errors);
            return Err(End::Nodes);
        };
        Ok(Ready {
            nodes,
            newly_down,
            external,
            transient,
        })
    }

    /// Steps 3 and 4 (module documentation): the launch, its record, and
    /// whether the loop goes on (`Err` with how it ends otherwise).
    fn launch_and_record(
        &self,
        launch: u32,
        ready: Ready,
        runlog: &RunLog,
        st: &mut LoopState,
    ) -> Result<(), End> {
        let Ready {
            nodes,
            newly_down,
            external,
            mut transient,
        } = ready;
        let procs = (nodes.len() * self.alloc.ranks_per_node) as u64;
        runlog.run_start(launch, self.max_launches.max(1), procs, &nodes);
        let rec = self.launch(
            launch,
            &nodes,
            newly_down,
            external,
            &mut transient,
            &st.completed,
            &mut st.errors,
        );
        undo_all(&mut transient, &mut st.errors);
        st.completed.extend(rec.completed.iter().copied());
        let timed_out = rec.exit_code.is_none();
        let exited_ok = rec.exit_code == Some(0);
        let halted = rec.report.halted;
        runlog.run_end(
            launch,
            &crate::runlog::run_end_note(rec.exit_code, halted, self.timeout.as_secs_f64()),
            rec.elapsed_s,
        );
        st.tokens
            .push(rec.token.parse().unwrap_or(Token::of(Class::Died)));
        let launcher_failed = rec.stderr.contains(LAUNCH_FAILED_MARK);
        st.launches.push(rec);
        st.previous = nodes;
        if timed_out {
            return Err(End::Hang);
        }
        if exited_ok {
            return Err(if halted { End::Halted } else { End::Completed });
        }
        if launcher_failed {
            return Err(End::Launch);
        }
        Ok(())
    }

    /// Steps 5 and 6 (module documentation) and the result.
    fn after_loop(&self, mut st: LoopState, end: End) -> RunResult {
        let postrun = self.postrun(&mut st.down, &st.previous, &mut st.errors);
        if self.next_allocation && postrun.is_none() {
            st.errors.push(
                "next_allocation: no `scr` command with `postrun` (give --scr): nothing was scavenged"
                    .into(),
            );
        }
        let mut outcome = Outcome::of(st.tokens, end);
        let mut next = None;
        if self.next_allocation {
            outcome.postrun = Some(
                postrun
                    .as_ref()
                    .map_or_else(|| vec![Scavenged::Failed], |p| p.results.clone()),
            );
            let rec = self.next_launch(&st.completed, &mut st.errors);
            outcome.next = Some(rec.token.parse().unwrap_or(Token::of(Class::Died)));
            next = Some(rec);
        }
        RunResult {
            launches: st.launches,
            outcome,
            down: st
                .down
                .entries()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect(),
            postrun,
            next,
            harness_errors: st.errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::DownReason;
    use scr::records::halt::REASON_FINALIZE_CALLED;

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
