//! Steps 1 and 2 of the run loop: the node health checks before each
//! launch (which nodes are down, and why) and the choice of the next
//! launch's nodes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::RunLoop;
use crate::health::{DownList, StorageCheck};
use crate::runlog::RunLog;

/// The storage every node is checked for: the control and cache bases
/// named in `env` (default `/dev/shm`), with no capacity requirement.
pub fn default_storage(env: &BTreeMap<String, String>) -> Vec<StorageCheck> {
    let base = |k: &str| {
        env.get(k)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/dev/shm"))
    };
    let mut v = vec![StorageCheck {
        role: "control".into(),
        path: base("SCR_CNTL_BASE"),
        min_capacity_bytes: 0,
    }];
    let cache = base("SCR_CACHE_BASE");
    if cache != v[0].path {
        v.push(StorageCheck {
            role: "cache".into(),
            path: cache,
            min_capacity_bytes: 0,
        });
    }
    v
}

/// The nodes of the next launch: the library's choice
/// ([`scr::runloop::choose_nodes`]) with every place filled or none.
pub fn choose_nodes(
    all: &[String],
    previous: &[String],
    down: &DownList,
    need: usize,
) -> Option<Vec<String>> {
    scr::runloop::choose_nodes(all, previous, down, need, need)
}

impl RunLoop {
    /// The health checks before a launch ([`crate::health`];
    /// `SCR_EXCLUDE_NODES`; a node once down stays down): the nodes newly
    /// found down, with why, each also logged as a node failure.
    pub(super) fn health_checks(
        &self,
        down: &mut DownList,
        excluded: &[String],
        runlog: &RunLog,
    ) -> Vec<(String, String)> {
        let root_of = |n: &str| Some(self.alloc.node_root(n));
        let newly = down.update(&self.alloc.nodes, excluded, &root_of, &self.storage);
        let newly_down: Vec<(String, String)> = newly
            .iter()
            .filter_map(|n| {
                down.entries()
                    .find(|(d, _)| d == n)
                    .map(|(d, r)| (d.to_string(), r.to_string()))
            })
            .collect();
        for (node, reason) in &newly_down {
            runlog.node_fail(node, reason);
        }
        newly_down
    }

    /// The nodes the first launch starts on (and faults before it act on):
    /// the allocation's first `job_nodes`.
    pub(super) fn first_nodes(&self) -> Vec<String> {
        self.alloc.nodes[..self.alloc.job_nodes.min(self.alloc.nodes.len())].to_vec()
    }
}
