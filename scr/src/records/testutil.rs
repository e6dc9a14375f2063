//! Test helpers: build trees from the indented examples of the guide.

use crate::kvtree::KvTree;

/// Parse the indented text form (as printed in the developer guide) back
/// into a tree. Each line is a key; its indentation says its parent.
pub(crate) fn tree_from_indented(text: &str) -> KvTree {
    let mut root = KvTree::new();
    // Stack of (indent, key path from the root).
    let mut stack: Vec<(usize, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let key = line.trim().to_owned();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let mut path = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
        let mut node = &mut root;
        for k in &path {
            node = node.entry(k.clone());
        }
        node.entry(key.clone());
        path.push(key);
        stack.push((indent, path));
    }
    root
}

/// A fresh temporary directory.
pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[test]
fn parses_nesting() {
    let t = tree_from_indented("A\n  1\nB\n  X\n    2\n  Y\n");
    assert_eq!(t.val("A"), Some("1"));
    assert_eq!(t.get("B").and_then(|b| b.val("X")), Some("2"));
    assert!(t.get("B").and_then(|b| b.get("Y")).is_some());
}
