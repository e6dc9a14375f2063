//! Man pages and shell completions generated from a tool's clap
//! definition, so they never drift from `--help`. `scr generate SHARE` and
//! `scr-harness generate SHARE` call [`generate`]; `ci/install` runs them
//! into `PREFIX/share` (docs/guide/install.md). `generate` is no clap
//! subcommand of the tools ([`asked`] recognises it before they parse their
//! arguments): a hidden subcommand would still be offered by the
//! completions.
//!
//! Under the directory given (a `share` directory) it writes:
//! `man/man1/<tool>.1` and one page per visible subcommand
//! (`<tool>-<sub>.1`, nested ones `<tool>-<sub>-<subsub>.1`),
//! `bash-completion/completions/<tool>`, `zsh/site-functions/_<tool>` and
//! `fish/vendor_completions.d/<tool>.fish` — the directories where
//! bash-completion, zsh and fish look for them under a prefix. Hidden
//! subcommands are left out of the man pages.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// SCR 3.1's command names and the `scr` subcommand that does each one's
/// work: `scr` run through a link named `scr_halt` runs `scr halt`
/// (ci/install makes the links), so job scripts written for SCR 3.1 keep
/// their commands.
pub const SCR31_COMMANDS: [(&str, &str); 17] = [
    ("scr_srun", "srun"),
    ("scr_jsrun", "jsrun"),
    ("scr_mpirun", "mpirun"),
    ("scr_run", "run"),
    ("scr_prerun", "prerun"),
    ("scr_postrun", "postrun"),
    ("scr_copy", "copy"),
    ("scr_index", "index"),
    ("scr_halt", "halt"),
    ("scr_flush_file", "flush-file"),
    ("scr_check_node", "check-node"),
    ("scr_list_down_nodes", "list-down-nodes"),
    ("scr_retries_halt", "should-exit"),
    ("scr_should_exit", "should-exit"),
    ("scr_print_hash_file", "print"),
    ("scr_glob_hosts", "glob-hosts"),
    ("scr_have_restart", "have-restart"),
];

/// Why generating the pages or completions failed: the file or directory,
/// what was being done, and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{}: {op}: {source}", path.display())]
pub struct CliDocsError {
    /// The file or directory.
    pub path: PathBuf,
    /// What was being done ("create directory", "write man page", ...).
    pub op: &'static str,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

fn io_at<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> CliDocsError + 'a {
    move |source| CliDocsError {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// The word that asks a tool for its pages and completions: `TOOL generate SHARE`.
pub const GENERATE: &str = "generate";

/// `None` unless the tool's arguments (`args`, the program name first) are
/// `generate ...`; then the `share` directory they name, or clap's usage
/// error (`e.exit()` prints it and exits USAGE, as for any usage error).
pub fn asked(tool: &str, args: &[OsString]) -> Option<Result<PathBuf, clap::Error>> {
    if args.get(1).is_none_or(|a| a != GENERATE) {
        return None;
    }
    let cmd = clap::Command::new(GENERATE)
        .bin_name(format!("{tool} {GENERATE}"))
        .about("Write the man pages and bash, zsh and fish completions under SHARE")
        .arg(
            clap::Arg::new("share")
                .value_name("SHARE")
                .help("The share directory of an installation prefix")
                .required(true)
                .value_parser(clap::value_parser!(PathBuf)),
        );
    Some(
        cmd.try_get_matches_from(&args[1..])
            .map(|m| m.get_one::<PathBuf>("share").cloned().unwrap_or_default()),
    )
}

/// The shells completions are written for, with the directory (under
/// `share`) and the file name each one's loader looks for.
const SHELLS: [(Shell, &str, &str, &str); 3] = [
    (Shell::Bash, "bash-completion/completions", "", ""),
    (Shell::Zsh, "zsh/site-functions", "_", ""),
    (Shell::Fish, "fish/vendor_completions.d", "", ".fish"),
];

/// Write `cmd`'s man pages and bash, zsh and fish completions under
/// `share` (created when missing). Returns every file written, man pages
/// first.
pub fn generate(cmd: clap::Command, share: &Path) -> Result<Vec<PathBuf>, CliDocsError> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    let man = share.join("man/man1");
    fs::create_dir_all(&man).map_err(io_at(&man, "create directory"))?;
    man_pages(&cmd, &man, &mut written)?;
    let name = cmd.get_name().to_string();
    for (shell, dir, before, after) in SHELLS {
        let dir = share.join(dir);
        fs::create_dir_all(&dir).map_err(io_at(&dir, "create directory"))?;
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), &name, &mut text);
        let path = dir.join(format!("{before}{name}{after}"));
        fs::write(&path, text).map_err(io_at(&path, "write completions"))?;
        written.push(path);
    }
    Ok(written)
}

/// `cmd`'s page, then its visible subcommands' (clap names a built
/// subcommand `<tool>-<sub>`).
fn man_pages(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), CliDocsError> {
    let page = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(page.get_filename());
    let mut text = Vec::new();
    page.render(&mut text)
        .and_then(|()| fs::File::create(&path)?.write_all(&text))
        .map_err(io_at(&path, "write man page"))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn tool() -> Command {
        Command::new("tool")
            .version("1.2.3")
            .about("A tool")
            .subcommand(
                Command::new("print")
                    .about("Print a file")
                    .arg(Arg::new("file").required(true)),
            )
            .subcommand(Command::new("secret").hide(true))
    }

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn generate_is_recognised_before_the_tools_own_arguments() {
        assert!(asked("tool", &args(&["tool"])).is_none());
        assert!(asked("tool", &args(&["tool", "print", "x"])).is_none());
        let share = asked("tool", &args(&["tool", "generate", "/p/share"]));
        assert_eq!(share.unwrap().unwrap(), PathBuf::from("/p/share"));
        let e = asked("tool", &args(&["tool", "generate"]))
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert!(e.to_string().contains("tool generate <SHARE>"), "{e}");
        let e = asked("tool", &args(&["tool", "generate", "a", "b"]))
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
    }

    #[test]
    fn writes_a_page_per_visible_subcommand_and_three_completions() {
        let dir = tempfile::tempdir().unwrap();
        let written = generate(tool(), dir.path()).unwrap();
        let rel: Vec<String> = written
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            rel,
            [
                "man/man1/tool.1",
                "man/man1/tool-print.1",
                "bash-completion/completions/tool",
                "zsh/site-functions/_tool",
                "fish/vendor_completions.d/tool.fish",
            ]
        );
        let page = fs::read_to_string(dir.path().join("man/man1/tool-print.1")).unwrap();
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
        assert!(page.contains("Print a file"), "{page}");
        let top = fs::read_to_string(dir.path().join("man/man1/tool.1")).unwrap();
        assert!(top.contains("tool\\-print(1)"), "{top}");
        assert!(!top.contains("secret"), "hidden subcommand shown: {top}");
        assert!(!written
            .iter()
            .any(|p| p.to_string_lossy().contains("secret")));
        let bash = fs::read_to_string(dir.path().join("bash-completion/completions/tool")).unwrap();
        assert!(bash.contains("complete -F _tool"), "{bash}");
        assert!(bash.contains("print"), "{bash}");
        let fish =
            fs::read_to_string(dir.path().join("fish/vendor_completions.d/tool.fish")).unwrap();
        assert!(fish.contains("complete -c tool"), "{fish}");
    }

    #[test]
    fn an_unwritable_directory_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("share");
        fs::write(&file, b"not a directory").unwrap();
        let e = generate(tool(), &file).unwrap_err();
        assert_eq!(e.path, file.join("man/man1"));
        assert_eq!(e.op, "create directory");
        assert!(e.to_string().contains("share/man/man1"), "{e}");
    }
}
