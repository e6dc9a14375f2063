//! Seeded, structure-aware mutation fuzzer for the kvtree decoders, bounded
//! so CI can run it in seconds (ci/tests.d/fuzz.sh). For hours-long
//! coverage-guided runs use the cargo-fuzz target in `scr/fuzz/`
//! (docs/fuzzing.md).
//!
//! ```text
//! cargo run -p scr --example kvtree_fuzz -- [--seed S] [--iters N] [--start I]
//! ```
//!
//! Iteration `i` draws everything from its own generator seeded by
//! `(S, i)`, so `--seed S --start i --iters 1` replays one iteration alone.
//! Each iteration takes a valid encoded file, applies one to four mutations
//! (bit flips, byte sets, truncation, insertion, deletion, count inflation,
//! key damage, element duplication), usually re-seals the size field and
//! CRC so the damage reaches the hash decoder, and checks:
//! - neither `file::decode` nor `KvTree::unpack` panics;
//! - whatever they accept re-encodes to bytes that decode to the same tree;
//! - a mutated file that was not re-sealed and differs from the original by
//!   one flipped bit is rejected (CRC32 catches every single-bit error).

use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::process::ExitCode;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scr::kvtree::file::{self, FLAG_CRC32, HEADER_LEN};
use scr::kvtree::KvTree;

struct Args {
    seed: u64,
    iters: u64,
    start: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        iters: 100_000,
        start: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: {value:?} is not an unsigned integer"))?;
        match flag.as_str() {
            "--seed" => args.seed = n,
            "--iters" => args.iters = n,
            "--start" => args.start = n,
            _ => return Err(format!("unknown flag {flag} (--seed, --iters, --start)")),
        }
    }
    Ok(args)
}

/// SplitMix64 finaliser: decorrelates the per-iteration seeds.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random_key(rng: &mut ChaCha8Rng) -> String {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(0..10_000).to_string(),
        1 => ["RANK", "FILE", "SIZE", "CRC", "COMPLETE", "DSET", "FILES"][rng.gen_range(0..7)]
            .to_owned(),
        2 => String::new(),
        _ => (0..rng.gen_range(1..6))
            .map(|_| {
                char::from_u32(rng.gen_range(1..0x3000))
                    .filter(|&c| c != '\0')
                    .unwrap_or('x')
            })
            .collect(),
    }
}

fn random_tree(rng: &mut ChaCha8Rng, depth: u32) -> KvTree {
    let mut t = KvTree::new();
    if depth == 0 {
        return t;
    }
    for _ in 0..rng.gen_range(0..5) {
        let child = random_tree(rng, depth - 1);
        t.set(random_key(rng), child);
    }
    t
}

fn seed_tree(rng: &mut ChaCha8Rng) -> KvTree {
    match rng.gen_range(0..4) {
        0 => {
            // Filemap-shaped.
            let mut t = KvTree::new();
            for rank in 0..rng.gen_range(1..4) {
                let r = t.set_kv_int("RANK", rank);
                r.set_int("FILES", 2);
                for f in 0..2 {
                    let e = r.set_kv("FILE", format!("ckpt_{rank}_{f}.dat"));
                    e.set_bytecount("SIZE", rng.gen());
                    e.set_crc32("CRC", rng.gen());
                    e.set_int("COMPLETE", 1);
                }
            }
            t
        }
        1 => {
            // A chain close to the depth bound.
            let mut t = KvTree::new();
            for _ in 0..rng.gen_range(scr::kvtree::MAX_DEPTH - 2..=scr::kvtree::MAX_DEPTH) {
                let mut parent = KvTree::new();
                parent.set("k", t);
                t = parent;
            }
            t
        }
        _ => random_tree(rng, 4),
    }
}

/// Offsets (in the file) of every count field and every key start.
fn structure(bytes: &[u8]) -> (Vec<usize>, Vec<usize>) {
    fn walk(b: &[u8], pos: &mut usize, counts: &mut Vec<usize>, keys: &mut Vec<usize>) {
        counts.push(*pos);
        let n = u32::from_be_bytes(b[*pos..*pos + 4].try_into().unwrap());
        *pos += 4;
        for _ in 0..n {
            keys.push(*pos);
            *pos += b[*pos..].iter().position(|&c| c == 0).unwrap() + 1;
            walk(b, pos, counts, keys);
        }
    }
    let (mut counts, mut keys) = (Vec::new(), Vec::new());
    let mut pos = HEADER_LEN;
    walk(bytes, &mut pos, &mut counts, &mut keys);
    (counts, keys)
}

fn reseal(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let len = bytes.len() as u64;
    bytes[8..16].copy_from_slice(&len.to_be_bytes());
    let flags = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    if flags & FLAG_CRC32 != 0 && bytes.len() >= HEADER_LEN + 4 {
        let end = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..end]);
        bytes[end..].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Apply one mutation; `counts`/`keys` locate the original's structure
/// (offsets may be stale after earlier mutations, which is fine: they are
/// then just more random positions). Returns true for a single-bit flip.
fn mutate(rng: &mut ChaCha8Rng, b: &mut Vec<u8>, counts: &[usize], keys: &[usize]) -> bool {
    let pick = |rng: &mut ChaCha8Rng, v: &[usize], len: usize| -> Option<usize> {
        let p = *v.get(rng.gen_range(0..v.len().max(1)))?;
        (p < len).then_some(p)
    };
    match rng.gen_range(0..9) {
        0 if !b.is_empty() => {
            let i = rng.gen_range(0..b.len());
            b[i] ^= 1 << rng.gen_range(0..8);
            return true;
        }
        1 if !b.is_empty() => {
            let i = rng.gen_range(0..b.len());
            b[i] = [0, 0xff, 0x7f, 0x80, 0x01, rng.gen()][rng.gen_range(0..6)];
        }
        2 => {
            let n = rng.gen_range(0..=b.len());
            b.truncate(n);
        }
        3 => {
            let at = rng.gen_range(0..=b.len());
            let extra: Vec<u8> = (0..rng.gen_range(1..9)).map(|_| rng.gen()).collect();
            b.splice(at..at, extra);
        }
        4 if !b.is_empty() => {
            let from = rng.gen_range(0..b.len());
            let to = rng.gen_range(from..=b.len().min(from + 16));
            b.drain(from..to);
        }
        5 | 6 => {
            // Count inflation: the decoder must reject without allocating by it.
            if let Some(p) = pick(rng, counts, b.len().saturating_sub(3)) {
                let old = u32::from_be_bytes(b[p..p + 4].try_into().unwrap());
                let rest = (b.len() - p - 4) as u32;
                let new = [
                    old.wrapping_add(1),
                    old.wrapping_mul(2),
                    u32::MAX,
                    rest / 5,
                    rest / 5 + 1,
                    old.wrapping_sub(1),
                ][rng.gen_range(0..6)];
                b[p..p + 4].copy_from_slice(&new.to_be_bytes());
            }
        }
        7 => {
            // Key damage: drop its NUL, or put a non-UTF-8 byte in it.
            if let Some(p) = pick(rng, keys, b.len()) {
                if rng.gen() {
                    if let Some(nul) = b[p..].iter().position(|&c| c == 0) {
                        b[p + nul] = b'x';
                    }
                } else {
                    b.insert(p, [0xff, 0xc3, 0x80][rng.gen_range(0..3)]);
                }
            }
        }
        _ => {
            // Duplicate a span starting at a key (often a whole element).
            if let Some(p) = pick(rng, keys, b.len()) {
                let end = rng.gen_range(p..=b.len().min(p + 64));
                let span = b[p..end].to_vec();
                b.splice(p..p, span);
            }
        }
    }
    false
}

fn check(bytes: &[u8], single_flip_unsealed: bool) -> Result<(), String> {
    let path = Path::new("fuzz.scr");
    match file::decode(bytes, path) {
        Ok(t) => {
            if single_flip_unsealed {
                return Err("a single-bit flip of a CRC-protected file was accepted".into());
            }
            let again = file::decode(&file::encode(&t, true), path)
                .map_err(|e| format!("re-encoded file does not decode: {e}"))?;
            if again != t {
                return Err("re-encoding changed the tree".into());
            }
        }
        Err(e) => {
            if !e.to_string().starts_with("fuzz.scr: ") {
                return Err(format!("error does not name the file: {e}"));
            }
        }
    }
    if let Ok((t, used)) = KvTree::unpack(bytes) {
        if used > bytes.len() {
            return Err("unpack consumed more than the buffer".into());
        }
        if KvTree::unpack_exact(&t.pack()).as_ref() != Ok(&t) {
            return Err("repacking changed the tree".into());
        }
    }
    Ok(())
}

fn run_one(seed: u64, i: u64) -> (Vec<u8>, Result<(), String>) {
    let mut rng = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(i)));
    let original = file::encode(&seed_tree(&mut rng), rng.gen_bool(0.8));
    let (counts, keys) = structure(&original);
    let mut bytes = original.clone();
    let mut flips = 0;
    let mutations = rng.gen_range(1..=4);
    for _ in 0..mutations {
        flips += usize::from(mutate(&mut rng, &mut bytes, &counts, &keys));
    }
    let sealed = rng.gen_bool(0.7);
    if sealed {
        reseal(&mut bytes);
    }
    let crc = u32::from_be_bytes(original[16..20].try_into().unwrap()) & FLAG_CRC32 != 0;
    let single_flip = !sealed && crc && mutations == 1 && flips == 1;
    let result = panic::catch_unwind(AssertUnwindSafe(|| check(&bytes, single_flip)))
        .unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panic: {msg}"))
        });
    (bytes, result)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kvtree_fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "kvtree_fuzz: seed {} iterations {}..{}",
        args.seed,
        args.start,
        args.start + args.iters
    );
    // Panics are caught and reported with their replay command below.
    panic::set_hook(Box::new(|_| {}));
    for i in args.start..args.start + args.iters {
        let (bytes, result) = run_one(args.seed, i);
        if let Err(why) = result {
            let out = std::env::temp_dir().join(format!("kvtree_fuzz_{}_{i}.scr", args.seed));
            let saved = match std::fs::write(&out, &bytes) {
                Ok(()) => format!("input saved to {}", out.display()),
                Err(e) => format!("could not save the input: {e}"),
            };
            eprintln!("kvtree_fuzz: FAILED at iteration {i}: {why}\n  {saved}");
            eprintln!(
                "  replay: cargo run -p scr --example kvtree_fuzz -- --seed {} --start {i} --iters 1",
                args.seed
            );
            return ExitCode::from(1);
        }
    }
    println!("kvtree_fuzz: {} iterations passed", args.iters);
    ExitCode::SUCCESS
}
