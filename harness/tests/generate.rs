//! `scr-harness generate SHARE` (run by ci/install): man pages for
//! scr-harness and its subcommands, and its bash, zsh and fish completions.

use std::process::Command;

#[test]
fn generate_writes_the_harness_pages_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("share");
    let o = Command::new(env!("CARGO_BIN_EXE_scr-harness"))
        .args(["generate", share.to_str().unwrap()])
        .output()
        .expect("scr-harness runs");
    assert!(o.status.success(), "{o:?}");
    for page in [
        "scr-harness",
        "scr-harness-run",
        "scr-harness-campaign",
        "scr-harness-sweep",
        "scr-harness-validate",
        "scr-harness-check-node",
    ] {
        let text = std::fs::read_to_string(share.join(format!("man/man1/{page}.1")))
            .unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(text.contains(".SH SYNOPSIS"), "{page}: {text}");
    }
    let bash =
        std::fs::read_to_string(share.join("bash-completion/completions/scr-harness")).unwrap();
    assert!(
        bash.contains("campaign") && !bash.contains("generate"),
        "{bash}"
    );
    assert!(share.join("zsh/site-functions/_scr-harness").is_file());
    assert!(share
        .join("fish/vendor_completions.d/scr-harness.fish")
        .is_file());
}
