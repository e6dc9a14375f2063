//! `ci/demo` says what it does while it builds and writes its campaign's
//! results outside the committed `results/` unless asked (`--out DIR` or
//! `$DEMO_OUT`). These tests run the scripts with a stand-in `cargo` and a
//! stand-in `scr-harness`, so nothing is built and nothing runs under MPI.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn executable(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn demo_rejects_an_unknown_option_before_building_and_documents_out() {
    let o = Command::new("bash")
        .arg(repo().join("ci/demo"))
        .arg("--no-such-option")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ci/demo [--out DIR]"), "{err}");
    let o = Command::new("bash")
        .arg(repo().join("ci/demo"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("target/demo/results"), "{help}");
}

/// ci/demo-harness.sh with `cargo` and `scr-harness` replaced by scripts
/// that record their arguments; returns (stdout, the harness's arguments).
fn demo_harness(demo_out: Option<&str>) -> (String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    executable(&bin.join("cargo"), "#!/bin/sh\nexit 0\n");
    // The script runs target/$PROFILE/scr-harness from the repository: a
    // profile directory of this test's own.
    let profile = format!("demo-script-test-{}", std::process::id());
    let dir = repo().join("target").join(&profile);
    std::fs::create_dir_all(&dir).unwrap();
    let log = tmp.path().join("args");
    executable(
        &dir.join("scr-harness"),
        &format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
    );
    let mut c = Command::new("bash");
    c.arg(repo().join("ci/demo-harness.sh"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("PROFILE", &profile)
        .env_remove("DEMO_OUT");
    if let Some(o) = demo_out {
        c.env("DEMO_OUT", o);
    }
    let o = c.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{o:?}");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

#[test]
fn demo_results_go_to_target_unless_asked_and_builds_are_announced() {
    let (out, args) = demo_harness(None);
    assert!(
        args.contains("--out target/demo/results"),
        "the campaign wrote elsewhere: {args}"
    );
    assert!(!args.contains("--out results"), "{args}");
    assert!(
        out.contains("== building scr_app and scr with injection points"),
        "{out}"
    );
    assert!(
        out.contains("target/demo/results/campaign-demo.png"),
        "{out}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let asked = tmp.path().join("mine");
    let (_, args) = demo_harness(asked.to_str());
    assert!(
        args.contains(&format!("--out {}", asked.display())),
        "{args}"
    );
}

/// The committed results say how to reproduce them, not on which
/// (long-merged) branch they were once made.
#[test]
fn results_do_not_name_the_branch_they_were_made_on() {
    for e in std::fs::read_dir(repo().join("results")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                !text.contains("Produced on branch") && !text.contains("Produced on\nbranch"),
                "{} names its branch",
                p.display()
            );
        }
    }
}
