//! Give a repetition pages the machine has touched just before.
//!
//! On this workplace's virtual machines (virtio_balloon with free page
//! reporting) the host backs a guest page only when the guest first touches
//! it, and takes back free memory a few seconds after it was freed: the
//! guest's allocator then hands out pages that fault in the host as well,
//! until they are freed and reused again at once. Measured here
//! (results/checkpoint.md, "Pages the host took back"): writing 20,000 MiB to
//! /dev/shm took 27.7 s two minutes after boot, 14 s right after the same
//! write, and 35.9 s again after 30 s idle; the checkpoint benchmark's raw
//! 64 MiB writes took 0.16–0.23 s in the rows after a pause and 0.06 s in
//! the others, so schemes came out faster than a raw write. Freed pages that
//! the host has not taken back yet are the ones the allocator gives first,
//! so writing and removing a repetition's footprint right before it lets
//! the raw write and SCR's start from the same kind of page.

use std::io::Write;
use std::path::Path;

/// Write `bytes` to a file under `dir` and remove it (no fsync: only the
/// pages matter), so the repetition that follows finds that many pages
/// freed a moment ago. Skipped with `BENCH_WARM=0`.
pub fn footprint(dir: &Path, bytes: u64) {
    if bytes == 0 || std::env::var("BENCH_WARM").is_ok_and(|v| v == "0") {
        return;
    }
    let path = dir.join(".warm");
    let piece = vec![1u8; 1 << 20];
    let mut f = std::fs::File::create(&path)
        .unwrap_or_else(|e| panic!("warm: create {}: {e}", path.display()));
    let mut written = 0u64;
    while written < bytes {
        let n = piece.len().min((bytes - written) as usize);
        f.write_all(&piece[..n])
            .unwrap_or_else(|e| panic!("warm: write {}: {e}", path.display()));
        written += n as u64;
    }
    drop(f);
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("warm: remove {}: {e}", path.display()));
}
