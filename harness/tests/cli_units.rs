//! `scr-harness` options take units as `scr`'s do (`scr::units`):
//! `check-node --storage /x:1G` like `.scrconf`'s `1GB`, `--timeout-s 5m`.

use std::process::{Command, Output};

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

#[test]
fn check_node_storage_takes_byte_units_like_scrconf() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_str().unwrap();
    for size in ["1K", "1KB", "4096", "1k"] {
        let o = harness(&["check-node", "--storage", &format!("{p}:{size}")]);
        assert_eq!(
            code(&o),
            Some(Code::Success),
            "{size}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // 1G is read as .scrconf reads 1GB: a size, never a usage error.
    for size in ["1G", "1GB", "512MB"] {
        let o = harness(&["check-node", "--storage", &format!("{p}:{size}")]);
        assert_ne!(code(&o), Some(Code::Usage), "{size}");
    }
    let o = harness(&["check-node", "--storage", &format!("{p}:1Q")]);
    assert_eq!(code(&o), Some(Code::Usage));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a byte count"));
}

#[test]
fn run_timeout_takes_duration_units() {
    // The plan cannot be read (CONFIG): the options before it parsed.
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("no-such-plan.toml");
    let plan = plan.to_str().unwrap();
    for t in ["90", "5m", "1h30m"] {
        let o = harness(&[
            "run",
            "--timeout-s",
            t,
            "--mean-bytes",
            "64KB",
            "--plan",
            plan,
        ]);
        assert_eq!(code(&o), Some(Code::Config), "--timeout-s {t}");
    }
    let o = harness(&["run", "--timeout-s", "soon", "--plan", plan]);
    assert_eq!(code(&o), Some(Code::Usage));
}
