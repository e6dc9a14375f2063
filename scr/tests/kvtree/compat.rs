//! Compatibility with files written by LLNL's SCR.
//!
//! LLNL's `scr_hash_set` inserts each element at the head of the hash's
//! element list and `scr_hash_pack` walks the list from the head, so a file
//! holds every hash's elements in REVERSE insertion order — not sorted. The
//! developer guide's halt-file example shows exactly that unsorted order
//! (`ExitReason` after `HaltSeconds`). This file is the guide's example,
//! assembled by hand in that order, and pinned as
//! `scr/tests/data/llnl_order.scr`.

use std::path::Path;

use scr::kvtree::{file, KvTree};

/// The guide's halt file, byte by byte.
fn llnl_halt_bytes() -> Vec<u8> {
    let mut b: Vec<u8> = Vec::new();
    // Header.
    b.extend_from_slice(&[0x95, 0x1f, 0xc3, 0xf5]); // magic
    b.extend_from_slice(&[0x00, 0x01]); // file type 1: hash file
    b.extend_from_slice(&[0x00, 0x01]); // file version 1
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0xb1]); // file size 177, CRC trailer included
    b.extend_from_slice(&[0x00, 0x00, 0x00, 0x01]); // flags: CRC32 trailer present
                                                    // Packed hash, data offset 20.
    b.extend_from_slice(&[0, 0, 0, 5]); // 5 elements, in the order the guide prints them:
                                        // "CheckpointsLeft" -> { "7" -> {} }
    b.extend_from_slice(b"CheckpointsLeft\0");
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.extend_from_slice(b"7\0");
    b.extend_from_slice(&[0, 0, 0, 0]);
    // "ExitAfter" -> { "1298937600" -> {} }
    b.extend_from_slice(b"ExitAfter\0");
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.extend_from_slice(b"1298937600\0");
    b.extend_from_slice(&[0, 0, 0, 0]);
    // "ExitBefore" -> { "1298944800" -> {} }
    b.extend_from_slice(b"ExitBefore\0");
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.extend_from_slice(b"1298944800\0");
    b.extend_from_slice(&[0, 0, 0, 0]);
    // "HaltSeconds" -> { "1200" -> {} }
    b.extend_from_slice(b"HaltSeconds\0");
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.extend_from_slice(b"1200\0");
    b.extend_from_slice(&[0, 0, 0, 0]);
    // "ExitReason" -> { "SCR_FINALIZE_CALLED" -> {} }: after HaltSeconds,
    // so a sorting writer could not have produced this file.
    b.extend_from_slice(b"ExitReason\0");
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.extend_from_slice(b"SCR_FINALIZE_CALLED\0");
    b.extend_from_slice(&[0, 0, 0, 0]);
    // CRC-32 (zlib polynomial) of bytes 0..173, computed independently with
    // Python's zlib.crc32.
    b.extend_from_slice(&[0x1e, 0x7c, 0x0a, 0x92]);
    b
}

fn expected_halt() -> KvTree {
    let mut t = KvTree::new();
    t.set_int("CheckpointsLeft", 7);
    t.set_int("ExitAfter", 1_298_937_600);
    t.set_int("ExitBefore", 1_298_944_800);
    t.set_int("HaltSeconds", 1200);
    t.set_str("ExitReason", "SCR_FINALIZE_CALLED");
    t
}

fn pinned_path() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/llnl_order.scr"
    ))
}

#[test]
fn hand_assembled_llnl_file_is_consistent() {
    let b = llnl_halt_bytes();
    assert_eq!(b.len(), 177, "size field says 177");
    // crc32fast computes the same CRC-32 as zlib.
    assert_eq!(crc32fast::hash(&b[..173]), 0x1e7c_0a92);
}

#[test]
fn pinned_file_is_the_hand_assembled_bytes() {
    let on_disk = std::fs::read(pinned_path()).unwrap();
    assert_eq!(
        on_disk,
        llnl_halt_bytes(),
        "tests/data/llnl_order.scr changed"
    );
}

#[test]
fn llnl_order_decodes_to_the_expected_tree() {
    let t = file::read(pinned_path()).unwrap();
    assert_eq!(t, expected_halt());
    assert_eq!(t.get_int("CheckpointsLeft").unwrap(), Some(7));
    assert_eq!(t.get_int("ExitAfter").unwrap(), Some(1_298_937_600));
    assert_eq!(t.val("ExitReason"), Some("SCR_FINALIZE_CALLED"));
    // Key order in the file is not kept: iteration is sorted.
    let keys: Vec<&str> = t.keys().collect();
    assert_eq!(
        keys,
        [
            "CheckpointsLeft",
            "ExitAfter",
            "ExitBefore",
            "ExitReason",
            "HaltSeconds"
        ]
    );
}

#[test]
fn our_encoding_differs_only_in_element_order() {
    let ours = file::encode(&expected_halt(), true);
    let theirs = llnl_halt_bytes();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours[..20], theirs[..20], "identical headers");
    assert_ne!(ours, theirs, "we write sorted order");
    let mut a = ours[20..173].to_vec();
    let mut b = theirs[20..173].to_vec();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "same bytes, other order");
}
