//! The adaptive Need_checkpoint policy in thread-communicator jobs, with
//! the inputs injected: SCR_MTBF, and earlier runs' costs and failures in a
//! text log written into the prefix beforehand. Checks the answer (the same
//! on every rank), the interval logged as CHECKPOINT_INTERVAL and the
//! reasons in its note. Also SCR's time policies (SCR_CHECKPOINT_SECONDS,
//! SCR_CHECKPOINT_OVERHEAD) on a manual clock the test advances.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{run_with_system, Cluster};
use scr::clock::ManualClock;
use scr::comm::thread::ThreadComm;
use scr::comm::Comm;
use scr::interval::adaptive::mtbf_estimate_s;
use scr::interval::model::daly_s;
use scr::log::{read_log, Record};
use scr::records::halt::{Halt, HALT_FILE};
use scr::records::Record as _;
use scr::{Flags, Scr};

fn system(cl: &Cluster, text: &str) -> PathBuf {
    let p = cl.root.join("scr.conf");
    std::fs::write(&p, format!("SCR_LOG_SYSLOG_ENABLE=0\n{text}")).unwrap();
    p
}

fn checkpoint(scr: &mut Scr, comm: &dyn Comm, prefix: &Path, name: &str) {
    let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
    let p = out
        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
        .unwrap();
    std::fs::write(&p, vec![1u8; 2000]).unwrap();
    assert!(out.complete(true).unwrap());
}

/// Need_checkpoint's answers as a string of y/n.
fn yn(v: bool) -> char {
    if v {
        'y'
    } else {
        'n'
    }
}

fn intervals(prefix: &Path) -> Vec<Record> {
    read_log(&prefix.join(".scr").join("log"), true)
        .unwrap()
        .records
        .into_iter()
        .filter(|r| r.is_event("CHECKPOINT_INTERVAL"))
        .collect()
}

/// Earlier runs of job 900 under the run loop: three runs of 4000, 4000
/// and 12000 s, the first two ended by failures; three checkpoints each
/// costing 4 s of write and 2 s of encode.
fn earlier_runs(prefix: &Path) {
    let mut lines = Vec::new();
    let runs = [
        (1000.0, 5000.0, "failed: node n3 lost"),
        (5000.0, 9000.0, "failed: rank 5 killed"),
        (9000.0, 21000.0, "finished"),
    ];
    for (i, (start, end, note)) in runs.iter().enumerate() {
        let d = i + 1;
        lines.push(format!("{start}: host=n0, jobid=900, event=RUN_START"));
        lines.push(format!(
            "{}: host=n0, jobid=900, event=START, procs=4, nodes=4",
            start + 1.0
        ));
        lines.push(format!(
            "{}: host=n0, jobid=900, xfer=WRITE, dset={d}, secs=4",
            start + 100.0
        ));
        lines.push(format!(
            "{}: host=n0, jobid=900, xfer=ENCODE, dset={d}, secs=2",
            start + 100.0
        ));
        lines.push(format!(
            "{end}: host=n0, jobid=900, event=RUN_END, note=\"{note}\""
        ));
    }
    std::fs::create_dir_all(prefix.join(".scr")).unwrap();
    std::fs::write(prefix.join(".scr").join("log"), lines.join("\n") + "\n").unwrap();
}

const ADAPTIVE: &[(&str, &str)] = &[
    ("SCR_LOG_ENABLE", "1"),
    ("SCR_CHECKPOINT_ADAPTIVE", "1"),
    ("SCR_COPY_TYPE", "XOR"),
];

/// What a scripted job does, in order, on every rank.
enum Step {
    /// Call Need_checkpoint and record y/n.
    Need,
    /// Write a checkpoint of this name.
    Checkpoint(&'static str),
    /// Rank 0 sets a halt reason in the halt file.
    Halt,
}

/// Run `steps` on `nranks` ranks with SCR_MTBF=`mtbf` (if any); each rank's
/// Need_checkpoint answers as a string of y/n.
fn script(
    cl: &Cluster,
    nranks: usize,
    sys: &Path,
    mtbf: Option<&str>,
    steps: &[Step],
) -> Vec<Option<String>> {
    let mut env = ADAPTIVE.to_vec();
    if let Some(m) = mtbf {
        env.push(("SCR_MTBF", m));
    }
    script_env(cl, nranks, sys, &env, steps)
}

/// [`script`] with the environment `env`.
fn script_env(
    cl: &Cluster,
    nranks: usize,
    sys: &Path,
    env: &[(&str, &str)],
    steps: &[Step],
) -> Vec<Option<String>> {
    let prefix = cl.prefix.clone();
    run_with_system(
        cl,
        nranks,
        |r| r,
        Some(sys),
        env,
        |scr, comm| {
            let mut a = String::new();
            for step in steps {
                match step {
                    Step::Need => a.push(yn(scr.need_checkpoint().unwrap())),
                    Step::Checkpoint(name) => checkpoint(scr, comm, &prefix, name),
                    Step::Halt => {
                        if comm.rank() == 0 {
                            Halt::update_file(
                                prefix.join(".scr").join(HALT_FILE),
                                |h: &mut Halt| h.exit_reason = Some("operator".into()),
                            )
                            .unwrap();
                        }
                        comm.barrier().unwrap();
                    }
                }
            }
            Some(a)
        },
    )
}

#[test]
fn the_interval_comes_from_the_logged_history() {
    let cl = Cluster::new();
    earlier_runs(&cl.prefix);
    let sys = system(&cl, "");
    let prefix = cl.prefix.clone();
    let answers = run_with_system(
        &cl,
        4,
        |r| r,
        Some(&sys),
        ADAPTIVE,
        |scr, _comm| {
            // Cost 6 s and MTBF about 20 000 s / 2: Daly's interval is minutes,
            // so right after the start the answer is no.
            Some(yn(scr.need_checkpoint().unwrap()).to_string())
        },
    );
    assert!(
        answers.iter().all(|a| a.as_deref() == Some("n")),
        "{answers:?}"
    );
    let logged = intervals(&prefix);
    assert_eq!(logged.len(), 1, "{logged:?}");
    let secs = logged[0].entry.secs.unwrap();
    // This run's own seconds add to the exposure: bound them by 60 s.
    let lo = daly_s(6.0, mtbf_estimate_s(None, 2, 20_000.0).unwrap());
    let hi = daly_s(6.0, mtbf_estimate_s(None, 2, 20_060.0).unwrap());
    assert!(lo <= secs && secs <= hi, "{lo} <= {secs} <= {hi}");
    let note = logged[0].entry.note.as_deref().unwrap();
    let log = prefix.join(".scr").join("log");
    for part in [
        "adaptive: Daly interval".to_string(),
        format!("cost 6.000 s (mean of 3 checkpoints in {})", log.display()),
        "censored maximum likelihood".to_string(),
        format!(
            "2 failures in 20000 s of 3 earlier runs in {}",
            log.display()
        ),
    ] {
        assert!(note.contains(&part), "{part:?} not in {note:?}");
    }
}

#[test]
fn configured_mtbf_is_a_prior_and_halts_still_answer_yes() {
    let cl = Cluster::new();
    earlier_runs(&cl.prefix);
    let sys = system(&cl, "");
    let prefix = cl.prefix.clone();
    let steps = [
        Step::Need,
        Step::Checkpoint("ckpt.1"),
        Step::Need,
        Step::Halt,
        Step::Need,
    ];
    let answers = script(&cl, 3, &sys, Some("86400"), &steps);
    assert!(
        answers.iter().all(|a| a.as_deref() == Some("nny")),
        "{answers:?}"
    );
    let logged = intervals(&prefix);
    // The logged history's cost first, then this run's measured cost.
    assert_eq!(logged.len(), 2, "{logged:?}");
    let m = mtbf_estimate_s(Some(86_400.0), 2, 20_000.0).unwrap();
    let first = logged[0].entry.secs.unwrap();
    assert!(
        (first / daly_s(6.0, m) - 1.0).abs() < 1e-3,
        "{first} vs {m}"
    );
    let n0 = logged[0].entry.note.as_deref().unwrap();
    assert!(
        n0.contains("SCR_MTBF 86400 s as a prior worth one failure"),
        "{n0}"
    );
    let n1 = logged[1].entry.note.as_deref().unwrap();
    assert!(n1.contains("(mean of 1 checkpoints this run)"), "{n1}");
    assert!(
        logged[1].entry.secs.unwrap() < first,
        "a fast checkpoint: a shorter interval"
    );
}

#[test]
fn without_history_it_measures_first_then_goes_multi_level() {
    let cl = Cluster::new();
    let sys = system(
        &cl,
        "CKPT=0 INTERVAL=1 TYPE=XOR\nCKPT=1 INTERVAL=2 TYPE=PARTNER\n",
    );
    let prefix = cl.prefix.clone();
    let steps = [
        Step::Need,
        Step::Checkpoint("ckpt.1"),
        Step::Need,
        Step::Checkpoint("ckpt.2"),
        Step::Need,
    ];
    let answers = script(&cl, 4, &sys, Some("3600,36000"), &steps);
    assert!(
        answers.iter().all(|a| a.as_deref() == Some("ynn")),
        "{answers:?}"
    );
    let logged = intervals(&prefix);
    let notes: Vec<&str> = logged
        .iter()
        .map(|r| r.entry.note.as_deref().unwrap())
        .collect();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes[0].contains("checkpoint now to measure its cost"),
        "{}",
        notes[0]
    );
    assert!(logged[0].entry.secs.is_none());
    assert!(
        notes[1].contains("single level because level 2 (INTERVAL 2) has no measured cost yet"),
        "{}",
        notes[1]
    );
    assert!(
        notes[2].contains("multi-level (SC10 model)")
            && notes[2].contains("pattern of 2 checkpoints"),
        "{}",
        notes[2]
    );
    assert!(notes[2].contains("INTERVALs [1, 2]"), "{}", notes[2]);
    assert!(
        notes[2].contains("SCR_MTBF 3600,36000 s per level, 3273 s in all"),
        "{}",
        notes[2]
    );
}

#[test]
fn a_bad_mtbf_is_an_error_on_every_rank() {
    let cl = Cluster::new();
    let sys = system(&cl, "SCR_MTBF=soon\n");
    let answers = run_with_system(
        &cl,
        3,
        |r| r,
        Some(&sys),
        ADAPTIVE,
        |scr, _comm| Some(scr.need_checkpoint().unwrap_err().to_string()),
    );
    for a in &answers {
        let a = a.as_deref().unwrap();
        assert!(a.contains("SCR_MTBF") && a.contains("scr.conf:2"), "{a}");
    }
}

/// What a job driven by a manual clock does, in order, on every rank.
enum Timed {
    /// Call Need_checkpoint and record y/n.
    Need,
    /// The clock moves on this many seconds (once, for every rank).
    Wait(u64),
    /// Write a checkpoint of this name that takes this many seconds.
    Checkpoint(&'static str, u64),
}

/// Run `steps` on 2 ranks sharing a manual clock, with `env`; the answers
/// of Need_checkpoint (the same on every rank) as y/n.
fn on_manual_clock(env: &[(&str, &str)], steps: &[Timed]) -> String {
    let cl = Cluster::new();
    let clock = ManualClock::at_unix_s(1_700_000_000);
    let prefix = cl.prefix.clone();
    let answers = ThreadComm::run(2, |comm| {
        let mut opts = cl.opts(cl.node(comm.rank()), env);
        opts.clock = Some(clock.clone());
        let world = comm.split(Some(0), comm.rank() as i64).unwrap().unwrap();
        let mut scr = Scr::init_with(world, opts).unwrap();
        // Rank 0 moves the clock while every rank waits between barriers,
        // so every rank sees the same time at every step.
        let wait = |s: u64| {
            comm.barrier().unwrap();
            if comm.rank() == 0 {
                clock.advance(Duration::from_secs(s));
            }
            comm.barrier().unwrap();
        };
        let mut a = String::new();
        for step in steps {
            match step {
                Timed::Need => a.push(yn(scr.need_checkpoint().unwrap())),
                Timed::Wait(s) => wait(*s),
                Timed::Checkpoint(name, s) => {
                    let mut out = scr.start_output(Some(name), Flags::CHECKPOINT).unwrap();
                    let p = out
                        .route_file(prefix.join(format!("{name}/rank{}", comm.rank())))
                        .unwrap();
                    std::fs::write(&p, [3u8; 100]).unwrap();
                    wait(*s);
                    assert!(out.complete(true).unwrap());
                }
            }
        }
        scr.finalize().unwrap();
        a
    })
    .unwrap();
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    answers[0].clone()
}

#[test]
fn checkpoint_seconds_counts_from_init_then_from_the_last_checkpoint() {
    use Timed::{Checkpoint, Need, Wait};
    let env = [("SCR_CHECKPOINT_SECONDS", "600")];
    let steps = [
        Need,
        Wait(599),
        Need,
        Wait(1),
        Need,
        // The 30 s of the checkpoint count: the time is since its end.
        Checkpoint("ckpt.1", 30),
        Need,
        Wait(599),
        Need,
        Wait(1),
        Need,
    ];
    assert_eq!(on_manual_clock(&env, &steps), "nnynny");
}

#[test]
fn checkpoint_overhead_waits_until_the_mean_cost_is_the_given_share() {
    use Timed::{Checkpoint, Need, Wait};
    // 10 % overhead: a checkpoint of 10 s is due again 90 s after it ended.
    let env = [("SCR_CHECKPOINT_OVERHEAD", "10")];
    let steps = [
        // No checkpoint yet: no cost known, so yes.
        Need,
        Checkpoint("ckpt.1", 10),
        Need,
        Wait(89),
        Need,
        Wait(1),
        Need,
    ];
    assert_eq!(on_manual_clock(&env, &steps), "ynny");
}

/// With a synchronous SCR_FLUSH and one SCR_MTBF figure more than the CKPT
/// levels, the flush to the prefix is the top level of the multi-level
/// model: its cost, a flushed checkpoint's write plus its flush, is
/// measured at the first flush. With the flush in the background it is
/// no level (the model's levels block the application): the figures make
/// the total MTBF of Daly's interval.
#[test]
fn a_synchronous_flush_is_the_top_level_when_scr_mtbf_names_it() {
    let steps = [
        Step::Need,
        Step::Checkpoint("ckpt.1"),
        Step::Need,
        Step::Checkpoint("ckpt.2"),
        Step::Need,
    ];
    let notes_of = |flush: &[(&'static str, &'static str)]| {
        let cl = Cluster::new();
        let sys = system(&cl, "");
        let mut env = ADAPTIVE.to_vec();
        env.push(("SCR_MTBF", "3600,36000"));
        env.extend_from_slice(flush);
        let answers = script_env(&cl, 2, &sys, &env, &steps);
        assert!(answers.iter().all(|a| a.is_some()), "{answers:?}");
        intervals(&cl.prefix)
            .iter()
            .map(|r| r.entry.note.clone().unwrap())
            .collect::<Vec<String>>()
    };
    let notes = notes_of(&[("SCR_FLUSH", "2")]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes[1].contains("single level because level 2 (INTERVAL 2) has no measured cost yet"),
        "{}",
        notes[1]
    );
    assert!(
        notes[2].contains("multi-level (SC10 model)")
            && notes[2].contains(
                "INTERVALs [1, 2]; the last, the flush to the prefix every 2 checkpoints"
            ),
        "{}",
        notes[2]
    );
    let notes = notes_of(&[("SCR_FLUSH", "2"), ("SCR_FLUSH_ASYNC", "1")]);
    assert!(
        notes.iter().all(|n| !n.contains("multi-level")),
        "{notes:?}"
    );
    // One level: both figures count in the total MTBF.
    assert!(
        notes.last().unwrap().contains("Daly interval")
            && notes
                .last()
                .unwrap()
                .contains("SCR_MTBF 3600,36000 s per level, 3273 s in all"),
        "{notes:?}"
    );
}
