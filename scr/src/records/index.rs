//! Index file (`<prefix>/.scr/index.scr`, guide section "Index file"): every
//! dataset stored in the prefix directory, with completeness and
//! FLUSHED/FETCHED/FAILED timestamps (`scr_index_api.c`). Two versions:
//!
//! ```text
//! VERSION/1 (the guide's, and this project's layout before SCR 3.1's)
//! CURRENT/<dir>                     where a restart starts looking
//! DIR/<dir>/DSET/<id>               index, kept in sync with DSET
//! DSET/<id>/DIR/<dir>/COMPLETE, DSET/<dataset>, FLUSHED, FETCHED…, FAILED…
//!
//! VERSION/2 (LLNL SCR 3.1: one copy per dataset, metadata in .scr/scr.dataset.<id>)
//! CURRENT/<name>
//! NAME/<name>/DSET/<id>             index, kept in sync with DSET
//! DSET/<id>/COMPLETE, DSET/<dataset>, FLUSHED, FETCHED…, FAILED…
//! ```
//!
//! [`Index`] holds both in one shape: every copy of a dataset under a
//! *key*, the directory (version 1) or the dataset's name (version 2).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{set_bool, Dataset, Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The index version this crate writes for a new prefix: LLNL SCR 3.1's
/// (`SCR_INDEX_FILE_VERSION_2`).
pub const INDEX_VERSION: i64 = 2;

/// The index version of this project's earlier layout (and the guide's
/// example), still read, and written to a prefix that has it until
/// `scr index --upgrade` converts the prefix.
pub const INDEX_VERSION_1: i64 = 1;

/// Which prefix layout an index describes (docs/formats.md, "The prefix
/// directory").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// Index version 1: dataset metadata in `<prefix>/<dir>/.scr/`.
    Legacy,
    /// Index version 2 (LLNL SCR 3.1): dataset metadata in
    /// `<prefix>/.scr/scr.dataset.<id>/`, files where the application
    /// routed them.
    Scr31,
}

impl Layout {
    /// The index version of this layout.
    pub fn index_version(self) -> i64 {
        match self {
            Layout::Legacy => INDEX_VERSION_1,
            Layout::Scr31 => INDEX_VERSION,
        }
    }
}

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
    /// `VERSION`: [`INDEX_VERSION`] (2) or [`INDEX_VERSION_1`].
    pub version: i64,
    /// `CURRENT`: the key (directory in version 1, name in version 2) a
    /// restart starts from.
    pub current: Option<String>,
    /// Every copy of every dataset by id, then key: `DSET/<id>/DIR/<dir>`
    /// in version 1; `DSET/<id>` with the key its `NAME` in version 2
    /// (exactly one key per id).
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
    crate::civil::utc_timestamp(unix_s)
}

impl Index {
    /// An empty index of `layout`.
    pub fn new(layout: Layout) -> Index {
        Index {
            version: layout.index_version(),
            ..Index::default()
        }
    }

    /// The layout this index describes.
    pub fn layout(&self) -> Layout {
        if self.version == INDEX_VERSION_1 {
            Layout::Legacy
        } else {
            Layout::Scr31
        }
    }

    /// Every entry as (id, key, entry), oldest id first: the public listing
    /// `scr index --list` and purging use.
    pub fn entries(&self) -> impl Iterator<Item = (i64, &str, &IndexEntry)> {
        self.datasets
            .iter()
            .flat_map(|(id, keys)| keys.iter().map(move |(k, e)| (*id, k.as_str(), e)))
    }

    /// Remove every entry of dataset `id` (`scr_index_remove` by id);
    /// returns whether there was one. Clears CURRENT when it named one of
    /// them.
    pub fn remove_id(&mut self, id: i64) -> bool {
        let Some(keys) = self.datasets.remove(&id) else {
            return false;
        };
        if self.current.as_ref().is_some_and(|c| keys.contains_key(c)) {
            self.current = None;
        }
        true
    }

    /// Record (or replace) the copy of dataset `id` under `dir`, its key
    /// (the directory in version 1, the name in version 2), as
    /// `scr_index_set_dataset` and `scr_index_set_complete` do. Timestamps
    /// of an existing entry are kept. In version 2 a dataset has one key
    /// and a name one dataset: other keys of `id` and other datasets named
    /// `dir` are dropped.
    pub fn set_dataset(&mut self, id: i64, dir: &str, dataset: Dataset, complete: bool) {
        if self.layout() == Layout::Scr31 {
            let others: Vec<i64> = self
                .datasets
                .iter()
                .filter(|(i, keys)| **i != id && keys.contains_key(dir))
                .map(|(i, _)| *i)
                .collect();
            for i in others {
                self.datasets.remove(&i);
            }
            if let Some(keys) = self.datasets.get_mut(&id) {
                keys.retain(|k, _| k == dir);
            }
        }
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

fn entry_tree(d: &mut KvTree, e: &IndexEntry) {
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

fn check_entry_id(n: &Node<'_>, id: i64, entry: &IndexEntry) -> Result<(), RecordError> {
    match &entry.dataset {
        Some(ds) if ds.id != id => Err(n.inconsistent(
            "DSET/ID",
            format!("is {} but the entry is for dataset {id}", ds.id),
        )),
        _ => Ok(()),
    }
}

impl Index {
    /// Version 1's body: `DIR/<dir>/DSET/<id>` and `DSET/<id>/DIR/<dir>/…`.
    fn v1_tree(&self, t: &mut KvTree) {
        for (id, dirs) in &self.datasets {
            for (dir, e) in dirs {
                t.set_kv("DIR", dir).set_kv_int("DSET", *id);
                entry_tree(t.set_kv_int("DSET", *id).set_kv("DIR", dir), e);
            }
        }
    }

    /// Version 2's body: `NAME/<name>/DSET = <id>` and `DSET/<id>/…`; a
    /// dataset with several keys (only possible through the API) is
    /// written under its first.
    fn v2_tree(&self, t: &mut KvTree) {
        for (id, names) in &self.datasets {
            if let Some((name, e)) = names.iter().next() {
                t.set_kv("NAME", name).set_int("DSET", *id);
                entry_tree(t.set_kv_int("DSET", *id), e);
            }
        }
    }

    fn v1_from(
        root: &Node<'_>,
    ) -> Result<BTreeMap<i64, BTreeMap<String, IndexEntry>>, RecordError> {
        for (_, d) in root.keyed_under("DIR") {
            d.int_keyed_under("DSET")?;
        }
        let mut datasets = BTreeMap::new();
        for (id, d) in root.int_keyed_under("DSET")? {
            let mut dirs = BTreeMap::new();
            for (dir, e) in d.keyed_under("DIR") {
                let entry = Self::entry_from(&e)?;
                check_entry_id(&e, id, &entry)?;
                dirs.insert(dir.to_owned(), entry);
            }
            datasets.insert(id, dirs);
        }
        Ok(datasets)
    }

    /// The `NAME` map is checked for integer ids and names each dataset;
    /// a dataset it does not name takes its descriptor's `NAME`, else
    /// `scr.dataset.<id>`.
    fn v2_from(
        root: &Node<'_>,
    ) -> Result<BTreeMap<i64, BTreeMap<String, IndexEntry>>, RecordError> {
        let mut names: BTreeMap<i64, String> = BTreeMap::new();
        for (name, n) in root.keyed_under("NAME") {
            let id = n.req_i64("DSET")?;
            names.entry(id).or_insert_with(|| name.to_owned());
        }
        let mut datasets = BTreeMap::new();
        for (id, d) in root.int_keyed_under("DSET")? {
            let entry = Self::entry_from(&d)?;
            check_entry_id(&d, id, &entry)?;
            let name = names
                .remove(&id)
                .or_else(|| entry.dataset.as_ref().and_then(|ds| ds.name.clone()))
                .unwrap_or_else(|| Dataset::default_name(id));
            datasets.insert(id, BTreeMap::from([(name, entry)]));
        }
        Ok(datasets)
    }
}

impl Record for Index {
    const RECORD: &'static str = "index file";
    /// An index entry is a few hundred bytes: 64 MiB is over 100,000 datasets;
    /// a larger file is damage or a planted file, refused before it is read.
    const MAX_FILE_BYTES: u64 = 64 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_int("VERSION", self.version);
        if let Some(c) = &self.current {
            t.set_str("CURRENT", c);
        }
        match self.layout() {
            Layout::Legacy => self.v1_tree(&mut t),
            Layout::Scr31 => self.v2_tree(&mut t),
        }
        t
    }

    /// Version 1 (`DIR` index) and version 2 (`NAME` map, LLNL SCR 3.1);
    /// the index part is checked for integer ids and otherwise rebuilt from
    /// `DSET`, which is authoritative.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let version = root.req_i64("VERSION")?;
        let datasets = match version {
            INDEX_VERSION_1 => Self::v1_from(&root)?,
            INDEX_VERSION => Self::v2_from(&root)?,
            _ => {
                return Err(root.inconsistent(
                    "VERSION",
                    format!("unsupported index version {version} (this crate reads 1 and 2)"),
                ))
            }
        };
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

    /// Hardening issue: every kind of metadata file has its own limit,
    /// checked from the header before the rest is read. An index whose
    /// header claims (and whose sparse file has) 65 MiB is refused as an
    /// index file over its 64 MiB limit, not read as one 1 GiB kvtree.
    #[test]
    fn an_index_larger_than_its_kinds_limit_is_refused_from_its_header() {
        use crate::kvtree::file::{FILE_TYPE_HASH, FILE_VERSION, MAGIC};
        let dir = tempdir();
        let path = dir.path().join("index.scr");
        let len: u64 = 65 << 20;
        let mut head = Vec::new();
        head.extend_from_slice(&MAGIC.to_be_bytes());
        head.extend_from_slice(&FILE_TYPE_HASH.to_be_bytes());
        head.extend_from_slice(&FILE_VERSION.to_be_bytes());
        head.extend_from_slice(&len.to_be_bytes());
        head.extend_from_slice(&[0; 4]);
        std::fs::write(&path, &head).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        let e = Index::read_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("index file") && e.contains(&(64u64 << 20).to_string()),
            "{e}"
        );
        const {
            assert!(Index::MAX_FILE_BYTES < crate::kvtree::file::MAX_FILE_LEN);
            assert!(crate::records::Nodes::MAX_FILE_BYTES <= 1 << 16);
        }
    }

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
        let mut i = Index::new(Layout::Legacy);
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
        t.set_int("VERSION", 3);
        assert!(matches!(
            Index::from_tree(&t),
            Err(RecordError::Inconsistent { .. })
        ));
        let mut t = llnl_index().to_tree();
        t.entry("NAME").entry("ckpt.9").set_str("DSET", "nine");
        assert!(matches!(
            Index::from_tree(&t),
            Err(RecordError::BadValue { .. })
        ));
    }

    /// The index LLNL SCR 3.1 wrote for the `xor-flushed` prefix.
    pub(crate) fn llnl_fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/llnl-3.1")
            .join(name)
    }

    fn llnl_index() -> Index {
        Index::read_file(index_path(&llnl_fixture("xor-flushed"))).unwrap()
    }

    #[test]
    fn reads_llnl_version_2() {
        let i = llnl_index();
        assert_eq!(i.layout(), Layout::Scr31);
        assert_eq!(i.current.as_deref(), Some("ckpt.7"));
        let ids: Vec<i64> = i.datasets.keys().copied().collect();
        assert_eq!(ids, vec![2, 4, 6, 7]);
        assert_eq!(i.most_recent_complete(None), Some((7, "ckpt.7")));
        assert_eq!(i.dataset_id_by_dir("ckpt.4"), Some(4));
        let (_, _, e) = i.entries().next().unwrap();
        assert_eq!(e.flushed.as_deref(), Some("2026-11-24T05:01:21"));
        assert_eq!(e.dataset.as_ref().and_then(|d| d.ckpt), Some(2));
        // Written back, the tree is the one LLNL wrote.
        let raw = crate::kvtree::file::read(index_path(&llnl_fixture("xor-flushed")));
        assert_eq!(i.to_tree(), raw.unwrap());
    }

    #[test]
    fn version_2_keeps_one_entry_per_dataset_and_name() {
        let mut i = Index::default();
        i.set_dataset(3, "ckpt.3", dataset(3, 1), true);
        i.set_dataset(3, "renamed", dataset(3, 1), true);
        i.set_dataset(4, "renamed", dataset(4, 2), true);
        assert_eq!(i.entries().count(), 1);
        assert_eq!(i.dataset_id_by_dir("renamed"), Some(4));
        i.set_current("renamed");
        assert!(i.remove_id(4));
        assert_eq!(i.current, None);
        assert!(!i.remove_id(4));
    }
}
