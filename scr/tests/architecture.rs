//! The architecture, checked on the source (docs/design.md): the library's
//! modules form no import circle, no library file outside tests exceeds
//! 1,200 lines, and library code has no `Result<_, String>`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A file's code without comments and without its test module (a
/// `#[cfg(test)]` followed by a `mod`, which comes last in this crate's
/// files); other `#[cfg(test)]` items are kept.
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines.peek().map_or("", |l| l.trim());
            if next.starts_with("mod ") || next.starts_with("pub(crate) mod ") {
                break;
            }
        }
        out.push(line.split("//").next().unwrap_or(""));
    }
    out.join("\n")
}

/// Library files (not the binaries, not test files) with their top-level
/// module and code.
fn library_files() -> Vec<(PathBuf, String, String)> {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&root).ok()?.to_path_buf();
            let first = rel
                .components()
                .next()?
                .as_os_str()
                .to_string_lossy()
                .into_owned();
            let name = p.file_stem()?.to_string_lossy().into_owned();
            if first == "bin" || first == "lib.rs" || name == "tests" || name.ends_with("_tests") {
                return None;
            }
            let module = first.trim_end_matches(".rs").to_owned();
            let text = fs::read_to_string(&p).ok()?;
            Some((rel, module, text))
        })
        .collect()
}

/// Top-level module → the top-level modules its code names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = library_files();
    let modules: BTreeSet<String> = files.iter().map(|(_, m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, module, text) in &files {
        let code = code_of(text);
        let uses = graph.entry(module.clone()).or_default();
        for part in code.split("crate::").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if &name != module && modules.contains(&name) {
                uses.insert(name);
            }
        }
    }
    graph
}

/// A path from `from` back to `to` in `graph`, if any.
fn path_to(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in graph.get(from).into_iter().flatten() {
        if next == to {
            return Some(vec![next.clone()]);
        }
        if seen.insert(next.clone()) {
            if let Some(mut rest) = path_to(graph, next, to, seen) {
                rest.insert(0, next.clone());
                return Some(rest);
            }
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = module_graph();
    let mut circles = Vec::new();
    for (module, uses) in &graph {
        for used in uses {
            if let Some(back) = path_to(&graph, used, module, &mut BTreeSet::new()) {
                circles.push(format!("{module} -> {used} -> {}", back.join(" -> ")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between modules of scr (docs/design.md lists the layers):\n{}",
        circles.join("\n")
    );
}

#[test]
fn no_library_file_is_over_1200_lines() {
    let long: Vec<String> = library_files()
        .into_iter()
        .map(|(rel, _, text)| (rel, text.lines().count()))
        .filter(|(_, n)| *n > 1200)
        .map(|(rel, n)| format!("{}: {n} lines", rel.display()))
        .collect();
    assert!(
        long.is_empty(),
        "split these by concern:\n{}",
        long.join("\n")
    );
}

/// The error types of every `Result<T, E>` written in `code` (the last
/// top-level argument between the brackets), whitespace removed.
fn result_error_types(code: &str) -> Vec<String> {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    for (start, _) in compact.match_indices("Result<") {
        let args = &compact[start + "Result<".len()..];
        let (mut depth, mut last_comma, mut end) = (0usize, None, None);
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(i),
                _ => {}
            }
        }
        if let (Some(comma), Some(end)) = (last_comma, end) {
            out.push(args[comma + 1..end].to_string());
        }
    }
    out
}

#[test]
fn the_error_type_finder_sees_through_nested_generics() {
    let code = "fn f() -> Result<BTreeMap<String, String>, LaunchError> {}\n\
                let r: Vec<Option<Result<R, String>>> = x;";
    assert_eq!(result_error_types(code), ["LaunchError", "String"]);
}

#[test]
fn library_code_returns_typed_errors() {
    let mut found = Vec::new();
    for (rel, _, text) in library_files() {
        for (i, line) in code_of(&text).lines().enumerate() {
            let errors = result_error_types(line);
            if errors.iter().any(|e| e == "String" || e == "Vec<String>") {
                found.push(format!("{}:{}: {}", rel.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> in library code (use a typed error):\n{}",
        found.join("\n")
    );
}
