//! The run loop's log entries under real `mpirun`: catalogue scenario
//! `kill-node-compute` (XOR, 4 nodes + spare) with `SCR_LOG_ENABLE=1`. The
//! loop must log RUN_START and RUN_END around both launches and NODE_FAIL
//! for the dead node beside the library's own events in `<prefix>/.scr/log`,
//! and `scr interval`'s estimator must read the first run as a failure and
//! the second (finished) as censored.
//!
//! Run with `ci/tests.d/campaign.sh`, or build `scr_app` with injection
//! points (`cargo build -p testing --bin scr_app --features
//! scr/fault-injection --target-dir target/fault-injection`) and run
//! `SCR_APP_BIN=target/fault-injection/debug/scr_app cargo test -p harness
//! --test runloop_log -- --ignored`. Without `mpirun` the test says so and
//! returns.

use harness::app::{mpirun_missing, workspace_binary};
use harness::campaign::{cell_loop, Settings};
use harness::outcome::End;
use harness::scenario::{default_dir, Catalogue};
use scr::interval::estimate::{runs, RunEnd};
use scr::log::read_log;
use scr::CopyType;

#[test]
#[ignore = "needs mpirun and scr_app built with fault injection: ci/tests.d/campaign.sh"]
fn run_loop_logs_runs_and_node_failures_beside_the_library() {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP: {why}");
        return;
    }
    let app = workspace_binary("SCR_APP_BIN", "scr_app");
    assert!(
        app.is_file(),
        "{} is missing (set SCR_APP_BIN)",
        app.display()
    );
    let cat = Catalogue::load(&default_dir()).unwrap();
    let sc = cat
        .get("kill-node-compute")
        .expect("scenario kill-node-compute");
    let tmp = tempfile::Builder::new()
        .prefix("runloop-log-")
        .tempdir()
        .unwrap();
    let settings = Settings {
        app,
        scr_command: None,
        mpirun: vec!["mpirun".into(), "--oversubscribe".into()],
        work: tmp.path().to_path_buf(),
        keep: false,
        seed: 11,
        replay: String::new(),
    };
    let mut lp = cell_loop(sc, CopyType::Xor, 11, &settings, &tmp.path().join("cell")).unwrap();
    let conf = tmp.path().join("scr.conf");
    std::fs::write(&conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
    lp.env.insert("SCR_LOG_ENABLE".into(), "1".into());
    lp.env
        .insert("SCR_CONFIG_FILE".into(), conf.display().to_string());
    let result = lp.run();
    assert!(
        result.harness_errors.is_empty(),
        "harness errors: {:?}",
        result.harness_errors
    );
    assert_eq!(result.outcome.end, End::Completed, "{:?}", result.outcome);
    assert_eq!(result.launches.len(), 2);

    let log = lp.alloc.prefix().join(".scr").join("log");
    let parsed = read_log(&log, true).unwrap();
    let kinds: Vec<String> = parsed
        .records
        .iter()
        .map(|r| {
            format!(
                "{:?}:{}",
                r.entry.kind,
                r.entry.note.as_deref().unwrap_or("")
            )
        })
        .collect();
    let count = |ev: &str| parsed.records.iter().filter(|r| r.is_event(ev)).count();
    assert_eq!(count("RUN_START"), 2, "{kinds:#?}");
    assert_eq!(count("RUN_END"), 2, "{kinds:#?}");
    // The library's own START, once per launch (rank 0).
    assert_eq!(count("START"), 2, "{kinds:#?}");
    let node_fail: Vec<&str> = parsed
        .records
        .iter()
        .filter(|r| r.is_event("NODE_FAIL"))
        .filter_map(|r| r.entry.note.as_deref())
        .collect();
    assert_eq!(node_fail.len(), 1, "{kinds:#?}");
    assert!(node_fail[0].starts_with("n1: "), "{node_fail:?}");
    // Each run's records lie between its RUN_START and RUN_END.
    let first_end = parsed
        .records
        .iter()
        .position(|r| r.is_event("RUN_END"))
        .unwrap();
    let second_start = parsed
        .records
        .iter()
        .rposition(|r| r.is_event("RUN_START"))
        .unwrap();
    assert!(first_end < second_start, "{kinds:#?}");
    let starts: Vec<usize> = parsed
        .records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_event("START"))
        .map(|(i, _)| i)
        .collect();
    assert!(
        starts[0] < first_end && starts[1] > second_start,
        "{kinds:#?}"
    );

    let r = runs(&parsed.records);
    let ends: Vec<RunEnd> = r.iter().map(|r| r.end).collect();
    assert_eq!(ends, vec![RunEnd::Failed, RunEnd::Censored], "{r:#?}");
}
