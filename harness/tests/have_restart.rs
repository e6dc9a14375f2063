//! SCR 3.1's `scr_have_restart` and `scr_srun --run-cmd/--restart-cmd`
//! under real `mpirun`:
//!
//! - `scr have-restart` on 2 simulated nodes (4 ranks): nothing to print
//!   on an empty cache; after a node is lost it rebuilds the newest
//!   checkpoint in place as SCR_Init does and rank 0 alone prints its
//!   name; it records no exit reason in the halt file (a relaunch loop
//!   would stop) and the application launched next restarts from what it
//!   left, every byte verified.
//! - `scr run -- mpirun ... -rc CMD -rs CMD` on this machine (one node,
//!   2 ranks): the first launch runs the run command and crashes after
//!   two checkpoints; the relaunch asks `scr have-restart`, runs the
//!   restart command with SCR_CKPT_NAME replaced by `ckpt.2`, and the
//!   application restarts from exactly that checkpoint.
//!
//! Run with `ci/tests.d/have-restart.sh`, or `cargo build -p testing --bin
//! scr_app -p scr --bin scr --features scr/cli && cargo test -p harness
//! --test have_restart -- --ignored`. `SCR_APP_BIN` and `SCR_BIN` override
//! where the binaries are looked for. Without `mpirun` each test says so
//! and returns.

use std::process::Command;
use std::time::Duration;

use harness::app::{app_and_scr_for, SimCluster, CRASH_EXIT_CODE};
use scr::halt::halt_path;
use scr::records::halt::Halt;
use scr::records::Record;

const NODES: [&str; 2] = ["n0", "n1"];

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
#[ignore = "needs mpirun and the binaries: ci/tests.d/have-restart.sh"]
fn have_restart_names_the_newest_checkpoint_after_rebuilding_a_lost_node() {
    let Some((app, scr)) = app_and_scr_for("have_restart") else {
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("have-restart-")
        .tempdir()
        .unwrap();
    let mut cl = SimCluster::new(tmp.path(), &app).unwrap();
    cl.set("SCR_COPY_TYPE", "XOR");
    cl.set("SCR_FLUSH", "0");
    cl.timeout = Duration::from_secs(90);
    let mut helper = cl.clone();
    helper.app = scr.clone();
    let ask = |tagged: bool| {
        let a = if tagged {
            args(&["have-restart", "--tagged"])
        } else {
            args(&["have-restart"])
        };
        let out = helper
            .job(&NODES, &a)
            .run()
            .expect("scr have-restart ends in time");
        assert!(
            out.success(),
            "scr have-restart exited {}\n{}",
            out.code(),
            out.stderr
        );
        out.stdout
    };

    assert_eq!(ask(false), "", "an empty cache has nothing to restart from");
    assert_eq!(ask(true), "SCR_RESTART_NAME=\n");

    let first = cl
        .run(&NODES, &args(&["--checkpoints", "3", "--fail-after", "2"]))
        .unwrap();
    assert_eq!(
        first.output.code(),
        CRASH_EXIT_CODE,
        "{}",
        first.transcript()
    );
    cl.remove_node("n1").unwrap();

    // Rank 0 alone prints, once: 4 ranks ran it.
    assert_eq!(ask(false), "ckpt.2\n");
    let halt = halt_path(&cl.root.join("prefix"));
    if halt.exists() {
        let h = Halt::read_file(&halt).unwrap();
        assert_eq!(
            h.exit_reason, None,
            "scr have-restart must not record an exit reason: the job goes on"
        );
    }
    let next = cl
        .run(
            &NODES,
            &args(&["--checkpoints", "1", "--expect-restart", "ckpt.2"]),
        )
        .unwrap();
    let s = next
        .summary
        .as_ref()
        .unwrap_or_else(|| panic!("{}", next.transcript()));
    assert_eq!(s.status, "ok", "{}", next.transcript());
    assert_eq!(s.restart.as_deref(), Some("ckpt.2"));
    // The helper rebuilt n1's files: the application found them in cache.
    assert_eq!(s.source, "cache", "{}", next.transcript());
    assert!(s.verified_bytes > 0);
    assert_eq!(ask(true), "SCR_RESTART_NAME=ckpt.3\n");
}

#[test]
#[ignore = "needs mpirun and the binaries: ci/tests.d/have-restart.sh"]
fn a_relaunch_runs_the_restart_command_with_the_checkpoints_name() {
    let Some((app, scr)) = app_and_scr_for("restart_cmd") else {
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("restart-cmd-")
        .tempdir()
        .unwrap();
    let d = tmp.path();
    let prefix = d.join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    // A node's storage bases exist before a job (the loop's health checks
    // find a node without them down).
    for base in ["cntl", "cache"] {
        std::fs::create_dir_all(d.join(base)).unwrap();
    }
    let hostfile = d.join("hosts");
    std::fs::write(&hostfile, "localhost slots=2\n").unwrap();
    let app = app.display().to_string();
    let run_cmd =
        format!("{app} --checkpoints 3 --fail-after 2 --expect-restart none --mean-bytes 4096");
    let restart_cmd =
        format!("{app} --checkpoints 1 --expect-restart SCR_CKPT_NAME --mean-bytes 4096");
    let out = Command::new("timeout")
        .arg("180")
        .arg(&scr)
        .args(["run", "--hostfile"])
        .arg(&hostfile)
        .args([
            "--no-postrun",
            "--check-timeout",
            "20",
            "--watchdog",
            "120",
            "--",
        ])
        .args(["mpirun", "--oversubscribe", "-np", "2", "-rc", &run_cmd])
        .args(["--restart-cmd", &restart_cmd])
        .env("SCR_PREFIX", &prefix)
        .env("SCR_JOB_ID", "4343")
        .env("SCR_COPY_TYPE", "SINGLE")
        .env("SCR_FLUSH", "0")
        .env("SCR_RUNS", "2")
        .env("SCR_CNTL_BASE", d.join("cntl"))
        .env("SCR_CACHE_BASE", d.join("cache"))
        .env_remove("SCR_NODE_NAME")
        .env_remove("SCR_NODE_ROOT")
        .output()
        .expect("scr runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let transcript = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(
        out.status.success(),
        "scr run exited {:?}\n{transcript}",
        out.status
    );
    assert!(
        stderr.contains("launch 1: no checkpoint to restart from: the run command"),
        "{transcript}"
    );
    assert!(
        stderr.contains(&format!(
            "launch 2: restarting from ckpt.2: {app} --checkpoints 1 --expect-restart ckpt.2"
        )),
        "{transcript}"
    );
    assert!(
        stdout.contains("SCR_APP crash after_checkpoints=2"),
        "{transcript}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("SCR_APP restart=ckpt.2 ") && l.contains("status=ok")),
        "{transcript}"
    );
    assert!(
        stderr.contains("scr run: stop: the job finished"),
        "{transcript}"
    );
}
