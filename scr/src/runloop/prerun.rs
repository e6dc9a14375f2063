//! Before the first launch of an allocation (SCR's `scr_prerun`): the
//! prefix directory must exist and be writable, its `.scr` directory is
//! created, and what a previous allocation left that describes node-local
//! state (the flush file: which datasets were in cache; the nodes file:
//! how many nodes the last run had) is removed, since this allocation's
//! caches start empty. The index, the halt file and the datasets stay.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::prefix::flush_file_path;
use crate::records::nodes::NODES_FILE;

/// Why an allocation cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrerunError {
    /// The prefix directory is missing or not a directory.
    #[error("prefix directory {}: {why}", path.display())]
    Prefix {
        /// The prefix.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A file or directory in the prefix could not be made or removed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

/// What [`prerun`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Files of an earlier allocation removed.
    pub removed: Vec<PathBuf>,
}

/// Prepare `prefix` for a new allocation (see the module documentation).
pub fn prerun(prefix: &Path) -> Result<Prepared, PrerunError> {
    match std::fs::metadata(prefix) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(PrerunError::Prefix {
                path: prefix.to_path_buf(),
                why: "not a directory".into(),
            })
        }
        Err(e) => {
            return Err(PrerunError::Prefix {
                path: prefix.to_path_buf(),
                why: e.to_string(),
            })
        }
    }
    let dot = prefix.join(".scr");
    std::fs::create_dir_all(&dot).map_err(|source| PrerunError::Io {
        path: dot.clone(),
        op: "create",
        source,
    })?;
    let mut out = Prepared::default();
    for path in [flush_file_path(prefix), dot.join(NODES_FILE)] {
        match std::fs::remove_file(&path) {
            Ok(()) => out.removed.push(path),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(PrerunError::Io {
                    path,
                    op: "remove",
                    source,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prerun_makes_the_scr_directory_and_removes_the_node_local_records() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        // A fresh prefix: .scr is created, nothing to remove.
        assert_eq!(prerun(p).unwrap(), Prepared::default());
        assert!(p.join(".scr").is_dir());
        // What an earlier allocation left: flush and nodes files go, the
        // index, the halt file and a dataset stay.
        for f in ["flush.scr", "nodes.scr", "index.scr", "halt.scr"] {
            std::fs::write(p.join(".scr").join(f), b"x").unwrap();
        }
        std::fs::create_dir_all(p.join("ckpt.3")).unwrap();
        let got = prerun(p).unwrap();
        assert_eq!(got.removed.len(), 2);
        assert!(!p.join(".scr/flush.scr").exists() && !p.join(".scr/nodes.scr").exists());
        assert!(p.join(".scr/index.scr").exists() && p.join(".scr/halt.scr").exists());
        assert!(p.join("ckpt.3").is_dir());
    }

    #[test]
    fn prerun_refuses_a_missing_prefix_or_a_file_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        let e = prerun(&missing).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(!missing.exists(), "a missing prefix is not created");
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = prerun(&file).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
