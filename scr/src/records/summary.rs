//! Summary file (`summary.scr` in a dataset directory on the parallel file
//! system, guide section "Summary file"): the dataset's global properties,
//! written at the end of a flush or by `scr_index` after a scavenge, read by
//! rank 0 on fetch.
//!
//! ```text
//! VERSION/6
//! COMPLETE/<0|1>
//! DSET/<dataset descriptor>
//! RANK2FILE/RANKS, RANK/<r>/FILES, FILE/<name>/SIZE, CRC, NOFETCH   (optional)
//! ```
//! The optional `RANK2FILE` part is what `scr_index` leaves of its scan
//! hash (scavenge-and-index, "Scan hash"); SCR's flush writes the map as
//! separate rank2file files instead.

use super::{set_bool, Dataset, Node, Rank2File, Record, RecordError};
use crate::kvtree::KvTree;

/// The summary format version written (`SCR_SUMMARY_FILE_VERSION_6`).
pub const SUMMARY_VERSION: i64 = 6;

/// The summary file's name in a dataset directory.
pub const SUMMARY_FILE: &str = "summary.scr";

/// A dataset's summary (`scr_summary_write` / `scr_summary_read`).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `VERSION`: [`SUMMARY_VERSION`].
    pub version: i64,
    /// `COMPLETE`: whether every file of the dataset is thought valid.
    pub complete: bool,
    /// `DSET`: the dataset descriptor.
    pub dataset: Dataset,
    /// `RANK2FILE`: the rank-to-file map, when kept in the summary.
    pub rank2file: Option<Rank2File>,
    /// `ORIGDIR` (this project): the directory, relative to the prefix, the
    /// application routed the files to, when it differs from the dataset
    /// directory; a fetch gives files back their routed paths from it.
    pub orig_dir: Option<String>,
    /// `DIR` (this project): in SCR 3.1's layout, the directory an
    /// upgraded old-layout dataset's files stay in (`scr index --upgrade`),
    /// which its keys start with; absent for datasets written in that layout.
    pub dir: Option<String>,
}

impl Summary {
    /// A version-6 summary without a rank2file part.
    pub fn new(dataset: Dataset, complete: bool) -> Self {
        Summary {
            version: SUMMARY_VERSION,
            complete,
            dataset,
            rank2file: None,
            orig_dir: None,
            dir: None,
        }
    }
}

impl Record for Summary {
    const RECORD: &'static str = "summary file";

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_int("VERSION", self.version);
        set_bool(&mut t, "COMPLETE", self.complete);
        t.set("DSET", self.dataset.to_tree());
        if let Some(m) = &self.rank2file {
            t.set("RANK2FILE", m.body_tree());
        }
        if let Some(d) = &self.orig_dir {
            t.set_str("ORIGDIR", d);
        }
        if let Some(d) = &self.dir {
            t.set_str("DIR", d);
        }
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let version = root.req_i64("VERSION")?;
        if version != SUMMARY_VERSION {
            return Err(root.inconsistent(
                "VERSION",
                format!("unsupported summary version {version} (expected {SUMMARY_VERSION})"),
            ));
        }
        Ok(Summary {
            version,
            complete: root.req_bool("COMPLETE")?,
            dataset: Dataset::from_node(&root.req_child("DSET")?)?,
            rank2file: root
                .child("RANK2FILE")
                .map(|c| Rank2File::from_body(&c))
                .transpose()?,
            orig_dir: root.opt_str("ORIGDIR")?,
            dir: root.opt_str("DIR")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::index::tests::dataset;
    use crate::records::testutil::{tempdir, tree_from_indented};

    /// The guide's example summary file.
    const SPEC: &str = "
VERSION
  6
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
";

    fn example() -> Summary {
        Summary::new(dataset(18, 1_312_853_507_675_143), true)
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Summary::from_tree(&spec).unwrap(), example());
    }

    #[test]
    fn file_roundtrip_with_rank2file() {
        let dir = tempdir();
        let path = dir.path().join(SUMMARY_FILE);
        let mut s = example();
        let mut m = crate::records::rank2file::tests::example();
        m.rank.get_mut(&3).unwrap().expected_files = Some(2);
        let xor = crate::records::Rank2FileEntry {
            nofetch: true,
            size_bytes: Some(175_693),
            ..Default::default()
        };
        m.rank
            .get_mut(&3)
            .unwrap()
            .files
            .insert("4_of_4_in_0.xor".into(), xor);
        s.rank2file = Some(m);
        s.write_file(&path).unwrap();
        assert_eq!(Summary::read_file(&path).unwrap(), s);
        insta::assert_snapshot!("summary_with_rank2file", to_indented(&s.to_tree(), 2));
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.unset("COMPLETE");
        assert!(
            matches!(Summary::from_tree(&t), Err(RecordError::Missing { path, .. }) if path == "COMPLETE")
        );
        let mut t = example().to_tree();
        t.get_mut("DSET").unwrap().unset("ID");
        assert!(
            matches!(Summary::from_tree(&t), Err(RecordError::Missing { path, .. }) if path == "DSET/ID")
        );
        let mut t = example().to_tree();
        t.set_int("VERSION", 5);
        assert!(
            matches!(Summary::from_tree(&t), Err(RecordError::Inconsistent { path, .. }) if path == "VERSION")
        );
    }
}
