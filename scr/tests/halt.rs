//! Halt conditions through the API, on thread-communicator jobs: each
//! condition of the halt file, SCR_HALT_SECONDS against the allocation's
//! end, edits made while the job runs, SCR_HALT_EXIT, and bad input. Every
//! rank must get the same answer; the file's contents are checked after
//! each step. (The same under real mpirun: harness/tests/halt.rs.)

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use scr::clock::{Clock, ManualClock, SharedClock, SystemClock};
use scr::comm::thread::ThreadComm;
use scr::comm::Comm;
use scr::halt::{
    halt_path, REASON_EXIT_AFTER_TIME, REASON_EXIT_BEFORE_TIME, REASON_NO_CHECKPOINTS_LEFT,
    REASON_TIME_LIMIT,
};
use scr::log::read_log;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::halt::{Halt, REASON_FINALIZE_CALLED};
use scr::records::Record;
use scr::{Flags, Scr, ScrError, ScrResult};

const RANKS: usize = 3;

struct Job {
    cl: common::Cluster,
    system_conf: PathBuf,
}

impl Job {
    fn new() -> Job {
        let cl = common::Cluster::new();
        std::fs::create_dir_all(cl.prefix.join(".scr")).unwrap();
        // Logging on, but not into the host's syslog (a site setting).
        let system_conf = cl.root.join("scr.conf");
        std::fs::write(&system_conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
        Job { cl, system_conf }
    }

    fn halt_file(&self) -> PathBuf {
        halt_path(&self.cl.prefix)
    }

    fn halt(&self) -> Halt {
        Halt::read_file(self.halt_file()).unwrap()
    }

    /// Edit the halt file as `scr halt` does (under its lock).
    fn edit(&self, f: impl FnOnce(&mut Halt)) {
        Halt::update_file(self.halt_file(), f).unwrap();
    }

    /// Run `body` on every rank after SCR_Init (given `init`'s result) and
    /// return what each rank returned.
    fn run<R: Send>(
        &self,
        vars: &[(&str, &str)],
        body: impl Fn(ScrResult<Scr>, &dyn Comm) -> R + Sync,
    ) -> Vec<R> {
        self.run_on(None, vars, body)
    }

    /// [`Job::run`] on `clock` (the system clock when `None`).
    fn run_on<R: Send>(
        &self,
        clock: Option<SharedClock>,
        vars: &[(&str, &str)],
        body: impl Fn(ScrResult<Scr>, &dyn Comm) -> R + Sync,
    ) -> Vec<R> {
        ThreadComm::run(RANKS, |comm| {
            let mut all = vec![
                ("SCR_COPY_TYPE", "SINGLE"),
                ("SCR_LOG_ENABLE", "1"),
                ("SCR_FLUSH", "10"),
            ];
            all.extend_from_slice(vars);
            let rank = comm.rank();
            let mut opts = self.cl.opts(self.cl.node(rank), &all);
            opts.load.system_file = Some(self.system_conf.clone());
            opts.clock = clock.clone();
            let world = comm.split(Some(0), rank as i64).unwrap().unwrap();
            body(Scr::init_with(world, opts), comm)
        })
        .unwrap()
    }

    /// Dataset ids the flush file records on the parallel file system.
    fn on_pfs(&self) -> Vec<i64> {
        FlushFile::read_file(self.cl.prefix.join(".scr").join(FLUSH_FILE))
            .unwrap()
            .ids_at(Location::Pfs)
    }

    /// HALT lines of the job log.
    fn halt_events(&self) -> Vec<String> {
        let log = self.cl.prefix.join(".scr").join("log");
        read_log(&log, true)
            .unwrap()
            .records
            .iter()
            .filter(|r| r.is_event("HALT"))
            .map(|r| r.entry.note.clone().unwrap_or_default())
            .collect()
    }
}

fn checkpoint(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str) -> ScrResult<bool> {
    let mut out = scr.start_output(Some(name), Flags::CHECKPOINT)?;
    let p = out.route_file(prefix.join(format!("{name}/rank{}", comm.rank())))?;
    std::fs::write(&p, [comm.rank() as u8; 64]).unwrap();
    out.complete(true)
}

fn output(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str) {
    let mut out = scr.start_output(Some(name), Flags::OUTPUT).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, [7u8; 16]).unwrap();
    assert!(out.complete(true).unwrap());
}

/// All ranks returned the same value; that value.
fn same<T: PartialEq + std::fmt::Debug + Clone>(v: Vec<T>) -> T {
    assert!(v.windows(2).all(|w| w[0] == w[1]), "ranks disagree: {v:?}");
    v[0].clone()
}

#[test]
fn checkpoints_left_lets_exactly_n_more_checkpoints_complete() {
    let job = Job::new();
    job.edit(|h| h.checkpoints_left = Some(2));
    // Need_checkpoint: never by policy (every 1000th call), but yes once a
    // halt is pending, so the last checkpoint is written before the stop.
    let vars = [("SCR_CHECKPOINT_INTERVAL", "1000")];
    let trace = same(job.run(&vars, |scr, comm| {
        let mut scr = scr.unwrap();
        let mut trace = Vec::new();
        for step in 1..=10 {
            let need = scr.need_checkpoint().unwrap();
            assert!(!need, "no halt pending yet at step {step}");
            assert!(checkpoint(&mut scr, comm, &job.cl.prefix, &format!("c{step}")).unwrap());
            let left = (comm.rank() == 0).then(|| job.halt().checkpoints_left);
            let exit = scr.should_exit().unwrap();
            trace.push((step, exit));
            if comm.rank() == 0 {
                assert_eq!(left.unwrap(), Some(2 - step), "decremented at step {step}");
            }
            if exit {
                assert!(
                    scr.need_checkpoint().unwrap(),
                    "a pending halt needs a checkpoint"
                );
                let pending = scr.halt_pending().unwrap();
                assert_eq!(pending.reason, REASON_NO_CHECKPOINTS_LEFT);
                break;
            }
        }
        scr.finalize().unwrap();
        trace
    }));
    assert_eq!(trace, [(1, false), (2, true)]);
    // SCR_FLUSH=10 would flush neither; the halt flushed the second.
    let flushed = job.on_pfs();
    assert_eq!(flushed, [2], "flush file: {flushed:?}");
    let h = job.halt();
    assert_eq!(h.checkpoints_left, Some(0));
    assert_eq!(h.exit_reason.as_deref(), Some(REASON_FINALIZE_CALLED));
    assert_eq!(job.halt_events().len(), 1, "HALT is logged once");
    assert!(job.halt_events()[0].contains(REASON_NO_CHECKPOINTS_LEFT));
}

#[test]
fn output_datasets_are_checked_but_do_not_count_as_checkpoints() {
    let job = Job::new();
    job.edit(|h| h.checkpoints_left = Some(1));
    let answers = same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        output(&mut scr, comm, &job.cl.prefix, "viz1");
        let after_output = scr.should_exit().unwrap();
        // An operator halts the job: the next completed dataset sees it.
        if comm.rank() == 0 {
            job.edit(|h| h.exit_reason = Some("operator".into()));
        }
        comm.barrier().unwrap();
        output(&mut scr, comm, &job.cl.prefix, "viz2");
        let pending = scr.halt_pending().map(|h| h.reason.clone());
        scr.finalize().unwrap();
        (after_output, pending)
    }));
    assert_eq!(answers, (false, Some("operator".to_string())));
    assert_eq!(
        job.halt().checkpoints_left,
        Some(1),
        "outputs do not decrement"
    );
}

#[test]
fn exit_after_fires_once_its_time_has_come() {
    let job = Job::new();
    job.edit(|h| h.exit_after_s = Some(SystemClock.unix_secs() + 3600));
    let answers = same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        let before = scr.should_exit().unwrap();
        if comm.rank() == 0 {
            job.edit(|h| h.exit_after_s = Some(SystemClock.unix_secs() - 1));
        }
        comm.barrier().unwrap();
        let after = scr.should_exit().unwrap();
        let need = scr.need_checkpoint().unwrap();
        scr.finalize().unwrap();
        (before, after, need)
    }));
    assert_eq!(answers, (false, true, true));
    assert!(job.halt_events()[0].starts_with(REASON_EXIT_AFTER_TIME));
}

#[test]
fn exit_before_counts_halt_seconds_edited_while_running() {
    let job = Job::new();
    job.edit(|h| {
        h.exit_before_s = Some(SystemClock.unix_secs() + 3600);
        h.halt_seconds_s = Some(60);
    });
    let answers = same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        let far = scr.should_exit().unwrap();
        // `scr halt --seconds 7200`: now within the margin.
        if comm.rank() == 0 {
            job.edit(|h| h.halt_seconds_s = Some(7200));
        }
        comm.barrier().unwrap();
        let near = scr.should_exit().unwrap();
        scr.finalize().unwrap();
        (far, near)
    }));
    assert_eq!(answers, (false, true));
    assert!(job.halt_events()[0].starts_with(REASON_EXIT_BEFORE_TIME));
}

#[test]
fn halt_seconds_against_scr_end_time() {
    // Far from the end: no halt; HaltSeconds is recorded for `scr halt --list`.
    let job = Job::new();
    let far = (SystemClock.unix_secs() + 3600).to_string();
    let vars = [("SCR_HALT_SECONDS", "600"), ("SCR_END_TIME", far.as_str())];
    let exit = same(job.run(&vars, |scr, _| {
        let mut scr = scr.unwrap();
        let e = scr.should_exit().unwrap();
        scr.finalize().unwrap();
        e
    }));
    assert!(!exit);
    assert_eq!(job.halt().halt_seconds_s, Some(600));

    // Within HaltSeconds of the end (Slurm's variable this time): halt.
    let job = Job::new();
    let near = (SystemClock.unix_secs() + 300).to_string();
    let vars = [
        ("SCR_HALT_SECONDS", "600"),
        ("SLURM_JOB_END_TIME", near.as_str()),
    ];
    let (exit, reason) = same(job.run(&vars, |scr, _| {
        let mut scr = scr.unwrap();
        let e = scr.should_exit().unwrap();
        let r = scr.halt_pending().map(|h| h.reason.clone());
        scr.finalize().unwrap();
        (e, r)
    }));
    assert!(exit);
    assert_eq!(reason.as_deref(), Some(REASON_TIME_LIMIT));

    // A HaltSeconds set with `scr halt --seconds` wins over SCR_HALT_SECONDS,
    // and `-1` (no limit) disables the time limit.
    let job = Job::new();
    job.edit(|h| h.halt_seconds_s = Some(10));
    let vars = [("SCR_HALT_SECONDS", "600"), ("SCR_END_TIME", near.as_str())];
    assert!(!same(job.run(&vars, |scr, _| {
        let mut scr = scr.unwrap();
        let e = scr.should_exit().unwrap();
        scr.finalize().unwrap();
        e
    })));
    assert_eq!(job.halt().halt_seconds_s, Some(10));
    let job = Job::new();
    let vars = [("SCR_HALT_SECONDS", "600"), ("SCR_END_TIME", "-1")];
    assert!(!same(job.run(&vars, |scr, _| {
        let mut scr = scr.unwrap();
        let e = scr.should_exit().unwrap();
        scr.finalize().unwrap();
        e
    })));
}

#[test]
fn halt_seconds_fires_when_the_clock_reaches_the_margin() {
    // An allocation ending an hour after the manual clock's start, 600 s of
    // margin: no halt until 3000 s have passed, then a halt on every rank.
    let job = Job::new();
    let clock = ManualClock::at_unix_s(1_700_000_000);
    let end = (1_700_000_000 + 3600).to_string();
    let vars = [("SCR_HALT_SECONDS", "600"), ("SCR_END_TIME", end.as_str())];
    let step = |comm: &dyn Comm, s: u64| {
        comm.barrier().unwrap();
        if comm.rank() == 0 {
            clock.advance(Duration::from_secs(s));
        }
        comm.barrier().unwrap();
    };
    let answers = same(job.run_on(Some(clock.clone()), &vars, |scr, comm| {
        let mut scr = scr.unwrap();
        let start = scr.should_exit().unwrap();
        step(comm, 2999);
        let before = scr.should_exit().unwrap();
        step(comm, 1);
        let at = scr.should_exit().unwrap();
        let reason = scr.halt_pending().map(|h| h.reason.clone());
        scr.finalize().unwrap();
        (start, before, at, reason)
    }));
    assert_eq!(
        answers,
        (false, false, true, Some(REASON_TIME_LIMIT.to_string()))
    );
    assert!(job.halt_events()[0].starts_with(REASON_TIME_LIMIT));
}

#[test]
fn a_bad_scr_end_time_fails_init_naming_it() {
    let job = Job::new();
    let errors = job.run(&[("SCR_END_TIME", "tomorrow")], |scr, _| {
        scr.err().map(|e| e.to_string())
    });
    for e in errors {
        let e = e.expect("init fails");
        assert!(e.contains("SCR_END_TIME") && e.contains("tomorrow"), "{e}");
    }
}

#[test]
fn a_finalized_run_does_not_halt_the_next_one() {
    let job = Job::new();
    job.edit(|h| {
        h.exit_reason = Some(REASON_FINALIZE_CALLED.into());
        h.checkpoints_left = Some(5);
    });
    let exit = same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        if comm.rank() == 0 {
            let h = job.halt();
            assert_eq!(h.exit_reason, None, "init drops SCR_FINALIZE_CALLED");
            assert_eq!(h.checkpoints_left, Some(5), "and keeps the rest");
        }
        comm.barrier().unwrap();
        let e = scr.should_exit().unwrap();
        scr.finalize().unwrap();
        e
    }));
    assert!(!exit);
    assert_eq!(
        job.halt().exit_reason.as_deref(),
        Some(REASON_FINALIZE_CALLED)
    );
    assert!(job.halt_events().is_empty());
}

#[test]
fn a_damaged_halt_file_is_a_warning_and_is_left_alone() {
    let job = Job::new();
    let garbage = b"not a kvtree file at all, 38 bytes...".to_vec();
    std::fs::write(job.halt_file(), &garbage).unwrap();
    let answers = same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        let c = checkpoint(&mut scr, comm, &job.cl.prefix, "c1").unwrap();
        let e = scr.should_exit().unwrap();
        // Rank 0 cannot record SCR_FINALIZE_CALLED in it and says so.
        let f = scr.finalize().map_err(|e| e.to_string());
        if comm.rank() == 0 {
            let msg = f.expect_err("rank 0 reports the damaged file");
            assert!(msg.contains("halt.scr"), "{msg}");
        } else {
            f.unwrap();
        }
        (c, e)
    }));
    assert_eq!(answers, (true, false));
    assert_eq!(std::fs::read(job.halt_file()).unwrap(), garbage);
}

#[test]
fn halt_exit_ends_the_job_at_the_completed_checkpoint() {
    let job = Job::new();
    job.edit(|h| h.checkpoints_left = Some(2));
    let vars = [("SCR_HALT_EXIT", "1")];
    let results = same(job.run(&vars, |scr, comm| {
        let mut scr = scr.unwrap();
        let mut results = Vec::new();
        for step in 1..=4 {
            match checkpoint(&mut scr, comm, &job.cl.prefix, &format!("c{step}")) {
                Ok(ok) => results.push(format!("c{step}:{ok}")),
                Err(e @ ScrError::Halted { .. }) => {
                    results.push(format!("c{step}:halted"));
                    assert!(e.to_string().contains(REASON_NO_CHECKPOINTS_LEFT), "{e}");
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        // The job is over: further calls say so.
        assert!(matches!(scr.should_exit(), Err(ScrError::Finalized { .. })));
        drop(scr);
        results
    }));
    assert_eq!(results, ["c1:true", "c2:halted"]);
    assert_eq!(job.on_pfs(), [2], "flushed before the exit");
    let h = job.halt();
    assert_eq!(h.checkpoints_left, Some(0));
    assert_eq!(
        h.exit_reason.as_deref(),
        Some(REASON_NO_CHECKPOINTS_LEFT),
        "the reason stays for the launcher; no SCR_FINALIZE_CALLED"
    );

    // The next run halts in SCR_Init until the reason is unset.
    let errors = job.run(&vars, |scr, _| scr.err().map(|e| e.to_string()));
    for e in errors {
        assert!(e.expect("init halts").contains(REASON_NO_CHECKPOINTS_LEFT));
    }
    job.edit(|h| {
        h.exit_reason = None;
        h.checkpoints_left = None;
    });
    let restart = same(job.run(&vars, |scr, _| {
        let mut scr = scr.unwrap();
        let r = scr.have_restart().unwrap();
        scr.finalize().unwrap();
        r
    }));
    assert_eq!(
        restart.as_deref(),
        Some("c2"),
        "the halting checkpoint is kept"
    );
}

/// A job script's helper run (`scr have-restart`) ends with
/// `Scr::end_helper_run`: no flush and no exit reason, where SCR_Finalize
/// flushes the newest checkpoint (SCR_FLUSH > 0) and records
/// SCR_FINALIZE_CALLED, which would stop a relaunch loop.
#[test]
fn a_helper_run_ends_without_a_flush_or_an_exit_reason() {
    let job = Job::new();
    let prefix = job.cl.prefix.clone();
    // The application's run: one checkpoint, then it dies (no finalize).
    same(job.run(&[], |scr, comm| {
        let mut scr = scr.unwrap();
        assert!(checkpoint(&mut scr, comm, &prefix, "ckpt.1").unwrap());
        std::mem::forget(scr);
    }));
    let exit_reason = |job: &Job| {
        let p = job.halt_file();
        p.exists().then(|| job.halt().exit_reason).flatten()
    };
    assert_eq!(exit_reason(&job), None);
    // The helper: SCR_Init finds ckpt.1 in cache, names it, and ends.
    let names = job.run(&[], |scr, _| {
        let mut scr = scr.unwrap();
        let name = scr.have_restart().unwrap();
        scr.end_helper_run().unwrap();
        name
    });
    assert_eq!(same(names).as_deref(), Some("ckpt.1"));
    assert_eq!(job.on_pfs(), Vec::<i64>::new(), "the helper flushed");
    assert_eq!(
        exit_reason(&job),
        None,
        "the helper recorded an exit reason"
    );
    // The application launched next restarts from what the helper left,
    // and its SCR_Finalize does both.
    let names = job.run(&[], |scr, _| {
        let mut scr = scr.unwrap();
        let name = scr.have_restart().unwrap();
        scr.finalize().unwrap();
        name
    });
    assert_eq!(same(names).as_deref(), Some("ckpt.1"));
    assert_eq!(job.on_pfs(), [1]);
    assert_eq!(exit_reason(&job).as_deref(), Some(REASON_FINALIZE_CALLED));
}
