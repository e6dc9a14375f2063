//! Control and cache directories (developer guide, "Control, cache, and
//! prefix directories"), and the identity of the node a process runs on.
//!
//! A job's control and cache directories are `<base>/<user>/scr.<jobid>`.
//! The bases (`/dev/shm`, `/tmp`) are shared by every user of the node, so
//! creating these directories is done defensively: each level below the base
//! is created with mode 0700, and an existing level must be a real directory
//! (never a symlink someone planted) owned by us. Once `<base>/<user>` is
//! ours and private, nothing below it can be swapped by another user.
//!
//! Simulated nodes: when `SCR_NODE_NAME` is set it names the node this
//! process runs on, and when `SCR_NODE_ROOT` is set every node-local base is
//! taken relative to that directory (`/dev/shm` → `$SCR_NODE_ROOT/dev/shm`).
//! N nodes are then N directory trees on one host, and killing a node is
//! removing its tree. On a real cluster neither is set: the hostname and the
//! real node-local storage are used.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::node::{LogicalPath, NodeStorage, RealPath};

/// Environment variable naming the (possibly simulated) node of this process.
pub const ENV_NODE_NAME: &str = "SCR_NODE_NAME";
/// Environment variable rooting every node-local base of a simulated node.
pub const ENV_NODE_ROOT: &str = "SCR_NODE_ROOT";

/// Why a control or cache directory could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// The base directory does not exist or is not a directory.
    #[error("{path}: storage base is missing or not a directory; create it or point the store/base parameter elsewhere")]
    BadBase {
        /// The base.
        path: PathBuf,
    },
    /// A path component is a symbolic link: refuse rather than follow it.
    #[error("{path}: is a symbolic link; refusing to follow it in a shared directory (remove it if it is not yours)")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A path component exists but is not a directory.
    #[error("{path}: exists and is not a directory")]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A directory that must be ours belongs to another user.
    #[error("{path}: owned by uid {owner}, not by us (uid {me}); refusing to use another user's directory")]
    ForeignOwner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        me: u32,
    },
    /// A user name or job id that would not be one plain directory name
    /// below the base (`../victim`, `a/b`, `.`, empty, NUL, control
    /// characters): refused before anything is created.
    #[error("{what} {value:?} cannot name a directory below {base}: {why}")]
    BadComponent {
        /// `user name` or `job id`.
        what: &'static str,
        /// The value.
        value: String,
        /// The base it would have been created below.
        base: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The operating system refused an operation.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// Where this process runs: the node's name and how node-local paths map to
/// real paths (identity on a real node, a subtree on a simulated one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node's name (hostname, or `SCR_NODE_NAME`).
    pub name: String,
    /// When set, node-local bases live below this directory.
    pub root: Option<PathBuf>,
}

impl NodeIdentity {
    /// Node identity from an environment lookup (pass `std::env::var_os`
    /// in production; tests pass a map).
    pub fn from_env(get: impl Fn(&str) -> Option<OsString>) -> NodeIdentity {
        let name = get(ENV_NODE_NAME)
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(hostname);
        let root = get(ENV_NODE_ROOT)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        NodeIdentity { name, root }
    }
}

impl NodeStorage for NodeIdentity {
    /// Identity on a real node; below `root` on a simulated one.
    fn real(&self, logical: &LogicalPath) -> RealPath {
        let base = logical.as_logical();
        match &self.root {
            None => RealPath::new(base),
            Some(root) => {
                let rel: PathBuf = base
                    .components()
                    .filter(|c| !matches!(c, std::path::Component::RootDir))
                    .collect();
                RealPath::new(root.join(rel))
            }
        }
    }
}

/// The machine's hostname (`gethostname`), or "localhost" if it has none.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname NUL-terminates
    // within that length on success (POSIX leaves truncation unspecified,
    // so the search for NUL below is bounded by the buffer).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

/// The user name SCR puts in directory names when `SCR_USER_NAME` is not
/// configured: `$USER`, else `uid<N>` for our effective uid.
pub fn user_name(get: impl Fn(&str) -> Option<OsString>) -> String {
    if let Some(u) = get("USER").filter(|u| !u.is_empty()) {
        return u.to_string_lossy().into_owned();
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    format!("uid{uid}")
}

/// `<base>/<user>/scr.<jobid>`.
pub fn job_dir(base: &Path, user: &str, jobid: &str) -> PathBuf {
    base.join(user).join(format!("scr.{jobid}"))
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> DirError + 'a {
    move |source| DirError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Create (or accept an existing) private directory `path`: mode 0700, a
/// real directory, owned by us.
pub fn ensure_private_dir(path: &Path) -> Result<(), DirError> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(path, "mkdir")(e)),
    }
    let md = fs::symlink_metadata(path).map_err(io_err(path, "lstat"))?;
    if md.file_type().is_symlink() {
        return Err(DirError::Symlink {
            path: path.to_path_buf(),
        });
    }
    if !md.is_dir() {
        return Err(DirError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    if md.uid() != me {
        return Err(DirError::ForeignOwner {
            path: path.to_path_buf(),
            owner: md.uid(),
            me,
        });
    }
    if md.mode() & 0o077 != 0 {
        // Ours but too open (e.g. made by an older tool under a loose umask).
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(io_err(path, "chmod"))?;
    }
    Ok(())
}

/// Create `<base>/<user>/scr.<jobid>` safely and return it. The base must
/// already exist (it is the node's storage, not ours to create).
pub fn create_job_dir(base: &Path, user: &str, jobid: &str) -> Result<PathBuf, DirError> {
    for (what, value) in [("user name", user), ("job id", jobid)] {
        if let Some(why) = super::path::component_problem(value) {
            return Err(DirError::BadComponent {
                what,
                value: value.to_string(),
                base: base.to_path_buf(),
                why,
            });
        }
    }
    match fs::metadata(base) {
        Ok(md) if md.is_dir() => {}
        _ => {
            return Err(DirError::BadBase {
                path: base.to_path_buf(),
            })
        }
    }
    let user_dir = base.join(user);
    ensure_private_dir(&user_dir)?;
    let dir = job_dir(base, user, jobid);
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Create `dir` and any missing parents below `within` (which must exist and
/// be ours), each private; components must not be symlinks.
pub fn create_private_dirs_below(within: &Path, dir: &Path) -> Result<(), DirError> {
    let rel = dir
        .strip_prefix(within)
        .map_err(|_| DirError::NotADirectory {
            path: dir.to_path_buf(),
        })?;
    let mut cur = within.to_path_buf();
    for c in rel.components() {
        cur.push(c.as_os_str());
        ensure_private_dir(&cur)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn simulated_node_maps_bases_below_its_root() {
        let id = NodeIdentity::from_env(env(&[
            ("SCR_NODE_NAME", "n3"),
            ("SCR_NODE_ROOT", "/tmp/sim/n3"),
        ]));
        assert_eq!(id.name, "n3");
        assert_eq!(
            id.real(&LogicalPath::new("/dev/shm")).into_path_buf(),
            PathBuf::from("/tmp/sim/n3/dev/shm")
        );
        let real = NodeIdentity::from_env(env(&[]));
        assert_eq!(real.name, hostname());
        assert_eq!(
            real.real(&LogicalPath::new("/dev/shm")).into_path_buf(),
            PathBuf::from("/dev/shm")
        );
    }

    #[test]
    fn job_dir_is_private_and_idempotent() {
        let base = tempfile::tempdir().unwrap();
        let d = create_job_dir(base.path(), "alice", "42").unwrap();
        assert_eq!(d, base.path().join("alice/scr.42"));
        for p in [base.path().join("alice"), d.clone()] {
            assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o700);
        }
        assert_eq!(create_job_dir(base.path(), "alice", "42").unwrap(), d);
    }

    #[test]
    fn planted_symlink_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), base.path().join("bob")).unwrap();
        let e = create_job_dir(base.path(), "bob", "1").unwrap_err();
        assert!(matches!(e, DirError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link"));
        assert!(
            fs::read_dir(elsewhere.path()).unwrap().next().is_none(),
            "nothing created through the link"
        );
    }

    #[test]
    fn loose_permissions_are_tightened_and_files_refused() {
        let base = tempfile::tempdir().unwrap();
        let u = base.path().join("carol");
        fs::create_dir(&u).unwrap();
        fs::set_permissions(&u, fs::Permissions::from_mode(0o777)).unwrap();
        create_job_dir(base.path(), "carol", "7").unwrap();
        assert_eq!(fs::metadata(&u).unwrap().mode() & 0o777, 0o700);
        fs::write(base.path().join("dave"), b"x").unwrap();
        assert!(matches!(
            create_job_dir(base.path(), "dave", "7"),
            Err(DirError::NotADirectory { .. })
        ));
        assert!(matches!(
            create_job_dir(&base.path().join("missing"), "x", "1"),
            Err(DirError::BadBase { .. })
        ));
    }

    #[test]
    fn foreign_owner_is_refused() {
        // Only root can hand a directory to another uid; elsewhere the
        // ownership branch is covered by the same code path as the others.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let u = base.path().join("mallory");
        fs::create_dir(&u).unwrap();
        std::os::unix::fs::chown(&u, Some(54321), None).unwrap();
        let e = create_job_dir(base.path(), "mallory", "1").unwrap_err();
        assert!(
            matches!(e, DirError::ForeignOwner { owner: 54321, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("uid 54321"));
    }

    /// Hardening issue: `SCR_USER_NAME=../victim` chmodded a directory
    /// beside the base to 0700 and created `scr.<jobid>` in it.
    #[test]
    fn user_or_jobid_that_leaves_the_base_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let base = top.path().join("shm");
        let victim = top.path().join("victim");
        fs::create_dir(&base).unwrap();
        fs::create_dir(&victim).unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o755)).unwrap();
        for (user, jobid) in [
            ("../victim", "1"),
            ("..", "1"),
            (".", "1"),
            ("", "1"),
            ("a/b", "1"),
            ("a\0b", "1"),
            ("a\nb", "1"),
            ("alice", "../../victim"),
            ("alice", "1/x"),
            ("alice", ""),
        ] {
            let e = create_job_dir(&base, user, jobid).unwrap_err();
            assert!(
                matches!(e, DirError::BadComponent { .. }),
                "{user:?} {jobid:?}: {e}"
            );
        }
        assert_eq!(
            fs::metadata(&victim).unwrap().mode() & 0o777,
            0o755,
            "victim untouched"
        );
        assert!(fs::read_dir(&victim).unwrap().next().is_none());
        assert!(fs::read_dir(&base).unwrap().next().is_none());
    }

    #[test]
    fn nested_private_dirs() {
        let base = tempfile::tempdir().unwrap();
        let top = create_job_dir(base.path(), "erin", "3").unwrap();
        let ds = top.join("scr.dataset.1/sub");
        create_private_dirs_below(&top, &ds).unwrap();
        assert!(ds.is_dir());
        assert!(create_private_dirs_below(&top, Path::new("/elsewhere")).is_err());
    }
}
