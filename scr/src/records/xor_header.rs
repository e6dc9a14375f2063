//! XOR file header (guide section "XOR file"): the kvtree at the start of
//! each `<grouprank+1>_of_<groupsize>_in_<groupid>.xor` file, followed by
//! the XOR chunk bytes.
//!
//! ```text
//! DSET/<dataset descriptor>
//! RANKS/<ranks in the run>
//! GROUP/RANKS/<set size>  GROUP/RANK/<group rank>/<world rank>
//! CHUNK/<chunk bytes>
//! CURRENT/RANK, FILES, FILE/<index>/<meta>   this process's files
//! PARTNER/RANK, FILES, FILE/<index>/<meta>   left neighbour's files
//! ```

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::{Dataset, Meta, Node, Record, RecordError};
use crate::kvtree::file::{self as kvfile, KvFileError, HEADER_LEN};
use crate::kvtree::KvTree;

/// The files of one process as listed in an XOR header (`CURRENT` or
/// `PARTNER`), in the order they were concatenated for the XOR chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct XorMember {
    /// `RANK`: the process's rank in `scr_comm_world`.
    pub rank: i64,
    /// `FILE/<index>`: meta data of each file, index counting up from 0;
    /// `FILES` is its length.
    pub files: Vec<Meta>,
}

/// The header of an XOR redundancy file (`scr_reddesc_apply_xor`).
#[derive(Debug, Clone, PartialEq)]
pub struct XorHeader {
    /// `DSET`: the dataset the file belongs to.
    pub dataset: Dataset,
    /// `RANKS`: size of `scr_comm_world`.
    pub ranks: u64,
    /// `GROUP/RANK`: world rank of each group rank, indexed by group rank;
    /// `GROUP/RANKS` is its length.
    pub group_world_ranks: Vec<i64>,
    /// `CHUNK`: bytes of XOR data after the header.
    pub chunk_bytes: u64,
    /// `CURRENT`: the writing process's files.
    pub current: XorMember,
    /// `PARTNER`: a copy of the left neighbour's file meta data.
    pub partner: XorMember,
}

/// The XOR file name `<grouprank+1>_of_<groupsize>_in_<groupid>.xor`.
pub fn xor_file_name(group_rank: u64, group_size: u64, group_id: i64) -> String {
    format!("{}_of_{group_size}_in_{group_id}.xor", group_rank + 1)
}

/// Parse an XOR file name into (group rank, group size, group id), as
/// `scr_index` does when scanning a dataset directory.
pub fn parse_xor_file_name(name: &str) -> Option<(u64, u64, i64)> {
    let stem = name.strip_suffix(".xor")?;
    let (member, rest) = stem.split_once("_of_")?;
    let (size, id) = rest.split_once("_in_")?;
    let member: u64 = member.parse().ok()?;
    let size: u64 = size.parse().ok()?;
    let id: i64 = id.parse().ok()?;
    (member >= 1 && member <= size).then(|| (member - 1, size, id))
}

impl XorMember {
    pub(crate) fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_int("RANK", self.rank);
        t.set_val("FILES", self.files.len());
        for (i, m) in self.files.iter().enumerate() {
            t.entry("FILE").set(i.to_string(), m.to_tree());
        }
        t
    }

    pub(crate) fn from_node(n: &Node<'_>) -> Result<Self, RecordError> {
        let rank = n.req_i64("RANK")?;
        let count = n.req_u64("FILES")?;
        let entries = n.int_keyed_under("FILE")?;
        if entries.len() as u64 != count
            || entries.iter().enumerate().any(|(i, (k, _))| *k != i as i64)
        {
            return Err(n.inconsistent(
                "FILE",
                format!("FILES says {count} but the indices are not 0..{count}"),
            ));
        }
        let files = entries
            .iter()
            .map(|(_, c)| Meta::from_node(c))
            .collect::<Result<_, _>>()?;
        Ok(XorMember { rank, files })
    }
}

impl XorHeader {
    /// The header as kvtree file bytes (with CRC32 trailer); the chunk
    /// data follows them in the XOR file.
    pub fn encode(&self) -> Vec<u8> {
        kvfile::encode(&self.to_tree(), true)
    }

    /// Decode the header at the start of an XOR file's bytes. Returns the
    /// header and its length in bytes (where the chunk data starts).
    pub fn decode_prefix(bytes: &[u8], path: &Path) -> Result<(Self, usize), RecordError> {
        let len = super::embedded_len(bytes, path)?;
        let tree = kvfile::decode(&bytes[..len], path)?;
        let h = Self::from_tree(&tree).map_err(|e| e.in_file(path))?;
        Ok((h, len))
    }

    /// Read only the header of the XOR file at `path`. Returns the header
    /// and the offset of the chunk data.
    pub fn read_from(path: impl AsRef<Path>) -> Result<(Self, usize), RecordError> {
        let path = path.as_ref();
        let mut f = File::open(path).map_err(|source| KvFileError::Io {
            path: path.to_path_buf(),
            op: "open",
            source,
        })?;
        let bytes = Self::read_bytes_of(&mut f, path)?;
        Self::decode_prefix(&bytes, path)
    }

    /// The header's bytes (a kvtree file with its trailer) at the start of
    /// the XOR file open as `f` (read from where it stands; `path` names
    /// it in errors): only those, never the chunk data after them.
    pub fn read_bytes_of(f: &mut File, path: &Path) -> Result<Vec<u8>, RecordError> {
        let io = |source| KvFileError::Io {
            path: path.to_path_buf(),
            op: "read header",
            source,
        };
        let mut head = [0u8; HEADER_LEN];
        f.read_exact(&mut head).map_err(io)?;
        let len = super::embedded_len(&head, path)?;
        let mut bytes = head.to_vec();
        bytes.resize(len, 0);
        f.read_exact(&mut bytes[HEADER_LEN..]).map_err(io)?;
        Ok(bytes)
    }
}

impl Record for XorHeader {
    const RECORD: &'static str = "XOR header";

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set("DSET", self.dataset.to_tree());
        t.set_val("RANKS", self.ranks);
        let g = t.entry("GROUP");
        g.set_val("RANKS", self.group_world_ranks.len());
        for (grank, wrank) in self.group_world_ranks.iter().enumerate() {
            g.set_kv("RANK", grank).entry(wrank.to_string());
        }
        t.set_val("CHUNK", self.chunk_bytes);
        t.set("CURRENT", self.current.to_tree());
        t.set("PARTNER", self.partner.to_tree());
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let dataset = Dataset::from_node(&root.req_child("DSET")?)?;
        let ranks = root.req_u64("RANKS")?;
        let group = root.req_child("GROUP")?;
        let size = group.req_u64("RANKS")?;
        let entries = group.int_keyed_under("RANK")?;
        if entries.len() as u64 != size
            || entries.iter().enumerate().any(|(i, (k, _))| *k != i as i64)
        {
            return Err(group.inconsistent(
                "RANK",
                format!("GROUP/RANKS says {size} but the group ranks are not 0..{size}"),
            ));
        }
        let mut group_world_ranks = Vec::with_capacity(entries.len());
        for (_, e) in &entries {
            let world = e.int_keyed()?;
            match world.as_slice() {
                [(w, _)] if u64::try_from(*w).is_ok_and(|w| w < ranks) => {
                    group_world_ranks.push(*w)
                }
                [(w, _)] => {
                    return Err(e.inconsistent("", format!("world rank {w} is outside 0..{ranks}")))
                }
                _ => {
                    return Err(e.inconsistent(
                        "",
                        format!("holds {} world ranks, expected one", world.len()),
                    ))
                }
            }
        }
        Ok(XorHeader {
            dataset,
            ranks,
            group_world_ranks,
            chunk_bytes: root.req_u64("CHUNK")?,
            current: XorMember::from_node(&root.req_child("CURRENT")?)?,
            partner: XorMember::from_node(&root.req_child("PARTNER")?)?,
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

    /// The guide's example XOR header.
    const SPEC: &str = "
DSET
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
RANKS
  4
GROUP
  RANKS
    4
  RANK
    0
      0
    1
      1
    2
      2
    3
      3
CHUNK
  174766
CURRENT
  RANK
    3
  FILES
    1
  FILE
    0
      FILE
        rank_3.ckpt
      TYPE
        FULL
      RANKS
        4
      ORIG
        rank_3.ckpt
      PATH
        /p/lscratchb/user1/simulation123
      NAME
        rank_3.ckpt
      SIZE
        524297
      COMPLETE
        1
PARTNER
  RANK
    2
  FILES
    1
  FILE
    0
      FILE
        rank_2.ckpt
      TYPE
        FULL
      RANKS
        4
      ORIG
        rank_2.ckpt
      PATH
        /p/lscratchb/user1/simulation123
      NAME
        rank_2.ckpt
      SIZE
        524296
      COMPLETE
        1
";

    fn member(rank: i64, size: u64) -> XorMember {
        let name = format!("rank_{rank}.ckpt");
        XorMember {
            rank,
            files: vec![Meta {
                file: Some(name.clone()),
                file_type: Some(FileType::Full),
                ranks: Some(4),
                orig: Some(name.clone()),
                path: Some("/p/lscratchb/user1/simulation123".into()),
                name: Some(name),
                size_bytes: Some(size),
                complete: Some(true),
                ..Meta::default()
            }],
        }
    }

    fn example() -> XorHeader {
        XorHeader {
            dataset: example6(),
            ranks: 4,
            group_world_ranks: vec![0, 1, 2, 3],
            chunk_bytes: 174_766,
            current: member(3, 524_297),
            partner: member(2, 524_296),
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(XorHeader::from_tree(&spec).unwrap(), example());
    }

    #[test]
    fn header_then_chunk_roundtrip() {
        let dir = tempdir();
        let path = dir.path().join(xor_file_name(3, 4, 0));
        assert!(path.ends_with("4_of_4_in_0.xor"));
        let mut bytes = example().encode();
        let header_bytes = bytes.len();
        bytes.extend(std::iter::repeat_n(0xa5u8, 1000));
        std::fs::write(&path, &bytes).unwrap();
        let (h, offset) = XorHeader::read_from(&path).unwrap();
        assert_eq!((h, offset), (example(), header_bytes));
        let (h, offset) = XorHeader::decode_prefix(&bytes, &path).unwrap();
        assert_eq!((h, offset), (example(), header_bytes));
        example().write_file(dir.path().join("h.scr")).unwrap();
        assert_eq!(
            XorHeader::read_file(dir.path().join("h.scr")).unwrap(),
            example()
        );
    }

    #[test]
    fn file_names() {
        assert_eq!(xor_file_name(2, 4, 0), "3_of_4_in_0.xor");
        assert_eq!(parse_xor_file_name("3_of_4_in_0.xor"), Some((2, 4, 0)));
        assert_eq!(parse_xor_file_name("0_of_4_in_0.xor"), None);
        assert_eq!(parse_xor_file_name("5_of_4_in_0.xor"), None);
        assert_eq!(parse_xor_file_name("rank_0.ckpt"), None);
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.get_mut("CURRENT").unwrap().set_val("FILES", 2);
        let e = XorHeader::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::Inconsistent { path, .. } if path == "CURRENT/FILE"),
            "{e}"
        );
        let mut t = example().to_tree();
        t.get_mut("GROUP").unwrap().entry("RANK").entry("x");
        let e = XorHeader::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::NonIntegerKey { path, .. } if path == "GROUP/RANK"),
            "{e}"
        );
        let mut t = example().to_tree();
        t.unset("CHUNK");
        assert!(matches!(
            XorHeader::from_tree(&t),
            Err(RecordError::Missing { path, .. }) if path == "CHUNK"
        ));
        let mut bytes = example().encode();
        bytes.truncate(30);
        assert!(XorHeader::decode_prefix(&bytes, Path::new("x.xor")).is_err());
    }
}
