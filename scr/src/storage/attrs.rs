//! Reading and applying a file's mode, owner and times
//! (SCR_COPY_METADATA): recorded from the cached file at flush, applied
//! to the copy in the prefix and, at fetch, to the copy in cache.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::records::attrs::FileAttrs;

/// The attributes of `path` (`stat`; symbolic links followed). The
/// library reads them from an open file ([`of_file`]); this is for tools
/// and tests.
pub fn read(path: &Path) -> io::Result<FileAttrs> {
    Ok(of_metadata(&std::fs::metadata(path)?))
}

/// The attributes of an open file (`fstat`): those of the file that was
/// opened, whatever its name points at by now.
pub fn of_file(f: &std::fs::File) -> io::Result<FileAttrs> {
    Ok(of_metadata(&f.metadata()?))
}

fn of_metadata(m: &std::fs::Metadata) -> FileAttrs {
    FileAttrs {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        atime: (m.atime(), m.atime_nsec()),
        mtime: (m.mtime(), m.mtime_nsec()),
    }
}

/// Give `path` the attributes `a`: owner first where this process may
/// change it (a refused `chown` is not an error: an unprivileged user
/// keeps ownership of what it writes, as LLNL's SCR does), then the
/// permission bits, then the times last (a `chown` or `chmod` would not
/// touch them, but anything reading the file after would change atime).
pub fn apply(path: &Path, a: &FileAttrs) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    let rc = unsafe { libc::chown(c.as_ptr(), a.uid, a.gid) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EPERM) {
            return Err(e);
        }
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(a.mode & 0o7777))?;
    let ts = |(s, ns): (i64, i64)| libc::timespec {
        tv_sec: s as libc::time_t,
        tv_nsec: ns as _,
    };
    let times = [ts(a.atime), ts(a.mtime)];
    // SAFETY: `c` is valid and `times` holds the two timespecs utimensat reads.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// [`apply`] on an open file (`fchown`, `fchmod`, `futimens`): the
/// attributes reach the file that was opened, whatever its name points at
/// by now.
pub fn apply_file(f: &std::fs::File, a: &FileAttrs) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: `fd` is an open descriptor for the call's duration.
    if unsafe { libc::fchown(fd, a.uid, a.gid) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EPERM) {
            return Err(e);
        }
    }
    // SAFETY: as above.
    if unsafe { libc::fchmod(fd, (a.mode & 0o7777) as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let ts = |(s, ns): (i64, i64)| libc::timespec {
        tv_sec: s as libc::time_t,
        tv_nsec: ns as _,
    };
    let times = [ts(a.atime), ts(a.mtime)];
    // SAFETY: `fd` is open and `times` holds the two timespecs futimens reads.
    if unsafe { libc::futimens(fd, times.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_through_apply() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        let mut want = read(&a).unwrap();
        want.mode = (want.mode & !0o7777) | 0o640;
        want.atime = (1_000_000_000, 5);
        want.mtime = (1_100_000_000, 7);
        apply(&b, &want).unwrap();
        let got = read(&b).unwrap();
        assert_eq!(got.mode & 0o7777, 0o640);
        assert_eq!((got.atime, got.mtime), (want.atime, want.mtime));
        assert_eq!((got.uid, got.gid), (want.uid, want.gid));
    }

    #[test]
    fn apply_file_reaches_the_open_file_not_what_its_name_became() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, victim) = (d.path().join("a"), d.path().join("b"), d.path().join("v"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        std::fs::write(&victim, b"v").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = read(&victim).unwrap();
        let mut want = read(&a).unwrap();
        want.mode = (want.mode & !0o7777) | 0o644;
        want.mtime = (1_100_000_000, 7);
        let f = std::fs::File::open(&b).unwrap();
        // The name is swapped for a link after the open.
        std::fs::rename(&b, d.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, &b).unwrap();
        apply_file(&f, &want).unwrap();
        let got = read(&d.path().join("moved")).unwrap();
        assert_eq!((got.mode & 0o7777, got.mtime), (0o644, want.mtime));
        let v = read(&victim).unwrap();
        assert_eq!((v.mode, v.mtime), (before.mode, before.mtime));
    }
}
