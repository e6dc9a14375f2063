//! Properties of the packed-hash and file codecs. proptest seeds every case;
//! a failure prints the minimal input and records its seed under
//! `scr/tests/proptest-regressions/`, which replays it first on the next run.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use scr::kvtree::file::{self, HEADER_LEN};
use scr::kvtree::{KvTree, UnpackError};

use crate::common::{pack_reversed, reseal};

/// Keys as SCR writes them (names, numbers) and arbitrary Unicode without
/// NUL (the one byte the format cannot hold), including the empty key.
fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Z_]{1,10}", "[0-9]{1,5}", "[^\\x00]{0,6}",]
}

/// Random trees up to `depth` levels and roughly `size` nodes.
fn tree_sized(depth: u32, size: u32, width: usize) -> impl Strategy<Value = KvTree> {
    Just(KvTree::new()).prop_recursive(depth, size, width as u32, move |inner| {
        prop::collection::btree_map(key(), inner, 0..width).prop_map(|m| {
            let mut t = KvTree::new();
            for (k, c) in m {
                t.set(k, c);
            }
            t
        })
    })
}

fn tree() -> impl Strategy<Value = KvTree> {
    tree_sized(6, 128, 6)
}

fn small_tree() -> impl Strategy<Value = KvTree> {
    tree_sized(3, 12, 4)
}

fn large_tree() -> impl Strategy<Value = KvTree> {
    tree_sized(5, 1024, 24)
}

const P: &str = "/prop/test.scr";

fn check_roundtrip_if_ok(bytes: &[u8]) {
    if let Ok(t) = file::decode(bytes, Path::new(P)) {
        let again = file::decode(&file::encode(&t, true), Path::new(P));
        assert_eq!(again.ok().as_ref(), Some(&t), "decoded tree re-encodes");
    }
    if let Ok((t, used)) = KvTree::unpack(bytes) {
        assert!(used <= bytes.len());
        let packed = t.pack();
        assert_eq!(
            KvTree::unpack_exact(&packed),
            Ok(t),
            "unpacked tree repacks"
        );
    }
}

proptest! {
    #[test]
    fn pack_then_unpack_is_identity(t in tree()) {
        let packed = t.pack();
        prop_assert_eq!(packed.len(), t.packed_size());
        let (back, used) = KvTree::unpack(&packed).unwrap();
        prop_assert_eq!(used, packed.len());
        prop_assert_eq!(back, t);
    }

    #[test]
    fn element_order_does_not_matter(t in tree()) {
        // LLNL's SCR writes reverse insertion order; we must read it.
        let mut llnl = Vec::new();
        pack_reversed(&t, &mut llnl);
        prop_assert_eq!(KvTree::unpack_exact(&llnl), Ok(t));
    }

    #[test]
    fn encode_then_decode_is_identity(t in tree(), crc in any::<bool>()) {
        let bytes = file::encode(&t, crc);
        prop_assert_eq!(bytes.len(), HEADER_LEN + t.packed_size() + if crc { 4 } else { 0 });
        prop_assert_eq!(file::decode(&bytes, Path::new(P)).unwrap(), t);
    }

    #[test]
    fn every_strict_prefix_is_rejected(t in tree()) {
        let bytes = file::encode(&t, true);
        for len in 0..bytes.len() {
            prop_assert!(file::decode(&bytes[..len], Path::new(P)).is_err(), "file prefix {}", len);
        }
        let packed = t.pack();
        for len in 0..packed.len() {
            // The packed form is self-delimiting: no strict prefix is whole.
            prop_assert!(KvTree::unpack(&packed[..len]).is_err(), "packed prefix {}", len);
        }
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check_roundtrip_if_ok(&bytes);
    }

    #[test]
    fn garbage_behind_a_valid_header_never_panics(
        data in prop::collection::vec(any::<u8>(), 0..600),
        crc in any::<bool>(),
    ) {
        // Reaches the hash decoder, which raw garbage almost never does.
        let mut bytes = file::encode(&KvTree::new(), crc);
        bytes.splice(HEADER_LEN..HEADER_LEN + 4, data);
        reseal(&mut bytes);
        check_roundtrip_if_ok(&bytes);
    }

    #[test]
    fn structured_garbage_never_panics(
        data in prop::collection::vec(
            prop_oneof![
                Just(vec![0u8, 0, 0, 0]),
                Just(vec![0u8, 0, 0, 1]),
                Just(vec![0u8, 0, 0, 2]),
                Just(vec![0xffu8, 0xff, 0xff, 0xff]),
                Just(vec![0u8]),
                Just(b"k".to_vec()),
                Just(vec![0xc3u8]),
            ],
            0..80,
        ),
    ) {
        // Sequences of counts, NULs and key bytes: the decoder's own alphabet.
        let flat: Vec<u8> = data.concat();
        check_roundtrip_if_ok(&flat);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_single_bit_flip_is_detected_in_small_files(t in small_tree()) {
        let bytes = file::encode(&t, true);
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(
                file::decode(&damaged, Path::new(P)).is_err(),
                "flip of bit {} (byte {}) of a {}-byte file went unnoticed", bit % 8, bit / 8, bytes.len()
            );
        }
    }

    #[test]
    fn sampled_bit_flips_are_detected_in_large_files(
        t in large_tree(),
        picks in prop::collection::vec((any::<Index>(), 0u8..8), 256),
    ) {
        let bytes = file::encode(&t, true);
        for (at, bit) in picks {
            let i = at.index(bytes.len());
            let mut damaged = bytes.clone();
            damaged[i] ^= 1 << bit;
            prop_assert!(
                file::decode(&damaged, Path::new(P)).is_err(),
                "flip of bit {} of byte {} of a {}-byte file went unnoticed", bit, i, bytes.len()
            );
        }
    }
}

proptest! {
    // Each case writes and fsyncs a real file: fewer of them.
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn write_then_read_is_identity(t in tree()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.scr");
        file::write(&path, &t).unwrap();
        prop_assert_eq!(file::read(&path).unwrap(), t.clone());
        // Overwriting replaces, never merges.
        file::write(&path, &KvTree::new()).unwrap();
        prop_assert_eq!(file::read(&path).unwrap(), KvTree::new());
    }
}

#[test]
fn depth_bound_is_exact() {
    let max = scr::kvtree::MAX_DEPTH;
    let deepest = crate::common::chain(max);
    assert_eq!(KvTree::unpack_exact(&deepest.pack()), Ok(deepest));
    let too_deep = crate::common::chain(max + 1).pack();
    assert!(matches!(
        KvTree::unpack_exact(&too_deep),
        Err(UnpackError::TooDeep { .. })
    ));
}
