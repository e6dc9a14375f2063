//! The `scr` command exits with the codes of `scr::exit` (docs/exit-codes.md):
//! one condition per code, the table in `--help`, and a reader that goes
//! away ends the command quietly.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use scr::exit::Code;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::Record;

fn scr(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scr"));
    c.args(args)
        .env_remove("SCR_PREFIX")
        .env_remove("SCR_CONF_FILE")
        .env_remove("SCR_CONFIG_FILE");
    for (k, v) in vars {
        c.env(k, v);
    }
    c.output().expect("the scr binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The code `o` exited with, as the table's name (so a failure says
/// which condition it saw).
fn code(o: &Output) -> Option<Code> {
    o.status.code().and_then(Code::from_value)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

#[test]
fn help_lists_every_code_of_the_table() {
    let o = scr(&["--help"], &[]);
    assert_eq!(code(&o), Some(Code::Success));
    let help = String::from_utf8_lossy(&o.stdout);
    for c in Code::ALL {
        let line = format!("{:>2}  {:<10}  {}", c.value(), c.name(), c.meaning());
        assert!(help.contains(&line), "{c} missing from scr --help:\n{help}");
    }
    // Each subcommand's help names the codes it uses, from the table.
    let o = scr(&["flush-file", "--help"], &[]);
    let help = String::from_utf8_lossy(&o.stdout);
    for c in [Code::No, Code::Absent, Code::Damaged] {
        assert!(
            help.contains(&format!("{:>2}  {}", c.value(), c.name())),
            "{c} missing from scr flush-file --help:\n{help}"
        );
    }
}

#[test]
fn each_condition_exits_with_its_own_code() {
    let d = tempfile::tempdir().unwrap();
    // Usage (clap's code).
    assert_eq!(code(&scr(&["print"], &[])), Some(Code::Usage));
    // The file the command is about is not there / is not a kvtree file.
    let missing = d.path().join("nodes.scr");
    assert_eq!(
        code(&scr(&["print", path(&missing)], &[])),
        Some(Code::Absent)
    );
    let garbage = d.path().join("garbage.scr");
    std::fs::write(&garbage, b"no kvtree here, no magic").unwrap();
    let o = scr(&["print", path(&garbage)], &[]);
    assert_eq!(code(&o), Some(Code::Damaged), "{}", stderr(&o));
    // A bad configuration file.
    let conf = d.path().join("bad.conf");
    std::fs::write(&conf, "SCR_FLUSH\n").unwrap();
    let o = scr(&["config"], &[("SCR_CONF_FILE", path(&conf))]);
    assert_eq!(code(&o), Some(Code::Config), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.conf"), "{}", stderr(&o));
    // flush-file: "no" is not "no flush file".
    let prefix = d.path().join("prefix");
    std::fs::create_dir_all(prefix.join(".scr")).unwrap();
    let o = scr(&["flush-file", "--latest", path(&prefix)], &[]);
    assert_eq!(code(&o), Some(Code::Absent), "{}", stderr(&o));
    let mut ff = FlushFile::default();
    ff.location_set(1, Location::Pfs);
    ff.write_file(prefix.join(".scr").join(FLUSH_FILE)).unwrap();
    let o = scr(&["flush-file", "--needflush", "1", path(&prefix)], &[]);
    assert_eq!((code(&o), stderr(&o).as_str()), (Some(Code::No), ""));
    // scr copy: nothing of the dataset in this node's cache.
    let cntl = d.path().join("cntl");
    std::fs::create_dir_all(&cntl).unwrap();
    let copy_with = |extra: &[&str]| {
        let mut args = vec![
            "copy",
            "--cntldir",
            path(&cntl),
            "--id",
            "1",
            "--prefix",
            path(&prefix),
            "--dir",
            "ckpt.1",
        ];
        args.extend_from_slice(extra);
        scr(&args, &[])
    };
    let o = copy_with(&[]);
    assert_eq!(code(&o), Some(Code::NotCached), "{}", stderr(&o));
    // --buf-size (SCR_FILE_BUF_SIZE, which scr postrun passes) takes a
    // byte count SCR's way; zero, more than 1 GiB or a word is a usage
    // error naming it.
    let o = copy_with(&["--buf-size", "64KB"]);
    assert_eq!(code(&o), Some(Code::NotCached), "{}", stderr(&o));
    for bad in ["0", "2GB", "lots"] {
        let o = copy_with(&["--buf-size", bad]);
        assert_eq!(code(&o), Some(Code::Usage), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--buf-size"), "{bad}: {}", stderr(&o));
    }
    // The tool could not do its job: .scr is a file, so halt.scr cannot be
    // created below it.
    let blocked = d.path().join("blocked");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join(".scr"), b"a file").unwrap();
    let o = scr(&["halt", "--immediate", path(&blocked)], &[]);
    assert_eq!(code(&o), Some(Code::Failed), "{}", stderr(&o));
    // Messages are the errors' Display, not their Debug form.
    assert!(!stderr(&o).contains("Io {"), "{}", stderr(&o));
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    // The read end is closed before the command starts, so its first write
    // meets a broken pipe every time (no race with the reader).
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_scr"))
        .args([
            "interval",
            "--level",
            "15:rate=8.54e-7",
            "--level",
            "1835:rate=2.01e-7",
            "--table",
        ])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("the scr binary runs");
    assert_eq!(stderr(&o), "", "no panic, no message");
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}", o.status);
}

/// A prefix that is not there is a usage error, not an empty index.
#[test]
fn index_of_a_missing_prefix_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let gone = d.path().join("nonexistent");
    let o = scr(&["index", "--prefix", path(&gone), "--list"], &[]);
    assert_eq!(code(&o), Some(Code::Usage), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(stderr(&o).contains(path(&gone)), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "no \"no datasets\" line");
    // An existing prefix without an index still lists nothing, successfully.
    let o = scr(&["index", "--prefix", path(d.path()), "--list"], &[]);
    assert_eq!(code(&o), Some(Code::Success), "{}", stderr(&o));
}

/// `scr config NAME` of no parameter names it and suggests the nearest;
/// a known parameter without a value still answers NO.
#[test]
fn config_of_an_unknown_parameter_names_it() {
    let o = scr(&["config", "SCR_FLUHS"], &[]);
    assert_eq!(code(&o), Some(Code::Usage), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("SCR_FLUHS: no such SCR parameter"), "{err}");
    assert!(err.contains("did you mean SCR_FLUSH?"), "{err}");
    let o = scr(&["config", "NOPE"], &[]);
    assert_eq!(code(&o), Some(Code::Usage), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("NOPE: no such SCR parameter"),
        "{}",
        stderr(&o)
    );
    // A name of the user's own that is set is printed as before.
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("user.conf");
    std::fs::write(&conf, "MY_TOOL_OPT=7\n").unwrap();
    let o = scr(
        &["config", "MY_TOOL_OPT"],
        &[("SCR_CONF_FILE", path(&conf))],
    );
    assert_eq!(code(&o), Some(Code::Success), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "7");
}

/// Errors print as `scr: error: ...` (Display), with causes on
/// `scr: caused by:` lines, never a Debug form.
#[test]
fn errors_print_their_display_with_the_error_prefix() {
    let d = tempfile::tempdir().unwrap();
    let garbage = d.path().join("garbage.scr");
    std::fs::write(&garbage, b"no kvtree here, no magic").unwrap();
    let o = scr(&["print", path(&garbage)], &[]);
    let err = stderr(&o);
    assert!(err.starts_with("scr: error: "), "{err}");
    assert!(
        err.lines()
            .skip(1)
            .all(|l| l.starts_with("scr: caused by: ")),
        "{err}"
    );
    assert!(!err.contains(" { ") && !err.contains("Error:"), "{err}");
}
