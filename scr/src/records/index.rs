//! Index file (`<prefix>/.scr/index.scr`, guide section "Index file"): every
//! dataset stored in the prefix directory, by id and directory name, with
//! completeness and FLUSHED/FETCHED/FAILED timestamps (`scr_index_api.c`).
//!
//! ```text
//! VERSION/1
//! CURRENT/<dir>                     where a restart starts looking
//! DIR/<dir>/DSET/<id>               index, kept in sync with DSET
//! DSET/<id>/DIR/<dir>/COMPLETE, DSET/<dataset>, FLUSHED, FETCHED…, FAILED…
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{set_bool, Dataset, Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The only index format version (`SCR_INDEX_FILE_VERSION_1`).
pub const INDEX_VERSION: i64 = 1;

/// The index file's path in `prefix`: `<prefix>/.scr/index.scr`.
pub fn index_path(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join("index.scr")
}

/// One copy of a dataset in one directory of the prefix.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IndexEntry {
    /// `COMPLETE`: whether the copy is thought complete.
    pub complete: Option<bool>,
    /// `DSET`: the dataset descriptor.
    pub dataset: Option<Dataset>,
    /// `FLUSHED`: when the copy was written, `YYYY-MM-DDTHH:MM:SS`.
    pub flushed: Option<String>,
    /// `FETCHED`: each time the copy was fetched for a restart.
    pub fetched: Vec<String>,
    /// `FAILED`: each time a fetch of the copy failed.
    pub failed: Vec<String>,
}

/// The index of datasets in a prefix directory (`scr_index_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    /// `VERSION`: the index format version, [`INDEX_VERSION`].
    pub version: i64,
    /// `CURRENT`: directory a restart starts from.
    pub current: Option<String>,
    /// `DSET/<id>/DIR/<dir>`: every copy of every dataset.
    pub datasets: BTreeMap<i64, BTreeMap<String, IndexEntry>>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            version: INDEX_VERSION,
            current: None,
            datasets: BTreeMap::new(),
        }
    }
}

/// Format seconds since the epoch the way the index records times,
/// `YYYY-MM-DDTHH:MM:SS` (SCR uses local time; this crate writes UTC so
/// files do not depend on the node's time zone).
pub fn timestamp(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Civil-from-days (H. Hinnant's algorithm), proleptic Gregorian.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

impl Index {
    /// Record (or replace) the copy of dataset `id` in directory `dir`
    /// (`scr_index_set_dataset` + `scr_index_set_complete`). Timestamps of
    /// an existing entry are kept.
    pub fn set_dataset(&mut self, id: i64, dir: &str, dataset: Dataset, complete: bool) {
        let e = self
            .datasets
            .entry(id)
            .or_default()
            .entry(dir.to_owned())
            .or_default();
        e.dataset = Some(dataset);
        e.complete = Some(complete);
    }

    fn entry_mut(&mut self, id: i64, dir: &str) -> &mut IndexEntry {
        self.datasets
            .entry(id)
            .or_default()
            .entry(dir.to_owned())
            .or_default()
    }

    /// `scr_index_mark_flushed`.
    pub fn mark_flushed(&mut self, id: i64, dir: &str, when: String) {
        self.entry_mut(id, dir).flushed = Some(when);
    }

    /// `scr_index_mark_fetched`: adds a FETCHED time.
    pub fn mark_fetched(&mut self, id: i64, dir: &str, when: String) {
        self.entry_mut(id, dir).fetched.push(when);
    }

    /// `scr_index_mark_failed`: adds a FAILED time; the copy is no longer
    /// a restart candidate.
    pub fn mark_failed(&mut self, id: i64, dir: &str, when: String) {
        self.entry_mut(id, dir).failed.push(when);
    }

    /// `scr_index_set_current`.
    pub fn set_current(&mut self, dir: &str) {
        self.current = Some(dir.to_owned());
    }

    /// Remove the copy in `dir` (`scr_index_remove`); returns whether it
    /// existed. Clears CURRENT when it named `dir`.
    pub fn remove_dir(&mut self, dir: &str) -> bool {
        let Some(id) = self.dataset_id_by_dir(dir) else {
            return false;
        };
        if let Some(dirs) = self.datasets.get_mut(&id) {
            dirs.remove(dir);
            if dirs.is_empty() {
                self.datasets.remove(&id);
            }
        }
        if self.current.as_deref() == Some(dir) {
            self.current = None;
        }
        true
    }

    /// The dataset id stored in `dir` (`scr_index_get_id_by_dir`).
    pub fn dataset_id_by_dir(&self, dir: &str) -> Option<i64> {
        self.datasets
            .iter()
            .find(|(_, dirs)| dirs.contains_key(dir))
            .map(|(id, _)| *id)
    }

    /// The newest complete copy that never failed a fetch, with id below
    /// `below` when given (`scr_index_get_most_recent_complete`).
    pub fn most_recent_complete(&self, below: Option<i64>) -> Option<(i64, &str)> {
        self.datasets
            .iter()
            .rev()
            .filter(|(id, _)| below.is_none_or(|b| **id < b))
            .find_map(|(id, dirs)| {
                dirs.iter()
                    .find(|(_, e)| e.complete == Some(true) && e.failed.is_empty())
                    .map(|(d, _)| (*id, d.as_str()))
            })
    }

    fn entry_from(n: &Node<'_>) -> Result<IndexEntry, RecordError> {
        let times = |key: &str| {
            n.keyed_under(key)
                .into_iter()
                .map(|(k, _)| k.to_owned())
                .collect()
        };
        Ok(IndexEntry {
            complete: n.opt_bool("COMPLETE")?,
            dataset: n
                .child("DSET")
                .map(|c| Dataset::from_node(&c))
                .transpose()?,
            flushed: n.opt_str("FLUSHED")?,
            fetched: times("FETCHED"),
            failed: times("FAILED"),
        })
    }
}

impl Record for Index {
    const RECORD: &'static str = "index file";

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_int("VERSION", self.version);
        if let Some(c) = &self.current {
            t.set_str("CURRENT", c);
        }
        for (id, dirs) in &self.datasets {
            for (dir, e) in dirs {
                t.set_kv("DIR", dir).set_kv_int("DSET", *id);
                let d = t.set_kv_int("DSET", *id).set_kv("DIR", dir);
                if let Some(c) = e.complete {
                    set_bool(d, "COMPLETE", c);
                }
                if let Some(ds) = &e.dataset {
                    d.set("DSET", ds.to_tree());
                }
                if let Some(f) = &e.flushed {
                    d.set_str("FLUSHED", f);
                }
                for f in &e.fetched {
                    d.set_kv("FETCHED", f);
                }
                for f in &e.failed {
                    d.set_kv("FAILED", f);
                }
            }
        }
        t
    }

    /// The `DIR` index is checked for integer ids and otherwise rebuilt
    /// from `DSET`, which is authoritative.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let version = root.req_i64("VERSION")?;
        if version != INDEX_VERSION {
            return Err(
                root.inconsistent("VERSION", format!("unsupported index version {version}"))
            );
        }
        for (_, d) in root.keyed_under("DIR") {
            d.int_keyed_under("DSET")?;
        }
        let mut datasets = BTreeMap::new();
        for (id, d) in root.int_keyed_under("DSET")? {
            let mut dirs = BTreeMap::new();
            for (dir, e) in d.keyed_under("DIR") {
                let entry = Self::entry_from(&e)?;
                if let Some(ds) = &entry.dataset {
                    if ds.id != id {
                        return Err(e.inconsistent(
                            "DSET/ID",
                            format!("is {} but the entry is for dataset {id}", ds.id),
                        ));
                    }
                }
                dirs.insert(dir.to_owned(), entry);
            }
            datasets.insert(id, dirs);
        }
        Ok(Index {
            version,
            current: root.opt_str("CURRENT")?,
            datasets,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    /// The guide's example index file.
    const SPEC: &str = "
VERSION
  1
CURRENT
  scr.dataset.18
DIR
  scr.dataset.18
    DSET
      18
  scr.dataset.12
    DSET
      12
DSET
  18
    DIR
      scr.dataset.18
        COMPLETE
          1
        DSET
          ID
            18
          NAME
            scr.dataset.18
          CREATED
            1312853507675143
          USER
            user1
          JOBNAME
            simulation123
          JOBID
            112573
          CKPT
            18
          FILES
            4
          SIZE
            2097182
          COMPLETE
            1
        FLUSHED
          2011-08-08T18:31:47
  12
    DIR
      scr.dataset.12
        FETCHED
          2011-08-08T18:31:47
        FLUSHED
          2011-08-08T18:30:30
        COMPLETE
          1
        DSET
          COMPLETE
            1
          SIZE
            2097182
          FILES
            4
          ID
            12
          NAME
            scr.dataset.12
          CREATED
            1312853406814268
          USER
            user1
          JOBNAME
            simulation123
          JOBID
            112573
          CKPT
            12
";

    pub(crate) fn dataset(id: i64, created_us: i64) -> Dataset {
        Dataset {
            id,
            name: Some(Dataset::default_name(id)),
            created_us: Some(created_us),
            user: Some("user1".into()),
            jobname: Some("simulation123".into()),
            jobid: Some("112573".into()),
            ckpt: Some(id),
            files: Some(4),
            size_bytes: Some(2_097_182),
            complete: Some(true),
            ..Dataset::default()
        }
    }

    fn example() -> Index {
        let mut i = Index::default();
        i.set_dataset(
            18,
            "scr.dataset.18",
            dataset(18, 1_312_853_507_675_143),
            true,
        );
        i.mark_flushed(18, "scr.dataset.18", "2011-08-08T18:31:47".into());
        i.set_dataset(
            12,
            "scr.dataset.12",
            dataset(12, 1_312_853_406_814_268),
            true,
        );
        i.mark_flushed(12, "scr.dataset.12", "2011-08-08T18:30:30".into());
        i.mark_fetched(12, "scr.dataset.12", "2011-08-08T18:31:47".into());
        i.set_current("scr.dataset.18");
        i
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Index::from_tree(&spec).unwrap(), example());
    }

    #[test]
    fn file_roundtrip_and_queries() {
        let dir = tempdir();
        let path = index_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut i = example();
        i.mark_failed(18, "scr.dataset.18", timestamp(1_312_853_600));
        i.write_file(&path).unwrap();
        assert_eq!(Index::read_file(&path).unwrap(), i);
        assert_eq!(i.most_recent_complete(None), Some((12, "scr.dataset.12")));
        assert_eq!(
            example().most_recent_complete(None),
            Some((18, "scr.dataset.18"))
        );
        assert_eq!(
            example().most_recent_complete(Some(18)),
            Some((12, "scr.dataset.12"))
        );
        assert_eq!(i.dataset_id_by_dir("scr.dataset.12"), Some(12));
        assert!(i.remove_dir("scr.dataset.18"));
        assert_eq!(i.current, None);
        assert_eq!(i.datasets.keys().copied().collect::<Vec<_>>(), vec![12]);
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00");
        assert_eq!(timestamp(1_312_828_307), "2011-08-08T18:31:47");
        assert_eq!(timestamp(951_782_400), "2000-02-29T00:00:00");
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.unset("VERSION");
        assert!(
            matches!(Index::from_tree(&t), Err(RecordError::Missing { path, .. }) if path == "VERSION")
        );
        let mut t = example().to_tree();
        t.entry("DSET").entry("latest");
        assert!(
            matches!(Index::from_tree(&t), Err(RecordError::NonIntegerKey { path, .. }) if path == "DSET")
        );
        let mut t = example().to_tree();
        t.set_int("VERSION", 2);
        assert!(matches!(
            Index::from_tree(&t),
            Err(RecordError::Inconsistent { .. })
        ));
    }
}
