//! The user-facing documents stay true to the repository:
//!
//! - every relative link in README.md and docs/ (the user guide included)
//!   names a file or directory of this repository, and none reaches outside
//!   it (a clone has no `../shared`);
//! - every code block the guide quotes from a file, marked by a comment
//!   `<!-- quote: PATH -->` on the line before its opening fence, is that
//!   file's text, so the guide shows the tested examples as they are.

use std::fs;
use std::path::{Component, Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testing/ sits in the repository")
        .to_path_buf()
}

fn markdown_files() -> Vec<PathBuf> {
    let root = repo();
    let mut out = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The targets of inline Markdown links `[text](target)` outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans so `[x](y)` shown as code is not a link.
        let mut plain = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                plain.push(c);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            match after.find(')') {
                Some(j) => {
                    out.push((n + 1, after[..j].trim().to_string()));
                    rest = &after[j + 1..];
                }
                None => break,
            }
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
        || target.starts_with('#')
}

/// Resolves `target` against the directory of `doc`, lexically.
fn resolve(doc: &Path, target: &str) -> PathBuf {
    let path = target.split('#').next().unwrap_or(target);
    let mut out = doc.parent().expect("a document's directory").to_path_buf();
    for c in Path::new(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[test]
fn every_relative_link_names_a_file_of_the_repository() {
    let root = repo();
    let mut bad = Vec::new();
    let mut seen = 0;
    for doc in markdown_files() {
        let text = fs::read_to_string(&doc).expect("a readable document");
        for (line, target) in links(&text) {
            if is_external(&target) {
                continue;
            }
            seen += 1;
            let path = resolve(&doc, &target);
            let rel = doc
                .strip_prefix(&root)
                .unwrap_or(&doc)
                .display()
                .to_string();
            if !path.starts_with(&root) {
                bad.push(format!("{rel}:{line}: `{target}` leaves the repository"));
            } else if !path.exists() {
                bad.push(format!("{rel}:{line}: `{target}` does not exist"));
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} relative links found: is the parser broken?"
    );
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn no_document_points_into_the_shared_directory_a_clone_lacks() {
    let root = repo();
    let mut bad = Vec::new();
    for doc in markdown_files() {
        let text = fs::read_to_string(&doc).expect("a readable document");
        for (n, line) in text.lines().enumerate() {
            if line.contains("../shared") {
                let rel = doc
                    .strip_prefix(&root)
                    .unwrap_or(&doc)
                    .display()
                    .to_string();
                bad.push(format!("{rel}:{}: {line}", n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "links to ../shared:\n{}", bad.join("\n"));
}

/// Each `<!-- quote: PATH -->` marker and the fenced block after it.
fn quotes(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some(rest) = line.strip_prefix("<!-- quote:") {
            let path = rest.trim_end_matches("-->").trim().to_string();
            let fence = i + 1;
            assert!(
                fence < lines.len() && lines[fence].trim_start().starts_with("```"),
                "line {}: a quote marker must be followed by a fenced block",
                i + 1
            );
            let mut body = Vec::new();
            let mut j = fence + 1;
            while j < lines.len() && !lines[j].trim_start().starts_with("```") {
                body.push(lines[j]);
                j += 1;
            }
            out.push((i + 1, path, body.join("\n")));
            i = j;
        }
        i += 1;
    }
    out
}

#[test]
fn the_guide_quotes_its_examples_as_they_are() {
    let root = repo();
    let mut checked = 0;
    let mut bad = Vec::new();
    for doc in markdown_files() {
        let text = fs::read_to_string(&doc).expect("a readable document");
        let rel = doc
            .strip_prefix(&root)
            .unwrap_or(&doc)
            .display()
            .to_string();
        for (line, path, body) in quotes(&text) {
            checked += 1;
            match fs::read_to_string(root.join(&path)) {
                Ok(file) if file.trim_end() == body.trim_end() => {}
                Ok(_) => bad.push(format!(
                    "{rel}:{line}: the block differs from {path}; copy the file's text into it"
                )),
                Err(e) => bad.push(format!("{rel}:{line}: {path}: {e}")),
            }
        }
    }
    assert!(checked > 0, "no quoted example found in the guide");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_link_parser_finds_links_and_skips_code() {
    let text = "see [a](x.md) and `[b](y.md)`\n```\n[c](z.md)\n```\n[d](../w.md#part)";
    let found: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(found, vec!["x.md".to_string(), "../w.md#part".to_string()]);
    let q = quotes("<!-- quote: a/b.rs -->\n```rust\nfn main() {}\n```\n");
    assert_eq!(
        q,
        vec![(1, "a/b.rs".to_string(), "fn main() {}".to_string())]
    );
}
