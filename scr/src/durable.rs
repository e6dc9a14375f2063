//! Names that survive a power loss. A file's bytes are durable once the
//! file is fsynced; its *name* (and a new directory's) only once the
//! directory holding it is fsynced too (fsync(2): "Calling fsync() does not
//! necessarily ensure that the entry in the directory containing the file
//! has also reached disk"). SCR records a dataset in the prefix only after
//! its files are copied and fsynced, so the directories it creates there
//! and the directories its copies land in are fsynced as well; the
//! power-loss model of the crash-point sweep (`faultrt::durable`) removes
//! a new entry whose directory was not.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// fsync directory `dir` (an empty path is the current directory). A file
/// system that cannot fsync a directory (EINVAL, ENOTSUP: nothing to make
/// durable that way) is not an error.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    match fs::File::open(d)?.sync_all() {
        Ok(()) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTSUP)) => {}
        Err(e) => return Err(e),
    }
    crate::fault::dir_synced(d);
    Ok(())
}

/// `fs::create_dir_all`, with the parent of every directory it creates
/// fsynced after the creation, so the new directories keep their names
/// through a power loss. Directories that already exist are left alone.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    // The missing directories, outermost first.
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        missing.push(d);
        cur = d.parent();
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            // Another rank made it first; it syncs the parent as well.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => continue,
            Err(e) => return Err(e),
        }
        sync_dir(d.parent().unwrap_or(Path::new("")))?;
    }
    Ok(())
}

/// fsync each distinct directory holding one of `files`, once: the names
/// of files just created there become durable. Returns the first error
/// with the directory it concerns.
pub fn sync_parents<'a>(
    files: impl IntoIterator<Item = &'a Path>,
) -> Result<(), (PathBuf, io::Error)> {
    let dirs: BTreeSet<&Path> = files
        .into_iter()
        .filter(|f| !f.as_os_str().is_empty())
        .filter_map(Path::parent)
        .collect();
    for d in dirs {
        sync_dir(d).map_err(|e| (d.to_path_buf(), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_dir_all_makes_every_missing_level_and_keeps_what_exists() {
        let t = tempfile::tempdir().unwrap();
        let deep = t.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        // Again: nothing to do.
        create_dir_all(&deep).unwrap();
        // A file in the way is an error, as with fs::create_dir_all.
        fs::write(t.path().join("f"), b"x").unwrap();
        assert!(create_dir_all(&t.path().join("f/g")).is_err());
        sync_parents([deep.join("x").as_path(), deep.join("y").as_path()]).unwrap();
        let (d, _) = sync_parents([t.path().join("gone/x").as_path()]).unwrap_err();
        assert_eq!(d, t.path().join("gone"));
    }
}
