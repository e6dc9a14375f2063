//! Step 6 of the run loop: the next allocation — fresh nodes, the same
//! prefix — and how its restart is judged against the prefix index.

use std::fs;
use std::path::Path;

use faultsim::plan::Plan;
use scr::records::Record as _;
use scr::runloop::Hooks as _;

use super::hooks::{SimulatedNodes, Testbed};
use super::{LaunchRecord, RunLoop};
use crate::outcome::{Class, Token};

impl RunLoop {
    /// The next allocation (module documentation, step 6): every node tree
    /// set aside, fresh ones made, the application launched once with no
    /// faults; judged against the newest checkpoint the prefix index lists
    /// as COMPLETE.
    pub(super) fn next_launch(&self, completed: &[u64], errors: &mut Vec<String>) -> LaunchRecord {
        let mut external = self.fresh_node_trees(errors);
        let newest = newest_complete_checkpoint(&self.alloc.prefix());
        external.push(match newest {
            Some(n) => format!("the prefix index lists ckpt.{n} as the newest COMPLETE checkpoint"),
            None => "the prefix index lists no COMPLETE checkpoint".into(),
        });
        let mut next = self.clone();
        next.plan = Plan {
            name: None,
            seed: None,
            faults: Vec::new(),
        };
        next.halts.clear();
        next.next_allocation = false;
        next.app.first_args = next.app.later_args.clone();
        // A new allocation is a new job.
        let job = self.env.get("SCR_JOB_ID").cloned().unwrap_or_default();
        let next_job = job
            .parse::<u64>()
            .map_or_else(|_| format!("{job}next"), |j| (j + 1).to_string());
        next.env.insert("SCR_JOB_ID".into(), next_job);
        let nodes = self.first_nodes();
        let mut rec = next.launch_once(nodes, external, completed, errors);
        if let Some(why) = next_rollback(&rec, newest) {
            rec.token = Class::SilentCorruption.name().to_string();
            rec.why = Some(why);
        }
        rec
    }

    /// One launch of the library's loop ([`scr::runloop::RunLoop::launch_one`])
    /// on `nodes` with the harness's hooks, outside the loop: launch 1 of a
    /// new allocation, after what the harness did in `external`, judged
    /// against the checkpoints `completed` before it.
    fn launch_once(
        &self,
        nodes: Vec<String>,
        external: Vec<String>,
        completed: &[u64],
        errors: &mut Vec<String>,
    ) -> LaunchRecord {
        let launcher = self.launcher();
        let mut check = SimulatedNodes {
            alloc: &self.alloc,
            storage: &self.storage,
        };
        let mut testbed = Testbed::new(self, completed.to_vec());
        testbed.out.external = external;
        let launched = scr::runloop::RunLoop {
            spec: self.loop_spec(),
            launcher: &launcher,
            check: &mut check,
            hooks: &mut testbed,
        }
        .launch_one(1, &nodes, Vec::new());
        testbed.after_launch(&launched);
        errors.append(&mut testbed.out.errors);
        let rec = testbed.kept.launches.pop();
        rec.expect("after_launch records every launch")
    }

    /// A new allocation's nodes: every node tree of the first set aside
    /// (kept for inspection), fresh ones with empty storage made. Returns
    /// what was done.
    fn fresh_node_trees(&self, errors: &mut Vec<String>) -> Vec<String> {
        let mut external = Vec::new();
        let nodes_dir = self.alloc.root.join("nodes");
        let old = self.alloc.root.join("nodes.first-allocation");
        if nodes_dir.exists() {
            let _ = fs::remove_dir_all(&old);
            match fs::rename(&nodes_dir, &old) {
                Ok(()) => external.push(format!(
                    "new allocation: the first allocation's node trees moved to {}",
                    old.display()
                )),
                Err(e) => errors.push(format!(
                    "next allocation: moving {} aside: {e}",
                    nodes_dir.display()
                )),
            }
        }
        for n in &self.alloc.nodes {
            for st in &self.storage {
                let dir = crate::health::node_path(Some(&self.alloc.node_root(n)), &st.path);
                if let Err(e) = fs::create_dir_all(&dir) {
                    errors.push(format!("next allocation: {}: {e}", dir.display()));
                }
            }
        }
        external
    }
}

/// The checkpoint id of the newest dataset the prefix index lists as
/// COMPLETE (from its directory or name, `ckpt.<N>`, else the dataset id).
pub fn newest_complete_checkpoint(prefix: &Path) -> Option<u64> {
    let idx = scr::records::Index::read_file(scr::records::index::index_path(prefix)).ok()?;
    let (id, dir) = idx.most_recent_complete(None)?;
    let from_name = |s: &str| s.strip_prefix("ckpt.")?.parse::<u64>().ok();
    let name = idx
        .datasets
        .get(&id)
        .and_then(|m| m.get(dir))
        .and_then(|e| e.dataset.as_ref())
        .and_then(|d| d.name.clone());
    Path::new(dir)
        .file_name()
        .and_then(|f| from_name(&f.to_string_lossy()))
        .or_else(|| name.as_deref().and_then(from_name))
        .or_else(|| u64::try_from(id).ok())
}

/// Why the next allocation's restart is a silent roll-back: the prefix
/// index lists `newest` as COMPLETE (nothing else is there to excuse an
/// older restart: no fault happens in the next allocation), yet it
/// restarted older, or not at all although init finished.
fn next_rollback(rec: &LaunchRecord, newest: Option<u64>) -> Option<String> {
    let want = newest?;
    let token: Token = rec.token.parse().ok()?;
    if token.class.never() {
        return None;
    }
    match (token.class.restarted(), token.ckpt) {
        (true, Some(got)) if got < want => Some(format!(
            "the prefix index lists ckpt.{want} as COMPLETE but the next allocation restarted from ckpt.{got}"
        )),
        (false, _) if matches!(token.class, Class::Scratch | Class::Loss) => Some(format!(
            "the prefix index lists ckpt.{want} as COMPLETE but the next allocation restarted from nothing"
        )),
        _ => None,
    }
}
