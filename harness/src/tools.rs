//! The programs a harness command runs: `scr_app` and the `scr` command,
//! each built with injection points (scr's `fault-injection` feature).
//!
//! A campaign whose `scr postrun` runs a `scr` built without them reports
//! false failures (its planned scavenge faults never fire), so the `scr`
//! command is looked for beside the application first (the same
//! `target/fault-injection/<profile>` directory) and refused, with the
//! command that builds it, when it has no injection points.

use std::path::{Path, PathBuf};

/// The cargo command that builds both programs with injection points.
pub const BUILD_BOTH: &str = "cargo build -p testing --bin scr_app -p scr --bin scr --features scr/fault-injection --target-dir target/fault-injection";

/// True when the binary was built with injection points (the name of the
/// plan variable is compiled in only then).
pub fn has_fault_injection(program: &Path) -> bool {
    const NEEDLE: &[u8] = b"SCR_FAULT_PLAN";
    std::fs::read(program).is_ok_and(|b| b.windows(NEEDLE.len()).any(|w| w == NEEDLE))
}

fn workspace() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .parent()
        .map_or_else(|| crate_dir.join(".."), Path::to_path_buf)
}

fn beside_me(name: &str) -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// scr_app: `given` (`--app`) or `$SCR_APP_BIN`, else the fault-injection
/// build in the workspace's target directory, else beside this binary.
pub fn find_app(given: Option<&PathBuf>) -> Result<PathBuf, String> {
    let from_env = std::env::var_os("SCR_APP_BIN").map(PathBuf::from);
    if let Some(p) = given.or(from_env.as_ref()) {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(format!("{}: no such application", p.display()))
        };
    }
    let ws = workspace();
    let mut tried = Vec::new();
    for p in [
        ws.join("target/fault-injection/debug/scr_app"),
        ws.join("target/fault-injection/release/scr_app"),
    ]
    .into_iter()
    .chain(beside_me("scr_app"))
    {
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p);
    }
    Err(format!(
        "scr_app not found (tried {}); build it with `{BUILD_BOTH}` or pass --app",
        shown(&tried)
    ))
}

/// The `scr` command whose `scr postrun` the run loop runs, with injection
/// points: `given` (`--scr`) when it has them; else the first of `scr`
/// beside `app`, the workspace's `target/fault-injection/{debug,release}/scr`
/// and `scr` beside this binary that has them. An error names what was
/// tried and how to build it: a `scr` without injection points would make
/// every planned scavenge fault a false failure.
pub fn find_scr(given: Option<&PathBuf>, app: Option<&Path>) -> Result<PathBuf, String> {
    let how = format!("build it with `{BUILD_BOTH}`");
    if let Some(p) = given {
        if !p.is_file() {
            return Err(format!("--scr {}: no such program; {how}", p.display()));
        }
        if !has_fault_injection(p) {
            return Err(format!(
                "--scr {} was built without injection points, so the faults planned inside `scr postrun` would never fire; {how} and pass --scr target/fault-injection/debug/scr",
                p.display()
            ));
        }
        return Ok(p.clone());
    }
    let ws = workspace();
    let mut tried = Vec::new();
    let candidates = app
        .and_then(Path::parent)
        .map(|d| d.join("scr"))
        .into_iter()
        .chain([
            ws.join("target/fault-injection/debug/scr"),
            ws.join("target/fault-injection/release/scr"),
        ])
        .chain(beside_me("scr"));
    for p in candidates {
        if tried.contains(&p) {
            continue;
        }
        if p.is_file() && has_fault_injection(&p) {
            return Ok(p);
        }
        tried.push(p);
    }
    Err(format!(
        "no `scr` command with injection points (tried {}; a `scr` built without the fault-injection feature does not count); {how}, or pass --scr",
        shown(&tried)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(dir: &Path, name: &str, injection: bool) -> PathBuf {
        let p = dir.join(name);
        let body: &[u8] = if injection {
            b"\x7fELF ... SCR_FAULT_PLAN ..."
        } else {
            b"\x7fELF ... no plan here ..."
        };
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn scr_beside_the_app_with_injection_points_is_chosen() {
        let d = tempfile::tempdir().unwrap();
        let app = program(d.path(), "scr_app", true);
        let scr = program(d.path(), "scr", true);
        assert_eq!(find_scr(None, Some(&app)), Ok(scr));
    }

    #[test]
    fn a_scr_without_injection_points_is_refused_with_the_build_command() {
        let d = tempfile::tempdir().unwrap();
        let plain = program(d.path(), "scr", false);
        let e = find_scr(Some(&plain), None).unwrap_err();
        assert!(e.contains("without injection points"), "{e}");
        assert!(e.contains(BUILD_BOTH), "{e}");
        // Beside the app, a plain `scr` is skipped, not taken.
        let app = program(d.path(), "scr_app", true);
        if let Ok(p) = find_scr(None, Some(&app)) {
            assert_ne!(p, plain);
            assert!(has_fault_injection(&p));
        }
        let missing = d.path().join("nope");
        let e = find_scr(Some(&missing), None).unwrap_err();
        assert!(e.contains("no such program"), "{e}");
    }
}
