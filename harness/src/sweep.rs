//! The crash-point sweep (`scr-harness sweep`): kill a rank at every
//! injection point a job passes, one run per point, then let the run loop
//! relaunch and check the restart.
//!
//! A sweep has four phases, in three modes (a cache dataset, the same
//! protected in the background, `SCR_ENCODE_ASYNC=1`, and a bypass dataset
//! written straight to the prefix, `SCR_CACHE_BYPASS=1`; the first and last
//! by default):
//!
//! - `checkpoint`: the first launch writes three checkpoints, each flushed
//!   (`SCR_FLUSH=1`), so it passes every point of Start/Complete_output, the
//!   redundancy encode, the flush and the prefix's summary, rank2file and
//!   index updates, and the filemap writes in cache;
//! - `fetch`: the first launch ends with both nodes lost, so the second
//!   fetches the newest checkpoint from the prefix on spare nodes; the kill
//!   is in that second launch, before its first checkpoint;
//! - `scavenge`: ckpt.2 is flushed, the only launch fails after ckpt.3,
//!   and the kill is of a node's `scr copy` during `scr postrun`; a new
//!   allocation restarts from ckpt.2 or ckpt.3;
//! - `rebuild` (cache modes only): the first launch loses node n1 after
//!   ckpt.3, so the second, on n0 and a spare, rebuilds ckpt.3 from the
//!   scheme's redundancy in SCR_Init (SINGLE fetches it; in async mode
//!   ckpt.3 was not settled yet, so ckpt.2); the kill is in that second
//!   launch, before its first checkpoint.
//!
//! With `--power-loss` ([`Kill::Power`]) every node loses power at the
//! point instead: files keep only what was fsynced (`faultrt::durable`),
//! and the restart range is the same. In the scavenge phase the power
//! goes while `scr postrun` runs (a node's `scr copy` or the driver
//! reaches the point; the driver stops with the nodes), and files changed
//! since postrun began lose what was not fsynced.
//! With `--io-error` ([`Kill::IoError`]) the rank's I/O at the point fails
//! once with ENOSPC instead (every phase but scavenge): the job must end
//! completed with no hang and no wrong byte; the restart range does not
//! apply (the job may go on past the failed call).
//!
//! A clean run of each (phase, mode) first records every point reached, with
//! its hit count and rank (`SCR_FAULT_TRACE`, see `faultrt`). Each cell then
//! kills one rank at one (point, hit) of that trace and judges:
//!
//! - the fault fired, and the run loop ended `completed`;
//! - nothing that must never happen (wrong or missing bytes: the test
//!   application verifies every byte it restores);
//! - the launch after the kill restarted from a checkpoint in the range the
//!   trace allows: no older than the last one every rank had finished when
//!   the killed rank died (its `app.compute` point, after the barrier that
//!   follows Complete_output), no newer than the one it had started (its
//!   `app.file.write`). In async mode the lower end is one less: the
//!   newest finished checkpoint is protected only once the rank passed its
//!   next Start_output, i.e. one before the one it had started. For the
//!   fetch phase the range is exactly what the clean run fetched.
//!
//! The CI subset (`quick`) kills at one hit of each distinct point (the
//! first that falls in the second checkpoint or later, so an older one
//! exists to fall back to); `--full` kills at every hit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use scr::CopyType;
use serde::{Deserialize, Serialize};

use crate::campaign::{cell_loop, unmount_below, Cell, Settings};
use crate::outcome::{Class, End};
use crate::runloop::RunResult;
use crate::scenario::Scenario;

/// Where the dataset lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// In cache, with the scheme's redundancy, flushed to the prefix.
    Cache,
    /// Written straight to the prefix (`SCR_CACHE_BYPASS=1`).
    Bypass,
    /// In cache as [`Mode::Cache`], protected in the background
    /// (`SCR_ENCODE_ASYNC=1`): Complete_output returns before the CRC32s
    /// and the encode, the next Start_output (or finalize) settles them and
    /// flushes. A kill before that settle may restart from the checkpoint
    /// before.
    Async,
}

/// What the first launch does before the kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Kills in the first launch, while it checkpoints and flushes.
    Checkpoint,
    /// Kills in the second launch, while it fetches from the prefix.
    Fetch,
    /// Kills a node's processes during `scr postrun` (the scavenge) after
    /// the only launch failed; a new allocation then restarts.
    Scavenge,
    /// Kills in the second launch, while SCR_Init rebuilds the newest
    /// checkpoint onto a spare after the first launch lost a node (cache
    /// mode only: a bypass dataset has no redundancy to rebuild).
    Rebuild,
}

impl Mode {
    /// The modes a sweep runs by default.
    pub const ALL: [Mode; 2] = [Mode::Cache, Mode::Bypass];

    /// Every mode (`--mode` picks among them).
    pub const EVERY: [Mode; 3] = [Mode::Cache, Mode::Async, Mode::Bypass];

    /// The mode's name in cell names and `--mode`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cache => "cache",
            Mode::Bypass => "bypass",
            Mode::Async => "async",
        }
    }

    /// Checkpoints the restart may fall behind the newest one every rank
    /// had completed: with a background encode that one may not be
    /// protected yet (it is once the rank passed its next Start_output).
    fn lag(self) -> u64 {
        match self {
            Mode::Async => 1,
            Mode::Cache | Mode::Bypass => 0,
        }
    }
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 4] = [
        Phase::Checkpoint,
        Phase::Fetch,
        Phase::Scavenge,
        Phase::Rebuild,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Checkpoint => "checkpoint",
            Phase::Fetch => "fetch",
            Phase::Scavenge => "scavenge",
            Phase::Rebuild => "rebuild",
        }
    }

    /// The launch (1-based) whose points are swept; 0 for `scr postrun`.
    fn launch(self) -> u32 {
        match self {
            Phase::Checkpoint => 1,
            Phase::Fetch | Phase::Rebuild => 2,
            Phase::Scavenge => 0,
        }
    }
}

/// How the job is hit at a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kill {
    /// SIGKILL of the rank (what it wrote stays).
    Rank,
    /// Every node loses power: the job (or `scr postrun`) stops, every
    /// file below the nodes' trees and the prefix loses what was written
    /// after its last fsync (`faultrt::durable`), then the job dies.
    Power,
    /// The rank's I/O at the point fails with ENOSPC (the cache or the
    /// prefix full) once: the library must fail what it was doing on every
    /// rank alike — never leave the others waiting in a collective the
    /// failing rank skipped — and the job must end completed (relaunched
    /// if need be), every byte it restores verified.
    IoError,
}

/// Checkpoints the first launch writes.
const CHECKPOINTS: u64 = 3;

/// One line of a trace (`SCR_FAULT_TRACE`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TraceHit {
    /// The point.
    pub point: String,
    /// Its hit count in its process, for its rank.
    pub hit: u64,
    /// The rank.
    pub rank: Option<u32>,
    /// The node (`SCR_NODE_NAME`).
    #[serde(default)]
    pub node: Option<String>,
    /// The process.
    #[serde(default)]
    pub pid: u32,
    /// The job keys (`SCR_FAULT_JOB=<dir>-<launch>,...`).
    #[serde(default)]
    pub job: Option<String>,
}

impl TraceHit {
    /// The run loop's launch this hit was in (from `SCR_FAULT_JOB`), 0
    /// for `scr postrun`.
    pub fn launch(&self) -> Option<u32> {
        let job = self.job.as_deref()?;
        let key = job
            .split(',')
            .find_map(|kv| kv.strip_prefix("SCR_FAULT_JOB="))?;
        match key.rsplit('-').next()? {
            "postrun" => Some(0),
            n => n.parse().ok(),
        }
    }
}

/// Read a trace; lines that do not parse (a process killed mid-line) are
/// skipped.
pub fn read_trace(path: &Path) -> Vec<TraceHit> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// One place to kill, and what the restart after it may be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// The point.
    pub point: String,
    /// The hit (counted per process and rank).
    pub hit: u64,
    /// The rank killed (launches).
    pub rank: u32,
    /// The node whose processes are killed (`scr postrun`; `None` there:
    /// the `scr postrun` driver itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The oldest checkpoint the next launch may restart from (0: none).
    pub lo: u64,
    /// The newest.
    pub hi: u64,
}

/// Where to kill in launch `launch` (0: `scr postrun`), from a clean
/// run's trace: one target per (point, hit), on the lowest rank (postrun:
/// node) that reached it. `quick` keeps one hit per point: the first in
/// checkpoint 2 or later, else the first. `fixed` is the range of every
/// target when the kills cannot change it (fetch: the checkpoint the swept
/// launch restarted from; scavenge: the flushed one to the newest); then a
/// launch's targets end at its first checkpoint write. `lag` (`Mode::lag`)
/// widens the range down: a restart may be from the checkpoint before the
/// one the rank had started writing.
pub fn targets(
    trace: &[TraceHit],
    launch: u32,
    quick: bool,
    fixed: Option<(u64, u64)>,
    lag: u64,
) -> Vec<Target> {
    // Per rank (postrun: node), in the order it passed them: each rank is
    // one process, whose lines are appended in order; each node's `scr
    // copy` likewise, and the `scr postrun` driver (no node) at the points
    // no node's copy passes (a driver's kill matches by point alone).
    let copies_pass: std::collections::BTreeSet<&str> = trace
        .iter()
        .filter(|h| launch == 0 && h.launch() == Some(0) && h.node.is_some())
        .map(|h| h.point.as_str())
        .collect();
    let mut by_who: BTreeMap<(Option<u32>, Option<String>), Vec<&TraceHit>> = BTreeMap::new();
    for h in trace.iter().filter(|h| h.launch() == Some(launch)) {
        let who = if launch == 0 {
            match &h.node {
                Some(n) => (None, Some(n.clone())),
                None if !copies_pass.contains(h.point.as_str()) => (None, None),
                None => continue,
            }
        } else {
            match h.rank {
                Some(r) => (Some(r), None),
                None => continue,
            }
        };
        by_who.entry(who).or_default().push(h);
    }
    let mut found: BTreeMap<(String, u64), Target> = BTreeMap::new();
    for ((rank, node), hits) in &by_who {
        let (mut started, mut committed) = (0u64, 0u64);
        for h in hits {
            if fixed.is_some() && h.point == "app.file.write" {
                break;
            }
            // A rank at its write has passed that checkpoint's Start_output,
            // which settled the one before.
            let passed = started + u64::from(h.point == "app.file.write");
            let (lo, hi) = fixed.unwrap_or((committed.min(passed.saturating_sub(lag)), started));
            found
                .entry((h.point.clone(), h.hit))
                .or_insert_with(|| Target {
                    point: h.point.clone(),
                    hit: h.hit,
                    rank: rank.unwrap_or(0),
                    node: node.clone(),
                    lo,
                    hi,
                });
            match h.point.as_str() {
                "app.file.write" => started += 1,
                "app.compute" => committed += 1,
                _ => {}
            }
        }
    }
    let mut all: Vec<Target> = found.into_values().collect();
    if quick {
        let mut one: BTreeMap<String, Target> = BTreeMap::new();
        for t in all {
            let later = t.hi >= 2;
            match one.get(&t.point) {
                None => {
                    one.insert(t.point.clone(), t);
                }
                Some(have) if fixed.is_none() && later && have.hi < 2 => {
                    one.insert(t.point.clone(), t);
                }
                Some(_) => {}
            }
        }
        all = one.into_values().collect();
    }
    all.sort_by(|a, b| (a.lo, a.hi, &a.point, a.hit).cmp(&(b.lo, b.hi, &b.point, b.hit)));
    all
}

/// The sweep's job: 2 nodes of 2 ranks, 2 spares, 3 checkpoints of small
/// files, in `mode`, for `phase`; `kill` adds the kill of one target.
pub fn scenario(mode: Mode, phase: Phase, kill: Option<&Target>, how: Kill) -> Scenario {
    let mut env = BTreeMap::new();
    match mode {
        Mode::Cache => {
            env.insert("SCR_FLUSH".into(), "1".into());
        }
        Mode::Async => {
            env.insert("SCR_FLUSH".into(), "1".into());
            env.insert("SCR_ENCODE_ASYNC".into(), "1".into());
        }
        Mode::Bypass => {
            env.insert("SCR_CACHE_BYPASS".into(), "1".into());
        }
    }
    let mut faults = Vec::new();
    if phase == Phase::Scavenge {
        // Checkpoint 2 is flushed, 3 stays in cache; a rank dies after 3 and
        // the only launch fails, so `scr postrun` scavenges ckpt.3.
        env.insert("SCR_FLUSH".into(), "2".into());
        faults.push(fault(
            r#"what = { kind = "kill-rank", rank = 1 }
               when = { at = "between-checkpoints", after = 3 }"#,
        ));
    }
    if phase == Phase::Fetch {
        // Both nodes are lost: n0 dies after checkpoint 3 (the launch
        // fails), n1 after the launch; the relaunch runs on the spares and
        // must fetch.
        faults.push(fault(
            r#"what = { kind = "kill-node", node = "n0" }
               when = { at = "between-checkpoints", after = 3 }"#,
        ));
        faults.push(fault(
            r#"what = { kind = "kill-node", node = "n1" }
               when = { at = "after-run", run = 1 }"#,
        ));
    }
    if phase == Phase::Rebuild {
        // n1 is lost after checkpoint 3 (the launch fails); the relaunch
        // runs on n0 and a spare, and SCR_Init rebuilds ckpt.3 there (or,
        // for SINGLE, fetches it: every checkpoint is flushed).
        faults.push(fault(
            r#"what = { kind = "kill-node", node = "n1" }
               when = { at = "between-checkpoints", after = 3 }"#,
        ));
    }
    match kill {
        Some(t) if phase == Phase::Scavenge => faults.push(fault(&format!(
            "what = {}\nwhen = {{ at = \"postrun\", point = \"{}\", hit = {} }}",
            match (&t.node, how) {
                (Some(n), Kill::Power) => {
                    format!("{{ kind = \"postrun-power-loss\", node = \"{n}\" }}")
                }
                // At a point of the driver's own.
                (None, Kill::Power) => "{ kind = \"postrun-power-loss\" }".to_string(),
                (Some(n), _) => format!("{{ kind = \"kill-node\", node = \"{n}\", then = \"keep\" }}"),
                // The driver itself.
                (None, _) => "{ kind = \"kill-postrun\" }".to_string(),
            },
            t.point,
            t.hit
        ))),
        Some(t) if how == Kill::IoError => faults.push(fault(&format!(
            "what = {{ kind = \"io-error\", error = \"enospc\" }}\nwhen = {{ at = \"point\", point = \"{}\", hit = {}, rank = {} }}\nrun = {}",
            t.point,
            t.hit,
            t.rank,
            phase.launch()
        ))),
        Some(t) => faults.push(fault(&format!(
            "what = {{ kind = \"{}\", rank = {} }}\nwhen = {{ at = \"point\", point = \"{}\", hit = {} }}\nrun = {}",
            match how {
                Kill::Rank => "kill-rank",
                Kill::Power => "power-loss",
                Kill::IoError => unreachable!("the arm above"),
            },
            t.rank,
            t.point,
            t.hit,
            phase.launch()
        ))),
        None => {}
    }
    let name = match kill {
        Some(t) => cell_name(mode, phase, t, how),
        None => format!("sweep-{}-{}-trace", mode.name(), phase.name()),
    };
    Scenario {
        name,
        about: "crash-point sweep".into(),
        quick: false,
        tags: vec!["sweep".into()],
        nodes: 2,
        ranks_per_node: 2,
        spares: 2,
        checkpoints: CHECKPOINTS,
        relaunch_checkpoints: 1,
        launches: if phase == Phase::Scavenge { 1 } else { 3 },
        mean_bytes: 16 * 1024,
        // An I/O error must fail the library's call on every rank alike:
        // an application that goes on after it shows a mismatch as a hang.
        app_args: if how == Kill::IoError {
            vec!["--keep-going".into()]
        } else {
            Vec::new()
        },
        env,
        schemes: None,
        faults,
        halts: Vec::new(),
        timeout_s: 60,
        needs: Vec::new(),
        cache_tmpfs_bytes: None,
        next_allocation: phase == Phase::Scavenge,
        expect: BTreeMap::new(),
    }
}

fn fault(text: &str) -> faultsim::plan::Fault {
    // The texts are this module's own: a failure is a bug here.
    toml::from_str(text).unwrap_or_else(|e| panic!("sweep fault {text}: {e}"))
}

/// A cell's name: `sweep-<mode>-<phase>-<point>#<hit>@<rank>`.
pub fn cell_name(mode: Mode, phase: Phase, t: &Target, how: Kill) -> String {
    let who = match &t.node {
        Some(n) => n.clone(),
        None if phase == Phase::Scavenge => "postrun".to_string(),
        None => t.rank.to_string(),
    };
    format!(
        "sweep-{}{}-{}-{}#{}@{who}",
        match how {
            Kill::Rank => "",
            Kill::Power => "power-",
            Kill::IoError => "io-error-",
        },
        mode.name(),
        phase.name(),
        t.point,
        t.hit,
    )
}

/// Run the clean job of (mode, phase) with a trace; the trace and the
/// run's result.
pub fn trace_run(
    mode: Mode,
    phase: Phase,
    scheme: CopyType,
    settings: &Settings,
) -> Result<(Vec<TraceHit>, RunResult), String> {
    let sc = scenario(mode, phase, None, Kill::Rank);
    let dir = settings.work.join(&sc.name);
    let mut rl = cell_loop(&sc, scheme, settings.seed, settings, &dir)?;
    let trace = dir.join("trace.jsonl");
    rl.env.insert(
        faultsim::runtime::ENV_TRACE.into(),
        trace.to_string_lossy().into_owned(),
    );
    let result = rl.run();
    unmount_below(&dir);
    let hits = read_trace(&trace);
    let want = match phase {
        Phase::Checkpoint | Phase::Fetch | Phase::Rebuild => End::Completed,
        // The only launch fails on purpose.
        Phase::Scavenge => End::Retries,
    };
    if result.outcome.end != want || hits.is_empty() {
        return Err(format!(
            "the clean run of the {} {} sweep did not end as it must ({}; {} trace lines; files in {})",
            mode.name(),
            phase.name(),
            result.outcome,
            hits.len(),
            dir.display()
        ));
    }
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok((hits, result))
}

/// Judge one killed run against its target: `Ok(())` or why not.
pub fn judge(phase: Phase, t: &Target, how: Kill, r: &RunResult) -> Result<(), String> {
    if let Some(never) = r
        .outcome
        .launches
        .iter()
        .chain(r.outcome.next.as_ref())
        .find(|x| x.class.never())
    {
        return Err(format!("{} in the outcome", never.class.name()));
    }
    if phase == Phase::Scavenge {
        let post = r.postrun.as_ref().ok_or("scr postrun never ran")?;
        if !post.fired.iter().any(|f| f.point == t.point) {
            return Err(format!(
                "the kill at {}#{} never fired in scr postrun",
                t.point, t.hit
            ));
        }
        let next = r.outcome.next.as_ref().ok_or("no next allocation")?;
        return in_range(next.class, next.ckpt, t, "the next allocation");
    }
    let k = (phase.launch() - 1) as usize;
    let killed = r.launches.get(k).ok_or("the killed launch never ran")?;
    if !killed.fired.iter().any(|f| f.point == t.point) {
        return Err(format!(
            "the kill at {}#{} never fired in launch {}",
            t.point,
            t.hit,
            k + 1
        ));
    }
    if r.outcome.end != End::Completed {
        return Err(format!(
            "the run loop ended {}, not completed",
            r.outcome.end
        ));
    }
    if how == Kill::IoError {
        // The job may fail the call and go on, or stop and be relaunched:
        // either way it completed, with nothing that must never happen.
        return Ok(());
    }
    let next = r
        .outcome
        .launches
        .get(k + 1)
        .ok_or("no launch after the kill")?;
    // The same range after a power loss: what the cache held may be gone
    // (the application's files there are not fsynced), but every committed
    // checkpoint of the sweep's job is durable in the prefix (flushed at
    // each Complete_output, or written there in bypass mode and fsynced
    // before the index records it).
    let what = match how {
        Kill::Rank => "the launch after the kill",
        Kill::Power => "the launch after the power loss",
        Kill::IoError => unreachable!("returned above"),
    };
    in_range(next.class, next.ckpt, t, what)
}

/// The restart `class`/`ckpt` of `what` is in the target's range.
fn in_range(class: Class, ckpt: Option<u64>, t: &Target, what: &str) -> Result<(), String> {
    let got = match (class, ckpt) {
        (c, Some(n)) if c.restarted() => n,
        // No checkpoint: with or without the library reporting the ones it
        // dropped (an incomplete one is dropped too).
        (Class::Scratch | Class::Loss, _) => 0,
        (c, _) => return Err(format!("{what} was {}", c.name())),
    };
    if got < t.lo || got > t.hi {
        return Err(format!(
            "{what} restarted from {} but must from {}",
            if got == 0 {
                "nothing".to_string()
            } else {
                format!("ckpt.{got}")
            },
            if t.lo == t.hi {
                format!("ckpt.{}", t.lo)
            } else {
                format!("ckpt.{}..ckpt.{}", t.lo, t.hi)
            }
        ));
    }
    Ok(())
}

/// Run one cell: kill at `t`, judge, keep the files of a failure.
pub fn run_cell(
    mode: Mode,
    phase: Phase,
    t: &Target,
    how: Kill,
    scheme: CopyType,
    settings: &Settings,
) -> Cell {
    let sc = scenario(mode, phase, Some(t), how);
    let dir = settings.work.join(sc.name.replace(['#', '@'], "-"));
    let expected = if how == Kill::IoError {
        "completed, no hang".to_string()
    } else if t.lo == t.hi {
        format!("restart from {}", restart_name(t.lo))
    } else {
        format!(
            "restart from {}..{}",
            restart_name(t.lo),
            restart_name(t.hi)
        )
    };
    let mut cell = Cell {
        scenario: sc.name.clone(),
        scheme,
        seed: settings.seed,
        expected,
        outcome: String::new(),
        class: String::new(),
        verdict: String::new(),
        why: String::new(),
        time_s: 0.0,
        launches: 0,
        replay: format!("{} --only '{}'", settings.replay, sc.name),
        kept: None,
    };
    let start = Instant::now();
    let rl = match cell_loop(&sc, scheme, settings.seed, settings, &dir) {
        Ok(mut rl) => {
            if how == Kill::Power {
                power_env(&mut rl, &dir);
            }
            rl
        }
        Err(e) => {
            cell.verdict = "unexpected".into();
            cell.class = "harness-error".into();
            cell.why = e;
            return cell;
        }
    };
    let result = rl.run();
    unmount_below(&dir);
    cell.time_s = start.elapsed().as_secs_f64();
    cell.launches = result.launches.len();
    cell.outcome = result.outcome.to_string();
    cell.class = result.outcome.headline().name().to_string();
    let never = result.outcome.headline().never();
    match judge(phase, t, how, &result) {
        Ok(()) if result.harness_errors.is_empty() => cell.verdict = "expected".into(),
        Ok(()) => {
            cell.verdict = "unexpected".into();
            cell.why = format!("harness: {}", result.harness_errors.join("; "));
        }
        Err(why) => {
            cell.verdict = if never { "NEVER" } else { "unexpected" }.into();
            cell.why = why;
        }
    }
    if cell.ok() && !settings.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        let _ = std::fs::write(
            dir.join("result.json"),
            serde_json::to_string_pretty(&result).unwrap_or_default(),
        );
        cell.kept = Some(dir);
    }
    cell
}

/// The power-loss model's variables: the journal in the cell's directory,
/// and the files it may revert, the nodes' trees and the prefix.
fn power_env(rl: &mut crate::runloop::RunLoop, dir: &Path) {
    let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    rl.env.insert(
        faultsim::runtime::durable::ENV_DURABLE.into(),
        abs(dir.join("durable")).to_string_lossy().into_owned(),
    );
    let roots = [abs(dir.join("nodes")), abs(rl.alloc.prefix())];
    if let Ok(v) = std::env::join_paths(roots) {
        rl.env.insert(
            faultsim::runtime::durable::ENV_DURABLE_ROOTS.into(),
            v.to_string_lossy().into_owned(),
        );
    }
}

fn restart_name(n: u64) -> String {
    if n == 0 {
        "scratch".into()
    } else {
        format!("ckpt.{n}")
    }
}

/// A sweep's plan: the cells to run, per (mode, phase).
#[derive(Debug, Clone)]
pub struct Planned {
    /// Mode.
    pub mode: Mode,
    /// Phase.
    pub phase: Phase,
    /// The target.
    pub target: Target,
    /// How it is hit.
    pub how: Kill,
}

/// Which hits of the traced points become cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// One hit of each point (the CI subset, [`targets`]' `quick`).
    Quick,
    /// Every hit of every point (`--full`).
    Full,
    /// The quick cells and `extra` more drawn from the other hits of the
    /// whole sweep with `seed` (`--sample`): a run of CI covers other
    /// hits than the one before, and a failing cell replays by name
    /// under `--full`.
    Sample {
        /// Cells drawn beyond the quick ones.
        extra: usize,
        /// The draw's seed.
        seed: u64,
    },
}

/// The cells of `full` (every hit, in plan order) that `select` keeps;
/// `quick[i]` says whether `full[i]` is one of the quick cells.
pub fn select_cells(full: Vec<Planned>, quick: &[bool], select: Select) -> Vec<Planned> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    assert_eq!(full.len(), quick.len(), "one flag per cell");
    let keep: Vec<bool> = match select {
        Select::Full => vec![true; full.len()],
        Select::Quick => quick.to_vec(),
        Select::Sample { extra, seed } => {
            let mut rest: Vec<usize> = (0..full.len()).filter(|&i| !quick[i]).collect();
            rest.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
            let mut keep = quick.to_vec();
            for &i in rest.iter().take(extra) {
                keep[i] = true;
            }
            keep
        }
    };
    full.into_iter()
        .zip(keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
}

/// Trace every (mode, phase) and list the cells `select` keeps.
pub fn plan(
    modes: &[Mode],
    phases: &[Phase],
    scheme: CopyType,
    select: Select,
    how: Kill,
    settings: &Settings,
) -> Result<Vec<Planned>, String> {
    let mut out = Vec::new();
    let mut quick = Vec::new();
    for &mode in modes {
        for &phase in phases {
            // A bypass dataset has no redundancy to rebuild. In async mode
            // the scavenge's ckpt.3 was never settled (the launch died
            // before its next Start_output), so `scr postrun` copies nothing
            // and has no point to kill at.
            if (phase == Phase::Rebuild && mode == Mode::Bypass)
                || (phase == Phase::Scavenge && mode == Mode::Async)
            {
                continue;
            }
            let (trace, result) = trace_run(mode, phase, scheme, settings)?;
            let fixed = match phase {
                Phase::Checkpoint => None,
                // ckpt.2 was flushed; ckpt.3 comes too if the scavenge
                // saved it (not when its background encode was never
                // settled: a scavenge copies protected datasets only).
                Phase::Scavenge => match result.outcome.next.as_ref() {
                    Some(t)
                        if t.class == Class::Fetched
                            && t.ckpt.is_some_and(|n| n + mode.lag() >= CHECKPOINTS) =>
                    {
                        Some((2, CHECKPOINTS))
                    }
                    _ => {
                        return Err(format!(
                            "the clean {} scavenge run's next allocation did not fetch ckpt.{CHECKPOINTS}: {}",
                            mode.name(),
                            result.outcome
                        ))
                    }
                },
                Phase::Fetch | Phase::Rebuild => {
                    let t = result.outcome.launches.get(1).ok_or_else(|| {
                        format!(
                            "the clean {} {} run has no second launch",
                            mode.name(),
                            phase.name()
                        )
                    })?;
                    match (phase, t.class, t.ckpt) {
                        (Phase::Fetch, Class::Fetched, Some(n)) => Some((n, n)),
                        // What the relaunch restarted from after the node
                        // loss (rebuilt in cache, or fetched for SINGLE) is
                        // what every later launch must restart from. With a
                        // background encode ckpt.3 is not protected when n1
                        // dies (its settle was to come at finalize), so that
                        // is ckpt.2.
                        (Phase::Rebuild, c, Some(n))
                            if c.restarted() && n + mode.lag() >= CHECKPOINTS =>
                        {
                            Some((n, n))
                        }
                        _ => {
                            return Err(format!(
                                "the clean {} {} run's second launch did not restart from ckpt.{}: {}",
                                mode.name(),
                                phase.name(),
                                CHECKPOINTS - mode.lag(),
                                result.outcome
                            ))
                        }
                    }
                }
            };
            let picks: std::collections::BTreeSet<(String, u64)> =
                targets(&trace, phase.launch(), true, fixed, mode.lag())
                    .into_iter()
                    .map(|t| (t.point, t.hit))
                    .collect();
            for target in targets(&trace, phase.launch(), false, fixed, mode.lag()) {
                quick.push(picks.contains(&(target.point.clone(), target.hit)));
                out.push(Planned {
                    mode,
                    phase,
                    target,
                    how,
                });
            }
        }
    }
    Ok(select_cells(out, &quick, select))
}

/// Counts per (mode, phase) for the results table.
pub fn counts_table(cells: &[(Planned, Cell)]) -> String {
    let mut rows: BTreeMap<(Mode, Phase), (usize, usize, usize)> = BTreeMap::new();
    for (p, c) in cells {
        let e = rows.entry((p.mode, p.phase)).or_default();
        e.0 += 1;
        if c.ok() {
            e.1 += 1;
        }
        if c.verdict == "NEVER" {
            e.2 += 1;
        }
    }
    let mut s = String::from(
        "| mode | phase | kills | as expected | NEVER (wrong bytes, hang) |\n| --- | --- | --- | --- | --- |\n",
    );
    for ((m, p), (n, ok, never)) in rows {
        s.push_str(&format!(
            "| {} | {} | {n} | {ok} | {never} |\n",
            m.name(),
            p.name()
        ));
    }
    s
}

/// Write `<dir>/sweep-<name>.md` and `.json`: the counts per (mode,
/// phase), then every cell.
pub fn write_results(
    dir: &Path,
    name: &str,
    command: &str,
    scheme: CopyType,
    cells: &[(Planned, Cell)],
    time_s: f64,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let base = dir.join(format!("sweep-{name}"));
    let (md, json) = (base.with_extension("md"), base.with_extension("json"));
    let ok = cells.iter().filter(|(_, c)| c.ok()).count();
    let each = match cells.first().map(|(p, _)| p.how) {
        Some(Kill::IoError) => {
            "Each cell makes one rank's I/O fail with ENOSPC once, at one hit of one \
             injection point; the job must end completed (the run loop relaunches \
             it if it stops), with no hang and every restored byte verified"
        }
        _ => {
            "Each kill is one rank SIGKILLed (or, power-*, every node losing \
             power) at one hit of one injection point; the run loop relaunches and \
             the next launch must restart from the checkpoint range the trace allows, \
             every byte verified"
        }
    };
    let mut s = format!(
        "# Crash-point sweep `{name}` ({scheme})\n\nCommand: `{command}`\n\n\
         {ok} of {} cells as expected in {time_s:.0} s. {each} (harness/src/sweep.rs).\n\n",
        cells.len()
    );
    s.push_str(&counts_table(cells));
    s.push_str(
        "\n| cell | expected | outcome | verdict | why |\n| --- | --- | --- | --- | --- |\n",
    );
    for (_, c) in cells {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            c.scenario,
            c.expected,
            c.outcome.replace('|', "\\|"),
            c.verdict,
            c.why.replace('|', "\\|")
        ));
    }
    std::fs::write(&md, s).map_err(|e| format!("{}: {e}", md.display()))?;
    let rows: Vec<serde_json::Value> = cells
        .iter()
        .map(|(p, c)| {
            serde_json::json!({
                "mode": p.mode, "phase": p.phase, "point": p.target.point,
                "hit": p.target.hit, "rank": p.target.rank, "lo": p.target.lo,
                "hi": p.target.hi, "cell": c,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "sweep": name, "scheme": scheme.as_str(), "command": command,
        "time_s": time_s, "kills": cells.len(), "expected": ok, "cells": rows,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&json, text + "\n").map_err(|e| format!("{}: {e}", json.display()))?;
    Ok(vec![md, json])
}

/// Where the sweep's files go by default.
pub fn default_work() -> PathBuf {
    PathBuf::from("target/scr-harness/sweep")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(point: &str, n: u64, rank: u32, launch: u32) -> TraceHit {
        TraceHit {
            point: point.into(),
            hit: n,
            rank: Some(rank),
            node: None,
            pid: 1,
            job: Some(format!("SCR_FAULT_JOB=/tmp/x-y-{launch},PMIX_NAMESPACE=z")),
        }
    }

    /// Rank 0 writes two checkpoints with an index update in each; rank 1
    /// only the files.
    fn trace() -> Vec<TraceHit> {
        let mut t = Vec::new();
        for rank in [0, 1] {
            t.push(hit("meta.filemap.synced", 1, rank, 1));
            for c in 1..=2 {
                t.push(hit("app.file.write", c, rank, 1));
                t.push(hit("api.complete_output", c, rank, 1));
                if rank == 0 {
                    t.push(hit("meta.index.synced", c, rank, 1));
                }
                t.push(hit("app.compute", c, rank, 1));
            }
        }
        t.push(hit("fetch.file", 1, 0, 2));
        t.push(hit("app.file.write", 1, 0, 2));
        t.push(hit("fetch.file", 2, 0, 2));
        t
    }

    #[test]
    fn the_launch_is_read_from_the_job_key() {
        assert_eq!(hit("p", 1, 0, 7).launch(), Some(7));
        let mut h = hit("p", 1, 0, 1);
        h.job = None;
        assert_eq!(h.launch(), None);
    }

    #[test]
    fn every_hit_is_a_target_with_the_range_its_rank_had_reached() {
        let t = targets(&trace(), 1, false, None, 0);
        let get = |p: &str, n: u64| {
            t.iter()
                .find(|x| x.point == p && x.hit == n)
                .map(|x| (x.rank, x.lo, x.hi))
        };
        assert_eq!(get("meta.filemap.synced", 1), Some((0, 0, 0)));
        // Inside checkpoint 2's Complete_output: 1 is committed, 2 started.
        assert_eq!(get("meta.index.synced", 2), Some((0, 1, 2)));
        assert_eq!(get("app.compute", 2), Some((0, 1, 2)));
        // Each (point, hit) once, on the lowest rank.
        assert_eq!(t.iter().filter(|x| x.point == "app.file.write").count(), 2);
        assert!(t.iter().all(|x| x.rank == 0));
        assert!(
            t.iter().all(|x| !x.point.starts_with("fetch")),
            "launch 1 only"
        );
    }

    #[test]
    fn in_async_mode_a_restart_may_be_one_checkpoint_behind_the_one_started() {
        let t = targets(&trace(), 1, false, None, Mode::Async.lag());
        let get = |p: &str, n: u64| {
            t.iter()
                .find(|x| x.point == p && x.hit == n)
                .map(|x| (x.lo, x.hi))
        };
        // Before any write: nothing to fall back to.
        assert_eq!(get("meta.filemap.synced", 1), Some((0, 0)));
        // Writing ckpt.2: ckpt.1 was settled in this Start_output.
        assert_eq!(get("app.file.write", 2), Some((1, 1)));
        // ckpt.2 complete but not yet settled: ckpt.1 is the protected one.
        assert_eq!(get("meta.index.synced", 2), Some((1, 2)));
        assert_eq!(get("app.compute", 2), Some((1, 2)));
        assert_eq!(get("app.compute", 1), Some((0, 1)), "{t:?}");
        let sync = targets(&trace(), 1, false, None, Mode::Cache.lag());
        let first = sync
            .iter()
            .find(|x| x.point == "app.compute" && x.hit == 1)
            .map(|x| (x.lo, x.hi));
        assert_eq!(first, Some((0, 1)));
        let after = sync
            .iter()
            .find(|x| x.point == "api.complete_output" && x.hit == 2)
            .map(|x| (x.lo, x.hi));
        assert_eq!(after, Some((1, 2)));
        // A kill in compute after ckpt.1 (before ckpt.2 starts): ckpt.1
        // synchronous, ckpt.0 (scratch) when its encode may be pending.
        let mut tr = trace();
        tr.insert(5, hit("app.step", 1, 0, 1));
        let a = targets(&tr, 1, false, None, Mode::Async.lag());
        let s = targets(&tr, 1, false, None, 0);
        let step = |v: &[Target]| {
            v.iter()
                .find(|x| x.point == "app.step")
                .map(|x| (x.lo, x.hi))
        };
        assert_eq!(step(&s), Some((1, 1)));
        assert_eq!(step(&a), Some((0, 1)));
    }

    #[test]
    fn quick_keeps_one_hit_per_point_in_a_later_checkpoint() {
        let t = targets(&trace(), 1, true, None, 0);
        let points: Vec<(&str, u64)> = t.iter().map(|x| (x.point.as_str(), x.hit)).collect();
        assert!(points.contains(&("meta.index.synced", 2)), "{points:?}");
        assert!(points.contains(&("meta.filemap.synced", 1)), "{points:?}");
        assert_eq!(t.len(), 5, "{points:?}");
    }

    #[test]
    fn postrun_targets_are_per_node_and_the_driver_s_own_points() {
        let post = |point: &str, n: u64, node: Option<&str>| TraceHit {
            point: point.into(),
            hit: n,
            rank: None,
            node: node.map(str::to_string),
            pid: 2,
            job: Some("SCR_FAULT_JOB=/tmp/x-postrun".into()),
        };
        let trace = vec![
            post("meta.index.synced", 1, None),
            post("scavenge.file", 1, Some("n1")),
            post("scavenge.file", 1, Some("n0")),
            post("scavenge.file", 2, Some("n1")),
            // A point the copies pass too: a kill by point alone could
            // strike a copy instead of the driver.
            post("meta.other.synced", 1, Some("n0")),
            post("meta.other.synced", 3, None),
        ];
        assert_eq!(trace[0].launch(), Some(0));
        let t = targets(&trace, 0, false, Some((2, 3)), 0);
        let got: Vec<(&str, u64, Option<&str>, u64, u64)> = t
            .iter()
            .map(|x| (x.point.as_str(), x.hit, x.node.as_deref(), x.lo, x.hi))
            .collect();
        assert_eq!(
            got,
            [
                ("meta.index.synced", 1, None, 2, 3),
                ("meta.other.synced", 1, Some("n0"), 2, 3),
                ("scavenge.file", 1, Some("n0"), 2, 3),
                ("scavenge.file", 2, Some("n1"), 2, 3),
            ]
        );
        let copy = t.iter().find(|x| x.point == "scavenge.file").unwrap();
        assert_eq!(
            cell_name(Mode::Cache, Phase::Scavenge, copy, Kill::Rank),
            "sweep-cache-scavenge-scavenge.file#1@n0"
        );
        // The driver's cell kills `scr postrun` itself at its point.
        let driver = &t[0];
        assert_eq!(
            cell_name(Mode::Cache, Phase::Scavenge, driver, Kill::Rank),
            "sweep-cache-scavenge-meta.index.synced#1@postrun"
        );
        let sc = scenario(Mode::Cache, Phase::Scavenge, Some(driver), Kill::Rank);
        sc.plan().validate(&sc.topology()).unwrap();
        let f = serde_json::to_value(sc.faults.last().unwrap()).unwrap();
        assert_eq!(f["what"]["kind"], "kill-postrun", "{f}");
        assert_eq!(f["when"]["at"], "postrun", "{f}");
        let spec = sc.plan().postrun_fault_plan().faults;
        assert_eq!(spec.len(), 1);
        assert_eq!((spec[0].rank, spec[0].node.as_deref()), (None, None));
        assert_eq!(spec[0].action, faultsim::runtime::Action::Kill);
        // A power loss cell cuts the power when the node's copy, or the
        // driver, reaches the point.
        for (target, node) in [(copy, Some("n0")), (driver, None)] {
            let sc = scenario(Mode::Cache, Phase::Scavenge, Some(target), Kill::Power);
            sc.plan().validate(&sc.topology()).unwrap();
            let spec = sc.plan().postrun_fault_plan().faults;
            assert_eq!(spec.len(), 1);
            assert_eq!((spec[0].rank, spec[0].node.as_deref()), (None, node));
            assert_eq!(spec[0].action, faultsim::runtime::Action::PowerLoss);
        }
        assert_eq!(
            cell_name(Mode::Cache, Phase::Scavenge, copy, Kill::Power),
            "sweep-power-cache-scavenge-scavenge.file#1@n0"
        );
    }

    #[test]
    fn a_sample_keeps_every_quick_cell_and_draws_the_others_by_its_seed() {
        let cell = |hit: u64| Planned {
            mode: Mode::Cache,
            phase: Phase::Checkpoint,
            target: Target {
                point: "meta.filemap.synced".into(),
                hit,
                rank: 0,
                node: None,
                lo: 1,
                hi: 2,
            },
            how: Kill::IoError,
        };
        let full: Vec<Planned> = (1..=40).map(cell).collect();
        let quick: Vec<bool> = (1..=40).map(|h| h % 10 == 1).collect();
        let hits = |s: Select| -> Vec<u64> {
            select_cells(full.clone(), &quick, s)
                .iter()
                .map(|p| p.target.hit)
                .collect()
        };
        assert_eq!(hits(Select::Quick), [1, 11, 21, 31]);
        assert_eq!(hits(Select::Full), (1..=40).collect::<Vec<_>>());
        let a = hits(Select::Sample { extra: 6, seed: 7 });
        assert_eq!(a.len(), 10, "{a:?}");
        assert!([1, 11, 21, 31].iter().all(|h| a.contains(h)), "{a:?}");
        assert!(a.windows(2).all(|w| w[0] < w[1]), "plan order kept: {a:?}");
        assert_eq!(a, hits(Select::Sample { extra: 6, seed: 7 }), "replayable");
        let others: Vec<Vec<u64>> = (8..12)
            .map(|seed| hits(Select::Sample { extra: 6, seed }))
            .collect();
        assert!(
            others.iter().any(|o| *o != a),
            "another seed draws other hits"
        );
        assert_eq!(
            hits(Select::Sample { extra: 99, seed: 7 }),
            hits(Select::Full),
            "more than there are: every cell"
        );
    }

    #[test]
    fn an_io_error_cell_fails_the_rank_s_io_once_and_the_application_goes_on() {
        let t = Target {
            point: "meta.filemap.synced".into(),
            hit: 8,
            rank: 2,
            node: None,
            lo: 1,
            hi: 2,
        };
        let sc = scenario(Mode::Cache, Phase::Fetch, Some(&t), Kill::IoError);
        assert_eq!(sc.app_args, ["--keep-going"]);
        let f = serde_json::to_value(sc.faults.last().expect("the cell's fault")).unwrap();
        assert_eq!(f["what"]["kind"], "io-error", "{f}");
        assert_eq!(f["what"]["error"], "enospc", "{f}");
        assert_eq!(f["when"]["point"], "meta.filemap.synced", "{f}");
        assert_eq!(f["when"]["hit"], 8, "{f}");
        assert_eq!(f["when"]["rank"], 2, "{f}");
        assert_eq!(f["run"], 2, "the fetch phase's launch: {f}");
        assert_eq!(
            cell_name(Mode::Cache, Phase::Fetch, &t, Kill::IoError),
            "sweep-io-error-cache-fetch-meta.filemap.synced#8@2"
        );
        // A kill cell's application stops at an error as before.
        let kill = scenario(Mode::Cache, Phase::Fetch, Some(&t), Kill::Rank);
        assert!(kill.app_args.is_empty());
    }

    #[test]
    fn the_rebuild_phase_loses_n1_after_the_last_checkpoint_and_hits_the_relaunch() {
        let t = Target {
            point: "rebuild.init".into(),
            hit: 1,
            rank: 3,
            node: None,
            lo: 3,
            hi: 3,
        };
        let sc = scenario(Mode::Cache, Phase::Rebuild, Some(&t), Kill::Rank);
        let faults: Vec<serde_json::Value> = sc
            .faults
            .iter()
            .map(|f| serde_json::to_value(f).unwrap())
            .collect();
        assert_eq!(faults.len(), 2, "{faults:?}");
        // The node loss: n1 (ranks 2 and 3) after checkpoint 3 of launch 1
        // (no `run`: the default, the first launch).
        assert_eq!(faults[0]["what"]["kind"], "kill-node", "{faults:?}");
        assert_eq!(faults[0]["what"]["node"], "n1", "{faults:?}");
        // Its directories are removed (the default aftermath).
        let then = &faults[0]["what"]["then"];
        assert!(then.is_null() || *then == "remove-dirs", "{faults:?}");
        assert_eq!(faults[0]["when"]["at"], "between-checkpoints");
        assert_eq!(faults[0]["when"]["after"], CHECKPOINTS);
        assert!(faults[0]["run"].is_null(), "{faults:?}");
        // The cell's kill: in the relaunch that rebuilds.
        assert_eq!(faults[1]["what"]["kind"], "kill-rank", "{faults:?}");
        assert_eq!(faults[1]["when"]["point"], "rebuild.init", "{faults:?}");
        assert_eq!(faults[1]["run"], 2, "{faults:?}");
        assert_eq!(sc.spares, 2, "a spare to rebuild onto, and one more");
        assert!(sc.env.get("SCR_FLUSH").is_some_and(|v| v == "1"));
        assert_eq!(
            cell_name(Mode::Cache, Phase::Rebuild, &t, Kill::Rank),
            "sweep-cache-rebuild-rebuild.init#1@3"
        );
        // Like fetch, the targets end at the relaunch's first write.
        let t = targets(&trace(), 2, false, Some((3, 3)), 0);
        let got: Vec<(&str, u64, u64, u64)> = t
            .iter()
            .map(|x| (x.point.as_str(), x.hit, x.lo, x.hi))
            .collect();
        assert_eq!(got, [("fetch.file", 1, 3, 3)]);
    }

    #[test]
    fn the_fetch_phase_stops_at_the_first_write_and_expects_the_fetched_one() {
        let t = targets(&trace(), 2, false, Some((2, 2)), 0);
        assert_eq!(
            t,
            [Target {
                point: "fetch.file".into(),
                hit: 1,
                rank: 0,
                node: None,
                lo: 2,
                hi: 2
            }]
        );
    }
}
