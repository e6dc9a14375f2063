//! The library's on/off switches and names, each shown by its effect with
//! the thread communicator: SCR_ENABLE, SCR_USER_NAME, SCR_JOB_NAME,
//! SCR_CLUSTER_NAME, SCR_CACHE_PURGE, SCR_DISTRIBUTE and SCR_FETCH.

mod common;

use std::path::Path;

use common::{restart_and_verify, run, write_ckpts, Cluster};
use scr::records::index::index_path;
use scr::records::{Index, Record};

/// Every file below `dir`, recursively (empty when it does not exist).
fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn cached_datasets(cl: &Cluster, node: usize) -> usize {
    let base = cl.root.join(format!("n{node}/dev/shm/tester/scr.77"));
    std::fs::read_dir(base)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("scr.dataset."))
                .count()
        })
        .unwrap_or(0)
}

// SCR_ENABLE=0: the library is a pass-through. Files are written where the
// application names them (no cache, no node directories), nothing is
// recorded in the prefix, and there is nothing to restart from.
#[test]
fn enable_0_routes_files_where_named_and_records_nothing() {
    let cl = Cluster::new();
    // Disabled, SCR_Route_file returns the name as given: the application
    // makes its directories, as it would without SCR.
    for c in 1..=2 {
        std::fs::create_dir_all(cl.prefix.join(format!("ckpt.{c}"))).unwrap();
    }
    let got = run(
        &cl,
        4,
        |r| r / 2,
        &[("SCR_ENABLE", "0")],
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 3, 2);
            scr.have_restart().unwrap()
        },
    );
    assert!(got.iter().all(Option::is_none));
    assert!(
        cl.prefix.join("ckpt.2/rank0.f0").is_file(),
        "written in place"
    );
    assert!(!cl.root.join("n0").exists() && !cl.root.join("n1").exists());
    assert!(!cl.prefix.join(".scr/index.scr").exists());
    // The same run enabled caches the files instead.
    let cl = Cluster::new();
    run(
        &cl,
        4,
        |r| r / 2,
        &[],
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 3, 2);
            None
        },
    );
    assert!(!cl.prefix.join("ckpt.2/rank0.f0").exists());
    assert!(cached_datasets(&cl, 0) > 0);
}

// SCR_USER_NAME names the user in the cache and control directories
// (`<base>/<user>/scr.<jobid>`) instead of $USER.
#[test]
fn user_name_names_the_cache_directory() {
    let cl = Cluster::new();
    run(
        &cl,
        2,
        |_| 0,
        &[("SCR_USER_NAME", "alice")],
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 4, 1);
            None
        },
    );
    let shm = cl.root.join("n0/dev/shm");
    assert!(shm.join("alice/scr.77").is_dir());
    assert!(!shm.join("tester").exists());
    assert!(!files_below(&shm.join("alice/scr.77")).is_empty());
}

// SCR_JOB_NAME and SCR_CLUSTER_NAME are the JOBNAME and CLUSTER of every
// dataset descriptor the job writes (SCR 3.1's scr_dataset fields), so the
// index in the prefix says which job and cluster wrote each checkpoint;
// unset, neither key is written.
#[test]
fn job_and_cluster_names_are_recorded_in_every_dataset_descriptor() {
    for (job, cluster) in [(Some("sim-42"), Some("big iron")), (None, None)] {
        let cl = Cluster::new();
        let mut extra = vec![("SCR_FLUSH", "1")];
        extra.extend(job.map(|j| ("SCR_JOB_NAME", j)));
        extra.extend(cluster.map(|c| ("SCR_CLUSTER_NAME", c)));
        let warned = run(
            &cl,
            2,
            |_| 0,
            &extra,
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 8, 2);
                Some(format!("{:?}", scr.config_warnings()))
            },
        );
        assert!(
            warned.iter().all(|w| w.as_deref() == Some("[]")),
            "{job:?} {cluster:?}: {warned:?}"
        );
        let idx = Index::read_file(index_path(&cl.prefix)).unwrap();
        let descs: Vec<_> = idx
            .entries()
            .map(|(id, _, e)| (id, e.dataset.clone().unwrap()))
            .collect();
        assert_eq!(descs.len(), 2, "{descs:?}");
        for (id, d) in descs {
            assert_eq!(d.jobname.as_deref(), job, "dataset {id}");
            assert_eq!(d.cluster.as_deref(), cluster, "dataset {id}");
        }
    }
}

/// Write two checkpoints to cache only, then start a second run with
/// `extra` and return what each rank can restart from.
fn restart_after(cl: &Cluster, extra: &[(&str, &str)]) -> Vec<Option<String>> {
    run(
        cl,
        4,
        |r| r / 2,
        &[("SCR_COPY_TYPE", "PARTNER")],
        |scr, c| {
            write_ckpts(scr, c, &cl.prefix, 6, 2);
            None
        },
    );
    assert!(cached_datasets(cl, 0) > 0);
    run(
        cl,
        4,
        |r| r / 2,
        extra,
        |scr, c| restart_and_verify(scr, c, &cl.prefix, 6),
    )
}

// SCR_CACHE_PURGE=1: the cache is emptied at init; without it the same
// run restarts from its cache.
#[test]
fn cache_purge_empties_the_cache_at_init() {
    let cl = Cluster::new();
    let got = restart_after(&cl, &[("SCR_CACHE_PURGE", "1")]);
    assert!(got.iter().all(Option::is_none), "{got:?}");
    assert_eq!(cached_datasets(&cl, 0) + cached_datasets(&cl, 1), 0);
    let cl = Cluster::new();
    let got = restart_after(&cl, &[]);
    assert!(
        got.iter().all(|n| n.as_deref() == Some("ckpt.2")),
        "{got:?}"
    );
}

// SCR_DISTRIBUTE=0: cached files are not distributed to their owners at
// init (SCR's scr_distribute_files is skipped), so no restart comes from
// the cache and what was there is dropped.
#[test]
fn distribute_0_gives_no_restart_from_the_cache() {
    let cl = Cluster::new();
    let got = restart_after(&cl, &[("SCR_DISTRIBUTE", "0")]);
    assert!(got.iter().all(Option::is_none), "{got:?}");
    assert_eq!(cached_datasets(&cl, 0) + cached_datasets(&cl, 1), 0);
}

// SCR_FETCH=0: a checkpoint in the prefix is not fetched; with the
// default it is.
#[test]
fn fetch_0_leaves_the_prefix_checkpoint_unfetched() {
    for (fetch, want) in [("0", None), ("1", Some("ckpt.2"))] {
        let cl = Cluster::new();
        run(
            &cl,
            4,
            |r| r / 2,
            &[("SCR_FLUSH", "1")],
            |scr, c| {
                write_ckpts(scr, c, &cl.prefix, 8, 2);
                None
            },
        );
        for n in 0..2 {
            cl.kill_node(n);
        }
        let got = run(
            &cl,
            4,
            |r| r / 2,
            &[("SCR_FETCH", fetch)],
            |scr, c| restart_and_verify(scr, c, &cl.prefix, 8),
        );
        assert!(
            got.iter().all(|n| n.as_deref() == want),
            "SCR_FETCH={fetch}: {got:?}"
        );
    }
}
