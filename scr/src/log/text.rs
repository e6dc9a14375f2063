//! The text log sink: `<prefix>/.scr/log`, one line per entry
//! ([`super::format`]).
//!
//! The file is opened with `O_APPEND` and each line goes out in one
//! `write()`, so lines of concurrent writers (several jobs sharing a
//! prefix, a launcher script) never interleave.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::event::{Entry, Stamp};
use super::format::format_stamped;
use super::sink::{LogSink, LogWriteError, Target};

/// Name of the text log below `<prefix>/.scr/`.
pub const LOG_FILE: &str = "log";

/// Path of the text log of `prefix`.
pub fn log_path(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join(LOG_FILE)
}

/// The text log of one prefix, open for appending.
#[derive(Debug)]
pub struct TextSink {
    path: PathBuf,
    file: File,
}

impl TextSink {
    /// Open `<prefix>/.scr/log` for appending, created (mode 0644 less the
    /// umask) when missing.
    pub fn open(prefix: &Path) -> Result<TextSink, LogWriteError> {
        let path = log_path(prefix);
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&path)
            .map_err(|source| LogWriteError::Open {
                path: path.clone(),
                source,
            })?;
        Ok(TextSink { path, file })
    }
}

impl LogSink for TextSink {
    fn target(&self) -> Target {
        Target::Text(self.path.clone())
    }

    fn write(&mut self, stamp: &Stamp<'_>, entry: &Entry) -> Result<(), LogWriteError> {
        let mut buf = format_stamped(stamp, entry).into_bytes();
        buf.push(b'\n');
        let werr = |source| LogWriteError::Write {
            path: self.path.clone(),
            source,
        };
        // One write() of the whole line: with O_APPEND the kernel puts it at
        // the end in one piece. A short write (disk full) appends the rest
        // rather than lose it.
        let n = self.file.write(&buf).map_err(werr)?;
        if n < buf.len() {
            self.file.write_all(&buf[n..]).map_err(werr)?;
        }
        Ok(())
    }
}
