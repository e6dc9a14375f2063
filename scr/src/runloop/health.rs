//! Node health checks: SCR's `scr_list_down_nodes` and `scr_check_node`
//! (developer guide, "Node Health Checks").
//!
//! A node is down when any check fails, and the first failing check is the
//! reason reported:
//! 1. it is listed in `SCR_EXCLUDE_NODES` (the user's catch-all);
//! 2. it does not answer: on a simulated node, its tree (`SCR_NODE_ROOT`)
//!    is missing or not a directory (the stand-in for ping);
//! 3. a storage base (control, cache) is missing, cannot be listed, is not
//!    marked writable, has less total capacity than configured (a drive
//!    that lost track of its size), or a file cannot be created and removed
//!    in it (the three SSD failure modes the guide lists).
//!
//! Once a node is down it stays down for the allocation ([`DownList`]):
//! nodes that come and go are not retried.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One node-local storage base to check, with the capacity it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageCheck {
    /// What it is (`control`, `cache`), for messages.
    pub role: String,
    /// The directory as the node sees it (`/dev/shm`).
    pub path: PathBuf,
    /// Least total capacity in bytes (0: not checked).
    pub min_capacity_bytes: u64,
}

/// Why a node is down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "check", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DownReason {
    /// Listed in `SCR_EXCLUDE_NODES`.
    Excluded,
    /// The node does not answer (simulated: its tree is missing).
    Unreachable {
        /// What was tried and what failed.
        detail: String,
    },
    /// A storage base is missing or cannot be listed.
    StorageInaccessible {
        /// The base's role.
        role: String,
        /// The directory.
        path: PathBuf,
        /// The OS error.
        detail: String,
    },
    /// A storage base is not writable according to its mode or mount.
    NotWritable {
        /// The base's role.
        role: String,
        /// The directory.
        path: PathBuf,
    },
    /// The file system is smaller than configured.
    Capacity {
        /// The base's role.
        role: String,
        /// The directory.
        path: PathBuf,
        /// Total bytes found.
        total_bytes: u64,
        /// Bytes configured.
        want_bytes: u64,
    },
    /// Creating or removing a test file failed.
    TouchFailed {
        /// The base's role.
        role: String,
        /// The directory.
        path: PathBuf,
        /// The OS error.
        detail: String,
    },
    /// Reported down by the caller (e.g. the node ran the rank that hung).
    Reported {
        /// Why.
        detail: String,
    },
}

impl std::fmt::Display for DownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownReason::Excluded => f.write_str("listed in SCR_EXCLUDE_NODES"),
            DownReason::Unreachable { detail } => write!(f, "unreachable: {detail}"),
            DownReason::StorageInaccessible { role, path, detail } => {
                write!(
                    f,
                    "{role} directory {} inaccessible: {detail}",
                    path.display()
                )
            }
            DownReason::NotWritable { role, path } => {
                write!(f, "{role} directory {} is not writable", path.display())
            }
            DownReason::Capacity {
                role,
                path,
                total_bytes,
                want_bytes,
            } => write!(
                f,
                "{role} directory {} has {} of capacity, {} configured",
                path.display(),
                capacity_text(*total_bytes),
                capacity_text(*want_bytes)
            ),
            DownReason::TouchFailed { role, path, detail } => write!(
                f,
                "cannot create and remove a file in {role} directory {}: {detail}",
                path.display()
            ),
            DownReason::Reported { detail } => f.write_str(detail),
        }
    }
}

/// A byte count for a person: binary units with the exact count, and
/// "unlimited" for the values that stand for no bound (2^63 - 1 and up, as
/// a signed or unsigned "maximum" prints).
fn capacity_text(n: u64) -> String {
    if n >= i64::MAX.unsigned_abs() {
        "unlimited".to_string()
    } else if n < 1024 {
        format!("{n} bytes")
    } else {
        format!("{} ({n} bytes)", crate::units::format_binary(n))
    }
}

/// Where a node's paths really are: `root` prefixed to every node-local
/// path on a simulated node, the path itself on a real one.
pub fn node_path(root: Option<&Path>, path: &Path) -> PathBuf {
    match root {
        Some(r) => r.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_path_buf(),
    }
}

/// Total bytes of the file system holding `dir`.
pub fn total_bytes(dir: &Path) -> io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: statvfs writes into a zeroed struct we own; c is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::useless_conversion)] // field types differ between targets
    Ok(u64::from(st.f_blocks).saturating_mul(u64::from(st.f_frsize)))
}

fn writable_by_mode(dir: &Path) -> io::Result<bool> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // access(2) answers for our real uid, including root's override and
    // read-only mounts (EROFS), the "listed as writable" check.
    // SAFETY: c is NUL-terminated.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(true),
        _ => {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM) => Ok(false),
                _ => Err(e),
            }
        }
    }
}

/// `scr_check_node` for one storage base seen through `root`.
pub fn check_storage(root: Option<&Path>, check: &StorageCheck) -> Result<(), DownReason> {
    let path = node_path(root, &check.path);
    let role = check.role.clone();
    let inaccessible = |e: io::Error| DownReason::StorageInaccessible {
        role: role.clone(),
        path: path.clone(),
        detail: e.to_string(),
    };
    // `ls -lt`: the directory exists and can be listed.
    let meta = fs::metadata(&path).map_err(inaccessible)?;
    if !meta.is_dir() {
        return Err(inaccessible(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    fs::read_dir(&path).map_err(inaccessible)?;
    if !writable_by_mode(&path).map_err(inaccessible)? {
        return Err(DownReason::NotWritable { role, path });
    }
    if check.min_capacity_bytes > 0 {
        let total = total_bytes(&path).map_err(inaccessible)?;
        if total < check.min_capacity_bytes {
            return Err(DownReason::Capacity {
                role,
                path,
                total_bytes: total,
                want_bytes: check.min_capacity_bytes,
            });
        }
    }
    // touch + rm: some drives pass the two checks above and still refuse
    // to create a file.
    let probe = path.join(format!(
        ".scr-check-node.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    let touched = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(b"scr")?;
            f.sync_all()
        });
    let removed = fs::remove_file(&probe);
    match (touched, removed) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), _) | (Ok(()), Err(e)) => Err(DownReason::TouchFailed {
            role,
            path,
            detail: e.to_string(),
        }),
    }
}

/// Every check of one node: `root` is its simulated tree (`None` on a real
/// node, where the paths are used as they are).
pub fn check_node(root: Option<&Path>, storage: &[StorageCheck]) -> Result<(), DownReason> {
    if let Some(r) = root {
        match fs::metadata(r) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(DownReason::Unreachable {
                    detail: format!("{} is not a directory", r.display()),
                })
            }
            Err(e) => {
                return Err(DownReason::Unreachable {
                    detail: format!("{}: {e}", r.display()),
                })
            }
        }
    }
    for s in storage {
        check_storage(root, s)?;
    }
    Ok(())
}

/// A host list (`SLURM_JOB_NODELIST`, `SCR_EXCLUDE_NODES`) that is not in
/// hostlist syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host list {list:?}: {why}")]
pub struct HostlistError {
    /// The list as given.
    pub list: String,
    /// What is wrong with it.
    pub why: String,
}

/// Expand a host list as SCR's scripts accept it: comma-separated names,
/// each possibly with one bracketed range list, `n[1-3,7]`.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |item: &str, why: String| HostlistError {
        list: list.to_string(),
        why: format!("`{item}`: {why}"),
    };
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let mut depth = 0i32;
    let mut item = String::new();
    let mut items = Vec::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(HostlistError {
                list: list.to_string(),
                why: "unbalanced brackets".into(),
            });
        }
        if (c == ',' || c.is_whitespace()) && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(c);
        }
    }
    if depth != 0 {
        return Err(HostlistError {
            list: list.to_string(),
            why: "unbalanced brackets".into(),
        });
    }
    items.push(item);
    for it in items.into_iter().filter(|s| !s.is_empty()) {
        let Some(open) = it.find('[') else {
            out.push(it);
            continue;
        };
        let close = it.rfind(']').ok_or_else(|| bad(&it, "missing ]".into()))?;
        let (head, tail) = (&it[..open], &it[close + 1..]);
        for part in it[open + 1..close].split(',') {
            match part.split_once('-') {
                None => out.push(format!("{head}{part}{tail}")),
                Some((a, b)) => {
                    let width = a.len();
                    let (lo, hi): (u64, u64) = (
                        a.parse()
                            .map_err(|_| bad(&it, format!("bad range start {a:?}")))?,
                        b.parse()
                            .map_err(|_| bad(&it, format!("bad range end {b:?}")))?,
                    );
                    if hi < lo || hi - lo > 100_000 {
                        return Err(bad(&it, format!("range {a}-{b} is empty or too large")));
                    }
                    for i in lo..=hi {
                        out.push(format!("{head}{i:0width$}{tail}"));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A host list in SCR's compressed form, the inverse of
/// [`expand_hostlist`]: the hosts sorted and without repeats, those that
/// share a name before their trailing number (and its zero padding)
/// bracketed as ranges, `atlas[3,6,9-11]`; a lone host stays bare.
pub fn compress_hostlist(hosts: &[String]) -> String {
    // (head, padded width or 0, number) for hosts ending in a number that
    // fits; the rest stand alone.
    let mut numbered: Vec<(&str, usize, u64)> = Vec::new();
    let mut alone: Vec<&str> = Vec::new();
    for h in hosts {
        let digits = h.len() - h.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, num) = h.split_at(h.len() - digits);
        match num.parse::<u64>() {
            Ok(n) if digits > 0 && digits <= 18 => {
                let width = if digits > 1 && num.starts_with('0') {
                    digits
                } else {
                    0
                };
                numbered.push((head, width, n));
            }
            _ => alone.push(h),
        }
    }
    numbered.sort_unstable();
    numbered.dedup();
    alone.sort_unstable();
    alone.dedup();
    // (head, first number, text), sorted by the first two.
    let mut items: Vec<(&str, u64, String)> =
        alone.into_iter().map(|h| (h, 0, h.to_string())).collect();
    for group in numbered.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        let (head, width) = (group[0].0, group[0].1);
        let num = |n: u64| format!("{n:0width$}");
        if group.len() == 1 {
            items.push((head, group[0].2, format!("{head}{}", num(group[0].2))));
            continue;
        }
        let mut ranges = Vec::new();
        for run in group.chunk_by(|a, b| b.2 == a.2 + 1) {
            let (lo, hi) = (run[0].2, run[run.len() - 1].2);
            ranges.push(if lo == hi {
                num(lo)
            } else {
                format!("{}-{}", num(lo), num(hi))
            });
        }
        items.push((head, group[0].2, format!("{head}[{}]", ranges.join(","))));
    }
    items.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    items
        .into_iter()
        .map(|(_, _, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// Nodes found down so far in an allocation, with the first reason each was
/// found down. Sticky: a node is never taken off the list (the guide: once
/// ruled out, always kept out for the rest of the allocation).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DownList {
    down: BTreeMap<String, DownReason>,
}

impl DownList {
    /// An empty list.
    pub fn new() -> DownList {
        DownList::default()
    }

    /// Mark `node` down (keeps the first reason).
    pub fn mark(&mut self, node: &str, reason: DownReason) -> bool {
        if self.down.contains_key(node) {
            return false;
        }
        self.down.insert(node.to_string(), reason);
        true
    }

    /// True when `node` is down.
    pub fn is_down(&self, node: &str) -> bool {
        self.down.contains_key(node)
    }

    /// Down nodes and why, sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &DownReason)> {
        self.down.iter().map(|(n, r)| (n.as_str(), r))
    }

    /// How many nodes are down.
    pub fn len(&self) -> usize {
        self.down.len()
    }

    /// No node is down.
    pub fn is_empty(&self) -> bool {
        self.down.is_empty()
    }

    /// `scr_list_down_nodes`: check every node not yet down (`root_of`
    /// gives a simulated node's tree), with `excluded` taken from
    /// `SCR_EXCLUDE_NODES`. Returns the nodes newly found down.
    pub fn update(
        &mut self,
        nodes: &[String],
        excluded: &[String],
        root_of: &dyn Fn(&str) -> Option<PathBuf>,
        storage: &[StorageCheck],
    ) -> Vec<String> {
        let mut newly = Vec::new();
        for n in nodes {
            if self.is_down(n) {
                continue;
            }
            let verdict = if excluded.iter().any(|e| e == n) {
                Err(DownReason::Excluded)
            } else {
                check_node(root_of(n).as_deref(), storage)
            };
            if let Err(reason) = verdict {
                self.mark(n, reason);
                newly.push(n.clone());
            }
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage() -> Vec<StorageCheck> {
        vec![StorageCheck {
            role: "cache".into(),
            path: PathBuf::from("/dev/shm"),
            min_capacity_bytes: 0,
        }]
    }

    /// Random host sets (heads with and without digits, padded and plain
    /// numbers, repeats, names without a number): compressing then
    /// expanding gives each host once. Seeded; a failure names its seed.
    #[test]
    fn any_compressed_host_list_expands_to_its_hosts_once_each() {
        use rand::{Rng, SeedableRng};
        for seed in 0..300u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let heads = ["n", "node", "rhea-1vm", "c0r", "login", ""];
            let hosts: Vec<String> = (0..rng.gen_range(0..40))
                .map(|_| {
                    let head = heads[rng.gen_range(0..heads.len())];
                    match rng.gen_range(0..4) {
                        0 if !head.is_empty() => head.to_string(),
                        1 => format!("{head}{:03}", rng.gen_range(0..120)),
                        _ => format!("{head}{}", rng.gen_range(0..120)),
                    }
                })
                .collect();
            let mut want = hosts.clone();
            want.sort();
            want.dedup();
            let text = compress_hostlist(&hosts);
            let mut back =
                expand_hostlist(&text).unwrap_or_else(|e| panic!("seed {seed}: {text:?}: {e}"));
            let n = back.len();
            back.sort();
            back.dedup();
            assert_eq!(n, back.len(), "seed {seed}: {text:?} repeats a host");
            assert_eq!(back, want, "seed {seed}: {hosts:?} -> {text:?}");
        }
    }

    #[test]
    fn compressed_host_lists_are_sorted_ranges_that_expand_back() {
        let hosts = |l: &str| expand_hostlist(l).unwrap();
        // The developer guide's scr_glob_hosts examples.
        let minus: Vec<String> = hosts("atlas[3,5-7,9-11]")
            .into_iter()
            .filter(|h| !hosts("atlas[5,7,20]").contains(h))
            .collect();
        assert_eq!(compress_hostlist(&minus), "atlas[3,6,9-11]");
        assert_eq!(
            compress_hostlist(&hosts("atlas7,atlas5,atlas5")),
            "atlas[5,7]"
        );
        assert_eq!(compress_hostlist(&hosts("atlas6")), "atlas6");
        assert_eq!(compress_hostlist(&[]), "");
        // Padding kept; names without a number stand alone, in order.
        assert_eq!(
            compress_hostlist(&hosts("node[08-10],login,n[2,1],node11")),
            "login,n[1-2],node[08-09],node[10-11]"
        );
        // Any list: compressing then expanding gives it sorted, once each.
        for list in [
            "a[1-3,7],b02,b3,c",
            "x[001-003],x004,y",
            "rhea-1vm[1-2],rhea-1vm10",
        ] {
            let h = hosts(list);
            let mut want = h.clone();
            want.sort();
            want.dedup();
            let mut back = hosts(&compress_hostlist(&h));
            back.sort();
            assert_eq!(back, want, "{list}");
        }
    }

    #[test]
    fn hostlists_expand_ranges_and_keep_widths() {
        assert_eq!(
            expand_hostlist("n[1-3,7],m02, x").unwrap(),
            ["n1", "n2", "n3", "n7", "m02", "x"]
        );
        assert_eq!(
            expand_hostlist("node[08-10]").unwrap(),
            ["node08", "node09", "node10"]
        );
        assert!(expand_hostlist("n[1-3").is_err());
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("").unwrap().is_empty());
    }

    #[test]
    fn a_healthy_simulated_node_passes_and_a_missing_one_is_unreachable() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("n0");
        fs::create_dir_all(root.join("dev/shm")).unwrap();
        assert_eq!(check_node(Some(&root), &storage()), Ok(()));
        fs::remove_dir_all(&root).unwrap();
        assert!(matches!(
            check_node(Some(&root), &storage()),
            Err(DownReason::Unreachable { .. })
        ));
    }

    #[test]
    fn missing_storage_and_small_capacity_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("n0");
        fs::create_dir_all(&root).unwrap();
        match check_node(Some(&root), &storage()) {
            Err(DownReason::StorageInaccessible { role, .. }) => assert_eq!(role, "cache"),
            other => panic!("expected StorageInaccessible, got {other:?}"),
        }
        fs::create_dir_all(root.join("dev/shm")).unwrap();
        let mut s = storage();
        s[0].min_capacity_bytes = u64::MAX;
        match check_node(Some(&root), &s) {
            Err(DownReason::Capacity {
                total_bytes,
                want_bytes,
                ..
            }) => {
                assert!(total_bytes > 0);
                assert_eq!(want_bytes, u64::MAX);
            }
            other => panic!("expected Capacity, got {other:?}"),
        }
    }

    #[test]
    fn capacity_messages_say_unlimited_not_a_maximum_integer() {
        let why = DownReason::Capacity {
            role: "cache".into(),
            path: PathBuf::from("/dev/shm"),
            total_bytes: 3 << 30,
            want_bytes: u64::MAX / 2,
        };
        let text = why.to_string();
        assert_eq!(
            text,
            "cache directory /dev/shm has 3.0 GiB (3221225472 bytes) of capacity, unlimited configured"
        );
        assert!(!text.contains("9223372036854775807"), "{text}");
        assert_eq!(capacity_text(512), "512 bytes");
    }

    #[test]
    fn a_storage_path_that_is_a_file_is_inaccessible() {
        // The PFS-outage / unreadable-node stand-in as root: a regular file
        // in the directory's place.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("n0");
        fs::create_dir_all(root.join("dev")).unwrap();
        fs::write(root.join("dev/shm"), b"").unwrap();
        assert!(matches!(
            check_node(Some(&root), &storage()),
            Err(DownReason::StorageInaccessible { .. })
        ));
    }

    #[test]
    fn down_nodes_stay_down_and_exclusions_win() {
        let tmp = tempfile::tempdir().unwrap();
        let nodes: Vec<String> = (0..3).map(|i| format!("n{i}")).collect();
        for n in &nodes {
            fs::create_dir_all(tmp.path().join(n).join("dev/shm")).unwrap();
        }
        let root_of = |n: &str| Some(tmp.path().join(n));
        let mut down = DownList::new();
        assert!(down
            .update(&nodes, &["n2".into()], &root_of, &storage())
            .contains(&"n2".to_string()));
        fs::remove_dir_all(tmp.path().join("n1")).unwrap();
        assert_eq!(down.update(&nodes, &[], &root_of, &storage()), ["n1"]);
        // n1 comes back: it stays down, with its first reason.
        fs::create_dir_all(tmp.path().join("n1/dev/shm")).unwrap();
        assert!(down.update(&nodes, &[], &root_of, &storage()).is_empty());
        assert!(down.is_down("n1") && down.is_down("n2") && !down.is_down("n0"));
        assert_eq!(down.entries().next().map(|e| e.0), Some("n1"));
        assert!(matches!(
            down.entries().nth(1).map(|e| e.1),
            Some(DownReason::Excluded)
        ));
    }
}
