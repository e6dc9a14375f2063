//! Bounded input: `scr interval`, `scr print` and `scr halt` given files
//! that are huge, endless, binary or not files at all end quickly with an
//! error that says what the file is, instead of reading it all (or
//! blocking). Each command runs under a time limit so a regression fails
//! the test instead of hanging it; no test asserts a time.

use std::io::{Read, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scr::halt::halt_path;
use scr::kvtree::{file, KvTree};

/// Run `scr` with `args`; (exit code, stdout, stderr). Killed (and the
/// test failed) after 120 s.
fn scr(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .env_remove("SCR_PREFIX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the scr binary runs");
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    fn read(r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            // Keep at most 16 MiB: an unbounded writer fails the test, not the machine.
            let _ = r.take(16 << 20).read_to_end(&mut b);
            b
        })
    }
    let (o, e) = (read(out), read(err));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scr {args:?} did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (
        status.code().unwrap_or(-1),
        text(o.join().unwrap()),
        text(e.join().unwrap()),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ------------------------------------------------------------ scr interval

#[test]
fn interval_refuses_dev_zero_instead_of_growing() {
    let (code, _, err) = scr(&["interval", "--log", "/dev/zero"]);
    assert_eq!(code, 2, "USAGE: {err}");
    assert!(
        err.contains("/dev/zero: is a character device, not a log file"),
        "{err}"
    );
}

/// A log with a 1 MiB line of zero bytes (line 3) and 50 bad lines among
/// good ones.
fn damaged_log(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("log");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "2026-11-22T00:00:00Z: jobid=1, event=RUN_START").unwrap();
    writeln!(
        f,
        "2026-11-22T00:01:00Z: jobid=1, xfer=WRITE, dset=1, secs=30"
    )
    .unwrap();
    f.write_all(&vec![0u8; 1 << 20]).unwrap();
    f.write_all(b"\n").unwrap();
    for i in 0..50 {
        writeln!(f, "garbage line {i} {}", "x".repeat(5000)).unwrap();
    }
    writeln!(
        f,
        "2026-11-22T05:00:00Z: jobid=1, event=RUN_END, note=failed"
    )
    .unwrap();
    p
}

#[test]
fn interval_reports_a_long_line_once_and_caps_its_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let log = damaged_log(dir.path());
    let (code, out, err) = scr(&["interval", "--log", s(&log), "--cost", "30"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("skipped: ")).collect();
    assert_eq!(warnings.len(), 8, "the first 8, not 51: {err}");
    assert!(
        warnings[0].contains(":3: line of 1048576 bytes is longer than the 65536-byte limit"),
        "{}",
        warnings[0]
    );
    assert!(
        err.contains("43 more malformed lines skipped (51 in all; the first 8 shown)"),
        "{err}"
    );
    assert!(
        err.len() < 4096,
        "no line echoed whole: {} bytes",
        err.len()
    );
    assert!(out.contains("51 malformed lines skipped"), "{out}");
    // --strict stops at the long line, naming it, without echoing it.
    let (code, _, err) = scr(&["interval", "--log", s(&log), "--cost", "30", "--strict"]);
    assert_eq!(code, 6, "DAMAGED: {err}");
    assert!(err.contains("log:3: line of 1048576 bytes"), "{err}");
    assert!(err.len() < 1024, "{err}");
}

// ------------------------------------------------------------ scr print

#[test]
fn print_refuses_dev_zero_before_reading_it() {
    let (code, _, err) = scr(&["print", "/dev/zero"]);
    assert_eq!(code, 6, "DAMAGED: {err}");
    assert!(
        err.contains("/dev/zero: is a character device, not a regular file"),
        "{err}"
    );
}

#[test]
fn print_refuses_a_fifo_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (code, _, err) = scr(&["print", s(&fifo)]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("is a named pipe (FIFO), not a regular file"),
        "{err}"
    );
}

/// A 2 GiB sparse file starting with `head`.
fn sparse(path: &Path, head: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(head).unwrap();
    f.set_len(2 << 30).unwrap();
}

/// The 20-byte header of a kvtree file recording `size` bytes.
fn header(size: u64) -> Vec<u8> {
    let mut h = file::MAGIC.to_be_bytes().to_vec();
    h.extend_from_slice(&1u16.to_be_bytes());
    h.extend_from_slice(&1u16.to_be_bytes());
    h.extend_from_slice(&size.to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes());
    h
}

#[test]
fn print_checks_the_header_of_a_huge_file_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.scr");
    sparse(&bad, b"not a kvtree file at all");
    let (code, _, err) = scr(&["print", s(&bad)]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("offset 0: bad magic"), "{err}");
    // A good header that records 2 GiB: over the limit, said as such.
    let big = dir.path().join("big.scr");
    sparse(&big, &header(2 << 30));
    let (code, _, err) = scr(&["print", s(&big)]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("2147483648 bytes is larger than the 1073741824-byte limit for kvtree files"),
        "{err}"
    );
}

// ------------------------------------------------------------ scr halt

#[test]
fn halt_refuses_a_halt_file_over_its_kinds_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = halt_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // A valid kvtree of 100,000 keys (about 2 MB): not a halt file.
    let mut t = KvTree::new();
    for i in 0..100_000 {
        t.set_kv("X", format!("key-{i:08}"));
    }
    file::write(&path, &t).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 1 << 20);
    for args in [
        vec!["halt", "--list", s(dir.path())],
        vec!["halt", "--checkpoints", "3", s(dir.path())],
    ] {
        let (code, _, err) = scr(&args);
        assert_eq!(code, 6, "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{len} bytes is larger than the 1048576-byte limit for halt files"
            )),
            "{args:?}: {err}"
        );
    }
    // Nothing was written over it.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    // A sparse 2 GiB one with a bad header: refused from its header.
    sparse(&path, b"garbage");
    let (code, _, err) = scr(&["halt", "--list", s(dir.path())]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("offset 0: bad magic"), "{err}");
}
