use std::sync::Mutex;

use super::*;
use crate::launch::run_argv_watched;

/// Runs the next scripted command of each launch, recording the nodes.
#[derive(Debug)]
struct Scripted {
    cmds: Mutex<Vec<Vec<&'static str>>>,
    seen: Mutex<Vec<Vec<String>>>,
    args: Mutex<Vec<Vec<OsString>>>,
}

impl Scripted {
    fn new(cmds: &[&[&'static str]]) -> Scripted {
        Scripted {
            cmds: Mutex::new(cmds.iter().rev().map(|c| c.to_vec()).collect()),
            seen: Mutex::new(Vec::new()),
            args: Mutex::new(Vec::new()),
        }
    }
}

impl Launcher for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn node_argv(&self, _node: &str, cmd: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
        Ok(cmd.to_vec())
    }
    fn job_argv(&self, job: &JobSpec) -> Result<Vec<OsString>, LaunchError> {
        self.seen
            .lock()
            .unwrap()
            .push(job.nodes.iter().map(|n| n.name.clone()).collect());
        self.args.lock().unwrap().push(job.args.clone());
        let cmd = self
            .cmds
            .lock()
            .unwrap()
            .pop()
            .ok_or(LaunchError::EmptyArgv)?;
        Ok(cmd.into_iter().map(OsString::from).collect())
    }
    fn run(
        &self,
        argv: &[OsString],
        timeout: Duration,
        watch: &mut dyn FnMut(u32) -> Watch,
    ) -> Result<crate::launch::JobOutput, LaunchError> {
        run_argv_watched(argv, timeout, watch)
    }
}

/// Finds the scripted nodes down at the scripted checks (one list a call).
struct Downs(Vec<Vec<&'static str>>);

impl NodeCheck for Downs {
    fn check(&mut self, nodes: &[String]) -> Vec<(String, DownReason)> {
        let now = if self.0.is_empty() {
            Vec::new()
        } else {
            self.0.remove(0)
        };
        now.into_iter()
            .filter(|n| nodes.iter().any(|x| x == n))
            .map(|n| {
                (
                    n.to_string(),
                    DownReason::Unreachable {
                        detail: "test".into(),
                    },
                )
            })
            .collect()
    }
}

fn spec(prefix: &Path, runs: u32) -> LoopSpec {
    LoopSpec {
        program: PathBuf::from("app"),
        args: Vec::new(),
        env: BTreeMap::new(),
        nodes: ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
        job_nodes: 4,
        ranks_per_node: 2,
        min_nodes: 4,
        runs,
        excluded: vec!["e".into()],
        watchdog: Duration::from_secs(20),
        progress: None,
        prefix: prefix.to_path_buf(),
    }
}

fn run(spec: LoopSpec, l: &Scripted, downs: Vec<Vec<&'static str>>) -> LoopResult {
    let mut check = Downs(downs);
    let mut hooks = NoHooks;
    RunLoop {
        spec,
        launcher: l,
        check: &mut check,
        hooks: &mut hooks,
    }
    .run()
}

#[test]
fn a_failed_launch_is_relaunched_on_the_survivors_and_a_spare() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(tmp.path(), 3);
    s.nodes.push("f".into());
    let l = Scripted::new(&[&["false"], &["true"]]);
    let r = run(s, &l, vec![vec![], vec!["b"]]);
    assert_eq!(r.stop, Stop::Finished);
    assert_eq!(r.launches.len(), 2);
    assert_eq!(r.launches[0].end, LaunchEnd::Exited(1));
    let seen = l.seen.lock().unwrap().clone();
    assert_eq!(seen[0], ["a", "b", "c", "d"]);
    // b lost: its place goes to the first spare not excluded (f, not e).
    assert_eq!(seen[1], ["a", "f", "c", "d"]);
    assert_eq!(r.launches[1].newly_down[0].0, "b");
    let down: Vec<&str> = r.down.entries().map(|(n, _)| n).collect();
    assert_eq!(down, ["b", "e"]);
    assert!(r
        .down
        .entries()
        .any(|(n, why)| n == "e" && why.to_string().contains("SCR_EXCLUDE_NODES")));
}

#[test]
fn scr_runs_and_scr_min_nodes_end_the_loop() {
    let tmp = tempfile::tempdir().unwrap();
    // SCR_RUNS=2 (`LoopSpec::runs`, read by `scr run` from the
    // configuration; ci/tests.d/slurm-runloop.sh sets it for real): two
    // failed launches and the loop stops.
    let l = Scripted::new(&[&["false"], &["false"], &["false"]]);
    let r = run(spec(tmp.path(), 2), &l, vec![]);
    assert_eq!(r.stop, Stop::RunsExhausted);
    assert_eq!(r.launches.len(), 2);
    let l = Scripted::new(&[&["false"], &["false"]]);
    let r = run(spec(tmp.path(), 0), &l, vec![vec![], vec!["a"]]);
    assert_eq!(
        r.stop,
        Stop::TooFewNodes {
            healthy: 3,
            need: 4
        }
    );
    assert_eq!(r.launches.len(), 1);
    // SCR_MIN_NODES unset: the job's 4 nodes are needed. SCR_MIN_NODES=3:
    // the three survivors run.
    let mut s = spec(tmp.path(), 0);
    s.min_nodes = 3;
    let l = Scripted::new(&[&["false"], &["true"]]);
    let r = run(s, &l, vec![vec![], vec!["a"]]);
    assert_eq!(r.stop, Stop::Finished);
    assert_eq!(r.launches[1].nodes, ["b", "c", "d"]);
}

/// A launch's bound: the one given; else until a little past the
/// allocation's end, so a launch as long as the allocation (more than a
/// day, say) is never cut short; else a day.
#[test]
fn a_launch_is_bounded_by_the_watchdog_else_the_allocations_end_else_a_day() {
    let now = 1_800_000_000;
    assert_eq!(launch_bound_s(Some(600), Some(now + 7200), now), 600);
    assert_eq!(
        launch_bound_s(None, Some(now + 3 * 86_400), now),
        3 * 86_400 + END_GRACE_S
    );
    assert_eq!(launch_bound_s(None, Some(now - 10), now), END_GRACE_S);
    assert_eq!(launch_bound_s(None, None, now), 86_400);
}

#[test]
fn a_hung_launch_is_killed_counted_and_relaunched() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(tmp.path(), 3);
    s.watchdog = Duration::from_millis(300);
    let l = Scripted::new(&[&["sleep", "30"], &["true"]]);
    let t = std::time::Instant::now();
    let r = run(s, &l, vec![]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(
        r.launches[0].end,
        LaunchEnd::Killed(Duration::from_millis(300))
    );
    assert_eq!(r.stop, Stop::Finished);
    assert_eq!(r.launches.len(), 2);
}

#[test]
fn a_halt_condition_stops_before_a_relaunch_never_before_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let path = crate::halt::halt_path(tmp.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let h = crate::records::Halt {
        exit_reason: Some("maintenance".into()),
        ..Default::default()
    };
    crate::records::Record::write_file(&h, &path).unwrap();
    let l = Scripted::new(&[&["false"], &["true"]]);
    let r = run(spec(tmp.path(), 5), &l, vec![]);
    assert!(
        matches!(&r.stop, Stop::Halted(why) if why.contains("maintenance")),
        "{:?}",
        r.stop
    );
    assert_eq!(r.launches.len(), 1);
}

#[test]
fn a_launcher_that_cannot_start_stops_the_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let l = Scripted::new(&[&["/nonexistent/launcher"]]);
    let r = run(spec(tmp.path(), 3), &l, vec![]);
    assert!(matches!(r.stop, Stop::LaunchFailed(_)), "{:?}", r.stop);
    assert!(r.launches.is_empty());
}

/// Finds a node down when its `<dir>/<node>.dead` exists.
struct DeadFiles(PathBuf);

impl NodeCheck for DeadFiles {
    fn check(&mut self, nodes: &[String]) -> Vec<(String, DownReason)> {
        nodes
            .iter()
            .filter(|n| self.0.join(format!("{n}.dead")).exists())
            .map(|n| (n.clone(), DownReason::Excluded))
            .collect()
    }
}

/// A testbed's hooks: kills `kill` before the checks of launch 2, gives
/// each launch its own argument, stops after a hang with its own note.
struct TestHooks {
    dir: PathBuf,
    kill: &'static str,
    before_checks: Vec<(u32, Vec<String>)>,
    after: Vec<LaunchEnd>,
    stopped: Option<Stop>,
}

impl Hooks for TestHooks {
    fn before_checks(&mut self, launch: u32, previous: &[String]) {
        self.before_checks.push((launch, previous.to_vec()));
        if launch == 2 {
            std::fs::write(self.dir.join(format!("{}.dead", self.kill)), b"").unwrap();
        }
    }
    fn job(&mut self, launch: u32, job: &mut JobSpec) {
        job.args.push(format!("--launch={launch}").into());
    }
    fn after_launch(&mut self, launched: &Launched) -> AfterLaunch {
        self.after.push(launched.end.clone());
        AfterLaunch {
            note: Some(format!("test note {}", launched.launch)),
            stop: matches!(launched.end, LaunchEnd::Killed(_)).then_some(Stop::Hung),
        }
    }
    fn stopped(&mut self, stop: &Stop) {
        self.stopped = Some(stop.clone());
    }
}

fn run_hooked(spec: LoopSpec, l: &Scripted, hooks: &mut TestHooks) -> LoopResult {
    let mut check = DeadFiles(hooks.dir.clone());
    RunLoop {
        spec,
        launcher: l,
        check: &mut check,
        hooks,
    }
    .run()
}

fn hooks(dir: &Path) -> TestHooks {
    TestHooks {
        dir: dir.to_path_buf(),
        kill: "b",
        before_checks: Vec::new(),
        after: Vec::new(),
        stopped: None,
    }
}

#[test]
fn a_node_killed_before_the_checks_is_found_down_and_each_launch_gets_its_job() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(tmp.path(), 3);
    s.nodes.push("f".into());
    s.args = vec!["--common".into()];
    let l = Scripted::new(&[&["false"], &["true"]]);
    let mut h = hooks(tmp.path());
    let r = run_hooked(s, &l, &mut h);
    assert_eq!(r.stop, Stop::Finished);
    assert_eq!(h.stopped, Some(Stop::Finished));
    assert_eq!(h.before_checks[0], (1, Vec::new()));
    assert_eq!(h.before_checks[1].1, ["a", "b", "c", "d"]);
    assert_eq!(r.launches[1].newly_down[0].0, "b");
    assert_eq!(l.seen.lock().unwrap()[1], ["a", "f", "c", "d"]);
    let args = l.args.lock().unwrap().clone();
    assert_eq!(args[0], ["--common", "--launch=1"]);
    assert_eq!(args[1], ["--common", "--launch=2"]);
    assert_eq!(h.after, [LaunchEnd::Exited(1), LaunchEnd::Exited(0)]);
}

#[test]
fn the_hooks_note_each_run_end_and_may_stop_after_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    let conf = tmp.path().join("scr.conf");
    std::fs::write(&conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
    let mut s = spec(&prefix, 3);
    s.watchdog = Duration::from_millis(300);
    s.env = [
        ("SCR_LOG_ENABLE", "1".to_string()),
        ("SCR_CONFIG_FILE", conf.display().to_string()),
        ("SCR_JOB_ID", "77".to_string()),
        ("SCR_PREFIX", prefix.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let l = Scripted::new(&[&["sleep", "30"], &["true"]]);
    let mut h = hooks(tmp.path());
    let r = run_hooked(s, &l, &mut h);
    assert_eq!(r.stop, Stop::Hung);
    assert_eq!(h.stopped, Some(Stop::Hung));
    assert_eq!(r.launches.len(), 1);
    let parsed = crate::log::read_log(&prefix.join(".scr").join("log"), true).unwrap();
    let notes: Vec<&str> = parsed
        .records
        .iter()
        .filter(|r| r.is_event("RUN_END"))
        .filter_map(|r| r.entry.note.as_deref())
        .collect();
    assert_eq!(notes, ["launch 1: test note 1"]);
}

#[test]
fn a_launcher_that_cannot_start_is_shown_to_the_hooks_and_the_halt_to_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let l = Scripted::new(&[&["/nonexistent/launcher"]]);
    let mut h = hooks(tmp.path());
    let r = run_hooked(spec(tmp.path(), 3), &l, &mut h);
    assert!(matches!(r.stop, Stop::LaunchFailed(_)), "{:?}", r.stop);
    assert!(
        matches!(&h.after[..], [LaunchEnd::NotStarted(_)]),
        "{:?}",
        h.after
    );
    assert!(r.launches.is_empty());
    // A halt before the relaunch: the loop stops before launch 2's
    // launch, after its hooks ran before the checks.
    let path = crate::halt::halt_path(tmp.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let halt = crate::records::Halt {
        exit_reason: Some("maintenance".into()),
        ..Default::default()
    };
    crate::records::Record::write_file(&halt, &path).unwrap();
    let l = Scripted::new(&[&["false"], &["true"]]);
    let mut h = hooks(tmp.path());
    let r = run_hooked(spec(tmp.path(), 3), &l, &mut h);
    assert!(matches!(&r.stop, Stop::Halted(_)), "{:?}", r.stop);
    assert_eq!(h.stopped, Some(r.stop.clone()));
    assert_eq!(h.before_checks.len(), 2);
    assert_eq!(h.after.len(), 1);
}

/// A flush file in `prefix` whose newest dataset is `id` at `locs`.
fn write_flush_file(prefix: &Path, id: i64, locs: &[crate::records::Location]) {
    use crate::records::{FlushFile, Record as _};
    let mut ff = FlushFile::default();
    for l in locs {
        ff.location_set(id, *l);
    }
    std::fs::create_dir_all(prefix.join(".scr")).unwrap();
    ff.write_file(crate::prefix::flush_file_path(prefix))
        .unwrap();
}

/// One launch of `cmd` under SCR 3.1's progress watchdog.
fn watched(prefix: &Path, cmd: &'static [&'static str], timeout_ms: u64, pfs_ms: u64) -> Launched {
    let mut s = spec(prefix, 1);
    s.progress = Some(ProgressWatchdog {
        timeout: Duration::from_millis(timeout_ms),
        timeout_pfs: Duration::from_millis(pfs_ms),
    });
    let l = Scripted::new(&[cmd]);
    let r = run(s, &l, vec![]);
    assert_eq!(r.launches.len(), 1);
    r.launches[0].clone()
}

/// SCR_WATCHDOG=1 (SCR 3.1's scr_run watchdog): a launch is killed when
/// the flush file shows no new dataset or location for the timeout — at
/// the first look when it shows nothing at all, at the second when it
/// shows the same as at the first — and the flushing timeout applies
/// while the newest dataset is SYNC_FLUSHING. The hard bound (20 s) never
/// comes into it.
#[test]
fn scr31s_watchdog_kills_a_launch_whose_flush_file_shows_no_progress() {
    use crate::records::Location::{Cache, SyncFlushing};
    let tmp = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let l = watched(tmp.path(), &["sleep", "30"], 300, 300);
    assert_eq!(l.end, LaunchEnd::NoProgress(Duration::from_millis(300)));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(l.end.to_string().contains("SCR_WATCHDOG=1"), "{}", l.end);
    assert_eq!(
        end_note(&l.end).unwrap(),
        "failed: hang, killed after 0 s without progress"
    );
    // A dataset from an earlier launch: seen at the first look, the same
    // at the second.
    write_flush_file(tmp.path(), 4, &[Cache]);
    let t = std::time::Instant::now();
    let l = watched(tmp.path(), &["sleep", "30"], 300, 300);
    assert_eq!(l.end, LaunchEnd::NoProgress(Duration::from_millis(300)));
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    // Being flushed: the flushing timeout (5 s) outlasts the launch.
    write_flush_file(tmp.path(), 4, &[Cache, SyncFlushing]);
    let l = watched(tmp.path(), &["sleep", "1.5"], 300, 5000);
    assert_eq!(l.end, LaunchEnd::Exited(0));
}

/// A launch that keeps writing checkpoints runs past any number of
/// SCR_WATCHDOG_TIMEOUTs under SCR 3.1's watchdog.
#[test]
fn scr31s_watchdog_lets_a_launch_that_checkpoints_run() {
    use crate::records::Location::Cache;
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (prefix, stop) = (prefix.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut id = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                write_flush_file(&prefix, id, &[Cache]);
                id += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let l = watched(&prefix, &["sleep", "3"], 1000, 1000);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(l.end, LaunchEnd::Exited(0));
}
