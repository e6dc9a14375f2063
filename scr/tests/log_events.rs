//! The event log end to end: a thread-communicator job with SCR_LOG_ENABLE=1
//! writes SCR's events to `<prefix>/.scr/log` (rank 0 only, once per
//! collective event), the parser reads every line back, and `scr interval`
//! accepts the file. With SCR_LOG_ENABLE=0 (the default) nothing is written.

use scr::ids::DatasetId;
use std::collections::BTreeMap;
use std::path::PathBuf;

use scr::comm::thread::ThreadComm;
use scr::comm::Comm;
use scr::config::{LoadOptions, MapEnv};
use scr::log::{read_log, Record};
use scr::records::halt::{Halt, HALT_FILE};
use scr::records::Record as _;
use scr::storage::dirs::NodeIdentity;
use scr::{Flags, InitOptions, Scr};

struct Cluster {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    prefix: PathBuf,
    system_conf: PathBuf,
}

impl Cluster {
    fn new() -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let prefix = root.join("prefix");
        std::fs::create_dir_all(&prefix).unwrap();
        // SCR_LOG_SYSLOG_ENABLE is a site setting (default 1): switch it
        // off in the system file so tests leave the host's syslog alone.
        let system_conf = root.join("scr.conf");
        std::fs::write(&system_conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
        Cluster {
            _tmp: tmp,
            root,
            prefix,
            system_conf,
        }
    }

    fn log(&self) -> PathBuf {
        self.prefix.join(".scr").join("log")
    }

    fn run(
        &self,
        nranks: usize,
        extra: &[(&str, &str)],
        body: impl Fn(&mut Scr, &dyn Comm) + Sync,
    ) {
        ThreadComm::run(nranks, |comm| {
            let prefix = self.prefix.to_string_lossy().into_owned();
            let mut vars: BTreeMap<String, String> = [
                ("SCR_PREFIX", prefix.as_str()),
                ("SCR_JOB_ID", "4242"),
                ("USER", "tester"),
                ("SCR_CACHE_BASE", "/dev/shm"),
                ("SCR_CNTL_BASE", "/dev/shm"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            for (k, v) in extra {
                vars.insert(k.to_string(), v.to_string());
            }
            let rank = comm.rank();
            let opts = InitOptions {
                env: Some(Box::new(MapEnv::new(vars).with_cwd(&self.prefix))),
                node: Some(NodeIdentity {
                    name: format!("n{rank}"),
                    root: Some(self.root.join(format!("n{rank}"))),
                }),
                load: LoadOptions {
                    system_file: Some(self.system_conf.clone()),
                    ..LoadOptions::default()
                },
                ..InitOptions::default()
            };
            let world = comm.split(Some(0), rank as i64).unwrap().unwrap();
            let mut scr = Scr::init_with(world, opts).unwrap();
            body(&mut scr, comm);
            scr.finalize().unwrap();
        })
        .unwrap();
    }
}

fn kind(r: &Record) -> String {
    let name = r.entry.kind.name();
    if r.entry.kind.is_transfer() {
        format!("xfer:{name}")
    } else {
        name.to_string()
    }
}

fn write(scr: &mut Scr, comm: &dyn Comm, prefix: &std::path::Path, name: &str, flags: Flags) {
    let mut out = scr.start_output(Some(name), flags).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, vec![comm.rank() as u8; 1000 + comm.rank()]).unwrap();
    assert!(out.complete(true).unwrap());
}

const LOGGED: &[(&str, &str)] = &[
    ("SCR_LOG_ENABLE", "1"),
    ("SCR_COPY_TYPE", "XOR"),
    ("SCR_CACHE_SIZE", "4"),
];

#[test]
fn a_job_logs_its_events_once_and_the_tools_read_them() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    // Run 1: two checkpoints, one output-only dataset, then a halt.
    cl.run(4, LOGGED, |scr, comm| {
        write(scr, comm, &prefix, "ckpt.1", Flags::CHECKPOINT);
        write(scr, comm, &prefix, "ckpt.2", Flags::CHECKPOINT);
        write(scr, comm, &prefix, "viz.3", Flags::OUTPUT);
        assert!(!scr.should_exit().unwrap());
        if comm.rank() == 0 {
            Halt::update_file(prefix.join(".scr").join(HALT_FILE), |h: &mut Halt| {
                h.exit_reason = Some("operator".into())
            })
            .unwrap();
        }
        comm.barrier().unwrap();
        assert!(scr.should_exit().unwrap());
        assert!(scr.should_exit().unwrap());
    });
    let run1 = read_log(&cl.log(), true).unwrap().records;
    let kinds: Vec<String> = run1.iter().map(kind).collect();
    let ckpt = |k: &mut Vec<&str>| {
        k.extend([
            "COMPUTE_END",
            "CHECKPOINT_START",
            "xfer:WRITE",
            "xfer:ENCODE",
            "CHECKPOINT_END",
            "COMPUTE_START",
        ])
    };
    let mut want = vec!["START", "COMPUTE_START"];
    ckpt(&mut want);
    ckpt(&mut want);
    want.extend([
        "COMPUTE_END",
        "OUTPUT_START",
        "xfer:OUTPUT",
        "OUTPUT_END",
        // Output reaches the prefix at once.
        "FLUSH_START",
        "xfer:FLUSH_SYNC",
        "FLUSH_SUCCESS",
        "COMPUTE_START",
        "HALT",
        "COMPUTE_END",
        // Finalize flushes the newest checkpoint (SCR_FLUSH > 0).
        "FLUSH_START",
        "xfer:FLUSH_SYNC",
        "FLUSH_SUCCESS",
    ]);
    assert_eq!(kinds, want);
    for r in &run1 {
        assert_eq!(r.jobid.as_deref(), Some("4242"));
        assert_eq!(r.host.as_deref(), Some("n0"), "rank 0 writes every line");
    }
    assert_eq!(
        (run1[0].entry.procs, run1[0].entry.nodes),
        (Some(4), Some(4))
    );
    let bytes = (0..4).map(|r| 1000.0 + r as f64).sum::<f64>();
    for r in run1.iter().filter(|r| r.entry.kind.is_transfer()) {
        assert_eq!(
            (r.entry.bytes, r.entry.files),
            (Some(bytes), Some(4)),
            "{r:?}"
        );
        assert!(r.entry.secs.is_some() && r.entry.dset.is_some() && r.entry.name.is_some());
    }
    let end2 = run1
        .iter()
        .filter(|r| r.is_event("CHECKPOINT_END"))
        .nth(1)
        .unwrap();
    assert_eq!(
        (end2.entry.dset, end2.entry.name.as_deref()),
        (Some(2), Some("ckpt.2"))
    );
    assert!(end2.entry.secs.is_some() && end2.entry.note.is_none());
    let halt = run1.iter().find(|r| r.is_event("HALT")).unwrap();
    assert!(
        halt.entry.note.as_deref().unwrap().contains("operator"),
        "{halt:?}"
    );
    assert!(run1.windows(2).all(|w| w[0].time_s <= w[1].time_s));

    // Run 2: the launcher cleared the halt; node n3 is lost; XOR rebuilds
    // every dataset and the job restarts from ckpt.2.
    std::fs::remove_file(prefix.join(".scr").join(HALT_FILE)).unwrap();
    std::fs::remove_dir_all(cl.root.join("n3")).unwrap();
    cl.run(4, LOGGED, |scr, _comm| {
        assert_eq!(
            scr.init_report().rebuilt,
            vec![DatasetId(1), DatasetId(2), DatasetId(3)]
        );
        assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.2"));
        let r = scr.start_restart().unwrap();
        assert!(r.complete(true).unwrap());
    });
    let all = read_log(&cl.log(), true).unwrap().records;
    let run2 = &all[run1.len()..];
    let kinds: Vec<String> = run2.iter().map(kind).collect();
    let mut want = vec!["START"];
    for _ in 1..=3 {
        want.extend(["REBUILD_START", "REBUILD_SUCCESS"]);
    }
    want.extend([
        "COMPUTE_START",
        "COMPUTE_END",
        "RESTART_SUCCESS",
        "COMPUTE_START",
        "COMPUTE_END",
    ]);
    assert_eq!(kinds, want);
    let rebuilt: Vec<_> = run2
        .iter()
        .filter(|r| r.is_event("REBUILD_SUCCESS"))
        .map(|r| {
            (
                r.entry.dset,
                r.entry.note.as_deref(),
                r.entry.secs.is_some(),
            )
        })
        .collect();
    assert_eq!(
        rebuilt,
        [1, 2, 3].map(|d| (Some(d), Some("rebuilt"), true)).to_vec()
    );
    let restart = run2.iter().find(|r| r.is_event("RESTART_SUCCESS")).unwrap();
    assert_eq!(
        (restart.entry.dset, restart.entry.name.as_deref()),
        (Some(2), Some("ckpt.2"))
    );

    // The estimator sees both checkpoints' costs and the restart.
    let est = scr::interval::estimate::estimate(&all, 0.95);
    assert_eq!(est.cache_checkpoint.as_ref().unwrap().samples, 2, "{est:?}");
    assert_eq!(est.restart.as_ref().unwrap().samples, 1, "{est:?}");
    assert_eq!(est.runs, 2, "{est:?}");

    // And so does the command.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(["interval", "--strict", "--json", "--mtbf", "86400", "--log"])
        .arg(cl.log())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["log_lines_skipped"], 0);
    assert!(json["checkpoint_cost_s"].as_f64().unwrap() >= 0.0, "{json}");
}

#[test]
fn a_failed_restart_and_a_failed_checkpoint_are_logged_as_failures() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    cl.run(2, LOGGED, |scr, comm| {
        write(scr, comm, &prefix, "ckpt.1", Flags::CHECKPOINT);
        let mut out = scr.start_output(Some("ckpt.2"), Flags::CHECKPOINT).unwrap();
        out.route_file(prefix.join(format!("ckpt.2/rank{}", comm.rank())))
            .unwrap();
        // Rank 1 reports its files invalid: the checkpoint fails everywhere.
        assert!(!out.complete(comm.rank() != 1).unwrap());
    });
    cl.run(2, LOGGED, |scr, comm| {
        assert_eq!(scr.have_restart().unwrap().as_deref(), Some("ckpt.1"));
        let r = scr.start_restart().unwrap();
        assert!(!r.complete(comm.rank() != 0).unwrap());
        assert_eq!(scr.have_restart().unwrap(), None);
    });
    let recs = read_log(&cl.log(), true).unwrap().records;
    let end2 = recs
        .iter()
        .find(|r| r.is_event("CHECKPOINT_END") && r.entry.dset == Some(2))
        .unwrap();
    assert!(
        end2.entry.note.as_deref().unwrap().starts_with("failed"),
        "{end2:?}"
    );
    assert!(
        !recs
            .iter()
            .any(|r| r.entry.kind.is_transfer() && r.entry.dset == Some(2)),
        "a failed checkpoint has no cost records"
    );
    let fail = recs.iter().find(|r| r.is_event("RESTART_FAIL")).unwrap();
    assert_eq!(
        (fail.entry.dset, fail.entry.name.as_deref()),
        (Some(1), Some("ckpt.1"))
    );
    // Nothing is left to try, so compute resumes.
    let after: Vec<String> = recs
        .iter()
        .skip_while(|r| !r.is_event("RESTART_FAIL"))
        .map(kind)
        .collect();
    assert_eq!(after, ["RESTART_FAIL", "COMPUTE_START", "COMPUTE_END"]);
}

#[test]
fn logging_is_off_by_default_and_with_the_text_log_disabled() {
    let cl = Cluster::new();
    let prefix = cl.prefix.clone();
    let body = |scr: &mut Scr, comm: &dyn Comm| {
        write(scr, comm, &prefix, "ckpt.1", Flags::CHECKPOINT);
    };
    cl.run(2, &[("SCR_LOG_ENABLE", "0")], body);
    cl.run(2, &[], body);
    cl.run(
        2,
        &[("SCR_LOG_ENABLE", "1"), ("SCR_LOG_TXT_ENABLE", "0")],
        body,
    );
    assert!(prefix.join(".scr").is_dir());
    assert!(!cl.log().exists());
}
