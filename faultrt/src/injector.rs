//! Matching hits against the plan, counting them, and carrying out the
//! fault that fires.
//!
//! [`hit`] is what an enabled `scr::fault_point!` calls (through scr's
//! hook, which wraps [`Injection`] into its own error type). It returns
//! only plain data so that this crate need not know scr's error types.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::log::{await_co_timed, report, trace, trace_path};
use crate::plan::{parse_plan, Action, ErrorKind, FaultPlan, FaultSpec};
use crate::procfs::{job_peers, kill_self, node_peers, sigkill, sigstop};
use crate::{ENV_NODE_NAME, ENV_PLAN, EXIT_BAD_PLAN};

/// An `error` fault that fired: the point should fail with this error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injection {
    /// Which hit of the point fired (1-based).
    pub hit: u64,
    /// The error injected.
    pub kind: ErrorKind,
}

/// Matches hits against a plan and counts them; the process-wide one
/// behind [`hit`] is built from the environment.
#[derive(Debug)]
pub struct Injector {
    plan: FaultPlan,
    env_rank: Option<u32>,
    node: Option<String>,
    hits: Mutex<HashMap<(String, Option<u32>), u64>>,
    /// Where every hit is traced ([`crate::ENV_TRACE`]), if anywhere.
    trace: Option<std::path::PathBuf>,
    /// When this runtime started: a power loss reverts files changed since.
    started: std::time::SystemTime,
}

impl Injector {
    /// An injector for `plan` in a process whose rank (from the launcher)
    /// is `env_rank` and whose node is `node`.
    pub fn new(plan: FaultPlan, env_rank: Option<u32>, node: Option<String>) -> Injector {
        Injector {
            plan,
            env_rank,
            node,
            hits: Mutex::new(HashMap::new()),
            trace: None,
            started: std::time::SystemTime::now(),
        }
    }

    /// Trace every point reached to `path` (one JSON line per hit), planned
    /// or not.
    pub fn with_trace(mut self, path: Option<std::path::PathBuf>) -> Injector {
        self.trace = path;
        self
    }

    /// Count a hit of `point` by `rank` (or the launcher's rank) and
    /// return the hit number and the fault that fires, if any. Points
    /// no fault names are not counted (nothing to count them for).
    pub fn check(&self, point: &str, rank: Option<u32>) -> Option<(u64, &FaultSpec)> {
        if self.trace.is_none() && !self.plan.faults.iter().any(|f| f.point == point) {
            return None;
        }
        let rank = rank.or(self.env_rank);
        let n = {
            // A poisoned lock only means another rank-thread panicked while
            // counting; the counts are still whole numbers.
            let mut hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
            let n = hits.entry((point.to_string(), rank)).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        if let Some(path) = &self.trace {
            trace(path, point, n, rank, self.node.as_deref());
        }
        let spec = self.plan.faults.iter().find(|f| {
            f.point == point
                && f.fires_on(n)
                && f.rank.is_none_or(|r| Some(r) == rank)
                && f.node
                    .as_ref()
                    .is_none_or(|want| Some(want) == self.node.as_ref())
        })?;
        Some((n, spec))
    }

    /// Hits of `point` by `rank` counted so far.
    pub fn hits(&self, point: &str, rank: Option<u32>) -> u64 {
        let hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
        hits.get(&(point.to_string(), rank.or(self.env_rank)))
            .copied()
            .unwrap_or(0)
    }

    /// Count a hit and carry out the fault that fires, if any: report it,
    /// then kill, exit, sleep, or return the error to inject.
    pub fn hit(&self, point: &str, rank: Option<u32>) -> Result<(), Injection> {
        let Some((n, spec)) = self.check(point, rank) else {
            return Ok(());
        };
        let rank = rank.or(self.env_rank);
        report(point, n, rank, self.node.as_deref(), &spec.action);
        match spec.action {
            Action::Kill => {
                await_co_timed(&self.plan, point, n);
                kill_self()
            }
            Action::KillNode => {
                if let Some(node) = &self.node {
                    node_peers(node).into_iter().for_each(sigkill);
                }
                kill_self()
            }
            Action::PowerLoss => {
                // The instant of the loss: nothing of the job runs on.
                let peers = job_peers();
                peers.iter().copied().for_each(sigstop);
                if let Some(dir) = crate::durable::dir() {
                    let r = crate::durable::power_loss(
                        &dir,
                        &crate::durable::roots(),
                        crate::durable::since(self.started),
                        crate::log::job_key().as_deref(),
                    );
                    eprintln!(
                        "scr fault: power loss: {} file(s) back to their last fsync, {} never synced emptied, {} rename(s) undone, {} new name(s) lost",
                        r.restored.len(),
                        r.emptied.len(),
                        r.unrenamed.len(),
                        r.unlinked.len()
                    );
                    for p in &r.unlinked {
                        eprintln!("scr fault: power loss: lost the name {}", p.display());
                    }
                }
                peers.into_iter().for_each(sigkill);
                kill_self()
            }
            Action::Exit { code } => std::process::exit(code),
            Action::Error { kind } => Err(Injection { hit: n, kind }),
            Action::Delay { ms } => {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(())
            }
        }
    }
}

/// The launcher's rank of this process, if a launcher set one.
fn env_rank() -> Option<u32> {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The process-wide injector, built on first use from `SCR_FAULT_PLAN`;
/// a plan that does not parse ends the process with [`EXIT_BAD_PLAN`].
fn global() -> &'static Injector {
    static GLOBAL: OnceLock<Injector> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let plan = match std::env::var(ENV_PLAN) {
            Err(_) => FaultPlan::default(),
            Ok(v) => parse_plan(&v).unwrap_or_else(|e| {
                eprintln!("scr fault: {e}; exiting with code {EXIT_BAD_PLAN}");
                std::process::exit(EXIT_BAD_PLAN)
            }),
        };
        let node = std::env::var(ENV_NODE_NAME).ok();
        Injector::new(plan, env_rank(), node).with_trace(trace_path())
    })
}

/// The body of an enabled injection point: count the hit of `point` by
/// `rank` (else the launcher's rank) against the plan in `SCR_FAULT_PLAN`
/// and carry out the fault that fires, if any.
pub fn hit(point: &str, rank: Option<u32>) -> Result<(), Injection> {
    global().hit(point, rank)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn nth_hit_fires_once_and_repeat_fires_from_then_on() {
        let plan = parse_plan("a#3=kill;b#2+=delay:1").expect("plan");
        let inj = Injector::new(plan, None, None);
        let fired: Vec<bool> = (0..5).map(|_| inj.check("a", None).is_some()).collect();
        assert_eq!(fired, [false, false, true, false, false]);
        let fired: Vec<bool> = (0..4).map(|_| inj.check("b", None).is_some()).collect();
        assert_eq!(fired, [false, true, true, true]);
        assert_eq!(inj.hits("a", None), 5);
        assert_eq!(inj.check("unnamed", None), None);
        assert_eq!(inj.hits("unnamed", None), 0);
    }

    #[test]
    fn rank_and_node_filters_and_per_rank_counts() {
        let plan = parse_plan("p#2@rank:1=kill;q@node:n1=kill;r@rank:4=kill").expect("plan");
        let inj = Injector::new(plan, Some(4), Some("n0".into()));
        assert!(inj.check("p", Some(0)).is_none());
        assert!(inj.check("p", Some(0)).is_none(), "rank 0 never fires");
        assert!(
            inj.check("p", Some(1)).is_none(),
            "rank 1 counts its own hits"
        );
        assert_eq!(inj.check("p", Some(1)).map(|(n, _)| n), Some(2));
        assert!(inj.check("q", None).is_none(), "node n1 only");
        assert!(inj.check("r", None).is_some(), "rank from the launcher env");
        assert!(inj.check("r", Some(3)).is_none(), "explicit rank wins");
    }

    #[test]
    fn concurrent_hits_fire_exactly_once() {
        let plan = parse_plan("c#500=error").expect("plan");
        let inj = Arc::new(Injector::new(plan, None, None));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let inj = Arc::clone(&inj);
                std::thread::spawn(move || {
                    (0..100).filter(|_| inj.check("c", None).is_some()).count()
                })
            })
            .collect();
        let fired: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert_eq!(fired, 1);
        assert_eq!(inj.hits("c", None), 800);
    }

    #[test]
    fn error_and_delay_faults_act_and_return_plain_data() {
        let plan = parse_plan("e#2=error:erofs;d=delay:1").expect("plan");
        let inj = Injector::new(plan, None, None);
        assert_eq!(inj.hit("e", Some(0)), Ok(()));
        assert_eq!(
            inj.hit("e", Some(0)),
            Err(Injection {
                hit: 2,
                kind: ErrorKind::Erofs
            })
        );
        assert_eq!(inj.hit("d", None), Ok(()));
        assert_eq!(inj.hit("never.planned", None), Ok(()));
    }

    #[test]
    fn a_trace_records_every_point_reached_planned_or_not() {
        let dir = std::env::temp_dir().join(format!("faultrt-trace-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let plan = parse_plan("b#2=delay:1").expect("plan");
        let inj = Injector::new(plan, Some(3), Some("n1".into())).with_trace(Some(dir.clone()));
        for p in ["a", "b", "a", "b"] {
            assert_eq!(inj.hit(p, None), Ok(()));
        }
        let text = std::fs::read_to_string(&dir).expect("trace");
        let _ = std::fs::remove_file(&dir);
        let got: Vec<(String, u64, u64, String)> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
            .map(|v| {
                (
                    v["point"].as_str().unwrap_or_default().to_string(),
                    v["hit"].as_u64().unwrap_or_default(),
                    v["rank"].as_u64().unwrap_or_default(),
                    v["node"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let want = |p: &str, n| (p.to_string(), n, 3, "n1".to_string());
        assert_eq!(
            got,
            [want("a", 1), want("b", 1), want("a", 2), want("b", 2)]
        );
        // Counting every point does not change when planned ones fire.
        assert_eq!(inj.hits("b", None), 2);
    }

    #[test]
    fn global_point_without_plan_env_is_ok() {
        // The test process has no SCR_FAULT_PLAN naming this point.
        assert_eq!(hit("test.never.planned", Some(0)), Ok(()));
    }
}
