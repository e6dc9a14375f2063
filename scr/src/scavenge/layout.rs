//! Where a dataset goes in the prefix directory (docs/formats.md, "The
//! prefix directory"): the dataset directory `D`, and for each routed file
//! its key `rel`, stored at `<prefix>/<D>/<rel>` and routed as
//! `<prefix>/<ORIGDIR or D>/<rel>`.
//!
//! The same rules as the flush's placement; scavenge reads `D` and
//! `ORIGDIR` from the flush file (or the rank filemaps) rather than
//! choosing them, except when the flush file never recorded the dataset.

use std::path::{Component, Path, PathBuf};

use crate::records::dataset::Dataset;
use crate::records::meta::Meta;

/// The hidden metadata directory inside a dataset directory (and the prefix).
pub const META_DIR: &str = ".scr";

/// Where one dataset lives in the prefix directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placement {
    /// `D`: the dataset directory, relative to the prefix.
    pub dir: String,
    /// `ORIGDIR`: the directory the files were routed to, relative to the
    /// prefix, when it is not `dir` (`.` for the prefix itself).
    pub orig_dir: Option<String>,
}

/// Components of `p` below `base`, when `p` is inside it and every
/// component is a plain name.
fn rel_components(base: &Path, p: &Path) -> Option<Vec<String>> {
    let rel = p.strip_prefix(base).ok()?;
    rel.components()
        .map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Whether `rel` is a relative path of plain names (no `..`, no root, not
/// empty): safe to join to a dataset directory.
pub fn is_safe_relative(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The directory (components relative to the prefix) holding every one of
/// `dirs` (each the directory a routed file was in), `None` when empty.
pub fn common_dir<'a>(
    prefix: &Path,
    dirs: impl IntoIterator<Item = &'a Path>,
) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    for d in dirs {
        let c = rel_components(prefix, d).unwrap_or_default();
        acc = Some(match acc {
            None => c,
            Some(a) => a
                .iter()
                .zip(&c)
                .take_while(|(x, y)| x == y)
                .map(|(x, _)| x.clone())
                .collect(),
        });
    }
    acc
}

impl Placement {
    /// The placement of dataset `id` whose routed files all lie in the
    /// directory `common` (components relative to the prefix): that
    /// directory itself, or `scr.dataset.<id>` with `ORIGDIR` `.` when it
    /// is the prefix (or its hidden `.scr`).
    pub fn choose(id: i64, common: Option<&[String]>) -> Placement {
        match common {
            Some(c) if !c.is_empty() && c[0] != META_DIR => Placement {
                dir: c.join("/"),
                orig_dir: None,
            },
            _ => Placement {
                dir: Dataset::default_name(id),
                orig_dir: Some(".".into()),
            },
        }
    }

    /// `<prefix>/<D>`.
    pub fn dataset_dir(&self, prefix: &Path) -> PathBuf {
        prefix.join(&self.dir)
    }

    /// `<prefix>/<D>/.scr`: summary, rank2file map, rank filemaps,
    /// redundancy files.
    pub fn meta_dir(&self, prefix: &Path) -> PathBuf {
        self.dataset_dir(prefix).join(META_DIR)
    }

    /// `<prefix>/<ORIGDIR or D>`: the directory files were routed to.
    pub fn routed_dir(&self, prefix: &Path) -> PathBuf {
        match self.orig_dir.as_deref() {
            Some(".") | Some("") => prefix.to_path_buf(),
            Some(o) => prefix.join(o),
            None => self.dataset_dir(prefix),
        }
    }

    /// The key (`rel`) of a routed file, from its meta (`ORIGPATH` and
    /// `ORIGNAME`), when it lies inside [`Placement::routed_dir`].
    pub fn rel_of(&self, prefix: &Path, meta: &Meta) -> Option<String> {
        let routed = Path::new(meta.orig_path.as_deref()?).join(meta.orig_name.as_deref()?);
        let c = rel_components(&self.routed_dir(prefix), &routed)?;
        (!c.is_empty()).then(|| c.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, name: &str) -> Meta {
        Meta {
            orig_path: Some(path.into()),
            orig_name: Some(name.into()),
            ..Meta::default()
        }
    }

    #[test]
    fn a_user_directory_is_the_dataset_directory() {
        let prefix = Path::new("/p/sim");
        let c = common_dir(
            prefix,
            [Path::new("/p/sim/ckpt.3/a"), Path::new("/p/sim/ckpt.3/b")],
        )
        .unwrap();
        let pl = Placement::choose(3, Some(&c));
        assert_eq!((pl.dir.as_str(), pl.orig_dir.as_deref()), ("ckpt.3", None));
        assert_eq!(
            pl.rel_of(prefix, &meta("/p/sim/ckpt.3/a", "r0")).as_deref(),
            Some("a/r0")
        );
        assert_eq!(pl.meta_dir(prefix), Path::new("/p/sim/ckpt.3/.scr"));
    }

    #[test]
    fn files_in_the_prefix_get_a_dataset_directory() {
        let prefix = Path::new("/p/sim");
        let c = common_dir(prefix, [Path::new("/p/sim"), Path::new("/p/sim/sub")]).unwrap();
        let pl = Placement::choose(7, Some(&c));
        assert_eq!(pl.dir, "scr.dataset.7");
        assert_eq!(pl.orig_dir.as_deref(), Some("."));
        assert_eq!(
            pl.rel_of(prefix, &meta("/p/sim/sub", "x")).as_deref(),
            Some("sub/x")
        );
        assert_eq!(Placement::choose(2, None).dir, "scr.dataset.2");
        let hidden = vec![META_DIR.to_string()];
        assert_eq!(Placement::choose(2, Some(&hidden)).dir, "scr.dataset.2");
    }

    #[test]
    fn paths_outside_have_no_key_and_unsafe_names_are_refused() {
        let prefix = Path::new("/p/sim");
        let pl = Placement::choose(1, Some(&["ckpt".to_string()]));
        assert_eq!(pl.rel_of(prefix, &meta("/p/other", "x")), None);
        assert_eq!(pl.rel_of(prefix, &Meta::default()), None);
        assert!(is_safe_relative("a/b.c"));
        for bad in ["", "/abs", "../up", "a/../b", "./a"] {
            assert!(!is_safe_relative(bad), "{bad:?}");
        }
    }
}
