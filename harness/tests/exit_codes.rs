//! `scr-harness` exits with the codes of `scr::exit`, the table it shares
//! with `scr` (docs/exit-codes.md), prints that table in `--help`, and ends
//! quietly when the reader of its output goes away.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

use scr::exit::Code;

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr-harness"))
        .args(args)
        .output()
        .expect("scr-harness runs")
}

fn code(o: &Output) -> Option<Code> {
    o.status.code().and_then(Code::from_value)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_lists_every_code_of_the_table() {
    let o = harness(&["--help"]);
    assert_eq!(code(&o), Some(Code::Success));
    let help = String::from_utf8_lossy(&o.stdout);
    for c in Code::ALL {
        let line = format!("{:>2}  {:<10}  {}", c.value(), c.name(), c.meaning());
        assert!(help.contains(&line), "{c} missing from --help:\n{help}");
    }
}

#[test]
fn usage_and_bad_input_have_their_codes() {
    // Usage is clap's 2, as for `scr` (it was 64), and 2 no longer means
    // SILENT CORRUPTION (NEVER is 10).
    assert_eq!(code(&harness(&["no-such-command"])), Some(Code::Usage));
    assert_eq!(Code::Usage.value(), 2);
    assert_eq!(Code::Never.value(), 10);
    let o = harness(&["campaign", "--only", "no-such-scenario"]);
    assert_eq!(code(&o), Some(Code::Usage), "{}", stderr(&o));
    let o = harness(&["run", "--env", "NOEQUALS"]);
    assert_eq!(code(&o), Some(Code::Usage), "{}", stderr(&o));
    // A catalogue that does not parse, a plan that cannot be read: CONFIG.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("bad.toml"), "[[scenario]\nname = ").unwrap();
    let cat = d.path().to_str().unwrap();
    let o = harness(&["campaign", "--list", "--catalogue", cat]);
    assert_eq!(code(&o), Some(Code::Config), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.toml"), "{}", stderr(&o));
    let plan = d.path().join("no-such-plan.toml");
    let o = harness(&["run", "--plan", plan.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Config), "{}", stderr(&o));
    // Messages are Display, not Debug.
    assert!(!stderr(&o).contains("Error:"), "{}", stderr(&o));
}

#[test]
fn campaign_list_into_a_closed_pipe_ends_quietly() {
    // `scr-harness campaign --list | head -1`, without the race: the read
    // end is closed before the harness starts, so its first line meets a
    // broken pipe every time.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_scr-harness"))
        .args(["campaign", "--list"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("scr-harness runs");
    assert_eq!(stderr(&o), "", "no panic, no message");
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}", o.status);
}
