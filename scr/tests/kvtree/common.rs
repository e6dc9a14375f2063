//! Helpers shared by the kvtree tests.

use scr::kvtree::file::{FLAG_CRC32, HEADER_LEN};
use scr::kvtree::KvTree;

/// Rewrite the size field and, when flagged, the CRC32 trailer so that a
/// deliberately damaged packed hash reaches the hash decoder instead of
/// being stopped by the header checks.
pub fn reseal(bytes: &mut [u8]) {
    assert!(bytes.len() >= HEADER_LEN, "reseal needs a whole header");
    let flags = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let crc = flags & FLAG_CRC32 != 0;
    let len = bytes.len() as u64;
    bytes[8..16].copy_from_slice(&len.to_be_bytes());
    if crc {
        let end = bytes.len() - 4;
        let sum = crc32fast::hash(&bytes[..end]);
        bytes[end..].copy_from_slice(&sum.to_be_bytes());
    }
}

/// Build a file around `data` (a packed hash, possibly malformed) with a CRC
/// trailer and correct size, as a writer that packs badly would.
pub fn file_around(data: &[u8]) -> Vec<u8> {
    let mut bytes = scr::kvtree::file::encode(&KvTree::new(), true);
    // Replace the empty hash (4 zero bytes) with `data`, keep the trailer.
    bytes.splice(HEADER_LEN..HEADER_LEN + 4, data.iter().copied());
    reseal(&mut bytes);
    bytes
}

/// Pack `tree` the way LLNL's SCR does: every hash's elements in the
/// reverse of the order given (LLNL inserts at the head of a list and packs
/// from the head, so it writes reverse insertion order). Here the "given"
/// order is our sorted order, so the output is reverse-sorted at every level.
pub fn pack_reversed(tree: &KvTree, out: &mut Vec<u8>) {
    out.extend_from_slice(&(tree.len() as u32).to_be_bytes());
    let children: Vec<_> = tree.iter().collect();
    for (key, child) in children.into_iter().rev() {
        out.extend_from_slice(key.as_bytes());
        out.push(0);
        pack_reversed(child, out);
    }
}

/// A chain `k/k/.../k` of `depth` nested keys.
pub fn chain(depth: usize) -> KvTree {
    let mut t = KvTree::new();
    for _ in 0..depth {
        let mut parent = KvTree::new();
        parent.set("k", t);
        t = parent;
    }
    t
}

/// The developer guide's filemap example ("Hash" section).
pub fn guide_example() -> KvTree {
    let mut t = KvTree::new();
    let r0 = t.set_kv_int("RANK", 0);
    r0.set_int("FILES", 2);
    let foo0 = r0.set_kv("FILE", "foo_0.txt");
    foo0.set_bytecount("SIZE", 1024);
    foo0.set_int("COMPLETE", 1);
    let bar0 = r0.set_kv("FILE", "bar_0.txt");
    bar0.set_bytecount("SIZE", 2048);
    bar0.set_int("COMPLETE", 1);
    let r1 = t.set_kv_int("RANK", 1);
    r1.set_int("FILES", 1);
    let foo1 = r1.set_kv("FILE", "foo_1.txt");
    foo1.set_bytecount("SIZE", 3072);
    foo1.set_int("COMPLETE", 1);
    t
}
