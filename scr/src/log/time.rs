//! Time in the logs: the clock the writers stamp with, and the zoned stamp
//! the text log and the databases' `time` column show ([`crate::civil`]
//! does the calendar).
//!
//! Bottom layer of `log/`: imports nothing else of the module.

use crate::clock::{Clock, SystemClock};

pub use crate::civil::{format_timestamp, local_offset_s};

/// Seconds since the Unix epoch now, from the system clock
/// ([`crate::clock`]): the one clock read of the log writers.
pub fn now_s() -> f64 {
    SystemClock.unix_s()
}
