//! What SCR_CRC_ON_COPY and SCR_COPY_METADATA add to a copy between cache
//! and prefix.

use std::os::unix::fs::PermissionsExt;

use super::throttle_tests::items;
use super::*;

#[test]
fn crc_on_copy_reads_the_copy_back_and_catches_damage_there() {
    let tmp = tempfile::tempdir().unwrap();
    let list = items(tmp.path(), &[70_000]);
    let checks = CopyChecks {
        crc: false,
        read_back: true,
        attrs: false,
    };
    // The read-back computes the source CRC even without SCR_CRC_ON_FLUSH.
    let copied = copy_all(&list, checks, None, None, || Ok(())).unwrap();
    let want = crc32fast::hash(&fs::read(&list[0].src).unwrap());
    assert_eq!(copied[0].crc, want);
    // A copy whose bytes differ from the source's CRC is refused.
    let dst = &list[0].dst;
    let mut bytes = fs::read(dst).unwrap();
    bytes[123] ^= 4;
    fs::write(dst, &bytes).unwrap();
    let mut buf = vec![0u8; 4096];
    let e = read_back(dst, want, &mut buf, None).unwrap_err();
    assert!(
        matches!(e, CopyError::ReadBack { got, .. } if got != want),
        "{e}"
    );
    assert!(e.to_string().contains("SCR_CRC_ON_COPY"), "{e}");
}

#[test]
fn copy_metadata_gives_the_copy_the_sources_mode_and_times() {
    let tmp = tempfile::tempdir().unwrap();
    let list = items(tmp.path(), &[10, 20]);
    let mut a = storage_attrs::read(&list[0].src).unwrap();
    a.mode = (a.mode & !0o7777) | 0o600;
    a.mtime = (1_234_567_890, 42);
    a.atime = (1_234_567_891, 0);
    storage_attrs::apply(&list[0].src, &a).unwrap();
    let checks = CopyChecks {
        crc: true,
        read_back: false,
        attrs: true,
    };
    let copied = copy_all(&list, checks, None, None, || Ok(())).unwrap();
    assert_eq!(copied[0].attrs.map(|x| x.mtime), Some(a.mtime));
    let got = storage_attrs::read(&list[0].dst).unwrap();
    assert_eq!(got.mode & 0o7777, 0o600);
    assert_eq!((got.mtime, got.atime), (a.mtime, a.atime));
    // Without it the copy gets this process's defaults.
    for it in &list {
        fs::remove_file(&it.dst).unwrap();
    }
    let plain = copy_all(&list, CopyChecks::default(), None, None, || Ok(())).unwrap();
    assert!(plain[0].attrs.is_none());
    let m = fs::metadata(&list[0].dst).unwrap();
    assert_ne!(storage_attrs::read(&list[0].dst).unwrap().mtime, a.mtime);
    assert_ne!(m.permissions().mode() & 0o7777, 0o600);
}
