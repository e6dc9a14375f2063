//! Redundancy descriptor hash (`scr_reddesc_store_to_hash` /
//! `scr_reddesc_create_from_hash`, guide section "Redundancy descriptors").
//!
//! Stored under `REDDESC` for each rank and dataset in a filemap, so that a
//! later run can rebuild the same redundancy groups.

use super::{set_bool, set_opt, Node, Record, RecordError};
use crate::kvtree::KvTree;
/// The scheme enum lives at the bottom of the crate ([`crate::scheme`]);
/// descriptors name it from here too.
pub use crate::scheme::CopyType;

const KNOWN: &[&str] = &[
    "ENABLED",
    "INDEX",
    "INTERVAL",
    "BASE",
    "DIRECTORY",
    "TYPE",
    "HOP_DISTANCE",
    "SET_SIZE",
    "SET_FAILURES",
    "GROUPS",
    "GROUP_ID",
    "GROUP_SIZE",
    "GROUP_RANK",
    "MEMBERS",
    "WORLD_RANKS",
];

/// A redundancy descriptor as persisted (`scr_reddesc` minus its runtime
/// communicator). The fields of the guide's example are required;
/// scheme-specific ones are optional.
#[derive(Debug, Clone, PartialEq)]
pub struct RedDesc {
    /// `ENABLED`: whether this descriptor may be used.
    pub enabled: bool,
    /// `INDEX`: index in `scr_reddescs`.
    pub index: i64,
    /// `INTERVAL`: applied to checkpoints whose id this divides (≥ 1).
    pub interval: u64,
    /// `BASE`: cache base directory.
    pub base: String,
    /// `DIRECTORY`: directory under which `dataset.<id>` directories live.
    pub directory: String,
    /// `TYPE`: the redundancy scheme.
    pub copy_type: CopyType,
    /// `HOP_DISTANCE`: distance to partners in the group (PARTNER, XOR, RS).
    pub hop_distance: Option<u64>,
    /// `SET_SIZE`: minimum processes per XOR/RS set.
    pub set_size: Option<u64>,
    /// `SET_FAILURES`: losses an RS set tolerates (RS only).
    pub set_failures: Option<u64>,
    /// `GROUPS`: number of redundancy sets in the job.
    pub groups: u64,
    /// `GROUP_ID`: id of this process's set (colour for `MPI_Comm_split`).
    pub group_id: i64,
    /// `GROUP_SIZE`: processes in this set.
    pub group_size: u64,
    /// `GROUP_RANK`: this process's rank in its set (`my_rank`; the key for
    /// `MPI_Comm_split`).
    pub group_rank: u64,
    /// `MEMBERS` (this implementation's addition): the world rank of every
    /// member of this process's set, by set rank, so that a later run (or
    /// `scr copy`) can find a lost rank's set without recomputing it.
    /// Empty when the record does not carry it (descriptors written by
    /// LLNL SCR).
    pub members: Vec<i64>,
    /// `WORLD_RANKS` (this implementation's addition): the number of ranks
    /// in the run that wrote the dataset.
    pub world_ranks: Option<u64>,
    /// Fields this version does not interpret, kept verbatim.
    pub extra: KvTree,
}

/// Parse `MEMBERS`: set rank → world rank, every set rank from 0 to n-1
/// present exactly once.
fn parse_members(n: &Node<'_>) -> Result<Vec<i64>, RecordError> {
    let Some(tree) = n.tree().get("MEMBERS") else {
        return Ok(Vec::new());
    };
    let mut by_set_rank: Vec<(u64, i64)> = Vec::with_capacity(tree.len());
    for (g, child) in tree.iter() {
        let mut keys = child.keys();
        let (Some(w), None) = (keys.next(), keys.next()) else {
            return Err(n.inconsistent("MEMBERS", format!("set rank {g:?} needs one world rank")));
        };
        let (Ok(g), Ok(w)) = (g.parse::<u64>(), w.parse::<i64>()) else {
            return Err(n.inconsistent("MEMBERS", format!("{g:?} -> {w:?} is not two ranks")));
        };
        by_set_rank.push((g, w));
    }
    by_set_rank.sort_unstable();
    for (i, (g, _)) in by_set_rank.iter().enumerate() {
        if *g != i as u64 {
            return Err(n.inconsistent("MEMBERS", format!("set rank {i} is missing")));
        }
    }
    Ok(by_set_rank.into_iter().map(|(_, w)| w).collect())
}

impl RedDesc {
    /// The dataset directory for `dset_id` in cache: `<DIRECTORY>/dataset.<id>`
    /// (`scr_cache_dir_get`).
    pub fn dataset_dir(&self, dset_id: i64) -> String {
        format!("{}/dataset.{dset_id}", self.directory)
    }

    pub(crate) fn from_node(n: &Node<'_>) -> Result<Self, RecordError> {
        let d = RedDesc {
            enabled: n.req_bool("ENABLED")?,
            index: n.req_i64("INDEX")?,
            interval: n.req_u64("INTERVAL")?,
            base: n.req_str("BASE")?,
            directory: n.req_str("DIRECTORY")?,
            copy_type: n
                .opt_with("TYPE", "SINGLE, PARTNER, XOR or RS", CopyType::parse)?
                .ok_or_else(|| n.missing("TYPE"))?,
            hop_distance: n.opt_u64("HOP_DISTANCE")?,
            set_size: n.opt_u64("SET_SIZE")?,
            set_failures: n.opt_u64("SET_FAILURES")?,
            groups: n.req_u64("GROUPS")?,
            group_id: n.req_i64("GROUP_ID")?,
            group_size: n.req_u64("GROUP_SIZE")?,
            group_rank: n.req_u64("GROUP_RANK")?,
            members: parse_members(n)?,
            world_ranks: n.opt_u64("WORLD_RANKS")?,
            extra: n.extra(KNOWN),
        };
        if !d.members.is_empty() && d.members.len() as u64 != d.group_size {
            return Err(n.inconsistent(
                "MEMBERS",
                format!("{} members for a set of {}", d.members.len(), d.group_size),
            ));
        }
        if d.interval == 0 {
            return Err(n.inconsistent("INTERVAL", "must be at least 1"));
        }
        if d.group_size == 0 || d.group_rank >= d.group_size {
            return Err(n.inconsistent(
                "GROUP_RANK",
                format!(
                    "group rank {} is not below group size {}",
                    d.group_rank, d.group_size
                ),
            ));
        }
        if let (Some(k), CopyType::Rs) = (d.set_failures, d.copy_type) {
            if k >= d.group_size {
                return Err(n.inconsistent(
                    "SET_FAILURES",
                    format!(
                        "{k} failures cannot be tolerated by a set of {}",
                        d.group_size
                    ),
                ));
            }
        }
        Ok(d)
    }
}

impl Record for RedDesc {
    const RECORD: &'static str = "redundancy descriptor";
    /// A redundancy descriptor is a dozen keys; a larger file is damage or a
    /// planted file, refused before it is read.
    const MAX_FILE_BYTES: u64 = 1 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = self.extra.clone();
        set_bool(&mut t, "ENABLED", self.enabled);
        t.set_int("INDEX", self.index);
        t.set_val("INTERVAL", self.interval);
        t.set_str("BASE", &self.base);
        t.set_str("DIRECTORY", &self.directory);
        t.set_val("TYPE", self.copy_type);
        set_opt(&mut t, "HOP_DISTANCE", self.hop_distance);
        set_opt(&mut t, "SET_SIZE", self.set_size);
        set_opt(&mut t, "SET_FAILURES", self.set_failures);
        t.set_val("GROUPS", self.groups);
        t.set_int("GROUP_ID", self.group_id);
        t.set_val("GROUP_SIZE", self.group_size);
        t.set_val("GROUP_RANK", self.group_rank);
        for (g, w) in self.members.iter().enumerate() {
            t.entry("MEMBERS").set_val(g.to_string(), w);
        }
        set_opt(&mut t, "WORLD_RANKS", self.world_ranks);
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

    /// The guide's "Example redundancy descriptor hash".
    const SPEC: &str = "
ENABLED
  1
INDEX
  0
INTERVAL
  1
BASE
  /tmp
DIRECTORY
  /tmp/user1/scr.1145655/index.0
TYPE
  XOR
HOP_DISTANCE
  1
SET_SIZE
  8
GROUPS
  1
GROUP_ID
  0
GROUP_SIZE
  4
GROUP_RANK
  0
";

    pub(crate) fn example() -> RedDesc {
        RedDesc {
            enabled: true,
            index: 0,
            interval: 1,
            base: "/tmp".into(),
            directory: "/tmp/user1/scr.1145655/index.0".into(),
            copy_type: CopyType::Xor,
            hop_distance: Some(1),
            set_size: Some(8),
            set_failures: None,
            groups: 1,
            group_id: 0,
            group_size: 4,
            group_rank: 0,
            members: Vec::new(),
            world_ranks: None,
            extra: KvTree::new(),
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(RedDesc::from_tree(&spec).unwrap(), example());
        assert_eq!(
            example().dataset_dir(6),
            "/tmp/user1/scr.1145655/index.0/dataset.6"
        );
    }

    #[test]
    fn file_roundtrip_rs() {
        let dir = tempdir();
        let path = dir.path().join("reddesc.scr");
        let mut d = example();
        d.copy_type = CopyType::Rs;
        d.set_failures = Some(2);
        d.write_file(&path).unwrap();
        assert_eq!(RedDesc::read_file(&path).unwrap(), d);
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation_names_fields() {
        let mut t = example().to_tree();
        t.unset("GROUP_ID");
        assert!(matches!(
            RedDesc::from_tree(&t),
            Err(RecordError::Missing { path, .. }) if path == "GROUP_ID"
        ));
        let mut t = example().to_tree();
        t.set_val("GROUP_RANK", 4);
        assert!(matches!(
            RedDesc::from_tree(&t),
            Err(RecordError::Inconsistent { path, .. }) if path == "GROUP_RANK"
        ));
        let mut t = example().to_tree();
        t.set_val("TYPE", "RAID6");
        assert!(matches!(
            RedDesc::from_tree(&t),
            Err(RecordError::BadValue { path, .. }) if path == "TYPE"
        ));
    }
}
