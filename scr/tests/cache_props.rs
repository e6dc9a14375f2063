//! Property: with random failure-group layouts (nodes × ranks per node, up
//! to 160 ranks as threads), random schemes and set sizes, and random lost
//! nodes, restart in place succeeds exactly when the scheme's tolerance says
//! it should — and then every byte matches. Never a restart from wrong bytes.
//!
//! Replay a failing case with the seed proptest prints:
//! `PROPTEST_CASES=1 cargo test -p scr --test cache_props` after putting it
//! in `proptest-regressions/`, or run with the printed seed in the message.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use scr::comm::thread::ThreadComm;
use scr::config::MapEnv;
use scr::redundancy::apply::{recoverable, MemberLoss};
use scr::redundancy::sets::{build_sets, partner_plan};
use scr::storage::dirs::NodeIdentity;
use scr::CopyType;
use scr::{Flags, InitOptions, Scr};

fn content(seed: u64, rank: usize) -> Vec<u8> {
    let len = ((seed as usize).wrapping_mul(31) + rank * 997) % 3000;
    (0..len)
        .map(|i| ((i as u64).wrapping_mul(0x9e37) ^ seed ^ (rank as u64) << 5) as u8)
        .collect()
}

fn opts(root: &Path, prefix: &Path, node: usize, scheme: &str, set_size: usize) -> InitOptions {
    let vars = [
        ("SCR_PREFIX", prefix.to_string_lossy().into_owned()),
        ("SCR_JOB_ID", "prop".to_string()),
        ("USER", "prop".to_string()),
        ("SCR_COPY_TYPE", scheme.to_string()),
        ("SCR_SET_SIZE", set_size.to_string()),
        ("SCR_SET_FAILURES", "2".to_string()),
        ("SCR_MPI_BUF_SIZE", "4096".to_string()),
        // The cache tier alone: nothing reaches the prefix to fetch from.
        ("SCR_FLUSH", "0".to_string()),
    ];
    InitOptions {
        env: Some(Box::new(MapEnv::new(vars).with_cwd(prefix))),
        node: Some(NodeIdentity {
            name: format!("n{node}"),
            root: Some(root.join(format!("n{node}"))),
        }),
        ..InitOptions::default()
    }
}

/// Whether the library's sets survive losing `dead` nodes (the same set
/// construction the cache tier uses, judged by the scheme's tolerance).
fn expected_recoverable(
    scheme: &str,
    set_size: usize,
    node_of: &[usize],
    dead: &BTreeSet<usize>,
) -> bool {
    let n = node_of.len();
    let lost: Vec<bool> = node_of.iter().map(|nd| dead.contains(nd)).collect();
    // (TYPE, SET_FAILURES) as the descriptor stores them.
    let (sets, sch, k): (Vec<Vec<usize>>, CopyType, usize) = match scheme {
        "SINGLE" => ((0..n).map(|r| vec![r]).collect(), CopyType::Single, 0),
        "PARTNER" => (
            partner_plan(node_of, 1).unwrap().sets.sets,
            CopyType::Partner,
            0,
        ),
        "XOR" => (
            build_sets(node_of, set_size.max(2), 2.min(n)).unwrap().sets,
            CopyType::Xor,
            1,
        ),
        _ => (
            build_sets(node_of, set_size.max(3), 3.min(n)).unwrap().sets,
            CopyType::Rs,
            2,
        ),
    };
    sets.iter().all(|s| {
        let l: Vec<MemberLoss> = s.iter().map(|&r| MemberLoss::whole(lost[r])).collect();
        recoverable(sch, k, &l)
    })
}

fn case(
    seed: u64,
    nodes: usize,
    rpn: usize,
    scheme: &str,
    set_size: usize,
    dead: BTreeSet<usize>,
) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().to_path_buf();
    let prefix = root.join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    let n = nodes * rpn;
    let node_of: Vec<usize> = (0..n).map(|r| r / rpn).collect();
    ThreadComm::run(n, |comm| {
        let r = comm.rank();
        let world = comm.split(Some(0), r as i64).unwrap().unwrap();
        let mut scr =
            Scr::init_with(world, opts(&root, &prefix, node_of[r], scheme, set_size)).unwrap();
        let mut out = scr.start_output(Some("c1"), Flags::CHECKPOINT).unwrap();
        if r % 5 != 4 {
            let p = out.route_file(prefix.join(format!("r{r}.dat"))).unwrap();
            std::fs::write(&p, content(seed, r)).unwrap();
        }
        assert!(out.complete(true).unwrap());
        scr.finalize().unwrap();
    })
    .unwrap();
    for d in &dead {
        std::fs::remove_dir_all(root.join(format!("n{d}"))).unwrap();
    }
    let expect = expected_recoverable(scheme, set_size, &node_of, &dead);
    // Ranks of dead nodes move to spare nodes n<nodes + d>.
    let new_node = |r: usize| {
        let nd = node_of[r];
        if dead.contains(&nd) {
            nodes + nd
        } else {
            nd
        }
    };
    let results = ThreadComm::run(n, |comm| {
        let r = comm.rank();
        let world = comm.split(Some(0), r as i64).unwrap().unwrap();
        let mut scr =
            Scr::init_with(world, opts(&root, &prefix, new_node(r), scheme, set_size)).unwrap();
        let have = scr.have_restart().unwrap();
        let mut ok = None;
        if have.is_some() {
            let mut rs = scr.start_restart().unwrap();
            let good = if r % 5 != 4 {
                let p = rs.route_file(prefix.join(format!("r{r}.dat"))).unwrap();
                std::fs::read(&p).unwrap() == content(seed, r)
            } else {
                true
            };
            assert!(
                rs.complete(good).unwrap(),
                "rank {r}: restart bytes must match"
            );
            ok = Some(good);
        }
        scr.finalize().unwrap();
        ok
    })
    .unwrap();
    let restarted = results[0].is_some();
    prop_assert!(
        results.iter().all(|x| x.is_some() == restarted),
        "ranks disagree: {results:?}"
    );
    prop_assert!(
        results.iter().all(|x| *x != Some(false)),
        "wrong bytes on some rank"
    );
    prop_assert_eq!(
        restarted,
        expect,
        "scheme {} set_size {} nodes {} rpn {} dead {:?}",
        scheme,
        set_size,
        nodes,
        rpn,
        dead
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn rebuild_succeeds_exactly_within_tolerance(
        seed in any::<u64>(),
        nodes in 3usize..=40,
        rpn in 1usize..=4,
        scheme in prop::sample::select(vec!["SINGLE", "PARTNER", "XOR", "RS"]),
        set_size in 2usize..=8,
        dead_picks in prop::collection::btree_set(0usize..40, 0..=3),
    ) {
        let dead: BTreeSet<usize> = dead_picks.into_iter().filter(|&d| d < nodes).collect();
        case(seed, nodes, rpn, scheme, set_size, dead)?;
    }
}

#[test]
fn large_job_xor_one_node_lost() {
    // 160 ranks on 40 nodes, one node lost: XOR rebuilds every byte.
    let dead: BTreeSet<usize> = [7].into_iter().collect();
    case(11, 40, 4, "XOR", 8, dead).unwrap();
}
