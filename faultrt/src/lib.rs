//! faultrt: the fault-injection runtime behind `scr`'s injection points.
//!
//! The library marks moments where a failure is interesting with
//! `scr::fault_point!("redundancy.encode", rank = r)?`. Without scr's cargo
//! feature `fault-injection` that is the constant `Ok(())` and this crate is
//! not even compiled; with it, each point calls [`hit`], which does the work
//! kept out of the production crate: reading the plan, counting hits,
//! matching faults, killing ranks and nodes, co-timing kills, writing the
//! fault log. `faultsim` uses the same plan types to write plans.
//!
//! The plan comes from `SCR_FAULT_PLAN` ([`ENV_PLAN`]), read once, on the
//! first point reached. Its value is one of:
//! - the compact form, entries separated by `;`:
//!   `POINT[#HIT[+]][@rank:R][@node:NAME]=ACTION`, e.g.
//!   `redundancy.encode#3@rank:2=kill; flush.file.copied#1+=delay:20`.
//!   `#HIT` is the 1-based count of times this process (and rank) reached
//!   the point, default 1; a trailing `+` fires on that hit and every later
//!   one. Actions: `kill`, `kill-node`, `exit:CODE`, `error[:KIND]` (KIND one
//!   of `eio` (default), `enospc`, `erofs`, `eacces`), `delay:MS`.
//! - inline JSON (starts with `{` or `[`) or the path of a JSON file (starts
//!   with `/` or `.`, or ends in `.json`): a [`FaultPlan`] such as
//!   `{"faults":[{"point":"redundancy.encode","hit":3,"rank":2,"action":"kill"}]}`,
//!   or just the array of faults.
//!
//! Matching ([`Injector`]): a fault with `rank` fires only on that rank (the
//! rank passed to the point, else `OMPI_COMM_WORLD_RANK`, `PMI_RANK` or
//! `PMIX_RANK`); one with `node` only on processes whose `SCR_NODE_NAME`
//! ([`ENV_NODE_NAME`]) is that node. Hits are counted per (point, rank)
//! under a mutex, so ranks that are threads count separately and concurrent
//! hits never double-fire a single `#N`.
//!
//! Actions:
//! - `kill`: SIGKILL to this process (every rank-thread in it dies too).
//! - `kill-node`: SIGKILL to every process of the same job on the same
//!   simulated node, then to this one. Peers are found in `/proc`
//!   ([`procfs::node_peers`]): same `SCR_NODE_NAME`, and the same job key
//!   (the first of `SCR_FAULT_JOB`, `PMIX_NAMESPACE`,
//!   `OMPI_MCA_ess_base_jobid`, `PMI_KVSNAME` set here; without any, the same
//!   parent process). Process groups do not work for this: OpenMPI puts
//!   every rank in its own group.
//! - `exit:CODE`: `exit(CODE)` without MPI_Finalize (as a crashing app would).
//! - `error:KIND`: [`hit`] returns [`Injection`], which scr's hook turns into
//!   its `Injected` error (an `io::Error` with the errno's kind).
//! - `delay:MS`: sleep, emulating slow I/O.
//!
//! Every firing is reported on stderr and, when `SCR_FAULT_LOG` names a
//! file, appended to it as one JSON line before acting ([`log`]), so the
//! harness knows the fault really happened.
//!
//! Kills planned for the same point and hit on different ranks are
//! *co-timed*: the plan means them to happen together (two ranks dying in
//! the same Start_output). Without care the first death tears the job down
//! before the other rank reaches its point, and the second fault never
//! fires. So a rank whose `kill` fires waits, at most [`CO_TIMED_WAIT`],
//! until the fault log shows every co-timed kill of its launch fired (lines
//! carry the job keys that are set), then dies. Without a log or a job key
//! there is no wait. An unreadable plan is reported on stderr and the
//! process exits with [`EXIT_BAD_PLAN`]: a test whose fault silently does
//! not fire would pass for the wrong reason.
#![deny(missing_docs)]

pub mod durable;
pub mod injector;
pub mod log;
pub mod plan;
pub mod procfs;

pub use injector::{hit, Injection, Injector};
pub use plan::{
    parse_compact, parse_json, parse_plan, Action, EntryError, ErrorKind, FaultPlan, FaultSpec,
    PlanError,
};

/// Environment variable holding the fault plan (compact form, JSON, or a JSON file path).
pub const ENV_PLAN: &str = "SCR_FAULT_PLAN";
/// Environment variable naming a file to which every fired fault is appended as a JSON line.
pub const ENV_LOG: &str = "SCR_FAULT_LOG";
/// Environment variable that, when set, scopes `kill-node` to processes with the same value.
pub const ENV_JOB: &str = "SCR_FAULT_JOB";
/// When set, every injection point reached is appended to this file as one
/// JSON line (`point`, `hit`, `rank`, `node`, `pid`, `job`), whether or not
/// the plan names it: the crash-point sweep (`scr-harness sweep`) learns
/// from a clean run which points a job passes, and how often, before it
/// kills at each in turn.
pub const ENV_TRACE: &str = "SCR_FAULT_TRACE";
/// Environment variable naming a process's (simulated) node; the same
/// variable `scr` reads for its node identity (`scr::storage::dirs::ENV_NODE_NAME`,
/// which a test of scr's hook checks against this one).
pub const ENV_NODE_NAME: &str = "SCR_NODE_NAME";
/// Exit code of a process whose `SCR_FAULT_PLAN` cannot be parsed.
pub const EXIT_BAD_PLAN: i32 = 86;
/// Largest number of faults in one plan (a bound, not a practical limit).
pub const MAX_FAULTS: usize = 4096;
/// Longest a rank whose `kill` fired waits for the co-timed kills of other
/// ranks to fire (crate documentation).
pub const CO_TIMED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
