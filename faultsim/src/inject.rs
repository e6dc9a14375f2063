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

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::{Corruption, OutageMethod, Selector, Target};
use crate::seed::Seeded;

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

fn len_of(path: &Path) -> Result<u64, InjectError> {
    Ok(fs::metadata(path).map_err(io_err(path, "stat"))?.len())
}

/// Flip the bits at `bit_offsets` (byte × 8 + bit) in place, fsync.
pub fn flip_bits(path: &Path, bit_offsets: &[u64]) -> Result<Record, InjectError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    let len_bytes = f.metadata().map_err(io_err(path, "stat"))?.len();
    if let Some(&bad) = bit_offsets.iter().find(|&&b| b / 8 >= len_bytes) {
        return Err(InjectError::OffsetOutOfRange {
            path: path.to_path_buf(),
            bit_offset: bad,
            len_bytes,
        });
    }
    for &bit in bit_offsets {
        let mut byte = [0u8];
        f.read_exact_at(&mut byte, bit / 8)
            .map_err(io_err(path, "read"))?;
        byte[0] ^= 1 << (bit % 8);
        f.write_all_at(&byte, bit / 8)
            .map_err(io_err(path, "write"))?;
    }
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::BitFlips {
        path: path.to_path_buf(),
        bit_offsets: bit_offsets.to_vec(),
        len_bytes,
    })
}

/// Flip `count` bits at offsets drawn from stream `stream` of `seeded`.
pub fn flip_random_bits(
    path: &Path,
    count: u32,
    seeded: &Seeded,
    stream: &str,
) -> Result<Record, InjectError> {
    let len = len_of(path)?;
    if len == 0 {
        return Err(InjectError::TooShort {
            path: path.to_path_buf(),
            len_bytes: 0,
            needed: 1,
        });
    }
    flip_bits(path, &seeded.bit_offsets(stream, len, count))
}

/// Cut the file to `to_bytes`.
pub fn truncate(path: &Path, to_bytes: u64) -> Result<Record, InjectError> {
    let len_bytes = len_of(path)?;
    if to_bytes >= len_bytes {
        return Err(InjectError::NotShorter {
            path: path.to_path_buf(),
            len_bytes,
            to_bytes,
        });
    }
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    f.set_len(to_bytes).map_err(io_err(path, "truncate"))?;
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::Truncated {
        path: path.to_path_buf(),
        from_bytes: len_bytes,
        to_bytes,
    })
}

/// Cut the file to `fraction` (in [0, 1)) of its length, rounded down.
pub fn truncate_fraction(path: &Path, fraction: f64) -> Result<Record, InjectError> {
    if !(0.0..1.0).contains(&fraction) {
        return Err(InjectError::Refused {
            path: path.to_path_buf(),
            reason: format!("truncate fraction {fraction} is not in [0, 1)"),
        });
    }
    let len = len_of(path)?;
    // Exact for every length below 2^53; metadata files are far smaller.
    let to = (len as f64 * fraction).floor() as u64;
    truncate(path, to.min(len.saturating_sub(1)))
}

/// Remove a file.
pub fn delete(path: &Path) -> Result<Record, InjectError> {
    let len_bytes = len_of(path)?;
    fs::remove_file(path).map_err(io_err(path, "remove"))?;
    Ok(Record::Deleted {
        path: path.to_path_buf(),
        len_bytes,
    })
}

/// Overwrite the 20-byte kvtree header with zeros (readers then see a bad magic).
pub fn zero_kvtree_header(path: &Path) -> Result<Record, InjectError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    let len_bytes = f.metadata().map_err(io_err(path, "stat"))?.len();
    if len_bytes < KVTREE_HEADER_LEN as u64 {
        return Err(InjectError::TooShort {
            path: path.to_path_buf(),
            len_bytes,
            needed: KVTREE_HEADER_LEN as u64,
        });
    }
    let mut original = vec![0u8; KVTREE_HEADER_LEN];
    f.read_exact_at(&mut original, 0)
        .map_err(io_err(path, "read"))?;
    f.write_all_at(&[0u8; KVTREE_HEADER_LEN], 0)
        .map_err(io_err(path, "write"))?;
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::ZeroedHeader {
        path: path.to_path_buf(),
        original,
    })
}

/// Apply one corruption to one file; seeded choices come from `stream`.
pub fn corrupt(
    path: &Path,
    how: &Corruption,
    seeded: &Seeded,
    stream: &str,
) -> Result<Record, InjectError> {
    match how {
        Corruption::BitFlips {
            offsets: Some(o), ..
        } => flip_bits(path, o),
        Corruption::BitFlips { count, .. } => {
            flip_random_bits(path, count.unwrap_or(1), seeded, stream)
        }
        Corruption::Truncate {
            to_bytes: Some(n), ..
        } => truncate(path, *n),
        Corruption::Truncate { fraction, .. } => truncate_fraction(path, fraction.unwrap_or(0.5)),
        Corruption::Delete => delete(path),
        Corruption::ZeroKvtreeHeader => zero_kvtree_header(path),
    }
}

/// Files below `root` that `target` selects (by role or glob on the path
/// relative to `root`, and by dataset), sorted; symlinks are not followed.
/// `target.area` and `target.node` say which `root` the caller passes.
pub fn select_files(root: &Path, target: &Target) -> Result<Vec<PathBuf>, InjectError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(io_err(&dir, "read_dir"))? {
            let entry = entry.map_err(io_err(&dir, "read_dir"))?;
            seen += 1;
            if seen > MAX_FILES {
                return Err(InjectError::Refused {
                    path: root.to_path_buf(),
                    reason: format!("more than {MAX_FILES} entries; select a narrower root"),
                });
            }
            let path = entry.path();
            let kind = entry.file_type().map_err(io_err(&path, "stat"))?;
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                if target.select.matches(rel) && in_dataset(rel, target.dataset) {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn in_dataset(rel: &Path, dataset: Option<u64>) -> bool {
    let Some(id) = dataset else {
        return true;
    };
    let want = format!("scr.dataset.{id}");
    rel.components()
        .any(|c| c.as_os_str().as_bytes() == want.as_bytes())
}

/// Apply a corruption to the files `target` selects below `root`: all of
/// them, or `target.files` picked by the seed. Stream names are
/// `<stream>.pick` and `<stream>.<file index>`.
pub fn corrupt_target(
    root: &Path,
    target: &Target,
    how: &Corruption,
    seeded: &Seeded,
    stream: &str,
) -> Result<Vec<Record>, InjectError> {
    let files = select_files(root, target)?;
    let chosen: Vec<usize> = match target.files {
        Some(k) => seeded.pick_indices(
            &format!("{stream}.pick"),
            files.len(),
            usize::try_from(k).unwrap_or(usize::MAX),
        ),
        None => (0..files.len()).collect(),
    };
    chosen
        .into_iter()
        .map(|i| corrupt(&files[i], how, seeded, &format!("{stream}.{i}")))
        .collect()
}

/// Delete the master filemap (`filemap.scrinfo`) below a control directory.
pub fn delete_master_filemap(control_dir: &Path) -> Result<Vec<Record>, InjectError> {
    let target = Target {
        area: crate::plan::Area::Control,
        node: None,
        dataset: None,
        select: Selector::Role(crate::plan::Role::MasterFilemap),
        files: None,
    };
    let files = select_files(control_dir, &target)?;
    if files.is_empty() {
        return Err(InjectError::Refused {
            path: control_dir.to_path_buf(),
            reason: "no filemap.scrinfo below it".into(),
        });
    }
    files.iter().map(|p| delete(p)).collect()
}

/// Remove a simulated node's directory tree (its `SCR_NODE_ROOT`).
pub fn remove_dir_tree(root: &Path) -> Result<Record, InjectError> {
    if !fs::symlink_metadata(root)
        .map_err(io_err(root, "stat"))?
        .is_dir()
    {
        return Err(InjectError::Refused {
            path: root.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    fs::remove_dir_all(root).map_err(io_err(root, "remove_dir_all"))?;
    Ok(Record::DirRemoved {
        path: root.to_path_buf(),
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The stand-in path a directory is moved to by `replace-with-file`.
pub fn moved_aside(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!(".{name}.faultsim-unreachable"))
}

/// Make a directory unreachable (a dead node's storage, a PFS outage): see
/// the module documentation for the methods. `auto` picks
/// `replace-with-file` as root and `chmod` (mode `chmod_mode`) otherwise.
pub fn make_unreachable(
    dir: &Path,
    method: OutageMethod,
    chmod_mode: u32,
) -> Result<Record, InjectError> {
    let meta = fs::symlink_metadata(dir).map_err(io_err(dir, "stat"))?;
    if !meta.is_dir() {
        return Err(InjectError::Refused {
            path: dir.to_path_buf(),
            reason: "not a directory (already unreachable?)".into(),
        });
    }
    let method = match method {
        OutageMethod::Auto if is_root() => OutageMethod::ReplaceWithFile,
        OutageMethod::Auto => OutageMethod::Chmod,
        m => m,
    };
    match method {
        OutageMethod::ReplaceWithFile => {
            let aside = moved_aside(dir);
            if fs::symlink_metadata(&aside).is_ok() {
                return Err(InjectError::Refused {
                    path: aside,
                    reason: "already exists: a previous outage was not undone".into(),
                });
            }
            fs::rename(dir, &aside).map_err(io_err(dir, "rename aside"))?;
            let mut f = File::create(dir).map_err(io_err(dir, "create stand-in file"))?;
            f.write_all(b"faultsim: this directory is unreachable (simulated outage)\n")
                .map_err(io_err(dir, "write stand-in file"))?;
            Ok(Record::Unreachable {
                path: dir.to_path_buf(),
                method,
                moved_to: Some(aside),
                old_mode: None,
            })
        }
        _ => {
            let old_mode = meta.permissions().mode() & 0o7777;
            fs::set_permissions(dir, fs::Permissions::from_mode(chmod_mode))
                .map_err(io_err(dir, "chmod"))?;
            Ok(Record::Unreachable {
                path: dir.to_path_buf(),
                method: OutageMethod::Chmod,
                moved_to: None,
                old_mode: Some(old_mode),
            })
        }
    }
}

/// PFS outage: the prefix directory becomes unwritable (mode 0500 for
/// `chmod`; unreachable for `replace-with-file`).
pub fn pfs_outage(prefix: &Path, method: OutageMethod) -> Result<Record, InjectError> {
    make_unreachable(prefix, method, 0o500)
}

/// A simulated node's storage becomes unreadable (mode 0 for `chmod`).
pub fn make_node_unreadable(root: &Path, method: OutageMethod) -> Result<Record, InjectError> {
    make_unreachable(root, method, 0o000)
}

/// Free bytes for unprivileged writers on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64, InjectError> {
    let c =
        std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| InjectError::Refused {
            path: dir.to_path_buf(),
            reason: "path contains a NUL byte".into(),
        })?;
    // SAFETY: statvfs writes into a zeroed struct we own; c is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io_err(dir, "statvfs")(io::Error::last_os_error()));
    }
    #[allow(clippy::useless_conversion)] // the field types differ between targets
    Ok(u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize)))
}

/// Cache full: write a filler file in `dir` until the file system has at
/// most `leave_free_bytes` free (or refuses more: ENOSPC ends the fill
/// normally). Refuses to write more than `max_fill_bytes`.
pub fn fill_dir(
    dir: &Path,
    leave_free_bytes: u64,
    max_fill_bytes: u64,
) -> Result<Record, InjectError> {
    let needed_bytes = free_bytes(dir)?.saturating_sub(leave_free_bytes);
    if needed_bytes > max_fill_bytes {
        return Err(InjectError::FillTooLarge {
            dir: dir.to_path_buf(),
            needed_bytes,
            max_bytes: max_fill_bytes,
        });
    }
    let filler = dir.join(FILLER_NAME);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&filler)
        .map_err(io_err(&filler, "create filler"))?;
    let chunk = vec![0xa5u8; 1 << 20];
    let mut written = 0u64;
    while written < needed_bytes {
        let n = usize::try_from(needed_bytes - written)
            .unwrap_or(usize::MAX)
            .min(chunk.len());
        match f.write(&chunk[..n]) {
            Ok(0) => break,
            Ok(w) => written += w as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => return Err(io_err(&filler, "write filler")(e)),
        }
    }
    // fsync may itself report ENOSPC on some file systems: the fill is done.
    match f.sync_all() {
        Err(e) if e.raw_os_error() != Some(libc::ENOSPC) => {
            return Err(io_err(&filler, "fsync filler")(e))
        }
        _ => {}
    }
    Ok(Record::Filled {
        filler,
        bytes: written,
        free_after_bytes: free_bytes(dir)?,
    })
}

/// Mount a tmpfs of `size_bytes` on `dir` (needs CAP_SYS_ADMIN): a cache
/// with a real capacity, which [`fill_dir`] can fill cheaply.
pub fn mount_tmpfs(dir: &Path, size_bytes: u64) -> Result<Record, InjectError> {
    let target =
        std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| InjectError::Refused {
            path: dir.to_path_buf(),
            reason: "path contains a NUL byte".into(),
        })?;
    let opts = std::ffi::CString::new(format!("size={size_bytes},mode=0700")).map_err(|_| {
        InjectError::Refused {
            path: dir.to_path_buf(),
            reason: "bad mount options".into(),
        }
    })?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            c"faultsim-cache".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io_err(dir, "mount tmpfs")(io::Error::last_os_error()));
    }
    Ok(Record::TmpfsMounted {
        path: dir.to_path_buf(),
        size_bytes,
    })
}

/// Unmount what [`mount_tmpfs`] mounted.
pub fn unmount(dir: &Path) -> Result<(), InjectError> {
    let target =
        std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| InjectError::Refused {
            path: dir.to_path_buf(),
            reason: "path contains a NUL byte".into(),
        })?;
    // SAFETY: target is NUL-terminated and outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io_err(dir, "umount")(io::Error::last_os_error()));
    }
    Ok(())
}

fn send(pid: i32, signal: i32) -> Result<(), InjectError> {
    // SAFETY: kill(2) has no memory effects.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(InjectError::Signal {
            pid,
            signal,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// SIGKILL one process.
pub fn kill_pid(pid: u32) -> Result<Record, InjectError> {
    let pid = pid_i32(pid)?;
    send(pid, libc::SIGKILL)?;
    Ok(Record::Signalled {
        pids: vec![pid],
        signal: libc::SIGKILL,
    })
}

/// SIGKILL a whole process group (e.g. a launcher started with its own group).
pub fn kill_group(pgid: u32) -> Result<Record, InjectError> {
    let pgid = pid_i32(pgid)?;
    send(-pgid, libc::SIGKILL)?;
    Ok(Record::Signalled {
        pids: vec![-pgid],
        signal: libc::SIGKILL,
    })
}

fn pid_i32(pid: u32) -> Result<i32, InjectError> {
    i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| InjectError::Refused {
            path: PathBuf::from(format!("/proc/{pid}")),
            reason: "not a pid that may be signalled".into(),
        })
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        match parent_of(p) {
            Some(q) if q == ancestor => return true,
            Some(q) if q > 1 => p = q,
            _ => return false,
        }
    }
    false
}

/// The processes whose environment has `SCR_NODE_NAME=node`, limited to
/// descendants of `within` (the launcher's pid) when given, sorted.
pub fn node_processes(node: &str, within: Option<u32>) -> Vec<i32> {
    let want = format!("{}={node}", scr::storage::dirs::ENV_NODE_NAME);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let within = within.and_then(|w| i32::try_from(w).ok());
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        })
        .filter(|&pid| within.is_none_or(|w| descends_from(pid, w)))
        .collect();
    pids.sort_unstable();
    pids
}

/// Kill a simulated node's processes: SIGKILL every process of
/// [`node_processes`]. Processes that exit meanwhile are skipped.
pub fn kill_node(node: &str, within: Option<u32>) -> Result<Record, InjectError> {
    let mut pids = Vec::new();
    for pid in node_processes(node, within) {
        match send(pid, libc::SIGKILL) {
            Ok(()) => pids.push(pid),
            Err(InjectError::Signal { source, .. })
                if source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Record::Signalled {
        pids,
        signal: libc::SIGKILL,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Area, Role};
    use scr::kvtree::file::KvFileError;
    use scr::kvtree::KvTree;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Command;

    fn seed() -> u64 {
        let s = crate::seed::seed_from_env();
        eprintln!(
            "{}",
            crate::seed::replay_hint(s, "cargo test -p faultsim --lib inject::tests")
        );
        s
    }

    fn kvtree_file(dir: &Path, name: &str) -> PathBuf {
        let mut tree = KvTree::new();
        tree.set_kv("DSET", "7").set_kv("FILES", "3");
        tree.set_kv("RANK", "0").set_kv("FILE", "rank_0.ckpt");
        let path = dir.join(name);
        scr::kvtree::file::write(&path, &tree).expect("write kvtree");
        path
    }

    #[test]
    fn a_seeded_bit_flip_in_a_kvtree_file_is_detected_and_undone() {
        let s = seed();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = kvtree_file(dir.path(), "filemap_0.scrinfo");
        let before = fs::read(&path).expect("read");
        let rec = flip_random_bits(&path, 1, &Seeded::new(s), "flip").expect("flip");
        let Record::BitFlips {
            bit_offsets,
            len_bytes,
            ..
        } = &rec
        else {
            panic!("seed {s}: unexpected record {rec:?}");
        };
        assert_eq!((bit_offsets.len(), *len_bytes), (1, before.len() as u64));
        let after = fs::read(&path).expect("read");
        let diff: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .collect();
        assert_eq!(diff, [(bit_offsets[0] / 8) as usize], "seed {s}");
        assert!(
            scr::kvtree::file::read(&path).is_err(),
            "seed {s}: flip at bit {} went undetected",
            bit_offsets[0]
        );
        rec.undo().expect("undo");
        assert_eq!(fs::read(&path).expect("read"), before, "seed {s}");
        assert!(scr::kvtree::file::read(&path).is_ok());
        // The record is data the harness can report.
        let json = serde_json::to_string(&rec).expect("json");
        assert_eq!(serde_json::from_str::<Record>(&json).expect("parse"), rec);
    }

    #[test]
    fn every_single_bit_flip_in_a_kvtree_file_is_detected() {
        // In memory (the file path is covered above): a flip anywhere,
        // header, data or CRC trailer, must make the decoder refuse.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = kvtree_file(dir.path(), "x.scr");
        let mut bytes = fs::read(&path).expect("read");
        for bit in 0..bytes.len() * 8 {
            bytes[bit / 8] ^= 1 << (bit % 8);
            assert!(
                scr::kvtree::file::decode(&bytes, &path).is_err(),
                "bit {bit} undetected"
            );
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
        assert!(scr::kvtree::file::decode(&bytes, &path).is_ok());
    }

    #[test]
    fn zeroed_header_gives_bad_magic_and_is_undone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = kvtree_file(dir.path(), "filemap.scrinfo");
        let rec = zero_kvtree_header(&path).expect("zero");
        assert!(matches!(
            scr::kvtree::file::read(&path),
            Err(KvFileError::BadMagic { found: 0, .. })
        ));
        rec.undo().expect("undo");
        assert!(scr::kvtree::file::read(&path).is_ok());
        let short = dir.path().join("short");
        fs::write(&short, b"0123456789").expect("write");
        assert!(matches!(
            zero_kvtree_header(&short),
            Err(InjectError::TooShort {
                len_bytes: 10,
                needed: 20,
                ..
            })
        ));
    }

    #[test]
    fn truncation_and_deletion_are_detected_and_not_undoable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = kvtree_file(dir.path(), "summary.scr");
        let len = len_of(&path).expect("len");
        let rec = truncate_fraction(&path, 0.5).expect("truncate");
        assert_eq!(
            rec,
            Record::Truncated {
                path: path.clone(),
                from_bytes: len,
                to_bytes: len / 2
            }
        );
        assert!(scr::kvtree::file::read(&path).is_err());
        assert!(!rec.undoable() && matches!(rec.undo(), Err(InjectError::NotUndoable { .. })));
        assert!(matches!(
            truncate(&path, len),
            Err(InjectError::NotShorter { .. })
        ));
        assert!(matches!(
            truncate_fraction(&path, 1.0),
            Err(InjectError::Refused { .. })
        ));
        let rec = delete(&path).expect("delete");
        assert!(scr::kvtree::file::read(&path)
            .expect_err("gone")
            .is_not_found());
        assert!(!rec.undoable());
        let err = flip_bits(&path, &[0])
            .expect_err("missing file")
            .to_string();
        assert!(err.contains("summary.scr") && err.contains("open"), "{err}");
        let small = dir.path().join("small");
        fs::write(&small, b"ab").expect("write");
        let err = flip_bits(&small, &[16]).expect_err("beyond the end");
        assert!(matches!(
            err,
            InjectError::OffsetOutOfRange {
                bit_offset: 16,
                len_bytes: 2,
                ..
            }
        ));
        assert_eq!(
            fs::read(&small).expect("read"),
            b"ab",
            "nothing flipped on error"
        );
    }

    #[test]
    fn targets_select_by_role_glob_and_dataset() {
        let s = seed();
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for d in ["scr.dataset.1/.scr", "scr.dataset.2/.scr"] {
            fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        for f in [
            "scr.dataset.1/rank_0.ckpt",
            "scr.dataset.1/.scr/1_of_2_in_0.xor",
            "scr.dataset.2/rank_0.ckpt",
            "scr.dataset.2/rank_1.ckpt",
            "scr.dataset.2/.scr/2_of_2_in_0.xor",
        ] {
            fs::write(root.join(f), vec![7u8; 64]).expect("write");
        }
        kvtree_file(root, "filemap.scrinfo");
        let target = |select, dataset, files| Target {
            area: Area::Cache,
            node: None,
            dataset,
            select,
            files,
        };
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| {
                    p.strip_prefix(root)
                        .expect("below root")
                        .display()
                        .to_string()
                })
                .collect()
        };
        let apps = select_files(root, &target(Selector::Role(Role::AppFile), None, None));
        assert_eq!(
            rel(apps.expect("select")),
            [
                "scr.dataset.1/rank_0.ckpt",
                "scr.dataset.2/rank_0.ckpt",
                "scr.dataset.2/rank_1.ckpt"
            ]
        );
        let parity = select_files(
            root,
            &target(Selector::Role(Role::ParityFile), Some(2), None),
        );
        assert_eq!(
            rel(parity.expect("select")),
            ["scr.dataset.2/.scr/2_of_2_in_0.xor"]
        );
        let glob = select_files(
            root,
            &target(Selector::Glob("*/*.ckpt".into()), Some(2), None),
        );
        assert_eq!(rel(glob.expect("select")).len(), 2);
        // One of the three app files, picked by the seed, deterministically.
        let t = target(Selector::Role(Role::AppFile), None, Some(1));
        let how = Corruption::BitFlips {
            count: Some(3),
            offsets: None,
        };
        let recs = corrupt_target(root, &t, &how, &Seeded::new(s), "c").expect("corrupt");
        assert_eq!(recs.len(), 1, "seed {s}");
        for r in &recs {
            r.undo().expect("undo");
        }
        let again = corrupt_target(root, &t, &how, &Seeded::new(s), "c").expect("corrupt");
        assert_eq!(recs, again, "seed {s}: same seed, same files and offsets");
        // Deleting the master filemap.
        let recs = delete_master_filemap(root).expect("delete");
        assert_eq!(recs.len(), 1);
        assert!(matches!(
            delete_master_filemap(root),
            Err(InjectError::Refused { .. })
        ));
    }

    #[test]
    fn pfs_outage_by_replacing_the_prefix_stops_root_and_is_undone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prefix = dir.path().join("prefix");
        fs::create_dir_all(prefix.join(".scr")).expect("mkdir");
        fs::write(prefix.join(".scr/index.scr"), b"index").expect("write");
        let rec = pfs_outage(&prefix, OutageMethod::ReplaceWithFile).expect("outage");
        assert!(
            File::create(prefix.join("new.ckpt")).is_err(),
            "create below prefix"
        );
        assert!(
            fs::create_dir_all(prefix.join("scr.dataset.1")).is_err(),
            "mkdir below prefix"
        );
        assert!(
            fs::read(prefix.join(".scr/index.scr")).is_err(),
            "read below prefix"
        );
        assert!(matches!(
            pfs_outage(&prefix, OutageMethod::ReplaceWithFile),
            Err(InjectError::Refused { .. })
        ));
        rec.undo().expect("undo");
        assert_eq!(
            fs::read(prefix.join(".scr/index.scr")).expect("read"),
            b"index"
        );
        assert!(!moved_aside(&prefix).exists());
    }

    #[test]
    fn chmod_outage_sets_and_restores_the_mode_and_root_ignores_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prefix = dir.path().join("prefix");
        fs::create_dir(&prefix).expect("mkdir");
        fs::set_permissions(&prefix, fs::Permissions::from_mode(0o750)).expect("chmod");
        let rec = pfs_outage(&prefix, OutageMethod::Chmod).expect("outage");
        let mode = fs::metadata(&prefix).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o500);
        let write = File::create(prefix.join("f"));
        // Why `auto` never picks chmod as root: the write still succeeds.
        assert_eq!(
            write.is_ok(),
            is_root(),
            "root writes through mode 0500, others do not"
        );
        rec.undo().expect("undo");
        let mode = fs::metadata(&prefix).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
    }

    #[test]
    fn node_tree_removed_or_unreadable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = dir.path().join("n1");
        fs::create_dir_all(node.join("dev/shm/u/scr.1")).expect("mkdir");
        fs::write(node.join("dev/shm/u/scr.1/filemap.scrinfo"), b"x").expect("write");
        let rec = make_node_unreadable(&node, OutageMethod::Auto).expect("unreadable");
        if is_root() {
            assert!(fs::read_dir(&node).is_err(), "node unreadable for root");
        }
        rec.undo().expect("undo");
        assert!(node.join("dev/shm/u/scr.1/filemap.scrinfo").exists());
        assert_eq!(
            remove_dir_tree(&node).expect("remove"),
            Record::DirRemoved { path: node.clone() }
        );
        assert!(!node.exists());
        assert!(matches!(
            remove_dir_tree(&node),
            Err(InjectError::Io { .. })
        ));
    }

    #[test]
    fn cache_fill_is_bounded_and_fills_a_small_tmpfs() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The temp file system is far too big to fill within 1 MiB.
        let err = fill_dir(dir.path(), 0, 1 << 20).expect_err("bounded");
        assert!(matches!(err, InjectError::FillTooLarge { .. }), "{err}");
        let cache = dir.path().join("cache");
        fs::create_dir(&cache).expect("mkdir");
        let mounted = match mount_tmpfs(&cache, 4 << 20) {
            Ok(rec) => rec,
            Err(e) => {
                // Only root (CAP_SYS_ADMIN) can mount; the bound was checked above.
                eprintln!("tmpfs part skipped: {e}");
                return;
            }
        };
        let filled = fill_dir(&cache, 64 << 10, 8 << 20);
        let result = filled.as_ref().map(|r| r.clone());
        let free_now = free_bytes(&cache);
        let write_big = fs::write(cache.join("ckpt"), vec![1u8; 1 << 20]);
        if let Ok(rec) = &result {
            rec.undo().expect("remove filler");
        }
        let write_after = fs::write(cache.join("ckpt"), vec![1u8; 1 << 20]);
        mounted.undo().expect("unmount");
        let Ok(Record::Filled {
            bytes,
            free_after_bytes,
            ..
        }) = result
        else {
            panic!("fill failed: {result:?}");
        };
        assert!(bytes > 3 << 20, "filled {bytes} bytes");
        assert!(free_after_bytes <= 64 << 10, "{free_after_bytes} free");
        assert!(free_now.expect("statvfs") <= 64 << 10);
        let e = write_big.expect_err("a 1 MiB checkpoint no longer fits");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        write_after.expect("fits again after undo");
    }

    #[test]
    fn kill_a_child_a_group_and_a_node() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let rec = kill_pid(child.id()).expect("kill");
        assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
        assert!(!rec.undoable());

        let mut group = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .expect("spawn group");
        let pgid = group.id();
        std::thread::sleep(std::time::Duration::from_millis(100));
        kill_group(pgid).expect("kill group");
        assert_eq!(group.wait().expect("wait").signal(), Some(libc::SIGKILL));

        let node = format!("faultsim-test-{}", std::process::id());
        let spawn = |n: &str| {
            Command::new("sleep")
                .arg("30")
                .env(scr::storage::dirs::ENV_NODE_NAME, n)
                .spawn()
                .expect("spawn")
        };
        let (mut a, mut b, mut other) = (spawn(&node), spawn(&node), spawn("elsewhere-node"));
        let me = std::process::id();
        let mut want = vec![a.id() as i32, b.id() as i32];
        want.sort_unstable();
        // A child's /proc/<pid>/environ shows its own variables only once it
        // has exec'd: wait (bounded) for both to get there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while node_processes(&node, Some(me)) != want && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(node_processes(&node, Some(me)), want);
        let rec = kill_node(&node, Some(me)).expect("kill node");
        assert_eq!(
            rec,
            Record::Signalled {
                pids: want,
                signal: libc::SIGKILL
            }
        );
        assert_eq!(a.wait().expect("wait").signal(), Some(libc::SIGKILL));
        assert_eq!(b.wait().expect("wait").signal(), Some(libc::SIGKILL));
        assert_eq!(
            other.try_wait().expect("try_wait"),
            None,
            "another node lives"
        );
        other.kill().expect("cleanup");
        other.wait().expect("wait");
        assert!(matches!(kill_pid(1), Err(InjectError::Refused { .. })));
    }
}
