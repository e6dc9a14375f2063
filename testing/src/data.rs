//! Deterministic checkpoint contents: what rank `r` writes in checkpoint `c`
//! of a run seeded with `s` is a pure function of `(s, r, c)`, so a restarted
//! run (or the harness, from outside) can verify every byte without having
//! kept a copy.
//!
//! The plan deliberately varies across ranks: several files per rank, sizes
//! differing from rank to rank, and some ranks writing nothing, because those
//! are the shapes that break redundancy layouts (XOR padding, empty members).

/// One file a rank writes in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// File name (no directory), unique per rank and checkpoint.
    pub name: String,
    /// Length in bytes.
    pub size_bytes: u64,
    /// Key from which every byte of the file is derived.
    pub key: u64,
}

/// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key_of(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(0x5eed_5eed_5eed_5eed, |acc, &p| mix64(acc ^ p))
}

/// The files rank `rank` writes in checkpoint `ckpt` of a run seeded `seed`,
/// with sizes drawn around `mean_bytes`. About one rank in seven writes
/// nothing; the others write one to three files whose sizes differ from rank
/// to rank (from 0 to twice the mean, not a multiple of anything in
/// particular).
pub fn file_plan(seed: u64, rank: u32, ckpt: u64, mean_bytes: u64) -> Vec<FileSpec> {
    let k = key_of(&[seed, u64::from(rank), ckpt]);
    if k % 7 == 3 {
        return Vec::new();
    }
    let nfiles = 1 + (mix64(k) % 3);
    (0..nfiles)
        .map(|i| {
            let fk = key_of(&[k, i]);
            let size_bytes = if mean_bytes == 0 {
                0
            } else {
                mix64(fk) % (2 * mean_bytes + 1)
            };
            FileSpec {
                name: format!("rank_{rank}.ckpt{ckpt}.part{i}"),
                size_bytes,
                key: fk,
            }
        })
        .collect()
}

/// Fill `buf` with the bytes of the file keyed `key` starting at byte
/// `offset`. Any range can be produced independently (random access), so
/// large files are generated and verified piece by piece.
pub fn fill(key: u64, offset: u64, buf: &mut [u8]) {
    let mut pos = 0usize;
    let mut word_index = offset / 8;
    let mut skip = (offset % 8) as usize;
    while pos < buf.len() {
        let word = mix64(key ^ word_index.wrapping_mul(0x2545_f491_4f6c_dd1d)).to_le_bytes();
        let take = (8 - skip).min(buf.len() - pos);
        buf[pos..pos + take].copy_from_slice(&word[skip..skip + take]);
        pos += take;
        skip = 0;
        word_index += 1;
    }
}

/// Offset of the first byte of `data` (which claims to be the file keyed
/// `key` from `offset` on) that differs from the expected contents.
pub fn first_mismatch(key: u64, offset: u64, data: &[u8]) -> Option<u64> {
    let mut expect = vec![0u8; data.len().min(1 << 20)];
    let mut done = 0usize;
    while done < data.len() {
        let n = expect.len().min(data.len() - done);
        fill(key, offset + done as u64, &mut expect[..n]);
        if let Some(i) = data[done..done + n]
            .iter()
            .zip(&expect[..n])
            .position(|(a, b)| a != b)
        {
            return Some(offset + (done + i) as u64);
        }
        done += n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_random_access() {
        let mut whole = vec![0u8; 1000];
        fill(42, 0, &mut whole);
        for (off, len) in [(0usize, 1usize), (3, 17), (8, 8), (999, 1), (123, 400)] {
            let mut part = vec![0u8; len];
            fill(42, off as u64, &mut part);
            assert_eq!(part, whole[off..off + len], "offset {off} len {len}");
        }
        assert_eq!(first_mismatch(42, 0, &whole), None);
        whole[517] ^= 4;
        assert_eq!(first_mismatch(42, 0, &whole), Some(517));
        assert_eq!(first_mismatch(42, 100, &whole[100..]), Some(517));
    }

    #[test]
    fn plans_vary_and_are_deterministic() {
        let plans: Vec<_> = (0..64).map(|r| file_plan(7, r, 3, 1000)).collect();
        assert_eq!(
            plans,
            (0..64)
                .map(|r| file_plan(7, r, 3, 1000))
                .collect::<Vec<_>>()
        );
        assert!(
            plans.iter().any(|p| p.is_empty()),
            "some rank writes nothing"
        );
        assert!(
            plans.iter().any(|p| p.len() > 1),
            "some rank writes several files"
        );
        let sizes: std::collections::BTreeSet<u64> =
            plans.iter().flatten().map(|f| f.size_bytes).collect();
        assert!(sizes.len() > 20, "sizes differ across ranks");
        assert_ne!(file_plan(7, 1, 3, 1000), file_plan(8, 1, 3, 1000));
        assert_ne!(file_plan(7, 1, 3, 1000), file_plan(7, 1, 4, 1000));
    }
}
