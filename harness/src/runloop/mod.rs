//! The SCR run loop (`scr_run`, developer guide "Launch a run") on
//! simulated nodes, with fault injection and verification.
//!
//! An [`Allocation`] is a directory: one tree per node (job nodes and
//! spares, each given to its ranks as `SCR_NODE_ROOT`), a shared prefix
//! directory and a fault log. [`RunLoop::run`] runs the product's own loop,
//! [`scr::runloop::RunLoop`] (the launch budget, the health checks, the
//! halt condition from launch 2 on, the node choice, `RUN_START`,
//! `NODE_FAIL` and `RUN_END`: there is no second copy here), and adds the
//! testbed through the library's traits ([`scr::runloop::Hooks`],
//! [`scr::runloop::NodeCheck`]; `hooks`):
//!
//! 1. before the health checks of each launch: apply the plan's faults due
//!    "before run k" (so the checks find a node killed there down); the
//!    checks look at each node's tree; a halt condition in
//!    `<prefix>/.scr/halt.scr` or too few healthy nodes stop the loop (the
//!    transient faults done for the launch are undone);
//! 2. the library picks the nodes: every node of the previous launch that
//!    is still healthy keeps its place (its ranks find their cached
//!    files), lost ones are replaced by spares in allocation order;
//! 3. each launch's job is the testbed's: `mpirun` (in the allocation's
//!    own OpenMPI session directory), the launch's arguments
//!    ([`AppSpec::args_for`]), each node's tree as `SCR_NODE_ROOT`, the
//!    plan's in-process faults for this launch in `SCR_FAULT_PLAN`,
//!    firings logged to `SCR_FAULT_LOG`; faults the harness applies from
//!    outside "between checkpoints" are timed by making every rank sleep
//!    at that injection point while the harness, watching the fault log,
//!    damages files; a launcher that outlives its ranks is ended;
//! 4. after it: apply a killed node's aftermath (its directories removed or
//!    made unreachable), the faults due "after run k", undo transient
//!    faults (PFS outage, cache full), classify the launch
//!    ([`crate::outcome`]), give `RUN_END` its note (`halted` for a halted
//!    exit 0); stop when it exited 0, hung, or its launcher could not
//!    start (the library stops when the budget is spent);
//! 5. after the loop: `scr postrun` when the `scr` command has it, as a
//!    real allocation's epilogue runs it: faults due "at postrun" applied
//!    first, the health checks tell it which nodes are down, and it reaches
//!    every node through a launcher (`env SCR_NODE_NAME=<node>
//!    SCR_NODE_ROOT=<tree>`), so `scr copy` runs once per node in its own
//!    process, with the plan's postrun faults in `SCR_FAULT_PLAN`; its
//!    `--json` report says what it saved ([`Scavenged`]);
//! 6. with `next_allocation`: every node tree is set aside (a new
//!    allocation: fresh nodes, empty caches, the same prefix) and the
//!    application runs once more (one launch of the library's loop,
//!    [`scr::runloop::RunLoop::launch_one`], with the same hooks); it must
//!    fetch the newest checkpoint the prefix index lists as COMPLETE and
//!    verify every byte of it.
//!
//! By concern: `hooks` (the harness's side of the library's loop: steps
//! 1–4), `nodes` (the storage checked, the nodes before the first
//! launch), `halt` (halt requests and the halt condition), `launching`
//! (each launch's job, launcher, watcher and record: steps 3–4), `faults`
//! (faults applied from outside, node aftermath, the fault log), `postrun`
//! (step 5) and `next` (step 6); this file holds the settings, the records
//! and [`RunLoop::run`].

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use faultsim::plan::Plan;
use faultsim::seed::Seeded;
use scr::runloop::LoopSpec;
use serde::Serialize;

use crate::health::{expand_hostlist, DownList, StorageCheck};
use crate::outcome::{AppReport, Class, End, Outcome, Scavenged, Token};

mod faults;
mod halt;
mod hooks;
mod launching;
mod next;
mod nodes;
mod postrun;

pub use faults::{read_fault_log, Firing};
pub use halt::{has_postrun, has_subcommand, set_halt, HaltEvent, HaltSet};
pub use launching::{plan_bytes, LAUNCHER_STUCK_CODE};
pub use next::newest_complete_checkpoint;
pub use nodes::{choose_nodes, default_storage};
pub use postrun::{PostrunCopy, PostrunDataset, PostrunJson, PostrunParseError, PostrunRecord};
pub use scr::runloop::halt_condition;

use hooks::{end_of, Kept, SimulatedNodes, Testbed};

/// How long a launcher may outlive the last of its ranks before it is
/// declared stuck and killed (mpirun needs well under a second here).
pub const LAUNCHER_GRACE: Duration = Duration::from_secs(5);

/// How long every rank sleeps at an injection point while the harness
/// applies a fault from outside ("between checkpoints").
pub const WATCH_DELAY_MS: u64 = 1500;

/// The test application and how each launch calls it.
#[derive(Debug, Clone, Serialize)]
pub struct AppSpec {
    /// The program every rank runs.
    pub program: PathBuf,
    /// Arguments of every launch.
    pub args: Vec<String>,
    /// Extra arguments of the first launch only.
    pub first_args: Vec<String>,
    /// Extra arguments of every later launch.
    pub later_args: Vec<String>,
    /// For `scr_app`: (data seed, mean bytes), to check the bytes restored
    /// against the data plan. `None` for another application.
    pub data: Option<(u64, u64)>,
}

impl AppSpec {
    /// `scr_app --seed S --mean-bytes M --until-exit`, writing `first`
    /// checkpoints in the first launch and `later` in each relaunch, and
    /// asking SCR_Should_exit after each (a halt ends the run cleanly).
    pub fn scr_app(
        program: PathBuf,
        seed: u64,
        mean_bytes: u64,
        first: u64,
        later: u64,
    ) -> AppSpec {
        AppSpec {
            program,
            args: vec![
                "--seed".into(),
                seed.to_string(),
                "--mean-bytes".into(),
                mean_bytes.to_string(),
                "--until-exit".into(),
            ],
            first_args: vec!["--checkpoints".into(), first.to_string()],
            later_args: vec!["--checkpoints".into(), later.to_string()],
            data: Some((seed, mean_bytes)),
        }
    }

    /// Another application (`scr-harness run -- PROGRAM ARGS...`), run with
    /// its working directory in the prefix directory, as a job script does
    /// (`cd $SCR_PREFIX`): SCR keeps routed files inside the prefix, so a
    /// program that names its files relative to where it runs would
    /// otherwise die with "resolves outside the prefix directory". Every
    /// rank runs `sh -c 'cd "$SCR_PREFIX" && exec "$0" "$@"' PROGRAM ARGS...`;
    /// a program named by a path is made absolute first (the directory
    /// changes), one named bare is found in `PATH` as before.
    pub fn other_in_prefix(program: &str, args: &[String]) -> AppSpec {
        let prog = if program.contains('/') {
            std::path::absolute(program)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| program.to_string())
        } else {
            program.to_string()
        };
        let mut all = vec![
            "-c".to_string(),
            r#"cd "$SCR_PREFIX" && exec "$0" "$@""#.to_string(),
            prog,
        ];
        all.extend(args.iter().cloned());
        AppSpec {
            program: PathBuf::from("/bin/sh"),
            args: all,
            first_args: Vec::new(),
            later_args: Vec::new(),
            data: None,
        }
    }

    /// The arguments of launch `launch`.
    pub fn args_for(&self, launch: u32) -> Vec<String> {
        let mut a = self.args.clone();
        a.extend(if launch == 1 {
            self.first_args.iter().cloned()
        } else {
            self.later_args.iter().cloned()
        });
        a
    }
}

/// A simulated allocation: node trees, spares, a prefix, a fault log.
#[derive(Debug, Clone, Serialize)]
pub struct Allocation {
    /// The directory holding everything.
    pub root: PathBuf,
    /// Every node of the allocation, in order (job nodes first, spares after).
    pub nodes: Vec<String>,
    /// Nodes a launch needs (`SCR_MIN_NODES`).
    pub job_nodes: usize,
    /// Ranks on each node.
    pub ranks_per_node: usize,
}

impl Allocation {
    /// `job_nodes + spares` nodes `n0`, `n1`, … under `root` (created, with
    /// each node's storage bases, the prefix directory and an empty log).
    pub fn create(
        root: &Path,
        job_nodes: usize,
        spares: usize,
        ranks_per_node: usize,
        storage: &[StorageCheck],
    ) -> io::Result<Allocation> {
        // Absolute: every rank and the launcher see the same paths.
        let root = std::path::absolute(root)?;
        let a = Allocation {
            root,
            nodes: (0..job_nodes + spares).map(|i| format!("n{i}")).collect(),
            job_nodes,
            ranks_per_node,
        };
        fs::create_dir_all(a.prefix())?;
        for n in &a.nodes {
            for s in storage {
                fs::create_dir_all(crate::health::node_path(Some(&a.node_root(n)), &s.path))?;
            }
        }
        fs::write(a.fault_log(), b"")?;
        Ok(a)
    }

    /// A node's tree (its `SCR_NODE_ROOT`).
    pub fn node_root(&self, node: &str) -> PathBuf {
        self.root.join("nodes").join(node)
    }

    /// The prefix directory.
    pub fn prefix(&self) -> PathBuf {
        self.root.join("prefix")
    }

    /// The fault log every rank appends to.
    pub fn fault_log(&self) -> PathBuf {
        self.root.join("faults.jsonl")
    }
}

/// What one launch did.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchRecord {
    /// 1-based.
    pub launch: u32,
    /// Nodes in rank order.
    pub nodes: Vec<String>,
    /// Nodes found down before it, with why (newly found ones only).
    pub newly_down: Vec<(String, String)>,
    /// The launcher's exit code (`None` after a timeout;
    /// [`LAUNCHER_STUCK_CODE`] when it outlived its ranks and was killed).
    pub exit_code: Option<i32>,
    /// The launcher outlived every rank and was killed.
    pub launcher_stuck: bool,
    /// Wall time.
    pub elapsed_s: f64,
    /// The `SCR_FAULT_PLAN` given.
    pub fault_plan: Option<String>,
    /// Faults that fired in it.
    pub fired: Vec<Firing>,
    /// In-process faults of this launch that never fired (compact form): the
    /// scenario did not test what it says.
    pub unfired: Vec<String>,
    /// What the harness did from outside, in order.
    pub external: Vec<String>,
    /// The application's report.
    pub report: AppReport,
    /// Checkpoints this launch completed: those the application reported,
    /// and those after which the application's `app.compute` point fired (a
    /// crash there comes after the checkpoint, before rank 0 printed it).
    pub completed: Vec<u64>,
    /// The classification.
    pub token: String,
    /// Why it is SILENT CORRUPTION, when it is.
    pub why: Option<String>,
    /// Standard output of the launch.
    pub stdout: String,
    /// Standard error of the launch.
    pub stderr: String,
}

/// The whole loop's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Every launch.
    pub launches: Vec<LaunchRecord>,
    /// The outcome.
    pub outcome: Outcome,
    /// Down nodes at the end, with the first reason each was found down.
    pub down: Vec<(String, String)>,
    /// What `scr postrun` did, when it ran.
    pub postrun: Option<PostrunRecord>,
    /// The next allocation's launch (`next_allocation`).
    pub next: Option<LaunchRecord>,
    /// Problems of the harness itself (a fault that could not be applied).
    pub harness_errors: Vec<String>,
}

/// The run loop's settings.
#[derive(Debug, Clone)]
pub struct RunLoop {
    /// The allocation.
    pub alloc: Allocation,
    /// The application.
    pub app: AppSpec,
    /// SCR parameters and other variables for every rank.
    pub env: BTreeMap<String, String>,
    /// Faults.
    pub plan: Plan,
    /// Halt requests.
    pub halts: Vec<HaltEvent>,
    /// Seed of every random choice of the faults.
    pub seed: u64,
    /// Most launches (`SCR_RUNS`).
    pub max_launches: u32,
    /// Bound on each launch.
    pub timeout: Duration,
    /// Storage checked on every node.
    pub storage: Vec<StorageCheck>,
    /// The launcher and its leading arguments.
    pub mpirun: Vec<String>,
    /// The `scr` command, for `scr postrun` (skipped when absent or when
    /// it has no `postrun`).
    pub scr_command: Option<PathBuf>,
    /// After postrun, run the application once more on a new allocation
    /// (fresh node trees, the same prefix) and judge both.
    pub next_allocation: bool,
}

impl RunLoop {
    fn seeded(&self) -> Seeded {
        Seeded::new(self.seed)
    }

    fn excluded(&self) -> Vec<String> {
        self.env
            .get("SCR_EXCLUDE_NODES")
            .and_then(|l| expand_hostlist(l).ok())
            .unwrap_or_default()
    }

    /// The library's loop over this allocation: the application (each
    /// launch's arguments come from [`scr::runloop::Hooks::job`]), every
    /// node, the job's `job_nodes` (no fewer: the harness leaves
    /// `SCR_MIN_NODES` to the job), `max_launches` (at least one) and the
    /// time bound.
    fn loop_spec(&self) -> LoopSpec {
        LoopSpec {
            program: self.app.program.clone(),
            args: Vec::new(),
            env: self.env.clone(),
            nodes: self.alloc.nodes.clone(),
            job_nodes: self.alloc.job_nodes,
            ranks_per_node: self.alloc.ranks_per_node,
            min_nodes: self.alloc.job_nodes,
            runs: self.max_launches.max(1),
            excluded: self.excluded(),
            watchdog: self.timeout,
            // The testbed bounds each launch itself; 3.1's progress
            // watchdog is the product's (scr run with SCR_WATCHDOG=1).
            progress: None,
            prefix: self.alloc.prefix(),
        }
    }

    /// Run the loop to its end: the library's [`scr::runloop::RunLoop`]
    /// with the harness's hooks (steps 1–4 of the module documentation),
    /// then steps 5 and 6.
    pub fn run(&self) -> RunResult {
        let launcher = self.launcher();
        let mut check = SimulatedNodes {
            alloc: &self.alloc,
            storage: &self.storage,
        };
        let mut testbed = Testbed::new(self, Vec::new());
        let result = scr::runloop::RunLoop {
            spec: self.loop_spec(),
            launcher: &launcher,
            check: &mut check,
            hooks: &mut testbed,
        }
        .run();
        let end = end_of(&result.stop);
        self.after_loop(testbed.kept, result.down, testbed.out.errors, end)
    }

    /// Steps 5 and 6 (module documentation) and the result.
    fn after_loop(
        &self,
        kept: Kept,
        mut down: DownList,
        mut errors: Vec<String>,
        end: End,
    ) -> RunResult {
        let postrun = self.postrun(&mut down, &kept.previous, &mut errors);
        if self.next_allocation && postrun.is_none() {
            errors.push(
                "next_allocation: no `scr` command with `postrun` (give --scr): nothing was scavenged"
                    .into(),
            );
        }
        let mut outcome = Outcome::of(kept.tokens, end);
        let mut next = None;
        if self.next_allocation {
            outcome.postrun = Some(
                postrun
                    .as_ref()
                    .map_or_else(|| vec![Scavenged::Failed], |p| p.results.clone()),
            );
            let rec = self.next_launch(&kept.completed, &mut errors);
            outcome.next = Some(rec.token.parse().unwrap_or(Token::of(Class::Died)));
            next = Some(rec);
        }
        RunResult {
            launches: kept.launches,
            outcome,
            down: down
                .entries()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect(),
            postrun,
            next,
            harness_errors: errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::DownReason;
    use scr::records::halt::REASON_FINALIZE_CALLED;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// `scr-harness run -- PROGRAM`: the program runs in the prefix (where
    /// SCR keeps the files it routes), with a relative program path still
    /// found and its arguments passed through unchanged.
    #[test]
    fn another_program_runs_with_its_working_directory_in_the_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = tmp.path().join("prefix");
        fs::create_dir_all(&prefix).unwrap();
        let script = tmp.path().join("where.sh");
        fs::write(&script, "#!/bin/sh\npwd; printf '%s|' \"$@\"\n").unwrap();
        fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let app = AppSpec::other_in_prefix(script.to_str().unwrap(), &names(&["a b", "--flag"]));
        assert_eq!(app.program, PathBuf::from("/bin/sh"));
        assert!(app.data.is_none());
        let out = std::process::Command::new(&app.program)
            .args(app.args_for(1))
            .env("SCR_PREFIX", &prefix)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(
            lines.next().map(PathBuf::from),
            Some(prefix.canonicalize().unwrap())
        );
        assert_eq!(lines.next(), Some("a b|--flag|"));
    }

    #[test]
    fn relaunches_keep_healthy_nodes_in_place_and_fill_with_spares() {
        let all = names(&["n0", "n1", "n2", "n3", "n4", "n5"]);
        let mut down = DownList::new();
        assert_eq!(
            choose_nodes(&all, &[], &down, 4).unwrap(),
            names(&["n0", "n1", "n2", "n3"])
        );
        down.mark("n1", DownReason::Excluded);
        let prev = names(&["n0", "n1", "n2", "n3"]);
        assert_eq!(
            choose_nodes(&all, &prev, &down, 4).unwrap(),
            names(&["n0", "n4", "n2", "n3"])
        );
        down.mark("n2", DownReason::Excluded);
        let prev = names(&["n0", "n4", "n2", "n3"]);
        assert_eq!(
            choose_nodes(&all, &prev, &down, 4).unwrap(),
            names(&["n0", "n4", "n5", "n3"])
        );
        down.mark("n5", DownReason::Excluded);
        let prev = names(&["n0", "n4", "n5", "n3"]);
        assert_eq!(choose_nodes(&all, &prev, &down, 4), None);
    }

    #[test]
    fn postrun_json_gives_one_result_per_dataset() {
        let json = r#"{"up_nodes":["n0"],"down_nodes":["n1"],"datasets":[
            {"id":2,"name":"ckpt.2","kind":"output","complete":true,"current":false,"error":null,"copies":[],"index":null},
            {"id":3,"name":"ckpt.3","kind":"checkpoint","complete":false,"current":false,"error":null,
             "copies":[{"node":"n1","round":"originals","report":null,"not_cached":false,"error":"gone"}]}],
            "nothing_to_do":null,"index_rebuilt":null}"#;
        let r = PostrunJson::parse(json, 3).unwrap();
        assert_eq!(r.results(), [Scavenged::Saved(2), Scavenged::Lost(3)]);
        assert_eq!(r.datasets[1].copies[0].error.as_deref(), Some("gone"));
        let nothing =
            PostrunJson::parse(r#"{"datasets":[],"nothing_to_do":"already"}"#, 0).unwrap();
        assert_eq!(nothing.results(), [Scavenged::Nothing]);
        let e = PostrunJson::parse("scr postrun: nothing", 0).unwrap_err();
        assert!(e.to_string().contains("not a report"), "{e}");
    }

    #[test]
    fn newest_complete_checkpoint_comes_from_the_index() {
        use scr::records::{Dataset, Index, Record};
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(newest_complete_checkpoint(tmp.path()), None);
        let mut idx = Index::default();
        idx.set_dataset(2, "ckpt.2", Dataset::new(2), true);
        idx.set_dataset(3, "ckpt.3", Dataset::new(3), false);
        let path = scr::records::index::index_path(tmp.path());
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        idx.write_file(&path).unwrap();
        assert_eq!(newest_complete_checkpoint(tmp.path()), Some(2));
    }

    #[test]
    fn halt_file_conditions_are_seen_and_finalize_is_not_a_halt() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(halt_condition(tmp.path()), None);
        set_halt(
            tmp.path(),
            &HaltSet::Reason {
                reason: REASON_FINALIZE_CALLED.into(),
            },
            None,
        )
        .unwrap();
        assert_eq!(halt_condition(tmp.path()), None);
        set_halt(tmp.path(), &HaltSet::CheckpointsLeft { left: 0 }, None).unwrap();
        assert!(halt_condition(tmp.path()).is_some());
        let tmp2 = tempfile::tempdir().unwrap();
        set_halt(
            tmp2.path(),
            &HaltSet::ExitBefore {
                in_s: 10,
                margin_s: 60,
            },
            None,
        )
        .unwrap();
        assert!(halt_condition(tmp2.path()).unwrap().contains("exit before"));
    }
}
