//! SCR 3.1 compatibility of the prefix directory, against real prefixes
//! written by LLNL SCR 3.1.0 (`tests/data/llnl-3.1/`, with LLNL's
//! `scr_print` of every metadata file in `<name>.print.txt`):
//!
//! - every LLNL file reads, through `scr print`'s reader, as exactly the
//!   tree LLNL printed;
//! - a prefix this crate writes for the same kind of run (4 ranks on 4
//!   nodes, XOR sets of 4, flush every 2nd checkpoint and at finalize, one
//!   `ckpt.<n>/rank_<r>.ckpt` per rank) has, file for file, the key
//!   structure of LLNL's (times, ids, names, sizes aside);
//! - `scr index --list`, `scr halt --list` and `scr flush-file` read LLNL's
//!   prefixes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, Cluster};
use scr::kvtree::file::read_with_payload;
use scr::kvtree::KvTree;
use scr::Flags;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llnl-3.1")
}

/// LLNL's `scr_print` output: `== ./<path>` starts a file; `KEY = VALUE`
/// is a key with one leaf child; `KEY` alone has the more indented lines
/// below it as children.
fn parse_llnl_print(text: &str) -> BTreeMap<String, KvTree> {
    let mut files = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("== ./") {
            if let Some((n, lines)) = current.take() {
                files.insert(n, tree_of(&lines));
            }
            current = Some((name.to_owned(), Vec::new()));
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some((n, lines)) = current {
        files.insert(n, tree_of(&lines));
    }
    files
}

fn tree_of(lines: &[&str]) -> KvTree {
    let mut root = KvTree::new();
    let mut stack: Vec<(usize, Vec<String>)> = Vec::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let mut path = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
        let (key, value) = match line.trim().split_once(" = ") {
            Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
            None => (line.trim().to_owned(), None),
        };
        let mut node = &mut root;
        for k in &path {
            node = node.entry(k.clone());
        }
        let child = node.entry(key.clone());
        if let Some(v) = value {
            child.entry(v);
        }
        path.push(key);
        stack.push((indent, path));
    }
    root
}

#[test]
fn every_llnl_file_reads_as_llnl_printed_it() {
    for name in ["xor-flushed", "bypass", "halted"] {
        let text = std::fs::read_to_string(fixtures().join(format!("{name}.print.txt"))).unwrap();
        let printed = parse_llnl_print(&text);
        assert!(printed.len() >= 10, "{name}: {} files", printed.len());
        for (file, want) in &printed {
            let got = read_with_payload(fixtures().join(name).join(file)).unwrap();
            assert_eq!(got.payload_bytes, 0, "{name}/{file}");
            assert_eq!(&got.tree, want, "{name}/{file}");
        }
    }
}

/// Keys whose values are part of the format (the rest are times, ids,
/// names, sizes, users).
const KEPT_VALUES: &[&str] = &["VERSION", "LEVEL", "COMPLETE", "FLAG_CKPT", "FLAG_OUTPUT"];

/// Every key path of `t`: numeric keys become `#`, dataset names under
/// `NAME` become `<name>`, and a `KEY = VALUE` leaf keeps its value only
/// for [`KEPT_VALUES`].
fn structure(t: &KvTree) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(t, "", "", &mut out);
    out
}

fn walk(t: &KvTree, path: &str, parent: &str, out: &mut BTreeSet<String>) {
    for (k, child) in t.iter() {
        let shown = if k.bytes().all(|b| b.is_ascii_digit()) {
            "#".to_owned()
        } else if parent == "NAME" && path == "/NAME" {
            "<name>".to_owned()
        } else {
            k.clone()
        };
        let p = format!("{path}/{shown}");
        // LOCATION's children are flags, never a value.
        let leaf = k != "LOCATION" && child.len() == 1 && child.iter().all(|(_, c)| c.is_empty());
        if leaf {
            let v = child
                .iter()
                .next()
                .map(|(v, _)| v.clone())
                .unwrap_or_default();
            if KEPT_VALUES.contains(&k.as_str()) {
                out.insert(format!("{p} = {v}"));
            } else {
                out.insert(format!("{p} = …"));
            }
        } else {
            out.insert(p.clone());
            walk(child, &p, k, out);
        }
    }
}

/// The kind of a metadata file: its path with the dataset id dropped.
fn kind(rel: &str) -> String {
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if parts.len() == 3 && parts[1].starts_with("scr.dataset.") {
        parts[1] = "scr.dataset.<id>".into();
    }
    parts.join("/")
}

fn metadata_files(prefix: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let meta = prefix.join(".scr");
    let mut stack = vec![meta.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(prefix)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.entry(kind(&rel)).or_default().push(p);
        }
    }
    out
}

/// One `ckpt.<c>/rank_<r>.ckpt` per rank, as LLNL's test_api writes.
fn test_api_like(scr: &mut scr::Scr, c: &dyn scr::comm::Comm, prefix: &Path, n: usize) {
    let rank = c.rank();
    for ckpt in 1..=n {
        let mut out = scr
            .start_output(Some(&format!("ckpt.{ckpt}")), Flags::CHECKPOINT)
            .unwrap();
        let p = out
            .route_file(prefix.join(format!("ckpt.{ckpt}/rank_{rank}.ckpt")))
            .unwrap();
        std::fs::write(&p, vec![rank as u8; 1000 + rank]).unwrap();
        assert!(out.complete(true).unwrap());
    }
}

#[test]
fn our_prefix_has_the_key_structure_of_llnl_s() {
    let cl = Cluster::new();
    let extra = [
        ("SCR_COPY_TYPE", "XOR"),
        ("SCR_SET_SIZE", "4"),
        ("SCR_FLUSH", "2"),
        ("SCR_CACHE_SIZE", "2"),
    ];
    run(
        &cl,
        4,
        |r| r,
        &extra,
        |scr, c| {
            test_api_like(scr, c, &cl.prefix, 3);
            None
        },
    );
    let theirs = metadata_files(&fixtures().join("xor-flushed"));
    let ours = metadata_files(&cl.prefix);
    // Files LLNL writes that are not metadata of the run's datasets.
    let not_compared = [".scr/log", ".scr/app.conf"];
    for (k, files) in &theirs {
        if not_compared.contains(&k.as_str()) {
            continue;
        }
        let mine = ours
            .get(k)
            .unwrap_or_else(|| panic!("we write no {k}; we write {:?}", ours.keys()));
        let want = structure(&read_with_payload(&files[0]).unwrap().tree);
        for f in mine {
            let got = structure(&read_with_payload(f).unwrap().tree);
            assert_eq!(got, want, "{}", f.display());
        }
    }
    // What we write beyond LLNL's files: our per-file metadata and the
    // empty lock files of read-modify-write updates (docs/decisions.md),
    // which LLNL's tools never open.
    let extra: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
    assert!(
        extra
            .iter()
            .all(|k| k.contains("/filemeta") || k.ends_with(".scr.lock")),
        "files LLNL does not write: {extra:?}"
    );
    assert!(extra.iter().any(|k| k.ends_with("/filemeta")), "{extra:?}");
}

fn scr_cli(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_tools_read_llnl_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, newest, count) in [("xor-flushed", 7, 4), ("bypass", 4, 4), ("halted", 4, 4)] {
        // A writable copy: the tools take locks beside the files.
        let prefix = dir.path().join(name);
        let src = fixtures().join(name).join(".scr");
        std::fs::create_dir_all(prefix.join(".scr")).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                std::fs::copy(e.path(), prefix.join(".scr").join(e.file_name())).unwrap();
            }
        }
        let p = prefix.to_str().unwrap();
        let (code, out) = scr_cli(&["index", "--prefix", p, "--list"]);
        assert_eq!(code, Some(0), "{out}");
        let rows: Vec<&str> = out.lines().skip(1).collect();
        assert_eq!(rows.len(), count, "{out}");
        assert!(rows[0].starts_with('*'), "CURRENT marked: {out}");
        assert!(rows[0].contains(&format!("ckpt.{newest}")), "{out}");
        let (code, out) = scr_cli(&["halt", "--list", p]);
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("SCR_FINALIZE_CALLED"), "{out}");
        assert_eq!(
            out.contains("CheckpointsLeft:  1"),
            name == "halted",
            "{out}"
        );
        let (code, out) = scr_cli(&["flush-file", "--latest", p]);
        assert_eq!((code, out.trim()), (Some(0), newest.to_string().as_str()));
        let (code, out) = scr_cli(&["flush-file", "--location", &newest.to_string(), p]);
        assert_eq!(code, Some(0));
        assert_eq!(out.lines().collect::<Vec<_>>(), ["CACHE", "PFS"]);
        let (code, _) = scr_cli(&["flush-file", "--needflush", &newest.to_string(), p]);
        assert_eq!(code, Some(1), "on the PFS: no flush needed");
        let (code, out) = scr_cli(&["flush-file", "--name", &newest.to_string(), p]);
        assert_eq!(
            (code, out.trim()),
            (Some(0), format!("ckpt.{newest}").as_str())
        );
    }
}
