//! The filemap (`scr_filemap`, guide section "Filemap"): which rank wrote
//! which file in which dataset, with per-file meta data, the redundancy
//! descriptor and dataset descriptor of each (rank, dataset), and tags.
//!
//! ```text
//! DSET/<d>/RANK/<r>                      index, kept in sync with RANK
//! RANK/<r>/DSET/<d>/FILES/<expected count>
//!                  /FILE/<path>/<meta>
//!                  /REDDESC/<redundancy descriptor>
//!                  /DATADESC/<dataset descriptor>
//!                  /<tag>/<value>        e.g. PARTNER/atlas56
//! ```
//!
//! Each process keeps one in the control directory
//! ([`filemap_file_name`]); it is the cache tier's record of what may exist
//! in cache.

use super::{Dataset, Meta, Node, Record, RecordError, RedDesc};
use crate::ids::{DatasetId, Rank};
use crate::kvtree::KvTree;
use std::path::Path;

const RANK: &str = "RANK";
const DSET: &str = "DSET";
const FILES: &str = "FILES";
const FILE: &str = "FILE";
const REDDESC: &str = "REDDESC";
const DATADESC: &str = "DATADESC";
const RESERVED: &[&str] = &[FILES, FILE, REDDESC, DATADESC];

/// Name of a process's filemap file in the control directory,
/// `filemap_<local rank>.scrinfo` (guide, "Filemap files").
pub fn filemap_file_name(local_rank: u32) -> String {
    format!("filemap_{local_rank}.scrinfo")
}

/// Name of the node's master filemap file, which lists every per-process
/// filemap file under `Filemap` (guide, "Filemap files").
pub const MASTER_FILEMAP_FILE: &str = "filemap.scrinfo";

/// The node's master filemap file (`filemap.scrinfo`): the full paths of
/// every per-process filemap file on the node, under the key `Filemap`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MasterFilemap {
    /// Paths of the per-process filemap files.
    pub files: std::collections::BTreeSet<String>,
}

impl Record for MasterFilemap {
    const RECORD: &'static str = "master filemap";

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        for f in &self.files {
            t.set_kv("Filemap", f);
        }
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        Ok(MasterFilemap {
            files: root
                .keyed_under("Filemap")
                .into_iter()
                .map(|(k, _)| k.to_owned())
                .collect(),
        })
    }
}

/// An in-memory filemap (`scr_filemap`). Only its methods change it, so the
/// top-level `DSET` index always matches the `RANK` data and every rank and
/// dataset key is an integer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filemap {
    tree: KvTree,
}

impl Filemap {
    /// An empty filemap (`scr_filemap_new`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The filemap's kvtree (what [`Record::to_tree`] returns, borrowed).
    pub fn as_tree(&self) -> &KvTree {
        &self.tree
    }

    /// True when the filemap holds nothing.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Delete every entry (`scr_filemap_clear`).
    pub fn clear(&mut self) {
        self.tree.clear();
    }

    fn rd(&self, dset: DatasetId, rank: Rank) -> Option<&KvTree> {
        self.tree
            .get_kv_int(RANK, rank.as_i64())?
            .get_kv_int(DSET, dset.0)
    }

    fn rd_mut(&mut self, dset: DatasetId, rank: Rank) -> Option<&mut KvTree> {
        self.tree
            .get_kv_int_mut(RANK, rank.as_i64())?
            .get_kv_int_mut(DSET, dset.0)
    }

    /// The (rank, dataset) entry, created with its index entry when missing.
    fn rd_create(&mut self, dset: DatasetId, rank: Rank) -> &mut KvTree {
        self.tree
            .set_kv_int(DSET, dset.0)
            .set_kv_int(RANK, rank.as_i64());
        self.tree
            .set_kv_int(RANK, rank.as_i64())
            .set_kv_int(DSET, dset.0)
    }

    /// Drop the (rank, dataset) entry and its index entry once empty
    /// (`scr_filemap_unset_if_empty`).
    fn prune(&mut self, dset: DatasetId, rank: Rank) {
        if self.rd(dset, rank).is_some_and(|t| !t.is_empty()) {
            return;
        }
        if let Some(r) = self.tree.get_kv_int_mut(RANK, rank.as_i64()) {
            r.unset_kv_int(DSET, dset.0);
            if r.is_empty() {
                self.tree.unset_kv_int(RANK, rank.as_i64());
            }
        }
        if let Some(d) = self.tree.get_kv_int_mut(DSET, dset.0) {
            d.unset_kv_int(RANK, rank.as_i64());
            if d.is_empty() {
                self.tree.unset_kv_int(DSET, dset.0);
            }
        }
    }

    /// Record that `rank` wrote `file` in dataset `dset`
    /// (`scr_filemap_add_file`). Keeps meta data already recorded.
    pub fn add_file(&mut self, dset: DatasetId, rank: Rank, file: &str) {
        self.rd_create(dset, rank).entry(FILE).entry(file);
    }

    /// Forget `file` (`scr_filemap_remove_file`); the (rank, dataset) entry
    /// goes too once nothing is left in it.
    pub fn remove_file(&mut self, dset: DatasetId, rank: Rank, file: &str) {
        if let Some(rd) = self.rd_mut(dset, rank) {
            rd.unset_kv(FILE, file);
        }
        self.prune(dset, rank);
    }

    /// Remove everything about dataset `dset` (`scr_filemap_remove_dataset`).
    pub fn remove_dataset(&mut self, dset: DatasetId) {
        for rank in self.list_ranks_by_dataset(dset) {
            self.remove_rank_by_dataset(dset, rank);
        }
    }

    /// Remove everything about `rank` (`scr_filemap_remove_rank`).
    pub fn remove_rank(&mut self, rank: Rank) {
        let _ = self.extract_rank(rank);
    }

    /// Remove everything about `rank` in dataset `dset`
    /// (`scr_filemap_remove_rank_by_dataset`).
    pub fn remove_rank_by_dataset(&mut self, dset: DatasetId, rank: Rank) {
        if let Some(r) = self.tree.get_kv_int_mut(RANK, rank.as_i64()) {
            r.unset_kv_int(DSET, dset.0);
        }
        self.prune(dset, rank);
    }

    /// Move everything about `rank` into a new filemap
    /// (`scr_filemap_extract_rank`).
    pub fn extract_rank(&mut self, rank: Rank) -> Filemap {
        let mut out = Filemap::new();
        let Some(data) = self.tree.unset_kv_int(RANK, rank.as_i64()) else {
            return out;
        };
        for dset in list_keys(data.get(DSET)) {
            if let Some(idx) = self.tree.get_kv_int_mut(DSET, dset) {
                idx.unset_kv_int(RANK, rank.as_i64());
                if idx.is_empty() {
                    self.tree.unset_kv_int(DSET, dset);
                }
            }
            out.tree
                .set_kv_int(DSET, dset)
                .set_kv_int(RANK, rank.as_i64());
        }
        out.tree.entry(RANK).set(rank.to_string(), data);
        out
    }

    /// Copy the entries of `other` into this filemap (`scr_filemap_merge`).
    /// Files are united; where both hold the same file, field or tag for a
    /// (rank, dataset), `other`'s value wins (a plain recursive merge would
    /// leave two values under single-valued keys such as `FILES`).
    pub fn merge(&mut self, other: &Filemap) {
        for rank in other.list_ranks() {
            for dset in other.list_datasets_by_rank(rank) {
                let Some(src) = other.rd(dset, rank) else {
                    continue;
                };
                let dst = self.rd_create(dset, rank);
                for (key, value) in src {
                    if key == FILE {
                        let files = dst.entry(FILE);
                        for (name, meta) in value {
                            files.set(name.clone(), meta.clone());
                        }
                    } else {
                        dst.set(key.clone(), value.clone());
                    }
                }
            }
        }
    }

    /// Number of datasets (`scr_filemap_num_datasets`).
    pub fn num_datasets(&self) -> usize {
        self.tree.get(DSET).map_or(0, KvTree::len)
    }

    /// Dataset ids, oldest first (`scr_filemap_list_datasets`).
    pub fn list_datasets(&self) -> Vec<DatasetId> {
        list_keys(self.tree.get(DSET))
            .into_iter()
            .map(DatasetId)
            .collect()
    }

    /// Dataset ids `rank` has entries for, ascending.
    pub fn list_datasets_by_rank(&self, rank: Rank) -> Vec<DatasetId> {
        list_keys(
            self.tree
                .get_kv_int(RANK, rank.as_i64())
                .and_then(|r| r.get(DSET)),
        )
        .into_iter()
        .map(DatasetId)
        .collect()
    }

    /// Highest dataset id (`scr_filemap_latest_dataset`; SCR returns -1 for none).
    pub fn latest_dataset(&self) -> Option<DatasetId> {
        self.list_datasets().last().copied()
    }

    /// Lowest dataset id (`scr_filemap_oldest_dataset`).
    pub fn oldest_dataset(&self) -> Option<DatasetId> {
        self.list_datasets().first().copied()
    }

    /// Number of ranks (`scr_filemap_num_ranks`).
    pub fn num_ranks(&self) -> usize {
        self.tree.get(RANK).map_or(0, KvTree::len)
    }

    /// Rank ids, ascending (`scr_filemap_list_ranks`).
    pub fn list_ranks(&self) -> Vec<Rank> {
        ranks(list_keys(self.tree.get(RANK)))
    }

    /// Number of ranks with entries for `dset` (`scr_filemap_num_ranks_by_dataset`).
    pub fn num_ranks_by_dataset(&self, dset: DatasetId) -> usize {
        self.tree
            .get_kv_int(DSET, dset.0)
            .and_then(|d| d.get(RANK))
            .map_or(0, KvTree::len)
    }

    /// Ranks with entries for `dset`, ascending (`scr_filemap_list_ranks_by_dataset`).
    pub fn list_ranks_by_dataset(&self, dset: DatasetId) -> Vec<Rank> {
        ranks(list_keys(
            self.tree.get_kv_int(DSET, dset.0).and_then(|d| d.get(RANK)),
        ))
    }

    /// Whether there is anything for `rank` (`scr_filemap_have_rank`).
    pub fn have_rank(&self, rank: Rank) -> bool {
        self.tree.get_kv_int(RANK, rank.as_i64()).is_some()
    }

    /// Whether there is anything for `rank` in `dset`
    /// (`scr_filemap_have_rank_by_dataset`).
    pub fn have_rank_by_dataset(&self, dset: DatasetId, rank: Rank) -> bool {
        self.rd(dset, rank).is_some()
    }

    /// Number of files recorded for `rank` in `dset`, the "actual" count
    /// (`scr_filemap_num_files`).
    pub fn num_files(&self, dset: DatasetId, rank: Rank) -> usize {
        self.rd(dset, rank)
            .and_then(|rd| rd.get(FILE))
            .map_or(0, KvTree::len)
    }

    /// File names recorded for `rank` in `dset`, sorted (`scr_filemap_list_files`).
    pub fn list_files(&self, dset: DatasetId, rank: Rank) -> Vec<String> {
        self.rd(dset, rank)
            .and_then(|rd| rd.get(FILE))
            .map(|f| f.keys().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Set the number of files `rank` wrote in `dset`, the "expected" count
    /// (`scr_filemap_set_expected_files`).
    pub fn set_expected_files(&mut self, dset: DatasetId, rank: Rank, count: u64) {
        self.rd_create(dset, rank).set_val(FILES, count);
    }

    /// The expected file count (`scr_filemap_get_expected_files`).
    pub fn expected_files(&self, dset: DatasetId, rank: Rank) -> Option<u64> {
        // Validated on read and written only by `set_expected_files`.
        self.rd(dset, rank)?.val(FILES)?.parse().ok()
    }

    /// Unset the expected file count (`scr_filemap_unset_expected_files`).
    pub fn unset_expected_files(&mut self, dset: DatasetId, rank: Rank) {
        if let Some(rd) = self.rd_mut(dset, rank) {
            rd.unset(FILES);
        }
        self.prune(dset, rank);
    }

    /// Whether the filemap holds an entry for every file `rank` wrote in
    /// `dset`: the expected count is set and equals the actual count
    /// (`scr_bool_have_files`' first check).
    pub fn have_all_files(&self, dset: DatasetId, rank: Rank) -> bool {
        self.expected_files(dset, rank)
            .is_some_and(|n| n == self.num_files(dset, rank) as u64)
    }

    /// Record the meta data of `file`, adding the file if needed
    /// (`scr_filemap_set_meta`).
    pub fn set_meta(&mut self, dset: DatasetId, rank: Rank, file: &str, meta: &Meta) {
        self.rd_create(dset, rank)
            .entry(FILE)
            .set(file, meta.to_tree());
    }

    /// Meta data of `file` (`scr_filemap_get_meta`); `Ok(None)` when the
    /// file is not recorded or has no meta data yet.
    pub fn meta(
        &self,
        dset: DatasetId,
        rank: Rank,
        file: &str,
    ) -> Result<Option<Meta>, RecordError> {
        let Some(t) = self.rd(dset, rank).and_then(|rd| rd.get_kv(FILE, file)) else {
            return Ok(None);
        };
        if t.is_empty() {
            return Ok(None);
        }
        let node = node_at(
            t,
            &[RANK, &rank.to_string(), DSET, &dset.to_string(), FILE, file],
        );
        Meta::from_node(&node).map(Some)
    }

    /// Clear the meta data of `file`, keeping the file (`scr_filemap_unset_meta`).
    pub fn unset_meta(&mut self, dset: DatasetId, rank: Rank, file: &str) {
        if let Some(t) = self
            .rd_mut(dset, rank)
            .and_then(|rd| rd.get_kv_mut(FILE, file))
        {
            t.clear();
        }
    }

    /// Record the dataset descriptor (`scr_filemap_set_dataset`).
    pub fn set_dataset(&mut self, dset: DatasetId, rank: Rank, desc: &Dataset) {
        self.rd_create(dset, rank).set(DATADESC, desc.to_tree());
    }

    /// The dataset descriptor (`scr_filemap_get_dataset`).
    pub fn dataset(&self, dset: DatasetId, rank: Rank) -> Result<Option<Dataset>, RecordError> {
        self.typed(dset, rank, DATADESC, Dataset::from_node)
    }

    /// Unset the dataset descriptor (`scr_filemap_unset_dataset`).
    pub fn unset_dataset(&mut self, dset: DatasetId, rank: Rank) {
        self.unset_key(dset, rank, DATADESC);
    }

    /// Record the redundancy descriptor (`scr_filemap_set_desc`).
    pub fn set_desc(&mut self, dset: DatasetId, rank: Rank, desc: &RedDesc) {
        self.rd_create(dset, rank).set(REDDESC, desc.to_tree());
    }

    /// The redundancy descriptor (`scr_filemap_get_desc`).
    pub fn desc(&self, dset: DatasetId, rank: Rank) -> Result<Option<RedDesc>, RecordError> {
        self.typed(dset, rank, REDDESC, RedDesc::from_node)
    }

    /// Unset the redundancy descriptor (`scr_filemap_unset_desc`).
    pub fn unset_desc(&mut self, dset: DatasetId, rank: Rank) {
        self.unset_key(dset, rank, REDDESC);
    }

    /// Set a tag (`scr_filemap_set_tag`), e.g. `PARTNER` = host name. A tag
    /// named like one of the filemap's own keys is refused.
    pub fn set_tag(
        &mut self,
        dset: DatasetId,
        rank: Rank,
        tag: &str,
        value: &str,
    ) -> Result<(), RecordError> {
        if RESERVED.contains(&tag) {
            return Err(RecordError::Inconsistent {
                record: Self::RECORD,
                path: format!("{RANK}/{rank}/{DSET}/{dset}/{tag}"),
                problem: "tag name collides with a filemap key".into(),
            });
        }
        self.rd_create(dset, rank).set_val(tag, value);
        Ok(())
    }

    /// A tag's value (`scr_filemap_get_tag`).
    pub fn tag(&self, dset: DatasetId, rank: Rank, tag: &str) -> Option<&str> {
        if RESERVED.contains(&tag) {
            return None;
        }
        self.rd(dset, rank)?.val(tag)
    }

    /// Unset a tag (`scr_filemap_unset_tag`).
    pub fn unset_tag(&mut self, dset: DatasetId, rank: Rank, tag: &str) {
        if !RESERVED.contains(&tag) {
            self.unset_key(dset, rank, tag);
        }
    }

    fn unset_key(&mut self, dset: DatasetId, rank: Rank, key: &str) {
        if let Some(rd) = self.rd_mut(dset, rank) {
            rd.unset(key);
        }
        self.prune(dset, rank);
    }

    fn typed<T>(
        &self,
        dset: DatasetId,
        rank: Rank,
        key: &str,
        parse: fn(&Node<'_>) -> Result<T, RecordError>,
    ) -> Result<Option<T>, RecordError> {
        let Some(t) = self.rd(dset, rank).and_then(|rd| rd.get(key)) else {
            return Ok(None);
        };
        parse(&node_at(
            t,
            &[RANK, &rank.to_string(), DSET, &dset.to_string(), key],
        ))
        .map(Some)
    }
}

fn node_at<'a>(tree: &'a KvTree, path: &[&str]) -> Node<'a> {
    let mut n = Node::root(Filemap::RECORD, tree);
    n.set_path(path.join("/"));
    n
}

/// Integer keys of `t`, ascending; keys are integers by construction.
/// Rank keys as ranks. Every rank key was validated when the filemap was
/// read and every one added since is a [`Rank`], so none is dropped here.
fn ranks(keys: Vec<i64>) -> Vec<Rank> {
    keys.into_iter().filter_map(Rank::from_i64).collect()
}

fn list_keys(t: Option<&KvTree>) -> Vec<i64> {
    let mut v: Vec<i64> = t
        .map(|t| t.keys().filter_map(|k| k.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

impl Record for Filemap {
    const RECORD: &'static str = "filemap";

    fn to_tree(&self) -> KvTree {
        self.tree.clone()
    }

    /// Written straight from the tree it keeps: a filemap is rewritten
    /// several times per checkpoint, and cloning it each time cost more
    /// than encoding it (benches/checkpoint.rs, small checkpoints).
    fn write_file(&self, path: impl AsRef<Path>) -> Result<(), RecordError> {
        crate::kvtree::file::write(path.as_ref(), &self.tree)?;
        Ok(())
    }

    /// Validates every rank and dataset key, expected counts, meta data and
    /// descriptors. The `DSET` index is rebuilt from the `RANK` data, which
    /// is authoritative; index entries with no data behind them are dropped.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        for key in tree.keys() {
            if key != RANK && key != DSET {
                return Err(root.inconsistent(key, "unexpected top-level key in a filemap"));
            }
        }
        for (_, d) in root.int_keyed_under(DSET)? {
            d.int_keyed_under(RANK)?;
        }
        let mut map = Filemap::new();
        for (rank, r) in root.int_keyed_under(RANK)? {
            let rank = Rank::from_i64(rank).ok_or_else(|| {
                root.inconsistent(
                    &format!("{RANK}/{rank}"),
                    "a rank is a non-negative 32-bit integer",
                )
            })?;
            for (dset, rd) in r.int_keyed_under(DSET)? {
                rd.opt_u64(FILES)?;
                for (_, f) in rd.keyed_under(FILE) {
                    Meta::from_node(&f)?;
                }
                if let Some(c) = rd.child(REDDESC) {
                    RedDesc::from_node(&c)?;
                }
                if let Some(c) = rd.child(DATADESC) {
                    Dataset::from_node(&c)?;
                }
                if rd.tree().is_empty() {
                    continue;
                }
                map.rd_create(DatasetId(dset), rank).merge(rd.tree());
            }
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::tempdir;
    use crate::records::{meta, reddesc};

    /// The guide's "Example filemap hash" with its angle-bracket slots filled in
    /// by the guide's other examples.
    fn example() -> Filemap {
        let mut m = Filemap::new();
        let rd = reddesc::tests::example();
        let file = |rank: i64, dset: i64, ext: &str| {
            format!("/tmp/user1/scr.1145655/index.0/dataset.{dset}/foo_{rank}.ckpt.{dset}{ext}")
        };
        let meta_for = |name: &str, size: u64| Meta {
            file: Some(name.rsplit('/').next().unwrap_or(name).to_owned()),
            size_bytes: Some(size),
            complete: Some(true),
            ..meta::tests::example()
        };
        for (rank, dset, files) in [(20, 10, 2u64), (20, 11, 1), (28, 11, 1)] {
            m.set_expected_files(
                DatasetId(dset),
                Rank::from_i64(rank).expect("a rank"),
                files,
            );
            let main = file(rank, dset, "");
            m.add_file(
                DatasetId(dset),
                Rank::from_i64(rank).expect("a rank"),
                &main,
            );
            m.set_meta(
                DatasetId(dset),
                Rank::from_i64(rank).expect("a rank"),
                &main,
                &meta_for(&main, 524_294),
            );
            m.set_desc(DatasetId(dset), Rank::from_i64(rank).expect("a rank"), &rd);
            if rank == 20 {
                m.set_dataset(
                    DatasetId(dset),
                    Rank::from_i64(rank).expect("a rank"),
                    &Dataset::new(dset),
                );
            }
        }
        let xor = file(20, 10, ".xor");
        let mut xmeta = meta_for(&xor, 175_693);
        xmeta.file_type = Some(crate::records::FileType::Xor);
        m.set_meta(DatasetId(10), Rank(20), &xor, &xmeta);
        m.set_tag(DatasetId(11), Rank(28), "PARTNER", "atlas56")
            .unwrap();
        m
    }

    #[test]
    fn a_rank_key_that_is_no_rank_is_refused_on_read() {
        for bad in ["-1", "4294967296"] {
            let mut t = KvTree::new();
            t.entry(RANK)
                .entry(bad)
                .entry(DSET)
                .entry("1")
                .set_val(FILES, 0u64);
            let err = Filemap::from_tree(&t).expect_err(bad);
            assert!(err.to_string().contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn structure_matches_the_guide() {
        let m = example();
        assert_eq!(m.list_datasets(), vec![DatasetId(10), DatasetId(11)]);
        assert_eq!(m.list_ranks(), vec![Rank(20), Rank(28)]);
        assert_eq!(
            m.list_ranks_by_dataset(DatasetId(11)),
            vec![Rank(20), Rank(28)]
        );
        assert_eq!(m.list_ranks_by_dataset(DatasetId(10)), vec![Rank(20)]);
        assert_eq!(m.latest_dataset(), Some(DatasetId(11)));
        assert_eq!(m.oldest_dataset(), Some(DatasetId(10)));
        assert_eq!(m.num_files(DatasetId(10), Rank(20)), 2);
        assert_eq!(m.expected_files(DatasetId(10), Rank(20)), Some(2));
        assert!(m.have_all_files(DatasetId(10), Rank(20)));
        assert_eq!(m.tag(DatasetId(11), Rank(28), "PARTNER"), Some("atlas56"));
        assert_eq!(
            m.desc(DatasetId(11), Rank(28)).unwrap(),
            Some(reddesc::tests::example())
        );
        assert_eq!(
            m.dataset(DatasetId(10), Rank(20)).unwrap(),
            Some(Dataset::new(10))
        );
        assert_eq!(m.dataset(DatasetId(11), Rank(28)).unwrap(), None);
        let f = &m.list_files(DatasetId(10), Rank(20))[1];
        assert_eq!(
            m.meta(DatasetId(10), Rank(20), f)
                .unwrap()
                .unwrap()
                .size_bytes,
            Some(175_693)
        );
    }

    #[test]
    fn tree_and_file_roundtrip() {
        let m = example();
        assert_eq!(Filemap::from_tree(&m.to_tree()).unwrap(), m);
        let dir = tempdir();
        let path = dir.path().join(filemap_file_name(0));
        m.write_file(&path).unwrap();
        assert_eq!(Filemap::read_file(&path).unwrap(), m);
    }

    #[test]
    fn master_filemap_matches_the_guide() {
        let spec = crate::records::testutil::tree_from_indented(
            "Filemap\n    /ctrl/filemap_0.scrinfo\n    /ctrl/filemap_1.scrinfo\n",
        );
        let m = MasterFilemap {
            files: (0..2)
                .map(|i| format!("/ctrl/{}", filemap_file_name(i)))
                .collect(),
        };
        assert_eq!(m.to_tree(), spec);
        let dir = tempdir();
        let path = dir.path().join(MASTER_FILEMAP_FILE);
        m.write_file(&path).unwrap();
        assert_eq!(MasterFilemap::read_file(&path).unwrap(), m);
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(example().as_tree(), 2));
    }

    #[test]
    fn index_follows_removals() {
        let mut m = example();
        let files = m.list_files(DatasetId(10), Rank(20));
        m.remove_file(DatasetId(10), Rank(20), &files[0]);
        assert_eq!(m.num_files(DatasetId(10), Rank(20)), 1);
        assert!(!m.have_all_files(DatasetId(10), Rank(20)));
        m.remove_rank_by_dataset(DatasetId(10), Rank(20));
        assert_eq!(m.list_datasets(), vec![DatasetId(11)]);
        assert!(m.as_tree().get_kv_int(DSET, 10).is_none());
        let extracted = m.extract_rank(Rank(28));
        assert_eq!(extracted.list_ranks(), vec![Rank(28)]);
        assert_eq!(
            extracted.list_ranks_by_dataset(DatasetId(11)),
            vec![Rank(28)]
        );
        assert_eq!(m.list_ranks_by_dataset(DatasetId(11)), vec![Rank(20)]);
        m.remove_dataset(DatasetId(11));
        assert!(m.is_empty(), "{:?}", m.as_tree());
    }

    #[test]
    fn merge_unites_files_and_replaces_fields() {
        let mut a = example();
        let mut b = Filemap::new();
        b.add_file(DatasetId(11), Rank(20), "/tmp/extra");
        b.set_expected_files(DatasetId(11), Rank(20), 2);
        b.add_file(DatasetId(12), Rank(3), "/tmp/three");
        a.merge(&b);
        assert_eq!(a.expected_files(DatasetId(11), Rank(20)), Some(2));
        assert_eq!(a.num_files(DatasetId(11), Rank(20)), 2);
        assert_eq!(
            a.list_datasets(),
            vec![DatasetId(10), DatasetId(11), DatasetId(12)]
        );
        assert_eq!(a.list_ranks(), vec![Rank(3), Rank(20), Rank(28)]);
        assert!(Filemap::from_tree(&a.to_tree()).is_ok());
        // merging a map into itself changes nothing
        let before = a.clone();
        a.merge(&before);
        assert_eq!(a, before);
    }

    #[test]
    fn index_is_rebuilt_on_read() {
        let mut t = example().to_tree();
        t.unset(DSET);
        t.set_kv_int(DSET, 99).set_kv_int(RANK, 1);
        let m = Filemap::from_tree(&t).unwrap();
        assert_eq!(m, example());
    }

    #[test]
    fn validation_names_the_key_path() {
        let mut t = example().to_tree();
        t.entry(RANK).entry("twenty");
        let e = Filemap::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::NonIntegerKey { path, key, .. } if path == "RANK" && key == "twenty"),
            "{e}"
        );
        let mut t = example().to_tree();
        t.get_kv_int_mut(RANK, 20)
            .and_then(|r| r.get_kv_int_mut(DSET, 10))
            .unwrap()
            .set_val(FILES, "-2");
        let e = Filemap::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == "RANK/20/DSET/10/FILES"),
            "{e}"
        );
        let mut t = example().to_tree();
        let f = example().list_files(DatasetId(11), Rank(28))[0].clone();
        t.get_kv_int_mut(RANK, 28)
            .and_then(|r| r.get_kv_int_mut(DSET, 11))
            .and_then(|d| d.get_kv_mut(FILE, &f))
            .unwrap()
            .set_val("CRC", "0xg");
        let e = Filemap::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == &format!("RANK/28/DSET/11/FILE/{f}/CRC")),
            "{e}"
        );
        assert!(example()
            .set_tag(DatasetId(1), Rank(1), FILES, "x")
            .is_err());
    }
}
