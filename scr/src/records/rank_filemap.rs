//! Rank filemap file (`<rank>.scrfilemap`, guide section "Scavenge > Rank
//! filemap file"): written by `scr_copy` into the dataset directory on the
//! parallel file system for each scavenged rank, read back by `scr_index`.
//!
//! Like a filemap, but file names are relative to the dataset directory,
//! meta data sits under `META`, the dataset descriptor under `DSETDESC`,
//! and there are no redundancy descriptors.
//!
//! This project adds `FILE/<name>/SEG/<i>` beside `META` (the rank2file
//! map's segment list) once `scr postrun` has packed the scavenged files
//! into containers (SCR_USE_CONTAINERS): the plain copies are gone then,
//! and a summary rebuilt from the rank filemaps must find the bytes.

use std::collections::BTreeMap;

use super::rank2file::{read_segments, write_segments};
use super::{Dataset, Meta, Node, Record, RecordError, Segment};
use crate::kvtree::KvTree;

/// The file name for `rank`'s filemap in a dataset directory.
pub fn rank_filemap_file_name(rank: i64) -> String {
    format!("{rank}.scrfilemap")
}

/// One rank's files in one dataset, as `scr_copy` records them.
#[derive(Debug, Clone, PartialEq)]
pub struct RankFilemap {
    /// The rank (`RANK/<r>`, `DSET/<d>/RANK/<r>`).
    pub rank: i64,
    /// `DSETDESC`: the dataset descriptor (its `ID` is the dataset id).
    pub dataset: Dataset,
    /// `FILES`: how many files the rank wrote in the dataset.
    pub expected_files: u64,
    /// `FILE/<relative name>/META`: meta data of each copied file.
    pub files: BTreeMap<String, Meta>,
    /// `ORIGDIR` (this project, as in the flush file and summary): the
    /// directory, relative to the prefix, the files were routed to when it
    /// is not the dataset directory, so `scr index` can give rebuilt files
    /// their keys without the flush file.
    pub orig_dir: Option<String>,
    /// `FILE/<relative name>/SEG/<i>` (this project): where a file packed
    /// into containers after the copy now is; files absent here are plain.
    pub segments: BTreeMap<String, Vec<Segment>>,
}

impl RankFilemap {
    /// Whether every expected file is listed.
    pub fn is_complete(&self) -> bool {
        self.files.len() as u64 == self.expected_files
    }
}

impl Record for RankFilemap {
    const RECORD: &'static str = "rank filemap";

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        let dset = self.dataset.id;
        t.set_kv_int("DSET", dset).set_kv_int("RANK", self.rank);
        let rd = t.set_kv_int("RANK", self.rank).set_kv_int("DSET", dset);
        rd.set("DSETDESC", self.dataset.to_tree());
        rd.set_val("FILES", self.expected_files);
        if let Some(o) = &self.orig_dir {
            rd.set_str("ORIGDIR", o);
        }
        for (name, meta) in &self.files {
            let f = rd.entry("FILE").entry(name.clone());
            f.set("META", meta.to_tree());
            if let Some(segs) = self.segments.get(name) {
                write_segments(f, segs);
            }
        }
        t
    }

    /// Exactly one rank and one dataset, the index entry matching them.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let ranks = root.int_keyed_under("RANK")?;
        let [(rank, r)] = ranks.as_slice() else {
            return Err(
                root.inconsistent("RANK", format!("lists {} ranks, expected one", ranks.len()))
            );
        };
        let dsets = r.int_keyed_under("DSET")?;
        let [(dset, rd)] = dsets.as_slice() else {
            return Err(r.inconsistent(
                "DSET",
                format!("lists {} datasets, expected one", dsets.len()),
            ));
        };
        let index = root.int_keyed_under("DSET")?;
        let indexed = match index.as_slice() {
            [(d, i)] if d == dset => i
                .int_keyed_under("RANK")?
                .iter()
                .map(|(k, _)| *k)
                .eq([*rank]),
            _ => false,
        };
        if !indexed {
            return Err(root.inconsistent(
                "DSET",
                format!("index does not list exactly rank {rank} in dataset {dset}"),
            ));
        }
        let dataset = Dataset::from_node(&rd.req_child("DSETDESC")?)?;
        if dataset.id != *dset {
            return Err(rd.inconsistent(
                "DSETDESC/ID",
                format!("is {} but the entry is for dataset {dset}", dataset.id),
            ));
        }
        let mut files = BTreeMap::new();
        let mut segments = BTreeMap::new();
        for (name, f) in rd.keyed_under("FILE") {
            let meta = match f.child("META") {
                Some(m) => Meta::from_node(&m)?,
                None => Meta::default(),
            };
            files.insert(name.to_owned(), meta);
            let segs = read_segments(&f)?;
            if !segs.is_empty() {
                segments.insert(name.to_owned(), segs);
            }
        }
        Ok(RankFilemap {
            rank: *rank,
            dataset,
            expected_files: rd.req_u64("FILES")?,
            files,
            orig_dir: rd.opt_str("ORIGDIR")?,
            segments,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::dataset::tests::example6;
    use crate::records::testutil::{tempdir, tree_from_indented};
    use crate::records::FileType;

    /// The guide's example rank filemap (`2.scrfilemap`).
    const SPEC: &str = "
DSET
  6
    RANK
      2
RANK
  2
    DSET
      6
        DSETDESC
          COMPLETE
            1
          SIZE
            2097182
          FILES
            4
          ID
            6
          NAME
            scr.dataset.6
          CREATED
            1312850690668536
          USER
            user1
          JOBNAME
            simulation123
          JOBID
            112573
          CKPT
            6
        FILES
          2
        FILE
          3_of_4_in_0.xor
            META
              RANKS
                4
              COMPLETE
                1
              SIZE
                175693
              TYPE
                XOR
              FILE
                3_of_4_in_0.xor
              CRC
                0x2ef519a1
          rank_2.ckpt
            META
              COMPLETE
                1
              SIZE
                524296
              NAME
                rank_2.ckpt
              PATH
                /p/lscratchb/user1/simulation123
              ORIG
                rank_2.ckpt
              RANKS
                4
              TYPE
                FULL
              FILE
                rank_2.ckpt
              CRC
                0x738bb68f
";

    fn example() -> RankFilemap {
        let mut files = BTreeMap::new();
        files.insert(
            "3_of_4_in_0.xor".to_owned(),
            Meta {
                ranks: Some(4),
                complete: Some(true),
                size_bytes: Some(175_693),
                file_type: Some(FileType::Xor),
                file: Some("3_of_4_in_0.xor".into()),
                crc32: Some(0x2ef5_19a1),
                ..Meta::default()
            },
        );
        files.insert(
            "rank_2.ckpt".to_owned(),
            Meta {
                complete: Some(true),
                size_bytes: Some(524_296),
                name: Some("rank_2.ckpt".into()),
                path: Some("/p/lscratchb/user1/simulation123".into()),
                orig: Some("rank_2.ckpt".into()),
                ranks: Some(4),
                file_type: Some(FileType::Full),
                file: Some("rank_2.ckpt".into()),
                crc32: Some(0x738b_b68f),
                ..Meta::default()
            },
        );
        RankFilemap {
            rank: 2,
            dataset: example6(),
            expected_files: 2,
            files,
            orig_dir: None,
            segments: BTreeMap::new(),
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(RankFilemap::from_tree(&spec).unwrap(), example());
        assert!(example().is_complete());
    }

    #[test]
    fn file_roundtrip() {
        let dir = tempdir();
        let path = dir.path().join(rank_filemap_file_name(2));
        assert!(path.ends_with("2.scrfilemap"));
        example().write_file(&path).unwrap();
        assert_eq!(RankFilemap::read_file(&path).unwrap(), example());
    }

    #[test]
    fn orig_dir_roundtrips_beside_the_files() {
        let mut m = example();
        m.orig_dir = Some(".".into());
        let t = m.to_tree();
        assert_eq!(
            t.get_kv_int("RANK", 2)
                .and_then(|r| r.get_kv_int("DSET", 6))
                .and_then(|d| d.val("ORIGDIR")),
            Some(".")
        );
        assert_eq!(RankFilemap::from_tree(&t).unwrap(), m);
    }

    #[test]
    fn segments_of_a_packed_file_roundtrip_beside_its_meta() {
        let mut m = example();
        let segs = vec![
            Segment {
                file: ".scr/ctr.0.scr".into(),
                offset_bytes: 1000,
                length_bytes: 24_296,
            },
            Segment {
                file: ".scr/ctr.1.scr".into(),
                offset_bytes: 0,
                length_bytes: 500_000,
            },
        ];
        m.segments.insert("rank_2.ckpt".into(), segs);
        let t = m.to_tree();
        let f = t
            .get_kv_int("RANK", 2)
            .and_then(|r| r.get_kv_int("DSET", 6))
            .and_then(|d| d.get_kv("FILE", "rank_2.ckpt"))
            .unwrap();
        assert!(f.get("META").is_some());
        assert_eq!(
            f.get_kv_int("SEG", 1).and_then(|s| s.val("FILE")),
            Some(".scr/ctr.1.scr")
        );
        assert_eq!(RankFilemap::from_tree(&t).unwrap(), m);
        // A gap in the numbering is refused, naming the file's entry.
        let mut bad = t.clone();
        bad.get_kv_int_mut("RANK", 2)
            .and_then(|r| r.get_kv_int_mut("DSET", 6))
            .and_then(|d| d.get_kv_mut("FILE", "rank_2.ckpt"))
            .and_then(|f| f.get_mut("SEG"))
            .unwrap()
            .unset("0");
        let e = RankFilemap::from_tree(&bad).unwrap_err();
        assert!(
            matches!(&e, RecordError::Inconsistent { path, .. } if path.ends_with("FILE/rank_2.ckpt/SEG")),
            "{e}"
        );
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.get_mut("RANK").unwrap().entry("two");
        assert!(matches!(
            RankFilemap::from_tree(&t),
            Err(RecordError::NonIntegerKey { path, .. }) if path == "RANK"
        ));
        let mut t = example().to_tree();
        t.unset("DSET");
        assert!(matches!(
            RankFilemap::from_tree(&t),
            Err(RecordError::Inconsistent { path, .. }) if path == "DSET"
        ));
        let mut t = example().to_tree();
        let rd = t
            .get_kv_int_mut("RANK", 2)
            .and_then(|r| r.get_kv_int_mut("DSET", 6))
            .unwrap();
        rd.get_kv_mut("FILE", "rank_2.ckpt")
            .unwrap()
            .get_mut("META")
            .unwrap()
            .set_val("CRC", "0x-1");
        let e = RankFilemap::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == "RANK/2/DSET/6/FILE/rank_2.ckpt/META/CRC"),
            "{e}"
        );
    }
}
