//! Staying inside a directory: the prefix directory is shared with the
//! application (and, on a parallel file system, with whoever else can write
//! into it), so a symbolic link inside it may point anywhere. SCR never
//! reaches a file of the prefix through such a link: every path it writes,
//! reads or removes below the prefix is checked component by component
//! (`lstat`, never `stat`), and the last component is opened with
//! `O_NOFOLLOW`. A link is refused, naming it, rather than followed.
//!
//! The check and the use are two system calls, so a writer racing SCR
//! between them could still swap a directory for a link; docs/security.md
//! says what this defends and what it does not.

use std::fs;
use std::io;
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
}
