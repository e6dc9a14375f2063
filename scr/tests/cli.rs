//! The `scr` command-line tool, run as a user would run it.

use std::path::Path;
use std::process::{Command, Output};

use scr::kvtree::{file, KvTree};

fn scr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .output()
        .expect("the scr binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// The developer guide's filemap example ("Hash" section).
fn guide_example() -> KvTree {
    let mut t = KvTree::new();
    let r0 = t.set_kv_int("RANK", 0);
    r0.set_int("FILES", 2);
    let foo0 = r0.set_kv("FILE", "foo_0.txt");
    foo0.set_bytecount("SIZE", 1024);
    foo0.set_int("COMPLETE", 1);
    let bar0 = r0.set_kv("FILE", "bar_0.txt");
    bar0.set_bytecount("SIZE", 2048);
    bar0.set_int("COMPLETE", 1);
    let r1 = t.set_kv_int("RANK", 1);
    r1.set_int("FILES", 1);
    let foo1 = r1.set_kv("FILE", "foo_1.txt");
    foo1.set_bytecount("SIZE", 3072);
    foo1.set_int("COMPLETE", 1);
    t
}

/// The guide's indented form of `guide_example`, with keys sorted (the
/// guide prints LLNL's list order; we print byte order).
const GUIDE_EXAMPLE_PRINTED: &str = "\
RANK
  0
    FILE
      bar_0.txt
        COMPLETE
          1
        SIZE
          2048
      foo_0.txt
        COMPLETE
          1
        SIZE
          1024
    FILES
      2
  1
    FILE
      foo_1.txt
        COMPLETE
          1
        SIZE
          3072
    FILES
      1
";

#[test]
fn print_shows_the_guides_indented_form() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filemap_0.scrinfo");
    file::write(&path, &guide_example()).unwrap();
    let out = scr(&["print", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), GUIDE_EXAMPLE_PRINTED);
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn print_json_has_the_same_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filemap_0.scrinfo");
    file::write(&path, &guide_example()).unwrap();
    let out = scr(&["print", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["RANK"]["0"]["FILE"]["foo_0.txt"]["SIZE"]["1024"],
        serde_json::json!({})
    );
    assert_eq!(v["RANK"]["1"]["FILES"]["1"], serde_json::json!({}));
}

#[test]
fn print_of_the_pinned_llnl_order_file_is_sorted() {
    let pinned = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llnl_order.scr");
    let out = scr(&["print", pinned.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "\
CheckpointsLeft
  7
ExitAfter
  1298937600
ExitBefore
  1298944800
ExitReason
  SCR_FINALIZE_CALLED
HaltSeconds
  1200
"
    );
}

#[test]
fn print_of_a_corrupted_file_exits_damaged_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halt.scr");
    file::write(&path, &guide_example()).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[30] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let out = scr(&["print", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(6), "DAMAGED");
    assert_eq!(text(&out.stdout), "", "nothing printed from a bad file");
    let trailer = bytes.len() - 4;
    let want = format!(
        "scr: error: {}: offset {trailer}: CRC32 mismatch",
        path.display()
    );
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&want),
        "stderr {err:?} should start {want:?}"
    );
}

#[test]
fn print_of_a_truncated_file_exits_damaged_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.scr");
    std::fs::write(&path, [0x95, 0x1f, 0xc3]).unwrap();
    let out = scr(&["print", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(6), "DAMAGED");
    let err = text(&out.stderr);
    let want = format!("scr: error: {}: offset 3: truncated", path.display());
    assert!(
        err.starts_with(&want),
        "stderr {err:?} should start {want:?}"
    );
}

#[test]
fn print_of_a_file_with_payload_prints_the_header_then_the_payload_size() {
    // A redundancy file's shape: a kvtree header (with CRC) whose size
    // field stops before the parity that follows.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1_of_4_in_0.xor");
    let mut bytes = file::encode(&guide_example(), true);
    let header = bytes.len();
    bytes.extend((0..176u32).map(|i| (i * 7) as u8));
    std::fs::write(&path, &bytes).unwrap();
    let out = scr(&["print", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let want =
        format!("{GUIDE_EXAMPLE_PRINTED}-- 176 payload bytes follow the {header}-byte header\n");
    assert_eq!(text(&out.stdout), want);
    let out = scr(&["print", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).trim_start().starts_with('{'));
    assert!(text(&out.stderr).contains("176 payload bytes"));
    // A header whose size field goes past the end is a truncated file.
    bytes.truncate(header - 1);
    std::fs::write(&path, &bytes).unwrap();
    let out = scr(&["print", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(6), "DAMAGED");
    assert!(text(&out.stderr).contains(path.to_str().unwrap()));
}

#[test]
fn print_of_a_missing_file_exits_absent_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.scr");
    let out = scr(&["print", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(5), "ABSENT");
    let err = text(&out.stderr);
    assert!(err.contains(path.to_str().unwrap()), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let out = scr(&["print"]);
    assert_eq!(out.status.code(), Some(2));
}
