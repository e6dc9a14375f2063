//! `scr generate SHARE` (run by ci/install): a man page for `scr` and for
//! every subcommand its `--help` lists, and bash, zsh and fish completions
//! offering those subcommands and not `generate` itself; bad usage and an
//! unwritable directory exit with the table's codes.

use std::process::{Command, Output};

use scr::exit::Code;

fn scr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .output()
        .expect("the scr binary runs")
}

fn code(o: &Output) -> Option<Code> {
    o.status.code().and_then(Code::from_value)
}

/// The subcommands `scr --help` lists (clap's "Commands:" block).
fn listed_subcommands() -> Vec<String> {
    let help = String::from_utf8(scr(&["--help"]).stdout).expect("utf-8");
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A name at two spaces; a wrapped description goes deeper.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn generate_writes_a_page_per_subcommand_and_completions_without_itself() {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("share");
    let o = scr(&["generate", share.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Success), "{o:?}");
    let subs = listed_subcommands();
    assert!(
        subs.len() >= 10 && subs.contains(&"postrun".to_string()),
        "{subs:?}"
    );
    assert!(!subs.contains(&"generate".to_string()), "{subs:?}");
    let printed = String::from_utf8(o.stdout).unwrap();
    let mut pages = vec!["scr.1".to_string()];
    pages.extend(subs.iter().map(|s| format!("scr-{s}.1")));
    for page in &pages {
        let path = share.join("man/man1").join(page);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.contains(".SH NAME") && text.contains(".SH SYNOPSIS"),
            "{page}: {text}"
        );
        assert!(
            printed.contains(path.to_str().unwrap()),
            "{page} not printed: {printed}"
        );
    }
    let top = std::fs::read_to_string(share.join("man/man1/scr.1")).unwrap();
    // The exit-code table of --help's epilogue is in the page too.
    assert!(top.contains("INCOMPLETE"), "{top}");
    let completions = [
        "bash-completion/completions/scr",
        "zsh/site-functions/_scr",
        "fish/vendor_completions.d/scr.fish",
    ];
    for file in completions {
        let text =
            std::fs::read_to_string(share.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for s in &subs {
            assert!(text.contains(s.as_str()), "{file} does not offer {s}");
        }
        assert!(!text.contains("generate"), "{file} offers generate");
    }
    assert!(!share.join("man/man1/scr-generate.1").exists());
}

#[test]
fn generate_without_a_directory_is_a_usage_error() {
    let o = scr(&["generate"]);
    assert_eq!(code(&o), Some(Code::Usage), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("scr generate <SHARE>"), "{err}");
}

#[test]
fn generate_into_a_file_fails_naming_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("share");
    std::fs::write(&file, b"a file").unwrap();
    let o = scr(&["generate", file.to_str().unwrap()]);
    assert_eq!(code(&o), Some(Code::Failed), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("share/man/man1: create directory"), "{err}");
}
