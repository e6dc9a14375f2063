//! Test helper, like SCR's `scr_halt`: set `ExitReason` in a prefix
//! directory's halt file (`<prefix>/.scr/halt.scr`), so the next run's
//! SCR_Should_exit says 1. Used by ci/tests.d/capi.sh.
//!
//! Usage: `scr_halt_file <prefix> <reason>`

use std::path::PathBuf;
use std::process::ExitCode;

use scr::records::halt::{Halt, HALT_FILE};
use scr::records::Record;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, prefix, reason] = args.as_slice() else {
        eprintln!("usage: scr_halt_file <prefix> <reason>");
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(prefix).join(".scr");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("scr_halt_file: {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let path = dir.join(HALT_FILE);
    match Halt::update_file(&path, |h: &mut Halt| {
        h.exit_reason = Some(reason.clone());
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scr_halt_file: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
