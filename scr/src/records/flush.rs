//! Flush file (`flush.scr`, guide section "Flush file"): where each cached
//! dataset currently is (cache, parallel file system, being flushed), read
//! at the end of a run to decide whether the latest checkpoint still needs
//! a flush or a scavenge (`scr_flush_file.c`).
//!
//! ```text
//! DATASET/<id>/LOCATION/<CACHE|PFS|FLUSHING|SYNC_FLUSHING>…
//!          /DIR/<dataset directory name>   /NAME/<dataset name>
//!          /CKPT/<0|1> /OUTPUT/<0|1> /DSETDESC/<dataset descriptor>
//! ```
//! LLNL SCR 3.1 keys datasets under `DATASET`, which this crate writes;
//! files written under the older `DSET` key are read too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{set_bool, set_opt, Dataset, Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The flush file's name.
pub const FLUSH_FILE: &str = "flush.scr";

/// The key datasets are written under (LLNL SCR 3.1).
const DATASET_KEY: &str = "DATASET";

/// The key earlier writers (this crate before SCR 3.1's layout) used.
const OLD_DATASET_KEY: &str = "DSET";

/// Where a dataset is (`LOCATION` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// `CACHE`: a copy is in cache.
    Cache,
    /// `PFS`: a copy is on the parallel file system.
    Pfs,
    /// `FLUSHING`: an asynchronous flush is under way.
    Flushing,
    /// `SYNC_FLUSHING`: a synchronous flush is under way (SCR 2+).
    SyncFlushing,
}

impl Location {
    /// The text SCR writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Location::Cache => "CACHE",
            Location::Pfs => "PFS",
            Location::Flushing => "FLUSHING",
            Location::SyncFlushing => "SYNC_FLUSHING",
        }
    }

    /// Parse the text SCR writes.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "CACHE" => Location::Cache,
            "PFS" => Location::Pfs,
            "FLUSHING" => Location::Flushing,
            "SYNC_FLUSHING" => Location::SyncFlushing,
            _ => return None,
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One dataset in the flush file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlushEntry {
    /// `LOCATION`: where copies are.
    pub locations: BTreeSet<Location>,
    /// `DIR`: dataset directory name to use in the prefix directory.
    pub dir: Option<String>,
    /// `NAME`: the dataset's name.
    pub name: Option<String>,
    /// `CKPT`: the dataset is a checkpoint.
    pub checkpoint: Option<bool>,
    /// `OUTPUT`: the dataset is output that must reach the PFS.
    pub output: Option<bool>,
    /// `DSETDESC`: the dataset descriptor.
    pub dataset: Option<Dataset>,
    /// `ORIGDIR` (this project): the directory, relative to the prefix, the
    /// application routed the files to, when it differs from `DIR` (files
    /// routed straight into the prefix are flushed to `scr.dataset.<id>`).
    pub orig_dir: Option<String>,
    /// Fields this version does not interpret, kept verbatim.
    pub extra: KvTree,
}

const KNOWN: &[&str] = &[
    "LOCATION", "DIR", "NAME", "CKPT", "OUTPUT", "DSETDESC", "ORIGDIR",
];

/// The flush file (`scr_flush_file_*`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlushFile {
    /// `DSET/<id>`: datasets by id.
    pub datasets: BTreeMap<i64, FlushEntry>,
}

impl FlushFile {
    /// Add a location flag (`scr_flush_file_location_set`).
    pub fn location_set(&mut self, id: i64, loc: Location) {
        self.datasets.entry(id).or_default().locations.insert(loc);
    }

    /// Remove a location flag (`scr_flush_file_location_unset`).
    pub fn location_unset(&mut self, id: i64, loc: Location) {
        if let Some(e) = self.datasets.get_mut(&id) {
            e.locations.remove(&loc);
        }
    }

    /// Whether `id` has the flag (`scr_flush_file_location_test`).
    pub fn location_test(&self, id: i64, loc: Location) -> bool {
        self.datasets
            .get(&id)
            .is_some_and(|e| e.locations.contains(&loc))
    }

    /// Whether `id` is in cache but not yet on the PFS (`scr_flush_file_need_flush`).
    pub fn need_flush(&self, id: i64) -> bool {
        self.location_test(id, Location::Cache) && !self.location_test(id, Location::Pfs)
    }

    /// Forget dataset `id` (`scr_flush_file_dataset_remove`).
    pub fn remove(&mut self, id: i64) {
        self.datasets.remove(&id);
    }

    /// Highest dataset id in the file.
    pub fn latest(&self) -> Option<i64> {
        self.datasets.keys().next_back().copied()
    }

    /// Ids of the datasets with location `loc`, ascending.
    pub fn ids_at(&self, loc: Location) -> Vec<i64> {
        self.datasets
            .iter()
            .filter(|(_, e)| e.locations.contains(&loc))
            .map(|(id, _)| *id)
            .collect()
    }
}

impl Record for FlushFile {
    const RECORD: &'static str = "flush file";
    /// A flush-file entry is a few locations per dataset: 64 MiB is far beyond
    /// any cache; a larger file is damage or a planted file, refused before it
    /// is read.
    const MAX_FILE_BYTES: u64 = 64 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        for (id, e) in &self.datasets {
            let d = t.set_kv_int(DATASET_KEY, *id);
            d.merge(&e.extra);
            let loc = d.entry("LOCATION");
            for l in &e.locations {
                loc.entry(l.as_str());
            }
            if e.locations.is_empty() {
                d.unset("LOCATION");
            }
            set_opt(d, "DIR", e.dir.as_deref());
            set_opt(d, "NAME", e.name.as_deref());
            if let Some(c) = e.checkpoint {
                set_bool(d, "CKPT", c);
            }
            if let Some(o) = e.output {
                set_bool(d, "OUTPUT", o);
            }
            if let Some(ds) = &e.dataset {
                d.set("DSETDESC", ds.to_tree());
            }
            set_opt(d, "ORIGDIR", e.orig_dir.as_deref());
        }
        t
    }

    /// Entries under `DATASET` and under the older `DSET`; when a file
    /// has both for one id, `DATASET`'s wins.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let mut datasets = BTreeMap::new();
        let mut all = root.int_keyed_under(OLD_DATASET_KEY)?;
        all.extend(root.int_keyed_under(DATASET_KEY)?);
        for (id, d) in all {
            let mut locations = BTreeSet::new();
            for (l, _) in d.keyed_under("LOCATION") {
                let loc = Location::parse(l).ok_or_else(|| RecordError::BadValue {
                    record: Self::RECORD,
                    path: d.path_of("LOCATION"),
                    value: l.to_owned(),
                    expected: "CACHE, PFS, FLUSHING or SYNC_FLUSHING",
                })?;
                locations.insert(loc);
            }
            let dataset = d
                .child("DSETDESC")
                .map(|c| Dataset::from_node(&c))
                .transpose()?;
            datasets.insert(
                id,
                FlushEntry {
                    locations,
                    dir: d.opt_str("DIR")?,
                    name: d.opt_str("NAME")?,
                    checkpoint: d.opt_bool("CKPT")?,
                    output: d.opt_bool("OUTPUT")?,
                    dataset,
                    orig_dir: d.opt_str("ORIGDIR")?,
                    extra: d.extra(KNOWN),
                },
            );
        }
        Ok(FlushFile { datasets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    const SPEC: &str = "
DSET
  18
    LOCATION
      PFS
      CACHE
    DIR
      scr.dataset.18
  17
    LOCATION
      CACHE
    DIR
      scr.dataset.17
";

    fn example() -> FlushFile {
        let mut f = FlushFile::default();
        f.location_set(18, Location::Pfs);
        f.location_set(18, Location::Cache);
        f.location_set(17, Location::Cache);
        for id in [17, 18] {
            f.datasets.get_mut(&id).unwrap().dir = Some(Dataset::default_name(id));
        }
        f
    }

    #[test]
    fn matches_the_guide_example() {
        // The guide's example uses the older `DSET` key: read as is, and
        // written under SCR 3.1's `DATASET`.
        let spec = tree_from_indented(SPEC);
        assert_eq!(FlushFile::from_tree(&spec).unwrap(), example());
        let renamed = tree_from_indented(&SPEC.replace("\nDSET\n", "\nDATASET\n"));
        assert_eq!(example().to_tree(), renamed);
        assert!(example().need_flush(17));
        assert!(!example().need_flush(18));
        assert_eq!(example().latest(), Some(18));
        assert_eq!(example().ids_at(Location::Cache), [17, 18]);
        assert_eq!(example().ids_at(Location::Pfs), [18]);
    }

    #[test]
    fn file_roundtrip() {
        let dir = tempdir();
        let path = dir.path().join(FLUSH_FILE);
        let mut f = example();
        f.location_set(19, Location::SyncFlushing);
        let e = f.datasets.get_mut(&19).unwrap();
        e.name = Some("scr.dataset.19".into());
        e.checkpoint = Some(true);
        e.output = Some(false);
        e.dataset = Some(Dataset::new(19));
        f.location_unset(18, Location::Cache);
        f.write_file(&path).unwrap();
        assert_eq!(FlushFile::read_file(&path).unwrap(), f);
        f.remove(19);
        assert_eq!(f.latest(), Some(18));
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.get_kv_int_mut("DATASET", 17)
            .unwrap()
            .entry("LOCATION")
            .entry("TAPE");
        let e = FlushFile::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, value, .. } if path == "DATASET/17/LOCATION" && value == "TAPE"),
            "{e}"
        );
        let mut t = example().to_tree();
        t.entry("DATASET").entry("newest");
        assert!(
            matches!(FlushFile::from_tree(&t), Err(RecordError::NonIntegerKey { path, .. }) if path == "DATASET")
        );
    }

    #[test]
    fn reads_and_writes_llnl_3_1() {
        let path = crate::records::index::tests::llnl_fixture("xor-flushed")
            .join(".scr")
            .join(FLUSH_FILE);
        let f = FlushFile::read_file(&path).unwrap();
        assert_eq!(f.ids_at(Location::Pfs), [7]);
        assert_eq!(f.ids_at(Location::Cache), [7]);
        let e = &f.datasets[&7];
        assert_eq!(e.name.as_deref(), Some("ckpt.7"));
        assert_eq!(e.checkpoint, Some(true));
        assert_eq!(e.dataset.as_ref().map(|d| d.id), Some(7));
        assert_eq!(f.to_tree(), crate::kvtree::file::read(&path).unwrap());
    }
}
