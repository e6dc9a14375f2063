//! Where a dataset goes in the prefix directory (docs/formats.md, "The
//! prefix directory"): the dataset directory `D`, and for each routed file
//! its key `rel`, stored at `<prefix>/<D>/<rel>` and given back at
//! `<prefix>/<ORIGDIR or D>/<rel>`.

use std::path::{Component, Path, PathBuf};

use crate::records::dataset::Dataset;
use crate::records::meta::Meta;

/// The hidden metadata directory inside a dataset directory.
pub const META_DIR: &str = ".scr";

/// Where one dataset lives in the prefix directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// `D`: the dataset directory, relative to the prefix.
    pub dir: String,
    /// `ORIGDIR`: the directory the files were routed to, relative to the
    /// prefix, when it is not `dir` (`.` for the prefix itself).
    pub orig_dir: Option<String>,
}

/// Components of `p` relative to `prefix`, when `p` is inside it.
fn rel_components(prefix: &Path, p: &Path) -> Option<Vec<String>> {
    let rel = p.strip_prefix(prefix).ok()?;
    rel.components()
        .map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Longest common leading run of two component lists.
fn common(a: &[String], b: &[String]) -> Vec<String> {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.clone())
        .collect()
}

/// The directory (components relative to the prefix) holding every routed
/// path in `dirs` (each the parent directory of a routed file), or `None`
/// when there are none.
pub fn common_dir<'a>(
    prefix: &Path,
    dirs: impl IntoIterator<Item = &'a Path>,
) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    for d in dirs {
        let c = rel_components(prefix, d).unwrap_or_default();
        acc = Some(match acc {
            None => c,
            Some(a) => common(&a, &c),
        });
    }
    acc
}

impl Placement {
    /// Choose the placement of dataset `id` from the common directory of
    /// all its routed files (components relative to the prefix; `None`
    /// when no rank routed a file).
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

    /// `<prefix>/<D>/.scr`: summary, rank2file map, rank filemaps.
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

    /// Where the file with key `rel` is stored in the prefix.
    pub fn stored_path(&self, prefix: &Path, rel: &str) -> PathBuf {
        self.dataset_dir(prefix).join(rel)
    }

    /// The path the application routed the file with key `rel` as.
    pub fn routed_path(&self, prefix: &Path, rel: &str) -> PathBuf {
        self.routed_dir(prefix).join(rel)
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
    fn user_directory_is_kept() {
        let prefix = Path::new("/p/sim");
        let dirs = [Path::new("/p/sim/ckpt.3/a"), Path::new("/p/sim/ckpt.3/b")];
        let c = common_dir(prefix, dirs).unwrap();
        let pl = Placement::choose(3, Some(&c));
        assert_eq!(pl.dir, "ckpt.3");
        assert_eq!(pl.orig_dir, None);
        let m = meta("/p/sim/ckpt.3/a", "rank_0.dat");
        let rel = pl.rel_of(prefix, &m).unwrap();
        assert_eq!(rel, "a/rank_0.dat");
        assert_eq!(
            pl.stored_path(prefix, &rel),
            Path::new("/p/sim/ckpt.3/a/rank_0.dat")
        );
        assert_eq!(
            pl.routed_path(prefix, &rel),
            Path::new("/p/sim/ckpt.3/a/rank_0.dat")
        );
        assert_eq!(pl.meta_dir(prefix), Path::new("/p/sim/ckpt.3/.scr"));
    }

    #[test]
    fn files_in_the_prefix_go_to_a_dataset_directory() {
        let prefix = Path::new("/p/sim");
        let dirs = [Path::new("/p/sim"), Path::new("/p/sim/sub")];
        let c = common_dir(prefix, dirs).unwrap();
        let pl = Placement::choose(7, Some(&c));
        assert_eq!(pl.dir, "scr.dataset.7");
        assert_eq!(pl.orig_dir.as_deref(), Some("."));
        let m = meta("/p/sim/sub", "x");
        let rel = pl.rel_of(prefix, &m).unwrap();
        assert_eq!(rel, "sub/x");
        assert_eq!(
            pl.stored_path(prefix, &rel),
            Path::new("/p/sim/scr.dataset.7/sub/x")
        );
        assert_eq!(pl.routed_path(prefix, &rel), Path::new("/p/sim/sub/x"));
    }

    #[test]
    fn no_files_and_hidden_directory() {
        assert_eq!(Placement::choose(2, None).dir, "scr.dataset.2");
        let hidden = vec![".scr".to_string()];
        assert_eq!(Placement::choose(2, Some(&hidden)).dir, "scr.dataset.2");
    }

    #[test]
    fn outside_paths_have_no_key() {
        let prefix = Path::new("/p/sim");
        let pl = Placement::choose(1, Some(&["ckpt".to_string()]));
        assert_eq!(pl.rel_of(prefix, &meta("/p/other", "x")), None);
        assert_eq!(pl.rel_of(prefix, &Meta::default()), None);
    }
}
