//! The one reading of "now" (as turmoil and madsim do it): every time a
//! policy depends on — Need_checkpoint's SCR_CHECKPOINT_SECONDS and
//! SCR_CHECKPOINT_OVERHEAD, the halt conditions (SCR_HALT_SECONDS, ExitBefore,
//! ExitAfter), the flush bandwidth throttle (SCR_FLUSH_ASYNC_BW and
//! SCR_FLUSH_ASYNC_PERCENT), timestamps written into the index and flush
//! file, the durations logged — comes from a [`Clock`].
//!
//! Production uses [`SystemClock`]; a test hands a [`ManualClock`] to
//! [`crate::InitOptions`] (or to the function under test) and advances it,
//! so a policy that waits an hour is tested in no time and without timed
//! assertions. Only pure bounded waits on other processes or threads (the
//! thread communicator's deadlock bound, the fault runtime's co-timing) read
//! the system's monotonic clock directly: no policy depends on them.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A monotonic reading of a [`Clock`]: time since the clock's origin. Only
/// differences between two readings of the same clock mean something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tick(Duration);

impl Tick {
    /// The time from `earlier` to `self` (zero when `earlier` is later).
    pub fn since(self, earlier: Tick) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The reading `d` after this one.
    pub fn after(self, d: Duration) -> Tick {
        Tick(self.0.saturating_add(d))
    }
}

/// A source of wall time and monotonic time, and a way to wait.
pub trait Clock: fmt::Debug + Send + Sync {
    /// Wall time: the time since the Unix epoch (zero before it).
    fn unix(&self) -> Duration;

    /// Monotonic time: never goes back, unaffected by changes of the wall clock.
    fn now(&self) -> Tick;

    /// Wait `d` (a manual clock advances by `d` instead of sleeping).
    fn sleep(&self, d: Duration);

    /// Wall time in seconds since the epoch (log timestamps).
    fn unix_s(&self) -> f64 {
        self.unix().as_secs_f64()
    }

    /// Wall time in whole seconds since the epoch (halt conditions, the
    /// timestamps of the index and flush file).
    fn unix_secs(&self) -> i64 {
        i64::try_from(self.unix().as_secs()).unwrap_or(i64::MAX)
    }

    /// Time since `earlier`, a reading of this clock.
    fn elapsed(&self, earlier: Tick) -> Duration {
        self.now().since(earlier)
    }
}

/// A shared clock, as the library holds one.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// The origin of [`SystemClock`]'s monotonic readings: the first reading
/// in this process.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for SystemClock {
    fn unix(&self) -> Duration {
        // A wall clock set before 1970 reads as the epoch: timestamps then
        // say 0, which every reader shows as obviously wrong.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }

    fn now(&self) -> Tick {
        let origin = origin();
        Tick(Instant::now().saturating_duration_since(origin))
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The system clock as a [`SharedClock`] (one allocation per process).
pub fn system() -> SharedClock {
    static SYSTEM: OnceLock<SharedClock> = OnceLock::new();
    SYSTEM.get_or_init(|| Arc::new(SystemClock)).clone()
}

/// A clock that moves only when told: [`ManualClock::advance`], or a
/// [`Clock::sleep`] (which advances it at once). For tests of time-driven
/// policies.
#[derive(Debug)]
pub struct ManualClock {
    state: Mutex<ManualState>,
}

#[derive(Debug, Clone, Copy)]
struct ManualState {
    unix: Duration,
    mono: Duration,
}

impl ManualClock {
    /// A clock whose wall time is `unix_s` seconds after the epoch and whose
    /// monotonic reading starts at zero.
    pub fn at_unix_s(unix_s: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            state: Mutex::new(ManualState {
                unix: Duration::from_secs(unix_s),
                mono: Duration::ZERO,
            }),
        })
    }

    /// Move both readings forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut s = self.lock();
        s.unix = s.unix.saturating_add(d);
        s.mono = s.mono.saturating_add(d);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // The state is two plain numbers: a panic elsewhere cannot leave it
        // half-updated, so a poisoned lock is still good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Clock for ManualClock {
    fn unix(&self) -> Duration {
        self.lock().unix
    }

    fn now(&self) -> Tick {
        Tick(self.lock().mono)
    }

    fn sleep(&self, d: Duration) {
        self.advance(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_or_slept() {
        let c = ManualClock::at_unix_s(1_000);
        let t0 = c.now();
        assert_eq!((c.unix_secs(), c.elapsed(t0)), (1_000, Duration::ZERO));
        c.advance(Duration::from_millis(1_500));
        c.sleep(Duration::from_secs(2));
        assert_eq!(c.elapsed(t0), Duration::from_millis(3_500));
        assert_eq!(c.unix_secs(), 1_003);
        assert!((c.unix_s() - 1_003.5).abs() < 1e-9);
        // Readings of the past never run backwards into negative time.
        assert_eq!(t0.since(c.now()), Duration::ZERO);
    }

    #[test]
    fn the_system_clock_is_monotonic_and_after_the_epoch() {
        let c = system();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        // Any date after this code was written.
        assert!(c.unix_secs() > 1_700_000_000);
    }
}
