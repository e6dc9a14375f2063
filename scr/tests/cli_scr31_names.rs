//! SCR 3.1's command names: a job script written for SCR 3.1 calls
//! `scr_halt`, `scr_retries_halt`, `scr_glob_hosts`, … and ci/install links
//! each name to the one `scr` binary, which runs the subcommand that does
//! that command's work with SCR 3.1's options and exit codes. Each test runs
//! the binary through links named as SCR 3.1 names them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scr::cli_docs::SCR31_COMMANDS as NAMES;

/// A directory of links to the `scr` binary, one per SCR 3.1 name (and one
/// name SCR never had).
struct Links {
    dir: tempfile::TempDir,
}

impl Links {
    fn new() -> Links {
        let dir = tempfile::tempdir().unwrap();
        for name in NAMES.iter().map(|n| n.0).chain(["scr_unknown"]) {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_scr"), dir.path().join(name)).unwrap();
        }
        Links { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Run `name` with `args` in `cwd`.
    fn run(&self, name: &str, args: &[&str], cwd: &Path) -> Output {
        Command::new(self.path(name))
            .args(args)
            .current_dir(cwd)
            .env_remove("SCR_PREFIX")
            .output()
            .expect("the scr binary runs")
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

/// Write an executable script at `path`.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stand-in launcher `name` in `bin`: it appends its arguments to
/// `calls`, skips its options and runs the command after them here.
fn fake_launcher(bin: &Path, name: &str, calls: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    script(
        &bin.join(name),
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\n\
             while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\n\
             exec \"$@\"\n",
            calls.display()
        ),
    );
}

/// Links, a work directory with a stand-in `launcher` in its `bin` that
/// records its calls (the file returned), and an application `app` there
/// with the script `body` (run in the work directory).
fn staged(launcher: &str, body: &str) -> (Links, tempfile::TempDir, PathBuf, PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let calls = work.path().join(format!("{launcher}.calls"));
    fake_launcher(&work.path().join("bin"), launcher, &calls);
    let app = work.path().join("app");
    script(&app, body);
    (Links::new(), work, calls, app)
}

/// `scr_jsrun --no-postrun OPTS APP` in an LSF allocation of one node
/// (`c1`), the stand-in `jsrun` of `w/bin` on PATH, the prefix, control
/// and cache directories in `w`, with `env` besides.
fn jsrun_in_lsf(l: &Links, w: &Path, app: &Path, opts: &[&str], env: &[(&str, &str)]) -> Output {
    for d in ["prefix", "cntl", "cache"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    let mut c = Command::new(l.path("scr_jsrun"));
    c.arg("--no-postrun")
        .args(opts)
        .arg(app)
        .current_dir(w)
        .env("PATH", path_with(&w.join("bin")))
        .env("LSB_MCPU_HOSTS", "c1 4")
        .env("SCR_PREFIX", w.join("prefix"))
        .env("SCR_CNTL_BASE", w.join("cntl"))
        .env("SCR_CACHE_BASE", w.join("cache"));
    for k in ["SCR_RUNS", "SLURM_JOB_ID", "SLURM_JOBID", "FLUX_JOB_ID"] {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    c.output().unwrap()
}

/// PATH with `bin` first.
fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn each_scr31_name_runs_its_subcommand() {
    let l = Links::new();
    let here = l.dir.path();
    for (name, sub) in NAMES {
        let o = l.run(name, &["--help"], here);
        assert_eq!(code(&o), 0, "{name}: {}", err(&o));
        let usage = format!("Usage: scr {sub} ");
        assert!(
            out(&o).contains(&usage),
            "{name}: no {usage:?} in {}",
            out(&o)
        );
    }
    // ci/install links exactly these names, to these subcommands' pages.
    let install = include_str!("../../ci/install");
    let listed = install
        .split("scr31_names=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("ci/install's list of SCR 3.1's names");
    let mut linked: Vec<(&str, &str)> = listed
        .split_whitespace()
        .map(|pair| pair.split_once(':').expect("NAME:SUBCOMMAND"))
        .collect();
    let mut names = NAMES.to_vec();
    linked.sort();
    names.sort();
    assert_eq!(linked, names);
    // Any other name is `scr` itself.
    let o = l.run("scr_unknown", &["glob-hosts", "--count", "n[1-4]"], here);
    assert_eq!((code(&o), out(&o).as_str()), (0, "4\n"), "{}", err(&o));
}

/// The developer guide's scr_glob_hosts examples, and its options as SCR
/// 3.1's script reads them (`-h` is `--hosts`, `--nth -1` the last host).
#[test]
fn scr_glob_hosts_answers_the_guides_examples() {
    let l = Links::new();
    let here = l.dir.path();
    let glob = |args: &[&str]| {
        let o = l.run("scr_glob_hosts", args, here);
        assert_eq!(code(&o), 0, "{args:?}: {}", err(&o));
        out(&o)
    };
    assert_eq!(glob(&["--count", "atlas[3,5-7,9-11]"]), "7\n");
    assert_eq!(glob(&["--nth", "3", "atlas[3,5-7,9-11]"]), "atlas6\n");
    assert_eq!(
        glob(&["--minus", "atlas[3,5-7,9-11]:atlas[5,7,20]"]),
        "atlas[3,6,9-11]\n"
    );
    assert_eq!(
        glob(&["--intersection", "atlas[3,5-7,9-11]:atlas[5,7,20]"]),
        "atlas[5,7]\n"
    );
    assert_eq!(glob(&["-c", "-h", "atlas[3,5-7,9-11]"]), "7\n");
    assert_eq!(glob(&["-n", "-1", "-h", "atlas[3,5-7,9-11]"]), "atlas11\n");
    assert_eq!(glob(&["-h", "n3,n1,n2"]), "n[1-3]\n");
    assert_eq!(
        glob(&["--compress", "rhea2,rhea3,rhea4,rhea6"]),
        "rhea[2-4,6]\n"
    );
    // Out of range, or not a host list: USAGE (2), said on stderr.
    for args in [
        &["--nth", "8", "atlas[3,5-7,9-11]"][..],
        &["--nth", "0", "n1"],
        &["--count", "n[3-1]"],
        &["--minus", "n[1-2]"],
        &["--count"],
    ] {
        let o = l.run("scr_glob_hosts", args, here);
        assert_eq!(code(&o), 2, "{args:?}: {}", out(&o));
        assert!(!err(&o).is_empty(), "{args:?}");
    }
}

/// A 3.1 job script's halt handling: `scr_halt` sets a condition in the
/// prefix it is given, `scr_retries_halt --dir` exits 0 (halt) with the
/// reason or 1 (run again), `scr_halt -v` names the file,
/// `scr_print_hash_file` and `scr_flush_file` read the prefix's files, and
/// `scr_postrun -p` finds nothing to scavenge.
#[test]
fn a_job_scripts_halt_commands_work_by_their_scr31_names() {
    let l = Links::new();
    let prefix = tempfile::tempdir().unwrap();
    let p = prefix.path().to_str().unwrap();
    let here = l.dir.path();
    let o = l.run("scr_retries_halt", &["--dir", p], here);
    assert_eq!(code(&o), 1, "no halt file: run again; {}", err(&o));
    let o = l.run("scr_halt", &["--checkpoints", "0", "-v", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(err(&o).contains(".scr/halt.scr"), "{}", err(&o));
    let o = l.run("scr_retries_halt", &["--dir", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(!out(&o).is_empty());
    let o = l.run(
        "scr_print_hash_file",
        &[&format!("{p}/.scr/halt.scr")],
        here,
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("CheckpointsLeft"), "{}", out(&o));
    let o = l.run("scr_halt", &["--remove", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = l.run("scr_retries_halt", &["--dir", p], here);
    assert_eq!(code(&o), 1, "{}", out(&o));
    // scr_postrun -p: nothing was cached, so nothing to scavenge.
    let o = l.run("scr_postrun", &["-p", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let said = out(&o) + &err(&o);
    assert!(said.contains("nothing to scavenge"), "{said}");
    // No flush file: scr_flush_file --latest finds no dataset and fails,
    // naming the file (ABSENT, 5, where SCR 3.1 exits 1: a script's test
    // of the status reads it the same).
    let o = l.run("scr_flush_file", &["--dir", p, "--latest"], here);
    assert_eq!(code(&o), 5, "{}{}", out(&o), err(&o));
    assert!(err(&o).contains(".scr/flush.scr"), "{}", err(&o));
}

/// `scr_jsrun` as an LSF job script calls it: the run loop in an LSF
/// allocation (`LSB_MCPU_HOSTS`) launches through `jsrun` with one
/// resource set per node, and a job that exits 0 has finished. `jsrun` here
/// is a stand-in on PATH that records its arguments and runs the command
/// after them on this machine.
#[test]
fn scr_jsrun_runs_the_loop_through_jsrun() {
    let (l, work, calls, app) = staged("jsrun", "#!/bin/sh\ntouch ran\n");
    let w = work.path();
    let o = jsrun_in_lsf(
        &l,
        w,
        &app,
        &["--check-timeout", "20", "--smpiargs=none"],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(err(&o).contains("the job finished"), "{}", err(&o));
    assert!(w.join("ran").exists(), "the application did not run");
    let calls = std::fs::read_to_string(&calls).unwrap();
    let launch = calls
        .lines()
        .find(|c| c.ends_with(&*app.to_string_lossy()))
        .unwrap_or_else(|| panic!("no launch of the application in {calls}"));
    // The user's jsrun options, then one resource set on the one node.
    assert!(
        launch.starts_with("--smpiargs=none --nrs=1 --rs_per_host=1 --tasks_per_rs=1 --np=1"),
        "{launch}"
    );
}

/// `scr_index` with SCR 3.1's options on a prefix LLNL's SCR 3.1 wrote:
/// listing is what it does with no option, `-p` names the prefix, `-r` and
/// `--remove` drop a dataset from the index, `-c` makes one current.
#[test]
fn scr_index_takes_scr31s_options_on_an_llnl_prefix() {
    let l = Links::new();
    let work = tempfile::tempdir().unwrap();
    let prefix = work.path().join("prefix");
    common::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llnl-3.1/halted"),
        &prefix,
    );
    let p = prefix.to_str().unwrap();
    let index = |args: &[&str], cwd: &Path| {
        let o = l.run("scr_index", args, cwd);
        assert_eq!(code(&o), 0, "{args:?}: {}", err(&o));
        out(&o)
    };
    // No option: the list, of the current directory's prefix.
    let listed = index(&[], &prefix);
    assert!(
        listed.contains("* ") && listed.contains("ckpt.4"),
        "{listed}"
    );
    assert_eq!(index(&["-l", "-p", p], work.path()), listed);
    index(&["-r", "ckpt.4", "-p", p], work.path());
    index(&["--remove", "ckpt.3", "--prefix", p], work.path());
    let listed = index(&["-p", p], work.path());
    assert!(
        !listed.contains("ckpt.4") && !listed.contains("ckpt.3"),
        "{listed}"
    );
    index(&["-c", "ckpt.1", "-p", p], work.path());
    let listed = index(&["-p", p], work.path());
    let current: Vec<&str> = listed.lines().filter(|l| l.starts_with('*')).collect();
    assert_eq!(current.len(), 1);
    assert!(current[0].contains("ckpt.1"), "{current:?}");
}

/// `scr_flush_file` with SCR 3.1's options (`-d`/`--dir`, `-l`, `-L`,
/// `--need-flush`, `--list-ckpt`) on a prefix LLNL's SCR 3.1 wrote:
/// checkpoint 4 is the newest, in cache and on the file system, so it
/// needs no flush (exit 1).
#[test]
fn scr_flush_file_takes_scr31s_options_on_an_llnl_prefix() {
    let l = Links::new();
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llnl-3.1/halted");
    let p = prefix.to_str().unwrap();
    let here = l.dir.path();
    let flush = |args: &[&str]| {
        let o = l.run("scr_flush_file", args, here);
        (code(&o), out(&o))
    };
    assert_eq!(flush(&["-d", p, "-l"]), (0, "4\n".into()));
    assert_eq!(flush(&["--dir", p, "--latest"]), (0, "4\n".into()));
    assert_eq!(flush(&["--dir", p, "--list-ckpt"]), (0, "4\n".into()));
    let (c, where_) = flush(&["-d", p, "-L", "4"]);
    assert_eq!(c, 0);
    assert!(where_.lines().any(|l| l == "PFS"), "{where_}");
    assert_eq!(
        flush(&["--dir", p, "--need-flush", "4"]),
        (1, String::new())
    );
    assert_eq!(flush(&["-d", p, "-n", "4"]), (1, String::new()));
}

/// `scr_list_down_nodes` prints what SCR 3.1's prints and exits as it does
/// (1 when a node is down, 0 and nothing printed when none is), where `scr
/// list-down-nodes` answers "is any down?" (0 yes, 1 no); both take the
/// node set as an argument and `-d` nodes to count as down. Outside an
/// allocation no node is probed: the down nodes are those excluded.
#[test]
fn scr_list_down_nodes_exits_as_scr31s_does() {
    let l = Links::new();
    let run = |name: &str, args: &[&str]| {
        let o = Command::new(l.path(name))
            .args(args)
            .env("SCR_EXCLUDE_NODES", "n3")
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURM_JOBID")
            .output()
            .unwrap();
        (code(&o), out(&o))
    };
    assert_eq!(
        run("scr_list_down_nodes", &["n[1-5]", "-d", "n5"]),
        (1, "n[3,5]\n".into())
    );
    assert_eq!(
        run("scr_list_down_nodes", &["-r", "n[1-5]", "--down", "n5"]),
        (
            1,
            "n3: listed in SCR_EXCLUDE_NODES\nn5: given with --down\n".into()
        )
    );
    assert_eq!(run("scr_list_down_nodes", &["n[1-2]"]), (0, String::new()));
    assert_eq!(
        run("scr_unknown", &["list-down-nodes", "n[1-5]", "-d", "n5"]),
        (0, "n3\nn5\n".into())
    );
    assert_eq!(
        run("scr_unknown", &["list-down-nodes", "n[1-2]"]),
        (1, String::new())
    );
}

/// `scr_retries_halt` says halt (0) for a job that finished, as SCR 3.1's
/// does, so a 3.1 job script's relaunch loop ends: LLNL's own finished
/// prefix holds `ExitReason SCR_FINALIZE_CALLED`. `scr should-exit` leaves
/// that reason to the next `SCR_Init` (1: the run loop decides by the
/// launch's exit). A halt file that cannot be read is a halt, to be safe.
#[test]
fn scr_retries_halt_halts_a_finished_job_as_scr31s_does() {
    let l = Links::new();
    let here = l.dir.path();
    let work = tempfile::tempdir().unwrap();
    let prefix = work.path().join("prefix");
    common::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llnl-3.1/bypass"),
        &prefix,
    );
    let p = prefix.to_str().unwrap();
    let o = l.run("scr_retries_halt", &["--dir", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("SCR_FINALIZE_CALLED"), "{}", out(&o));
    let o = l.run("scr_unknown", &["should-exit", "--prefix", p], here);
    assert_eq!(code(&o), 1, "{}", out(&o));
    std::fs::write(prefix.join(".scr/halt.scr"), b"not a halt file at all").unwrap();
    let o = l.run("scr_retries_halt", &["--dir", p], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("cannot be read"), "{}", out(&o));
}

/// With `SCR_ENABLE=0`, `scr_srun` runs the launch once as given, without
/// the run loop, and exits with its status, as SCR 3.1's does (`srun`
/// here is a stand-in on PATH that records its arguments and runs the
/// application; no allocation is needed).
#[test]
fn scr_srun_with_scr_disabled_runs_the_launch_once_as_given() {
    let (l, work, calls, app) = staged("srun", "#!/bin/sh\nexit 3\n");
    let w = work.path();
    let path = path_with(&w.join("bin"));
    let o = Command::new(l.path("scr_srun"))
        .args(["-N2", "-n4"])
        .arg(&app)
        .current_dir(w)
        .env("PATH", path)
        .env("SCR_ENABLE", "0")
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_NODELIST")
        .env_remove("SLURM_JOB_NODELIST")
        .output()
        .unwrap();
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        format!("-N2 -n4 {}\n", app.display()),
        "one launch, as given"
    );
    // 3.1's --run-cmd/--restart-cmd: without SCR there is no checkpoint,
    // so the launch runs the run command (split at blanks), never the
    // restart command.
    std::fs::write(&calls, "").unwrap();
    let run_cmd = format!("{} --from scratch", app.display());
    let o = Command::new(l.path("scr_srun"))
        .args([
            "-N2",
            "--run-cmd",
            &run_cmd,
            "-rs=./restart SCR_CKPT_NAME",
            "-n4",
        ])
        .current_dir(w)
        .env("PATH", path_with(&w.join("bin")))
        .env("SCR_ENABLE", "0")
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_NODELIST")
        .env_remove("SLURM_JOB_NODELIST")
        .output()
        .unwrap();
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        format!("-N2 -n4 {} --from scratch\n", app.display()),
        "one launch of the run command"
    );
    // Given without a command, twice, or beside an application: refused
    // by name (USAGE), never passed on.
    for (args, says) in [
        (vec!["-N2", "-rs"], "-rs: give the command"),
        (vec!["-rc", "./a", "--run-cmd=./b"], "--run-cmd given twice"),
        (
            vec!["-N2", "-rc=./a", "./app"],
            "\"./app\" after the launcher's arguments",
        ),
    ] {
        let o = Command::new(l.path("scr_srun"))
            .args(&args)
            .env("PATH", path_with(&w.join("bin")))
            .output()
            .unwrap();
        assert_eq!(code(&o), 2, "{args:?}: {}", err(&o));
        assert!(err(&o).contains(says), "{args:?}: {}", err(&o));
        assert_eq!(
            std::fs::read_to_string(&calls).unwrap().lines().count(),
            1,
            "{args:?} launched"
        );
    }
}

/// SCR 3.1's `SCR_RETRIES`: without `SCR_RUNS`, the loop launches a job
/// that keeps failing SCR_RETRIES + 1 times (here through a stand-in
/// `jsrun` in an LSF allocation; each launch of the application is
/// recorded).
#[test]
fn scr_retries_sets_how_many_times_a_failing_job_is_launched() {
    let (l, work, calls, app) = staged("jsrun", "#!/bin/sh\nexit 1\n");
    let w = work.path();
    let o = jsrun_in_lsf(&l, w, &app, &[], &[("SCR_RETRIES", "2")]);
    assert_ne!(code(&o), 0, "{}", err(&o));
    assert!(err(&o).contains("SCR_RUNS launches made"), "{}", err(&o));
    let launches = std::fs::read_to_string(&calls)
        .unwrap()
        .lines()
        .filter(|c| c.ends_with(&*app.to_string_lossy()))
        .count();
    assert_eq!(launches, 3, "SCR_RETRIES=2: three launches");
    // A launch may last until the allocation ends (here in two days), and
    // a little more: no day's bound.
    let end = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2 * 86_400;
    let o = jsrun_in_lsf(&l, w, &app, &[], &[("SCR_END_TIME", &end.to_string())]);
    let said = err(&o);
    let bound: u64 = said
        .split("each bounded to ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no bound in {said}"));
    assert!((2 * 86_400..=2 * 86_400 + 400).contains(&bound), "{said}");
}

/// SCR 3.1's job-script watchdog: with `SCR_WATCHDOG=1` a launch whose
/// flush file shows no new checkpoint for SCR_WATCHDOG_TIMEOUT is killed
/// and counted; without it, SCR_WATCHDOG_TIMEOUT does not bound a launch
/// (it did here, so a 3.1 job that set it for its flushes had every
/// launch killed after that long). SCR_WATCHDOG=1 without a timeout is
/// refused, naming it.
#[test]
fn scr_watchdog_kills_a_launch_without_progress_as_scr31s_does() {
    let (l, work, _calls, app) = staged("jsrun", "#!/bin/sh\nsleep 3\n");
    let w = work.path();
    let o = jsrun_in_lsf(&l, w, &app, &[], &[("SCR_WATCHDOG_TIMEOUT", "1")]);
    assert_eq!(
        code(&o),
        0,
        "not bounded by SCR_WATCHDOG_TIMEOUT: {}",
        err(&o)
    );
    assert!(err(&o).contains("only with SCR_WATCHDOG=1"), "{}", err(&o));
    let env = [
        ("SCR_WATCHDOG", "1"),
        ("SCR_WATCHDOG_TIMEOUT", "1"),
        ("SCR_RUNS", "1"),
    ];
    let o = jsrun_in_lsf(&l, w, &app, &[], &env);
    assert_ne!(code(&o), 0, "{}", err(&o));
    assert!(
        err(&o).contains("killed by the watchdog: no new checkpoint or flush for 1 s"),
        "{}",
        err(&o)
    );
    let o = jsrun_in_lsf(&l, w, &app, &[], &[("SCR_WATCHDOG", "1")]);
    assert_eq!(code(&o), 2, "{}", err(&o));
    assert!(err(&o).contains("SCR_WATCHDOG_TIMEOUT"), "{}", err(&o));
}

/// `scr_prerun -p DIR`, as SCR 3.1's job scripts start: the flush and
/// nodes files an earlier allocation left go, the index, the halt file and
/// the datasets stay; silent unless `-v`; nothing at all with
/// `SCR_ENABLE=0`; a prefix that is not there fails, naming it.
#[test]
fn scr_prerun_prepares_the_prefix_as_scr31s_does() {
    let l = Links::new();
    let here = l.dir.path();
    let work = tempfile::tempdir().unwrap();
    let p = work.path().join("prefix");
    let earlier = |p: &Path| {
        std::fs::create_dir_all(p.join(".scr")).unwrap();
        for f in ["flush.scr", "nodes.scr", "index.scr", "halt.scr"] {
            std::fs::write(p.join(".scr").join(f), b"x").unwrap();
        }
    };
    earlier(&p);
    let ps = p.to_str().unwrap();
    let o = Command::new(l.path("scr_prerun"))
        .args(["-p", ps])
        .env("SCR_ENABLE", "0")
        .output()
        .unwrap();
    assert_eq!((code(&o), out(&o).as_str()), (0, ""), "{}", err(&o));
    assert!(p.join(".scr/flush.scr").exists(), "SCR_ENABLE=0 leaves it");
    let o = l.run("scr_prerun", &["-p", ps], here);
    assert_eq!((code(&o), out(&o).as_str()), (0, ""), "{}", err(&o));
    assert!(!p.join(".scr/flush.scr").exists() && !p.join(".scr/nodes.scr").exists());
    assert!(p.join(".scr/index.scr").exists() && p.join(".scr/halt.scr").exists());
    earlier(&p);
    let o = l.run("scr_prerun", &["-p", ps, "-v"], here);
    assert_eq!(code(&o), 0, "{}", err(&o));
    for f in ["flush.scr", "nodes.scr"] {
        assert!(
            out(&o).contains(&format!("removed {ps}/.scr/{f}")),
            "{}",
            out(&o)
        );
    }
    // Without -p: SCR_PREFIX, else the current directory.
    let cwd = work.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let o = l.run("scr_prerun", &[], &cwd);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(cwd.join(".scr").is_dir());
    let missing = work.path().join("nope");
    let o = l.run("scr_prerun", &["-p", missing.to_str().unwrap()], here);
    assert_eq!(code(&o), 8, "{}", err(&o));
    assert!(err(&o).contains("nope"), "{}", err(&o));
    assert!(!missing.exists());
}

/// A stand-in `srun` in `bin` that runs the command of `srun ... --nodelist
/// NODE CMD` here, except on `bad`, whose `scr check-node` says the node is
/// down.
fn fake_srun_with_bad_node(bin: &Path, bad: &str) {
    std::fs::create_dir_all(bin).unwrap();
    script(
        &bin.join("srun"),
        &format!(
            "#!/bin/sh\nnode=\n\
             while [ $# -gt 0 ]; do case \"$1\" in --nodelist) node=$2; shift 2 ;; -*) shift ;; *) break ;; esac; done\n\
             if [ \"$node\" = '{bad}' ]; then echo 'DOWN: cache base gone'; exit 1; fi\n\
             exec \"$@\"\n"
        ),
    );
}

/// `scr_should_exit`, as SCR 3.1's relaunch loop asks it after each launch:
/// stop (0) on a halt condition, a finished job included, or when the
/// healthy nodes left are fewer than a launch needs (SCR_MIN_NODES, else
/// the last run's from the nodes file, else the whole allocation); go on
/// (1) otherwise. Down: --down, SCR_EXCLUDE_NODES, and the nodes whose
/// check fails through the launcher `-j` names.
#[test]
fn scr_should_exit_stops_a_job_left_with_too_few_nodes() {
    use scr::records::{nodes::Nodes, Record as _};
    let l = Links::new();
    let work = tempfile::tempdir().unwrap();
    let prefix = work.path().join("prefix");
    std::fs::create_dir_all(prefix.join(".scr")).unwrap();
    fake_srun_with_bad_node(&work.path().join("bin"), "n3");
    let p = prefix.to_str().unwrap();
    let ask = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(l.path("scr_should_exit"));
        c.args(["-p", p]).args(args);
        c.env("SCR_NODELIST", "n[1-4]")
            .env("PATH", path_with(&work.path().join("bin")));
        for k in [
            "SLURM_JOB_ID",
            "SLURM_JOBID",
            "SCR_MIN_NODES",
            "SCR_EXCLUDE_NODES",
        ] {
            c.env_remove(k);
        }
        c.envs(env.iter().copied());
        let o = c.output().unwrap();
        (code(&o), out(&o) + &err(&o))
    };
    // All four nodes healthy: go on.
    let (c, said) = ask(&["-v"], &[]);
    assert_eq!(c, 1, "{said}");
    assert!(said.contains("4 healthy nodes left, 4 needed"), "{said}");
    // One down and no nodes file: the whole allocation is needed.
    let (c, said) = ask(&["--down", "n2"], &[]);
    assert_eq!(c, 0, "{said}");
    assert!(
        said.contains("3 healthy nodes left, fewer than the 4 needed"),
        "{said}"
    );
    // The last run had 3 nodes: 3 are enough, 2 are not.
    Nodes { nodes: 3 }
        .write_file(prefix.join(".scr/nodes.scr"))
        .unwrap();
    assert_eq!(ask(&["--down", "n2"], &[]).0, 1);
    assert_eq!(ask(&["--down", "n2"], &[("SCR_EXCLUDE_NODES", "n4")]).0, 0);
    // SCR_MIN_NODES comes before the nodes file.
    assert_eq!(ask(&["--down", "n2"], &[("SCR_MIN_NODES", "4")]).0, 0);
    // -j srun: each node's check runs through srun; n3's fails.
    let (c, said) = ask(&["-j", "srun", "-v", "--down", "n2"], &[]);
    assert_eq!(c, 0, "{said}");
    assert!(said.contains("n3: cache base gone"), "{said}");
    assert!(
        said.contains("2 healthy nodes left, fewer than the 3 needed"),
        "{said}"
    );
    // A halt condition stops the job before any node is looked at.
    let o = l.run("scr_halt", &["--checkpoints", "0", p], l.dir.path());
    assert_eq!(code(&o), 0, "{}", err(&o));
    let (c, said) = ask(&[], &[("SCR_NODELIST", "")]);
    assert_eq!(c, 0, "{said}");
    // `scr should-exit` looks at the halt file alone unless asked.
    let o = l.run("scr_halt", &["--remove", p], l.dir.path());
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = Command::new(l.path("scr_unknown"))
        .args(["should-exit", "-p", p])
        .env_remove("SCR_NODELIST")
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", err(&o));
}

/// `scr_list_down_nodes -j srun -l -s SECS`, as a 3.1 job script checks
/// its nodes between launches: the check runs on each node through the
/// launcher named, and each down node is logged as NODE_FAIL with its
/// reason and the seconds given.
#[test]
fn scr_list_down_nodes_checks_through_the_launcher_and_logs_each_down_node() {
    let l = Links::new();
    let work = tempfile::tempdir().unwrap();
    let prefix = work.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    fake_srun_with_bad_node(&work.path().join("bin"), "n2");
    let run = |args: &[&str]| {
        let o = Command::new(l.path("scr_list_down_nodes"))
            .args(args)
            .env("PATH", path_with(&work.path().join("bin")))
            .env("SCR_PREFIX", &prefix)
            .env("SCR_LOG_ENABLE", "1")
            .env("SCR_JOB_ID", "77")
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURM_JOBID")
            .env_remove("SCR_EXCLUDE_NODES")
            .output()
            .unwrap();
        (code(&o), out(&o), err(&o))
    };
    // Without a launcher outside SLURM, nothing runs on the nodes.
    assert_eq!(run(&["n[1-3]"]).0, 0);
    let (c, o, e) = run(&["-j", "srun", "n[1-3]"]);
    assert_eq!((c, o.as_str()), (1, "n2\n"), "{e}");
    assert!(!prefix.join(".scr/log").exists(), "logged only with -l");
    let (c, o, e) = run(&["-j", "srun", "-l", "-s", "42", "-r", "n[1-3]"]);
    assert_eq!((c, o.as_str()), (1, "n2: cache base gone\n"), "{e}");
    let log = std::fs::read_to_string(prefix.join(".scr/log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("NODE_FAIL"))
        .unwrap_or_else(|| panic!("no NODE_FAIL in {log}"));
    assert!(
        line.contains("n2: cache base gone") && line.contains("42"),
        "{line}"
    );
    // -s means nothing without -l: refused, not ignored.
    assert_eq!(run(&["-j", "srun", "-s", "42", "n[1-3]"]).0, 2);
    // 3.1's -f/--free is taken, with a warning naming it: it has no effect.
    let (c, o, e) = run(&["-f", "-j", "srun", "n[1-3]"]);
    assert_eq!((c, o.as_str()), (1, "n2\n"), "{e}");
    assert!(e.contains("-f/--free has no effect"), "{e}");
}

/// `scr_srun` in a SLURM allocation that does not export its end (SLURM
/// before 23.02): the loop asks `scontrol show job` for its EndTime, as
/// 3.1's scr_run does, gives it to the job as SCR_END_TIME (which
/// SCR_HALT_SECONDS needs) and bounds each launch by it. `srun`,
/// `scontrol` and `sinfo` are stand-ins on PATH; the zone is UTC.
#[test]
fn scr_srun_gives_the_job_the_allocations_end_from_scontrol() {
    let (l, work, _calls, app) = staged("unused", "");
    let w = work.path();
    let bin = w.join("bin");
    fake_srun_with_bad_node(&bin, "none");
    script(
        &bin.join("scontrol"),
        "#!/bin/sh\necho 'JobId=5 JobName=t JobState=RUNNING EndTime=2026-12-01T10:00:00 Deadline=N/A'\n",
    );
    script(&bin.join("sinfo"), "#!/bin/sh\nexit 0\n");
    let seen = w.join("end_time");
    script(
        &app,
        &format!("#!/bin/sh\necho \"$SCR_END_TIME\" > '{}'\n", seen.display()),
    );
    for d in ["prefix", "cntl", "cache"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    let mut c = Command::new(l.path("scr_srun"));
    c.args(["--no-postrun", "-N1", "-n1"])
        .arg(&app)
        .current_dir(w)
        .env("PATH", path_with(&bin))
        .env("TZ", "UTC")
        .env("SLURM_JOB_ID", "5")
        .env("SLURM_JOB_NODELIST", "c1")
        .env("SCR_PREFIX", w.join("prefix"))
        .env("SCR_CNTL_BASE", w.join("cntl"))
        .env("SCR_CACHE_BASE", w.join("cache"));
    for k in [
        "SCR_END_TIME",
        "SLURM_JOB_END_TIME",
        "SLURM_JOBID",
        "SCR_RUNS",
    ] {
        c.env_remove(k);
    }
    let o = c.output().unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(
        err(&o).contains("the allocation ends at 1796119200"),
        "{}",
        err(&o)
    );
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "1796119200");
}

/// The same in an LSF allocation: `bjobs -o time_left` says 1:30 left, so
/// the job gets SCR_END_TIME an hour and a half from now (`bjobs` and
/// `jsrun` are stand-ins on PATH).
#[test]
fn scr_jsrun_gives_the_job_the_allocations_end_from_bjobs() {
    let (l, work, _calls, app) = staged("jsrun", "");
    let w = work.path();
    let seen = w.join("end_time");
    script(
        &app,
        &format!("#!/bin/sh\necho \"$SCR_END_TIME\" > '{}'\n", seen.display()),
    );
    script(
        &w.join("bin").join("bjobs"),
        "#!/bin/sh\n[ \"$3\" = 7 ] || exit 1\nprintf 'TIME_LEFT\\n1:30 L\\n'\n",
    );
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = now();
    let o = jsrun_in_lsf(&l, w, &app, &[], &[("LSB_JOBID", "7")]);
    let after = now();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let end: u64 = std::fs::read_to_string(&seen)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("SCR_END_TIME: {e}; {}", err(&o)));
    assert!((before + 5400..=after + 5400).contains(&end), "{end}");
}

/// In a Flux allocation (`FLUX_JOB_ID`) `scr run -- flux run` gives the job
/// the allocation's end as SCR_END_TIME: now and what `flux job timeleft`
/// prints for the enclosing job (a stand-in `flux` on PATH: the node list,
/// the time left, `flux run` running its command).
#[test]
fn scr_run_gives_the_job_the_allocations_end_from_flux() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let bin = w.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    script(
        &bin.join("flux"),
        "#!/bin/sh\n\
         case \"$1 $2\" in\n\
         'getattr hostlist') echo c1 ;;\n\
         'job timeleft') [ $# -eq 2 ] || exit 1; echo 5400 ;;\n\
         run\\ *) shift; while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done; exec \"$@\" ;;\n\
         *) exit 1 ;;\n\
         esac\n",
    );
    let seen = w.join("end_time");
    let app = w.join("app");
    script(
        &app,
        &format!("#!/bin/sh\necho \"$SCR_END_TIME\" > '{}'\n", seen.display()),
    );
    for d in ["prefix", "cntl", "cache"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = now();
    let mut c = Command::new(env!("CARGO_BIN_EXE_scr"));
    c.args(["run", "--no-postrun", "--", "flux", "run"])
        .arg(&app)
        .current_dir(w)
        .env("PATH", path_with(&bin))
        .env("FLUX_JOB_ID", "f2WpQ9n5")
        .env("SCR_PREFIX", w.join("prefix"))
        .env("SCR_CNTL_BASE", w.join("cntl"))
        .env("SCR_CACHE_BASE", w.join("cache"));
    for k in [
        "SCR_RUNS",
        "SCR_END_TIME",
        "SCR_NODELIST",
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
        "LSB_JOBID",
        "LSB_MCPU_HOSTS",
        "LSB_HOSTS",
    ] {
        c.env_remove(k);
    }
    let o = c.output().unwrap();
    let after = now();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(
        err(&o).contains("SCR_END_TIME, from the resource manager"),
        "{}",
        err(&o)
    );
    let end: u64 = std::fs::read_to_string(&seen)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("SCR_END_TIME: {e}; {}", err(&o)));
    assert!((before + 5400..=after + 5400).contains(&end), "{end}");
}
