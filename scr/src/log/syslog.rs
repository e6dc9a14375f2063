//! The syslog sink: each entry's text log line, at LOG_LOCAL7 | LOG_INFO,
//! prefixed "SCR" (developer guide, "Logging").
//!
//! Through `libc::syslog` with the fixed format `"%s"`: the message is
//! data, never a format string. The process's openlog() settings are left
//! alone (they belong to the application).

use std::ffi::CString;

use super::event::{Entry, Stamp};
use super::format::format_stamped;
use super::sink::{LogSink, LogWriteError, Target};

/// The system log. Sending cannot fail in a way the caller could act on,
/// so writing always succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyslogSink;

impl LogSink for SyslogSink {
    fn target(&self) -> Target {
        Target::Syslog
    }

    fn write(&mut self, stamp: &Stamp<'_>, entry: &Entry) -> Result<(), LogWriteError> {
        send(&format_stamped(stamp, entry));
        Ok(())
    }
}

/// Send one message as "SCR <line>".
fn send(line: &str) {
    let msg = format!("SCR {line}").replace('\0', " ");
    let Ok(msg) = CString::new(msg) else {
        return;
    };
    // SAFETY: both pointers are valid NUL-terminated strings for the
    // duration of the call, and the format "%s" consumes exactly the one
    // string argument given.
    unsafe {
        libc::syslog(
            libc::LOG_LOCAL7 | libc::LOG_INFO,
            c"%s".as_ptr(),
            msg.as_ptr(),
        );
    }
}
