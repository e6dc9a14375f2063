//! Halt conditions under real `mpirun`: `scr_app --until-exit` (4 ranks on
//! 2 simulated nodes) loops — compute, checkpoint, SCR_Should_exit — and
//! each halt condition must stop it at the right point:
//!
//! - `scr halt --checkpoints 2`: exactly two checkpoints, then Should_exit;
//! - `--before T --seconds S`: the first Should_exit at or after T − S;
//! - SCR_HALT_SECONDS with SCR_END_TIME: the first at or after END − S;
//! - `--after T` with Need_checkpoint deciding (every 1000th call): the
//!   pending halt asks for exactly one checkpoint, then the run stops;
//! - `scr halt --immediate` while the job runs: it stops within one step;
//! - SCR_HALT_EXIT=1 with `--checkpoints 2`: the job ends inside SCR right
//!   after the second checkpoint (exit 0: MPI_Finalize was called), and the
//!   next run restarts from that checkpoint.
//!
//! Time conditions are judged against the clock readings the application
//! takes around each Should_exit (`t0_ms`, `t1_ms`): a "no" must have begun
//! before the halt time, the "yes" must have ended after it; SCR compares
//! whole seconds, so this holds for every schedule.
//!
//! Run with `ci/tests.d/halt.sh` (builds `scr_app` and `scr`), or
//! `cargo build -p testing --bin scr_app -p scr --bin scr --features scr/cli && cargo test -p
//! harness --test halt -- --ignored`. `SCR_APP_BIN` and `SCR_BIN` override
//! where the binaries are looked for. Without `mpirun` every test says so
//! and returns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use harness::app::{app_and_scr_for, AppRun, SimCluster};
use scr::clock::{Clock, SystemClock};
use scr::halt::halt_path;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::halt::{Halt, REASON_FINALIZE_CALLED};
use scr::records::Record;

const NODES: [&str; 2] = ["n0", "n1"];

/// A simulated cluster with logging on (syslog off in a system file).
struct Setup {
    _tmp: tempfile::TempDir,
    cl: SimCluster,
    scr: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Option<Setup> {
        let (app, scr) = app_and_scr_for(name)?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!("halt-{name}-"))
            .tempdir()
            .unwrap();
        let mut cl = SimCluster::new(tmp.path(), &app).unwrap();
        let conf = tmp.path().join("scr.conf");
        std::fs::write(&conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
        cl.set("SCR_CONFIG_FILE", conf.to_str().unwrap());
        cl.set("SCR_LOG_ENABLE", "1");
        cl.set("SCR_COPY_TYPE", "XOR");
        std::fs::create_dir_all(cl.root.join("prefix").join(".scr")).unwrap();
        Some(Setup { _tmp: tmp, cl, scr })
    }

    fn prefix(&self) -> PathBuf {
        self.cl.root.join("prefix")
    }

    /// `scr halt ARGS PREFIX`, which must succeed.
    fn scr_halt(&self, args: &[&str]) {
        let out = Command::new(&self.scr)
            .arg("halt")
            .args(args)
            .arg(self.prefix())
            .output()
            .expect("scr runs");
        assert!(
            out.status.success(),
            "scr halt {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn halt(&self) -> Halt {
        Halt::read_file(halt_path(&self.prefix())).unwrap()
    }

    fn run(&self, args: &[&str]) -> AppRun {
        let mut all = vec!["--mean-bytes", "4096"];
        all.extend_from_slice(args);
        let argv: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        self.cl.run(&NODES, &argv).expect("the job ends in time")
    }

    /// Dataset ids the flush file records on the parallel file system.
    fn on_pfs(&self) -> Vec<i64> {
        FlushFile::read_file(self.prefix().join(".scr").join(FLUSH_FILE))
            .unwrap()
            .ids_at(Location::Pfs)
    }

    /// Notes of the HALT events in the job log.
    fn halt_events(&self) -> Vec<String> {
        events(&self.prefix(), "HALT")
            .into_iter()
            .map(|r| r.entry.note.unwrap_or_default())
            .collect()
    }
}

fn events(prefix: &Path, name: &str) -> Vec<scr::log::Record> {
    let log = prefix.join(".scr").join("log");
    match scr::log::read_log(&log, false) {
        Ok(p) => p.records.into_iter().filter(|r| r.is_event(name)).collect(),
        Err(_) => Vec::new(),
    }
}

/// One `SCR_APP step=…` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    step: u64,
    need: bool,
    checkpoint: Option<String>,
    should_exit: bool,
    t0_ms: u128,
    t1_ms: u128,
}

fn steps(run: &AppRun) -> Vec<Step> {
    run.app_lines()
        .into_iter()
        .filter_map(|l| {
            let f: std::collections::BTreeMap<&str, &str> = l
                .strip_prefix("SCR_APP ")?
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .collect();
            Some(Step {
                step: f.get("step")?.parse().ok()?,
                need: f.get("need")?.parse().ok()?,
                checkpoint: f
                    .get("checkpoint")
                    .filter(|c| **c != "-")
                    .map(|c| c.to_string()),
                should_exit: f.get("should_exit")?.parse().ok()?,
                t0_ms: f.get("t0_ms")?.parse().ok()?,
                t1_ms: f.get("t1_ms")?.parse().ok()?,
            })
        })
        .collect()
}

/// The run ended cleanly because Should_exit said yes at its last step.
fn assert_halted(run: &AppRun) -> Vec<Step> {
    let t = run.transcript();
    assert!(run.output.success(), "{t}");
    let s = steps(run);
    let last = s.last().unwrap_or_else(|| panic!("no steps\n{t}"));
    assert!(last.should_exit, "never told to exit\n{t}");
    assert!(
        s[..s.len() - 1].iter().all(|x| !x.should_exit),
        "a yes before the last step\n{t}"
    );
    assert!(
        run.app_lines()
            .iter()
            .any(|l| l.starts_with(&format!("SCR_APP halted step={}", last.step))),
        "{t}"
    );
    assert_eq!(
        run.summary.as_ref().map(|x| x.status.as_str()),
        Some("ok"),
        "{t}"
    );
    s
}

/// Every "no" began before `at_s` and the final "yes" ended after it.
fn assert_stopped_at(s: &[Step], at_s: i64, run: &AppRun) {
    let at_ms = at_s as u128 * 1000;
    let t = run.transcript();
    for x in &s[..s.len() - 1] {
        assert!(x.t0_ms < at_ms, "step {} said no after {at_s}\n{t}", x.step);
    }
    let last = s.last().unwrap();
    assert!(last.t1_ms >= at_ms, "said yes before {at_s}\n{t}");
    assert!(
        s.len() >= 2,
        "stopped at the first step: the halt time was not in the future\n{t}"
    );
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn checkpoints_left_2_stops_after_exactly_two_checkpoints() {
    let Some(su) = Setup::new("checkpoints") else {
        return;
    };
    su.scr_halt(&["--checkpoints", "2"]);
    let run = su.run(&["--until-exit", "--checkpoints", "10"]);
    let s = assert_halted(&run);
    let t = run.transcript();
    let written: Vec<_> = s.iter().filter_map(|x| x.checkpoint.clone()).collect();
    assert_eq!(written, ["ckpt.1", "ckpt.2"], "{t}");
    assert_eq!(s.len(), 2, "{t}");
    assert_eq!(run.summary.as_ref().unwrap().checkpoints_written, 2);
    assert_eq!(
        su.on_pfs(),
        [2],
        "the halt flushed ckpt.2 (SCR_FLUSH=10 would not)"
    );
    let h = su.halt();
    assert_eq!(h.checkpoints_left, Some(0));
    assert_eq!(h.exit_reason.as_deref(), Some(REASON_FINALIZE_CALLED));
    let halts = su.halt_events();
    assert_eq!(halts.len(), 1, "{halts:?}");
    assert!(halts[0].starts_with("NO_CHECKPOINTS_LEFT"), "{halts:?}");
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn exit_before_with_halt_seconds_stops_at_the_margin() {
    let Some(su) = Setup::new("before") else {
        return;
    };
    // Halt 20 s before a time 24 s away: 4 s from now.
    let before = SystemClock.unix_secs() + 24;
    su.scr_halt(&["--before", &format!("@{before}"), "--seconds", "20"]);
    let run = su.run(&["--until-exit", "--checkpoints", "80", "--step-ms", "250"]);
    let s = assert_halted(&run);
    assert_stopped_at(&s, before - 20, &run);
    assert!(su.halt_events()[0].starts_with("EXIT_BEFORE_TIME"));
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn halt_seconds_against_scr_end_time() {
    let Some(mut su) = Setup::new("end-time") else {
        return;
    };
    let end = SystemClock.unix_secs() + 30;
    su.cl.set("SCR_END_TIME", &end.to_string());
    su.cl.set("SCR_HALT_SECONDS", "26");
    let run = su.run(&["--until-exit", "--checkpoints", "80", "--step-ms", "250"]);
    let s = assert_halted(&run);
    assert_stopped_at(&s, end - 26, &run);
    assert_eq!(
        su.halt().halt_seconds_s,
        Some(26),
        "recorded for scr halt --list"
    );
    assert!(su.halt_events()[0].starts_with("TIME_LIMIT"));
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn exit_after_makes_need_checkpoint_ask_for_one_last_checkpoint() {
    let Some(mut su) = Setup::new("after") else {
        return;
    };
    // Need_checkpoint by policy only every 1000th call: never, here.
    su.cl.set("SCR_CHECKPOINT_INTERVAL", "1000");
    let after = SystemClock.unix_secs() + 4;
    su.scr_halt(&["--after", &format!("@{after}")]);
    let run = su.run(&[
        "--until-exit",
        "--ask-need",
        "--checkpoints",
        "80",
        "--step-ms",
        "250",
    ]);
    let s = assert_halted(&run);
    assert_stopped_at(&s, after, &run);
    let t = run.transcript();
    assert!(
        s[..s.len() - 1].iter().all(|x| !x.need),
        "a checkpoint before the halt\n{t}"
    );
    assert_eq!(run.summary.as_ref().unwrap().checkpoints_written, 1, "{t}");
    assert!(run
        .app_lines()
        .iter()
        .any(|l| l.ends_with("need_at_exit=true")));
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn halt_immediate_while_running_stops_within_a_step() {
    let Some(su) = Setup::new("immediate") else {
        return;
    };
    let cl = su.cl.clone();
    let job = std::thread::spawn(move || {
        let args: Vec<String> = [
            "--mean-bytes",
            "4096",
            "--until-exit",
            "--checkpoints",
            "600",
            "--step-ms",
            "100",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cl.run(&NODES, &args)
    });
    // Wait (bounded) until the job has completed two checkpoints.
    let prefix = su.prefix();
    let deadline = Instant::now() + Duration::from_secs(40);
    while events(&prefix, "CHECKPOINT_END").len() < 2 {
        assert!(
            Instant::now() < deadline && !job.is_finished(),
            "the job did not reach 2 checkpoints"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    su.scr_halt(&["--immediate"]);
    let done_when_halted = events(&prefix, "CHECKPOINT_END").len() as u64;
    let run = job
        .join()
        .expect("job thread")
        .expect("the job ends in time");
    let s = assert_halted(&run);
    let t = run.transcript();
    let written = run.summary.as_ref().unwrap().checkpoints_written;
    // The checkpoint in flight when the file changed may still complete.
    assert!(
        (done_when_halted..=done_when_halted + 1).contains(&written),
        "{written} checkpoints, {done_when_halted} done at the halt\n{t}"
    );
    assert!(s.len() < 600, "{t}");
    let halts = su.halt_events();
    assert_eq!(halts.len(), 1, "{halts:?}");
    assert!(halts[0].starts_with("JOB_HALTED"), "{halts:?}");
    assert_eq!(
        su.halt().exit_reason.as_deref(),
        Some(REASON_FINALIZE_CALLED),
        "finalize replaces the reason"
    );
}

#[test]
#[ignore = "MPI: run by ci/tests.d/halt.sh"]
fn halt_exit_ends_the_job_inside_scr_after_the_checkpoint() {
    let Some(mut su) = Setup::new("halt-exit") else {
        return;
    };
    su.cl.set("SCR_HALT_EXIT", "1");
    su.scr_halt(&["--checkpoints", "2"]);
    let run = su.run(&["--until-exit", "--checkpoints", "10"]);
    let t = run.transcript();
    // Exit status 0 from every rank: MPI_Finalize was called before exit.
    assert!(run.output.success(), "{t}");
    assert!(
        run.summary.is_none(),
        "control never returned to the application\n{t}"
    );
    let lines = run.app_lines();
    assert!(
        lines.contains(&"SCR_APP checkpoint name=ckpt.1 complete=true"),
        "{t}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("ckpt.2")),
        "the job ended inside SCR_Complete_output of ckpt.2\n{t}"
    );
    assert_eq!(su.on_pfs(), [2], "ckpt.2 was flushed before the exit\n{t}");
    let h = su.halt();
    assert_eq!(
        (h.checkpoints_left, h.exit_reason.as_deref()),
        (Some(0), Some("NO_CHECKPOINTS_LEFT")),
        "the reason stays for the launcher\n{t}"
    );
    // The checkpoint completed before the exit: the next run restarts from it.
    su.scr_halt(&["--unset-reason", "--unset-checkpoints"]);
    let run2 = su.run(&["--checkpoints", "1", "--expect-restart", "ckpt.2"]);
    let t2 = run2.transcript();
    assert!(run2.output.success(), "{t2}");
    let sum = run2.summary.expect("summary");
    assert_eq!(
        (
            sum.restart.as_deref(),
            sum.source.as_str(),
            sum.status.as_str()
        ),
        (Some("ckpt.2"), "cache", "ok"),
        "{t2}"
    );
    assert!(sum.verified_bytes > 0, "{t2}");
}
