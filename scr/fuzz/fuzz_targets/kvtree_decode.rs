//! libFuzzer target: the kvtree file decoder and the packed-hash decoder on
//! arbitrary bytes. Neither may panic, and whatever they accept must
//! re-encode to bytes that decode to the same tree.
//!
//! A coverage-guided fuzzer cannot forge a CRC32, so the input is also
//! decoded once more "re-sealed" (size field and CRC trailer recomputed):
//! that copy reaches the hash decoder behind a valid header.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use scr::kvtree::file::{self, FLAG_CRC32, HEADER_LEN};
use scr::kvtree::KvTree;

fn check_file(bytes: &[u8]) {
    let path = Path::new("fuzz.scr");
    match file::decode(bytes, path) {
        Ok(tree) => {
            for crc in [true, false] {
                let again =
                    file::decode(&file::encode(&tree, crc), path).expect("re-encoded file decodes");
                assert_eq!(again, tree, "file re-encode changed the tree");
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.scr: "), "{e}"),
    }
}

fn resealed(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < HEADER_LEN {
        return None;
    }
    let mut b = data.to_vec();
    let len = b.len() as u64;
    b[8..16].copy_from_slice(&len.to_be_bytes());
    let flags = u32::from_be_bytes(b[16..20].try_into().ok()?);
    if flags & FLAG_CRC32 != 0 && b.len() >= HEADER_LEN + 4 {
        let end = b.len() - 4;
        let crc = crc32fast::hash(&b[..end]);
        b[end..].copy_from_slice(&crc.to_be_bytes());
    }
    Some(b)
}

fuzz_target!(|data: &[u8]| {
    check_file(data);
    if let Some(b) = resealed(data) {
        check_file(&b);
    }
    if let Ok((tree, used)) = KvTree::unpack(data) {
        assert!(used <= data.len());
        let again = KvTree::unpack_exact(&tree.pack()).expect("repacked hash unpacks");
        assert_eq!(again, tree, "repack changed the tree");
    }
});
