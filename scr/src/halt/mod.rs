//! Halting a run (developer guide "Halt file"; program flow of SCR_Init,
//! SCR_Need_checkpoint and SCR_Complete_checkpoint; SCR's
//! `scr_bool_check_halt_and_decrement` and `scr_halt_sync_and_decrement`;
//! the `scr_halt` command).
//!
//! The halt file `<prefix>/.scr/halt.scr` holds the conditions under which a
//! run must stop. The library reads it on rank 0 — under the file's lock,
//! so `scr halt` may edit it while the job runs — and broadcasts the
//! decision, at three kinds of points ([`CheckAt`]):
//!
//! - SCR_Init, before the cache is rebuilt;
//! - every completed dataset; a completed *checkpoint* first decrements
//!   `CheckpointsLeft` (never below 0), so `scr halt --checkpoints 2` lets
//!   exactly two more checkpoints complete;
//! - SCR_Should_exit and SCR_Need_checkpoint (read only: a pending halt
//!   makes Need_checkpoint answer yes, so the application writes one last
//!   checkpoint before it stops).
//!
//! The conditions, in SCR's order ([`evaluate`]): the allocation ends within
//! `HaltSeconds` (`TIME_LIMIT`, the end from
//! [`crate::config::settings::HaltSettings::end_time_s`]); an `ExitReason` other
//! than `SCR_FINALIZE_CALLED`; `CheckpointsLeft` ≤ 0
//! (`NO_CHECKPOINTS_LEFT`); now ≥ `ExitBefore` − `HaltSeconds`
//! (`EXIT_BEFORE_TIME`); now ≥ `ExitAfter` (`EXIT_AFTER_TIME`). The first
//! time a check finds one, rank 0 logs a HALT event (once per run).
//!
//! With SCR_HALT_EXIT=1 a halt found at init or at a completed dataset ends
//! the job inside SCR, as SCR does: the reason is written to the halt file
//! (so a launcher does not relaunch), the caller flushes what must be
//! flushed, every rank meets in a barrier, and under MPI each process calls
//! `MPI_Finalize` and exits with status 0 ([`HaltMonitor::exit_job`]; SCR
//! 3.1 forgets MPI_Finalize). With the thread communicator, where there is
//! no process to end, the call returns [`ScrError::Halted`] on every rank.

pub mod time;

use std::path::{Path, PathBuf};

use crate::cache::Job;
use crate::error::{ScrError, ScrResult};
use crate::kvtree::file::FileLock;
use crate::log::writer::{format_timestamp, local_offset_s, Entry, EventType};
use crate::records::halt::{Halt, HALT_FILE, REASON_FINALIZE_CALLED};
use crate::records::Record;

/// `ExitReason` written when the allocation is about to end.
pub const REASON_TIME_LIMIT: &str = "TIME_LIMIT";
/// `ExitReason` written when `CheckpointsLeft` reached 0.
pub const REASON_NO_CHECKPOINTS_LEFT: &str = "NO_CHECKPOINTS_LEFT";
/// `ExitReason` written when `ExitBefore` − `HaltSeconds` passed.
pub const REASON_EXIT_BEFORE_TIME: &str = "EXIT_BEFORE_TIME";
/// `ExitReason` written when `ExitAfter` passed.
pub const REASON_EXIT_AFTER_TIME: &str = "EXIT_AFTER_TIME";
/// `ExitReason` `scr halt` sets to stop a job at its next check.
pub const REASON_JOB_HALTED: &str = "JOB_HALTED";

/// The halt file of prefix directory `prefix`.
pub fn halt_path(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join(HALT_FILE)
}

/// A halt condition that holds: SCR's reason word and what made it hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Halted {
    /// `TIME_LIMIT`, `NO_CHECKPOINTS_LEFT`, `EXIT_BEFORE_TIME`,
    /// `EXIT_AFTER_TIME`, or the `ExitReason` found in the file.
    pub reason: String,
    /// A sentence for logs and messages.
    pub detail: String,
}

impl std::fmt::Display for Halted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

/// Whether halt file `h` says the run should stop at `now_s`, given the
/// allocation's end (`end_s`, seconds since the epoch, when known). The
/// library's view: `SCR_FINALIZE_CALLED` left by an earlier run is not a
/// reason (a launcher's view, [`Halt::halt_reason`], counts it).
pub fn evaluate(h: &Halt, now_s: i64, end_s: Option<i64>) -> Option<Halted> {
    let halt_s = h.halt_seconds_s.unwrap_or(0).max(0);
    let hit = |reason: &str, detail: String| {
        Some(Halted {
            reason: reason.to_string(),
            detail,
        })
    };
    if let (true, Some(end)) = (halt_s > 0, end_s) {
        let remaining_s = end.saturating_sub(now_s).max(0);
        if remaining_s <= halt_s {
            return hit(
                REASON_TIME_LIMIT,
                format!(
                    "{remaining_s} s left in the allocation (ends at {end}), HaltSeconds is {halt_s}"
                ),
            );
        }
    }
    if let Some(r) = h
        .exit_reason
        .as_deref()
        .filter(|r| !r.is_empty() && *r != REASON_FINALIZE_CALLED)
    {
        return hit(r, format!("ExitReason {r} is set in the halt file"));
    }
    if let Some(n) = h.checkpoints_left.filter(|n| *n <= 0) {
        return hit(
            REASON_NO_CHECKPOINTS_LEFT,
            format!("CheckpointsLeft is {n}"),
        );
    }
    if let Some(before) = h.exit_before_s {
        if now_s >= before.saturating_sub(halt_s) {
            return hit(
                REASON_EXIT_BEFORE_TIME,
                format!("now ({now_s}) >= ExitBefore ({before}) - HaltSeconds ({halt_s})"),
            );
        }
    }
    if let Some(after) = h.exit_after_s {
        if now_s >= after {
            return hit(
                REASON_EXIT_AFTER_TIME,
                format!("now ({now_s}) >= ExitAfter ({after})"),
            );
        }
    }
    None
}

/// Where a halt check is made (SCR's `halt_cond` and `decrement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckAt {
    /// SCR_Init, before the cache is rebuilt.
    Init,
    /// A dataset completed successfully; `checkpoint` when it is one
    /// (only checkpoints decrement `CheckpointsLeft`).
    Complete {
        /// The dataset is a checkpoint.
        checkpoint: bool,
    },
    /// SCR_Should_exit.
    ShouldExit,
    /// SCR_Need_checkpoint.
    NeedCheckpoint,
}

impl CheckAt {
    /// Whether a halt found here ends the job when SCR_HALT_EXIT=1
    /// (SCR_TEST_AND_HALT).
    pub fn may_exit(self) -> bool {
        matches!(self, CheckAt::Init | CheckAt::Complete { .. })
    }

    fn decrements(self) -> bool {
        matches!(self, CheckAt::Complete { checkpoint: true })
    }
}

/// Rank 0's halt bookkeeping during a run (SCR's `scr_halt_hash` and
/// friends). Every method taking a [`Job`] is collective.
#[derive(Debug, Default)]
pub struct HaltMonitor {
    /// `<prefix>/.scr/halt.scr`; `None` when SCR is disabled.
    path: Option<PathBuf>,
    /// The prefix directory: the halt file is reached from it without
    /// passing through a symbolic link.
    prefix: PathBuf,
    /// The allocation's end, seconds since the epoch.
    end_s: Option<i64>,
    /// SCR_HALT_EXIT.
    exit: bool,
    /// A HALT event was logged.
    logged: bool,
    /// A warning about an unreadable halt file was printed.
    warned: bool,
    /// The answer of the latest check.
    last: Option<Halted>,
}

impl HaltMonitor {
    /// Prepare the halt file for a new run (SCR_Init "allocate a hash to
    /// hold halt status, and initialize halt seconds if needed"). Rank 0,
    /// under the lock: drops `SCR_FINALIZE_CALLED` left by a run that
    /// finalised (it must not stop this one, nor keep a launcher from
    /// relaunching this one after a failure), and records SCR_HALT_SECONDS
    /// as `HaltSeconds` when the file has none (a value set with
    /// `scr halt --seconds` wins). A damaged halt file is a warning: the
    /// run goes on, the file is left as it is. Collective only in that every
    /// rank reads the same configuration.
    pub fn init(job: &Job) -> ScrResult<HaltMonitor> {
        let halt_seconds = job.settings.halt.before_end_s;
        let mut m = HaltMonitor {
            path: Some(halt_path(&job.prefix)),
            prefix: job.prefix.clone(),
            end_s: job.settings.halt.end_time_s,
            exit: job.settings.halt.exit,
            logged: false,
            warned: false,
            last: None,
        };
        if job.rank().is_root() {
            let seconds = i64::try_from(halt_seconds).unwrap_or(i64::MAX);
            let prepared = m.locked(|h| {
                let mut changed = false;
                if h.exit_reason.as_deref() == Some(REASON_FINALIZE_CALLED) {
                    h.exit_reason = None;
                    changed = true;
                }
                if seconds > 0 && h.halt_seconds_s.is_none() {
                    h.halt_seconds_s = Some(seconds);
                    changed = true;
                }
                changed
            });
            if let Err(e) = prepared {
                m.warn(&e);
            }
        }
        Ok(m)
    }

    /// The halt file, when SCR is enabled.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn warn(&mut self, e: &ScrError) {
        if !self.warned {
            eprintln!("SCR: warning: halt file: {e} (halt conditions are not checked until it is readable; fix or remove it with `scr halt`)");
            self.warned = true;
        }
    }

    /// Read the halt file under its lock, let `f` change it, write it back
    /// only when `f` says it changed something. A missing file reads empty.
    fn locked<R>(&self, f: impl FnOnce(&mut Halt) -> R) -> ScrResult<R>
    where
        R: Changed,
    {
        let Some(path) = &self.path else {
            return Ok(f(&mut Halt::default()));
        };
        let base = Some(self.prefix.as_path());
        let _lock = FileLock::acquire_in(base, path).map_err(crate::records::RecordError::from)?;
        let mut h = match Halt::read_file_in(&self.prefix, path) {
            Ok(h) => h,
            Err(e) if e.is_not_found() => Halt::default(),
            Err(e) => return Err(e.into()),
        };
        let r = f(&mut h);
        if r.changed() {
            h.write_file_in(&self.prefix, path)?;
        }
        Ok(r)
    }

    /// Check the halt conditions at `at` (`scr_bool_check_halt_and_decrement`):
    /// rank 0 reads the halt file under its lock (after a completed
    /// checkpoint it decrements `CheckpointsLeft` there), evaluates it and
    /// broadcasts the answer; the first halt found is logged (HALT, rank 0).
    /// With SCR_HALT_EXIT=1 and `at.may_exit()`, rank 0 also records the
    /// reason as `ExitReason`. Returns the same on every rank: `Some` when
    /// the run must stop — the caller then flushes the newest checkpoint
    /// and, where `at.may_exit()`, calls [`HaltMonitor::exit_job`].
    pub fn check(&mut self, job: &Job, at: CheckAt) -> ScrResult<Option<Halted>> {
        let mut found: Option<Halted> = None;
        if job.rank().is_root() && self.path.is_some() {
            let (end_s, record) = (self.end_s, self.exit && at.may_exit());
            // Judged by the job's clock (a test's manual clock included).
            let now_s = job.clock.unix_secs();
            let checked = self.locked(|h| {
                let mut changed = false;
                if at.decrements() {
                    if let Some(n) = h.checkpoints_left.filter(|n| *n > 0) {
                        h.checkpoints_left = Some(n - 1);
                        changed = true;
                    }
                }
                let halted = evaluate(h, now_s, end_s);
                if let (true, Some(hd)) = (record, &halted) {
                    if h.exit_reason.as_deref() != Some(hd.reason.as_str()) {
                        h.exit_reason = Some(hd.reason.clone());
                        changed = true;
                    }
                }
                (changed, halted)
            });
            match checked {
                Ok((_, h)) => found = h,
                Err(e) => self.warn(&e),
            }
        }
        // Rank 0's answer: empty = no halt; else reason NUL detail.
        let mut buf = found
            .as_ref()
            .map(|h| format!("{}\0{}", h.reason, h.detail).into_bytes())
            .unwrap_or_default();
        job.world.bcast_bytes(0, &mut buf)?;
        let answer = (!buf.is_empty()).then(|| {
            let text = String::from_utf8_lossy(&buf);
            let (reason, detail) = text.split_once('\0').unwrap_or((&text, ""));
            Halted {
                reason: reason.to_string(),
                detail: detail.to_string(),
            }
        });
        if let (Some(h), false) = (&answer, self.logged) {
            job.log(Entry::event(EventType::Halt).note(h.to_string()));
            self.logged = true;
        }
        self.last.clone_from(&answer);
        Ok(answer)
    }

    /// The answer of the latest check (the same on every rank): `Some`
    /// while a halt is pending.
    pub fn last(&self) -> Option<&Halted> {
        self.last.as_ref()
    }

    /// Whether a halt found where `at` is ends the job inside SCR
    /// (SCR_HALT_EXIT=1 at init or at a completed dataset).
    pub fn exits_at(&self, at: CheckAt) -> bool {
        self.exit && at.may_exit()
    }

    /// End the job after a halt (SCR_HALT_EXIT=1), once the caller has
    /// flushed: barrier, release `job` (its communicators), then under MPI
    /// `MPI_Finalize` and `exit(0)` on every process. Without MPI (the
    /// thread communicator) nothing can be ended: every rank gets
    /// [`ScrError::Halted`] instead.
    /// Returns only without MPI, or when the barrier fails: the error for
    /// the caller to return.
    pub fn exit_job(job: Job, halted: &Halted) -> ScrError {
        if let Err(e) = job.world.barrier() {
            return e.into();
        }
        drop(job);
        #[cfg(feature = "mpi")]
        if crate::comm::mpi::mpi_is_active() {
            crate::comm::mpi::finalize_and_exit(0);
        }
        ScrError::Halted {
            reason: halted.to_string(),
        }
    }
}

/// What a locked update reports: whether the file must be written.
trait Changed {
    fn changed(&self) -> bool;
}

impl Changed for bool {
    fn changed(&self) -> bool {
        *self
    }
}

impl<T> Changed for (bool, T) {
    fn changed(&self) -> bool {
        self.0
    }
}

/// The edits `scr halt` makes (`scr_halt_cntl`'s set and unset flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaltEdit {
    /// `--checkpoints N`: set `CheckpointsLeft`.
    pub checkpoints: Option<i64>,
    /// `--before TIME`: set `ExitBefore` (seconds since the epoch).
    pub before_s: Option<i64>,
    /// `--after TIME`: set `ExitAfter`.
    pub after_s: Option<i64>,
    /// `--seconds N`: set `HaltSeconds`.
    pub seconds: Option<i64>,
    /// `--immediate` (or no condition at all): set `ExitReason`.
    pub reason: Option<String>,
    /// `--unset-checkpoints`.
    pub unset_checkpoints: bool,
    /// `--unset-before`.
    pub unset_before: bool,
    /// `--unset-after`.
    pub unset_after: bool,
    /// `--unset-seconds`.
    pub unset_seconds: bool,
    /// `--unset-reason`.
    pub unset_reason: bool,
}

impl HaltEdit {
    /// Whether the edit changes nothing (a bare `scr halt` then halts the
    /// job: `ExitReason` `JOB_HALTED`, as `scr_halt` does).
    pub fn is_empty(&self) -> bool {
        *self == HaltEdit::default()
    }

    /// Field names set and unset at once (a usage error).
    pub fn conflicts(&self) -> Vec<&'static str> {
        [
            (
                "checkpoints",
                self.checkpoints.is_some() && self.unset_checkpoints,
            ),
            ("before", self.before_s.is_some() && self.unset_before),
            ("after", self.after_s.is_some() && self.unset_after),
            ("seconds", self.seconds.is_some() && self.unset_seconds),
            ("reason", self.reason.is_some() && self.unset_reason),
        ]
        .into_iter()
        .filter_map(|(n, c)| c.then_some(n))
        .collect()
    }

    /// Apply to `h`; returns a line per field touched (`Setting
    /// CheckpointsLeft`, `Unsetting ExitBefore`, …, in `scr_halt_cntl`'s
    /// order).
    pub fn apply(&self, h: &mut Halt) -> Vec<String> {
        let mut said = Vec::new();
        let mut edit = |name: &str, set: Option<()>, unset: bool| {
            if set.is_some() {
                said.push(format!("Setting {name}"));
            } else if unset {
                said.push(format!("Unsetting {name}"));
            }
        };
        edit(
            "CheckpointsLeft",
            self.checkpoints.map(|_| ()),
            self.unset_checkpoints,
        );
        edit("ExitAfter", self.after_s.map(|_| ()), self.unset_after);
        edit("ExitBefore", self.before_s.map(|_| ()), self.unset_before);
        edit("HaltSeconds", self.seconds.map(|_| ()), self.unset_seconds);
        edit(
            "ExitReason",
            self.reason.as_ref().map(|_| ()),
            self.unset_reason,
        );
        fn one<T: Clone>(field: &mut Option<T>, set: &Option<T>, unset: bool) {
            if let Some(v) = set {
                *field = Some(v.clone());
            } else if unset {
                *field = None;
            }
        }
        one(
            &mut h.checkpoints_left,
            &self.checkpoints,
            self.unset_checkpoints,
        );
        one(&mut h.exit_after_s, &self.after_s, self.unset_after);
        one(&mut h.exit_before_s, &self.before_s, self.unset_before);
        one(&mut h.halt_seconds_s, &self.seconds, self.unset_seconds);
        one(&mut h.exit_reason, &self.reason, self.unset_reason);
        said
    }

    /// Apply to the halt file at `path` under its lock (creating the file
    /// when missing; its directory must exist) and return the lines of
    /// [`HaltEdit::apply`] and the file's new contents.
    /// The file is reached from `prefix` without passing through a
    /// symbolic link below it.
    pub fn apply_to_file(
        &self,
        prefix: &Path,
        path: &Path,
    ) -> Result<Applied, crate::records::RecordError> {
        Halt::update_file_in(prefix, path, |h: &mut Halt| Applied {
            changes: self.apply(h),
            halt: h.clone(),
        })
    }
}

/// What [`HaltEdit::apply_to_file`] did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// One line per change, as `scr_halt` prints them.
    pub changes: Vec<String>,
    /// The halt file's contents after the edit.
    pub halt: Halt,
}

/// `t` as local time with its offset and the raw seconds.
fn show_time(t: i64) -> String {
    // "2026-11-22T14:00:00.000+01:00" without the milliseconds.
    let stamp = format_timestamp(t as f64, local_offset_s(t));
    let short = match stamp.split_once('.') {
        Some((date, rest)) => format!("{date}{}", rest.get(3..).unwrap_or_default()),
        None => stamp,
    };
    format!("{short} ({t})")
}

/// The halt file's settings as `scr_halt --list` prints them (`None` when
/// there are none), with local times.
pub fn describe(path: &Path, h: &Halt) -> String {
    let mut out = format!("Halt file settings for {}:\n", path.display());
    let mut any = false;
    let mut line = |k: &str, v: String| {
        out.push_str(&format!("  {k:<17} {v}\n"));
        any = true;
    };
    if let Some(r) = &h.exit_reason {
        line("ExitReason:", r.clone());
    }
    if let Some(n) = h.checkpoints_left {
        line("CheckpointsLeft:", n.to_string());
    }
    if let Some(t) = h.exit_after_s {
        line("ExitAfter:", show_time(t));
    }
    if let Some(t) = h.exit_before_s {
        line("ExitBefore:", show_time(t));
    }
    if let Some(s) = h.halt_seconds_s {
        line("HaltSeconds:", s.to_string());
    }
    if let (Some(b), Some(s)) = (h.exit_before_s, h.halt_seconds_s) {
        line("ExitBefore - HaltSeconds:", show_time(b.saturating_sub(s)));
    }
    if !any {
        out.push_str("  None\n");
    }
    out
}

/// The halt file's settings as JSON (`scr halt --list --json`): the five
/// fields (null when unset), when `ExitBefore` takes effect, and what a
/// running job would conclude now (`halt_now`, without the allocation's
/// end, which only the job knows).
pub fn to_json(path: &Path, exists: bool, h: &Halt, now_s: i64) -> serde_json::Value {
    serde_json::json!({
        "file": path.display().to_string(),
        "exists": exists,
        "checkpoints_left": h.checkpoints_left,
        "exit_after_s": h.exit_after_s,
        "exit_before_s": h.exit_before_s,
        "halt_seconds_s": h.halt_seconds_s,
        "exit_reason": h.exit_reason,
        "exit_before_minus_halt_seconds_s": h
            .exit_before_s
            .map(|b| b.saturating_sub(h.halt_seconds_s.unwrap_or(0))),
        "halt_now": evaluate(h, now_s, None).map(|x| serde_json::json!({
            "reason": x.reason,
            "detail": x.detail,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halt(f: impl FnOnce(&mut Halt)) -> Halt {
        let mut h = Halt::default();
        f(&mut h);
        h
    }

    fn reason(h: &Halt, now: i64, end: Option<i64>) -> Option<String> {
        evaluate(h, now, end).map(|x| x.reason)
    }

    #[test]
    fn nothing_set_never_halts() {
        assert_eq!(reason(&Halt::default(), 0, None), None);
        assert_eq!(reason(&Halt::default(), i64::MAX, Some(1)), None);
    }

    #[test]
    fn each_condition_fires_exactly_at_its_boundary() {
        let h = halt(|h| h.checkpoints_left = Some(1));
        assert_eq!(reason(&h, 0, None), None);
        let h = halt(|h| h.checkpoints_left = Some(0));
        assert_eq!(
            reason(&h, 0, None).as_deref(),
            Some(REASON_NO_CHECKPOINTS_LEFT)
        );
        let h = halt(|h| h.checkpoints_left = Some(-3));
        assert_eq!(
            reason(&h, 0, None).as_deref(),
            Some(REASON_NO_CHECKPOINTS_LEFT)
        );

        let h = halt(|h| h.exit_after_s = Some(1000));
        assert_eq!(reason(&h, 999, None), None);
        assert_eq!(
            reason(&h, 1000, None).as_deref(),
            Some(REASON_EXIT_AFTER_TIME)
        );

        let h = halt(|h| {
            h.exit_before_s = Some(1000);
            h.halt_seconds_s = Some(100);
        });
        assert_eq!(reason(&h, 899, None), None);
        assert_eq!(
            reason(&h, 900, None).as_deref(),
            Some(REASON_EXIT_BEFORE_TIME)
        );
        let h = halt(|h| h.exit_before_s = Some(1000));
        assert_eq!(reason(&h, 999, None), None, "no HaltSeconds: margin 0");
        assert_eq!(
            reason(&h, 1000, None).as_deref(),
            Some(REASON_EXIT_BEFORE_TIME)
        );

        let h = halt(|h| h.exit_reason = Some("operator".into()));
        assert_eq!(reason(&h, 0, None).as_deref(), Some("operator"));
    }

    #[test]
    fn halt_seconds_against_the_allocation_end() {
        let h = halt(|h| h.halt_seconds_s = Some(600));
        assert_eq!(reason(&h, 10_000, None), None, "end unknown");
        assert_eq!(reason(&h, 10_000, Some(10_601)), None);
        assert_eq!(
            reason(&h, 10_000, Some(10_600)).as_deref(),
            Some(REASON_TIME_LIMIT)
        );
        // Past the end: still a halt (remaining clamps at 0).
        assert_eq!(
            reason(&h, 20_000, Some(10_600)).as_deref(),
            Some(REASON_TIME_LIMIT)
        );
        // HaltSeconds 0 disables the time limit.
        let h = halt(|h| h.halt_seconds_s = Some(0));
        assert_eq!(reason(&h, 20_000, Some(10_600)), None);
    }

    #[test]
    fn finalize_called_and_empty_reasons_do_not_halt_a_run() {
        let h = halt(|h| h.exit_reason = Some(REASON_FINALIZE_CALLED.into()));
        assert_eq!(reason(&h, 0, None), None);
        assert!(h.halt_reason(0).is_some(), "a launcher still sees it");
        let h = halt(|h| h.exit_reason = Some(String::new()));
        assert_eq!(reason(&h, 0, None), None);
    }

    #[test]
    fn scr_order_decides_which_reason_is_reported() {
        let h = halt(|h| {
            h.checkpoints_left = Some(0);
            h.exit_after_s = Some(0);
            h.exit_reason = Some("operator".into());
            h.halt_seconds_s = Some(10);
        });
        assert_eq!(reason(&h, 5, Some(10)).as_deref(), Some(REASON_TIME_LIMIT));
        assert_eq!(reason(&h, 5, None).as_deref(), Some("operator"));
    }

    #[test]
    fn edits_set_unset_and_report_in_scr_order() {
        let mut h = halt(|h| {
            h.exit_after_s = Some(5);
            h.exit_reason = Some("x".into());
        });
        let e = HaltEdit {
            checkpoints: Some(2),
            before_s: Some(100),
            seconds: Some(10),
            unset_after: true,
            unset_reason: true,
            ..HaltEdit::default()
        };
        assert!(e.conflicts().is_empty() && !e.is_empty());
        let said = e.apply(&mut h);
        assert_eq!(
            said,
            [
                "Setting CheckpointsLeft",
                "Unsetting ExitAfter",
                "Setting ExitBefore",
                "Setting HaltSeconds",
                "Unsetting ExitReason"
            ]
        );
        assert_eq!(
            h,
            halt(|h| {
                h.checkpoints_left = Some(2);
                h.exit_before_s = Some(100);
                h.halt_seconds_s = Some(10);
            })
        );
        let bad = HaltEdit {
            seconds: Some(1),
            unset_seconds: true,
            ..HaltEdit::default()
        };
        assert_eq!(bad.conflicts(), ["seconds"]);
        assert!(HaltEdit::default().is_empty());
    }

    #[test]
    fn describe_lists_what_is_set() {
        let p = Path::new("/p/.scr/halt.scr");
        assert_eq!(
            describe(p, &Halt::default()),
            "Halt file settings for /p/.scr/halt.scr:\n  None\n"
        );
        let h = halt(|h| {
            h.checkpoints_left = Some(3);
            h.exit_reason = Some("JOB_HALTED".into());
        });
        assert_eq!(
            describe(p, &h),
            "Halt file settings for /p/.scr/halt.scr:\n  ExitReason:       JOB_HALTED\n  CheckpointsLeft:  3\n"
        );
        let h = halt(|h| {
            h.exit_before_s = Some(1000);
            h.halt_seconds_s = Some(100);
        });
        let text = describe(p, &h);
        assert!(text.contains("(1000)") && text.contains("(900)"), "{text}");
        let j = to_json(p, true, &h, 950);
        assert_eq!(j["exit_before_minus_halt_seconds_s"], 900);
        assert_eq!(j["halt_now"]["reason"], REASON_EXIT_BEFORE_TIME);
        assert_eq!(j["checkpoints_left"], serde_json::Value::Null);
    }
}
