//! Node-local storage: the two kinds of path the cache deals in, kept apart
//! by type.
//!
//! SCR's records (filemaps, redundancy descriptors, the master filemap)
//! name node-local files by their *logical* path — the same string on every
//! node, e.g. `/dev/shm/<user>/scr.<jobid>/scr.dataset.4/rank_0.ckpt`. A
//! process opens a file at its *real* path: the logical one on a real node,
//! a subtree of `SCR_NODE_ROOT` on a simulated one. Passing a logical path
//! to the file system works on a real node and silently touches the wrong
//! node's files on a simulated one, so:
//!
//! - [`LogicalPath`] has no `AsRef<Path>`: it cannot be handed to `std::fs`;
//!   it is joined, compared and written into records.
//! - [`RealPath`] derefs to [`Path`]: it is what `std::fs` gets.
//! - [`NodeStorage`] is the one way from the first to the second (a trait,
//!   so a test can map a node anywhere).

use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A node-local path as SCR's records name it (identical on every node).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogicalPath(PathBuf);

impl LogicalPath {
    /// A logical path from its text (a configured base, a filemap entry).
    pub fn new(p: impl Into<PathBuf>) -> LogicalPath {
        LogicalPath(p.into())
    }

    /// `self/rel`.
    pub fn join(&self, rel: impl AsRef<Path>) -> LogicalPath {
        LogicalPath(self.0.join(rel))
    }

    /// The directory containing it, if any.
    pub fn parent(&self) -> Option<LogicalPath> {
        self.0.parent().map(|p| LogicalPath(p.to_path_buf()))
    }

    /// The path as records write it. Named so that reading it is a choice:
    /// it is not a place on this process's file system.
    pub fn as_logical(&self) -> &Path {
        &self.0
    }

    /// The text a record stores (a filemap key, a descriptor's directory).
    pub fn to_record(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }

    /// Whether `other` is this path or below it.
    pub fn contains(&self, other: &LogicalPath) -> bool {
        other.0.starts_with(&self.0)
    }
}

impl fmt::Display for LogicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.display())
    }
}

/// Where a node-local path is on this process's file system.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RealPath(PathBuf);

impl RealPath {
    /// A real path that is not the image of a logical one (a path the
    /// caller already resolved, such as a test's scratch directory).
    pub fn new(p: impl Into<PathBuf>) -> RealPath {
        RealPath(p.into())
    }

    /// The owned path, for APIs that keep one.
    pub fn into_path_buf(self) -> PathBuf {
        self.0
    }

    /// `self/rel`, still real.
    pub fn join_real(&self, rel: impl AsRef<Path>) -> RealPath {
        RealPath(self.0.join(rel))
    }
}

impl Deref for RealPath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for RealPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for RealPath {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl From<RealPath> for PathBuf {
    fn from(p: RealPath) -> PathBuf {
        p.0
    }
}

/// How this process reaches node-local storage.
pub trait NodeStorage {
    /// The real path of `logical` on this node.
    fn real(&self, logical: &LogicalPath) -> RealPath;
}

/// A directory known both ways: what a set operation creating files inside
/// it needs to name each new file in the filemap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirPair {
    /// Its real path.
    pub real: RealPath,
    /// Its logical path.
    pub logical: LogicalPath,
}

impl DirPair {
    /// The pair for `logical` on `node`.
    pub fn of(node: &dyn NodeStorage, logical: LogicalPath) -> DirPair {
        DirPair {
            real: node.real(&logical),
            logical,
        }
    }

    /// The logical path of a file created at `real` inside this directory;
    /// `None` when `real` is not inside it (a caller bug: a set operation
    /// only creates files in the dataset's directory).
    pub fn logical_of(&self, real: &Path) -> Option<LogicalPath> {
        real.strip_prefix(&*self.real)
            .ok()
            .map(|rel| self.logical.join(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::dirs::NodeIdentity;

    #[test]
    fn a_simulated_node_maps_logical_paths_below_its_root() {
        let node = NodeIdentity {
            name: "n1".into(),
            root: Some(PathBuf::from("/tmp/nodes/n1")),
        };
        let l = LogicalPath::new("/dev/shm/u/scr.7");
        assert_eq!(
            &*node.real(&l.join("f")),
            Path::new("/tmp/nodes/n1/dev/shm/u/scr.7/f")
        );
        let real_node = NodeIdentity {
            name: "n1".into(),
            root: None,
        };
        assert_eq!(&*real_node.real(&l), Path::new("/dev/shm/u/scr.7"));
    }

    #[test]
    fn a_file_inside_a_dataset_directory_gets_its_logical_name_back() {
        let node = NodeIdentity {
            name: "n1".into(),
            root: Some(PathBuf::from("/r")),
        };
        let dir = DirPair::of(&node, LogicalPath::new("/dev/shm/d"));
        let real = dir.real.join("x/y.xor");
        assert_eq!(
            dir.logical_of(&real),
            Some(LogicalPath::new("/dev/shm/d/x/y.xor"))
        );
        assert_eq!(dir.logical_of(Path::new("/elsewhere/f")), None);
        assert!(dir.logical.contains(&LogicalPath::new("/dev/shm/d/x")));
        assert!(!dir.logical.contains(&LogicalPath::new("/dev/shm/e")));
    }
}
