//! Nodes file (`nodes.scr`, guide section "Nodes file"): how many nodes the
//! previous run used, so `scr_run` can tell whether enough healthy nodes
//! remain for a restart.

use super::{Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The nodes file's name.
pub const NODES_FILE: &str = "nodes.scr";

/// The nodes file (`NODES/<count>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nodes {
    /// `NODES`: nodes used by the previous run (the largest size of
    /// `scr_comm_level` across tasks).
    pub nodes: u64,
}

impl Record for Nodes {
    const RECORD: &'static str = "nodes file";
    /// A nodes file holds one count; a larger file is damage or a planted file,
    /// refused before it is read.
    const MAX_FILE_BYTES: u64 = 1 << 16;

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_val("NODES", self.nodes);
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let n = Node::root(Self::RECORD, tree);
        Ok(Nodes {
            nodes: n.req_u64("NODES")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented("NODES\n  4\n");
        assert_eq!(Nodes { nodes: 4 }.to_tree(), spec);
        assert_eq!(Nodes::from_tree(&spec).unwrap(), Nodes { nodes: 4 });
        insta::assert_snapshot!(to_indented(&spec, 2));
    }

    #[test]
    fn file_roundtrip_and_validation() {
        let dir = tempdir();
        let path = dir.path().join(NODES_FILE);
        Nodes { nodes: 4 }.write_file(&path).unwrap();
        assert_eq!(Nodes::read_file(&path).unwrap(), Nodes { nodes: 4 });
        assert!(matches!(
            Nodes::from_tree(&KvTree::new()),
            Err(RecordError::Missing { path, .. }) if path == "NODES"
        ));
        let e = Nodes::from_tree(&tree_from_indented("NODES\n  -4\n")).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == "NODES"),
            "{e}"
        );
        let e = Nodes::read_file(dir.path().join("missing.scr")).unwrap_err();
        assert!(
            e.is_not_found() && e.to_string().contains("missing.scr"),
            "{e}"
        );
    }
}
