//! SCR 3.1's `scr_srun [LAUNCHER-ARGS] [-rc|--run-cmd=CMD]
//! [-rs|--restart-cmd=CMD] [LAUNCHER-ARGS]`: the command a launch runs
//! when there is no checkpoint to restart from (`--run-cmd`, else the
//! application after the launcher's arguments), and the one it runs when
//! there is (`--restart-cmd`), with `SCR_CKPT_NAME` replaced by that
//! checkpoint's name. As in 3.1, before each launch given a restart
//! command the loop runs `scr have-restart` through the launcher on the
//! launch's nodes (SCR_Init there restarts in place as the application's
//! would) and takes the name it prints. Each command is split at blanks,
//! as 3.1 splits it; there is no shell quoting.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use scr::launch::{JobSpec, Launcher, Watch};

use crate::error::CliError;

/// The word of a restart command replaced by the checkpoint's name.
pub const CKPT_NAME: &str = "SCR_CKPT_NAME";

/// The commands given by 3.1's options, as given.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scr31Commands {
    /// `-rc`/`--run-cmd`.
    pub run: Option<String>,
    /// `-rs`/`--restart-cmd`.
    pub restart: Option<String>,
}

/// Take 3.1's `-rc`/`--run-cmd` and `-rs`/`--restart-cmd` (each `OPT CMD`
/// or `OPT=CMD`) out of `words`, anywhere before a `--` (after it the
/// application's own arguments start; 3.1 looks at every word). Either
/// given twice, or given without a command, is a usage error.
pub fn take(words: &[String]) -> Result<(Vec<String>, Scr31Commands), CliError> {
    let mut rest = Vec::with_capacity(words.len());
    let mut cmds = Scr31Commands::default();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            rest.extend(words[i..].iter().cloned());
            break;
        }
        let (opt, inline) = match w.split_once('=') {
            Some((o, v)) => (o, Some(v)),
            None => (w.as_str(), None),
        };
        let slot = match opt {
            "-rc" | "--run-cmd" => &mut cmds.run,
            "-rs" | "--restart-cmd" => &mut cmds.restart,
            _ => {
                rest.push(w.clone());
                i += 1;
                continue;
            }
        };
        let value = match inline {
            Some(v) => v.to_string(),
            None => {
                i += 1;
                words
                    .get(i)
                    .cloned()
                    .ok_or_else(|| CliError::Usage(format!("{opt}: give the command")))?
            }
        };
        if value.split_whitespace().next().is_none() {
            return Err(CliError::Usage(format!("{opt}: the command is empty")));
        }
        if slot.replace(value).is_some() {
            return Err(CliError::Usage(format!("{opt} given twice")));
        }
        i += 1;
    }
    Ok((rest, cmds))
}

/// The words of `cmd` split at blanks, `SCR_CKPT_NAME` in each replaced by
/// `name` (a name with blanks stays one word).
pub fn words_of(cmd: &str, name: Option<&str>) -> Vec<String> {
    cmd.split_whitespace()
        .map(|w| match name {
            Some(n) => w.replace(CKPT_NAME, n),
            None => w.to_string(),
        })
        .collect()
}

/// What `scr have-restart --tagged` prints before the name (nothing
/// after it: no checkpoint), so that nothing else a launcher prints is
/// taken for a name.
pub const TAG: &str = "SCR_RESTART_NAME=";

/// The checkpoint name `scr have-restart --tagged` printed: `Some(None)`
/// when it printed that there is none, `None` when it printed no tagged
/// line at all.
pub fn printed_name(stdout: &str) -> Option<Option<String>> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(TAG))
        .map(|n| (!n.is_empty()).then(|| n.to_string()))
}

/// What a launch runs when a restart command was given: see the module
/// documentation.
pub struct RestartCommand<'a> {
    /// The command, as given.
    pub template: String,
    /// The job's launcher, with the user's arguments.
    pub launcher: &'a dyn Launcher,
    /// This program (`scr have-restart` is one of its subcommands).
    pub helper: PathBuf,
    /// Bound on the helper's run (the launch's own bound: it may rebuild
    /// or fetch the whole checkpoint).
    pub timeout: Duration,
}

impl RestartCommand<'_> {
    /// Before launch `launch`: ask `scr have-restart` on the job's nodes;
    /// with a name, `job` runs the restart command instead. A helper run
    /// that fails leaves the run command (the application still restarts
    /// through SCR_Have_restart if it can), with a message saying why.
    pub fn apply(&self, launch: u32, job: &mut JobSpec) {
        let mut helper = job.clone();
        helper.program = self.helper.clone();
        helper.args = vec!["have-restart".into(), "--tagged".into()];
        // The helper's SCR_Init is no run of the job: no START or COMPUTE
        // entries for the interval estimator.
        helper.env.insert("SCR_LOG_ENABLE".into(), "0".into());
        let ran = self.launcher.job_argv(&helper).and_then(|argv| {
            self.launcher
                .run(&argv, self.timeout, &mut |_| Watch::Continue)
        });
        let name = match ran {
            Ok(out) if out.success() => match printed_name(&out.stdout) {
                Some(name) => name,
                None => {
                    eprintln!(
                        "scr run: launch {launch}: scr have-restart printed no {TAG} line: the run command"
                    );
                    return;
                }
            },
            Ok(out) => {
                eprintln!(
                    "scr run: launch {launch}: scr have-restart exited {}: the run command\n{}",
                    out.code(),
                    out.stderr.trim_end()
                );
                return;
            }
            Err(e) => {
                eprintln!("scr run: launch {launch}: scr have-restart: {e}: the run command");
                return;
            }
        };
        let Some(name) = name else {
            eprintln!("scr run: launch {launch}: no checkpoint to restart from: the run command");
            return;
        };
        let words = words_of(&self.template, Some(&name));
        let Some((program, args)) = words.split_first() else {
            return;
        };
        eprintln!(
            "scr run: launch {launch}: restarting from {name}: {}",
            words.join(" ")
        );
        job.program = PathBuf::from(program);
        job.args = args.iter().map(OsString::from).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn scr31s_commands_come_out_of_the_launchers_words_in_each_form() {
        let (rest, c) = take(&w(&[
            "-N4",
            "-rc",
            "./app -n 3",
            "-n8",
            "--restart-cmd=./app -r SCR_CKPT_NAME",
        ]))
        .unwrap();
        assert_eq!(rest, w(&["-N4", "-n8"]));
        assert_eq!(c.run.as_deref(), Some("./app -n 3"));
        assert_eq!(c.restart.as_deref(), Some("./app -r SCR_CKPT_NAME"));
        let (rest, c) = take(&w(&["--run-cmd", "./a", "-rs=./b"])).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            (c.run.as_deref(), c.restart.as_deref()),
            (Some("./a"), Some("./b"))
        );
    }

    #[test]
    fn after_a_double_dash_the_words_are_the_applications() {
        let (rest, c) = take(&w(&["-N2", "--", "./app", "-rs", "5"])).unwrap();
        assert_eq!(rest, w(&["-N2", "--", "./app", "-rs", "5"]));
        assert_eq!(c, Scr31Commands::default());
    }

    #[test]
    fn a_command_missing_empty_or_given_twice_is_refused_by_name() {
        for (words, says) in [
            (w(&["-N2", "-rs"]), "-rs: give the command"),
            (w(&["--run-cmd="]), "--run-cmd: the command is empty"),
            (w(&["-rc", "  "]), "-rc: the command is empty"),
            (w(&["-rc", "./a", "--run-cmd=./b"]), "--run-cmd given twice"),
        ] {
            match take(&words) {
                Err(CliError::Usage(m)) => assert_eq!(m, says, "{words:?}"),
                other => panic!("{words:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_checkpoints_name_replaces_scr_ckpt_name_in_each_word() {
        assert_eq!(
            words_of("./app  --from=SCR_CKPT_NAME -v", Some("ckpt 7")),
            w(&["./app", "--from=ckpt 7", "-v"])
        );
        assert_eq!(
            words_of("./app SCR_CKPT_NAME", None),
            w(&["./app", "SCR_CKPT_NAME"])
        );
    }

    #[test]
    fn the_name_is_the_helpers_tagged_line_and_nothing_else() {
        assert_eq!(
            printed_name("warning\nSCR_RESTART_NAME=ckpt.4\n\n"),
            Some(Some("ckpt.4".into()))
        );
        assert_eq!(printed_name("SCR_RESTART_NAME=\n"), Some(None));
        assert_eq!(printed_name("ckpt.4\n"), None);
        assert_eq!(printed_name(""), None);
    }
}
