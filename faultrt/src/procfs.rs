//! Processes as `/proc` shows them: environment, parent, and the peers a
//! `kill-node` fault takes down with it.
//!
//! A simulated node is a set of processes that share `SCR_NODE_NAME`, so
//! finding a node's processes means reading every process's environment.
//! faultsim's harness-side `kill_node` uses the same readers.

use crate::durable::ENV_SHARES_POWER;
use crate::log::JOB_KEYS;
use crate::ENV_NODE_NAME;

/// The environment of process `pid` as `(name, value)` pairs, or `None`
/// when it cannot be read (the process exited, or belongs to another user).
/// Entries that are not UTF-8 or have no `=` are skipped.
pub fn environ_of(pid: i32) -> Option<Vec<(String, String)>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|kv| {
                let s = std::str::from_utf8(kv).ok()?;
                let (k, v) = s.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

/// The parent of process `pid`, or `None` when `/proc` does not show it.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 4, after the parenthesised command name (which may hold spaces).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Every process id listed in `/proc` except this process's own, in
/// directory order (empty when `/proc` cannot be read).
pub fn other_pids() -> Vec<i32> {
    let me = i32::try_from(std::process::id()).ok();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| Some(*pid) != me)
        .collect()
}

/// Other processes of this job on `node`: same `SCR_NODE_NAME`, and the
/// same value of the first of [`JOB_KEYS`] set in this process, or without
/// any, the same parent (crate documentation, `kill-node`).
pub fn node_peers(node: &str) -> Vec<i32> {
    let job = JOB_KEYS
        .iter()
        .find_map(|k| Some((*k, std::env::var(k).ok()?)));
    let my_parent = i32::try_from(std::process::id()).ok().and_then(parent_of);
    other_pids()
        .into_iter()
        .filter(|&pid| {
            let Some(env) = environ_of(pid) else {
                return false;
            };
            let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str());
            if get(ENV_NODE_NAME) != Some(node) {
                return false;
            }
            match &job {
                Some((k, v)) => get(k) == Some(v.as_str()),
                None => my_parent.is_some() && parent_of(pid) == my_parent,
            }
        })
        .collect()
}

/// Every other process of this job on any node: with a node name
/// (`SCR_NODE_NAME`: the launcher and its daemons are not on a node), or
/// marked as powered with the nodes ([`ENV_SHARES_POWER`]), and the same
/// value of the first of [`JOB_KEYS`] set in this process (none without a
/// job key).
pub fn job_peers() -> Vec<i32> {
    let Some((k, v)) = JOB_KEYS
        .iter()
        .find_map(|k| Some((*k, std::env::var(k).ok()?)))
    else {
        return Vec::new();
    };
    peers_in_job(k, &v)
}

/// Other processes whose job key `k` is `v`, on a node or sharing the
/// nodes' power ([`job_peers`]).
fn peers_in_job(k: &str, v: &str) -> Vec<i32> {
    other_pids()
        .into_iter()
        .filter(|&pid| {
            environ_of(pid).is_some_and(|env| {
                env.iter().any(|(ek, ev)| ek == k && *ev == v)
                    && env
                        .iter()
                        .any(|(ek, _)| ek == ENV_NODE_NAME || ek == ENV_SHARES_POWER)
            })
        })
        .collect()
}

/// Stop process `pid` (SIGSTOP); it does nothing more until killed.
pub fn sigstop(pid: i32) {
    // SAFETY: kill(2) with a pid read from /proc; no memory involved.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
}

/// SIGKILL process `pid` (a vanished process is not an error here: the
/// fault's aim, that it is gone, is met).
pub fn sigkill(pid: i32) {
    // SAFETY: kill(2) with a pid read from /proc; no memory involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// SIGKILL this process; does not return.
pub fn kill_self() -> ! {
    // SAFETY: kill(2) on our own pid.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    // SIGKILL cannot be caught or ignored, so this is not reached; abort
    // keeps the signature honest should the kernel ever refuse.
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_seen_through_proc() {
        let me = i32::try_from(std::process::id()).expect("pid fits i32");
        let env = environ_of(me).expect("own environ readable");
        // The test runner sets PATH; compare with what std sees.
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        assert_eq!(path, std::env::var("PATH").ok());
        let parent = parent_of(me).expect("own stat readable");
        assert_eq!(
            Some(parent as u32),
            Some(std::os::unix::process::parent_id())
        );
        assert!(!other_pids().contains(&me), "own pid excluded");
        assert!(other_pids().contains(&parent), "parent listed");
    }

    /// A power loss takes the job's processes on a node and the one
    /// marked as sharing their power (the postrun driver), never the
    /// launcher (no node) nor another job's processes.
    #[test]
    fn job_peers_are_on_a_node_or_share_its_power() {
        let job = format!("faultrt-test-{}", std::process::id());
        let spawn = |vars: &[(&str, &str)]| {
            let mut c = std::process::Command::new("sleep");
            c.arg("30")
                .env_remove(ENV_NODE_NAME)
                .env_remove(ENV_SHARES_POWER);
            for (k, v) in vars {
                c.env(k, v);
            }
            c.spawn().expect("spawn sleep")
        };
        let key = crate::ENV_JOB;
        let mut on_node = spawn(&[(key, &job), (ENV_NODE_NAME, "n0")]);
        let mut driver = spawn(&[(key, &job), (ENV_SHARES_POWER, "1")]);
        let mut launcher = spawn(&[(key, &job)]);
        let other = format!("{job}-other");
        let mut elsewhere = spawn(&[(key, &other), (ENV_NODE_NAME, "n0")]);
        let pid = |c: &std::process::Child| i32::try_from(c.id()).expect("pid fits i32");
        // The children's environments are readable once exec'd.
        let want = [pid(&on_node), pid(&driver)];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut got = peers_in_job(key, &job);
        while got.len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            got = peers_in_job(key, &job);
        }
        got.sort_unstable();
        let mut want = want.to_vec();
        want.sort_unstable();
        for c in [&mut on_node, &mut driver, &mut launcher, &mut elsewhere] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert_eq!(got, want);
    }

    #[test]
    fn a_node_no_process_runs_on_has_no_peers() {
        assert!(node_peers("faultrt-test-node-that-does-not-exist").is_empty());
    }
}
