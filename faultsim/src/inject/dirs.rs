//! Directories and file systems: a node's tree removed or made
//! unreachable, a PFS outage, a full cache, a size-limited tmpfs.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{io_err, InjectError, Record, FILLER_NAME};
use crate::plan::OutageMethod;

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

pub(super) fn is_root() -> bool {
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
