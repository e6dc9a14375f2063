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
        buf_bytes: 0,
    };
    // The read-back computes the source CRC even without SCR_CRC_ON_FLUSH.
    let copied = copy_all(&list, checks, None, None, 1, || Ok(())).unwrap();
    let want = crc32fast::hash(&fs::read(&list[0].src).unwrap());
    assert_eq!(copied[0].crc, want);
    // A copy whose bytes differ from the source's CRC is refused.
    let dst = &list[0].dst;
    let mut bytes = fs::read(dst).unwrap();
    bytes[123] ^= 4;
    fs::write(dst, &bytes).unwrap();
    let mut buf = vec![0u8; 4096];
    let e = read_back(&list[0], want, &mut buf, None).unwrap_err();
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
        buf_bytes: 0,
    };
    let copied = copy_all(&list, checks, None, None, 1, || Ok(())).unwrap();
    assert_eq!(copied[0].attrs.map(|x| x.mtime), Some(a.mtime));
    let got = storage_attrs::read(&list[0].dst).unwrap();
    assert_eq!(got.mode & 0o7777, 0o600);
    assert_eq!((got.mtime, got.atime), (a.mtime, a.atime));
    // Without it the copy gets this process's defaults.
    for it in &list {
        fs::remove_file(&it.dst).unwrap();
    }
    let plain = copy_all(&list, CopyChecks::default(), None, None, 1, || Ok(())).unwrap();
    assert!(plain[0].attrs.is_none());
    let m = fs::metadata(&list[0].dst).unwrap();
    assert_ne!(storage_attrs::read(&list[0].dst).unwrap().mtime, a.mtime);
    assert_ne!(m.permissions().mode() & 0o7777, 0o600);
}

/// A fetch that records its source's attributes (SCR_COPY_METADATA, a map
/// without them) reads them from the file it copies, opened through
/// handles below the prefix: a directory swapped for a link out of the
/// prefix meanwhile gives a refusal, never the attributes of the file the
/// link reaches. (Read by name with `stat` before the open, as until
/// 2026-11-28, some rounds gave the copy the planted file's times.)
#[test]
fn a_fetch_takes_its_sources_attributes_never_those_behind_a_link_swapped_in() {
    let t = tempfile::tempdir().unwrap();
    let (base, out) = crate::beneath::swap::prefix_with_a_link_out(t.path());
    let src = base.join("meta/rank_0.ckpt");
    fs::write(&src, b"the checkpoint").unwrap();
    fs::write(out.join("rank_0.ckpt"), b"the checkpoint").unwrap();
    let stamp = |p: &Path, secs| {
        let mut a = storage_attrs::read(p).unwrap();
        a.mtime = (secs, 0);
        storage_attrs::apply(p, &a).unwrap();
    };
    stamp(&src, 1_000_000_000);
    stamp(&out.join("rank_0.ckpt"), 1_500_000_000);
    let cache = t.path().join("cache");
    fs::create_dir(&cache).unwrap();
    let item = CopyItem {
        src: src.clone(),
        dst: cache.join("rank_0.ckpt"),
        rel: "rank_0.ckpt".into(),
        size: None,
        crc: None,
        attrs: None,
        packing: None,
        within: Some(base.clone()),
    };
    let checks = CopyChecks {
        attrs: true,
        ..CopyChecks::default()
    };
    let mut buf = Vec::new();
    let mut planted = 0u32;
    let (copied, refused) = crate::beneath::swap::race_with_swapper(&base, |_| {
        match copy_file(&item, checks, None, None, &mut buf) {
            Ok(c) => {
                if c.attrs.map(|a| a.mtime.0) != Some(1_000_000_000) {
                    planted += 1;
                }
                true
            }
            Err(_) => false,
        }
    });
    assert!(
        copied > 0 && refused > 0,
        "{copied} copied, {refused} refused"
    );
    assert_eq!(
        planted, 0,
        "{planted} of {copied} copies took the planted file's times"
    );
}

/// Read system calls this thread has made (`syscr` of
/// /proc/thread-self/io): other tests' threads do not count.
fn reads_of_this_thread() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// SCR_FILE_BUF_SIZE sets how much a copy reads at a time: a 1 MiB file
/// copied through 64 KiB takes at least 16 reads, through the default
/// (4 MiB) a handful; the bytes and the CRC32 are the same.
#[test]
fn file_buf_size_sets_the_bytes_each_read_of_a_copy_takes() {
    let tmp = tempfile::tempdir().unwrap();
    let list = items(tmp.path(), &[1 << 20]);
    let want = crc32fast::hash(&fs::read(&list[0].src).unwrap());
    let reads = |buf_bytes: usize| {
        let checks = CopyChecks {
            crc: true,
            buf_bytes,
            ..CopyChecks::default()
        };
        // One thread per copy, so the count is the copy's alone.
        let list = list.clone();
        std::thread::spawn(move || {
            let before = reads_of_this_thread();
            let copied = copy_all(&list, checks, None, None, 1, || Ok(())).unwrap();
            (
                reads_of_this_thread() - before,
                copied[0].crc,
                copied[0].size,
            )
        })
        .join()
        .unwrap()
    };
    let (small, crc_small, size_small) = reads(64 << 10);
    let (default, crc_default, size_default) = reads(0);
    assert!(small >= 16, "64 KiB buffer: {small} reads");
    assert!(default < 8, "4 MiB buffer: {default} reads");
    assert_eq!((crc_small, crc_default), (want, want));
    assert_eq!((size_small, size_default), (1 << 20, 1 << 20));
    // The setting reaches the copies through the checks of a flush.
    use crate::config::{Config, LoadOptions, MapEnv, Settings};
    let settings = |vars: &[(&str, &str)]| {
        let env = MapEnv::new(vars.iter().copied()).with_cwd("/nonexistent/run");
        Settings::from_config(&Config::load(&env, &LoadOptions::default()).unwrap()).unwrap()
    };
    let set = settings(&[("SCR_FILE_BUF_SIZE", "64KB")]);
    assert_eq!(CopyChecks::of(&set, true).buf_len(), 64 << 10);
    assert_eq!(CopyChecks::of(&settings(&[]), true).buf_len(), CHUNK);
}

/// An `after_file` that holds each finished copy until `n` copies have
/// finished, or fails after `wait`: it passes only when `n` copies ran
/// at the same time.
fn rendezvous(n: usize, wait: Duration) -> impl Fn() -> Result<(), CopyError> + Sync {
    let state = (std::sync::Mutex::new(0usize), std::sync::Condvar::new());
    move || {
        let (count, cv) = &state;
        let mut c = count.lock().unwrap();
        *c += 1;
        cv.notify_all();
        let (c, timeout) = cv.wait_timeout_while(c, wait, |c| *c < n).unwrap();
        if timeout.timed_out() && *c < n {
            return Err(CopyError::Injected(std::io::Error::other(format!(
                "only {c} of {n} copies in flight"
            ))));
        }
        Ok(())
    }
}

/// SCR_FLUSH_TYPE=PTHREAD: a rank's files are copied on several threads
/// at once (each copy waits at the rendezvous until all three finished,
/// which one thread can never do), every byte lands, and the results
/// come back in item order.
#[test]
fn pthread_copies_a_ranks_files_at_the_same_time() {
    let tmp = tempfile::tempdir().unwrap();
    let list = items(tmp.path(), &[70_000, 10, 300_000]);
    let checks = CopyChecks {
        crc: true,
        ..CopyChecks::default()
    };
    let copied = copy_all(
        &list,
        checks,
        None,
        None,
        3,
        rendezvous(3, Duration::from_secs(30)),
    )
    .unwrap();
    for (it, c) in list.iter().zip(&copied) {
        let want = fs::read(&it.src).unwrap();
        assert_eq!(fs::read(&it.dst).unwrap(), want, "{}", it.rel);
        assert_eq!(
            (c.rel.as_str(), c.size),
            (it.rel.as_str(), want.len() as u64)
        );
        assert_eq!(c.crc, crc32fast::hash(&want));
    }
    // One thread (SYNC) copies one file at a time: the first copy waits
    // alone and gives up.
    for it in &list {
        fs::remove_file(&it.dst).unwrap();
    }
    let e = copy_all(
        &list,
        checks,
        None,
        None,
        1,
        rendezvous(3, Duration::from_millis(200)),
    )
    .unwrap_err();
    assert!(e.to_string().contains("only 1 of 3"), "{e}");
}

/// A copy that fails on one of the threads fails the whole list with
/// that item's error, naming its file; no item starts after it.
#[test]
fn a_failed_pthread_copy_fails_the_list_naming_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut list = items(tmp.path(), &[1000, 2000, 3000, 4000]);
    // The recorded size of item 1 is wrong: the copy is refused.
    list[1].size = Some(1);
    let e = copy_all(&list, CopyChecks::default(), None, None, 2, || Ok(())).unwrap_err();
    match &e {
        CopyError::Size { path, copied, .. } => {
            assert_eq!((path, *copied), (&list[1].src, 2000), "{e}")
        }
        other => panic!("not the size error: {other}"),
    }
    // More threads than files is as many threads as files.
    list[1].size = Some(2000);
    let copied = copy_all(&list, CopyChecks::default(), None, None, 64, || Ok(())).unwrap();
    assert_eq!(copied.len(), 4);
}
