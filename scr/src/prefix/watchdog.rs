//! The flush watchdog (SCR_WATCHDOG_TIMEOUT, SCR_WATCHDOG_TIMEOUT_PFS): a
//! copy to the prefix that makes no progress — not one chunk read,
//! written or read back — for the bound is abandoned. The waiting rank
//! reports it ([`CopyError::Stalled`]), the flush fails on every rank as
//! any failed flush does (no COMPLETE in the index, the cached copy kept),
//! and the stuck thread is told to stop at its next chunk. A thread
//! blocked inside a system call cannot be stopped from outside; it is left
//! to finish or to die with the process, and never writes metadata.
//!
//! LLNL's SCR leaves this to its run script's watchdog, which kills the
//! whole job when it stops making progress (docs/decisions.md): here the
//! job goes on and keeps its cached checkpoint.
//!
//! The bound is on another thread's progress, so it reads the system's
//! monotonic clock (as every bound on other threads does, docs/decisions.md
//! "Boundaries"), not the job's policy clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::CopyError;

/// How often the waiting rank looks at the copy's progress.
const POLL: Duration = Duration::from_millis(20);

/// Progress of a copy, shared between the copying thread and its watcher.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    steps: AtomicU64,
    cancelled: AtomicBool,
}

impl Progress {
    /// A new, shareable progress counter.
    pub(crate) fn shared() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    /// One more chunk or file done.
    pub(crate) fn advance(&self) {
        self.steps.fetch_add(1, Ordering::Relaxed);
    }

    /// `Err(Cancelled)` once the watcher gave up on this copy.
    pub(crate) fn check_cancelled(&self) -> Result<(), CopyError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(CopyError::Cancelled);
        }
        Ok(())
    }

    fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }
}

/// The watchdog's bound: seconds, and whether it came from the `_PFS`
/// parameter (for the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    pub secs: u64,
    pub pfs: bool,
}

impl Bound {
    /// The bound `settings` set for flushes, if any.
    pub(crate) fn of(settings: &crate::config::Settings) -> Option<Bound> {
        let run = &settings.run;
        run.flush_watchdog_s().map(|secs| Bound {
            secs,
            pfs: run.watchdog_timeout_pfs_s.is_some_and(|s| s > 0),
        })
    }
}

/// Wait for the copy in `handle`: its result, or with a bound, a
/// [`CopyError::Stalled`] once `progress` has not moved for that long
/// (the thread is then cancelled and detached).
pub(crate) fn wait<T>(
    handle: JoinHandle<Result<T, CopyError>>,
    progress: &Progress,
    bound: Option<Bound>,
) -> Result<T, CopyError> {
    let Some(b) = bound else {
        return handle.join().unwrap_or(Err(CopyError::ThreadPanicked));
    };
    let limit = Duration::from_secs(b.secs);
    let mut seen = progress.steps();
    let mut since = Instant::now();
    // Bounded: each pass either returns or moves toward `limit` without
    // progress; progress resets the bound, as a watchdog's does.
    loop {
        if handle.is_finished() {
            return handle.join().unwrap_or(Err(CopyError::ThreadPanicked));
        }
        let now = progress.steps();
        if now != seen {
            seen = now;
            since = Instant::now();
        } else if since.elapsed() >= limit {
            progress.cancelled.store(true, Ordering::Relaxed);
            return Err(CopyError::Stalled {
                secs: b.secs,
                pfs: b.pfs,
            });
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_without_progress_is_abandoned_and_cancelled() {
        let p = Progress::shared();
        let p2 = p.clone();
        let h = std::thread::spawn(move || {
            // Stuck: never advances, stops once cancelled (bounded).
            for _ in 0..500 {
                p2.check_cancelled()?;
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(7u8)
        });
        let r = wait(h, &p, Some(Bound { secs: 0, pfs: true }));
        assert!(
            matches!(r, Err(CopyError::Stalled { secs: 0, pfs: true })),
            "{r:?}"
        );
        assert!(p.check_cancelled().is_err());
    }

    #[test]
    fn a_copy_that_progresses_is_waited_for() {
        let p = Progress::shared();
        let p2 = p.clone();
        let h = std::thread::spawn(move || {
            for _ in 0..5 {
                p2.advance();
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(3u8)
        });
        assert_eq!(
            wait(
                h,
                &p,
                Some(Bound {
                    secs: 5,
                    pfs: false
                })
            )
            .unwrap(),
            3
        );
        let h = std::thread::spawn(|| Ok(4u8));
        assert_eq!(wait(h, &p, None).unwrap(), 4);
    }
}
