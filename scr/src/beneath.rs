//! Staying inside a directory: the prefix directory is shared with the
//! application (and, on a parallel file system, with whoever else can write
//! into it), so a symbolic link inside it may point anywhere. SCR never
//! reaches a file of the prefix through such a link: every path it writes,
//! reads or removes below the prefix is checked component by component
//! (`lstat`, never `stat`), and the last component is opened with
//! `O_NOFOLLOW`. A link is refused, naming it, rather than followed.
//!
//! [`check`] alone is a check and then a use: a writer racing SCR between
//! them could swap a directory for a link. The copies, directory creations
//! and removals in the prefix therefore go through the `*_in` functions
//! below, which never resolve a path below `base` by name: they open
//! `base`, then each directory below it relative to the one before with
//! `openat(O_NOFOLLOW | O_DIRECTORY)`, and create, open or remove the last
//! component relative to its parent's handle (`mkdirat`, `openat`,
//! `unlinkat`). A link swapped in at any moment is refused by the kernel
//! at the component it replaced; docs/security.md says what this defends
//! and what it does not.

use std::ffi::{CString, OsStr};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a path below a directory was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BeneathError {
    /// A component of the path is a symbolic link.
    #[error("{}: passes through the symbolic link {} inside {}; SCR never follows a link out of the prefix directory (replace the link with a real directory)", path.display(), link.display(), base.display())]
    Symlink {
        /// The path SCR was to use.
        path: PathBuf,
        /// Its first component that is a link.
        link: PathBuf,
        /// The directory it must stay in.
        base: PathBuf,
    },
    /// The path is not below the directory, or climbs out with `..`.
    #[error("{}: not inside {}", path.display(), base.display())]
    Outside {
        /// The path.
        path: PathBuf,
        /// The directory it must stay in.
        base: PathBuf,
    },
}

/// Check that `path` lies below `base` and that none of its existing
/// components below `base` is a symbolic link (`base` itself may be
/// reached through links: it is the user's choice). Components that do
/// not exist yet are fine: SCR creates them as real directories.
pub fn check(base: &Path, path: &Path) -> Result<(), BeneathError> {
    let outside = || BeneathError::Outside {
        path: path.to_path_buf(),
        base: base.to_path_buf(),
    };
    let rel = path.strip_prefix(base).map_err(|_| outside())?;
    let mut cur = base.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(n) => cur.push(n),
            Component::CurDir => continue,
            _ => return Err(outside()),
        }
        match fs::symlink_metadata(&cur) {
            Ok(md) if md.file_type().is_symlink() => {
                return Err(BeneathError::Symlink {
                    path: path.to_path_buf(),
                    link: cur,
                    base: base.to_path_buf(),
                })
            }
            Ok(_) => {}
            // Nothing deeper exists either.
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Create (truncate) `path` for writing without following a link at its
/// last component (`O_NOFOLLOW`: a planted link fails with `ELOOP`).
pub fn create_nofollow(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Open `path` for reading without following a link at its last component.
pub fn open_nofollow(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// How [`open_in`] opens a file below the base directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// An existing file, to read.
    Read,
    /// An existing file, to write in place (no truncation).
    Write,
    /// Create or truncate the file, to write; its missing parent
    /// directories are created as by [`create_dir_all_in`].
    Create,
    /// Open or create the file to read and write, without truncating it
    /// (a lock file); its parent directory must exist.
    Lock,
}

/// The error a refused path becomes where an `io::Error` is expected: its
/// message names the link, and [`refusal`] gets the [`BeneathError`] back.
fn refused(e: BeneathError) -> io::Error {
    io::Error::other(e)
}

/// The [`BeneathError`] inside an error of the `*_in` functions, when the
/// path was refused rather than failing in the file system.
pub fn refusal(e: &io::Error) -> Option<&BeneathError> {
    e.get_ref().and_then(|r| r.downcast_ref::<BeneathError>())
}

/// The [`BeneathError`] an error of the `*_in` functions carries, or the
/// error itself when the file system failed.
pub fn into_refusal(e: io::Error) -> Result<BeneathError, io::Error> {
    if refusal(&e).is_none() {
        return Err(e);
    }
    match e.into_inner().map(|b| b.downcast::<BeneathError>()) {
        Some(Ok(b)) => Ok(*b),
        // Unreachable after the check above; keep the error regardless.
        Some(Err(other)) => Err(io::Error::other(other)),
        None => Err(io::Error::other("refused path")),
    }
}

/// The components of `path` below `base`, each a plain name.
fn parts<'a>(base: &Path, path: &'a Path) -> io::Result<Vec<&'a OsStr>> {
    let outside = || {
        refused(BeneathError::Outside {
            path: path.to_path_buf(),
            base: base.to_path_buf(),
        })
    };
    let rel = path.strip_prefix(base).map_err(|_| outside())?;
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    Ok(out)
}

/// The last of the components `p` of `path` and the directories before
/// it; no component (the base itself) is refused with `why`.
fn last_below<'p, 'a>(
    path: &Path,
    p: &'p [&'a OsStr],
    why: &str,
) -> io::Result<(&'a OsStr, &'p [&'a OsStr])> {
    match p.split_last() {
        Some((last, dirs)) => Ok((last, dirs)),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {why}", path.display()),
        )),
    }
}

fn c_name(n: &OsStr) -> io::Result<CString> {
    CString::new(n.as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The status of `name` in directory `dir`, a link not followed
/// (`fstatat(AT_SYMLINK_NOFOLLOW)`).
fn lstat_at(dir: &fs::File, name: &CString) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is an open descriptor, `name` NUL-terminated, `st`
    // large enough for the stat the call writes.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat filled `st` when it returned 0.
    Ok(unsafe { st.assume_init() })
}

/// Whether `name` in directory `dir` is a symbolic link.
fn is_link_at(dir: &fs::File, name: &CString) -> bool {
    lstat_at(dir, name).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`; a link at
/// `name` is refused as a [`BeneathError::Symlink`] naming `cur`.
fn open_at(
    dir: &fs::File,
    name: &CString,
    flags: libc::c_int,
    (path, cur, base): (&Path, &Path, &Path),
) -> io::Result<fs::File> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // A link makes the open fail with ELOOP (ENOTDIR with O_DIRECTORY).
    // When the name is no longer a link by the time it is looked at, it
    // was swapped back meanwhile: open again, a bounded number of times.
    let mut tries = 0;
    loop {
        // SAFETY: `dir` is an open descriptor and `name` NUL-terminated.
        let fd =
            unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o666 as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            return Ok(unsafe { fs::File::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
            return Err(e);
        }
        if is_link_at(dir, name) {
            return Err(refused(BeneathError::Symlink {
                path: path.to_path_buf(),
                link: cur.to_path_buf(),
                base: base.to_path_buf(),
            }));
        }
        tries += 1;
        if tries == 3 {
            return Err(e);
        }
    }
}

/// fsync directory handle `dir` (at `path`), as [`crate::durable::sync_dir`].
pub fn sync_dir_handle(dir: &fs::File, path: &Path) -> io::Result<()> {
    match dir.sync_all() {
        Ok(()) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTSUP)) => {}
        Err(e) => return Err(e),
    }
    crate::fault::dir_synced(path);
    Ok(())
}

/// Open `base` (through links: it is the user's choice) and then each of
/// `dirs` below it, relative to the one before and never through a link.
/// With `create`, a missing directory is made (`mkdirat`) and its parent
/// fsynced, so its name survives a power loss. Returns the handle of the
/// last directory and its path. With `create`, a missing `base` is made
/// too (by name: it is the user's path).
fn walk(
    base: &Path,
    path: &Path,
    dirs: &[&OsStr],
    create: bool,
) -> io::Result<(fs::File, PathBuf)> {
    let open_base = || {
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(base)
    };
    let mut dir = match open_base() {
        // The base is the user's path, made by name as before.
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
            crate::durable::create_dir_all(base)?;
            open_base()?
        }
        other => other?,
    };
    let mut cur = base.to_path_buf();
    for d in dirs {
        let name = c_name(d)?;
        if create {
            // SAFETY: `dir` is an open descriptor and `name` NUL-terminated.
            let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) };
            if rc == 0 {
                sync_dir_handle(&dir, &cur)?;
            } else {
                let e = io::Error::last_os_error();
                // Another rank made it first (and syncs the parent), or
                // it is a link: the open below refuses that.
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
        }
        cur.push(d);
        dir = open_at(
            &dir,
            &name,
            libc::O_RDONLY | libc::O_DIRECTORY,
            (path, &cur, base),
        )?;
    }
    Ok((dir, cur))
}

/// Open `path` below `base` as `how` says, never through a symbolic link
/// below `base` even if one is swapped in while this runs.
pub fn open_in(base: &Path, path: &Path, how: How) -> io::Result<fs::File> {
    let p = parts(base, path)?;
    let (last, dirs) = last_below(path, &p, "the directory itself, not a file in it")?;
    let (dir, cur) = walk(base, path, dirs, how == How::Create)?;
    // Non-blocking: a FIFO planted at `path` must not hang the open (a
    // write end without a reader fails with ENXIO); regular files ignore
    // the flag.
    let flags = libc::O_NONBLOCK
        | match how {
            How::Read => libc::O_RDONLY,
            How::Write => libc::O_WRONLY,
            How::Create => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            How::Lock => libc::O_RDWR | libc::O_CREAT,
        };
    open_at(&dir, &c_name(last)?, flags, (path, &cur.join(last), base))
}

/// Open directory `dir` below `base`, never through a link below `base`
/// (see [`open_in`]); the handle is for the `*_at` functions.
pub fn open_dir_in(base: &Path, dir: &Path) -> io::Result<fs::File> {
    let p = parts(base, dir)?;
    walk(base, dir, &p, false).map(|(d, _)| d)
}

/// The names in directory `dir` below `base` (without `.` and `..`),
/// listed through the handle [`open_dir_in`] opens: never the contents of
/// a directory a link below `base` points to.
pub fn read_dir_in(base: &Path, dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    entries(&open_dir_in(base, dir)?)
}

/// Open directory `dir` by name (following links), for the `*_at`
/// functions, where there is no base to stay below.
pub fn open_dir(dir: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
}

/// Create the new file `name` in directory handle `dir` to write
/// (`O_CREAT | O_EXCL`: never an existing file or link).
pub fn create_new_at(dir: &fs::File, name: &str) -> io::Result<fs::File> {
    let n = c_name(OsStr::new(name))?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `dir` is an open descriptor and `n` NUL-terminated.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), n.as_ptr(), flags, 0o666 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { fs::File::from_raw_fd(fd) })
}

/// Rename `from` to `to`, both in directory handle `dir` (`renameat`).
pub fn rename_at(dir: &fs::File, from: &str, to: &str) -> io::Result<()> {
    let (f, t) = (c_name(OsStr::new(from))?, c_name(OsStr::new(to))?);
    let fd = dir.as_raw_fd();
    // SAFETY: `fd` is an open descriptor and both names NUL-terminated.
    if unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Rename `from` to `to`, both below `base`, never through a link below
/// it: each parent is reached by the walk of [`open_in`] (the parent of
/// `to` created when missing, its parent fsynced), then `renameat`.
pub fn rename_in(base: &Path, from: &Path, to: &Path) -> io::Result<()> {
    let (pf, pt) = (parts(base, from)?, parts(base, to)?);
    let (fl, fd) = last_below(from, &pf, "refusing to rename the base directory")?;
    let (tl, td) = last_below(to, &pt, "refusing to rename over the base directory")?;
    let (from_dir, _) = walk(base, from, fd, false)?;
    let (to_dir, _) = walk(base, to, td, true)?;
    let (f, t) = (c_name(fl)?, c_name(tl)?);
    // SAFETY: both descriptors are open and both names NUL-terminated.
    let rc = unsafe {
        libc::renameat(
            from_dir.as_raw_fd(),
            f.as_ptr(),
            to_dir.as_raw_fd(),
            t.as_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Exchange names `a` and `b` in directory handle `dir` atomically
/// (`renameat2(RENAME_EXCHANGE)`): what a racing writer does to swap a
/// directory for a link in the tests of this module's guarantees.
pub fn exchange_at(dir: &fs::File, a: &str, b: &str) -> io::Result<()> {
    let (a, b) = (c_name(OsStr::new(a))?, c_name(OsStr::new(b))?);
    let fd = dir.as_raw_fd();
    // SAFETY: `fd` is an open descriptor and both names NUL-terminated.
    let rc = unsafe { libc::renameat2(fd, a.as_ptr(), fd, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Remove `name` from directory handle `dir` (`unlinkat`).
pub fn unlink_at(dir: &fs::File, name: &str) -> io::Result<()> {
    let n = c_name(OsStr::new(name))?;
    // SAFETY: `dir` is an open descriptor and `n` NUL-terminated.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), n.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Create directory `dir` below `base` and its missing parents, each new
/// one's parent fsynced, never through a link (see [`open_in`]).
pub fn create_dir_all_in(base: &Path, dir: &Path) -> io::Result<()> {
    let p = parts(base, dir)?;
    walk(base, dir, &p, true).map(|_| ())
}

/// Remove file `path` below `base` (`unlinkat` in its parent's handle; a
/// link at `path` itself is removed, not followed). A missing file is
/// `NotFound`, as `fs::remove_file`.
pub fn remove_file_in(base: &Path, path: &Path) -> io::Result<()> {
    unlink_in(base, path, 0)
}

/// Remove the empty directory `path` below `base`, as [`remove_file_in`].
pub fn remove_dir_in(base: &Path, path: &Path) -> io::Result<()> {
    unlink_in(base, path, libc::AT_REMOVEDIR)
}

fn unlink_in(base: &Path, path: &Path, flags: libc::c_int) -> io::Result<()> {
    let p = parts(base, path)?;
    let (last, dirs) = last_below(path, &p, "refusing to remove the base directory")?;
    let (dir, _) = walk(base, path, dirs, false)?;
    let name = c_name(last)?;
    // SAFETY: `dir` is an open descriptor and `name` NUL-terminated.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Remove directory `path` below `base` with everything in it, never
/// leaving it through a link: the walk to it is [`open_in`]'s, links inside
/// it are removed, not followed, and each subdirectory is opened relative
/// to its parent with `O_NOFOLLOW`. A missing directory is `NotFound`.
pub fn remove_dir_all_in(base: &Path, path: &Path) -> io::Result<()> {
    let p = parts(base, path)?;
    let (last, dirs) = last_below(path, &p, "refusing to remove the base directory")?;
    let (parent, cur) = walk(base, path, dirs, false)?;
    remove_tree_at(&parent, &c_name(last)?, (path, &cur.join(last), base))
}

/// Whether `path` below `base` exists (as anything: a link at `path`
/// itself counts, unfollowed), asked through the walk of [`open_in`]: a
/// link in a directory on the way is refused, not followed, and a missing
/// directory on the way means `false`.
pub fn exists_in(base: &Path, path: &Path) -> io::Result<bool> {
    last_below(
        path,
        &parts(base, path)?,
        "the directory itself, not a file in it",
    )?;
    Ok(file_type_in(base, path)?.is_some())
}

/// The type bits (`S_IFMT` of `st_mode`: `S_IFDIR`, `S_IFREG`, `S_IFLNK`,
/// …) of `path` below `base`, a link at `path` itself not followed, never
/// reached through a link below `base` (refused, as by [`open_in`]);
/// `None` when it does not exist (or a directory on the way is not one).
/// The base itself is a directory.
fn file_type_in(base: &Path, path: &Path) -> io::Result<Option<libc::mode_t>> {
    let p = parts(base, path)?;
    let absent = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        )
    };
    let Some((last, dirs)) = p.split_last() else {
        return match open_dir_in(base, path) {
            Ok(_) => Ok(Some(libc::S_IFDIR)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        };
    };
    let dir = match walk(base, path, dirs, false) {
        Ok((d, _)) => d,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    match lstat_at(&dir, &c_name(last)?) {
        Ok(st) => Ok(Some(st.st_mode & libc::S_IFMT)),
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `path` below `base` is a directory — not a link to one — asked
/// without passing a link below `base` ([`file_type_in`]).
pub fn is_dir_in(base: &Path, path: &Path) -> io::Result<bool> {
    Ok(file_type_in(base, path)? == Some(libc::S_IFDIR))
}

/// Whether `path` below `base` is a regular file — not a link to one —
/// asked without passing a link below `base` ([`file_type_in`]).
pub fn is_file_in(base: &Path, path: &Path) -> io::Result<bool> {
    Ok(file_type_in(base, path)? == Some(libc::S_IFREG))
}

/// The names of the directories in `dir` below `base` (links to
/// directories left out), listed and examined through the handle
/// [`open_dir_in`] opens.
pub fn subdirs_in(base: &Path, dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    let d = open_dir_in(base, dir)?;
    let mut out = Vec::new();
    for name in entries(&d)? {
        let is_dir = lstat_at(&d, &c_name(&name)?)
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if is_dir {
            out.push(name);
        }
    }
    Ok(out)
}

/// [`remove_dir_all_in`], with a directory already gone (another rank, an
/// earlier attempt) taken as removed.
pub fn remove_dir_all_if_present_in(base: &Path, path: &Path) -> io::Result<()> {
    match remove_dir_all_in(base, path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Empty and remove directory `name` in `parent` (at `cur`).
fn remove_tree_at(
    parent: &fs::File,
    name: &CString,
    (path, cur, base): (&Path, &Path, &Path),
) -> io::Result<()> {
    let dir = open_at(
        parent,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY,
        (path, cur, base),
    )?;
    for entry in entries(&dir)? {
        let en = c_name(&entry)?;
        // SAFETY: `dir` is an open descriptor and `en` NUL-terminated.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), en.as_ptr(), 0) } == 0 {
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // A directory (Linux says EISDIR, POSIX allows EPERM).
            Some(libc::EISDIR | libc::EPERM) => {
                remove_tree_at(&dir, &en, (path, &cur.join(&entry), base))?
            }
            Some(libc::ENOENT) => {}
            _ => return Err(e),
        }
    }
    // SAFETY: `parent` is an open descriptor and `name` NUL-terminated.
    if unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The names in directory handle `dir`, without `.` and `..` (read
/// through a duplicate of the handle, which `closedir` closes).
fn entries(dir: &fs::File) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    // SAFETY: duplicating an open descriptor.
    let fd = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is ours; on success the stream owns it.
    let ds = unsafe { libc::fdopendir(fd) };
    if ds.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `fd` is still ours to close.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut out = Vec::new();
    let result = loop {
        // SAFETY: errno is thread-local; readdir reports an error only
        // through it.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `ds` is an open directory stream.
        let ent = unsafe { libc::readdir(ds) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            break match e.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(e),
            };
        }
        // SAFETY: readdir returned an entry whose d_name is NUL-terminated
        // and valid until the next call on `ds`.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            out.push(std::ffi::OsString::from_vec(name.to_vec()));
        }
    };
    // SAFETY: `ds` is open and closed once here (with the duplicate).
    unsafe { libc::closedir(ds) };
    result.map(|()| out)
}

/// Test support for races with a link swapped in: a directory of a base
/// exchanged with a link out of it, as fast as a thread can.
#[cfg(test)]
pub(crate) mod swap {
    use std::path::{Path, PathBuf};

    /// Run `step(i)` for i = 0, 1, … while a thread exchanges
    /// `base/meta` with the link `base/alt` without pause, until 2,000
    /// steps have run and both a success and a failure were seen (a
    /// loaded machine can keep the swapper off its core for 2,000
    /// steps), or 20 s. Returns the successes and the failures.
    pub(crate) fn race_with_swapper(base: &Path, mut step: impl FnMut(i64) -> bool) -> (u32, u32) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = AtomicBool::new(false);
        let dir = std::fs::File::open(base).unwrap();
        let (mut ok, mut failed) = (0u32, 0u32);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    crate::beneath::exchange_at(&dir, "meta", "alt").unwrap();
                }
            });
            let start = std::time::Instant::now();
            for i in 0.. {
                let enough = i >= 2000 && ok > 0 && failed > 0;
                if enough || start.elapsed() > std::time::Duration::from_secs(20) {
                    break;
                }
                if step(i) {
                    ok += 1;
                } else {
                    failed += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        (ok, failed)
    }

    /// `base/meta`, `out` and the link `base/alt` to `out`.
    pub(crate) fn prefix_with_a_link_out(t: &Path) -> (PathBuf, PathBuf) {
        let base = t.join("prefix");
        let out = t.join("out");
        std::fs::create_dir_all(base.join("meta")).unwrap();
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&out, base.join("alt")).unwrap();
        (base, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_below_the_base_is_named() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        let out = t.path().join("out");
        fs::create_dir_all(base.join("real")).unwrap();
        fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&out, base.join("link")).unwrap();
        std::os::unix::fs::symlink(&out, base.join("real/inner")).unwrap();
        check(&base, &base.join("real/new/file")).unwrap();
        check(&base, &base.join("missing/deeper")).unwrap();
        for (p, link) in [
            ("link/f", "link"),
            ("real/inner/x/y", "real/inner"),
            ("link", "link"),
        ] {
            match check(&base, &base.join(p)) {
                Err(BeneathError::Symlink { link: l, .. }) => assert_eq!(l, base.join(link)),
                other => panic!("{p}: {other:?}"),
            }
        }
        assert!(matches!(
            check(&base, &out.join("f")),
            Err(BeneathError::Outside { .. })
        ));
        assert!(matches!(
            check(&base, &base.join("real/../../out")),
            Err(BeneathError::Outside { .. })
        ));
    }

    #[test]
    fn nofollow_refuses_a_link_at_the_last_component() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("target");
        fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, t.path().join("l")).unwrap();
        assert!(create_nofollow(&t.path().join("l")).is_err());
        assert!(open_nofollow(&t.path().join("l")).is_err());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        create_nofollow(&t.path().join("plain")).unwrap();
        open_nofollow(&t.path().join("plain")).unwrap();
    }

    /// Existence below the base is asked without following a link on the
    /// way (refused, naming it) and without following one at the end (a
    /// dangling link exists); nothing missing on the way is an error.
    #[test]
    fn exists_in_never_follows_a_link_below_the_base() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        let out = t.path().join("out");
        fs::create_dir_all(base.join(".scr")).unwrap();
        fs::create_dir(&out).unwrap();
        fs::write(base.join(".scr/index.scr"), b"i").unwrap();
        fs::write(out.join("index.scr"), b"o").unwrap();
        assert!(exists_in(&base, &base.join(".scr/index.scr")).unwrap());
        assert!(!exists_in(&base, &base.join(".scr/flush.scr")).unwrap());
        assert!(!exists_in(&base, &base.join("gone/deeper/index.scr")).unwrap());
        assert!(!exists_in(&t.path().join("no-base"), &t.path().join("no-base/f")).unwrap());
        std::os::unix::fs::symlink(&out, base.join("alt")).unwrap();
        let e = exists_in(&base, &base.join("alt/index.scr")).unwrap_err();
        assert!(
            matches!(refusal(&e), Some(BeneathError::Symlink { link, .. }) if *link == base.join("alt")),
            "{e}"
        );
        std::os::unix::fs::symlink(t.path().join("nowhere"), base.join(".scr/dangling")).unwrap();
        assert!(exists_in(&base, &base.join(".scr/dangling")).unwrap());
        assert!(exists_in(&base, &base.join("../out/index.scr")).is_err());
    }

    #[test]
    fn types_and_subdirectories_are_asked_without_following_a_link() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        let out = t.path().join("out");
        fs::create_dir_all(base.join("ckpt.1/.scr")).unwrap();
        fs::create_dir_all(out.join("planted/.scr")).unwrap();
        fs::write(base.join("ckpt.1/.scr/summary.scr"), b"s").unwrap();
        fs::write(out.join("planted/.scr/summary.scr"), b"s").unwrap();
        std::os::unix::fs::symlink(&out, base.join("alt")).unwrap();
        std::os::unix::fs::symlink(out.join("planted"), base.join("ckpt.2")).unwrap();
        std::os::unix::fs::symlink(base.join("ckpt.1/.scr/summary.scr"), base.join("f")).unwrap();
        assert!(is_dir_in(&base, &base).unwrap());
        assert!(is_dir_in(&base, &base.join("ckpt.1")).unwrap());
        assert!(is_file_in(&base, &base.join("ckpt.1/.scr/summary.scr")).unwrap());
        assert!(!is_file_in(&base, &base.join("ckpt.1/.scr")).unwrap());
        assert!(!is_dir_in(&base, &base.join("ckpt.1/.scr/summary.scr")).unwrap());
        // Missing, or below a file: neither, no error.
        assert!(!is_dir_in(&base, &base.join("ckpt.9")).unwrap());
        assert!(!is_file_in(&base, &base.join("ckpt.1/.scr/summary.scr/x")).unwrap());
        // A link is neither a directory nor a file, whatever it points to,
        // and one on the way is refused, naming it.
        assert!(!is_dir_in(&base, &base.join("ckpt.2")).unwrap());
        assert!(!is_file_in(&base, &base.join("f")).unwrap());
        let e = is_file_in(&base, &base.join("ckpt.2/.scr/summary.scr")).unwrap_err();
        assert!(
            matches!(refusal(&e), Some(BeneathError::Symlink { link, .. }) if *link == base.join("ckpt.2")),
            "{e}"
        );
        let mut dirs = subdirs_in(&base, &base).unwrap();
        dirs.sort();
        assert_eq!(dirs, ["ckpt.1"]);
        assert!(subdirs_in(&base, &base.join("alt")).is_err());
    }

    #[test]
    fn the_in_functions_refuse_a_link_anywhere_below_the_base_and_name_it() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        let out = t.path().join("out");
        fs::create_dir_all(base.join("real/sub")).unwrap();
        fs::create_dir_all(out.join("victim")).unwrap();
        fs::write(out.join("f"), b"keep").unwrap();
        fs::write(out.join("victim/g"), b"keep").unwrap();
        std::os::unix::fs::symlink(&out, base.join("link")).unwrap();
        std::os::unix::fs::symlink(&out, base.join("real/inner")).unwrap();
        std::os::unix::fs::symlink(out.join("f"), base.join("real/flink")).unwrap();
        let named = |r: io::Result<()>, link: &str| match r.as_ref().map_err(refusal) {
            Err(Some(BeneathError::Symlink { link: l, .. })) => assert_eq!(l, &base.join(link)),
            other => panic!("{link}: {other:?}"),
        };
        for how in [How::Read, How::Write, How::Create] {
            named(open_in(&base, &base.join("link/f"), how).map(drop), "link");
            named(
                open_in(&base, &base.join("real/inner/f"), how).map(drop),
                "real/inner",
            );
            named(
                open_in(&base, &base.join("real/flink"), how).map(drop),
                "real/flink",
            );
        }
        named(create_dir_all_in(&base, &base.join("link/new")), "link");
        named(
            create_dir_all_in(&base, &base.join("real/inner/new")),
            "real/inner",
        );
        named(remove_file_in(&base, &base.join("link/f")), "link");
        named(remove_dir_all_in(&base, &base.join("link/victim")), "link");
        named(
            remove_dir_all_in(&base, &base.join("real/inner")),
            "real/inner",
        );
        assert_eq!(fs::read(out.join("f")).unwrap(), b"keep");
        assert_eq!(fs::read(out.join("victim/g")).unwrap(), b"keep");
        assert!(!out.join("new").exists());
        // Outside, or climbing out with `..`.
        for p in [out.join("f"), base.join("real/../../out/f")] {
            let e = open_in(&base, &p, How::Read).unwrap_err();
            assert!(
                matches!(refusal(&e), Some(BeneathError::Outside { .. })),
                "{e}"
            );
        }
        // A link at the last component of a removal is removed, not followed.
        remove_file_in(&base, &base.join("real/flink")).unwrap();
        assert_eq!(fs::read(out.join("f")).unwrap(), b"keep");
    }

    #[test]
    fn the_in_functions_create_write_read_and_remove_below_the_base() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        fs::create_dir(&base).unwrap();
        let f = base.join("a/b/c/file");
        {
            use std::io::Write;
            let mut w = open_in(&base, &f, How::Create).unwrap();
            w.write_all(b"0123456789").unwrap();
        }
        {
            use std::io::{Seek, SeekFrom, Write};
            let mut w = open_in(&base, &f, How::Write).unwrap();
            w.seek(SeekFrom::Start(2)).unwrap();
            w.write_all(b"xy").unwrap();
        }
        let mut got = String::new();
        std::io::Read::read_to_string(&mut open_in(&base, &f, How::Read).unwrap(), &mut got)
            .unwrap();
        assert_eq!(got, "01xy456789");
        // Create truncates.
        drop(open_in(&base, &f, How::Create).unwrap());
        assert_eq!(fs::metadata(&f).unwrap().len(), 0);
        create_dir_all_in(&base, &base.join("a/b/d/e")).unwrap();
        create_dir_all_in(&base, &base.join("a/b/d/e")).unwrap();
        assert!(base.join("a/b/d/e").is_dir());
        assert_eq!(
            open_in(&base, &base.join("a/missing"), How::Read)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        remove_file_in(&base, &f).unwrap();
        assert_eq!(
            remove_file_in(&base, &f).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        remove_dir_in(&base, &base.join("a/b/c")).unwrap();
        // A tree with files, a link to outside and nested directories.
        let out = t.path().join("out");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("keep"), b"k").unwrap();
        fs::write(base.join("a/b/d/e/x"), b"x").unwrap();
        std::os::unix::fs::symlink(&out, base.join("a/b/d/tolink")).unwrap();
        remove_dir_all_in(&base, &base.join("a")).unwrap();
        assert!(!base.join("a").exists());
        assert_eq!(fs::read(out.join("keep")).unwrap(), b"k");
        assert_eq!(
            remove_dir_all_in(&base, &base.join("a"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        assert!(remove_dir_all_in(&base, &base).is_err());
        assert!(base.is_dir());
        // A FIFO planted in the prefix never blocks an open.
        let fifo = base.join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        drop(open_in(&base, &fifo, How::Read).unwrap());
        for how in [How::Write, How::Create] {
            let e = open_in(&base, &fifo, how).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENXIO), "{how:?}: {e}");
        }
        // A missing base is made when creating, not when reading.
        let fresh = t.path().join("fresh/prefix");
        assert_eq!(
            open_in(&fresh, &fresh.join("f"), How::Read)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        create_dir_all_in(&fresh, &fresh.join(".scr")).unwrap();
        assert!(fresh.join(".scr").is_dir());
    }

    /// A writer racing the walk: another thread swaps `d` between a real
    /// directory and a link out of the base (`renameat2(RENAME_EXCHANGE)`,
    /// atomic) while files are created, written and removed through `d`.
    /// Nothing may ever land in, or vanish from, the link's target. A
    /// check followed by path-based calls (what `check` alone gives) lets
    /// files through on this machine within a few hundred rounds.
    #[test]
    fn a_directory_swapped_for_a_link_while_files_are_created_never_lets_one_out() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("prefix");
        let out = t.path().join("out");
        fs::create_dir_all(base.join("d")).unwrap();
        fs::create_dir(&out).unwrap();
        fs::write(out.join("victim"), b"keep").unwrap();
        std::os::unix::fs::symlink(&out, base.join("alt")).unwrap();
        let stop = AtomicBool::new(false);
        let dirfd = fs::File::open(&base).unwrap();
        let (mut made, mut refusals) = (0u32, 0u32);
        let mut other = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    exchange_at(&dirfd, "d", "alt").unwrap();
                }
            });
            let start = std::time::Instant::now();
            let mut i = 0u64;
            while (i < 4000 || made == 0 || refusals == 0)
                && start.elapsed() < std::time::Duration::from_secs(20)
            {
                i += 1;
                let f = base.join(format!("d/f{i}"));
                match open_in(&base, &f, How::Create) {
                    Ok(_) => made += 1,
                    Err(e) if refusal(&e).is_some() => refusals += 1,
                    Err(e) => other.push(e.to_string()),
                }
                let _ = remove_file_in(&base, &base.join("d/victim"));
                let _ = open_in(&base, &base.join("d/victim"), How::Create);
            }
            stop.store(true, Ordering::Relaxed);
        });
        // The retry in `open_at` makes a link swapped away again a
        // success, not a bare ENOTDIR; a few may remain under heavy races.
        assert!(
            other.len() * 100 <= made as usize,
            "other errors: {other:?}"
        );
        let leaked: Vec<_> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "victim")
            .collect();
        assert!(leaked.is_empty(), "created through the link: {leaked:?}");
        assert_eq!(fs::read(out.join("victim")).unwrap(), b"keep");
        assert!(
            made > 0 && refusals > 0,
            "made {made}, refused {refusals}: no race seen"
        );
    }
}
