//! Regression tests of the single bounded pass (issue 17 item 2): the
//! files an encode writes are byte for byte those of the implementation
//! that mapped every file and computed its CRC before the parity
//! (golden digests below were produced by it), encode maps nothing, and a
//! CRC mismatch found at the end of the pass fails the set as before.

use super::tests::{one_file, set_of_four};
use super::*;
use crate::comm::thread::ThreadComm;
use crate::records::FileType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

/// Seeded bytes of file `file` of member `m`; with `short_crc` the first
/// four bytes are a counter stepped until the file's CRC32 has fewer than
/// eight hex digits (written `0x%x`, so the header that records it is
/// shorter than the longest possible one: the case where the parity,
/// written before the header, must move).
fn seeded(seed: u64, m: usize, file: usize, len: usize, short_crc: bool) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((m as u64) << 20) ^ ((file as u64) << 4));
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    if short_crc && len >= 4 {
        for t in 0u32.. {
            v[..4].copy_from_slice(&t.to_le_bytes());
            if crc32fast::hash(&v) < 0x1000_0000 {
                break;
            }
        }
    }
    v
}

/// Files of member `m` in case `case`: (length, short CRC, CRC recorded).
fn layout(case: usize, m: usize) -> Vec<(usize, bool, bool)> {
    match case {
        // One file each, all CRCs of eight hex digits (odds permitting).
        0 => vec![(5000 + 1111 * m, false, true)],
        // Several files, some with short CRCs, some with none recorded,
        // an empty one, unequal members.
        1 => vec![
            (3000 + 517 * m, m % 2 == 1, m != 2),
            (0, false, true),
            (777 * (m + 1), m == 2, matches!(m, 0 | 2)),
        ],
        // Every file's CRC short.
        _ => vec![(4096 * (m + 1) + 13, true, true), (100, true, false)],
    }
}

/// Encodes `case` with `scheme` (4 members, pieces of `piece` bytes) and
/// returns a digest of everything written and returned, one line per
/// file: member, name, length, CRC32 of its bytes, and the entry's meta.
fn digest(scheme: CopyType, set_failures: usize, case: usize, piece: usize) -> String {
    let root = tempfile::tempdir().expect("tempdir");
    let out = ThreadComm::run(4, |comm| {
        let m = comm.rank();
        let dir = root.path().join(format!("m{m}"));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut mine = MemberFiles::default();
        for (i, (len, short, recorded)) in layout(case, m).into_iter().enumerate() {
            let bytes = seeded(case as u64 * 7 + 1, m, i, len, short);
            let path = dir.join(format!("f{i}"));
            std::fs::write(&path, &bytes).expect("write");
            mine.files.push(FileEntry {
                path,
                meta: Meta {
                    file: Some(format!("/prefix/ckpt.2/r{m}/f{i}")),
                    file_type: Some(FileType::Full),
                    complete: Some(true),
                    size_bytes: Some(len as u64),
                    crc32: recorded.then(|| crc32fast::hash(&bytes)),
                    ckpt: Some(2),
                    ..Meta::default()
                },
            });
        }
        let set = SetInfo {
            dataset: Dataset::new(2),
            ..set_of_four(comm, (scheme, set_failures), piece)
        };
        let enc = encode(&set, &mine, &dir, &mut |_, _, _| Ok(())).expect("encode");
        let mut lines = vec![format!("{m} app {:x?}", enc.app_crcs)];
        for f in &enc.redundancy {
            let bytes = std::fs::read(&f.path).expect("read back");
            let name = f.path.file_name().expect("name").to_string_lossy();
            lines.push(format!(
                "{m} {name} {} {:#x} size={:?} crc={:x?} type={:?} complete={:?}",
                bytes.len(),
                crc32fast::hash(&bytes),
                f.meta.size_bytes,
                f.meta.crc32,
                f.meta.file_type,
                f.meta.complete,
            ));
        }
        lines.join("\n")
    })
    .expect("no panic");
    out.join("\n")
}

/// The digests of every scheme and case, as the old implementation wrote them.
fn all_digests() -> String {
    let mut s = String::new();
    for (scheme, k) in [
        (CopyType::Partner, 0),
        (CopyType::Xor, 1),
        (CopyType::Rs, 2),
    ] {
        for case in 0..3 {
            for piece in [1000, 1 << 16] {
                s.push_str(&format!("== {scheme:?} case {case} piece {piece}\n"));
                s.push_str(&digest(scheme, k, case, piece));
                s.push('\n');
            }
        }
    }
    s
}

#[test]
fn encode_writes_the_same_bytes_as_the_implementation_that_mapped_files() {
    let got = all_digests();
    let want = include_str!("golden_encode.txt");
    if got != want {
        // For a deliberate format change: the new digests, to review.
        let _ = std::fs::write(std::env::temp_dir().join("golden_encode.new.txt"), &got);
    }
    assert_eq!(got, want);
}

/// A 4-member set with `scheme` whose members each own one file of `len`
/// seeded bytes; member `bad` (if any) records a wrong CRC32 for it.
/// Returns each member's result and its file's path.
fn encode_one_file_each(
    scheme: CopyType,
    set_failures: usize,
    len: usize,
    bad: Option<usize>,
    root: &Path,
) -> Vec<(Result<Encoded, ApplyError>, PathBuf)> {
    ThreadComm::run(4, |comm| {
        let m = comm.rank();
        let dir = root.join(format!("{scheme:?}-m{m}"));
        std::fs::create_dir_all(&dir).expect("dir");
        let bytes = seeded(11, m, 0, len, false);
        let path = dir.join("ckpt");
        std::fs::write(&path, &bytes).expect("write");
        let crc = crc32fast::hash(&bytes);
        let meta = Meta {
            file: Some(format!("/prefix/ckpt.4/r{m}")),
            file_type: Some(FileType::Full),
            complete: Some(true),
            size_bytes: Some(len as u64),
            crc32: Some(if bad == Some(m) { crc ^ 0x8000 } else { crc }),
            ckpt: Some(4),
            ..Meta::default()
        };
        let mine = one_file(path.clone(), meta);
        let set = SetInfo {
            dataset: Dataset::new(4),
            ..set_of_four(comm, (scheme, set_failures), 1 << 16)
        };
        let r = encode(&set, &mine, &dir, &mut |_, _, _| Ok(()));
        (r, path)
    })
    .expect("no panic")
}

#[test]
fn encode_maps_no_file_it_reads_or_writes() {
    // Files past MAP_MIN_BYTES were mapped whole by the implementation
    // before the single pass (its CRC pass and the ring read the mapping).
    let len = 2 * crate::storage::mapped::MAP_MIN_BYTES as usize + 12_345;
    let root = tempfile::tempdir().expect("tempdir");
    let schemes = [
        (CopyType::Single, 0),
        (CopyType::Partner, 0),
        (CopyType::Xor, 1),
        (CopyType::Rs, 2),
    ];
    for (scheme, k) in schemes {
        for (m, (r, path)) in encode_one_file_each(scheme, k, len, None, root.path())
            .into_iter()
            .enumerate()
        {
            let enc = r.unwrap_or_else(|e| panic!("{scheme:?} member {m}: {e}"));
            let bytes = std::fs::read(&path).expect("read");
            assert_eq!(enc.app_crcs, vec![crc32fast::hash(&bytes)], "{scheme:?}");
            let written = enc.redundancy.iter().map(|f| &f.path);
            for p in std::iter::once(&path).chain(written) {
                assert!(
                    !crate::storage::mapped::test_hook::was_mapped(p),
                    "{scheme:?} member {m} mapped {}",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn a_crc_mismatch_found_at_the_end_of_the_pass_fails_the_set_with_the_typed_error() {
    // Many pieces per file: the mismatch is known only after the last one.
    let len = 40 * (1 << 16) + 7;
    let root = tempfile::tempdir().expect("tempdir");
    for (scheme, k) in [
        (CopyType::Partner, 0),
        (CopyType::Xor, 1),
        (CopyType::Rs, 2),
    ] {
        let out = encode_one_file_each(scheme, k, len, Some(1), root.path());
        let bad_path = out[1].1.clone();
        let actual = crc32fast::hash(&std::fs::read(&bad_path).expect("read"));
        for (m, (r, _)) in out.into_iter().enumerate() {
            match r {
                Err(ApplyError::Crc {
                    world_rank: 1,
                    path,
                    expected,
                    actual: a,
                }) if m == 1 => {
                    assert_eq!(path, bad_path, "{scheme:?}");
                    assert_eq!((expected, a), (actual ^ 0x8000, actual), "{scheme:?}");
                }
                Err(ApplyError::Peer {
                    member: 1,
                    world_rank: 1,
                    kind: FailureKind::Crc,
                    path: Some(path),
                }) if m != 1 => assert_eq!(path, bad_path, "{scheme:?}"),
                other => panic!("{scheme:?} member {m}: {other:?}"),
            }
        }
    }
}
