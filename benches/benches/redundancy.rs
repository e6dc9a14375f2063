//! Throughput of the redundancy arithmetic, as ratios to memcpy of the same
//! bytes measured in the same run on one core (DESIGN.md, "Measuring"):
//! XOR encode/rebuild of a set of 8, GF(2^8) region kernels, and RS with
//! k = 2 on a set of 8 — ours against the `reed-solomon-erasure` crate.
//!
//! Run: `cargo bench -p benches --bench redundancy -j2`
//! (add `--features rse-simd` to measure the crate's C SIMD backend).
//! Each figure is the median over repetitions of (op bytes/s) / (memcpy
//! bytes/s), with the memcpy timed right before the op so machine noise
//! hits both.

use std::hint::black_box;
use std::time::Instant;

use reed_solomon_erasure::galois_8::ReedSolomon as RseCodec;
use scr::redundancy::gf256::Kernel;
use scr::redundancy::{rs, xor};

const MEMBERS: usize = 8;
const MEMBER_BYTES: usize = 8 << 20;
const REPS: usize = 15;

/// Deterministic, incompressible-looking bytes (xorshift).
fn fill(buf: &mut [u8], mut seed: u64) {
    for word in buf.chunks_mut(8) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let bytes = seed.to_le_bytes();
        word.copy_from_slice(&bytes[..word.len()]);
    }
}

/// Median ratio of op throughput to memcpy throughput over the same `bytes`.
fn ratio_to_memcpy(bytes: usize, mut op: impl FnMut()) -> (f64, f64) {
    let src = vec![7u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src); // fault the pages in before timing
    op(); // warm up (tables, page faults of reused buffers)
    let mut ratios = Vec::with_capacity(REPS);
    let mut op_gbs = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        let memcpy_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        op();
        let op_s = t.elapsed().as_secs_f64();
        ratios.push(memcpy_s / op_s);
        op_gbs.push(bytes as f64 / op_s / 1e9);
    }
    (median(&mut ratios), median(&mut op_gbs))
}

/// Median over repetitions of t(theirs) / t(ours), timed back to back, so
/// the comparison does not go through two noisy memcpy baselines.
fn speedup(mut ours: impl FnMut(), mut theirs: impl FnMut()) -> f64 {
    ours();
    theirs();
    let mut ratios = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let t = Instant::now();
        ours();
        let ours_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        theirs();
        ratios.push(t.elapsed().as_secs_f64() / ours_s);
    }
    median(&mut ratios)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn row(name: &str, bytes: usize, (ratio, gbs): (f64, f64)) {
    println!("| {name} | {} | {ratio:.2} | {gbs:.2} |", bytes >> 20);
}

fn main() {
    let rse_backend = if cfg!(feature = "rse-simd") {
        "C SIMD (simd-accel)"
    } else {
        "pure Rust (default)"
    };
    println!(
        "set of {MEMBERS} members x {} MiB, median of {REPS}; reed-solomon-erasure backend: {rse_backend}; our kernel: {:?}\n",
        MEMBER_BYTES >> 20,
        Kernel::best()
    );
    println!("| operation | MiB processed | ratio to memcpy | GB/s |");
    println!("| --- | --- | --- | --- |");

    let members: Vec<Vec<u8>> = (0..MEMBERS)
        .map(|i| {
            let mut m = vec![0u8; MEMBER_BYTES];
            fill(&mut m, 0x9E37_79B9_7F4A_7C15 ^ i as u64);
            m
        })
        .collect();
    let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
    let total = MEMBERS * MEMBER_BYTES;

    // Region kernels over the whole set's bytes.
    let mut acc = vec![0u8; total];
    let mut src = vec![0u8; total];
    fill(&mut src, 42);
    row(
        "xor_into (dst ^= src)",
        total,
        ratio_to_memcpy(total, || scr::redundancy::gf256::xor_into(&mut acc, &src)),
    );
    for kernel in Kernel::available() {
        row(
            &format!("mul_add_into {kernel:?} (dst ^= c*src)"),
            total,
            ratio_to_memcpy(total, || kernel.mul_add_into(&mut acc, &src, 0x53)),
        );
    }
    drop((acc, src));

    // XOR scheme over the set: encode reads every member once and writes
    // one chunk each; rebuild reads 7 members and 7 chunks.
    let xors = xor::encode_set(&refs).expect("encode");
    row(
        "XOR encode_set (8 members)",
        total,
        ratio_to_memcpy(total, || {
            black_box(xor::encode_set(black_box(&refs)).expect("encode"));
        }),
    );
    let mut reused = xors.clone();
    row(
        "XOR encode_set_into (8 members, reused buffers)",
        total,
        ratio_to_memcpy(total, || {
            xor::encode_set_into(black_box(&refs), &mut reused).expect("encode");
        }),
    );
    assert!(reused == xors, "same chunks");
    let xor_refs: Vec<&[u8]> = xors.iter().map(Vec::as_slice).collect();
    row(
        "XOR rebuild_member (1 of 8)",
        total,
        ratio_to_memcpy(total, || {
            black_box(
                xor::rebuild_member(3, black_box(&refs), &xor_refs, MEMBER_BYTES as u64)
                    .expect("rebuild"),
            );
        }),
    );

    // RS codec, 6 data + 2 parity shards of MEMBER_BYTES: ours vs the crate.
    let (data_n, k) = (MEMBERS - 2, 2);
    let data = &refs[..data_n];
    let data_bytes = data_n * MEMBER_BYTES;
    let ours = rs::ReedSolomon::new(data_n, k).expect("codec");
    let theirs = RseCodec::new(data_n, k).expect("codec");
    let mut parity = vec![vec![0u8; MEMBER_BYTES]; k];
    row(
        "RS(6+2) encode, ours",
        data_bytes,
        ratio_to_memcpy(data_bytes, || {
            let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
            ours.encode(data, &mut outs).expect("encode");
        }),
    );
    let mut parity_theirs = vec![vec![0u8; MEMBER_BYTES]; k];
    row(
        "RS(6+2) encode, reed-solomon-erasure",
        data_bytes,
        ratio_to_memcpy(data_bytes, || {
            theirs.encode_sep(data, &mut parity_theirs).expect("encode");
        }),
    );

    // Decode with two data shards lost (the expensive case: both rebuilt
    // from 4 data + 2 parity).
    let mut shards: Vec<Vec<u8>> = data
        .iter()
        .map(|d| d.to_vec())
        .chain(parity.clone())
        .collect();
    let lost = [1usize, 4];
    row(
        "RS(6+2) decode 2 lost, ours",
        data_bytes,
        ratio_to_memcpy(data_bytes, || {
            let present: Vec<bool> = (0..data_n + k).map(|i| !lost.contains(&i)).collect();
            let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
            ours.reconstruct(&mut refs, &present).expect("decode");
        }),
    );
    assert!(
        shards[1] == data[1] && shards[4] == data[4],
        "ours decodes correctly"
    );
    // The crate's parity (its matrix differs from ours), same data.
    let mut shards_theirs: Vec<Vec<u8>> = data
        .iter()
        .map(|d| d.to_vec())
        .chain(parity_theirs.clone())
        .collect();
    row(
        "RS(6+2) decode 2 lost, reed-solomon-erasure",
        data_bytes,
        ratio_to_memcpy(data_bytes, || {
            let mut refs: Vec<(&mut [u8], bool)> = shards_theirs
                .iter_mut()
                .enumerate()
                .map(|(i, s)| (s.as_mut_slice(), !lost.contains(&i)))
                .collect();
            theirs.reconstruct(&mut refs).expect("decode");
        }),
    );
    assert!(
        shards_theirs[1] == data[1] && shards_theirs[4] == data[4],
        "crate decodes correctly"
    );

    // Head to head, each repetition timing both codecs back to back.
    let mut outs_ours = vec![vec![0u8; MEMBER_BYTES]; k];
    let encode_speedup = speedup(
        || {
            let mut outs: Vec<&mut [u8]> = outs_ours.iter_mut().map(Vec::as_mut_slice).collect();
            ours.encode(data, &mut outs).expect("encode");
        },
        || theirs.encode_sep(data, &mut parity_theirs).expect("encode"),
    );
    let decode_speedup = speedup(
        || {
            let present: Vec<bool> = (0..data_n + k).map(|i| !lost.contains(&i)).collect();
            let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
            ours.reconstruct(&mut refs, &present).expect("decode");
        },
        || {
            let mut refs: Vec<(&mut [u8], bool)> = shards_theirs
                .iter_mut()
                .enumerate()
                .map(|(i, s)| (s.as_mut_slice(), !lost.contains(&i)))
                .collect();
            theirs.reconstruct(&mut refs).expect("decode");
        },
    );

    // RS set layout (N = 8, k = 2): encode every member's parity; rebuild 2.
    let set_parity = rs::encode_set(&refs, k).expect("encode");
    row(
        "RS set encode_set (8 members, k=2), ours",
        total,
        ratio_to_memcpy(total, || {
            black_box(rs::encode_set(black_box(&refs), k).expect("encode"));
        }),
    );
    let mut reused = set_parity.clone();
    row(
        "RS set encode_set_into (8 members, k=2, reused buffers), ours",
        total,
        ratio_to_memcpy(total, || {
            rs::encode_set_into(black_box(&refs), k, &mut reused).expect("encode");
        }),
    );
    assert!(reused == set_parity, "same parity");
    let sizes = vec![MEMBER_BYTES as u64; MEMBERS];
    let mut have: Vec<Option<Vec<u8>>> = members.iter().cloned().map(Some).collect();
    let mut have_parity: Vec<Option<Vec<u8>>> = set_parity.into_iter().map(Some).collect();
    row(
        "RS set rebuild_set (2 of 8 lost), ours",
        total,
        ratio_to_memcpy(total, || {
            have[2] = None;
            have_parity[5] = None;
            rs::rebuild_set(&mut have, &mut have_parity, &sizes, k).expect("rebuild");
        }),
    );
    assert!(have[2].as_deref() == Some(refs[2]), "rebuild is exact");

    println!("\nRS(6+2) speed of ours relative to reed-solomon-erasure ({rse_backend}), back to back, median of {REPS}:\n");
    println!("| operation | t(crate) / t(ours) |");
    println!("| --- | --- |");
    println!("| encode | {encode_speedup:.2} |");
    println!("| decode 2 lost | {decode_speedup:.2} |");
}
