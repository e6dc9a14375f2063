//! External faults applied to real files, directories and processes.
//!
//! Each function does one thing and returns a [`Record`] of exactly what it
//! did (which file, which bit offsets, which pids, where a directory was
//! moved) so the harness can report it and, where possible, undo it
//! ([`Record::undo`]). Errors name the file or process and say what to do.
//!
//! Running as root changes what works: file modes do not stop root
//! (CAP_DAC_OVERRIDE). So "make unreachable" (a PFS outage, a dead node's
//! storage) defaults to moving the directory aside and putting a regular
//! file in its place: every open or create below the path then fails with
//! ENOTDIR for root too, and undoing it is a rename. `chmod` is kept for
//! non-root runs. A full cache is a filler file written until the file
//! system's free space is down to what the plan leaves; that is practical
//! only on a small file system, so [`mount_tmpfs`] makes a capacity-limited
//! cache directory when the process may mount (root here), and
//! [`fill_dir`] refuses to write more than a given bound.
//!
//! Submodules by concern: damaging files ([`flip_bits`], [`corrupt_target`],
//! ...), directories and file systems ([`make_unreachable`], [`fill_dir`],
//! [`mount_tmpfs`], ...), and processes ([`kill_pid`], [`kill_node`], ...).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::OutageMethod;

mod dirs;
mod files;
mod procs;

pub use dirs::{
    fill_dir, free_bytes, make_node_unreadable, make_unreachable, mount_tmpfs, moved_aside,
    pfs_outage, remove_dir_tree, unmount,
};
pub use files::{
    corrupt, corrupt_target, delete, delete_master_filemap, flip_bits, flip_random_bits,
    select_files, truncate, truncate_fraction, zero_kvtree_header,
};
pub use procs::{kill_group, kill_node, kill_pid, node_processes};

/// Bytes zeroed by [`zero_kvtree_header`]: the kvtree file header.
pub const KVTREE_HEADER_LEN: usize = scr::kvtree::file::HEADER_LEN;
/// Name of the filler file [`fill_dir`] writes.
pub const FILLER_NAME: &str = ".faultsim-cache-fill";
/// Deepest directory level [`select_files`] descends to.
pub const MAX_DEPTH: usize = 32;
/// Most files [`select_files`] looks at.
pub const MAX_FILES: usize = 1_000_000;

/// Why a fault could not be applied or undone.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    /// The operating system refused an operation.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A bit offset beyond the end of the file.
    #[error("{path}: bit offset {bit_offset} (byte {}) is beyond the file's {len_bytes} bytes", bit_offset / 8)]
    OffsetOutOfRange {
        /// The file.
        path: PathBuf,
        /// The bit offset.
        bit_offset: u64,
        /// The file's length.
        len_bytes: u64,
    },
    /// The file is too short for the operation.
    #[error("{path}: {len_bytes} bytes, the operation needs at least {needed}")]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Its length.
        len_bytes: u64,
        /// The least length that works.
        needed: u64,
    },
    /// Truncating would not shorten the file.
    #[error("{path}: truncating to {to_bytes} bytes does not shorten a {len_bytes}-byte file")]
    NotShorter {
        /// The file.
        path: PathBuf,
        /// Its length.
        len_bytes: u64,
        /// The requested length.
        to_bytes: u64,
    },
    /// Filling the file system would write more than allowed.
    #[error("{dir}: filling it needs {needed_bytes} bytes, more than the {max_bytes}-byte bound; put the cache on a small file system (mount_tmpfs) or raise the bound")]
    FillTooLarge {
        /// The directory.
        dir: PathBuf,
        /// Bytes that would be written.
        needed_bytes: u64,
        /// The bound.
        max_bytes: u64,
    },
    /// A signal could not be sent.
    #[error("pid {pid}: kill(signal {signal}): {source}")]
    Signal {
        /// The process (negative: a process group).
        pid: i32,
        /// The signal.
        signal: i32,
        /// The OS error.
        source: io::Error,
    },
    /// The path is not in the state the fault needs.
    #[error("{path}: {reason}")]
    Refused {
        /// The path.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The record cannot be undone.
    #[error("{what} cannot be undone: the data is gone")]
    NotUndoable {
        /// The fault.
        what: &'static str,
    },
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> InjectError + 'a {
    move |source| InjectError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// What a fault did, precisely enough to report and (where possible) undo it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Record {
    /// Bits flipped (undo flips them back).
    BitFlips {
        /// The file.
        path: PathBuf,
        /// The bit offsets (byte × 8 + bit, bit 0 the least significant).
        bit_offsets: Vec<u64>,
        /// The file's length.
        len_bytes: u64,
    },
    /// File cut short (not undoable).
    Truncated {
        /// The file.
        path: PathBuf,
        /// Old length.
        from_bytes: u64,
        /// New length.
        to_bytes: u64,
    },
    /// File removed (not undoable).
    Deleted {
        /// The file.
        path: PathBuf,
        /// Its length.
        len_bytes: u64,
    },
    /// The kvtree header overwritten with zeros (undo writes the original back).
    ZeroedHeader {
        /// The file.
        path: PathBuf,
        /// The original header bytes.
        original: Vec<u8>,
    },
    /// A directory tree removed (not undoable).
    DirRemoved {
        /// The directory.
        path: PathBuf,
    },
    /// A directory made unreachable (undo restores it).
    Unreachable {
        /// The directory.
        path: PathBuf,
        /// The method used (never `auto`).
        method: OutageMethod,
        /// Where the directory was moved (replace-with-file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        moved_to: Option<PathBuf>,
        /// Its old mode (chmod).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_mode: Option<u32>,
    },
    /// Processes signalled.
    Signalled {
        /// The pids (a group is recorded as its negative id).
        pids: Vec<i32>,
        /// The signal.
        signal: i32,
    },
    /// A filler file written (undo removes it).
    Filled {
        /// The filler file.
        filler: PathBuf,
        /// Bytes written.
        bytes: u64,
        /// Free bytes left afterwards, as the file system reports them.
        free_after_bytes: u64,
    },
    /// A size-limited tmpfs mounted (undo unmounts it).
    TmpfsMounted {
        /// The mount point.
        path: PathBuf,
        /// Its size.
        size_bytes: u64,
    },
}

/// What a fault did, in words for a report or a log line (the Debug form
/// is for programmers: `DirRemoved { path: … }` is no message).
impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::BitFlips {
                path,
                bit_offsets,
                len_bytes,
            } => {
                let shown: Vec<String> = bit_offsets.iter().take(8).map(u64::to_string).collect();
                let more = bit_offsets.len().saturating_sub(shown.len());
                write!(
                    f,
                    "flipped {} bit(s) of {} ({len_bytes} bytes) at bit offset(s) {}{}",
                    bit_offsets.len(),
                    path.display(),
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            }
            Record::Truncated {
                path,
                from_bytes,
                to_bytes,
            } => write!(
                f,
                "truncated {} from {from_bytes} to {to_bytes} bytes",
                path.display()
            ),
            Record::Deleted { path, len_bytes } => {
                write!(f, "deleted {} ({len_bytes} bytes)", path.display())
            }
            Record::ZeroedHeader { path, original } => write!(
                f,
                "zeroed the {}-byte header of {}",
                original.len(),
                path.display()
            ),
            Record::DirRemoved { path } => write!(f, "removed directory {}", path.display()),
            Record::Unreachable {
                path,
                method,
                moved_to,
                ..
            } => {
                let how = match method {
                    OutageMethod::Chmod => "by mode 0500".to_string(),
                    OutageMethod::ReplaceWithFile | OutageMethod::Auto => match moved_to {
                        Some(to) => format!("by a file in its place (moved to {})", to.display()),
                        None => "by a file in its place".to_string(),
                    },
                };
                write!(f, "made {} unreachable {how}", path.display())
            }
            Record::Signalled { pids, signal } => {
                let name = match *signal {
                    libc::SIGKILL => "SIGKILL".to_string(),
                    libc::SIGTERM => "SIGTERM".to_string(),
                    libc::SIGSTOP => "SIGSTOP".to_string(),
                    libc::SIGCONT => "SIGCONT".to_string(),
                    libc::SIGINT => "SIGINT".to_string(),
                    other => format!("signal {other}"),
                };
                let who: Vec<String> = pids
                    .iter()
                    .map(|p| {
                        if *p < 0 {
                            format!("process group {}", p.unsigned_abs())
                        } else {
                            format!("pid {p}")
                        }
                    })
                    .collect();
                let who = if who.is_empty() {
                    "no process".to_string()
                } else {
                    who.join(", ")
                };
                write!(f, "sent {name} to {who}")
            }
            Record::Filled {
                filler,
                bytes,
                free_after_bytes,
            } => write!(
                f,
                "filled {} with {bytes} bytes ({free_after_bytes} bytes free after)",
                filler.display()
            ),
            Record::TmpfsMounted { path, size_bytes } => {
                write!(f, "mounted a {size_bytes}-byte tmpfs on {}", path.display())
            }
        }
    }
}

impl Record {
    /// True when [`Record::undo`] can restore the state before the fault.
    pub fn undoable(&self) -> bool {
        !matches!(
            self,
            Record::Truncated { .. }
                | Record::Deleted { .. }
                | Record::DirRemoved { .. }
                | Record::Signalled { .. }
        )
    }

    /// Restore the state before the fault.
    pub fn undo(&self) -> Result<(), InjectError> {
        match self {
            Record::BitFlips {
                path, bit_offsets, ..
            } => flip_bits(path, bit_offsets).map(|_| ()),
            Record::ZeroedHeader { path, original } => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io_err(path, "open"))?;
                f.write_all_at(original, 0).map_err(io_err(path, "write"))?;
                f.sync_all().map_err(io_err(path, "fsync"))
            }
            Record::Unreachable {
                path,
                moved_to,
                old_mode,
                ..
            } => {
                if let Some(from) = moved_to {
                    fs::remove_file(path).map_err(io_err(path, "remove stand-in file"))?;
                    fs::rename(from, path).map_err(io_err(from, "rename back"))?;
                }
                if let Some(mode) = old_mode {
                    fs::set_permissions(path, fs::Permissions::from_mode(*mode))
                        .map_err(io_err(path, "chmod"))?;
                }
                Ok(())
            }
            Record::Filled { filler, .. } => {
                fs::remove_file(filler).map_err(io_err(filler, "remove filler"))
            }
            Record::TmpfsMounted { path, .. } => unmount(path),
            Record::Truncated { .. } => Err(InjectError::NotUndoable { what: "truncation" }),
            Record::Deleted { .. } => Err(InjectError::NotUndoable { what: "deletion" }),
            Record::DirRemoved { .. } => Err(InjectError::NotUndoable {
                what: "directory removal",
            }),
            Record::Signalled { .. } => Err(InjectError::NotUndoable { what: "a kill" }),
        }
    }
}

#[cfg(test)]
mod tests;
