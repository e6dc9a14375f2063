//! Faults on real files, directories and processes, each checked by the
//! reader or the process that should notice it, and undone where possible.

use super::dirs::is_root;
use super::files::len_of;
use super::*;
use crate::plan::{Area, Corruption, Role, Selector, Target};
use crate::seed::Seeded;
use scr::kvtree::file::KvFileError;
use scr::kvtree::KvTree;
use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;

fn seed() -> u64 {
    let s = crate::seed::seed_from_env();
    eprintln!(
        "{}",
        crate::seed::replay_hint(s, "cargo test -p faultsim --lib inject::tests")
    );
    s
}

fn kvtree_file(dir: &Path, name: &str) -> PathBuf {
    let mut tree = KvTree::new();
    tree.set_kv("DSET", "7").set_kv("FILES", "3");
    tree.set_kv("RANK", "0").set_kv("FILE", "rank_0.ckpt");
    let path = dir.join(name);
    scr::kvtree::file::write(&path, &tree).expect("write kvtree");
    path
}

#[test]
fn a_seeded_bit_flip_in_a_kvtree_file_is_detected_and_undone() {
    let s = seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = kvtree_file(dir.path(), "filemap_0.scrinfo");
    let before = fs::read(&path).expect("read");
    let rec = flip_random_bits(&path, 1, &Seeded::new(s), "flip").expect("flip");
    let Record::BitFlips {
        bit_offsets,
        len_bytes,
        ..
    } = &rec
    else {
        panic!("seed {s}: unexpected record {rec:?}");
    };
    assert_eq!((bit_offsets.len(), *len_bytes), (1, before.len() as u64));
    let after = fs::read(&path).expect("read");
    let diff: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert_eq!(diff, [(bit_offsets[0] / 8) as usize], "seed {s}");
    assert!(
        scr::kvtree::file::read(&path).is_err(),
        "seed {s}: flip at bit {} went undetected",
        bit_offsets[0]
    );
    rec.undo().expect("undo");
    assert_eq!(fs::read(&path).expect("read"), before, "seed {s}");
    assert!(scr::kvtree::file::read(&path).is_ok());
    // The record is data the harness can report.
    let json = serde_json::to_string(&rec).expect("json");
    assert_eq!(serde_json::from_str::<Record>(&json).expect("parse"), rec);
}

#[test]
fn every_single_bit_flip_in_a_kvtree_file_is_detected() {
    // In memory (the file path is covered above): a flip anywhere,
    // header, data or CRC trailer, must make the decoder refuse.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = kvtree_file(dir.path(), "x.scr");
    let mut bytes = fs::read(&path).expect("read");
    for bit in 0..bytes.len() * 8 {
        bytes[bit / 8] ^= 1 << (bit % 8);
        assert!(
            scr::kvtree::file::decode(&bytes, &path).is_err(),
            "bit {bit} undetected"
        );
        bytes[bit / 8] ^= 1 << (bit % 8);
    }
    assert!(scr::kvtree::file::decode(&bytes, &path).is_ok());
}

#[test]
fn zeroed_header_gives_bad_magic_and_is_undone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = kvtree_file(dir.path(), "filemap.scrinfo");
    let rec = zero_kvtree_header(&path).expect("zero");
    assert!(matches!(
        scr::kvtree::file::read(&path),
        Err(KvFileError::BadMagic { found: 0, .. })
    ));
    rec.undo().expect("undo");
    assert!(scr::kvtree::file::read(&path).is_ok());
    let short = dir.path().join("short");
    fs::write(&short, b"0123456789").expect("write");
    assert!(matches!(
        zero_kvtree_header(&short),
        Err(InjectError::TooShort {
            len_bytes: 10,
            needed: 20,
            ..
        })
    ));
}

#[test]
fn truncation_and_deletion_are_detected_and_not_undoable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = kvtree_file(dir.path(), "summary.scr");
    let len = len_of(&path).expect("len");
    let rec = truncate_fraction(&path, 0.5).expect("truncate");
    assert_eq!(
        rec,
        Record::Truncated {
            path: path.clone(),
            from_bytes: len,
            to_bytes: len / 2
        }
    );
    assert!(scr::kvtree::file::read(&path).is_err());
    assert!(!rec.undoable() && matches!(rec.undo(), Err(InjectError::NotUndoable { .. })));
    assert!(matches!(
        truncate(&path, len),
        Err(InjectError::NotShorter { .. })
    ));
    assert!(matches!(
        truncate_fraction(&path, 1.0),
        Err(InjectError::Refused { .. })
    ));
    let rec = delete(&path).expect("delete");
    assert!(scr::kvtree::file::read(&path)
        .expect_err("gone")
        .is_not_found());
    assert!(!rec.undoable());
    let err = flip_bits(&path, &[0])
        .expect_err("missing file")
        .to_string();
    assert!(err.contains("summary.scr") && err.contains("open"), "{err}");
    let small = dir.path().join("small");
    fs::write(&small, b"ab").expect("write");
    let err = flip_bits(&small, &[16]).expect_err("beyond the end");
    assert!(matches!(
        err,
        InjectError::OffsetOutOfRange {
            bit_offset: 16,
            len_bytes: 2,
            ..
        }
    ));
    assert_eq!(
        fs::read(&small).expect("read"),
        b"ab",
        "nothing flipped on error"
    );
}

#[test]
fn targets_select_by_role_glob_and_dataset() {
    let s = seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for d in ["scr.dataset.1/.scr", "scr.dataset.2/.scr"] {
        fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    for f in [
        "scr.dataset.1/rank_0.ckpt",
        "scr.dataset.1/.scr/1_of_2_in_0.xor",
        "scr.dataset.2/rank_0.ckpt",
        "scr.dataset.2/rank_1.ckpt",
        "scr.dataset.2/.scr/2_of_2_in_0.xor",
    ] {
        fs::write(root.join(f), vec![7u8; 64]).expect("write");
    }
    kvtree_file(root, "filemap.scrinfo");
    let target = |select, dataset, files| Target {
        area: Area::Cache,
        node: None,
        dataset,
        select,
        files,
    };
    let rel = |v: Vec<PathBuf>| -> Vec<String> {
        v.iter()
            .map(|p| {
                p.strip_prefix(root)
                    .expect("below root")
                    .display()
                    .to_string()
            })
            .collect()
    };
    let apps = select_files(root, &target(Selector::Role(Role::AppFile), None, None));
    assert_eq!(
        rel(apps.expect("select")),
        [
            "scr.dataset.1/rank_0.ckpt",
            "scr.dataset.2/rank_0.ckpt",
            "scr.dataset.2/rank_1.ckpt"
        ]
    );
    let parity = select_files(
        root,
        &target(Selector::Role(Role::ParityFile), Some(2), None),
    );
    assert_eq!(
        rel(parity.expect("select")),
        ["scr.dataset.2/.scr/2_of_2_in_0.xor"]
    );
    let glob = select_files(
        root,
        &target(Selector::Glob("*/*.ckpt".into()), Some(2), None),
    );
    assert_eq!(rel(glob.expect("select")).len(), 2);
    // One of the three app files, picked by the seed, deterministically.
    let t = target(Selector::Role(Role::AppFile), None, Some(1));
    let how = Corruption::BitFlips {
        count: Some(3),
        offsets: None,
    };
    let recs = corrupt_target(root, &t, &how, &Seeded::new(s), "c").expect("corrupt");
    assert_eq!(recs.len(), 1, "seed {s}");
    for r in &recs {
        r.undo().expect("undo");
    }
    let again = corrupt_target(root, &t, &how, &Seeded::new(s), "c").expect("corrupt");
    assert_eq!(recs, again, "seed {s}: same seed, same files and offsets");
    // Deleting the master filemap.
    let recs = delete_master_filemap(root).expect("delete");
    assert_eq!(recs.len(), 1);
    assert!(matches!(
        delete_master_filemap(root),
        Err(InjectError::Refused { .. })
    ));
}

#[test]
fn pfs_outage_by_replacing_the_prefix_stops_root_and_is_undone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = dir.path().join("prefix");
    fs::create_dir_all(prefix.join(".scr")).expect("mkdir");
    fs::write(prefix.join(".scr/index.scr"), b"index").expect("write");
    let rec = pfs_outage(&prefix, OutageMethod::ReplaceWithFile).expect("outage");
    assert!(
        File::create(prefix.join("new.ckpt")).is_err(),
        "create below prefix"
    );
    assert!(
        fs::create_dir_all(prefix.join("scr.dataset.1")).is_err(),
        "mkdir below prefix"
    );
    assert!(
        fs::read(prefix.join(".scr/index.scr")).is_err(),
        "read below prefix"
    );
    assert!(matches!(
        pfs_outage(&prefix, OutageMethod::ReplaceWithFile),
        Err(InjectError::Refused { .. })
    ));
    rec.undo().expect("undo");
    assert_eq!(
        fs::read(prefix.join(".scr/index.scr")).expect("read"),
        b"index"
    );
    assert!(!moved_aside(&prefix).exists());
}

#[test]
fn chmod_outage_sets_and_restores_the_mode_and_root_ignores_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = dir.path().join("prefix");
    fs::create_dir(&prefix).expect("mkdir");
    fs::set_permissions(&prefix, fs::Permissions::from_mode(0o750)).expect("chmod");
    let rec = pfs_outage(&prefix, OutageMethod::Chmod).expect("outage");
    let mode = fs::metadata(&prefix).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o500);
    let write = File::create(prefix.join("f"));
    // Why `auto` never picks chmod as root: the write still succeeds.
    assert_eq!(
        write.is_ok(),
        is_root(),
        "root writes through mode 0500, others do not"
    );
    rec.undo().expect("undo");
    let mode = fs::metadata(&prefix).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[test]
fn node_tree_removed_or_unreadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = dir.path().join("n1");
    fs::create_dir_all(node.join("dev/shm/u/scr.1")).expect("mkdir");
    fs::write(node.join("dev/shm/u/scr.1/filemap.scrinfo"), b"x").expect("write");
    let rec = make_node_unreadable(&node, OutageMethod::Auto).expect("unreadable");
    if is_root() {
        assert!(fs::read_dir(&node).is_err(), "node unreadable for root");
    }
    rec.undo().expect("undo");
    assert!(node.join("dev/shm/u/scr.1/filemap.scrinfo").exists());
    assert_eq!(
        remove_dir_tree(&node).expect("remove"),
        Record::DirRemoved { path: node.clone() }
    );
    assert!(!node.exists());
    assert!(matches!(
        remove_dir_tree(&node),
        Err(InjectError::Io { .. })
    ));
}

#[test]
fn cache_fill_is_bounded_and_fills_a_small_tmpfs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The temp file system is far too big to fill within 1 MiB.
    let err = fill_dir(dir.path(), 0, 1 << 20).expect_err("bounded");
    assert!(matches!(err, InjectError::FillTooLarge { .. }), "{err}");
    let cache = dir.path().join("cache");
    fs::create_dir(&cache).expect("mkdir");
    let mounted = match mount_tmpfs(&cache, 4 << 20) {
        Ok(rec) => rec,
        Err(e) => {
            // Only root (CAP_SYS_ADMIN) can mount; the bound was checked above.
            eprintln!("tmpfs part skipped: {e}");
            return;
        }
    };
    let filled = fill_dir(&cache, 64 << 10, 8 << 20);
    let result = filled.as_ref().map(|r| r.clone());
    let free_now = free_bytes(&cache);
    let write_big = fs::write(cache.join("ckpt"), vec![1u8; 1 << 20]);
    if let Ok(rec) = &result {
        rec.undo().expect("remove filler");
    }
    // Once (2026-11-29, a fresh-clone ci/test) this write met ENOSPC right
    // after the filler's removal, never reproduced in 30 runs alone: the
    // space is given a bounded moment to come back, and a failure says
    // how much the file system reported free meanwhile.
    let mut write_after = fs::write(cache.join("ckpt"), vec![1u8; 1 << 20]);
    let mut free_seen = Vec::new();
    for _ in 0..20 {
        if !matches!(&write_after, Err(e) if e.raw_os_error() == Some(libc::ENOSPC)) {
            break;
        }
        free_seen.push(free_bytes(&cache).ok());
        std::thread::sleep(std::time::Duration::from_millis(50));
        write_after = fs::write(cache.join("ckpt"), vec![1u8; 1 << 20]);
    }
    mounted.undo().expect("unmount");
    let Ok(Record::Filled {
        bytes,
        free_after_bytes,
        ..
    }) = result
    else {
        panic!("fill failed: {result:?}");
    };
    assert!(bytes > 3 << 20, "filled {bytes} bytes");
    assert!(free_after_bytes <= 64 << 10, "{free_after_bytes} free");
    assert!(free_now.expect("statvfs") <= 64 << 10);
    let e = write_big.expect_err("a 1 MiB checkpoint no longer fits");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    if let Err(e) = write_after {
        panic!("a 1 MiB checkpoint fits again after undo: {e}; free bytes seen while retrying: {free_seen:?}");
    }
}

#[test]
fn kill_a_child_a_group_and_a_node() {
    let mut child = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let rec = kill_pid(child.id()).expect("kill");
    assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
    assert!(!rec.undoable());

    let mut group = Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30 & wait"])
        .process_group(0)
        .spawn()
        .expect("spawn group");
    let pgid = group.id();
    std::thread::sleep(std::time::Duration::from_millis(100));
    kill_group(pgid).expect("kill group");
    assert_eq!(group.wait().expect("wait").signal(), Some(libc::SIGKILL));

    let node = format!("faultsim-test-{}", std::process::id());
    let spawn = |n: &str| {
        Command::new("sleep")
            .arg("30")
            .env(scr::storage::dirs::ENV_NODE_NAME, n)
            .spawn()
            .expect("spawn")
    };
    let (mut a, mut b, mut other) = (spawn(&node), spawn(&node), spawn("elsewhere-node"));
    let me = std::process::id();
    let mut want = vec![a.id() as i32, b.id() as i32];
    want.sort_unstable();
    // A child's /proc/<pid>/environ shows its own variables only once it
    // has exec'd: wait (bounded) for both to get there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while node_processes(&node, Some(me)) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(node_processes(&node, Some(me)), want);
    let rec = kill_node(&node, Some(me)).expect("kill node");
    assert_eq!(
        rec,
        Record::Signalled {
            pids: want,
            signal: libc::SIGKILL
        }
    );
    assert_eq!(a.wait().expect("wait").signal(), Some(libc::SIGKILL));
    assert_eq!(b.wait().expect("wait").signal(), Some(libc::SIGKILL));
    assert_eq!(
        other.try_wait().expect("try_wait"),
        None,
        "another node lives"
    );
    other.kill().expect("cleanup");
    other.wait().expect("wait");
    assert!(matches!(kill_pid(1), Err(InjectError::Refused { .. })));
}

/// What a fault did reaches reports and the run loop's text output: it
/// reads as words, never as the Debug form of the record.
#[test]
fn records_display_as_words_not_debug_forms() {
    let cases = [
        (
            Record::DirRemoved {
                path: PathBuf::from("/sim/n1"),
            },
            "removed directory /sim/n1",
        ),
        (
            Record::Signalled {
                pids: vec![-4242, 17],
                signal: libc::SIGKILL,
            },
            "sent SIGKILL to process group 4242, pid 17",
        ),
        (
            Record::BitFlips {
                path: PathBuf::from("/sim/n0/f"),
                bit_offsets: vec![3, 9],
                len_bytes: 64,
            },
            "flipped 2 bit(s) of /sim/n0/f (64 bytes) at bit offset(s) 3, 9",
        ),
        (
            Record::Truncated {
                path: PathBuf::from("/p/x"),
                from_bytes: 10,
                to_bytes: 4,
            },
            "truncated /p/x from 10 to 4 bytes",
        ),
    ];
    for (rec, want) in cases {
        let text = rec.to_string();
        assert_eq!(text, want);
        assert!(!text.contains('{') && !text.contains('['), "{text}");
    }
}
