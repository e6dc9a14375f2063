//! `scr_app` as one process (an MPI singleton, no mpirun): usage, a crash
//! after K checkpoints, a restart that verifies every byte and continues the
//! ids, and the `--expect-restart` check. The multi-node scenarios run under
//! mpirun in `harness/tests/cache_tier.rs`.

use std::path::Path;
use std::process::{Command, Output};

use testing::data::file_plan;

const APP: &str = env!("CARGO_BIN_EXE_scr_app");

fn app(dir: &Path, args: &[&str]) -> Output {
    Command::new(APP)
        .args(args)
        .current_dir(dir)
        .env("SCR_NODE_NAME", "solo")
        .env("SCR_NODE_ROOT", dir.join("node"))
        .env("SCR_PREFIX", dir.join("prefix"))
        .env("SCR_COPY_TYPE", "SINGLE")
        .env("SCR_JOB_ID", "9")
        .output()
        .expect("scr_app runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn last_line(o: &Output) -> String {
    stdout(o).lines().last().unwrap_or("").to_string()
}

#[test]
fn help_documents_the_options_and_bad_usage_exits_64() {
    let dir = tempfile::tempdir().expect("tmp");
    let help = app(dir.path(), &["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    for opt in [
        "--seed",
        "--checkpoints",
        "--mean-bytes",
        "--prefix",
        "--fail-after",
        "--expect-restart",
    ] {
        assert!(text.contains(opt), "{opt} in {text}");
    }
    assert_eq!(
        app(dir.path(), &["--no-such-option"]).status.code(),
        Some(64)
    );
}

#[test]
fn crash_then_restart_verifies_every_byte_and_continues_ids() {
    let dir = tempfile::tempdir().expect("tmp");
    let common = ["--seed", "5", "--mean-bytes", "3000"];
    let mut a1 = common.to_vec();
    a1.extend(["--checkpoints", "3", "--fail-after", "2"]);
    let run1 = app(dir.path(), &a1);
    assert_eq!(run1.status.code(), Some(42), "{}", stdout(&run1));
    assert_eq!(
        last_line(&run1),
        "SCR_APP crash after_checkpoints=2 last=ckpt.2"
    );

    let mut a2 = common.to_vec();
    a2.extend(["--checkpoints", "1", "--expect-restart", "ckpt.2"]);
    let run2 = app(dir.path(), &a2);
    let bytes: u64 = file_plan(5, 0, 2, 3000).iter().map(|f| f.size_bytes).sum();
    assert_eq!(run2.status.code(), Some(0), "{}", stdout(&run2));
    assert!(
        stdout(&run2).contains("SCR_APP checkpoint name=ckpt.3 complete=true"),
        "ids continue after the restarted one: {}",
        stdout(&run2)
    );
    assert_eq!(
        last_line(&run2),
        format!(
            "SCR_APP restart=ckpt.2 source=cache verified_bytes={bytes} checkpoints_written=1 halted=false status=ok"
        )
    );

    // Now ckpt.3 is the newest: expecting no restart is reported, exit 3.
    let mut a3 = common.to_vec();
    a3.extend(["--checkpoints", "0", "--expect-restart", "none"]);
    let run3 = app(dir.path(), &a3);
    assert_eq!(run3.status.code(), Some(3), "{}", stdout(&run3));
    assert!(stdout(&run3).contains("SCR_APP expected_restart=none got=ckpt.3"));
    assert!(last_line(&run3).ends_with("status=UNEXPECTED"));
}
