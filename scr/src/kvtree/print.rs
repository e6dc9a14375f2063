//! The indented text form of a kvtree, as `scr_hash_print` and
//! `scr_print_hash_file` show it in the developer guide:
//!
//! ```text
//! RANK
//!   0
//!     FILES
//!       2
//! ```

use super::KvTree;

/// Render `tree` with each level indented `step` spaces more than its parent;
/// top-level keys start in column 0. Every line ends with a newline.
pub fn to_indented(tree: &KvTree, step: usize) -> String {
    let mut out = String::new();
    write_level(tree, 0, step, &mut out);
    out
}

fn write_level(tree: &KvTree, indent: usize, step: usize, out: &mut String) {
    for (key, child) in tree {
        for _ in 0..indent {
            out.push(' ');
        }
        out.push_str(key);
        out.push('\n');
        write_level(child, indent + step, step, out);
    }
}

/// Render `tree` as JSON: every key maps to an object of its children.
pub fn to_json(tree: &KvTree) -> String {
    fn value(t: &KvTree) -> serde_json::Value {
        serde_json::Value::Object(t.iter().map(|(k, c)| (k.clone(), value(c))).collect())
    }
    serde_json::to_string_pretty(&value(tree)).expect("a JSON object always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_the_guide() {
        let mut t = KvTree::new();
        let r = t.set_kv_int("RANK", 0);
        r.set_int("FILES", 2);
        r.set_kv("FILE", "foo_0.txt").set_bytecount("SIZE", 1024);
        assert_eq!(
            to_indented(&t, 2),
            "RANK\n  0\n    FILE\n      foo_0.txt\n        SIZE\n          1024\n    FILES\n      2\n"
        );
    }
}
