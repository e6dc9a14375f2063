//! The configuration is read on rank 0 and broadcast: every rank of a
//! 64-rank job ends with rank 0's parameters, even when the ranks' own
//! environments disagree, and an error on rank 0 reaches every rank.

use scr::comm::thread::ThreadComm;
use scr::config::{load_collective, LoadOptions, MapEnv};

#[test]
fn every_rank_gets_rank_zeros_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("user.conf");
    std::fs::write(
        &conf,
        "SCR_CACHE_SIZE=3\nCKPT=0 INTERVAL=1 TYPE=XOR SET_SIZE=4\n",
    )
    .unwrap();
    let conf = conf.to_string_lossy().into_owned();
    let results = ThreadComm::run(64, |comm| {
        let rank = comm.rank().to_string();
        let env = MapEnv::new([
            ("SCR_FLUSH", rank.as_str()),
            ("SCR_CONF_FILE", conf.as_str()),
            ("USER", "alice"),
        ])
        .with_cwd("/run");
        let cfg = load_collective(comm, &env, &LoadOptions::default()).expect("config loads");
        (
            cfg.get("SCR_FLUSH").map(|e| e.value),
            cfg.get("SCR_CACHE_SIZE").map(|e| e.value),
            cfg.to_kvtree(),
        )
    })
    .expect("no rank panicked");
    let first = &results[0];
    assert_eq!(first.0.as_deref(), Some("0"), "rank 0's environment wins");
    assert_eq!(first.1.as_deref(), Some("3"));
    for (rank, r) in results.iter().enumerate() {
        assert_eq!(r, first, "rank {rank} differs from rank 0");
    }
}

#[test]
fn an_error_on_rank_zero_reaches_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.conf");
    std::fs::write(&conf, "SCR_FLUSH=10\nCKPT=0 INTERVAL=1 COLOR=blue\n").unwrap();
    let conf = conf.to_string_lossy().into_owned();
    let results = ThreadComm::run(16, |comm| {
        let env = MapEnv::new([("SCR_CONF_FILE", conf.as_str())]).with_cwd("/run");
        load_collective(comm, &env, &LoadOptions::default())
            .err()
            .map(|e| e.to_string())
    })
    .expect("no rank panicked");
    let msg = results[0].clone().expect("rank 0 fails");
    assert!(
        msg.contains("bad.conf") && msg.contains(":2"),
        "names file and line: {msg}"
    );
    assert!(results.iter().all(|r| r.as_deref() == Some(msg.as_str())));
}
