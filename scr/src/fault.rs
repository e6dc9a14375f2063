//! Fault-injection points (the testbed's hooks inside the library).
//!
//! The library marks moments where a failure is interesting with
//! [`fault_point!`](crate::fault_point): `scr::fault_point!("xor.encode.chunk")?`,
//! or `scr::fault_point!("xor.encode.chunk", rank = r)?` when the caller knows
//! its rank (the thread communicator runs several ranks in one process). The
//! macro evaluates to `Result<(), Injected>`; `Injected` converts into an
//! `io::Error`, so I/O code propagates an injected error like a real one.
//!
//! **Without the cargo feature `fault-injection` (the default) the macro
//! expands to the constant `Ok(())`**: the point name is a literal that is
//! dropped, the rank expression is never evaluated, nothing is counted, no
//! symbol or string reaches the binary. `ci/tests.d/fault-points-free.sh`
//! checks this on a release build (strings, symbols, and identical machine
//! code for a loop with and without a point).
//!
//! With the feature, the plan comes from `SCR_FAULT_PLAN` ([`ENV_PLAN`]),
//! read once on the first point reached. Its value is one of:
//! - the compact form, entries separated by `;`:
//!   `POINT[#HIT[+]][@rank:R][@node:NAME]=ACTION`, e.g.
//!   `xor.encode.chunk#3@rank:2=kill; flush.file.copied#1+=delay:20`.
//!   `#HIT` is the 1-based count of times this process (and rank) reached
//!   the point, default 1; a trailing `+` fires on that hit and every later
//!   one. Actions: `kill`, `kill-node`, `exit:CODE`, `error[:KIND]` (KIND one
//!   of `eio` (default), `enospc`, `erofs`, `eacces`), `delay:MS`.
//! - inline JSON (starts with `{` or `[`) or the path of a JSON file (starts
//!   with `/` or `.`, or ends in `.json`): a [`FaultPlan`] such as
//!   `{"faults":[{"point":"xor.encode.chunk","hit":3,"rank":2,"action":"kill"}]}`,
//!   or just the array of faults.
//!
//! Matching: a fault with `rank` fires only on that rank (the rank passed to
//! the macro, else `OMPI_COMM_WORLD_RANK`, `PMI_RANK` or `PMIX_RANK`); one
//! with `node` only on processes whose `SCR_NODE_NAME` is that node. Hits are
//! counted per (point, rank) under a mutex, so ranks that are threads count
//! separately and concurrent hits never double-fire a single `#N`.
//!
//! Actions:
//! - `kill`: SIGKILL to this process (every rank-thread in it dies too).
//! - `kill-node`: SIGKILL to every process of the same job on the same
//!   simulated node, then to this one. Peers are found in `/proc`: same
//!   `SCR_NODE_NAME`, and the same job key (the first of `SCR_FAULT_JOB`,
//!   `PMIX_NAMESPACE`, `OMPI_MCA_ess_base_jobid`, `PMI_KVSNAME` set here;
//!   without any, the same parent process). Process groups do not work for
//!   this: OpenMPI puts every rank in its own group.
//! - `exit:CODE`: `exit(CODE)` without MPI_Finalize (as a crashing app would).
//! - `error:KIND`: the macro returns `Err(Injected)`.
//! - `delay:MS`: sleep, emulating slow I/O.
//!
//! Every firing is reported on stderr and, when `SCR_FAULT_LOG` names a
//! file, appended to it as one JSON line before acting, so the harness knows
//! the fault really happened.
//!
//! Kills planned for the same point and hit on different ranks are
//! *co-timed*: the plan means them to happen together (two ranks dying in
//! the same Start_output). Without care the first death tears the job down
//! before the other rank reaches its point, and the second fault never
//! fires. So a rank whose `kill` fires waits, at most `CO_TIMED_WAIT`,
//! until the fault log shows every co-timed kill of its launch fired (lines
//! carry the job keys of `kill-node` that are set), then dies. Without a log or a job
//! key there is no wait. An unreadable plan is reported on stderr and
//! the process exits with [`EXIT_BAD_PLAN`]: a test whose fault silently does
//! not fire would pass for the wrong reason.

use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};

/// Environment variable holding the fault plan (compact form, JSON, or a JSON file path).
pub const ENV_PLAN: &str = "SCR_FAULT_PLAN";
/// Environment variable naming a file to which every fired fault is appended as a JSON line.
pub const ENV_LOG: &str = "SCR_FAULT_LOG";
/// Environment variable that, when set, scopes `kill-node` to processes with the same value.
pub const ENV_JOB: &str = "SCR_FAULT_JOB";
/// Exit code of a process whose `SCR_FAULT_PLAN` cannot be parsed.
pub const EXIT_BAD_PLAN: i32 = 86;
/// Largest number of faults in one plan (a bound, not a practical limit).
pub const MAX_FAULTS: usize = 4096;
#[cfg(feature = "fault-injection")]
/// Longest a rank whose `kill` fired waits for the co-timed kills of other
/// ranks to fire (module documentation).
pub const CO_TIMED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[cfg(feature = "fault-injection")]
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

#[cfg(feature = "fault-injection")]
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

/// The value of a disabled injection point; what the macro expands to
/// without the `fault-injection` feature.
pub const DISABLED: Result<(), Injected> = Ok(());

/// An injection point, compiled in only with the `fault-injection` feature.
///
/// `fault_point!("name")` or `fault_point!("name", rank = expr)`; evaluates to
/// `Result<(), Injected>`. See the [module documentation](crate::fault).
#[cfg(feature = "fault-injection")]
#[macro_export]
macro_rules! fault_point {
    ($point:literal $(,)?) => {
        $crate::fault::hit($point, ::core::option::Option::None)
    };
    ($point:literal, rank = $rank:expr $(,)?) => {
        $crate::fault::hit($point, ::core::option::Option::Some($rank))
    };
}

/// An injection point, compiled in only with the `fault-injection` feature.
///
/// Without the feature (this build) it is the constant `Ok(())`: the name is
/// dropped and the rank expression is not evaluated.
#[cfg(not(feature = "fault-injection"))]
#[macro_export]
macro_rules! fault_point {
    ($point:literal $(,)?) => {
        $crate::fault::DISABLED
    };
    ($point:literal, rank = $rank:expr $(,)?) => {{
        // Typechecks the rank expression (no unused-variable warnings in the
        // caller) without evaluating it: the closure is never called.
        let _ = || -> u32 { $rank };
        $crate::fault::DISABLED
    }};
}

/// Which error an `error` fault injects (the errno it stands for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ErrorKind {
    /// EIO: the device failed.
    #[default]
    Eio,
    /// ENOSPC: the file system is full.
    Enospc,
    /// EROFS: the file system is read-only.
    Erofs,
    /// EACCES: permission denied.
    Eacces,
}

impl ErrorKind {
    /// The errno this kind stands for.
    pub fn errno(self) -> i32 {
        match self {
            ErrorKind::Eio => libc::EIO,
            ErrorKind::Enospc => libc::ENOSPC,
            ErrorKind::Erofs => libc::EROFS,
            ErrorKind::Eacces => libc::EACCES,
        }
    }

    /// The name used in plans (`eio`, `enospc`, `erofs`, `eacces`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Eio => "eio",
            ErrorKind::Enospc => "enospc",
            ErrorKind::Erofs => "erofs",
            ErrorKind::Eacces => "eacces",
        }
    }

    fn from_name(name: &str) -> Option<ErrorKind> {
        [
            ErrorKind::Eio,
            ErrorKind::Enospc,
            ErrorKind::Erofs,
            ErrorKind::Eacces,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// What happens when a fault fires.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Action {
    /// SIGKILL this process.
    Kill,
    /// SIGKILL every process of this job on this simulated node, this one last.
    KillNode,
    /// Exit with this code, without finalizing.
    Exit {
        /// The exit code.
        code: i32,
    },
    /// The injection point returns an error.
    Error {
        /// Which error.
        #[serde(default)]
        kind: ErrorKind,
    },
    /// Sleep (slow I/O).
    Delay {
        /// Milliseconds to sleep.
        ms: u64,
    },
}

impl fmt::Display for Action {
    /// The compact form (`kill`, `exit:3`, `error:enospc`, `delay:20`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Kill => f.write_str("kill"),
            Action::KillNode => f.write_str("kill-node"),
            Action::Exit { code } => write!(f, "exit:{code}"),
            Action::Error { kind } => write!(f, "error:{}", kind.name()),
            Action::Delay { ms } => write!(f, "delay:{ms}"),
        }
    }
}

fn default_hit() -> u64 {
    1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One fault of a plan: where, on which hit, on which rank/node, and what.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FaultSpec {
    /// Injection point name, e.g. `xor.encode.chunk`.
    pub point: String,
    /// 1-based hit count at which the fault fires.
    #[serde(default = "default_hit")]
    pub hit: u64,
    /// Fire on `hit` and on every later hit, not only once.
    #[serde(default, skip_serializing_if = "is_false")]
    pub repeat: bool,
    /// Only on this rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Only on processes of this (simulated) node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

impl FaultSpec {
    /// True when this fault fires on hit number `hit` (1-based).
    pub fn fires_on(&self, hit: u64) -> bool {
        if self.repeat {
            hit >= self.hit
        } else {
            hit == self.hit
        }
    }
}

impl fmt::Display for FaultSpec {
    /// The compact form of one entry; [`parse_plan`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.point, self.hit)?;
        if self.repeat {
            f.write_str("+")?;
        }
        if let Some(rank) = self.rank {
            write!(f, "@rank:{rank}")?;
        }
        if let Some(node) = &self.node {
            write!(f, "@node:{node}")?;
        }
        write!(f, "={}", self.action)
    }
}

/// A list of faults, as read from `SCR_FAULT_PLAN`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FaultPlan {
    /// The faults, checked in order; the first match fires.
    pub faults: Vec<FaultSpec>,
}

impl fmt::Display for FaultPlan {
    /// The compact form, entries joined by `;`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, spec) in self.faults.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{spec}")?;
        }
        Ok(())
    }
}

/// Why a fault plan could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// An entry of the compact form is malformed.
    #[error("{ENV_PLAN} entry {index} `{entry}`: {reason} (form: POINT[#HIT[+]][@rank:R][@node:NAME]=kill|kill-node|exit:CODE|error[:eio|enospc|erofs|eacces]|delay:MS)")]
    Syntax {
        /// 0-based entry index.
        index: usize,
        /// The entry text.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// The JSON form does not parse.
    #[error("{ENV_PLAN}: bad JSON plan{}: {source}", path.as_ref().map(|p| format!(" in {p}")).unwrap_or_default())]
    Json {
        /// The file, when the plan came from one.
        path: Option<String>,
        /// The parser's error (with line and column).
        source: serde_json::Error,
    },
    /// The plan file cannot be read.
    #[error("{ENV_PLAN}: cannot read plan file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// A fault in a JSON plan has an invalid field.
    #[error("{ENV_PLAN}: fault {index}: {reason}")]
    Invalid {
        /// 0-based fault index.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// More faults than [`MAX_FAULTS`].
    #[error("{ENV_PLAN}: {count} faults, at most {MAX_FAULTS} are allowed")]
    TooMany {
        /// How many there were.
        count: usize,
    },
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parse a plan in any of the forms `SCR_FAULT_PLAN` accepts (reads the
/// file for the path form). An empty value is an empty plan.
pub fn parse_plan(value: &str) -> Result<FaultPlan, PlanError> {
    let v = value.trim();
    if v.starts_with('{') || v.starts_with('[') {
        return parse_json(v, None);
    }
    if v.starts_with('/') || v.starts_with('.') || v.ends_with(".json") {
        let text = std::fs::read_to_string(v).map_err(|source| PlanError::Read {
            path: v.to_string(),
            source,
        })?;
        return parse_json(&text, Some(v));
    }
    parse_compact(v)
}

/// Parse the JSON form: a [`FaultPlan`] object or an array of [`FaultSpec`].
pub fn parse_json(text: &str, path: Option<&str>) -> Result<FaultPlan, PlanError> {
    let json_err = |source| PlanError::Json {
        path: path.map(str::to_string),
        source,
    };
    let plan = if text.trim_start().starts_with('[') {
        FaultPlan {
            faults: serde_json::from_str(text).map_err(json_err)?,
        }
    } else {
        serde_json::from_str(text).map_err(json_err)?
    };
    check(&plan)?;
    Ok(plan)
}

fn check(plan: &FaultPlan) -> Result<(), PlanError> {
    if plan.faults.len() > MAX_FAULTS {
        return Err(PlanError::TooMany {
            count: plan.faults.len(),
        });
    }
    for (index, spec) in plan.faults.iter().enumerate() {
        let reason = if !valid_name(&spec.point) {
            format!(
                "point name `{}` must be non-empty [A-Za-z0-9._-]",
                spec.point
            )
        } else if spec.hit == 0 {
            "hit counts start at 1".to_string()
        } else if spec.node.as_deref().is_some_and(|n| !valid_name(n)) {
            "node name must be non-empty [A-Za-z0-9._-]".to_string()
        } else {
            continue;
        };
        return Err(PlanError::Invalid { index, reason });
    }
    Ok(())
}

/// Parse the compact form (see the module documentation).
pub fn parse_compact(text: &str) -> Result<FaultPlan, PlanError> {
    let mut faults = Vec::new();
    for (index, raw) in text.split(';').enumerate() {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        if faults.len() >= MAX_FAULTS {
            return Err(PlanError::TooMany {
                count: text.split(';').count(),
            });
        }
        let syntax = |reason: String| PlanError::Syntax {
            index,
            entry: entry.to_string(),
            reason,
        };
        faults.push(parse_entry(entry).map_err(syntax)?);
    }
    Ok(FaultPlan { faults })
}

fn parse_entry(entry: &str) -> Result<FaultSpec, String> {
    let (target, action) = entry
        .split_once('=')
        .ok_or_else(|| "missing `=ACTION`".to_string())?;
    let action = parse_action(action.trim())?;
    let mut parts = target.trim().split('@');
    let head = parts.next().unwrap_or_default();
    let (point, hit, repeat) = match head.split_once('#') {
        None => (head, 1, false),
        Some((point, hit)) => {
            let (digits, repeat) = match hit.strip_suffix('+') {
                Some(d) => (d, true),
                None => (hit, false),
            };
            let n: u64 = digits.parse().map_err(|_| {
                format!("hit `{hit}` is not a positive integer (optionally with +)")
            })?;
            if n == 0 {
                return Err("hit counts start at 1".to_string());
            }
            (point, n, repeat)
        }
    };
    if !valid_name(point) {
        return Err(format!(
            "point name `{point}` must be non-empty [A-Za-z0-9._-]"
        ));
    }
    let (mut rank, mut node) = (None, None);
    for qual in parts {
        match qual.split_once(':') {
            Some(("rank", r)) if rank.is_none() => {
                rank = Some(
                    r.parse::<u32>()
                        .map_err(|_| format!("rank `{r}` is not a non-negative integer"))?,
                );
            }
            Some(("node", n)) if node.is_none() => {
                if !valid_name(n) {
                    return Err(format!("node name `{n}` must be non-empty [A-Za-z0-9._-]"));
                }
                node = Some(n.to_string());
            }
            _ => {
                return Err(format!(
                    "qualifier `@{qual}`: expected one @rank:R and one @node:NAME at most"
                ))
            }
        }
    }
    Ok(FaultSpec {
        point: point.to_string(),
        hit,
        repeat,
        rank,
        node,
        action,
    })
}

fn parse_action(text: &str) -> Result<Action, String> {
    let (name, arg) = match text.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (text, None),
    };
    let number = |what: &str| -> Result<i64, String> {
        let a = arg.ok_or_else(|| format!("`{name}` needs `:{what}`"))?;
        a.parse::<i64>()
            .map_err(|_| format!("`{name}:{a}`: {what} must be an integer"))
    };
    match (name, arg) {
        ("kill", None) => Ok(Action::Kill),
        ("kill-node", None) => Ok(Action::KillNode),
        ("exit", _) => {
            let code = number("CODE")?;
            let code = i32::try_from(code)
                .ok()
                .filter(|c| (0..=255).contains(c))
                .ok_or_else(|| format!("exit code {code} is not in 0..=255"))?;
            Ok(Action::Exit { code })
        }
        ("error", None) => Ok(Action::Error {
            kind: ErrorKind::Eio,
        }),
        ("error", Some(k)) => ErrorKind::from_name(k)
            .map(|kind| Action::Error { kind })
            .ok_or_else(|| format!("error kind `{k}`: expected eio, enospc, erofs or eacces")),
        ("delay", _) => {
            let ms = number("MS")?;
            let ms = u64::try_from(ms).map_err(|_| format!("delay {ms} ms is negative"))?;
            Ok(Action::Delay { ms })
        }
        _ => Err(format!(
            "unknown action `{text}`: expected kill, kill-node, exit:CODE, error[:KIND] or delay:MS"
        )),
    }
}

/// The error an `error` fault makes its injection point return.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("injected fault at point {point} (hit {hit}): {}", io::Error::from_raw_os_error(self.kind.errno()))]
pub struct Injected {
    /// The injection point.
    pub point: &'static str,
    /// Which hit of the point fired.
    pub hit: u64,
    /// The error injected.
    pub kind: ErrorKind,
}

impl From<Injected> for io::Error {
    fn from(e: Injected) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(e.kind.errno()).kind(), e)
    }
}

#[cfg(feature = "fault-injection")]
pub use active::{hit, Injector};

#[cfg(feature = "fault-injection")]
mod active {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    /// Matches hits against a plan and counts them; the process-wide one
    /// behind [`hit`] is built from the environment.
    #[derive(Debug)]
    pub struct Injector {
        plan: FaultPlan,
        env_rank: Option<u32>,
        node: Option<String>,
        hits: Mutex<HashMap<(String, Option<u32>), u64>>,
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
            }
        }

        /// Count a hit of `point` by `rank` (or the launcher's rank) and
        /// return the hit number and the fault that fires, if any. Points
        /// no fault names are not counted (nothing to count them for).
        pub fn check(&self, point: &str, rank: Option<u32>) -> Option<(u64, &FaultSpec)> {
            if !self.plan.faults.iter().any(|f| f.point == point) {
                return None;
            }
            let rank = rank.or(self.env_rank);
            let n = {
                let mut hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
                let n = hits.entry((point.to_string(), rank)).or_insert(0);
                *n = n.saturating_add(1);
                *n
            };
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
    }

    fn env_rank() -> Option<u32> {
        ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
            .iter()
            .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
    }

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
            let node = std::env::var(crate::storage::dirs::ENV_NODE_NAME).ok();
            Injector::new(plan, env_rank(), node)
        })
    }

    /// The body of an enabled [`fault_point!`](crate::fault_point): count the
    /// hit and carry out the fault that fires, if any.
    pub fn hit(point: &'static str, rank: Option<u32>) -> Result<(), Injected> {
        let inj = global();
        let Some((n, spec)) = inj.check(point, rank) else {
            return Ok(());
        };
        let rank = rank.or(inj.env_rank);
        report(point, n, rank, inj.node.as_deref(), &spec.action);
        match spec.action {
            Action::Kill => {
                await_co_timed(&inj.plan, point, n);
                kill_self();
                Ok(())
            }
            Action::KillNode => {
                if let Some(node) = &inj.node {
                    for pid in node_peers(node) {
                        // SAFETY: kill(2) with a pid read from /proc; no memory involved.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                kill_self();
                Ok(())
            }
            Action::Exit { code } => std::process::exit(code),
            Action::Error { kind } => Err(Injected {
                point,
                hit: n,
                kind,
            }),
            Action::Delay { ms } => {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(())
            }
        }
    }

    /// Wait (bounded) until every co-timed kill of this job fired.
    fn await_co_timed(plan: &FaultPlan, point: &str, n: u64) {
        let want = co_timed_kills(plan, point, n);
        if want < 2 {
            return;
        }
        let (Some(path), Some(job)) = (std::env::var_os(ENV_LOG), job_key()) else {
            return;
        };
        let deadline = std::time::Instant::now() + CO_TIMED_WAIT;
        loop {
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            if kills_logged(&log, point, n, &job) >= want {
                return;
            }
            if std::time::Instant::now() >= deadline {
                eprintln!(
                    "scr fault: {point}#{n}: not every co-timed kill fired within {} s; dying anyway",
                    CO_TIMED_WAIT.as_secs()
                );
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Variables naming this process's job, first found wins.
    const JOB_KEYS: [&str; 4] = [
        ENV_JOB,
        "PMIX_NAMESPACE",
        "OMPI_MCA_ess_base_jobid",
        "PMI_KVSNAME",
    ];

    /// `NAME=value` of every one of [`JOB_KEYS`] set here, `,`-joined: the
    /// harness's allocation and the launcher's job together tell one launch
    /// from the next.
    fn job_key() -> Option<String> {
        let set: Vec<String> = JOB_KEYS
            .iter()
            .filter_map(|k| Some(format!("{k}={}", std::env::var(k).ok()?)))
            .collect();
        (!set.is_empty()).then(|| set.join(","))
    }

    fn kill_self() {
        // SAFETY: kill(2) on our own pid.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }

    fn report(point: &str, n: u64, rank: Option<u32>, node: Option<&str>, action: &Action) {
        let line = serde_json::json!({
            "point": point, "hit": n, "rank": rank, "node": node,
            "action": action.to_string(), "pid": std::process::id(),
            "job": job_key(),
        });
        eprintln!("scr fault: {line}");
        if let Some(path) = std::env::var_os(ENV_LOG) {
            let opened = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path);
            // One write of a short line with O_APPEND: lines from several
            // ranks never interleave. A log that cannot be written must not
            // stop the fault, so the error is only reported.
            if let Err(e) = opened.and_then(|mut f| f.write_all(format!("{line}\n").as_bytes())) {
                eprintln!(
                    "scr fault: cannot append to {}: {e}",
                    path.to_string_lossy()
                );
            }
        }
    }

    fn environ_of(pid: &str) -> Option<Vec<(String, String)>> {
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

    fn parent_of(pid: &str) -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 4, after the parenthesised command name (which may hold spaces).
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(1).map(str::to_string)
    }

    /// Other processes of this job on `node` (see the module documentation).
    pub(super) fn node_peers(node: &str) -> Vec<i32> {
        let me = std::process::id().to_string();
        let job = JOB_KEYS
            .iter()
            .find_map(|k| Some((*k, std::env::var(k).ok()?)));
        let my_parent = parent_of(&me);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut peers = Vec::new();
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(pid) = name.parse::<i32>() else {
                continue;
            };
            if name == me {
                continue;
            }
            let Some(env) = environ_of(&name) else {
                continue;
            };
            let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str());
            if get(crate::storage::dirs::ENV_NODE_NAME) != Some(node) {
                continue;
            }
            let same_job = match &job {
                Some((k, v)) => get(k) == Some(v.as_str()),
                None => my_parent.is_some() && parent_of(&name) == my_parent,
            };
            if same_job {
                peers.push(pid);
            }
        }
        peers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_form_parses_every_field() {
        let plan = parse_plan(
            " xor.encode.chunk#3@rank:2=kill ; flush.file.copied#1+@node:n1=delay:20;\
             fetch.file=error:enospc; a.b@node:n0@rank:7=exit:3; c=kill-node; d#2=error;",
        )
        .expect("valid plan");
        let f = &plan.faults;
        assert_eq!(f.len(), 6);
        assert_eq!(
            f[0],
            FaultSpec {
                point: "xor.encode.chunk".into(),
                hit: 3,
                repeat: false,
                rank: Some(2),
                node: None,
                action: Action::Kill
            }
        );
        assert!(f[1].repeat && f[1].node.as_deref() == Some("n1"));
        assert_eq!(f[1].action, Action::Delay { ms: 20 });
        assert_eq!(
            f[2].action,
            Action::Error {
                kind: ErrorKind::Enospc
            }
        );
        assert_eq!(f[2].hit, 1);
        assert_eq!(
            (f[3].rank, f[3].action.clone()),
            (Some(7), Action::Exit { code: 3 })
        );
        assert_eq!(f[4].action, Action::KillNode);
        assert_eq!(
            f[5].action,
            Action::Error {
                kind: ErrorKind::Eio
            }
        );
    }

    #[test]
    fn display_round_trips_through_the_compact_parser() {
        let text = "x.y#3@rank:2=kill;f#1+@node:n1=delay:20;g#1=error:erofs;h#9@rank:0@node:n-2=exit:255;i#1=kill-node";
        let plan = parse_plan(text).expect("valid plan");
        assert_eq!(plan.to_string(), text);
        assert_eq!(parse_plan(&plan.to_string()).expect("reparse"), plan);
    }

    #[test]
    fn json_forms_inline_array_and_file() {
        let obj = r#"{"faults":[{"point":"xor.encode.chunk","hit":3,"rank":2,"action":"kill"},
                      {"point":"p","action":"error","kind":"eacces","repeat":true}]}"#;
        let plan = parse_plan(obj).expect("object form");
        assert_eq!(plan.faults[0].to_string(), "xor.encode.chunk#3@rank:2=kill");
        assert_eq!(plan.faults[1].to_string(), "p#1+=error:eacces");
        let arr = r#"[{"point":"q","action":"delay","ms":5}]"#;
        assert_eq!(
            parse_plan(arr).expect("array form").faults[0].to_string(),
            "q#1=delay:5"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.json");
        std::fs::write(&path, serde_json::to_string(&plan).expect("serialize")).expect("write");
        assert_eq!(
            parse_plan(path.to_str().expect("utf-8")).expect("file form"),
            plan
        );
    }

    #[test]
    fn bad_plans_are_typed_errors_naming_the_entry() {
        for (text, needle) in [
            ("x", "missing `=ACTION`"),
            ("x#0=kill", "start at 1"),
            ("x#a=kill", "not a positive integer"),
            ("x=explode", "unknown action"),
            ("x=exit", "needs `:CODE`"),
            ("x=exit:256", "not in 0..=255"),
            ("x=delay:-1", "negative"),
            ("x=error:ebadf", "error kind"),
            ("x@rank:-1=kill", "rank"),
            ("x@rank:1@rank:2=kill", "qualifier"),
            ("x@host:a=kill", "qualifier"),
            ("=kill", "point name"),
            ("x y=kill", "point name"),
            ("ok=kill;x@node:=kill", "node name"),
        ] {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: `{err}` lacks `{needle}`");
        }
        let err = parse_plan("ok=kill;bad").expect_err("second entry bad");
        assert!(matches!(err, PlanError::Syntax { index: 1, .. }), "{err}");
        assert!(matches!(
            parse_plan("{\"faults\":[{\"point\":\"x\",\"hit\":0,\"action\":\"kill\"}]}"),
            Err(PlanError::Invalid { index: 0, .. })
        ));
        assert!(matches!(
            parse_plan("{\"faults\":[{\"point\":\"x\"}]}"),
            Err(PlanError::Json { .. })
        ));
        assert!(matches!(
            parse_plan("/nonexistent/plan.json"),
            Err(PlanError::Read { .. })
        ));
        assert!(matches!(
            parse_plan(&"x=kill;".repeat(MAX_FAULTS + 1)),
            Err(PlanError::TooMany { .. })
        ));
        assert_eq!(parse_plan("  ").expect("empty plan"), FaultPlan::default());
    }

    #[test]
    fn injected_error_becomes_the_matching_io_error() {
        let e: io::Error = Injected {
            point: "p",
            hit: 2,
            kind: ErrorKind::Enospc,
        }
        .into();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert!(
            e.to_string().contains("injected fault at point p (hit 2)"),
            "{e}"
        );
    }

    #[test]
    fn disabled_or_empty_points_return_ok() {
        let r: u32 = 3;
        assert_eq!(crate::fault_point!("test.unnamed.point"), Ok(()));
        assert_eq!(crate::fault_point!("test.unnamed.point", rank = r), Ok(()));
    }

    #[cfg(feature = "fault-injection")]
    mod enabled {
        use super::super::*;
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
            // An earlier launch's line (another job), another hit, a
            // duplicate and a partial line do not count.
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

        #[test]
        fn global_point_without_plan_env_is_ok() {
            // The test process has no SCR_FAULT_PLAN naming this point.
            assert_eq!(crate::fault_point!("test.never.planned", rank = 0), Ok(()));
        }
    }
}
