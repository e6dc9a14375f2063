//! kvtree benchmark: pack/unpack throughput on a filemap-shaped tree and
//! file write (atomic, fsynced) + read latency, each reported as a ratio to
//! a raw baseline measured in the same run on the same bytes:
//! - pack, unpack, decode: `memcpy` of the packed bytes;
//! - file write+read: `write` + `fsync` of the encoded bytes to a fresh file,
//!   then reading them back.
//!
//! Run: `cargo bench -p benches --bench kvtree` (Markdown on stdout).
//! Medians over repetitions, because the machine is shared and noisy.

use std::fs::{self, File};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use scr::kvtree::{file, KvTree};

/// Median wall time of `reps` runs of `f` (after one warm-up run). What `f`
/// returns is dropped after the clock stops: freeing a decoded tree is not
/// part of decoding it, and keeping every result alive instead would time
/// the kernel's page faults for fresh heap.
fn median<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    drop(black_box(f()));
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            let out = f();
            let dt = t0.elapsed();
            drop(black_box(out));
            dt
        })
        .collect();
    times.sort_unstable();
    times[reps / 2]
}

fn mib_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

/// A filemap of `ranks` ranks with `files` files each, every file carrying
/// SIZE, CRC and COMPLETE as SCR's filemap does.
fn filemap(ranks: i64, files: i64) -> KvTree {
    let mut t = KvTree::new();
    for rank in 0..ranks {
        let r = t.set_kv_int("RANK", rank);
        r.set_int("FILES", files);
        for f in 0..files {
            let e = r.set_kv(
                "FILE",
                format!("/p/lscratch/user/ckpt.42/rank_{rank}_part_{f}.dat"),
            );
            e.set_bytecount("SIZE", 1_048_576 + (rank * files + f) as u64);
            e.set_crc32("CRC", (rank as u32).wrapping_mul(2_654_435_761) ^ f as u32);
            e.set_int("COMPLETE", 1);
        }
    }
    t
}

/// The developer guide's halt file.
fn halt() -> KvTree {
    let mut t = KvTree::new();
    t.set_int("CheckpointsLeft", 7);
    t.set_int("ExitAfter", 1_298_937_600);
    t.set_int("ExitBefore", 1_298_944_800);
    t.set_int("HaltSeconds", 1200);
    t.set_str("ExitReason", "SCR_FINALIZE_CALLED");
    t
}

fn raw_write_read(path: &Path, bytes: &[u8]) -> usize {
    let mut f = File::create(path).expect("create");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("fsync");
    drop(f);
    fs::read(path).expect("read").len()
}

fn main() {
    let tree = filemap(1000, 8);
    let packed = tree.pack();
    let n = packed.len();
    let reps = 31;

    let mut buf = Vec::with_capacity(n);
    let t_pack = median(reps, || {
        buf.clear();
        black_box(&tree).pack_into(&mut buf);
        black_box(&buf);
    });
    assert_eq!(buf, packed, "pack is deterministic");

    let mut dst = vec![0u8; n];
    let t_memcpy = median(reps, || {
        dst.copy_from_slice(black_box(&packed));
        black_box(&dst);
    });

    let t_unpack = median(reps, || {
        KvTree::unpack_exact(black_box(&packed)).expect("unpacks")
    });
    assert_eq!(KvTree::unpack_exact(&packed).expect("unpacks"), tree);

    let encoded = file::encode(&tree, true);
    let t_encode = median(reps, || file::encode(black_box(&tree), true));
    let t_decode = median(reps, || {
        file::decode(black_box(&encoded), Path::new("bench")).expect("decodes")
    });

    println!("## kvtree pack/unpack: filemap 1000 ranks x 8 files (SIZE, CRC, COMPLETE)\n");
    println!(
        "packed size {n} bytes ({:.2} MiB), {} tree nodes; medians of {reps} runs\n",
        n as f64 / 1048576.0,
        count_nodes(&tree)
    );
    println!("| operation | median | MiB/s | ratio to memcpy of the same bytes |");
    println!("| --- | --- | --- | --- |");
    let row = |name: &str, d: Duration| {
        println!(
            "| {name} | {:.3} ms | {:.0} | {:.1}x |",
            d.as_secs_f64() * 1e3,
            mib_per_s(n, d),
            d.as_secs_f64() / t_memcpy.as_secs_f64()
        );
    };
    row("memcpy (baseline)", t_memcpy);
    row("pack (into a reused buffer)", t_pack);
    row("unpack", t_unpack);
    row("file encode (pack + CRC)", t_encode);
    row("file decode (CRC check + unpack)", t_decode);

    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    println!(
        "\n## kvtree file write (temp file, fsync, rename, directory fsync) + read\n\n\
         directory: {} (the target dir's filesystem)\n",
        env!("CARGO_TARGET_TMPDIR")
    );
    println!(
        "| tree | file bytes | reps | ours: write+read | raw: write+fsync+read | ratio \
         | ours: write only | ours: read only | raw: write+fsync only |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, t, reps) in [
        ("halt file (guide example)", halt(), 41),
        ("filemap 1000 x 8", tree.clone(), 15),
    ] {
        let path = dir.path().join("bench.scr");
        let raw_path = dir.path().join("raw.bin");
        let bytes = file::encode(&t, true);
        let ours = median(reps, || {
            file::write(&path, &t).expect("write");
            file::read(&path).expect("read")
        });
        let raw = median(reps, || raw_write_read(&raw_path, &bytes));
        let ours_write = median(reps, || file::write(&path, &t).expect("write"));
        let ours_read = median(reps, || file::read(&path).expect("read"));
        let raw_write = median(reps, || {
            let mut f = File::create(&raw_path).expect("create");
            f.write_all(&bytes).expect("write");
            f.sync_all().expect("fsync");
        });
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {name} | {} | {reps} | {} | {} | {:.2}x | {} | {} | {} |",
            bytes.len(),
            ms(ours),
            ms(raw),
            ours.as_secs_f64() / raw.as_secs_f64(),
            ms(ours_write),
            ms(ours_read),
            ms(raw_write),
        );
    }
}

fn count_nodes(t: &KvTree) -> usize {
    t.iter().map(|(_, c)| 1 + count_nodes(c)).sum()
}
