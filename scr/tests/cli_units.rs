//! Durations and byte sizes take units on every `scr` option that has one
//! (`scr::units`): `--mtbf 1h` is `--mtbf 3600`, `--seconds 10m` is 600,
//! `--capacity 1G` is 1073741824; plain numbers keep their meaning.

use std::process::{Command, Output};

use scr::records::Record;

fn scr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .env_remove("SCR_PREFIX")
        .output()
        .expect("the scr binary runs")
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn interval_mtbf_takes_units() {
    let plain = ok(&scr(&[
        "interval", "--json", "--cost", "60", "--mtbf", "3600",
    ]));
    for mtbf in ["1h", "60m", "3600s", "1h 0m"] {
        let units = ok(&scr(&[
            "interval", "--json", "--cost", "1m", "--mtbf", mtbf,
        ]));
        assert_eq!(units, plain, "--mtbf {mtbf}");
    }
    let long = ok(&scr(&[
        "interval", "--json", "--cost", "90", "--mtbf", "9000",
    ]));
    let units = ok(&scr(&[
        "interval", "--json", "--cost", "90s", "--mtbf", "2h30m",
    ]));
    assert_eq!(units, long);
    // Levels too.
    let plain = ok(&scr(&[
        "interval",
        "--json",
        "--level",
        "15:7200",
        "--level",
        "600:86400",
    ]));
    let units = ok(&scr(&[
        "interval", "--json", "--level", "15s:2h", "--level", "10m:1d",
    ]));
    assert_eq!(units, plain);
}

#[test]
fn bad_durations_are_usage_errors_naming_the_value() {
    for bad in ["soon", "-1h", "5x"] {
        let o = scr(&["interval", "--cost", "60", &format!("--mtbf={bad}")]);
        assert_eq!(o.status.code(), Some(2), "--mtbf {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(bad) && err.contains("not a duration"), "{err}");
    }
}

#[test]
fn halt_seconds_take_units() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_str().unwrap();
    ok(&scr(&["halt", "--seconds", "10m", p]));
    let h = scr::records::halt::Halt::read_file(scr::halt::halt_path(d.path())).unwrap();
    assert_eq!(h.halt_seconds_s, Some(600));
    let o = scr(&["halt", "--seconds", "1.5s", p]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn check_node_capacity_takes_units() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_str().unwrap();
    // A kilobyte is there; an exabyte is not, and that is a check failure,
    // not a usage error.
    ok(&scr(&["check-node", "--path", p, "--capacity", "1KB"]));
    let o = scr(&["check-node", "--path", p, "--capacity", "1000000T"]);
    assert_ne!(o.status.code(), Some(2));
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(
        scr(&["check-node", "--path", p, "--capacity", "1Q"])
            .status
            .code(),
        Some(2)
    );
}
