//! Lexical path handling (the developer guide's `scr_path`): reduce a path
//! to a canonical form without touching the file system, and decide whether
//! a path lies under a directory. Route_file uses this to refuse names that
//! resolve outside the prefix directory.

use std::path::{Component, Path, PathBuf};

/// Reduce `path` lexically (`scr_path_reduce`): drop `.` components and
/// repeated or trailing separators, and resolve `..` against the preceding
/// component. A `..` above the root of an absolute path stays at the root; a
/// leading `..` of a relative path is kept.
pub fn reduce(path: &Path) -> PathBuf {
    let mut parts: Vec<Component<'_>> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                Some(Component::RootDir) | Some(Component::Prefix(_)) => {}
                _ => parts.push(c),
            },
            other => parts.push(other),
        }
    }
    let mut out = PathBuf::new();
    for p in parts {
        out.push(p.as_os_str());
    }
    if out.as_os_str().is_empty() && !path.as_os_str().is_empty() && !path.is_absolute() {
        out.push(".");
    }
    out
}

/// Why `name` cannot be one component of a path SCR builds (a user name,
/// a job id, a directory named after a configured value), or `None` when
/// it can: it must not be empty, `.` or `..`, and must not contain `/`, a
/// NUL byte or a control character. Checked before a configured value
/// becomes a directory, so `SCR_USER_NAME=../victim` cannot leave the base.
pub fn component_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name == "." || name == ".." {
        Some("`.` and `..` name no new directory")
    } else if name.contains('/') {
        Some("it contains `/`")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else if name.chars().any(char::is_control) {
        Some("it contains a control character")
    } else {
        None
    }
}

/// Make `name` absolute against `cwd` (when relative) and reduce it.
pub fn absolute(name: &Path, cwd: &Path) -> PathBuf {
    if name.is_absolute() {
        reduce(name)
    } else {
        reduce(&cwd.join(name))
    }
}

/// True when `path` equals `dir` or lies below it, compared after lexical
/// reduction (both should be absolute).
pub fn is_within(path: &Path, dir: &Path) -> bool {
    reduce(path).starts_with(reduce(dir))
}

/// `dst` relative to the directory `src` (`scr_path_relative`), both
/// reduced; e.g. `/hello/world` → `/hello/foo` gives `../foo`.
pub fn relative(src: &Path, dst: &Path) -> PathBuf {
    let (s, d) = (reduce(src), reduce(dst));
    let sc: Vec<_> = s.components().collect();
    let dc: Vec<_> = d.components().collect();
    let common = sc.iter().zip(&dc).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..sc.len() {
        out.push("..");
    }
    for c in &dc[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_problem_refuses_what_leaves_or_aliases_a_directory() {
        for bad in [
            "", ".", "..", "../x", "a/b", "/", "a\0b", "a\tb", "a\u{7f}b",
        ] {
            assert!(component_problem(bad).is_some(), "{bad:?}");
        }
        for good in ["alice", "a.b", "...", "1234.5", "job-1_x", "ü"] {
            assert_eq!(component_problem(good), None, "{good:?}");
        }
    }

    #[test]
    fn reduce_matches_the_guide() {
        assert_eq!(
            reduce(Path::new("/hello/world/../foo/bar/.././")),
            PathBuf::from("/hello/foo")
        );
        assert_eq!(reduce(Path::new("/../..//a")), PathBuf::from("/a"));
        assert_eq!(reduce(Path::new("../a/./b/..")), PathBuf::from("../a"));
        assert_eq!(reduce(Path::new("a/..")), PathBuf::from("."));
    }

    #[test]
    fn within_is_lexical_and_component_wise() {
        let prefix = Path::new("/p/run");
        assert!(is_within(Path::new("/p/run/ckpt/a"), prefix));
        assert!(is_within(Path::new("/p/run"), prefix));
        assert!(!is_within(Path::new("/p/run/../other/a"), prefix));
        assert!(!is_within(Path::new("/p/runner/a"), prefix));
        assert!(is_within(&absolute(Path::new("x/../y"), prefix), prefix));
        assert!(!is_within(&absolute(Path::new("../y"), prefix), prefix));
    }

    #[test]
    fn relative_matches_the_guide() {
        assert_eq!(
            relative(Path::new("/hello/world"), Path::new("/hello/foo")),
            PathBuf::from("../foo")
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a")),
            PathBuf::from(".")
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a/b/c")),
            PathBuf::from("b/c")
        );
    }
}
