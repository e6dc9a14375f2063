//! The testbed inside the library's run loop: [`Testbed`] is the harness's
//! [`scr::runloop::Hooks`] (faults before the health checks, each launch's
//! job, the watcher, the record and stop rules after a launch) and
//! [`SimulatedNodes`] its [`NodeCheck`] (each node's tree checked where its
//! ranks see it). The loop itself is `scr::runloop::RunLoop`'s.

use std::time::Instant;

use faultsim::plan::When;
use scr::runloop::{AfterLaunch, Hooks, LaunchEnd, Launched, NodeCheck, Stop};

use super::faults::undo_all;
use super::launching::{Outside, Running};
use super::{Allocation, LaunchRecord, RunLoop, LAUNCHER_GRACE};
use crate::health::{check_node, DownReason, StorageCheck};
use crate::launch::{JobSpec, Watch};
use crate::outcome::{Class, End, Token};

/// The health checks of simulated nodes: each node's tree (its
/// `SCR_NODE_ROOT`) holds the storage checked.
#[derive(Debug, Clone, Copy)]
pub(super) struct SimulatedNodes<'a> {
    /// The allocation.
    pub(super) alloc: &'a Allocation,
    /// Storage checked on every node.
    pub(super) storage: &'a [StorageCheck],
}

impl NodeCheck for SimulatedNodes<'_> {
    fn check(&mut self, nodes: &[String]) -> Vec<(String, DownReason)> {
        nodes
            .iter()
            .filter_map(|n| {
                check_node(Some(&self.alloc.node_root(n)), self.storage)
                    .err()
                    .map(|r| (n.clone(), r))
            })
            .collect()
    }
}

/// What the harness keeps of the loop, launch after launch.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// The nodes of the latest launch.
    pub(super) previous: Vec<String>,
    /// Every launch's record.
    pub(super) launches: Vec<LaunchRecord>,
    /// Every launch's classification.
    pub(super) tokens: Vec<Token>,
    /// Checkpoints completed so far.
    pub(super) completed: Vec<u64>,
}

/// The harness's hooks in the library's run loop (module documentation).
#[derive(Debug)]
pub(super) struct Testbed<'a> {
    rl: &'a RunLoop,
    /// What the loop left so far.
    pub(super) kept: Kept,
    /// What the harness did from outside for the coming (or running)
    /// launch, and every problem of the harness so far.
    pub(super) out: Outside,
    /// The launch running: from its job to its end.
    running: Option<Running<'a>>,
    /// Since when every rank of the running launch has exited.
    all_gone_since: Option<Instant>,
}

impl<'a> Testbed<'a> {
    /// Hooks of `rl`, with the checkpoints `completed` before its first
    /// launch.
    pub(super) fn new(rl: &'a RunLoop, completed: Vec<u64>) -> Testbed<'a> {
        Testbed {
            rl,
            kept: Kept {
                completed,
                ..Kept::default()
            },
            out: Outside::default(),
            running: None,
            all_gone_since: None,
        }
    }
}

/// How the harness says the loop ended.
pub(super) fn end_of(stop: &Stop) -> End {
    match stop {
        Stop::Finished => End::Completed,
        Stop::Halted(_) => End::Halted,
        Stop::RunsExhausted => End::Retries,
        Stop::TooFewNodes { .. } => End::Nodes,
        Stop::LaunchFailed(_) => End::Launch,
        Stop::Hung => End::Hang,
    }
}

/// The harness's rule after a launch: a hang ends the loop (the cell is a
/// HANG), an exit 0 ends it (halted when the application said it halted),
/// and so does a launcher that could not start; anything else relaunches.
fn stop_after(rec: &LaunchRecord, end: &LaunchEnd) -> Option<Stop> {
    match end {
        LaunchEnd::Killed(_) | LaunchEnd::NoProgress(_) => Some(Stop::Hung),
        LaunchEnd::Exited(0) if rec.report.halted => {
            Some(Stop::Halted("the application halted".into()))
        }
        LaunchEnd::Exited(0) => Some(Stop::Finished),
        LaunchEnd::NotStarted(why) => Some(Stop::LaunchFailed(why.clone())),
        _ => None,
    }
}

impl Hooks for Testbed<'_> {
    /// Step 1 (module documentation of [`super`]): the faults due "before
    /// run k", on the previous launch's nodes (the first launch's before
    /// it), so the health checks find what they did.
    fn before_checks(&mut self, launch: u32, previous: &[String]) {
        let due = self.rl.due_at(
            launch,
            |w| matches!(w, When::BeforeRun { run } if *run == launch),
        );
        let nodes = if previous.is_empty() {
            self.rl.first_nodes()
        } else {
            previous.to_vec()
        };
        let o = &mut self.out;
        self.rl.do_due(
            &due,
            &nodes,
            &mut o.transient,
            &mut o.external,
            &mut o.errors,
        );
    }

    fn job(&mut self, launch: u32, job: &mut JobSpec) {
        self.running = Some(self.rl.shape_job(launch, job));
        self.all_gone_since = None;
    }

    /// A launcher whose ranks have all exited must follow within
    /// [`LAUNCHER_GRACE`] (otherwise it is stuck and ended); the faults of
    /// watched moments are applied as they come.
    fn watch(&mut self, pid: u32) -> Watch {
        let Some(run) = self.running.as_mut() else {
            return Watch::Continue;
        };
        let (total, alive) = crate::launch::children_alive(pid);
        if total >= run.ranks && alive == 0 {
            let since = *self.all_gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= LAUNCHER_GRACE {
                return Watch::LauncherStuck;
            }
        } else {
            self.all_gone_since = None;
        }
        self.rl.apply_watched(run, &mut self.out);
        Watch::Continue
    }

    /// Step 4: the launch's record, transient faults undone, the `RUN_END`
    /// note (`halted` for a halted exit 0) and whether the loop stops.
    fn after_launch(&mut self, launched: &Launched) -> AfterLaunch {
        let run = self.running.take().unwrap_or_else(|| Running {
            launch: launched.launch,
            nodes: launched.nodes.clone(),
            log_start: super::read_fault_log(&self.rl.alloc.fault_log()).len(),
            ranks: 0,
            watch: Vec::new(),
            plan_text: None,
        });
        let rec = self
            .rl
            .record(run, launched, &mut self.out, &self.kept.completed);
        undo_all(&mut self.out.transient, &mut self.out.errors);
        let kept = &mut self.kept;
        kept.completed.extend(rec.completed.iter().copied());
        kept.tokens
            .push(rec.token.parse().unwrap_or(Token::of(Class::Died)));
        let note = crate::runlog::run_end_note(
            rec.exit_code,
            rec.report.halted,
            self.rl.timeout.as_secs_f64(),
        );
        let stop = stop_after(&rec, &launched.end);
        kept.previous = launched.nodes.clone();
        kept.launches.push(rec);
        AfterLaunch {
            note: Some(note),
            stop,
        }
    }

    /// The loop stopped before a launch (halted, too few nodes): the
    /// transient faults done for it are undone.
    fn stopped(&mut self, _stop: &Stop) {
        undo_all(&mut self.out.transient, &mut self.out.errors);
        self.out.external.clear();
    }

    fn warn(&mut self, msg: &str) {
        // The log is the job's, not the harness's: a log that cannot be
        // opened is a warning, never a harness error of the cell.
        eprintln!("scr-harness: warning: {msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_whose_tree_is_gone_is_down_and_each_stop_is_the_harness_end() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = super::super::default_storage(&Default::default());
        let alloc = Allocation::create(tmp.path(), 2, 1, 1, &storage).unwrap();
        std::fs::remove_dir_all(alloc.node_root("n1")).unwrap();
        let mut check = SimulatedNodes {
            alloc: &alloc,
            storage: &storage,
        };
        let down = check.check(&alloc.nodes);
        let names: Vec<&str> = down.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["n1"]);
        assert_eq!(end_of(&Stop::Finished), End::Completed);
        assert_eq!(end_of(&Stop::Halted("x".into())), End::Halted);
        assert_eq!(end_of(&Stop::RunsExhausted), End::Retries);
        let nodes = Stop::TooFewNodes {
            healthy: 1,
            need: 2,
        };
        assert_eq!(end_of(&nodes), End::Nodes);
        assert_eq!(end_of(&Stop::LaunchFailed("x".into())), End::Launch);
        assert_eq!(end_of(&Stop::Hung), End::Hang);
    }
}
