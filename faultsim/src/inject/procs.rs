//! Processes: SIGKILL one, a group, or every process of a simulated node.
//!
//! Reading `/proc` is the fault runtime's ([`crate::runtime::procfs`]):
//! the harness and a `kill-node` fault inside the job find a node's
//! processes the same way.

use std::io;
use std::path::PathBuf;

use super::{InjectError, Record};
use crate::runtime::procfs::{environ_of, other_pids, parent_of};
use crate::runtime::ENV_NODE_NAME;

/// Most parent links [`descends_from`] follows (deeper trees are not a
/// launcher's children).
const MAX_ANCESTORS: usize = 64;

fn send(pid: i32, signal: i32) -> Result<(), InjectError> {
    // SAFETY: kill(2) has no memory effects.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(InjectError::Signal {
            pid,
            signal,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// SIGKILL one process.
pub fn kill_pid(pid: u32) -> Result<Record, InjectError> {
    let pid = pid_i32(pid)?;
    send(pid, libc::SIGKILL)?;
    Ok(Record::Signalled {
        pids: vec![pid],
        signal: libc::SIGKILL,
    })
}

/// SIGKILL a whole process group (e.g. a launcher started with its own group).
pub fn kill_group(pgid: u32) -> Result<Record, InjectError> {
    let pgid = pid_i32(pgid)?;
    send(-pgid, libc::SIGKILL)?;
    Ok(Record::Signalled {
        pids: vec![-pgid],
        signal: libc::SIGKILL,
    })
}

fn pid_i32(pid: u32) -> Result<i32, InjectError> {
    i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| InjectError::Refused {
            path: PathBuf::from(format!("/proc/{pid}")),
            reason: "not a pid that may be signalled".into(),
        })
}

fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut p = pid;
    for _ in 0..MAX_ANCESTORS {
        match parent_of(p) {
            Some(q) if q == ancestor => return true,
            Some(q) if q > 1 => p = q,
            _ => return false,
        }
    }
    false
}

/// The processes whose environment has `SCR_NODE_NAME=node`, limited to
/// descendants of `within` (the launcher's pid) when given, sorted.
pub fn node_processes(node: &str, within: Option<u32>) -> Vec<i32> {
    let within = within.and_then(|w| i32::try_from(w).ok());
    let mut pids: Vec<i32> = other_pids()
        .into_iter()
        .filter(|&pid| {
            environ_of(pid).is_some_and(|env| {
                env.iter()
                    .any(|(k, v)| k == ENV_NODE_NAME && v.as_str() == node)
            })
        })
        .filter(|&pid| within.is_none_or(|w| descends_from(pid, w)))
        .collect();
    pids.sort_unstable();
    pids
}

/// Kill a simulated node's processes: SIGKILL every process of
/// [`node_processes`]. Processes that exit meanwhile are skipped.
pub fn kill_node(node: &str, within: Option<u32>) -> Result<Record, InjectError> {
    let mut pids = Vec::new();
    for pid in node_processes(node, within) {
        match send(pid, libc::SIGKILL) {
            Ok(()) => pids.push(pid),
            Err(InjectError::Signal { source, .. })
                if source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Record::Signalled {
        pids,
        signal: libc::SIGKILL,
    })
}
