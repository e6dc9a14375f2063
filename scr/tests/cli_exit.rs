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
    let o = scr(
        &[
            "copy",
            "--cntldir",
            path(&cntl),
            "--id",
            "1",
            "--prefix",
            path(&prefix),
            "--dir",
            "ckpt.1",
        ],
        &[],
    );
    assert_eq!(code(&o), Some(Code::NotCached), "{}", stderr(&o));
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
