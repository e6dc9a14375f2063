//! SCR 3.1's command names: a job script written for SCR 3.1 calls
//! `scr_halt`, `scr_retries_halt`, `scr_glob_hosts`, … and ci/install links
//! each name to the one `scr` binary, which runs the subcommand that does
//! that command's work with SCR 3.1's options and exit codes. Each test runs
//! the binary through links named as SCR 3.1 names them.

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
/// reason or 1 (run again), `scr_halt -v` names the file, and
/// `scr_print_hash_file` and `scr_flush_file` read the prefix's files.
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
    // No flush file: scr_flush_file --latest finds no dataset and fails,
    // naming the file (ABSENT, 5, where SCR 3.1 exits 1: a script's test
    // of the status reads it the same).
    let o = l.run("scr_flush_file", &["--dir", p, "--latest"], here);
    assert_eq!(code(&o), 5, "{}{}", out(&o), err(&o));
    assert!(err(&o).contains(".scr/flush.scr"), "{}", err(&o));
}
