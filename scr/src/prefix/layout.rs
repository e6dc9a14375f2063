//! Where a dataset goes in the prefix directory (docs/formats.md, "The
//! prefix directory"). Two layouts ([`Layout`]):
//!
//! - SCR 3.1's (index version 2, written for every new prefix): files stay
//!   where the application routed them, keyed by their path relative to
//!   the prefix; metadata in `<prefix>/.scr/scr.dataset.<id>/`.
//! - the earlier one (index version 1): the dataset directory `D`, and for
//!   each routed file its key `rel`, stored at `<prefix>/<D>/<rel>` and
//!   given back at `<prefix>/<ORIGDIR or D>/<rel>`; metadata in
//!   `<prefix>/<D>/.scr/`.
//!
//! A dataset `scr index --upgrade` moved from the old layout to the new
//! keeps its files: its keys become `<D>/<rel>` and its summary records `D`
//! and `ORIGDIR` so a fetch still gives files their routed paths.

use std::path::{Component, Path, PathBuf};

use crate::records::dataset::Dataset;
use crate::records::meta::Meta;
use crate::records::rank2file::{FILEMETA_BASE, RANK2FILE_BASE, RANK2FILE_ROOT};
use crate::records::summary::{Summary, SUMMARY_FILE};
use crate::records::{Rank2File, Record, RecordError};

pub use crate::records::index::Layout;

/// The hidden metadata directory: `<prefix>/.scr`, and in the old layout
/// also inside each dataset directory.
pub const META_DIR: &str = crate::records::PREFIX_META_DIR;

/// `<prefix>/.scr/scr.dataset.<id>`: a dataset's metadata in SCR 3.1's
/// layout.
pub fn dataset_meta_dir(prefix: &Path, id: i64) -> PathBuf {
    prefix.join(META_DIR).join(Dataset::default_name(id))
}

/// Where one dataset lives in the prefix directory (serialised in the
/// reports of `scr copy` and `scr postrun`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placement {
    /// `D`: the dataset directory, relative to the prefix.
    pub dir: String,
    /// `ORIGDIR`: the directory the files were routed to, relative to the
    /// prefix, when it is not `dir` (`.` for the prefix itself).
    pub orig_dir: Option<String>,
    /// SCR 3.1's layout: the dataset id whose `.scr/scr.dataset.<id>`
    /// holds the metadata, keys relative to the prefix. `None`: the old
    /// layout (metadata in `<D>/.scr`, keys relative to `D`).
    #[serde(default)]
    pub meta_of: Option<i64>,
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
    /// Choose the placement of dataset `id` in the old layout from the
    /// common directory of all its routed files (components relative to
    /// the prefix; `None` when no rank routed a file).
    pub fn choose(id: i64, common: Option<&[String]>) -> Placement {
        match common {
            Some(c) if !c.is_empty() && c[0] != META_DIR => Placement {
                dir: c.join("/"),
                orig_dir: None,
                meta_of: None,
            },
            _ => Placement {
                dir: Dataset::default_name(id),
                orig_dir: Some(".".into()),
                meta_of: None,
            },
        }
    }

    /// A dataset written in SCR 3.1's layout: files where they were
    /// routed, metadata in `.scr/scr.dataset.<id>`.
    pub fn scr31(id: i64) -> Placement {
        Placement {
            dir: ".".into(),
            orig_dir: None,
            meta_of: Some(id),
        }
    }

    /// The layout this placement belongs to.
    pub fn layout(&self) -> Layout {
        match self.meta_of {
            Some(_) => Layout::Scr31,
            None => Layout::Legacy,
        }
    }

    /// Where the summary of index entry `key` of dataset `id` is.
    pub fn entry_meta_dir(prefix: &Path, layout: Layout, id: i64, key: &str) -> PathBuf {
        match layout {
            Layout::Scr31 => dataset_meta_dir(prefix, id),
            Layout::Legacy => prefix.join(key).join(META_DIR),
        }
    }

    /// The placement of index entry `key` of dataset `id`, completed from
    /// its summary (`DIR` and `ORIGDIR`, when the summary has them).
    pub fn of_entry(layout: Layout, id: i64, key: &str, summary: Option<&Summary>) -> Placement {
        let orig_dir = summary.and_then(|s| s.orig_dir.clone());
        match layout {
            Layout::Legacy => Placement {
                dir: key.to_owned(),
                orig_dir,
                meta_of: None,
            },
            Layout::Scr31 => Placement {
                dir: summary
                    .and_then(|s| s.dir.clone())
                    .unwrap_or_else(|| ".".into()),
                orig_dir,
                meta_of: Some(id),
            },
        }
    }

    /// Read the placement of index entry `key` of dataset `id` from its
    /// summary; the summary too when it is readable.
    pub fn read_entry(
        prefix: &Path,
        layout: Layout,
        id: i64,
        key: &str,
    ) -> (Placement, Result<Summary, RecordError>) {
        let meta = Self::entry_meta_dir(prefix, layout, id, key);
        let summary = Summary::read_file_in(prefix, meta.join(SUMMARY_FILE));
        (
            Self::of_entry(layout, id, key, summary.as_ref().ok()),
            summary,
        )
    }

    /// `<prefix>/<D>` (the prefix itself for SCR 3.1's own datasets).
    pub fn dataset_dir(&self, prefix: &Path) -> PathBuf {
        if self.dir.is_empty() || self.dir == "." {
            prefix.to_path_buf()
        } else {
            prefix.join(&self.dir)
        }
    }

    /// Where summary, rank2file map and rank filemaps are:
    /// `<prefix>/.scr/scr.dataset.<id>` or, in the old layout, `<prefix>/<D>/.scr`.
    pub fn meta_dir(&self, prefix: &Path) -> PathBuf {
        match self.meta_of {
            Some(id) => dataset_meta_dir(prefix, id),
            None => self.dataset_dir(prefix).join(META_DIR),
        }
    }

    /// The directory keys are relative to: the prefix in SCR 3.1's layout,
    /// the dataset directory in the old one.
    pub fn key_base(&self, prefix: &Path) -> PathBuf {
        match self.meta_of {
            Some(_) => prefix.to_path_buf(),
            None => self.dataset_dir(prefix),
        }
    }

    /// The metadata directory relative to [`Placement::key_base`]: where
    /// redundancy files and rank filemaps of a scavenge go, so their keys
    /// are `<meta_rel>/<name>`.
    pub fn meta_rel(&self) -> String {
        match self.meta_of {
            Some(id) => format!("{META_DIR}/{}", Dataset::default_name(id)),
            None => META_DIR.to_owned(),
        }
    }

    /// The root of the map to read for this dataset in its metadata
    /// directory: our per-file metadata (sizes, CRCs) when it is there,
    /// else LLNL's rank2file; `rank2file.scr` in the old layout.
    pub fn map_root(&self, prefix: &Path) -> &'static str {
        match self.meta_of {
            None => RANK2FILE_ROOT,
            Some(_) if self.meta_dir(prefix).join(FILEMETA_BASE).is_file() => FILEMETA_BASE,
            Some(_) => RANK2FILE_BASE,
        }
    }

    /// Read this dataset's whole map (serial tools; the library reads it
    /// distributed).
    pub fn read_map(&self, prefix: &Path) -> Result<Rank2File, RecordError> {
        Rank2File::read_split_in(prefix, &self.meta_dir(prefix), self.map_root(prefix))
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
        if c.is_empty() {
            return None;
        }
        Some(match self.key_dir() {
            Some(d) => format!("{d}/{}", c.join("/")),
            None => c.join("/"),
        })
    }

    /// SCR 3.1 keys of an upgraded dataset start with `D/`.
    fn key_dir(&self) -> Option<&str> {
        (self.meta_of.is_some() && !self.dir.is_empty() && self.dir != ".")
            .then_some(self.dir.as_str())
    }

    /// Where the file with key `rel` is stored in the prefix.
    pub fn stored_path(&self, prefix: &Path, rel: &str) -> PathBuf {
        match self.meta_of {
            Some(_) => prefix.join(rel),
            None => self.dataset_dir(prefix).join(rel),
        }
    }

    /// The path the application routed the file with key `rel` as.
    pub fn routed_path(&self, prefix: &Path, rel: &str) -> PathBuf {
        match self.key_dir() {
            None if self.meta_of.is_some() => prefix.join(rel),
            None => self.routed_dir(prefix).join(rel),
            Some(d) => match Path::new(rel).strip_prefix(d) {
                Ok(inner) => self.routed_dir(prefix).join(inner),
                Err(_) => prefix.join(rel),
            },
        }
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
    fn scr31_keys_are_relative_to_the_prefix() {
        let prefix = Path::new("/p/sim");
        let pl = Placement::scr31(4);
        assert_eq!(pl.meta_dir(prefix), Path::new("/p/sim/.scr/scr.dataset.4"));
        let rel = pl
            .rel_of(prefix, &meta("/p/sim/ckpt.4", "rank_0.ckpt"))
            .unwrap();
        assert_eq!(rel, "ckpt.4/rank_0.ckpt");
        assert_eq!(
            pl.stored_path(prefix, &rel),
            Path::new("/p/sim/ckpt.4/rank_0.ckpt")
        );
        assert_eq!(
            pl.routed_path(prefix, &rel),
            Path::new("/p/sim/ckpt.4/rank_0.ckpt")
        );
        assert_eq!(pl.rel_of(prefix, &meta("/p/other", "x")), None);
        // Upgraded from the old layout: files stay in scr.dataset.7, given
        // back at the prefix where they were routed.
        let up = Placement {
            dir: "scr.dataset.7".into(),
            orig_dir: Some(".".into()),
            meta_of: Some(7),
        };
        let rel = up.rel_of(prefix, &meta("/p/sim", "rank_0.ckpt")).unwrap();
        assert_eq!(rel, "scr.dataset.7/rank_0.ckpt");
        assert_eq!(
            up.stored_path(prefix, &rel),
            Path::new("/p/sim/scr.dataset.7/rank_0.ckpt")
        );
        assert_eq!(
            up.routed_path(prefix, &rel),
            Path::new("/p/sim/rank_0.ckpt")
        );
    }

    #[test]
    fn outside_paths_have_no_key() {
        let prefix = Path::new("/p/sim");
        let pl = Placement::choose(1, Some(&["ckpt".to_string()]));
        assert_eq!(pl.rel_of(prefix, &meta("/p/other", "x")), None);
        assert_eq!(pl.rel_of(prefix, &Meta::default()), None);
    }
}
