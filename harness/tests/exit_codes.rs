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

/// A fake program: with the plan variable's name inside it counts as built
/// with injection points (that is what the harness looks for).
fn fake_program(dir: &std::path::Path, name: &str, injection: bool) -> std::path::PathBuf {
    let p = dir.join(name);
    let body: &[u8] = if injection {
        b"#!/bin/sh\n# SCR_FAULT_PLAN\nexit 0\n"
    } else {
        b"#!/bin/sh\nexit 0\n"
    };
    std::fs::write(&p, body).unwrap();
    p
}

/// The README's campaign with a `scr` built without injection points gave
/// false failures (its scavenge faults never fired); now it is refused
/// before any cell runs, with the command that builds the right one.
#[test]
fn campaign_refuses_a_scr_without_injection_points() {
    let d = tempfile::tempdir().unwrap();
    let app = fake_program(d.path(), "scr_app", true);
    let plain = fake_program(d.path(), "scr", false);
    let o = harness(&[
        "campaign",
        "--quick",
        "--no-results",
        "--app",
        app.to_str().unwrap(),
        "--scr",
        plain.to_str().unwrap(),
        "--work",
        d.path().join("work").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), Some(Code::Failed), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("without injection points"), "{err}");
    assert!(
        err.contains("-p scr --bin scr --features scr/fault-injection"),
        "{err}"
    );
    assert!(err.starts_with("scr-harness: error: "), "{err}");
    assert!(!d.path().join("work").exists(), "no cell ran");
    // The sweep checks the same.
    let o = harness(&[
        "sweep",
        "--no-results",
        "--app",
        app.to_str().unwrap(),
        "--scr",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), Some(Code::Failed), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("without injection points"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_node_prints_json_when_asked() {
    let d = tempfile::tempdir().unwrap();
    let ok = d.path().to_str().unwrap().to_string();
    let o = harness(&["check-node", "--json", "--storage", &ok]);
    assert_eq!(code(&o), Some(Code::Success), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["healthy"], true);
    assert_eq!(v["storage"][0]["path"], ok.as_str());
    let gone = d.path().join("gone");
    let o = harness(&["check-node", "--json", "--storage", gone.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Unexpected), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["healthy"], false);
    assert!(v["why"].as_str().is_some_and(|w| w.contains("gone")), "{v}");
}

/// `scr-harness plot --from X.json` draws a committed campaign's matrix
/// again; a file that is no report is a CONFIG error naming its line.
#[test]
fn plot_redraws_a_campaign_from_its_json() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("campaign-demo.json");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::copy(repo.join("results/campaign-demo.json"), &json).unwrap();
    let o = harness(&["plot", "--from", json.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Success), "{}", stderr(&o));
    let png = d.path().join("campaign-demo.png");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        png.to_str().unwrap()
    );
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"campaign\": 3\n}\n").unwrap();
    let o = harness(&["plot", "--from", bad.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Config), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.json: line 2"), "{}", stderr(&o));
}
