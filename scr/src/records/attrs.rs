//! A file's metadata as SCR_COPY_METADATA records it beside a file's size
//! and CRC32 (LLNL's meta keys `MODE`, `UID`, `GID`, `ATIME_SECS`,
//! `ATIME_NSECS`, `MTIME_SECS`, `MTIME_NSECS`; `MODE` is the whole
//! `st_mode` in decimal, as LLNL writes it).

use super::{Node, RecordError};
use crate::kvtree::KvTree;

/// Mode, owner and times of a file (`stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAttrs {
    /// `MODE`: `st_mode` (type and permission bits).
    pub mode: u32,
    /// `UID`: owner.
    pub uid: u32,
    /// `GID`: group.
    pub gid: u32,
    /// `ATIME_SECS`, `ATIME_NSECS`: last access.
    pub atime: (i64, i64),
    /// `MTIME_SECS`, `MTIME_NSECS`: last modification.
    pub mtime: (i64, i64),
}

impl FileAttrs {
    /// Read from the keys of `n`; `None` when `MODE` is absent (recorded
    /// without SCR_COPY_METADATA).
    pub(crate) fn from_node(n: &Node<'_>) -> Result<Option<FileAttrs>, RecordError> {
        let Some(mode) = n.opt_u64("MODE")? else {
            return Ok(None);
        };
        let small = |key: &str| -> Result<u32, RecordError> {
            let v = n.opt_u64(key)?.unwrap_or(0);
            u32::try_from(v).map_err(|_| n.inconsistent(key, "does not fit 32 bits"))
        };
        let time = |secs: &str, nsecs: &str| -> Result<(i64, i64), RecordError> {
            Ok((
                n.opt_i64(secs)?.unwrap_or(0),
                n.opt_i64(nsecs)?.unwrap_or(0),
            ))
        };
        Ok(Some(FileAttrs {
            mode: u32::try_from(mode)
                .map_err(|_| n.inconsistent("MODE", "does not fit 32 bits"))?,
            uid: small("UID")?,
            gid: small("GID")?,
            atime: time("ATIME_SECS", "ATIME_NSECS")?,
            mtime: time("MTIME_SECS", "MTIME_NSECS")?,
        }))
    }

    /// Write the keys into `t`.
    pub(crate) fn write_to(&self, t: &mut KvTree) {
        t.set_val("MODE", self.mode);
        t.set_val("UID", self.uid);
        t.set_val("GID", self.gid);
        t.set_int("ATIME_SECS", self.atime.0);
        t.set_int("ATIME_NSECS", self.atime.1);
        t.set_int("MTIME_SECS", self.mtime.0);
        t.set_int("MTIME_NSECS", self.mtime.1);
    }
}
