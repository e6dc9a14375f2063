//! `KNOWN_POINTS` is the list a plan is validated against and random plans
//! draw from: a name there that the library does not have makes a fault
//! that validates without a warning and never fires. So the list must be
//! exactly the points in the sources (the `scr` library and tools, and
//! `scr_app`), and each must be in docs/fault-injection.md's table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use faultsim::plan::KNOWN_POINTS;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The names in `fault_point!("NAME"` on code lines (not comments) of `text`.
fn points_in(text: &str) -> Vec<String> {
    const MACRO: &str = "fault_point!(\"";
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let mut rest = code;
        while let Some(at) = rest.find(MACRO) {
            rest = &rest[at + MACRO.len()..];
            let end = rest.find('"').expect("a closing quote on the point's line");
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

/// Every point the library, its tools and `scr_app` reach. `scr/src/fault.rs`
/// defines the macro; its own points are its unit tests'.
fn source_points() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&repo().join("scr/src"), &mut files);
    files.push(repo().join("testing/src/bin/scr_app.rs"));
    let mut points = BTreeSet::new();
    for f in files {
        if f.ends_with("scr/src/fault.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        points.extend(points_in(&text));
    }
    points
}

#[test]
fn the_known_points_are_exactly_the_library_s() {
    let sources = source_points();
    assert!(
        sources.len() >= 20,
        "too few points found in the sources: {sources:?}"
    );
    let known: BTreeSet<String> = KNOWN_POINTS.iter().map(|p| p.to_string()).collect();
    assert_eq!(known.len(), KNOWN_POINTS.len(), "a point listed twice");
    let never: Vec<&String> = known.difference(&sources).collect();
    assert!(
        never.is_empty(),
        "KNOWN_POINTS names points no source reaches (a fault there never fires): {never:?}"
    );
    let unlisted: Vec<&String> = sources.difference(&known).collect();
    assert!(
        unlisted.is_empty(),
        "points in the sources missing from KNOWN_POINTS: {unlisted:?}"
    );
}

#[test]
fn every_known_point_is_documented() {
    let doc = std::fs::read_to_string(repo().join("docs/fault-injection.md"))
        .expect("docs/fault-injection.md");
    // The table's first column: `point`, or `meta.<kind>.synced`, ... for
    // the metadata writer's points.
    let kinds = doc
        .lines()
        .find(|l| l.starts_with("| `meta.<kind>.synced`"))
        .expect("the metadata points' row");
    for p in KNOWN_POINTS {
        let documented = match p.strip_prefix("meta.") {
            Some(rest) => {
                let (kind, stage) = rest.split_once('.').expect("meta.<kind>.<stage>");
                kinds.contains(&format!("`meta.<kind>.{stage}`"))
                    && kinds.contains(&format!("`{kind}`"))
            }
            None => doc.lines().any(|l| {
                l.strip_prefix("| ")
                    .and_then(|row| row.split(" | ").next())
                    .is_some_and(|first| first.contains(&format!("`{p}`")))
            }),
        };
        assert!(
            documented,
            "{p} is not in docs/fault-injection.md's table of points"
        );
    }
}

#[test]
fn comments_and_other_macros_are_not_points() {
    let text = "// fault_point!(\"in.a.comment\")\n\
                let x = crate::fault_point!(\"a.b\", rank = r); fault_point!(\"c.d\")?;\n\
                /// `scr::fault_point!(\"doc.example\")`\n\
                other_macro!(\"e.f\");";
    assert_eq!(points_in(text), ["a.b", "c.d"]);
}
