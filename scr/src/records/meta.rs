//! File meta data (`scr_meta`, guide section "Meta data").
//!
//! Stored per file: directly under `FILE/<path>` in a filemap, under
//! `FILE/<name>/META` in a rank filemap file, under `FILE/<index>` in an
//! XOR header.

use std::fmt;

use super::{set_bool, set_opt, Node, Record, RecordError};
use crate::kvtree::KvTree;

const KNOWN: &[&str] = &[
    "FILE", "TYPE", "COMPLETE", "SIZE", "CRC", "CKPT", "RANKS", "ORIG", "ORIGPATH", "ORIGNAME",
    "PATH", "NAME",
];

/// What wrote a file (`TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileType {
    /// `FULL`: a file the application wrote.
    Full,
    /// `PARTNER`: a partner copy of another rank's file.
    Partner,
    /// `XOR`: an XOR redundancy file.
    Xor,
    /// `RS`: a Reed–Solomon redundancy file (this implementation's scheme;
    /// LLNL SCR 3 keeps RS data through its ER library).
    Rs,
}

impl FileType {
    /// The text SCR writes.
    pub fn as_str(self) -> &'static str {
        match self {
            FileType::Full => "FULL",
            FileType::Partner => "PARTNER",
            FileType::Xor => "XOR",
            FileType::Rs => "RS",
        }
    }

    /// Parse the text SCR writes.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "FULL" => FileType::Full,
            "PARTNER" => FileType::Partner,
            "XOR" => FileType::Xor,
            "RS" => FileType::Rs,
            _ => return None,
        })
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Properties of one file (`scr_meta`, `scr_meta.c`). Every field is
/// optional, as in SCR; the checks SCR makes (`scr_meta_check_*`) are
/// methods here.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Meta {
    /// `FILE`: the file name (relative or absolute).
    pub file: Option<String>,
    /// `TYPE`: FULL, PARTNER, XOR (or RS).
    pub file_type: Option<FileType>,
    /// `COMPLETE`: whether the file is thought valid.
    pub complete: Option<bool>,
    /// `SIZE`: expected size in bytes.
    pub size_bytes: Option<u64>,
    /// `CRC`: CRC32 of the contents, written `0x%x`.
    pub crc32: Option<u32>,
    /// `CKPT`: checkpoint id the file was written in.
    pub ckpt: Option<i64>,
    /// `RANKS`: number of ranks in the run that wrote it.
    pub ranks: Option<u64>,
    /// `ORIG`: the string given to `SCR_Route_file`.
    pub orig: Option<String>,
    /// `ORIGPATH`: absolute directory of the original file.
    pub orig_path: Option<String>,
    /// `ORIGNAME`: name of the original file.
    pub orig_name: Option<String>,
    /// `PATH`: directory of the original file, the older spelling used in
    /// the guide's XOR header and rank filemap examples.
    pub path: Option<String>,
    /// `NAME`: file name, the older spelling paired with `PATH`.
    pub name: Option<String>,
    /// Fields this version does not interpret, kept verbatim.
    pub extra: KvTree,
}

impl Meta {
    /// `scr_meta_check_complete`: the COMPLETE field is set to 1.
    pub fn is_complete(&self) -> bool {
        self.complete == Some(true)
    }

    /// `scr_meta_check_filesize`: the SIZE field is set and equals `size_bytes`.
    pub fn size_matches(&self, size_bytes: u64) -> bool {
        self.size_bytes == Some(size_bytes)
    }

    pub(crate) fn from_node(n: &Node<'_>) -> Result<Self, RecordError> {
        Ok(Meta {
            file: n.opt_str("FILE")?,
            file_type: n.opt_with("TYPE", "FULL, PARTNER, XOR or RS", FileType::parse)?,
            complete: n.opt_bool("COMPLETE")?,
            size_bytes: n.opt_u64("SIZE")?,
            crc32: n.opt_crc32("CRC")?,
            ckpt: n.opt_i64("CKPT")?,
            ranks: n.opt_u64("RANKS")?,
            orig: n.opt_str("ORIG")?,
            orig_path: n.opt_str("ORIGPATH")?,
            orig_name: n.opt_str("ORIGNAME")?,
            path: n.opt_str("PATH")?,
            name: n.opt_str("NAME")?,
            extra: n.extra(KNOWN),
        })
    }
}

impl Record for Meta {
    const RECORD: &'static str = "file meta data";
    /// One file's meta data is a dozen keys; a larger file is damage or a
    /// planted file, refused before it is read.
    const MAX_FILE_BYTES: u64 = 1 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = self.extra.clone();
        set_opt(&mut t, "FILE", self.file.as_deref());
        set_opt(&mut t, "TYPE", self.file_type);
        if let Some(c) = self.complete {
            set_bool(&mut t, "COMPLETE", c);
        }
        set_opt(&mut t, "SIZE", self.size_bytes);
        if let Some(crc) = self.crc32 {
            t.set_crc32("CRC", crc);
        }
        set_opt(&mut t, "CKPT", self.ckpt);
        set_opt(&mut t, "RANKS", self.ranks);
        set_opt(&mut t, "ORIG", self.orig.as_deref());
        set_opt(&mut t, "ORIGPATH", self.orig_path.as_deref());
        set_opt(&mut t, "ORIGNAME", self.orig_name.as_deref());
        set_opt(&mut t, "PATH", self.path.as_deref());
        set_opt(&mut t, "NAME", self.name.as_deref());
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        Self::from_node(&Node::root(Self::RECORD, tree))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    /// The guide's "Example meta data hash".
    const SPEC: &str = "
FILE
  rank_0.ckpt
TYPE
  FULL
COMPLETE
  1
SIZE
  524294
CRC
  0x1b39e4e4
CKPT
  6
RANKS
  4
ORIG
  ckpt.6/rank_0.ckpt
ORIGPATH
  /p/lscratchb/user3/simulation123/ckpt.6
ORIGNAME
  rank_0.ckpt
";

    pub(crate) fn example() -> Meta {
        Meta {
            file: Some("rank_0.ckpt".into()),
            file_type: Some(FileType::Full),
            complete: Some(true),
            size_bytes: Some(524_294),
            crc32: Some(0x1b39_e4e4),
            ckpt: Some(6),
            ranks: Some(4),
            orig: Some("ckpt.6/rank_0.ckpt".into()),
            orig_path: Some("/p/lscratchb/user3/simulation123/ckpt.6".into()),
            orig_name: Some("rank_0.ckpt".into()),
            ..Meta::default()
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Meta::from_tree(&spec).unwrap(), example());
        assert!(example().is_complete() && example().size_matches(524_294));
    }

    #[test]
    fn file_roundtrip() {
        let dir = tempdir();
        let path = dir.path().join("meta.scr");
        example().write_file(&path).unwrap();
        assert_eq!(Meta::read_file(&path).unwrap(), example());
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn bad_crc_and_type_are_named() {
        for bad in ["0xnothex", "0x", "0x123456789", "crc"] {
            let mut t = example().to_tree();
            t.set_val("CRC", bad);
            let e = Meta::from_tree(&t).unwrap_err();
            assert!(
                matches!(&e, RecordError::BadValue { path, value, .. } if path == "CRC" && value == bad),
                "{e}"
            );
        }
        let mut t = example().to_tree();
        t.set_val("TYPE", "MIRROR");
        let e = Meta::from_tree(&t).unwrap_err();
        assert!(e.to_string().contains("TYPE"), "{e}");
        let mut t = example().to_tree();
        t.set_val("SIZE", "-1");
        assert!(matches!(
            Meta::from_tree(&t),
            Err(RecordError::BadValue { path, .. }) if path == "SIZE"
        ));
    }
}
