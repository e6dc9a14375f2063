//! The fault log (`SCR_FAULT_LOG`) and the co-timing of kills through it.
//!
//! Every firing is one JSON line, written before the fault acts, so the
//! harness can tell a fault that fired from one that never came. The same
//! lines let a rank whose `kill` fired wait for the other ranks whose kills
//! the plan co-timed with it (crate documentation).

use std::io::Write;
use std::time::{Duration, Instant};

use crate::plan::{Action, FaultPlan};
use crate::{CO_TIMED_WAIT, ENV_JOB, ENV_LOG, ENV_TRACE};

/// Variables naming this process's job, in the order `kill-node` tries them.
pub const JOB_KEYS: [&str; 4] = [
    ENV_JOB,
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "PMI_KVSNAME",
];

/// How often a co-timed kill looks at the log again while it waits.
const CO_TIMED_POLL: Duration = Duration::from_millis(5);

/// `NAME=value` of every one of [`JOB_KEYS`] set here, `,`-joined: the
/// harness's allocation and the launcher's job together tell one launch
/// from the next. `None` when none is set.
pub fn job_key() -> Option<String> {
    let set: Vec<String> = JOB_KEYS
        .iter()
        .filter_map(|k| Some(format!("{k}={}", std::env::var(k).ok()?)))
        .collect();
    (!set.is_empty()).then(|| set.join(","))
}

/// Report a firing on stderr and append it to the fault log when
/// `SCR_FAULT_LOG` is set. A log that cannot be written does not stop the
/// fault (a kill must still happen), so that error is only reported.
pub fn report(point: &str, n: u64, rank: Option<u32>, node: Option<&str>, action: &Action) {
    let line = serde_json::json!({
        "point": point, "hit": n, "rank": rank, "node": node,
        "action": action.to_string(), "pid": std::process::id(),
        "job": job_key(),
    });
    eprintln!("scr fault: {line}");
    let Some(path) = std::env::var_os(ENV_LOG) else {
        return;
    };
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    // One write of a short line with O_APPEND: lines from several ranks
    // never interleave.
    if let Err(e) = opened.and_then(|mut f| f.write_all(format!("{line}\n").as_bytes())) {
        eprintln!(
            "scr fault: cannot append to {}: {e}",
            path.to_string_lossy()
        );
    }
}

/// The trace line of hit `n` of `point` (see [`ENV_TRACE`]).
pub fn trace_line(point: &str, n: u64, rank: Option<u32>, node: Option<&str>) -> String {
    let line = serde_json::json!({
        "point": point, "hit": n, "rank": rank, "node": node,
        "pid": std::process::id(), "job": job_key(),
    });
    format!("{line}\n")
}

/// Append hit `n` of `point` to the trace file `path`, one `write` of one
/// line with `O_APPEND`, so the lines of concurrent ranks do not interleave.
pub fn trace(path: &std::path::Path, point: &str, n: u64, rank: Option<u32>, node: Option<&str>) {
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    let line = trace_line(point, n, rank, node);
    if let Err(e) = opened.and_then(|mut f| f.write_all(line.as_bytes())) {
        eprintln!(
            "scr fault: cannot append to the trace {}: {e}",
            path.display()
        );
    }
}

/// The trace file, if [`ENV_TRACE`] is set.
pub fn trace_path() -> Option<std::path::PathBuf> {
    std::env::var_os(ENV_TRACE).map(std::path::PathBuf::from)
}

/// Kills a fault log must show before a co-timed kill at `point`'s hit `n`
/// goes ahead: the plan's non-repeating `kill` faults at that point and hit
/// that name a rank. Fewer than two: nothing to wait for.
pub fn co_timed_kills(plan: &FaultPlan, point: &str, n: u64) -> usize {
    plan.faults
        .iter()
        .filter(|f| {
            f.point == point
                && f.hit == n
                && !f.repeat
                && f.rank.is_some()
                && f.action == Action::Kill
        })
        .count()
}

/// Ranks of job `job` whose `kill` at `point`'s hit `n` a fault log's text
/// shows fired (distinct ranks; partial or foreign lines are skipped).
pub fn kills_logged(log: &str, point: &str, n: u64, job: &str) -> usize {
    let mut ranks: Vec<u64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["point"] == point && v["hit"] == n && v["job"] == job && v["action"] == "kill"
        })
        .filter_map(|v| v["rank"].as_u64())
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks.len()
}

/// Wait, at most [`CO_TIMED_WAIT`], until the fault log shows every kill
/// co-timed with this one fired in this job. No wait without a log, a job
/// key, or a second co-timed kill.
pub fn await_co_timed(plan: &FaultPlan, point: &str, n: u64) {
    let want = co_timed_kills(plan, point, n);
    if want < 2 {
        return;
    }
    let (Some(path), Some(job)) = (std::env::var_os(ENV_LOG), job_key()) else {
        return;
    };
    let deadline = Instant::now() + CO_TIMED_WAIT;
    loop {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        if kills_logged(&log, point, n, &job) >= want {
            return;
        }
        if Instant::now() >= deadline {
            eprintln!(
                "scr fault: {point}#{n}: not every co-timed kill fired within {} s; dying anyway",
                CO_TIMED_WAIT.as_secs()
            );
            return;
        }
        std::thread::sleep(CO_TIMED_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::parse_plan;

    #[test]
    fn co_timed_kills_wait_for_each_other_in_the_log() {
        let plan = parse_plan(
            "api.start_output#2@rank:2=kill; api.start_output#2@rank:7=kill; \
             api.start_output#3@rank:1=kill; api.start_output#2+@rank:4=kill; \
             x#1@rank:1=kill",
        )
        .expect("plan");
        assert_eq!(co_timed_kills(&plan, "api.start_output", 2), 2);
        assert_eq!(co_timed_kills(&plan, "api.start_output", 3), 1);
        assert_eq!(co_timed_kills(&plan, "x", 1), 1);
        let line = |rank: u32, job: &str, hit: u64| {
            format!(
                "{{\"point\":\"api.start_output\",\"hit\":{hit},\"rank\":{rank},\"node\":\"n1\",\"action\":\"kill\",\"pid\":1,\"job\":\"{job}\"}}\n"
            )
        };
        let j = "PMIX_NAMESPACE=a";
        // An earlier launch's line (another job), another hit, a duplicate
        // and a partial line do not count.
        let log = format!(
            "{}{}{}{}{{\"point\":\"api.st",
            line(7, "PMIX_NAMESPACE=old", 2),
            line(2, j, 2),
            line(2, j, 3),
            line(2, j, 2),
        );
        assert_eq!(kills_logged(&log, "api.start_output", 2, j), 1);
        let log = format!("{log}\n{}", line(7, j, 2));
        assert_eq!(kills_logged(&log, "api.start_output", 2, j), 2);
    }
}
