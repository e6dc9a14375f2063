//! The nodes of the run loop: the storage checked on each (the checks and
//! the node choice are the library's, [`scr::runloop`]), the nodes of the
//! first launch, and the node choice as the validation takes it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::RunLoop;
use crate::health::{DownList, StorageCheck};

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
    /// The nodes the first launch starts on (and faults before it act on):
    /// the allocation's first `job_nodes`.
    pub(super) fn first_nodes(&self) -> Vec<String> {
        self.alloc.nodes[..self.alloc.job_nodes.min(self.alloc.nodes.len())].to_vec()
    }
}
