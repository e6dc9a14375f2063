//! `scr halt`: set, unset or list a job's halt conditions (SCR's
//! `scr_halt`, which runs `scr_halt_cntl` on the halt file).

use std::path::{Path, PathBuf};

use scr::clock::{Clock, SystemClock};
use scr::exit::Code;
use scr::halt::time::{parse_time, TimeZone};
use scr::halt::{describe, halt_path, to_json, HaltEdit, REASON_JOB_HALTED};
use scr::records::halt::Halt;
use scr::records::Record;

use super::CliError;

/// Options of `scr halt` (those of `scr_halt`).
#[derive(clap::Args, Debug)]
#[command(after_help = scr::exit::help_for("\
TIME is seconds since the epoch (@1795426800, or 9+ digits), relative \
(+90s, +15m, now+2h, +1:30), an ISO date and time (\"2026-11-22 14:00\", \
2026-11-22T14:00Z), a time of day (14:00, 2pm, 1400, noon: its next \
occurrence), optionally with a day (today, tomorrow, mon..sun, 11/22, \
\"Nov 22\"); local time unless an offset is given.

With no condition option, the job halts at its next check (ExitReason \
JOB_HALTED), as with --immediate. The running job reads the file at \
each completed dataset, SCR_Should_exit and SCR_Need_checkpoint.

USAGE also covers a bad TIME, a field both set and unset, and a prefix \
directory that does not exist; DAMAGED, a halt file that is not one.",
    &[Code::Success, Code::Usage, Code::Damaged, Code::Failed],
))]
pub struct HaltArgs {
    /// Halt the job after N more checkpoints (CheckpointsLeft).
    #[arg(short = 'c', long, value_name = "N")]
    checkpoints: Option<u32>,
    /// Halt the job before TIME, HaltSeconds ahead of it (ExitBefore).
    #[arg(short = 'b', long, value_name = "TIME")]
    before: Option<String>,
    /// Halt the job after TIME (ExitAfter).
    #[arg(short = 'a', long, value_name = "TIME")]
    after: Option<String>,
    /// Set or reset the job's SCR_HALT_SECONDS (HaltSeconds): the margin
    /// before --before and before the end of the allocation.
    /// Seconds or with units (600, 10m, 1h).
    #[arg(short = 's', long, value_name = "DURATION", value_parser = scr::units::seconds_u32)]
    seconds: Option<u32>,
    /// Halt the job at its next check (ExitReason JOB_HALTED).
    #[arg(short = 'i', long)]
    immediate: bool,
    /// Halt the job at its next check with this ExitReason.
    #[arg(long, value_name = "TEXT", conflicts_with = "immediate")]
    reason: Option<String>,
    /// List the halt conditions (after applying any others given).
    #[arg(short = 'l', long)]
    list: bool,
    /// Unset the checkpoint condition.
    #[arg(long)]
    unset_checkpoints: bool,
    /// Unset the halt-before condition.
    #[arg(long)]
    unset_before: bool,
    /// Unset the halt-after condition.
    #[arg(long)]
    unset_after: bool,
    /// Unset HaltSeconds.
    #[arg(long)]
    unset_seconds: bool,
    /// Unset the halt reason (e.g. SCR_FINALIZE_CALLED, so a launcher runs
    /// the job again).
    #[arg(long)]
    unset_reason: bool,
    /// Remove the halt file.
    #[arg(short = 'r', long, conflicts_with_all = [
        "checkpoints", "before", "after", "seconds", "immediate", "reason", "list",
        "unset_checkpoints", "unset_before", "unset_after", "unset_seconds",
        "unset_reason", "json",
    ])]
    remove: bool,
    /// Print the settings as JSON.
    #[arg(long)]
    json: bool,
    /// Name each halt file on stderr before it is read or changed (SCR
    /// 3.1's scr_halt -v).
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Prefix directories (default: $SCR_PREFIX, else the current directory).
    #[arg(value_name = "PREFIX")]
    dirs: Vec<PathBuf>,
}

/// The prefix directories a command works on: those given, else
/// `$SCR_PREFIX`, else the current directory.
pub fn prefixes(given: &[PathBuf]) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    match std::env::var_os("SCR_PREFIX").filter(|v| !v.is_empty()) {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![PathBuf::from(".")],
    }
}

fn usage(message: String) -> CliError {
    CliError::Usage(message)
}

/// The edit the options ask for (usage errors: exit USAGE).
fn edit_of(a: &HaltArgs, now: i64) -> Result<HaltEdit, CliError> {
    let zone = TimeZone::system();
    let time = |opt: &str, t: &Option<String>| {
        t.as_deref()
            .map(|t| parse_time(t, now, &zone).map_err(|e| usage(format!("--{opt}: {e}"))))
            .transpose()
    };
    let mut e = HaltEdit {
        checkpoints: a.checkpoints.map(i64::from),
        before_s: time("before", &a.before)?,
        after_s: time("after", &a.after)?,
        seconds: a.seconds.map(i64::from),
        reason: a
            .reason
            .clone()
            .or_else(|| a.immediate.then(|| REASON_JOB_HALTED.to_string())),
        unset_checkpoints: a.unset_checkpoints,
        unset_before: a.unset_before,
        unset_after: a.unset_after,
        unset_seconds: a.unset_seconds,
        unset_reason: a.unset_reason,
    };
    if let Some(r) = &e.reason {
        if r.trim().is_empty() || r.contains('\0') {
            return Err(usage(format!(
                "--reason {r:?}: give a non-empty reason without NUL bytes"
            )));
        }
    }
    let both = e.conflicts();
    if !both.is_empty() {
        return Err(usage(format!(
            "--{0} and --unset-{0} given together: choose one",
            both.join(", --")
        )));
    }
    // A bare `scr halt` halts the job, as scr_halt does.
    if e.is_empty() && !a.list {
        e.reason = Some(REASON_JOB_HALTED.to_string());
    }
    Ok(e)
}

/// Run `scr halt`.
pub fn run(a: HaltArgs) -> Result<(), CliError> {
    let now = SystemClock.unix_secs();
    let edit = if a.remove {
        HaltEdit::default()
    } else {
        edit_of(&a, now)?
    };
    for prefix in prefixes(&a.dirs) {
        if !prefix.is_dir() {
            return Err(CliError::NoPrefix { path: prefix });
        }
        let path = halt_path(&prefix);
        // Never read, write or remove through a link out of the prefix.
        scr::beneath::check(&prefix, &path)?;
        if a.verbose {
            eprintln!("scr halt: halt file {}", path.display());
        }
        if a.remove {
            remove(&prefix, &path)?;
        } else if edit.is_empty() {
            list(&prefix, &path, a.json, now)?;
        } else {
            apply(&prefix, &path, &edit, a.json, now)?;
        }
    }
    Ok(())
}

/// An error of `beneath`'s `*_in` functions: a refused link, or
/// the file system's failure.
fn in_err(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> CliError {
    let path = path.to_path_buf();
    move |e| match scr::beneath::into_refusal(e) {
        Ok(refused) => CliError::Beneath(refused),
        Err(source) => CliError::Io { path, op, source },
    }
}

fn remove(prefix: &Path, path: &Path) -> Result<(), CliError> {
    match scr::beneath::remove_file_in(prefix, path) {
        Ok(()) => println!("Removed halt file {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("No halt file {}", path.display())
        }
        Err(e) => return Err(in_err(path, "remove")(e)),
    }
    Ok(())
}

fn list(prefix: &Path, path: &Path, json: bool, now: i64) -> Result<(), CliError> {
    let (exists, h) = match Halt::read_file_in(prefix, path) {
        Ok(h) => (true, h),
        Err(e) if e.is_not_found() => (false, Halt::default()),
        Err(e) => return Err(e.into()),
    };
    if json {
        println!("{}", to_json(path, exists, &h, now));
    } else {
        print!("{}", describe(path, &h));
    }
    Ok(())
}

fn apply(
    prefix: &Path,
    path: &Path,
    edit: &HaltEdit,
    json: bool,
    now: i64,
) -> Result<(), CliError> {
    if let Some(dir) = path.parent() {
        scr::beneath::create_dir_all_in(prefix, dir).map_err(in_err(dir, "create"))?;
    }
    let applied = edit.apply_to_file(prefix, path)?;
    let (said, h) = (applied.changes, applied.halt);
    for (opt, t) in [("--before", edit.before_s), ("--after", edit.after_s)] {
        if let Some(t) = t.filter(|t| *t <= now) {
            eprintln!("scr halt: note: {opt} time {t} has passed: the job halts at its next check");
        }
    }
    if json {
        let mut j = to_json(path, true, &h, now);
        j["changes"] = serde_json::json!(said);
        println!("{j}");
    } else {
        for s in &said {
            println!("{s}");
        }
        println!();
        print!("{}", describe(path, &h));
    }
    Ok(())
}
