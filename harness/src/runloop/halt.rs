//! Halt requests the harness makes during a run loop, as an operator would
//! with `scr halt`, and the halt condition `scr_run` checks before each
//! relaunch.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::Duration;

use faultsim::plan::When;
use scr::clock::{Clock, SystemClock};
use scr::records::halt::{Halt, HALT_FILE};
use scr::records::Record as _;
use serde::Serialize;

/// A halt request the harness makes, as `scr halt` would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HaltEvent {
    /// When (between checkpoints of a launch, or before/after a launch).
    pub when: When,
    /// The launch, for `between-checkpoints` (default 1).
    #[serde(default = "one_u32")]
    pub run: u32,
    /// What is set in the halt file.
    pub set: HaltSet,
}

fn one_u32() -> u32 {
    1
}

/// The halt condition set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HaltSet {
    /// `scr halt`: an exit reason.
    Reason {
        /// The reason.
        #[serde(default = "halt_reason")]
        reason: String,
    },
    /// `scr halt --before`: ExitBefore now + `in_s`, with `HaltSeconds`
    /// margin `margin_s`.
    ExitBefore {
        /// Seconds from now.
        in_s: i64,
        /// Margin.
        margin_s: i64,
    },
    /// `scr halt --checkpoints N`.
    CheckpointsLeft {
        /// Checkpoints still allowed.
        left: i64,
    },
}

fn halt_reason() -> String {
    "SCR_HALT".into()
}

/// Set a halt condition in the prefix's halt file: with `scr halt` when
/// the `scr` command has it (what an administrator or a user would run),
/// else by writing the halt file directly.
pub fn set_halt(prefix: &Path, set: &HaltSet, scr: Option<&Path>) -> Result<String, String> {
    if let Some(scr) = scr.filter(|s| has_subcommand(s, "halt")) {
        let mut argv: Vec<OsString> = vec![scr.into(), "halt".into()];
        match set {
            HaltSet::Reason { reason } => {
                argv.extend(["--reason".into(), reason.into()]);
            }
            HaltSet::ExitBefore { in_s, margin_s } => {
                argv.extend([
                    "--before".into(),
                    format!("+{in_s}s").into(),
                    "--seconds".into(),
                    margin_s.to_string().into(),
                ]);
            }
            HaltSet::CheckpointsLeft { left } => {
                argv.extend(["--checkpoints".into(), left.to_string().into()]);
            }
        }
        argv.push(prefix.into());
        let shown = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let out = crate::launch::run_argv(&argv, Duration::from_secs(30))
            .map_err(|e| format!("{shown}: {e}"))?;
        if !out.success() {
            return Err(format!(
                "{shown}: exit {}: {}",
                out.code(),
                out.stderr.trim()
            ));
        }
        return Ok(format!("ran `{shown}`"));
    }
    let dir = prefix.join(".scr");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(HALT_FILE);
    let now = SystemClock.unix_secs();
    Halt::update_file(&path, |h: &mut Halt| match set {
        HaltSet::Reason { reason } => h.exit_reason = Some(reason.clone()),
        HaltSet::ExitBefore { in_s, margin_s } => {
            h.exit_before_s = Some(now + in_s);
            h.halt_seconds_s = Some(*margin_s);
        }
        HaltSet::CheckpointsLeft { left } => h.checkpoints_left = Some(*left),
    })
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let what = match set {
        HaltSet::Reason { reason } => format!("exit reason \"{reason}\""),
        HaltSet::ExitBefore { in_s, margin_s } => {
            format!("exit before now + {in_s} s, halt seconds {margin_s}")
        }
        HaltSet::CheckpointsLeft { left } => format!("{left} checkpoint(s) left"),
    };
    Ok(format!("halt file: {what}"))
}

/// True when `scr` has the subcommand `name` (`scr NAME --help` succeeds).
pub fn has_subcommand(scr: &Path, name: &str) -> bool {
    std::process::Command::new(scr)
        .args([name, "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `scr` has a `postrun` subcommand.
pub fn has_postrun(scr: &Path) -> bool {
    has_subcommand(scr, "postrun")
}
