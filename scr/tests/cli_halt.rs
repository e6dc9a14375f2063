//! `scr halt` and `scr flush-file`, run as an operator or a script would:
//! file contents and exit codes.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use scr::halt::{halt_path, REASON_JOB_HALTED};
use scr::kvtree::file::FileLock;
use scr::records::dataset::Dataset;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::halt::Halt;
use scr::records::Record;

fn scr_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scr"));
    c.args(args).current_dir(dir).env_remove("SCR_PREFIX");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the scr binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("UTF-8")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

/// A prefix directory and `scr` run with it as argument.
struct Prefix {
    tmp: tempfile::TempDir,
}

impl Prefix {
    fn new() -> Prefix {
        Prefix {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> &Path {
        self.tmp.path()
    }
    fn arg(&self) -> &str {
        self.path().to_str().unwrap()
    }
    fn scr(&self, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.push(self.arg());
        scr_in(self.path(), &all, &[])
    }
    fn halt(&self) -> Halt {
        Halt::read_file(halt_path(self.path())).unwrap()
    }
}

#[test]
fn bare_halt_and_immediate_stop_the_job_at_its_next_check() {
    let p = Prefix::new();
    let o = p.scr(&["halt"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("Setting ExitReason\n"));
    assert!(text(&o.stdout).contains("ExitReason:       JOB_HALTED"));
    assert_eq!(p.halt().exit_reason.as_deref(), Some(REASON_JOB_HALTED));

    let p = Prefix::new();
    assert_eq!(code(&p.scr(&["halt", "--immediate"])), 0);
    assert_eq!(
        p.halt(),
        Halt {
            exit_reason: Some(REASON_JOB_HALTED.into()),
            ..Halt::default()
        }
    );
    let o = p.scr(&["halt", "--reason", "maintenance"]);
    assert_eq!(code(&o), 0);
    assert_eq!(p.halt().exit_reason.as_deref(), Some("maintenance"));
}

#[test]
fn conditions_are_set_and_unset_one_by_one() {
    let p = Prefix::new();
    let o = p.scr(&[
        "halt",
        "--checkpoints",
        "2",
        "--before",
        "2030-01-01T00:00Z",
        "--after",
        "@1893459600",
        "--seconds",
        "600",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout).lines().take(5).collect::<Vec<_>>(),
        [
            "Setting CheckpointsLeft",
            "Setting ExitAfter",
            "Setting ExitBefore",
            "Setting HaltSeconds",
            ""
        ]
    );
    let want = Halt {
        checkpoints_left: Some(2),
        exit_before_s: Some(1_893_456_000),
        exit_after_s: Some(1_893_459_600),
        halt_seconds_s: Some(600),
        ..Halt::default()
    };
    assert_eq!(p.halt(), want);
    assert!(
        text(&o.stdout).contains("(1893455400)"),
        "ExitBefore - HaltSeconds"
    );

    for (flag, f) in [
        (
            "--unset-checkpoints",
            (|h: &mut Halt| h.checkpoints_left = None) as fn(&mut Halt),
        ),
        ("--unset-before", |h| h.exit_before_s = None),
        ("--unset-after", |h| h.exit_after_s = None),
        ("--unset-seconds", |h| h.halt_seconds_s = None),
    ] {
        let before = p.halt();
        let o = p.scr(&["halt", flag]);
        assert_eq!(code(&o), 0, "{flag}: {}", text(&o.stderr));
        let mut expected = before;
        f(&mut expected);
        assert_eq!(p.halt(), expected, "{flag}");
    }
    assert_eq!(p.halt(), Halt::default());
    assert!(p.scr(&["halt", "--list"]).stdout.ends_with(b"  None\n"));

    // A relative time lands within a few seconds of now + 1 h.
    assert_eq!(code(&p.scr(&["halt", "--after", "+1h"])), 0);
    let now = scr::clock::Clock::unix_secs(&scr::clock::SystemClock);
    let after = p.halt().exit_after_s.unwrap();
    assert!(
        (now + 3590..=now + 3600).contains(&after),
        "{after} vs {now}"
    );

    // --unset-reason lets a finalised job run again.
    Halt::update_file(halt_path(p.path()), |h| {
        h.exit_reason = Some("SCR_FINALIZE_CALLED".into())
    })
    .unwrap();
    assert_eq!(code(&p.scr(&["halt", "--unset-reason"])), 0);
    assert_eq!(p.halt().exit_reason, None);
}

#[test]
fn list_prints_text_or_json_and_changes_nothing() {
    let p = Prefix::new();
    let o = p.scr(&["halt", "--list"]);
    assert_eq!(code(&o), 0);
    assert_eq!(
        text(&o.stdout),
        format!(
            "Halt file settings for {}:\n  None\n",
            halt_path(p.path()).display()
        )
    );
    assert!(!halt_path(p.path()).exists(), "--list creates nothing");
    let o = p.scr(&["halt", "--list", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["exists"], false);
    assert_eq!(j["halt_now"], serde_json::Value::Null);

    p.scr(&["halt", "-c", "0", "-s", "30"]);
    let o = p.scr(&["halt", "-l", "--json"]);
    assert_eq!(code(&o), 0);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&j["checkpoints_left"], &j["halt_seconds_s"], &j["exists"]),
        (
            &serde_json::json!(0),
            &serde_json::json!(30),
            &serde_json::json!(true)
        )
    );
    assert_eq!(j["halt_now"]["reason"], "NO_CHECKPOINTS_LEFT");
    // Edits with --json print the changes too.
    let o = p.scr(&["halt", "-c", "4", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["changes"], serde_json::json!(["Setting CheckpointsLeft"]));
    assert_eq!(j["checkpoints_left"], 4);
}

#[test]
fn remove_deletes_the_file_and_is_idempotent() {
    let p = Prefix::new();
    p.scr(&["halt"]);
    let o = p.scr(&["halt", "--remove"]);
    assert_eq!(code(&o), 0);
    assert!(text(&o.stdout).starts_with("Removed halt file"));
    assert!(!halt_path(p.path()).exists());
    let o = p.scr(&["halt", "-r"]);
    assert_eq!(code(&o), 0);
    assert!(text(&o.stdout).starts_with("No halt file"));
}

#[test]
fn the_prefix_comes_from_arguments_scr_prefix_or_the_current_directory() {
    let (a, b) = (Prefix::new(), Prefix::new());
    let o = scr_in(Path::new("/"), &["halt", "-c", "3", a.arg(), b.arg()], &[]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(a.halt().checkpoints_left, Some(3));
    assert_eq!(b.halt().checkpoints_left, Some(3));

    let c = Prefix::new();
    let o = scr_in(
        Path::new("/"),
        &["halt", "-c", "5"],
        &[("SCR_PREFIX", c.arg())],
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(c.halt().checkpoints_left, Some(5));

    let d = Prefix::new();
    let o = scr_in(d.path(), &["halt", "-c", "6"], &[]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(d.halt().checkpoints_left, Some(6));
}

#[test]
fn usage_errors_exit_2_and_change_nothing() {
    let p = Prefix::new();
    p.scr(&["halt", "-c", "1"]);
    let before = p.halt();
    for args in [
        &["halt", "-c", "2", "--unset-checkpoints"][..],
        &["halt", "--seconds", "1", "--unset-seconds"],
        &["halt", "--before", "teatime"],
        &["halt", "--after", "2026-02-30 10:00"],
        &["halt", "--checkpoints", "-1"],
        &["halt", "--checkpoints", "many"],
        &["halt", "--remove", "-c", "2"],
        &["halt", "--immediate", "--reason", "x"],
        &["halt", "--reason", " "],
        &["halt", "--bogus"],
    ] {
        let o = p.scr(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", text(&o.stderr));
        assert!(!o.stderr.is_empty(), "{args:?} says why");
    }
    assert_eq!(p.halt(), before);
    let o = p.scr(&["halt", "--before", "teatime"]);
    assert!(text(&o.stderr).contains("teatime"), "{}", text(&o.stderr));
}

#[test]
fn failures_exit_with_their_codes_naming_the_file() {
    // A prefix that is not there is a wrong argument: USAGE.
    let o = scr_in(Path::new("/"), &["halt", "/no/such/prefix"], &[]);
    assert_eq!(code(&o), 2, "USAGE");
    assert!(text(&o.stderr).contains("/no/such/prefix"));

    let p = Prefix::new();
    std::fs::create_dir_all(p.path().join(".scr")).unwrap();
    std::fs::write(halt_path(p.path()), b"garbage that is no kvtree").unwrap();
    for args in [&["halt", "-c", "1"][..], &["halt", "--list"]] {
        let o = p.scr(args);
        assert_eq!(code(&o), 6, "DAMAGED {args:?}");
        assert!(text(&o.stderr).contains("halt.scr"), "{}", text(&o.stderr));
    }
    assert_eq!(
        std::fs::read(halt_path(p.path())).unwrap(),
        b"garbage that is no kvtree"
    );
}

/// A link at `<prefix>/.scr`, or at the halt file itself, is refused
/// (FAILED, naming it): the halt file is never read, written or removed
/// out of the prefix.
#[test]
fn halt_never_goes_through_a_link_in_the_prefix() {
    let p = Prefix::new();
    let out = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(out.path(), p.path().join(".scr")).unwrap();
    for args in [
        &["halt", "-c", "1"][..],
        &["halt", "--list"],
        &["halt", "--remove"],
    ] {
        let o = p.scr(args);
        assert_eq!(code(&o), 8, "FAILED {args:?}");
        assert!(
            text(&o.stderr).contains("symbolic link"),
            "{}",
            text(&o.stderr)
        );
    }
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none());

    let q = Prefix::new();
    std::fs::create_dir_all(q.path().join(".scr")).unwrap();
    let target = out.path().join("victim");
    std::fs::write(&target, b"not SCR's").unwrap();
    std::os::unix::fs::symlink(&target, halt_path(q.path())).unwrap();
    for args in [&["halt", "-c", "1"][..], &["halt", "--remove"]] {
        let o = q.scr(args);
        assert_eq!(code(&o), 8, "FAILED {args:?}");
        assert!(text(&o.stderr).contains("halt.scr"), "{}", text(&o.stderr));
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"not SCR's");
    assert!(
        halt_path(q.path()).symlink_metadata().is_ok(),
        "the link stays"
    );
}

#[test]
fn an_edit_waits_for_the_lock_a_running_job_holds() {
    let p = Prefix::new();
    p.scr(&["halt", "-c", "3"]);
    let lock = FileLock::acquire(&halt_path(p.path())).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(["halt", "--unset-checkpoints", p.arg()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "scr halt finished while the lock was held"
    );
    assert_eq!(p.halt().checkpoints_left, Some(3));
    drop(lock);
    assert!(child.wait().unwrap().success());
    assert_eq!(p.halt().checkpoints_left, None);
}

/// A flush file with a checkpoint in cache (3), an output on both (4), a
/// checkpoint being flushed (5) and one with no location recorded (6).
fn flush_prefix() -> Prefix {
    let p = Prefix::new();
    let mut f = FlushFile::default();
    f.location_set(3, Location::Cache);
    f.location_set(4, Location::Cache);
    f.location_set(4, Location::Pfs);
    f.location_set(5, Location::Flushing);
    f.datasets.entry(6).or_default();
    for (id, ckpt, name) in [
        (3, true, "ckpt.3"),
        (4, false, "viz.4"),
        (5, true, "ckpt.5"),
        (6, true, "ckpt.6"),
    ] {
        let e = f.datasets.get_mut(&id).unwrap();
        e.checkpoint = Some(ckpt);
        e.output = Some(!ckpt);
        e.name = Some(name.into());
        e.dir = Some(Dataset::default_name(id));
    }
    f.datasets.get_mut(&6).unwrap().dir = None;
    std::fs::create_dir_all(p.path().join(".scr")).unwrap();
    f.write_file(p.path().join(".scr").join(FLUSH_FILE))
        .unwrap();
    p
}

#[test]
fn flush_file_answers_with_scr_flush_file_exit_codes() {
    let p = flush_prefix();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--latest"], 0, "6\n"),
        (&["--needflush", "3"], 0, ""),
        (&["--need-flush", "5"], 0, ""),
        (&["--needflush", "4"], 1, ""),
        (&["--needflush", "9"], 1, ""),
        (&["--location", "4"], 0, "CACHE\nPFS\n"),
        (&["--location", "5"], 0, "FLUSHING\n"),
        (&["--location", "6"], 0, "NONE\n"),
        (&["--location", "9"], 1, ""),
        (&["--subdir", "3"], 0, "scr.dataset.3\n"),
        (&["--subdir", "6"], 1, ""),
        (&["--name", "4"], 0, "viz.4\n"),
        (&["--list-ckpt"], 0, "6 5 3\n"),
        (&["--list-ckpt", "--before", "6"], 0, "5 3\n"),
        (&["--list-ckpt", "--before", "3"], 1, ""),
        (&["--list-output"], 0, "4\n"),
        (&["--latest", "--json"], 0, "{\"latest\":6}\n"),
        (
            &["--needflush", "4", "--json"],
            1,
            "{\"id\":4,\"need_flush\":false}\n",
        ),
        (
            &["--location", "4", "--json"],
            0,
            "{\"id\":4,\"locations\":[\"CACHE\",\"PFS\"]}\n",
        ),
    ];
    for (args, want_code, want_out) in cases {
        let mut all = vec!["flush-file"];
        all.extend_from_slice(args);
        let o = p.scr(&all);
        assert_eq!(code(&o), *want_code, "{args:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), *want_out, "{args:?}");
        assert_eq!(text(&o.stderr), "", "{args:?}: answers are quiet");
    }
    // --dir, SCR_PREFIX and the current directory name the prefix too.
    let o = scr_in(
        Path::new("/"),
        &["flush-file", "--dir", p.arg(), "--latest"],
        &[],
    );
    assert_eq!(text(&o.stdout), "6\n");
    let o = scr_in(
        Path::new("/"),
        &["flush-file", "--latest"],
        &[("SCR_PREFIX", p.arg())],
    );
    assert_eq!(text(&o.stdout), "6\n");
    let o = scr_in(p.path(), &["flush-file", "--latest"], &[]);
    assert_eq!(text(&o.stdout), "6\n");
}

#[test]
fn flush_file_errors() {
    // No flush file: nothing was recorded (ABSENT, not NO: said on stderr).
    let p = Prefix::new();
    let o = p.scr(&["flush-file", "--latest"]);
    assert_eq!(code(&o), 5, "ABSENT");
    assert!(text(&o.stderr).contains("flush.scr"));
    // A damaged one: DAMAGED, naming file and offset.
    std::fs::create_dir_all(p.path().join(".scr")).unwrap();
    let mut bytes = Vec::new();
    let mut f = FlushFile::default();
    f.location_set(1, Location::Cache);
    f.write_file(p.path().join(".scr").join(FLUSH_FILE))
        .unwrap();
    bytes.extend(std::fs::read(p.path().join(".scr").join(FLUSH_FILE)).unwrap());
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    std::fs::write(p.path().join(".scr").join(FLUSH_FILE), &bytes).unwrap();
    let o = p.scr(&["flush-file", "--latest"]);
    assert_eq!(code(&o), 6, "DAMAGED: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains("flush.scr"), "{}", text(&o.stderr));
    // Usage: one question, positive ids, --before only with a list, not
    // both --dir and a positional prefix.
    let p = flush_prefix();
    for args in [
        &["flush-file"][..],
        &["flush-file", "--latest", "--list-ckpt"],
        &["flush-file", "--needflush", "0"],
        &["flush-file", "--location", "x"],
        &["flush-file", "--latest", "--before", "3"],
        &["flush-file", "--latest", "--dir", "/tmp"],
    ] {
        let o = p.scr(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", text(&o.stderr));
    }
}
