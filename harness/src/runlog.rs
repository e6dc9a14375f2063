//! The run loop's log entries: the library's own
//! ([`scr::runloop::runlog`]), shared with `scr run`.

pub use scr::runloop::runlog::*;
