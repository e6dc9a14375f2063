//! Byte surgery on real files: write a good file, damage chosen bytes on
//! disk, read it back. Every error class must come back typed, naming the
//! file and the byte offset of the damage.

use std::fs;
use std::path::{Path, PathBuf};

use scr::kvtree::file::{self, KvFileError, HEADER_LEN};
use scr::kvtree::{KvTree, UnpackError};

use crate::alloc_probe::largest_allocation;
use crate::common::{chain, file_around, guide_example, reseal};

/// A directory holding one good file, written by the library itself.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    good: Vec<u8>,
}

fn fixture(tree: &KvTree) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filemap_0.scrinfo");
    file::write(&path, tree).unwrap();
    let good = fs::read(&path).unwrap();
    Fixture {
        _dir: dir,
        path,
        good,
    }
}

/// Put `bytes` on disk at `path`, read it back, and check that the error
/// names the file and `offset`, both in `offset()` and in the message.
fn read_damaged(path: &Path, bytes: &[u8], offset: u64) -> KvFileError {
    fs::write(path, bytes).unwrap();
    let err = file::read(path).expect_err("damaged file must be rejected");
    assert_eq!(err.path(), path);
    assert_eq!(err.offset(), Some(offset), "{err}");
    let msg = err.to_string();
    let want = format!("{}: offset {offset}: ", path.display());
    assert!(
        msg.starts_with(&want),
        "message {msg:?} should start {want:?}"
    );
    err
}

#[test]
fn truncated_inside_the_header() {
    let f = fixture(&guide_example());
    for len in [0, 1, 4, 19] {
        let e = read_damaged(&f.path, &f.good[..len], len as u64);
        assert!(matches!(e, KvFileError::TooShort { .. }), "{e}");
    }
}

#[test]
fn truncated_after_the_header() {
    let f = fixture(&guide_example());
    for len in [
        HEADER_LEN,
        HEADER_LEN + 7,
        f.good.len() - 4,
        f.good.len() - 1,
    ] {
        let e = read_damaged(&f.path, &f.good[..len], 8);
        assert!(
            matches!(e, KvFileError::SizeMismatch { recorded, actual, .. }
                if recorded == f.good.len() as u64 && actual == len as u64),
            "{e}"
        );
    }
}

#[test]
fn truncated_and_resealed_is_caught_by_the_hash_decoder() {
    // A writer that lost the tail but wrote a consistent header and CRC.
    let f = fixture(&guide_example());
    let mut bytes = f.good[..f.good.len() - 9].to_vec();
    bytes.extend_from_slice(&[0; 4]);
    reseal(&mut bytes);
    let e = read_damaged(&f.path, &bytes, file_offset_of_error(&bytes));
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::Truncated { .. } | UnpackError::CountTooLarge { .. },
                ..
            }
        ),
        "{e}"
    );
}

/// Where the decoder reports the damage: used where the exact position
/// depends on the tree's layout rather than on the surgery.
fn file_offset_of_error(bytes: &[u8]) -> u64 {
    file::decode(bytes, Path::new("x"))
        .unwrap_err()
        .offset()
        .unwrap()
}

#[test]
fn wrong_magic() {
    let f = fixture(&guide_example());
    let mut bytes = f.good.clone();
    bytes[0..4].copy_from_slice(b"\x89PNG");
    let e = read_damaged(&f.path, &bytes, 0);
    assert!(
        matches!(
            e,
            KvFileError::BadMagic {
                found: 0x8950_4e47,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unknown_type_or_version() {
    let f = fixture(&guide_example());
    for (at, value) in [(4, 2u16), (6, 2u16), (4, 0), (6, 0xffff)] {
        let mut bytes = f.good.clone();
        bytes[at..at + 2].copy_from_slice(&value.to_be_bytes());
        reseal(&mut bytes);
        let e = read_damaged(&f.path, &bytes, 4);
        assert!(matches!(e, KvFileError::UnsupportedType { .. }), "{e}");
    }
}

#[test]
fn size_field_disagrees_with_the_real_size() {
    let f = fixture(&guide_example());
    let real = f.good.len() as u64;
    for recorded in [real + 1, real - 1, 0, u64::MAX] {
        let mut bytes = f.good.clone();
        bytes[8..16].copy_from_slice(&recorded.to_be_bytes());
        let e = read_damaged(&f.path, &bytes, 8);
        assert!(
            matches!(e, KvFileError::SizeMismatch { recorded: r, actual, .. }
                if r == recorded && actual == real),
            "{e}"
        );
    }
    // Bytes appended after a good file.
    let mut longer = f.good.clone();
    longer.extend_from_slice(b"junk");
    let e = read_damaged(&f.path, &longer, 8);
    assert!(matches!(e, KvFileError::SizeMismatch { .. }), "{e}");
}

#[test]
fn crc_mismatch() {
    let f = fixture(&guide_example());
    let trailer = (f.good.len() - 4) as u64;
    // A flipped data byte, and a flipped trailer byte.
    for at in [HEADER_LEN + 10, f.good.len() - 1] {
        let mut bytes = f.good.clone();
        bytes[at] ^= 0x40;
        let e = read_damaged(&f.path, &bytes, trailer);
        assert!(matches!(e, KvFileError::CrcMismatch { .. }), "{e}");
    }
}

#[test]
fn unknown_flags() {
    let f = fixture(&guide_example());
    for flags in [0x3u32, 0x2, 0x8000_0001] {
        let mut bytes = f.good.clone();
        bytes[16..20].copy_from_slice(&flags.to_be_bytes());
        reseal(&mut bytes);
        let e = read_damaged(&f.path, &bytes, 16);
        assert!(
            matches!(e, KvFileError::UnknownFlags { flags: got, .. } if got == flags),
            "{e}"
        );
    }
}

#[test]
fn crc_flag_cleared_leaves_the_trailer_as_trailing_bytes() {
    let f = fixture(&guide_example());
    let mut bytes = f.good.clone();
    bytes[19] = 0;
    let data_end = (f.good.len() - 4) as u64;
    let e = read_damaged(&f.path, &bytes, data_end);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::TrailingBytes { extra: 4, .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn element_count_larger_than_the_remaining_bytes_does_not_allocate_by_it() {
    let f = fixture(&guide_example());
    for count in [u32::MAX, 0x1000_0000, 1000] {
        let mut bytes = f.good.clone();
        bytes[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&count.to_be_bytes());
        reseal(&mut bytes);
        let (result, largest) =
            largest_allocation(|| file::decode(&bytes, Path::new("/x/filemap_0.scrinfo")));
        assert!(
            largest < 4096,
            "decoding a {}-byte file with count {count} allocated {largest} bytes at once",
            bytes.len()
        );
        assert!(
            matches!(
                result,
                Err(KvFileError::Unpack {
                    offset: 20,
                    source: UnpackError::CountTooLarge { .. },
                    ..
                })
            ),
            "{result:?}"
        );
        read_damaged(&f.path, &bytes, HEADER_LEN as u64);
    }
}

#[test]
fn key_without_nul() {
    let f = fixture(&KvTree::new());
    // One element whose key runs to the end of the data.
    let bytes = file_around(&[0, 0, 0, 1, b'R', b'A', b'N', b'K', b'!']);
    let e = read_damaged(&f.path, &bytes, HEADER_LEN as u64 + 4);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::KeyNotTerminated { offset: 4 },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn non_utf8_key() {
    let mut t = KvTree::new();
    t.set_val("NAME", "ckpt");
    let f = fixture(&t);
    let mut bytes = f.good.clone();
    // Data: count(4) "NAME\0" count(4) "ckpt\0" ...; damage the value's 'k'.
    let at = HEADER_LEN + 4 + 5 + 4 + 1;
    assert_eq!(bytes[at], b'k');
    bytes[at] = 0xff;
    reseal(&mut bytes);
    let value_key = (HEADER_LEN + 4 + 5 + 4) as u64;
    let e = read_damaged(&f.path, &bytes, value_key);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::KeyNotUtf8 { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn nesting_deeper_than_max_depth() {
    let max = scr::kvtree::MAX_DEPTH;
    let f = fixture(&chain(max));
    assert_eq!(file::read(&f.path).unwrap(), chain(max));
    let bytes = file::encode(&chain(max + 1), true);
    // Each level is a count (4) and "k\0" (2): the count past the bound
    // sits after MAX_DEPTH + 1 such levels.
    let offset = (HEADER_LEN + (max + 1) * 6) as u64;
    let e = read_damaged(&f.path, &bytes, offset);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::TooDeep { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn duplicate_key() {
    let f = fixture(&KvTree::new());
    // {RANK: {}, RANK: {}}: the second key starts at data offset 4 + 5 + 4.
    let data = [
        0, 0, 0, 2, b'R', b'A', b'N', b'K', 0, 0, 0, 0, 0, b'R', b'A', b'N', b'K', 0, 0, 0, 0, 0,
    ];
    let bytes = file_around(&data);
    let e = read_damaged(&f.path, &bytes, (HEADER_LEN + 13) as u64);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::DuplicateKey { ref key, offset: 13 },
                ..
            } if key == "RANK"
        ),
        "{e}"
    );
}

#[test]
fn trailing_bytes_after_the_hash() {
    let f = fixture(&guide_example());
    let mut bytes = f.good.clone();
    let end = bytes.len() - 4;
    bytes.splice(end..end, [0u8, 0, 0, 0]);
    reseal(&mut bytes);
    let e = read_damaged(&f.path, &bytes, end as u64);
    assert!(
        matches!(
            e,
            KvFileError::Unpack {
                source: UnpackError::TrailingBytes { extra: 4, .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn missing_file_is_not_found_and_reads_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halt.scr");
    let e = file::read(&path).unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.path(), path);
    assert!(e.to_string().contains("halt.scr"), "{e}");
    assert_eq!(file::read_or_empty(&path).unwrap(), KvTree::new());
}
