//! Store and redundancy descriptor lines act, end to end with the thread
//! communicator: CKPT STORE= puts a descriptor's checkpoints in that
//! store and each store keeps its own COUNT; CKPT ENABLED=0 leaves a
//! descriptor out; a GROUP named by GROUPS lines decides which ranks may
//! share a set, so losing a whole group is survived where NODE groups
//! lose data.

mod common;

use std::path::PathBuf;

use common::{restart_and_verify, run, write_ckpts, Cluster};

/// The checkpoint names cached below the logical store `store` on any
/// node (`<root>/n*/<store>/…/ckpt.<c>/…`).
fn cached_in(cl: &Cluster, store: &str) -> Vec<String> {
    let store = store.trim_start_matches('/');
    let mut names: Vec<String> = common::node_tree_files(cl)
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&cl.root).ok()?;
            let below_node: PathBuf = rel.components().skip(1).collect();
            if !below_node.starts_with(store) {
                return None;
            }
            below_node
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .find(|c| c.starts_with("ckpt."))
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A cluster whose `.scrconf` holds `text`, after 4 ranks (rank r on
/// node `node_of(r)`) wrote `n` checkpoints of data seed `seed`.
fn written(
    text: &str,
    node_of: fn(usize) -> usize,
    extra: &[(&str, &str)],
    seed: u64,
    n: usize,
) -> Cluster {
    let cl = Cluster::new();
    std::fs::write(cl.prefix.join(".scrconf"), text).unwrap();
    run(&cl, 4, node_of, extra, |scr, c| {
        write_ckpts(scr, c, &cl.prefix, seed, n);
        None
    });
    cl
}

#[test]
fn a_descriptors_store_holds_its_checkpoints_up_to_its_count() {
    let cl = written(
        "SCR_COPY_TYPE=FILE\n\
         STORE=/dev/shm COUNT=1\n\
         STORE=/ssd COUNT=2\n\
         CKPT=0 INTERVAL=1 STORE=/dev/shm TYPE=SINGLE\n\
         CKPT=1 INTERVAL=2 STORE=/ssd TYPE=PARTNER\n",
        |r| r / 2,
        &[],
        31,
        5,
    );
    // Odd checkpoints in /dev/shm, one kept; even ones in /ssd, two kept.
    assert_eq!(cached_in(&cl, "/dev/shm"), ["ckpt.5"]);
    assert_eq!(cached_in(&cl, "/ssd"), ["ckpt.2", "ckpt.4"]);
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &[],
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 31),
    );
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.5")),
        "{got:?}"
    );
}

#[test]
fn a_disabled_descriptor_takes_no_checkpoint() {
    let cl = written(
        "SCR_COPY_TYPE=FILE\n\
         STORE=/dev/shm COUNT=4\n\
         STORE=/ssd COUNT=4\n\
         CKPT=0 INTERVAL=1 STORE=/dev/shm TYPE=SINGLE\n\
         CKPT=1 INTERVAL=2 STORE=/ssd TYPE=PARTNER ENABLED=0\n",
        |r| r / 2,
        &[],
        32,
        4,
    );
    assert_eq!(
        cached_in(&cl, "/dev/shm"),
        ["ckpt.1", "ckpt.2", "ckpt.3", "ckpt.4"]
    );
    assert!(cached_in(&cl, "/ssd").is_empty());
}

/// 4 ranks on 4 nodes in two racks (n0, n1 | n2, n3); PARTNER with the
/// failure group `group`; both nodes of the first rack are lost. Returns
/// what each rank restarted from.
fn lose_a_rack(group: &str) -> Vec<Option<String>> {
    let extra = [("SCR_CACHE_SIZE", "2")];
    let cl = written(
        &format!(
            "GROUPS=n0 RACK=a\nGROUPS=n1 RACK=a\nGROUPS=n2 RACK=b\nGROUPS=n3 RACK=b\n\
             SCR_COPY_TYPE=FILE\n\
             CKPT=0 INTERVAL=1 GROUP={group} TYPE=PARTNER\n"
        ),
        |r| r,
        &extra,
        33,
        2,
    );
    cl.kill_node(0);
    cl.kill_node(1);
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 33),
    )
}

#[test]
fn a_failure_group_from_groups_lines_decides_the_partners() {
    // Partners in the other rack: the lost rack's files are rebuilt.
    let got = lose_a_rack("RACK");
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
    // Partners on the neighbouring node: a rank and its copy were both in
    // the lost rack, so nothing in cache is whole.
    let got = lose_a_rack("NODE");
    assert!(got.iter().all(Option::is_none), "{got:?}");
}
