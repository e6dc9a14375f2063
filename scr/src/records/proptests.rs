//! Properties over arbitrary trees and operation sequences: readers never
//! panic, and what they accept is a fixed point of write-then-read.

use crate::ids::{DatasetId, Rank};
use proptest::prelude::*;

use super::*;
use crate::kvtree::KvTree;

const KEYS: &[&str] = &[
    "RANK",
    "DSET",
    "FILE",
    "FILES",
    "ID",
    "SIZE",
    "CRC",
    "META",
    "DSETDESC",
    "DATADESC",
    "REDDESC",
    "LOCATION",
    "CACHE",
    "PFS",
    "LEVEL",
    "RANKS",
    "GROUP",
    "CURRENT",
    "PARTNER",
    "CHUNK",
    "VERSION",
    "COMPLETE",
    "TYPE",
    "XOR",
    "FULL",
    "DIR",
    "NAME",
    "NODES",
    "RANK2FILE",
    "SEG",
    "OFFSET",
    "LENGTH",
    "NOFETCH",
    "FLAG",
    "DONE",
    "PERCENT",
    "BW",
    "DESTINATION",
    "WRITTEN",
    "ExitAfter",
    "CheckpointsLeft",
    "ENABLED",
    "INDEX",
    "INTERVAL",
    "GROUP_SIZE",
    "GROUP_RANK",
    "0",
    "1",
    "2",
    "3",
    "6",
    "-1",
    "0x1f",
    "0xzz",
    "1.5",
    "x",
    "",
];

fn arb_tree() -> impl Strategy<Value = KvTree> {
    let leaf = Just(KvTree::new());
    leaf.prop_recursive(6, 64, 5, |inner| {
        prop::collection::vec((prop::sample::select(KEYS), inner), 0..5).prop_map(|kids| {
            let mut t = KvTree::new();
            for (k, v) in kids {
                t.set(k, v);
            }
            t
        })
    })
}

fn fixed_point<R: Record + PartialEq + std::fmt::Debug>(tree: &KvTree) {
    if let Ok(r) = R::from_tree(tree) {
        let once = r.to_tree();
        let again = R::from_tree(&once).expect("a written record reads back");
        assert_eq!(again.to_tree(), once);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn readers_never_panic_and_accepted_input_is_stable(tree in arb_tree()) {
        fixed_point::<Dataset>(&tree);
        fixed_point::<Meta>(&tree);
        fixed_point::<RedDesc>(&tree);
        fixed_point::<Filemap>(&tree);
        fixed_point::<MasterFilemap>(&tree);
        fixed_point::<XorHeader>(&tree);
        fixed_point::<RankFilemap>(&tree);
        fixed_point::<Index>(&tree);
        fixed_point::<Summary>(&tree);
        fixed_point::<Rank2File>(&tree);
        fixed_point::<FlushFile>(&tree);
        fixed_point::<Halt>(&tree);
        fixed_point::<Nodes>(&tree);
        fixed_point::<Transfer>(&tree);
    }

    #[test]
    fn filemap_index_stays_in_sync(ops in prop::collection::vec((0u8..7, 0i64..4, 0i64..4, 0usize..3), 0..40)) {
        let mut m = Filemap::new();
        for (op, dset, rank, f) in ops {
            let file = format!("/cache/f{f}");
            match op {
                0 => m.add_file(DatasetId(dset), Rank::from_i64(rank).expect("a rank"), &file),
                1 => m.remove_file(DatasetId(dset), Rank::from_i64(rank).expect("a rank"), &file),
                2 => m.set_expected_files(DatasetId(dset), Rank::from_i64(rank).expect("a rank"), f as u64),
                3 => m.remove_rank_by_dataset(DatasetId(dset), Rank::from_i64(rank).expect("a rank")),
                4 => m.remove_dataset(DatasetId(dset)),
                5 => { let _ = m.extract_rank(Rank::from_i64(rank).expect("a rank")); }
                _ => m.unset_expected_files(DatasetId(dset), Rank::from_i64(rank).expect("a rank")),
            }
            // Rebuilding the index from RANK changes nothing: it was in sync.
            let reread = Filemap::from_tree(&m.to_tree()).expect("valid");
            prop_assert_eq!(&reread, &m);
            for d in m.list_datasets() {
                for r in m.list_ranks_by_dataset(d) {
                    prop_assert!(m.have_rank_by_dataset(d, r));
                }
            }
        }
    }
}
