//! The fault hooks of the run loop: faults the harness applies from
//! outside (before, between, after launches and at postrun), what a dead
//! node's storage becomes, and the fault log every rank appends to (what
//! fired, what never did).

use std::fs;
use std::path::{Path, PathBuf};

use faultsim::inject::{self, Record};
use faultsim::plan::{Area, Corruption, Fault, NodeAftermath, Target, What, When, POINT_COMPUTE};
use serde::Serialize;

use super::halt::{set_halt, HaltEvent};
use super::{RunLoop, WATCH_DELAY_MS};

/// One fired fault, as the library logged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Firing {
    /// Injection point.
    pub point: String,
    /// Hit.
    pub hit: u64,
    /// Rank.
    pub rank: Option<u32>,
    /// Node.
    pub node: Option<String>,
    /// Action (compact form).
    pub action: String,
}

/// Read the fault log (lines that do not parse are skipped: a line being
/// appended right now may be partial).
pub fn read_fault_log(path: &Path) -> Vec<Firing> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The firings logged after the first `log_start` lines of the fault log
/// at `path` (those of the launch or postrun that began at that length).
pub(super) fn fired_since(path: &Path, log_start: usize) -> Vec<Firing> {
    read_fault_log(path).into_iter().skip(log_start).collect()
}

/// A moment at which the harness acts from outside during a launch.
#[derive(Debug, Clone)]
pub(super) enum Due<'a> {
    Fault(usize, &'a Fault),
    Halt(&'a HaltEvent),
}

impl RunLoop {
    /// The real directory of `area` (control or cache base) on `node`.
    fn node_area(&self, node: &str, area: Area) -> PathBuf {
        let base = match area {
            Area::Control => self.env.get("SCR_CNTL_BASE"),
            _ => self.env.get("SCR_CACHE_BASE"),
        }
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
        crate::health::node_path(Some(&self.alloc.node_root(node)), &base)
    }

    /// Damage the files `target` names (on one node, every node of the
    /// launch, or the prefix) as `how` says, each root from its own random
    /// stream of the fault.
    fn corrupt(
        &self,
        index: usize,
        target: &Target,
        how: &Corruption,
        nodes: &[String],
    ) -> Result<Vec<String>, String> {
        let seeded = self.seeded();
        let stream = format!("fault.{index}");
        let roots: Vec<PathBuf> = match (target.area, &target.node) {
            (Area::Prefix, _) => vec![self.alloc.prefix()],
            (area, Some(n)) => vec![self.node_area(n, area)],
            (area, None) => nodes.iter().map(|n| self.node_area(n, area)).collect(),
        };
        let mut done = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            if !root.is_dir() {
                continue;
            }
            let recs = inject::corrupt_target(root, target, how, &seeded, &format!("{stream}.{i}"))
                .map_err(|e| e.to_string())?;
            done.extend(recs.iter().map(ToString::to_string));
        }
        if done.is_empty() {
            done.push(format!("fault {index}: no file matched {target:?}"));
        }
        Ok(done)
    }

    /// Faults of `faults` that kill a node and fired (a `kill-node` firing
    /// on that node): the node's storage follows ([`RunLoop::aftermath`]).
    pub(super) fn node_deaths<'a>(
        &self,
        faults: impl Iterator<Item = &'a Fault>,
        fired: &[Firing],
        external: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) {
        for f in faults {
            if let What::KillNode { node, then } = &f.what {
                if fired
                    .iter()
                    .any(|x| x.action == "kill-node" && x.node.as_deref() == Some(node))
                {
                    match self.aftermath(node, *then) {
                        Ok(done) => external.extend(done),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }

    /// Apply one external fault; returns what was done.
    pub(super) fn apply_external(
        &self,
        index: usize,
        fault: &Fault,
        nodes: &[String],
        transient: &mut Vec<Record>,
    ) -> Result<Vec<String>, String> {
        let err = |e: inject::InjectError| e.to_string();
        let mut done = Vec::new();
        match &fault.what {
            What::Corrupt { target, how } => {
                done.extend(self.corrupt(index, target, how, nodes)?);
            }
            What::PfsOutage { method } => {
                let r = inject::pfs_outage(&self.alloc.prefix(), *method).map_err(err)?;
                done.push(r.to_string());
                transient.push(r);
            }
            What::CacheFull {
                node,
                leave_free_bytes,
            } => {
                let targets: Vec<String> = match node {
                    Some(n) => vec![n.clone()],
                    None => nodes.to_vec(),
                };
                for n in targets {
                    let dir = self.node_area(&n, Area::Cache);
                    let r = inject::fill_dir(&dir, *leave_free_bytes, 1 << 30).map_err(err)?;
                    done.push(r.to_string());
                    transient.push(r);
                }
            }
            What::KillNode { node, then } => {
                // Between launches no process of the job runs: the node's
                // death is its storage's fate. (During a launch the library
                // kills the node's ranks itself, scoped to the job.)
                done.push(format!("node {node} dies between launches"));
                done.extend(self.aftermath(node, *then)?);
            }
            other => {
                // The plan's own words for it (its JSON form), not a Debug form.
                let said = serde_json::to_string(other).unwrap_or_else(|_| "it".into());
                return Err(format!(
                    "fault {index}: {said} happens inside the library, not from outside"
                ));
            }
        }
        Ok(done)
    }

    /// What happens to a dead node's directories.
    pub(super) fn aftermath(&self, node: &str, then: NodeAftermath) -> Result<Vec<String>, String> {
        let root = self.alloc.node_root(node);
        if !root.is_dir() {
            return Ok(Vec::new());
        }
        let r = match then {
            NodeAftermath::Keep => return Ok(Vec::new()),
            NodeAftermath::RemoveDirs => inject::remove_dir_tree(&root),
            NodeAftermath::MakeUnreadable => {
                inject::make_node_unreadable(&root, faultsim::plan::OutageMethod::Auto)
            }
        }
        .map_err(|e| e.to_string())?;
        Ok(vec![r.to_string()])
    }

    pub(super) fn due_at(&self, launch: u32, pick: impl Fn(&When) -> bool) -> Vec<Due<'_>> {
        let mut v: Vec<Due<'_>> = self
            .plan
            .external()
            .filter(|(_, f)| !f.what.in_process() || f.when.as_point().is_none())
            .filter(|(_, f)| pick(&f.when) && (run_of(f) == launch))
            .map(|(i, f)| Due::Fault(i, f))
            .collect();
        v.extend(
            self.halts
                .iter()
                .filter(|h| pick(&h.when) && halt_run(h) == launch)
                .map(Due::Halt),
        );
        v
    }

    pub(super) fn do_due(
        &self,
        due: &[Due<'_>],
        nodes: &[String],
        transient: &mut Vec<Record>,
        log: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) {
        for d in due {
            match d {
                Due::Fault(i, f) => match self.apply_external(*i, f, nodes, transient) {
                    Ok(done) => log.extend(done),
                    Err(e) => errors.push(e),
                },
                Due::Halt(h) => {
                    match set_halt(&self.alloc.prefix(), &h.set, self.scr_command.as_deref()) {
                        Ok(done) => log.push(done),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }
}

/// A firing of the harness's own sleep (not a fault of the plan).
pub(super) fn is_watch(f: &Firing) -> bool {
    f.point == POINT_COMPUTE && f.action == format!("delay:{WATCH_DELAY_MS}")
}

pub(super) fn run_of(f: &Fault) -> u32 {
    match f.when {
        When::BeforeRun { run } | When::AfterRun { run } => run,
        _ => f.run,
    }
}

fn halt_run(h: &HaltEvent) -> u32 {
    match h.when {
        When::BeforeRun { run } | When::AfterRun { run } => run,
        _ => h.run,
    }
}

pub(super) fn undo_all(transient: &mut Vec<Record>, errors: &mut Vec<String>) {
    while let Some(r) = transient.pop() {
        if let Err(e) = r.undo() {
            errors.push(format!("undo of \"{r}\": {e}"));
        }
    }
}
